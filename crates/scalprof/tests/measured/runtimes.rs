//! Runtimes as their users know them, on real runtimes (`corpus/runtimes/`): a Go program's
//! sync.Mutex by its variable, a Java synchronized method by its class, CPython's GIL by
//! its name; the runtimes' own service threads never a cause; each pathology's fixed twin
//! without a lock finding. Go, a JDK and Python come from apt in CI (`.ci/run`); elsewhere
//! a missing one skips its test, and says so.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::sync::OnceLock;

use scalprof_model::locks::{LockKind, ProbeFamily, CPU_WAIT};
use scalprof_model::{FindingDetails, FindingKind, RunDocument};

use crate::common::corpus::{
    cause_share, json, last_budget, last_point, read_run, require_profiling,
};
use crate::common::{exclusive, scalprof};

/// The runtime programs' sources.
fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus/runtimes")
}

/// Whether `tool` runs (`tool version`-like `args`); in CI it must.
fn have(tool: &str, args: &[&str]) -> bool {
    let ok = StdCommand::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have {tool}: .ci/run installs it (golang-go, default-jdk-headless, python3)"
        );
        eprintln!("skipped: {tool} is not installed");
    }
    ok
}

/// Where the runtime programs are built, once per test binary.
fn build_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("runtimes");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// Builds a Go program of the corpus (`go build`, its own cache in the build directory).
fn go_program(name: &str) -> PathBuf {
    go_build(name, name, &[])
}

/// Builds the corpus's Go program `name` as `out` with extra `go build` flags.
fn go_build(name: &str, out: &str, flags: &[&str]) -> PathBuf {
    let out = build_dir().join(out);
    let status = StdCommand::new("go")
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(sources().join(format!("{name}.go")))
        .env("GOCACHE", build_dir().join("gocache"))
        .env("GOPATH", build_dir().join("gopath"))
        .status()
        .unwrap();
    assert!(status.success(), "go build {name} failed");
    out
}

/// Compiles the Java programs of the corpus into the build directory (once).
fn java_classes() -> &'static Path {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status = StdCommand::new("javac")
            .arg("-d")
            .arg(build_dir())
            .arg(sources().join("SyncCounter.java"))
            .arg(sources().join("AdderCounter.java"))
            .arg(sources().join("LockCounter.java"))
            .status()
            .unwrap();
        assert!(status.success(), "javac failed");
    });
    build_dir()
}

/// Sweeps `command` at 1 and 2 threads (3 repeats) into a fresh store: its run document.
fn sweep(command: &[&str]) -> RunDocument {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("run.json");
    scalprof(&dir.path().join("runs.db"))
        .args(["run", "-t", "1,2", "--repeat", "3", "--json"])
        .arg(&json_path)
        .arg("--")
        .args(command)
        .assert()
        .success();
    read_run(&json_path)
}

/// The first cause of the last point's budget.
fn top_cause(doc: &RunDocument) -> String {
    last_budget(doc)
        .causes
        .first()
        .map_or_else(|| "(none)".into(), |c| c.subject.clone())
}

/// No lock or wait of the runtime's own threads is a cause of 10% or more, and the
/// runtime was recognized. The runtime's code on CPU is the program's work (Go's map
/// insert, `runtime.mapassign_fast64`, 10% once on go_mutex at 2 threads) and may be one.
fn runtime_idles_are_not_causes(doc: &RunDocument, runtime: &str, idle: &[&str]) {
    let budget = last_budget(doc);
    let waits = budget.causes.iter().filter(|c| {
        matches!(
            c.kind,
            FindingKind::LockContention | FindingKind::BlockedWait
        )
    });
    for c in waits {
        assert!(
            !(idle.iter().any(|i| c.subject.contains(i)) && c.share >= 0.10),
            "the runtime's own wait {} is {:.0}% of the budget: {}",
            c.subject,
            c.share * 100.0,
            json(budget)
        );
    }
    let locks = last_point(doc).locks.as_ref().expect("a lock table");
    assert!(
        locks.runtimes.iter().any(|r| r.runtime.as_str() == runtime),
        "{runtime} not recognized: {}",
        json(&locks.runtimes)
    );
}

/// The findings that blame a lock or a wait.
fn lock_findings(doc: &RunDocument) -> Vec<&str> {
    doc.findings
        .iter()
        .filter(|f| {
            matches!(
                f.kind,
                FindingKind::LockContention | FindingKind::BlockedWait
            )
        })
        .map(|f| f.subject.as_str())
        .collect()
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_go_mutex_is_named_by_its_variable_and_the_function_that_locks_it() {
    require_profiling();
    if !have("go", &["version"]) {
        return;
    }
    let _turn = exclusive();
    let doc = sweep(&[go_program("go_mutex").to_str().unwrap(), "{threads}"]);
    assert_eq!(top_cause(&doc), "main.mu", "{}", json(last_budget(&doc)));
    let f = doc
        .findings
        .iter()
        .find(|f| f.subject == "main.mu")
        .expect("main.mu is a finding");
    let FindingDetails::Lock(lock) = &f.details else {
        panic!("not a lock's details: {}", json(f));
    };
    assert_eq!(lock.lock_type, LockKind::GoMutex, "{}", json(f));
    assert!(
        lock.callers.iter().any(|c| c.function == "main.worker"),
        "{}",
        json(f)
    );
    assert!(f.suggestion.contains("sync.Mutex"), "{}", f.suggestion);
    runtime_idles_are_not_causes(&doc, "go", &["runtime.", "futex@runtime"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn sharded_go_mutexes_give_no_lock_finding() {
    require_profiling();
    if !have("go", &["version"]) {
        return;
    }
    let _turn = exclusive();
    let doc = sweep(&[go_program("go_sharded").to_str().unwrap(), "{threads}"]);
    assert_eq!(
        lock_findings(&doc),
        Vec::<&str>::new(),
        "{}",
        json(&doc.findings)
    );
    runtime_idles_are_not_causes(&doc, "go", &["runtime.", "futex@runtime"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_channel_funnel_names_the_channel_and_the_goroutine_at_its_other_end() {
    require_profiling();
    if !have("go", &["version"]) {
        return;
    }
    let _turn = exclusive();
    let doc = sweep(&[go_program("go_funnel").to_str().unwrap(), "{threads}"]);
    let budget = last_budget(&doc);
    let top = "chan main.produce → main.collect";
    // The channel is the first cause, or the second after the wait for a CPU: with the
    // probes in bursts the program runs at its own speed, and on this 2-CPU machine the
    // runtime's threads (a woken M, sysmon) beside the two running Ps wait for a CPU
    // (23% against the channel's 19% in one run; the channel first in another). Before
    // the bursts, the probes slowed every hand-off 20-46 times and hid it.
    let first_two: Vec<&str> = budget
        .causes
        .iter()
        .take(2)
        .map(|c| c.subject.as_str())
        .collect();
    assert!(
        first_two.first() == Some(&top) || first_two == [CPU_WAIT, top],
        "{}",
        json(budget)
    );
    // At 1% of the machine the probes are on for about 5% of a hand-off-heavy run, a few
    // 20 ms bursts a repeat, so the channel's share moves between runs: 23-32% here, 7.3%
    // (interval 4-10%) once in CI beside a 25% wait for a CPU. 5% still says it is a cause.
    assert!(cause_share(&doc, top) >= 0.05, "{}", json(budget));
    // Its probes hit hundreds of thousands of times a second: they ran in bursts, and
    // what a hit costs was measured here (the document keeps no figure it did not
    // measure: a failed calibration leaves it zero).
    let tracer = &last_point(&doc).locks.as_ref().unwrap().tracer;
    assert!(
        tracer.go_probed_ns > 0 && tracer.go_probed_ns < tracer.go_span_ns / 2,
        "{tracer:?}"
    );
    assert!(tracer.go_hits > 1000, "{tracer:?}");
    assert!(
        tracer.go_hit_ns > 0 && tracer.go_hit_ns < 1_000_000,
        "{tracer:?}"
    );
    // The programs' run time, timed by the kernel in windows: the scheduler's and the
    // Go probes' programs ran, and were timed for part of the execution only.
    let ran = |family| {
        tracer
            .bpf_families
            .iter()
            .any(|f| f.family == family && f.runs > 0 && f.run_ns > 0)
    };
    assert!(
        ran(ProbeFamily::Scheduler) && ran(ProbeFamily::GoRuntime),
        "{tracer:?}"
    );
    assert!(
        tracer.bpf_timed_ns > 0 && tracer.bpf_timed_ns < tracer.bpf_span_ns,
        "{tracer:?}"
    );
    assert!(budget.unexplained <= 0.20, "{}", json(budget));
    let f = doc
        .findings
        .iter()
        .find(|f| f.subject == top)
        .expect("the channel is a finding");
    let FindingDetails::Lock(lock) = &f.details else {
        panic!("not a lock's details: {}", json(f));
    };
    assert!(matches!(lock.lock_type, LockKind::Chan(_)), "{}", json(f));
    assert!(
        lock.holders
            .first()
            .is_some_and(|h| h.function == "main.collect"),
        "{}",
        json(f)
    );
    assert!(f.suggestion.contains("batches"), "{}", f.suggestion);
    runtime_idles_are_not_causes(&doc, "go", &["runtime.", "futex@runtime"]);
}

/// Tasks that hand their results on in order, over a channel made for each
/// (`go_ordered`, gofmt's sequencer): thousands of channels waited on once each, with the
/// probes' stacks at 1 park in 16. Their waits are one row named by the tasks' two ends,
/// not `chan:recv (anon)`; it counts its channels; and where it is a finding, its advice
/// is about the order, not about batching.
#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn one_shot_channels_of_ordered_tasks_are_one_row_named_by_their_ends() {
    require_profiling();
    if !have("go", &["version"]) {
        return;
    }
    let _turn = exclusive();
    let doc = sweep(&[go_program("go_ordered").to_str().unwrap(), "{threads}"]);
    let rows = &last_point(&doc).locks.as_ref().expect("a lock table").rows;
    let names: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} ({}, {} waits, {:?} channels)",
                r.name, r.lock_type, r.count, r.channels
            )
        })
        .collect();
    let chans = || {
        rows.iter()
            .filter(|r| matches!(r.lock_type, LockKind::Chan(_)))
    };
    let run = "main.(*sequencer).run";
    let row = chans()
        .find(|r| r.name == format!("chan {run} → {run}"))
        .unwrap_or_else(|| panic!("no row named by the tasks' ends: {names:#?}"));
    assert!(
        row.count >= 100 && row.channels.is_some_and(|c| c * 2 >= row.count),
        "{names:#?}"
    );
    let all: u64 = chans().map(|r| r.total_wait_ns).sum();
    let unnamed: u64 = chans()
        .filter(|r| !r.name.starts_with("chan ") || r.name.contains('?'))
        .map(|r| r.total_wait_ns)
        .sum();
    assert!(unnamed * 10 <= all, "{names:#?}");
    if let Some(f) = doc.findings.iter().find(|f| f.subject == row.name) {
        assert!(f.suggestion.contains("out of order"), "{}", f.suggestion);
    }
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_buffered_sharded_funnel_gives_no_lock_or_channel_finding() {
    require_profiling();
    if !have("go", &["version"]) {
        return;
    }
    let _turn = exclusive();
    let doc = sweep(&[
        go_program("go_funnel_sharded").to_str().unwrap(),
        "{threads}",
    ]);
    assert_eq!(
        lock_findings(&doc),
        Vec::<&str>::new(),
        "{}",
        json(&doc.findings)
    );
    runtime_idles_are_not_causes(&doc, "go", &["runtime.", "futex@runtime"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_go_program_started_by_a_shell_is_probed_as_it_starts() {
    require_profiling();
    if !have("go", &["version"]) {
        return;
    }
    let _turn = exclusive();
    let program = go_program("go_mutex");
    let script = format!("{} {{threads}}", program.display());
    let doc = sweep(&["sh", "-c", &script]);
    assert_eq!(top_cause(&doc), "main.mu", "{}", json(last_budget(&doc)));
    runtime_idles_are_not_causes(&doc, "go", &["runtime.", "futex@runtime"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_stripped_go_program_is_probed_and_named_from_its_function_table() {
    require_profiling();
    if !have("go", &["version"]) {
        return;
    }
    let _turn = exclusive();
    // No symbol table, no DWARF: the functions come from .gopclntab; the mutex, which
    // had a variable's name, is named by the function that locks it.
    let program = go_build("go_mutex", "go_mutex_stripped", &["-ldflags=-s -w"]);
    let doc = sweep(&[program.to_str().unwrap(), "{threads}"]);
    let top = top_cause(&doc);
    assert!(
        top.starts_with("sync.Mutex@main.worker"),
        "{}",
        json(last_budget(&doc))
    );
    runtime_idles_are_not_causes(&doc, "go", &["runtime.", "futex@runtime"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_synchronized_java_method_is_named_by_its_class_not_by_the_jvm_s_threads() {
    require_profiling();
    if !have("javac", &["-version"]) {
        return;
    }
    let _turn = exclusive();
    let classes = java_classes().to_str().unwrap().to_string();
    let doc = sweep(&["java", "-cp", &classes, "SyncCounter", "{threads}"]);
    let top = top_cause(&doc);
    assert!(
        top.starts_with("monitor@SyncCounter."),
        "{top}: {}",
        json(last_budget(&doc))
    );
    let f = doc.findings.iter().find(|f| f.subject == top).unwrap();
    assert!(f.suggestion.contains("LongAdder"), "{}", f.suggestion);
    runtime_idles_are_not_causes(
        &doc,
        "hotspot",
        &["JVM service threads", "PlatformMonitor", "JavaMain"],
    );
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_reentrant_lock_s_park_is_named_by_the_java_method_that_locks() {
    require_profiling();
    if !have("javac", &["-version"]) {
        return;
    }
    let _turn = exclusive();
    let classes = java_classes().to_str().unwrap().to_string();
    let doc = sweep(&["java", "-cp", &classes, "LockCounter", "{threads}"]);
    // Past LockSupport.park and AbstractQueuedSynchronizer: the program's method, first,
    // or second to the wait for a CPU: on 2 CPUs the JIT's compiler threads share them
    // with the two workers (25% against the park's 17% in one run of the measured tier).
    let budget = last_budget(&doc);
    let top = budget
        .causes
        .iter()
        .take(2)
        .map(|c| c.subject.as_str())
        .find(|s| *s != CPU_WAIT)
        .unwrap_or("(none)");
    assert!(
        top.starts_with("park@LockCounter.")
            && (top_cause(&doc) == top || top_cause(&doc) == CPU_WAIT),
        "{top}: {}",
        json(budget)
    );
    runtime_idles_are_not_causes(&doc, "hotspot", &["JVM service threads", "PlatformMonitor"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_longadder_gives_no_lock_finding() {
    require_profiling();
    if !have("javac", &["-version"]) {
        return;
    }
    let _turn = exclusive();
    let classes = java_classes().to_str().unwrap().to_string();
    let doc = sweep(&["java", "-cp", &classes, "AdderCounter", "{threads}"]);
    // The wait for a CPU is the machine's (the JIT's compiler threads beside two workers
    // on 2 CPUs: 6.5% in one run of the measured tier), not a lock's.
    let locks: Vec<&str> = lock_findings(&doc)
        .into_iter()
        .filter(|s| *s != CPU_WAIT)
        .collect();
    assert_eq!(locks, Vec::<&str>::new(), "{}", json(&doc.findings));
    runtime_idles_are_not_causes(&doc, "hotspot", &["JVM service threads", "PlatformMonitor"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn python_threads_wait_for_the_gil_and_processes_do_not() {
    require_profiling();
    if !have("python3", &["--version"]) {
        return;
    }
    let _turn = exclusive();
    let script = |name: &str| sources().join(name).to_str().unwrap().to_string();
    let threads = sweep(&["python3", &script("py_threads.py"), "{threads}"]);
    assert_eq!(
        top_cause(&threads),
        "GIL",
        "{}",
        json(last_budget(&threads))
    );
    let gil = threads
        .findings
        .iter()
        .find(|f| f.subject == "GIL")
        .unwrap();
    assert!(gil.suggestion.contains("GIL"), "{}", gil.suggestion);
    let processes = sweep(&["python3", &script("py_processes.py"), "{threads}"]);
    // No lock and no wait of their own. The wait for a CPU is not theirs to fix: two
    // busy processes on this 2-CPU machine, with scalprof's threads beside them, were put
    // on one CPU at times, and in two whole-binary runs that read as 13% and 7% "waiting
    // for a CPU" behind each other (30-43 ms of it, under 1%, in runs alone).
    let waits: Vec<&str> = lock_findings(&processes)
        .into_iter()
        .filter(|&s| s != CPU_WAIT)
        .collect();
    assert_eq!(waits, Vec::<&str>::new(), "{}", json(&processes.findings));
}
