//! An experiment in one line, as `verify` prints it and under the finding it tested.

use scalprof_model::experiment::{Experiment, Verdict};
use scalprof_model::units::human_ns;
use scalprof_model::RunDocument;

use crate::safe::one_line;

/// "fdatasync at threads 2, lengthened by 29 µs and 58 µs per call (0.02 per op): cost 45%
/// (40–50%), as a bottleneck would (predicted 48%): on the critical path; without it:
/// 1.9× (1.8–2.0), measured".
pub fn experiment_line(e: &Experiment, parameter: &str) -> String {
    let head = format!("{} at {parameter} {}", one_line(&e.subject), e.point);
    if e.verdict == Verdict::NotLengthened {
        return format!("{head}: not lengthened: {}", e.reason);
    }
    let delays: Vec<String> = e
        .delays_ns
        .iter()
        .filter(|&&d| d > 0)
        .map(|&d| human_ns(d as f64))
        .collect();
    let per_op = if e.occurrences_per_op >= 0.001 {
        format!("{:.3}", e.occurrences_per_op)
    } else {
        format!("{:.1e}", e.occurrences_per_op)
    };
    let mut line = format!(
        "{head}, lengthened by {} per occurrence ({per_op} per op; {}): {}",
        delays.join(" and "),
        e.primitive,
        e.reason
    );
    if let Some(w) = &e.calibrated_what_if {
        line += &format!(
            "; without it: {:.2}× ({:.2}–{:.2}), measured",
            w.speedup, w.interval[0], w.interval[1]
        );
        if let Some([x, lo, hi]) = w.halved_hold {
            line += &format!("; its hold halved: {x:.2}× ({lo:.2}–{hi:.2})");
        }
    }
    line
}

/// The experiments no finding points at (causes named with `verify --cause`), in order:
/// the summary and the HTML report list them after the findings.
pub(crate) fn unlinked(doc: &RunDocument) -> impl Iterator<Item = &Experiment> {
    doc.experiments
        .iter()
        .enumerate()
        .filter(|(i, _)| !doc.findings.iter().any(|f| f.experiment == Some(*i)))
        .map(|(_, e)| e)
}
