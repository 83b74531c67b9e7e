//! What scalprof checks in a team store's database before it reads or writes a row: that
//! no one it does not trust can make it run their code.
//!
//! PostgreSQL runs a table's triggers, rules, column defaults and row-security policies
//! with the rights of whoever writes (or reads) the table: a teammate who created the
//! tables first, with a `BEFORE INSERT` trigger, would run their code as every user of the
//! store, a superuser's role included (hardening review, row 2). So scalprof refuses:
//!
//! - a table of its own (runs, repeats, profiles, locks, scalprof_schema, store_identity)
//!   that is not a plain table, or that belongs to a role it does not trust: the
//!   connecting role, a superuser, or the team's owner role named in [`OWNER_ENV`];
//! - such a table with a trigger (other than PostgreSQL's internal ones, which enforce
//!   foreign keys) or a rule, whoever made it, or on which a role other than its owner
//!   may create triggers (the TRIGGER privilege);
//! - a schema that belongs to a role it does not trust (its owner may drop and replace
//!   the tables at any time; `pg_database_owner` means the database's owner).
//!
//! And the session's `search_path` is pinned to the store's schema alone: PostgreSQL then
//! searches `pg_catalog` before it, so no function in `public` or a `"$user"` schema can
//! take the place of a built-in one that scalprof calls. (Naming `pg_catalog` first
//! explicitly would make it the schema new tables are created in.)

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

/// The store's schema (the first schema of the connection's search_path that exists:
/// `public` unless the URL's `options=-c search_path=…` or the role's settings say
/// otherwise), to which the session's search_path is then pinned.
pub(crate) fn pin_schema(client: &mut postgres::Client, shown: &str) -> Result<String, StoreError> {
    let schema: Option<String> = client
        .query_one("SELECT pg_catalog.current_schema()::text", &[])?
        .get(0);
    let schema = schema.ok_or_else(|| StoreError::NoSchema {
        url: shown.to_string(),
    })?;
    client.execute(
        "SELECT pg_catalog.set_config('search_path', pg_catalog.quote_ident($1), false)",
        &[&schema],
    )?;
    Ok(schema)
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
                (SELECT pg_catalog.string_agg(DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC'
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
