//! The native sampler: perf_event_open on the workload's process tree.
//!
//! One sampling event per online CPU for the workload's pid, inherited by its threads and
//! children, enabled when it execs. `cycles` where the machine has a PMU, `cpu-clock`
//! otherwise. Each sample carries the kernel callchain and, for user space, the user
//! registers and a copy of the user stack, so that binaries without frame pointers can be
//! unwound with their `.eh_frame` afterwards.
//!
//! The ring-buffer reader is written by hand (perf-event-open-sys gives the raw ABI): a
//! thread drains every buffer while the workload runs, trims each sample's stack copy to
//! the bytes the kernel actually copied, and appends the records to one arena. Nothing is
//! parsed or symbolized until the workload has exited.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use perf_event_open_sys as sys;
use sys::bindings as b;

use crate::exec::Attach;
use crate::{CollectError, ProfilingError};

pub(crate) mod cost;
mod maps;
mod rate;
mod ring;
mod stacks;
#[cfg(feature = "bpf")]
mod ticks;
pub use cost::{cached_sample_cost_ns, cached_switch_cost};
#[cfg(feature = "bpf")]
pub use ticks::tick_ceiling;

/// Without BPF there is no tick sampler.
#[cfg(not(feature = "bpf"))]
pub fn tick_ceiling(_config: &SamplingConfig) -> Option<u64> {
    None
}
pub use maps::MapStats;
use maps::{MapSource, MapTracker, ProcSource};
pub use rate::{cost_ceiling, point_frequency, MIN_ADAPTIVE_HZ, SAMPLER_SHARE, TARGET_SAMPLES};
use ring::Ring;
pub use stacks::delta_encoded;
use stacks::StackKeys;

/// What to sample and how.
#[derive(Clone, Debug)]
pub struct SamplingConfig {
    /// Samples per second per CPU.
    pub frequency: u64,
    /// Bytes of user stack copied per sample (8–32 KiB is enough for most threads).
    pub stack_bytes: u32,
    /// Double `stack_bytes` for the sweep's later traced repeats (up to
    /// [`GROWN_STACK_BYTES`]) where a traced repeat's user stacks were cut short: false
    /// when the user chose the size.
    pub grow_stack: bool,
    /// Use the `cycles` hardware event (only when the machine has a PMU).
    pub use_pmu: bool,
    /// Keep each thread's stack copies as differences from its last full one (see
    /// [`scalprof_model::stack_delta`]); false keeps every copy whole (tests compare).
    pub delta_stacks: bool,
    /// Ask the kernel for mapping records (MMAP2) as perf does, instead of reading the
    /// workload's maps from /proc (perf/maps.rs): what the benchmarks compare, to price
    /// the records. Default: `SCALPROF_MAPPING_RECORDS=1` in the environment, else off.
    pub mapping_records: bool,
    /// Choose each point's rate from its clean repeats ([`point_frequency`]), with
    /// `frequency` the most: false where the user chose the rate.
    pub adaptive: bool,
}

/// The most a stack copy grows to by itself (`--stack-size` goes to 63 KiB): 32 KiB walked
/// 99.8% of ripgrep's stacks, 8 KiB 13%.
pub const GROWN_STACK_BYTES: u32 = 32 * 1024;

/// A traced repeat with more than this share of its user stacks cut short doubles the
/// copy for the next ones.
pub const CUT_STACKS_TO_GROW: f64 = 0.10;

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            // 999 rather than 1000, so sampling does not run in lockstep with timers.
            frequency: 999,
            stack_bytes: 8 * 1024,
            grow_stack: true,
            use_pmu: false,
            delta_stacks: true,
            mapping_records: std::env::var_os("SCALPROF_MAPPING_RECORDS").is_some_and(|v| v == "1"),
            adaptive: false,
        }
    }
}

/// Everything one profiled execution produced, unparsed.
#[derive(Clone, Debug, Default)]
pub struct RawProfile {
    /// The `perf_event_attr` the records were produced with (for the record parser).
    pub attr: Vec<u8>,
    /// Concatenated perf records (8-byte header + body each), in per-CPU drain order.
    pub records: Vec<u8>,
    /// `cycles` or `cpu-clock`.
    pub event: String,
    pub frequency: u64,
    /// Whether kernel callchains were collected (false when the kernel refused them).
    pub kernel_stacks: bool,
    /// Samples read from the buffers.
    pub samples: u64,
    /// Records whose header was malformed and that were skipped.
    pub bad_records: u64,
    /// The reader thread's CPU time while sampling: scalprof's own recording cost.
    pub record_cpu_ns: u64,
    /// The mappings the reader read from /proc (the sampler asks for no mapping records).
    pub maps: MapStats,
    /// With attached processes the sampler samples every CPU and these are the processes
    /// to keep (the command and the attached ones; their children are followed through
    /// the fork records). `None`: the records are the command's tree only.
    pub only: Option<Vec<i32>>,
    /// The attached processes as they were when sampling began: their command names and
    /// executable mappings (no record announces what was mapped before).
    pub initial: Vec<InitialProcess>,
    /// The kernel's tick rate where the tick sampler took the samples (perf/ticks.rs);
    /// `None`: a perf event did.
    pub tick_hz: Option<u64>,
    /// Why the tick sampler could not sample this execution, where it could not (not where
    /// the perf event was asked for: a rate above the tick's, the PMU, SCALPROF_SAMPLER).
    pub tick_refused: Option<String>,
    /// Samples lost for want of room in the tick sampler's ring buffer.
    pub lost_samples: u64,
    /// Samples the tick sampler timed (those the host did not stop mid-sample), and the
    /// time its program spent taking them (ns).
    pub tick_samples: u64,
    pub tick_sample_ns: u64,
}

/// A process that ran before sampling began.
#[derive(Clone, Debug, Default)]
pub struct InitialProcess {
    pub pid: i32,
    pub comm: String,
    pub maps: Vec<crate::locks::ProcMap>,
    /// Its user, read when scalprof attached (a perf map it writes is trusted as its own;
    /// its PID may belong to someone else's process by the time the samples are read).
    pub uid: Option<u32>,
}

/// How often the reader drains the buffers when no wakeup came: 4 MiB per CPU holds
/// ~500 samples with 8 KiB stack copies, half a second at the default rate.
const POLL_MS: i32 = 50;

/// x86-64 perf register numbers of BP, SP and IP: what framehop needs to unwind.
#[cfg(target_arch = "x86_64")]
pub const USER_REGS_MASK: u64 =
    (1 << b::PERF_REG_X86_BP) | (1 << b::PERF_REG_X86_SP) | (1 << b::PERF_REG_X86_IP);
#[cfg(not(target_arch = "x86_64"))]
pub const USER_REGS_MASK: u64 = 0;

const SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_PERIOD
    | b::PERF_SAMPLE_CALLCHAIN
    | b::PERF_SAMPLE_REGS_USER
    | b::PERF_SAMPLE_STACK_USER) as u64;

/// What the reader thread hands back.
#[derive(Default)]
struct Drained {
    /// To unmap.
    rings: Vec<Ring>,
    records: Vec<u8>,
    samples: u64,
    bad: u64,
    /// The thread's own CPU time, reading included.
    cpu_ns: u64,
    maps: MapStats,
    /// Tick samples the BPF ring buffer had no room for; those it took, and the time
    /// its program spent on them.
    lost: u64,
    tick_samples: u64,
    tick_ns: u64,
}

/// A sampler for one execution: attach before exec, finish after exit, then take.
pub struct Sampler {
    config: SamplingConfig,
    buffers: Vec<Ring>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Drained>>,
    result: Option<RawProfile>,
    /// Set when the reader thread panicked: its records are gone.
    panicked: bool,
    attr: Vec<u8>,
    event: String,
    kernel: bool,
    only: Option<Vec<i32>>,
    initial: Vec<InitialProcess>,
    /// The tick's rate where the tick sampler samples this execution.
    tick_hz: Option<u64>,
    /// Why the tick sampler does not (the perf event samples instead).
    tick_refused: Option<String>,
}

impl Sampler {
    pub fn new(config: SamplingConfig) -> Sampler {
        Sampler {
            config,
            buffers: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            result: None,
            panicked: false,
            attr: Vec::new(),
            event: String::new(),
            kernel: true,
            only: None,
            initial: Vec::new(),
            tick_hz: None,
            tick_refused: None,
        }
    }

    /// The profile of the finished execution.
    pub fn take(&mut self) -> Option<RawProfile> {
        self.result.take()
    }

    /// Why this repeat's samples were lost, if they were.
    pub fn lost(&self) -> Option<String> {
        self.panicked
            .then(|| "the sampler's reader thread panicked: this repeat has no profile".into())
    }

    fn attr(&self, cycles: bool, kernel: bool, every_task: bool) -> b::perf_event_attr {
        // SAFETY: perf_event_attr is plain data; all-zero is its documented default.
        let mut a: b::perf_event_attr = unsafe { std::mem::zeroed() };
        a.size = std::mem::size_of::<b::perf_event_attr>() as u32;
        if cycles {
            a.type_ = b::PERF_TYPE_HARDWARE;
            a.config = b::PERF_COUNT_HW_CPU_CYCLES as u64;
        } else {
            a.type_ = b::PERF_TYPE_SOFTWARE;
            a.config = b::PERF_COUNT_SW_CPU_CLOCK as u64;
        }
        a.__bindgen_anon_1.sample_freq = self.config.frequency;
        a.set_freq(1);
        a.sample_type = SAMPLE_TYPE;
        a.sample_regs_user = USER_REGS_MASK;
        a.sample_stack_user = self.config.stack_bytes;
        if every_task {
            // Every CPU, every task, from now: the records are filtered by process later.
            // (A per-task event cannot follow threads that exist already, and one per
            // thread of a large server is many descriptors.)
        } else {
            a.set_disabled(1);
            a.set_enable_on_exec(1);
            a.set_inherit(1);
        }
        // No mmap/mmap2 unless asked: they would make every mapping on the machine pay
        // for a record (see perf/maps.rs); the reader reads the workload's from /proc.
        if self.config.mapping_records {
            a.set_mmap(1);
            a.set_mmap2(1);
            a.set_comm(1);
            a.set_comm_exec(1);
        }
        a.set_task(1);
        a.set_sample_id_all(1);
        a.set_exclude_hv(1);
        // User stacks come from the copied stack; the kernel walks only its own part.
        a.set_exclude_callchain_user(1);
        a.set_exclude_kernel(u64::from(!kernel));
        a.set_watermark(1);
        a.__bindgen_anon_2.wakeup_watermark = 1024 * 1024;
        // Sample times on CLOCK_MONOTONIC, the lock tracer's clock (bpf_ktime_get_ns), so
        // that a holder's samples can be placed inside its waiters' waits.
        a.set_use_clockid(1);
        a.clockid = libc::CLOCK_MONOTONIC;
        a
    }

    fn open_all(&mut self, pid: i32, every_task: bool) -> Result<(), CollectError> {
        let cpus = online_cpu_list();
        let mut cycles = self.config.use_pmu;
        let mut kernel = true;
        let target = if every_task { -1 } else { pid };
        loop {
            let mut attr = self.attr(cycles, kernel, every_task);
            let mut opened = Vec::new();
            let mut failure = None;
            for &cpu in &cpus {
                match open_event(&mut attr, target, cpu) {
                    Ok(fd) => opened.push(fd),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            match failure {
                None => {
                    self.event = if cycles { "cycles" } else { "cpu-clock" }.to_string();
                    self.kernel = kernel;
                    self.attr = attr_bytes(&attr);
                    let pages = ring_pages(&self.config, cpus.len());
                    for fd in opened {
                        self.buffers.push(Ring::map(fd, pages)?);
                    }
                    if !self.config.mapping_records {
                        self.open_names(&attr, target, &cpus)?;
                    }
                    return Ok(());
                }
                Some(e) => {
                    let code = e.raw_os_error().unwrap_or(0);
                    if cycles
                        && (code == libc::ENOENT
                            || code == libc::EOPNOTSUPP
                            || code == libc::EINVAL)
                    {
                        cycles = false; // no PMU after all: cpu-clock
                        continue;
                    }
                    if kernel && (code == libc::EACCES || code == libc::EPERM) {
                        kernel = false; // user space only, and say so
                        continue;
                    }
                    return Err(ProfilingError::Open {
                        source: e,
                        hint: paranoia_hint(),
                    }
                    .into());
                }
            }
        }
    }
}

impl Sampler {
    /// Beside each CPU's sampling event, one that records the workload's names and execs
    /// (COMM records) and wakes the reader at each: so that it reads a new program's
    /// maps while the program runs, however short its life (see perf/maps.rs). Its
    /// records carry the same fields as the samples' (`sample_type`, `sample_id_all`), so
    /// one parser reads both.
    fn open_names(
        &mut self,
        sampling: &b::perf_event_attr,
        target: i32,
        cpus: &[u32],
    ) -> Result<(), CollectError> {
        let mut attr = *sampling;
        attr.type_ = b::PERF_TYPE_SOFTWARE;
        attr.config = b::PERF_COUNT_SW_DUMMY as u64;
        // The forks and exits come with the samples' event, except under the tick
        // sampler, which has none.
        attr.set_task(u64::from(self.tick_hz.is_some()));
        attr.set_freq(0);
        attr.__bindgen_anon_1.sample_period = 0;
        attr.set_comm(1);
        attr.set_comm_exec(1);
        // Woken at every record: one byte of watermark.
        attr.__bindgen_anon_2.wakeup_watermark = 1;
        for &cpu in cpus {
            let fd = open_event(&mut attr, target, cpu).map_err(|source| ProfilingError::Open {
                source,
                hint: paranoia_hint(),
            })?;
            self.buffers.push(Ring::map(fd, NAME_RING_PAGES)?);
        }
        Ok(())
    }
}

/// The bytes of `attr`, as the record parser reads them.
fn attr_bytes(attr: &b::perf_event_attr) -> Vec<u8> {
    // SAFETY: viewing a plain-data struct as bytes.
    unsafe {
        std::slice::from_raw_parts(
            (attr as *const b::perf_event_attr).cast::<u8>(),
            std::mem::size_of::<b::perf_event_attr>(),
        )
    }
    .to_vec()
}

/// How the records of a default sampler (no PMU, kernel stacks, one process tree) are
/// parsed: what the tests of its record writers read them back with.
#[cfg(test)]
pub(crate) fn test_parse_info() -> linux_perf_event_reader::RecordParseInfo {
    use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};
    let attr = Sampler::new(SamplingConfig::default()).attr(false, true, false);
    let bytes = attr_bytes(&attr);
    let (attr, _) = PerfEventAttr::parse::<_, byteorder::NativeEndian>(&bytes[..]).unwrap();
    RecordParseInfo::new(&attr, Endianness::NATIVE)
}

/// Opens `attr` for `target` (a process, or -1: every task) on `cpu`.
pub(super) fn open_event(
    attr: &mut b::perf_event_attr,
    target: i32,
    cpu: u32,
) -> std::io::Result<OwnedFd> {
    // SAFETY: attr is a fully initialized perf_event_attr.
    let fd =
        unsafe { sys::perf_event_open(attr, target, cpu as i32, -1, b::PERF_FLAG_FD_CLOEXEC as _) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Data pages of a CPU's ring of names and execs (64 KiB: a thousand COMM records).
const NAME_RING_PAGES: usize = 16;

/// How to get permission to profile, from the current `perf_event_paranoid`.
pub fn paranoia_hint() -> String {
    let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    format!(
        "perf_event_paranoid is {level}; run as root, or allow profiling with \
         `sudo sysctl kernel.perf_event_paranoid=1`, or pass --no-profile"
    )
}

impl Attach for Sampler {
    fn attach(&mut self, pid: i32, attached: &[i32]) -> Result<(), CollectError> {
        if !attached.is_empty() {
            self.only = Some(
                std::iter::once(pid)
                    .chain(attached.iter().copied())
                    .collect(),
            );
            self.initial = attached
                .iter()
                .map(|&p| InitialProcess {
                    pid: p,
                    comm: crate::attach::comm_of(p).unwrap_or_default(),
                    uid: {
                        use std::os::unix::fs::MetadataExt;
                        std::fs::metadata(format!("/proc/{p}"))
                            .ok()
                            .map(|m| m.uid())
                    },
                    maps: crate::locks::read_proc_maps(p as u32)
                        .into_iter()
                        .filter(|m| m.executable)
                        .collect(),
                })
                .collect();
        }
        #[cfg(feature = "bpf")]
        match ticks::plan(&self.config) {
            Ok(plan) => match self.attach_ticks(pid, attached, plan) {
                Ok(()) => return Ok(()),
                Err(why) => self.tick_refused = Some(why),
            },
            Err(ticks::NoTick::Failed(why)) => self.tick_refused = Some(why),
            Err(ticks::NoTick::Chosen) => {}
        }
        self.open_all(pid, !attached.is_empty())?;
        let buffers = std::mem::take(&mut self.buffers);
        let stop = self.stop.clone();
        let keys = StackKeys::new(self.config.delta_stacks);
        let tracker = MapTracker::new(self.only.as_deref(), &self.initial)
            .enabled(!self.config.mapping_records);
        let handle = std::thread::Builder::new()
            .name("scalprof-sampler".into())
            .spawn(move || read_loop(buffers, keys, tracker, &mut ProcSource::new(), &stop, None))
            .map_err(ProfilingError::Thread)?;
        self.reader = Some(handle);
        Ok(())
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.reader.take() {
            let joined = h.join();
            self.panicked = joined.is_err();
            if let Ok(d) = joined {
                drop(d.rings); // unmaps and closes
                self.result = Some(RawProfile {
                    attr: std::mem::take(&mut self.attr),
                    records: d.records,
                    event: self.event.clone(),
                    frequency: self.config.frequency,
                    kernel_stacks: self.kernel,
                    samples: d.samples,
                    bad_records: d.bad,
                    record_cpu_ns: d.cpu_ns,
                    maps: d.maps,
                    only: self.only.take(),
                    initial: std::mem::take(&mut self.initial),
                    tick_hz: self.tick_hz,
                    tick_refused: self.tick_refused.take(),
                    lost_samples: d.lost,
                    tick_samples: d.tick_samples,
                    tick_sample_ns: d.tick_ns,
                });
            }
        }
    }
}

fn read_loop(
    mut rings: Vec<Ring>,
    mut keys: StackKeys,
    mut tracker: MapTracker,
    source: &mut dyn MapSource,
    stop: &AtomicBool,
    mut ticks: Option<&mut dyn TickSource>,
) -> Drained {
    // The reader competes with a workload that keeps every CPU busy; when it waits for a
    // CPU the rings fill and samples are lost. A little more weight than the workload's
    // threads (nice −5: about three times a default thread's share when they contend);
    // root only, and harmless when refused.
    // SAFETY: gettid and setpriority on this thread have no memory-safety preconditions.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -5);
    }
    let mut out = Vec::with_capacity(1 << 20);
    let (mut samples, mut bad) = (0u64, 0u64);
    let mut pollfds: Vec<libc::pollfd> = rings
        .iter()
        .map(|r| libc::pollfd {
            fd: r.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // The tick sampler's ring wakes the reader only when it is filling (ticks.bpf.c).
    pollfds.extend(
        ticks
            .as_deref()
            .and_then(|t| t.fd())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            }),
    );
    loop {
        let done = stop.load(Ordering::SeqCst);
        for r in &mut rings {
            r.drain(&mut out, &mut keys, &mut tracker, &mut samples, &mut bad);
        }
        if let Some(t) = ticks.as_deref_mut() {
            t.drain(&mut out, &mut keys, &mut tracker, &mut samples, &mut bad);
        }
        tracker.resolve(source, &mut out);
        if done {
            break;
        }
        // Sooner where a process's maps are due to be read.
        let wait_ms = tracker.next_due_ns().map_or(POLL_MS, |due| {
            let ms = due.saturating_sub(source.now_ns()).div_ceil(1_000_000);
            (ms as i32).clamp(0, POLL_MS)
        });
        // SAFETY: pollfds is a valid array of pollfd for descriptors we own.
        unsafe {
            libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, wait_ms);
        }
    }
    Drained {
        rings,
        records: out,
        samples,
        bad,
        cpu_ns: thread_cpu_ns(),
        maps: tracker.stats(),
        lost: ticks.as_deref().map_or(0, |t| t.lost()),
        tick_samples: ticks.as_deref().map_or(0, |t| t.timed()),
        tick_ns: ticks.as_deref().map_or(0, |t| t.spent_ns()),
    }
}

/// Samples that come from elsewhere than the perf rings (the tick sampler), drained with
/// them.
trait TickSource {
    fn drain(
        &mut self,
        out: &mut Vec<u8>,
        keys: &mut StackKeys,
        tracker: &mut MapTracker,
        samples: &mut u64,
        bad: &mut u64,
    );
    fn lost(&self) -> u64;
    /// A descriptor that polls readable when the source wants draining soon.
    fn fd(&self) -> Option<std::os::fd::RawFd>;
    /// Samples whose time the program measured, and that time (ns).
    fn timed(&self) -> u64;
    fn spent_ns(&self) -> u64;
}

/// This process's CPU time so far (all its threads, user and system), in ns.
pub fn process_cpu_ns() -> u64 {
    rusage_cpu_ns(libc::RUSAGE_SELF)
}

/// The CPU time so far of the children this process has waited for (the symbol parsers
/// of its sandbox), in ns.
pub fn children_cpu_ns() -> u64 {
    rusage_cpu_ns(libc::RUSAGE_CHILDREN)
}

fn rusage_cpu_ns(who: libc::c_int) -> u64 {
    // SAFETY: rusage is plain integers, valid when zeroed; getrusage fills the one we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return 0;
    }
    let ns = |t: libc::timeval| (t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64) * 1000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// A clock's time in ns (0 if it cannot be read): `CLOCK_MONOTONIC` is the clock of the
/// kernel's sample times and of BPF's `bpf_ktime_get_ns`.
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The calling thread's CPU time so far, in ns (0 if the clock cannot be read).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Data pages per CPU's ring: 4 MiB at least (~500 samples with 8 KiB stacks, half a
/// second at 999 Hz), and at high rates what one CPU samples in 100 ms (the reader thread
/// may wait that long for a CPU when the workload keeps every one busy), up to 32 MiB per
/// CPU and 512 MiB in all. At 50 kHz with 8 KiB stacks: 64 MiB → 32 MiB per CPU.
fn ring_pages(config: &SamplingConfig, cpus: usize) -> usize {
    const MIN_BYTES: u64 = 4 << 20;
    const MAX_BYTES: u64 = 32 << 20;
    const ALL_BYTES: u64 = 512 << 20;
    let per_sample = u64::from(config.stack_bytes) + 512;
    let want = config.frequency.saturating_mul(per_sample) / 10;
    let cap = (ALL_BYTES / cpus.max(1) as u64).clamp(MIN_BYTES, MAX_BYTES);
    // A power of two of pages, as perf requires, within the cap.
    let mut bytes = want.clamp(MIN_BYTES, cap).next_power_of_two();
    while bytes > cap && bytes > MIN_BYTES {
        bytes /= 2;
    }
    (bytes / page_size() as u64).max(1) as usize
}

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// The online CPUs, from /sys (e.g. "0-3,6"), else 0..N.
pub fn online_cpu_list() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<u32>().ok()),
        }
    }
    if cpus.is_empty() {
        cpus = (0..crate::host::online_cpus()).collect();
    }
    cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_grow_with_the_rate_and_stay_bounded_in_all() {
        let mib = |pages: usize| (pages * page_size()) >> 20;
        let config = |frequency| SamplingConfig {
            frequency,
            ..Default::default()
        };
        // The default rate: 4 MiB per CPU, as before.
        assert_eq!(mib(ring_pages(&config(999), 2)), 4);
        assert_eq!(mib(ring_pages(&config(999), 256)), 4);
        // 50 kHz per CPU (100k samples/s on two): 100 ms of samples, up to 32 MiB.
        assert_eq!(mib(ring_pages(&config(49_950), 2)), 32);
        assert_eq!(mib(ring_pages(&config(9_990), 2)), 16);
        // On 64 CPUs the whole stays within 512 MiB.
        let pages = ring_pages(&config(49_950), 64);
        assert_eq!(mib(pages), 8);
        assert!(pages.is_power_of_two());
    }

    #[test]
    fn online_cpus_are_listed() {
        let cpus = online_cpu_list();
        assert!(!cpus.is_empty());
        assert_eq!(cpus.len() as u32, crate::host::online_cpus());
    }
}
