//! The run store: SQLite, one file, versioned schema.
//!
//! Every repeat is its own transaction, committed the moment the sweep reports it, in
//! WAL mode: killing scalprof loses at most the repeat in flight and never corrupts the
//! file, and `scalprof show` can read a run while it is still being measured.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use scalprof_model::layout::SharingInputs;
use scalprof_model::locks::LockProfile;
use scalprof_model::{
    Finding, FoldedStack, Host, PointProfile, PointRepeat, Repeat, RunHeader, RunStatus, Sweep,
    SweepParameter, ThroughputSource,
};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the run store {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot create the directory {path} for the run store")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the run store {path} has schema version {found}, newer than this scalprof knows ({known}); upgrade scalprof or use another --db")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("no run {reference:?} in {path} (`scalprof runs` lists them)")]
    NoSuchRun { reference: String, path: PathBuf },
    #[error("the run store {path} is empty: record a run first (scalprof run -- CMD)")]
    Empty { path: PathBuf },
    #[error("no run store at {path}: record a run first (scalprof run -- CMD), or pass --db")]
    Missing { path: PathBuf },
    #[error(
        "{path} is an SQLite database of another program (no scalprof tables): pass another --db"
    )]
    NotAStore { path: PathBuf },
    #[error("{path} is a symlink made by uid {owner}, not by you: refusing to create a store through it; pass another --db")]
    ForeignLink { path: PathBuf, owner: u32 },
    #[error("cannot read the write-ahead log of {path} (its folder is read-only or full, and a private copy failed): runs committed only to the log would be missing; copy the store with its -wal file to a writable folder and pass --db")]
    UnreadableWal {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} has an older schema and cannot be upgraded read-only: open it once where it can be written")]
    OldReadOnly { path: PathBuf },
    #[error("{path} is a directory: --db names the store's file (e.g. {path}/runs.db)")]
    IsDirectory { path: PathBuf },
    #[error("run store query failed")]
    Sql(#[from] rusqlite::Error),
    #[error("run {id} has a malformed {field} column")]
    Corrupt {
        id: i64,
        field: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// Migrations, in order; `PRAGMA user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: runs and their repeats.
    "CREATE TABLE runs (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        label         TEXT NOT NULL,
        created       TEXT NOT NULL,
        command       TEXT NOT NULL,   -- JSON array of strings
        status        TEXT NOT NULL,
        parameter     TEXT NOT NULL,
        sweep_values  TEXT NOT NULL,   -- JSON array of integers
        host          TEXT NOT NULL,   -- JSON object (scalprof_model::Host)
        scaling       TEXT NOT NULL,   -- weak | strong | auto (inferred when read)
        ops_regex     TEXT NOT NULL,
        output_dir    TEXT NOT NULL,
        recorder_pid  INTEGER,
        findings      TEXT NOT NULL DEFAULT '[]'
    );
    CREATE TABLE repeats (
        run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        value           INTEGER NOT NULL,
        idx             INTEGER NOT NULL,
        wall_s          REAL NOT NULL,
        user_s          REAL NOT NULL,
        sys_s           REAL NOT NULL,
        ops             INTEGER,
        exit_code       INTEGER,
        signal          INTEGER,
        timed_out       INTEGER NOT NULL,
        voluntary_csw   INTEGER NOT NULL,
        involuntary_csw INTEGER NOT NULL,
        minor_faults    INTEGER NOT NULL,
        major_faults    INTEGER NOT NULL,
        stdout_path     TEXT,
        stderr_path     TEXT,
        PRIMARY KEY (run_id, value, idx)
    );",
    // 2: one profile per repeat: counters as JSON, stacks in folded form.
    "CREATE TABLE profiles (
        run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        value      INTEGER NOT NULL,
        idx        INTEGER NOT NULL,
        event      TEXT NOT NULL,
        frequency  INTEGER NOT NULL,
        stats      TEXT NOT NULL,   -- JSON (scalprof_model::ProfileStats)
        serial     TEXT NOT NULL,   -- JSON (scalprof_model::SerialStats)
        folded     TEXT NOT NULL,   -- lines: samples weight stack
        PRIMARY KEY (run_id, value, idx)
    );",
    // 3: one named lock table per repeat.
    "CREATE TABLE locks (
        run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        value      INTEGER NOT NULL,
        idx        INTEGER NOT NULL,
        profile    TEXT NOT NULL,   -- JSON (scalprof_model::locks::LockProfile)
        PRIMARY KEY (run_id, value, idx)
    );",
    // 4: the hot user instructions of each profile (JSON list), for the sharing analysis.
    "ALTER TABLE profiles ADD COLUMN hot TEXT NOT NULL DEFAULT '[]';",
    // 5: clean and diagnosis (traced) repeats; older runs traced every repeat they profiled.
    "ALTER TABLE repeats ADD COLUMN traced INTEGER NOT NULL DEFAULT 0;",
    // 6: what the sharing analysis read from the binaries (JSON, SharingInputs). Findings
    // are recomputed on every load from now on; `findings` keeps older runs' results.
    "ALTER TABLE runs ADD COLUMN sharing TEXT;",
    // 7: counted events per repeat (JSON, EventCounts): CPU migrations, PMU counts.
    "ALTER TABLE repeats ADD COLUMN counts TEXT;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// A run as `scalprof runs` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub id: i64,
    pub label: String,
    pub command: Vec<String>,
    pub created: String,
    pub status: RunStatus,
    /// Distinct sweep points with at least one stored repeat.
    pub points: u64,
    /// Points the sweep planned.
    pub planned: u64,
}

/// A run as stored, before its profiles and lock tables are loaded.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRun {
    pub header: RunHeader,
    pub repeats: Vec<PointRepeat>,
    /// Findings stored by scalprof before schema 6 (see `RunInputs::legacy_findings`).
    pub legacy_findings: Vec<Finding>,
    pub sharing: Option<SharingInputs>,
}

/// What a new run starts with.
#[derive(Clone, Debug)]
pub struct NewRun {
    pub label: String,
    pub created: String,
    pub command: Vec<String>,
    pub sweep: Sweep,
    pub host: Host,
    /// `None`: infer weak or strong scaling when the run is analyzed.
    pub scaling: Option<ThroughputSource>,
    pub ops_regex: String,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// A private copy of a store and its write-ahead log that could not be read in place
    /// (see [`Store::open_read_only`]); removed when the store is dropped.
    _copy: Option<tempfile::TempDir>,
}

impl Store {
    /// Opens (creating if needed) the store at `path` and applies pending migrations.
    /// A new store and its folder are the owner's only (0600/0700): profiles reveal
    /// command lines, paths and symbols.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if path.is_dir() {
            return Err(StoreError::IsDirectory {
                path: path.to_path_buf(),
            });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| StoreError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        if !path.exists() {
            // An empty file is a new SQLite database; its journal files take its mode. A
            // dangling symlink (`ln -s target.db link.db`) is followed to create its target
            // owner-only too, unless another user made the link.
            if let Ok(link) = std::fs::symlink_metadata(path) {
                use std::os::unix::fs::MetadataExt;
                // SAFETY: geteuid has no preconditions.
                let me = unsafe { libc::geteuid() };
                if link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
                    return Err(StoreError::ForeignLink {
                        path: path.to_path_buf(),
                        owner: link.uid(),
                    });
                }
            }
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path);
        }
        let conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        // Switching a new store to WAL takes an exclusive lock without calling the busy
        // handler: when another scalprof is creating the same store, wait for it here.
        let start = std::time::Instant::now();
        loop {
            match conn.pragma_update(None, "journal_mode", "WAL") {
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && start.elapsed() < std::time::Duration::from_secs(5) =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => break r.map_err(open_err)?,
            }
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
            _copy: None,
        };
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing store for reading only: `runs`, `show`, `report`, `compare` and
    /// `flame` work on a full disk and for a user who may read the store but not write its
    /// folder. A store at an older schema is migrated first if it can be written.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        if path.is_dir() {
            return Err(StoreError::IsDirectory {
                path: path.to_path_buf(),
            });
        }
        // A zero-byte file is what `run` starts a new store from: a store with no runs yet.
        if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
            return Err(StoreError::Empty {
                path: path.to_path_buf(),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        let (conn, version) = match user_version(&conn) {
            Ok(v) => (conn, v),
            // A WAL store whose folder we may not write: SQLite cannot create the shared
            // memory file it reads through. Read the file as it is (nothing else can be
            // writing to it without write access to that folder either). Likewise on a full
            // disk, where the shared memory file cannot grow.
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(
                        rusqlite::ErrorCode::ReadOnly
                            | rusqlite::ErrorCode::CannotOpen
                            | rusqlite::ErrorCode::SystemIoFailure
                            | rusqlite::ErrorCode::DiskFull
                    )
                ) =>
            {
                drop(conn);
                if wal_has_data(path) {
                    // Runs committed only to the write-ahead log (a killed recorder's) are
                    // not in the main file: read a private copy of both instead.
                    return Store::open_copy(path);
                }
                let uri = format!("file:{}?immutable=1", uri_path(path));
                let conn = Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
                    .map_err(open_err)?;
                let v = user_version(&conn).map_err(open_err)?;
                (conn, v)
            }
            Err(e) => return Err(open_err(e)),
        };
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if version == 0 && !has_table(&conn, "runs")? {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
            });
        }
        if version < SCHEMA_VERSION {
            drop(conn);
            return Store::open(path);
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            _copy: None,
        })
    }

    /// Opens a private copy of the store and its write-ahead log, where SQLite may create
    /// the shared-memory file it needs to read the log; what cannot be copied is an error
    /// that says so, never a store shown without its newest runs.
    fn open_copy(path: &Path) -> Result<Store, StoreError> {
        let wal_err = |source: std::io::Error| StoreError::UnreadableWal {
            path: path.to_path_buf(),
            source,
        };
        let dir = tempfile::Builder::new()
            .prefix("scalprof-store-")
            .tempdir()
            .map_err(wal_err)?;
        let copy = dir.path().join("runs.db");
        std::fs::copy(path, &copy).map_err(wal_err)?;
        std::fs::copy(wal_path(path), wal_path(&copy)).map_err(wal_err)?;
        let conn = Connection::open(&copy).map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let version = user_version(&conn)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        if version < SCHEMA_VERSION {
            return Err(StoreError::OldReadOnly {
                path: path.to_path_buf(),
            });
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            _copy: Some(dir),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Applies pending migrations in one write transaction, reading the version inside
    /// it: two scalprofs creating or upgrading one store at once take turns, and the second
    /// finds the work done.
    fn migrate(&mut self) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: current,
                known: SCHEMA_VERSION,
            });
        }
        if current == 0 {
            // A database that is not empty and not ours: do not add tables to it.
            let tables: i64 = tx.query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )?;
            if tables > 0 && !has_table(&tx, "runs")? {
                return Err(StoreError::NotAStore {
                    path: self.path.clone(),
                });
            }
        }
        if current == SCHEMA_VERSION {
            return Ok(());
        }
        for sql in MIGRATIONS.iter().skip(current as usize) {
            tx.execute_batch(sql)?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        tx.commit()?;
        Ok(())
    }

    /// Creates a run in state `running`, recorded by this process.
    pub fn create_run(&self, run: &NewRun) -> Result<i64, StoreError> {
        self.conn.execute(
            "INSERT INTO runs (label, created, command, status, parameter, sweep_values, host,
                               scaling, ops_regex, output_dir, recorder_pid)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, '', ?9)",
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
                stdout_path, stderr_path, traced, counts)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
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

    /// Every stored lock table of a run, one per repeat, as (point value, table).
    pub fn load_locks(&self, id: i64) -> Result<Vec<(u64, LockProfile)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT value, profile FROM locks WHERE run_id = ?1 ORDER BY value, idx")?;
        let rows = stmt.query_map([id], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (v, text) = row?;
            out.push((v, parse(id, "lock table", &text)?));
        }
        Ok(out)
    }

    /// Every stored profile of a run, one per repeat, as (point value, profile).
    pub fn load_profiles(&self, id: i64) -> Result<Vec<(u64, PointProfile)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT value, event, frequency, stats, serial, folded, hot FROM profiles
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
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (value, event, frequency, stats, serial, folded, hot) = row?;
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

    pub fn set_status(&self, id: i64, status: RunStatus) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET status = ?2 WHERE id = ?1",
            params![id, status.as_str()],
        )?;
        Ok(())
    }

    /// Stores the sites and layouts the sharing analysis reads (see `SharingInputs`).
    pub fn set_sharing(&self, id: i64, sharing: &SharingInputs) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET sharing = ?2 WHERE id = ?1",
            params![id, json(sharing)],
        )?;
        Ok(())
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

    pub fn list(&self) -> Result<Vec<RunSummary>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT r.id, r.label, r.command, r.created, r.status, r.recorder_pid, r.sweep_values,
                    (SELECT COUNT(DISTINCT value) FROM repeats WHERE run_id = r.id)
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
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, label, command, created, status, pid, values, points) = row?;
            // One damaged run is listed as damaged; it does not hide the others.
            let values: Vec<u64> = parse(id, "sweep_values", &values).unwrap_or_default();
            let command =
                parse(id, "command", &command).unwrap_or_else(|e| vec![format!("(damaged: {e})")]);
            out.push(RunSummary {
                id,
                label,
                command,
                created,
                status: effective_status(&status, pid),
                points: points as u64,
                planned: values.len() as u64,
            });
        }
        Ok(out)
    }

    /// The run's header, its stored repeats (in the order they ran), and what older stores
    /// kept as findings or the sharing analysis needs.
    pub fn load(&self, id: i64) -> Result<StoredRun, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT label, created, command, status, parameter, sweep_values, host, scaling,
                        ops_regex, output_dir, recorder_pid, findings, sharing
                 FROM runs WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, String>(8)?,
                        r.get::<_, String>(9)?,
                        r.get::<_, Option<i64>>(10)?,
                        r.get::<_, String>(11)?,
                        r.get::<_, Option<String>>(12)?,
                    ))
                },
            )
            .optional()?
            .ok_or_else(|| StoreError::NoSuchRun {
                reference: id.to_string(),
                path: self.path.clone(),
            })?;
        let (
            label,
            created,
            command,
            status,
            parameter,
            values,
            host,
            scaling,
            ops_regex,
            output_dir,
            pid,
            findings,
            sharing,
        ) = row;
        let header = RunHeader {
            id: id.to_string(),
            label,
            created,
            command: parse(id, "command", &command)?,
            status: effective_status(&status, pid),
            sweep: Sweep {
                // Runs are only ever stored with `threads` or `size`.
                parameter: SweepParameter::parse(&parameter).unwrap_or(SweepParameter::Threads),
                values: parse(id, "sweep_values", &values)?,
            },
            host: parse(id, "host", &host)?,
            scaling: match scaling.as_str() {
                "strong" => Some(ThroughputSource::Strong),
                "auto" => None,
                _ => Some(ThroughputSource::Weak),
            },
            ops_regex,
            output_dir,
        };
        let mut stmt = self.conn.prepare(
            "SELECT value, idx, wall_s, user_s, sys_s, ops, exit_code, signal, timed_out,
                    voluntary_csw, involuntary_csw, minor_faults, major_faults, stdout_path, stderr_path,
                    traced, counts
             FROM repeats WHERE run_id = ?1 ORDER BY rowid",
        )?;
        let repeats = stmt
            .query_map([id], |r| {
                Ok((
                    PointRepeat {
                        value: r.get::<_, i64>(0)? as u64,
                        repeat: Repeat {
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
                    },
                    r.get::<_, Option<String>>(16)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .map(|(mut p, counts)| {
                p.repeat.counts = counts.map(|t| parse(id, "counts", &t)).transpose()?;
                Ok(p)
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(StoredRun {
            header,
            repeats,
            legacy_findings: parse(id, "findings", &findings)?,
            sharing: sharing
                .map(|text| parse(id, "sharing", &text))
                .transpose()?,
        })
    }
}

fn wal_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

/// Whether the store has a write-ahead log with frames not yet in the main file.
fn wal_has_data(path: &Path) -> bool {
    std::fs::metadata(wal_path(path)).is_ok_and(|m| m.len() > 0)
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// A path as the path part of an SQLite `file:` URI (`%`, `?` and `#` escaped).
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

fn has_table(conn: &Connection, name: &str) -> Result<bool, StoreError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("plain data always serializes")
}

fn parse<T: serde::de::DeserializeOwned>(
    id: i64,
    field: &'static str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|source| StoreError::Corrupt { id, field, source })
}

/// A run still marked `running` whose recorder is gone was cut off: report it as
/// interrupted (its finished repeats are all there).
fn effective_status(status: &str, recorder_pid: Option<i64>) -> RunStatus {
    let s = RunStatus::parse(status).unwrap_or(RunStatus::Interrupted);
    if s != RunStatus::Running {
        return s;
    }
    match recorder_pid {
        Some(pid) if pid > 0 && process_alive(pid as i32) => RunStatus::Running,
        _ => RunStatus::Interrupted,
    }
}

fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// `$XDG_DATA_HOME/scalprof/runs.db`, else `~/.local/share/scalprof/runs.db`.
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("scalprof").join("runs.db")
}

#[cfg(test)]
mod tests;
