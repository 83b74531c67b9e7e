//! The list of stored runs.

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::Table;

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
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
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
