//! The run this process records, kept in memory as it is written to the store.
//!
//! A team's store holds rows that teammates may rewrite while a sweep runs: its command,
//! its points, its profiles' file paths. What `run` does once the sweep ends (the summary,
//! the sharing sites read from the binaries, `--verify`, `--json`, `--report`) therefore
//! reads this copy, never the store: a store read never becomes what the user typed.

use scalprof_model::layout::SharingInputs;
use scalprof_model::locks::LockProfile;
use scalprof_model::{
    ObserverCpu, PointProfile, PointRepeat, Repeat, RunHeader, RunInputs, RunStatus,
};
use scalprof_store::{Store, StoreError, StoredRun};

/// Writes a run to the store and keeps what it wrote: each call stores first, and keeps
/// the value only once the store took it, so the copy never holds what the store lacks.
pub struct Recorder<'a> {
    store: &'a Store,
    run: Recording,
}

/// A run as this process wrote it.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The run's number in the store.
    id: i64,
    header: RunHeader,
    repeats: Vec<PointRepeat>,
    /// Per traced repeat: (value, index, profile), as stored, in the order written.
    profiles: Vec<(u64, u32, PointProfile)>,
    locks: Vec<(u64, u32, LockProfile)>,
    sharing: Option<SharingInputs>,
}

impl<'a> Recorder<'a> {
    /// The recorder of run `id`, which the store already holds as `header`.
    pub fn new(store: &'a Store, id: i64, header: RunHeader) -> Recorder<'a> {
        Recorder {
            store,
            run: Recording {
                id,
                header,
                repeats: Vec::new(),
                profiles: Vec::new(),
                locks: Vec::new(),
                sharing: None,
            },
        }
    }

    pub fn id(&self) -> i64 {
        self.run.id()
    }

    pub fn store(&self) -> &'a Store {
        self.store
    }

    pub fn recording(&self) -> &Recording {
        &self.run
    }

    pub fn into_recording(self) -> Recording {
        self.run
    }

    /// A repeat; one of the same point and index (measured again) is replaced, as the
    /// store replaces its row.
    pub fn add_repeat(&mut self, value: u64, repeat: &Repeat) -> Result<(), StoreError> {
        self.store.add_repeat(self.id(), value, repeat)?;
        let same = |r: &PointRepeat| r.value == value && r.repeat.index == repeat.index;
        self.run.repeats.retain(|r| !same(r));
        self.run.repeats.push(PointRepeat {
            value,
            repeat: repeat.clone(),
        });
        Ok(())
    }

    pub fn add_profile(
        &mut self,
        value: u64,
        index: u32,
        profile: &PointProfile,
    ) -> Result<(), StoreError> {
        self.store.add_profile(self.id(), value, index, profile)?;
        // A stored profile is one repeat's.
        let mut kept = profile.clone();
        kept.repeats = 1;
        replace(&mut self.run.profiles, value, index, kept);
        Ok(())
    }

    pub fn add_locks(
        &mut self,
        value: u64,
        index: u32,
        table: &LockProfile,
    ) -> Result<(), StoreError> {
        self.store.add_locks(self.id(), value, index, table)?;
        replace(&mut self.run.locks, value, index, table.clone());
        Ok(())
    }

    pub fn set_status(&mut self, status: RunStatus) -> Result<(), StoreError> {
        self.store.set_status(self.id(), status)?;
        self.run.header.status = status;
        Ok(())
    }

    /// The run's sweep values, once known (a watched server's levels).
    pub fn set_sweep_values(&mut self, values: &[u64]) -> Result<(), StoreError> {
        self.store.set_sweep_values(self.id(), values)?;
        self.run.header.sweep.values = values.to_vec();
        Ok(())
    }

    /// The CPU scalprof took while it recorded the run (a watch's).
    pub fn set_observer(&mut self, cost: ObserverCpu) -> Result<(), StoreError> {
        self.store.set_observer(self.id(), &cost)?;
        self.run.header.observer = Some(cost);
        Ok(())
    }

    pub fn set_sharing(&mut self, sharing: SharingInputs) -> Result<(), StoreError> {
        self.store.set_sharing(self.id(), &sharing)?;
        self.run.sharing = Some(sharing);
        Ok(())
    }
}

fn replace<T>(list: &mut Vec<(u64, u32, T)>, value: u64, index: u32, item: T) {
    list.retain(|(v, i, _)| (*v, *i) != (value, index));
    list.push((value, index, item));
}

impl Recording {
    pub fn id(&self) -> i64 {
        self.id
    }

    pub fn header(&self) -> &RunHeader {
        &self.header
    }

    /// What the run document is computed from, exactly as [`crate::load`] would compute
    /// it from an untouched store.
    pub fn inputs(&self) -> RunInputs {
        let mut profiles = self.profiles.clone();
        profiles.sort_by_key(|(v, i, _)| (*v, *i));
        let mut locks = self.locks.clone();
        locks.sort_by_key(|(v, i, _)| (*v, *i));
        let stored = StoredRun {
            header: self.header.clone(),
            repeats: self.repeats.clone(),
            legacy_findings: Vec::new(),
            sharing: self.sharing.clone(),
            experiments: Vec::new(),
        };
        crate::inputs_of(stored, profiles, locks)
    }
}
