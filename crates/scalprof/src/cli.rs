//! Command-line definitions. `main.rs` turns parsed arguments into plain option structs
//! (`RunOptions`, the collectors' configs) before they reach any library code.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod parse;
mod run;
mod watch;
use parse::{parse_duration, parse_list, parse_output_path, parse_percent, parse_seconds};
pub use run::RunArgs;
pub use watch::WatchArgs;

#[derive(Parser, Debug)]
#[command(
    name = "scalprof",
    version,
    about = "Find out why a workload does not scale, and prove the fix",
    long_about = "scalprof runs a workload over a sweep of thread counts, measures every point\n\
                  (wall, user and system time of the whole process tree), fits the Universal\n\
                  Scalability Law and keeps every run in a local store.\n\n\
                  Quick start:  scalprof demo\n\
                  Your program: scalprof run -t 1,2,4,8 -- ./bench --threads {threads}\n\
                  A command's details: scalprof help COMMAND",
    after_help = EXIT_STATUS
)]
pub struct Cli {
    /// Run store: an SQLite file, or a team's PostgreSQL database as a URL
    /// (postgres://USER@HOST:PORT/DATABASE; its tables are made on first use).
    /// Default: $XDG_DATA_HOME/scalprof/runs.db, else ~/.local/share/scalprof/runs.db.
    #[arg(
        long,
        global = true,
        env = "SCALPROF_DB",
        value_name = "PATH|URL",
        verbatim_doc_comment
    )]
    pub db: Option<PathBuf>,

    /// Colour on a terminal: `auto` (unless NO_COLOR is set), `always` or `never`.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// What every command's exit status means: one table, for scripts and CI (also in the
/// README).
pub const EXIT_STATUS: &str = "\
Exit status (the same for every command):
  0    success
  1    a gate failed: compare --fail-if-slower found B slower than allowed
  2    an error: bad flags, an unknown run, a command not found, a workload that failed
       or crashed, missing privileges, an unreadable store
  130  interrupted by Ctrl-C (128 + the signal: 143 for SIGTERM); what was measured is kept";

#[derive(Subcommand, Debug)]
pub enum Command {
    // Each command's first paragraph is its line in `scalprof --help` (one short phrase,
    // as cargo and git list theirs); the rest is for `scalprof help CMD` and the man page.
    /// Measure and diagnose a sweep of thread counts
    ///
    /// Run a command over a sweep of thread counts, measure every point and fit the USL.
    Run(Box<RunArgs>),
    /// Build a running server's curve from its own load
    ///
    /// Attach to a running server and build its scaling curve from its own load, without a
    /// sweep: windows of its operations (from its log or a metrics counter) and busy threads
    /// (or Little's law from its latencies), grouped by concurrency level, some windows
    /// profiled and lock-traced; the levels are the run's points, with their causes.
    Watch(Box<WatchArgs>),
    /// Fit the USL to your own measurements (CSV)
    ///
    /// Fit the Universal Scalability Law to your own measurements (a two-column CSV).
    Fit(FitArgs),
    /// List stored runs; `runs rm` deletes them
    ///
    /// List the runs in the store (newest last); `runs rm RUN…` deletes runs.
    Runs(RunsArgs),
    /// Keep the newest runs and compact the store
    ///
    /// Reclaim the store's space: keep the newest runs, delete the older ones and their
    /// workload outputs, and compact the store.
    Gc(GcArgs),
    /// Print a stored run's summary or document
    ///
    /// Print a stored run: its summary, or the run document with --json.
    Show(ShowArgs),
    /// Sweep the built-in false-sharing example
    ///
    /// Build the pathology corpus and sweep the false-sharing pair (packed vs padded counters).
    Demo(DemoArgs),
    /// Measure the kernel with OS microbenchmarks
    ///
    /// The kernel's scalability: built-in OS microbenchmarks (page faults, mmap, stat,
    /// record locks, pwrite, …), each swept over worker counts as a stored run with its
    /// diagnosis; prints a rates table with each test's top cause.
    Suite(SuiteArgs),
    /// Build the pathology corpus of small programs
    ///
    /// Build the pathology corpus: small C programs reproducing each case study, one of
    /// them statically linked, and three in Rust (rustc -O -g, when rustc is installed).
    Corpus(CorpusArgs),
    /// Write a flame graph of a point, or a diff
    ///
    /// Write a flame graph (SVG) of a sweep point, its folded stacks, or a differential
    /// flame graph of two points or runs, normalized per operation.
    Flame(FlameArgs),
    /// Export profiles: pprof, speedscope, folded
    ///
    /// Export stored profiles for other tools: pprof (gzipped profile.proto, for `go tool
    /// pprof`, Pyroscope, Parca, Grafana), speedscope's JSON (speedscope.app), or folded
    /// stacks (inferno, flamegraph.pl).
    Export(ExportArgs),
    /// Find functions that grow faster than input
    ///
    /// Profile a command over input sizes and fit each function's cost as a·nᵏ: names the
    /// functions that grow faster than the input (`superlinear_cost`).
    Complexity(ComplexityArgs),
    /// Show a binary's data by cache line
    ///
    /// Show a binary's global data grouped by cache line, with DWARF types and members;
    /// flags lines where a lock or atomically written object shares with other data.
    Layout(LayoutArgs),
    /// Write a self-contained HTML report of a run
    ///
    /// Write a self-contained HTML report of a run: scaling plot, findings, flame graphs,
    /// lock tables.
    Report(ReportArgs),
    /// Compare two runs or suites; a CI gate
    ///
    /// Compare two runs ("prove the fix"): per point, medians and Welch's t-test on
    /// throughput, wall, user and system time; lock and finding changes.
    #[command(
        after_help = "Exit status: 0 no regression; 1 B is slower than --fail-if-slower \
        allows (the gate failed); 2 an error (bad flags, a missing run, an unreadable store); \
        130 interrupted. Every command uses this table: scalprof --help."
    )]
    Compare(CompareArgs),
    /// A label's runs over commits; change points
    ///
    /// One label's runs over commits: throughput and efficiency at the largest common
    /// point, the top cause of each, and the change points (commits where they shifted
    /// beyond the runs' own noise) with the cause that appeared, grew or vanished there.
    #[command(
        after_help = "Exit status: 0 no regression; 1 with --fail-on-regression, the last change \
        point lowered throughput or efficiency; 2 an error. Every command uses this table: \
        scalprof --help."
    )]
    History(HistoryArgs),
    /// Prove a cause by lengthening it
    ///
    /// Prove a diagnosis by experiment: lengthen each cause (a system call, a user or kernel
    /// lock, a function) by known delays at one point of a stored run, interleaved with a
    /// zero-delay control, and say whether the throughput answers as a bottleneck would (on
    /// or off the critical path), with the speedup the measured response gives for removing
    /// it.
    Verify(VerifyArgs),
    /// Show lock contention at each thread count
    ///
    /// Run a command at each thread count, once clean and then traced (two runs or more, as
    /// `run` traces), and show the traced runs' lock contention: kernel locks and
    /// user-space locks (futex waits) in one lockstat-style table, with callers.
    Locks(LocksArgs),
    /// Analyze a perf.data recorded elsewhere
    ///
    /// Analyze a perf.data recorded elsewhere (`perf record -g` or `--call-graph dwarf`):
    /// a one-point run with its flame graph and tables.
    Import(ImportArgs),
    /// Print a shell completion script
    ///
    /// Print a shell completion script: `scalprof completions bash >
    /// /etc/bash_completion.d/scalprof` (zsh: a file `_scalprof` in a folder of $fpath;
    /// fish: ~/.config/fish/completions/scalprof.fish).
    Completions(CompletionsArgs),
    /// Print the man page (roff)
    ///
    /// Print the man page (roff): `scalprof man > /usr/local/share/man/man1/scalprof.1`,
    /// or read it now with `scalprof man | man -l -`.
    Man,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RunsArgs {
    #[command(subcommand)]
    pub action: Option<RunsAction>,
    /// Print the list as JSON (an array of runs: id, label, command, created, status,
    /// points, planned).
    #[arg(long)]
    pub json: bool,
    /// List only the newest N runs.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

#[derive(Subcommand, Debug)]
pub enum RunsAction {
    /// Delete runs (ids, labels or latest~N) with their workload outputs.
    Rm(RunsRmArgs),
}

#[derive(Args, Debug)]
pub struct RunsRmArgs {
    /// The runs: ids, labels (a label names its newest run) or `latest~N`.
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
}

#[derive(Args, Debug)]
pub struct GcArgs {
    /// How many of the newest runs to keep.
    #[arg(long, value_name = "N", required = true)]
    pub keep: usize,
    /// Say what would be deleted, and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Args, Debug)]
pub struct ComplexityArgs {
    /// Input sizes, e.g. `5000,10000,20000,40000,80000`: at least three; five or more give
    /// each function's exponent a usable 95% interval (a finding needs all of it above
    /// n log n + 0.15).
    #[arg(long, value_name = "LIST", required = true, value_parser = parse_list)]
    pub sizes: String,
    /// Clean (unprofiled) runs per size: the whole workload's time.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Profiled runs per size, after the clean ones: the per-function fits come from these.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub diagnose: u32,
    /// Sampling frequency: higher than for thread sweeps, so small sizes get enough samples.
    #[arg(short = 'F', long, default_value_t = 4999, value_name = "HZ")]
    pub freq: u64,
    /// A name for the run (default: the command, shortened as for `run --label`).
    #[arg(long, value_name = "L")]
    pub label: Option<String>,
    /// Also write the run document to this file; `--json` alone (or `-`) prints it instead
    /// of the summary, as `show --json` does.
    #[arg(long, value_name = "PATH", value_parser = parse_output_path, num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// The workload; `{size}` in any argument is replaced by the size (also SCALPROF_SIZE).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct LayoutArgs {
    /// An ELF executable or shared library (not with --kernel).
    #[arg(required_unless_present = "kernel")]
    pub binary: Option<PathBuf>,
    /// The running kernel: its structs from BTF (--struct) or its globals from kallsyms (--addr).
    #[arg(long)]
    pub kernel: bool,
    /// With --kernel: print this struct's layout with its cache lines (e.g. mm_struct).
    #[arg(long = "struct", value_name = "NAME", requires = "kernel")]
    pub struct_name: Option<String>,
    /// With --kernel: the cache-line neighbors of this kernel address (hex), e.g. a lock's.
    #[arg(long, value_name = "ADDR", requires = "kernel")]
    pub addr: Option<String>,
    /// Cache-line size in bytes (default: the CPU's, from /sys).
    #[arg(long, value_name = "N")]
    pub line_size: Option<u64>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A run id, `latest`, `latest~N`, or a label.
    #[arg(default_value = "latest", value_name = "RUN")]
    pub run: String,
    /// Output file (default: scalprof-report-<run>.html).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline: a run id, label, `latest` or `latest~N` — or a suite document
    /// (`scalprof suite --json FILE`), to compare two suites test by test.
    pub a: String,
    /// The candidate (a suite document if A is one).
    pub b: String,
    /// Print the comparison as JSON (medians, difference, confidence interval, p-value, verdict).
    #[arg(long)]
    pub json: bool,
    /// Exit 1 if B's throughput is lower than A's by more than PCT percent at some point,
    /// shown at 95% confidence for all the points at once (each point's interval of B/A,
    /// Bonferroni-corrected, lies wholly below 1 − PCT/100). Needs 2+ repeats a side.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub fail_if_slower: Option<f64>,
    /// Also write a differential flame graph (per operation) of the last common point.
    #[arg(long, value_name = "FILE")]
    pub flame: Option<PathBuf>,
    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "FILE", value_parser = parse_output_path)]
    pub report: Option<PathBuf>,
    /// Also write a JUnit XML file: one test case per point, a failure for each point
    /// the gate finds slower. (With $GITHUB_STEP_SUMMARY set, a markdown summary with
    /// the cause is appended to it.)
    #[arg(long, value_name = "FILE", value_parser = parse_output_path)]
    pub junit: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The label whose runs to read (`scalprof runs` lists labels).
    pub label: String,
    /// Only the newest N runs.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Print the history as JSON (runs, change_points[]).
    #[arg(long)]
    pub json: bool,
    /// Exit 1 if the last change point lowered throughput or efficiency (a regression
    /// not undone since): a CI gate over the series.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Also write a JUnit XML file: one test case per metric, a failure for a regression.
    #[arg(long, value_name = "FILE", value_parser = parse_output_path)]
    pub junit: Option<PathBuf>,
    /// Also write the history as a self-contained HTML page with its plots.
    #[arg(long, value_name = "FILE", value_parser = parse_output_path)]
    pub report: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The run: an id, label, `latest` or `latest~N`.
    pub run: String,
    /// A cause to lengthen: a system call (`fdatasync`), a lock (`table_lock`,
    /// `mmap_lock`), a function of the program (`rebuild_index`) or a finding's subject;
    /// repeat it for several. Default: the run's top 3 findings.
    #[arg(long = "cause", value_name = "SUBJECT")]
    pub causes: Vec<String>,
    /// The sweep point to run at (default: the largest measured).
    #[arg(long, value_name = "VALUE")]
    pub point: Option<u64>,
    /// The most rounds of the interleaved levels; each level runs once per round. An
    /// experiment stops after 2 once its verdict is clear (on or off the path, with a
    /// narrow interval); more rounds settle an inconclusive one on a noisy machine.
    #[arg(long, default_value_t = 6, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=50))]
    pub rounds: u32,
    /// Print the experiments as JSON (the run document's `experiments[]` entries).
    #[arg(long)]
    pub json: bool,
    /// The command to execute, given again (`{threads}` substituted as in `run`). Without
    /// it the stored command runs when this user recorded it on this host; a run from a
    /// shared store or another user is shown first and asked about.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct LocksArgs {
    /// Thread counts to substitute for `{threads}` (and put in SCALPROF_THREADS), a list as
    /// in `run`: `2`, `1,2,4`, `1-4`.
    #[arg(short = 't', long = "threads", default_value = "1", value_name = "LIST", value_parser = parse_list)]
    pub threads: String,
    /// Trace the locks of every process on the machine, not only the command's tree.
    #[arg(short = 'a', long = "all-cpus")]
    pub system_wide: bool,
    /// Have the kernel time every run of scalprof's BPF programs (BPF_ENABLE_STATS), not
    /// only in 50 ms windows a second scaled to the whole run: exact, but it adds two
    /// clock reads to every run of them.
    #[arg(long)]
    pub bpf_stats: bool,
    /// Do not time the user locks' holds: the traced repeats then run without scalprof's
    /// lock interposer preloaded (LD_PRELOAD), and the lock table has no hold columns.
    #[arg(long)]
    pub no_hold_times: bool,
    /// Also write the run document to this file; `--json` alone (or `-`) prints it instead
    /// of the summary, as `show --json` does.
    #[arg(long, value_name = "PATH", value_parser = parse_output_path, num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// The command.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The perf.data file.
    pub file: PathBuf,
    /// A name for the run (default: the file name).
    #[arg(long, value_name = "L")]
    pub label: Option<String>,
}

#[derive(Args, Debug)]
pub struct FlameArgs {
    /// A run id, `latest`, `latest~N`, or a label.
    #[arg(default_value = "latest", value_name = "RUN")]
    pub run: String,
    /// The sweep point (thread count); default: the last point.
    #[arg(long, value_name = "N")]
    pub point: Option<u64>,
    /// Output file (default: scalprof-RUN@POINT.svg; with --diff,
    /// scalprof-RUN@POINT-vs-RUN@POINT-diff.svg).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the folded stacks ("frame;frame;… samples") instead of an SVG, for other tools;
    /// with --diff, "frame;frame;… before after" per operation (inferno's diff format).
    #[arg(long)]
    pub folded: bool,
    /// Compare two profiles, each `RUN`, `RUN@POINT` or `@POINT` (a point of RUN):
    /// e.g. `--diff @1 @2` (what changed from 1 to 2 threads), `--diff 3@2 5@2` (two runs).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub diff: Option<Vec<String>>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Gzipped profile.proto: every sample's kernel and user frames, its process and point.
    Pprof,
    /// One line per stack: `process;frame;…;leaf samples` (kernel frames end in `_[k]`).
    Folded,
    /// speedscope's JSON: open it at https://www.speedscope.app (or a local speedscope)
    /// for its left-heavy and sandwich views; each point is one profile.
    Speedscope,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A run id, `latest`, `latest~N`, or a label.
    #[arg(default_value = "latest", value_name = "RUN")]
    pub run: String,
    /// The sweep point to export, or `all` (pprof: each sample is labelled with its point,
    /// e.g. `threads=2`; speedscope: one profile per point). Default: the last point.
    #[arg(long, value_name = "N|all")]
    pub point: Option<String>,
    /// The file format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Pprof)]
    pub format: ExportFormat,
    /// Output file, `-` for standard output (default: scalprof-<run>@<point>.pb.gz, or
    /// .folded, or .speedscope.json).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct FitArgs {
    /// CSV with a header line and two columns: concurrency, throughput.
    pub file: PathBuf,
    /// Print {"sigma","kappa","lambda","peak","r2",…} as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A run id, `latest`, `latest~N`, or a label.
    #[arg(default_value = "latest", value_name = "RUN")]
    pub run: String,
    /// Print the run document (scalprof.run/1) instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Show every lock row (the summary shows those above 1% of the thread-time).
    #[arg(long)]
    pub locks: bool,
    /// Show the measurement's details too: time split, counters, profile and tracing
    /// quality, what grew per operation, each point's lock table.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Where one point's time went: its N functions with the most self time (default 20),
    /// with self and total shares, as `perf report --stdio` and `pprof -top` print.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "20")]
    pub top: Option<usize>,
    /// The point for --top (default: the largest profiled one).
    #[arg(long, value_name = "VALUE", requires = "top")]
    pub point: Option<u64>,
    /// Predict the throughput up to N threads from the measured causes (default: the
    /// run's CPUs × 4): `model.prediction` in the document, a line in the summary.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub predict: Option<u64>,
}

#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// Shorter runs (0.5 s per repeat, 2 clean repeats): the whole suite in minutes.
    #[arg(long)]
    pub quick: bool,
    /// Tests to run, `name` (all its modes) or `name:threads|processes`, comma-separated;
    /// default: all. Tests: page_fault, mmap_munmap, brk, fork_exec, stat_same, stat_own,
    /// open_close, dup_close, pipe_pingpong, fcntl_same_file, fcntl_own_file,
    /// pwrite_same_file, pwrite_own_file, futex_own, poll, lseek.
    #[arg(long, value_name = "LIST")]
    pub tests: Option<String>,
    /// Worker counts (default: as for `run`, 1 … the online CPUs).
    #[arg(short = 't', long = "threads", value_name = "LIST", value_parser = parse_list)]
    pub threads: Option<String>,
    /// Seconds each repeat runs its operation (default 1; 0.5 with --quick).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub seconds: Option<f64>,
    /// Clean repeats per point (default 3; 2 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: Option<u32>,
    /// Kill a test's repeat after this long (default 60s): a hung test is recorded as
    /// timed out and the suite goes on.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Write the results as `scalprof.suite/1` JSON; `scalprof compare` takes two of these
    /// (before and after a kernel change) and compares them test by test. `--json` alone (or
    /// `-`) prints it instead of the table.
    #[arg(long, value_name = "FILE", value_parser = parse_output_path, num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
    /// Write one self-contained HTML page for the whole suite: the rates table, then each
    /// test's scaling plot, time budget and findings.
    #[arg(long, value_name = "FILE", value_parser = parse_output_path)]
    pub report: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Measured runs per point.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Thread counts (default: as for `run`).
    #[arg(short = 't', long = "threads", value_name = "LIST", value_parser = parse_list)]
    pub threads: Option<String>,
}

#[derive(Args, Debug)]
pub struct CorpusArgs {
    /// Where to build the programs. Default: $XDG_CACHE_HOME/scalprof/corpus.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}
