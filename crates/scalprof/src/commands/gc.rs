//! `scalprof gc`: keep the newest runs, delete the rest with their outputs, and compact
//! the store.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_model::RunStatus;
use scalprof_store::{RunSummary, Store};

use super::open_store;
use crate::cli;

/// `scalprof gc --keep N`: the newest N runs stay; older ones (not being recorded) and
/// outputs folders without a run go, then the store is compacted.
pub fn gc(db: &Option<PathBuf>, args: cli::GcArgs) -> Result<ExitCode> {
    let mut store = open_store(db)?;
    let list = store.list()?;
    let old = &list[..list.len().saturating_sub(args.keep)];
    let doomed: Vec<&RunSummary> = old
        .iter()
        .filter(|r| r.status != RunStatus::Running)
        .collect();
    let orphans = store.orphan_output_folders()?;
    let before = store.bytes_on_disk();
    if args.dry_run {
        let ids: Vec<String> = doomed.iter().map(|r| r.id.to_string()).collect();
        let held: u64 = doomed
            .iter()
            .map(|r| output_bytes(&store, r.id))
            .chain(orphans.iter().map(|o| scalprof_store::folder_bytes(o)))
            .sum();
        outln!(
            "would delete {} of {} runs ({}) and {} outputs folder{} without a run: {} of workload output",
            doomed.len(),
            list.len(),
            if ids.is_empty() { "none".into() } else { ids.join(", ") },
            orphans.len(),
            if orphans.len() == 1 { "" } else { "s" },
            scalprof_report::bytes(held)
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut freed = 0;
    for r in &doomed {
        freed += store.delete_run(r.id)?;
    }
    for o in &orphans {
        freed += store.remove_orphan(o)?;
    }
    compact(&store);
    let compacted = before.saturating_sub(store.bytes_on_disk());
    outln!(
        "kept the newest {} run{}, deleted {} ({} outputs folder{} without a run): {} freed ({} of workload output, {} of the store)",
        list.len() - doomed.len(),
        if list.len() - doomed.len() == 1 { "" } else { "s" },
        doomed.len(),
        orphans.len(),
        if orphans.len() == 1 { "" } else { "s" },
        scalprof_report::bytes(freed + compacted),
        scalprof_report::bytes(freed),
        scalprof_report::bytes(compacted)
    );
    let running = old.len() - doomed.len();
    if running > 0 {
        outln!(
            "({running} older run{} still being recorded, kept)",
            if running == 1 { "" } else { "s" }
        );
    }
    Ok(ExitCode::SUCCESS)
}
/// The bytes of run `id`'s outputs on this machine (0 where the store has no outputs
/// folder here yet).
fn output_bytes(store: &Store, id: i64) -> u64 {
    store.outputs_folder().map_or(0, |folder| {
        scalprof_store::folder_bytes(&folder.join(id.to_string()))
    })
}
/// Compacts the store after a deletion; a failure (VACUUM needs about the store's size
/// free, and a full disk is when people prune) is said, and the deletions stand.
pub(super) fn compact(store: &Store) {
    if let Err(e) = store.compact() {
        eprintln!(
            "scalprof: warning: the runs are deleted, but the store could not be compacted ({}): its file keeps its size until a later gc",
            scalprof_report::terminal_safe(&format!("{:#}", anyhow::Error::from(e)))
        );
    }
}
