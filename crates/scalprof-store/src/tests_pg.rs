//! The PostgreSQL store against a real server (see `test_server`): the same runs as on
//! SQLite, runs listed, writers on many connections at once, the schema both backends get
//! from one list of migrations, removal, and errors that hide passwords.

use std::path::Path;
use std::sync::Arc;

use super::schema::MIGRATIONS;
use super::test_server::PgServer;
use super::tests::{new_run, repeat};
use super::{pg, RunStatus, Store, StoreError, SCHEMA_VERSION};
use scalprof_model::locks::{LockKind, LockProfile, Scope};
use scalprof_model::{FoldedStack, PointProfile};

/// A new database on the shared server, or `None` when the test is skipped.
pub(super) fn database(test: &str) -> Option<(Arc<PgServer>, String)> {
    let server = PgServer::shared(test)?;
    let url = server.database(test);
    Some((server, url))
}

pub(super) fn pg_client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// One run with everything a store keeps: repeats at two points (one stored twice),
/// a profile, a lock table, sharing inputs, an experiment list and a final status.
pub(super) fn write_everything(store: &Store) -> i64 {
    let id = store.create_run(&new_run("everything")).unwrap();
    store.set_output_dir(id, Path::new("/tmp/out/1")).unwrap();
    store.add_repeat(id, 1, &repeat(0, 1.0)).unwrap();
    let mut traced = repeat(1, 1.5);
    traced.traced = true;
    traced.exit_code = Some(3);
    traced.signal = None;
    traced.ops = None;
    store.add_repeat(id, 1, &traced).unwrap();
    store.add_repeat(id, 2, &repeat(0, 0.6)).unwrap();
    // Stored again (a repeat measured anew): it replaces the first and reads back last.
    store.add_repeat(id, 1, &repeat(0, 1.1)).unwrap();
    let profile = PointProfile {
        event: "cpu-clock".into(),
        frequency: 999,
        repeats: 1,
        folded: vec![FoldedStack {
            stack: "prog;operator new(unsigned long);clear_page_erms_[k]".into(),
            samples: 3,
            weight: 3_000_000,
        }],
        ..Default::default()
    };
    store.add_profile(id, 2, 0, &profile).unwrap();
    let locks = LockProfile {
        rows: vec![scalprof_model::locks::LockRow {
            address: scalprof_model::locks::LockAddress::Traced(0x1000),
            count: 10,
            total_wait_ns: 1000,
            max_wait_ns: 300,
            ..scalprof_model::locks::LockRow::new(
                Scope::User,
                "table_lock",
                LockKind::from("mutex"),
            )
        }],
        repeats: 1,
        ..Default::default()
    };
    store.add_locks(id, 2, 0, &locks).unwrap();
    store
        .set_sharing(
            id,
            &scalprof_model::layout::SharingInputs {
                line: 64,
                sites: vec![],
                objects: vec![],
            },
        )
        .unwrap();
    store.set_status(id, RunStatus::Complete).unwrap();
    id
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_run_reads_back_the_same_from_postgres_as_from_sqlite() {
    let Some((server, url)) = database("round_trip") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lite = Store::open(&dir.path().join("runs.db")).unwrap();
    let pg = Store::open(Path::new(&url)).unwrap();
    let (a, b) = (write_everything(&lite), write_everything(&pg));
    let (from_lite, from_pg) = (lite.load(a).unwrap(), pg.load(b).unwrap());
    assert_eq!(from_pg, from_lite);
    let order: Vec<(u64, u32)> = from_pg
        .repeats
        .iter()
        .map(|r| (r.value, r.repeat.index))
        .collect();
    assert_eq!(
        order,
        [(1, 1), (2, 0), (1, 0)],
        "a repeat stored again reads last"
    );
    assert_eq!(from_pg.repeats[2].repeat, repeat(0, 1.1));
    assert_eq!(pg.load_profiles(b).unwrap(), lite.load_profiles(a).unwrap());
    assert_eq!(pg.load_locks(b).unwrap(), lite.load_locks(a).unwrap());
    assert_eq!(pg.list().unwrap(), lite.list().unwrap());
    assert_eq!(pg.path(), Path::new(&url));
    // The same database through the server's Unix socket.
    let db = url.rsplit('/').next().unwrap();
    let by_socket = Store::open_read_only(Path::new(&server.socket_url(db))).unwrap();
    assert_eq!(by_socket.load(b).unwrap(), from_pg);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn runs_are_listed_and_resolved_and_a_cut_off_recorder_reads_as_interrupted() {
    let Some((_server, url)) = database("list") else {
        return;
    };
    // A reader before any run: nothing to list yet, and nothing created.
    assert!(matches!(
        Store::open_read_only(Path::new(&url)),
        Err(StoreError::Missing { .. })
    ));
    let store = Store::open(Path::new(&url)).unwrap();
    assert!(matches!(
        store.resolve("latest"),
        Err(StoreError::Empty { .. })
    ));
    let a = store.create_run(&new_run("alpha")).unwrap();
    store.add_repeat(a, 1, &repeat(0, 1.0)).unwrap();
    store.add_repeat(a, 2, &repeat(0, 2.0)).unwrap();
    store.set_status(a, RunStatus::Complete).unwrap();
    let b = store.create_run(&new_run("beta")).unwrap();
    let a2 = store.create_run(&new_run("alpha")).unwrap();
    assert_eq!(store.resolve("alpha").unwrap(), a2);
    assert_eq!(store.resolve("latest~2").unwrap(), a);
    assert_eq!(store.labelled("alpha").unwrap(), vec![a, a2]);
    let e = store.resolve("gamma").unwrap_err().to_string();
    assert!(e.contains("gamma") && e.contains(&url), "{e}");

    // Another host's reader sees the recorder's runs as being recorded.
    let reader = Store::open_read_only(Path::new(&url)).unwrap();
    let list = reader.list().unwrap();
    let summary: Vec<(i64, &str, RunStatus, u64, u64)> = list
        .iter()
        .map(|r| (r.id, r.label.as_str(), r.status, r.points, r.planned))
        .collect();
    assert_eq!(
        summary,
        [
            (a, "alpha", RunStatus::Complete, 2, 2),
            (b, "beta", RunStatus::Running, 0, 2),
            (a2, "alpha", RunStatus::Running, 0, 2),
        ]
    );
    assert!(
        reader.create_run(&new_run("x")).is_err(),
        "read-only means read-only"
    );
    // The recorder is killed: its connection closes, its runs are cut off.
    drop(store);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let statuses: Vec<RunStatus> = reader.list().unwrap().iter().map(|r| r.status).collect();
        if statuses
            == [
                RunStatus::Complete,
                RunStatus::Interrupted,
                RunStatus::Interrupted,
            ]
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{statuses:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        reader.load(b).unwrap().header.status,
        RunStatus::Interrupted
    );
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn four_writers_on_four_hosts_at_once_lose_no_run_and_no_repeat() {
    let Some((_server, url)) = database("writers") else {
        return;
    };
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let url = url.clone();
            std::thread::spawn(move || {
                // Each opens the store itself: the first ones race to create the tables.
                let store = Store::open(Path::new(&url)).unwrap();
                let mut ids = Vec::new();
                for n in 0..5 {
                    // Each writer is another host.
                    let mut run = new_run(&format!("w{w}-{n}"));
                    run.host.cpu_model = format!("host {w}");
                    let id = store.create_run(&run).unwrap();
                    for value in [1, 2] {
                        for i in 0..3 {
                            store
                                .add_repeat(id, value, &repeat(i, 1.0 + f64::from(i)))
                                .unwrap();
                        }
                    }
                    store.set_status(id, RunStatus::Complete).unwrap();
                    ids.push(id);
                }
                ids
            })
        })
        .collect();
    let mut ids: Vec<i64> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 20, "two writers got one id");
    let store = Store::open_read_only(Path::new(&url)).unwrap();
    let list = store.list().unwrap();
    assert_eq!(list.len(), 20);
    for r in &list {
        assert_eq!((r.status, r.points), (RunStatus::Complete, 2), "{r:?}");
        let run = store.load(r.id).unwrap();
        assert_eq!(run.repeats.len(), 6, "{r:?}");
        let writer = &r.label[1..2];
        assert_eq!(run.header.host.cpu_model, format!("host {writer}"));
    }
    let mut labels: Vec<String> = list.into_iter().map(|r| r.label).collect();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), 20);
}

/// Each table's columns as (name, type, NOT NULL), in SQLite's types.
type Columns = Vec<(String, String, bool)>;

fn sqlite_schema(conn: &rusqlite::Connection) -> Vec<(String, Columns)> {
    let mut tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables.sort();
    tables
        .into_iter()
        .map(|t| {
            let columns = conn
                .prepare(&format!("PRAGMA table_info({t})"))
                .unwrap()
                .query_map([], |r| {
                    let notnull: bool = r.get(3)?;
                    let pk: i64 = r.get(5)?;
                    Ok((r.get(1)?, r.get(2)?, notnull || pk > 0))
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            (t, columns)
        })
        .collect()
}

/// The same for PostgreSQL, its types named as SQLite's, without `rowid` (SQLite's is
/// implicit) and `scalprof_schema` (SQLite's version is a pragma).
fn postgres_schema(client: &mut postgres::Client) -> Vec<(String, Columns)> {
    let tables: Vec<String> = client
        .query(
            "SELECT table_name::text FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_name <> 'scalprof_schema'
             ORDER BY table_name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    tables
        .into_iter()
        .map(|t| {
            let columns = client
                .query(
                    "SELECT column_name::text, data_type::text, is_nullable::text = 'NO'
                     FROM information_schema.columns
                     WHERE table_schema = current_schema() AND table_name = $1
                     ORDER BY ordinal_position",
                    &[&t],
                )
                .unwrap()
                .iter()
                .filter(|r| r.get::<_, String>(0) != "rowid")
                .map(|r| {
                    let ty = match r.get::<_, String>(1).as_str() {
                        "bigint" => "INTEGER",
                        "double precision" => "REAL",
                        "text" => "TEXT",
                        other => panic!("{t}: a column of type {other}"),
                    };
                    (r.get(0), ty.to_string(), r.get(2))
                })
                .collect();
            (t, columns)
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn every_migration_gives_both_backends_the_same_tables_and_columns() {
    let Some((server, url)) = database("schema") else {
        return;
    };
    let mut client = pg_client(&url);
    let lite = rusqlite::Connection::open_in_memory().unwrap();
    for (n, sql) in MIGRATIONS.iter().enumerate() {
        lite.execute_batch(sql).unwrap();
        client
            .batch_execute(&pg::ddl(sql))
            .unwrap_or_else(|e| panic!("migration {}: {e}\n{}", n + 1, pg::ddl(sql)));
        assert_eq!(
            postgres_schema(&mut client),
            sqlite_schema(&lite),
            "after migration {}",
            n + 1
        );
    }
    // A store opened in a new database records the version it created.
    let fresh_url = server.database("schema_version");
    drop(Store::open(Path::new(&fresh_url)).unwrap());
    let version: i64 = pg_client(&fresh_url)
        .query_one("SELECT version FROM scalprof_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn removing_runs_deletes_their_rows_and_this_machines_outputs() {
    let Some((_server, url)) = database("remove") else {
        return;
    };
    let mut store = Store::open(Path::new(&url)).unwrap();
    let a = write_everything(&store);
    let b = write_everything(&store);
    // Outputs stay on this machine, in a folder of this database's.
    let out = store.run_output_dir(a).unwrap();
    let folder = store.outputs_folder().unwrap();
    assert_eq!(out, folder.join(a.to_string()));
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("stdout"), "ops=1\n").unwrap();
    // An outputs folder whose run is gone (its recorder killed before the row was written).
    let orphan = folder.join("999");
    std::fs::create_dir(&orphan).unwrap();
    let result = (|| {
        assert_eq!(store.orphan_output_folders()?, vec![orphan.clone()]);
        assert!(store.bytes_on_disk() > 0);
        assert_eq!(store.delete_run(a)?, 6);
        assert!(!out.exists());
        assert_eq!(store.remove_orphan(&orphan)?, 0);
        store.compact()?;
        Ok::<_, StoreError>(())
    })();
    let _ = std::fs::remove_dir_all(&folder);
    result.unwrap();
    assert!(matches!(
        store.delete_run(a),
        Err(StoreError::NoSuchRun { .. })
    ));
    let left: Vec<i64> = store.list().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(left, [b]);
    let mut client = pg_client(&url);
    for table in ["repeats", "profiles", "locks"] {
        let n: i64 = client
            .query_one(
                &format!("SELECT COUNT(*) FROM {table} WHERE run_id = $1"),
                &[&a],
            )
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
    // A run from another host has no folder here: removing it frees nothing, and works.
    assert_eq!(store.delete_run(b).unwrap(), 0);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn errors_name_the_url_without_its_password() {
    // Nothing listens on port 9 (discard) of this machine.
    let url = "postgres://ann:s3cret@127.0.0.1:9/runs";
    let e = Store::open(Path::new(url)).err().expect("connected");
    let said = format!("{e}");
    assert!(matches!(e, StoreError::Connect { .. }), "{said}");
    assert!(
        said.contains("postgres://ann:***@127.0.0.1:9/runs"),
        "{said}"
    );
    let chain = format!("{:?}", anyhow_like_chain(&e));
    assert!(!chain.contains("s3cret"), "{chain}");
    let bad = "postgresql://ann:s3cret@db:notaport/runs";
    let e = Store::open_read_only(Path::new(bad)).err().expect("parsed");
    let said = e.to_string();
    assert!(matches!(e, StoreError::BadUrl { .. }), "{said}");
    assert!(
        said.contains("ann:***@db") && !said.contains("s3cret"),
        "{said}"
    );
}

/// Every message in an error's chain of sources.
pub(super) fn anyhow_like_chain(e: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        out.push(s.to_string());
        source = s.source();
    }
    out
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn another_programs_runs_table_and_newer_schemas_are_refused() {
    let Some((server, url)) = database("foreign") else {
        return;
    };
    pg_client(&url)
        .batch_execute("CREATE TABLE runs (x INT)")
        .unwrap();
    assert!(matches!(
        Store::open(Path::new(&url)),
        Err(StoreError::NotAStore { .. })
    ));
    assert!(matches!(
        Store::open_read_only(Path::new(&url)),
        Err(StoreError::NotAStore { .. })
    ));
    let newer = server.database("newer");
    drop(Store::open(Path::new(&newer)).unwrap());
    pg_client(&newer)
        .execute(
            "UPDATE scalprof_schema SET version = $1",
            &[&(SCHEMA_VERSION + 1)],
        )
        .unwrap();
    match Store::open(Path::new(&newer)) {
        Err(StoreError::TooNew { found, .. }) => assert_eq!(found, SCHEMA_VERSION + 1),
        other => panic!("{:?}", other.err()),
    }
}
