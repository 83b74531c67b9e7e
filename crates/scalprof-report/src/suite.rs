//! The suite's views: the rates table, the comparison of two suites (terminal), and the
//! suite's HTML page and its comparison page.

use comfy_table::{CellAlignment, Table};
use scalprof_model::compare::MetricComparison;
use scalprof_model::suite::{SuiteComparison, SuiteDocument, TestComparison, TestResult, TopCause};
use scalprof_model::{Host, RunDocument};

use crate::html::markup::{html, markup, Html};
use crate::html::{budget_bars, scaling_plot, Heading, STYLE};
use crate::safe::shell_line;

/// Operations per second, short: 1.23M, 45.6k, 789.
pub fn rate(ops: f64) -> String {
    if ops >= 1e6 {
        format!("{:.2}M", ops / 1e6)
    } else if ops >= 1e3 {
        format!("{:.1}k", ops / 1e3)
    } else {
        format!("{ops:.0}")
    }
}

/// A top cause without its kind, for the comparison's narrow column.
fn short_cause(c: Option<&TopCause>) -> String {
    c.map_or("none".into(), |c| {
        format!("{} {:.0}%", subject(c), c.score * 100.0)
    })
}

/// A cause as a person names it: a file's record lock is "POSIX record lock on PATH",
/// not the bare path.
fn subject(c: &TopCause) -> String {
    match c.lock_type.as_deref() {
        Some("posix-lock") => format!("POSIX record lock on {}", c.subject),
        Some("flock") => format!("flock on {}", c.subject),
        _ => c.subject.clone(),
    }
}

fn cause(c: Option<&TopCause>, status: &str) -> String {
    match c {
        Some(c) => format!("{} {:.0}% ({})", subject(c), c.score * 100.0, c.kind),
        None if status == "complete" => "none".into(),
        None => format!("({status})"),
    }
}

/// Repeats of one point further apart than this, relative to their median, are marked.
const NOISY: f64 = 0.10;

/// (max − min) / median of a point's repeats.
fn spread(repeats: &[f64]) -> Option<f64> {
    if repeats.len() < 2 {
        return None;
    }
    let mut r = repeats.to_vec();
    r.sort_by(f64::total_cmp);
    let median = if r.len() % 2 == 1 {
        r[r.len() / 2]
    } else {
        (r[r.len() / 2 - 1] + r[r.len() / 2]) / 2.0
    };
    (median > 0.0).then(|| (r[r.len() - 1] - r[0]) / median)
}

/// The footnote for marked points, if any is.
fn noisy_note(results: &[TestResult]) -> Option<String> {
    let any = results.iter().any(|r| {
        r.points
            .iter()
            .any(|p| spread(&p.repeats).is_some_and(|s| s > NOISY))
    });
    any.then(|| {
        format!(
            "±: that point's repeats are more than {:.0}% apart (half their range shown); rerun the test alone with more repeats (--tests NAME --repeat 5) before trusting it",
            NOISY * 100.0
        )
    })
}

/// One test's cells: ops/s per point, per worker and efficiency at the largest measured
/// point.
fn cells(r: &TestResult) -> [String; 3] {
    let last = r.points.iter().rev().find(|p| p.throughput.is_some());
    let points: Vec<String> = r
        .points
        .iter()
        .map(|p| {
            let noisy = spread(&p.repeats).filter(|s| *s > NOISY);
            format!(
                "{}: {}{}",
                p.value,
                p.throughput.map_or("failed".into(), rate),
                noisy.map_or(String::new(), |s| format!(" ±{:.0}%", 50.0 * s))
            )
        })
        .collect();
    [
        points.join(" · "),
        last.and_then(|p| p.throughput.map(|x| rate(x / p.value as f64)))
            .unwrap_or_else(|| "—".into()),
        last.and_then(|p| p.efficiency)
            .map_or("—".into(), |e| format!("{:.0}%", e * 100.0)),
    ]
}

/// The rates table: ops/s per point, per-worker rate and efficiency at the largest point,
/// the top cause and its share, and the stored run.
pub fn table(results: &[TestResult]) -> String {
    let mut t = crate::width::table();
    t.set_header(vec![
        "test",
        "mode",
        "ops/s per point",
        "per worker",
        "efficiency",
        "top cause",
        "run",
    ]);
    for r in results {
        let [points, per, eff] = cells(r);
        t.add_row(vec![
            r.name.clone(),
            r.mode.clone(),
            points,
            per,
            eff,
            cause(r.top_cause.as_ref(), &r.status),
            r.run_id.clone(),
        ]);
    }
    for i in [3, 4, 6] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = t.to_string() + "\n";
    if let Some(note) = noisy_note(results) {
        out += &note;
        out.push('\n');
    }
    out
}

fn host_line(h: &Host) -> String {
    format!(
        "Linux {}, {} CPUs, {}{}",
        h.kernel,
        h.cpus,
        h.cpu_model,
        if h.pmu { "" } else { ", no hardware PMU" }
    )
}

/// The throughput verdict of one point, short: `+62.5% ± 2.1%`, `no difference (p 0.43)`.
pub fn change(m: &MetricComparison) -> String {
    match (&m.welch, m.difference_pct) {
        (Some(w), Some(pct)) if m.significant && w.difference != 0.0 => {
            // The interval's half-width in the same percent of A's mean as the difference.
            let half = (pct * (w.ci95[1] - w.ci95[0]) / 2.0 / w.difference).abs();
            format!("{pct:+.1}% ± {half:.1}% (p {:.1e})", w.p_value)
        }
        (Some(w), _) => format!("no difference proven (p {:.2})", w.p_value),
        (None, _) => "too few repeats".into(),
    }
}

fn throughput_at(t: &TestComparison) -> Vec<(u64, &MetricComparison)> {
    t.comparison
        .points
        .iter()
        .filter_map(|p| {
            p.metrics
                .iter()
                .find(|m| m.metric == scalprof_model::compare::Metric::Throughput)
                .map(|m| (p.value, m))
        })
        .collect()
}

/// Counts of tests B made faster and slower (proven at some point), and the rest.
fn tally(c: &SuiteComparison) -> (usize, usize, usize) {
    let (mut faster, mut slower) = (0, 0);
    for t in &c.tests {
        let ms = throughput_at(t);
        let proven = |sign: f64| {
            ms.iter()
                .any(|(_, m)| m.significant && m.difference_pct.is_some_and(|d| d * sign > 0.0))
        };
        if proven(-1.0) {
            slower += 1;
        } else if proven(1.0) {
            faster += 1;
        }
    }
    (faster, slower, c.tests.len() - faster - slower)
}

/// The terminal view of two suites compared: one row per test and point with Welch's
/// verdict on throughput, the top causes before and after, then what changed in the locks
/// and findings of the stored runs.
pub fn comparison(c: &SuiteComparison) -> String {
    let mut out = format!("A: {}\nB: {}\n", host_line(&c.a_host), host_line(&c.b_host));
    out += &comparison_table(c).to_string();
    out.push('\n');
    let (faster, slower, same) = tally(c);
    out += &format!(
        "B is faster in {faster} test(s), slower in {slower}, no difference proven in {same}\n"
    );
    for test in &c.tests {
        out += &test_changes(test);
    }
    for k in &c.only_in_a {
        out += &format!("  only in A: {k}\n");
    }
    for k in &c.only_in_b {
        out += &format!("  only in B: {k}\n");
    }
    out
}

/// The comparison's table: each test's rows, as [`test_rows`] makes them.
fn comparison_table(c: &SuiteComparison) -> Table {
    let mut t = crate::width::table();
    t.set_header(vec![
        "test",
        "mode",
        "workers",
        "A ops/s",
        "B ops/s",
        "B vs A (95% confidence)",
        "top cause A → B",
        "runs",
    ]);
    for test in &c.tests {
        for row in test_rows(test) {
            t.add_row(row);
        }
    }
    for i in [2, 3, 4] {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// A test's rows, one per point measured in both suites, the first naming the test, its
/// top causes and its runs; one row saying so when no point was.
fn test_rows(test: &TestComparison) -> Vec<Vec<String>> {
    let runs = format!("{} → {}", test.comparison.a, test.comparison.b);
    let rows = throughput_at(test);
    if rows.is_empty() {
        return vec![vec![
            test.name.clone(),
            test.mode.clone(),
            "—".into(),
            "—".into(),
            "—".into(),
            "no point measured in both".into(),
            String::new(),
            runs,
        ]];
    }
    let causes = format!(
        "{} → {}",
        short_cause(test.a_top_cause.as_ref()),
        short_cause(test.b_top_cause.as_ref())
    );
    rows.iter()
        .enumerate()
        .map(|(i, (value, m))| {
            let first = |cell: &String| if i == 0 { cell.clone() } else { String::new() };
            vec![
                first(&test.name),
                first(&test.mode),
                value.to_string(),
                rate(m.a_median),
                rate(m.b_median),
                change(m),
                first(&causes),
                first(&runs),
            ]
        })
        .collect()
}

/// What changed in a test's stored runs: lock waits per point and findings, or that the
/// runs are not both in the store.
fn test_changes(test: &TestComparison) -> String {
    let mut out = String::new();
    let k = format!("{} ({})", test.name, test.mode);
    for p in &test.comparison.points {
        for l in &p.locks {
            out += &format!(
                "  {k} at {}: {} wait per op {:.0} ns → {:.0} ns\n",
                p.value, l.lock, l.a_wait_ns_per_op, l.b_wait_ns_per_op
            );
        }
    }
    for f in &test.comparison.findings_appeared {
        out += &format!("  {k}: finding appeared in B: {f}\n");
    }
    for f in &test.comparison.findings_disappeared {
        out += &format!("  {k}: finding gone in B: {f}\n");
    }
    if !test.from_store {
        out += &format!(
            "  {k}: runs {} and {} are not both in this store: throughput only, from the suite documents\n",
            test.comparison.a, test.comparison.b
        );
    }
    out
}

fn page_head(h: &mut Html, title: &str) {
    html!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>",
        title
    );
    *h += STYLE;
    html!(h, "</style></head><body><h1>{}</h1>", title);
}

/// The suite's page (`scalprof suite --report`): the rates table, then each test's scaling
/// plot, time budget and findings. `runs` holds each test's stored run where it loaded.
pub fn html_report(doc: &SuiteDocument, runs: &[Option<RunDocument>]) -> String {
    let mut h = Html::new();
    page_head(&mut h, "scalprof suite");
    html!(h, "<p class=\"muted\">{}</p>", &host_line(&doc.host));
    h += "<h2>Rates</h2><table id=\"rates\"><tr><th>test</th><th class=\"l\">mode</th>\
          <th>ops/s per point</th><th>per worker</th><th>efficiency</th>\
          <th class=\"l\">top cause</th><th>run</th></tr>";
    for r in &doc.tests {
        let [points, per, eff] = cells(r);
        html!(
            h,
            "<tr><td><a href=\"#{}-{}\">{}</a></td><td class=\"l\">{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td class=\"l\">{}</td><td>{}</td></tr>",
            &r.name,
            &r.mode,
            &r.name,
            &r.mode,
            &points,
            &per,
            &eff,
            &cause(r.top_cause.as_ref(), &r.status),
            &r.run_id
        );
    }
    h += "</table>";
    if let Some(note) = noisy_note(&doc.tests) {
        html!(h, "<p class=\"muted\">{}</p>", &note);
    }
    for (r, run) in doc.tests.iter().zip(runs) {
        h += html_test_section(r, run.as_ref());
    }
    h += "</body></html>\n";
    h.into_string()
}

/// One test on the suite's page: its stored run's scaling plot, time budget and findings,
/// or that the run is not in the store.
fn html_test_section(r: &TestResult, run: Option<&RunDocument>) -> Html {
    let mut h = markup!(
        "<h2 id=\"{}-{}\">{} ({})</h2>",
        &r.name,
        &r.mode,
        &r.name,
        &r.mode
    );
    let Some(run) = run else {
        html!(
            h,
            "<p class=\"warn\">run {} is not in the store</p>",
            &r.run_id
        );
        return h;
    };
    html!(
        h,
        "<p class=\"muted\">run {} · <code>{}</code> · status {} · \
         full page: <code>scalprof report {}</code></p>",
        &run.id,
        &shell_line(&run.command),
        &r.status,
        &run.id
    );
    h += scaling_plot(run);
    // The run page's section heading, one level down under the test's.
    h += budget_bars(run, Heading::Nested);
    if run.findings.is_empty() {
        h += "<p>No finding.</p>";
    }
    for f in &run.findings {
        html!(
            h,
            "<div class=\"finding\"><span class=\"score\">{:.0}%</span> <b>{}</b> \
             <code>{}</code><p>{}</p><p class=\"muted\">Suggestion: {}</p></div>",
            f.score * 100.0,
            f.kind.as_str(),
            &f.subject,
            &f.evidence,
            &f.suggestion
        );
    }
    h
}

/// The comparison page of two suites (`scalprof compare A.json B.json --report`).
pub fn html_comparison(c: &SuiteComparison) -> String {
    let mut h = Html::new();
    page_head(&mut h, "scalprof compare: two suites");
    html!(
        h,
        "<p>A: {}<br>B: {}</p>",
        &host_line(&c.a_host),
        &host_line(&c.b_host)
    );
    let (faster, slower, same) = tally(c);
    html!(
        h,
        "<p><b>B is faster in {} test(s), slower in {}, no difference proven in {}.</b></p>",
        faster,
        slower,
        same
    );
    h += "<table id=\"suite-compare\"><tr><th>test</th><th class=\"l\">mode</th>\
          <th>workers</th><th>A ops/s</th><th>B ops/s</th>\
          <th class=\"l\">B vs A (95% confidence)</th><th class=\"l\">top cause A → B</th>\
          <th>runs</th></tr>";
    for test in &c.tests {
        for (value, m) in throughput_at(test) {
            h += html_comparison_row(test, value, m);
        }
    }
    h += "</table>";
    for test in &c.tests {
        h += html_test_changes(test);
    }
    for k in c
        .only_in_a
        .iter()
        .map(|k| ("A", k))
        .chain(c.only_in_b.iter().map(|k| ("B", k)))
    {
        html!(h, "<p class=\"muted\">only in {}: {}</p>", k.0, k.1);
    }
    h += "</body></html>\n";
    h.into_string()
}

/// One test's point in the comparison page's table, marked when B is proven slower.
fn html_comparison_row(test: &TestComparison, value: u64, m: &MetricComparison) -> Html {
    let class = match m.difference_pct {
        Some(d) if m.significant && d < 0.0 => markup!(" class=\"warn\""),
        _ => Html::new(),
    };
    markup!(
        "<tr{}><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
         <td class=\"l\">{}</td><td class=\"l\">{} → {}</td><td>{} → {}</td></tr>",
        class,
        &test.name,
        &test.mode,
        value,
        rate(m.a_median),
        rate(m.b_median),
        &change(m),
        &short_cause(test.a_top_cause.as_ref()),
        &short_cause(test.b_top_cause.as_ref()),
        &test.comparison.a,
        &test.comparison.b
    )
}

/// What changed in a test's stored runs, for the comparison page: lock waits per point,
/// findings that appeared and went.
fn html_test_changes(test: &TestComparison) -> Html {
    let mut h = Html::new();
    for p in &test.comparison.points {
        for l in &p.locks {
            html!(
                h,
                "<p>{} ({}) at {}: {} wait per op {:.0} ns → {:.0} ns</p>",
                &test.name,
                &test.mode,
                p.value,
                &l.lock,
                l.a_wait_ns_per_op,
                l.b_wait_ns_per_op
            );
        }
    }
    for f in &test.comparison.findings_appeared {
        html!(
            h,
            "<p class=\"warn\">{} ({}): finding appeared in B: {}</p>",
            &test.name,
            &test.mode,
            f
        );
    }
    for f in &test.comparison.findings_disappeared {
        html!(
            h,
            "<p>{} ({}): finding gone in B: {}</p>",
            &test.name,
            &test.mode,
            f
        );
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::suite::PointRate;

    fn result(name: &str, at2: &[f64], status: &str) -> TestResult {
        let median = |r: &[f64]| (!r.is_empty()).then(|| r.iter().sum::<f64>() / r.len() as f64);
        TestResult {
            name: name.into(),
            mode: "threads".into(),
            run_id: "7".into(),
            status: status.into(),
            points: [(1, vec![1000.0, 1010.0]), (2, at2.to_vec())]
                .into_iter()
                .map(|(value, repeats)| PointRate {
                    value,
                    throughput: median(&repeats),
                    efficiency: median(&repeats).map(|m| m / (1005.0 * value as f64)),
                    repeats,
                })
                .collect(),
            top_cause: None,
        }
    }

    #[test]
    fn the_rates_table_marks_noisy_points_and_failed_ones() {
        let quiet = table(&[result("lseek", &[1900.0, 1950.0], "complete")]);
        assert!(quiet.contains("2: 1.9k"), "{quiet}");
        assert!(quiet.contains("96%") && quiet.contains("none"), "{quiet}");
        assert!(!quiet.contains('±'), "{quiet}");
        let noisy = table(&[
            result("brk", &[1500.0, 1900.0], "complete"),
            result("futex_own", &[], "failed"),
        ]);
        assert!(noisy.contains("2: 1.7k ±12%"), "{noisy}");
        assert!(noisy.contains("rerun the test alone"), "{noisy}");
        assert!(noisy.contains("2: failed"), "{noisy}");
        assert!(noisy.contains("(failed)"), "{noisy}");
    }
}
