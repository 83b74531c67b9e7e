//! `show --top`: where one point's time went, function by function, as `perf report
//! --stdio` and `pprof -top` lead with: self and total share of the samples, and the cost
//! per operation where the run counts operations.

use comfy_table::CellAlignment;
use scalprof_model::TopFunctions;

use crate::format::{count, ns};
use crate::safe::one_line;

/// The table of `top` at one point. `work`: the operations the profiled repeats did (a
/// per-op column when the run counts them); `unit`: what the samples' weights are
/// (`ns` for a clock event).
pub fn top_table(parameter: &str, value: u64, top: &TopFunctions, work: Option<f64>) -> String {
    if top.samples == 0 || top.functions.is_empty() {
        return format!("top functions at {value} {parameter}: no samples\n");
    }
    let mut t = crate::width::table();
    let per_op = work.filter(|w| *w > 0.0);
    let mut header = vec!["self %", "total %", "samples"];
    if per_op.is_some() {
        header.push("self per op");
    }
    header.push("function");
    t.set_header(header);
    let pct = |w: u64| format!("{:.1}%", 100.0 * w as f64 / top.weight.max(1) as f64);
    for f in &top.functions {
        let mut row = vec![
            pct(f.self_weight),
            pct(f.total_weight),
            count(f.self_samples),
        ];
        if let Some(work) = per_op {
            row.push(ns(f.self_weight as f64 / work));
        }
        let name = one_line(&f.function);
        row.push(if f.in_kernel {
            format!("{name} [kernel]")
        } else {
            name
        });
        t.add_row(row);
    }
    let columns = if per_op.is_some() { 4 } else { 3 };
    for i in 0..columns {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    format!(
        "top functions at {value} {parameter} ({} samples, self = in the function itself, total = with what it calls):\n{t}\n",
        count(top.samples)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::TopFunction;

    #[test]
    fn shares_are_of_the_profile_and_kernel_frames_are_marked() {
        let f = |name: &str, k: bool, s: u64, t: u64| TopFunction {
            function: name.into(),
            in_kernel: k,
            self_samples: s,
            total_samples: t,
            self_weight: s * 1000,
            total_weight: t * 1000,
        };
        let top = TopFunctions {
            samples: 200,
            weight: 200_000,
            functions: vec![
                f("lzma_mf_bt4_find", false, 120, 150),
                f("clear_page_erms", true, 30, 30),
            ],
        };
        let text = top_table("threads", 2, &top, Some(100.0));
        assert!(
            text.starts_with("top functions at 2 threads (200 samples"),
            "{text}"
        );
        let row = text
            .lines()
            .find(|l| l.contains("lzma_mf_bt4_find"))
            .unwrap();
        assert!(
            row.contains("60.0%") && row.contains("75.0%") && row.contains("1.2 µs"),
            "{row}"
        );
        assert!(text.contains("clear_page_erms [kernel]"), "{text}");
        assert!(top_table("threads", 1, &TopFunctions::default(), None).contains("no samples"));
    }
}
