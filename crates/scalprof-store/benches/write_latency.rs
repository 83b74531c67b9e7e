//! How long writing one run takes on each backend: the same run (3 points × 3 repeats, a
//! profile and a lock table per point, its status) written N times to an SQLite store and
//! to a PostgreSQL store on a private local server, median milliseconds per run.
//!
//!   cargo bench -p scalprof-store --bench write_latency            # N = 50
//!   RUNS=200 cargo bench -p scalprof-store --bench write_latency
//!
//! Both as they ship: SQLite in WAL mode with `synchronous=NORMAL` (a commit does not wait
//! for the disk), PostgreSQL with `fsync` on and `synchronous_commit=on` (each commit waits
//! for its WAL flush); a third line shows PostgreSQL with `synchronous_commit=off`, the
//! setting closest to SQLite's. Skipped, with a message, without PostgreSQL.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::time::Instant;

use scalprof_model::locks::{LockKind, LockProfile, LockRow, Scope};
use scalprof_model::{
    FoldedStack, Host, PointProfile, Repeat, RunStatus, Sweep, SweepParameter, ThroughputSource,
};
use scalprof_store::{NewRun, Store};

#[path = "../src/test_server.rs"]
mod test_server;

const POINTS: [u64; 3] = [1, 2, 4];
const REPEATS: u32 = 3;

fn new_run() -> NewRun {
    NewRun {
        label: "bench".into(),
        created: "2026-11-26T00:00:00Z".into(),
        command: vec!["./bench".into(), "{threads}".into()],
        sweep: Sweep {
            parameter: SweepParameter::Threads,
            values: POINTS.to_vec(),
        },
        host: Host {
            kernel: "6.18.0".into(),
            cpus: 2,
            cpu_model: "bench".into(),
            pmu: false,
            limits: None,
            topology: None,
            sample_cost_ns: None,
            switch_cost: None,
        },
        scaling: Some(ThroughputSource::Weak),
        ops_regex: r"ops=(\d+)".into(),
        commit: None,
    }
}

/// One run as `scalprof run` writes it, each call its own commit.
fn write_run(store: &Store, profile: &PointProfile, locks: &LockProfile) {
    let id = store.create_run(&new_run()).unwrap();
    store.set_output_dir(id, Path::new("/tmp/out")).unwrap();
    for value in POINTS {
        for i in 0..REPEATS {
            let r = Repeat {
                ops: Some(1000),
                stdout_path: Some("/tmp/out/p1-r0.stdout".into()),
                ..Repeat::ok(i, 1.0 + f64::from(i) / 10.0)
            };
            store.add_repeat(id, value, &r).unwrap();
        }
        store.add_profile(id, value, 0, profile).unwrap();
        store.add_locks(id, value, 0, locks).unwrap();
    }
    store.set_status(id, RunStatus::Complete).unwrap();
}

/// Median milliseconds per run over `runs` runs (after 3 not counted).
fn median_ms(store: &Store, runs: usize) -> f64 {
    let profile = PointProfile {
        event: "cpu-clock".into(),
        frequency: 999,
        repeats: 1,
        folded: (0..200)
            .map(|i| FoldedStack {
                stack: format!("bench;worker;step_{i};lock_table;futex_wait_[k]"),
                samples: 10 + i,
                weight: 10_000_000 + i,
            })
            .collect(),
        ..Default::default()
    };
    let locks = LockProfile {
        rows: vec![LockRow::new(Scope::User, "table_lock", LockKind::from("mutex")); 20],
        repeats: 1,
        ..Default::default()
    };
    for _ in 0..3 {
        write_run(store, &profile, &locks);
    }
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            write_run(store, &profile, &locks);
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let Some(server) = test_server::PgServer::start("write_latency", true) else {
        return;
    };
    // The SQLite file on the same disk as the server's data directory.
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open(&dir.path().join("runs.db")).unwrap();
    let lite = median_ms(&sqlite, runs);
    let pg = median_ms(
        &Store::open(Path::new(&server.database("bench"))).unwrap(),
        runs,
    );
    let relaxed_url = format!(
        "{}?options=-c%20synchronous_commit%3Doff",
        server.database("bench_async")
    );
    let setting: String = postgres::Client::connect(&relaxed_url, postgres::NoTls)
        .unwrap()
        .query_one("SHOW synchronous_commit", &[])
        .unwrap()
        .get(0);
    assert_eq!(setting, "off", "the URL's options were not applied");
    let relaxed = median_ms(&Store::open(Path::new(&relaxed_url)).unwrap(), runs);
    let writes = POINTS.len() as u32 * (REPEATS + 2) + 3;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average during the runs: {}",
        load.split_whitespace().next().unwrap_or("?")
    );
    println!("write latency of one run ({writes} commits), median of {runs}:");
    println!("  SQLite (WAL, synchronous=NORMAL)         {lite:8.2} ms");
    println!(
        "  PostgreSQL (synchronous_commit=on)       {pg:8.2} ms   {:.1}x SQLite",
        pg / lite
    );
    println!(
        "  PostgreSQL (synchronous_commit=off)      {relaxed:8.2} ms   {:.1}x SQLite",
        relaxed / lite
    );
}
