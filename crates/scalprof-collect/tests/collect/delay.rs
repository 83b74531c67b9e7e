//! The BPF delay injector on a real workload (root or CAP_BPF needed; CI runs as root).

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]
#![cfg(feature = "bpf")]

use scalprof_collect::delay::{DelaySpec, DelayTarget, Delayer, KernelLock};
use scalprof_collect::exec::{self, Attach, ExecSpec};
use scalprof_collect::interrupt::Interrupt;

use crate::common::{compile, exclusive};

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "loading BPF programs needs root; as another user, cargo test lists this test as ignored unless CI is set"
    );
}

/// Runs `argv` once with `target` lengthened by `delay_ns` (the delayer's environment
/// added): its wall time and what the injector counted.
fn run_delayed(
    argv: Vec<String>,
    target: DelayTarget,
    delay_ns: u64,
    dir: &std::path::Path,
) -> (f64, scalprof_collect::delay::DelayCounts) {
    let mut delayer = Delayer::new(DelaySpec { target, delay_ns });
    let (env, inherit) = delayer.environment(dir).unwrap();
    let spec = ExecSpec {
        argv,
        env,
        stdout: dir.join("out"),
        stderr: dir.join("err"),
        timeout: None,
        attached: Vec::new(),
        inherit,
    };
    let r = exec::run_with(
        &spec,
        &Interrupt::manual(),
        &mut [&mut delayer as &mut dyn Attach],
    )
    .unwrap();
    assert_eq!(r.exit_code, Some(0));
    (r.wall_s, delayer.take().expect("the injector's counts"))
}

/// x86-64's write(2).
const NR_WRITE: u32 = 1;

/// `dd` copying 400 single bytes (400 reads, 400 writes) with `write` lengthened by
/// `delay_ns`: its wall time and what the injector counted.
fn dd_with(delay_ns: u64, dir: &std::path::Path) -> (f64, scalprof_collect::delay::DelayCounts) {
    let argv = ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=400"].map(String::from);
    run_delayed(argv.to_vec(), DelayTarget::Syscall(NR_WRITE), delay_ns, dir)
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_delayed_system_call_is_longer_by_the_delay_and_counted() {
    require_root();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let (wall0, control) = dd_with(0, dir.path());
    let (wall1, delayed) = dd_with(250_000, dir.path());
    // 400 writes of a byte, and dd's own report on stderr: a few more.
    assert!((400..460).contains(&control.calls), "{control:?}");
    assert_eq!(control.spun_ns, 0, "{control:?}");
    assert!((400..460).contains(&delayed.calls), "{delayed:?}");
    let asked = delayed.calls * 250_000;
    assert!(
        delayed.spun_ns >= asked && delayed.spun_ns < asked + asked / 5,
        "{delayed:?}"
    );
    // 400 × 250 µs = 0.1 s more, give or take the machine.
    assert!(wall1 - wall0 > 0.08, "{wall0} s, then {wall1} s");
}

/// A program that releases a global mutex 2000 times and a global rwlock 500 times, built
/// as a position-independent executable (the default): the interposer adds the load bias.
/// Returns it with the mutex's and the rwlock's link-time addresses.
fn lock_loop(dir: &std::path::Path) -> (std::path::PathBuf, u64, u64) {
    let bin = compile(
        dir,
        "m",
        "#include <pthread.h>\n\
         pthread_mutex_t the_lock = PTHREAD_MUTEX_INITIALIZER;\n\
         pthread_rwlock_t the_rwlock = PTHREAD_RWLOCK_INITIALIZER;\n\
         int main(void) {\n\
           for (int i = 0; i < 2000; i++) { pthread_mutex_lock(&the_lock); \
           pthread_mutex_unlock(&the_lock); }\n\
           for (int i = 0; i < 500; i++) { pthread_rwlock_rdlock(&the_rwlock); \
           pthread_rwlock_unlock(&the_rwlock); }\n\
           return 0; }\n",
    );
    let nm = std::process::Command::new("nm").arg(&bin).output().unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout);
    let address = |name: &str| {
        let line = nm
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} in nm"));
        u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap()
    };
    (bin.clone(), address("the_lock"), address("the_rwlock"))
}

/// Runs `sh -c BIN` (the interposer must reach the shell's child, and only it counts) with
/// the lock at `address` lengthened by `delay_ns`: the wall time and the counts.
fn run_lengthened(
    dir: &std::path::Path,
    bin: &std::path::Path,
    address: u64,
    delay_ns: u64,
) -> (f64, scalprof_collect::delay::DelayCounts) {
    let argv = vec!["sh".into(), "-c".into(), bin.display().to_string()];
    let exe = bin.to_path_buf();
    run_delayed(argv, DelayTarget::UserLock { exe, address }, delay_ns, dir)
}

// No BPF: the interposer needs no privileges.
#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_delayed_user_lock_is_held_longer_by_the_delay_at_each_release() {
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let (bin, mutex, rwlock) = lock_loop(dir.path());
    let (wall0, control) = run_lengthened(dir.path(), &bin, mutex, 0);
    let (wall1, delayed) = run_lengthened(dir.path(), &bin, mutex, 50_000);
    assert_eq!(control.calls, 2000, "{control:?}");
    assert_eq!(control.spun_ns, 0, "{control:?}");
    assert_eq!(delayed.calls, 2000, "{delayed:?}");
    assert!(delayed.spun_ns >= 2000 * 50_000, "{delayed:?}");
    // 2000 × 50 µs = 0.1 s more.
    assert!(wall1 - wall0 > 0.08, "{wall0} s, then {wall1} s");
    // An rwlock's releases, and none of the mutex's.
    let (_, rw) = run_lengthened(dir.path(), &bin, rwlock, 0);
    assert_eq!(rw.calls, 500, "{rw:?}");
    // A long delay sleeps first and spins only its tail: 500 × 1 ms more wall time, far
    // less CPU spun.
    let (wall2, long) = run_lengthened(dir.path(), &bin, rwlock, 1_000_000);
    assert_eq!(long.calls, 500, "{long:?}");
    assert!(wall2 - wall0 > 0.45, "{wall0} s, then {wall2} s");
    assert!(long.spun_ns < 500 * 600_000, "spun {} ns", long.spun_ns);
}

/// A workload that drops to uid 65534 before its exec (`setpriv`, as a server's start
/// script does) still gets its lock lengthened and counted: the interposer and its
/// counters are descriptors it inherits, where by their paths in scalprof's folder (mode
/// 0700) they were out of its reach: ld.so said "cannot be preloaded", nothing counted.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root to change uid")]
fn a_workload_that_drops_to_another_uid_still_gets_its_lock_lengthened() {
    if which("setpriv").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs setpriv (util-linux)"
        );
        eprintln!("skipped: no setpriv (util-linux) to change uid with");
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // The program's folder must be open to uid 65534, for its exec.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (bin, mutex, _) = lock_loop(dir.path());
    let script = format!(
        "exec setpriv --reuid=65534 --regid=65534 --clear-groups {}",
        bin.display()
    );
    let argv = vec!["sh".into(), "-c".into(), script];
    let exe = bin.clone();
    let target = DelayTarget::UserLock {
        exe,
        address: mutex,
    };
    // The interposer and the outputs in a folder only root may enter, as verify's are.
    let private = dir.path().join("verify");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let (_, counts) = run_delayed(argv, target, 10_000, &private);
    let err = std::fs::read_to_string(private.join("err")).unwrap();
    assert!(!err.contains("cannot be preloaded"), "{err}");
    assert_eq!(counts.calls, 2000, "{counts:?}");
    assert!(counts.spun_ns >= 2000 * 10_000, "{counts:?}");
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Two threads mapping and unmapping pages in a loop: they contend their process's
/// mmap_lock.
fn mmap_loop(dir: &std::path::Path) -> std::path::PathBuf {
    compile(
        dir,
        "mm",
        "#include <pthread.h>\n#include <sys/mman.h>\n\
         static void *work(void *a) { (void)a; for (int i = 0; i < 20000; i++) { \
         void *p = mmap(0, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); \
         ((char *)p)[0] = 1; munmap(p, 1 << 16); } return 0; }\n\
         int main(void) { pthread_t t[2]; for (int i = 0; i < 2; i++) \
         pthread_create(&t[i], 0, work, 0); for (int i = 0; i < 2; i++) \
         pthread_join(t[i], 0); return 0; }\n",
    )
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_delayed_kernel_lock_is_held_longer_where_a_waiter_gets_it() {
    require_root();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let bin = mmap_loop(dir.path());
    let run = |delay_ns| {
        let argv = vec![bin.display().to_string()];
        let target = DelayTarget::KernelLock(KernelLock::MmapLock);
        run_delayed(argv, target, delay_ns, dir.path())
    };
    let (_, control) = run(0);
    assert!(control.calls > 0, "no contended mmap_lock: {control:?}");
    assert_eq!(control.spun_ns, 0);
    // 1 s asked for: capped at 200 µs a contended acquisition.
    let (_, delayed) = run(1_000_000_000);
    assert!(delayed.calls > 0, "{delayed:?}");
    let (lo, hi) = (delayed.calls * 200_000, delayed.calls * 260_000);
    assert!(
        (lo..hi).contains(&delayed.spun_ns),
        "{} contended acquisitions spun {} ns",
        delayed.calls,
        delayed.spun_ns
    );
}

/// A program that calls `step` (a 10 µs spin, kept out of line) 300 times; built here, with
/// the file offset of `step` for its uprobe.
fn function_loop(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let bin = compile(
        dir,
        "f",
        "#include <time.h>\n\
         static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); \
         return t.tv_sec + t.tv_nsec * 1e-9; }\n\
         __attribute__((noinline)) void step(void) { double u = now() + 10e-6; \
         while (now() < u) ; }\n\
         int main(void) { for (int i = 0; i < 300; i++) step(); return 0; }\n",
    );
    let data = std::fs::read(&bin).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let svma = elf
        .symbols()
        .find(|s| s.name() == Ok("step"))
        .expect("step in the symbol table")
        .address();
    let offset = elf
        .segments()
        .find(|s| (s.address()..s.address() + s.size()).contains(&svma))
        .map(|s| svma - s.address() + s.file_range().0)
        .expect("a segment holding step");
    (bin, offset)
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_delayed_function_is_longer_by_the_delay_at_each_call() {
    require_root();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let (exe, offset) = function_loop(dir.path());
    let argv = vec!["sh".into(), "-c".into(), exe.display().to_string()];
    let target = DelayTarget::Function { exe, offset };
    let (base, counts) = run_delayed(argv.clone(), target.clone(), 0, dir.path());
    assert_eq!(counts.calls, 300, "every call counted at zero delay");
    let (slow, counts) = run_delayed(argv, target, 200_000, dir.path());
    assert_eq!(counts.calls, 300);
    // 300 calls × 200 µs: 60 ms more, and spun.
    assert!(slow - base > 0.05, "{base} s, then {slow} s with the delay");
    assert!(counts.spun_ns >= 300 * 200_000, "{counts:?}");
}
