//! One ELF file: function symbols, DWARF frames, load segments and unwind sections.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::sandbox::Wire;
use crate::DebugInfoError;

mod dwarf;
mod gopclntab;
mod interpreter;

use dwarf::Dwarf;
pub(crate) use dwarf::{check_compressed_sections, load_dwarf};
pub use interpreter::has_interpreter;

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
    dwarf: std::sync::OnceLock<Option<std::sync::Mutex<Dwarf>>>,
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
                name: crate::sandbox::cut_name(name).into_owned(),
            })
        })
        .collect()
}

impl ElfInfo {
    /// Opens and parses one ELF file (and its separate debug file's symbols): in a parser
    /// child without privileges when separation is on ([`crate::sandbox`]), else here,
    /// from bytes read (never a mapping: a file truncated under it would raise SIGBUS).
    pub fn open(path: &Path) -> Result<ElfInfo, DebugInfoError> {
        ElfInfo::from_file(path, open_file(path)?)
    }

    /// [`ElfInfo::open`] of `file`, opened at `path` ([`crate::open_regular`]): the file
    /// read is the one opened, whatever `path` names by now.
    pub fn from_file(path: &Path, file: std::fs::File) -> Result<ElfInfo, DebugInfoError> {
        let _reading = crate::sandbox::Reading::start(path);
        let parse = |p: &Path, file: std::fs::File| -> Result<Tables, DebugInfoError> {
            let tables = match crate::sandbox::parser() {
                Some(exe) => parse_elf(exe, &file),
                None => read_all(file).and_then(|data| Tables::parse(&data)),
            };
            tables.map_err(|reason| DebugInfoError::Parse {
                path: p.to_path_buf(),
                reason,
            })
        };
        let main = parse(path, file)?;
        let debug_file = main.build_id.as_deref().and_then(separate_debug_file);
        let debug = debug_file
            .as_deref()
            .and_then(|d| parse(d, open_file(d).ok()?).ok());

        let mut symbols = main.sym_text;
        let mut objects = main.sym_data;
        let mut has_symtab = !symbols.is_empty();
        if let Some(d) = debug {
            if !d.sym_text.is_empty() {
                symbols = d.sym_text;
                objects = d.sym_data;
                has_symtab = true;
            }
        }
        if objects.is_empty() {
            objects = main.dyn_data;
        }
        objects.sort_by_key(|o| o.start);
        if symbols.is_empty() {
            symbols = main.dyn_text;
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

        let dwarf_path = if main.has_own_dwarf {
            Some(path.to_path_buf())
        } else {
            debug_file.clone()
        };
        Ok(ElfInfo {
            path: path.to_path_buf(),
            symbols,
            objects,
            segments: main.segments,
            unwind: main.unwind,
            has_dwarf: dwarf_path.is_some(),
            dwarf_path,
            dwarf: std::sync::OnceLock::new(),
            has_symtab,
            build_id: main.build_id,
        })
    }

    /// The stated address of a file offset (through the PT_LOAD segment containing it).
    pub fn file_offset_to_svma(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| offset >= s.file_offset && offset - s.file_offset < s.file_size.max(1))
            .map(|s| (offset - s.file_offset).wrapping_add(s.svma))
    }

    /// The stated address at file offset `pgoff` for a mapping of `len` bytes from it,
    /// through the PT_LOAD segment the mapping holds most of. A mapping starts on a page
    /// boundary, which may fall inside the segment before its own: lld puts the text at
    /// file offset 0x19a70 and address 0x1aa70, so the page at 0x19000 also ends the
    /// read-only segment, whose addresses are 0x1000 lower (Rust programs, linked by lld).
    pub fn mapping_svma(&self, pgoff: u64, len: u64) -> Option<u64> {
        let end = pgoff.saturating_add(len);
        self.segments
            .iter()
            .map(|s| {
                let from = s.file_offset.max(pgoff);
                let to = (s.file_offset + s.file_size).min(end);
                (to.saturating_sub(from), s)
            })
            .filter(|(overlap, _)| *overlap > 0)
            .max_by_key(|(overlap, _)| *overlap)
            .map(|(_, s)| s.svma.wrapping_sub(s.file_offset).wrapping_add(pgoff))
    }

    /// The file offset of a stated address (through the PT_LOAD segment containing it):
    /// where a uprobe on it is placed.
    pub fn svma_to_file_offset(&self, svma: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| svma >= s.svma && svma - s.svma < s.file_size.max(1))
            .map(|s| svma - s.svma + s.file_offset)
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
            let path = self.dwarf_path.as_ref()?;
            Some(std::sync::Mutex::new(Dwarf::open(path)))
        });
        if let Some(dwarf) = dwarf {
            let mut dwarf = dwarf.lock().unwrap_or_else(|e| e.into_inner());
            names = dwarf.frames(svma);
        }
        if names.is_empty() {
            if let Some(s) = self.symbol(svma) {
                names.push(demangle(s).into_owned());
            }
        }
        names
    }

    /// Why its DWARF could not be read (its frames then come from the symbol table).
    pub fn dwarf_failure(&self) -> Option<String> {
        let dwarf = self.dwarf.get()?.as_ref()?;
        let dwarf = dwarf.lock().unwrap_or_else(|e| e.into_inner());
        dwarf.failure().map(str::to_string)
    }

    pub fn unwind_sections(&self) -> &UnwindSections {
        &self.unwind
    }

    /// The stated address of a data object (a variable) by name, `name+0xOFF` for a place
    /// inside it.
    pub fn object_address(&self, name: &str) -> Option<u64> {
        let (base, offset) = match name.split_once("+0x") {
            Some((b, off)) => (b, u64::from_str_radix(off, 16).ok()?),
            None => (name, 0),
        };
        self.objects
            .iter()
            .find(|s| s.name == base)
            .map(|s| s.start + offset)
    }

    /// The address of a function symbol by name (tests, diagnostics, and the function a
    /// delay lengthens).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.symbols
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.start)
    }
}

/// The file at `path`, opened to be read ([`crate::open_regular`]).
fn open_file(path: &Path) -> Result<std::fs::File, DebugInfoError> {
    crate::open_regular(path).map_err(|source| DebugInfoError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// What one ELF file says, before its symbols are chosen and sorted: what a parser child
/// sends back ([`crate::sandbox`]).
pub(crate) struct Tables {
    sym_text: Vec<Symbol>,
    sym_data: Vec<Symbol>,
    dyn_text: Vec<Symbol>,
    dyn_data: Vec<Symbol>,
    segments: Vec<Segment>,
    unwind: UnwindSections,
    has_own_dwarf: bool,
    build_id: Option<Vec<u8>>,
}

/// The largest section the unwinder copies (.text, .eh_frame): a bigger one is left out.
const MAX_UNWIND_SECTION: u64 = 256 << 20;

impl Tables {
    pub(crate) fn parse(data: &[u8]) -> Result<Tables, String> {
        let obj = object::File::parse(data).map_err(|e| e.to_string())?;
        let section = |name: &str| -> Option<(std::ops::Range<u64>, Arc<[u8]>)> {
            let s = obj.section_by_name(name)?;
            if s.size() > MAX_UNWIND_SECTION {
                return None;
            }
            let data = s.data().ok()?;
            Some((s.address()..s.address() + s.size(), Arc::from(data)))
        };
        let mut sym_text = collect_symbols(obj.symbols());
        // A stripped Go program (`-ldflags=-s`) keeps its own function table.
        if sym_text.is_empty() {
            if let (Some(pcln), Some(text)) = (
                obj.section_by_name(".gopclntab"),
                obj.section_by_name(".text"),
            ) {
                sym_text = gopclntab::functions(pcln.data().unwrap_or(&[]), text.address());
            }
        }
        Ok(Tables {
            sym_text,
            sym_data: collect_kind(obj.symbols(), SymbolKind::Data),
            dyn_text: collect_symbols(obj.dynamic_symbols()),
            dyn_data: collect_kind(obj.dynamic_symbols(), SymbolKind::Data),
            segments: obj
                .segments()
                .map(|s| {
                    let (file_offset, file_size) = s.file_range();
                    Segment {
                        file_offset,
                        file_size,
                        svma: s.address(),
                    }
                })
                .collect(),
            unwind: UnwindSections {
                text: section(".text"),
                eh_frame: section(".eh_frame"),
                eh_frame_hdr: section(".eh_frame_hdr"),
                got: obj
                    .section_by_name(".got")
                    .map(|s| s.address()..s.address() + s.size()),
                debug_frame: section(".debug_frame").map(|s| s.1),
            },
            has_own_dwarf: obj.section_by_name(".debug_info").is_some(),
            build_id: obj.build_id().ok().flatten().map(|b| b.to_vec()),
        })
    }

    pub(crate) fn encode(&self, w: &mut Wire) {
        for list in [
            &self.sym_text,
            &self.sym_data,
            &self.dyn_text,
            &self.dyn_data,
        ] {
            w.u64(list.len() as u64);
            for s in list {
                w.u64(s.start);
                w.u64(s.end);
                w.str(&s.name);
            }
        }
        w.u64(self.segments.len() as u64);
        for s in &self.segments {
            w.u64(s.file_offset);
            w.u64(s.file_size);
            w.u64(s.svma);
        }
        let u = &self.unwind;
        for sec in [&u.text, &u.eh_frame, &u.eh_frame_hdr] {
            match sec {
                Some((r, b)) => {
                    w.u64(1);
                    w.u64(r.start);
                    w.u64(r.end);
                    w.bytes(b);
                }
                None => w.u64(0),
            }
        }
        match &u.got {
            Some(r) => {
                w.u64(1);
                w.u64(r.start);
                w.u64(r.end);
            }
            None => w.u64(0),
        }
        match &u.debug_frame {
            Some(b) => {
                w.u64(1);
                w.bytes(b);
            }
            None => w.u64(0),
        }
        w.u64(u64::from(self.has_own_dwarf));
        match &self.build_id {
            Some(b) => {
                w.u64(1);
                w.bytes(b);
            }
            None => w.u64(0),
        }
    }

    pub(crate) fn decode(w: &mut Wire) -> Result<Tables, String> {
        let mut lists: Vec<Vec<Symbol>> = Vec::new();
        for _ in 0..4 {
            let n = w.get_count(24)?;
            let mut list = Vec::with_capacity(n);
            for _ in 0..n {
                let (start, end) = (w.get_u64()?, w.get_u64()?);
                list.push(Symbol {
                    start,
                    end: end.max(start),
                    name: w.get_name()?,
                });
            }
            lists.push(list);
        }
        let n = w.get_count(24)?;
        let mut segments = Vec::with_capacity(n);
        for _ in 0..n {
            segments.push(Segment {
                file_offset: w.get_u64()?,
                file_size: w.get_u64()?,
                svma: w.get_u64()?,
            });
        }
        let mut secs = Vec::new();
        for _ in 0..3 {
            secs.push(match w.get_u64()? {
                0 => None,
                _ => {
                    let (a, b) = (w.get_u64()?, w.get_u64()?);
                    Some((a..b.max(a), Arc::from(w.get_bytes()?)))
                }
            });
        }
        let got = match w.get_u64()? {
            0 => None,
            _ => {
                let (a, b) = (w.get_u64()?, w.get_u64()?);
                Some(a..b.max(a))
            }
        };
        let debug_frame = match w.get_u64()? {
            0 => None,
            _ => Some(Arc::from(w.get_bytes()?)),
        };
        let has_own_dwarf = w.get_u64()? != 0;
        let build_id = match w.get_u64()? {
            0 => None,
            _ => Some(w.get_bytes()?.iter().take(64).copied().collect()),
        };
        let mut secs = secs.into_iter();
        let mut lists = lists.into_iter();
        let mut next = || lists.next().unwrap_or_default();
        Ok(Tables {
            sym_text: next(),
            sym_data: next(),
            dyn_text: next(),
            dyn_data: next(),
            segments,
            unwind: UnwindSections {
                text: secs.next().flatten(),
                eh_frame: secs.next().flatten(),
                eh_frame_hdr: secs.next().flatten(),
                got,
                debug_frame,
            },
            has_own_dwarf,
            build_id,
        })
    }
}

/// A file's bytes, read whole (bounded).
pub(crate) fn read_all(file: std::fs::File) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    if size > crate::sandbox::MEMORY_CAP / 2 {
        return Err(format!("{} MB: larger than the parser's cap", size >> 20));
    }
    let mut data = Vec::new();
    data.try_reserve_exact(size as usize)
        .map_err(|_| "not enough memory to read it".to_string())?;
    file.take(size)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    Ok(data)
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

/// A file's tables, parsed by a child.
pub(crate) fn parse_elf(exe: &Path, file: &std::fs::File) -> Result<Tables, String> {
    let mut parser = crate::sandbox::Parser::spawn(exe, "elf", file).map_err(|e| e.to_string())?;
    parser.close_input();
    let mut w = parser.reply_within(crate::sandbox::ELF_REPLY_TIMEOUT)?;
    w.get_status()?;
    Tables::decode(&mut w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_has_an_interpreter_and_a_text_file_is_no_elf() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(has_interpreter(&me), Some(true));
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        assert_eq!(has_interpreter(&manifest), None);
        // Debian's ldconfig is linked statically (static-pie): no interpreter.
        let ldconfig = Path::new("/sbin/ldconfig");
        if ldconfig.exists() {
            assert_eq!(has_interpreter(ldconfig), Some(false));
        }
    }

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

    #[inline(never)]
    fn mapping_marker() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn a_mapping_is_based_on_the_segment_it_holds_not_the_page_it_starts_in() {
        // This test binary is linked by lld, as Rust programs are: its text starts mid-page
        // (file offset 0x…e50, address 0x1000 higher), so the executable mapping's first
        // page also ends the read-only segment before it, whose addresses are 0x1000
        // lower. Based on that segment, every unwind-table lookup missed by 0x1000.
        let elf = ElfInfo::open(Path::new("/proc/self/exe")).unwrap();
        let here = mapping_marker as fn() -> u64 as usize as u64;
        assert_eq!(mapping_marker(), 42);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (start, end, pgoff) = maps
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let (range, _perms, off) = (f.next()?, f.next()?, f.next()?);
                let (a, b) = range.split_once('-')?;
                let (a, b) = (
                    u64::from_str_radix(a, 16).ok()?,
                    u64::from_str_radix(b, 16).ok()?,
                );
                (a..b)
                    .contains(&here)
                    .then(|| (a, b, u64::from_str_radix(off, 16).unwrap()))
            })
            .expect("the test's code is mapped");
        let svma = elf.mapping_svma(pgoff, end - start).unwrap() + (here - start);
        let name = elf.symbol(svma).map(demangle).unwrap_or_default();
        assert!(name.ends_with("mapping_marker"), "{svma:#x} is {name:?}");
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
