//! `scalprof fit`: the USL fitted to measurements the user brings (CSV).

use std::process::ExitCode;

use anyhow::{Context, Result};
use scalprof_pipeline::facade;

use crate::cli;
use crate::out;

/// `scalprof fit`: the USL fitted to a two-column CSV.
pub fn fit(args: cli::FitArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let obs = facade::parse_two_column_csv(&text)
        .with_context(|| format!("parsing {}", args.file.display()))?;
    let model =
        facade::fit_usl(&obs).with_context(|| format!("fitting {}", args.file.display()))?;
    if args.json {
        out::data(&(serde_json::to_string_pretty(&model)? + "\n"))?;
    } else {
        outln!("{}", scalprof_report::model_line(Some(&model), "N"));
        if let Some(note) = &model.note {
            outln!("  note: {note}");
        }
        for (name, est) in [
            ("σ", model.sigma_est),
            ("κ", model.kappa_est),
            ("λ", model.lambda_est),
        ] {
            if let Some(e) = est {
                let d = |x: f64| scalprof_report::decimal(x, e.std_error);
                outln!(
                    "  {name}: std. error {}, 95% interval {} … {}",
                    d(e.std_error),
                    d(e.ci95[0]),
                    d(e.ci95[1])
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
