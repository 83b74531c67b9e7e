//! The aggregation maps read back once the workload has exited, each entry decoded as the
//! skeleton's generated types.

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};
use scalprof_model::locks::{
    GoSema, GoWaitRaw, KernelHoldRaw, RunQueueBehind, RunQueueRaw, SyscallStackRaw, WakerRaw,
};

use super::skel::types::{
    comm, go_key, kkey, mmap_hold_key, mmap_hold_stat, rq_behind, rq_key, skey, stack_depth, stat,
    ukey, wkey, wstat,
};
use super::skel::LocksMaps;
use super::{decode, Plain};
use crate::locks::{
    spread_over_stacks, u64_at, KernelLockRaw, LockFailures, RawLocks, UserLockRaw,
};

/// Kernel stack depth recorded per contention (`enum stack_depth` of the BPF program).
const STACK_DEPTH: usize = stack_depth::STACK_DEPTH.0 as usize;

/// Reads the loaded programs' maps, counting the entries it cannot decode.
pub(super) struct MapReader<'a, 'obj> {
    maps: &'a LocksMaps<'obj>,
    /// Entries that could not be read back or decoded: counted, not silently skipped.
    undecoded: u64,
}

impl<'a, 'obj> MapReader<'a, 'obj> {
    /// A reader of these maps, nothing counted yet.
    pub fn new(maps: &'a LocksMaps<'obj>) -> Self {
        MapReader { maps, undecoded: 0 }
    }

    /// Every table the programs aggregated, and their failure counters; what the drain
    /// saw while the workload ran is left to the caller.
    pub fn read_all(mut self) -> RawLocks {
        let maps = self.maps;
        let mut idle = IdleWakeups::default();
        let user = self.user_rows(&maps.user_locks, &mut idle);
        let syscalls = self.user_rows(&maps.syscall_waits, &mut idle);
        let mut runqueue = self.runqueue();
        runqueue.extend(idle.rows());
        let mut out = RawLocks {
            kernel: self.kernel_locks(),
            kernel_wakers: self.kernel_wakers(),
            user,
            syscalls,
            syscall_stacks: self.syscall_stacks(),
            wakers: self.wakers(),
            waker_comms: self.waker_comms(),
            runqueue,
            kernel_holds: self.mmap_holds(),
            go_waits: self.go_rows(&maps.go_waits),
            go_wakers: self.go_rows(&maps.go_wakers),
            ..Default::default()
        };
        out.failures = self.failures();
        out
    }

    /// The sleeping kernel locks: the exact totals spread over the sampled stacks.
    fn kernel_locks(&mut self) -> Vec<KernelLockRaw> {
        let totals: Vec<_> = entries(&self.maps.kernel_locks, &mut self.undecoded)
            .iter()
            .map(|(k, v)| kernel_row(k, v, Vec::new()))
            .collect();
        let sampled: Vec<_> = entries(&self.maps.kernel_stacks, &mut self.undecoded)
            .iter()
            .map(|(k, v)| kernel_row(k, v, self.stack(k.stack_id)))
            .collect();
        spread_over_stacks(&totals, &sampled)
    }

    /// Who released sleeping kernel locks to sampled waiters, by the waker's stack.
    fn kernel_wakers(&mut self) -> Vec<KernelLockRaw> {
        entries(&self.maps.kernel_wakers, &mut self.undecoded)
            .iter()
            .map(|(k, v)| kernel_row(k, v, self.stack(k.stack_id)))
            .collect()
    }

    /// The futex waits, or the other blocking system calls: both are keyed alike. The
    /// latencies of their wakeups onto idle CPUs, which they include, go to `idle` too.
    fn user_rows(&mut self, map: &dyn MapCore, idle: &mut IdleWakeups) -> Vec<UserLockRaw> {
        entries(map, &mut self.undecoded)
            .into_iter()
            .map(|(k, v): (ukey, wstat)| {
                idle.add(k.tgid, &v);
                UserLockRaw {
                    uaddr: k.uaddr,
                    tgid: k.tgid,
                    op: k.op,
                    count: v.count,
                    total_ns: v.total_ns,
                    max_ns: agreed_max(v.count, v.total_ns, v.max_ns),
                }
            })
            .collect()
    }

    /// The goroutines' waits on the Go runtime's semaphores, by parked (or releasing)
    /// user stack.
    fn go_rows(&mut self, map: &dyn MapCore) -> Vec<GoWaitRaw> {
        entries(map, &mut self.undecoded)
            .into_iter()
            .map(|(k, v): (go_key, stat)| GoWaitRaw {
                addr: k.addr,
                tgid: k.tgid,
                kind: GoSema::from_cookie(k.kind),
                sampled: k.stack_id >= 0,
                stack: self.stack(k.stack_id),
                count: v.count,
                total_ns: v.total_ns,
                max_ns: agreed_max(v.count, v.total_ns, v.max_ns),
            })
            .collect()
    }

    /// The sampled system-call waits with the kernel stack they blocked in.
    fn syscall_stacks(&mut self) -> Vec<SyscallStackRaw> {
        entries(&self.maps.syscall_stacks, &mut self.undecoded)
            .into_iter()
            .map(|(k, v): (skey, stat)| SyscallStackRaw {
                uaddr: k.uaddr,
                tgid: k.tgid,
                op: k.op,
                stack: self.stack(k.stack_id),
                count: v.count,
                total_ns: v.total_ns,
            })
            .collect()
    }

    /// Who woke the sampled system-call waits.
    fn wakers(&mut self) -> Vec<WakerRaw> {
        entries(&self.maps.wakers, &mut self.undecoded)
            .into_iter()
            .map(|(k, v): (wkey, stat)| WakerRaw {
                uaddr: k.uaddr,
                tgid: k.tgid,
                op: k.op,
                waker: k.waker,
                count: v.count,
                total_ns: v.total_ns,
            })
            .collect()
    }

    /// The command names of the traced processes, waiting and waking, by tgid.
    fn waker_comms(&mut self) -> HashMap<u32, String> {
        entries(&self.maps.waker_comms, &mut self.undecoded)
            .into_iter()
            .map(|(tgid, c): (u32, comm)| {
                let bytes: Vec<u8> = c
                    .name
                    .iter()
                    .map(|&b| b as u8)
                    .take_while(|&b| b != 0)
                    .collect();
                (tgid, String::from_utf8_lossy(&bytes).into_owned())
            })
            .collect()
    }

    /// The waits for a CPU, per process and by who had it.
    fn runqueue(&mut self) -> Vec<RunQueueRaw> {
        entries(&self.maps.runqueue, &mut self.undecoded)
            .into_iter()
            .map(|(k, v): (rq_key, stat)| RunQueueRaw {
                tgid: k.tgid,
                behind: match rq_behind(k.behind) {
                    rq_behind::RQ_OTHER => RunQueueBehind::Other,
                    rq_behind::RQ_OBSERVER => RunQueueBehind::Observer,
                    rq_behind::RQ_IDLE => RunQueueBehind::IdleWakeup,
                    _ => RunQueueBehind::Own,
                },
                count: v.count,
                total_ns: v.total_ns,
                max_ns: agreed_max(v.count, v.total_ns, v.max_ns),
            })
            .collect()
    }

    /// How long the traced processes held their mmap_lock, per process and side.
    fn mmap_holds(&mut self) -> Vec<KernelHoldRaw> {
        entries(&self.maps.mmap_holds, &mut self.undecoded)
            .into_iter()
            .map(|(k, v): (mmap_hold_key, mmap_hold_stat)| KernelHoldRaw {
                tgid: k.tgid,
                // The lock the contention tracepoints report: the mm's mmap_lock.
                mm: k.mm,
                write: k.write != 0,
                count: v.count,
                total_ns: v.total_ns,
                max_ns: agreed_max(v.count, v.total_ns, v.max_ns),
                buckets: v.buckets.to_vec(),
            })
            .collect()
    }

    /// The programs' failure counters, with the entries read here that did not decode.
    fn failures(&self) -> LockFailures {
        let mut failures = LockFailures::default();
        if let Some(bss) = self.maps.bss_data.as_deref() {
            failures = LockFailures {
                task_map_full: bss.fail_task_map,
                stack_failures: bss.fail_stack,
                aggregation_map_full: bss.fail_agg_map,
                nested: bss.fail_nested,
                lost_snapshots: bss.lost_snapshots,
                undecoded: 0,
            };
        }
        failures.undecoded = self.undecoded;
        failures
    }

    /// A kernel stack of the stack-trace map, innermost first (empty for a failed unwind).
    fn stack(&self, id: i32) -> Vec<u64> {
        if id < 0 {
            return Vec::new();
        }
        self.maps
            .stacks
            .lookup(&(id as u32).to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .map(|b| {
                (0..STACK_DEPTH)
                    .filter_map(|i| u64_at(&b, i * 8))
                    .take_while(|&a| a != 0)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The latencies of the wakeups onto idle CPUs (until the woken task ran), per process:
/// the programs keep them in each wait's entry (one lookup a wait), the run document has
/// them as one `wakeup:idle` row per process.
#[derive(Default)]
struct IdleWakeups(HashMap<u32, (u64, u64, u64)>);

impl IdleWakeups {
    fn add(&mut self, tgid: u32, v: &wstat) {
        if v.idle_count == 0 {
            return;
        }
        let e = self.0.entry(tgid).or_default();
        e.0 += v.idle_count;
        e.1 += v.idle_ns;
        e.2 = e.2.max(v.idle_max_ns);
    }

    fn rows(self) -> impl Iterator<Item = RunQueueRaw> {
        let mut rows: Vec<_> = self.0.into_iter().collect();
        rows.sort_unstable_by_key(|&(tgid, _)| tgid);
        rows.into_iter()
            .map(|(tgid, (count, total_ns, max_ns))| RunQueueRaw {
                tgid,
                behind: RunQueueBehind::IdleWakeup,
                count,
                total_ns,
                max_ns: agreed_max(count, total_ns, max_ns),
            })
    }
}

/// An entry's longest wait, in agreement with its average. The programs add to an entry
/// from every CPU at once, and the longest wait is raised without an atomic compare (a
/// raise can be lost), and a read while a wait is being added can see the total after it
/// and the count before it: either leaves `total / count` above `max`. The longest wait
/// is then at least the average, and no more is assumed (a 21.1 µs maximum beside one
/// wait of 21.6 µs in all was read in CI).
pub(crate) fn agreed_max(count: u64, total_ns: u64, max_ns: u64) -> u64 {
    max_ns.max(total_ns.div_ceil(count.max(1)))
}

/// A kernel lock's row: its key and totals, with the stack the key names (if read).
fn kernel_row(k: &kkey, v: &stat, stack: Vec<u64>) -> KernelLockRaw {
    KernelLockRaw {
        lock: k.lock,
        tgid: k.tgid,
        flags: k.flags,
        stack,
        count: v.count,
        total_ns: v.total_ns,
        max_ns: agreed_max(v.count, v.total_ns, v.max_ns),
    }
}

/// Every entry of an aggregation map, decoded as the generated key and value types;
/// entries that cannot be read back or are not of those sizes are counted in `undecoded`.
fn entries<K: Plain, V: Plain>(map: &dyn MapCore, undecoded: &mut u64) -> Vec<(K, V)> {
    let mut out = Vec::new();
    for key in map.keys() {
        let decoded = map
            .lookup(&key, MapFlags::ANY)
            .ok()
            .flatten()
            .and_then(|val| Some((decode::<K>(&key)?, decode::<V>(&val)?)));
        match decoded {
            Some(kv) => out.push(kv),
            None => *undecoded += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{agreed_max, wstat, IdleWakeups, RunQueueBehind};

    #[test]
    fn wakeups_onto_idle_cpus_are_one_row_per_process_from_the_waits_entries() {
        let w = |count, idle_count, idle_ns, idle_max_ns| wstat {
            count,
            total_ns: 1_000_000,
            max_ns: 1_000,
            idle_count,
            idle_ns,
            idle_max_ns,
        };
        let mut idle = IdleWakeups::default();
        // A futex and a read of process 7, a sleep of process 3 never woken onto an idle
        // CPU: one row, of 7's two entries.
        idle.add(7, &w(10, 4, 4_000, 2_000));
        idle.add(7, &w(5, 1, 500, 500));
        idle.add(3, &w(8, 0, 0, 0));
        let rows: Vec<_> = idle.rows().collect();
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0];
        assert_eq!((r.tgid, r.behind), (7, RunQueueBehind::IdleWakeup));
        assert_eq!((r.count, r.total_ns, r.max_ns), (5, 4_500, 2_000));
    }

    #[test]
    fn a_torn_or_lost_maximum_is_raised_to_the_average() {
        // Read with the second wait's time and not its count: one wait of 21,553 ns.
        assert_eq!(agreed_max(1, 21_553, 21_138), 21_553);
        // A lost raise: two waits of 1,000 ns in all, the maximum left at 100.
        assert_eq!(agreed_max(2, 1_000, 100), 500);
        assert_eq!(agreed_max(3, 1_000, 900), 900);
        assert_eq!(agreed_max(0, 0, 0), 0);
    }
}
