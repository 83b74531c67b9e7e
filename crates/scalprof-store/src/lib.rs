//! The run store: SQLite, one file, versioned schema; or, for a team, the same tables in
//! a PostgreSQL database (`--db postgres://…`, see [`pg`]).
//!
//! Every repeat is its own transaction, committed the moment the sweep reports it (SQLite
//! in WAL mode): killing scalprof loses at most the repeat in flight and never corrupts the
//! store, and `scalprof show` can read a run while it is still being measured.
//!
//! [`Store`]'s methods live by job: `open` (creating, migrating, read-only copies),
//! `write` (a run as it is measured), `read` (runs back), `remove` (space reclaimed). They
//! run their statements through `db`, which speaks to either backend.

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

mod db;
mod open;
pub mod pg;
mod read;
mod remove;
mod schema;
mod write;

pub use remove::folder_bytes;

pub use schema::SCHEMA_VERSION;

use std::path::PathBuf;

use scalprof_model::layout::SharingInputs;
use scalprof_model::{Finding, Host, PointRepeat, RunHeader, RunStatus, Sweep, ThroughputSource};

/// What an SQLite error says about the disk under the store, for the user's hint (the
/// binary asks this, not SQLite's own error codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFault {
    /// "database or disk is full".
    Full,
    /// "disk I/O error": also how SQLite reports a -shm file that cannot grow, or a write
    /// past the file-size limit.
    Io,
}

/// The disk fault an error of an error chain reports, when it is SQLite's.
pub fn disk_fault(e: &(dyn std::error::Error + 'static)) -> Option<DiskFault> {
    match e.downcast_ref::<rusqlite::Error>()?.sqlite_error_code()? {
        rusqlite::ErrorCode::DiskFull => Some(DiskFault::Full),
        rusqlite::ErrorCode::SystemIoFailure => Some(DiskFault::Io),
        _ => None,
    }
}

/// Why the store could not do what was asked, said so that the user can fix it.
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
    #[error("{path} is a symlink made by uid {owner}, not by you: refusing to write your runs or their outputs through it; pass another --db")]
    ForeignLink { path: PathBuf, owner: u32 },
    #[error("{path} belongs to uid {owner}, not to you (uid {me}): {why}. Refusing to write your runs there; pass another --db (a path of your own)")]
    Foreign {
        path: PathBuf,
        owner: u32,
        me: u32,
        why: &'static str,
    },
    #[error(
        "{path}, where the workloads' outputs go, is not a folder: remove it or pass another --db"
    )]
    OutputsNotAFolder { path: PathBuf },
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
    #[error("cannot remove {path}, the outputs of a deleted run")]
    RemoveDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("run store query failed")]
    Sql(#[from] rusqlite::Error),
    #[error("run store query failed (PostgreSQL)")]
    Postgres(#[from] postgres::Error),
    #[error("cannot connect to the run store {url} (is its PostgreSQL server up, and are the URL's user, host, port and database right?)")]
    Connect {
        /// The URL, its password hidden.
        url: String,
        #[source]
        source: postgres::Error,
    },
    #[error("refusing the team store {url}, before reading or writing a row: {found}")]
    Untrusted {
        /// The URL, its password hidden.
        url: String,
        /// What was found, and how to fix each.
        found: String,
    },
    #[error("the team store {url} has no schema to live in: none of the connection's search_path exists; create one (CREATE SCHEMA) or name one with options=-c%20search_path%3DSCHEMA in the URL")]
    NoSchema { url: String },
    #[error("cannot set up TLS for the team store {url}: {reason}")]
    Tls { url: String, reason: String },
    #[error("cannot find the password for the team store {url}: {reason}")]
    Password { url: String, reason: String },
    #[error("the team store {path} has no UUID yet, which names its outputs folder: open it once for writing (scalprof run, or runs rm) with this version")]
    NoIdentity { path: PathBuf },
    #[error("the store's identity (table store_identity) is not a UUID: someone changed it; restore it or delete its row, and a new one is made")]
    BadIdentity,
    #[error("--db {url} is not a PostgreSQL URL scalprof can use ({reason}): write postgres://USER@HOST:PORT/DATABASE")]
    BadUrl {
        /// The URL, its password hidden.
        url: String,
        reason: String,
    },
    #[error("run store column {column} is not {expected}")]
    Column {
        column: usize,
        expected: &'static str,
    },
    #[error("run {id} has a malformed {field} column")]
    Corrupt {
        id: i64,
        field: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

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
    /// The experiments run on the run's causes (`scalprof verify`).
    pub experiments: Vec<scalprof_model::experiment::Experiment>,
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
    /// The commit of the code measured, when known.
    pub commit: Option<String>,
}

/// A run store, SQLite or PostgreSQL: one API for both.
pub struct Store {
    db: db::Db,
    /// The SQLite file, or the PostgreSQL URL with its password hidden.
    path: PathBuf,
    /// The folder of the store's workload outputs on this machine (see
    /// [`Store::outputs_folder`]); `None` for a PostgreSQL store without a UUID yet.
    outputs: Option<PathBuf>,
    /// A private copy of a store and its write-ahead log that could not be read in place
    /// (see [`Store::open_read_only`]); removed when the store is dropped.
    _copy: Option<tempfile::TempDir>,
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

/// The folder of an SQLite store's workload outputs, beside it: `<dir>/runs.db.d/`. Two
/// stores in one folder number their runs alike, so the folder must belong to one store.
/// A PostgreSQL store's folder is named after its UUID: [`Store::outputs_folder`].
pub fn outputs_folder(db: &std::path::Path) -> PathBuf {
    debug_assert!(!pg::is_url(db), "a team store's folder comes from its UUID");
    let mut name = db
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "runs.db".into());
    name.push(".d");
    db.with_file_name(name)
}

/// `$XDG_DATA_HOME/scalprof/runs.db`, else `~/.local/share/scalprof/runs.db`.
pub fn default_path() -> PathBuf {
    data_dir().join("scalprof").join("runs.db")
}

/// `$XDG_DATA_HOME`, else `~/.local/share`.
fn data_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."))
}

#[cfg(test)]
pub(crate) mod test_server;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pg;
#[cfg(test)]
mod tests_pg_tls;
#[cfg(test)]
mod tests_pg_trust;
#[cfg(test)]
mod tests_shared;
