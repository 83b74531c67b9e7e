//! The list of stored runs.

use crate::safe::one_line;

/// One row of `scalprof runs`.
pub struct RunRow {
    pub id: i64,
    pub label: String,
    pub command: String,
    pub created: String,
    pub status: String,
    pub points: String,
}

pub fn runs_table(rows: &[RunRow]) -> String {
    let mut t = crate::width::table();
    t.set_header(vec![
        "id", "label", "status", "points", "created", "command",
    ]);
    for r in rows {
        t.add_row(vec![
            r.id.to_string(),
            one_line(&r.label),
            r.status.clone(),
            r.points.clone(),
            r.created.clone(),
            one_line(&r.command),
        ]);
    }
    t.to_string()
}
