//! `scalprof suite`: the kernel's scalability, measured and diagnosed test by test. Each
//! test repeats one operation (a page fault, a stat, a record lock, …) in N workers for a
//! fixed time (`suite/osbench.c`, compiled at first use); each test and mode is an ordinary
//! stored run, swept over worker counts, with its full diagnosis.
//!
//! The suite is a loop over [`RunOptions`]: [`run`] builds each test's options and hands
//! them to a [`SuiteObserver`], which runs the sweep as the caller shows one (the binary
//! draws its progress bar), and is told as each test starts and ends.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use scalprof_collect::interrupt::Interrupt;
use scalprof_model::suite::{PointRate, SuiteComparison, SuiteDocument, TestResult, TopCause};
use scalprof_model::{Finding, RunDocument, RunStatus, ThroughputSource};
use scalprof_store::Store;

use crate::options::RunOptions;
use crate::sweep::RunOutcome;
use crate::LoadedRun;

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

/// Why a list of tests selects nothing the suite can run.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error("no test {name:?} (tests: {})", TESTS.iter().map(|t| t.name).collect::<Vec<_>>().join(", "))]
    NoSuchTest { name: String },
    #[error("{name} runs in threads mode only (processes would do the same work)")]
    ThreadsOnly { name: String },
    #[error("mode {mode:?} of {name}: threads or processes")]
    NoSuchMode { name: String, mode: String },
    #[error("selected no test")]
    Empty,
}

/// The tests and modes a list selects (`name` or `name:mode`, comma-separated), in the
/// suite's order; all of them without a list.
pub fn select(list: Option<&str>) -> Result<Vec<(&'static Test, &'static str)>, SelectError> {
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
            return Err(SelectError::NoSuchTest { name: name.into() });
        };
        match mode {
            None => out.extend(all.iter().filter(|(t, _)| t.name == name).copied()),
            Some("threads") => out.push((test, "threads")),
            Some("processes") if test.processes => out.push((test, "processes")),
            Some("processes") => return Err(SelectError::ThreadsOnly { name: name.into() }),
            Some(m) => {
                return Err(SelectError::NoSuchMode {
                    name: name.into(),
                    mode: m.into(),
                })
            }
        }
    }
    if out.is_empty() {
        return Err(SelectError::Empty);
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
            lock_type: match &f.details {
                scalprof_model::FindingDetails::Lock(l) => Some(l.lock_type.to_string()),
                _ => None,
            },
        })
}

/// What a suite runs: the flags of `scalprof suite`, parsed.
#[derive(Clone, Debug, Default)]
pub struct SuiteOptions {
    /// The tests and modes ([`select`]); all of them when `None`.
    pub tests: Option<String>,
    /// The worker counts; the default sweep when `None`.
    pub values: Option<Vec<u64>>,
    /// Seconds each execution of a test runs; 1 (0.5 when `quick`) when `None`.
    pub seconds: Option<f64>,
    /// Repeats per point; 3 (2 when `quick`) when `None`.
    pub repeat: Option<u32>,
    /// Shorter executions and fewer repeats.
    pub quick: bool,
    /// How long one execution may run; 60 s when `None`.
    pub timeout: Option<Duration>,
}

/// What the caller of [`run`] does for each test.
pub trait SuiteObserver {
    /// Test `index` (from 0) of `of` starts.
    fn test_starting(&mut self, index: usize, of: usize, test: &Test, mode: &str);
    /// Runs one test's sweep and returns it (with a progress bar, in the terminal).
    fn sweep(&mut self, opts: &RunOptions) -> Result<RunOutcome>;
    /// A test ended; its run is stored.
    fn test_done(&mut self, result: &TestResult);
}

/// Runs the selected tests one after the other, each an ordinary stored run, until the
/// end or an interrupt; the document lists every test that ran.
pub fn run(
    opts: &SuiteOptions,
    interrupt: &Interrupt,
    observer: &mut dyn SuiteObserver,
) -> Result<SuiteDocument> {
    let selected = select(opts.tests.as_deref())?;
    let seconds = opts.seconds.unwrap_or(if opts.quick { 0.5 } else { 1.0 });
    if !(seconds > 0.0 && seconds <= 3600.0) {
        anyhow::bail!("--seconds must be in (0, 3600]");
    }
    let bin = prepare()?;
    let mut results = Vec::new();
    let mut host = None;
    for (i, (test, mode)) in selected.iter().enumerate() {
        if interrupt.requested() {
            break;
        }
        observer.test_starting(i, selected.len(), test, mode);
        let run_opts = test_options(opts, &bin, test, mode, seconds);
        let outcome = observer
            .sweep(&run_opts)
            .with_context(|| format!("suite test {} ({mode})", test.name))?;
        let doc: &RunDocument = &outcome.doc;
        host.get_or_insert_with(|| doc.host.clone());
        let result = test_result(test, mode, doc);
        observer.test_done(&result);
        results.push(result);
    }
    Ok(SuiteDocument {
        schema: scalprof_model::suite::SUITE_SCHEMA.into(),
        host: host.unwrap_or_else(scalprof_collect::host::probe),
        tests: results,
    })
}

/// Compiles osbench (at first use) and makes the tests' working directory: in a directory
/// no other user can plant a link in (the given SUITE_DIR only if it is private), and
/// osbench refuses links and others' files anyway. Returns osbench's path.
fn prepare() -> Result<std::path::PathBuf> {
    let dir = crate::corpus::default_dir().with_file_name("suite");
    let bin = crate::corpus::compile(&dir, "osbench", SOURCE)?;
    let work = match std::env::var_os("SUITE_DIR").filter(|d| !d.is_empty()) {
        Some(d) => scalprof_collect::private::private_dir(Path::new(&d)).context("SUITE_DIR")?,
        None => scalprof_collect::private::private_dir(&dir.join("work"))?,
    };
    // Inherited by every test's workload; set before any of them starts.
    std::env::set_var("SUITE_DIR", &work);
    Ok(bin)
}

/// The sweep of one test in one mode.
fn test_options(
    opts: &SuiteOptions,
    bin: &Path,
    test: &Test,
    mode: &str,
    seconds: f64,
) -> RunOptions {
    let command = vec![
        bin.display().to_string(),
        test.name.into(),
        mode.into(),
        "{threads}".into(),
        seconds.to_string(),
    ];
    RunOptions {
        values: opts.values.clone(),
        repeat: opts.repeat.unwrap_or(if opts.quick { 2 } else { 3 }),
        label: Some(format!("suite-{}-{mode}", test.name)),
        scaling: Some(ThroughputSource::Weak),
        timeout: Some(opts.timeout.unwrap_or(Duration::from_secs(60))),
        // A test that fails or hangs is recorded, and the suite goes on.
        keep_going: true,
        ..RunOptions::new(command, scalprof_model::SweepParameter::Threads)
    }
}

/// One test's line of the suite document, from its run.
fn test_result(test: &Test, mode: &str, doc: &RunDocument) -> TestResult {
    TestResult {
        name: test.name.into(),
        mode: mode.into(),
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
                repeats: p
                    .repeats
                    .iter()
                    .filter_map(|r| {
                        scalprof_analyze::summary::repeat_throughput(
                            p.value,
                            r,
                            doc.throughput.source,
                        )
                    })
                    .collect(),
            })
            .collect(),
        top_cause: top_cause(&doc.findings),
    }
}

/// A suite document named on the command line: `None` if `arg` is not a file (then it is a
/// run reference), an error if it is a file but not a suite document.
pub fn read_document(arg: &str) -> Result<Option<SuiteDocument>> {
    let path = Path::new(arg);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {arg}"))?;
    let doc: SuiteDocument = serde_json::from_str(&text)
        .ok()
        .filter(|d: &SuiteDocument| d.schema == scalprof_model::suite::SUITE_SCHEMA)
        .with_context(|| {
            format!(
                "{arg} is a file but not a suite document ({}, written by `scalprof suite --json`); \
                 to compare runs, name them by id or label",
                scalprof_model::suite::SUITE_SCHEMA
            )
        })?;
    Ok(Some(doc))
}

/// The stored run a suite document describes: the run with that id, if it is the same test
/// with the same rates (a document from another store may reuse the id).
fn stored_run(store: &Store, t: &TestResult) -> Option<LoadedRun> {
    let id = store.resolve(&t.run_id).ok()?;
    let run = LoadedRun::load(store, id).ok()?;
    let same_rates = run.doc.points.len() == t.points.len()
        && run.doc.points.iter().zip(&t.points).all(|(p, q)| {
            p.value == q.value
                && match (p.throughput, q.throughput) {
                    (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
                    (None, None) => true,
                    _ => false,
                }
        });
    (run.doc.label == format!("suite-{}-{}", t.name, t.mode) && same_rates).then_some(run)
}

/// Two suites compared test by test: from the stored runs where both are in `store`,
/// otherwise from the documents' repeats.
pub fn compare(store: Option<&Store>, a: &SuiteDocument, b: &SuiteDocument) -> SuiteComparison {
    scalprof_analyze::compare::compare_suites(a, b, |ta, tb| {
        let store = store?;
        let (ra, rb) = (stored_run(store, ta)?, stored_run(store, tb)?);
        Some(scalprof_analyze::compare::compare(&ra.doc, &rb.doc))
    })
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
