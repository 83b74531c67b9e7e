//! The one place that knows which database a store lives in: statements are written once,
//! in SQLite's dialect with `?N` placeholders, and run on either backend; rows come back as
//! plain values whatever the backend's types.
//!
//! Every integer column is an `INTEGER` in SQLite and a `BIGINT` in PostgreSQL (see
//! [`crate::pg::ddl`]), so integers travel as `i64`, booleans as 0 or 1, reals as `f64`.

use std::cell::RefCell;

use crate::StoreError;

/// A store's connection.
pub(crate) enum Db {
    Sqlite(rusqlite::Connection),
    /// `postgres::Client` wants `&mut` for every query; a store is used from one thread.
    /// Boxed: the client with its runtime is three times an SQLite connection's size.
    Postgres(Box<RefCell<PgConn>>),
}

/// A PostgreSQL connection and the statements it has prepared: a statement is parsed by
/// the server once per connection, and each later use is one round trip instead of two.
pub(crate) struct PgConn {
    client: postgres::Client,
    prepared: std::collections::HashMap<String, postgres::Statement>,
    /// The server process of this connection (`pg_backend_pid()`): a run's recorder.
    backend: i32,
}

impl PgConn {
    pub(crate) fn new(client: postgres::Client, backend: i32) -> PgConn {
        PgConn {
            client,
            prepared: std::collections::HashMap::new(),
            backend,
        }
    }

    /// The prepared form of `sql` (in SQLite's dialect).
    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, StoreError> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(&postgres_sql(sql))?;
        self.prepared.insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

/// A statement's parameter, typed so that PostgreSQL accepts it for the column's type
/// (a NULL too).
#[derive(Clone, Debug)]
pub(crate) enum Param {
    Int(Option<i64>),
    Real(f64),
    Text(Option<String>),
}

impl From<i64> for Param {
    fn from(v: i64) -> Param {
        Param::Int(Some(v))
    }
}

impl From<Option<i64>> for Param {
    fn from(v: Option<i64>) -> Param {
        Param::Int(v)
    }
}

impl From<u32> for Param {
    fn from(v: u32) -> Param {
        Param::Int(Some(i64::from(v)))
    }
}

impl From<Option<i32>> for Param {
    fn from(v: Option<i32>) -> Param {
        Param::Int(v.map(i64::from))
    }
}

impl From<bool> for Param {
    fn from(v: bool) -> Param {
        Param::Int(Some(i64::from(v)))
    }
}

impl From<f64> for Param {
    fn from(v: f64) -> Param {
        Param::Real(v)
    }
}

impl From<&str> for Param {
    fn from(v: &str) -> Param {
        Param::Text(Some(v.to_string()))
    }
}

impl From<String> for Param {
    fn from(v: String) -> Param {
        Param::Text(Some(v))
    }
}

impl From<Option<String>> for Param {
    fn from(v: Option<String>) -> Param {
        Param::Text(v)
    }
}

impl rusqlite::ToSql for Param {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value};
        Ok(match self {
            Param::Int(Some(v)) => ToSqlOutput::Owned(Value::Integer(*v)),
            Param::Real(v) => ToSqlOutput::Owned(Value::Real(*v)),
            Param::Text(Some(v)) => ToSqlOutput::from(v.as_str()),
            Param::Int(None) | Param::Text(None) => ToSqlOutput::Owned(Value::Null),
        })
    }
}

/// One column's value as read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

/// A row as read: its columns in the statement's order.
#[derive(Clone, Debug)]
pub(crate) struct Row(Vec<Value>);

impl Row {
    fn get(&self, column: usize) -> Result<&Value, StoreError> {
        self.0.get(column).ok_or(StoreError::Column {
            column,
            expected: "present",
        })
    }

    pub(crate) fn opt_i64(&self, column: usize) -> Result<Option<i64>, StoreError> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            _ => Err(StoreError::Column {
                column,
                expected: "an integer",
            }),
        }
    }

    pub(crate) fn i64(&self, column: usize) -> Result<i64, StoreError> {
        self.opt_i64(column)?.ok_or(StoreError::Column {
            column,
            expected: "an integer, not NULL",
        })
    }

    pub(crate) fn u32(&self, column: usize) -> Result<u32, StoreError> {
        u32::try_from(self.i64(column)?).map_err(|_| StoreError::Column {
            column,
            expected: "a 32-bit unsigned integer",
        })
    }

    pub(crate) fn opt_i32(&self, column: usize) -> Result<Option<i32>, StoreError> {
        self.opt_i64(column)?
            .map(i32::try_from)
            .transpose()
            .map_err(|_| StoreError::Column {
                column,
                expected: "a 32-bit integer",
            })
    }

    pub(crate) fn bool(&self, column: usize) -> Result<bool, StoreError> {
        Ok(self.i64(column)? != 0)
    }

    pub(crate) fn f64(&self, column: usize) -> Result<f64, StoreError> {
        match self.get(column)? {
            Value::Real(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            _ => Err(StoreError::Column {
                column,
                expected: "a number",
            }),
        }
    }

    pub(crate) fn opt_text(&self, column: usize) -> Result<Option<String>, StoreError> {
        match self.get(column)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v.clone())),
            _ => Err(StoreError::Column {
                column,
                expected: "text",
            }),
        }
    }

    pub(crate) fn text(&self, column: usize) -> Result<String, StoreError> {
        self.opt_text(column)?.ok_or(StoreError::Column {
            column,
            expected: "text, not NULL",
        })
    }
}

impl Db {
    /// Runs one statement; returns the rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Param]) -> Result<u64, StoreError> {
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                Ok(stmt.execute(rusqlite::params_from_iter(params))? as u64)
            }
            Db::Postgres(conn) => {
                let conn = &mut *conn.borrow_mut();
                let statement = conn.statement(sql)?;
                Ok(conn.client.execute(&statement, &pg_params(params))?)
            }
        }
    }

    /// Every row of a query.
    pub(crate) fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Row>, StoreError> {
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let columns = stmt.column_count();
                let rows = stmt.query_map(rusqlite::params_from_iter(params), |r| {
                    (0..columns).map(|i| sqlite_value(r, i)).collect()
                })?;
                Ok(rows.map(|r| r.map(Row)).collect::<Result<_, _>>()?)
            }
            Db::Postgres(conn) => {
                let conn = &mut *conn.borrow_mut();
                let statement = conn.statement(sql)?;
                conn.client
                    .query(&statement, &pg_params(params))?
                    .iter()
                    .map(pg_row)
                    .collect()
            }
        }
    }

    /// The first row of a query, if any.
    pub(crate) fn query_opt(&self, sql: &str, params: &[Param]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Statements without parameters, in one go.
    pub(crate) fn batch(&self, sql: &str) -> Result<(), StoreError> {
        match self {
            Db::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Db::Postgres(conn) => Ok(conn.borrow_mut().client.batch_execute(&postgres_sql(sql))?),
        }
    }

    /// Runs `f` in one transaction: all of it is committed, or none of it.
    pub(crate) fn transaction<T>(
        &self,
        f: impl FnOnce(&Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.batch("BEGIN")?;
        match f(self) {
            Ok(v) => {
                self.batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Inserts a row into `table`, replacing the row with the same key (the first `key`
    /// columns). As SQLite's `INSERT OR REPLACE` gives the new row a new rowid, the
    /// PostgreSQL row takes a new `rowid` (see [`crate::pg::ddl`]): it reads back last.
    pub(crate) fn upsert(
        &self,
        table: &str,
        columns: &[&str],
        key: usize,
        params: &[Param],
    ) -> Result<(), StoreError> {
        self.execute(&upsert_sql(self.is_postgres(), table, columns, key), params)?;
        Ok(())
    }

    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// On PostgreSQL, this connection's server process (`pg_backend_pid()`).
    pub(crate) fn backend(&self) -> Option<i32> {
        match self {
            Db::Sqlite(_) => None,
            Db::Postgres(conn) => Some(conn.borrow().backend),
        }
    }
}

/// The statement [`Db::upsert`] runs.
pub(crate) fn upsert_sql(postgres: bool, table: &str, columns: &[&str], key: usize) -> String {
    let placeholders: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    let (cols, values) = (columns.join(", "), placeholders.join(", "));
    if !postgres {
        return format!("INSERT OR REPLACE INTO {table} ({cols}) VALUES ({values})");
    }
    let set: Vec<String> = columns[key..]
        .iter()
        .chain(std::iter::once(&"rowid"))
        .map(|c| format!("{c} = EXCLUDED.{c}"))
        .collect();
    format!(
        "INSERT INTO {table} ({cols}) VALUES ({values}) ON CONFLICT ({}) DO UPDATE SET {}",
        columns[..key].join(", "),
        set.join(", ")
    )
}

/// The aggregates that statements shared with SQLite call. PostgreSQL's form of such a
/// statement names them with their schema (`pg_catalog.COUNT(`), which SQLite would not
/// understand: a bare `COUNT(value)` on PostgreSQL resolves to any `count` in the store's
/// schema whose argument type matches better than pg_catalog's (`count(bigint)` beats the
/// built-in `count("any")`), run as us. Statements for PostgreSQL alone name the
/// functions they call with their schema themselves (see `crate::pg::guard`).
const SHARED_AGGREGATES: [&str; 4] = ["COUNT", "SUM", "MIN", "MAX"];

/// A statement in SQLite's dialect in PostgreSQL's: `?3` becomes `$3`, and a call of one
/// of the [`SHARED_AGGREGATES`] names pg_catalog's (`COUNT(*)` becomes
/// `pg_catalog.COUNT(*)`; a name already qualified, or in quotes, is left as it is).
/// Nothing in a string literal changes.
pub(crate) fn postgres_sql(sql: &str) -> String {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    let mut in_literal = false;
    while let Some(c) = rest.chars().next() {
        if c == '\'' {
            in_literal = !in_literal;
        } else if !in_literal && c == '?' && rest[1..].starts_with(|d: char| d.is_ascii_digit()) {
            out.push('$');
            rest = &rest[1..];
            continue;
        } else if !in_literal && (c.is_ascii_alphabetic() || c == '_') {
            let (word, after) = rest.split_at(rest.find(|d| !is_name(d)).unwrap_or(rest.len()));
            let builtin = after.starts_with('(')
                && !out.ends_with(['.', '"'])
                && SHARED_AGGREGATES
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(word));
            if builtin {
                out.push_str("pg_catalog.");
            }
            out.push_str(word);
            rest = after;
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn pg_params(params: &[Param]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|p| -> &(dyn postgres::types::ToSql + Sync) {
            match p {
                Param::Int(v) => v,
                Param::Real(v) => v,
                Param::Text(v) => v,
            }
        })
        .collect()
}

fn sqlite_value(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Value> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(v) => Value::Int(v),
        ValueRef::Real(v) => Value::Real(v),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into()),
    })
}

fn pg_row(r: &postgres::Row) -> Result<Row, StoreError> {
    use postgres::types::Type;
    let mut values = Vec::with_capacity(r.len());
    for (i, c) in r.columns().iter().enumerate() {
        let t = c.type_();
        let v = if *t == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?.map(Value::Int)
        } else if *t == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *t == Type::INT2 {
            r.try_get::<_, Option<i16>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *t == Type::BOOL {
            r.try_get::<_, Option<bool>>(i)?
                .map(|v| Value::Int(v.into()))
        } else if *t == Type::FLOAT8 {
            r.try_get::<_, Option<f64>>(i)?.map(Value::Real)
        } else if *t == Type::FLOAT4 {
            r.try_get::<_, Option<f32>>(i)?
                .map(|v| Value::Real(v.into()))
        } else {
            r.try_get::<_, Option<String>>(i)?.map(Value::Text)
        };
        values.push(v.unwrap_or(Value::Null));
    }
    Ok(Row(values))
}

#[cfg(test)]
mod tests {
    use super::{postgres_sql, upsert_sql};

    #[test]
    fn placeholders_become_postgres_ones_and_question_marks_elsewhere_stay() {
        assert_eq!(
            postgres_sql("UPDATE runs SET status = ?2 WHERE id = ?1 AND x ? y"),
            "UPDATE runs SET status = $2 WHERE id = $1 AND x ? y"
        );
        assert_eq!(postgres_sql("VALUES (?10, ?11)"), "VALUES ($10, $11)");
        assert_eq!(postgres_sql("SELECT '?1', ?1"), "SELECT '?1', $1");
    }

    #[test]
    fn shared_aggregates_are_pg_catalogs_on_postgres() {
        assert_eq!(
            postgres_sql(
                "SELECT COUNT(*), (SELECT COUNT(DISTINCT value) FROM repeats), sum(x), max (y)"
            ),
            "SELECT pg_catalog.COUNT(*), (SELECT pg_catalog.COUNT(DISTINCT value) FROM repeats), \
             pg_catalog.sum(x), max (y)"
        );
        // Already qualified, quoted, part of a longer name, a column, or in a literal: as is.
        for same in [
            "SELECT pg_catalog.count(*) FROM runs",
            "SELECT \"count\"(x), recount(x), count FROM t",
            "SELECT 'COUNT(x)' FROM t",
        ] {
            assert_eq!(postgres_sql(same), same);
        }
    }

    #[test]
    fn an_upsert_replaces_the_row_of_its_key_on_both_backends() {
        let cols = ["run_id", "value", "idx", "profile"];
        assert_eq!(
            upsert_sql(false, "locks", &cols, 3),
            "INSERT OR REPLACE INTO locks (run_id, value, idx, profile) VALUES (?1, ?2, ?3, ?4)"
        );
        assert_eq!(
            upsert_sql(true, "locks", &cols, 3),
            "INSERT INTO locks (run_id, value, idx, profile) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (run_id, value, idx) DO UPDATE SET profile = EXCLUDED.profile, \
             rowid = EXCLUDED.rowid"
        );
    }
}
