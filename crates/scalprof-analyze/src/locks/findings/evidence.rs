//! A lock finding's evidence: its waits per operation at each point, who called it, who
//! held it and for how long, and what the holders were doing (the wait chain).

#[cfg(test)]
use scalprof_model::locks::Scope;
use scalprof_model::locks::{
    CallWait, ChanSide, HeldWait, LockAddress, LockCaller, LockKind, LockRow,
};
use scalprof_model::units::human_ns;

use super::LockSeries;
use crate::locks::LOCK_MIN_WAITS;

impl LockSeries<'_> {
    /// What was measured of the lock, then who held it and what its holders did.
    pub(super) fn evidence(&self, rows: &[LockRow]) -> String {
        let last = self.last;
        let process = last
            .process
            .as_ref()
            .map_or(String::new(), |p| format!("in {p} (attached): "));
        let measured = if last.address == LockAddress::Sampled {
            self.sampled_text()
        } else {
            self.waits_text()
        };
        let woken = last
            .woken_by
            .as_ref()
            .map_or(String::new(), |p| format!("; woken by {p}"));
        let holder_blocks = if last.holder_waits.is_empty() {
            holder_wait(last, rows).map_or(String::new(), |(h, w)| {
                format!("; its holder {h} also blocks in {}", w.name)
            })
        } else {
            String::new()
        };
        process + &measured + &woken + &held_text(last) + &chain_text(last, rows) + &holder_blocks
    }

    /// A spinlock is not traced: its row is made of the samples that spun.
    pub(super) fn sampled_text(&self) -> String {
        format!(
            "{}, sampled (spinlocks are not traced): on-CPU spinning per op {} at {} threads; \
             {} samples{}",
            self.last.lock_type,
            fmt_list(&self.cpu_per_op),
            self.values.last().expect("point"),
            self.last.count,
            callers_text(self.last),
        )
    }

    /// A traced lock's waits per operation over the sweep, their count, average and
    /// largest, and the on-CPU time in the lock when there is some.
    pub(super) fn waits_text(&self) -> String {
        let last = self.last;
        let was = if self.single {
            String::new()
        } else {
            format!(
                " (was {} at {})",
                human_ns(self.wait_per_op[0]),
                self.values[0]
            )
        };
        let on_cpu = if self.cpu_per_op.iter().any(|x| *x >= 1.0) {
            format!(", on-CPU in it {} per op", fmt_list(&self.cpu_per_op))
        } else {
            String::new()
        };
        let waits = if last.lock_type.is_blocked_wait() {
            "waits"
        } else {
            "contended waits"
        };
        format!(
            "{}: wait per op {} at {} threads{was}{on_cpu}; {} {waits}, avg {}, max {}{}{}",
            last.lock_type,
            fmt_list(&self.wait_per_op),
            self.values.last().expect("point"),
            last.count,
            human_ns(last.avg_wait_ns()),
            // The largest wait is at least the average (they come from separate
            // aggregations: a dropped ring record can leave max below avg).
            human_ns((last.max_wait_ns as f64).max(last.avg_wait_ns())),
            hold_text(last),
            callers_text(last),
        )
    }
}

/// "; callers: F (N%), G (M%)", or nothing when the row has no callers.
pub(super) fn callers_text(row: &LockRow) -> String {
    if row.callers.is_empty() {
        return String::new();
    }
    let callers: Vec<String> = row
        .callers
        .iter()
        .map(|c| format!("{} ({:.0}%)", c.function, c.share * 100.0))
        .collect();
    format!("; callers: {}", callers.join(", "))
}

pub(super) fn fmt_list(v: &[f64]) -> String {
    v.iter()
        .map(|x| human_ns(*x))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// A lock row's few words in the verdict: its type and callers (from the latest point
/// that has them, else `previous`), who held it, who woke it, in which process.
pub(crate) fn budget_detail(r: &LockRow, previous: String) -> String {
    let mut d = previous;
    if !r.callers.is_empty() {
        let callers: Vec<&str> = r
            .callers
            .iter()
            .take(2)
            .map(|c| c.function.as_str())
            .collect();
        d = format!("{}; {}", r.lock_type, callers.join(", "));
    }
    if let Some(h) = r.holders.first().filter(|h| h.share >= 0.5) {
        let held = match &r.lock_type {
            LockKind::Sleep => "the others ran in",
            kind => ended_by(kind).unwrap_or("held in"),
        };
        d = format!(
            "{d}; {held} {}, {:.0}% of the wait",
            h.function,
            h.share * 100.0
        );
        if let Some(w) = r.holder_waits.first().filter(|w| w.share >= 0.2) {
            d = format!(
                "{d}; its holder blocked in {} {:.0}%",
                w.on,
                w.share * 100.0
            );
        }
    }
    if let Some(peer) = &r.woken_by {
        d = format!("{d}; woken by {peer}");
    }
    if let Some(process) = &r.process {
        d = format!("{d}; in {process}");
    }
    d
}

/// "; held 90 ns (p99 310 ns, longest 2.1 µs), taken 1× per op": the lock's hold times, where
/// they were timed.
pub(crate) fn hold_text(row: &LockRow) -> String {
    let Some(h) = &row.hold else {
        return String::new();
    };
    let taken = h.acquisitions_per_op.map_or(String::new(), |n| {
        format!(", taken {}× per op", per_op_count(n))
    });
    format!(
        "; held {} (p99 {}, longest {}){taken}",
        human_ns(h.p50_ns as f64),
        human_ns(h.p99_ns as f64),
        human_ns(h.max_ns as f64)
    )
}

/// A count per operation in a few digits: 2, 0.25, 1.3e-5.
pub(super) fn per_op_count(n: f64) -> String {
    if n >= 10.0 {
        format!("{n:.0}")
    } else if n >= 0.01 {
        format!("{:.3}", n)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        format!("{n:.1e}")
    }
}

/// "; held in F (N% of the wait), G (M%)": who made the waiters wait.
pub(super) fn held_text(row: &LockRow) -> String {
    if row.holders.is_empty() {
        return String::new();
    }
    let list: Vec<String> = row
        .holders
        .iter()
        .filter(|h| h.share >= 0.05)
        .map(|h| format!("{} ({:.0}% of the wait)", h.function, h.share * 100.0))
        .collect();
    if row.lock_type == LockKind::Sleep {
        // No holder wakes a sleep: these are what the other threads ran meanwhile.
        return format!("; while it slept the others ran in {}", list.join(", "));
    }
    if row.lock_type == LockKind::Io {
        // A wait for a peer's data: the thread that answered it (a server's).
        return format!("; answered by {}", list.join(", "));
    }
    let held = ended_by(&row.lock_type).unwrap_or("held in");
    format!("; {held} {}", list.join(", "))
}

/// What the goroutine at a hand-off's other end did to end the waits, for a channel's or
/// a sync.Cond's: nobody holds them.
fn ended_by(kind: &LockKind) -> Option<&'static str> {
    match kind {
        LockKind::Chan(Some(ChanSide::Send)) => Some("received by"),
        LockKind::Chan(_) => Some("sent by"),
        LockKind::GoCond => Some("signalled by"),
        _ => None,
    }
}

/// The function holding the lock for most of the wait (at least half) while it takes the
/// lock for a small part of the waits (at most a quarter): a long critical section among
/// short ones, whose fix is to shorten it, not to shard. Only for a lock: a condition
/// variable's "holder" is whoever signalled it (an interpreter lock's handoff has its own
/// advice).
pub(super) fn long_holder(row: &LockRow) -> Option<String> {
    if !row.lock_type.is_lock() {
        return None;
    }
    // The largest holder by a clear margin: holders come from a few dozen samples inside
    // the waits, so a true 0.6 share reads anywhere from 0.45 to 0.8 between runs.
    let h = row.holders.first()?;
    let next = row.holders.get(1).map_or(0.0, |n| n.share);
    let clear = h.share >= 0.5 || (h.share >= 0.4 && h.share >= 1.5 * next);
    (clear && share_of(&row.callers, &h.function) <= 0.25).then(|| h.function.clone())
}

/// The share `function` has in a list of callers or holders (0 when it is not in it).
pub(super) fn share_of(list: &[LockCaller], function: &str) -> f64 {
    list.iter()
        .find(|c| c.function == function)
        .map_or(0.0, |c| c.share)
}

/// What a lock's holders were doing while the waiters waited, measured: running (their
/// samples during the waits) and blocked in waits of their own, followed as a chain
/// through the locks they waited on (to depth 3, cycles cut): `; its holder journal_append
/// was blocked in disk I/O (fdatasync …) 48% of the wait, running 44%`.
pub(super) fn chain_text(row: &LockRow, rows: &[LockRow]) -> String {
    let Some(h) = row.holders.first() else {
        return String::new();
    };
    let who = if row.lock_type == LockKind::Io {
        "the peer"
    } else {
        "its holder"
    };
    let mut parts: Vec<String> = Vec::new();
    let mut visited = vec![row.name.as_str()];
    let mut at = row;
    for depth in 0..3 {
        let Some(w) = at
            .holder_waits
            .first()
            .filter(|w| w.share >= scalprof_model::locks::HOLDER_WAIT_SHARE)
        else {
            break;
        };
        let link = link_name(w, rows);
        parts.push(if depth == 0 {
            format!(
                "{who} {} was blocked in {link} {:.0}% of the wait",
                h.function,
                w.share * 100.0
            )
        } else {
            format!("whose holder was blocked in {link} {:.0}%", w.share * 100.0)
        });
        let HeldWait::Lock(name) = &w.on else { break };
        if visited.contains(&name.as_str()) {
            break;
        }
        visited.push(name);
        match rows.iter().find(|r| &r.name == name) {
            Some(next) => at = next,
            None => break,
        }
    }
    if let Some(r) = row.holder_running.filter(|&r| r >= 0.05) {
        if row.lock_type == LockKind::Sleep {
            parts.push(format!("the others were running {:.0}% of it", r * 100.0));
        } else if parts.is_empty() {
            parts.push(format!(
                "{who} {} was running {:.0}% of the wait",
                h.function,
                r * 100.0
            ));
        } else {
            parts[0] += &format!(", running {:.0}%", r * 100.0);
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    }
}

/// A holder's wait by the row it is in at the same point: a lock by its name, a system
/// call by the row of that call (`disk I/O (fdatasync journal.dat) in journal_append`).
pub(super) fn link_name(w: &scalprof_model::locks::HolderWait, rows: &[LockRow]) -> String {
    let HeldWait::Syscall(call) = &w.on else {
        return format!("lock {}", w.on);
    };
    rows.iter()
        .filter(|r| {
            r.lock_type.is_blocked_wait()
                && CallWait::call_in(&r.lock_type, &r.name) == Some(call.as_str())
        })
        .max_by_key(|r| r.total_wait_ns)
        .map_or_else(|| call.clone(), |r| r.name.clone())
}

/// The main holder of a lock and the wait of its own it spent most of the waiters' wait
/// in, when that is at least a third of it (measured, not inferred from names).
pub(super) fn blocked_holder(row: &LockRow, rows: &[LockRow]) -> Option<(String, String, f64)> {
    if !row.lock_type.is_lock() {
        return None;
    }
    let h = row.holders.first().filter(|h| h.share >= 0.5)?;
    let w = row.holder_waits.first().filter(|w| w.share >= 0.33)?;
    Some((h.function.clone(), link_name(w, rows), w.share))
}

/// A chain: the lock's main holder (at least half the wait) is also the function that
/// blocks in a wait of its own at the same point — the disk, I/O, a sleep — (that row's
/// top caller). Told from the functions, not from times: the holder may block outside the
/// lock, and the text says "if".
pub(super) fn holder_wait<'a>(row: &LockRow, rows: &'a [LockRow]) -> Option<(String, &'a LockRow)> {
    if !row.lock_type.is_lock() {
        return None;
    }
    let h = row.holders.first().filter(|h| h.share >= 0.5)?;
    let wait = rows
        .iter()
        .filter(|r| {
            matches!(
                r.lock_type,
                LockKind::DiskIo | LockKind::Io | LockKind::Sleep | LockKind::Syscall
            ) && r.count >= LOCK_MIN_WAITS
        })
        .find(|r| {
            r.callers
                .first()
                .is_some_and(|c| c.function == h.function && c.share >= 0.5)
        })?;
    Some((h.function.clone(), wait))
}

#[cfg(test)]
#[test]
fn a_long_holder_is_a_lock_s_rare_caller_with_most_of_the_wait() {
    use scalprof_model::locks::LockCaller;
    let c = |f: &str, share: f64| LockCaller {
        function: f.into(),
        share,
        state: None,
        stack: None,
    };
    let mut row = LockRow {
        address: scalprof_model::locks::LockAddress::Traced(0x1),
        count: 100,
        total_wait_ns: 1,
        max_wait_ns: 1,
        callers: vec![c("lookup", 0.97), c("rebuild_index", 0.03)],
        holders: vec![c("rebuild_index", 0.95), c("lookup", 0.05)],
        ..LockRow::new(Scope::User, "index_lock", LockKind::Mutex)
    };
    assert_eq!(long_holder(&row).as_deref(), Some("rebuild_index"));
    assert!(held_text(&row).contains("held in rebuild_index (95% of the wait), lookup (5%"));
    // Below half, the largest holder by a clear margin still is (kmap_lock's flush).
    row.holders = vec![
        c("rebuild_index", 0.45),
        c("lookup", 0.30),
        c("other", 0.25),
    ];
    assert_eq!(long_holder(&row).as_deref(), Some("rebuild_index"));
    // Two holders of nearly equal share: neither is the one the waiters wait behind.
    row.holders = vec![c("rebuild_index", 0.42), c("lookup", 0.40)];
    assert_eq!(long_holder(&row), None);
    row.holders = vec![c("rebuild_index", 0.95), c("lookup", 0.05)];
    // The holder is also the caller (hash_global_mutex's table_lookup): not a long holder.
    row.callers = vec![c("rebuild_index", 1.0)];
    assert_eq!(long_holder(&row), None);
    // A condition variable's waker is whoever signalled it, not a holder to shorten.
    row.callers = vec![c("lookup", 1.0)];
    row.lock_type = LockKind::Condvar;
    assert_eq!(long_holder(&row), None);
}

#[cfg(test)]
#[test]
fn a_wait_chain_is_followed_through_locks_to_depth_three_and_stops_at_a_cycle() {
    use scalprof_model::locks::{HolderWait, LockCaller};
    let link = |wait: &str, lock: bool, share: f64| HolderWait {
        on: if lock {
            HeldWait::Lock(wait.into())
        } else {
            HeldWait::Syscall(wait.into())
        },
        share,
    };
    let row = |name: &str, holder: &str, waits: Vec<HolderWait>| LockRow {
        count: 100,
        total_wait_ns: 1_000_000,
        holders: vec![LockCaller::new(holder, 1.0)],
        holder_waits: waits,
        ..LockRow::new(Scope::User, name, LockKind::Mutex)
    };
    // index_lock's holder waits on cache_lock, whose holder waits on journal_lock, whose
    // holder is in the disk.
    let disk = LockRow {
        total_wait_ns: 5_000_000,
        ..LockRow::new(
            Scope::User,
            "disk I/O (fdatasync journal.dat) in journal_append",
            LockKind::DiskIo,
        )
    };
    let rows = vec![
        row("index_lock", "refresh", vec![link("cache_lock", true, 0.7)]),
        row("cache_lock", "fill", vec![link("journal_lock", true, 0.6)]),
        row(
            "journal_lock",
            "journal_append",
            vec![link("fdatasync", false, 0.8)],
        ),
        disk,
    ];
    let text = chain_text(&rows[0], &rows);
    assert_eq!(
        text,
        "; its holder refresh was blocked in lock cache_lock 70% of the wait, \
         whose holder was blocked in lock journal_lock 60%, \
         whose holder was blocked in disk I/O (fdatasync journal.dat) in journal_append 80%"
    );
    // The last link names the disk row: advice to move the call out of the lock.
    let (h, w, share) = blocked_holder(&rows[2], &rows).unwrap();
    assert_eq!((h.as_str(), share), ("journal_append", 0.8));
    assert!(w.starts_with("disk I/O (fdatasync"));
    // A cycle (a's holder waits on b, b's on a) is cut where it closes.
    let cycle = vec![
        row("a", "f", vec![link("b", true, 0.5)]),
        row("b", "g", vec![link("a", true, 0.5)]),
    ];
    let text = chain_text(&cycle[0], &cycle);
    assert_eq!(text.matches("whose holder").count(), 1, "{text}");
    // Running holders are said as such.
    let mut busy = row("kmap_lock", "flush_all_zero_pkmaps", Vec::new());
    busy.holder_running = Some(0.95);
    assert_eq!(
        chain_text(&busy, &[]),
        "; its holder flush_all_zero_pkmaps was running 95% of the wait"
    );
}
