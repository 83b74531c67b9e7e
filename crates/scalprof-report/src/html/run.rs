//! The HTML report of one run: one function per section, in the page's order.

use scalprof_model::experiment::Experiment;
use scalprof_model::locks::{LockCaller, LockProfile, LockRow};
use scalprof_model::{
    ComplexityReport, Finding, FindingDetails, FindingKind, Point, PointProfile, RunDocument,
    ScalingDiff, SharingDetails, Spread,
};

use super::flames::{flame_frame, run_flames, DiffFlame};
use super::functions::{function_tables, PointFunctions};
use super::markup::{html, markup, Html};
use super::plot::{budget_bars, model_text, scaling_plot};
use super::{Heading, STYLE};
use crate::flame::svg_of;
use crate::format::{ns, si};
use crate::safe::shell_line;
use crate::tables::{grown, nothing_grew};
use crate::view::PointView;

/// The report of one run. `flames`: (point, profile) for the per-point flame graphs;
/// `diff`: what changed per operation between the first and the last of them;
/// `functions`: each profiled point's top functions.
pub fn run_report(
    doc: &RunDocument,
    flames: &[(u64, &PointProfile)],
    diff: Option<&DiffFlame>,
    functions: &[PointFunctions<'_>],
) -> String {
    let mut h = header(doc);
    h += scaling(doc);
    h += budget_bars(doc, Heading::Page);
    h += findings(doc);
    if let Some(d) = &doc.scaling_diff {
        h += what_grew(d);
    }
    h += locks(doc);
    if let Some(c) = &doc.complexity {
        h += complexity(c);
    }
    h += function_tables(doc, functions);
    h += run_flames(doc, flames, diff);
    h += cache_lines(doc);
    h += "</body></html>\n";
    h.into_string()
}

/// The page's head, then the run: its title, command, host and status.
fn header(doc: &RunDocument) -> Html {
    let title = format!("scalprof run {} · {}", doc.id, doc.label);
    let mut h = markup!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>",
        &title
    );
    h += STYLE;
    h += "</style></head><body>";
    html!(
        h,
        "<h1>{}</h1><p><code>{}</code></p>",
        &title,
        &shell_line(&doc.command)
    );
    let pmu = if doc.host.pmu {
        "hardware PMU"
    } else {
        "no hardware PMU"
    };
    html!(
        h,
        "<p class=\"muted\">{} · Linux {} · {} CPUs · {} · {} · status <b>{}</b></p>",
        &doc.created,
        &doc.host.kernel,
        doc.host.cpus,
        &doc.host.cpu_model,
        pmu,
        doc.status.as_str()
    );
    h
}

/// The scaling plot, the model, the points table and the measurement's warnings.
fn scaling(doc: &RunDocument) -> Html {
    let mut h = Html::new();
    h += "<h2>Scaling</h2>";
    h += scaling_plot(doc);
    if let Some(m) = &doc.model {
        html!(h, "<p>{}</p>", model_text(m, doc.sweep.parameter.as_str()));
    }
    h += points_table(doc);
    for w in &doc.warnings {
        html!(h, "<p class=\"warn\">⚠ {}</p>", &w.message);
    }
    h
}

/// The points table's columns after the sweep parameter's.
const POINT_COLUMNS: [&str; 9] = [
    "throughput",
    "speedup",
    "efficiency",
    "wall s",
    "user s",
    "sys s",
    "lock wait s",
    "traced vs clean",
    "overhead (scalprof)",
];

/// One row per point: rates, median times, lock wait and scalprof's cost.
fn points_table(doc: &RunDocument) -> Html {
    let mut h = Html::new();
    h += "<table id=\"points\"><tr>";
    html!(h, "<th>{}</th>", doc.sweep.parameter.as_str());
    for name in POINT_COLUMNS {
        html!(h, "<th>{}</th>", name);
    }
    h += "</tr>";
    for p in &doc.points {
        let v = PointView::of(p);
        let median = |s: Option<Spread>| s.map_or("—".into(), |s| format!("{:.3}", s.median));
        h += text_row(&[
            p.value.to_string(),
            v.throughput,
            v.speedup,
            v.efficiency,
            median(p.wall_s),
            median(p.user_s),
            median(p.sys_s),
            v.lock_wait_s.map_or("—".into(), |w| format!("{w:.3}")),
            p.perturbation
                .map_or("—".into(), |x| format!("{:+.1}%", 100.0 * x)),
            v.overhead_pct
                .map_or("—".into(), |o| format!("{o:.1}% of samples")),
        ]);
    }
    h += "</table>";
    h
}

/// A table row of text cells.
fn text_row(cells: &[String]) -> Html {
    let mut h = Html::new();
    h += "<tr>";
    for cell in cells {
        html!(h, "<td>{}</td>", cell);
    }
    h += "</tr>";
    h
}

/// The findings, or a line saying there is none.
fn findings(doc: &RunDocument) -> Html {
    let mut h = Html::new();
    h += "<h2>Findings</h2>";
    if doc.findings.is_empty() {
        h += "<p>No finding.</p>";
    }
    let parameter = doc.sweep.parameter.as_str();
    for f in &doc.findings {
        let experiment = f.experiment.and_then(|i| doc.experiments.get(i));
        h += finding(f, experiment, parameter);
    }
    // Experiments on causes that are no finding (`verify --cause`).
    let unlinked: Vec<&Experiment> = crate::experiment::unlinked(doc).collect();
    if !unlinked.is_empty() {
        h += "<h2>Experiments</h2>";
        for e in unlinked {
            html!(
                h,
                "<p class=\"experiment\">{}</p>",
                crate::experiment_line(e, parameter)
            );
        }
    }
    h
}

/// One finding: its score, kind and subject, the evidence, the speedup without it, the
/// experiment that tested it, and what to do.
fn finding(f: &Finding, experiment: Option<&Experiment>, parameter: &str) -> Html {
    let tested = experiment.map_or(Html::new(), |e| {
        markup!(
            "<p class=\"experiment\">Experiment: {}</p>",
            crate::experiment_line(e, parameter)
        )
    });
    let what_if = f.what_if.map_or(Html::new(), |w| {
        markup!(
            "<p class=\"what-if\">Without it: up to {:.2}× at {} {} (an upper bound).</p>",
            w.speedup,
            w.value,
            parameter
        )
    });
    markup!(
        "<div class=\"finding\"><span class=\"score\">{:.0}%</span> <b>{}</b> {} <code>{}</code>\
         <p>{}</p>{}{}<p class=\"muted\">What to do: {}</p></div>",
        f.score * 100.0,
        f.kind.as_str(),
        f.scope.map_or("", |s| s.as_str()),
        &f.subject,
        &f.evidence,
        what_if,
        tested,
        &f.suggestion
    )
}

/// The functions whose own cost per operation grew, kernel then user, without the noise;
/// or why nothing did.
fn what_grew(d: &ScalingDiff) -> Html {
    let mut h = Html::new();
    h += "<h2>What grew</h2>";
    if let Some(why) = nothing_grew(d) {
        html!(h, "<p class=\"nothing-grew\">Nothing grew: {}.</p>", why);
        return h;
    }
    for (scope, rows) in [("kernel", &d.kernel), ("user", &d.user)] {
        let shown = grown(rows, 10);
        if shown.is_empty() {
            continue;
        }
        html!(h, "<table><tr><th>{} function (self)</th>", scope);
        for p in &d.points {
            html!(h, "<th>{} @{}</th>", &d.unit, p);
        }
        h += "<th>growth</th><th>share of loss</th></tr>";
        for r in shown {
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
    h
}

/// Each point's lock table, then what the holders ran; nothing when no point was traced.
fn locks(doc: &RunDocument) -> Html {
    let mut h = Html::new();
    if !doc.points.iter().any(|p| p.locks.is_some()) {
        return h;
    }
    h += "<h2>Locks</h2>";
    let parameter = doc.sweep.parameter.as_str();
    for p in &doc.points {
        if let Some(l) = &p.locks {
            h += lock_table(parameter, p.value, l);
        }
    }
    if let Some(p) = doc.points.iter().rev().find(|p| p.locks.is_some()) {
        h += holder_flames(parameter, p);
    }
    h
}

/// The rows of one point to show in its lock table.
const LOCK_ROWS: usize = 12;

/// One point's lock table, heaviest waits first.
fn lock_table(parameter: &str, value: u64, l: &LockProfile) -> Html {
    // Who held the locks, as in the terminal table: a column only when known.
    let held = l.rows.iter().take(LOCK_ROWS).any(|r| !r.holders.is_empty());
    let mut h = markup!("<h3>{} {}</h3>", parameter, value);
    h += "<table><tr><th>scope</th><th class=\"l\">lock</th><th class=\"l\">type</th>\
          <th>contended</th><th>total wait</th><th>avg</th><th>max</th><th>on-CPU</th>\
          <th class=\"l\">top callers</th>";
    if held {
        h += "<th class=\"l\">held in</th>";
    }
    h += "</tr>";
    for r in l.rows.iter().take(LOCK_ROWS) {
        h += lock_row(r, held);
    }
    h += "</table>";
    h
}

/// One lock's row: its waits, its callers and, in the `held` column, its holders.
fn lock_row(r: &LockRow, held: bool) -> Html {
    let share = |c: &LockCaller| markup!("{} {:.0}%", &c.function, c.share * 100.0);
    let mut h = markup!(
        "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>",
        r.scope.as_str(),
        &r.name,
        &r.lock_type.to_string(),
        r.count,
        ns(r.total_wait_ns as f64),
        ns(r.avg_wait_ns()),
        ns(r.max_wait_ns as f64),
        r.spin_ns.map_or("—".into(), |v| ns(v as f64)),
        Html::join(r.callers.iter().map(share), ", ")
    );
    if held {
        html!(
            h,
            "<td class=\"l\">{}</td>",
            Html::join(r.holders.iter().map(share), ", ")
        );
    }
    h += "</tr>";
    h
}

/// What the holders ran while the waiters waited, at point `p` (the last that has lock
/// tables): a flame graph of the holder threads' own samples inside the waits, for the
/// first three locks that have them.
fn holder_flames(parameter: &str, p: &Point) -> Html {
    let mut h = Html::new();
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
        match svg_of(&stacks, &title, None) {
            Ok(svg) => {
                let summary = markup!("{} ({} {})", &title, parameter, p.value);
                h += flame_frame(&format!("holders-{i}"), &summary, &title, &svg, false);
            }
            Err(e) => html!(h, "<p class=\"warn\">{}: {}</p>", &title, &e.to_string()),
        }
    }
    h
}

/// The power-law fits of a size sweep: the whole workload, then its steepest functions.
fn complexity(c: &ComplexityReport) -> Html {
    let mut h = Html::new();
    h += "<h2>Complexity</h2><table><tr><th>function (self)</th><th>k</th>\
          <th>95% interval</th><th>R²</th></tr>";
    let fits = std::iter::once(("(whole workload)", &c.overall)).chain(
        c.functions
            .iter()
            .take(12)
            .map(|f| (f.function.as_str(), &f.fit)),
    );
    for (function, fit) in fits {
        html!(
            h,
            "<tr><td>{}</td><td>{:.2}</td><td>{:.2}–{:.2}</td><td>{:.3}</td></tr>",
            function,
            fit.exponent,
            fit.ci95[0],
            fit.ci95[1],
            fit.r2
        );
    }
    h += "</table>";
    h
}

/// The shared cache lines the sharing findings name, with their fields and writes; no
/// section at all without one.
fn cache_lines(doc: &RunDocument) -> Html {
    let mut h = Html::new();
    let sharing: Vec<&Finding> = doc
        .findings
        .iter()
        .filter(|f| matches!(f.kind, FindingKind::FalseSharing | FindingKind::TrueSharing))
        .collect();
    // No empty section: the heading comes with a line to show.
    if !sharing.is_empty() {
        h += "<h2>Cache lines</h2>";
    }
    for f in sharing {
        if let FindingDetails::Sharing(d) = &f.details {
            h += cache_line(f, d);
        }
    }
    h
}

/// One shared line: its fields, the written ones in bold, and the instructions that write.
fn cache_line(f: &Finding, d: &SharingDetails) -> Html {
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
    markup!(
        "<p><b>{}</b> <code>{}</code> in {} — cache line {}: fields {} (written fields in bold); \
         writes at {}</p>",
        f.kind.as_str(),
        &f.subject,
        &d.file,
        &d.cache_line,
        if fields.is_empty() {
            markup!("—")
        } else {
            fields
        },
        instructions
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_what_grew_says_nothing_grew() {
        let d = ScalingDiff {
            unit: "ns/op".into(),
            points: vec![1, 2],
            total_per_op: vec![4.56, 4.53],
            samples: vec![500, 500],
            ..Default::default()
        };
        let h = what_grew(&d).into_string();
        assert_eq!(
            h,
            "<h2>What grew</h2><p class=\"nothing-grew\">Nothing grew: the sampled cost per op is \
             flat (4.56 → 4.53 ns/op).</p>"
        );
    }
}
