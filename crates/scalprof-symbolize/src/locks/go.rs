//! Goroutines parked on Go's sync primitives as rows: the primitive named by the variable
//! that holds it (`main.mu`) or, in allocated memory, by its kind and the function that
//! takes it; the kind from the runtime wrapper the probe saw and the sync frames; the
//! callers from the parked goroutine's stack, the holders from the releasing one's.

use std::collections::{HashMap, HashSet};

use scalprof_model::locks::{top_callers, CallerNamed, ChanSide, LockAddress, Scope, Side};
use scalprof_model::locks::{GoSema, GoWaitRaw, HolderState, LockKind, LockRow, RawLocks};

use super::holders::with_state;
use super::rows::{RowBuilder, RowKey};
use super::stacks::lookup_address;
use super::user::place_of;
use crate::profile::{Symbols, UserSpace};

/// Frames of the Go runtime and of sync itself: the machinery, not who waits.
pub(crate) fn is_go_machinery(function: &str) -> bool {
    [
        "runtime.",
        "sync.",
        "internal/sync.",
        "sync/atomic.",
        "internal/runtime/",
    ]
    .iter()
    .any(|p| function.starts_with(p))
}

/// A parked goroutine's stack as frames, innermost first, the inlined ones too (Go inlines
/// `Lock` and often the function that calls it).
fn frames(space: &UserSpace, stack: &[u64]) -> Vec<String> {
    stack
        .iter()
        .enumerate()
        .flat_map(|(i, &a)| space.symbolize_inlined(lookup_address(i, a)))
        .collect()
}

/// The primitive's kind: the wrapper's, unless the frames show the Mutex is a RWMutex's
/// writer side (its `Lock` takes the inner Mutex first).
fn kind_of(sema: GoSema, frames: &[String]) -> LockKind {
    let rw = frames.iter().any(|f| f.contains("sync.(*RWMutex)"));
    match sema {
        GoSema::Mutex if rw => LockKind::GoRwMutex(Some(Side::Write)),
        GoSema::Mutex => LockKind::GoMutex,
        GoSema::RwMutexRead => LockKind::GoRwMutex(Some(Side::Read)),
        GoSema::RwMutexWrite => LockKind::GoRwMutex(Some(Side::Write)),
        GoSema::WaitGroup => LockKind::GoWaitGroup,
        GoSema::Other => LockKind::Semaphore,
        GoSema::ChanRecv => LockKind::Chan(Some(ChanSide::Recv)),
        GoSema::ChanSend => LockKind::Chan(Some(ChanSide::Send)),
        // No hand-off ended it: a timer's, a context's, a channel nobody traced.
        GoSema::Select => LockKind::Idle,
        GoSema::Cond => LockKind::GoCond,
    }
}

/// Where the semaphore lies inside its primitive: `sema` follows `state` in a Mutex; a
/// RWMutex's writer and reader semaphores follow its inner Mutex; a WaitGroup's follows
/// its 64-bit state; a Cond's notifyList follows its Locker (an interface). A channel's
/// wait is at the channel.
fn sema_offset(sema: GoSema) -> u64 {
    match sema {
        GoSema::Mutex => 4,
        GoSema::RwMutexWrite | GoSema::WaitGroup => 8,
        GoSema::RwMutexRead => 12,
        GoSema::Cond => 16,
        GoSema::Other | GoSema::ChanRecv | GoSema::ChanSend | GoSema::Select => 0,
    }
}

/// The functions at the two ends of each channel (by process and address), by their waits:
/// senders and receivers, from the goroutines that waited on either side and those that
/// ended the other side's waits.
#[derive(Default)]
struct ChanEnds {
    senders: HashMap<String, u64>,
    receivers: HashMap<String, u64>,
}

impl ChanEnds {
    /// Both ends seen.
    fn complete(&self) -> bool {
        !self.senders.is_empty() && !self.receivers.is_empty()
    }

    /// Adds another channel's ends.
    fn absorb(&mut self, other: &ChanEnds) {
        for (mine, theirs) in [
            (&mut self.senders, &other.senders),
            (&mut self.receivers, &other.receivers),
        ] {
            for (f, ns) in theirs {
                *mine.entry(f.clone()).or_default() += ns;
            }
        }
    }

    /// Whether `other`'s ends do not contradict these (an end either left unseen is no
    /// contradiction).
    fn agrees_with(&self, other: &ChanEnds) -> bool {
        let top = super::rows::top_caller;
        let agree = |a: Option<&str>, b: Option<&str>| a.is_none() || b.is_none() || a == b;
        agree(top(&self.senders), top(&other.senders))
            && agree(top(&self.receivers), top(&other.receivers))
    }

    fn name(&self) -> String {
        super::rows::chan_name(
            super::rows::top_caller(&self.senders),
            super::rows::top_caller(&self.receivers),
        )
    }

    fn add(&mut self, kind: GoSema, waker: bool, function: &str, ns: u64) {
        let send = matches!(kind, GoSema::ChanSend) != waker;
        let side = if send {
            &mut self.senders
        } else {
            &mut self.receivers
        };
        *side.entry(function.to_string()).or_default() += ns;
    }
}

fn is_chan(kind: GoSema) -> bool {
    matches!(kind, GoSema::ChanRecv | GoSema::ChanSend)
}

/// The innermost frame outside the runtime and sync: the function that locked.
fn caller(frames: &[String]) -> Option<&str> {
    frames
        .iter()
        .map(String::as_str)
        .find(|f| !is_go_machinery(f))
}

/// A semaphore's sampled stacks: the frames of one (its kind), and the functions that
/// waited by their wait.
type Sampled = (Vec<String>, HashMap<String, u64>);

/// The rows of the goroutines' waits, by (name, kind), summed over the tree's processes.
/// What the sampled stacks say, by (process, address, kind): who released each
/// semaphore, each channel's two ends, and each semaphore's waiters and frames.
#[derive(Default)]
struct GoSamples {
    released: HashMap<(u32, u64, GoSema), HashMap<String, u64>>,
    ends: HashMap<(u32, u64), ChanEnds>,
    sampled: HashMap<(u32, u64, GoSema), Sampled>,
}

impl GoSamples {
    fn read(raw: &RawLocks, symbols: &mut Symbols) -> GoSamples {
        let mut out = GoSamples::default();
        let mut spaces: HashMap<u32, UserSpace> = HashMap::new();
        for w in raw.go_waits.iter().chain(&raw.go_wakers) {
            if let (false, Some(maps)) = (spaces.contains_key(&w.tgid), raw.maps.get(&w.tgid)) {
                spaces.insert(
                    w.tgid,
                    UserSpace::from_maps(w.tgid, maps, &mut symbols.files),
                );
            }
        }
        let frames_of = |w: &GoWaitRaw| {
            spaces
                .get(&w.tgid)
                .map(|sp| frames(sp, &w.stack))
                .unwrap_or_default()
        };
        // What released each semaphore (by process, address and the waits' kind): the
        // releasing function. A channel's ends, from both sides.
        for w in raw.go_wakers.iter().filter(|w| w.sampled) {
            let f = frames_of(w);
            if let Some(c) = caller(&f) {
                *out.released
                    .entry((w.tgid, w.addr, w.kind))
                    .or_default()
                    .entry(c.to_string())
                    .or_default() += w.total_ns.max(1);
                if is_chan(w.kind) {
                    let e = out.ends.entry((w.tgid, w.addr)).or_default();
                    e.add(w.kind, true, c, w.total_ns.max(1));
                }
            }
        }
        // The sampled stacks of each semaphore: its kind (a RWMutex's writers wait on an
        // inner Mutex), the functions that waited, by their wait.
        for w in raw.go_waits.iter().filter(|w| w.sampled) {
            let f = frames_of(w);
            let e = out.sampled.entry((w.tgid, w.addr, w.kind)).or_default();
            if let Some(c) = caller(&f) {
                *e.1.entry(c.to_string()).or_default() += w.total_ns.max(1);
                if is_chan(w.kind) {
                    let e = out.ends.entry((w.tgid, w.addr)).or_default();
                    e.add(w.kind, false, c, w.total_ns.max(1));
                }
            }
            if e.0.is_empty() {
                e.0 = f;
            }
        }
        out
    }
}

pub(super) fn add_go_rows(raw: &RawLocks, symbols: &mut Symbols, rows: &mut Vec<LockRow>) {
    if raw.go_waits.is_empty() {
        return;
    }
    let GoSamples {
        mut released,
        ends,
        mut sampled,
    } = GoSamples::read(raw, symbols);
    let one_shot = one_shot_channels(raw);
    let pooled = pooled_ends(raw, &ends, &one_shot, symbols);
    let mut by_name: HashMap<RowKey, (RowBuilder, HashMap<String, u64>)> = HashMap::new();
    let mut channels: HashMap<RowKey, f64> = HashMap::new();
    // Seen in the probes' bursts: the rows stand for the whole execution.
    let scale = raw.tracer.go_scale();
    // The count rounded, the time scaled with it: a row's average stays its seen waits'
    // average, never above their longest.
    let scaled = |count: u64, total_ns: u64| {
        let n = (count as f64 * scale).round().max(count as f64);
        let total = if count == 0 {
            total_ns as f64 * scale
        } else {
            total_ns as f64 * n / count as f64
        };
        (n as u64, total.round() as u64)
    };
    for w in raw.go_waits.iter().filter(|w| !w.sampled) {
        let maps = raw.maps.get(&w.tgid).map(Vec::as_slice).unwrap_or(&[]);
        let (f, callers) = sampled
            .remove(&(w.tgid, w.addr, w.kind))
            .unwrap_or_default();
        let kind = kind_of(w.kind, &f);
        let base = w.addr.saturating_sub(sema_offset(w.kind));
        let who = super::rows::top_caller(&callers).map(str::to_string);
        let own = ends.get(&(w.tgid, w.addr));
        let place = place_of(base, maps, symbols);
        let chan = match (own, pooled.get(&w.tgid)) {
            // A one-shot channel in allocated memory whose waits left an end unseen: the
            // pooled ends of the process's one-shot channels, where they agree with its own.
            (own, Some(pool))
                if one_shot.contains(&(w.tgid, w.addr))
                    && !own.is_some_and(ChanEnds::complete)
                    && own.is_none_or(|e| e.agrees_with(pool))
                    && place.is_dynamic() =>
            {
                Some(pool.name())
            }
            (Some(e), _) if is_chan(w.kind) => Some(e.name()),
            _ => None,
        };
        let name = if kind == LockKind::Idle {
            format!("select@{}", who.as_deref().unwrap_or("?"))
        } else if let Some(chan) = chan {
            chan
        } else if let Some(region) = place.region() {
            CallerNamed {
                kind: kind.clone(),
                caller: who.clone(),
                region,
            }
            .to_string()
        } else {
            place.to_string()
        };
        if is_chan(w.kind) {
            // One-shot channels are made as often as they are waited on: those seen in the
            // probes' bursts stand for as many more as their waits do.
            let n = if one_shot.contains(&(w.tgid, w.addr)) {
                scale
            } else {
                1.0
            };
            *channels.entry((name.clone(), kind.clone())).or_default() += n;
        }
        let (b, holders) = by_name
            .entry((name.clone(), kind.clone()))
            .or_insert_with(|| {
                let row = LockRow {
                    address: LockAddress::Traced(base),
                    ..LockRow::new(Scope::User, name, kind)
                };
                (RowBuilder::new(row), HashMap::new())
            });
        let (count, total_ns) = scaled(w.count, w.total_ns);
        b.add_wait(w.tgid, count, total_ns, w.max_ns);
        b.add_callers(Some(&callers));
        for (h, ns) in released
            .remove(&(w.tgid, w.addr, w.kind))
            .into_iter()
            .flatten()
        {
            *holders.entry(h).or_default() += ns;
        }
    }
    for (key, (b, holders)) in by_name {
        let mut row = b.finish(raw);
        row.channels = channels.get(&key).map(|&n| n.round() as u64);
        let total: u64 = holders.values().sum();
        row.holders = with_state(top_callers(holders, total), HolderState::AtRelease);
        rows.push(row);
    }
}

/// A channel waited on this often or less was used once (or twice: a result, and then
/// its close).
const ONE_SHOT_WAITS: u64 = 2;

/// One-shot channels whose ends were seen that a process needs before their pooled ends
/// name its other one-shot channels.
const ONE_SHOT_POOL: usize = 8;

/// The channels waited on at most [`ONE_SHOT_WAITS`] times, by (process, address).
fn one_shot_channels(raw: &RawLocks) -> HashSet<(u32, u64)> {
    let mut waits: HashMap<(u32, u64), u64> = HashMap::new();
    for w in raw
        .go_waits
        .iter()
        .filter(|w| !w.sampled && is_chan(w.kind))
    {
        *waits.entry((w.tgid, w.addr)).or_default() += w.count;
    }
    waits
        .into_iter()
        .filter(|&(_, n)| n <= ONE_SHOT_WAITS)
        .map(|(k, _)| k)
        .collect()
}

/// The ends of each process's one-shot channels in allocated memory, pooled. A program
/// that makes a channel per task (a result handed over once: gofmt's sequencer) waits on
/// thousands of channels once each; the probes copy stacks at 1 park or hand-off in 16,
/// so most of those channels have no end seen, and a few one end. Their pattern is one,
/// and the pooled ends name it. Only where [`ONE_SHOT_POOL`] of them showed their ends.
fn pooled_ends(
    raw: &RawLocks,
    ends: &HashMap<(u32, u64), ChanEnds>,
    one_shot: &HashSet<(u32, u64)>,
    symbols: &mut Symbols,
) -> HashMap<u32, ChanEnds> {
    let mut pooled: HashMap<u32, (ChanEnds, usize)> = HashMap::new();
    for (&(tgid, addr), e) in ends.iter().filter(|(k, _)| one_shot.contains(k)) {
        let maps = raw.maps.get(&tgid).map(Vec::as_slice).unwrap_or(&[]);
        if place_of(addr, maps, symbols).is_dynamic() {
            let p = pooled.entry(tgid).or_default();
            p.0.absorb(e);
            p.1 += 1;
        }
    }
    pooled
        .into_iter()
        .filter(|(_, (_, n))| *n >= ONE_SHOT_POOL)
        .map(|(tgid, (e, _))| (tgid, e))
        .collect()
}

/// What the Go runtime's own threads wait for, as the futex tracer sees them: an idle
/// thread (an M with no goroutine to run) parked on its note, sysmon's and the idle
/// threads' sleeps. Their callers are all the runtime's, and the futex is a thread's
/// (`runtime.m0+…`, one in allocated memory): not the program's waits. The goroutines'
/// waits are the program's; a futex on a named runtime lock (`runtime.sched`) is the
/// runtime's own contention and stays a cause.
pub(super) fn mark_runtime_idle(rows: &mut [LockRow], thread_memory: &HashSet<RowKey>) {
    for r in rows.iter_mut().filter(|r| {
        r.scope == Scope::User
            && r.attributed_to.is_none()
            && !r.callers.is_empty()
            && r.callers.iter().all(|c| is_go_machinery(&c.function))
    }) {
        let thread_note = thread_memory.contains(&(r.name.clone(), r.lock_type.clone()));
        r.attributed_to = match r.lock_type {
            LockKind::Sleep => Some(GO_IDLE_SLEEP.into()),
            LockKind::Futex if thread_note => Some(GO_IDLE_THREADS.into()),
            _ => None,
        };
    }
}

/// Whom the Go runtime's idle waits are left to (listed, never a cause).
pub const GO_IDLE_THREADS: &str = "the Go scheduler's idle threads (no goroutine to run)";
pub const GO_IDLE_SLEEP: &str = "the Go runtime's own threads (sysmon, spinning threads)";

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_goroutine_waits_in_the_first_function_outside_the_runtime_and_sync() {
        let f = names(&[
            "internal/sync.runtime_SemacquireMutex",
            "internal/sync.(*Mutex).lockSlow",
            "main.worker",
            "runtime.goexit",
        ]);
        assert_eq!(caller(&f), Some("main.worker"));
        assert_eq!(caller(&names(&["runtime.goexit"])), None);
    }

    fn row(name: &str, kind: LockKind, caller: &str) -> LockRow {
        LockRow {
            callers: vec![scalprof_model::locks::LockCaller::new(caller, 1.0)],
            ..LockRow::new(Scope::User, name, kind)
        }
    }

    #[test]
    fn the_runtimes_idle_threads_are_not_the_programs_waits() {
        let mut rows = vec![
            row("runtime.m0+0x158", LockKind::Futex, "runtime.futex"),
            row(
                "futex@runtime.futex (anon)",
                LockKind::Futex,
                "runtime.futex",
            ),
            row("sleep in runtime.usleep", LockKind::Sleep, "runtime.usleep"),
            row("runtime.sched", LockKind::Futex, "runtime.futex"),
            row("main.mu", LockKind::GoMutex, "main.worker"),
            row("table_lock", LockKind::Mutex, "worker"),
        ];
        // Their futexes are in `runtime.m0` and in an anonymous mapping.
        let thread_memory = rows[..2]
            .iter()
            .map(|r| (r.name.clone(), r.lock_type.clone()))
            .collect();
        mark_runtime_idle(&mut rows, &thread_memory);
        let left: Vec<&str> = rows
            .iter()
            .filter(|r| r.attributed_to.is_none())
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(left, ["runtime.sched", "main.mu", "table_lock"]);
        assert_eq!(rows[2].attributed_to.as_deref(), Some(GO_IDLE_SLEEP));
    }

    #[test]
    fn one_shot_channels_are_those_waited_on_once_or_twice() {
        let w = |addr, count, sampled| GoWaitRaw {
            addr,
            tgid: 7,
            kind: GoSema::ChanRecv,
            sampled,
            stack: Vec::new(),
            count,
            total_ns: 1,
            max_ns: 1,
        };
        let raw = RawLocks {
            go_waits: vec![
                w(0x10, 1, false),
                w(0x20, 2, false),
                w(0x30, 40, false),
                w(0x40, 1, true),
            ],
            ..RawLocks::default()
        };
        let got = one_shot_channels(&raw);
        assert!(
            got.contains(&(7, 0x10)) && got.contains(&(7, 0x20)),
            "{got:?}"
        );
        assert!(
            !got.contains(&(7, 0x30)) && !got.contains(&(7, 0x40)),
            "{got:?}"
        );
    }

    #[test]
    fn a_channel_takes_the_pooled_ends_only_where_its_own_agree() {
        let ends = |s: &[&str], r: &[&str]| ChanEnds {
            senders: s.iter().map(|f| (f.to_string(), 1)).collect(),
            receivers: r.iter().map(|f| (f.to_string(), 1)).collect(),
        };
        let mut pool = ends(&["main.run"], &[]);
        pool.absorb(&ends(&[], &["main.run"]));
        assert!(pool.complete());
        assert_eq!(pool.name(), "chan main.run → main.run");
        assert!(!ends(&[], &["main.run"]).complete());
        assert!(ends(&[], &["main.run"]).agrees_with(&pool));
        assert!(ends(&[], &[]).agrees_with(&pool));
        // main's one wait for the last result is not one of the tasks'.
        assert!(!ends(&[], &["main.main"]).agrees_with(&pool));
    }

    #[test]
    fn a_rwmutex_writer_waits_on_its_inner_mutex_and_is_told_by_its_frames() {
        let f = names(&[
            "sync.runtime_SemacquireMutex",
            "sync.(*RWMutex).Lock",
            "main.put",
        ]);
        assert_eq!(
            kind_of(GoSema::Mutex, &f),
            LockKind::GoRwMutex(Some(Side::Write))
        );
        assert_eq!(kind_of(GoSema::Mutex, &f[..1]), LockKind::GoMutex);
        assert_eq!(
            kind_of(GoSema::RwMutexRead, &[]).to_string(),
            "sync.RWMutex:R"
        );
        assert!(!LockKind::GoWaitGroup.is_lock());
        assert_eq!(LockKind::from("sync.Mutex"), LockKind::GoMutex);
        assert_eq!(
            LockKind::from("sync.RWMutex:W"),
            LockKind::GoRwMutex(Some(Side::Write))
        );
    }
}
