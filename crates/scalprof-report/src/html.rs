//! The self-contained HTML report: one file, nothing fetched from the network.
//!
//! Every string that comes from the profiled program (symbols, lock names, paths, the
//! command) is untrusted and goes through [`esc`]. Flame graphs are embedded as SVG images
//! (data: URIs), so their own scripts never run in the page.

use std::fmt::Write;

use scalprof_model::{Model, RunDocument};

use crate::flame::svg as flame_svg;
use crate::si;

/// Escapes text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Standard base64 (RFC 4648), for data: URIs; a dozen lines do not warrant a dependency.
/// A flame graph as a frame of its own, so that inferno's script runs (an `<img>` shows a
/// picture whose search, zoom and tooltips never work) and each graph's ids and functions
/// stay apart from the page's and the other graphs'. As tall as the SVG says it is.
fn flame_frame(id: &str, title: &str, svg: &[u8]) -> String {
    let head = String::from_utf8_lossy(&svg[..svg.len().min(2048)]);
    let height = head
        .find("<svg")
        .and_then(|i| {
            let rest = &head[i..];
            let h = rest.find(" height=\"")? + " height=\"".len();
            rest[h..].split('"').next()?.parse::<u32>().ok()
        })
        .unwrap_or(600);
    format!(
        "<iframe class=\"flame\" id=\"{}\" title=\"{}\" height=\"{}\" src=\"data:image/svg+xml;base64,{}\"></iframe>",
        esc(id),
        esc(title),
        height + 4,
        base64(svg)
    )
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

pub(crate) const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}\
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .6em;border-bottom:1px solid #eee;text-align:right}\
td:first-child,th:first-child{text-align:left}.l{text-align:left}\
.finding{border-left:4px solid #c33;padding:.3em .8em;margin:.6em 0;background:#fcf6f6}\
.bar{display:flex;height:1.4em;width:100%;max-width:720px;border:1px solid #999}.seg{height:100%}.budget-row{margin:.4em 0}.budget-label{font-weight:bold}\
.score{font-weight:bold}.muted{color:#777}.warn{color:#a60}iframe.flame{width:100%;border:1px solid #ddd}\
code{background:#f4f4f4;padding:0 .2em}";

/// The scaling plot: measured medians with min–max whiskers, and the fitted model.
/// A plot's axes: the two lines, five throughput ticks up to `ymax`, and a label under each
/// of `xs`. `frame` is (width, height, left, right, top and bottom margins).
fn axes(
    svg: &mut String,
    frame: (f64, f64, f64, f64, f64, f64),
    ymax: f64,
    y: &dyn Fn(f64) -> f64,
    xs: &[f64],
    x: &dyn Fn(f64) -> f64,
) {
    let (w, h, ml, mr, mt, mb) = frame;
    let _ = write!(
        svg,
        "<line x1=\"{ml}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#333\"/><line x1=\"{ml}\" y1=\"{mt}\" x2=\"{ml}\" y2=\"{0}\" stroke=\"#333\"/>",
        h - mb,
        w - mr
    );
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            ml - 6.0,
            y(v) + 4.0,
            si(v)
        );
    }
    for &v in xs {
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            x(v),
            h - mb + 16.0,
            v
        );
    }
}

pub fn scaling_plot(doc: &RunDocument) -> String {
    let pts: Vec<(f64, f64, f64, f64)> = doc
        .points
        .iter()
        .filter_map(|p| {
            let s = p.throughput_spread?;
            Some((p.value as f64, s.median, s.min, s.max))
        })
        .collect();
    let (w, h, ml, mr, mt, mb) = (720.0, 360.0, 70.0, 20.0, 20.0, 45.0);
    let mut svg = format!(
        "<svg id=\"scaling-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"throughput against {}\">",
        esc(doc.sweep.parameter.as_str())
    );
    if pts.is_empty() {
        svg += "<text x=\"20\" y=\"40\">no measured point</text></svg>";
        return svg;
    }
    let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max) * 1.1;
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
    let ymax = pts.iter().map(|p| p.3).fold(model_max, f64::max) * 1.1;
    let x = |v: f64| ml + (w - ml - mr) * v / xmax;
    let y = |v: f64| h - mb - (h - mt - mb) * v / ymax.max(f64::MIN_POSITIVE);
    let xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    axes(&mut svg, (w, h, ml, mr, mt, mb), ymax, &y, &xs, &x);
    let _ = write!(
        svg,
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text><text x=\"14\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">throughput ({})</text>",
        (ml + w - mr) / 2.0,
        h - 8.0,
        esc(doc.sweep.parameter.as_str()),
        (mt + h - mb) / 2.0,
        (mt + h - mb) / 2.0,
        esc(&doc.throughput.unit)
    );
    // Linear scaling from the first point: what the measured points fall short of.
    if doc.sweep.parameter == scalprof_model::SweepParameter::Threads {
        if let Some(&(n0, x0, _, _)) = pts.first() {
            let end = xmax.min(ymax * n0 / x0.max(f64::MIN_POSITIVE));
            let _ = write!(
                svg,
                "<line id=\"linear\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\" stroke-dasharray=\"2 3\"><title>linear scaling</title></line>",
                x(n0),
                y(x0),
                x(end),
                y(x0 * end / n0)
            );
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
        let _ = write!(
            svg,
            "<polyline id=\"model-curve\" fill=\"none\" stroke=\"#36c\" stroke-dasharray=\"5 4\" points=\"{}\"/>",
            path.join(" ")
        );
    }
    // Where the points start to outnumber the machine's CPUs.
    let cpus = doc.host.cpus as f64;
    if doc.sweep.parameter == scalprof_model::SweepParameter::Threads && cpus > 0.0 && cpus < xmax {
        let _ = write!(
            svg,
            "<line id=\"cpus\" x1=\"{0:.1}\" y1=\"{1}\" x2=\"{0:.1}\" y2=\"{2}\" stroke=\"#a60\" stroke-dasharray=\"1 4\"/><text x=\"{3:.1}\" y=\"{4}\" font-size=\"11\" fill=\"#a60\">{5} CPUs</text>",
            x(cpus),
            mt,
            h - mb,
            x(cpus) + 4.0,
            h - mb - 6.0,
            doc.host.cpus
        );
    }
    // The legend, top left inside the axes (the curves start at the first point, right of it).
    let lx = ml + 12.0;
    let _ = write!(
        svg,
        "<g id=\"legend\" font-size=\"11\"><circle cx=\"{0}\" cy=\"{1}\" r=\"4\" fill=\"#c33\"/><text x=\"{2}\" y=\"{3}\">measured (median, min–max)</text>\
         <line x1=\"{4}\" y1=\"{5}\" x2=\"{6}\" y2=\"{5}\" stroke=\"#36c\" stroke-dasharray=\"5 4\"/><text x=\"{2}\" y=\"{7}\">fitted model</text>\
         <line x1=\"{4}\" y1=\"{8}\" x2=\"{6}\" y2=\"{8}\" stroke=\"#999\" stroke-dasharray=\"2 3\"/><text x=\"{2}\" y=\"{9}\">linear scaling</text></g>",
        lx + 8.0,
        mt + 6.0,
        lx + 20.0,
        mt + 10.0,
        lx,
        mt + 20.0,
        lx + 16.0,
        mt + 24.0,
        mt + 34.0,
        mt + 38.0,
    );
    for p in &pts {
        let _ = write!(
            svg,
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#c33\"/><circle class=\"measured\" cx=\"{0}\" cy=\"{3}\" r=\"4\" fill=\"#c33\"><title>{4}: {5}</title></circle>",
            x(p.0),
            y(p.2),
            y(p.3),
            y(p.1),
            p.0,
            si(p.1)
        );
    }
    svg += "</svg>";
    svg
}

/// One stacked bar per point: useful, each cause, scalprof, unexplained.
pub(crate) fn budget_bars(doc: &RunDocument) -> String {
    const COLORS: [&str; 6] = ["#c33", "#e83", "#db3", "#a5c", "#39c", "#7a7"];
    let budgets: Vec<(u64, &scalprof_model::Budget)> = doc
        .points
        .iter()
        .filter_map(|p| Some((p.value, p.budget.as_ref()?)))
        .collect();
    if budgets.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<h2>Where the thread-time went</h2><div id=\"budget\"><p class=\"muted\">Each point's thread-time per operation: useful work (the efficiency), the causes (the growth of their time per operation since the first point), scalprof's own cost, and what is unexplained.</p>",
    );
    for (value, b) in budgets {
        let seg = |share: f64, color: &str, label: &str| {
            format!(
                "<div class=\"seg\" style=\"width:{:.2}%;background:{color}\" title=\"{} {:.0}%\"></div>",
                share * 100.0,
                esc(label),
                share * 100.0
            )
        };
        let mut bar = seg(b.useful, "#4a4", "useful");
        let mut legend = vec![format!("useful {:.0}%", b.useful * 100.0)];
        for (i, c) in b.causes.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            bar += &seg(c.share, color, &c.subject);
            legend.push(format!(
                "<span style=\"color:{color}\">■</span> {} {:.0}%",
                esc(&c.subject),
                c.share * 100.0
            ));
        }
        bar += &seg(b.overhead, "#666", "scalprof");
        bar += &seg(b.unexplained, "#ddd", "unexplained");
        legend.push(format!("unexplained {:.0}%", b.unexplained * 100.0));
        let _ = write!(
            h,
            "<div class=\"budget-row\"><span class=\"budget-label\">{value} {}</span><div class=\"bar\">{bar}</div><p class=\"muted\">{}</p></div>",
            esc(doc.sweep.parameter.as_str()),
            legend.join(" · ")
        );
    }
    h + "</div>"
}

fn model_text(m: &Model, parameter: &str) -> String {
    esc(&crate::model_line(Some(m), parameter))
}

/// The report of one run. `flames`: (point, profile) for the per-point flame graphs;
/// `diff`: a differential flame graph (SVG bytes) of the first and last points.
pub fn run_report(
    doc: &RunDocument,
    flames: &[(u64, &scalprof_model::PointProfile)],
    diff: Option<&[u8]>,
) -> String {
    let mut h = String::new();
    let title = format!("scalprof run {} · {}", doc.id, doc.label);
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        esc(&title)
    );
    let _ = write!(
        h,
        "<h1>{}</h1><p><code>{}</code></p><p class=\"muted\">{} · Linux {} · {} CPUs · {} · {} · status <b>{}</b></p>",
        esc(&title),
        esc(&crate::shell_line(&doc.command)),
        esc(&doc.created),
        esc(&doc.host.kernel),
        doc.host.cpus,
        esc(&doc.host.cpu_model),
        if doc.host.pmu { "hardware PMU" } else { "no hardware PMU" },
        esc(doc.status.as_str())
    );

    h += "<h2>Scaling</h2>";
    h += &scaling_plot(doc);
    if let Some(m) = &doc.model {
        let _ = write!(h, "<p>{}</p>", model_text(m, doc.sweep.parameter.as_str()));
    }
    h += "<table id=\"points\"><tr><th>";
    h += &esc(doc.sweep.parameter.as_str());
    h += "</th><th>throughput</th><th>speedup</th><th>efficiency</th><th>wall s</th><th>user s</th><th>sys s</th><th>lock wait s</th><th>traced vs clean</th><th>overhead (scalprof)</th></tr>";
    for p in &doc.points {
        let med = |s: Option<scalprof_model::Spread>| {
            s.map_or("—".into(), |s| format!("{:.3}", s.median))
        };
        // Lock tables come from the traced repeats (the only ones in older runs).
        let traced = if p.traced_repeats.is_empty() {
            &p.repeats
        } else {
            &p.traced_repeats
        };
        let runs = traced.iter().filter(|r| r.succeeded()).count().max(1) as f64;
        let overhead = p
            .profile
            .as_ref()
            .map(|pr| 100.0 * pr.stats.overhead_samples as f64 / pr.stats.samples.max(1) as f64);
        let lock_wait = p.locks.as_ref().map(|l| {
            l.rows
                .iter()
                .filter(|r| r.is_lock())
                .map(|r| r.total_wait_ns)
                .sum::<u64>() as f64
                / 1e9
                / runs
        });
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.value,
            p.throughput.map_or("—".into(), si),
            p.speedup.map_or("—".into(), |s| format!("{s:.2}×")),
            p.efficiency.map_or("—".into(), |e| format!("{:.0}%", e * 100.0)),
            med(p.wall_s),
            med(p.user_s),
            med(p.sys_s),
            lock_wait.map_or("—".into(), |w| format!("{w:.3}")),
            p.perturbation
                .map_or("—".into(), |x| format!("{:+.1}%", 100.0 * x)),
            overhead.map_or("—".into(), |o| format!("{o:.1}% of samples")),
        );
    }
    h += "</table>";
    for w in &doc.warnings {
        let _ = write!(h, "<p class=\"warn\">⚠ {}</p>", esc(&w.message));
    }

    h += &budget_bars(doc);
    h += "<h2>Findings</h2>";
    if doc.findings.is_empty() {
        h += "<p>No finding.</p>";
    }
    for f in &doc.findings {
        let _ = write!(
            h,
            "<div class=\"finding\"><span class=\"score\">{:.0}%</span> <b>{}</b> {} <code>{}</code><p>{}</p>{}<p class=\"muted\">What to do: {}</p></div>",
            f.score * 100.0,
            esc(f.kind.as_str()),
            esc(f.scope.map_or("", |s| s.as_str())),
            esc(&f.subject),
            esc(&f.evidence),
            f.what_if.map_or(String::new(), |w| format!(
                "<p class=\"what-if\">Without it: up to {:.2}× at {} {} (an upper bound).</p>",
                w.speedup,
                w.value,
                esc(doc.sweep.parameter.as_str())
            )),
            esc(&f.suggestion)
        );
    }

    if let Some(d) = &doc.scaling_diff {
        h += "<h2>What grew</h2>";
        for (scope, rows) in [("kernel", &d.kernel), ("user", &d.user)] {
            if !rows.iter().any(|r| r.share_of_loss >= 0.01) {
                continue;
            }
            let _ = write!(h, "<table><tr><th>{scope} function (self)</th>");
            for p in &d.points {
                let _ = write!(h, "<th>{} @{p}</th>", esc(&d.unit));
            }
            h += "<th>growth</th><th>share of loss</th></tr>";
            for r in rows.iter().filter(|r| r.share_of_loss >= 0.01).take(10) {
                let _ = write!(h, "<tr><td>{}</td>", esc(&r.function));
                for v in &r.self_per_op {
                    let _ = write!(h, "<td>{}</td>", si(*v));
                }
                let _ = write!(
                    h,
                    "<td>+{}</td><td>{:.0}%</td></tr>",
                    si(r.growth),
                    r.share_of_loss * 100.0
                );
            }
            h += "</table>";
        }
    }

    if doc.points.iter().any(|p| p.locks.is_some()) {
        h += "<h2>Locks</h2>";
        for p in &doc.points {
            let Some(l) = &p.locks else { continue };
            let _ = write!(
                h,
                "<h3>{} {}</h3><table><tr><th>scope</th><th class=\"l\">lock</th><th class=\"l\">type</th><th>contended</th><th>total wait</th><th>avg</th><th>max</th><th>on-CPU</th><th class=\"l\">top callers</th></tr>",
                esc(doc.sweep.parameter.as_str()),
                p.value
            );
            for r in l.rows.iter().take(12) {
                let callers: Vec<String> = r
                    .callers
                    .iter()
                    .map(|c| format!("{} {:.0}%", esc(&c.function), c.share * 100.0))
                    .collect();
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                    esc(r.scope.as_str()),
                    esc(&r.name),
                    esc(&r.lock_type.to_string()),
                    r.count,
                    crate::ns(r.total_wait_ns as f64),
                    crate::ns(r.avg_wait_ns()),
                    crate::ns(r.max_wait_ns as f64),
                    r.spin_ns.map_or("—".into(), |v| crate::ns(v as f64)),
                    callers.join(", ")
                );
            }
            h += "</table>";
        }
    }

    if let Some(c) = &doc.complexity {
        h += "<h2>Complexity</h2><table><tr><th>function (self)</th><th>k</th><th>95% interval</th><th>R²</th></tr>";
        let _ = write!(
            h,
            "<tr><td>(whole workload)</td><td>{:.2}</td><td>{:.2}–{:.2}</td><td>{:.3}</td></tr>",
            c.overall.exponent, c.overall.ci95[0], c.overall.ci95[1], c.overall.r2
        );
        for f in c.functions.iter().take(12) {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{:.2}</td><td>{:.2}–{:.2}</td><td>{:.3}</td></tr>",
                esc(&f.function),
                f.fit.exponent,
                f.fit.ci95[0],
                f.fit.ci95[1],
                f.fit.r2
            );
        }
        h += "</table>";
    }

    h += "<h2>Flame graphs</h2>";
    if flames.is_empty() {
        h += "<p>No profiles (recorded with --no-profile).</p>";
    }
    for (v, p) in flames {
        let t = format!("{} {v}", doc.sweep.parameter);
        match flame_svg(p, &format!("scalprof: run {}, {t}", doc.id), None) {
            Ok(svg) => {
                let _ = write!(
                    h,
                    "<h3>{}</h3>{}",
                    esc(&t),
                    flame_frame(&format!("flame-{v}"), &format!("flame graph, {t}"), &svg)
                );
            }
            Err(e) => {
                let _ = write!(
                    h,
                    "<p class=\"warn\">flame graph of {}: {}</p>",
                    esc(&t),
                    esc(&e.to_string())
                );
            }
        }
    }
    if let Some(svg) = diff {
        let _ = write!(
            h,
            "<h3>What changed per operation, first → last point</h3>{}",
            flame_frame("flame-diff", "differential flame graph", svg)
        );
    }
    let sharing: Vec<&scalprof_model::Finding> = doc
        .findings
        .iter()
        .filter(|f| {
            matches!(
                f.kind,
                scalprof_model::FindingKind::FalseSharing
                    | scalprof_model::FindingKind::TrueSharing
            )
        })
        .collect();
    // No empty section: the heading comes with a line to show.
    if !sharing.is_empty() {
        h += "<h2>Cache lines</h2>";
    }
    for f in sharing {
        let scalprof_model::FindingDetails::Sharing(d) = &f.details else {
            continue;
        };
        let fields: Vec<String> = d
            .fields
            .iter()
            .map(|name| {
                if d.written_fields.contains(name) {
                    format!("<b>{}</b>", esc(name))
                } else {
                    esc(name)
                }
            })
            .collect();
        let instructions: Vec<String> = d.instructions.iter().map(|i| esc(i)).collect();
        let _ = write!(
            h,
            "<p><b>{}</b> <code>{}</code> in {} — cache line {}: fields {} (written fields in bold); writes at {}</p>",
            esc(f.kind.as_str()),
            esc(&f.subject),
            esc(&d.file),
            esc(&d.cache_line),
            if fields.is_empty() { "—".to_string() } else { fields.join(", ") },
            instructions.join(", ")
        );
    }
    h += "</body></html>\n";
    h
}

/// The comparison page (`scalprof compare --report`): verdicts per point and metric, lock
/// and finding changes, and the differential flame graph.
/// A's and B's throughput (medians, min–max) over the common points, on one plot.
fn compare_plot(c: &scalprof_model::compare::Comparison) -> String {
    let series: Vec<(f64, [f64; 3], [f64; 3])> = c
        .points
        .iter()
        .filter_map(|p| {
            let m = p.metrics.iter().find(|m| m.metric == "throughput")?;
            Some((
                p.value as f64,
                [m.a_median, m.a_range[0], m.a_range[1]],
                [m.b_median, m.b_range[0], m.b_range[1]],
            ))
        })
        .collect();
    if series.is_empty() {
        return String::new();
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
    let mut svg = format!(
        "<svg id=\"compare-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"throughput of A and B\">"
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
        let _ = write!(
            svg,
            "<polyline class=\"series-{name}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        for s in &series {
            let v = if pick == 0 { s.1 } else { s.2 };
            let _ = write!(
                svg,
                "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"{color}\"/><circle cx=\"{0:.1}\" cy=\"{3:.1}\" r=\"4\" fill=\"{color}\"><title>{name} at {4}: {5}</title></circle>",
                x(s.0),
                y(v[1]),
                y(v[2]),
                y(v[0]),
                s.0,
                si(v[0])
            );
        }
    }
    let _ = write!(
        svg,
        "<g id=\"legend\" font-size=\"11\"><circle cx=\"{0}\" cy=\"{1}\" r=\"4\" fill=\"#999\"/><text x=\"{2}\" y=\"{3}\">A (median, min–max)</text><circle cx=\"{0}\" cy=\"{4}\" r=\"4\" fill=\"#c33\"/><text x=\"{2}\" y=\"{5}\">B</text></g></svg>",
        ml + 20.0,
        mt + 6.0,
        ml + 30.0,
        mt + 10.0,
        mt + 22.0,
        mt + 26.0
    );
    format!("<h2>Throughput, A and B</h2>{svg}")
}

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
                if m.metric == "throughput" {
                    si(x)
                } else {
                    format!("{x:.4}")
                }
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{} ({}–{})</td><td>{} ({}–{})</td><td class=\"l\">{}</td></tr>",
                esc(&m.metric),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_base64() {
        assert_eq!(
            esc("<script>a&b\"c'</script>"),
            "&lt;script&gt;a&amp;b&quot;c&#39;&lt;/script&gt;"
        );
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
