//! `scalprof suite`: the kernel's scalability, measured and diagnosed test by test. Each
//! test repeats one operation (a page fault, a stat, a record lock, …) in N workers for a
//! fixed time (`suite/osbench.c`, compiled at first use); each test and mode is an ordinary
//! stored run, swept over worker counts, with its full diagnosis.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, Table};
use scalprof_collect::interrupt::Interrupt;
use scalprof_model::{Finding, Host, RunDocument, RunStatus, ThroughputSource};
use scalprof_pipeline::RunOptions;
use scalprof_store::Store;
use serde::Serialize;

use crate::cli::SuiteArgs;
use crate::run::{self, Show};

const SOURCE: &str = include_str!("../../../suite/osbench.c");

/// A test: its name (part of the contract), the modes it runs in, what it does.
#[derive(Debug)]
pub struct Test {
    pub name: &'static str,
    /// Processes too, where sharing an address space, a file table or a lock owner differs.
    pub processes: bool,
    pub what: &'static str,
}

pub const TESTS: &[Test] = &[
    Test {
        name: "page_fault",
        processes: true,
        what: "touch every page of a fresh 8 MiB mapping (ops: faults)",
    },
    Test {
        name: "mmap_munmap",
        processes: true,
        what: "map and unmap 128 MiB",
    },
    Test {
        name: "brk",
        processes: true,
        what: "grow the heap by a page and shrink it back",
    },
    Test {
        name: "fork_exec",
        processes: true,
        what: "fork, exec /bin/true, wait",
    },
    Test {
        name: "stat_same",
        processes: false,
        what: "stat() one shared file",
    },
    Test {
        name: "stat_own",
        processes: false,
        what: "stat() the worker's own file",
    },
    Test {
        name: "open_close",
        processes: true,
        what: "open and close the worker's own file",
    },
    Test {
        name: "dup_close",
        processes: true,
        what: "dup() and close() a descriptor",
    },
    Test {
        name: "pipe_pingpong",
        processes: true,
        what: "a byte there and back through two pipes, per worker pair",
    },
    Test {
        name: "fcntl_same_file",
        processes: true,
        what: "write-lock and unlock byte 0 of one shared file",
    },
    Test {
        name: "fcntl_own_file",
        processes: true,
        what: "write-lock and unlock byte 0 of the worker's own file",
    },
    Test {
        name: "pwrite_same_file",
        processes: false,
        what: "pwrite 4 KiB at offset 0 of one shared file",
    },
    Test {
        name: "pwrite_own_file",
        processes: false,
        what: "pwrite 4 KiB at offset 0 of the worker's own file",
    },
    Test {
        name: "futex_own",
        processes: false,
        what: "FUTEX_WAKE on the worker's own word, nobody waiting",
    },
    Test {
        name: "poll",
        processes: true,
        what: "poll() 128 descriptors, none ready",
    },
    Test {
        name: "lseek",
        processes: true,
        what: "lseek() the worker's own descriptor",
    },
];

/// `scalprof.suite/1`: the suite's results, one entry per test and mode.
#[derive(Debug, Serialize)]
pub struct SuiteDocument {
    pub schema: &'static str,
    pub host: Host,
    pub tests: Vec<TestResult>,
}

#[derive(Debug, Serialize)]
pub struct TestResult {
    pub name: String,
    pub mode: String,
    pub run_id: String,
    /// complete, failed (a repeat failed or timed out), interrupted.
    pub status: String,
    pub points: Vec<PointRate>,
    pub top_cause: Option<TopCause>,
}

#[derive(Debug, Serialize)]
pub struct PointRate {
    pub value: u64,
    /// Operations per second (median of the clean repeats); null where every repeat failed.
    pub throughput: Option<f64>,
    pub efficiency: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct TopCause {
    pub kind: String,
    pub subject: String,
    pub score: f64,
}

/// The tests and modes `--tests` selects (`name` or `name:mode`), in the suite's order.
pub fn select(list: Option<&str>) -> Result<Vec<(&'static Test, &'static str)>> {
    let all: Vec<(&Test, &str)> = TESTS
        .iter()
        .flat_map(|t| {
            std::iter::once((t, "threads")).chain(t.processes.then_some((t, "processes")))
        })
        .collect();
    let Some(list) = list else { return Ok(all) };
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, mode) = match item.split_once(':') {
            Some((n, m)) => (n, Some(m)),
            None => (item, None),
        };
        let Some(test) = TESTS.iter().find(|t| t.name == name) else {
            let names: Vec<&str> = TESTS.iter().map(|t| t.name).collect();
            bail!("--tests: no test {name:?} (tests: {})", names.join(", "));
        };
        match mode {
            None => out.extend(all.iter().filter(|(t, _)| t.name == name).copied()),
            Some("threads") => out.push((test, "threads")),
            Some("processes") if test.processes => out.push((test, "processes")),
            Some("processes") => bail!(
                "--tests: {name} runs in threads mode only (processes would do the same work)"
            ),
            Some(m) => bail!("--tests: mode {m:?} of {name}: threads or processes"),
        }
    }
    if out.is_empty() {
        bail!("--tests selected no test");
    }
    Ok(out)
}

fn top_cause(findings: &[Finding]) -> Option<TopCause> {
    findings
        .iter()
        .max_by(|a, b| a.score.total_cmp(&b.score))
        .map(|f| TopCause {
            kind: f.kind.as_str().into(),
            subject: f.subject.clone(),
            score: f.score,
        })
}

fn rate(ops: f64) -> String {
    if ops >= 1e6 {
        format!("{:.2}M", ops / 1e6)
    } else if ops >= 1e3 {
        format!("{:.1}k", ops / 1e3)
    } else {
        format!("{ops:.0}")
    }
}

/// The rates table: ops/s per point, per-CPU rate and efficiency at the largest point, the
/// top cause and its share.
pub fn table(results: &[TestResult]) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "test",
        "mode",
        "ops/s per point",
        "per worker",
        "efficiency",
        "top cause",
        "run",
    ]);
    for r in results {
        let last = r.points.iter().rev().find(|p| p.throughput.is_some());
        let points: Vec<String> = r
            .points
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    p.value,
                    p.throughput.map_or("failed".into(), rate)
                )
            })
            .collect();
        t.add_row(vec![
            r.name.clone(),
            r.mode.clone(),
            points.join(" · "),
            last.and_then(|p| p.throughput.map(|x| rate(x / p.value as f64)))
                .unwrap_or_else(|| "—".into()),
            last.and_then(|p| p.efficiency)
                .map_or("—".into(), |e| format!("{:.0}%", e * 100.0)),
            match &r.top_cause {
                Some(c) => format!("{} {:.0}% ({})", c.subject, c.score * 100.0, c.kind),
                None if r.status == "complete" => "none".into(),
                None => format!("({})", r.status),
            },
            r.run_id.to_string(),
        ]);
    }
    for i in [3, 4, 6] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string() + "\n"
}

pub fn suite(store: &Store, args: SuiteArgs, interrupt: &Interrupt) -> Result<SuiteDocument> {
    let selected = select(args.tests.as_deref())?;
    let values = args
        .threads
        .as_deref()
        .map(scalprof_collect::sweep::parse_values)
        .transpose()?;
    let seconds = args.seconds.unwrap_or(if args.quick { 0.5 } else { 1.0 });
    if !(seconds > 0.0 && seconds <= 3600.0) {
        bail!("--seconds must be in (0, 3600]");
    }
    let repeat = args.repeat.unwrap_or(if args.quick { 2 } else { 3 });
    let dir = crate::corpus::default_dir().with_file_name("suite");
    let bin = crate::corpus::compile(&dir, "osbench", SOURCE)?;
    let timeout = args.timeout.unwrap_or(Duration::from_secs(60));
    let mut results = Vec::new();
    let mut host = None;
    for (i, (test, mode)) in selected.iter().enumerate() {
        if interrupt.requested() {
            break;
        }
        eprintln!(
            "scalprof: suite {}/{}: {} ({mode}): {}",
            i + 1,
            selected.len(),
            test.name,
            test.what
        );
        let opts = RunOptions {
            command: vec![
                bin.display().to_string(),
                test.name.into(),
                (*mode).into(),
                "{threads}".into(),
                seconds.to_string(),
            ],
            parameter: scalprof_model::SweepParameter::Threads,
            values: values.clone(),
            repeat,
            diagnose: 1,
            warmup: 0,
            label: Some(format!("suite-{}-{mode}", test.name)),
            ops_regex: r"ops=(\d+)".into(),
            scaling: ThroughputSource::Weak,
            timeout: Some(timeout),
            // A test that fails or hangs is recorded, and the suite goes on.
            keep_going: true,
            sampling: Some(Default::default()),
            locks: Some(Default::default()),
            attach: Default::default(),
        };
        let show = Show {
            summary: false,
            json: None,
        };
        let outcome = run::run(store, &opts, &show, interrupt)
            .with_context(|| format!("suite test {} ({mode})", test.name))?;
        let doc: &RunDocument = &outcome.doc;
        host.get_or_insert_with(|| doc.host.clone());
        let result = TestResult {
            name: test.name.into(),
            mode: (*mode).into(),
            run_id: doc.id.clone(),
            status: match doc.status {
                RunStatus::Complete
                    if doc
                        .points
                        .iter()
                        .any(|p| p.repeats.iter().any(|r| !r.succeeded())) =>
                {
                    "failed".into()
                }
                s => s.as_str().into(),
            },
            points: doc
                .points
                .iter()
                .map(|p| PointRate {
                    value: p.value,
                    throughput: p.throughput,
                    efficiency: p.efficiency,
                })
                .collect(),
            top_cause: top_cause(&doc.findings),
        };
        eprint!("{}", table(std::slice::from_ref(&result)));
        results.push(result);
    }
    let host = match host {
        Some(h) => h,
        None => scalprof_collect::host::probe(),
    };
    Ok(SuiteDocument {
        schema: "scalprof.suite/1",
        host,
        tests: results,
    })
}

/// Writes the suite document.
pub fn write_json(path: &PathBuf, doc: &SuiteDocument) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_and_modes_are_selected_by_name_and_wrong_ones_are_errors() {
        let all = select(None).unwrap();
        assert_eq!(all.iter().filter(|(_, m)| *m == "threads").count(), 16);
        let some = select(Some("lseek,pwrite_same_file,fcntl_same_file:processes")).unwrap();
        let names: Vec<(&str, &str)> = some.iter().map(|(t, m)| (t.name, *m)).collect();
        assert_eq!(
            names,
            [
                ("lseek", "threads"),
                ("lseek", "processes"),
                ("pwrite_same_file", "threads"),
                ("fcntl_same_file", "processes")
            ]
        );
        assert!(select(Some("nope"))
            .unwrap_err()
            .to_string()
            .contains("no test \"nope\""));
        assert!(select(Some("stat_own:processes")).is_err());
        assert!(select(Some("lseek:fibers")).is_err());
    }
}
