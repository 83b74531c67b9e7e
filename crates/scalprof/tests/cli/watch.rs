//! `scalprof watch` given what a user gets wrong, and a server that goes away: a clear
//! error before anything is stored, and the windows measured kept.

use std::process::{Child, Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use crate::common::cli::stderr_of;
use crate::common::corpus::corpus;
use crate::common::scalprof;

/// A process to watch that lives until dropped.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(StdCommand::new("sleep").arg("60").spawn().unwrap())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn watch_names_what_is_missing_before_anything_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let server = Sleeper::start();
    let pid = server.0.id().to_string();
    let log = dir.path().join("server.log");
    std::fs::write(&log, "").unwrap();
    // No server named: clap says which flags name one.
    scalprof(&db)
        .args(["watch", "--duration", "1s"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--attach"));
    // A log without the regex of its lines, and the other way round.
    scalprof(&db)
        .args(["watch", "--attach", &pid, "--ops-file"])
        .arg(&log)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--ops-regex"));
    let cases: [(&[&str], &str); 4] = [
        (
            &["--attach", "999999999"],
            "--attach 999999999: no such process",
        ),
        (
            &[
                "--attach",
                &pid,
                "--ops-file",
                "/nonexistent/server.log",
                "--ops-regex",
                r"(\d+)",
            ],
            "--ops-file /nonexistent/server.log: no such file",
        ),
        (
            &[
                "--attach",
                &pid,
                "--ops-file",
                dir.path().to_str().unwrap(),
                "--ops-regex",
                r"(\d+)",
            ],
            "not a regular file",
        ),
        (
            &["--attach", &pid, "--ops-regex", r"(\d+"],
            "not a valid regex",
        ),
    ];
    for (args, said) in cases {
        let out = scalprof(&db)
            .arg("watch")
            .args(args)
            .args(["--duration", "1s", "--no-profile", "--no-locks"])
            .output()
            .unwrap();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    // Nothing was stored by any of them.
    let listed = scalprof(&db).args(["runs", "--json"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]");
}

#[test]
fn a_fifo_given_as_the_log_is_refused_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let server = Sleeper::start();
    let fifo = dir.path().join("fifo");
    assert!(StdCommand::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let out = scalprof(&dir.path().join("runs.db"))
        .args([
            "watch",
            "--attach",
            &server.0.id().to_string(),
            "--ops-file",
        ])
        .arg(&fifo)
        .args(["--ops-regex", r"(\d+)", "--no-profile", "--no-locks"])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// The server exits part-way: the watch ends there, says so, and keeps every window.
#[test]
fn a_server_that_exits_ends_the_watch_with_what_it_measured() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let log = dir.path().join("server.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut server = StdCommand::new(corpus().join("phase_server"))
        .args(["--phases", "1:4"])
        .stdout(Stdio::from(out))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let watched = scalprof(&db)
        .args(["watch", "--attach", &server.id().to_string(), "--ops-file"])
        .arg(&log)
        .args(["--ops-regex", r"served (\d+)", "--window", "500ms"])
        // Untraced: this test runs without privileges too.
        .args(["--no-profile", "--no-locks", "--json", "-"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    server.wait().unwrap();
    let stderr = stderr_of(&watched);
    assert!(watched.status.success(), "{stderr}");
    assert!(stderr.contains("the server is gone"), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&watched.stdout).unwrap();
    assert_eq!(doc["status"], "complete", "{stderr}");
    assert_eq!(doc["sweep"]["parameter"], "concurrency");
    let level1 = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["value"] == 1)
        .unwrap_or_else(|| panic!("no level 1: {}", doc["points"]));
    // About 3.5 s of one busy worker in half-second windows.
    let windows = level1["repeats"].as_array().unwrap().len();
    assert!((4..=9).contains(&windows), "{windows} windows: {stderr}");
    assert!(level1["throughput"].as_f64().unwrap() > 1000.0, "{level1}");
    // What scalprof took meanwhile is in the document: the watch's span (the server's 4 s,
    // less the 0.3 s before the attach), some CPU and far less than a CPU's worth.
    let span = doc["observer"]["span_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("{doc}"));
    let cpu = doc["observer"]["cpu_s"].as_f64().unwrap();
    assert!((3.0..6.0).contains(&span), "{}", doc["observer"]);
    assert!(cpu > 0.0 && cpu < 0.5 * span, "{}", doc["observer"]);
    // And `show` says it again from the store.
    let shown = scalprof(&db).args(["show", "latest"]).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!("{cpu:.1} s of CPU in {span:.0} s")),
        "{shown}"
    );
}

/// A counter served on this host as Prometheus's text format: 1000 a second since it
/// started, reset to zero after `reset_after`.
fn serve_counter(reset_after: Duration) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let started = Instant::now();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut request = [0u8; 2048];
            let _ = s.read(&mut request);
            let mut elapsed = started.elapsed();
            if elapsed > reset_after {
                elapsed -= reset_after;
            }
            let body = format!(
                "# TYPE requests_total counter\nrequests_total{{code=\"200\"}} {}\nrequests_total{{code=\"500\"}} 7\n",
                (elapsed.as_secs_f64() * 1000.0).round()
            );
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// `--ops-url`: a counter's increase per window, through a reset; an endpoint elsewhere,
/// or without the counter, is refused before anything is stored.
#[test]
fn a_metrics_counter_on_this_host_gives_the_operations() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let port = serve_counter(Duration::from_millis(2500));
    let mut server = StdCommand::new(corpus().join("phase_server"))
        .args(["--phases", "1:4"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/metrics#requests_total{{code=\"200\"}}");
    let watched = scalprof(&db)
        .args([
            "watch",
            "--attach",
            &server.id().to_string(),
            "--ops-url",
            &url,
        ])
        .args([
            "--window",
            "500ms",
            "--no-profile",
            "--no-locks",
            "--json",
            "-",
        ])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    server.wait().unwrap();
    let stderr = stderr_of(&watched);
    assert!(watched.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&watched.stdout).unwrap();
    let level1 = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["value"] == 1)
        .unwrap_or_else(|| panic!("no level 1: {stderr}"));
    // 1000 a second, the reset counted from zero, not as a fall.
    let x = level1["throughput"].as_f64().unwrap();
    assert!((850.0..1150.0).contains(&x), "{x} ops/s: {stderr}");
    for (spec, said) in [
        (
            "http://10.1.2.3:9100/metrics#requests_total".to_string(),
            "is not this host",
        ),
        (
            format!("http://127.0.0.1:{port}/metrics#missing_total"),
            "no series of missing_total",
        ),
        (
            format!("http://127.0.0.1:{port}/metrics"),
            "name the counter after a #",
        ),
    ] {
        let sleeper = Sleeper::start();
        let out = scalprof(&db)
            .args([
                "watch",
                "--attach",
                &sleeper.0.id().to_string(),
                "--ops-url",
                &spec,
            ])
            .args(["--duration", "1s", "--no-profile", "--no-locks"])
            .output()
            .unwrap();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{spec}: {stderr}");
        assert!(stderr.contains(said), "{spec}: {stderr}");
    }
}

/// `--latency-regex`: Little's law gives each window's concurrency (throughput × mean
/// latency), whatever the server's threads do (here it is asleep: an event loop's shape).
#[test]
fn latencies_in_the_log_give_the_levels_by_littles_law() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    std::fs::write(&log, "").unwrap();
    let server = Sleeper::start();
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            // 100 requests a second: 10 ms each (1 in the server), then 30 ms (3).
            for ms in [10, 30] {
                let until = Instant::now() + Duration::from_millis(3000);
                while Instant::now() < until {
                    for _ in 0..10 {
                        writeln!(f, "GET / 200 took {ms}.0ms").unwrap();
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let out = scalprof(&dir.path().join("runs.db"))
        .args([
            "watch",
            "--attach",
            &server.0.id().to_string(),
            "--ops-file",
        ])
        .arg(&log)
        .args(["--ops-regex", "GET", "--latency-regex", r"took ([0-9.]+)ms"])
        .args(["--window", "500ms", "--duration", "5s"])
        .args(["--no-profile", "--no-locks", "--json", "-"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    writer.join().unwrap();
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let levels: Vec<u64> = doc["sweep"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(
        levels.contains(&1) && levels.contains(&3),
        "{levels:?}: {stderr}"
    );
}
