//! Reading runs back: by id, label or `latest~N`, the list, and a whole run with its
//! profiles and lock tables.

use rusqlite::OptionalExtension;
use scalprof_model::locks::LockProfile;
use scalprof_model::{
    FoldedStack, PointProfile, PointRepeat, Repeat, RunHeader, RunStatus, Sweep, SweepParameter,
    ThroughputSource,
};

use crate::{parse, RunSummary, Store, StoreError, StoredRun};

impl Store {
    /// Every stored lock table of a run, one per repeat, as (point value, repeat index,
    /// table).
    pub fn load_locks(&self, id: i64) -> Result<Vec<(u64, u32, LockProfile)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT value, idx, profile FROM locks WHERE run_id = ?1 ORDER BY value, idx",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok((
                r.get::<_, i64>(0)? as u64,
                r.get::<_, u32>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (v, idx, text) = row?;
            out.push((v, idx, parse(id, "lock table", &text)?));
        }
        Ok(out)
    }

    /// Every stored profile of a run, one per repeat, as (point value, repeat index,
    /// profile).
    pub fn load_profiles(&self, id: i64) -> Result<Vec<(u64, u32, PointProfile)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT value, event, frequency, stats, serial, folded, hot, idx FROM profiles
             WHERE run_id = ?1 ORDER BY value, idx",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok((
                r.get::<_, i64>(0)? as u64,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)? as u64,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, u32>(7)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (value, event, frequency, stats, serial, folded, hot, idx) = row?;
            let folded = folded
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
                value,
                idx,
                PointProfile {
                    event,
                    frequency,
                    stats: parse(id, "profile stats", &stats)?,
                    serial: parse(id, "profile serial", &serial)?,
                    repeats: 1,
                    hot: parse(id, "profile hot instructions", &hot)?,
                    folded,
                },
            ));
        }
        Ok(out)
    }

    /// Resolves `latest`, `latest~N`, a numeric id or a label (its newest run).
    pub fn resolve(&self, reference: &str) -> Result<i64, StoreError> {
        let not_found = || StoreError::NoSuchRun {
            reference: reference.to_string(),
            path: self.path.clone(),
        };
        let latest = |back: i64| -> Result<i64, StoreError> {
            let id: Option<i64> = self
                .conn
                .query_row(
                    "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1",
                    [back],
                    |r| r.get(0),
                )
                .optional()?;
            match id {
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
            let found: Option<i64> = self
                .conn
                .query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()?;
            return found.ok_or_else(not_found);
        }
        self.conn
            .query_row(
                "SELECT id FROM runs WHERE label = ?1 ORDER BY id DESC LIMIT 1",
                [reference],
                |r| r.get(0),
            )
            .optional()?
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
        let mut stmt = self
            .conn
            .prepare("SELECT id FROM runs WHERE label = ?1 ORDER BY id")?;
        let ids = stmt.query_map([reference], |r| r.get(0))?;
        Ok(ids.collect::<Result<_, _>>()?)
    }

    pub fn list(&self) -> Result<Vec<RunSummary>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT r.id, r.label, r.command, r.created, r.status, r.recorder_pid, r.sweep_values,
                    (SELECT COUNT(DISTINCT value) FROM repeats WHERE run_id = r.id),
                    r.recorder_start
             FROM runs r ORDER BY r.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, Option<String>>(8)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, label, command, created, status, pid, values, points, started) = row?;
            // One damaged run is listed as damaged; it does not hide the others.
            let values: Vec<u64> = parse(id, "sweep_values", &values).unwrap_or_default();
            let command =
                parse(id, "command", &command).unwrap_or_else(|e| vec![format!("(damaged: {e})")]);
            out.push(RunSummary {
                id,
                label,
                command,
                created,
                status: effective_status(&status, pid, started.as_deref()),
                points: points as u64,
                planned: values.len() as u64,
            });
        }
        Ok(out)
    }

    /// The run's header, its stored repeats (in the order they ran), and what older stores
    /// kept as findings or the sharing analysis needs.
    pub fn load(&self, id: i64) -> Result<StoredRun, StoreError> {
        let row = self.run_row(id)?;
        Ok(StoredRun {
            header: row.header(id)?,
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

    /// The run's row in `runs`, as stored.
    fn run_row(&self, id: i64) -> Result<RunRow, StoreError> {
        self.conn
            .query_row(
                "SELECT label, created, command, status, parameter, sweep_values, host, scaling,
                        ops_regex, output_dir, recorder_pid, findings, sharing, recorder_start,
                        experiments
                 FROM runs WHERE id = ?1",
                [id],
                |r| {
                    Ok(RunRow {
                        label: r.get(0)?,
                        created: r.get(1)?,
                        command: r.get(2)?,
                        status: r.get(3)?,
                        parameter: r.get(4)?,
                        values: r.get(5)?,
                        host: r.get(6)?,
                        scaling: r.get(7)?,
                        ops_regex: r.get(8)?,
                        output_dir: r.get(9)?,
                        pid: r.get(10)?,
                        findings: r.get(11)?,
                        sharing: r.get(12)?,
                        started: r.get(13)?,
                        experiments: r.get(14)?,
                    })
                },
            )
            .optional()?
            .ok_or_else(|| StoreError::NoSuchRun {
                reference: id.to_string(),
                path: self.path.clone(),
            })
    }

    /// The run's stored repeats, in the order they ran.
    fn repeats(&self, id: i64) -> Result<Vec<PointRepeat>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT value, idx, wall_s, user_s, sys_s, ops, exit_code, signal, timed_out,
                    voluntary_csw, involuntary_csw, minor_faults, major_faults, stdout_path, stderr_path,
                    traced, counts, interference, throttling
             FROM repeats WHERE run_id = ?1 ORDER BY rowid",
        )?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    repeat_of(r)?,
                    r.get::<_, Option<String>>(16)?,
                    r.get::<_, Option<String>>(17)?,
                    r.get::<_, Option<String>>(18)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(mut p, counts, interference, throttling)| {
                p.repeat.counts = counts.map(|t| parse(id, "counts", &t)).transpose()?;
                p.repeat.interference = interference
                    .map(|t| parse(id, "interference", &t))
                    .transpose()?;
                p.repeat.throttling = throttling
                    .map(|t| parse(id, "throttling", &t))
                    .transpose()?;
                Ok(p)
            })
            .collect()
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
    pid: Option<i64>,
    findings: String,
    sharing: Option<String>,
    started: Option<String>,
    experiments: Option<String>,
}

impl RunRow {
    /// The run's header, its JSON columns parsed.
    fn header(&self, id: i64) -> Result<RunHeader, StoreError> {
        Ok(RunHeader {
            id: id.to_string(),
            label: self.label.clone(),
            created: self.created.clone(),
            command: parse(id, "command", &self.command)?,
            status: effective_status(&self.status, self.pid, self.started.as_deref()),
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
            commit: None,
        })
    }
}

/// A repeat from the first 16 columns of a `repeats` row (its JSON columns left out).
fn repeat_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<PointRepeat> {
    Ok(PointRepeat {
        value: r.get::<_, i64>(0)? as u64,
        repeat: Repeat {
            interference: None,
            throttling: None,
            index: r.get(1)?,
            wall_s: r.get(2)?,
            user_s: r.get(3)?,
            sys_s: r.get(4)?,
            ops: r.get::<_, Option<i64>>(5)?.map(|o| o as u64),
            exit_code: r.get(6)?,
            signal: r.get(7)?,
            timed_out: r.get(8)?,
            voluntary_csw: r.get::<_, i64>(9)? as u64,
            involuntary_csw: r.get::<_, i64>(10)? as u64,
            minor_faults: r.get::<_, i64>(11)? as u64,
            major_faults: r.get::<_, i64>(12)? as u64,
            stdout_path: r.get(13)?,
            stderr_path: r.get(14)?,
            traced: r.get(15)?,
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
