//! CPU time that processes outside the workload took while it ran: each process's user and
//! system time (`/proc/PID/stat`, whole process, all threads) read just before a repeat
//! starts and just after it is reaped, outside its timed window. The workload's own
//! processes do not exist before it starts, and scalprof's own time is its overhead, so
//! what grew in between is the other processes'.
//!
//! A process that started during the repeat and still runs after it counts all its time
//! (a package manager's `mandb` started mid-sweep), unless it descends from scalprof
//! (its parsers, or the workload's orphans, whose subreaper scalprof is). One that
//! started and ended inside the repeat is not seen. The kernel's threads are left out.

use std::collections::HashMap;
use std::path::Path;

use scalprof_model::{ForeignProcess, Interference};

/// At most this many processes are named per repeat.
const NAMED: usize = 5;

/// Every process's command name and CPU time at one moment.
pub struct Snapshot {
    /// pid → what `/proc/PID/stat` said of it.
    cpu: HashMap<i32, Stat>,
    /// When it was read: the CPU time between two snapshots is judged against the time
    /// between them (the repeat's wall time, plus starting and reaping it).
    at: std::time::Instant,
    /// Clock ticks the hypervisor gave other virtual machines, all CPUs together.
    steal: u64,
}

impl Snapshot {
    /// Reads `/proc` now.
    pub fn take() -> Snapshot {
        Snapshot::take_in(Path::new("/proc"))
    }

    fn take_in(proc: &Path) -> Snapshot {
        let at = std::time::Instant::now();
        let steal = std::fs::read_to_string(proc.join("stat"))
            .ok()
            .and_then(|t| steal_ticks(&t))
            .unwrap_or(0);
        let mut cpu = HashMap::new();
        for (pid, path) in crate::processes(proc) {
            let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
                continue; // exited meanwhile
            };
            if let Some(entry) = parse_stat(&stat) {
                cpu.insert(pid, entry);
            }
        }
        Snapshot { cpu, at, steal }
    }

    /// What the processes of `before` that still run used since then, less those in
    /// `exclude` (scalprof, the processes observed with --attach), as an interference
    /// on a workload that could use `demand` of the `cpus` CPUs.
    pub fn since(
        &self,
        before: &Snapshot,
        exclude: &[i32],
        cpus: u32,
        demand: f64,
    ) -> Interference {
        let window_s = self.at.saturating_duration_since(before.at).as_secs_f64();
        self.over(before, exclude, window_s, cpus, demand)
    }

    /// [`Snapshot::since`] over a window of `window_s` seconds.
    fn over(
        &self,
        before: &Snapshot,
        exclude: &[i32],
        window_s: f64,
        cpus: u32,
        demand: f64,
    ) -> Interference {
        let tick = ticks_per_second();
        let mut used: Vec<ForeignProcess> = self
            .cpu
            .iter()
            .filter(|(pid, _)| !self.descends_from(**pid, exclude))
            .filter_map(|(&pid, now)| {
                // Running before, or started since (all its time is then the window's).
                let then = match before.cpu.get(&pid) {
                    Some(then) if then.start == now.start => then.ticks,
                    _ => 0,
                };
                let ticks = now.ticks.checked_sub(then).filter(|&t| t > 0)?;
                Some(ForeignProcess {
                    comm: now.comm.clone(),
                    pid,
                    cpu_s: ticks as f64 / tick,
                })
            })
            .collect();
        // Each count is read at a clock tick's resolution: one tick less than a process
        // seems to have used is what it surely used. Without it, a 2 ms repeat would
        // count a process's single tick as half of a CPU.
        let foreign_cpu_s: f64 = used.iter().map(|p| (p.cpu_s - 1.0 / tick).max(0.0)).sum();
        used.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.pid.cmp(&b.pid)));
        used.truncate(NAMED);
        Interference {
            // A point's figure (the largest of its repeats' shares): none for one repeat.
            peak: 0.0,
            share: Interference::share_of(foreign_cpu_s, window_s, cpus, demand),
            processes: used,
            disturbed: 0,
            steal_s: self.steal.saturating_sub(before.steal) as f64 / tick,
        }
    }
}

impl Snapshot {
    /// Whether `pid` is one of `roots` or descends from one, by the parents this
    /// snapshot read (a chain is followed at most 64 deep).
    fn descends_from(&self, pid: i32, roots: &[i32]) -> bool {
        let mut at = pid;
        for _ in 0..64 {
            if roots.contains(&at) {
                return true;
            }
            match self.cpu.get(&at) {
                Some(s) if s.ppid > 0 && s.ppid != at => at = s.ppid,
                _ => return false,
            }
        }
        false
    }
}

/// One process as `/proc/PID/stat` tells it.
#[derive(Clone, Debug, PartialEq)]
struct Stat {
    comm: String,
    ppid: i32,
    /// When it started, in clock ticks after boot: a reused pid is another process.
    start: u64,
    /// User + system clock ticks.
    ticks: u64,
}

/// `pid (comm) state ppid … flags … utime stime … starttime` as a [`Stat`], `None` for a
/// kernel thread. The name may hold spaces and parentheses: it ends at the last `)`.
///
/// Kernel threads are left out: most of their time during a repeat is the workload's own
/// work done for it (journal commits in jbd2, writeback and softirqs), not interference.
fn parse_stat(stat: &str) -> Option<Stat> {
    /// `PF_KTHREAD` in `include/linux/sched.h`.
    const PF_KTHREAD: u64 = 0x0020_0000;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    // After the name: state(0) ppid(1) pgrp session tty tpgid flags(6) minflt cminflt
    // majflt cmajflt utime(11) stime(12) cutime cstime priority nice num_threads
    // itrealvalue starttime(19).
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().take(20).collect();
    let flags: u64 = fields.get(6)?.parse().ok()?;
    if flags & PF_KTHREAD != 0 {
        return None;
    }
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Stat {
        comm,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19).and_then(|f| f.parse().ok()).unwrap_or(0),
        ticks: utime + stime,
    })
}

/// The steal column of `/proc/stat`'s first line (`cpu user nice system idle iowait irq
/// softirq steal …`): ticks of all CPUs together.
fn steal_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// Clock ticks per second (`_SC_CLK_TCK`; 100 where it cannot be read).
pub(crate) fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc` with the given processes; a name starting with `k:` is a kernel thread.
    fn fake_proc(procs: &[(i32, &str, u64)]) -> tempfile::TempDir {
        let with_parent: Vec<(i32, &str, u64, i32)> =
            procs.iter().map(|&(p, c, t)| (p, c, t, 1)).collect();
        fake_proc_of(&with_parent)
    }

    /// [`fake_proc`] with each process's parent.
    fn fake_proc_of(procs: &[(i32, &str, u64, i32)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for &(pid, comm, ticks, ppid) in procs {
            let p = dir.path().join(pid.to_string());
            std::fs::create_dir(&p).unwrap();
            let flags = if comm.starts_with("k:") {
                0x0020_8040
            } else {
                0x0040_0100
            };
            std::fs::write(
                p.join("stat"),
                format!(
                    "{pid} ({comm}) R {ppid} 1 1 0 -1 {flags} 0 0 0 0 {ticks} 0 0 0 20 0 1 0 7"
                ),
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn steal_is_the_eighth_column_of_all_cpus() {
        let stat = "cpu  4225785 2749 1431951 3257226 63219 0 17936 262469 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(steal_ticks(stat), Some(262_469));
        // A kernel too old to count it.
        assert_eq!(steal_ticks("cpu  1 2 3 4\n"), None);
    }

    #[test]
    fn what_other_processes_used_during_a_repeat_is_named_and_shared() {
        let tick = ticks_per_second();
        let t = |s: f64| (s * tick) as u64;
        let before = Snapshot::take_in(
            fake_proc(&[
                (10, "spin (x) y", t(1.0)),
                (11, "idle", 5),
                (12, "scalprof", 0),
            ])
            .path(),
        );
        let after = Snapshot::take_in(
            fake_proc(&[
                (10, "spin (x) y", t(2.0)),
                (11, "idle", 5),
                (12, "scalprof", t(0.5)),
                // A kernel thread doing the workload's journal commits: not foreign.
                (14, "k:jbd2/sda1-8", t(0.8)),
            ])
            .path(),
        );
        // 1 s of wall, 2 CPUs, both wanted by the workload: the spinner took half (less
        // the tick its count may be off by).
        let i = after.over(&before, &[12], 1.0, 2, 2.0);
        assert!((i.share - 0.5).abs() < 0.02, "{i:?}");
        // One tick in a short window is within a tick's uncertainty: nothing taken.
        let short = Snapshot::take_in(fake_proc(&[(10, "spin (x) y", t(1.0) + 1)]).path());
        assert_eq!(short.over(&before, &[], 0.002, 2, 2.0).share, 0.0);
        assert_eq!(i.processes.len(), 1);
        assert_eq!(i.processes[0].comm, "spin (x) y");
        assert_eq!(i.processes[0].pid, 10);
        assert!(i.is_disturbed());
        // With one thread, the spinner had the CPU the workload left idle.
        assert_eq!(after.over(&before, &[12], 1.0, 2, 1.0).share, 0.0);
    }

    #[test]
    fn a_process_started_during_the_repeat_counts_unless_it_is_scalprof_s() {
        let tick = ticks_per_second();
        let t = |s: f64| (s * tick) as u64;
        let before = Snapshot::take_in(fake_proc_of(&[(12, "scalprof", 0, 1)]).path());
        let after = Snapshot::take_in(
            fake_proc_of(&[
                (12, "scalprof", t(0.1), 1),
                // A package manager's job, started mid-repeat: a burst of 0.4 s.
                (20, "mandb", t(0.4), 1),
                // scalprof's parser child, and the workload's orphan and its child.
                (21, "scalprof", t(0.2), 12),
                (22, "daemon", t(0.3), 12),
                (23, "worker", t(0.3), 22),
            ])
            .path(),
        );
        let i = after.over(&before, &[12], 1.0, 2, 2.0);
        assert_eq!(i.processes.len(), 1, "{i:?}");
        assert_eq!(i.processes[0].comm, "mandb");
        assert!((i.share - 0.2).abs() < 0.02, "{i:?}");
    }
}
