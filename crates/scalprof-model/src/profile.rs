//! Profiles: what the sampler saw at one sweep point, and the scaling diff across points.

use serde::{Deserialize, Serialize};

/// Counters of everything a profile could not see or resolve. Shown, never hidden.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileStats {
    /// Samples turned into stacks.
    pub samples: u64,
    /// Samples the kernel dropped (ring buffer full: PERF_RECORD_LOST).
    pub lost_samples: u64,
    /// Throttle events (the kernel lowered the sampling rate).
    pub throttled: u64,
    /// Samples whose user stack could not be walked to its root.
    pub truncated_stacks: u64,
    /// Samples that had user registers and got at least one user frame.
    pub user_stacks: u64,
    /// User frames in no known mapping, or with no symbol.
    pub unresolved_frames: u64,
    /// All frames (user and kernel) in all samples.
    pub frames: u64,
    /// Records that could not be parsed.
    pub bad_records: u64,
    /// Whether kernel callchains were collected.
    #[serde(rename = "kernel")]
    pub kernel_stacks: bool,
    /// Samples taken inside scalprof's own tracing (BPF programs and the stack unwinds
    /// they ask for, the sampler's handler): the tool's cost, kept out of the stacks.
    #[serde(default)]
    pub overhead_samples: u64,
    /// Their weight (ns of CPU time for cpu-clock, cycles with a PMU).
    #[serde(default)]
    pub overhead_weight: u64,
    /// Of the overhead samples: those in a uprobe's trap, and those in the kernel's
    /// side-band records for the sampler ([`ToolCost`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub probe_samples: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub side_band_samples: u64,
    /// scalprof's own CPU time reading the samples while the workload ran (the reader
    /// thread), and turning them into stacks after it exited (indexing, unwinding,
    /// symbolizing, on every builder thread), in ns: the observer's cost per sample.
    /// Absent when not measured (imports, older runs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub record_cpu_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub process_cpu_ns: u64,
    /// Programs that exited before the sampler could read their mappings (it reads
    /// `/proc/PID/maps` at each exec): their user frames have no names.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unmapped_processes: u64,
    /// Executable files the samples ran in that could not be read, or whose DWARF could
    /// not (at most [`MAX_UNREADABLE`]): their frames have no names, or no inlined ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable_binaries: Vec<Unreadable>,
    /// The kernel's tick rate (HZ) where scalprof's BPF program took the samples at the
    /// tick, with no perf event of their own (nothing switched at a thread's blocks); 0:
    /// a perf event took them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tick_hz: u64,
    /// Samples taken at the tick that the program timed (not those a virtual machine's host
    /// stopped mid-sample), and the time it spent taking them (ns): the sampler's cost per
    /// sample.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tick_samples: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tick_sample_ns: u64,
}

/// A file the samples ran in that could not be read, or whose DWARF alone was refused
/// (its symbol-table names kept). The document writes it as one string, "path: reason"
/// or "path: its DWARF: reason" (the contract); this is the one place that reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// "path: reason", as the file cache said it.
    File(String),
    Dwarf {
        path: String,
        why: String,
    },
}

const ITS_DWARF: &str = ": its DWARF: ";

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::File(s) => f.write_str(s),
            Unreadable::Dwarf { path, why } => write!(f, "{path}{ITS_DWARF}{why}"),
        }
    }
}

impl Serialize for Unreadable {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Unreadable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.split_once(ITS_DWARF) {
            Some((path, why)) => Unreadable::Dwarf {
                path: path.to_string(),
                why: why.to_string(),
            },
            None => Unreadable::File(s),
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Unreadable binaries kept in [`ProfileStats`].
pub const MAX_UNREADABLE: usize = 8;

/// What one of scalprof's own costs in a traced program is (see [`tool_cost`](crate::vocabulary::tool_cost)).
/// Ordered: a stack with frames of several kinds is the first kind's (the trap that led into
/// a tracer's program is the trap's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ToolCost {
    /// A uprobe's trap: the breakpoint's exception, its return to user mode (where the
    /// probe's handlers and BPF program run) and the single step over the probed
    /// instruction. The trap's samples mostly stop at the exception's return, with no
    /// uprobe frame below it; a breakpoint in a traced program is scalprof's own.
    Probe,
    /// The sampler's side-band: while any event asks for mapping, name or task records,
    /// the kernel builds one at every mmap and brk (a name for every mapping, executable
    /// or not), every fork and exit, and copies, switches or frees the inherited events of
    /// each thread. will-it-scale's brk2 spends 6% of its time there.
    SideBand,
    /// BPF programs on tracepoints (and the stack walks, ring-buffer and map work they
    /// call), and the perf sample handler.
    Tracer,
}

impl ProfileStats {
    /// Counts samples taken in scalprof's own frames, by what they cost.
    pub fn count_overhead(&mut self, cost: ToolCost, samples: u64, weight: u64) {
        self.overhead_samples += samples;
        self.overhead_weight = self.overhead_weight.saturating_add(weight);
        match cost {
            ToolCost::Probe => self.probe_samples += samples,
            ToolCost::SideBand => self.side_band_samples += samples,
            ToolCost::Tracer => {}
        }
    }

    pub fn add(&mut self, o: &ProfileStats) {
        self.samples += o.samples;
        self.lost_samples += o.lost_samples;
        self.throttled += o.throttled;
        self.truncated_stacks += o.truncated_stacks;
        self.user_stacks += o.user_stacks;
        self.unresolved_frames += o.unresolved_frames;
        self.frames += o.frames;
        self.bad_records += o.bad_records;
        self.kernel_stacks |= o.kernel_stacks;
        self.overhead_samples += o.overhead_samples;
        self.overhead_weight += o.overhead_weight;
        self.probe_samples += o.probe_samples;
        self.side_band_samples += o.side_band_samples;
        self.record_cpu_ns += o.record_cpu_ns;
        self.process_cpu_ns += o.process_cpu_ns;
        self.unmapped_processes += o.unmapped_processes;
        self.tick_hz = self.tick_hz.max(o.tick_hz);
        self.tick_samples += o.tick_samples;
        self.tick_sample_ns += o.tick_sample_ns;
        for b in &o.unreadable_binaries {
            self.note_unreadable(b.clone());
        }
    }

    /// Keeps `b` among the unreadable files, once, up to [`MAX_UNREADABLE`].
    pub fn note_unreadable(&mut self, b: Unreadable) {
        if self.unreadable_binaries.len() < MAX_UNREADABLE && !self.unreadable_binaries.contains(&b)
        {
            self.unreadable_binaries.push(b);
        }
    }
}

/// A user instruction where samples landed, by file and stated address.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HotInstruction {
    pub file: String,
    pub address: u64,
    pub samples: u64,
    pub weight: u64,
}

/// One folded stack: frames root-first joined by `;`, kernel frames suffixed `_[k]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FoldedStack {
    pub stack: String,
    pub samples: u64,
    /// Sum of sample periods: nanoseconds for cpu-clock, cycles for cycles.
    pub weight: u64,
}

/// The folded-stack format in one place: `process;root;…;leaf`, frames root-first after
/// the process's command name, kernel frames suffixed `_[k]`.
pub mod folded {
    /// What marks a kernel frame.
    pub const KERNEL_SUFFIX: &str = "_[k]";

    /// The process's command name: the first element.
    pub fn process(stack: &str) -> &str {
        stack.split(';').next().unwrap_or("")
    }

    /// The frames, root first, without the process name.
    pub fn frames(stack: &str) -> impl Iterator<Item = &str> {
        stack.split(';').skip(1)
    }

    /// The innermost frame as written (`name_[k]` for the kernel); "" for none.
    pub fn leaf(stack: &str) -> &str {
        stack.rsplit(';').next().unwrap_or("")
    }

    /// A kernel frame's function name; `None` for a user frame.
    pub fn kernel(frame: &str) -> Option<&str> {
        frame.strip_suffix(KERNEL_SUFFIX)
    }

    /// The kernel frames' function names, root first.
    pub fn kernel_frames(stack: &str) -> impl Iterator<Item = &str> {
        frames(stack).filter_map(kernel)
    }

    /// The user frames, root first.
    pub fn user_frames(stack: &str) -> impl Iterator<Item = &str> {
        frames(stack).filter(|f| kernel(f).is_none())
    }

    #[cfg(test)]
    #[test]
    fn a_folded_stack_is_read_one_way() {
        let s = "pigz;clone3;start_thread;deflate;__x64_sys_write_[k];vfs_write_[k]";
        assert_eq!(process(s), "pigz");
        assert_eq!(frames(s).next(), Some("clone3"));
        assert_eq!(leaf(s), "vfs_write_[k]");
        assert_eq!(kernel(leaf(s)), Some("vfs_write"));
        assert_eq!(
            kernel_frames(s).collect::<Vec<_>>(),
            ["__x64_sys_write", "vfs_write"]
        );
        assert_eq!(user_frames(s).last(), Some("deflate"));
        // A process named like a kernel frame is still the process, not a frame.
        assert_eq!(kernel_frames("x_[k];main").count(), 0);
    }
}

/// How much of the wall time only one thread of the workload was on a CPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SerialStats {
    /// Time bins between the first and the last sample.
    pub bins: u64,
    pub bin_ms: f64,
    /// Bins in which exactly one thread had samples.
    pub single_thread_bins: u64,
    /// Bins in which no thread had samples (all off-CPU).
    pub idle_bins: u64,
    /// Of the single-thread bins, those in which the lone thread ran after another thread
    /// that had done at least as much work had finished: it had the same work and ended
    /// late, so its own waits on the way, not its work, made it run alone.
    #[serde(default)]
    pub late_bins: u64,
    /// The user function seen most in single-thread bins.
    pub top_function: Option<String>,
    /// The threads that were on a CPU for at least [`THREAD_LOAD_MIN`] of the sampled
    /// time, busiest first (at most [`THREAD_LOADS`]): what saturates when one thread
    /// serves many connections.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadLoad>,
}

/// Threads kept in [`SerialStats::threads`].
pub const THREAD_LOADS: usize = 32;
/// The least busy share a thread needs to be kept.
pub const THREAD_LOAD_MIN: f64 = 0.02;

/// One thread's time on a CPU over the sampled span.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadLoad {
    /// Its process's command name.
    pub process: String,
    pub samples: u64,
    /// The sampled span (first to last sample of the profile), ns; summed over merged
    /// repeats like `samples`.
    pub span_ns: u64,
}

impl ThreadLoad {
    /// The share of the span the thread was on a CPU, at `frequency` samples per second
    /// of CPU time.
    pub fn busy(&self, frequency: u64) -> f64 {
        if self.span_ns == 0 || frequency == 0 {
            return 0.0;
        }
        (self.samples as f64 / frequency as f64 / (self.span_ns as f64 / 1e9)).min(1.0)
    }
}

impl SerialStats {
    /// Adds another repeat's: bins and counts add, the threads pair up by rank within
    /// their process (the busiest of each with the busiest).
    pub fn add(&mut self, o: &SerialStats) {
        self.bins += o.bins;
        self.single_thread_bins += o.single_thread_bins;
        self.idle_bins += o.idle_bins;
        self.late_bins += o.late_bins;
        if self.top_function.is_none() {
            self.top_function = o.top_function.clone();
        }
        let mut rank: std::collections::HashMap<&str, usize> = Default::default();
        let mut pairs: Vec<(String, usize, &ThreadLoad)> = Vec::new();
        for t in &o.threads {
            let r = rank.entry(t.process.as_str()).or_default();
            pairs.push((t.process.clone(), *r, t));
            *r += 1;
        }
        for (process, r, t) in pairs {
            let mine = self
                .threads
                .iter()
                .enumerate()
                .filter(|(_, m)| m.process == process)
                .nth(r)
                .map(|(k, _)| k);
            match mine {
                Some(k) => {
                    self.threads[k].samples += t.samples;
                    self.threads[k].span_ns += t.span_ns;
                }
                None => self.threads.push(t.clone()),
            }
        }
        self.threads.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.process.cmp(&b.process))
        });
    }

    pub fn single_share(&self) -> f64 {
        if self.bins == 0 {
            0.0
        } else {
            self.single_thread_bins as f64 / self.bins as f64
        }
    }

    /// The share of the time one thread ran alone *late* (see [`SerialStats::late_bins`]).
    pub fn late_share(&self) -> f64 {
        if self.bins == 0 {
            0.0
        } else {
            self.late_bins.min(self.single_thread_bins) as f64 / self.bins as f64
        }
    }
}

/// The profile of one sweep point (all its repeats merged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointProfile {
    /// `cycles` or `cpu-clock`.
    pub event: String,
    pub frequency: u64,
    pub stats: ProfileStats,
    pub serial: SerialStats,
    /// Repeats merged into this profile.
    pub repeats: u32,
    /// The user instructions where samples landed most, for the sharing analysis.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hot: Vec<HotInstruction>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded: Vec<FoldedStack>,
}

/// One function's cost per operation at every point of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionGrowth {
    pub function: String,
    /// A kernel function (its folded frames end in `_[k]`).
    #[serde(rename = "kernel")]
    pub in_kernel: bool,
    /// Self cost per operation at each point (ns or cycles per op).
    pub self_per_op: Vec<f64>,
    /// Inclusive cost per operation at each point.
    pub inclusive_per_op: Vec<f64>,
    /// Self cost per op, last point minus first.
    pub growth: f64,
    /// Growth as a share of the last point's total cost per op: the part of the lost
    /// throughput this function's growth accounts for.
    pub share_of_loss: f64,
}

/// One function's sampled cost in one profile: in itself (its frame was the leaf) and in
/// total (its frame anywhere on the stack, counted once per stack).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopFunction {
    /// The name without the folded form's `_[k]` mark.
    pub function: String,
    /// A kernel function (its folded frames end in `_[k]`).
    #[serde(rename = "kernel")]
    pub in_kernel: bool,
    pub self_samples: u64,
    pub total_samples: u64,
    /// Sums of sample periods (ns for cpu-clock, cycles for cycles), as in [`FoldedStack`].
    pub self_weight: u64,
    pub total_weight: u64,
}

/// A profile's functions, most self time first, with the profile's totals that their
/// shares are of.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopFunctions {
    pub samples: u64,
    pub weight: u64,
    pub functions: Vec<TopFunction>,
}

/// "What grew": per-function cost per operation across the sweep.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScalingDiff {
    /// ns/op (cpu-clock) or cycles/op (cycles).
    pub unit: String,
    pub points: Vec<u64>,
    /// Total sampled cost per operation at each point.
    pub total_per_op: Vec<f64>,
    /// Samples behind each point's numbers.
    #[serde(default)]
    pub samples: Vec<u64>,
    /// Top user functions by growth.
    pub user: Vec<FunctionGrowth>,
    /// Top kernel functions by growth.
    pub kernel: Vec<FunctionGrowth>,
}

/// cost ≈ a·nᵏ, fitted in log-log space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerFit {
    pub exponent: f64,
    pub ci95: [f64; 2],
    pub coefficient: f64,
    pub r2: f64,
    /// Sizes the fit used (sizes where the function had samples).
    pub points: usize,
}

/// One function's cost per run against the input size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionComplexity {
    pub function: String,
    /// A kernel function (its folded frames end in `_[k]`).
    #[serde(rename = "kernel")]
    pub in_kernel: bool,
    pub self_cost: Vec<f64>,
    pub inclusive_cost: Vec<f64>,
    pub fit: PowerFit,
    /// The largest size at which the function had no samples at all, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absent_below: Option<u64>,
}

/// A complexity sweep's fits: the whole workload's and each notable function's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComplexityReport {
    pub sizes: Vec<u64>,
    /// Sampled cost per run at each size (ns for cpu-clock).
    pub total_cost: Vec<f64>,
    pub overall: PowerFit,
    pub functions: Vec<FunctionComplexity>,
}
