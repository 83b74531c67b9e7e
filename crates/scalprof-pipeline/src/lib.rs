//! scalprof as a library. One crate owns the pipeline:
//!
//! ```text
//! sweep (collect) → per repeat: symbolize, name locks → store
//!                   end of sweep: sharing sites from the binaries → store
//! store → merge each point's repeats → analyze → run document
//! ```
//!
//! - [`sweep::record`] runs a sweep and stores every repeat the moment it finishes; what
//!   happens along the way is reported to an [`Observer`] (the CLI draws a progress bar).
//!   It takes what [`check()`](check::check) made of the options (checked once, by the caller that says
//!   what they found); [`sweep::record_with`] reads as its steps: create the run, execute,
//!   record the end, the sharing sites, assemble the document once.
//! - [`load`] reads everything a run document is computed from, merging each point's
//!   profiles and lock tables once; [`document`] computes the document from it. Nothing
//!   derived is stored: every finding is recomputed on every load.
//! - [`import::import`] makes a one-point run from a perf.data file.
//!
//! - [`check()`](check::check) says whether a sweep can start, before anything runs; [`suite`] runs the
//!   OS suite as a series of sweeps; [`corpus`] builds the pathology corpus.
//!
//! The binary (`scalprof`) only parses arguments, calls these, and prints: this crate is its
//! only door to the layers below, and re-exports the few of their names it needs (as
//! ripgrep's `grep` facade does), listed under [`facade`].

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod check;
pub mod commit;
pub mod corpus;
pub mod facade;
pub mod import;
pub mod label;
mod options;
mod packages;
pub mod recording;
pub mod runtimes;
pub mod sampling;
pub mod seal;
pub mod suite;
pub mod sweep;
pub mod verify;
pub mod watch;

use std::path::{Path, PathBuf};

use anyhow::Result;
use scalprof_model::{PointProfile, RunDocument, RunInputs};
use scalprof_store::Store;

pub use check::{check, Checked, Refusal};
pub use sweep::{record, Event, Observer, RunOptions, RunOutcome};

/// Everything the run document of a stored run is computed from.
pub fn load(store: &Store, id: i64) -> Result<RunInputs> {
    let stored = store.load(id)?;
    let profiles = store.load_profiles(id)?;
    let locks = store.load_locks(id)?;
    Ok(inputs_of(stored, profiles, locks))
}

/// What a run document is computed from: a run's rows (each traced repeat's profile and
/// lock table, by value and index), each point's repeats merged.
fn inputs_of(
    stored: scalprof_store::StoredRun,
    mut profiles: Vec<(u64, u32, PointProfile)>,
    mut locks: Vec<(u64, u32, scalprof_model::locks::LockProfile)>,
) -> RunInputs {
    // Only the traced repeats the diagnosis counts: a disturbed one was measured again.
    let counted = counted_repeats(&stored.repeats);
    let counts = |v: &u64, i: &u32| counted.contains(&(*v, *i));
    profiles.retain(|(v, i, _)| counts(v, i));
    for (_, _, p) in &mut profiles {
        scalprof_model::vocabulary::set_aside_tool_frames(p);
    }
    locks.retain(|(v, i, _)| counts(v, i));
    // The baseline is the sweep's first measured point, in the sweep's order.
    let first = stored
        .header
        .sweep
        .values
        .iter()
        .copied()
        .find(|v| stored.repeats.iter().any(|r| r.value == *v));
    let per_repeat = scalprof_analyze::stability::per_repeat(first, &profiles, &locks);
    let profiles: Vec<(u64, scalprof_model::PointProfile)> =
        by_point(profiles.into_iter().map(|(v, _, p)| (v, p)).collect())
            .into_iter()
            .filter_map(|(v, list)| scalprof_analyze::profile::merge(list).map(|p| (v, p)))
            .collect();
    let locks = by_point(locks.into_iter().map(|(v, _, p)| (v, p)).collect())
        .into_iter()
        .filter_map(|(v, list)| scalprof_analyze::locks::merge(list).map(|p| (v, p)))
        .collect();
    let packages = profiles
        .last()
        .map(|(_, p)| packages::of_unnamed(p))
        .unwrap_or_default();
    RunInputs {
        header: stored.header,
        repeats: stored.repeats,
        profiles,
        locks,
        sharing: stored.sharing,
        legacy_findings: stored.legacy_findings,
        per_repeat,
        experiments: stored.experiments,
        packages,
        predict_to: None,
    }
}

/// The run document of a stored run.
pub fn document(store: &Store, id: i64) -> Result<RunDocument> {
    Ok(scalprof_analyze::assemble(&load(store, id)?))
}

/// A stored run, loaded once: its document and the inputs it was computed from (the
/// merged profiles the flame graphs and reports draw).
pub struct LoadedRun {
    pub inputs: RunInputs,
    pub doc: RunDocument,
}

impl LoadedRun {
    pub fn load(store: &Store, id: i64) -> Result<LoadedRun> {
        LoadedRun::load_predicting(store, id, None)
    }

    /// [`LoadedRun::load`], predicting the throughput up to `predict` threads (`None`:
    /// the run's CPUs × 4).
    pub fn load_predicting(store: &Store, id: i64, predict: Option<u64>) -> Result<LoadedRun> {
        let mut inputs = load(store, id)?;
        inputs.predict_to = predict;
        Ok(LoadedRun::of(inputs))
    }

    /// The run computed from `inputs` (read from a store, or as this process recorded it).
    pub fn of(inputs: RunInputs) -> LoadedRun {
        let doc = scalprof_analyze::assemble(&inputs);
        LoadedRun { inputs, doc }
    }

    /// The work (in throughput units) the profiled repeats of a point did: what a
    /// profile's weights are divided by to get costs per operation.
    pub fn work(&self, value: u64) -> f64 {
        self.doc
            .points
            .iter()
            .find(|p| p.value == value)
            .map(|p| scalprof_analyze::summary::point_work(p, self.doc.throughput.source))
            .unwrap_or(0.0)
    }

    /// A point's merged profile.
    pub fn profile(&self, value: u64) -> Option<&PointProfile> {
        self.inputs.profile(value)
    }
}

/// (point, index) of every repeat a point's diagnosis or throughput counts
/// ([`scalprof_model::stability::kept`], per point and kind).
fn counted_repeats(repeats: &[scalprof_model::PointRepeat]) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut values: Vec<u64> = repeats.iter().map(|r| r.value).collect();
    values.sort_unstable();
    values.dedup();
    for v in values {
        for traced in [false, true] {
            let of: Vec<scalprof_model::Repeat> = repeats
                .iter()
                .filter(|r| r.value == v && r.repeat.traced == traced)
                .map(|r| r.repeat.clone())
                .collect();
            out.extend(
                scalprof_model::stability::kept(&of)
                    .iter()
                    .map(|r| (v, r.index)),
            );
        }
    }
    out
}

/// Groups per-repeat items by sweep point, keeping the points' order.
fn by_point<T>(items: Vec<(u64, T)>) -> Vec<(u64, Vec<T>)> {
    let mut out: Vec<(u64, Vec<T>)> = Vec::new();
    for (v, item) in items {
        match out.iter_mut().find(|(pv, _)| *pv == v) {
            Some((_, list)) => list.push(item),
            None => out.push((v, vec![item])),
        }
    }
    out
}

/// Workload outputs live next to the store, in a folder named after it:
/// `<dir>/runs.db.d/<id>/` ([`scalprof_store::outputs_folder`]).
pub fn output_dir_for(db: &Path, id: i64) -> PathBuf {
    scalprof_store::outputs_folder(db).join(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_group_by_point_in_sweep_order() {
        let grouped = by_point(vec![(2, 'a'), (1, 'b'), (2, 'c')]);
        assert_eq!(grouped, vec![(2, vec!['a', 'c']), (1, vec!['b'])]);
    }

    #[test]
    fn outputs_live_in_a_folder_named_after_the_store() {
        assert_eq!(
            output_dir_for(Path::new("/x/runs.db"), 7),
            PathBuf::from("/x/runs.db.d/7")
        );
        assert_eq!(
            output_dir_for(Path::new("/x/other.db"), 7),
            PathBuf::from("/x/other.db.d/7")
        );
    }
}
