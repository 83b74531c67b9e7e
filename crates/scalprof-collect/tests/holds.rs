//! The hold times of user locks, timed by the interposer in a real program (no privileges
//! needed: it is preloaded, not attached).

use scalprof_collect::delay::HoldTimer;
use scalprof_collect::exec::{self, ExecSpec};
use scalprof_collect::interrupt::Interrupt;
use scalprof_model::locks::{HoldTimes, UserHoldRaw};

mod common;

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
fn holds_are_timed_per_lock_and_process_without_the_condition_waits() {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::compile(dir.path(), "holds", PROGRAM);
    let (timer, env) = HoldTimer::prepare(dir.path(), "p2-r1-traced").unwrap();
    let spec = ExecSpec {
        argv: vec![bin.display().to_string()],
        env,
        stdout: dir.path().join("out"),
        stderr: dir.path().join("err"),
        timeout: None,
        attached: Vec::new(),
    };
    let r = exec::run_with(&spec, &Interrupt::manual(), &mut []).unwrap();
    assert_eq!(r.exit_code, Some(0));
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    let mut words = out.split_whitespace();
    let mut address = || u64::from_str_radix(words.next().unwrap(), 16).unwrap();
    let (held, waited) = (address(), address());
    let holds = timer.read();
    assert!(
        !dir.path().join("p2-r1-traced.holds").exists(),
        "the records are removed once read"
    );
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
    assert_eq!(t.sampled, 100, "the first holds of a lock are all timed");
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
