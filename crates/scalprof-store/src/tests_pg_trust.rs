//! The PostgreSQL store as shared ground, against a real server: what a teammate could
//! plant (triggers, rules, tables, schemas and functions of another role) refused before
//! any use, the schema a store lives in, its identity and outputs, advisory locks a
//! stranger holds, and the documented roles and grants. TLS and passwords:
//! `tests_pg_tls.rs`.

use std::path::Path;

use super::tests::new_run;
use super::tests_pg::{anyhow_like_chain, database, pg_client, write_everything};
use super::{pg, RunStatus, Store, StoreError, SCHEMA_VERSION};

/// The SQL of one statement's count.
fn count(client: &mut postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

/// Every message in an error's chain, joined.
pub(crate) fn said(e: &StoreError) -> String {
    anyhow_like_chain(e).join(": ")
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_table_with_a_before_insert_trigger_is_refused_before_any_write() {
    let Some((_server, url)) = database("trigger") else {
        return;
    };
    drop(Store::open(Path::new(&url)).unwrap());
    let mut client = pg_client(&url);
    // The review's attack: a trigger whose function runs as whoever inserts a run.
    client
        .batch_execute(
            "CREATE TABLE fired (by TEXT);
             CREATE FUNCTION pwn() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO fired VALUES (current_user); RETURN NEW; END $$;
             CREATE TRIGGER pwn BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION pwn();",
        )
        .unwrap();
    for read_only in [false, true] {
        let e = match read_only {
            false => Store::open(Path::new(&url)),
            true => Store::open_read_only(Path::new(&url)),
        }
        .err()
        .expect("a store with a trigger was opened");
        let text = said(&e);
        assert!(matches!(e, StoreError::Untrusted { .. }), "{text}");
        assert!(
            text.contains("public.runs has a trigger")
                && text.contains("BEFORE INSERT")
                && text.contains("DROP TRIGGER"),
            "{text}"
        );
    }
    assert_eq!(count(&mut client, "SELECT COUNT(*) FROM fired"), 0);
    assert_eq!(count(&mut client, "SELECT COUNT(*) FROM runs"), 0);

    // A rule is refused too; without either, the store opens again.
    client
        .batch_execute(
            "DROP TRIGGER pwn ON runs;
             CREATE RULE also AS ON INSERT TO locks DO ALSO INSERT INTO fired VALUES ('rule');",
        )
        .unwrap();
    let e = Store::open(Path::new(&url))
        .err()
        .expect("a rule was accepted");
    assert!(
        said(&e).contains("public.locks has rule also"),
        "{}",
        said(&e)
    );
    client.batch_execute("DROP RULE also ON locks").unwrap();
    let store = Store::open(Path::new(&url)).unwrap();
    store.create_run(&new_run("clean")).unwrap();
    assert_eq!(count(&mut client, "SELECT COUNT(*) FROM fired"), 0);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn tables_or_a_schema_owned_by_another_role_are_refused_unless_it_is_the_team_owner() {
    let Some((_server, url)) = database("owner") else {
        return;
    };
    let mut client = pg_client(&url);
    // Roles are the server's, shared by every test's database: a name of this test's.
    let bob = url.rsplit('/').next().unwrap().replace('_', "") + "bob";
    client
        .batch_execute(&format!(
            "CREATE ROLE {bob}; GRANT CREATE ON SCHEMA public TO {bob}"
        ))
        .unwrap();
    // bob makes the tables first, as a restored dump would.
    client.batch_execute(&format!("SET ROLE {bob}")).unwrap();
    client
        .batch_execute(
            "CREATE TABLE scalprof_schema (version BIGINT NOT NULL);
             INSERT INTO scalprof_schema VALUES (0);",
        )
        .unwrap();
    client.batch_execute("RESET ROLE").unwrap();
    let e = Store::open(Path::new(&url))
        .err()
        .expect("bob's table was trusted");
    let text = said(&e);
    assert!(matches!(e, StoreError::Untrusted { .. }), "{text}");
    assert!(
        text.contains(&format!("public.scalprof_schema belongs to role {bob}"))
            && text.contains(&format!("SCALPROF_PG_OWNER={bob}")),
        "{text}"
    );
    assert_eq!(
        count(
            &mut client,
            "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'runs'"
        ),
        0,
        "nothing was created"
    );
    // Named as the team's owner role, bob's tables are trusted: the store is made.
    let store = pg::open_trusting(&url, false, Some(&bob)).unwrap();
    store.create_run(&new_run("trusted")).unwrap();
    drop(store);

    // A schema of bob's: he could replace the tables in it at any time.
    client
        .batch_execute(&format!("CREATE SCHEMA team AUTHORIZATION {bob}"))
        .unwrap();
    let in_team = format!("{url}?options=-c%20search_path%3Dteam");
    let e = Store::open(Path::new(&in_team))
        .err()
        .expect("bob's schema was trusted");
    assert!(
        said(&e).contains(&format!("schema team belongs to role {bob}")),
        "{}",
        said(&e)
    );
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn the_store_lives_in_the_schema_the_url_names_and_its_session_searches_no_other() {
    let Some((_server, url)) = database("schema_pin") else {
        return;
    };
    let mut client = pg_client(&url);
    client.batch_execute("CREATE SCHEMA b").unwrap();
    let in_b = format!("{url}?options=-c%20search_path%3Db,public");
    let store = Store::open(Path::new(&in_b)).unwrap();
    let id = store.create_run(&new_run("in b")).unwrap();
    assert_eq!(count(&mut client, "SELECT COUNT(*) FROM b.runs"), 1);
    assert_eq!(
        count(
            &mut client,
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'runs'"
        ),
        0
    );
    let backend: Option<i64> = client
        .query_one("SELECT recorder_backend FROM b.runs WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    assert!(backend.is_some_and(|b| b > 0), "{backend:?}");
    // While the checks run, the session searches pg_catalog alone; then the store's schema
    // alone (pg_catalog is searched first without being named); public, where a teammate
    // may create functions, is gone.
    let (config, tls) = pg::connection(&in_b, "test").unwrap();
    let mut session = config.connect(tls).unwrap();
    let schema = pg::guard::store_schema(&mut session, "test").unwrap();
    assert_eq!(schema, "b");
    let schemas: Vec<String> = session
        .query_one("SELECT pg_catalog.current_schemas(true)::text[]", &[])
        .unwrap()
        .get(0);
    assert_eq!(schemas, ["pg_catalog"]);
    pg::guard::pin(&mut session, &schema).unwrap();
    let path: String = session.query_one("SHOW search_path", &[]).unwrap().get(0);
    assert_eq!(path, "b");
    let schemas: Vec<String> = session
        .query_one("SELECT current_schemas(true)::text[]", &[])
        .unwrap()
        .get(0);
    assert_eq!(schemas, ["pg_catalog", "b"]);
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn two_stores_in_two_schemas_of_one_database_keep_their_outputs_apart() {
    let Some((_server, url)) = database("two_schemas") else {
        return;
    };
    pg_client(&url).batch_execute("CREATE SCHEMA b").unwrap();
    let mut a = Store::open(Path::new(&url)).unwrap();
    let b_url = format!("{url}?options=-c%20search_path%3Db");
    let mut b = Store::open(Path::new(&b_url)).unwrap();
    let (fa, fb) = (a.outputs_folder().unwrap(), b.outputs_folder().unwrap());
    assert_ne!(fa, fb);
    assert_eq!(fa.parent(), fb.parent());
    assert!(fa.parent().unwrap().ends_with("scalprof/outputs"), "{fa:?}");
    // The same run id in each, each with its outputs.
    let (ra, rb) = (
        a.create_run(&new_run("a")).unwrap(),
        b.create_run(&new_run("b")).unwrap(),
    );
    assert_eq!(ra, rb);
    let (oa, ob) = (a.run_output_dir(ra).unwrap(), b.run_output_dir(rb).unwrap());
    assert_ne!(oa, ob);
    let result = (|| {
        for o in [&oa, &ob] {
            std::fs::create_dir(o)?;
            std::fs::write(o.join("p1-r0.stdout"), "ops=1\n")?;
        }
        // Removing b's run leaves a's outputs.
        b.delete_run(rb).unwrap();
        assert!(!ob.exists());
        assert!(oa.join("p1-r0.stdout").exists());
        assert_eq!(
            b.orphan_output_folders().unwrap(),
            Vec::<std::path::PathBuf>::new()
        );
        a.delete_run(ra).unwrap();
        Ok::<_, std::io::Error>(())
    })();
    let _ = std::fs::remove_dir_all(&fa);
    let _ = std::fs::remove_dir_all(&fb);
    result.unwrap();
    // The identity stays: the same folder when the store is opened again.
    assert_eq!(
        Store::open_read_only(Path::new(&url))
            .unwrap()
            .outputs_folder()
            .unwrap(),
        fa
    );
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_store_of_an_older_version_gets_its_uuid_when_first_opened() {
    let Some((_server, url)) = database("older") else {
        return;
    };
    let first = Store::open(Path::new(&url)).unwrap();
    let id = first.create_run(&new_run("old")).unwrap();
    first.set_status(id, RunStatus::Complete).unwrap();
    drop(first);
    // Back to schema 13, before migration 14: no identity, no recorder backends (nor
    // what later migrations added).
    assert_eq!(SCHEMA_VERSION, 15, "undo the migrations after 14 here too");
    pg_client(&url)
        .batch_execute(
            "DROP TABLE store_identity; ALTER TABLE runs DROP COLUMN recorder_backend;
             ALTER TABLE runs DROP COLUMN observer;
             UPDATE scalprof_schema SET version = 13",
        )
        .unwrap();
    let store = Store::open(Path::new(&url)).unwrap();
    let folder = store.outputs_folder().unwrap();
    let uuid = folder.file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(uuid.len(), 36, "{uuid}");
    assert_eq!(store.load(id).unwrap().header.status, RunStatus::Complete);
    drop(store);
    assert_eq!(
        Store::open(Path::new(&url))
            .unwrap()
            .outputs_folder()
            .unwrap(),
        folder
    );
    // A teammate cannot point the folder elsewhere.
    pg_client(&url)
        .batch_execute("UPDATE store_identity SET uuid = '../../../../tmp/x'")
        .unwrap();
    assert!(matches!(
        Store::open(Path::new(&url)),
        Err(StoreError::BadIdentity)
    ));
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_strangers_advisory_lock_keeps_no_run_being_recorded() {
    let Some((_server, url)) = database("stranger_lock") else {
        return;
    };
    let recorder = Store::open(Path::new(&url)).unwrap();
    let id = recorder.create_run(&new_run("cut off")).unwrap();
    let reader = Store::open_read_only(Path::new(&url)).unwrap();
    assert_eq!(reader.load(id).unwrap().header.status, RunStatus::Running);
    // A teammate's session queues for the run's lock, and gets it when the recorder dies.
    let stranger_url = url.clone();
    let (took, taken) = std::sync::mpsc::channel();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let stranger = std::thread::spawn(move || {
        let mut c = pg_client(&stranger_url);
        c.execute(
            "SELECT pg_advisory_lock($1, $2::int)",
            &[&pg::LOCK_SPACE, &(id as i32)],
        )
        .unwrap();
        took.send(()).unwrap();
        // Held until the test ends.
        let _ = stopped.recv_timeout(std::time::Duration::from_secs(60));
        drop(c);
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(recorder);
    taken
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    assert_eq!(
        reader.load(id).unwrap().header.status,
        RunStatus::Interrupted,
        "the stranger's lock kept the run being recorded"
    );
    // The stranger also takes the next run's lock first: the recorder is not held up,
    // and its run completes.
    let next = id + 1;
    let mut c = pg_client(&url);
    c.execute(
        "SELECT pg_advisory_lock($1, $2::int)",
        &[&pg::LOCK_SPACE, &(next as i32)],
    )
    .unwrap();
    let recorder = Store::open(Path::new(&url)).unwrap();
    assert_eq!(recorder.create_run(&new_run("next")).unwrap(), next);
    recorder.set_status(next, RunStatus::Complete).unwrap();
    assert_eq!(
        reader.load(next).unwrap().header.status,
        RunStatus::Complete
    );
    stop.send(()).unwrap();
    stranger.join().unwrap();
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_team_records_with_the_documented_roles_and_grants() {
    let Some((server, url)) = database("team") else {
        return;
    };
    let db = url.rsplit('/').next().unwrap().to_string();
    let (owner, ann) = (format!("{db}_owner"), format!("{db}_ann"));
    let mut admin = pg_client(&url);
    // docs/team-store.md, "Roles and grants".
    admin
        .batch_execute(&format!(
            "CREATE ROLE {owner} NOLOGIN;
             CREATE SCHEMA scalprof AUTHORIZATION {owner};
             CREATE ROLE {ann} LOGIN;
             GRANT USAGE ON SCHEMA scalprof TO {ann};"
        ))
        .unwrap();
    let as_owner = format!("{url}?options=-c%20role%3D{owner}%20-c%20search_path%3Dscalprof");
    drop(Store::open(Path::new(&as_owner)).unwrap());
    let owners: Vec<String> = admin
        .query(
            "SELECT DISTINCT tableowner::text FROM pg_tables WHERE schemaname = 'scalprof'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(owners, vec![owner.clone()]);
    admin
        .batch_execute(&format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON scalprof.runs, scalprof.repeats,
                   scalprof.profiles, scalprof.locks TO {ann};
             GRANT SELECT ON scalprof.scalprof_schema, scalprof.store_identity TO {ann};"
        ))
        .unwrap();
    let member = format!(
        "postgres://{ann}@127.0.0.1:{}/{db}?options=-c%20search_path%3Dscalprof",
        server.port()
    );
    // Without naming the owner role, its tables are not trusted.
    assert!(matches!(
        Store::open(Path::new(&member)),
        Err(StoreError::Untrusted { .. })
    ));
    let mut store = pg::open_trusting(&member, false, Some(&owner)).unwrap();
    let id = write_everything(&store);
    assert_eq!(store.list().unwrap().len(), 1);
    assert_eq!(store.load(id).unwrap().header.status, RunStatus::Complete);
    store.compact().unwrap();
    store.delete_run(id).unwrap();
    assert!(store.list().unwrap().is_empty());
}

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn a_teammates_count_in_a_schema_others_may_create_in_is_refused_and_never_run() {
    let Some((_server, url)) = database("shadow") else {
        return;
    };
    let db = url.rsplit('/').next().unwrap().to_string();
    let carol = format!("{db}_carol");
    let mut admin = pg_client(&url);
    // public as PostgreSQL 14 and older made it (and pg_upgrade keeps it): every role may
    // create in it. And a marker each of carol's functions leaves where it runs.
    admin
        .batch_execute(&format!(
            "CREATE ROLE {carol};
             GRANT CREATE ON SCHEMA public TO PUBLIC;
             GRANT CREATE ON SCHEMA public TO {carol};
             CREATE TABLE public.marker (who TEXT, what TEXT);
             GRANT INSERT ON public.marker TO PUBLIC;"
        ))
        .unwrap();
    // Where an argument's type matches exactly, carol's function beats pg_catalog's,
    // whatever the order of the search_path: `scalprof runs` ran her count, and `gc`
    // her pg_total_relation_size.
    admin.batch_execute(&format!("SET ROLE {carol}")).unwrap();
    admin
        .batch_execute(
            "CREATE FUNCTION public.mark_count(s BIGINT, v BIGINT) RETURNS BIGINT
               LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO public.marker VALUES (current_user, 'count');
                  RETURN s + 1; END $$;
             CREATE AGGREGATE public.count(BIGINT)
               (SFUNC = public.mark_count, STYPE = BIGINT, INITCOND = '0');
             CREATE FUNCTION public.pg_total_relation_size(OID) RETURNS BIGINT
               LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO public.marker VALUES (current_user, 'size');
                  RETURN 0; END $$;
             CREATE FUNCTION public.pg_advisory_xact_lock(TEXT, TEXT) RETURNS VOID
               LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO public.marker VALUES (current_user, 'lock'); END $$;
             CREATE FUNCTION public.oid_is(OID, INTEGER) RETURNS BOOLEAN LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO public.marker VALUES (current_user, 'oid ='); 
                  RETURN $1 = $2::oid; END $$;
             CREATE OPERATOR public.= (LEFTARG = OID, RIGHTARG = INTEGER,
                                       FUNCTION = public.oid_is);",
        )
        .unwrap();
    admin.batch_execute("RESET ROLE").unwrap();
    let marks = |admin: &mut postgres::Client| -> Vec<String> {
        admin
            .query("SELECT who || ' ran ' || what FROM public.marker", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };

    // Refused, for writing and for reading, naming who may create there and the fix.
    for read_only in [false, true] {
        let e = match read_only {
            false => Store::open(Path::new(&url)),
            true => Store::open_read_only(Path::new(&url)),
        }
        .err()
        .expect("a schema every role may create in was trusted");
        let text = said(&e);
        assert!(matches!(e, StoreError::Untrusted { .. }), "{text}");
        assert!(
            text.contains(&format!(
                "PUBLIC (every role) and {carol} may create in schema public"
            )) && text.contains(&format!(
                "REVOKE CREATE ON SCHEMA public FROM PUBLIC, {carol};"
            )),
            "{text}"
        );
    }
    assert_eq!(marks(&mut admin), Vec::<String>::new());
    assert_eq!(
        count(
            &mut admin,
            "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'runs'"
        ),
        0,
        "nothing was created"
    );

    // The fix the refusal names. carol's functions stay where they are: none of them is
    // run by what the command line does with the store, from its creation to gc.
    admin
        .batch_execute(&format!(
            "REVOKE CREATE ON SCHEMA public FROM PUBLIC, {carol}"
        ))
        .unwrap();
    let store = Store::open(Path::new(&url)).unwrap();
    let id = write_everything(&store);
    drop(store);
    // The checks themselves use none of carol's operators (`=(oid, integer)` is a better
    // match for an oid compared with 0 than pg_catalog's `=(oid, oid)`).
    admin
        .batch_execute(&format!("GRANT TRIGGER ON runs TO {carol}"))
        .unwrap();
    let e = Store::open(Path::new(&url))
        .err()
        .expect("a TRIGGER grant was trusted");
    assert!(
        said(&e).contains(&format!("REVOKE TRIGGER ON public.runs FROM {carol}")),
        "{}",
        said(&e)
    );
    assert_eq!(marks(&mut admin), Vec::<String>::new());
    admin
        .batch_execute(&format!("REVOKE TRIGGER ON runs FROM {carol}"))
        .unwrap();
    let mut store = Store::open(Path::new(&url)).unwrap();
    let other = store.create_run(&new_run("other")).unwrap();
    store.set_status(other, RunStatus::Failed).unwrap();
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].points, 2, "{:?}", listed[0]);
    assert_eq!(store.resolve("latest~1").unwrap(), id);
    assert_eq!(store.labelled("everything").unwrap(), vec![id]);
    assert_eq!(store.load(id).unwrap().header.status, RunStatus::Complete);
    assert_eq!(store.load_profiles(id).unwrap().len(), 1);
    assert_eq!(store.load_locks(id).unwrap().len(), 1);
    assert!(
        store.bytes_on_disk() > 0,
        "the sizes came from carol's function"
    );
    let outputs = store.outputs_folder().unwrap();
    let orphan = outputs.join((other + 100).to_string());
    let result = (|| {
        std::fs::create_dir_all(outputs.join(id.to_string()))?;
        std::fs::create_dir_all(&orphan)?;
        assert_eq!(store.orphan_output_folders().unwrap(), vec![orphan.clone()]);
        Ok::<_, std::io::Error>(())
    })();
    let reader = Store::open_read_only(Path::new(&url)).unwrap();
    assert_eq!(reader.list().unwrap().len(), 2);
    drop(reader);
    store.compact().unwrap();
    store.delete_run(other).unwrap();
    store.delete_run(id).unwrap();
    let _ = std::fs::remove_dir_all(&outputs);
    result.unwrap();
    assert!(store.list().unwrap().is_empty());
    assert_eq!(marks(&mut admin), Vec::<String>::new());
}
