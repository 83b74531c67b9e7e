//! Naming one execution's locks: kernel lock stacks through kallsyms, user futex
//! addresses through the process's mappings and ELF symbols, and the waiters' copied
//! user stacks unwound with `.eh_frame`. The naming vocabulary (conventional names, wait
//! kinds, what counts as lock machinery) is `scalprof_model::vocabulary`'s.
//!
//! One source of rows per file: `kernel` (contention tracepoints), `user` (futex waits),
//! `syscall` (blocking calls), `runqueue` (waiting for a CPU). What they share lies below
//! them: `rows` (a row's sums), `holders` (who held what was waited for), `stacks` (the
//! copied user stacks) and `calls` (system calls by number).

use std::collections::HashMap;

use scalprof_model::locks::sort_rows;
use scalprof_model::locks::{HeldWait, LockAddress, LockProfile, LockRow, RawLocks};

use crate::profile::{BlameWindow, Blamed, Symbols};

mod calls;
mod go;
mod holders;
mod kernel;
mod rows;
mod runqueue;
mod runtimes;
mod stacks;
mod syscall;
mod user;
use calls::is_sleep_call;
pub use calls::syscall_number;
pub use holders::{BlameKey, HolderSamples};
use kernel::add_kernel_rows;
use runqueue::add_runqueue_row;
pub(crate) use stacks::is_runtime_library;
use syscall::add_syscall_rows;
use user::add_user_rows;

/// Names and aggregates one execution's lock data.
pub fn lock_profile(raw: &RawLocks, symbols: &mut Symbols, on_cpu: &HolderSamples) -> LockProfile {
    let mut rows: Vec<LockRow> = Vec::new();
    add_kernel_rows(raw, &symbols.kernel, &mut rows);
    // The rows whose lock word is in a thread's own memory (Go's idle threads' notes).
    let mut thread_memory = std::collections::HashSet::new();
    let (snapshots, resolved) = add_user_rows(raw, symbols, on_cpu, &mut rows, &mut thread_memory);
    go::add_go_rows(raw, symbols, &mut rows);
    add_syscall_rows(raw, symbols, on_cpu, &mut rows);
    go::mark_runtime_idle(&mut rows, &thread_memory);
    name_futex_links(&mut rows);
    add_runqueue_row(raw, &mut rows);
    sort_rows(&mut rows);
    LockProfile {
        rows,
        failures: raw.failures.clone(),
        snapshots,
        snapshots_resolved: resolved,
        repeats: 1,
        tracer: raw.tracer.clone(),
        attached: raw.attached_comms.clone(),
        runtimes: runtimes::runtimes_seen(raw, symbols),
        // Which repeat this was is the recorder's to say.
        hold_timed_repeats: Vec::new(),
        hold_timing_cost: None,
    }
}

/// The waits whose waker was seen, for the profile to blame its samples on
/// ([`crate::profile::ProfileBuilder::blame`]), and the lock each window's index stands for.
pub fn blame_windows(raw: &RawLocks) -> (Vec<BlameWindow>, Vec<BlameKey>) {
    let mut keys: Vec<BlameKey> = Vec::new();
    let mut index: HashMap<BlameKey, usize> = HashMap::new();
    let mut windows = Vec::new();
    for s in raw
        .snapshots
        .iter()
        .filter(|s| s.wait_ns > 0 && s.start > 0)
    {
        let (holder_tid, key) = match s.waker {
            Some(waker) => (
                Some(waker as i32),
                (s.waiter_tgid, s.uaddr, s.syscall.then_some(s.op)),
            ),
            None if s.syscall && is_sleep_call(s.op) => (None, (s.tgid, s.uaddr, Some(s.op))),
            None => continue,
        };
        let lock = *index.entry(key).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        });
        windows.push(BlameWindow {
            holder_tid,
            waiter_tid: s.tid as i32,
            start: s.start,
            end: s.start.saturating_add(s.wait_ns),
            lock,
        });
    }
    (windows, keys)
}

/// The profile's blamed samples by lock.
pub fn holder_samples(blamed: Blamed, keys: &[BlameKey]) -> HolderSamples {
    blamed
        .into_iter()
        .filter_map(|(i, f)| Some((*keys.get(i)?, f)))
        .collect()
}

/// A holder's wait on a futex that another row names (a server's lock, seen from its
/// client's wait): by that row's name.
fn name_futex_links(rows: &mut [LockRow]) {
    let names: HashMap<u64, String> = rows
        .iter()
        .filter_map(|r| match r.address {
            LockAddress::Traced(a) => Some((a, r.name.clone())),
            _ => None,
        })
        .collect();
    for r in rows.iter_mut() {
        for w in &mut r.holder_waits {
            if let Some(name) = match w.on {
                HeldWait::Futex(a) => names.get(&a),
                _ => None,
            } {
                w.on = HeldWait::Lock(name.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rows::top_caller;
    use super::stacks::waiting_function;
    use super::syscall::{main_waker, stable_fd_name};
    use super::user::condvar_place;
    use super::*;
    use scalprof_model::locks::LockPlace;
    use scalprof_model::vocabulary::untraced_kernel_lock;

    #[test]
    fn the_heaviest_caller_names_a_lock() {
        let callers: HashMap<String, u64> = [("a".to_string(), 5), ("b".to_string(), 9)]
            .into_iter()
            .collect();
        assert_eq!(top_caller(&callers), Some("b"));
    }

    #[test]
    fn a_condvar_is_named_by_where_it_starts_not_by_its_signal_words() {
        let sym = |name: &str, offset| LockPlace::Symbol {
            name: name.into(),
            offset,
        };
        let named = |p: LockPlace| condvar_place(p).to_string();
        assert_eq!(named(sym("gil_cond", 0x28)), "gil_cond");
        assert_eq!(named(sym("gil_cond", 0x2c)), "gil_cond");
        assert_eq!(named(sym("_PyRuntime", 0x1b4)), "_PyRuntime+0x188");
        assert_eq!(named(sym("state", 8)), "state+0x8");
        let heap = LockPlace::Dynamic {
            region: Some(scalprof_model::locks::Region::Heap),
            addr: 0x55e0_1aaf_2ee8,
        };
        assert_eq!(named(heap), "heap 0x55e01aaf2ee8");
    }

    #[test]
    fn a_wait_names_its_peer_only_when_one_waker_did_most_of_it() {
        let w: HashMap<&str, u64> = [("producer", 70), ("kworker/0:1", 30)]
            .into_iter()
            .collect();
        assert_eq!(main_waker(&w), Some("producer"));
        let w: HashMap<&str, u64> = [("a", 50), ("b", 50)].into_iter().collect();
        assert_eq!(main_waker(&w), None);
        // Pipes and sockets by kind (their numbers change every run), files by path.
        assert_eq!(stable_fd_name("pipe:[40261]"), "pipe");
        assert_eq!(stable_fd_name("socket:[77]"), "socket");
        assert_eq!(stable_fd_name("/var/lib/db/wal"), "/var/lib/db/wal");
        assert_eq!(
            stable_fd_name("/var/lib/postgresql/15/main/pg_wal/000000010000000000000004"),
            "/var/lib/postgresql/15/main/pg_wal/*"
        );
        assert_eq!(stable_fd_name("/tmp/deadbeef.db"), "/tmp/deadbeef.db");
        // A file per process: one name.
        assert_eq!(
            stable_fd_name("/srv/sync_server.log.17232"),
            "/srv/sync_server.log.*"
        );
        assert_eq!(stable_fd_name("/srv/tmp_123"), "/srv/tmp_*");
        assert_eq!(stable_fd_name("/srv/db.v2"), "/srv/db.v2");
        // A file made fresh for each run (mkstemp, Python's tempfile): one name for all.
        assert_eq!(
            stable_fd_name("/tmp/willitscale.k2Jd9Q"),
            "/tmp/willitscale.XXXXXX"
        );
        assert_eq!(
            stable_fd_name("/tmp/willitscale.abcdef"),
            "/tmp/willitscale.XXXXXX"
        );
        assert_eq!(stable_fd_name("/tmp/tmpa8x2k9qz"), "/tmp/tmpXXXXXX");
        assert_eq!(
            stable_fd_name("/tmp/willitscale.k2Jd9Q (deleted)"),
            "/tmp/willitscale.XXXXXX (deleted)"
        );
        assert_eq!(stable_fd_name("/srv/lock-Q3kZp1"), "/srv/lock-XXXXXX");
        // Chosen names stay.
        assert_eq!(stable_fd_name("/srv/app.sqlite"), "/srv/app.sqlite");
        assert_eq!(stable_fd_name("/srv/app.sqlite3"), "/srv/app.sqlite3");
        assert_eq!(
            stable_fd_name("/var/lib/app/journal"),
            "/var/lib/app/journal"
        );
        assert_eq!(stable_fd_name("/srv/.123"), "/srv/.123");
        // Kernel locks the tracepoints miss are told from where their waiters block.
        assert_eq!(
            untraced_kernel_lock("__vma_start_write").map(|l| l.0),
            Some("vma lock")
        );
        assert!(untraced_kernel_lock("pipe_read").is_none());
    }

    #[test]
    fn a_stripped_frame_is_named_with_the_named_function_that_called_it() {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            waiting_function(&own(&[
                "libsqlite3.so.0.8.6+0xaa1b4",
                "libsqlite3.so.0.8.6+0x1c0",
                "sqlite3_step",
                "main"
            ]))
            .as_deref(),
            Some("libsqlite3.so.0.8.6+0xaa1b4 under sqlite3_step")
        );
        assert_eq!(
            waiting_function(&own(&["busy_wait_lock", "worker"])).as_deref(),
            Some("busy_wait_lock")
        );
        assert_eq!(
            waiting_function(&own(&["sort+0xb25c"])).as_deref(),
            Some("sort+0xb25c")
        );
        assert_eq!(waiting_function(&[]), None);
    }
}
