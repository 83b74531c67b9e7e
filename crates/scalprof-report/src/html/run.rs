//! The HTML report of one run.

use super::markup::{html, markup, Html};
use super::plot::{budget_bars, model_text, scaling_plot};
use super::{flame_frame, Heading, STYLE};
use crate::flame::svg as flame_svg;
use crate::format::{ns, si};
use crate::safe::shell_line;
use crate::tables::MIN_SHARE_SHOWN;
use scalprof_model::RunDocument;

/// The report of one run. `flames`: (point, profile) for the per-point flame graphs;
/// `diff`: a differential flame graph (SVG bytes) of the first and last points.
pub fn run_report(
    doc: &RunDocument,
    flames: &[(u64, &scalprof_model::PointProfile)],
    diff: Option<&[u8]>,
) -> String {
    let mut h = Html::new();
    let title = format!("scalprof run {} · {}", doc.id, doc.label);
    html!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>",
        &title
    );
    h += STYLE;
    h += "</style></head><body>";
    html!(h, "<h1>{}</h1><p><code>{}</code></p><p class=\"muted\">{} · Linux {} · {} CPUs · {} · {} · status <b>{}</b></p>", &title, &shell_line(&doc.command), &doc.created, &doc.host.kernel, doc.host.cpus, &doc.host.cpu_model, if doc.host.pmu { "hardware PMU" } else { "no hardware PMU" }, doc.status.as_str());

    h += "<h2>Scaling</h2>";
    h += scaling_plot(doc);
    if let Some(m) = &doc.model {
        html!(h, "<p>{}</p>", model_text(m, doc.sweep.parameter.as_str()));
    }
    h += "<table id=\"points\"><tr><th>";
    h.text(doc.sweep.parameter.as_str());
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
        html!(h, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", p.value, p.throughput.map_or("—".into(), si), p.speedup.map_or("—".into(), |s| format!("{s:.2}×")), p.efficiency.map_or("—".into(), |e| format!("{:.0}%", e * 100.0)), med(p.wall_s), med(p.user_s), med(p.sys_s), lock_wait.map_or("—".into(), |w| format!("{w:.3}")), p.perturbation
                .map_or("—".into(), |x| format!("{:+.1}%", 100.0 * x)), overhead.map_or("—".into(), |o| format!("{o:.1}% of samples")));
    }
    h += "</table>";
    for w in &doc.warnings {
        html!(h, "<p class=\"warn\">⚠ {}</p>", &w.message);
    }

    h += budget_bars(doc, Heading::Page);
    h += "<h2>Findings</h2>";
    if doc.findings.is_empty() {
        h += "<p>No finding.</p>";
    }
    for f in &doc.findings {
        html!(h, "<div class=\"finding\"><span class=\"score\">{:.0}%</span> <b>{}</b> {} <code>{}</code><p>{}</p>{}<p class=\"muted\">What to do: {}</p></div>", f.score * 100.0, f.kind.as_str(), f.scope.map_or("", |s| s.as_str()), &f.subject, &f.evidence, f.what_if.map_or(Html::new(), |w| markup!(
                "<p class=\"what-if\">Without it: up to {:.2}× at {} {} (an upper bound).</p>",
                w.speedup,
                w.value,
                doc.sweep.parameter.as_str()
            )), &f.suggestion);
    }

    if let Some(d) = &doc.scaling_diff {
        h += "<h2>What grew</h2>";
        for (scope, rows) in [("kernel", &d.kernel), ("user", &d.user)] {
            if !rows.iter().any(|r| r.share_of_loss >= MIN_SHARE_SHOWN) {
                continue;
            }
            html!(h, "<table><tr><th>{} function (self)</th>", scope);
            for p in &d.points {
                html!(h, "<th>{} @{}</th>", &d.unit, p);
            }
            h += "<th>growth</th><th>share of loss</th></tr>";
            for r in rows
                .iter()
                .filter(|r| r.share_of_loss >= MIN_SHARE_SHOWN)
                .take(10)
            {
                html!(h, "<tr><td>{}</td>", &r.function);
                for v in &r.self_per_op {
                    html!(h, "<td>{}</td>", si(*v));
                }
                html!(
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
            // Who held the locks, as in the terminal table: a column only when known.
            let held = l.rows.iter().take(12).any(|r| !r.holders.is_empty());
            html!(h, "<h3>{} {}</h3><table><tr><th>scope</th><th class=\"l\">lock</th><th class=\"l\">type</th><th>contended</th><th>total wait</th><th>avg</th><th>max</th><th>on-CPU</th><th class=\"l\">top callers</th>{}</tr>", doc.sweep.parameter.as_str(), p.value, if held { markup!("<th class=\"l\">held in</th>") } else { Html::new() });
            for r in l.rows.iter().take(12) {
                let share = |c: &scalprof_model::locks::LockCaller| {
                    markup!("{} {:.0}%", &c.function, c.share * 100.0)
                };
                let callers = Html::join(r.callers.iter().map(share), ", ");
                let holders = if held {
                    markup!(
                        "<td class=\"l\">{}</td>",
                        Html::join(r.holders.iter().map(share), ", ")
                    )
                } else {
                    Html::new()
                };
                html!(h, "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>{}</tr>", r.scope.as_str(), &r.name, &r.lock_type.to_string(), r.count, ns(r.total_wait_ns as f64), ns(r.avg_wait_ns()), ns(r.max_wait_ns as f64), r.spin_ns.map_or("—".into(), |v| ns(v as f64)), callers, holders);
            }
            h += "</table>";
        }
        // What the holders ran while the waiters waited, at the last point that has
        // lock tables: a flame graph of the holder threads' own samples inside the waits.
        if let Some(p) = doc.points.iter().rev().find(|p| p.locks.is_some()) {
            let rows = p.locks.iter().flat_map(|l| &l.rows);
            for (i, r) in rows
                .filter(|r| !r.holder_stacks.is_empty())
                .take(3)
                .enumerate()
            {
                let stacks: Vec<(&str, u64)> = r
                    .holder_stacks
                    .iter()
                    .map(|f| (f.stack.as_str(), f.samples))
                    .collect();
                let title = format!("what {}'s holders ran while the waiters waited", r.name);
                match crate::flame::svg_of(&stacks, &title, None) {
                    Ok(svg) => {
                        html!(
                            h,
                            "<h3>{} ({} {})</h3>",
                            &title,
                            doc.sweep.parameter.as_str(),
                            p.value
                        );
                        h += flame_frame(&format!("holders-{i}"), &title, &svg);
                    }
                    Err(e) => html!(h, "<p class=\"warn\">{}: {}</p>", &title, &e.to_string()),
                }
            }
        }
    }

    if let Some(c) = &doc.complexity {
        h += "<h2>Complexity</h2><table><tr><th>function (self)</th><th>k</th><th>95% interval</th><th>R²</th></tr>";
        html!(
            h,
            "<tr><td>(whole workload)</td><td>{:.2}</td><td>{:.2}–{:.2}</td><td>{:.3}</td></tr>",
            c.overall.exponent,
            c.overall.ci95[0],
            c.overall.ci95[1],
            c.overall.r2
        );
        for f in c.functions.iter().take(12) {
            html!(
                h,
                "<tr><td>{}</td><td>{:.2}</td><td>{:.2}–{:.2}</td><td>{:.3}</td></tr>",
                &f.function,
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
                html!(
                    h,
                    "<h3>{}</h3>{}",
                    &t,
                    flame_frame(&format!("flame-{v}"), &format!("flame graph, {t}"), &svg)
                );
            }
            Err(e) => {
                html!(
                    h,
                    "<p class=\"warn\">flame graph of {}: {}</p>",
                    &t,
                    &e.to_string()
                );
            }
        }
    }
    if let Some(svg) = diff {
        html!(
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
        let fields = Html::join(
            d.fields.iter().map(|name| {
                if d.written_fields.contains(name) {
                    markup!("<b>{}</b>", name)
                } else {
                    markup!("{}", name)
                }
            }),
            ", ",
        );
        let instructions = Html::join(d.instructions.iter().map(|i| markup!("{}", i)), ", ");
        html!(h, "<p><b>{}</b> <code>{}</code> in {} — cache line {}: fields {} (written fields in bold); writes at {}</p>", f.kind.as_str(), &f.subject, &d.file, &d.cache_line, if fields.is_empty() { markup!("—") } else { fields }, instructions);
    }
    h += "</body></html>\n";
    h.into_string()
}
