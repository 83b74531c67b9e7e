//! The language runtime of the workload's executable, and what scalprof does about it
//! before the sweep: the Go runtime's probes that let the lock tracer see goroutines.

use std::path::{Path, PathBuf};

use scalprof_collect::locks::{GoProbe, GoProbeRole, ProcMap, GO_PROBE_SYMBOLS};
use scalprof_collect::locks::{GO_PARK_CALLEES, GO_PARK_SITES};
use scalprof_collect::sweep::substitute;
use scalprof_debuginfo::ElfInfo;

/// The program a command runs: its first word, or behind `env` (`env GOMAXPROCS=4
/// ./server`, the usual way to set a runtime's knob per point) the first word that is
/// neither a variable nor one of env's options (`-u NAME` and `-C DIR` take the next word).
fn program_word(argv: &[String]) -> Option<&String> {
    argv.get(program_at(argv)?)
}

/// Where [`program_word`] is in `argv`.
pub(crate) fn program_at(argv: &[String]) -> Option<usize> {
    let first = argv.first()?;
    if Path::new(first).file_name().is_none_or(|n| n != "env") {
        return Some(0);
    }
    let mut words = argv.iter().enumerate().skip(1);
    while let Some((i, w)) = words.next() {
        if matches!(w.as_str(), "-u" | "-C" | "--unset" | "--chdir") {
            words.next();
        } else if !w.starts_with('-') && !w.contains('=') {
            return Some(i);
        }
    }
    None
}

/// The command's executable, its program at the first sweep value found as the sweep
/// finds it (through `PATH`), symbolic links resolved.
fn executable(command: &[String], parameter: &str, values: &[u64]) -> Option<PathBuf> {
    let argv = substitute(command, parameter, *values.first()?);
    let path = scalprof_collect::resolve_program(program_word(&argv)?).ok()?;
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

/// Whether an executable is one of a HotSpot JDK's launchers (`java`, `javac`, `jshell`…,
/// each starts a JVM): its JDK's `libjvm.so` lies beside it.
pub fn is_jvm_launcher(exe: &Path) -> bool {
    let Some(home) = exe.parent().and_then(Path::parent) else {
        return false;
    };
    [
        "lib/server/libjvm.so",
        "lib/client/libjvm.so",
        "jre/lib/amd64/server/libjvm.so",
    ]
    .iter()
    .any(|l| home.join(l).exists())
}

/// The traced repeats' extra environment: for a JVM, the flags that make its Java frames
/// visible, added to the user's own `JAVA_TOOL_OPTIONS`: frame pointers in compiled code
/// (`-XX:+PreserveFramePointer`, a few percent of speed, in the traced repeats only) and a
/// perf map of the compiled methods written at exit (`-XX:+DumpPerfMapAtExit`, which
/// costs nothing while the program runs). The clean repeats run as the user wrote them.
///
/// For CPython, `PYTHONPERFSUPPORT=1`: from 3.12 on, each Python function runs through a
/// small trampoline that CPython names in a perf map (`py::find_dup:quad.py`), so the
/// profiles and the complexity fits name the program's functions, not the interpreter's
/// (older versions ignore it).
pub fn traced_env(command: &[String], parameter: &str, values: &[u64]) -> Vec<(String, String)> {
    if is_python(command) {
        return vec![(PYTHON_PERF.into(), "1".into())];
    }
    match executable(command, parameter, values) {
        Some(exe) if is_jvm_launcher(&exe) => vec![("JAVA_TOOL_OPTIONS".into(), jvm_options())],
        _ => Vec::new(),
    }
}

/// The variable that turns on CPython's perf trampolines (3.12+).
pub const PYTHON_PERF: &str = "PYTHONPERFSUPPORT";

/// Whether the command runs a CPython (`python3`, `python3.12`, `/usr/bin/python`, a
/// pyenv shim), behind `env` too.
fn is_python(command: &[String]) -> bool {
    program_word(command)
        .and_then(|w| Path::new(w).file_name())
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("python"))
}

/// The PIDs of the perf maps in `/tmp` now (`perf-PID.map`).
pub fn perf_map_pids() -> std::collections::HashSet<u32> {
    std::fs::read_dir("/tmp")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| perf_map_pid(e.file_name().to_str()?))
                .collect()
        })
        .unwrap_or_default()
}

fn perf_map_pid(name: &str) -> Option<u32> {
    name.strip_prefix("perf-")?
        .strip_suffix(".map")?
        .parse()
        .ok()
}

/// Removes the perf maps that a traced repeat's CPython processes wrote because scalprof
/// asked them to ([`traced_env`]): those that were not there before the repeat (`before`),
/// regular files of this user whose process is gone and whose entries are CPython's
/// trampolines (`py::`). Left there, a later process with the same PID would find a stale
/// map. A Python still running keeps its map, and so does any map older than the repeat.
pub fn remove_python_perf_maps(before: &std::collections::HashSet<u32>) {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for pid in perf_map_pids().difference(before) {
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|md| md.file_type().is_file() && md.uid() == me);
        if !ours || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        // Not through a link, never waiting on a FIFO swapped in since.
        let mut head = [0u8; 256];
        let n = scalprof_debuginfo::open_regular(&path)
            .and_then(|mut f| f.read(&mut head))
            .unwrap_or(0);
        let first = String::from_utf8_lossy(&head[..n]);
        let cpython = first
            .lines()
            .next()
            .and_then(|l| l.splitn(3, ' ').nth(2))
            .is_some_and(|name| name.starts_with("py::"));
        if cpython {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The JVM flags of the traced repeats (see [`traced_env`]), after the user's own.
pub fn jvm_options() -> String {
    const FLAGS: &str =
        "-XX:+UnlockDiagnosticVMOptions -XX:+PreserveFramePointer -XX:+DumpPerfMapAtExit";
    match std::env::var("JAVA_TOOL_OPTIONS") {
        Ok(own) if !own.trim().is_empty() => format!("{own} {FLAGS}"),
        _ => FLAGS.to_string(),
    }
}

/// The Go runtime probes for the command's executable (behind `env` too), when it is a Go
/// program: its functions from the symbol table, or from `.gopclntab` where `-ldflags=-s`
/// strips that.
pub fn go_probes(command: &[String], parameter: &str, first: u64) -> Vec<GoProbe> {
    let Some(path) = executable(command, parameter, &[first]) else {
        return Vec::new();
    };
    let Ok(elf) = ElfInfo::open(&path) else {
        return Vec::new();
    };
    go_probes_of(&path, &elf)
}

/// The probes of an executable a traced process started, if it is a Go program. Asked at
/// every exec of the workload's tree, on the tracer's thread: a file whose first bytes
/// carry no Go build-ID note is passed over without parsing it (a shell script's `sleep`
/// must not cost a parser child).
pub fn go_probes_of_file(path: &Path) -> Vec<GoProbe> {
    if !has_go_note(path) {
        return Vec::new();
    }
    match ElfInfo::open(path) {
        Ok(elf) => go_probes_of(path, &elf),
        Err(_) => Vec::new(),
    }
}

/// Whether the file's first 16 KiB hold the note Go's linker puts first in every
/// executable (stripped ones too): owner "Go", type 4 (the build ID).
fn has_go_note(path: &Path) -> bool {
    use std::io::Read;
    let mut head = vec![0u8; 16 << 10];
    let Ok(n) = scalprof_debuginfo::open_regular(path).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    is_go_note_in(&head[..n])
}

/// A note header (name size 4, any descriptor size, type 4) followed by the name `Go`.
fn is_go_note_in(head: &[u8]) -> bool {
    const FOUR: [u8; 4] = 4u32.to_le_bytes();
    head.windows(16)
        .any(|w| w[..4] == FOUR && w[8..12] == FOUR && &w[12..16] == b"Go\0\0")
}

/// The probes of one Go executable: each runtime function it has, at its file offset.
/// None unless the wakeup and at least one acquire are there (an older or newer runtime
/// whose names moved gets no half-measure).
pub fn go_probes_of(path: &Path, elf: &ElfInfo) -> Vec<GoProbe> {
    let probe = |svma: u64, role: GoProbeRole| {
        Some(GoProbe {
            exe: path.to_path_buf(),
            offset: elf.svma_to_file_offset(svma)?,
            role,
        })
    };
    let mut probes: Vec<GoProbe> = GO_PROBE_SYMBOLS
        .iter()
        .filter_map(|&(name, role)| probe(probe_point(elf, elf.symbol_address(name)?), role))
        .collect();
    let has = |probes: &[GoProbe], r: fn(&GoProbeRole) -> bool| probes.iter().any(|p| r(&p.role));
    let whole = has(&probes, |r| matches!(r, GoProbeRole::Ready))
        && has(&probes, |r| matches!(r, GoProbeRole::Execute))
        && has(&probes, |r| matches!(r, GoProbeRole::Acquire(_)));
    if !whole {
        return Vec::new();
    }
    let parks: Vec<GoProbe> = park_calls(elf)
        .into_iter()
        .filter_map(|(at, kind)| probe(at, GoProbeRole::Park(kind)))
        .collect();
    // A hand-off without a park to end (or parks without the hand-offs) is half a measure.
    if parks.is_empty() || !has(&probes, |r| matches!(r, GoProbeRole::Handoff(_))) {
        probes.retain(|p| !matches!(p.role, GoProbeRole::Handoff(_)));
    } else {
        probes.extend(parks);
    }
    probes
}

/// The calls of gopark (or goparkunlock) inside the runtime's functions that park on a
/// channel or a sync.Cond, with the kind each parks for: the probe goes on the call
/// instruction itself, so that only these parks trap (not the scheduler's, the GC's or a
/// semaphore's), and the registers hold gopark's arguments. A `call rel32` (e8) whose
/// target is the callee: four bytes that land exactly there elsewhere in a function are
/// not a risk worth a disassembler.
fn park_calls(elf: &ElfInfo) -> Vec<(u64, u32)> {
    let Some((range, text)) = elf.unwind_sections().text.as_ref() else {
        return Vec::new();
    };
    let callees: Vec<u64> = GO_PARK_CALLEES
        .iter()
        .filter_map(|n| elf.symbol_address(n))
        .collect();
    let mut out = Vec::new();
    for &(name, kind) in GO_PARK_SITES {
        let Some((start, end)) = elf.symbol_address(name).and_then(|a| elf.symbol_range(a)) else {
            continue;
        };
        let (Some(lo), Some(hi)) = (start.checked_sub(range.start), end.checked_sub(range.start))
        else {
            continue;
        };
        let code = text
            .get(lo as usize..(hi as usize).min(text.len()))
            .unwrap_or(&[]);
        for i in 0..code.len().saturating_sub(4) {
            if code[i] != 0xe8 {
                continue;
            }
            let rel = i32::from_le_bytes([code[i + 1], code[i + 2], code[i + 3], code[i + 4]]);
            let at = start + i as u64;
            let target = (at + 5).wrapping_add_signed(i64::from(rel));
            if callees.contains(&target) {
                out.push((at, kind));
            }
        }
    }
    out
}

/// Where on a Go function to put its probe: past the stack check that opens it (`cmp
/// 0x10(%r14),%rsp`) on the conditional jump that follows it, when it is there. The
/// kernel emulates a jump, but must single-step a compare out of line (a second trap):
/// here that halved a probe's cost. The registers are those of the entry.
fn probe_point(elf: &ElfInfo, entry: u64) -> u64 {
    const STACK_CHECK: [u8; 4] = [0x49, 0x3b, 0x66, 0x10];
    let Some((range, text)) = elf.unwind_sections().text.as_ref() else {
        return entry;
    };
    let Some(at) = entry.checked_sub(range.start).map(|o| o as usize) else {
        return entry;
    };
    let code = text.get(at..at + 6).unwrap_or(&[]);
    let jump = matches!(code.get(4), Some(0x76)) || code.get(4..6) == Some(&[0x0f, 0x86][..]);
    if code.get(..4) == Some(&STACK_CHECK[..]) && jump {
        entry + 4
    } else {
        entry
    }
}

/// Removes the perf maps (`/tmp/perf-PID.map`) that the traced repeat's JVMs wrote at exit
/// because scalprof asked them to ([`traced_env`]), once they have been read: left there,
/// a later process with the same PID (PIDs are reused) would find a stale map, or fail to
/// create its own. Only a JVM's (it mapped `libjvm.so`), only a regular file this user
/// owns.
pub fn remove_jvm_perf_maps(maps: &std::collections::HashMap<u32, Vec<ProcMap>>) {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    for (tgid, m) in maps {
        if !m.iter().any(|m| m.path.ends_with("/libjvm.so")) {
            continue;
        }
        let path = PathBuf::from(format!("/tmp/perf-{tgid}.map"));
        let ours = std::fs::symlink_metadata(&path)
            .is_ok_and(|md| md.file_type().is_file() && md.uid() == me);
        if ours {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_go_build_id_note_is_told_from_other_bytes() {
        let mut note = Vec::new();
        note.extend_from_slice(&4u32.to_le_bytes());
        note.extend_from_slice(&0x53u32.to_le_bytes());
        note.extend_from_slice(&4u32.to_le_bytes());
        note.extend_from_slice(b"Go\0\0");
        let mut head = vec![0u8; 100];
        head.extend_from_slice(&note);
        assert!(is_go_note_in(&head));
        // A GNU build-ID note (type 3, name "GNU") is not Go's.
        let mut gnu = note.clone();
        gnu[8..12].copy_from_slice(&3u32.to_le_bytes());
        assert!(!is_go_note_in(&gnu));
        assert!(!is_go_note_in(b"Go\0\0 is not a note"));
        // This test binary (Rust) has none.
        assert!(!has_go_note(&std::env::current_exe().unwrap()));
    }

    #[test]
    fn the_program_is_found_behind_env_its_options_and_variables() {
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let program = |v: &[&str]| program_word(&words(v)).cloned();
        assert_eq!(
            program(&["env", "-u", "X", "GOMAXPROCS=4", "./server", "a=b"]).as_deref(),
            Some("./server")
        );
        assert_eq!(
            program(&["/usr/bin/env", "-i", "A=1", "java"]).as_deref(),
            Some("java")
        );
        assert_eq!(
            program(&["./server", "GOMAXPROCS=4"]).as_deref(),
            Some("./server")
        );
        assert_eq!(program(&["env", "A=1"]), None);
    }
}
