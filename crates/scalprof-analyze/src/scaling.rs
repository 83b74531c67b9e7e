//! The scaling diff — "what grew": each function's sampled cost per operation at every
//! point, and how much of the cost added between the first and last point it accounts for.
//! This is the kmap thread's "standard vs -aa profile" comparison, normalized per
//! operation so that a point doing more work does not look slower by mistake.

use scalprof_model::locks::Scope;
use scalprof_model::profile::folded;
use scalprof_model::FindingKind;
use std::collections::{HashMap, HashSet};

use scalprof_model::{Finding, FunctionGrowth, PointProfile, ScalingDiff};
use scalprof_model::{FindingDetails, HotspotDetails, SerialDetails};

/// Rows kept per scope in the run document.
pub const TOP_ROWS: usize = 15;
/// A kernel function whose growth explains at least this share of the last point's
/// sampled cost per op is a candidate hotspot (clean_parallel's kernel noise is below
/// 0.01); the budget then keeps those whose share of the thread-time is large enough.
pub const HOTSPOT_CANDIDATE: f64 = 0.01;
/// Fewer samples than this at any point and no hotspot is reported (0.1 s of CPU at the
/// default rate).
pub const MIN_SAMPLES: u64 = 100;
/// A point where one thread ran alone for at least this share of the time is reported.
pub const SERIAL_MIN_SHARE: f64 = 0.10;

/// Per-function self and inclusive cost of one profile, keyed by folded frame (kernel
/// frames keep their `_[k]` mark): as weight (ns or cycles) and as sample counts (what
/// sampling noise is judged by).
#[derive(Default)]
pub struct FunctionCosts {
    pub self_weight: HashMap<String, u64>,
    pub inclusive_weight: HashMap<String, u64>,
    pub total_weight: u64,
    pub self_samples: HashMap<String, u64>,
    pub inclusive_samples: HashMap<String, u64>,
    pub total_samples: u64,
}

/// The function a stack's self cost is the program's: its leaf, or, where the leaf is
/// Rust's standard library or the map it builds on (inlined into the program, as
/// `core::intrinsics::likely` inside a `HashMap` lookup is), the innermost frame outside
/// it: the program's function that called it. A stack of library frames alone keeps its
/// leaf.
fn own_leaf<'a>(frames: &[&'a str]) -> Option<&'a str> {
    // Demangled Rust names carry no parameter list; C++'s (`std::vector<int>::push_back
    // (int const&)`) keep their own self cost.
    let library =
        |f: &str| scalprof_model::vocabulary::is_rust_library_frame(f) && !f.contains('(');
    let leaf = frames.last().copied()?;
    if !library(leaf) {
        return Some(leaf);
    }
    // The first frame is the process name.
    Some(
        frames
            .iter()
            .skip(1)
            .rev()
            .find(|f| !library(f))
            .copied()
            .unwrap_or(leaf),
    )
}

pub fn function_costs(p: &PointProfile) -> FunctionCosts {
    let mut c = FunctionCosts::default();
    let mut seen: HashSet<&str> = HashSet::new();
    for f in &p.folded {
        c.total_weight += f.weight;
        c.total_samples += f.samples;
        // The first frame is the process name, not a function.
        let frames: Vec<&str> = folded::frames(&f.stack).collect();
        // A runtime's own work (its GC, its JIT compiler) is one function, its name.
        let work = scalprof_model::vocabulary::runtime_work(&f.stack);
        if let Some(leaf) = work.or_else(|| own_leaf(&frames)) {
            *c.self_weight.entry(leaf.to_string()).or_default() += f.weight;
            *c.self_samples.entry(leaf.to_string()).or_default() += f.samples;
        }
        seen.clear();
        for fr in frames.into_iter().chain(work) {
            if seen.insert(fr) {
                *c.inclusive_weight.entry(fr.to_string()).or_default() += f.weight;
                *c.inclusive_samples.entry(fr.to_string()).or_default() += f.samples;
            }
        }
    }
    c
}

/// `points`: (parameter value, work done by the profiled repeats, profile).
pub fn scaling_diff(points: &[(u64, f64, &PointProfile)]) -> Option<ScalingDiff> {
    let usable: Vec<&(u64, f64, &PointProfile)> = points
        .iter()
        .filter(|(_, work, p)| *work > 0.0 && !p.folded.is_empty())
        .collect();
    if usable.is_empty() {
        return None;
    }
    let costs: Vec<FunctionCosts> = usable.iter().map(|(_, _, p)| function_costs(p)).collect();
    let per_op = |w: u64, i: usize| w as f64 / usable[i].1;
    let total_per_op: Vec<f64> = costs
        .iter()
        .enumerate()
        .map(|(i, c)| per_op(c.total_weight, i))
        .collect();
    let last_total = *total_per_op.last().expect("non-empty");
    let mut names: HashSet<&String> = HashSet::new();
    for c in &costs {
        names.extend(c.inclusive_weight.keys());
    }
    let mut rows: Vec<FunctionGrowth> = names
        .into_iter()
        .map(|name| {
            let self_per_op: Vec<f64> = costs
                .iter()
                .enumerate()
                .map(|(i, c)| per_op(c.self_weight.get(name).copied().unwrap_or(0), i))
                .collect();
            let inclusive_per_op: Vec<f64> = costs
                .iter()
                .enumerate()
                .map(|(i, c)| per_op(c.inclusive_weight.get(name).copied().unwrap_or(0), i))
                .collect();
            let growth = self_per_op[self_per_op.len() - 1] - self_per_op[0];
            let share_of_loss = if last_total > 0.0 {
                (growth / last_total).max(0.0)
            } else {
                0.0
            };
            let (function, kernel) = match folded::kernel(name) {
                Some(n) => (n.to_string(), true),
                None => (name.clone(), false),
            };
            FunctionGrowth {
                function,
                in_kernel: kernel,
                self_per_op,
                inclusive_per_op,
                growth,
                share_of_loss,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.growth
            .total_cmp(&a.growth)
            .then_with(|| a.function.cmp(&b.function))
    });
    let unit = if usable[0].2.event == "cycles" {
        "cycles/op"
    } else {
        "ns/op"
    };
    let (kernel, user): (Vec<FunctionGrowth>, Vec<FunctionGrowth>) =
        rows.into_iter().partition(|r| r.in_kernel);
    Some(ScalingDiff {
        unit: unit.to_string(),
        points: usable.iter().map(|p| p.0).collect(),
        total_per_op,
        samples: usable.iter().map(|p| p.2.stats.samples).collect(),
        user: user.into_iter().take(TOP_ROWS).collect(),
        kernel: kernel.into_iter().take(TOP_ROWS).collect(),
    })
}

/// `kernel_hotspot` findings: kernel functions whose cost per op grew enough to explain a
/// notable share of the lost throughput. (Once the lock collector names a lock for a
/// spin path, that path is reported as the lock instead.)
pub fn kernel_hotspots(diff: &ScalingDiff) -> Vec<Finding> {
    hotspots(diff, Scope::Kernel, &|_| true)
}

/// `user_hotspot` findings: user functions whose own cost per op grew, other than a lock's
/// code (the lock's cost) and the functions `claimed` by another cause (the writes of a
/// shared cache line).
pub fn user_hotspots(diff: &ScalingDiff, claimed: &[String]) -> Vec<Finding> {
    hotspots(diff, Scope::User, &|f| {
        !scalprof_model::vocabulary::is_user_lock_code(f) && !claimed.iter().any(|c| c == f)
    })
}

fn hotspots(diff: &ScalingDiff, scope: Scope, keep: &dyn Fn(&str) -> bool) -> Vec<Finding> {
    // A handful of samples is noise, not a hotspot.
    if diff.points.len() < 2 || diff.samples.iter().any(|&n| n < MIN_SAMPLES) {
        return Vec::new();
    }
    let (rows, kind) = match scope {
        Scope::Kernel => (&diff.kernel, FindingKind::KernelHotspot),
        Scope::User => (&diff.user, FindingKind::UserHotspot),
        Scope::File => return Vec::new(),
    };
    let (p0, p1) = (diff.points[0], diff.points[diff.points.len() - 1]);
    // Nanoseconds in the unit a person reads (cycles as counted).
    let per_op = |x: f64| match diff.unit.as_str() {
        "ns/op" => format!("{} per op", scalprof_model::units::human_ns(x)),
        unit => format!("{x:.1} {unit}"),
    };
    rows.iter()
        // Candidates: the budget scores them and keeps those above its minimum share.
        .filter(|r| r.share_of_loss >= HOTSPOT_CANDIDATE && keep(&r.function))
        .take(5)
        .map(|r| {
            let first = r.self_per_op[0];
            let last = r.self_per_op[r.self_per_op.len() - 1];
            Finding {
                score_interval: None,
                kind,
                scope: Some(scope),
                subject: r.function.clone(),
                score: r.share_of_loss.min(1.0),
                evidence: format!(
                    "self cost grew from {} to {} between {} and {} threads; \
                     that growth is {:.0}% of the cost per op at {} threads",
                    per_op(first),
                    per_op(last),
                    diff.points[0],
                    diff.points[diff.points.len() - 1],
                    r.share_of_loss * 100.0,
                    diff.points[diff.points.len() - 1]
                ),
                suggestion: match scope {
                    _ if scalprof_model::vocabulary::is_runtime_work(&r.function) => {
                        runtime_work_advice(&r.function)
                    }
                    Scope::Kernel | Scope::File => {
                        "find which system calls or faults lead to it (scalprof flame) and \
                             reduce them, or partition the kernel object they share (per-thread \
                             mappings, fewer mmap/munmap, batching)"
                    }
                    Scope::User => {
                        "its own instructions got slower per operation as threads were \
                             added: look for memory it shares with the other threads (a counter or \
                             flag written without a lock prefix, a list or table every thread \
                             walks), for memory bandwidth, or for more work per operation with \
                             more threads (splitting the input, merging the results); \
                             `scalprof flame --diff @{p0} @{p1}` \
                             shows where it grew"
                    }
                }
                .replace("{p0}", &p0.to_string())
                .replace("{p1}", &p1.to_string()),
                details: FindingDetails::Hotspot(HotspotDetails {
                    unit: diff.unit.clone(),
                    points: diff.points.clone(),
                    self_per_op: r.self_per_op.clone(),
                    inclusive_per_op: r.inclusive_per_op.clone(),
                }),
                what_if: None,
                experiment: None,
            }
        })
        .collect()
}

/// What to try when a runtime's own work grew with the threads.
fn runtime_work_advice(work: &str) -> &'static str {
    if work.starts_with("GC") {
        "the garbage collector does more per operation with more threads: allocate less per \
         operation (reuse buffers, pools, fewer temporary objects), or give the heap more room \
         (GOGC or GOMEMLIMIT for Go, -Xmx and the collector's threads for a JVM)"
    } else if work.starts_with("JIT") {
        "JIT compilation grew per operation: the run is too short for the compiled code to \
         pay off; warm up before measuring (longer runs, a warm-up phase) or cap the \
         compiler's threads"
    } else {
        "the JVM stops every thread more often (safepoints: GC, deoptimization, biased-lock \
         revocation): find which operations ask for them (-Xlog:safepoint) and reduce them"
    }
}

/// The processes whose samples have `leaf` (a folded frame, `…_[k]` for the kernel) as
/// their leaf at one point, with their shares of its weight, largest first. A folded stack
/// starts with its process's command name.
pub fn leaf_processes(p: &PointProfile, leaf: &str) -> Vec<(String, f64)> {
    let mut by: Vec<(String, u64)> = Vec::new();
    for f in &p.folded {
        let process = folded::process(&f.stack);
        if folded::leaf(&f.stack) != leaf {
            continue;
        }
        match by.iter_mut().find(|(c, _)| c == process) {
            Some(e) => e.1 += f.weight,
            None => by.push((process.to_string(), f.weight)),
        }
    }
    let total: u64 = by.iter().map(|e| e.1).sum();
    let mut out: Vec<(String, f64)> = by
        .into_iter()
        .map(|(c, w)| (c, w as f64 / total.max(1) as f64))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// ", in postgres 80%, pgbench 20%": where a profile-based finding's function ran, when
/// that is not only the swept command (`own`, its command name): an attached server, or
/// several processes.
pub fn processes_note(processes: &[(String, f64)], own: &str) -> Option<String> {
    if processes.is_empty() || (processes.len() == 1 && processes[0].0 == own) {
        return None;
    }
    let parts: Vec<String> = processes
        .iter()
        .filter(|(_, s)| *s >= 0.05)
        .take(3)
        .map(|(c, s)| {
            if processes.len() == 1 {
                c.clone()
            } else {
                format!("{c} {:.0}%", s * 100.0)
            }
        })
        .collect();
    Some(format!("; in {}", parts.join(", ")))
}

/// `serial_fraction` findings: at N > 1, the share of wall time during which only one of
/// the workload's threads was on a CPU, when it explains part of the lost efficiency.
/// `points`: (threads, efficiency, profile).
pub fn serial_fractions(points: &[(u64, Option<f64>, &PointProfile)]) -> Vec<Finding> {
    let mut out = Vec::new();
    for &(n, eff, p) in points {
        if n < 2 || p.serial.bins < 20 {
            continue;
        }
        let share = p.serial.single_share();
        let lost = 1.0 - eff.unwrap_or(1.0);
        if share < SERIAL_MIN_SHARE || lost < 0.05 {
            continue;
        }
        // With one thread running for a share s of the time, N threads lose s·(N−1)/N of
        // their capacity: compare with what was lost.
        let explained = (share * (n as f64 - 1.0) / n as f64 / lost).min(1.0);
        let subject = p
            .serial
            .top_function
            .clone()
            .unwrap_or_else(|| "[serial phase]".into());
        out.push(Finding {
            score_interval: None,
            kind: FindingKind::SerialFraction,
            scope: Some(Scope::User),
            subject: subject.clone(),
            score: explained,
            evidence: format!(
                "at {n} threads only one thread was on a CPU during {:.0}% of the sampled time \
                 (mostly in {subject}); scored by what the named waits and costs leave of it",
                share * 100.0,
            ),
            suggestion: "parallelize or shorten the phase that runs alone (initialization, a \
                         final merge, a single consumer)"
                .into(),
            details: FindingDetails::Serial(SerialDetails {
                threads: n,
                single_thread_share: share,
                bins: p.serial.bins,
                bin_ms: p.serial.bin_ms,
            }),
            what_if: None,
            experiment: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::FoldedStack;

    #[test]
    fn rust_library_code_inlined_in_a_function_is_that_function_s_self_cost() {
        let stack = |s: &'static str| s.split(';').collect::<Vec<_>>();
        // hashbrown's lookup inlined into the program's function, down to an intrinsic.
        let rust = stack(
            "rust_mutex;start_thread;rust_mutex::worker;rust_mutex::route_lookup;\
             hashbrown::raw::RawTable<T,A>::find;core::intrinsics::likely",
        );
        assert_eq!(own_leaf(&rust), Some("rust_mutex::route_lookup"));
        // C's and C++'s leaves stay theirs; a stack of library frames alone keeps its leaf.
        assert_eq!(
            own_leaf(&stack("p;worker;__memmove_avx")),
            Some("__memmove_avx")
        );
        let cpp = stack("p;worker;std::vector<int>::push_back(int const&)");
        assert_eq!(
            own_leaf(&cpp),
            Some("std::vector<int>::push_back(int const&)")
        );
        let only = stack("p;std::rt::lang_start;core::hint::black_box");
        assert_eq!(own_leaf(&only), Some("core::hint::black_box"));
    }

    fn profile(stacks: &[(&str, u64)]) -> PointProfile {
        PointProfile {
            event: "cpu-clock".into(),
            frequency: 999,
            stats: scalprof_model::ProfileStats {
                samples: 1000,
                ..Default::default()
            },
            folded: stacks
                .iter()
                .map(|(s, w)| FoldedStack {
                    stack: s.to_string(),
                    samples: 1,
                    weight: *w,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_hotspot_says_which_processes_ran_it_unless_only_the_command_did() {
        let p = profile(&[
            ("postgres;exec;XLogFlush;osq_lock_[k]", 800),
            ("pgbench;main;send;osq_lock_[k]", 200),
            ("pgbench;main;work", 5000),
        ]);
        let procs = leaf_processes(&p, "osq_lock_[k]");
        assert_eq!(procs.len(), 2);
        assert_eq!(procs[0].0, "postgres");
        assert!((procs[0].1 - 0.8).abs() < 1e-9);
        assert_eq!(
            processes_note(&procs, "pgbench").as_deref(),
            Some("; in postgres 80%, pgbench 20%")
        );
        let own = leaf_processes(&p, "work");
        assert_eq!(processes_note(&own, "pgbench"), None);
        assert_eq!(
            processes_note(&own, "other").as_deref(),
            Some("; in pgbench")
        );
    }

    #[test]
    fn growth_is_per_operation_and_split_by_scope() {
        // 1 thread: 1000 ops, 1000 ns of work; 2 threads: 2000 ops, 2000 ns of work plus
        // 2000 ns in a kernel spin path: 1 ns/op → 2 ns/op.
        let p1 = profile(&[("prog;main;work", 1000)]);
        let p2 = profile(&[
            ("prog;main;work", 2000),
            ("prog;main;munmap;osq_lock_[k]", 2000),
        ]);
        let d = scaling_diff(&[(1, 1000.0, &p1), (2, 2000.0, &p2)]).unwrap();
        assert_eq!(d.total_per_op, vec![1.0, 2.0]);
        assert_eq!(d.kernel[0].function, "osq_lock");
        assert_eq!(d.kernel[0].self_per_op, vec![0.0, 1.0]);
        assert!((d.kernel[0].share_of_loss - 0.5).abs() < 1e-12);
        let work = d.user.iter().find(|r| r.function == "work").unwrap();
        assert_eq!(work.growth, 0.0, "the same work per op did not grow");
        let main = d.user.iter().find(|r| r.function == "main").unwrap();
        assert_eq!(main.inclusive_per_op, vec![1.0, 2.0]);
        let f = kernel_hotspots(&d);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].subject, "osq_lock");
        assert!((f[0].score - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_flat_profile_produces_no_hotspot() {
        let p1 = profile(&[("prog;work", 1000), ("prog;read_[k]", 10)]);
        let p2 = profile(&[("prog;work", 2000), ("prog;read_[k]", 21)]);
        let d = scaling_diff(&[(1, 1000.0, &p1), (2, 2000.0, &p2)]).unwrap();
        assert!(kernel_hotspots(&d).is_empty());
    }

    #[test]
    fn serial_phase_is_reported_only_when_it_explains_lost_efficiency() {
        let mut p = profile(&[("prog;init", 1)]);
        p.serial = scalprof_model::SerialStats {
            bins: 100,
            bin_ms: 10.0,
            single_thread_bins: 60,
            idle_bins: 0,
            late_bins: 0,
            top_function: Some("init".into()),
            threads: Vec::new(),
        };
        let f = serial_fractions(&[(2, Some(0.6), &p)]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].subject, "init");
        // 0.6 · 1/2 = 0.3 of capacity, out of 0.4 lost
        assert!((f[0].score - 0.75).abs() < 1e-9);
        assert!(
            serial_fractions(&[(2, Some(0.99), &p)]).is_empty(),
            "nothing was lost"
        );
        assert!(serial_fractions(&[(1, Some(0.5), &p)]).is_empty());
    }
}
