//! Flame graphs with inferno: one per sweep point, and differential ones between two
//! points or runs, normalized per operation. Kernel frames carry the `_[k]` suffix and get
//! the kernel (orange) color; user frames are red.

use inferno::flamegraph::color::{MultiPalette, Palette};
use inferno::flamegraph::{self, Options};
use scalprof_model::profile::folded;
use scalprof_model::PointProfile;

/// Folded-stack lines ("frame;frame;… count") of a profile, by sample count.
pub fn folded_lines(p: &PointProfile) -> Vec<String> {
    let mut lines: Vec<String> = p
        .folded
        .iter()
        .map(|f| format!("{} {}", f.stack, f.samples))
        .collect();
    lines.sort();
    lines
}

fn options(title: &str, subtitle: Option<String>, count_name: &str) -> Options<'static> {
    let mut o = Options::default();
    // XML forbids most control characters, even escaped: a frame, a label or a title
    // from the store shows them in caret notation instead.
    o.title = crate::terminal_line(title);
    o.subtitle = subtitle.map(|s| crate::terminal_line(&s));
    o.colors = Palette::Multi(MultiPalette::Perl);
    o.count_name = count_name.to_string();
    // Same input, same SVG: no random colors.
    o.hash = true;
    o.deterministic = true;
    o
}

/// An SVG flame graph of one profile.
pub fn svg(p: &PointProfile, title: &str, subtitle: Option<String>) -> std::io::Result<Vec<u8>> {
    // Folded text keeps the frames as they are; in XML a control character is shown.
    let lines: Vec<String> = folded_lines(p)
        .iter()
        .map(|l| crate::terminal_line(l))
        .collect();
    let mut out = Vec::new();
    let mut opts = options(title, subtitle, "samples");
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)?;
    Ok(out)
}

/// An SVG flame graph of folded stacks given as (stack, samples).
pub fn svg_of(
    stacks: &[(&str, u64)],
    title: &str,
    subtitle: Option<String>,
) -> std::io::Result<Vec<u8>> {
    let mut lines: Vec<String> = stacks
        .iter()
        .map(|(s, n)| format!("{} {n}", crate::terminal_line(s)))
        .collect();
    lines.sort();
    let mut out = Vec::new();
    let mut opts = options(title, subtitle, "samples");
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)?;
    Ok(out)
}

/// A differential flame graph: the shape of `after`, colored by the change in cost per
/// operation from `before` (red grew, blue shrank). `*_work` is the work each profile did
/// (operations), so a run that did more work is not "slower" by mistake.
pub fn diff_svg(
    before: &PointProfile,
    before_work: f64,
    after: &PointProfile,
    after_work: f64,
    title: &str,
    subtitle: Option<String>,
) -> std::io::Result<Vec<u8>> {
    let lines = diff_lines(before, before_work, after, after_work);
    let mut out = Vec::new();
    // No parenthesis in the count's name: inferno's script takes a frame's name from its
    // tooltip by cutting the last "(…)" off, and one in the count cut the label mid-way
    // ("worker (1,000,000 cost per op").
    let mut opts = options(title, subtitle, DIFF_COUNT_NAME);
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)?;
    Ok(out)
}

/// What a differential graph's counts are: the larger side's total cost per operation is a
/// million ([`diff_lines`]).
pub const DIFF_COUNT_NAME: &str = "ppm of the cost per op";

/// Lines "stack before after" with both counts in the same per-operation unit, scaled so
/// the larger total is about a million (integers keep inferno's differential parser exact).
pub fn diff_lines(
    before: &PointProfile,
    before_work: f64,
    after: &PointProfile,
    after_work: f64,
) -> Vec<String> {
    use std::collections::BTreeMap;
    // Stacks are rooted at the process name: two builds of one program with different file
    // names (counters_packed, counters_padded) would share no stack, and every frame of
    // the fix would read as new. The after side's main process takes the before side's name.
    let main_root = |p: &PointProfile| -> Option<String> {
        let mut w: BTreeMap<&str, u64> = BTreeMap::new();
        for f in &p.folded {
            *w.entry(folded::process(&f.stack)).or_default() += f.weight;
        }
        w.into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(r, _)| r.to_string())
    };
    let rename = match (main_root(before), main_root(after)) {
        (Some(ra), Some(rb)) if ra != rb => Some((rb, ra)),
        _ => None,
    };
    let per_op = |p: &PointProfile, work: f64, rename: Option<&(String, String)>| {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for f in &p.folded {
            let stack = match rename {
                Some((from, to)) if folded::process(&f.stack) == from.as_str() => {
                    format!("{to}{}", &f.stack[from.len()..])
                }
                _ => f.stack.clone(),
            };
            *m.entry(stack).or_insert(0.0) += f.weight as f64 / work.max(1e-300);
        }
        m
    };
    let a = per_op(before, before_work, None);
    let b = per_op(after, after_work, rename.as_ref());
    let total = a.values().sum::<f64>().max(b.values().sum::<f64>());
    let scale = if total > 0.0 { 1e6 / total } else { 1.0 };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let x = (a.get(k).copied().unwrap_or(0.0) * scale).round() as u64;
            let y = (b.get(k).copied().unwrap_or(0.0) * scale).round() as u64;
            format!("{} {x} {y}", crate::terminal_line(k))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::FoldedStack;

    fn prof(stacks: &[(&str, u64)]) -> PointProfile {
        PointProfile {
            event: "cpu-clock".into(),
            folded: stacks
                .iter()
                .map(|(s, w)| FoldedStack {
                    stack: s.to_string(),
                    samples: w / 1000,
                    weight: *w,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn diff_is_normalized_per_operation() {
        // Twice the work and twice the time in `work`: no change per op; the kernel frame
        // is new.
        let a = prof(&[("p;work", 1_000_000)]);
        let b = prof(&[("p;work", 2_000_000), ("p;munmap_[k]", 1_000_000)]);
        let lines = diff_lines(&a, 1000.0, &b, 2000.0);
        assert_eq!(lines, vec!["p;munmap_[k] 0 333333", "p;work 666667 666667"]);
    }

    #[test]
    fn svg_marks_kernel_frames_and_escapes_names() {
        let p = prof(&[("p;main;<script>_[k]", 5000), ("p;main;work", 3000)]);
        let svg = String::from_utf8(svg(&p, "t", None).unwrap()).unwrap();
        assert!(svg.contains("<svg"));
        assert!(svg.contains("work"));
        assert!(!svg.contains("<script>_[k]"), "frame names must be escaped");
        assert!(svg.contains("&lt;script&gt;"));
    }

    /// What inferno's script shows as a frame's name: its tooltip without the last
    /// parenthesized group (`replace(/\([^(]*\)$/, "")` in its flamegraph.js).
    fn shown_name(title: &str) -> &str {
        match title.rfind('(') {
            Some(i) if title.ends_with(')') => &title[..i],
            _ => title,
        }
    }

    #[test]
    fn a_differential_graph_s_labels_are_the_function_names() {
        let a = prof(&[("p;worker", 1_000_000), ("p;worker;memcpy", 100_000)]);
        let b = prof(&[("p;worker", 1_000_000), ("p;worker;memcpy", 900_000)]);
        let svg = String::from_utf8(diff_svg(&a, 1.0, &b, 1.0, "t", None).unwrap()).unwrap();
        let titles: Vec<&str> = svg
            .split("<title>")
            .skip(1)
            .map(|t| &t[..t.find("</title>").unwrap()])
            .collect();
        let worker = titles.iter().find(|t| t.starts_with("worker ")).unwrap();
        assert!(worker.contains(DIFF_COUNT_NAME), "{worker}");
        assert_eq!(shown_name(worker), "worker ");
        let memcpy = titles.iter().find(|t| t.starts_with("memcpy ")).unwrap();
        assert_eq!(shown_name(memcpy), "memcpy ", "{memcpy}");
    }

    #[test]
    fn two_builds_with_different_names_diff_by_function() {
        let a = prof(&[("counters_packed;start_thread;worker", 700)]);
        let b = prof(&[("counters_padded;start_thread;worker", 100)]);
        let lines = diff_lines(&a, 1.0, &b, 1.0);
        assert_eq!(
            lines,
            ["counters_packed;start_thread;worker 1000000 142857"]
        );
    }

    #[test]
    fn control_characters_in_frames_and_titles_keep_the_svg_well_formed() {
        let p = prof(&[("main;evil\u{1b}[31m;\u{0}x", 3000), ("main;ok", 1000)]);
        let svg =
            String::from_utf8(svg(&p, "t\u{1b}itle", Some("s\u{7}".into())).unwrap()).unwrap();
        assert!(
            !svg.chars()
                .any(|c| (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r')),
            "a control character XML forbids"
        );
        assert!(
            svg.contains("evil^[[31m"),
            "the frame is shown in caret notation"
        );
        crate::safe::assert_well_formed(&svg);
    }

    #[test]
    fn characters_xml_forbids_in_frames_and_titles_keep_the_svg_well_formed() {
        let hostile = crate::safe::HOSTILE;
        let frame = format!("main;{hostile};x");
        let p = prof(&[(&frame, 3000), ("main;ok", 1000)]);
        let q = prof(&[(&frame, 1000), ("main;ok", 3000)]);
        let graphs = [
            svg(&p, hostile, Some(hostile.into())).unwrap(),
            svg_of(&[(&frame, 3)], hostile, Some(hostile.into())).unwrap(),
            diff_svg(&p, 1.0, &q, 1.0, hostile, Some(hostile.into())).unwrap(),
        ];
        for graph in graphs {
            let graph = String::from_utf8(graph).unwrap();
            crate::safe::assert_well_formed(&graph);
            assert!(graph.contains("a\\u{ffff}b"), "shown as its code");
        }
    }
}
