//! Writing a run as it is measured: the run, each repeat as it finishes, its profile,
//! lock table and sharing sites, and the run's status.

use scalprof_model::layout::SharingInputs;
use scalprof_model::locks::LockProfile;
use scalprof_model::{ObserverCpu, PointProfile, Repeat, RunStatus, ThroughputSource};
use std::path::Path;

use crate::db::Param;
use crate::{json, NewRun, Store, StoreError};

impl Store {
    /// Creates a run in state `running`, recorded by this process. Its id comes from the
    /// database: recorders writing to one store at once each get their own.
    pub fn create_run(&self, run: &NewRun) -> Result<i64, StoreError> {
        let row = self.db.query_opt(
            "INSERT INTO runs (label, created, command, status, parameter, sweep_values, host,
                               scaling, ops_regex, output_dir, recorder_pid, recorder_start,
                               commit_sha, recorder_backend)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, '', ?9, ?10, ?11, ?12)
             RETURNING id",
            &[
                run.label.as_str().into(),
                run.created.as_str().into(),
                json(&run.command).into(),
                run.sweep.parameter.as_str().into(),
                json(&run.sweep.values).into(),
                json(&run.host).into(),
                run.scaling.map_or("auto", ThroughputSource::as_str).into(),
                run.ops_regex.as_str().into(),
                std::process::id().into(),
                crate::read::process_start(std::process::id() as i32).into(),
                run.commit.clone().into(),
                self.db.backend().into(),
            ],
        )?;
        let id = row
            .ok_or(StoreError::Column {
                column: 0,
                expected: "the new run's id",
            })?
            .i64(0)?;
        if self.db.is_postgres() {
            self.hold_recorder_lock(id)?;
        }
        Ok(id)
    }

    /// Records the recorder's seal of run `id` (see [`Store::seal`]).
    pub fn set_seal(&self, id: i64, seal: &str) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE runs SET seal = ?2 WHERE id = ?1",
            &[id.into(), seal.into()],
        )?;
        Ok(())
    }

    /// Sets run `id`'s sweep values: a watched server's levels, known only as it went
    /// through them (`scalprof watch`).
    pub fn set_sweep_values(&self, id: i64, values: &[u64]) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE runs SET sweep_values = ?2 WHERE id = ?1",
            &[id.into(), json(&values).into()],
        )?;
        Ok(())
    }

    /// Records the CPU scalprof took while it recorded run `id` (a watch's, at its end).
    pub fn set_observer(&self, id: i64, cost: &ObserverCpu) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE runs SET observer = ?2 WHERE id = ?1",
            &[id.into(), json(cost).into()],
        )?;
        Ok(())
    }

    /// Records where run `id`'s workload outputs are (see [`Store::run_output_dir`]).
    pub fn set_output_dir(&self, id: i64, dir: &Path) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE runs SET output_dir = ?2 WHERE id = ?1",
            &[id.into(), dir.display().to_string().into()],
        )?;
        Ok(())
    }

    /// Commits one finished repeat (its own transaction).
    pub fn add_repeat(&self, id: i64, value: u64, r: &Repeat) -> Result<(), StoreError> {
        let json_of = |v: Option<String>| Param::Text(v);
        self.db.upsert(
            "repeats",
            &[
                "run_id",
                "value",
                "idx",
                "wall_s",
                "user_s",
                "sys_s",
                "ops",
                "exit_code",
                "signal",
                "timed_out",
                "voluntary_csw",
                "involuntary_csw",
                "minor_faults",
                "major_faults",
                "stdout_path",
                "stderr_path",
                "traced",
                "counts",
                "interference",
                "throttling",
            ],
            3,
            &[
                id.into(),
                (value as i64).into(),
                r.index.into(),
                r.wall_s.into(),
                r.user_s.into(),
                r.sys_s.into(),
                r.ops.map(|o| o as i64).into(),
                r.exit_code.into(),
                r.signal.into(),
                r.timed_out.into(),
                (r.voluntary_csw as i64).into(),
                (r.involuntary_csw as i64).into(),
                (r.minor_faults as i64).into(),
                (r.major_faults as i64).into(),
                r.stdout_path.clone().into(),
                r.stderr_path.clone().into(),
                r.traced.into(),
                json_of(r.counts.as_ref().map(json)),
                json_of(r.interference.as_ref().map(json)),
                json_of(r.throttling.as_ref().map(json)),
            ],
        )
    }

    /// Commits one repeat's profile (with its folded stacks).
    pub fn add_profile(
        &self,
        id: i64,
        value: u64,
        index: u32,
        p: &PointProfile,
    ) -> Result<(), StoreError> {
        let mut folded = String::new();
        for f in &p.folded {
            folded.push_str(&format!("{} {} {}\n", f.samples, f.weight, f.stack));
        }
        self.db.upsert(
            "profiles",
            &[
                "run_id",
                "value",
                "idx",
                "event",
                "frequency",
                "stats",
                "serial",
                "folded",
                "hot",
            ],
            3,
            &[
                id.into(),
                (value as i64).into(),
                index.into(),
                p.event.as_str().into(),
                (p.frequency as i64).into(),
                json(&p.stats).into(),
                json(&p.serial).into(),
                folded.into(),
                json(&p.hot).into(),
            ],
        )
    }

    /// Commits one repeat's lock table.
    pub fn add_locks(
        &self,
        id: i64,
        value: u64,
        index: u32,
        p: &LockProfile,
    ) -> Result<(), StoreError> {
        self.db.upsert(
            "locks",
            &["run_id", "value", "idx", "profile"],
            3,
            &[
                id.into(),
                (value as i64).into(),
                index.into(),
                json(p).into(),
            ],
        )
    }

    /// Sets the run's status; on PostgreSQL a run no longer `running` gives up its
    /// recorder's lock.
    pub fn set_status(&self, id: i64, status: RunStatus) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE runs SET status = ?2 WHERE id = ?1",
            &[id.into(), status.as_str().into()],
        )?;
        if self.db.is_postgres() && status != RunStatus::Running {
            self.release_recorder_lock(id)?;
        }
        Ok(())
    }

    /// Keeps `experiments` with the run: each replaces a stored one of the same subject and
    /// point (the same experiment run again), the others are added.
    pub fn add_experiments(
        &self,
        id: i64,
        experiments: &[scalprof_model::experiment::Experiment],
    ) -> Result<(), StoreError> {
        let mut all = self.load(id)?.experiments;
        for e in experiments {
            all.retain(|o| !(o.subject == e.subject && o.point == e.point));
            all.push(e.clone());
        }
        self.db.execute(
            "UPDATE runs SET experiments = ?2 WHERE id = ?1",
            &[id.into(), json(&all).into()],
        )?;
        Ok(())
    }

    /// Stores the sites and layouts the sharing analysis reads (see `SharingInputs`).
    pub fn set_sharing(&self, id: i64, sharing: &SharingInputs) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE runs SET sharing = ?2 WHERE id = ?1",
            &[id.into(), json(sharing).into()],
        )?;
        Ok(())
    }
}
