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

/// The gate's verdict in one line, for the end of a CI log: where B is slower than the
/// threshold allows and by how much, or that no point is; `None` without a gate.
pub fn gate_line(c: &Comparison, parameter: &str) -> Option<String> {
    let g = c.gate.as_ref()?;
    let at = |value: u64| match (parameter, value) {
        ("threads", 1) => "1 thread".to_string(),
        ("threads", n) => format!("{n} threads"),
        (p, n) => format!("{p} {n}"),
    };
    let pct = g.threshold_pct;
    if g.failed {
        let points: Vec<String> = c
            .points
            .iter()
            .filter(|p| g.slower_points.contains(&p.value))
            .map(|p| match &p.throughput_ratio {
                Some(r) => format!("{} ({})", at(p.value), signed_pct((r.ratio - 1.0) * 100.0)),
                None => at(p.value),
            })
            .collect();
        return Some(format!(
            "gate: B is slower than {pct}% at {} — failed",
            points.join(", ")
        ));
    }
    let untested: Vec<String> = g.untested_points.iter().map(|&v| at(v)).collect();
    Some(if untested.is_empty() {
        format!("gate: no point slower than {pct}% — passed")
    } else if untested.len() == c.points.len() {
        "gate: no point could be tested (fewer than 2 repeats a side) — passed, untested"
            .to_string()
    } else {
        format!(
            "gate: no point slower than {pct}% — passed ({} untested: fewer than 2 repeats a side)",
            untested.join(", ")
        )
    })
}

/// A percentage with its sign, a true minus for a loss: "−12.3%", "+4.0%".
pub fn signed_pct(pct: f64) -> String {
    format!("{pct:+.1}%").replace('-', "−")
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

#[cfg(test)]
mod tests {
    use scalprof_model::compare::{Comparison, Gate, PointComparison, Ratio};

    use super::gate_line;

    fn compared(ratios: &[(u64, Option<f64>)], gate: Gate) -> Comparison {
        Comparison {
            schema: "scalprof.compare/1".into(),
            a: "1".into(),
            b: "2".into(),
            confidence: 0.95,
            points: ratios
                .iter()
                .map(|&(value, ratio)| PointComparison {
                    value,
                    throughput_ratio: ratio.map(|ratio| Ratio {
                        ratio,
                        ci95: [ratio * 0.9, ratio * 1.1],
                        ci_family: [ratio * 0.8, ratio * 1.2],
                    }),
                    efficiency: None,
                    metrics: Vec::new(),
                    locks: Vec::new(),
                    causes: Vec::new(),
                })
                .collect(),
            findings_appeared: Vec::new(),
            findings_disappeared: Vec::new(),
            warnings: Vec::new(),
            verdict: String::new(),
            gate: Some(gate),
        }
    }

    fn gate(slower: &[u64], untested: &[u64]) -> Gate {
        Gate {
            threshold_pct: 5.0,
            slower_points: slower.to_vec(),
            untested_points: untested.to_vec(),
            failed: !slower.is_empty(),
        }
    }

    #[test]
    fn the_gate_line_says_where_b_is_slower_and_the_verdict() {
        let c = compared(&[(1, Some(0.99)), (2, Some(0.877))], gate(&[2], &[]));
        assert_eq!(
            gate_line(&c, "threads").unwrap(),
            "gate: B is slower than 5% at 2 threads (−12.3%) — failed"
        );
        let c = compared(&[(1, Some(0.99)), (2, Some(1.01))], gate(&[], &[]));
        assert_eq!(
            gate_line(&c, "threads").unwrap(),
            "gate: no point slower than 5% — passed"
        );
        let c = compared(&[(1, None), (2, Some(1.0))], gate(&[], &[1]));
        assert!(gate_line(&c, "threads")
            .unwrap()
            .ends_with("passed (1 thread untested: fewer than 2 repeats a side)"));
        let c = compared(&[(5000, None)], gate(&[], &[5000]));
        assert!(gate_line(&c, "size")
            .unwrap()
            .contains("no point could be tested"));
        let mut c = compared(&[], gate(&[], &[]));
        c.gate = None;
        assert_eq!(gate_line(&c, "threads"), None);
    }
}
