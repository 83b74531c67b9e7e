//! Which delay lengthens a cause: a global lock of the workload's executable, a kernel
//! lock, a function, a system call (or the one a lock's holder blocks in), and what a
//! cause none of them reaches says instead.

use std::path::PathBuf;

use scalprof_collect::delay::{DelayTarget, KernelLock};
use scalprof_collect::sweep::substitute;
use scalprof_model::experiment::{Experiment, ExperimentKind, Verdict};
use scalprof_model::locks::{CallWait, HeldWait, LockKind, HOLDER_WAIT_SHARE};
use scalprof_model::{FindingDetails, FindingKind, RunDocument};

/// How a cause is lengthened.
pub(super) struct Lengthening {
    pub(super) target: DelayTarget,
    /// What is lengthened, in a word: the system call, or the lock.
    pub(super) what: String,
    pub(super) kind: ExperimentKind,
    pub(super) primitive: String,
}

/// How to lengthen `subject`:
/// - a lock of the workload's executable (a global: its address is in the symbol table),
///   found or named, by holding it longer at each release;
/// - for a lock that is not a global, the system call its holder blocked in while holding
///   it (lengthening the call lengthens the hold);
/// - a function of the workload's executable by its symbol, at its entry;
/// - a system call it names (`fdatasync`, or a wait row's "disk I/O (fdatasync …) in
///   journal_append").
///
/// A kernel lock found by its symbol is a global one: lengthening it delays every process
/// that takes it after the workload waited. It is lengthened only when the user named it
/// (`named`), never because a stored finding (which whoever writes the store can forge)
/// says so.
pub(super) fn lengthenable(
    doc: &RunDocument,
    exe: Option<&Executable>,
    subject: &str,
    named: bool,
) -> Option<Lengthening> {
    let finding = doc.findings.iter().find(|f| f.subject == subject);
    let is_lock = finding.is_some_and(|f| f.kind == FindingKind::LockContention);
    if let Some((exe, address)) = exe.and_then(|e| Some((e, e.global(subject)?))) {
        return Some(Lengthening {
            target: DelayTarget::UserLock {
                exe: exe.path.clone(),
                address,
            },
            what: subject.into(),
            kind: ExperimentKind::Lock,
            primitive: format!(
                "{subject}'s hold lengthened at each release (pthread unlock interposed with \
                 LD_PRELOAD)"
            ),
        });
    }
    if let Some((lock, how)) =
        kernel_lock(subject).filter(|(lock, _)| named || !matches!(lock, KernelLock::Address(_)))
    {
        return Some(Lengthening {
            target: DelayTarget::KernelLock(lock),
            what: subject.into(),
            kind: ExperimentKind::KernelLock,
            primitive: format!(
                "{subject}'s hold lengthened where a waiter gets it ({how}; BPF spin at \
                 lock:contention_end, at most 200 µs)"
            ),
        });
    }
    if let Some(f) = finding.filter(|_| is_lock) {
        // The holder's own wait, measured: the system call it was blocked in under the lock.
        let FindingDetails::Lock(lock) = &f.details else {
            return None;
        };
        let wait = lock
            .holder_waits
            .first()
            .filter(|w| w.share >= HOLDER_WAIT_SHARE)?;
        let HeldWait::Syscall(call) = &wait.on else {
            return None;
        };
        let nr = scalprof_symbolize::locks::syscall_number(call)?;
        let call = call.clone();
        let (target, how) = syscall_delay(exe, &call, nr);
        return Some(Lengthening {
            target,
            primitive: format!(
                "{subject}'s hold lengthened through the {call} its holder makes under it \
                 ({how})"
            ),
            kind: ExperimentKind::Lock,
            what: call,
        });
    }
    if let Some(how) = exe.and_then(|e| function(e, subject)) {
        return Some(how);
    }
    let (call, nr) = syscall_of(doc, subject)?;
    let (target, how) = syscall_delay(exe, &call, nr);
    Some(Lengthening {
        target,
        primitive: format!("{call} lengthened where it returns ({how})"),
        kind: ExperimentKind::Syscall,
        what: call,
    })
}

/// How a system call is lengthened: a sleep of a dynamically linked workload by sleeping
/// longer (the interposer), which takes no CPU, as the sleep itself takes none; anything
/// else by a BPF spin where it returns, which takes a CPU (on busy CPUs, the workers').
fn syscall_delay(exe: Option<&Executable>, call: &str, nr: u32) -> (DelayTarget, &'static str) {
    let sleep = matches!(call, "nanosleep" | "clock_nanosleep");
    if sleep && exe.is_some_and(|e| e.is_dynamic()) {
        return (
            DelayTarget::Sleeps,
            "a sleep after each sleep call, nanosleep, clock_nanosleep and usleep interposed \
             with LD_PRELOAD: no CPU taken",
        );
    }
    (DelayTarget::Syscall(nr), "BPF spin at sys_exit")
}

/// A function of the workload's executable by its symbol, lengthened at its entry.
fn function(exe: &Executable, subject: &str) -> Option<Lengthening> {
    let svma = exe.elf.symbol_address(subject)?;
    let offset = exe.elf.svma_to_file_offset(svma)?;
    Some(Lengthening {
        target: DelayTarget::Function {
            exe: exe.path.clone(),
            offset,
        },
        what: subject.into(),
        kind: ExperimentKind::Function,
        primitive: format!(
            "{subject} lengthened at its entry (BPF uprobe: every call traps into the kernel, \
             the control's too)"
        ),
    })
}

/// A kernel lock `subject` names: the workload's own `mmap_lock` or fd table lock, or a
/// static lock by its kernel symbol; with how it is found.
fn kernel_lock(subject: &str) -> Option<(KernelLock, &'static str)> {
    match subject {
        "mmap_lock" => return Some((KernelLock::MmapLock, "the workload's mm->mmap_lock")),
        "files_struct.file_lock" => {
            return Some((KernelLock::FdTable, "the workload's files->file_lock"))
        }
        _ => {}
    }
    let syms = std::fs::read_to_string("/proc/kallsyms").ok()?;
    syms.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (address, kind, name) = (f.next()?, f.next()?, f.next()?);
        let data = matches!(kind, "d" | "D" | "b" | "B");
        let address = u64::from_str_radix(address, 16).ok().filter(|a| *a != 0)?;
        (data && name == subject && f.next().is_none())
            .then_some((KernelLock::Address(address), "its kernel symbol"))
    })
}

/// The workload's executable, read for its globals' addresses.
pub(super) struct Executable {
    path: PathBuf,
    elf: scalprof_debuginfo::ElfInfo,
}

impl Executable {
    /// Whether the dynamic loader starts it (a PT_INTERP program header), so that
    /// `LD_PRELOAD` reaches its libc calls.
    fn is_dynamic(&self) -> bool {
        scalprof_debuginfo::elf::has_interpreter(&self.path).unwrap_or(false)
    }

    pub(super) fn open(command: &[String], doc: &RunDocument) -> Option<Executable> {
        let argv0 = substitute(command, doc.sweep.parameter.as_str(), 1)
            .into_iter()
            .next()?;
        let path = scalprof_collect::resolve_program(&argv0).ok()?;
        Some(Executable {
            elf: scalprof_debuginfo::ElfInfo::open(&path).ok()?,
            path,
        })
    }

    /// A global's link-time address (the interposer adds the load bias).
    fn global(&self, name: &str) -> Option<u64> {
        self.elf.object_address(name)
    }
}

/// The system call `subject` is: a finding's row of waits in one (its name written by
/// [`CallWait`]), or a call named as such (`fdatasync`).
fn syscall_of(doc: &RunDocument, subject: &str) -> Option<(String, u32)> {
    let finding = doc.findings.iter().find(|f| f.subject == subject);
    let call = match finding.map(|f| &f.details) {
        Some(FindingDetails::Lock(d)) => CallWait::call_in(&d.lock_type, subject)?,
        Some(_) => return None,
        None => subject,
    };
    Some((
        call.to_string(),
        scalprof_symbolize::locks::syscall_number(call)?,
    ))
}

/// A cause this scalprof cannot lengthen, said as such.
pub(super) fn not_lengthened(doc: &RunDocument, subject: &str, point: u64) -> Experiment {
    let finding = doc.findings.iter().find(|f| f.subject == subject);
    let kind = finding.map(|f| f.kind);
    let global = matches!(kernel_lock(subject), Some((KernelLock::Address(_), _)));
    let cpu_wait = finding.is_some_and(
        |f| matches!(&f.details, FindingDetails::Lock(d) if d.lock_type == LockKind::CpuWait),
    );
    let why = match finding.map(|f| f.kind) {
        _ if global => {
            "a global kernel lock is lengthened only when named with --cause: the delay holds \
             it longer for every process that takes it after the workload waited, so a \
             stored finding alone does not choose it"
        }
        Some(FindingKind::LockContention) => {
            "a lock is lengthened when it is a global of the workload's executable (a pthread \
             mutex, rwlock or spinlock), the workload's mmap_lock or fd table lock, a kernel \
             lock with a symbol, or through a system call its holder makes under it; this \
             one is none of them (a kernel lock of a file or an object, such as i_rwsem, has \
             an address no symbol gives)"
        }
        Some(FindingKind::BlockedWait) if cpu_wait => {
            "a wait for a CPU has no call to lengthen: it comes from more runnable threads \
             than CPUs"
        }
        Some(FindingKind::FalseSharing) => {
            "false sharing has no duration to lengthen: pad the fields and compare the runs"
        }
        _ => {
            "neither a system call nor a global or a function of the workload's executable \
             by that name: this scalprof lengthens those"
        }
    };
    Experiment {
        subject: subject.into(),
        kind: ExperimentKind::NotLengthened(kind),
        point,
        primitive: String::new(),
        delays_ns: Vec::new(),
        throughput: Vec::new(),
        occurrences_per_op: 0.0,
        predicted_slowdown: 0.0,
        burn_slowdown: 0.0,
        measured_slowdown: [0.0, 0.0],
        slope: None,
        verdict: Verdict::NotLengthened,
        reason: why.into(),
        calibrated_what_if: None,
        hold: None,
        held_share: None,
        saturation_slowdown: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// journal_sync recorded on 16 CPUs: its journal_lock's holder waits in fdatasync.
    fn journal_sync() -> RunDocument {
        let db = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scalprof/tests/fixtures/corpus16.db");
        let store = scalprof_store::Store::open_read_only(&db).unwrap();
        let id = store.resolve("journal_sync").unwrap();
        crate::document(&store, id).unwrap()
    }

    #[test]
    fn the_holder_s_system_call_is_read_from_the_lock_s_details_not_its_sentence() {
        let mut doc = journal_sync();
        let lengthened = |doc: &RunDocument| {
            lengthenable(doc, None, "journal_lock", false).map(|l| (l.what, l.kind))
        };
        let before = lengthened(&doc);
        assert_eq!(
            before,
            Some(("fdatasync".to_string(), ExperimentKind::Lock))
        );
        // Reworded (or translated) evidence changes nothing verify does.
        for f in &mut doc.findings {
            f.evidence = "reworded".into();
            f.suggestion = "reworded".into();
        }
        assert_eq!(lengthened(&doc), before);
    }
}
