//! `scalprof watch` on the corpus server whose busy workers change by phases: the levels it
//! went through are the run's points, the big lock's drop is the curve, and the lock is the
//! top cause at the higher level, as a sweep of the same program finds.

use std::path::Path;
use std::process::{Child, Command as StdCommand, Stdio};

use scalprof_model::RunDocument;

use crate::common::corpus::{corpus, efficiency_at, json, read_run, require_profiling};
use crate::common::{exclusive, scalprof};

/// The server, its "served K" lines going to `log`; killed when dropped.
struct Server(Child);

impl Server {
    fn start(phases: &str, log: &Path) -> Server {
        let out = std::fs::File::create(log).unwrap();
        let child = StdCommand::new(corpus().join("phase_server"))
            .args(["--phases", phases])
            .stdout(Stdio::from(out))
            .spawn()
            .unwrap();
        // Its first lines are written before the watch starts following.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Server(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn point(doc: &RunDocument, level: u64) -> &scalprof_model::Point {
    doc.points
        .iter()
        .find(|p| p.value == level)
        .unwrap_or_else(|| panic!("no level {level}: {}", json(&doc.points)))
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_watched_server_s_levels_are_its_points_and_its_big_lock_bends_the_curve() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let log = dir.path().join("server.log");
    let watched = dir.path().join("watched.json");
    let server = Server::start("1:5,2:5,1:5,2:6", &log);
    let out = scalprof(&db)
        .args(["watch", "--attach"])
        .arg(server.pid().to_string())
        .arg("--ops-file")
        .arg(&log)
        .args([
            "--ops-regex",
            r"served (\d+)",
            "--duration",
            "20s",
            "--json",
        ])
        .arg(&watched)
        .output()
        .unwrap();
    drop(server);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("levels so far"), "{stderr}");
    let doc = read_run(&watched);
    assert_eq!(doc.sweep.parameter.as_str(), "concurrency");
    // The two levels the server went through, each from several untraced windows.
    assert_eq!(doc.sweep.values, vec![1, 2], "{}", json(&doc.points));
    for level in [1, 2] {
        let p = point(&doc, level);
        assert!(p.repeats.len() >= 3, "level {level}: {}", json(p));
    }
    // The lock serializes most of a request: the second worker loses throughput.
    let (x1, x2) = (
        point(&doc, 1).throughput.unwrap(),
        point(&doc, 2).throughput.unwrap(),
    );
    assert!(x2 < 1.2 * x1, "1: {x1:.0} ops/s, 2: {x2:.0} ops/s");
    let top = doc
        .findings
        .first()
        .unwrap_or_else(|| panic!("no finding: {}", json(&doc.findings)));
    assert_eq!(top.subject, "table_lock", "{}", json(&doc.findings));
    // Traced windows with the tracer loaded once: no wait of a window is longer than a
    // window (a wait begun before a detach and ended after the next attach would be).
    for p in &doc.points {
        for row in p.locks.iter().flat_map(|l| &l.rows) {
            assert!(
                row.max_wait_ns < 1_500_000_000,
                "level {}: {} waited {} ns at most",
                p.value,
                row.name,
                row.max_wait_ns
            );
        }
    }
    // What scalprof took meanwhile: the watch's 20 s, far less than a CPU.
    let cost = doc.observer.expect("the watch's own CPU time");
    assert!((18.0..30.0).contains(&cost.span_s), "{cost:?}");
    assert!(cost.cpu_s > 0.0 && cost.share() < 0.25, "{cost:?}");
    // Not the reporter thread's 200 ms sleeps: a timer, not a cause.
    assert!(
        doc.findings.iter().all(|f| !f.subject.contains("sleep")),
        "{}",
        json(&doc.findings)
    );

    // The sweep of the same program at 1 and 2 workers: the same efficiency within 15%.
    let swept = dir.path().join("swept.json");
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1,2",
            "--repeat",
            "5",
            "--diagnose",
            "0",
            "--json",
        ])
        .arg(&swept)
        .arg("--")
        .arg(corpus().join("phase_server"))
        .arg("{threads}")
        .assert()
        .success();
    let sweep = read_run(&swept);
    // Within 15% of the sweep's efficiency, as far as the sweep's own repeats spread: the
    // lowest and highest their throughputs at 1 and 2 give.
    let watch_e = efficiency_at(&doc, 2);
    let spread = |v: u64| {
        let p = point(&sweep, v);
        let s = p.throughput_spread.unwrap_or_else(|| panic!("{}", json(p)));
        (s.min, s.max)
    };
    let ((lo1, hi1), (lo2, hi2)) = (spread(1), spread(2));
    let (sweep_lo, sweep_hi) = (lo2 / (2.0 * hi1), hi2 / (2.0 * lo1));
    eprintln!(
        "efficiency at 2: watch {watch_e:.3}, sweep {:.3} ({sweep_lo:.3}–{sweep_hi:.3})",
        efficiency_at(&sweep, 2)
    );
    assert!(
        watch_e >= 0.85 * sweep_lo && watch_e <= 1.15 * sweep_hi,
        "watch {watch_e:.3} against the sweep's {sweep_lo:.3}–{sweep_hi:.3} at 2"
    );

    // verify does not restart a watched server: the budget's what-if, said as one.
    scalprof(&db)
        .args(["verify", &doc.id, "--cause", "table_lock"])
        .assert()
        .success()
        .stderr(predicates::str::contains("watched a running server"))
        .stdout(predicates::str::contains("table_lock: without it, up to"));
    scalprof(&db)
        .args(["verify", &doc.id, "--cause", "no_such_lock"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("has no finding \"no_such_lock\""));
}
