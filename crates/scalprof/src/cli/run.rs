//! `scalprof run`'s flags, and the one place they become the sweep's options.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::parse::{
    parse_duration, parse_list, parse_output_path, parse_regex, parse_stack_size, parse_user,
};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Thread counts: `1,2,4`, a range `1-8`, or both (`1-4,8,16`). Default: powers of two up
    /// to the online CPU count, plus the count itself.
    #[arg(short = 't', long = "threads", value_name = "LIST", value_parser = parse_list)]
    pub threads: Option<String>,

    /// Clean (untraced) runs per point: throughput, speedup, efficiency and the model come
    /// from these. Use 5 or more on a shared or noisy machine.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,

    /// While a point's clean runs spread too wide (the 80% interval of their mean throughput
    /// wider than ±5%), more follow, up to this many in all. Default: --repeat (never more),
    /// or 3 × --repeat with --predict, whose prediction is only as good as the small points'
    /// throughput.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat_max: Option<u32>,

    /// Traced runs per point, after the clean ones: profiles, lock tables and findings come
    /// from these, and their throughput against the clean runs' is the perturbation tracing
    /// caused. Each share's interval spans them; 0 measures time only.
    #[arg(long, default_value_t = scalprof_pipeline::sweep::DIAGNOSE, value_name = "N")]
    pub diagnose: u32,

    /// While a point's verdict is unsettled (its top two causes' intervals overlap, or at the
    /// last point a cause's interval straddles the 5% threshold), more traced runs follow,
    /// up to this many in all; then the point is called unsettled and names its candidates.
    /// Equal to --diagnose: never more.
    #[arg(long, default_value_t = scalprof_pipeline::sweep::DIAGNOSE_MAX, value_name = "N")]
    pub diagnose_max: u32,

    /// Unmeasured runs before each point's repeats: use when the first run warms caches or
    /// page cache that later runs reuse.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub warmup: u32,

    /// A shell command (`sh -c`) run before every execution of the workload (warm-ups,
    /// clean and traced repeats), outside the timed window: use it to reset state, e.g.
    /// `--prepare 'sync; echo 3 > /proc/sys/vm/drop_caches'`. `{threads}` is replaced as
    /// in the command. If it fails, the sweep stops and says why.
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,

    /// A shell command (`sh -c`) run after every execution of the workload, outside the
    /// timed window (e.g. to drop the tables a repeat created); `{threads}` is replaced.
    /// If it fails, the sweep stops and says why.
    #[arg(long, value_name = "CMD")]
    pub cleanup: Option<String>,

    /// A name for the run; `show` and `compare` accept it. Default: the command, shortened
    /// to about 40 characters (`sh -c`'s script; without a leading `env VAR=…` or the
    /// program's folder).
    #[arg(long, value_name = "L")]
    pub label: Option<String>,

    /// Also write the run document (scalprof.run/1) to this file; `--json` alone (or `-`)
    /// prints it instead of the summary, as `show --json` does.
    #[arg(long, value_name = "PATH", value_parser = parse_output_path, num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,

    /// Regex whose first capture group is the operation count the workload prints;
    /// throughput is ops per second of wall time.
    #[arg(long, default_value = r"ops=(\d+)", value_name = "REGEX", value_parser = parse_regex)]
    pub ops_regex: String,

    /// Throughput when the workload prints no ops line: `weak` if each thread does the same
    /// work (throughput = N / wall), `strong` if the total work is fixed (1 / wall).
    /// Default: fixed work, unless every pairing of repeats shows the CPU time growing with
    /// the threads; the header says which and why.
    #[arg(long, value_enum)]
    pub scaling: Option<Scaling>,

    /// Kill a repeat's process group after this long (e.g. `30s`, `2m`); use for workloads
    /// that can hang. The repeat is kept, marked timed out.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Continue the sweep after a repeat fails or crashes (it is recorded either way).
    #[arg(long)]
    pub keep_going: bool,

    /// Keep every repeat's stdout and stderr in the store (up to 64 MiB each). By default
    /// only the lines the ops regex matches and the first and last 32 KiB of stderr are kept.
    #[arg(long)]
    pub keep_output: bool,

    /// Write the HTML report of the run to this file at the end.
    #[arg(long, value_name = "FILE", value_parser = parse_output_path)]
    pub report: Option<PathBuf>,

    /// After the sweep, prove its top findings by experiment, as `scalprof verify` does
    /// (at most 6 rounds at the largest point); the run document and the report carry them.
    #[arg(long)]
    pub verify: bool,

    /// Sampling frequency of the profiler (samples per second per CPU), the same at every
    /// point. Default: chosen per point, about 4000 samples a traced repeat from its clean
    /// repeats' CPU time, between 49 and 999 Hz, and at most the kernel's tick rate (HZ,
    /// often 250 or 1000), at which a BPF program samples in the tick with nothing per
    /// thread; without it, at most what keeps the sampler to 1% of a thread at the cost of
    /// a sample measured on this machine (lower too where the points' CPUs × frequency ×
    /// stack copies would exceed 512 MiB/s); said when it changes. Raise it for short runs:
    /// a rate above HZ samples with a perf event per thread (SCALPROF_SAMPLER=perf: always).
    #[arg(short = 'F', long, value_name = "HZ", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub freq: Option<u64>,

    /// User stack bytes copied per sample for unwinding (like perf's `--call-graph
    /// dwarf,SIZE`): `8k` … `63k`. Default 8k, doubled for the later traced repeats (up to
    /// 32k) where more than 10% of a traced repeat's user stacks could not be walked to
    /// their root; a size given here stays. Each sample costs this much memory until the
    /// repeat ends.
    #[arg(long, value_name = "BYTES", value_parser = parse_stack_size)]
    pub stack_size: Option<u32>,

    /// Measure time only, without profiling (no stacks, flame graphs or "what grew").
    #[arg(long)]
    pub no_profile: bool,

    /// Do not trace lock contention (kernel locks and user futex waits, with BPF).
    #[arg(long)]
    pub no_locks: bool,

    /// Lock tracing only: trace the locks of every process on the machine, not only the
    /// workload's tree. Profiling still samples the workload alone (--attach adds processes).
    #[arg(short = 'a', long = "all-cpus")]
    pub system_wide: bool,

    /// Also profile and trace these running processes (a server the swept command is a
    /// client of) in the traced repeats, with their children and the processes they start
    /// meanwhile: `--attach 1234,5678`. Throughput still comes from the command. Only your
    /// own processes (all their uids yours; root's for root) unless --attach-uid names
    /// another user.
    #[arg(long, value_name = "PID[,PID…]", value_delimiter = ',')]
    pub attach: Vec<i32>,

    /// Like --attach, for every process with this command name (`ps -eo comm`), found
    /// again before each traced repeat: `--attach-name postgres`. Other users' processes
    /// of that name are left out unless --attach-uid names their user (a name only they
    /// have is refused, saying whose).
    #[arg(long, value_name = "COMM")]
    pub attach_name: Vec<String>,

    /// Let --attach and --attach-name take this user's processes too (a uid or a user
    /// name): use it when the server runs as another user, `--attach-name postgres
    /// --attach-uid postgres` as root. A process whose uids differ (a setuid program) is
    /// never taken, and one that changes its uids after it was attached to is dropped.
    #[arg(long, value_name = "USER[,USER…]", value_delimiter = ',', value_parser = parse_user)]
    pub attach_uid: Vec<u32>,

    /// The commit of the code measured, for `scalprof history`; by default HEAD of the git
    /// checkout the workload runs from, else $GITHUB_SHA or $CI_COMMIT_SHA.
    #[arg(long, value_name = "SHA", value_parser = parse_commit)]
    pub commit: Option<String>,
    /// Predict the throughput up to N threads from the measured causes (default: the
    /// CPUs × 4): `model.prediction` in the document, a line in the summary.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub predict: Option<u64>,

    /// Run the workload in this cgroup (a directory under /sys/fs/cgroup, v1 or v2; once
    /// per hierarchy), to measure it under that cgroup's limits: `--cgroup
    /// /sys/fs/cgroup/cpu/quota4` after `echo 400000 > …/cpu.cfs_quota_us`. The limits and
    /// the throttling are then the given cgroup's.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Vec<std::path::PathBuf>,

    /// Have the kernel time every run of scalprof's BPF programs (BPF_ENABLE_STATS), not
    /// only in 50 ms windows a second scaled to the whole run: exact, but it adds two
    /// clock reads to every run of them.
    #[arg(long)]
    pub bpf_stats: bool,
    /// Do not time the user locks' holds: the traced repeats then run without scalprof's
    /// lock interposer preloaded (LD_PRELOAD), and the lock table has no hold columns.
    #[arg(long)]
    pub no_hold_times: bool,
    /// Time the user locks' holds at every point, the 1-thread point and points where no
    /// user lock was contended too. By default only the points whose first traced repeat
    /// saw a thread wait on a user lock time them, as the interposer lengthens every lock
    /// call.
    #[arg(long, conflicts_with = "no_hold_times")]
    pub hold_times_everywhere: bool,

    /// The workload; `{threads}` in any argument is replaced by the point's thread count,
    /// which is also in the environment as SCALPROF_THREADS.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl RunArgs {
    /// The stack copy to start with: `--stack-size`, or 8 KiB.
    fn stack_bytes(&self) -> u32 {
        self.stack_size.unwrap_or(8 * 1024)
    }

    /// The sweep these flags ask for: the one place `run`'s flags become options; with
    /// what to say about the sampling frequency, where it is not the one asked for.
    pub fn options(&self) -> anyhow::Result<(scalprof_pipeline::RunOptions, Option<String>)> {
        use scalprof_model::ThroughputSource;
        let values = self
            .threads
            .as_deref()
            .map(scalprof_pipeline::facade::parse_sweep_list)
            .transpose()?;
        let whole_machine =
            !self.attach.is_empty() || !self.attach_name.is_empty() || self.system_wide;
        let busy = scalprof_pipeline::sampling::busy_cpus(values.as_deref(), whole_machine);
        let (freq, notice) =
            scalprof_pipeline::sampling::frequency(busy, self.freq, self.stack_bytes());
        let notice = notice.filter(|_| !self.no_profile);
        Ok((
            scalprof_pipeline::RunOptions {
                values,
                repeat: self.repeat,
                repeat_max: self.repeat_max,
                diagnose: self.diagnose,
                diagnose_max: self.diagnose_max,
                warmup: self.warmup,
                prepare: self.prepare.clone(),
                cleanup: self.cleanup.clone(),
                label: self.label.clone(),
                ops_regex: self.ops_regex.clone(),
                scaling: self.scaling.map(|s| match s {
                    Scaling::Weak => ThroughputSource::Weak,
                    Scaling::Strong => ThroughputSource::Strong,
                }),
                timeout: self.timeout,
                keep_going: self.keep_going,
                keep_output: self.keep_output,
                sampling: (!self.no_profile).then(|| scalprof_pipeline::facade::SamplingConfig {
                    frequency: freq,
                    adaptive: self.freq.is_none(),
                    stack_bytes: self.stack_bytes(),
                    grow_stack: self.stack_size.is_none(),
                    ..Default::default()
                }),
                locks: (!self.no_locks).then_some(scalprof_pipeline::facade::LockConfig {
                    system_wide: self.system_wide,
                    bpf_stats: self.bpf_stats,
                    hold_times: !self.no_hold_times,
                    ..Default::default()
                }),
                attach: scalprof_pipeline::facade::AttachSpec::new(
                    self.attach.clone(),
                    self.attach_name.clone(),
                    self.attach_uid.clone(),
                )
                .pinned(),
                cgroups: self.cgroup.clone(),
                commit: self.commit.clone(),
                predict: self.predict,
                hold_times_everywhere: self.hold_times_everywhere,
                ..scalprof_pipeline::RunOptions::new(
                    self.command.clone(),
                    scalprof_model::SweepParameter::Threads,
                )
            },
            notice,
        ))
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaling {
    Weak,
    Strong,
}

/// A commit as git names one: a hash, a tag or a branch (`v1.2`, `release/3`, `HEAD~2`),
/// at most 200 characters, none of them a space or a control character (it is shown in
/// logs, step summaries and JUnit files).
fn parse_commit(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 200
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/+-~^@{}:".contains(c));
    if ok {
        Ok(s.to_string())
    } else {
        Err("must be a commit hash, tag or branch name: letters, digits and ._/+-~^@{}: only, at most 200 characters".into())
    }
}
