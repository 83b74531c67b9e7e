//! Writing a run as it is measured: the run, each repeat as it finishes, its profile,
//! lock table and sharing sites, and the run's status.

use rusqlite::params;
use scalprof_model::layout::SharingInputs;
use scalprof_model::locks::LockProfile;
use scalprof_model::{PointProfile, Repeat, RunStatus, ThroughputSource};
use std::path::Path;

use crate::{json, NewRun, Store, StoreError};

impl Store {
    /// Creates a run in state `running`, recorded by this process.
    pub fn create_run(&self, run: &NewRun) -> Result<i64, StoreError> {
        self.conn.execute(
            "INSERT INTO runs (label, created, command, status, parameter, sweep_values, host,
                               scaling, ops_regex, output_dir, recorder_pid, recorder_start)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, '', ?9, ?10)",
            params![
                run.label,
                run.created,
                json(&run.command),
                run.sweep.parameter.as_str(),
                json(&run.sweep.values),
                json(&run.host),
                run.scaling.map_or("auto", ThroughputSource::as_str),
                run.ops_regex,
                std::process::id(),
                crate::read::process_start(std::process::id() as i32),
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn set_output_dir(&self, id: i64, dir: &Path) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET output_dir = ?2 WHERE id = ?1",
            params![id, dir.display().to_string()],
        )?;
        Ok(())
    }

    /// Commits one finished repeat (its own transaction).
    pub fn add_repeat(&self, id: i64, value: u64, r: &Repeat) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT OR REPLACE INTO repeats (run_id, value, idx, wall_s, user_s, sys_s, ops, exit_code,
                signal, timed_out, voluntary_csw, involuntary_csw, minor_faults, major_faults,
                stdout_path, stderr_path, traced, counts, interference, throttling)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                ?19, ?20)",
            params![
                id,
                value as i64,
                r.index,
                r.wall_s,
                r.user_s,
                r.sys_s,
                r.ops.map(|o| o as i64),
                r.exit_code,
                r.signal,
                r.timed_out,
                r.voluntary_csw as i64,
                r.involuntary_csw as i64,
                r.minor_faults as i64,
                r.major_faults as i64,
                r.stdout_path,
                r.stderr_path,
                r.traced,
                r.counts
                    .as_ref()
                    .map(|c| serde_json::to_string(c).expect("plain struct")),
                r.interference
                    .as_ref()
                    .map(|c| serde_json::to_string(c).expect("plain struct")),
                r.throttling
                    .as_ref()
                    .map(|c| serde_json::to_string(c).expect("plain struct")),
            ],
        )?;
        Ok(())
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
        self.conn.execute(
            "INSERT OR REPLACE INTO profiles (run_id, value, idx, event, frequency, stats, serial, folded, hot)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                id,
                value as i64,
                index,
                p.event,
                p.frequency as i64,
                json(&p.stats),
                json(&p.serial),
                folded,
                json(&p.hot)
            ],
        )?;
        Ok(())
    }

    /// Commits one repeat's lock table.
    pub fn add_locks(
        &self,
        id: i64,
        value: u64,
        index: u32,
        p: &LockProfile,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT OR REPLACE INTO locks (run_id, value, idx, profile) VALUES (?1, ?2, ?3, ?4)",
            params![id, value as i64, index, json(p)],
        )?;
        Ok(())
    }

    pub fn set_status(&self, id: i64, status: RunStatus) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET status = ?2 WHERE id = ?1",
            params![id, status.as_str()],
        )?;
        Ok(())
    }

    /// Stores the sites and layouts the sharing analysis reads (see `SharingInputs`).
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
        self.conn.execute(
            "UPDATE runs SET experiments = ?2 WHERE id = ?1",
            params![id, json(&all)],
        )?;
        Ok(())
    }

    pub fn set_sharing(&self, id: i64, sharing: &SharingInputs) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET sharing = ?2 WHERE id = ?1",
            params![id, json(sharing)],
        )?;
        Ok(())
    }
}
