//! What scalprof checks in a team store's database before it reads or writes a row: that
//! no one it does not trust can make it run their code.
//!
//! PostgreSQL runs a table's triggers, rules, column defaults and row-security policies
//! with the rights of whoever writes (or reads) the table: a teammate who created the
//! tables first, with a `BEFORE INSERT` trigger, would run their code as every user of the
//! store, a superuser's role included. So scalprof refuses:
//!
//! - a table of its own (runs, repeats, profiles, locks, scalprof_schema, store_identity)
//!   that is not a plain table, or that belongs to a role it does not trust: the
//!   connecting role, a superuser, or the team's owner role named in [`OWNER_ENV`];
//! - such a table with a trigger (other than PostgreSQL's internal ones, which enforce
//!   foreign keys) or a rule, whoever made it, or on which a role other than its owner
//!   may create triggers (the TRIGGER privilege);
//! - a schema that belongs to a role it does not trust (its owner may drop and replace
//!   the tables at any time; `pg_database_owner` means the database's owner);
//! - a schema in which a role other than its owner may create (the CREATE privilege; a
//!   grant to PUBLIC is one to every role), unless it is a role it trusts: a function or
//!   operator created there whose argument types match a call exactly takes the place of
//!   pg_catalog's built-in, which needs a conversion (`public.count(bigint)` over
//!   `count("any")`), whatever the order of the search_path.
//!
//! The checks run with an empty search_path, so that only pg_catalog is searched and
//! nothing in the schema they check can answer for a built-in they call; then the
//! session's search_path is pinned to the store's schema alone ([`pin`]): no schema but
//! pg_catalog (searched first, without being named) and the store's, which no one but a
//! role scalprof trusts may create in. (Naming `pg_catalog` explicitly would not make
//! its functions win over a better match, and it would make it the schema new tables are
//! created in.) Every function the store's statements call is named with its schema
//! (`pg_catalog.count`; the Db layer qualifies the aggregates of the statements shared
//! with SQLite, see `crate::db::postgres_sql`), and each operator they use has a
//! built-in that takes its operands' types exactly, which is found first: a function or
//! operator left in the schema from before its CREATE was revoked is not run either.

use crate::StoreError;

/// The tables scalprof reads and writes.
pub(crate) const TABLES: [&str; 6] = [
    "runs",
    "repeats",
    "profiles",
    "locks",
    "scalprof_schema",
    "store_identity",
];

/// The environment variable naming the team's owner role: tables (and a schema) that
/// role owns are trusted as the connecting role's own are.
pub const OWNER_ENV: &str = "SCALPROF_PG_OWNER";

/// The store's schema: the first schema of the connection's search_path that exists
/// (`public` unless the URL's `options=-c search_path=…` or the role's settings say
/// otherwise). The session's search_path is left empty, so that until [`pin`] only
/// pg_catalog is searched: [`check`] runs with nothing of the schema's in its way.
pub(crate) fn store_schema(
    client: &mut postgres::Client,
    shown: &str,
) -> Result<String, StoreError> {
    let schema: Option<String> = client
        .query_one("SELECT pg_catalog.current_schema()::text", &[])?
        .get(0);
    let schema = schema.ok_or_else(|| StoreError::NoSchema {
        url: shown.to_string(),
    })?;
    client.execute(
        "SELECT pg_catalog.set_config('search_path', '', false)",
        &[],
    )?;
    Ok(schema)
}

/// Pins the session's search_path to `schema` alone, once [`check`] has found it sound.
pub(crate) fn pin(client: &mut postgres::Client, schema: &str) -> Result<(), StoreError> {
    client.execute(
        "SELECT pg_catalog.set_config('search_path', pg_catalog.quote_ident($1), false)",
        &[&schema],
    )?;
    Ok(())
}

/// The role that owns a schema or a table, as the checks see it.
struct Owner {
    name: String,
    superuser: bool,
    me: bool,
}

impl Owner {
    fn trusted(&self, team_owner: Option<&str>) -> bool {
        self.me || self.superuser || team_owner == Some(self.name.as_str())
    }
}

/// Refuses the store in `schema` when something there could run another role's code as
/// ours (see the module's doc); the error lists what was found and how to fix each.
pub(crate) fn check(
    client: &mut postgres::Client,
    schema: &str,
    shown: &str,
    team_owner: Option<&str>,
) -> Result<(), StoreError> {
    let mut found = Vec::new();
    check_schema_owner(client, schema, team_owner, &mut found)?;
    check_schema_creators(client, schema, team_owner, &mut found)?;
    check_tables(client, schema, team_owner, &mut found)?;
    if found.is_empty() {
        return Ok(());
    }
    Err(StoreError::Untrusted {
        url: shown.to_string(),
        found: found.join("; "),
    })
}

/// How to trust, or avoid, a role that owns the schema or a table.
fn trust_hint(owner: &str) -> String {
    format!(
        "if {owner} is your team's owner role, set {OWNER_ENV}={owner}; otherwise use \
         another database or schema"
    )
}

/// The schema's owner (the database's owner where it is `pg_database_owner`), unless
/// trusted.
fn check_schema_owner(
    client: &mut postgres::Client,
    schema: &str,
    team_owner: Option<&str>,
    found: &mut Vec<String>,
) -> Result<(), StoreError> {
    let row = client.query_opt(
        "SELECT r.rolname::text, r.rolsuper, r.rolname = current_user
         FROM pg_catalog.pg_namespace n
         JOIN pg_catalog.pg_database d ON d.datname = pg_catalog.current_database()
         JOIN pg_catalog.pg_roles r ON r.oid = CASE
             WHEN pg_catalog.pg_get_userbyid(n.nspowner) = 'pg_database_owner' THEN d.datdba
             ELSE n.nspowner END
         WHERE n.nspname = $1",
        &[&schema],
    )?;
    if let Some(r) = row {
        let owner = Owner {
            name: r.get(0),
            superuser: r.get(1),
            me: r.get(2),
        };
        if !owner.trusted(team_owner) {
            found.push(format!(
                "schema {schema} belongs to role {} (who can drop and replace scalprof's tables \
                 in it at any time): {}",
                owner.name,
                trust_hint(&owner.name)
            ));
        }
    }
    Ok(())
}

/// The roles other than the schema's owner that may create in it (the CREATE privilege,
/// granted to them or to PUBLIC), unless trusted: one finding, with the REVOKE that
/// takes the privilege back. A schema without an access list (`nspacl` NULL) has the
/// default one, its owner's alone. A grant to `pg_database_owner` is trusted as the
/// database's owner is.
fn check_schema_creators(
    client: &mut postgres::Client,
    schema: &str,
    team_owner: Option<&str>,
    found: &mut Vec<String>,
) -> Result<(), StoreError> {
    let rows = client.query(
        "SELECT DISTINCT pg_catalog.quote_ident(n.nspname),
                CASE WHEN a.grantee = 0::pg_catalog.oid THEN 'PUBLIC'
                     ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
                r.rolname::text, r.rolsuper, r.rolname = current_user
         FROM pg_catalog.pg_namespace n
         JOIN pg_catalog.pg_database d ON d.datname = pg_catalog.current_database()
         CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
         LEFT JOIN pg_catalog.pg_roles r ON r.oid = CASE
             WHEN pg_catalog.pg_get_userbyid(a.grantee) = 'pg_database_owner' THEN d.datdba
             ELSE a.grantee END
         WHERE n.nspname = $1 AND a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner
         ORDER BY 2",
        &[&schema],
    )?;
    let mut quoted_schema = schema.to_string();
    let mut grantees = Vec::new();
    for r in rows {
        quoted_schema = r.get(0);
        let grantee: String = r.get(1);
        // PUBLIC is every role: trusted never.
        let trusted = match r.get::<_, Option<String>>(2) {
            Some(name) => Owner {
                name,
                superuser: r.get(3),
                me: r.get(4),
            }
            .trusted(team_owner),
            None => false,
        };
        if !trusted {
            grantees.push(grantee);
        }
    }
    if grantees.is_empty() {
        return Ok(());
    }
    let who: Vec<String> = grantees
        .iter()
        .map(|g| match g.as_str() {
            "PUBLIC" => "PUBLIC (every role)".to_string(),
            _ => g.clone(),
        })
        .collect();
    let who = match who.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    };
    found.push(format!(
        "{who} may create in schema {schema} (the CREATE privilege), where a function or \
         operator of theirs can take the place of a built-in one that scalprof calls: \
         REVOKE CREATE ON SCHEMA {quoted_schema} FROM {}; or keep the store in a schema that \
         only its owner may create in (see docs/team-store.md)",
        grantees.join(", ")
    ));
    Ok(())
}

/// Each of scalprof's tables that exists: its kind, its owner, its triggers and rules,
/// and who else may create triggers on it.
fn check_tables(
    client: &mut postgres::Client,
    schema: &str,
    team_owner: Option<&str>,
    found: &mut Vec<String>,
) -> Result<(), StoreError> {
    let tables: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
    let rows = client.query(
        "SELECT c.relname::text, c.relkind::text, r.rolname::text, r.rolsuper,
                r.rolname = current_user,
                (SELECT pg_catalog.string_agg(pg_catalog.pg_get_triggerdef(t.oid), '; ')
                 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal),
                (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(ru.rulename), ', ')
                 FROM pg_catalog.pg_rules ru
                 WHERE ru.schemaname = n.nspname AND ru.tablename = c.relname),
                (SELECT pg_catalog.string_agg(DISTINCT CASE a.grantee WHEN 0::pg_catalog.oid THEN 'PUBLIC'
                            ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END, ', ')
                 FROM pg_catalog.aclexplode(c.relacl) a
                 WHERE a.privilege_type = 'TRIGGER' AND a.grantee <> c.relowner)
         FROM pg_catalog.pg_class c
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_catalog.pg_roles r ON r.oid = c.relowner
         WHERE n.nspname = $1 AND c.relname = ANY($2)
         ORDER BY c.relname",
        &[&schema, &tables],
    )?;
    for r in rows {
        let table: String = r.get(0);
        let qualified = format!("{schema}.{table}");
        let kind: String = r.get(1);
        let owner = Owner {
            name: r.get(2),
            superuser: r.get(3),
            me: r.get(4),
        };
        if kind != "r" {
            found.push(format!(
                "{qualified} is not a plain table (relkind {kind}: a view or another kind of \
                 relation can run its owner's code): drop it, or use another database or schema"
            ));
        }
        if !owner.trusted(team_owner) {
            found.push(format!(
                "{qualified} belongs to role {} (whoever owns scalprof's tables can make every \
                 writer run their code): {}",
                owner.name,
                trust_hint(&owner.name)
            ));
        }
        if let Some(triggers) = r.get::<_, Option<String>>(5) {
            found.push(format!(
                "{qualified} has a trigger, which would run as you: {triggers}; drop it \
                 (DROP TRIGGER name ON {qualified}) if your team did not mean it"
            ));
        }
        if let Some(rules) = r.get::<_, Option<String>>(6) {
            found.push(format!(
                "{qualified} has rule {rules}, which would rewrite what scalprof writes; drop \
                 it (DROP RULE name ON {qualified})"
            ));
        }
        if let Some(grantees) = r.get::<_, Option<String>>(7) {
            found.push(format!(
                "{grantees} may create triggers on {qualified} (the TRIGGER privilege); \
                 REVOKE TRIGGER ON {qualified} FROM {grantees}"
            ));
        }
    }
    Ok(())
}
