//! The hold times of user locks, timed by the interposer in a real program (no privileges
//! needed: it is preloaded, not attached).

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

use scalprof_collect::delay::{HoldRecords, HoldTimer};
use scalprof_collect::exec::{self, ExecSpec};
use scalprof_collect::interrupt::Interrupt;
use scalprof_model::locks::{HoldTimes, UserHoldRaw};

use crate::common;

/// A program that holds `held` 100 times for 200 µs each (spinning), holds `waited` 5
/// times across a 20 ms condition wait that times out, and forks a child that takes
/// `held` 7 times; it prints the two locks' addresses.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t waited = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
    printf("%lx %lx\n", (unsigned long)&held, (unsigned long)&waited);
    fflush(stdout);
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&held);
        double until = now() + 200e-6;
        while (now() < until) ;
        pthread_mutex_unlock(&held);
    }
    for (int i = 0; i < 5; i++) {
        pthread_mutex_lock(&waited);
        struct timespec t; clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 20000000; if (t.tv_nsec >= 1000000000) { t.tv_sec++; t.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&never, &waited, &t);
        pthread_mutex_unlock(&waited);
    }
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < 7; i++) { pthread_mutex_lock(&held); pthread_mutex_unlock(&held); }
        return 0;
    }
    waitpid(child, NULL, 0);
    return 0;
}
"#;

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn holds_are_timed_per_lock_and_process_without_the_condition_waits() {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile(dir.path(), "holds", PROGRAM);
    let timer = HoldTimer::prepare(dir.path()).unwrap();
    let mut spec = timer.timed(&spec_of(dir.path(), &[&bin.display().to_string()]));
    // Every hold timed (a sweep times one in 64, at random): this counts them.
    spec.env.push(("SCALPROF_HOLDS_EVERY".into(), "1".into()));
    let r = exec::run_with(&spec, &Interrupt::manual(), &mut []).unwrap();
    assert_eq!(r.exit_code, Some(0));
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    let mut words = out.split_whitespace();
    let mut address = || u64::from_str_radix(words.next().unwrap(), 16).unwrap();
    let (held, waited) = (address(), address());
    let records = timer.read(&spec.stderr);
    assert_eq!(records.processes, 2, "the program and its forked child");
    assert_eq!(records.lost(), None, "{records:?}");
    let holds = records.holds;
    let of =
        |uaddr: u64| -> Vec<&UserHoldRaw> { holds.iter().filter(|h| h.uaddr == uaddr).collect() };
    // The parent's 100 and the child's 7, each under its own process.
    let mut counts: Vec<u64> = of(held).iter().map(|h| h.acquisitions).collect();
    counts.sort_unstable();
    assert_eq!(counts, [7, 100], "{holds:?}");
    let parent = of(held)
        .into_iter()
        .find(|h| h.acquisitions == 100)
        .unwrap();
    let t = HoldTimes::of(parent.acquisitions, parent.holds_ns.clone()).unwrap();
    assert_eq!(
        t.sampled, 100,
        "with SCALPROF_HOLDS_EVERY=1 every hold is timed"
    );
    assert!(
        (200_000..2_000_000).contains(&t.p50_ns),
        "a 200 µs hold timed as {} ns",
        t.p50_ns
    );
    // The 20 ms condition waits gave the lock up: not part of its holds.
    let w = of(waited);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].acquisitions, 5);
    let t = HoldTimes::of(5, w[0].holds_ns.clone()).unwrap();
    assert!(t.p99_ns < 5_000_000, "holds across condition waits: {t:?}");
}

/// A plain spec of `argv` with its outputs in `dir`.
fn spec_of(dir: &Path, argv: &[&str]) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        env: Vec::new(),
        stdout: dir.join("out"),
        stderr: dir.join("err"),
        timeout: None,
        attached: Vec::new(),
        inherit: Vec::new(),
    }
}

/// Runs `argv` with its holds timed, the interposer in a folder of `dir` only root may
/// enter (as scalprof's outputs are); returns what was recorded and the program's stdout
/// and stderr.
fn timed_run(dir: &Path, argv: &[&str]) -> (HoldRecords, String, String) {
    let private = dir.join("outputs");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let timer = HoldTimer::prepare(&private).unwrap();
    let spec = timer.timed(&spec_of(dir, argv));
    let r = exec::run_with(&spec, &Interrupt::manual(), &mut []).unwrap();
    let out = std::fs::read_to_string(&spec.stdout).unwrap();
    let err = std::fs::read_to_string(&spec.stderr).unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}: {err}");
    (timer.read(&spec.stderr), out, err)
}

/// The acquisitions recorded of the lock at `uaddr`, in every process.
fn taken(records: &HoldRecords, uaddr: u64) -> u64 {
    records
        .holds
        .iter()
        .filter(|h| h.uaddr == uaddr)
        .map(|h| h.acquisitions)
        .sum()
}

/// The lock addresses a program printed, one a line.
fn addresses(out: &str) -> Vec<u64> {
    out.lines()
        .map(|l| u64::from_str_radix(l.trim(), 16).unwrap())
        .collect()
}

/// Takes `lock` N times (argv[2]) in each of 2 threads and prints its address; with
/// argv[1] `drop` it first becomes uid 65534 (as a server dropping root does). Then, if
/// more words follow, it execs itself with them (argv[2] as its name), after closing the
/// descriptor of scalprof's records area with argv[1] `close-area`, every descriptor
/// above stderr with `close-all`.
const STAGES: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long n;
static void *take(void *unused) {
    (void)unused;
    for (long i = 0; i < n; i++) { pthread_mutex_lock(&lock); pthread_mutex_unlock(&lock); }
    return 0;
}
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    if (!strcmp(argv[1], "drop") && (setgid(65534) != 0 || setuid(65534) != 0)) return 3;
    n = atol(argv[2]);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, take, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    printf("%lx\n", (unsigned long)&lock);
    fflush(stdout);
    if (argc < 4)
        return 0;
    if (!strcmp(argv[1], "close-area")) {
        const char *holds = getenv("SCALPROF_HOLDS");
        if (!holds) return 4;
        close(atoi(holds));
    }
    if (!strcmp(argv[1], "close-all"))
        for (int fd = 3; fd < 1024; fd++) close(fd);
    execv("/proc/self/exe", argv + 2);
    return 5;
}
"#;

/// A program that drops to uid 65534 before it takes its locks, then execs (as PostgreSQL
/// started by root does) still has its holds timed in both images: the records are
/// memory it maps, and the interposer, in a folder of mode 0700, a descriptor it
/// inherits, where by their paths both were out of its reach.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root to change uid")]
fn a_workload_that_drops_to_another_uid_keeps_its_hold_times() {
    let dir = tempfile::tempdir().unwrap();
    // The program's folder must be open to uid 65534, for its exec.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let bin = common::compile(dir.path(), "stages", STAGES);
    let bin = bin.display().to_string();
    // As 65534: 300 acquisitions in each thread, then, exec'd, 40.
    let (records, out, err) = timed_run(dir.path(), &[&bin, "drop", "300", "then", "40"]);
    assert!(!err.contains("cannot be preloaded"), "{err}");
    assert_eq!(records.lost(), None, "{records:?}");
    assert_eq!(records.processes, 2, "both images: {records:?}");
    let a = addresses(&out);
    assert_eq!(a.len(), 2, "{out}");
    if a[0] == a[1] {
        assert_eq!(taken(&records, a[0]), 680, "{records:?}");
    } else {
        assert_eq!(taken(&records, a[0]), 600, "{records:?}");
        assert_eq!(taken(&records, a[1]), 80, "{records:?}");
    }
}

/// Records outlive an exec in the same pid (the file `holds.PID`, opened with O_TRUNC,
/// kept only the last image's), and a process whose descriptors were closed before its
/// exec says that it timed nothing: its own line when only the area's was closed, ld.so's
/// when the interposer's was too; scalprof counts both.
#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_process_that_cannot_reach_the_records_is_counted_not_silent() {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile(dir.path(), "stages", STAGES);
    let bin = bin.display().to_string();
    // 100 each in the first image; 20 in the second, which closes the area before its
    // exec; 5 in the third, which closes everything before its exec; 1 in the fourth.
    let (records, out, err) = timed_run(
        dir.path(),
        &[
            &bin,
            "keep",
            "100",
            "close-area",
            "20",
            "close-all",
            "5",
            "keep",
            "1",
        ],
    );
    let a = addresses(&out);
    assert_eq!(a.len(), 4, "{out}");
    let recorded: u64 = records.holds.iter().map(|h| h.acquisitions).sum();
    assert_eq!(recorded, 240, "{records:?}");
    assert_eq!(records.processes, 2, "{records:?}");
    assert_eq!(records.unmapped, 2, "{records:?}\n{err}");
    assert!(
        err.contains("scalprof: no hold times from pid")
            && err.contains("was closed before this program's exec")
            && err.contains("cannot be preloaded"),
        "{err}"
    );
    let lost = records.lost().unwrap();
    assert!(
        lost.starts_with("2 processes of the workload timed no holds"),
        "{lost}"
    );
}

/// A workload under a file-size limit (`ulimit -f`) is not killed by its hold records
/// (SIGXFSZ, when each process wrote them to a file): they are memory.
#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_file_size_limit_on_the_workload_does_not_stop_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile(dir.path(), "stages", STAGES);
    // 1 M acquisitions in each thread: 8 k samples, 128 KiB of records, past a limit of 1 KiB.
    let script = format!("ulimit -f 1 && exec {} keep 1000000", bin.display());
    let (records, out, _) = timed_run(dir.path(), &["sh", "-c", &script]);
    let a = addresses(&out);
    assert_eq!(taken(&records, a[0]), 2_000_000, "{records:?}");
    let samples: usize = records.holds.iter().map(|h| h.holds_ns.len()).sum();
    assert!(samples > 7_000, "{samples} samples");
    assert_eq!(records.lost(), None, "{records:?}");
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
/// The sampling draw (gaps.c): a gap to the next timed acquisition, geometric, so that each
/// is timed with a chance of 1/64 whatever the others were.
fn one_acquisition_in_64_is_timed_at_random() {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile(dir.path(), "stages", STAGES);
    let (records, out, _) = timed_run(dir.path(), &[bin.to_str().unwrap(), "keep", "1000000"]);
    let a = addresses(&out);
    let taken = taken(&records, a[0]);
    let timed: usize = records
        .holds
        .iter()
        .filter(|h| h.uaddr == a[0])
        .map(|h| h.holds_ns.len())
        .sum();
    // 2 M acquisitions, each timed with a chance of 1/64: 31,250 expected, with a
    // binomial spread of 175; 10% either way is over 17 of them.
    assert_eq!(taken, 2_000_000, "{records:?}");
    let expected = taken as f64 / 64.0;
    assert!(
        (timed as f64 - expected).abs() < 0.1 * expected,
        "{timed} holds timed of {taken} acquisitions, where one in 64 is {expected}"
    );
}
