//! `scalprof history`: a label's runs over commits in the terminal (a sparkline per
//! metric, a row per run, the change points with their causes) and as an HTML plot.

use scalprof_model::history::{ChangePoint, History};

use crate::compare::signed_pct;
use crate::summary::short_commit;
use crate::{one_line, si};

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// One character per value, scaled between the series' least and greatest; a gap where a
/// run has none.
pub fn sparkline(values: &[Option<f64>]) -> String {
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    let (lo, hi) = known
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(_) if hi <= lo => BARS[3],
            Some(v) => BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize],
        })
        .collect()
}

fn change_line(c: &ChangePoint) -> String {
    let mut out = format!(
        "  run {}{}: {} {} [{} to {}, 95%] ({} → {}, p {:.3})",
        c.run,
        c.commit.as_deref().map_or(String::new(), |s| format!(
            " (commit {})",
            one_line(short_commit(s))
        )),
        c.metric,
        signed_pct(c.change * 100.0),
        signed_pct(c.interval[0] * 100.0),
        signed_pct(c.interval[1] * 100.0),
        value(&c.metric, c.before),
        value(&c.metric, c.after),
        c.p_value
    );
    for cause in &c.causes {
        out += &format!("\n      {}", one_line(cause));
    }
    out
}

fn value(metric: &str, v: f64) -> String {
    if metric == "efficiency" {
        format!("{:.0}%", v * 100.0)
    } else {
        si(v)
    }
}

/// The history as the terminal shows it.
pub fn history_text(h: &History) -> String {
    let at = match (h.parameter.as_str(), h.value) {
        (_, None) => "no point common to all runs".to_string(),
        ("threads", Some(1)) => "compared at 1 thread".into(),
        ("threads", Some(n)) => format!("compared at {n} threads"),
        (p, Some(n)) => format!("compared at {p} {n}"),
    };
    let mut out = format!(
        "history · {} · {} run{} · {at}\n",
        one_line(&h.label),
        h.runs.len(),
        if h.runs.len() == 1 { "" } else { "s" }
    );
    let throughput: Vec<Option<f64>> = h.runs.iter().map(|r| r.throughput).collect();
    let efficiency: Vec<Option<f64>> = h.runs.iter().map(|r| r.efficiency).collect();
    out += &format!("throughput  {}\n", sparkline(&throughput));
    out += &format!("efficiency  {}\n\n", sparkline(&efficiency));
    out += &format!(
        "{:>5}  {:<12}  {:<16}  {:>10}  {:>10}  {}\n",
        "run", "commit", "created", "throughput", "efficiency", "top cause"
    );
    for r in &h.runs {
        let changed = h.change_points.iter().any(|c| c.run == r.run);
        out += &format!(
            "{:>5}  {:<12}  {:<16}  {:>10}  {:>10}  {}{}\n",
            one_line(&r.run),
            r.commit
                .as_deref()
                .map_or("–".into(), |s| one_line(short_commit(s))),
            one_line(
                &r.created
                    .replace('T', " ")
                    .chars()
                    .take(16)
                    .collect::<String>()
            ),
            r.throughput.map_or("–".into(), si),
            r.efficiency
                .map_or("–".into(), |e| format!("{:.0}%", e * 100.0)),
            match (&r.top_cause, r.top_share) {
                (Some(c), Some(s)) => format!("{} {:.0}%", one_line(c), s * 100.0),
                _ => "–".into(),
            },
            if changed { "  ◀ change" } else { "" }
        );
    }
    if h.change_points.is_empty() {
        out += "\nno change point: no shift beyond the runs' own noise\n";
    } else {
        out += "\nchange points (E-divisive means on the repeats, permutation test; Welch interval):\n";
        for c in &h.change_points {
            out += &change_line(c);
            out.push('\n');
        }
    }
    out
}

/// A self-contained HTML page: the throughput and the efficiency over the runs, the
/// change points marked, and the table.
pub fn history_html(h: &History) -> String {
    let plot = |name: &str, values: Vec<Option<f64>>, metric: &str| -> String {
        let (w, ht, pad) = (640.0, 160.0, 30.0);
        let known: Vec<f64> = values.iter().flatten().copied().collect();
        let hi = known
            .iter()
            .copied()
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        let n = values.len().max(2) as f64 - 1.0;
        let x = |i: usize| pad + (w - 2.0 * pad) * i as f64 / n;
        let y = |v: f64| ht - pad - (ht - 2.0 * pad) * v / hi;
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
            .collect();
        let marks: String = h
            .change_points
            .iter()
            .filter(|c| c.metric == metric)
            .filter_map(|c| h.runs.iter().position(|r| r.run == c.run))
            .map(|i| {
                format!(
                    "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#c33\" stroke-dasharray=\"4\"/>",
                    x(i) - (w - 2.0 * pad) / n / 2.0,
                    pad / 2.0,
                    ht - pad / 2.0
                )
            })
            .collect();
        let dots: String = values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                v.map(|v| {
                    format!(
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"><title>run {}: {}</title></circle>",
                        x(i),
                        y(v),
                        html_text(&h.runs[i].run),
                        value(metric, v)
                    )
                })
            })
            .collect();
        format!(
            "<h2>{name}</h2><svg width=\"{w}\" height=\"{ht}\" role=\"img\" aria-label=\"{name}\">{marks}<polyline fill=\"none\" stroke=\"#36c\" stroke-width=\"2\" points=\"{}\"/>{dots}<text x=\"2\" y=\"{pad}\" font-size=\"11\">{}</text><text x=\"2\" y=\"{}\" font-size=\"11\">0</text></svg>",
            points.join(" "),
            value(metric, hi),
            ht - pad
        )
    };
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>scalprof history: {}</title><style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f6f6f6;padding:1em}}</style></head><body><h1>history: {}</h1>{}{}<pre>{}</pre></body></html>\n",
        html_text(&h.label),
        html_text(&h.label),
        plot("throughput", h.runs.iter().map(|r| r.throughput).collect(), "throughput"),
        plot("efficiency", h.runs.iter().map(|r| r.efficiency).collect(), "efficiency"),
        html_text(&history_text(h))
    )
}

fn html_text(s: &str) -> String {
    crate::safe::markup_text(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparkline_spans_the_least_to_the_greatest() {
        assert_eq!(sparkline(&[Some(1.0), Some(8.0), None, Some(4.5)]), "▁█ ▅");
        assert_eq!(sparkline(&[Some(2.0), Some(2.0)]), "▄▄");
    }
}
