//! The HTML report of a comparison of two runs.

use crate::si;
use std::fmt::Write;

use super::*;

pub fn compare_report(
    c: &scalprof_model::compare::Comparison,
    a_label: &str,
    b_label: &str,
    diff: Option<&[u8]>,
) -> String {
    let mut h = String::new();
    let title = format!("scalprof compare: run {} → run {}", c.a, c.b);
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1><p>A: run {} ({})<br>B: run {} ({})</p>",
        esc(&title),
        esc(&title),
        esc(&c.a),
        esc(a_label),
        esc(&c.b),
        esc(b_label)
    );
    if !c.verdict.is_empty() {
        let _ = write!(h, "<p id=\"verdict\"><b>{}</b></p>", esc(&c.verdict));
    }
    h += &compare_plot(c);
    for p in &c.points {
        let _ = write!(
            h,
            "<h2>point {}</h2><table><tr><th>metric</th><th>A median (min–max)</th><th>B median (min–max)</th><th class=\"l\">verdict</th></tr>",
            p.value
        );
        for m in &p.metrics {
            let f = |x: f64| {
                if m.metric == scalprof_model::compare::Metric::Throughput {
                    si(x)
                } else {
                    format!("{x:.4}")
                }
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{} ({}–{})</td><td>{} ({}–{})</td><td class=\"l\">{}</td></tr>",
                esc(m.metric.as_str()),
                f(m.a_median),
                f(m.a_range[0]),
                f(m.a_range[1]),
                f(m.b_median),
                f(m.b_range[0]),
                f(m.b_range[1]),
                esc(&m.verdict)
            );
        }
        h += "</table>";
        for l in &p.locks {
            let _ = write!(
                h,
                "<p>lock {}: wait per op {:.0} ns → {:.0} ns</p>",
                esc(&l.lock),
                l.a_wait_ns_per_op,
                l.b_wait_ns_per_op
            );
        }
    }
    for f in &c.findings_appeared {
        let _ = write!(h, "<p class=\"warn\">finding appeared in B: {}</p>", esc(f));
    }
    for f in &c.findings_disappeared {
        let _ = write!(h, "<p>finding gone in B: {}</p>", esc(f));
    }
    if let Some(svg) = diff {
        let _ = write!(
            h,
            "<h2>What changed per operation</h2>{}",
            flame_frame("flame-diff", "differential flame graph", svg)
        );
    }
    h += "</body></html>\n";
    h
}
