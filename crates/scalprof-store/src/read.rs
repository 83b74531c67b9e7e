//! Reading runs back: by id, label or `latest~N`, the list, and a whole run with its
//! profiles and lock tables.

use std::collections::HashSet;

use scalprof_model::locks::LockProfile;
use scalprof_model::{
    FoldedStack, PointProfile, PointRepeat, Repeat, RunHeader, RunStatus, Sweep, SweepParameter,
    ThroughputSource,
};

use crate::db::Row;
use crate::{parse, RunSummary, Store, StoreError, StoredRun};

impl Store {
    /// Every stored lock table of a run, one per repeat, as (point value, repeat index,
    /// table).
    pub fn load_locks(&self, id: i64) -> Result<Vec<(u64, u32, LockProfile)>, StoreError> {
        let rows = self.db.query(
            "SELECT value, idx, profile FROM locks WHERE run_id = ?1 ORDER BY value, idx",
            &[id.into()],
        )?;
        let mut out = Vec::new();
        for r in rows {
            let text = r.text(2)?;
            out.push((r.i64(0)? as u64, r.u32(1)?, parse(id, "lock table", &text)?));
        }
        Ok(out)
    }

    /// Every stored profile of a run, one per repeat, as (point value, repeat index,
    /// profile).
    pub fn load_profiles(&self, id: i64) -> Result<Vec<(u64, u32, PointProfile)>, StoreError> {
        let rows = self.db.query(
            "SELECT value, event, frequency, stats, serial, folded, hot, idx FROM profiles
             WHERE run_id = ?1 ORDER BY value, idx",
            &[id.into()],
        )?;
        let mut out = Vec::new();
        for r in rows {
            let folded = r
                .text(5)?
                .lines()
                .filter_map(|l| {
                    let mut it = l.splitn(3, ' ');
                    Some(FoldedStack {
                        samples: it.next()?.parse().ok()?,
                        weight: it.next()?.parse().ok()?,
                        stack: it.next()?.to_string(),
                    })
                })
                .collect();
            out.push((
                r.i64(0)? as u64,
                r.u32(7)?,
                PointProfile {
                    event: r.text(1)?,
                    frequency: r.i64(2)? as u64,
                    stats: parse(id, "profile stats", &r.text(3)?)?,
                    serial: parse(id, "profile serial", &r.text(4)?)?,
                    repeats: 1,
                    hot: parse(id, "profile hot instructions", &r.text(6)?)?,
                    folded,
                },
            ));
        }
        Ok(out)
    }

    /// Resolves `latest`, `latest~N`, a numeric id, a label (its newest run) or `LABEL~N`
    /// (its Nth-last: `LABEL~0` is the newest).
    pub fn resolve(&self, reference: &str) -> Result<i64, StoreError> {
        let not_found = || StoreError::NoSuchRun {
            reference: reference.to_string(),
            path: self.path.clone(),
        };
        let first_id = |sql: &str, param: crate::db::Param| -> Result<Option<i64>, StoreError> {
            self.db
                .query_opt(sql, &[param])?
                .map(|r| r.i64(0))
                .transpose()
        };
        let latest = |back: i64| -> Result<i64, StoreError> {
            match first_id(
                "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                back.into(),
            )? {
                Some(id) => Ok(id),
                None if back == 0 => Err(StoreError::Empty {
                    path: self.path.clone(),
                }),
                None => Err(not_found()),
            }
        };
        if reference == "latest" {
            return latest(0);
        }
        if let Some(n) = reference.strip_prefix("latest~") {
            // A count back from the newest: `latest~-1` is no run, not the newest.
            return n
                .parse::<u32>()
                .map_err(|_| not_found())
                .and_then(|n| latest(i64::from(n)));
        }
        if let Ok(id) = reference.parse::<i64>() {
            return first_id("SELECT id FROM runs WHERE id = ?1", id.into())?.ok_or_else(not_found);
        }
        if let Some(id) = first_id(
            "SELECT id FROM runs WHERE label = ?1 ORDER BY id DESC LIMIT 1",
            reference.into(),
        )? {
            return Ok(id);
        }
        // `LABEL~N`: the Nth-last run of a label (a label that itself ends in `~N` is
        // found above first).
        let (label, back) = reference.rsplit_once('~').ok_or_else(not_found)?;
        let back: u32 = back.parse().map_err(|_| not_found())?;
        self.db
            .query_opt(
                "SELECT id FROM runs WHERE label = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2",
                &[label.into(), i64::from(back).into()],
            )?
            .map(|r| r.i64(0))
            .transpose()?
            .ok_or_else(not_found)
    }

    /// The runs that `reference` could mean, oldest first, when it is a label (of which
    /// [`Store::resolve`] takes the newest); empty for `latest`, `latest~N` and an id,
    /// which name one run each.
    pub fn labelled(&self, reference: &str) -> Result<Vec<i64>, StoreError> {
        if reference == "latest"
            || reference.starts_with("latest~")
            || reference.parse::<i64>().is_ok()
        {
            return Ok(Vec::new());
        }
        self.db
            .query(
                "SELECT id FROM runs WHERE label = ?1 ORDER BY id",
                &[reference.into()],
            )?
            .iter()
            .map(|r| r.i64(0))
            .collect()
    }

    /// Every stored run, oldest first.
    pub fn list(&self) -> Result<Vec<RunSummary>, StoreError> {
        // On PostgreSQL the Db layer calls pg_catalog's COUNT (see `db::postgres_sql`).
        let rows = self.db.query(
            "SELECT r.id, r.label, r.command, r.created, r.status, r.recorder_pid, r.sweep_values,
                    (SELECT COUNT(DISTINCT value) FROM repeats WHERE run_id = r.id),
                    r.recorder_start
             FROM runs r ORDER BY r.id",
            &[],
        )?;
        let live = self.live()?;
        let mut out = Vec::new();
        for r in rows {
            let id = r.i64(0)?;
            // One damaged run is listed as damaged; it does not hide the others.
            let values: Vec<u64> = parse(id, "sweep_values", &r.text(6)?).unwrap_or_default();
            let command = parse(id, "command", &r.text(2)?)
                .unwrap_or_else(|e| vec![format!("(damaged: {e})")]);
            let recorder = Recorder {
                pid: r.opt_i64(5)?,
                started: r.opt_text(8)?,
            };
            out.push(RunSummary {
                id,
                label: r.text(1)?,
                command,
                created: r.text(3)?,
                status: recorder.status(id, &r.text(4)?, live.as_ref()),
                points: r.i64(7)? as u64,
                planned: values.len() as u64,
            });
        }
        Ok(out)
    }

    /// The run's header, its stored repeats (in the order they ran), and what older stores
    /// kept as findings or the sharing analysis needs.
    pub fn load(&self, id: i64) -> Result<StoredRun, StoreError> {
        let row = self.run_row(id)?;
        let live = self.live()?;
        Ok(StoredRun {
            header: row.header(id, live.as_ref())?,
            repeats: self.repeats(id)?,
            legacy_findings: parse(id, "findings", &row.findings)?,
            sharing: row
                .sharing
                .map(|text| parse(id, "sharing", &text))
                .transpose()?,
            experiments: row
                .experiments
                .map(|text| parse(id, "experiments", &text))
                .transpose()?
                .unwrap_or_default(),
        })
    }

    /// On PostgreSQL, the runs whose recorder is connected now (on any host); on SQLite
    /// `None`: a recorder is a process of this machine's (see [`effective_status`]).
    fn live(&self) -> Result<Option<HashSet<i64>>, StoreError> {
        if !self.db.is_postgres() {
            return Ok(None);
        }
        self.live_recorders().map(Some)
    }

    /// The seal its recorder put on run `id`, as stored (unchecked: whoever can write the
    /// store can write it; scalprof-pipeline's seal.rs checks it with the reader's key).
    pub fn seal(&self, id: i64) -> Result<Option<String>, StoreError> {
        let row = self
            .db
            .query_opt("SELECT seal FROM runs WHERE id = ?1", &[id.into()])?
            .ok_or_else(|| StoreError::NoSuchRun {
                reference: id.to_string(),
                path: self.path.clone(),
            })?;
        row.opt_text(0)
    }

    /// The run's row in `runs`, as stored.
    fn run_row(&self, id: i64) -> Result<RunRow, StoreError> {
        let r = self
            .db
            .query_opt(
                "SELECT label, created, command, status, parameter, sweep_values, host, scaling,
                        ops_regex, output_dir, recorder_pid, findings, sharing, recorder_start,
                        experiments, commit_sha, observer
                 FROM runs WHERE id = ?1",
                &[id.into()],
            )?
            .ok_or_else(|| StoreError::NoSuchRun {
                reference: id.to_string(),
                path: self.path.clone(),
            })?;
        Ok(RunRow {
            label: r.text(0)?,
            created: r.text(1)?,
            command: r.text(2)?,
            status: r.text(3)?,
            parameter: r.text(4)?,
            values: r.text(5)?,
            host: r.text(6)?,
            scaling: r.text(7)?,
            ops_regex: r.text(8)?,
            output_dir: r.text(9)?,
            recorder: Recorder {
                pid: r.opt_i64(10)?,
                started: r.opt_text(13)?,
            },
            findings: r.text(11)?,
            sharing: r.opt_text(12)?,
            experiments: r.opt_text(14)?,
            commit: r.opt_text(15)?,
            observer: r.opt_text(16)?,
        })
    }

    /// The run's stored repeats, in the order they ran.
    fn repeats(&self, id: i64) -> Result<Vec<PointRepeat>, StoreError> {
        let rows = self.db.query(
            "SELECT value, idx, wall_s, user_s, sys_s, ops, exit_code, signal, timed_out,
                    voluntary_csw, involuntary_csw, minor_faults, major_faults, stdout_path, stderr_path,
                    traced, counts, interference, throttling
             FROM repeats WHERE run_id = ?1 ORDER BY rowid",
            &[id.into()],
        )?;
        rows.iter()
            .map(|r| {
                let mut p = repeat_of(r)?;
                p.repeat.counts = r
                    .opt_text(16)?
                    .map(|t| parse(id, "counts", &t))
                    .transpose()?;
                p.repeat.interference = r
                    .opt_text(17)?
                    .map(|t| parse(id, "interference", &t))
                    .transpose()?;
                p.repeat.throttling = r
                    .opt_text(18)?
                    .map(|t| parse(id, "throttling", &t))
                    .transpose()?;
                Ok(p)
            })
            .collect()
    }
}

/// Who recorded a run, as stored: the process and when it started.
struct Recorder {
    pid: Option<i64>,
    started: Option<String>,
}

impl Recorder {
    /// The run's status as it stands: a `running` run whose recorder is gone was cut off.
    /// `live`: the runs whose recorder holds its PostgreSQL lock, where there is one.
    fn status(&self, id: i64, stored: &str, live: Option<&HashSet<i64>>) -> RunStatus {
        match live {
            Some(live) => match RunStatus::parse(stored).unwrap_or(RunStatus::Interrupted) {
                RunStatus::Running if !live.contains(&id) => RunStatus::Interrupted,
                s => s,
            },
            None => effective_status(stored, self.pid, self.started.as_deref()),
        }
    }
}

/// A row of `runs`, its JSON columns still text.
struct RunRow {
    label: String,
    created: String,
    command: String,
    status: String,
    parameter: String,
    values: String,
    host: String,
    scaling: String,
    ops_regex: String,
    output_dir: String,
    recorder: Recorder,
    findings: String,
    sharing: Option<String>,
    experiments: Option<String>,
    commit: Option<String>,
    observer: Option<String>,
}

impl RunRow {
    /// The run's header, its JSON columns parsed.
    fn header(&self, id: i64, live: Option<&HashSet<i64>>) -> Result<RunHeader, StoreError> {
        Ok(RunHeader {
            id: id.to_string(),
            label: self.label.clone(),
            created: self.created.clone(),
            command: parse(id, "command", &self.command)?,
            status: self.recorder.status(id, &self.status, live),
            sweep: Sweep {
                // Runs are only ever stored with `threads` or `size`.
                parameter: SweepParameter::parse(&self.parameter)
                    .unwrap_or(SweepParameter::Threads),
                values: parse(id, "sweep_values", &self.values)?,
            },
            host: parse(id, "host", &self.host)?,
            scaling: match self.scaling.as_str() {
                "strong" => Some(ThroughputSource::Strong),
                "auto" => None,
                _ => Some(ThroughputSource::Weak),
            },
            ops_regex: self.ops_regex.clone(),
            output_dir: self.output_dir.clone(),
            commit: self.commit.clone(),
            observer: self
                .observer
                .as_deref()
                .map(|text| parse(id, "observer", text))
                .transpose()?,
        })
    }
}

/// A repeat from the first 16 columns of a `repeats` row (its JSON columns left out).
fn repeat_of(r: &Row) -> Result<PointRepeat, StoreError> {
    Ok(PointRepeat {
        value: r.i64(0)? as u64,
        repeat: Repeat {
            interference: None,
            throttling: None,
            index: r.u32(1)?,
            wall_s: r.f64(2)?,
            user_s: r.f64(3)?,
            sys_s: r.f64(4)?,
            ops: r.opt_i64(5)?.map(|o| o as u64),
            exit_code: r.opt_i32(6)?,
            signal: r.opt_i32(7)?,
            timed_out: r.bool(8)?,
            voluntary_csw: r.i64(9)? as u64,
            involuntary_csw: r.i64(10)? as u64,
            minor_faults: r.i64(11)? as u64,
            major_faults: r.i64(12)? as u64,
            stdout_path: r.opt_text(13)?,
            stderr_path: r.opt_text(14)?,
            traced: r.bool(15)?,
            counts: None,
        },
    })
}

/// A run still marked `running` whose recorder is gone was cut off: report it as
/// interrupted (its finished repeats are all there). The recorder is the process at
/// `recorder_pid` only if it started when the recorder did (`recorder_start`): a dead
/// recorder's pid may be any other process's by now, any user's.
pub(crate) fn effective_status(
    status: &str,
    recorder_pid: Option<i64>,
    recorder_start: Option<&str>,
) -> RunStatus {
    let s = RunStatus::parse(status).unwrap_or(RunStatus::Interrupted);
    if s != RunStatus::Running {
        return s;
    }
    let Some(pid) = recorder_pid.filter(|&p| p > 0 && p <= i32::MAX as i64) else {
        return RunStatus::Interrupted;
    };
    let pid = pid as i32;
    let alive = match (recorder_start, process_start(pid)) {
        (Some(stored), Some(now)) => stored == now,
        // Stored before start times were (schema 8 and older), or a process we may not
        // look at (/proc mounted with hidepid): its pid is all there is to go by.
        (None, _) | (Some(_), None) => process_alive(pid),
    };
    if alive {
        RunStatus::Running
    } else {
        RunStatus::Interrupted
    }
}

fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// When process `pid` started, as "BOOT_ID TICKS": its start time in clock ticks after
/// boot (field 22 of /proc/PID/stat, proc(5)) and the boot it counts from, so that no
/// other process, in this boot or another, has the same.
pub(crate) fn process_start(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and parentheses.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_name.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(format!("{} {ticks}", boot.trim()))
}
