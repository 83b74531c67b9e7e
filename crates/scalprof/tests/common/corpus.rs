//! The pathology corpus in tests: built once per test binary, swept, and its run
//! documents read back; and [`Case`], one row per pathology with the diagnosis it must
//! get, checked by [`diagnose`] (the corpus test binary makes a test of each row).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;
use serde_json::Value;

use super::{exclusive, scalprof};

/// Profiling needs root or perf_event_paranoid ≤ 1. In CI it must work; elsewhere the
/// test is skipped, and says why.
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

pub fn run_corpus(db: &Path, program: &str, json: &Path) -> Value {
    let bin = corpus().join(program);
    scalprof(db)
        .args(["run", "-t", "1,2", "--repeat", "3", "--json"])
        .arg(json)
        .arg("--")
        .arg(&bin)
        .arg("{threads}")
        .assert()
        .success();
    read_json(json)
}

pub fn efficiency_at(doc: &Value, threads: u64) -> f64 {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["value"] == threads)
        .unwrap()["efficiency"]
        .as_f64()
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

/// The share of the last point's thread-time the budget gives to serial phases.
pub fn serial_share(doc: &Value) -> f64 {
    doc["points"].as_array().unwrap().last().unwrap()["budget"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "serial_fraction")
        .map(|c| c["share"].as_f64().unwrap())
        .sum()
}

/// The share of the last point's thread-time the budget gives `subject`.
pub fn cause_share(doc: &Value, subject: &str) -> f64 {
    doc["points"].as_array().unwrap().last().unwrap()["budget"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["subject"] == subject)
        .map(|c| c["share"].as_f64().unwrap())
        .sum()
}

/// The last point's largest cause and its unexplained share.
pub fn top_cause_and_residual(doc: &Value) -> (String, f64) {
    let budget = &doc["points"].as_array().unwrap().last().unwrap()["budget"];
    let top = budget["causes"][0]["subject"]
        .as_str()
        .unwrap_or("(no cause)")
        .to_string();
    (top, budget["unexplained"].as_f64().unwrap())
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
    /// The finding: kind, scope ("" for any) and subject.
    pub finding: (&'static str, &'static str, &'static str),
    /// It is the first finding, the top cause.
    pub first: bool,
    /// JSON pointers and the value at each (compared as text). A pointer into the
    /// document starts with `/points` or `/findings`; any other is into the finding.
    pub fields: &'static [(&'static str, &'static str)],
    /// JSON pointers as in `fields`, and text the string there contains.
    pub says: &'static [(&'static str, &'static str)],
    /// The budget causes that explain the loss at the last point: subjects, `serial` for
    /// the serial phases, a trailing `*` for a prefix.
    pub explains: Option<(&'static [&'static str], Within)>,
    /// The most the last point's budget leaves unexplained.
    pub unexplained: Option<f64>,
}

impl Case {
    pub const fn new(
        program: &'static str,
        finding: (&'static str, &'static str, &'static str),
    ) -> Self {
        Case {
            program,
            finding,
            first: false,
            fields: &[],
            says: &[],
            explains: None,
            unexplained: None,
        }
    }
}

/// A case's run: its document and the store it is in (for a further look).
pub struct Diagnosed {
    pub doc: Value,
    dir: tempfile::TempDir,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Diagnosed {
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("runs.db")
    }

    /// Another corpus program swept into the same store.
    pub fn run(&self, program: &str) -> Value {
        run_corpus(
            &self.db(),
            program,
            &self.dir.path().join(format!("{program}.json")),
        )
    }

    /// The finding the case names.
    pub fn finding(&self, subject: &str) -> &Value {
        let findings = self.doc["findings"].as_array().unwrap();
        findings
            .iter()
            .find(|f| f["subject"] == subject)
            .unwrap_or_else(|| panic!("{subject} is not a finding: {findings:?}"))
    }
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), String::from)
}

/// The corpus directory as the documents name it.
pub fn corpus_dir() -> String {
    corpus().canonicalize().unwrap().display().to_string()
}

/// Sweeps the case's program and checks its diagnosis; `None` where profiling is not
/// allowed outside CI (said by [`can_profile`]).
pub fn diagnose(case: &Case) -> Option<Diagnosed> {
    if !can_profile() {
        return None;
    }
    let turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let doc = run_corpus(
        &dir.path().join("runs.db"),
        case.program,
        &dir.path().join("run.json"),
    );
    let subject = |s: &str| s.replace("{corpus}", &corpus_dir());
    let findings = doc["findings"].as_array().unwrap();
    let (kind, scope, name) = case.finding;
    let name = subject(name);
    let f = findings
        .iter()
        .find(|f| f["subject"] == name.as_str())
        .unwrap_or_else(|| panic!("{name} is not a finding: {findings:#?}"));
    assert_eq!(f["kind"], kind, "{f}");
    if !scope.is_empty() {
        assert_eq!(f["scope"], scope, "{f}");
    }
    if case.first {
        // The top cause; or, where the traced repeats could not tell it from another,
        // one of the candidates the point says it could be.
        let last = doc["points"].as_array().unwrap().last().unwrap();
        let candidates = last["settling"]["candidates"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let unsettled = last["settling"]["settled"] == false;
        assert!(
            findings[0]["subject"] == name.as_str()
                || (unsettled && candidates.iter().any(|c| c == name.as_str())),
            "not the top cause: {findings:#?}\n{}",
            last["settling"]
        );
    }
    let at = |pointer: &str| {
        let root = if pointer.starts_with("/points") || pointer.starts_with("/findings") {
            &doc
        } else {
            f
        };
        root.pointer(pointer)
            .unwrap_or_else(|| panic!("no {pointer} in {root}"))
            .clone()
    };
    for (pointer, want) in case.fields {
        assert_eq!(text(&at(pointer)), *want, "{pointer} of {f}");
    }
    for (pointer, part) in case.says {
        let have = text(&at(pointer));
        assert!(
            have.contains(part),
            "{pointer} does not say {part:?}: {have}"
        );
    }
    // Shares are checked through their intervals over the traced repeats: a bound holds
    // if some part of the interval meets it, so a test asks what the measurement can tell
    // apart, not one repeat's figure.
    let budget = &doc["points"].as_array().unwrap().last().unwrap()["budget"];
    let interval = |c: &Value, share: &str, interval: &str| -> (f64, f64) {
        let x = c[share].as_f64().unwrap();
        let i = &c[interval];
        (i[0].as_f64().unwrap_or(x), i[1].as_f64().unwrap_or(x))
    };
    if let Some((causes, within)) = &case.explains {
        let loss = 1.0 - efficiency_at(&doc, 2);
        let (low, high) = budget["causes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                let s = c["subject"].as_str().unwrap();
                causes.iter().any(|&want| match want {
                    "serial" => c["kind"] == "serial_fraction",
                    w if w.ends_with('*') => s.starts_with(&w[..w.len() - 1]),
                    w => s == subject(w),
                })
            })
            .map(|c| interval(c, "share", "share_interval"))
            .fold((0.0, 0.0), |(l, h), (a, b)| (l + a, h + b));
        let ok = match within {
            Within::Points(d) => high >= loss - d && low <= loss + d,
            Within::Fraction(lo, hi) => high >= lo * loss && low <= loss + hi,
        };
        assert!(
            ok,
            "{causes:?} explain {low:.2}–{high:.2} of a loss of {loss:.2}: {budget}"
        );
    }
    if let Some(most) = case.unexplained {
        let (left, _) = interval(budget, "unexplained", "unexplained_interval");
        assert!(left <= most, "unexplained at least {left:.2}: {budget}");
    }
    Some(Diagnosed {
        doc,
        dir,
        _turn: turn,
    })
}
