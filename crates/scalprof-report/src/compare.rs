//! The terminal view of a comparison: the verdict, then per point B/A and ministat-style
//! verdicts per metric, the lock waits and findings that changed.

use comfy_table::Table;
use scalprof_model::compare::{Comparison, Metric, MetricComparison, PointComparison};

use crate::format::{ns, si};

/// The terminal view of a comparison (ministat-style verdicts per point and metric).
pub fn comparison(c: &Comparison, a_label: &str, b_label: &str) -> String {
    let mut out = format!("A: run {} ({a_label})\nB: run {} ({b_label})\n", c.a, c.b);
    if !c.verdict.is_empty() {
        out += &format!("{}\n", c.verdict);
    }
    for w in &c.warnings {
        out += &format!("  ! {w}\n");
    }
    if c.points.is_empty() {
        out += "\nthe runs have no sweep point in common\n";
    }
    for p in &c.points {
        out += &point_section(p);
    }
    for f in &c.findings_appeared {
        out += &format!("\nfinding appeared in B: {f}");
    }
    for f in &c.findings_disappeared {
        out += &format!("\nfinding gone in B: {f}");
    }
    if !c.findings_appeared.is_empty() || !c.findings_disappeared.is_empty() {
        out.push('\n');
    }
    out
}

/// One point compared: the throughput ratio and efficiencies, the metrics' table, then
/// the lock waits and causes that changed.
fn point_section(p: &PointComparison) -> String {
    let mut out = format!("\npoint {}", p.value);
    if let Some(r) = &p.throughput_ratio {
        out += &format!(
            ": B/A throughput {:.2}× [{:.2}–{:.2}]",
            r.ratio, r.ci95[0], r.ci95[1]
        );
    }
    if let Some([ea, eb]) = p.efficiency {
        out += &format!(", efficiency {:.0}% → {:.0}%", ea * 100.0, eb * 100.0);
    }
    out += ":\n";
    out += &metrics_table(&p.metrics).to_string();
    out.push('\n');
    for l in &p.locks {
        out += &format!(
            "  lock {}: wait per op {} → {}\n",
            l.lock,
            ns(l.a_wait_ns_per_op),
            ns(l.b_wait_ns_per_op)
        );
    }
    if !p.causes.is_empty() {
        out += "  what changed, per operation (share of the change in thread-time per op):\n";
    }
    for c in &p.causes {
        out += &format!(
            "    {}: {} → {} ({})\n",
            c.cause,
            ns(c.a_ns_per_op),
            ns(c.b_ns_per_op),
            explains(c.explains)
        );
    }
    out
}

/// Each metric's median and range in A and in B, and the verdict on the difference.
fn metrics_table(metrics: &[MetricComparison]) -> Table {
    let mut t = crate::width::table();
    t.set_header(vec![
        "metric",
        "A median (min–max)",
        "B median (min–max)",
        "verdict",
    ]);
    for m in metrics {
        let f = |x: f64| {
            if m.metric == Metric::Throughput {
                si(x)
            } else {
                format!("{x:.4}")
            }
        };
        // One side: "median (min–max) n=N".
        let side = |median: f64, range: [f64; 2], n| {
            format!("{} ({}–{}) n={n}", f(median), f(range[0]), f(range[1]))
        };
        t.add_row(vec![
            m.metric.to_string(),
            side(m.a_median, m.a_range, m.a_n),
            side(m.b_median, m.b_range, m.b_n),
            m.verdict.clone(),
        ]);
    }
    t
}

/// "explains 78%"; more than the whole change (other causes moved the other way, or the
/// profile and the clock disagree) is said as such.
pub(crate) fn explains(share: f64) -> String {
    if share > 1.0 {
        format!("more than all of it: {:.0}%", share * 100.0)
    } else {
        format!("explains {:.0}%", share * 100.0)
    }
}
