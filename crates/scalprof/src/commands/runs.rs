//! `scalprof runs`: the stored runs listed, and `runs rm` to delete them.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use scalprof_model::RunStatus;
use scalprof_store::{RunSummary, Store};

use super::gc::compact;
use super::{open_store, Usage};
use crate::cli;
use crate::out;

/// `scalprof runs`: the stored runs, newest last (`--limit`: only the newest N), as a
/// table or JSON; `runs rm` deletes.
pub fn runs(db: &Option<PathBuf>, args: cli::RunsArgs) -> Result<ExitCode> {
    if let Some(cli::RunsAction::Rm(rm)) = args.action {
        return remove(db, &rm.runs);
    }
    let path = db.clone().unwrap_or_else(scalprof_store::default_path);
    super::warn_before_connecting(&path);
    let store = match Store::open_read_only(&path) {
        Err(scalprof_store::StoreError::Missing { .. }) if !args.json => {
            outln!(
                "no runs in {} yet: scalprof run -- CMD, or scalprof demo",
                path.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(scalprof_store::StoreError::Missing { .. }) => {
            out::data("[]\n")?;
            return Ok(ExitCode::SUCCESS);
        }
        other => other?,
    };
    let mut list = store.list()?;
    let stored = list.len();
    if let Some(n) = args.limit {
        list.drain(..list.len().saturating_sub(n));
    }
    if args.json {
        let rows: Vec<serde_json::Value> = list.iter().map(json_row).collect();
        out::data(&(serde_json::to_string_pretty(&rows)? + "\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<scalprof_report::RunRow> = list
        .into_iter()
        .map(|r| scalprof_report::RunRow {
            id: r.id,
            label: r.label,
            command: scalprof_report::shell_line(&r.command),
            created: r.created,
            status: r.status.as_str().to_string(),
            points: format!("{}/{}", r.points, r.planned),
        })
        .collect();
    if rows.is_empty() && stored > 0 {
        outln!(
            "{stored} runs in {}; --limit 0 lists none",
            store.path().display()
        );
    } else if rows.is_empty() {
        outln!(
            "no runs in {} yet: scalprof run -- CMD, or scalprof demo",
            store.path().display()
        );
    } else {
        outln!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::runs_table(&rows).to_string())
        );
    }
    Ok(ExitCode::SUCCESS)
}
fn json_row(r: &RunSummary) -> serde_json::Value {
    serde_json::json!({
        "id": r.id,
        "label": r.label,
        "command": r.command,
        "created": r.created,
        "status": r.status.as_str(),
        "points": r.points,
        "planned": r.planned,
    })
}
/// `scalprof runs rm RUN…`: every reference is resolved before anything is deleted, so a
/// typo deletes nothing; a run still being recorded is refused.
fn remove(db: &Option<PathBuf>, references: &[String]) -> Result<ExitCode> {
    let mut store = open_store(db)?;
    let mut ids = Vec::new();
    for reference in references {
        ids.push(store.resolve(reference)?);
    }
    // Read after resolving: a run started since is in the list, and refused if running.
    let list = store.list()?;
    for &id in &ids {
        if let Some(r) = list.iter().find(|r| r.id == id) {
            if r.status == RunStatus::Running {
                bail!(Usage(format!(
                    "run {id} ({}) is still being recorded: stop it first (Ctrl-C in its terminal), then delete it",
                    r.label
                )));
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let mut freed = 0;
    for &id in &ids {
        freed += store.delete_run(id)?;
    }
    compact(&store);
    outln!(
        "deleted {} run{} ({}): {} of workload output freed",
        ids.len(),
        if ids.len() == 1 { "" } else { "s" },
        ids.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        scalprof_report::bytes(freed)
    );
    Ok(ExitCode::SUCCESS)
}
