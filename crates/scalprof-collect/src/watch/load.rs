//! How many of a server's threads are busy: the concurrency of a watch window.
//!
//! Busy means running, runnable, or waiting on a lock, a hand-off or the kernel — not
//! waiting for work. The first two are exact: each thread's time on a CPU and in its run
//! queue (`/proc/PID/task/TID/schedstat`), read at the window's ends. Its sleeps count as
//! busy when they are short ([`SHORT_SLEEP`] on average between two runs: a contended
//! lock's waits, a request's round trip), and otherwise as far as samples of its state
//! find it waiting on a lock ([`waiting_threads`]): asleep in the kernel's
//! uninterruptible state (a kernel lock, the disk), or in a futex wait of the kind a mutex
//! takes (`FUTEX_WAIT`, `FUTEX_LOCK_PI`); a condition variable's or semaphore's wait
//! (`FUTEX_WAIT_BITSET`, glibc's), `poll`, `epoll_wait`, `nanosleep` or `accept` is a wait
//! for work. (Samples alone miss short waits where the sampler takes a CPU the waiter
//! would have slept on: it is then seen runnable.)

use std::collections::HashMap;

/// A thread whose sleeps average less than this between two runs is busy while asleep.
pub const SHORT_SLEEP: f64 = 0.001;

/// A thread, by process and thread id.
pub type ThreadId = (i32, i32);

/// One thread's counters at an instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ThreadTimes {
    on_cpu_ns: u64,
    queued_ns: u64,
    /// Times it was put on a CPU (schedstat's third field).
    slices: u64,
    /// Clock ticks (`utime`, `stime` of its stat).
    user_ticks: u64,
    sys_ticks: u64,
}

/// Every thread of the watched processes at an instant, and each process's CPU time in
/// clock ticks (user, system), which keeps what its exited threads ran.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    threads: HashMap<ThreadId, ThreadTimes>,
    processes: HashMap<i32, (u64, u64)>,
}

/// What the watched processes' threads did between two snapshots, in seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Busy {
    pub on_cpu_s: f64,
    pub queued_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Per thread: time on a CPU or in its run queue, and times put on a CPU.
    pub threads: Vec<(ThreadId, f64, u64)>,
}

impl Busy {
    /// The mean number of busy threads over `wall_s`, with `blocked(thread)` the share of
    /// samples that found the thread waiting on a lock or the kernel.
    pub fn concurrency(&self, wall_s: f64, blocked: impl Fn(ThreadId) -> f64) -> f64 {
        if wall_s <= 0.0 {
            return 0.0;
        }
        self.threads
            .iter()
            .map(|&(thread, run_s, slices)| {
                let run = (run_s / wall_s).min(1.0);
                let asleep = 1.0 - run;
                let short_sleeps = slices >= 2 && asleep * wall_s / slices as f64 <= SHORT_SLEEP;
                let waiting = if short_sleeps {
                    asleep
                } else {
                    blocked(thread).min(asleep)
                };
                run + waiting
            })
            .sum()
    }
}

impl Snapshot {
    /// The threads of `pids` now.
    pub fn take(pids: &[i32]) -> Snapshot {
        let mut threads = HashMap::new();
        let mut processes = HashMap::new();
        for &pid in pids {
            // The process first: a thread that exits between the two reads is then in
            // neither, rather than in both.
            if let Some(ticks) = stat_ticks(&format!("/proc/{pid}/stat")) {
                processes.insert(pid, ticks);
            }
            for tid in tasks(pid) {
                if let Some(t) = read_thread(pid, tid) {
                    threads.insert((pid, tid), t);
                }
            }
        }
        Snapshot { threads, processes }
    }

    /// What happened since `before`. A thread not in `before` started since (its whole
    /// time counts). Threads that exited since (a server's thread per request lives
    /// milliseconds) are in no snapshot: what their process's CPU time grew by beyond its
    /// live threads' is theirs, counted on a CPU as the thread `(pid, 0)`.
    pub fn since(&self, before: &Snapshot) -> Busy {
        let tick = crate::interference::ticks_per_second();
        let mut busy = Busy::default();
        let mut live: HashMap<i32, (u64, u64)> = HashMap::new();
        for (key, now) in &self.threads {
            let was = before.threads.get(key).copied().unwrap_or_default();
            let on_cpu_s = now.on_cpu_ns.saturating_sub(was.on_cpu_ns) as f64 / 1e9;
            let queued_s = now.queued_ns.saturating_sub(was.queued_ns) as f64 / 1e9;
            busy.on_cpu_s += on_cpu_s;
            busy.queued_s += queued_s;
            busy.threads.push((
                *key,
                on_cpu_s + queued_s,
                now.slices.saturating_sub(was.slices),
            ));
            let (user, sys) = (
                now.user_ticks.saturating_sub(was.user_ticks),
                now.sys_ticks.saturating_sub(was.sys_ticks),
            );
            busy.user_s += user as f64 / tick;
            busy.sys_s += sys as f64 / tick;
            let l = live.entry(key.0).or_default();
            *l = (l.0 + user, l.1 + sys);
        }
        for (&pid, &(user, sys)) in &self.processes {
            let (was_user, was_sys) = before.processes.get(&pid).copied().unwrap_or_default();
            let (live_user, live_sys) = live.get(&pid).copied().unwrap_or_default();
            let (grew_user, grew_sys) =
                (user.saturating_sub(was_user), sys.saturating_sub(was_sys));
            // By the total: the kernel splits a process's time between user and system
            // apart from each thread's, so the parts need not add up where the sums do.
            let gone = (grew_user + grew_sys).saturating_sub(live_user + live_sys);
            if gone == 0 {
                continue;
            }
            let gone_s = gone as f64 / tick;
            let user_part = grew_user as f64 / (grew_user + grew_sys) as f64;
            busy.user_s += gone_s * user_part;
            busy.sys_s += gone_s * (1.0 - user_part);
            busy.on_cpu_s += gone_s;
            busy.threads.push(((pid, 0), gone_s, 0));
        }
        busy
    }
}

/// How a sleeping thread waits, from its state and system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// On a lock or the kernel: busy.
    Blocked,
    /// For work (or not asleep): not counted.
    Idle,
    /// Its system call could not be read (another user's process, ptrace rules).
    Unknown,
}

/// The threads of `pids` that wait on a lock or the kernel now, and how many sleeping
/// threads' waits could not be read.
pub fn waiting_threads(pids: &[i32]) -> (Vec<ThreadId>, u32) {
    let (mut blocked, mut unknown) = (Vec::new(), 0);
    for &pid in pids {
        for tid in tasks(pid) {
            match thread_waiting(pid, tid) {
                Waiting::Blocked => blocked.push((pid, tid)),
                Waiting::Unknown => unknown += 1,
                Waiting::Idle => {}
            }
        }
    }
    (blocked, unknown)
}

fn thread_waiting(pid: i32, tid: i32) -> Waiting {
    let dir = format!("/proc/{pid}/task/{tid}");
    let Ok(stat) = std::fs::read_to_string(format!("{dir}/stat")) else {
        return Waiting::Idle; // exited
    };
    match state_of(&stat) {
        Some('D') => Waiting::Blocked,
        Some('S') => match std::fs::read_to_string(format!("{dir}/syscall")) {
            Ok(call) => classify_syscall(&call),
            Err(_) => Waiting::Unknown,
        },
        _ => Waiting::Idle,
    }
}

/// x86-64's and arm64's numbers of `futex`.
#[cfg(target_arch = "x86_64")]
const SYS_FUTEX: u64 = 202;
#[cfg(target_arch = "aarch64")]
const SYS_FUTEX: u64 = 98;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SYS_FUTEX: u64 = u64::MAX;

/// A sleeping thread's `/proc/…/syscall` ("202 0x7f… 0x80 …": the call and its
/// arguments in hex): a futex wait of a mutex's kind is a lock wait.
pub(crate) fn classify_syscall(line: &str) -> Waiting {
    let mut fields = line.split_whitespace();
    let Some(number) = fields.next().and_then(|n| n.parse::<u64>().ok()) else {
        return Waiting::Idle; // "running", or -1 (not in a system call)
    };
    if number != SYS_FUTEX {
        return Waiting::Idle;
    }
    let op = fields
        .nth(1)
        .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    // FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME aside: WAIT (0), LOCK_PI (6),
    // LOCK_PI2 (13) are a lock's; WAIT_BITSET (9), a condition variable's or semaphore's.
    match op.map(|op| op & 0x7f) {
        Some(0 | 6 | 13) => Waiting::Blocked,
        _ => Waiting::Idle,
    }
}

/// Whether process `pid` has exited (gone, or a zombie its parent has not reaped).
pub fn exited(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| state_of(&stat))
        .is_none_or(|state| state == 'Z' || state == 'X')
}

/// The state letter of a `/proc/…/stat` line (after the command name in parentheses).
fn state_of(stat: &str) -> Option<char> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().next()?.chars().next()
}

fn read_thread(pid: i32, tid: i32) -> Option<ThreadTimes> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let sched = std::fs::read_to_string(format!("{dir}/schedstat")).ok()?;
    let mut s = sched.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (on_cpu_ns, queued_ns, slices) = (s.next()??, s.next()??, s.next()??);
    let (user_ticks, sys_ticks) = stat_ticks(&format!("{dir}/stat"))?;
    Some(ThreadTimes {
        on_cpu_ns,
        queued_ns,
        slices,
        user_ticks,
        sys_ticks,
    })
}

/// `utime` and `stime` of a `/proc/…/stat` file, in clock ticks: a thread's, or for
/// `/proc/PID/stat` its whole process's, the threads that exited included.
fn stat_ticks(path: &str) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // After the state: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime (fields 14 and 15 of proc(5)).
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// The thread ids of a process (none once it exited).
fn tasks(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutex_wait_is_busy_and_a_condition_variables_is_not() {
        let wait = "202 0x55d0c0a4c040 0x80 0x2 0x0 0x0 0x0 0x7ffd5a1c8f40 0x7f3a4a8e2d2b";
        let bitset = "202 0x55d0c0a4c0c8 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd 0x7f3a";
        let pi = "202 0x55d0c0a4c040 0x86 0x0 0x0 0x0 0x0 0x7ffd 0x7f3a";
        let nanosleep = "230 0x1 0x0 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f3a";
        if SYS_FUTEX == 202 {
            assert_eq!(classify_syscall(wait), Waiting::Blocked);
            assert_eq!(classify_syscall(pi), Waiting::Blocked);
        }
        assert_eq!(classify_syscall(bitset), Waiting::Idle);
        assert_eq!(classify_syscall(nanosleep), Waiting::Idle);
        assert_eq!(classify_syscall("running"), Waiting::Idle);
        assert_eq!(classify_syscall("-1 0x7ffd 0x7f3a"), Waiting::Idle);
    }

    /// The tests that time this process's own threads, one after the other.
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        TURN.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn a_spinning_thread_of_this_process_is_on_a_cpu_for_the_window() {
        let _turn = one_at_a_time();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let pid = std::process::id() as i32;
        let before = Snapshot::take(&[pid]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let busy = Snapshot::take(&[pid]).since(&before);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spin.join().unwrap();
        // One thread spins; on a busy machine it also waits in its run queue. (Threads of
        // other tests of this process come and go meanwhile: the spinner is the one.)
        let running = busy
            .threads
            .iter()
            .filter(|(thread, _, _)| thread.1 != 0)
            .map(|t| t.1)
            .fold(0.0, f64::max);
        assert!((0.25..0.6).contains(&running), "{busy:?}");
        assert!(busy.user_s > 0.1, "{busy:?}");
    }

    #[test]
    fn threads_that_start_and_exit_inside_the_window_count_on_a_cpu() {
        let _turn = one_at_a_time();
        let pid = std::process::id() as i32;
        let before = Snapshot::take(&[pid]);
        // A thread per request: six of them, each busy 50 ms, none alive at the end.
        for _ in 0..6 {
            std::thread::spawn(|| {
                let t = std::time::Instant::now();
                while t.elapsed() < std::time::Duration::from_millis(50) {
                    std::hint::spin_loop();
                }
            })
            .join()
            .unwrap();
        }
        let busy = Snapshot::take(&[pid]).since(&before);
        // 0.3 s ran in threads no snapshot saw (other tests' threads may add to it).
        let gone = busy
            .threads
            .iter()
            .find(|(thread, _, _)| *thread == (pid, 0))
            .map_or(0.0, |t| t.1);
        assert!(gone >= 0.2, "{busy:?}");
        assert!(busy.on_cpu_s >= 0.2, "{busy:?}");
    }

    #[test]
    fn short_sleeps_are_busy_long_ones_only_where_samples_find_a_lock_wait() {
        let busy = Busy {
            threads: vec![
                // On a CPU 60% of the second, asleep 40% in 10,000 short waits: a lock.
                ((1, 1), 0.6, 10_000),
                // Asleep the whole second but for 2 ms, in 5 sleeps: a timer thread.
                ((1, 2), 0.002, 5),
                // On a CPU 10%, asleep 90% in 3 long waits, sampled blocked half the time.
                ((1, 3), 0.1, 3),
            ],
            ..Busy::default()
        };
        let c = busy.concurrency(1.0, |t| if t == (1, 3) { 0.5 } else { 0.0 });
        assert!((c - (1.0 + 0.002 + 0.6)).abs() < 1e-9, "{c}");
    }

    #[test]
    fn state_is_read_after_a_command_name_with_parentheses_and_spaces() {
        assert_eq!(state_of("42 (a) b (c)) S 1 42 42 0"), Some('S'));
        assert_eq!(state_of("42 (x) D 1"), Some('D'));
    }
}
