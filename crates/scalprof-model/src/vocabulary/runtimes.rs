//! The language runtimes' vocabulary: their service threads by name, their own work (GC,
//! JIT compilation, safepoints) by the frames that run it, and Java methods as Java names
//! them.

use super::{folded, Pat, Pat::Prefix};

/// The names (`comm`, 15 bytes) of the HotSpot JVM's own threads: JIT compilers, garbage
/// collectors, the VM thread and its periodic tasks. Their waits are the JVM idling, not
/// the program's.
pub const JVM_SERVICE_THREADS: &[&str] = &[
    "VM Thread",
    "VM Periodic Tas",
    "GC Thread#",
    "G1 ",
    "C1 CompilerThre",
    "C2 CompilerThre",
    "Sweeper thread",
    "Common-Cleaner",
    "Signal Dispatch",
    "Finalizer",
    "Reference Handl",
    "Service Thread",
    "Monitor Deflati",
    "Notification Th",
    "Attach Listener",
    "Cleaner-",
    "ZWorker",
    "ZDirector",
    "Shenandoah",
];

/// Whether a thread of this name is one of a runtime's service threads (the JVM's).
pub fn is_runtime_service_thread(comm: &str) -> bool {
    JVM_SERVICE_THREADS.iter().any(|p| comm.starts_with(p))
}

/// The work a language runtime does for itself, by the frames that run it: its garbage
/// collector, its JIT compiler, its safepoints. Each is one cause of the budget, named as
/// the runtime's users name it, rather than the collector's or compiler's hundred internal
/// functions; the first row whose frame is on a stack names it.
pub const RUNTIME_WORK: &[(&[Pat], &str)] = &[
    (
        &[
            Prefix("runtime.gcBgMarkWorker"),
            Prefix("runtime.gcAssistAlloc"),
            Prefix("runtime.bgsweep"),
            Prefix("runtime.bgscavenge"),
            Prefix("runtime.gcDrain"),
            Prefix("runtime.gcMarkTermination"),
            Prefix("runtime.markroot"),
        ],
        "GC (Go runtime)",
    ),
    (
        &[
            Prefix("WorkerThread::run"),
            Prefix("GangWorker::loop"),
            Prefix("ConcurrentGCThread::run"),
            Prefix("G1ConcurrentRefineThread"),
            Prefix("G1YoungCollector"),
            Prefix("G1CollectedHeap::do_collection"),
            Prefix("VM_G1CollectForAllocation"),
            Prefix("VM_ParallelGCFailedAllocation"),
            Prefix("ZDriver"),
            Prefix("ShenandoahControlThread"),
        ],
        "GC (JVM)",
    ),
    (
        &[
            Prefix("CompileBroker::compiler_thread_loop"),
            Prefix("CompileBroker::invoke_compiler_on_method"),
        ],
        "JIT compilation (JVM)",
    ),
    (
        &[Prefix("SafepointSynchronize::"), Prefix("VMThread::")],
        "safepoints (JVM)",
    ),
];

/// The runtime's own work a folded stack was sampled in ([`RUNTIME_WORK`]), if any.
///
/// The budget asks this of every stack of every point in every variant, so the stack is
/// split once and a frame is compared only with the rows' names that start with its own
/// first byte (every row is a prefix).
pub fn runtime_work(stack: &str) -> Option<&'static str> {
    let mut first: Option<usize> = None;
    for f in folded::user_frames(stack) {
        let Some(&b) = f
            .as_bytes()
            .first()
            .filter(|b| WORK_FIRST_BYTES[usize::from(**b)])
        else {
            continue;
        };
        let rows = &RUNTIME_WORK[..first.unwrap_or(RUNTIME_WORK.len())];
        if let Some(i) = rows.iter().position(|(pats, _)| {
            pats.iter()
                .any(|p| p.first_byte().is_none_or(|c| c == b) && p.matches(f))
        }) {
            first = Some(i);
            if i == 0 {
                break;
            }
        }
    }
    first.map(|i| RUNTIME_WORK[i].1)
}

/// The bytes a frame of [`RUNTIME_WORK`] can start with (every byte, if a row had a
/// pattern without a fixed start).
static WORK_FIRST_BYTES: [bool; 256] = first_bytes(RUNTIME_WORK);

const fn first_bytes(rows: &[(&[Pat], &str)]) -> [bool; 256] {
    let mut out = [false; 256];
    let mut i = 0;
    while i < rows.len() {
        let mut j = 0;
        while j < rows[i].0.len() {
            match rows[i].0[j] {
                Pat::Exact(p) | Pat::Prefix(p) | Pat::Around(p, _) if !p.is_empty() => {
                    out[p.as_bytes()[0] as usize] = true;
                }
                _ => return [true; 256],
            }
            j += 1;
        }
        i += 1;
    }
    out
}

/// Whether a subject is one of the runtimes' own work ([`RUNTIME_WORK`]).
pub fn is_runtime_work(subject: &str) -> bool {
    RUNTIME_WORK.iter().any(|(_, name)| *name == subject)
}

/// A JIT perf map's Java method (`void SyncCounter.add(long)`, as HotSpot names it) as
/// Java code names it (`SyncCounter.add`): no return type, no parameters. Other names (C,
/// C++, Go's `main.(*T).Inc`) are left as they are.
pub fn java_method(name: &str) -> &str {
    let Some((head, _)) = name.split_once('(') else {
        return name;
    };
    match head.rsplit_once(' ') {
        Some((_, method)) if method.contains('.') => method,
        _ => name,
    }
}
