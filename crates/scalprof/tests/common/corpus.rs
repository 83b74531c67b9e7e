//! The pathology corpus in tests: built once per test binary, swept, and its run
//! documents read back; and [`Case`], one row per pathology with the diagnosis it must
//! get, checked by [`diagnose`] (`measured/corpus.rs` makes a test of each row).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;
use scalprof_model::locks::{LockRow, Scope};
use scalprof_model::{
    Budget, Cause, Finding, FindingDetails, FindingKind, Interval, LockDetails, Point, RunDocument,
};
use serde::Serialize;
use serde_json::Value;

use super::{exclusive, scalprof};

/// Profiling needs root or perf_event_paranoid ≤ 1. In CI it must work; elsewhere the
/// test is skipped, and says why.
/// Asserts that this test may profile (root, or perf_event_paranoid ≤ 1). A test that
/// calls it is marked `#[cfg_attr(not(privileged), ignore = "…")]`: built for another
/// user outside CI it is listed as ignored, never run to pass without checking.
pub fn require_profiling() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = paranoid();
    assert!(
        root || paranoid <= 1,
        "this test profiles: run it as root or with kernel.perf_event_paranoid <= 1 (it is \
         {paranoid}); as another user, cargo test lists it as ignored unless CI is set"
    );
}

fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(4)
}

/// Whether this test may profile: for a check a test makes only where it can (the
/// measurement around it needs no privileges).
pub fn can_profile() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .unwrap_or(4);
    if root || paranoid <= 1 {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must be able to profile: run as root or set kernel.perf_event_paranoid=1"
    );
    eprintln!("skipped: profiling needs root or perf_event_paranoid <= 1 (it is {paranoid})");
    false
}

/// A run document, its findings checked against the contract's finding shape.
pub fn read_json(path: &Path) -> Value {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    if doc.get("findings").is_some() {
        super::check_findings(&doc);
        super::check_budgets(&doc);
    }
    doc
}

/// The corpus, built once per test binary by `scalprof corpus`.
pub fn corpus() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corpus");
        let out = Command::cargo_bin("scalprof")
            .unwrap()
            .args(["corpus", "--out"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

/// Sweeps the corpus program `program` at 1 and 2 threads (3 repeats) into the store
/// `db`, writing its run document to `json`.
fn sweep(db: &Path, program: &str, json: &Path) {
    sweep_scaled(db, program, json, None);
}

/// [`sweep`] with each thread's work scaled by `scale` (`CORPUS_SCALE`, corpus/common.h).
fn sweep_scaled(db: &Path, program: &str, json: &Path, scale: Option<&str>) {
    let bin = corpus().join(program);
    let mut cmd = scalprof(db);
    if let Some(scale) = scale {
        cmd.env("CORPUS_SCALE", scale);
    }
    cmd.args(["run", "-t", "1,2", "--repeat", "3", "--json"])
        .arg(json)
        .arg("--")
        .arg(&bin)
        .arg("{threads}")
        .assert()
        .success();
}

/// The corpus program `program` swept by [`sweep`]: its run document, as JSON.
pub fn run_corpus(db: &Path, program: &str, json: &Path) -> Value {
    sweep(db, program, json);
    read_json(json)
}

/// [`run_corpus`] with each thread's work scaled by `scale`, for a program whose full
/// work takes seconds a run.
pub fn run_corpus_scaled(db: &Path, program: &str, json: &Path, scale: &str) -> Value {
    sweep_scaled(db, program, json, Some(scale));
    read_json(json)
}

/// A run document read into the model's types, after [`read_json`]'s checks of its JSON.
pub fn read_run(path: &Path) -> RunDocument {
    serde_json::from_value(read_json(path))
        .unwrap_or_else(|e| panic!("{} is no run document: {e}", path.display()))
}

/// The corpus program `program` swept by [`sweep`]: its run document.
pub fn sweep_corpus(db: &Path, program: &str, json: &Path) -> RunDocument {
    sweep(db, program, json);
    read_run(json)
}

/// `value` as JSON, for a failed assertion's message.
pub fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

/// The efficiency of the point at `threads`.
pub fn efficiency_at(doc: &RunDocument, threads: u64) -> f64 {
    doc.points
        .iter()
        .find(|p| p.value == threads)
        .unwrap()
        .efficiency
        .unwrap()
}

pub fn folded(db: &Path, point: u64) -> Vec<(String, u64)> {
    let out = scalprof(db)
        .args(["flame", "latest", "--folded", "--point", &point.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// The last point.
pub fn last_point(doc: &RunDocument) -> &Point {
    doc.points.last().unwrap()
}

/// The last point's budget.
pub fn last_budget(doc: &RunDocument) -> &Budget {
    last_point(doc)
        .budget
        .as_ref()
        .unwrap_or_else(|| panic!("no budget at the last point: {}", json(last_point(doc))))
}

/// A point's lock table.
pub fn lock_rows(point: &Point) -> &[LockRow] {
    &point.locks.as_ref().unwrap().rows
}

/// The share of the last point's thread-time the budget gives `subject`.
pub fn cause_share(doc: &RunDocument, subject: &str) -> f64 {
    last_budget(doc)
        .causes
        .iter()
        .filter(|c| c.subject == subject)
        .map(|c| c.share)
        .sum()
}

/// The last point's largest cause and its unexplained share.
pub fn top_cause_and_residual(doc: &RunDocument) -> (String, f64) {
    let budget = last_budget(doc);
    let top = budget
        .causes
        .first()
        .map_or("(no cause)", |c| c.subject.as_str())
        .to_string();
    (top, budget.unexplained)
}

/// Names no finding, table row or caller may carry: scalprof's own BPF and perf frames.
pub fn is_tool_frame(name: &str) -> bool {
    let f = name.strip_suffix("_[k]").unwrap_or(name);
    [
        "bpf_prog_",
        "bpf_trace_run",
        "__bpf_trace_",
        "__bpf_prog_enter",
        "bpf_get_stack",
        "perf_callchain",
        "get_perf_callchain",
        "unwind_next_frame",
        "__orc_find",
        "unwind_get_return_address",
        "bpf_ksym_find",
    ]
    .iter()
    .any(|p| f.starts_with(p))
}

/// How closely the causes named must add up to the loss (1 − efficiency) at the last point.
pub enum Within {
    /// |causes − loss| ≤ this.
    Points(f64),
    /// causes ≥ this fraction of the loss, and ≤ the loss + the second figure.
    Fraction(f64, f64),
}

/// One pathology and the diagnosis it must get, swept at 1 and 2 threads (3 repeats).
/// `{corpus}` in a subject stands for the corpus directory.
pub struct Case {
    pub program: &'static str,
    /// The finding: kind, scope (`None` for any) and subject.
    pub finding: (FindingKind, Option<Scope>, &'static str),
    /// It is the first finding, the top cause.
    pub first: bool,
    /// The budget causes that explain the loss at the last point: subjects, `serial` for
    /// the serial phases, a trailing `*` for a prefix.
    pub explains: Option<(&'static [&'static str], Within)>,
    /// The most the last point's budget leaves unexplained.
    pub unexplained: Option<f64>,
}

impl Case {
    pub const fn new(
        program: &'static str,
        finding: (FindingKind, Option<Scope>, &'static str),
    ) -> Self {
        Case {
            program,
            finding,
            first: false,
            explains: None,
            unexplained: None,
        }
    }
}

/// A case's run: its document and the store it is in (for a further look).
pub struct Diagnosed {
    pub doc: RunDocument,
    /// The subject of the case's finding, `{corpus}` replaced.
    subject: String,
    dir: tempfile::TempDir,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Diagnosed {
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("runs.db")
    }

    /// Another corpus program swept into the same store.
    pub fn run(&self, program: &str) -> RunDocument {
        sweep_corpus(
            &self.db(),
            program,
            &self.dir.path().join(format!("{program}.json")),
        )
    }

    /// The finding the case names.
    pub fn finding(&self) -> &Finding {
        find(&self.doc.findings, &self.subject)
    }

    /// The details of the finding the case names, a lock's.
    pub fn lock(&self) -> &LockDetails {
        match &self.finding().details {
            FindingDetails::Lock(lock) => lock,
            _ => panic!("not a lock's details: {}", json(self.finding())),
        }
    }
}

/// The finding about `subject`.
fn find<'a>(findings: &'a [Finding], subject: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.subject == subject)
        .unwrap_or_else(|| panic!("{subject} is not a finding: {findings:#?}"))
}

/// The corpus directory as the documents name it.
pub fn corpus_dir() -> String {
    corpus().canonicalize().unwrap().display().to_string()
}

/// Sweeps the case's program and checks its diagnosis.
pub fn diagnose(case: &Case) -> Diagnosed {
    require_profiling();
    let turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = sweep_corpus(
        &dir.path().join("runs.db"),
        case.program,
        &dir.path().join("run.json"),
    );
    let subject = |s: &str| s.replace("{corpus}", &corpus_dir());
    let (kind, scope, name) = case.finding;
    let name = subject(name);
    let f = find(&doc.findings, &name);
    assert_eq!(f.kind, kind, "{}", json(f));
    if scope.is_some() {
        assert_eq!(f.scope, scope, "{}", json(f));
    }
    if case.first {
        check_first(&doc, &name);
    }
    if let Some((causes, within)) = &case.explains {
        let named = |c: &Cause| {
            causes.iter().any(|&want| match want {
                "serial" => c.kind == FindingKind::SerialFraction,
                w if w.ends_with('*') => c.subject.starts_with(&w[..w.len() - 1]),
                w => c.subject == subject(w),
            })
        };
        check_explains(&doc, named, causes, within);
    }
    if let Some(most) = case.unexplained {
        let budget = last_budget(&doc);
        let (left, _) = interval(budget.unexplained, budget.unexplained_interval);
        assert!(
            left <= most,
            "unexplained at least {left:.2}: {}",
            json(budget)
        );
    }
    Diagnosed {
        doc,
        subject: name,
        dir,
        _turn: turn,
    }
}

/// Checks that `subject` is the top cause; or, where the traced repeats could not tell it
/// from another, one of the candidates the last point says it could be.
fn check_first(doc: &RunDocument, subject: &str) {
    let settling = last_point(doc).settling.as_ref();
    let candidates = settling.map_or(&[][..], |s| &s.candidates[..]);
    let unsettled = settling.is_some_and(|s| !s.settled);
    assert!(
        doc.findings[0].subject == subject
            || (unsettled && candidates.iter().any(|c| c == subject)),
        "not the top cause: {:#?}\n{}",
        doc.findings,
        json(&settling)
    );
}

// Shares are checked through their intervals over the traced repeats: a bound holds if
// some part of the interval meets it, so a test asks what the measurement can tell
// apart, not one repeat's figure.

/// A share's interval over the traced repeats; the share alone where it has none.
fn interval(share: f64, interval: Option<Interval>) -> (f64, f64) {
    let [low, high] = interval.unwrap_or([share, share]);
    (low, high)
}

/// Checks that the last point's causes that are `named` add up to its loss (1 − the
/// efficiency at 2 threads), `within` the bound.
fn check_explains(
    doc: &RunDocument,
    named: impl Fn(&Cause) -> bool,
    causes: &[&str],
    within: &Within,
) {
    let budget = last_budget(doc);
    let loss = 1.0 - efficiency_at(doc, 2);
    let (low, high) = budget
        .causes
        .iter()
        .filter(|c| named(c))
        .map(|c| interval(c.share, c.share_interval))
        .fold((0.0, 0.0), |(l, h), (a, b)| (l + a, h + b));
    let ok = match within {
        Within::Points(d) => high >= loss - d && low <= loss + d,
        Within::Fraction(lo, hi) => high >= lo * loss && low <= loss + hi,
    };
    assert!(
        ok,
        "{causes:?} explain {low:.2}–{high:.2} of a loss of {loss:.2}: {}",
        json(budget)
    );
}
