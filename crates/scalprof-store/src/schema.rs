//! The store's schema, one list for both backends: the migrations in order (SQLite's
//! dialect; PostgreSQL translates each), the version this build writes, and the store's
//! identity (a UUID given once, which names its workload outputs' folder).

use crate::StoreError;

/// Migrations, in order; `PRAGMA user_version` is the number applied (on PostgreSQL the
/// row of `scalprof_schema`, each statement translated by `pg::ddl`).
pub(crate) const MIGRATIONS: &[&str] = &[
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
    // 8: CPU time other processes took from each repeat (JSON, Interference).
    "ALTER TABLE repeats ADD COLUMN interference TEXT;",
    // 9: when the recorder process started ("BOOT_ID TICKS", see `read::process_start`):
    // a pid alone may name another process by the time the run is read.
    "ALTER TABLE runs ADD COLUMN recorder_start TEXT;",
    // 10: the experiments run on the run's causes (JSON, [Experiment]; `scalprof verify`).
    "ALTER TABLE runs ADD COLUMN experiments TEXT;",
    // 11: how long the CPU quota held each repeat back (JSON, Throttling).
    "ALTER TABLE repeats ADD COLUMN throttling TEXT;",
    // 12: the commit of the code measured (`run --commit`), for the history over commits.
    "ALTER TABLE runs ADD COLUMN commit_sha TEXT;",
    // 13: the recorder's seal over the command `verify` would run again (hex HMAC-SHA256,
    // scalprof-pipeline's seal.rs): a command a teammate rewrote no longer matches it.
    "ALTER TABLE runs ADD COLUMN seal TEXT;",
    // 14: the store's identity, a UUID given when the store is created or first opened for
    // writing (`ENSURE_IDENTITY_*`): a team store's workload outputs go to a folder named
    // after it, never shared with another store. And a PostgreSQL run's recorder backend
    // (`pg_backend_pid()`), whose lock alone marks the run as being recorded.
    "CREATE TABLE store_identity (
        uuid       TEXT NOT NULL
    );
    ALTER TABLE runs ADD COLUMN recorder_backend INTEGER;",
    // 15: the CPU scalprof itself took while it recorded the run (JSON, ObserverCpu;
    // `scalprof watch`).
    "ALTER TABLE runs ADD COLUMN observer TEXT;",
];

/// Gives a store its UUID (`?1`/`$1`) unless it has one: run in the migrating transaction.
pub(crate) const ENSURE_IDENTITY_SQLITE: &str =
    "INSERT INTO store_identity (uuid) SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM store_identity)";

/// [`ENSURE_IDENTITY_SQLITE`] in PostgreSQL's dialect.
pub(crate) const ENSURE_IDENTITY_PG: &str =
    "INSERT INTO store_identity (uuid) SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM store_identity)";

/// A new random UUID (version 4, RFC 9562 section 5.4), from the kernel's random source;
/// without it (no /dev/urandom), from the time and this process's id, which still differ
/// between any two stores made on one machine.
#[allow(clippy::disallowed_methods)] // opens: /dev/urandom
pub(crate) fn new_uuid() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b[..12].copy_from_slice(&now.to_le_bytes()[..12]);
        b[12..].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// `uuid` if it has a UUID's form (hex digits and dashes, 36 characters): it names a
/// folder, so nothing else (`..`, a `/`) may pass.
pub(crate) fn checked_uuid(uuid: String) -> Result<String, StoreError> {
    let ok = uuid.len() == 36
        && uuid.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    if ok {
        Ok(uuid.to_ascii_lowercase())
    } else {
        Err(StoreError::BadIdentity)
    }
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;
