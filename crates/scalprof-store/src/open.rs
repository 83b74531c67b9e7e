//! Opening the store: creating it, migrating its schema in one transaction, and reading
//! a store we may not write (a private copy when it has a write-ahead log).

use rusqlite::{Connection, OptionalExtension};
use std::path::{Path, PathBuf};

use crate::db::Db;
use crate::schema::{new_uuid, ENSURE_IDENTITY_SQLITE, MIGRATIONS, SCHEMA_VERSION};
use crate::{outputs_folder, pg, Store, StoreError};

impl Store {
    /// Opens (creating if needed) the store at `path` and applies pending migrations.
    /// A new store and its folder are the owner's only (0600/0700): profiles reveal
    /// command lines, paths and symbols. A `postgres://` or `postgresql://` URL opens
    /// (and on first use creates) the store in that database instead (see [`pg`]).
    #[allow(clippy::disallowed_methods)] // opens: the store the user named, checked as theirs
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if pg::is_url(path) {
            return pg::open(&path.to_string_lossy(), false);
        }
        if path.is_dir() {
            return Err(StoreError::IsDirectory {
                path: path.to_path_buf(),
            });
        }
        refuse_what_others_made(path)?;
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
            // owner-only too (another user's link was refused above).
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path);
        }
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(OPEN_PATIENCE).map_err(open_err)?;
        // Another program's database is left as it was: refused before the switch to WAL,
        // which stays in the file. (The migration checks again, in its transaction.)
        if user_version(&conn).map_err(open_err)? == 0 && is_foreign(&conn).map_err(open_err)? {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
            });
        }
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
        migrate(&mut conn, path)?;
        // Measured data waits out a long lock rather than being lost (see WRITE_PATIENCE).
        conn.busy_timeout(WRITE_PATIENCE).map_err(open_err)?;
        Ok(Store {
            db: Db::Sqlite(conn),
            path: path.to_path_buf(),
            outputs: Some(outputs_folder(path)),
            _copy: None,
        })
    }

    /// The folder of this store's workload outputs on this machine: `<store>.d` beside an
    /// SQLite store, `<data dir>/scalprof/outputs/<store uuid>` for a PostgreSQL one (see
    /// [`crate::pg`]). An error for a PostgreSQL store opened read-only before it had a
    /// UUID (any write gives it one).
    pub fn outputs_folder(&self) -> Result<PathBuf, StoreError> {
        self.outputs.clone().ok_or_else(|| StoreError::NoIdentity {
            path: self.path.clone(),
        })
    }

    /// The folder for run `id`'s workload outputs, `<store>.d/<id>` (not yet made), after
    /// making `<store>.d` owner-only if it is missing and checking that it is a folder of
    /// ours and not a link another user made: what goes in it is written as us.
    pub fn run_output_dir(&self, id: i64) -> Result<PathBuf, StoreError> {
        use std::os::unix::fs::DirBuilderExt;
        let folder = self.outputs_folder()?;
        if let Some(parent) = folder.parent().filter(|_| self.db.is_postgres()) {
            // `<data dir>/scalprof/outputs`, which a PostgreSQL store's first run makes.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|source| StoreError::CreateDir {
                    path: parent.to_path_buf(),
                    source,
                })?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(&folder) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(StoreError::CreateDir {
                    path: folder,
                    source,
                })
            }
        }
        refuse_if_theirs(&folder, OUTPUTS_WHY)?;
        if !folder.is_dir() {
            return Err(StoreError::OutputsNotAFolder { path: folder });
        }
        Ok(folder.join(id.to_string()))
    }

    /// Opens an existing store for reading only: `runs`, `show`, `report`, `compare` and
    /// `flame` work on a full disk and for a user who may read the store but not write its
    /// folder. A store at an older schema is migrated first if it can be written. On
    /// PostgreSQL the session is read-only.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        if pg::is_url(path) {
            return pg::open(&path.to_string_lossy(), true);
        }
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        must_be_a_file(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
        conn.busy_timeout(OPEN_PATIENCE).map_err(open_err)?;
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
            // No tables at all: a store that `run` is creating this moment (the tables come
            // in one transaction), or a database nothing wrote yet.
            if !is_foreign(&conn)? {
                return Err(StoreError::Empty {
                    path: path.to_path_buf(),
                });
            }
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
            });
        }
        if version < SCHEMA_VERSION {
            drop(conn);
            return Store::open(path);
        }
        Ok(Store {
            db: Db::Sqlite(conn),
            path: path.to_path_buf(),
            outputs: Some(outputs_folder(path)),
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
            db: Db::Sqlite(conn),
            path: path.to_path_buf(),
            outputs: Some(outputs_folder(path)),
            _copy: Some(dir),
        })
    }

    /// The store's file, or its PostgreSQL URL with the password hidden.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SQLite connection of a store the tests made.
    #[cfg(test)]
    pub(crate) fn conn(&self) -> &Connection {
        match &self.db {
            Db::Sqlite(conn) => conn,
            Db::Postgres(_) => panic!("an SQLite store was expected"),
        }
    }
}

/// Applies pending migrations in one write transaction, reading the version inside it:
/// two scalprofs creating or upgrading one store at once take turns, and the second finds
/// the work done.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let current: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    if current == 0 {
        // A database that is not empty and not ours: do not add tables to it.
        if is_foreign(&tx)? {
            return Err(StoreError::NotAStore {
                path: path.to_path_buf(),
            });
        }
    }
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    for sql in MIGRATIONS.iter().skip(current as usize) {
        tx.execute_batch(sql)?;
    }
    tx.execute(ENSURE_IDENTITY_SQLITE, [new_uuid()])?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// How long opening a store waits for another scalprof creating or upgrading it.
const OPEN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a write waits for a lock another program holds: a measured repeat is not
/// dropped because an `sqlite3` session or a VACUUM of a large store held the store for
/// seconds. Long enough for either; a lock held longer than this is a session left open,
/// and the error then says the store was locked.
const WRITE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(600);

const STORE_WHY: &str = "its owner can read every run recorded there (labels, command lines, \
                         outputs' paths) and change them";
const JOURNAL_WHY: &str = "SQLite would write your runs into this journal file of the store";
pub(crate) const OUTPUTS_WHY: &str =
    "it is the store's outputs folder, and what the workloads write \
                           would go where its owner chose";

/// Refuses a path that holds no store to read: nothing there, a folder, or the empty file
/// `run` starts a new store from (a store with no runs yet).
fn must_be_a_file(path: &Path) -> Result<(), StoreError> {
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
    if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        return Err(StoreError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Refuses, before anything is created or written, a store file, journal file or outputs
/// folder at `path` that is not ours: another user who made it first (under a shared
/// folder, or a relative --db in a shared working directory) would read what we record
/// into it, or choose where the workloads' outputs go. A link of ours or root's is
/// followed to what it names, which must be ours too; a link another user made is not.
fn refuse_what_others_made(path: &Path) -> Result<(), StoreError> {
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    refuse_if_theirs(path, STORE_WHY)?;
    for file in [wal_path(path), PathBuf::from(shm), PathBuf::from(journal)] {
        refuse_if_theirs(&file, JOURNAL_WHY)?;
    }
    let outputs = outputs_folder(path);
    refuse_if_theirs(&outputs, OUTPUTS_WHY)?;
    if outputs.exists() && !outputs.is_dir() {
        return Err(StoreError::OutputsNotAFolder { path: outputs });
    }
    Ok(())
}

/// Refuses `path` when it exists and is not ours (see [`refuse_what_others_made`]).
pub(crate) fn refuse_if_theirs(path: &Path, why: &'static str) -> Result<(), StoreError> {
    use std::os::unix::fs::MetadataExt;
    let me = euid();
    let Ok(here) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if here.file_type().is_symlink() && here.uid() != me && here.uid() != 0 {
        return Err(StoreError::ForeignLink {
            path: path.to_path_buf(),
            owner: here.uid(),
        });
    }
    // What the path names (a dangling link of ours names nothing yet).
    let Ok(named) = std::fs::metadata(path) else {
        return Ok(());
    };
    if named.uid() != me {
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            owner: named.uid(),
            me,
            why,
        });
    }
    Ok(())
}

/// Whether a database at schema 0 has tables, none of them scalprof's: another program's.
/// (One with no tables at all is a store being created, or nothing yet.)
fn is_foreign(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT COUNT(*) > 0 AND COUNT(*) FILTER (WHERE name = 'runs') = 0
         FROM sqlite_master WHERE type = 'table'",
        [],
        |r| r.get(0),
    )
}

pub(crate) fn wal_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

/// Whether the store has a write-ahead log with frames not yet in the main file.
pub(crate) fn wal_has_data(path: &Path) -> bool {
    std::fs::metadata(wal_path(path)).is_ok_and(|m| m.len() > 0)
}

pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
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
