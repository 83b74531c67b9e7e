//! Lock tables for the terminal: one point's table, and the causes' table across the
//! points (share of the thread-time and time in the lock per operation).

use comfy_table::CellAlignment;
use scalprof_model::locks::{LockCaller, LockProfile, LockRow};
use scalprof_model::{Point, RunDocument, LISTED_SHARE};

use crate::format::ns;

/// A lock row's waits and on-CPU time as a share of its point's thread-time per operation
/// (`None` when the point has no throughput).
pub(crate) fn row_share(p: &scalprof_model::Point, r: &LockRow) -> Option<f64> {
    let t = p.thread_ns_per_op()?;
    let with_cpu = r.cost_per_op()?;
    // Rows made from samples alone have no wait: keep them when they spun at all.
    if r.total_wait_ns == 0 && r.spin_ns.unwrap_or(0) > 0 {
        return None;
    }
    Some(with_cpu / t)
}

/// A lockstat-style table of one point: both scopes, heaviest waits first.
pub fn lock_table(parameter: &str, value: u64, l: &LockProfile) -> String {
    let rows: Vec<_> = l.rows.iter().take(10).collect();
    let out = heading(parameter, value, l);
    if rows.is_empty() {
        return out + "  no contended locks\n";
    }
    let mut t = crate::width::table();
    // Who held the locks, when the unlocks' stacks were copied (a column only then, so
    // that tables without it read as before).
    let held = rows.iter().any(|r| !r.holders.is_empty());
    // The hold times, where the interposer timed them (the same rule).
    let timed = rows.iter().any(|r| r.hold.is_some());
    let mut header = LOCK_COLUMNS.to_vec();
    if timed {
        header.extend(["hold p50 (p99)", "taken/op"]);
    }
    if held {
        header.push("held in");
    }
    t.set_header(header);
    for r in rows {
        let mut cells = vec![
            r.scope.to_string(),
            row_name(r),
            r.lock_type.to_string(),
            r.count.to_string(),
            ns(r.total_wait_ns as f64),
            ns(r.avg_wait_ns()),
            ns(r.max_wait_ns as f64),
            r.spin_ns.map_or("—".into(), |v| ns(v as f64)),
            shares(&r.callers),
        ];
        if timed {
            cells.extend(hold_cells(r));
        }
        if held {
            cells.push(shares(&r.holders));
        }
        t.add_row(cells);
    }
    let holds = if timed { 9..11 } else { 0..0 };
    for i in (3..8).chain(holds) {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out + &t.to_string() + "\n"
}

/// A row's hold time cells: the median hold with its 99th percentile, and the
/// acquisitions per operation ("—" where the hold was not timed).
fn hold_cells(r: &LockRow) -> [String; 2] {
    let Some(h) = &r.hold else {
        return ["—".into(), "—".into()];
    };
    [
        format!("{} ({})", ns(h.p50_ns as f64), ns(h.p99_ns as f64)),
        h.acquisitions_per_op
            .map_or("—".into(), |n| format!("{n:.3}")),
    ]
}

/// The lock table's columns, but the holds' and the holders'.
const LOCK_COLUMNS: [&str; 9] = [
    "scope",
    "lock",
    "type",
    "contended",
    "total wait",
    "avg",
    "max",
    "on-CPU",
    "top callers",
];

/// `locks at threads 2 (4 repeats; callers from …; not recorded: …)`: the table's heading,
/// with the user stacks copied and what the tracer could not record.
fn heading(parameter: &str, value: u64, l: &LockProfile) -> String {
    let mut out = format!("\nlocks at {parameter} {value} ({} repeats", l.repeats);
    if l.snapshots > 0 {
        out += &format!(
            "; callers from {} of {} user stack copies",
            l.snapshots_resolved, l.snapshots
        );
    }
    let f = &l.failures;
    let dropped = f.task_map_full
        + f.stack_failures
        + f.aggregation_map_full
        + f.nested
        + f.lost_snapshots
        + f.undecoded;
    if dropped > 0 {
        out += &format!(
            "; not recorded: {} task-map full, {} stacks, {} table full, {} nested, {} stack copies lost",
            f.task_map_full, f.stack_failures, f.aggregation_map_full, f.nested, f.lost_snapshots
        );
        if f.undecoded > 0 {
            out += &format!(", {} map entries unreadable", f.undecoded);
        }
    }
    out + ")\n"
}

/// A row's name with what its wait is attributed to, who woke it and its process.
fn row_name(r: &LockRow) -> String {
    let mut name = r.name.clone();
    if let Some(a) = &r.attributed_to {
        name += &format!(" (→ {a})");
    }
    if let Some(p) = &r.woken_by {
        name += &format!(" (woken by {p})");
    }
    if let Some(p) = &r.process {
        name += &format!(" [{p}]");
    }
    name
}

/// `table_lookup 60%, insert 40%`: callers (or holders) with their shares.
fn shares(callers: &[LockCaller]) -> String {
    callers
        .iter()
        .map(|c| format!("{} {:.0}%", c.function, c.share * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How each lock's and wait's cost grows across the sweep, in the budget's terms: its
/// share of the point's thread-time (the number its finding is scored with) and its wait
/// plus on-CPU time per operation, heaviest at the last point first.
pub fn lock_growth(doc: &RunDocument) -> String {
    let points: Vec<&Point> = doc.points.iter().filter(|p| p.locks.is_some()).collect();
    if points.len() < 2 {
        return String::new();
    }
    let last = points.last().and_then(|p| p.locks.as_ref()).expect("locks");
    let mut t = crate::width::table();
    let mut header = vec!["lock or wait: share of thread-time · time in it per op".to_string()];
    header.extend(points.iter().map(|p| format!("@{}", p.value)));
    t.set_header(header);
    let mut n = 0;
    let shown =
        |r: &&LockRow| (r.is_lock() || r.lock_type.is_blocked_wait()) && r.attributed_to.is_none();
    let last_point = points.last().expect("two points");
    let share_at = |p: &Point, r: &LockRow| -> f64 {
        p.budget.as_ref().map_or(0.0, |b| {
            b.causes
                .iter()
                .find(|c| c.id() == r.id())
                .map_or(0.0, |c| c.share)
        })
    };
    // The causes first, largest share at the last point first; with a budget, a row that
    // is no cause at any point (a thread join, an idle pool's wait) is left out.
    let mut rows: Vec<&LockRow> = last.rows.iter().filter(shown).collect();
    rows.sort_by(|x, y| share_at(last_point, y).total_cmp(&share_at(last_point, x)));
    let budgeted = points.iter().any(|p| p.budget.is_some());
    if budgeted {
        rows.retain(|r| points.iter().any(|p| share_at(p, r) >= LISTED_SHARE));
    }
    for r in rows.into_iter().take(6) {
        let mut row = vec![format!("{} {} ({})", r.scope, r.name, r.lock_type)];
        // A row that is nothing anywhere (under 1 ns per op and 0.5% of the thread-time
        // at every point) says nothing: a clean program's handful of short waits.
        let mut something = false;
        for p in &points {
            let x = p.locks.as_ref().and_then(|l| {
                l.rows
                    .iter()
                    .find(|x| x.scope == r.scope && x.name == r.name && x.lock_type == r.lock_type)
            });
            let per_op = match x {
                Some(x) => x.cost_per_op(),
                None => Some(0.0),
            };
            let share = p.budget.as_ref().map(|b| {
                b.causes
                    .iter()
                    .find(|c| c.id() == r.id())
                    .map_or(0.0, |c| c.share)
            });
            something |=
                share.is_some_and(|s| s >= LISTED_SHARE) || per_op.is_some_and(|c| c >= 1.0);
            row.push(match (share, per_op) {
                (Some(s), Some(c)) => format!("{:.0}% · {}", s * 100.0, ns(c)),
                (None, Some(c)) => ns(c),
                (Some(s), None) => format!("{:.0}%", s * 100.0),
                (None, None) => "—".into(),
            });
        }
        if !something {
            continue;
        }
        t.add_row(row);
        n += 1;
    }
    if n == 0 {
        return String::new();
    }
    format!("\n{t}\n")
}
