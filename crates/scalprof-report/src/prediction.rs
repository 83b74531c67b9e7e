//! The prediction's lines in the summary: the throughput expected at the larger thread
//! counts, the cause that limits it, and what the measured points could not show.

use scalprof_model::prediction::PredictedPoint;
use scalprof_model::{Prediction, RunDocument};

use crate::format::si;

/// "prediction: 8 threads 4.6M/s (3.3M–6.2M) · 16 threads 4.4M/s (…)", the limiting
/// cause and the method on the next line, then (`verbose`) each unseen thing, else
/// their count; "" without a prediction.
pub fn prediction_lines(doc: &RunDocument, verbose: bool) -> String {
    let Some(p) = doc.model.as_ref().and_then(|m| m.prediction.as_ref()) else {
        return String::new();
    };
    let parameter = doc.sweep.parameter.as_str();
    let points: Vec<String> = p
        .points
        .iter()
        .map(|q| format!("{} {parameter} {}", q.threads, per_second(q)))
        .collect();
    let target = p.points.last().map_or(0, |q| q.threads);
    let cpus = u64::from(doc.host.cpus);
    // Past this machine's CPUs the prediction is for a bigger one like it.
    let on = if target > cpus && cpus > 0 {
        format!(" (on {target} CPUs like this machine's)")
    } else {
        String::new()
    };
    let mut out = format!("prediction{on}: {}\n", points.join(" · "));
    out += &format!("  {} · {}", limiting(p, parameter), p.method);
    match p.unseen.len() {
        0 => out.push('\n'),
        n if !verbose => out += &format!(" · {n} thing{} not seen (-v)\n", plural(n)),
        _ => {
            out.push('\n');
            for u in &p.unseen {
                out += &format!("  not seen: {u}\n");
            }
        }
    }
    out
}

/// "4.26M/s (3.31M–5.77M)": a predicted point's throughput and interval.
pub(crate) fn per_second(q: &PredictedPoint) -> String {
    format!(
        "{}/s ({}–{})",
        si(q.throughput),
        si(q.interval[0]),
        si(q.interval[1])
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn limiting(p: &Prediction, parameter: &str) -> String {
    let target = p.points.last().map_or(0, |q| q.threads);
    match &p.limiting {
        Some(l) => format!(
            "limited by {} ({}) from {} {parameter}",
            l.subject,
            l.kind.as_str(),
            l.from_threads
        ),
        None => format!("no measured cause limits it up to {target} {parameter}"),
    }
}
