//! The BPF delay injector on a real workload (root or CAP_BPF needed; CI runs as root).
#![cfg(feature = "bpf")]

use scalprof_collect::delay::{DelaySpec, Delayer};
use scalprof_collect::exec::{self, Attach, ExecSpec};
use scalprof_collect::interrupt::Interrupt;

fn can_inject() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run as root to load BPF"
    );
    eprintln!("skipped: loading BPF programs needs root");
    false
}

/// x86-64's write(2).
const NR_WRITE: u32 = 1;

/// `dd` copying 400 single bytes (400 reads, 400 writes) with `write` lengthened by
/// `delay_ns`: its wall time and what the injector counted.
fn dd_with(delay_ns: u64, dir: &std::path::Path) -> (f64, scalprof_collect::delay::DelayCounts) {
    let spec = ExecSpec {
        argv: ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=400"]
            .map(String::from)
            .to_vec(),
        env: Vec::new(),
        stdout: dir.join("out"),
        stderr: dir.join("err"),
        timeout: None,
        attached: Vec::new(),
    };
    let mut delayer = Delayer::new(DelaySpec {
        syscall_nr: NR_WRITE,
        delay_ns,
    });
    let r = exec::run_with(
        &spec,
        &Interrupt::manual(),
        &mut [&mut delayer as &mut dyn Attach],
    )
    .unwrap();
    assert_eq!(r.exit_code, Some(0));
    (r.wall_s, delayer.take().expect("the injector's counts"))
}

#[test]
fn a_delayed_system_call_is_longer_by_the_delay_and_counted() {
    if !can_inject() {
        return;
    }
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
