//! The report's SVG plots: the scaling curve with the ideal line, the model and the CPU
//! count; the budget bars; compare's A/B curves.

use super::markup::{html, markup, Html};
use super::Heading;
use crate::format::si;
use crate::tables::model_line;
use scalprof_model::{Model, RunDocument};

/// The scaling plot: measured medians with min–max whiskers, and the fitted model.
/// A plot's axes: the two lines, five throughput ticks up to `ymax`, and a label under each
/// of `xs`. `frame` is (width, height, left, right, top and bottom margins).
pub(super) fn axes(
    svg: &mut Html,
    frame: (f64, f64, f64, f64, f64, f64),
    ymax: f64,
    y: &dyn Fn(f64) -> f64,
    xs: &[f64],
    x: &dyn Fn(f64) -> f64,
) {
    let (w, h, ml, mr, mt, mb) = frame;
    html!(svg, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>", ml, h - mb, w - mr, h - mb, ml, mt, ml, h - mb);
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        html!(
            svg,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            ml - 6.0,
            y(v) + 4.0,
            si(v)
        );
    }
    for &v in xs {
        html!(
            svg,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            x(v),
            h - mb + 16.0,
            v
        );
    }
}

pub fn scaling_plot(doc: &RunDocument) -> Html {
    let pts: Vec<(f64, f64, f64, f64)> = doc
        .points
        .iter()
        .filter_map(|p| {
            let s = p.throughput_spread?;
            Some((p.value as f64, s.median, s.min, s.max))
        })
        .collect();
    let (w, h, ml, mr, mt, mb) = (720.0, 360.0, 70.0, 20.0, 20.0, 45.0);
    let mut svg = markup!(
        "<svg id=\"scaling-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"throughput against {}\">",
        w, h, w, h,
        doc.sweep.parameter.as_str()
    );
    if pts.is_empty() {
        svg += "<text x=\"20\" y=\"40\">no measured point</text></svg>";
        return svg;
    }
    let prediction = doc.model.as_ref().and_then(|m| m.prediction.as_ref());
    let predicted = prediction.map_or(&[][..], |p| p.points.as_slice());
    let (xmax, ymax) = extents(doc, &pts, predicted);
    let x = |v: f64| ml + (w - ml - mr) * v / xmax;
    let y = |v: f64| h - mb - (h - mt - mb) * v / ymax.max(f64::MIN_POSITIVE);
    let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    xs.extend(predicted.iter().map(|q| q.threads as f64));
    axes(&mut svg, (w, h, ml, mr, mt, mb), ymax, &y, &xs, &x);
    html!(svg, "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">throughput ({})</text>", (ml + w - mr) / 2.0, h - 8.0, doc.sweep.parameter.as_str(), (mt + h - mb) / 2.0, (mt + h - mb) / 2.0, &doc.throughput.unit);
    // Linear scaling from the first point: what the measured points fall short of.
    if doc.sweep.parameter.scales() {
        if let Some(&(n0, x0, _, _)) = pts.first() {
            let end = xmax.min(ymax * n0 / x0.max(f64::MIN_POSITIVE));
            html!(svg, "<line id=\"linear\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\" stroke-dasharray=\"2 3\"><title>linear scaling</title></line>", x(n0), y(x0), x(end), y(x0 * end / n0));
        }
    }
    // The fitted model.
    if let Some(m) = &doc.model {
        // Over the measured range and beyond, not below the first point (a retrograde
        // Amdahl fit has a pole below N = 1).
        let x0 = pts.iter().map(|p| p.0).fold(f64::MAX, f64::min);
        let path: Vec<String> = (0..=200)
            .map(|i| {
                let n = x0 + (xmax - x0) * i as f64 / 200.0;
                format!("{:.1},{:.1}", x(n), y(m.predict(n).clamp(0.0, ymax)))
            })
            .collect();
        html!(svg, "<polyline id=\"model-curve\" fill=\"none\" stroke=\"#36c\" stroke-dasharray=\"5 4\" points=\"{}\"/>", path.join(" "));
    }
    if let (Some(p), Some(&(n, v, _, _))) = (prediction, pts.last()) {
        prediction_band(&mut svg, p, (n, v), &x, &y, (mt, h - mb));
        html!(svg, "<g font-size=\"11\"><rect x=\"{}\" y=\"{}\" width=\"16\" height=\"8\" fill=\"#36c\" fill-opacity=\"0.3\"/><text x=\"{}\" y=\"{}\">predicted from the causes (interval)</text></g>", ml + 12.0, mt + 44.0, ml + 32.0, mt + 52.0);
    }
    // Where the points start to outnumber the machine's CPUs.
    let cpus = doc.host.cpus as f64;
    if doc.sweep.parameter.scales() && cpus > 0.0 && cpus < xmax {
        html!(svg, "<line id=\"cpus\" x1=\"{:.1}\" y1=\"{}\" x2=\"{:.1}\" y2=\"{}\" stroke=\"#a60\" stroke-dasharray=\"1 4\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"11\" fill=\"#a60\">{} CPUs</text>", x(cpus), mt, x(cpus), h - mb, x(cpus) + 4.0, h - mb - 6.0, doc.host.cpus);
    }
    // The legend, top left inside the axes (the curves start at the first point, right of it).
    let lx = ml + 12.0;
    html!(svg, "<g id=\"legend\" font-size=\"11\"><circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#c33\"/><text x=\"{}\" y=\"{}\">measured (median, min–max)</text>\
         <line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#36c\" stroke-dasharray=\"5 4\"/><text x=\"{}\" y=\"{}\">fitted model</text>\
         <line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\" stroke-dasharray=\"2 3\"/><text x=\"{}\" y=\"{}\">linear scaling</text></g>", lx + 8.0, mt + 6.0, lx + 20.0, mt + 10.0, lx, mt + 20.0, lx + 16.0, mt + 20.0, lx + 20.0, mt + 24.0, lx, mt + 34.0, lx + 16.0, mt + 34.0, lx + 20.0, mt + 38.0);
    for p in &pts {
        html!(svg, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#c33\"/><circle class=\"measured\" cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#c33\"><title>{}: {}</title></circle>", x(p.0), y(p.2), x(p.0), y(p.3), x(p.0), y(p.1), p.0, si(p.1));
    }
    svg += "</svg>";
    svg
}

/// The plot's largest x and y: the measured points, the model over them and the
/// prediction's points and intervals, with a margin.
fn extents(
    doc: &RunDocument,
    pts: &[(f64, f64, f64, f64)],
    predicted: &[scalprof_model::prediction::PredictedPoint],
) -> (f64, f64) {
    let xmax = pts
        .iter()
        .map(|p| p.0)
        .chain(predicted.iter().map(|q| q.threads as f64))
        .fold(1.0, f64::max)
        * 1.1;
    let model_max = doc
        .model
        .as_ref()
        .map(|m| {
            let x0 = pts.iter().map(|p| p.0).fold(f64::MAX, f64::min);
            (0..=100)
                .map(|i| m.predict(x0 + (xmax - x0) * i as f64 / 100.0))
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        })
        .unwrap_or(0.0);
    let ymax = pts
        .iter()
        .map(|p| p.3)
        .chain(predicted.iter().map(|q| q.interval[1]))
        .fold(model_max, f64::max)
        * 1.1;
    (xmax, ymax)
}

/// The prediction past the last measured point `from` (threads, throughput): its
/// interval as a band, its points as a line, and a mark where the limiting cause starts
/// to cost as much as the work (`span`: the plot's top and bottom).
fn prediction_band(
    svg: &mut Html,
    p: &scalprof_model::Prediction,
    from: (f64, f64),
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
    span: (f64, f64),
) {
    let (n0, v0) = from;
    let at = |n: f64, v: f64| format!("{:.1},{:.1}", x(n), y(v));
    let mut band = vec![at(n0, v0)];
    band.extend(p.points.iter().map(|q| at(q.threads as f64, q.interval[1])));
    band.extend(
        p.points
            .iter()
            .rev()
            .map(|q| at(q.threads as f64, q.interval[0])),
    );
    let mut line = vec![at(n0, v0)];
    line.extend(p.points.iter().map(|q| at(q.threads as f64, q.throughput)));
    let title: Vec<String> = p
        .points
        .iter()
        .map(|q| format!("{}: {}", q.threads, crate::prediction::per_second(q)))
        .collect();
    html!(svg, "<g id=\"prediction\"><polygon points=\"{}\" fill=\"#36c\" fill-opacity=\"0.12\"/><polyline points=\"{}\" fill=\"none\" stroke=\"#36c\" stroke-width=\"2\"/><title>predicted: {}</title></g>", band.join(" "), line.join(" "), title.join("; "));
    if let Some(l) = &p.limiting {
        let lx = x(l.from_threads as f64);
        html!(svg, "<g id=\"limiting\"><line x1=\"{:.1}\" y1=\"{}\" x2=\"{:.1}\" y2=\"{}\" stroke=\"#c33\" stroke-dasharray=\"3 3\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"11\" fill=\"#c33\">{} from {}</text></g>", lx, span.0, lx, span.1, lx + 4.0, (span.0 + span.1) / 2.0, &l.subject, l.from_threads);
    }
}

/// One stacked bar per point: useful, each cause, scalprof, unexplained.
pub(crate) fn budget_bars(doc: &RunDocument, heading: Heading) -> Html {
    const COLORS: [&str; 6] = ["#c33", "#e83", "#db3", "#a5c", "#39c", "#7a7"];
    let budgets: Vec<(u64, &scalprof_model::Budget)> = doc
        .points
        .iter()
        .filter_map(|p| Some((p.value, p.budget.as_ref()?)))
        .collect();
    if budgets.is_empty() {
        return Html::new();
    }
    let mut h = Html::new();
    h += match heading {
        Heading::Page => "<h2>Where the thread-time went</h2><div id=\"budget\">",
        Heading::Nested => "<h3>Where the thread-time went</h3><div>",
    };
    h += "<p class=\"muted\">Each point's thread-time per operation: useful work (the efficiency), the causes (the growth of their time per operation since the first point), scalprof's own cost, and what is unexplained.</p>";
    for (value, b) in budgets {
        let seg = |share: f64, color: &str, label: &str| {
            markup!(
                "<div class=\"seg\" style=\"width:{:.2}%;background:{}\" title=\"{} {:.0}%\"></div>",
                share * 100.0,
                color,
                label,
                share * 100.0
            )
        };
        let mut bar = seg(b.useful, "#4a4", "useful");
        let mut legend = vec![markup!("useful {:.0}%", b.useful * 100.0)];
        for (i, c) in b.causes.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            bar += seg(c.share, color, &c.subject);
            legend.push(markup!(
                "<span style=\"color:{}\">■</span> {} {:.0}%",
                color,
                &c.subject,
                c.share * 100.0
            ));
        }
        bar += seg(b.overhead, "#666", "scalprof");
        bar += seg(b.unexplained, "#ddd", "unexplained");
        legend.push(markup!("unexplained {:.0}%", b.unexplained * 100.0));
        html!(h, "<div class=\"budget-row\"><span class=\"budget-label\">{} {}</span><div class=\"bar\">{}</div><p class=\"muted\">{}</p></div>", value, doc.sweep.parameter.as_str(), bar, Html::join(legend, " · "));
    }
    h += "</div>";
    h
}

pub(super) fn model_text(m: &Model, parameter: &str) -> String {
    model_line(Some(m), parameter)
}

/// The comparison page (`scalprof compare --report`): verdicts per point and metric, lock
/// and finding changes, and the differential flame graph.
/// A's and B's throughput (medians, min–max) over the common points, on one plot.
pub(super) fn compare_plot(c: &scalprof_model::compare::Comparison) -> Html {
    let series: Vec<(f64, [f64; 3], [f64; 3])> = c
        .points
        .iter()
        .filter_map(|p| {
            let m = p
                .metrics
                .iter()
                .find(|m| m.metric == scalprof_model::compare::Metric::Throughput)?;
            Some((
                p.value as f64,
                [m.a_median, m.a_range[0], m.a_range[1]],
                [m.b_median, m.b_range[0], m.b_range[1]],
            ))
        })
        .collect();
    if series.is_empty() {
        return Html::new();
    }
    let (w, h, ml, mr, mt, mb) = (720.0, 320.0, 70.0, 20.0, 20.0, 40.0);
    let xmax = series.iter().map(|s| s.0).fold(1.0, f64::max) * 1.1;
    let ymax = series
        .iter()
        .map(|s| s.1[2].max(s.2[2]))
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.15;
    let x = |v: f64| ml + (w - ml - mr) * v / xmax;
    let y = |v: f64| h - mb - (h - mt - mb) * v / ymax;
    let mut svg = markup!(
        "<svg id=\"compare-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"throughput of A and B\">",
        w, h, w, h
    );
    let xs: Vec<f64> = series.iter().map(|s| s.0).collect();
    axes(&mut svg, (w, h, ml, mr, mt, mb), ymax, &y, &xs, &x);
    for (name, color, pick) in [("A", "#999", 0usize), ("B", "#c33", 1)] {
        let pts: Vec<String> = series
            .iter()
            .map(|s| {
                let v = if pick == 0 { s.1 } else { s.2 };
                format!("{:.1},{:.1}", x(s.0), y(v[0]))
            })
            .collect();
        html!(svg, "<polyline class=\"series-{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>", name, color, pts.join(" "));
        for s in &series {
            let v = if pick == 0 { s.1 } else { s.2 };
            html!(svg, "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\"/><circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\"><title>{} at {}: {}</title></circle>", x(s.0), y(v[1]), x(s.0), y(v[2]), color, x(s.0), y(v[0]), color, name, s.0, si(v[0]));
        }
    }
    html!(svg, "<g id=\"legend\" font-size=\"11\"><circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#999\"/><text x=\"{}\" y=\"{}\">A (median, min–max)</text><circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#c33\"/><text x=\"{}\" y=\"{}\">B</text></g></svg>", ml + 20.0, mt + 6.0, ml + 30.0, mt + 10.0, ml + 20.0, mt + 22.0, ml + 30.0, mt + 26.0);
    markup!("<h2>Throughput, A and B</h2>{}", svg)
}
