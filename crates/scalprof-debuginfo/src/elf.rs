//! One ELF file: function symbols, DWARF frames, load segments and unwind sections.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::DebugInfoError;

/// A function symbol, by stated virtual address (SVMA).
#[derive(Clone, Debug, PartialEq)]
struct Symbol {
    start: u64,
    end: u64,
    name: String,
}

/// A PT_LOAD segment.
#[derive(Clone, Copy, Debug)]
struct Segment {
    file_offset: u64,
    file_size: u64,
    svma: u64,
}

/// Section bytes an unwinder needs, with their stated address ranges.
#[derive(Clone, Debug, Default)]
pub struct UnwindSections {
    pub text: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    pub eh_frame: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    pub eh_frame_hdr: Option<(std::ops::Range<u64>, Arc<[u8]>)>,
    pub got: Option<std::ops::Range<u64>>,
    pub debug_frame: Option<Arc<[u8]>>,
}

pub struct ElfInfo {
    pub path: PathBuf,
    symbols: Vec<Symbol>,
    /// Data objects (variables), for naming addresses such as a futex in .bss.
    objects: Vec<Symbol>,
    segments: Vec<Segment>,
    unwind: UnwindSections,
    /// Where its DWARF is (the file itself or its separate debug file).
    dwarf_path: Option<PathBuf>,
    /// That DWARF, opened at the first lookup: a loader reads (and decompresses) every
    /// debug section at once, and most files a profile maps get no sample. Shared by the
    /// threads that symbolize one profile; a lookup holds the lock.
    dwarf: std::sync::OnceLock<Option<std::sync::Mutex<addr2line::Loader>>>,
    /// Whether the symbols come from `.symtab` (false: only exported `.dynsym`).
    pub has_symtab: bool,
    /// Whether it has DWARF to read (its own or a separate debug file's).
    pub has_dwarf: bool,
    pub build_id: Option<Vec<u8>>,
}

impl std::fmt::Debug for ElfInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfInfo")
            .field("path", &self.path)
            .field("symbols", &self.symbols.len())
            .field("has_symtab", &self.has_symtab)
            .field("has_dwarf", &self.has_dwarf)
            .finish()
    }
}

fn collect_symbols<'a>(syms: impl Iterator<Item = object::Symbol<'a, 'a>>) -> Vec<Symbol> {
    collect_kind(syms, SymbolKind::Text)
}

fn collect_kind<'a>(
    syms: impl Iterator<Item = object::Symbol<'a, 'a>>,
    kind: SymbolKind,
) -> Vec<Symbol> {
    // An undefined symbol can carry an address too: in an executable that takes a shared
    // library function's address (pigz and `malloc`), `.dynsym` gives the import its PLT
    // slot's address. Taken for a function, it named all the code after it `malloc`.
    syms.filter(|s| s.kind() == kind && s.address() != 0 && !s.is_undefined())
        .filter_map(|s| {
            // Versioned names from a symtab ("pthread_mutex_lock@@GLIBC_2.2.5") lose the
            // version: people grep for the plain name.
            let name = s.name().ok()?.split('@').next()?;
            (!name.is_empty()).then(|| Symbol {
                start: s.address(),
                end: s.address() + s.size(),
                name: name.to_string(),
            })
        })
        .collect()
}

impl ElfInfo {
    pub fn open(path: &Path) -> Result<ElfInfo, DebugInfoError> {
        let file = crate::open_regular(path).map_err(|source| DebugInfoError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        // SAFETY: a shared read-only mapping. Changed bytes give wrong symbols at worst (the
        // parser checks every offset); truncating the file while it is mapped would raise
        // SIGBUS on the lost pages. Binaries are mapped right after the workload ran; a
        // running executable cannot be written (ETXTBSY), and package upgrades replace
        // files by rename, which leaves this mapping on the old, intact inode.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|source| DebugInfoError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let obj = object::File::parse(&*map).map_err(|e| DebugInfoError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let build_id = obj.build_id().ok().flatten().map(|b| b.to_vec());
        let debug_file = build_id.as_deref().and_then(separate_debug_file);

        let mut symbols = collect_symbols(obj.symbols());
        let mut objects = collect_kind(obj.symbols(), SymbolKind::Data);
        let mut has_symtab = !symbols.is_empty();
        if let Some(dbg) = &debug_file {
            if let Ok(f) = std::fs::read(dbg) {
                if let Ok(o) = object::File::parse(&*f) {
                    let s = collect_symbols(o.symbols());
                    if !s.is_empty() {
                        symbols = s;
                        objects = collect_kind(o.symbols(), SymbolKind::Data);
                        has_symtab = true;
                    }
                }
            }
        }
        if objects.is_empty() {
            objects = collect_kind(obj.dynamic_symbols(), SymbolKind::Data);
        }
        objects.sort_by_key(|o| o.start);
        if symbols.is_empty() {
            symbols = collect_symbols(obj.dynamic_symbols());
        }
        // At one address (aliases like __pthread_mutex_lock / pthread_mutex_lock), keep
        // the name a developer would grep for: fewest leading underscores, then shortest.
        let underscores = |s: &Symbol| s.name.len() - s.name.trim_start_matches('_').len();
        symbols.sort_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.end.cmp(&a.end))
                .then(underscores(a).cmp(&underscores(b)))
                .then(a.name.len().cmp(&b.name.len()))
        });
        symbols.dedup_by(|b, a| a.start == b.start);

        let segments = obj
            .segments()
            .map(|s| {
                let (file_offset, file_size) = s.file_range();
                Segment {
                    file_offset,
                    file_size,
                    svma: s.address(),
                }
            })
            .collect();

        let section = |name: &str| -> Option<(std::ops::Range<u64>, Arc<[u8]>)> {
            let s = obj.section_by_name(name)?;
            let data = s.data().ok()?;
            Some((s.address()..s.address() + s.size(), Arc::from(data)))
        };
        let unwind = UnwindSections {
            text: section(".text"),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            got: obj
                .section_by_name(".got")
                .map(|s| s.address()..s.address() + s.size()),
            debug_frame: section(".debug_frame").map(|s| s.1),
        };

        let has_own_dwarf = obj.section_by_name(".debug_info").is_some();
        let dwarf_path = if has_own_dwarf {
            Some(path.to_path_buf())
        } else {
            debug_file.clone()
        };
        Ok(ElfInfo {
            path: path.to_path_buf(),
            symbols,
            objects,
            segments,
            unwind,
            has_dwarf: dwarf_path.is_some(),
            dwarf_path,
            dwarf: std::sync::OnceLock::new(),
            has_symtab,
            build_id,
        })
    }

    /// The stated address of a file offset (through the PT_LOAD segment containing it).
    pub fn file_offset_to_svma(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| offset >= s.file_offset && offset - s.file_offset < s.file_size.max(1))
            .map(|s| (offset - s.file_offset).wrapping_add(s.svma))
    }

    /// The enclosing function symbol of a stated address.
    pub fn symbol(&self, svma: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.start <= svma);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        // Zero-sized symbols (hand-written assembly) cover up to the next symbol.
        let within = svma < s.end
            || (s.end == s.start && self.symbols.get(i).is_none_or(|n| svma < n.start));
        within.then_some(s.name.as_str())
    }

    /// The start and end of the function symbol containing a stated address.
    pub fn symbol_range(&self, svma: u64) -> Option<(u64, u64)> {
        let i = self.symbols.partition_point(|s| s.start <= svma);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        (svma < s.end).then_some((s.start, s.end))
    }

    /// The data object (variable) containing a stated address, demangled, and the offset
    /// into it.
    pub fn object(&self, svma: u64) -> Option<(Cow<'_, str>, u64)> {
        let i = self.objects.partition_point(|s| s.start <= svma);
        let s = self.objects.get(i.checked_sub(1)?)?;
        (svma < s.end.max(s.start + 1)).then(|| (demangle(&s.name), svma - s.start))
    }

    /// The stated address of the start of the first loadable segment with file offset 0
    /// (the image base: the load bias of a mapping is `start − base`).
    pub fn image_base(&self) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| s.file_offset == 0)
            .map(|s| s.svma)
    }

    /// The function names at a stated address, innermost first: inlined functions from
    /// DWARF, then the enclosing function; the symbol table when there is no DWARF.
    pub fn frames(&self, svma: u64) -> Vec<String> {
        let mut names = Vec::new();
        let dwarf = self.dwarf.get_or_init(|| {
            self.dwarf_path
                .as_ref()
                .and_then(|p| addr2line::Loader::new(p).ok())
                .map(std::sync::Mutex::new)
        });
        if let Some(dwarf) = dwarf {
            let dwarf = dwarf.lock().unwrap_or_else(|e| e.into_inner());
            if let Ok(mut frames) = dwarf.find_frames(svma) {
                while let Ok(Some(f)) = frames.next() {
                    if let Some(func) = f.function {
                        if let Ok(name) = func.demangle() {
                            names.push(name.into_owned());
                        }
                    }
                }
            };
        }
        if names.is_empty() {
            if let Some(s) = self.symbol(svma) {
                names.push(demangle(s).into_owned());
            }
        }
        names
    }

    pub fn unwind_sections(&self) -> &UnwindSections {
        &self.unwind
    }

    /// The address of a function symbol by name (tests and diagnostics).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.symbols
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.start)
    }
}

/// A symbol-table name as a developer reads it: C++ (`_Z…`) and Rust (`_ZN…17h…E`, `_R…`)
/// names demangled (Rust without its hash), as perf, samply and inferno show them; other
/// names unchanged. Done at lookup, not at load: a large C++ binary has 10⁵ symbols and a
/// profile touches a few hundred.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if name.starts_with("_Z") || name.starts_with("_R") {
        addr2line::demangle_auto(Cow::Borrowed(name), None)
    } else {
        Cow::Borrowed(name)
    }
}

/// Where distributions put separate debug info (Debian's -dbgsym, Fedora's -debuginfo).
pub(crate) const DEBUG_ROOT: &str = "/usr/lib/debug";

/// `/usr/lib/debug/.build-id/ab/cdef….debug`, where distributions put separate debug info.
pub(crate) fn separate_debug_file(build_id: &[u8]) -> Option<PathBuf> {
    debug_file_under(Path::new(DEBUG_ROOT), build_id)
}

/// `<root>/.build-id/ab/cdef….debug`, if it exists.
pub(crate) fn debug_file_under(root: &Path, build_id: &[u8]) -> Option<PathBuf> {
    if build_id.len() < 2 {
        return None;
    }
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let p = root
        .join(".build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]));
    p.exists().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libc_path() -> Option<PathBuf> {
        [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    }

    #[test]
    fn libc_exports_resolve_through_dynsym() {
        let Some(path) = libc_path() else {
            eprintln!("skipped: no libc.so.6 at the usual paths");
            return;
        };
        let elf = ElfInfo::open(&path).unwrap();
        let addr = elf.symbol_address("pthread_mutex_lock").expect("exported");
        assert_eq!(elf.symbol(addr + 1), Some("pthread_mutex_lock"));
        // With libc6-dbg installed DWARF names the internal alias (___pthread_mutex_lock).
        let frames = elf.frames(addr + 1);
        assert!(
            frames.last().unwrap().ends_with("pthread_mutex_lock"),
            "{frames:?}"
        );
        assert!(elf.unwind_sections().eh_frame_hdr.is_some());
        // Loadable code maps back: the segment holding .text converts offsets to addresses.
        assert!(elf.file_offset_to_svma(addr).is_some());
    }

    #[test]
    fn mangled_cpp_and_rust_names_read_as_source_names() {
        assert_eq!(
            demangle("_ZN4node6worker11MessagePort9OnMessageENS1_21MessageProcessingModeE"),
            "node::worker::MessagePort::OnMessage(node::worker::MessagePort::MessageProcessingMode)"
        );
        assert_eq!(
            demangle("_ZN3std2rt10lang_start17h1a2b3c4d5e6f7a8bE"),
            "std::rt::lang_start"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        // C names, and names that only look mangled, stay as they are.
        assert_eq!(demangle("pthread_mutex_lock"), "pthread_mutex_lock");
        assert_eq!(demangle("_Zombie"), "_Zombie");
    }

    #[test]
    fn an_import_with_a_plt_address_does_not_name_the_code_after_it() {
        let dir = std::env::temp_dir().join(format!("scalprof-plt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("p.c");
        // Taking malloc's address in non-PIE code makes the linker give the undefined
        // `.dynsym` symbol malloc a value: its canonical PLT entry, before `worker`.
        std::fs::write(
            &src,
            "#include <stdlib.h>\nvoid *(*volatile alloc)(size_t);\n\
             __attribute__((noinline)) long worker(long n) { long s = 0; for (long i = 0; i < n; i++) s += i ^ (s >> 3); return s; }\n\
             int main(int c, char **v) { (void)v; alloc = malloc; free(alloc(8)); return (int)worker(c * 1000); }\n",
        )
        .unwrap();
        let bin = dir.join("p");
        let cc = std::process::Command::new("cc")
            .args(["-O1", "-no-pie", "-fno-pie", "-o"])
            .arg(&bin)
            .arg(&src)
            .status();
        let Ok(st) = cc else {
            eprintln!("skipped: no C compiler");
            return;
        };
        assert!(st.success());
        let worker = ElfInfo::open(&bin)
            .unwrap()
            .symbol_address("worker")
            .unwrap();
        let stripped = dir.join("p-stripped");
        let strip = std::process::Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&bin)
            .status()
            .unwrap();
        assert!(strip.success());
        let info = ElfInfo::open(&stripped).unwrap();
        assert_eq!(
            info.symbol(worker + 4),
            None,
            "stripped code named after an import"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let e = ElfInfo::open(Path::new("/nonexistent/lib.so")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/lib.so"));
    }
}
