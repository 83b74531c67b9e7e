//! The run summary: the header, the verdict line, the default screen and `-v`'s details,
//! warnings and findings with what to do.

use scalprof_model::{Point, RunDocument, Settling, SweepParameter, LISTED_SHARE};

use crate::locks::{lock_growth, lock_table, row_share};
use crate::safe::one_line;
use crate::tables::{
    complexity_table, counters_line, model_line, points_table, profile_line, split_line, what_grew,
    MIN_SHARE_SHOWN,
};

mod header;
mod tracing;
use header::header;
pub(crate) use header::plural;
pub use header::short_commit;
use tracing::tracing_line;

/// The terminal summary of a run.
pub fn summary(doc: &RunDocument) -> String {
    summary_with(doc, false, false)
}

/// The summary; `all_locks` shows every lock row instead of those above 1% of the
/// point's thread-time.
pub fn summary_with(doc: &RunDocument, all_locks: bool, verbose: bool) -> String {
    // The default screen is what to read first: the verdict, the points, the causes and
    // what to do. The measurement's own details (time split, counters, profile quality,
    // what grew, each point's lock table) come with `verbose` (`show -v`), or `--locks`.
    let verbose = verbose || all_locks;
    let shown = crate::warnings::shown(&doc.warnings, doc.sweep.parameter.as_str(), verbose);
    let mut out = header(doc, &shown.headline);
    out += &verdicts(doc);
    out.push('\n');
    match doc.points.as_slice() {
        [] => out += "no point was measured\n",
        // One point is no sweep: no speedup, efficiency or model to show.
        [p] => out += &one_point_line(doc.sweep.parameter.as_str(), p),
        _ => {
            out += &points_table(doc).to_string();
            out.push('\n');
            out += &format!("\nmodel: {}\n", run_model_line(doc));
            out += &crate::prediction::prediction_lines(doc, verbose);
        }
    }
    if verbose {
        out += &details(doc, all_locks);
    }
    out += &lock_growth(doc);
    if let Some(c) = &doc.complexity {
        out += &complexity_table(c);
    }
    out += &warnings_and_findings(doc, &shown);
    if !verbose && !doc.points.is_empty() {
        let warnings = match shown.hidden {
            0 => String::new(),
            n => format!("{n} more warning{}, ", plural(n)),
        };
        out += &format!(
            "more: scalprof show {} -v ({warnings}time split, counters, profile, what grew, lock tables)\n",
            doc.id
        );
    }
    out
}

/// "threads 1: wall 1.234 s (1.201–1.250) · user 1.100 s · sys 0.020 s · 3/3 repeats".
fn one_point_line(parameter: &str, p: &Point) -> String {
    let ok = p.repeats.iter().filter(|r| r.succeeded()).count();
    let mut parts = vec![format!("{parameter} {}", p.value)];
    if let Some(w) = p.wall_s {
        parts.push(format!("wall {} s", crate::tables::spread(Some(w))));
    }
    if let (Some(u), Some(s)) = (p.user_s, p.sys_s) {
        parts.push(format!("user {:.3} s · sys {:.3} s", u.median, s.median));
    }
    if let Some(x) = p.throughput {
        parts.push(format!("throughput {}", crate::format::si(x)));
    }
    if !p.repeats.is_empty() {
        parts.push(format!("{ok}/{} repeats", p.repeats.len()));
    }
    format!("{}\n", parts.join(" · "))
}

/// The verdict of each point past the first, under a heading; empty when none has one.
fn verdicts(doc: &RunDocument) -> String {
    // The baseline's budget is useful work and scalprof's cost only: no verdict to read.
    let traced = doc.points.iter().any(|p| !p.traced_repeats.is_empty());
    let lines: Vec<String> = doc
        .points
        .iter()
        .skip(1)
        .filter_map(|p| {
            if traced && p.traced_repeats.is_empty() {
                // Its clean repeats ran and the sweep stopped (or failed) before the
                // traced ones: the budget there has nothing to name a cause from.
                let useful = p.budget.as_ref().map(|b| b.useful).or(p.efficiency)?;
                return Some(format!(
                    "{} {}: {:.0}% useful · not traced (the sweep stopped before this point's traced repeats)",
                    p.value,
                    doc.sweep.parameter.as_str(),
                    useful * 100.0
                ));
            }
            point_verdict(doc.sweep.parameter.as_str(), p)
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("verdict (where the thread-time per operation went):\n");
    for line in lines {
        out += &format!("  {line}\n");
    }
    out
}

/// One point's verdict line, with the traced repeats it was made from and, when they
/// disagree, why; `None` for a point without a budget.
fn point_verdict(parameter: &str, p: &Point) -> Option<String> {
    let mut line = verdict_line(parameter, p.value, p.budget.as_ref()?, p.efficiency);
    if let Some(s) = p.settling.as_ref().filter(|s| s.traced_repeats > 0) {
        line += &format!(" · {} traced", s.traced_repeats);
        if !s.settled {
            line += &unsettled(s);
        }
    }
    Some(line)
}

/// The line under a verdict the traced repeats left open: why, and which causes it could be.
fn unsettled(s: &Settling) -> String {
    let names: Vec<String> = s.candidates.iter().map(|c| one_line(c)).collect();
    let after = if s.traced_repeats > 1 {
        format!("{} traced repeats", s.traced_repeats)
    } else {
        "one traced repeat".to_string()
    };
    if names.len() > 1 {
        format!(
            "\n    unsettled after {after}: {}; the top cause could be {}",
            one_line(&s.reason),
            names.join(" or ")
        )
    } else {
        format!(
            "\n    unsettled after {after}: {}; it may or may not be a finding",
            one_line(&s.reason)
        )
    }
}

/// The measurement's details: time split, counters, profile and tracing quality, what
/// grew, each point's lock table.
pub(crate) fn details(doc: &RunDocument, all_locks: bool) -> String {
    let mut out = String::new();
    if let Some(split) = split_line(&doc.points, doc.sweep.parameter.as_str()) {
        out += &format!("time:  {split}\n");
    }
    if let Some(line) = counters_line(doc) {
        out += &format!("counted: {line}\n");
    }
    if let Some(line) = profile_line(doc) {
        out += &format!("profile: {line}\n");
    }
    if let Some(line) = tracing_line(doc) {
        out += &format!("tracing: {line}\n");
    }
    if let Some(d) = &doc.scaling_diff {
        if d.points.len() >= 2 {
            out += &what_grew(d);
        }
    }
    for p in &doc.points {
        if let Some(l) = &p.locks {
            if all_locks {
                out += &lock_table(doc.sweep.parameter.as_str(), p.value, l);
                continue;
            }
            let mut shown = l.clone();
            shown
                .rows
                .retain(|r| row_share(p, r).is_none_or(|s| s >= MIN_SHARE_SHOWN));
            let hidden = l.rows.len() - shown.rows.len();
            let table = lock_table(doc.sweep.parameter.as_str(), p.value, &shown);
            out += &if hidden > 0 && shown.rows.is_empty() {
                table.replace(
                    "  no contended locks\n",
                    "  no lock above 1% of the thread-time\n",
                )
            } else {
                table
            };
            if hidden > 0 {
                out += &format!(
                    "  ({hidden} row{} below 1% of the thread-time not shown: scalprof show {} --locks)\n",
                    plural(hidden),
                    doc.id
                );
            }
        }
    }
    out
}

/// Warnings, then the findings with what to do, then where the workload's output is.
pub(crate) fn warnings_and_findings(doc: &RunDocument, shown: &crate::warnings::Shown) -> String {
    let mut out = String::new();
    if !shown.rest.is_empty() {
        out += "\nwarnings:\n";
        for w in &shown.rest {
            // One line each: another process's name is part of some (a forged `!` line).
            out += &format!("  ! {}\n", one_line(w));
        }
    }
    if !doc.findings.is_empty() {
        out += "\nfindings:\n";
        for f in &doc.findings {
            out += &format!(
                "  {:>4.0}%  {}  {}: {}\n",
                f.score * 100.0,
                f.kind,
                one_line(&f.subject),
                one_line(&f.evidence)
            );
            if let Some(w) = f.what_if {
                out += &format!(
                    "         without it: up to {:.2}× at {} {} (an upper bound)\n",
                    w.speedup, w.value, doc.sweep.parameter
                );
            }
            if let Some(e) = f.experiment.and_then(|i| doc.experiments.get(i)) {
                out += &format!(
                    "         experiment: {}\n",
                    crate::experiment_line(e, doc.sweep.parameter.as_str())
                );
            }
            // Advice is said once: findings about one program's internals often share it.
            if let Some(first) = doc
                .findings
                .iter()
                .take_while(|g| !std::ptr::eq(*g, f))
                .find(|g| g.suggestion == f.suggestion && !f.suggestion.is_empty())
            {
                out += &format!(
                    "         what to do: as for {} above\n",
                    one_line(&first.subject)
                );
            } else if !f.suggestion.is_empty() {
                out += &format!("         what to do: {}\n", one_line(&f.suggestion));
            }
        }
    }
    let unlinked: Vec<_> = crate::experiment::unlinked(doc).collect();
    if !unlinked.is_empty() {
        out += "\nexperiments:\n";
        for e in unlinked {
            out += &format!(
                "  {}\n",
                crate::experiment_line(e, doc.sweep.parameter.as_str())
            );
        }
    }
    out += &format!("\nworkload output: {}\n", doc.output_dir);
    out
}

/// `2 threads: 54% useful · mmap_lock 40% (35–44%) (rwsem:W; __vm_munmap) · unexplained 6%`:
/// a share's interval over the traced repeats is shown when it is at least
/// [`WIDE_INTERVAL`] wide.
pub fn verdict_line(
    parameter: &str,
    value: u64,
    b: &scalprof_model::Budget,
    efficiency: Option<f64>,
) -> String {
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let with = |x: f64, i: Option<scalprof_model::Interval>| match i {
        Some([lo, hi]) if hi - lo >= WIDE_INTERVAL => {
            format!("{} ({:.0}–{:.0}%)", pct(x), lo * 100.0, hi * 100.0)
        }
        _ => pct(x),
    };
    let mut parts = vec![match efficiency.filter(|&e| e > SUPERLINEAR) {
        // More than linear: not "100% useful", which would read as linear scaling.
        Some(e) => format!("super-linear (efficiency {:.0}%)", e * 100.0),
        None => format!("{} useful", with(b.useful, b.useful_interval)),
    }];
    for c in b
        .causes
        .iter()
        .filter(|c| c.share >= MIN_SHARE_SHOWN)
        .take(3)
    {
        let name = if c.foreign {
            "other processes (interference)".to_string()
        } else {
            one_line(&c.subject)
        };
        let share = with(c.share, c.share_interval);
        parts.push(if c.detail.is_empty() || c.foreign {
            format!("{name} {share}")
        } else {
            format!("{name} {share} ({})", one_line(&c.detail))
        });
    }
    let minor: f64 = b
        .causes
        .iter()
        .enumerate()
        .filter(|(i, c)| *i >= 3 || c.share < MIN_SHARE_SHOWN)
        .map(|(_, c)| c.share)
        .sum();
    if minor >= LISTED_SHARE {
        parts.push(format!("other causes {}", pct(minor)));
    }
    if b.overhead >= LISTED_SHARE {
        parts.push(format!("scalprof {}", pct(b.overhead)));
    }
    parts.push(format!(
        "unexplained {}",
        with(b.unexplained, b.unexplained_interval)
    ));
    format!("{value} {parameter}: {}", parts.join(" · "))
}

/// The model line of a run: two measured points fix any model exactly, so their σ (above
/// 1 or not) and R² say nothing; the line says what the two points do say.
pub fn run_model_line(doc: &RunDocument) -> String {
    let measured: Vec<&scalprof_model::Point> =
        doc.points.iter().filter(|p| p.speedup.is_some()).collect();
    if doc.sweep.parameter.scales() && measured.len() == 2 {
        let last = measured[1];
        return format!(
            "none fitted: two points fix any model exactly (speedup {:.2}× at {} {}); sweep three or more for the USL",
            last.speedup.unwrap_or(0.0),
            last.value,
            doc.sweep.parameter
        );
    }
    if doc.model.is_none() && doc.sweep.parameter.scales() && measured.len() > 2 {
        return format!(
            "none: no USL or Amdahl curve fits the {} measured points (the fit did not converge); the table above is the measurement",
            measured.len()
        );
    }
    let line = model_line(doc.model.as_ref(), doc.sweep.parameter.as_str());
    // A peak fitted through points past the CPUs is where this machine ran out of them.
    let cpus = doc.host.limits.as_ref().map_or(doc.host.cpus, |l| {
        l.usable_cpus.clamp(1, doc.host.cpus.max(1))
    });
    let past = measured.iter().any(|p| p.value > u64::from(cpus));
    match doc.model.as_ref().and_then(|m| m.peak) {
        Some(_) if doc.sweep.parameter == SweepParameter::Threads && past && cpus > 0 => format!(
            "{line}; fitted through points past this machine's {cpus} CPUs, so the peak is where \
             it ran out of them (--predict N says what N CPUs would do)"
        ),
        _ => line,
    }
}

/// Efficiency above this is super-linear, not noise around linear.
const SUPERLINEAR: f64 = 1.05;

/// Intervals at least this wide (in share) are printed: 5 points of efficiency, the
/// reporting threshold, is where one more repeat could change a verdict.
pub const WIDE_INTERVAL: f64 = 0.05;

/// `stress 1.20 s (pid 812), cc1 0.31 s (pid 901)`: the foreign processes of an
/// interference, heaviest first.
pub fn foreign_processes(processes: &[scalprof_model::ForeignProcess]) -> String {
    if processes.is_empty() {
        return "processes that started and ended within the repeat".into();
    }
    processes
        .iter()
        .map(|p| format!("{} {:.2} s (pid {})", one_line(&p.comm), p.cpu_s, p.pid))
        .collect::<Vec<_>>()
        .join(", ")
}
