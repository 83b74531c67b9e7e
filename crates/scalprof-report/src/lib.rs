//! scalprof reports for the terminal: the run summary (per-point table, model line,
//! user/system split, tracing line, what grew, lock tables, warnings, findings), the list
//! of stored runs, comparisons and layouts. HTML is in [`html`], flame graphs in [`flame`].
//!
//! One view per file: `summary` (the default screen and `-v`), `tables` (its tables and
//! lines), `locks`, `compare`, `layout`, `runs`; `safe` (what makes text printable),
//! `format` (number formats) and `view` (what text and HTML both show of a point) serve
//! them all.

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod ci;
pub mod flame;
pub mod html;
pub mod pprof;
pub mod speedscope;
pub mod suite;

mod compare;
mod experiment;
mod format;
mod history;
mod layout;
mod locks;
mod prediction;
mod runs;
mod safe;
mod summary;
mod tables;
mod top;
mod view;
mod warnings;
mod width;

pub use compare::{comparison, gate_line, signed_pct};
pub use experiment::experiment_line;
pub use format::{bytes, decimal, si};
pub use history::{history_html, history_text, sparkline};
pub use layout::{kernel_struct_text, layout_text};
pub use locks::{lock_growth, lock_table};
pub use prediction::prediction_lines;
pub use runs::{runs_table, RunRow};
pub use safe::{one_line, shell_line, terminal_line, terminal_safe};
pub use summary::{
    foreign_processes, run_model_line, summary, summary_with, verdict_line, WIDE_INTERVAL,
};
pub use tables::{complexity_table, counters_line, model_line, what_grew};
pub use top::top_table;
pub use width::{colour, set_terminal_width, terminal_width, wrap_to};

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::{Model, ModelKind};

    #[test]
    fn a_size_sweep_says_why_it_has_no_model() {
        assert!(model_line(None, "size").contains("a·nᵏ"));
        assert!(model_line(None, "threads").contains("fewer than two"));
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(
            terminal_safe("a\x1b]0;pwned\x07b\nc\td\x7f\u{9b}2J"),
            "a^[]0;pwned^Gb\nc^Id^?\\u{9b}2J"
        );
        assert_eq!(terminal_safe("plain · text ✓"), "plain · text ✓");
        assert_eq!(
            terminal_safe("abc\u{202e}fed\u{2066}"),
            "abc\\u202efed\\u2066"
        );
        assert_eq!(one_line("a\nb\r"), "a\\nb\\r");
        let argv: Vec<String> = ["sh", "-c", "echo ops=1", "it's", "{threads}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_line(&argv), "sh -c 'echo ops=1' 'it'\\''s' {threads}");
    }

    fn growth(
        function: &str,
        kernel: bool,
        per_op: [f64; 2],
        share: f64,
    ) -> scalprof_model::FunctionGrowth {
        scalprof_model::FunctionGrowth {
            function: function.into(),
            in_kernel: kernel,
            self_per_op: per_op.to_vec(),
            inclusive_per_op: per_op.to_vec(),
            growth: per_op[1] - per_op[0],
            share_of_loss: share,
        }
    }

    #[test]
    fn what_grew_shows_growth_and_hides_noise() {
        let mut d = scalprof_model::ScalingDiff {
            unit: "ns/op".into(),
            points: vec![1, 2],
            total_per_op: vec![4.6, 31.2],
            samples: vec![500, 500],
            user: vec![growth("worker", false, [4.6, 31.1], 0.85)],
            kernel: vec![growth("handle_softirqs", true, [0.01, 0.03], 0.0006)],
        };
        let text = what_grew(&d);
        assert!(text.contains("worker") && text.contains("85%"), "{text}");
        assert!(
            !text.contains("handle_softirqs"),
            "noise rows are hidden: {text}"
        );
        d.total_per_op = vec![4.56, 4.53];
        assert_eq!(
            what_grew(&d),
            "\nnothing grew: the sampled cost per op is flat (4.56 → 4.53 ns/op)\n"
        );
        // Grown, but spread so thin that no function reaches 1% of the cost per op.
        d.total_per_op = vec![4.6, 31.2];
        d.user[0].share_of_loss = 0.004;
        assert!(
            what_grew(&d).starts_with("\nnothing grew: no function's growth reaches 1%"),
            "{}",
            what_grew(&d)
        );
    }

    #[test]
    fn model_line_names_the_peak() {
        let m = Model {
            kind: ModelKind::Usl,
            sigma: 0.0277,
            kappa: 0.000104,
            lambda: 90.0,
            peak: Some(96.5),
            r2: 0.99,
            observations: 7,
            sigma_est: None,
            kappa_est: None,
            lambda_est: None,
            note: None,
            prediction: None,
        };
        let line = model_line(Some(&m), "threads");
        assert!(
            line.starts_with("USL σ=0.0277 κ=0.000104 λ=90.0 → peak ≈ 96.5 threads"),
            "{line}"
        );
    }
}
