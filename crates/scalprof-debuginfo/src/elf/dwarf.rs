//! The DWARF side of an ELF file: its compressed sections checked before any is inflated,
//! and a loader over its bytes, in a parser child or (without separation) here.

use std::path::Path;

use object::{Object, ObjectSection};

use super::read_all;

/// A compressed debug section inflates to at most this many bytes...
const MAX_INFLATED: u64 = 512 << 20;
/// ...and, above [`INFLATE_FREE`], at most this many times its compressed size (DWARF
/// compresses 3–10 times; a bomb of zeros, thousands).
const MAX_RATIO: u64 = 100;
const INFLATE_FREE: u64 = 16 << 20;

/// Refuses a file whose compressed sections would inflate past the caps, before any is
/// inflated: a 117 KB binary can hold a `.debug_str` of 3 GiB of zeros.
pub(crate) fn check_compressed_sections(data: &[u8]) -> Result<(), String> {
    let obj = object::File::parse(data).map_err(|e| e.to_string())?;
    let mut total = 0u64;
    for s in obj.sections() {
        let Ok(r) = s.compressed_file_range() else {
            continue;
        };
        if r.format == object::CompressionFormat::None {
            continue;
        }
        let name = s.name().unwrap_or("?");
        let (packed, inflated) = (r.compressed_size, r.uncompressed_size);
        if inflated > MAX_INFLATED
            || (inflated > INFLATE_FREE && inflated / packed.max(1) > MAX_RATIO)
        {
            return Err(format!(
                "its compressed section {name} would inflate from {packed} bytes to {inflated} \
                 (over the cap: {} MiB, or {MAX_RATIO} times): its DWARF is not read",
                MAX_INFLATED >> 20
            ));
        }
        total = total.saturating_add(inflated);
    }
    if total > crate::sandbox::MEMORY_CAP / 2 {
        return Err(format!(
            "its compressed sections would inflate to {} MiB: its DWARF is not read",
            total >> 20
        ));
    }
    Ok(())
}

/// A file's DWARF: where its answers come from, and the answers given so far.
pub(super) struct Dwarf {
    source: Source,
    /// Frames by address, at most [`MAX_REMEMBERED`] of them: a profile names the same
    /// return addresses in every process and repeat of a run, and a parser child answers
    /// each over a pipe (two context switches), which cost a traced sweep of a channel
    /// funnel a minute for 130 000 repeated questions.
    answers: std::collections::HashMap<u64, Vec<String>>,
}

/// At most this many addresses' frames are kept per file (a few MiB at most).
const MAX_REMEMBERED: usize = 1 << 16;

enum Source {
    Child(crate::sandbox::DwarfServer),
    Local(Box<addr2line::Loader>),
    Failed(String),
}

impl Dwarf {
    pub(super) fn open(path: &Path) -> Dwarf {
        let opened = match crate::sandbox::parser() {
            Some(exe) => crate::sandbox::DwarfServer::start(exe, path).map(Source::Child),
            None => crate::open_regular(path)
                .map_err(|e| format!("cannot read it: {e}"))
                .and_then(read_all)
                .and_then(|data| load_dwarf(&data))
                .map(|l| Source::Local(Box::new(l))),
        };
        Dwarf {
            source: opened.unwrap_or_else(Source::Failed),
            answers: std::collections::HashMap::new(),
        }
    }

    /// Why it could not be read, if it could not.
    pub(super) fn failure(&self) -> Option<&str> {
        match &self.source {
            Source::Failed(why) => Some(why),
            _ => None,
        }
    }

    pub(super) fn frames(&mut self, svma: u64) -> Vec<String> {
        if let Some(names) = self.answers.get(&svma) {
            return names.clone();
        }
        let names = match &mut self.source {
            Source::Child(server) => match server.frames(svma) {
                Ok(names) => names,
                Err(why) => {
                    self.source = Source::Failed(why);
                    return Vec::new();
                }
            },
            Source::Local(loader) => {
                let mut names = Vec::new();
                if let Ok(mut frames) = loader.find_frames(svma) {
                    while let Ok(Some(f)) = frames.next() {
                        if let Some(func) = f.function {
                            if let Ok(name) = func.demangle() {
                                names.push(crate::sandbox::cut_name(&name).into_owned());
                            }
                        }
                    }
                }
                names
            }
            Source::Failed(_) => return Vec::new(),
        };
        if self.answers.len() < MAX_REMEMBERED {
            self.answers.insert(svma, names.clone());
        }
        names
    }
}

/// A DWARF loader over `data`, its compressed sections checked first. The loader opens a
/// path: the bytes go to a memory file of this process's own (a descriptor handed over by
/// root cannot be reopened by `nobody`), which no one else can truncate.
pub(crate) fn load_dwarf(data: &[u8]) -> Result<addr2line::Loader, String> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    check_compressed_sections(data)?;
    let mem = memfd().map_err(|e| format!("memfd: {e}"))?;
    (&mem).write_all(data).map_err(|e| e.to_string())?;
    // The loader opens and maps the memory file itself.
    addr2line::Loader::new(format!("/proc/self/fd/{}", mem.as_raw_fd())).map_err(|e| e.to_string())
}

fn memfd() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create reads a C string; the descriptor it returns is owned here.
    let fd = unsafe { libc::memfd_create(c"scalprof-dwarf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function of this test binary that its DWARF names, by an unmangled symbol.
    #[no_mangle]
    #[inline(never)]
    extern "C" fn scalprof_dwarf_memo_probe() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn an_address_is_asked_once_and_its_frames_kept_up_to_the_cap() {
        let exe = std::env::current_exe().unwrap();
        let elf = crate::SymbolCache::default()
            .get(&exe)
            .expect("the test binary is an ELF file");
        assert_eq!(scalprof_dwarf_memo_probe(), 7);
        let main = elf
            .symbol_address("scalprof_dwarf_memo_probe")
            .expect("the probe has a symbol");
        let mut dwarf = Dwarf::open(&exe);
        assert_eq!(dwarf.failure(), None);
        let frames = dwarf.frames(main);
        assert!(
            frames
                .iter()
                .any(|f| f.contains("scalprof_dwarf_memo_probe")),
            "{frames:?}"
        );
        assert_eq!(dwarf.answers.len(), 1);
        // The second time from what it kept: the same frames, nothing asked again.
        dwarf.source = Source::Failed("not asked again".into());
        assert_eq!(dwarf.frames(main), frames);
        // Past the cap an answer is given but not kept.
        for a in 0..MAX_REMEMBERED as u64 {
            dwarf.answers.entry((a + 1) << 32).or_default();
        }
        dwarf.source = Source::Failed("full".into());
        assert_eq!(dwarf.frames(7), Vec::<String>::new());
        assert!(!dwarf.answers.contains_key(&7));
    }
}
