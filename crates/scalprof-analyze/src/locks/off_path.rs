//! Waits of threads that do none of the workload's work: a harness's reporter that sleeps
//! between reports, housekeeping threads that take turns on a lock of their own, a pool
//! that waits for jobs it never gets. They are listed with their waits and never scored
//! as the program's cause: whatever they wait for, no thread that does the work waits with
//! them (a worker's wait on the same lock would be part of the row, and its root would
//! carry the samples of the work).
//!
//! The test is the profile's: where a waiting thread began (its outermost program
//! function, recorded only for stacks walked to the thread's start) and how much of the
//! point's on-CPU time ran under that function: some, but under 2%. A root the profile
//! never saw proves nothing (it may be named otherwise there), and keeps the row. A worker's loop, or the `main` of a
//! program that works in its main thread, carries the work; a reporter's `main` beside
//! worker threads, or a `housekeeper`, carries next to none.

use std::collections::HashMap;

use scalprof_model::locks::LockRow;
use scalprof_model::profile::folded;
use scalprof_model::PointProfile;

/// What a row of such waits is attributed to.
pub const OFF_PATH: &str = "threads off the workers' path";

/// A function under which less than this share of the on-CPU time ran does no work.
const WORKLESS: f64 = 0.02;

/// A row whose sampled waits come from such threads for at least this share is theirs.
const OFF_SHARE: f64 = 0.9;

/// Marks the rows whose waiters do none of the work ([`OFF_PATH`]).
pub fn mark_off_path(rows: &mut [LockRow], profile: &PointProfile) {
    let total: u64 = profile.folded.iter().map(|f| f.weight).sum();
    if total == 0 {
        return;
    }
    let mut under: HashMap<String, f64> = HashMap::new();
    for r in rows
        .iter_mut()
        .filter(|r| r.attributed_to.is_none() && !r.waiter_roots.is_empty())
    {
        let off: f64 = r
            .waiter_roots
            .iter()
            .filter(|c| {
                let share = *under
                    .entry(c.function.clone())
                    .or_insert_with(|| on_cpu_under(profile, &c.function, total));
                // Seen running, and little: a root the profile never saw may be named
                // otherwise there (a JIT frame, a walk cut short), so it proves nothing.
                share > 0.0 && share < WORKLESS
            })
            .map(|c| c.share)
            .sum();
        if off >= OFF_SHARE {
            r.attributed_to = Some(OFF_PATH.into());
        }
    }
}

/// The share of the profile's on-CPU time whose stacks pass through `function`.
fn on_cpu_under(profile: &PointProfile, function: &str, total: u64) -> f64 {
    let w: u64 = profile
        .folded
        .iter()
        .filter(|f| folded::user_frames(&f.stack).any(|x| x == function))
        .map(|f| f.weight)
        .sum();
    w as f64 / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::locks::{LockCaller, LockKind, Scope};
    use scalprof_model::FoldedStack;

    fn profile(stacks: &[(&str, u64)]) -> PointProfile {
        PointProfile {
            folded: stacks
                .iter()
                .map(|&(s, w)| FoldedStack {
                    stack: s.into(),
                    samples: w,
                    weight: w,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn row(name: &str, roots: &[(&str, f64)]) -> LockRow {
        LockRow {
            count: 100,
            total_wait_ns: 1_000_000,
            waiter_roots: roots.iter().map(|&(f, s)| LockCaller::new(f, s)).collect(),
            ..LockRow::new(Scope::User, name, LockKind::Syscall)
        }
    }

    #[test]
    fn a_reporter_s_sleep_and_housekeepers_lock_are_off_the_workers_path() {
        // will-it-scale: workers in new_task → testcase; main sleeps between reports.
        let p = profile(&[
            (
                "mmap1;clone3;start_thread;new_task;testcase;munmap_[k]",
                9_000,
            ),
            ("mmap1;__libc_start_main;main;printf", 10),
            ("mmap1;clone3;start_thread;housekeeper;memcpy", 5),
        ]);
        let mut rows = vec![
            row("sleep in main", &[("main", 1.0)]),
            row("stats_lock", &[("housekeeper", 1.0)]),
            // A worker's wait, and a lock both kinds of thread wait on.
            row("table_lock", &[("new_task", 1.0)]),
            row("shared", &[("new_task", 0.5), ("housekeeper", 0.5)]),
            // A root the profile never saw (a JIT frame named otherwise there).
            row("monitor", &[("void Counter.run()", 1.0)]),
            // No root known (a stack not walked to its start): left as it is.
            row("cut", &[]),
        ];
        mark_off_path(&mut rows, &p);
        let off: Vec<&str> = rows
            .iter()
            .filter(|r| r.attributed_to.as_deref() == Some(OFF_PATH))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(off, ["sleep in main", "stats_lock"]);
    }

    #[test]
    fn a_program_that_works_in_its_main_thread_keeps_its_waits() {
        let p = profile(&[("journal;_start;main;append;write_[k]", 1_000)]);
        let mut rows = vec![row("fdatasync", &[("main", 1.0)])];
        mark_off_path(&mut rows, &p);
        assert!(rows[0].attributed_to.is_none());
    }
}
