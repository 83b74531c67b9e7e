//! The BPF lock tracer on real workloads (root or CAP_BPF needed; CI runs as root).

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]
#![cfg(feature = "bpf")]

use std::path::{Path, PathBuf};
use std::process::Command;

use scalprof_collect::exec::{self, Attach, ExecSpec};
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::locks::{LockConfig, LockTracer, RawLocks, ResidentTracer};

/// The workloads measure contention between CPUs: the tests must not run at the same time.
fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "loading BPF programs needs root; as another user, cargo test lists this test as ignored unless CI is set"
    );
}

fn build(dir: &Path, name: &str) -> PathBuf {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&out)
        .arg(corpus.join(format!("{name}.c")))
        .status()
        .unwrap();
    assert!(st.success());
    out
}

fn trace(bin: &Path, threads: &str, dir: &Path) -> RawLocks {
    let spec = ExecSpec {
        argv: vec![bin.display().to_string(), threads.into()],
        env: vec![("CORPUS_SCALE".into(), "1".into())],
        stdout: dir.join("out"),
        stderr: dir.join("err"),
        timeout: None,
        attached: Vec::new(),
        inherit: Vec::new(),
    };
    let mut tracer = LockTracer::new(LockConfig::default());
    let r = exec::run_with(
        &spec,
        &Interrupt::manual(),
        &mut [&mut tracer as &mut dyn Attach],
    )
    .unwrap();
    assert_eq!(r.exit_code, Some(0));
    tracer.take().expect("lock data")
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn futex_waits_of_a_global_mutex_are_counted_with_stack_copies() {
    require_root();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "hash_global_mutex");
    let raw = trace(&bin, "2", dir.path());
    // glibc's mutex slow path waits with FUTEX_WAIT (op 0).
    let mutex_waits = |r: &RawLocks| {
        r.user
            .iter()
            .filter(|u| u.op == 0)
            .map(|u| u.count)
            .sum::<u64>()
    };
    // How often two threads collide on the one mutex depends on how they were scheduled:
    // from about 90 (a CI run) to thousands. Without tracing it would be none.
    assert!(mutex_waits(&raw) > 20, "futex waits: {:?}", raw.user);
    assert!(!raw.snapshots.is_empty());
    let tgid = raw.user[0].tgid;
    let maps = &raw.maps[&tgid];
    assert!(
        maps.iter().any(|m| m.path == bin.display().to_string()),
        "{maps:?}"
    );
    // One thread never waits on a mutex (main still waits in pthread_join, FUTEX_WAIT_BITSET).
    let raw1 = trace(&bin, "1", dir.path());
    assert_eq!(mutex_waits(&raw1), 0, "{:?}", raw1.user);
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn kernel_contention_of_mmap_churn_is_aggregated_with_stacks() {
    require_root();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let bin = build(dir.path(), "mmap_churn");
    let raw = trace(&bin, "2", dir.path());
    let total: u64 = raw.kernel.iter().map(|k| k.count).sum();
    assert!(total > 100, "kernel contentions: {}", raw.kernel.len());
    assert!(raw.kernel.iter().any(|k| !k.stack.is_empty()));
    // Every mmap_lock hold timed (the default times holds): 2 threads × 20000 mmaps and
    // munmaps at least, in one process, the writes among them; each hold counted once
    // in its buckets.
    if std::path::Path::new("/sys/kernel/tracing/events/mmap_lock").exists() {
        let holds: u64 = raw.kernel_holds.iter().map(|h| h.count).sum();
        assert!(holds >= 80_000, "mmap_lock holds: {:?}", raw.kernel_holds);
        assert!(raw
            .kernel_holds
            .iter()
            .any(|h| h.write && h.count >= 40_000));
        for h in &raw.kernel_holds {
            assert_eq!(h.buckets.iter().sum::<u64>(), h.count, "{h:?}");
            assert!(h.max_ns > 0 && h.total_ns >= h.max_ns, "{h:?}");
        }
    }
}

/// The tracer `scalprof watch` keeps loaded and attaches window by window: each window has
/// its own waits only, and a wait begun in one window and ended in the next, its end
/// unseen across the detach, is dropped rather than counted with the gap in it.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_resident_tracer_counts_each_window_alone_and_no_wait_across_a_detach() {
    use std::io::Write;
    use std::time::Duration;
    require_root();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // Blocks in read(0) until the test writes a byte: the test decides when each wait
    // begins and ends.
    let bin = crate::common::compile(
        dir.path(),
        "reader",
        "#include <unistd.h>\n\
         int main(void) { char c; while (read(0, &c, 1) == 1) {} return 0; }\n",
    );
    let mut child = Command::new(&bin)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let pid = child.id() as i32;
    let ms = |n| std::thread::sleep(Duration::from_millis(n));
    let mut poke = || {
        input.write_all(b"x").unwrap();
        input.flush().unwrap();
    };
    // The reads (system call 0) on its standard input.
    let reads = |r: &RawLocks| -> (u64, u64) {
        r.syscalls
            .iter()
            .filter(|s| s.tgid == pid as u32 && s.op == 0 && s.uaddr == 0)
            .fold((0, 0), |(n, max), s| (n + s.count, max.max(s.max_ns)))
    };
    let mut tracer = ResidentTracer::new(LockConfig::default());
    tracer.begin(pid, &[], &LockConfig::default()).unwrap();
    ms(50);
    poke(); // ends the read begun before the attach (not seen), begins one
    ms(50);
    poke(); // ends a read of ~50 ms, begins the one that will cross the detach
    ms(50);
    let first = tracer.end().expect("the first window's tables");
    ms(400);
    tracer.begin(pid, &[], &LockConfig::default()).unwrap();
    ms(50);
    poke(); // ends the read begun in the first window, 450 ms and more ago
    ms(50);
    poke(); // ends a read of ~50 ms
    ms(50);
    let second = tracer.end().expect("the second window's tables");
    drop(input);
    child.wait().unwrap();
    let (n1, max1) = reads(&first);
    let (n2, max2) = reads(&second);
    assert_eq!(n1, 1, "first window: {:?}", first.syscalls);
    assert!(max1 < 300_000_000, "first window's read: {max1} ns");
    assert_eq!(n2, 1, "second window: {:?}", second.syscalls);
    assert!(
        max2 < 300_000_000,
        "a read across the detach was counted: {max2} ns ({:?})",
        second.syscalls
    );
}
