//! The copied user stacks of waiters and wakers, unwound with `.eh_frame` and named
//! through the process's mappings: which frames are the program's and which are the
//! locking machinery of libc and the loader.

use std::collections::HashMap;

use scalprof_model::locks::{RawLocks, StackSnapshot};
use scalprof_model::vocabulary::is_user_lock_code;

use crate::profile::{Symbols, UserSpace, JIT_PATH};

/// libc / dynamic loader / vDSO frames are the locking machinery of user space.
pub(crate) fn is_runtime_library(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    // scalprof's own interposer, preloaded to time the holds: a lock function of its own
    // wraps the C library's.
    file.starts_with("libscalprof-delay")
        || file.starts_with("libc.so")
        || file.starts_with("libpthread")
        || file.starts_with("ld-linux")
        || path.starts_with('[')
}

/// A language VM's own library (HotSpot's libjvm): its frames are the VM's locking
/// machinery (a monitor's enter, a park); the program's frames are the JIT code above.
pub(super) fn is_vm_library(path: &str) -> bool {
    path.rsplit('/').next().unwrap_or(path) == "libjvm.so"
}

/// Code a JIT runtime generated that is not a method of the program: HotSpot's
/// interpreter, stubs and adapters (`_complete_monitor_locking_Java`, `StubRoutines (1)`,
/// `I2C/C2I adapters`), named in its perf map. Java methods read `void Counter.add(long)`.
pub(super) fn is_jit_stub(path: &str, func: &str) -> bool {
    const STUBS: &[&str] = &[
        "Interpreter",
        "StubRoutines",
        "Stub",
        "RuntimeStub",
        "I2C/C2I",
        "vtable",
        "itable",
        "MethodHandlesAdapterBlob",
        "BufferBlob",
        "SafepointBlob",
        "DeoptimizationBlob",
        "UncommonTrapBlob",
        "ExceptionBlob",
        "native nmethod",
        "_",
    ];
    path == JIT_PATH
        && (STUBS.iter().any(|p| func.starts_with(p))
            || func.ends_with(" stub")
            || func.contains("Runtime1"))
}

/// The JDK's own locking code, compiled: `LockSupport.park` (`jdk.internal.misc.Unsafe.park`)
/// and the java.util.concurrent locks and queues above it. A park is named by the program's
/// method that called them.
pub(super) fn is_jdk_lock_code(path: &str, func: &str) -> bool {
    let method = scalprof_model::vocabulary::java_method(func);
    path == JIT_PATH
        && [
            "jdk.internal.",
            "java.util.concurrent.",
            "java.lang.invoke.",
        ]
        .iter()
        .any(|p| method.starts_with(p))
}

/// A stack copy's return addresses, innermost first, and its process's address space to
/// name them (built once per process). `None` when the copy's process map was not read.
pub(super) fn unwind_copy<'a>(
    raw: &RawLocks,
    s: &StackSnapshot,
    symbols: &mut Symbols,
    spaces: &'a mut HashMap<u32, UserSpace>,
) -> Option<(&'a UserSpace, Vec<u64>)> {
    let maps = raw.maps.get(&s.tgid)?;
    let space = spaces
        .entry(s.tgid)
        .or_insert_with(|| UserSpace::from_maps(s.tgid, maps, &mut symbols.files).with_jit(s.tgid));
    let addrs = space.unwind(s.ip, s.sp, s.bp, &s.stack);
    Some((space, addrs))
}

/// The address to name for the `i`th return address of a stack, innermost first: return
/// addresses point after the call, so all but the innermost look up the byte before.
pub(super) fn lookup_address(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

/// The functions at an address with the file they are in, innermost first: the inlined
/// ones, then the one they were inlined into (JIT code has one name). Rust std's mutex is
/// inlined into the function that locks it: that function is the next name, not the
/// caller's frame.
pub(super) fn named_frames(space: &UserSpace, addr: u64) -> Vec<(String, String)> {
    let Some((names, path)) = space.symbolize_all(addr) else {
        return Vec::new();
    };
    names.into_iter().map(|n| (n, path.clone())).collect()
}

/// The functions where threads begin: a stack that reaches one was walked to its root,
/// and its outermost program frame is where the thread began (not a frame where the
/// walk stopped). A process's first thread begins at `main` (the walk often ends there:
/// libc's frames below it carry no unwind rows the copy reaches).
const THREAD_ENTRIES: [&str; 8] = [
    "main",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__libc_start_main",
    "__libc_start_call_main",
    "_start",
];

/// The frames of a stack copy outside libc and the loader, innermost first (the first is
/// the function that waits), the libc frames above them (they tell the kind of wait), and
/// whether the stack was walked to where its thread began. `None` when the copy's process
/// map was not read.
pub(super) fn snapshot_frames_rooted(
    raw: &RawLocks,
    s: &StackSnapshot,
    symbols: &mut Symbols,
    spaces: &mut HashMap<u32, UserSpace>,
) -> Option<Waiter> {
    let (space, addrs) = unwind_copy(raw, s, symbols, spaces)?;
    let mut outermost: Option<String> = None;
    // The outermost program frame as the profile names it (a JIT frame by its perf map's
    // name, not as Java writes it).
    let mut outermost_own: Option<String> = None;
    let mut libc = Vec::new();
    let mut own = Vec::new();
    // The outermost VM frame below the program's: the waiter where no JIT frame is named
    // (a JVM without a perf map, its own threads).
    let mut vm = None;
    for (func, path) in addrs
        .iter()
        .enumerate()
        .flat_map(|(i, &a)| named_frames(space, lookup_address(i, a)))
    {
        outermost = Some(func.clone());
        let in_vm =
            is_vm_library(&path) || is_jit_stub(&path, &func) || is_jdk_lock_code(&path, &func);
        // A statically linked libc's or Rust std's lock code is the program's own code by
        // its file: told by its name, it is the lock's machinery (the kind of wait), never
        // the function that waits. So is the rest of Rust's std below the program's first
        // frame (a thread-local's accessor around a channel's park, an I/O stream's lock).
        let lock_code = own.is_empty()
            && (is_user_lock_code(&func)
                || scalprof_model::vocabulary::is_rust_library_frame(&func));
        if is_runtime_library(&path) || in_vm || lock_code {
            if own.is_empty() && in_vm {
                vm = Some(func.clone());
            }
            if own.is_empty() && !libc.contains(&func) && libc.len() < 16 {
                libc.push(func);
            }
        } else if path == JIT_PATH {
            outermost_own = Some(func.clone());
            own.push(scalprof_model::vocabulary::java_method(&func).to_string());
        } else {
            outermost_own = Some(func.clone());
            own.push(func);
        }
    }
    if own.is_empty() {
        own.extend(vm);
    }
    let rooted = outermost.is_some_and(|f| THREAD_ENTRIES.contains(&f.as_str()));
    Some(Waiter {
        own,
        libc,
        root: outermost_own.filter(|_| rooted),
    })
}

/// A waiter's stack copy, named ([`snapshot_frames_rooted`]).
pub(super) struct Waiter {
    /// The program's frames, innermost first (the first is the function that waits).
    pub own: Vec<String>,
    /// The runtime library frames inside them (they tell the kind of wait).
    pub libc: Vec<String>,
    /// Where the thread began, as the profile names it: the outermost program frame,
    /// when the stack was walked to the thread's start.
    pub root: Option<String>,
}

/// A frame named only by its file and offset (`libsqlite3.so.0.8.6+0xaa1b4`: a stripped
/// library's internal function).
fn is_unnamed_frame(f: &str) -> bool {
    f.contains("+0x")
}

/// The function that waits, for a wait's name: the innermost frame outside libc; if a
/// stripped library left it unnamed, with the nearest named function that called it
/// (`libsqlite3.so.0.8.6+0xaa1b4 under sqlite3_step`).
pub(super) fn waiting_function(own: &[String]) -> Option<String> {
    let first = own.first()?;
    if !is_unnamed_frame(first) {
        return Some(first.clone());
    }
    Some(match own.iter().find(|f| !is_unnamed_frame(f)) {
        Some(named) => format!("{first} under {named}"),
        None => first.clone(),
    })
}
