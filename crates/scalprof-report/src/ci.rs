//! What a CI system reads of a gate: a GitHub step summary (markdown, appended to
//! `$GITHUB_STEP_SUMMARY`) and a JUnit XML file (one test case per point or metric, a
//! `<failure>` for each regression), for `compare --fail-if-slower` and `history`.

use scalprof_model::compare::Comparison;
use scalprof_model::history::History;

use crate::compare::signed_pct;

/// "2 threads", "1 thread", "size 4000".
fn at(parameter: &str, value: u64) -> String {
    match (parameter, value) {
        ("threads", 1) => "1 thread".into(),
        ("threads", n) => format!("{n} threads"),
        (p, n) => format!("{p} {n}"),
    }
}

/// What explains B against A, most first: the causes that explain a tenth or more of the
/// change at the last common point, then the findings that appeared or vanished.
pub fn comparison_causes(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = c.points.last() {
        for x in p.causes.iter().filter(|x| x.explains.abs() >= 0.10).take(3) {
            out.push(format!(
                "{} {} → {} per op (explains {:.0}%)",
                x.cause,
                scalprof_model::units::human_ns(x.a_ns_per_op),
                scalprof_model::units::human_ns(x.b_ns_per_op),
                x.explains * 100.0
            ));
        }
    }
    out.extend(c.findings_appeared.iter().map(|f| format!("appeared: {f}")));
    out.extend(
        c.findings_disappeared
            .iter()
            .map(|f| format!("vanished: {f}")),
    );
    out
}

/// Text of the step summary, in a table cell or not. It holds no `|` nor a line break,
/// and no HTML: a label's `<!--` would hide the rest of the summary on GitHub's page, so
/// `<`, `>` and `&` are entities. Nor any markdown of its own: a teammate's label of
/// `[text](url)` would put a link in the gate's summary, so link, image, code and
/// emphasis characters are backslash-escaped (and a backslash itself, which would
/// otherwise undo the escape after it). Control characters (an ESC in a commit) are
/// shown as in a terminal.
fn cell(s: &str) -> String {
    let line = crate::terminal_line(s);
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '|' | '[' | ']' | '(' | ')' | '!' | '`' | '*' | '_' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// The step summary of a comparison: the gate's outcome as the headline, a table of the
/// points, and what explains the change.
pub fn comparison_markdown(c: &Comparison, a: &str, b: &str, parameter: &str) -> String {
    let failed = c.gate.as_ref().is_some_and(|g| g.failed);
    let mut out = format!(
        "### scalprof: {} — {} vs {}\n\n{}\n\n",
        if failed {
            "❌ regression"
        } else {
            "✅ no regression"
        },
        cell(b),
        cell(a),
        cell(&c.verdict)
    );
    out += &format!(
        "| {parameter} | B ÷ A throughput | 95% interval | gate |\n|---:|---:|:---|:---|\n"
    );
    for p in &c.points {
        let gate = match &c.gate {
            Some(g) if g.slower_points.contains(&p.value) => "❌ slower",
            Some(g) if g.untested_points.contains(&p.value) => "untested",
            Some(_) => "✅",
            None => "",
        };
        match &p.throughput_ratio {
            Some(r) => {
                out += &format!(
                    "| {} | {} | {:.2}–{:.2}× | {gate} |\n",
                    p.value,
                    signed_pct((r.ratio - 1.0) * 100.0),
                    r.ci95[0],
                    r.ci95[1]
                )
            }
            None => out += &format!("| {} | – | – | {gate} |\n", p.value),
        }
    }
    let causes = comparison_causes(c);
    if !causes.is_empty() {
        out += "\n**Cause**\n\n";
        for x in &causes {
            out += &format!("- {}\n", cell(x));
        }
    }
    if let Some(line) = crate::gate_line(c, parameter) {
        out += &format!("\n{}\n", cell(&line));
    }
    out
}

/// The JUnit XML of a comparison: one test case per point, failed where the gate found
/// it slower.
pub fn comparison_junit(c: &Comparison, parameter: &str) -> String {
    let causes = comparison_causes(c).join("; ");
    let cases: Vec<Case> = c
        .points
        .iter()
        .map(|p| {
            let slower = c
                .gate
                .as_ref()
                .is_some_and(|g| g.slower_points.contains(&p.value));
            Case {
                name: format!("throughput at {}", at(parameter, p.value)),
                failure: slower.then(|| {
                    let ratio = p.throughput_ratio.map_or(String::new(), |r| {
                        format!("B is {} of A", signed_pct((r.ratio - 1.0) * 100.0))
                    });
                    format!(
                        "{ratio}: {}{}",
                        c.verdict,
                        if causes.is_empty() {
                            String::new()
                        } else {
                            format!(" — cause: {causes}")
                        }
                    )
                }),
            }
        })
        .collect();
    junit(&format!("scalprof compare {} {}", c.a, c.b), &cases)
}

/// The step summary of a history: its change points and their causes.
pub fn history_markdown(h: &History) -> String {
    let regressed = last_is_regression(h);
    let mut out = format!(
        "### scalprof history: {} — {}\n\n{} runs, compared at {}.\n\n",
        cell(&h.label),
        if regressed {
            "❌ regression"
        } else {
            "✅ no regression"
        },
        h.runs.len(),
        h.value
            .map_or("no common point".into(), |v| at(&h.parameter, v)),
    );
    if h.change_points.is_empty() {
        out += "No change point: no shift beyond the runs' own noise.\n";
        return out;
    }
    out += "| run | commit | metric | change | 95% interval | cause |\n|---:|:---|:---|---:|:---|:---|\n";
    for c in &h.change_points {
        out += &format!(
            "| {} | {} | {} | {} | {}–{} | {} |\n",
            c.run,
            c.commit
                .as_deref()
                .map_or("–".into(), |s| cell(crate::summary::short_commit(s))),
            c.metric,
            signed_pct(c.change * 100.0),
            signed_pct(c.interval[0] * 100.0),
            signed_pct(c.interval[1] * 100.0),
            cell(&c.causes.join("; "))
        );
    }
    out
}

/// The JUnit XML of a history: one case per metric, failed where its last change point
/// is a drop.
pub fn history_junit(h: &History) -> String {
    let cases: Vec<Case> = ["throughput", "efficiency"]
        .iter()
        .map(|m| {
            let last = h.change_points.iter().rev().find(|c| c.metric == *m);
            Case {
                name: format!("{m} of {}", h.label),
                failure: last.filter(|c| c.change < 0.0).map(|c| {
                    format!(
                        "{m} {} at run {}{}: {}",
                        signed_pct(c.change * 100.0),
                        c.run,
                        c.commit
                            .as_deref()
                            .map_or(String::new(), |s| format!(" (commit {s})")),
                        c.causes.join("; ")
                    )
                }),
            }
        })
        .collect();
    junit(&format!("scalprof history {}", h.label), &cases)
}

/// Whether the series' last change point lowered its metric: a regression not undone
/// since.
pub fn last_is_regression(h: &History) -> bool {
    h.change_points.last().is_some_and(|c| c.change < 0.0)
}

struct Case {
    name: String,
    failure: Option<String>,
}

fn junit(suite: &str, cases: &[Case]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"scalprof\" tests=\"{}\" failures=\"{failures}\">\n  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">\n",
        cases.len(),
        xml(suite),
        cases.len()
    );
    for c in cases {
        match &c.failure {
            None => out += &format!("    <testcase classname=\"scalprof\" name=\"{}\"/>\n", xml(&c.name)),
            Some(f) => {
                out += &format!(
                    "    <testcase classname=\"scalprof\" name=\"{}\">\n      <failure message=\"{}\" type=\"regression\">{}</failure>\n    </testcase>\n",
                    xml(&c.name),
                    xml(f),
                    xml(f)
                )
            }
        }
    }
    out += "  </testsuite>\n</testsuites>\n";
    out
}

/// Text for an XML attribute or element: escaped, and only characters XML 1.0 allows.
fn xml(s: &str) -> String {
    crate::safe::markup_text(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_and_counts_failures() {
        let x = junit(
            "s <&>",
            &[
                Case {
                    name: "a \"quoted\"".into(),
                    failure: None,
                },
                Case {
                    name: "b".into(),
                    failure: Some("lock <table_lock>\u{1}".into()),
                },
            ],
        );
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("name=\"s &lt;&amp;&gt;\""), "{x}");
        assert!(x.contains("name=\"a &quot;quoted&quot;\"/>"), "{x}");
        assert!(x.contains(">lock &lt;table_lock&gt;^A</failure>"), "{x}");
        crate::safe::assert_well_formed(&x);
    }

    #[test]
    fn markdown_text_renders_no_link_image_or_emphasis() {
        assert_eq!(
            cell("[click](https://x.example) ![i](y) `c` *b* _i_ ~s~"),
            "\\[click\\]\\(https://x.example\\) \\!\\[i\\]\\(y\\) \\`c\\` \\*b\\* \\_i\\_ \\~s\\~"
        );
        // A backslash cannot undo the escape of the `|` after it; HTML stays text.
        assert_eq!(cell("a\\|b <!-- &"), "a\\\\\\|b &lt;\\!-- &amp;");
        // Control characters as a terminal shows them, their brackets escaped too.
        assert_eq!(cell("x\u{1b}[1m\ny"), "x^\\[\\[1m\\\\ny");
    }

    #[test]
    fn junit_is_well_formed_whatever_the_names_hold() {
        let hostile = crate::safe::HOSTILE;
        let x = junit(
            hostile,
            &[
                Case {
                    name: hostile.into(),
                    failure: None,
                },
                Case {
                    name: format!("b {hostile}"),
                    failure: Some(format!("lock {hostile}")),
                },
            ],
        );
        crate::safe::assert_well_formed(&x);
        assert!(
            x.contains("a\\u{ffff}b\\u{fffe}c"),
            "shown as its code: {x}"
        );
    }
}
