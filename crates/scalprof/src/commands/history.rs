//! `scalprof history LABEL`: one label's runs over commits, with change points, and the
//! files a CI reads (JUnit, the GitHub step summary).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::open_store_read_only;
use crate::cli;
use crate::out;

/// `scalprof history LABEL`.
pub fn history(db: &Option<PathBuf>, args: cli::HistoryArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    let mut ids = store.labelled(&args.label)?;
    if ids.is_empty() {
        anyhow::bail!(
            "no run has the label {:?} (scalprof runs lists the runs and their labels)",
            args.label
        );
    }
    if let Some(n) = args.last {
        ids.drain(..ids.len().saturating_sub(n.max(1)));
    }
    let docs = ids
        .iter()
        .map(|&id| Ok(scalprof_pipeline::LoadedRun::load(&store, id)?.doc))
        .collect::<Result<Vec<_>>>()?;
    let h = scalprof_pipeline::facade::history(&args.label, &docs);
    if args.json {
        out::data(&(serde_json::to_string_pretty(&h)? + "\n"))?;
    } else {
        out!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::history_text(&h))
        );
    }
    if let Some(path) = &args.junit {
        out::file(path, scalprof_report::ci::history_junit(&h))?;
        eprintln!("scalprof: wrote {}", path.display());
    }
    if let Some(path) = &args.report {
        out::file(path, scalprof_report::history_html(&h))?;
        eprintln!("scalprof: wrote {}", path.display());
    }
    step_summary(&scalprof_report::ci::history_markdown(&h))?;
    if args.fail_on_regression && scalprof_report::ci::last_is_regression(&h) {
        let c = h
            .change_points
            .last()
            .expect("a regression is a change point");
        eprintln!(
            "scalprof: regression: {} fell {:.1}% at run {}{}",
            c.metric,
            -c.change * 100.0,
            c.run,
            c.commit.as_deref().map_or(String::new(), |s| format!(
                " (commit {})",
                scalprof_report::terminal_line(s)
            ))
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Appends `markdown` to the file GitHub Actions names in $GITHUB_STEP_SUMMARY, when it is
/// set: the job's summary page shows it.
pub fn step_summary(markdown: &str) -> Result<()> {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let path = PathBuf::from(path);
    let mut text = markdown.to_string();
    text.push('\n');
    scalprof_pipeline::facade::append_user_file(&path, text.as_bytes()).map_err(|source| {
        out::WriteError {
            target: path.display().to_string(),
            source,
        }
    })?;
    Ok(())
}
