//! The HTML report of a comparison of two runs.

use scalprof_model::compare::{CauseChange, Comparison, Metric, PointComparison};

use super::flames::{diff_section, DiffFlame};
use super::markup::{html, markup, Html};
use super::plot::compare_plot;
use super::STYLE;
use crate::format::{ns, si};

/// The comparison page of two runs: the verdict, the A/B plot, each common point's
/// metrics, causes and lock waits, the findings that came and went, and `diff`, what
/// changed per operation at the last common point.
pub fn compare_report(
    c: &Comparison,
    a_label: &str,
    b_label: &str,
    diff: Option<&DiffFlame>,
) -> String {
    let mut h = header(c, a_label, b_label);
    h += compare_plot(c);
    for p in &c.points {
        h += point_section(p);
    }
    for f in &c.findings_appeared {
        html!(h, "<p class=\"warn\">finding appeared in B: {}</p>", f);
    }
    for f in &c.findings_disappeared {
        html!(h, "<p>finding gone in B: {}</p>", f);
    }
    if let Some(diff) = diff {
        h += "<h2>What changed per operation</h2>";
        let at = c.points.last().map_or(0, |p| p.value);
        h += diff_section(&markup!("point {}, A → B", at), diff, true);
    }
    h += "</body></html>\n";
    h.into_string()
}

/// The page's head, then the two runs and the verdict.
fn header(c: &Comparison, a_label: &str, b_label: &str) -> Html {
    let title = format!("scalprof compare: run {} → run {}", c.a, c.b);
    let mut h = markup!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>",
        &title
    );
    h += STYLE;
    html!(
        h,
        "</style></head><body><h1>{}</h1><p>A: run {} ({})<br>B: run {} ({})</p>",
        &title,
        &c.a,
        a_label,
        &c.b,
        b_label
    );
    if !c.verdict.is_empty() {
        html!(h, "<p id=\"verdict\"><b>{}</b></p>", &c.verdict);
    }
    h
}

/// One point compared: its metrics, what changed per operation, and its lock waits.
fn point_section(p: &PointComparison) -> Html {
    let mut h = markup!("<h2>point {}</h2>", p.value);
    h += "<table><tr><th>metric</th><th>A median (min–max)</th><th>B median (min–max)</th>\
          <th class=\"l\">verdict</th></tr>";
    for m in &p.metrics {
        let f = |x: f64| {
            if m.metric == Metric::Throughput {
                si(x)
            } else {
                format!("{x:.4}")
            }
        };
        html!(
            h,
            "<tr><td>{}</td><td>{} ({}–{})</td><td>{} ({}–{})</td><td class=\"l\">{}</td></tr>",
            m.metric.as_str(),
            f(m.a_median),
            f(m.a_range[0]),
            f(m.a_range[1]),
            f(m.b_median),
            f(m.b_range[0]),
            f(m.b_range[1]),
            &m.verdict
        );
    }
    h += "</table>";
    if !p.causes.is_empty() {
        h += causes_table(&p.causes);
    }
    for l in &p.locks {
        html!(
            h,
            "<p>lock {}: wait per op {:.0} ns → {:.0} ns</p>",
            &l.lock,
            l.a_wait_ns_per_op,
            l.b_wait_ns_per_op
        );
    }
    h
}

/// What changed per operation at a point: each cause in A and B, and its part of the change.
fn causes_table(causes: &[CauseChange]) -> Html {
    let mut h = Html::new();
    h += "<table class=\"causes\"><tr><th class=\"l\">what changed, per operation</th>\
          <th>A</th><th>B</th><th>explains</th></tr>";
    for c in causes {
        html!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{:.0}%</td></tr>",
            &c.cause,
            ns(c.a_ns_per_op),
            ns(c.b_ns_per_op),
            c.explains * 100.0
        );
    }
    h += "</table>";
    h
}
