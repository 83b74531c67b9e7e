//! `scalprof watch`'s flags, and the one place they become the watch's options.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse::{parse_duration, parse_output_path, parse_regex, parse_user};

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("server").required(true).multiple(true).args(["attach", "attach_name"]))]
pub struct WatchArgs {
    /// The server's processes (with their children and the processes they start
    /// meanwhile): `--attach 1234,5678`. Only your own processes (all their uids yours;
    /// root's for root) unless --attach-uid names another user.
    #[arg(long, value_name = "PID[,PID…]", value_delimiter = ',')]
    pub attach: Vec<i32>,

    /// Every process with this command name (`ps -eo comm`), found again every window:
    /// `--attach-name postgres`. Other users' processes of that name are left out unless
    /// --attach-uid names their user.
    #[arg(long, value_name = "COMM")]
    pub attach_name: Vec<String>,

    /// Let --attach and --attach-name take this user's processes too (a uid or a user
    /// name): `--attach-name postgres --attach-uid postgres` as root.
    #[arg(long, value_name = "USER[,USER…]", value_delimiter = ',', value_parser = parse_user)]
    pub attach_uid: Vec<u32>,

    /// The server's log, followed as `tail -F` follows it (from its end, through rotation):
    /// each new line --ops-regex matches adds its first group to the window's operations.
    /// Without it, the server's CPU time is its work (CPU-µs per second).
    #[arg(
        long,
        value_name = "PATH",
        requires = "ops_regex",
        conflicts_with = "ops_url"
    )]
    pub ops_file: Option<PathBuf>,

    /// Regex of the log's operations lines; its first capture group is the count the line
    /// adds (`'served (\d+)'`, `'(\d+) requests'`); without a group, each matching line is
    /// one operation (`'"GET '` in an access log).
    #[arg(long, value_name = "REGEX", value_parser = parse_regex, requires = "ops_file")]
    pub ops_regex: Option<String>,

    /// Regex of the log's latency lines, its first group one operation's latency in
    /// milliseconds (`'took ([0-9.]+) ?ms'`): each window's concurrency is then Little's law's,
    /// its throughput × its mean latency (the requests in the server), rather than its busy
    /// threads: for an event loop, or a server whose threads do not show its load.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex, requires = "ops_file")]
    pub latency_regex: Option<String>,

    /// A Prometheus counter on this host: `http://127.0.0.1:9100/metrics#http_requests_total`
    /// (with labels: `#http_requests_total{code="200"}`, the matching series summed); its
    /// increase is the window's operations (a reset counts from zero). Read every 250 ms,
    /// plain HTTP, no proxy or redirect.
    #[arg(long, value_name = "URL#METRIC")]
    pub ops_url: Option<String>,

    /// Stop after this long (`20s`, `10m`, `2h`). Default: at Ctrl-C or when the server
    /// exits; either way every window measured is kept.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// The length of a window: each gives one concurrency level and its throughput. Keep it
    /// several times the log's interval between operations lines.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_window)]
    pub window: Duration,

    /// One window in N has the profiler and the lock tracer attached, and so do each
    /// level's first two after an untraced one; the others measure the server untouched,
    /// and the curve is made of them. A traced window slows a lock-heavy server by about
    /// 8% (its context switches run the tracer's programs): 8 kept a 60 s watch of one
    /// to 1.5% of its throughput; 2 alternates.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub trace_every: u32,

    /// Sampling frequency of the profiler in the traced windows (samples per second per
    /// CPU). Default: at most what keeps the sampler to 1% of a thread at the cost of a
    /// sample measured on this machine (999 Hz at most).
    #[arg(short = 'F', long, value_name = "HZ", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub freq: Option<u64>,

    /// No profiling: the traced windows trace locks only.
    #[arg(long)]
    pub no_profile: bool,

    /// No lock tracing: the traced windows are profiled only.
    #[arg(long)]
    pub no_locks: bool,

    /// A name for the run; `show` and `compare` accept it. Default: "watch" and the
    /// server's command, shortened.
    #[arg(long, value_name = "L")]
    pub label: Option<String>,

    /// Also write the run document (scalprof.run/1) to this file; `--json` alone (or `-`)
    /// prints it instead of the summary.
    #[arg(long, value_name = "PATH", value_parser = parse_output_path, num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,

    /// Predict the throughput up to N busy threads from the measured causes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub predict: Option<u64>,
}

/// A window: at least 100 ms (the threads' waits are sampled every 40 ms).
fn parse_window(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(100) {
        return Err("must be at least 100ms (a window of 1s or more gives steadier levels)".into());
    }
    Ok(d)
}

impl WatchArgs {
    /// The watch these flags ask for.
    pub fn options(&self) -> scalprof_pipeline::watch::WatchOptions {
        use scalprof_pipeline::facade::{AttachSpec, LockConfig, SamplingConfig};
        scalprof_pipeline::watch::WatchOptions {
            ops_file: self.ops_file.clone().zip(self.ops_regex.clone()),
            ops_url: self.ops_url.clone(),
            latency_regex: self.latency_regex.clone(),
            window: self.window,
            duration: self.duration,
            label: self.label.clone(),
            sampling: (!self.no_profile).then(|| SamplingConfig {
                frequency: self.freq.unwrap_or(999),
                adaptive: self.freq.is_none(),
                ..Default::default()
            }),
            locks: (!self.no_locks).then(|| LockConfig {
                hold_times: false,
                ..Default::default()
            }),
            trace_every: self.trace_every,
            predict: self.predict,
            ..scalprof_pipeline::watch::WatchOptions::new(
                AttachSpec::new(
                    self.attach.clone(),
                    self.attach_name.clone(),
                    self.attach_uid.clone(),
                )
                .pinned(),
            )
        }
    }
}
