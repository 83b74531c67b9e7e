//! The team store: the same tables in a PostgreSQL database, named by `--db
//! postgres://user@host:port/db` (or `postgresql://`, or SCALPROF_DB set to such a URL).
//!
//! - **Schema.** One source of truth: the SQLite `MIGRATIONS` (schema.rs), each statement
//!   translated by `ddl` below. The version applied is the one row of `scalprof_schema(version)` (SQLite
//!   keeps it in `PRAGMA user_version`); the first writer creates the tables, in one
//!   transaction under an advisory lock, so runners starting together take turns. The
//!   tables live in the first existing schema of the connection's search_path (`public`,
//!   unless the URL says `options=-c%20search_path%3Dteam`), and the session's search_path
//!   is then pinned to that schema alone ([`guard`]).
//! - **Trust.** Before any row is read or written, tables that another role owns, or that
//!   carry triggers or rules, and a schema that another role owns or may create in, are
//!   refused ([`guard`]): they would run that role's code as ours. A team names its owner
//!   role in SCALPROF_PG_OWNER. Every built-in function is called by its full name
//!   (`pg_catalog.…`).
//! - **Ids** come from the database (an identity column, `RETURNING id`): runners on many
//!   hosts write at once and none loses a run. Each repeat commits on its own, as on SQLite.
//! - **A run being recorded** is one whose recorder's connection, the backend recorded in
//!   the run's row (`recorder_backend`, its `pg_backend_pid()`), holds the advisory lock
//!   `pg_advisory_lock(29539, run id)`: a recorder on another host is seen alive, a killed
//!   one is interrupted the moment its connection closes (a pid of the recorder's host
//!   means nothing across hosts), and a teammate who takes the same lock in another
//!   session keeps no run "being recorded".
//! - **Workload outputs** stay on the machine that ran them, in [`Store::outputs_folder`]:
//!   `$XDG_DATA_HOME/scalprof/outputs/<store uuid>/<run id>/`, the UUID made when the
//!   store was created (or first opened for writing by this version): two stores in two
//!   schemas of one database never share a folder.
//! - **SQLite-only work** has no counterpart: no read-only private copy (a reader's session
//!   is read-only instead), and `gc` runs a plain `VACUUM` (space for new rows; autovacuum
//!   does the same) rather than compacting files.
//! - **TLS** by `sslmode`, as libpq reads it ([`tls`]): `prefer` by default; only
//!   `verify-full` (or `verify-ca`) with `sslrootcert=` proves the server is the team's
//!   before the password goes to it.
//! - **Passwords** from the URL, PGPASSWORD or the password file ([`password`]); errors and
//!   listings show the URL with its password hidden ([`redact`]).
//! - **Privileges:** the owner role creates the tables (it needs CREATE on the schema);
//!   members need SELECT, INSERT, UPDATE, DELETE on runs, repeats, profiles and locks, and
//!   SELECT on scalprof_schema and store_identity (an identity column needs no grant on its
//!   sequence). Readers need SELECT. See docs/team-store.md.

pub mod guard;
pub mod password;
pub mod tls;
mod url;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use crate::db::{Db, PgConn};
use crate::schema::{MIGRATIONS, SCHEMA_VERSION};
use crate::{Store, StoreError};

pub use url::redact;

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

/// `url` split into the same URL without its password, and the password, when it has
/// one: the binary moves the password out of its command line (see
/// [`password::set_url_password`]). `None` for a URL without a password, or one that
/// cannot be read (opening it will say why).
pub fn split_password(url: &str) -> Option<(String, Vec<u8>)> {
    let parsed = url::PgUrl::parse(url).ok()?;
    let password = parsed.password.clone()?;
    Some((parsed.without_password(), password))
}

/// The client's settings and TLS connector for `url` (`shown`: the URL as printed).
pub(crate) fn connection(
    url: &str,
    shown: &str,
) -> Result<(postgres::Config, postgres_native_tls::MakeTlsConnector), StoreError> {
    let (config, mode, parsed) = settings(url, shown)?;
    let tls = tls::connector(mode, &parsed, shown)?;
    Ok((config, tls))
}

/// What to say before connecting to `url`, if anything: that its password would go to a
/// server over TCP whose certificate is not checked (`sslmode` below `verify-ca`), where
/// whoever answers on that address may ask for it in clear text and get it.
pub fn password_warning(url: &str) -> Option<String> {
    let shown = redact(url);
    let (config, mode, _) = settings(url, &shown).ok()?;
    let tcp = config
        .get_hosts()
        .iter()
        .any(|h| matches!(h, postgres::config::Host::Tcp(_)));
    (config.get_password().is_some() && tcp && !mode.verifies()).then(|| {
        format!(
            "the team store's password goes to {shown} without a check of the server's \
             certificate (sslmode={}): a program answering on that address would get it; \
             add sslmode=verify-full&sslrootcert=FILE (see docs/team-store.md)",
            mode.name()
        )
    })
}

/// The client's settings for `url` (the password found), the TLS mode, and the URL read.
fn settings<'a>(
    url: &'a str,
    shown: &str,
) -> Result<(postgres::Config, tls::SslMode, url::PgUrl<'a>), StoreError> {
    let bad = |reason: String| StoreError::BadUrl {
        url: shown.to_string(),
        reason,
    };
    let parsed = url::PgUrl::parse(url).map_err(|e| bad(e.0))?;
    let mut config: postgres::Config =
        parsed.for_client().parse().map_err(|e: postgres::Error| {
            let detail = std::error::Error::source(&e).map(|s| format!(": {s}"));
            bad(format!("{e}{}", detail.unwrap_or_default()))
        })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_PATIENCE);
    }
    if config.get_application_name().is_none() {
        config.application_name("scalprof");
    }
    let hosts = config.get_hosts();
    let sockets_only = !hosts.is_empty()
        && hosts
            .iter()
            .all(|h| matches!(h, postgres::config::Host::Unix(_)));
    let mode = if sockets_only {
        tls::SslMode::Disable
    } else {
        tls::SslMode::of(&parsed, shown)?
    };
    config.ssl_mode(mode.client());
    if let Some(p) = password::password_for(&parsed, shown, &config)? {
        config.password(p);
    }
    Ok((config, mode, parsed))
}

/// Opens the store in the database at `url`, creating or migrating its tables unless
/// `read_only` (a store with an older schema is then migrated first, as SQLite's is).
/// Tables of the role named in [`guard::OWNER_ENV`] are trusted as our own.
pub(crate) fn open(url: &str, read_only: bool) -> Result<Store, StoreError> {
    let owner = std::env::var(guard::OWNER_ENV)
        .ok()
        .filter(|v| !v.is_empty());
    open_trusting(url, read_only, owner.as_deref())
}

/// [`open`], trusting tables that `team_owner` owns.
pub(crate) fn open_trusting(
    url: &str,
    read_only: bool,
    team_owner: Option<&str>,
) -> Result<Store, StoreError> {
    let shown = redact(url);
    let (config, tls) = connection(url, &shown)?;
    let mut client = config.connect(tls).map_err(|source| StoreError::Connect {
        url: shown.clone(),
        source,
    })?;
    let path = PathBuf::from(&shown);
    let schema = guard::store_schema(&mut client, &shown)?;
    guard::check(&mut client, &schema, &shown, team_owner)?;
    guard::pin(&mut client, &schema)?;
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
        Some(v) if v == SCHEMA_VERSION && (read_only || identity(&mut client)?.is_some()) => {}
        _ => migrate(&mut client, &path)?,
    }
    let outputs =
        identity(&mut client)?.map(|uuid| crate::data_dir().join("scalprof/outputs").join(uuid));
    let backend: i32 = client
        .query_one("SELECT pg_catalog.pg_backend_pid()", &[])?
        .get(0);
    if read_only {
        client.batch_execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")?;
    }
    Ok(Store {
        db: Db::Postgres(Box::new(RefCell::new(PgConn::new(client, backend)))),
        path,
        outputs,
        _copy: None,
    })
}

/// The store's UUID (`store_identity`), `None` before it has one. A value that is not a
/// UUID is an error: it names a folder of ours.
fn identity(client: &mut postgres::Client) -> Result<Option<String>, StoreError> {
    if !has_table(client, "store_identity")? {
        return Ok(None);
    }
    let row = client.query_opt(
        "SELECT uuid FROM store_identity ORDER BY rowid LIMIT 1",
        &[],
    )?;
    row.map(|r| crate::schema::checked_uuid(r.get(0)))
        .transpose()
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
                                        WHERE schemaname = pg_catalog.current_schema()
                                          AND tablename = $1)";

fn has_table(client: &mut impl postgres::GenericClient, name: &str) -> Result<bool, StoreError> {
    Ok(client.query_one(HAS_TABLE, &[&name])?.get(0))
}

/// Applies pending migrations in one transaction, under the schema lock: runners creating
/// or upgrading one store at once take turns, and the later ones find the work done.
fn migrate(client: &mut postgres::Client, path: &Path) -> Result<(), StoreError> {
    let mut tx = client.transaction()?;
    tx.execute(
        "SELECT pg_catalog.pg_advisory_xact_lock($1, $2)",
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
    tx.execute(
        crate::schema::ENSURE_IDENTITY_PG,
        &[&crate::schema::new_uuid()],
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

impl Store {
    /// Marks this connection as run `id`'s recorder: its lock `(LOCK_SPACE, id)`, held until
    /// it is released or the connection closes. Tried, not waited for: a lock someone else
    /// holds (a teammate's session that took it first) must not stop the run; the run then
    /// reads as interrupted to others until it is complete.
    pub(crate) fn hold_recorder_lock(&self, id: i64) -> Result<(), StoreError> {
        self.db.execute(
            "SELECT pg_catalog.pg_try_advisory_lock(?1::bigint::int, ?2::bigint::int)",
            &[i64::from(LOCK_SPACE).into(), lock_key(id).into()],
        )?;
        Ok(())
    }

    /// Gives up the recorder's lock of a run no longer being recorded.
    pub(crate) fn release_recorder_lock(&self, id: i64) -> Result<(), StoreError> {
        self.db.execute(
            "SELECT pg_catalog.pg_advisory_unlock(?1::bigint::int, ?2::bigint::int)",
            &[i64::from(LOCK_SPACE).into(), lock_key(id).into()],
        )?;
        Ok(())
    }

    /// The runs being recorded now, on any host: those whose recorder's backend (as its run
    /// row names it) holds the run's lock. A lock held by any other session counts for
    /// nothing, and a run recorded before its backend was stored (schema 12 and older)
    /// is not being recorded by this version's recorders.
    pub(crate) fn live_recorders(&self) -> Result<std::collections::HashSet<i64>, StoreError> {
        let rows = self.db.query(
            "SELECT r.id FROM runs r
             WHERE r.status = 'running' AND EXISTS (
                 SELECT 1 FROM pg_catalog.pg_locks l
                 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                   AND l.classid::bigint = ?1 AND l.objid::bigint = r.id % 4294967296
                   AND l.pid = r.recorder_backend
                   AND l.database = (SELECT oid FROM pg_catalog.pg_database
                                     WHERE datname = pg_catalog.current_database()))",
            &[i64::from(LOCK_SPACE).into()],
        )?;
        rows.iter().map(|r| r.i64(0)).collect()
    }
}

/// A run id as the lock's second key, an `int4` (ids past 2^31 wrap: PostgreSQL keeps the
/// key's 32 bits as the lock's `objid`, which [`Store::live_recorders`] compares with the
/// id modulo 2^32; at worst one run looks recorded while another is).
fn lock_key(id: i64) -> i64 {
    i64::from(id as u32 as i32)
}

#[cfg(test)]
mod tests {
    use super::ddl;

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
}
