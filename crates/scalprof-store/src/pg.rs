//! The team store: the same tables in a PostgreSQL database, named by `--db
//! postgres://user@host:port/db` (or `postgresql://`, or SCALPROF_DB set to such a URL).
//!
//! - **Schema.** One source of truth: the SQLite `MIGRATIONS` (open.rs), each statement
//!   translated by `ddl` below. The version applied is the one row of `scalprof_schema(version)` (SQLite
//!   keeps it in `PRAGMA user_version`); the first writer creates the tables, in one
//!   transaction under an advisory lock, so runners starting together take turns.
//! - **Ids** come from the database (an identity column, `RETURNING id`): runners on many
//!   hosts write at once and none loses a run. Each repeat commits on its own, as on SQLite.
//! - **A run being recorded** is one whose recorder's connection holds the advisory lock
//!   `pg_advisory_lock(29539, run id)`: a recorder on another host is seen alive, a killed
//!   one is interrupted the moment its connection closes (a pid means nothing across hosts).
//! - **Workload outputs** stay on the machine that ran them, in [`crate::outputs_folder`]:
//!   `$XDG_DATA_HOME/scalprof/outputs/<host>-<port>-<database>/<run id>/`.
//! - **SQLite-only work** has no counterpart: no read-only private copy (a reader's session
//!   is read-only instead), and `gc` runs a plain `VACUUM` (space for new rows; autovacuum
//!   does the same) rather than compacting files.
//! - **No TLS** (`NoTls`): point it at a server on a network you trust, or a Unix socket
//!   (`postgres://user@%2Frun%2Fpostgresql/db`).
//! - **Privileges:** the first writer needs CREATE on the database's schema; afterwards
//!   SELECT, INSERT, UPDATE, DELETE on the four tables and `scalprof_schema` (an identity
//!   column needs no grant on its sequence). Readers need SELECT.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use crate::db::{Db, PgConn};
use crate::open::{MIGRATIONS, SCHEMA_VERSION};
use crate::{Store, StoreError};

/// The first key of the advisory locks scalprof takes ("sc" in ASCII, 29539): the schema
/// lock (second key 0) and a recorder's lock on its run (second key: the run id).
pub(crate) const LOCK_SPACE: i32 = 0x7363;

/// The second key of the lock that serializes migrations.
const SCHEMA_LOCK: i32 = 0;

/// How long a connection may take when the URL does not say (`connect_timeout=`).
const CONNECT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether `--db` names a PostgreSQL database rather than an SQLite file.
pub fn is_url(db: &Path) -> bool {
    let s = db.as_os_str().to_string_lossy();
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// The URL with its password hidden: `user:secret@` becomes `user:***@`, and a
/// `password=` parameter `password=***`. Errors and `scalprof runs` show only this.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{hosts}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

fn config(url: &str) -> Result<postgres::Config, StoreError> {
    let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| {
        let detail = std::error::Error::source(&e).map(|s| format!(": {s}"));
        StoreError::BadUrl {
            url: redact(url),
            reason: format!("{e}{}", detail.unwrap_or_default()),
        }
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_PATIENCE);
    }
    if config.get_application_name().is_none() {
        config.application_name("scalprof");
    }
    Ok(config)
}

/// Opens the store in the database at `url`, creating or migrating its tables unless
/// `read_only` (a store with an older schema is then migrated first, as SQLite's is).
pub(crate) fn open(url: &str, read_only: bool) -> Result<Store, StoreError> {
    let shown = redact(url);
    let mut client =
        config(url)?
            .connect(postgres::NoTls)
            .map_err(|source| StoreError::Connect {
                url: shown.clone(),
                source,
            })?;
    let path = PathBuf::from(&shown);
    let version = schema_version(&mut client)?;
    if read_only && version.is_none() {
        return Err(if has_table(&mut client, "runs")? {
            StoreError::NotAStore { path }
        } else {
            StoreError::Missing { path }
        });
    }
    match version {
        Some(v) if v > SCHEMA_VERSION => {
            return Err(StoreError::TooNew {
                path,
                found: v,
                known: SCHEMA_VERSION,
            })
        }
        Some(v) if v == SCHEMA_VERSION => {}
        _ => migrate(&mut client, &path)?,
    }
    if read_only {
        client.batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")?;
    }
    Ok(Store {
        db: Db::Postgres(Box::new(RefCell::new(PgConn::new(client)))),
        path,
        _copy: None,
    })
}

/// The version in `scalprof_schema`, `None` without that table.
fn schema_version(client: &mut postgres::Client) -> Result<Option<i64>, StoreError> {
    if !has_table(client, "scalprof_schema")? {
        return Ok(None);
    }
    let row = client.query_opt("SELECT version FROM scalprof_schema", &[])?;
    Ok(Some(row.map_or(0, |r| r.get(0))))
}

/// Whether table `name` is in the connection's current schema. Read from the catalog
/// table itself, not through `to_regclass`: after waiting for the schema lock a session's
/// cached lookups may still miss the tables another session just created.
const HAS_TABLE: &str = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                                        WHERE schemaname = current_schema() AND tablename = $1)";

fn has_table(client: &mut impl postgres::GenericClient, name: &str) -> Result<bool, StoreError> {
    Ok(client.query_one(HAS_TABLE, &[&name])?.get(0))
}

/// Applies pending migrations in one transaction, under the schema lock: runners creating
/// or upgrading one store at once take turns, and the later ones find the work done.
fn migrate(client: &mut postgres::Client, path: &Path) -> Result<(), StoreError> {
    let mut tx = client.transaction()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, $2)",
        &[&LOCK_SPACE, &SCHEMA_LOCK],
    )?;
    let current = match schema_version_in(&mut tx)? {
        Some(v) => v,
        None => {
            // A `runs` table without ours beside it belongs to another program.
            if has_table(&mut tx, "runs")? {
                return Err(StoreError::NotAStore {
                    path: path.to_path_buf(),
                });
            }
            tx.batch_execute(
                "CREATE TABLE scalprof_schema (version BIGINT NOT NULL);
                 INSERT INTO scalprof_schema (version) VALUES (0);",
            )?;
            0
        }
    };
    if current > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: current,
            known: SCHEMA_VERSION,
        });
    }
    for sql in MIGRATIONS.iter().skip(current as usize) {
        tx.batch_execute(&ddl(sql))?;
    }
    tx.execute(
        "UPDATE scalprof_schema SET version = $1",
        &[&SCHEMA_VERSION],
    )?;
    tx.commit()?;
    Ok(())
}

fn schema_version_in(tx: &mut postgres::Transaction<'_>) -> Result<Option<i64>, StoreError> {
    if !has_table(tx, "scalprof_schema")? {
        return Ok(None);
    }
    let row = tx.query_opt("SELECT version FROM scalprof_schema", &[])?;
    Ok(Some(row.map_or(0, |r| r.get(0))))
}

/// An SQLite migration in PostgreSQL's dialect: comments dropped; `INTEGER PRIMARY KEY
/// AUTOINCREMENT` an identity column; every `INTEGER` a `BIGINT` (SQLite's integers are
/// 64-bit); `REAL` a `DOUBLE PRECISION`; and a table without an integer key gets SQLite's
/// implicit `rowid` as an identity column, which orders rows as they were written. (A `--`
/// starts a comment anywhere: no migration has one in a string literal.)
pub(crate) fn ddl(sqlite: &str) -> String {
    let without_comments: String = sqlite
        .lines()
        .map(|l| l.split_once("--").map_or(l, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for stmt in without_comments.split(';').map(str::trim) {
        if stmt.is_empty() {
            continue;
        }
        let keyed = stmt.contains("INTEGER PRIMARY KEY AUTOINCREMENT");
        let mut s = stmt.replace(
            "INTEGER PRIMARY KEY AUTOINCREMENT",
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        );
        if s.starts_with("CREATE TABLE") && !keyed {
            if let Some(open) = s.find('(') {
                s.insert_str(
                    open + 1,
                    "\n        rowid           BIGINT GENERATED BY DEFAULT AS IDENTITY,",
                );
            }
        }
        let s = replace_word(
            &replace_word(&s, "INTEGER", "BIGINT"),
            "REAL",
            "DOUBLE PRECISION",
        );
        out.push(s);
    }
    out.join(";\n") + ";"
}

/// `text` with every whole word `from` (not part of a longer name) replaced by `to`.
fn replace_word(text: &str, from: &str, to: &str) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_name) || after.is_some_and(is_name) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

/// Where the workloads' outputs of runs stored in the database at `url` go on this
/// machine: `<data dir>/scalprof/outputs/<host>-<port>-<database>/` (the data dir is
/// `$XDG_DATA_HOME`, else `~/.local/share`). Output files stay where they were written;
/// the database holds their paths. A URL's user and password do not change the folder.
pub(crate) fn outputs_folder(url: &str) -> PathBuf {
    let name = match url.parse::<postgres::Config>() {
        Ok(c) => {
            let host = match c.get_hosts().first() {
                Some(postgres::config::Host::Tcp(h)) => h.clone(),
                Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
                None => "localhost".into(),
            };
            let port = c.get_ports().first().copied().unwrap_or(5432);
            let db = c
                .get_dbname()
                .or(c.get_user())
                .unwrap_or("postgres")
                .to_string();
            format!("{host}-{port}-{db}")
        }
        Err(_) => redact(url),
    };
    let safe: String = name
        .trim_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    crate::data_dir().join("scalprof/outputs").join(safe)
}

impl Store {
    /// Marks this connection as run `id`'s recorder (`pg_advisory_lock(LOCK_SPACE, id)`, held until it is released or the connection closes).
    pub(crate) fn hold_recorder_lock(&self, id: i64) -> Result<(), StoreError> {
        self.db.execute(
            "SELECT pg_advisory_lock(?1::bigint::int, ?2::bigint::int)",
            &[i64::from(LOCK_SPACE).into(), lock_key(id).into()],
        )?;
        Ok(())
    }

    /// Gives up the recorder's lock of a run no longer being recorded.
    pub(crate) fn release_recorder_lock(&self, id: i64) -> Result<(), StoreError> {
        self.db.execute(
            "SELECT pg_advisory_unlock(?1::bigint::int, ?2::bigint::int)",
            &[i64::from(LOCK_SPACE).into(), lock_key(id).into()],
        )?;
        Ok(())
    }

    /// The runs whose recorder's connection is open now, on any host.
    pub(crate) fn live_recorders(&self) -> Result<std::collections::HashSet<i64>, StoreError> {
        let rows = self.db.query(
            "SELECT objid::bigint FROM pg_locks
             WHERE locktype = 'advisory' AND granted AND objsubid = 2
               AND classid::bigint = ?1
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[i64::from(LOCK_SPACE).into()],
        )?;
        rows.iter().map(|r| r.i64(0)).collect()
    }
}

/// A run id as the lock's second key (an `int4`; ids past 2^31 wrap, which at worst makes
/// one run look recorded while another is).
fn lock_key(id: i64) -> i64 {
    i64::from(id as u32)
}

#[cfg(test)]
mod tests {
    use super::{ddl, outputs_folder, redact};

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            redact("postgres://ann:s3cr:et@db.lan:5433/runs"),
            "postgres://ann:***@db.lan:5433/runs"
        );
        assert_eq!(
            redact("postgresql://ann@db.lan/runs?password=s3cret&sslmode=disable"),
            "postgresql://ann@db.lan/runs?password=***&sslmode=disable"
        );
        assert_eq!(redact("postgres://db.lan/runs"), "postgres://db.lan/runs");
        assert_eq!(
            redact("postgres://a:b@c@h/d"),
            "postgres://a:***@h/d",
            "a password with an @"
        );
    }

    #[test]
    fn sqlite_ddl_becomes_postgres_ddl() {
        let pg = ddl("CREATE TABLE runs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                note TEXT NOT NULL   -- JSON; INTEGER in a comment
            );
            CREATE TABLE repeats (
                run_id INTEGER NOT NULL REFERENCES runs(id),
                wall_s REAL NOT NULL, real_count INTEGER
            );");
        assert!(
            pg.contains("id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
            "{pg}"
        );
        assert!(!pg.contains("--") && !pg.contains("INTEGER"), "{pg}");
        assert!(pg.contains("wall_s DOUBLE PRECISION NOT NULL"), "{pg}");
        assert!(pg.contains("real_count BIGINT"), "{pg}");
        assert_eq!(
            pg.matches("rowid").count(),
            1,
            "only the table without a key: {pg}"
        );
        assert_eq!(
            ddl("ALTER TABLE repeats ADD COLUMN traced INTEGER NOT NULL DEFAULT 0;"),
            "ALTER TABLE repeats ADD COLUMN traced BIGINT NOT NULL DEFAULT 0;"
        );
    }

    #[test]
    fn outputs_stay_on_this_machine_in_a_folder_per_database() {
        let a = outputs_folder("postgres://ann:secret@db.lan:5433/runs");
        assert!(
            a.ends_with("scalprof/outputs/db.lan-5433-runs"),
            "{}",
            a.display()
        );
        assert_eq!(a, outputs_folder("postgres://bob@db.lan:5433/runs"));
        assert_eq!(
            a,
            outputs_folder(&redact("postgres://ann:secret@db.lan:5433/runs"))
        );
        let socket = outputs_folder("postgres://ann@%2Frun%2Fpostgresql/runs");
        assert!(
            socket.ends_with("outputs/run_postgresql-5432-runs"),
            "{}",
            socket.display()
        );
    }
}
