//! User stacks: the copied stack unwound with the binaries' `.eh_frame` (framehop), or
//! the sample's own user callchain, and the frames' names (symbols, inlined functions from
//! DWARF, JIT perf maps).

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use linux_perf_event_reader::SampleRecord;
use scalprof_debuginfo::mapped::Mapped;
use scalprof_debuginfo::{ElfInfo, SymbolCache};
use std::sync::Arc;

use super::{Mapping, Process, ProfileBuilder, MAX_FRAMES, REG_BP, REG_IP, REG_SP};
use scalprof_model::Unreadable;

impl ProfileBuilder {
    /// User frame addresses, leaf first.
    pub(super) fn user_addresses(
        &mut self,
        pid: i32,
        s: &SampleRecord<'_>,
        user_chain: Vec<u64>,
    ) -> Vec<u64> {
        let regs = s.user_regs.as_ref();
        let stack = s.user_stack.as_ref();
        let (Some(regs), Some((stack, dyn_size))) = (regs, stack) else {
            return user_chain;
        };
        let (Some(ip), Some(sp), Some(bp)) = (regs.get(REG_IP), regs.get(REG_SP), regs.get(REG_BP))
        else {
            return user_chain;
        };
        let bytes = stack.as_slice();
        let valid = (*dyn_size as usize).min(bytes.len());
        let process = self.processes.entry(pid).or_default();
        let (out, truncated) = unwind(
            &process.unwinder,
            &mut self.cache,
            ip,
            sp,
            bp,
            &bytes[..valid],
        );
        if truncated {
            self.stats.truncated_stacks += 1;
        }
        out
    }

    /// Frame name ids for one user address, innermost first.
    pub(super) fn user_frames(&mut self, pid: i32, addr: u64) -> Arc<[u32]> {
        if let Some((ids, unresolved)) = self.processes.get(&pid).and_then(|p| p.names.get(&addr)) {
            // Every frame that has no name counts, not each address once.
            let ids = ids.clone();
            if *unresolved {
                self.stats.unresolved_frames += 1;
            }
            return ids;
        }
        // (names, may be JIT code, unresolved)
        let mut dwarf_failed = None;
        let (names, jit, unresolved): (Vec<String>, bool, bool) = {
            let p = &self.processes[&pid];
            match p.mapping(addr) {
                Some(m) => {
                    let file = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
                    let resolved = m.elf.as_ref().and_then(|elf| {
                        let svma =
                            elf.file_offset_to_svma((addr - m.start).checked_add(m.pgoff)?)?;
                        let f = elf.frames(svma);
                        dwarf_failed = elf.dwarf_failure().map(|why| Unreadable::Dwarf {
                            path: m.path.to_string(),
                            why: why.to_string(),
                        });
                        (!f.is_empty()).then_some(f)
                    });
                    match resolved {
                        Some(f) => (f, false, false),
                        None if is_anonymous(&m.path) => (vec!["[anon]".to_string()], true, true),
                        None if m.path.starts_with('[') => (vec![m.path.to_string()], false, false),
                        None => (vec![format!("[{file}]")], false, true),
                    }
                }
                // Code mapped before the profile began, or never announced.
                None => (vec!["[unknown]".to_string()], true, true),
            }
        };
        if let Some(entry) = dwarf_failed {
            self.stats.note_unreadable(entry);
        }
        let (names, unresolved) = match jit.then(|| self.jit_name(pid, addr)).flatten() {
            Some(name) => (vec![name], false),
            None => (names, unresolved),
        };
        if unresolved {
            self.stats.unresolved_frames += 1;
        }
        let ids: Arc<[u32]> = names
            .iter()
            .map(|n| self.intern(n))
            .collect::<Vec<_>>()
            .into();
        if let Some(p) = self.processes.get_mut(&pid) {
            p.names.insert(addr, (ids.clone(), unresolved));
        }
        ids
    }
}

pub(super) fn framehop_module(m: &Mapping, elf: &ElfInfo) -> Option<Module<Arc<[u8]>>> {
    let svma_at_pgoff = elf.mapping_svma(m.pgoff, m.end - m.start)?;
    let base_avma = m.start.checked_sub(svma_at_pgoff)?;
    let u = elf.unwind_sections();
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: u.text.as_ref().map(|t| t.0.clone()),
        text: u.text.as_ref().map(|t| t.1.clone()),
        got_svma: u.got.clone(),
        eh_frame_svma: u.eh_frame.as_ref().map(|t| t.0.clone()),
        eh_frame: u.eh_frame.as_ref().map(|t| t.1.clone()),
        eh_frame_hdr_svma: u.eh_frame_hdr.as_ref().map(|t| t.0.clone()),
        eh_frame_hdr: u.eh_frame_hdr.as_ref().map(|t| t.1.clone()),
        debug_frame: u.debug_frame.clone(),
        ..Default::default()
    };
    Some(Module::new(
        m.path.to_string(),
        m.start..m.end,
        base_avma,
        info,
    ))
}

/// The file and stated address of a runtime address in a process.
pub(super) fn file_address(p: &Process, addr: u64) -> Option<(Arc<str>, u64)> {
    let m = p.mapping(addr)?;
    let elf = m.elf.as_ref()?;
    let svma = elf.file_offset_to_svma((addr - m.start).checked_add(m.pgoff)?)?;
    Some((m.path.clone(), svma))
}

/// Walks a copied user stack (`bytes` starts at `sp`) with the modules' unwind info.
/// Returns return addresses (leaf first, the first being `ip`) and whether the walk
/// stopped early.
pub(crate) fn unwind(
    unwinder: &UnwinderX86_64<Arc<[u8]>>,
    cache: &mut CacheX86_64,
    ip: u64,
    sp: u64,
    bp: u64,
    bytes: &[u8],
) -> (Vec<u64>, bool) {
    let mut read_stack = |addr: u64| -> Result<u64, ()> {
        let off = addr.checked_sub(sp).ok_or(())? as usize;
        let b = bytes.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
    };
    let mut out = Vec::new();
    let mut iter = unwinder.iter_frames(
        ip,
        UnwindRegsX86_64::new(ip, sp, bp),
        cache,
        &mut read_stack,
    );
    loop {
        match iter.next() {
            Ok(Some(frame)) => {
                out.push(match frame {
                    FrameAddress::InstructionPointer(a) => a,
                    FrameAddress::ReturnAddress(a) => a.get(),
                });
                if out.len() >= MAX_FRAMES {
                    return (out, true);
                }
            }
            Ok(None) => return (out, false),
            Err(_) => return (out, true),
        }
    }
}

/// The "file" [`UserSpace::symbolize`] names for JIT code: no path, and not a `[special]`
/// mapping (which count as the C library's machinery).
pub const JIT_PATH: &str = "jit";

/// A process's executable mappings from /proc/PID/maps, ready to unwind and symbolize
/// stacks copied from it (the lock tracer's futex-wait snapshots).
pub struct UserSpace {
    process: Process,
    cache: CacheX86_64,
    /// The process's JIT perf map (`/tmp/perf-PID.map`), for code in anonymous memory.
    jit: Option<crate::perf_map::PerfMap>,
    /// Mapped files that got no names, each with why ("not the file the process mapped").
    refused: Vec<String>,
}

impl UserSpace {
    /// Process `tgid`'s mappings, read from its /proc/PID/maps while it ran: each file is
    /// opened as the one it mapped ([`SymbolCache::get_mapped`]), through the process while
    /// it still runs; another file at the path gets no names ([`UserSpace::refused`]).
    pub fn from_maps(
        tgid: u32,
        maps: &[scalprof_model::locks::ProcMap],
        files: &mut SymbolCache,
    ) -> UserSpace {
        let mut process = Process::default();
        let mut refused = Vec::new();
        for m in maps.iter().filter(|m| m.executable) {
            let elf = if m.path.starts_with('/') && !is_anonymous(&m.path) {
                let mapped = Mapped {
                    path: &m.path,
                    dev: m.dev,
                    inode: m.inode,
                    live: Some((tgid as i32, m.start, m.end)),
                };
                match files.get_mapped(&mapped) {
                    Ok(elf) => Some(elf),
                    Err(why) => {
                        if !refused.contains(&why) {
                            refused.push(why);
                        }
                        None
                    }
                }
            } else {
                None
            };
            process.add_mapping(Mapping {
                start: m.start,
                end: m.end,
                pgoff: m.offset,
                path: m.path.as_str().into(),
                elf,
            });
        }
        UserSpace {
            process,
            cache: CacheX86_64::new(),
            jit: None,
            refused,
        }
    }

    /// The mapped files that got no names, with why.
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// Names JIT code through process `tgid`'s perf map, when it wrote one that root or
    /// scalprof's own user owns (the workload runs as that user): a JVM's compiled Java
    /// methods, Node's functions.
    pub fn with_jit(mut self, tgid: u32) -> UserSpace {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        self.jit = crate::perf_map::PerfMap::load(&crate::perf_map::path_of(tgid as i32), &[me]);
        self
    }

    /// Return addresses of a copied stack, leaf first.
    pub fn unwind(&mut self, ip: u64, sp: u64, bp: u64, bytes: &[u8]) -> Vec<u64> {
        unwind(&self.process.unwinder, &mut self.cache, ip, sp, bp, bytes).0
    }

    /// The innermost function name at an address and the file it lives in. In a file
    /// without symbols (a stripped binary), `file+0xoffset`: the same in every run,
    /// whatever the load address.
    pub fn symbolize(&self, addr: u64) -> Option<(String, String)> {
        let (mut names, path) = self.symbolize_all(addr)?;
        Some((names.swap_remove(0), path))
    }

    /// Every function name at an address, innermost first (the inlined ones, then the
    /// enclosing one), with its file; named as [`UserSpace::symbolize`] names one. One
    /// lookup for both.
    pub fn symbolize_all(&self, addr: u64) -> Option<(Vec<String>, String)> {
        let jit = || {
            let name = self.jit.as_ref()?.lookup(addr)?;
            Some((vec![name.to_string()], JIT_PATH.to_string()))
        };
        let Some(m) = self.process.mapping(addr) else {
            return jit();
        };
        if !m.path.starts_with('/') {
            if let Some(named) = jit() {
                return Some(named);
            }
        }
        let offset = (addr - m.start).checked_add(m.pgoff)?;
        let named = m
            .elf
            .as_ref()
            .and_then(|elf| Some(elf.frames(elf.file_offset_to_svma(offset)?)))
            .filter(|names| !names.is_empty());
        let names = match named {
            Some(names) => names,
            None if m.path.starts_with('/') => {
                // Unnamed code reads as in profiles (`[zstd]`), with the offset that tells
                // one call site from another.
                let file = m.path.rsplit('/').next().unwrap_or(&m.path);
                vec![format!("[{file}]+{offset:#x}")]
            }
            None => return None,
        };
        Some((names, m.path.to_string()))
    }

    /// Every function name at an address, innermost first ([`UserSpace::symbolize_all`]
    /// without the file).
    pub fn symbolize_inlined(&self, addr: u64) -> Vec<String> {
        self.symbolize_all(addr)
            .map(|(names, _)| names)
            .unwrap_or_default()
    }

    /// The function a return address's call instruction called, when that is a direct
    /// `call rel32` to a named function of the same file: how a frame lost to a tail call
    /// is found again. A function that ends in `jmp pthread_mutex_unlock` is not on the
    /// stack while the unlock runs; its caller's return address, just after the call to
    /// it, is. A call through the PLT names nothing (the stub has no symbol).
    pub fn called_at(&self, ret: u64) -> Option<String> {
        let m = self.process.mapping(ret)?;
        let elf = m.elf.as_ref()?;
        let svma = elf.file_offset_to_svma((ret - m.start).checked_add(m.pgoff)?)?;
        let (range, text) = elf.unwind_sections().text.clone()?;
        let at = svma.checked_sub(5)?;
        if at < range.start || svma > range.end {
            return None;
        }
        let i = (at - range.start) as usize;
        let code = text.get(i..i + 5)?;
        if code[0] != 0xe8 {
            return None;
        }
        let rel = i32::from_le_bytes([code[1], code[2], code[3], code[4]]);
        let target = svma.checked_add_signed(i64::from(rel))?;
        // Into .text: a PLT stub (or `_init`, whose zero size would cover it) is not one.
        if !range.contains(&target) {
            return None;
        }
        elf.symbol(target)?;
        elf.frames(target).into_iter().next()
    }
}

/// Executable memory without a file behind it: where JIT compilers put their code. perf
/// names it `//anon`; `[anon:name]` is a named anonymous mapping, `/memfd:` a memory file.
pub(super) fn is_anonymous(path: &str) -> bool {
    path.is_empty() || path == "//anon" || path.starts_with("[anon") || path.starts_with("/memfd:")
}
