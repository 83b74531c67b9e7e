//! The collector fallback paths, with injected collectors: a profiler that cannot open
//! its events and a lock tracer that records a scripted table. Runs unprivileged.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use scalprof_collect::exec::Attach;
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::locks::LockConfig;
use scalprof_collect::perf::{RawProfile, SamplingConfig};
use scalprof_collect::sweep::SweepEvent;
use scalprof_collect::sweep::{Collectors, LockCollector, ProfileCollector};
use scalprof_collect::{CollectError, LockTracerError, ProfilingError};
use scalprof_model::locks::{RawLocks, UserLockRaw};
use scalprof_model::{SweepParameter, ThroughputSource};
use scalprof_pipeline::sweep::{record_with, RunOptions, RunOutcome};
use scalprof_pipeline::{Event, Observer};
use scalprof_store::Store;

/// A sampler whose perf_event_open is refused.
struct RefusedSampler;

impl Attach for RefusedSampler {
    fn attach(&mut self, _pid: i32, _attached: &[i32]) -> Result<(), CollectError> {
        Err(CollectError::Profiling(ProfilingError::Open {
            source: std::io::Error::from_raw_os_error(libc_eacces()),
            hint: "run as root".into(),
        }))
    }
    fn finish(&mut self) {}
}

impl ProfileCollector for RefusedSampler {
    fn take(&mut self) -> Option<RawProfile> {
        None
    }
}

/// A lock tracer that "saw" one user futex wait per traced repeat.
struct ScriptedLocks {
    attached: bool,
}

impl Attach for ScriptedLocks {
    fn attach(&mut self, _pid: i32, _attached: &[i32]) -> Result<(), CollectError> {
        self.attached = true;
        Ok(())
    }
    fn finish(&mut self) {}
}

impl LockCollector for ScriptedLocks {
    fn take(&mut self) -> Option<RawLocks> {
        self.attached.then(|| RawLocks {
            user: vec![UserLockRaw {
                uaddr: 0x7000,
                tgid: 1,
                op: 0,
                count: 3,
                total_ns: 3_000_000,
                max_ns: 1_500_000,
            }],
            ..Default::default()
        })
    }
}

/// A lock tracer whose BPF programs cannot load.
struct UnbuiltLocks;

impl Attach for UnbuiltLocks {
    fn attach(&mut self, _pid: i32, _attached: &[i32]) -> Result<(), CollectError> {
        Err(CollectError::Locks(LockTracerError::NotBuilt))
    }
    fn finish(&mut self) {}
}

impl LockCollector for UnbuiltLocks {
    fn take(&mut self) -> Option<RawLocks> {
        None
    }
}

/// A sampler whose reader thread "panicked": attached, but its recording is lost.
struct PanickedSampler;

impl Attach for PanickedSampler {
    fn attach(&mut self, _pid: i32, _attached: &[i32]) -> Result<(), CollectError> {
        Ok(())
    }
    fn finish(&mut self) {}
}

impl ProfileCollector for PanickedSampler {
    fn take(&mut self) -> Option<RawProfile> {
        None
    }
    fn lost(&self) -> Option<String> {
        Some("the sampler's reader thread panicked".into())
    }
}

struct Fake {
    locks_work: bool,
    samplers_made: u32,
}

/// Samplers that lose their recordings, and the scripted lock tracer.
struct Losing;

impl Collectors for Losing {
    fn sampler(&mut self, _: &SamplingConfig) -> Box<dyn ProfileCollector> {
        Box::new(PanickedSampler)
    }
    fn lock_tracer(&mut self, _: &LockConfig) -> Box<dyn LockCollector> {
        Box::new(ScriptedLocks { attached: false })
    }
}

impl Collectors for Fake {
    fn sampler(&mut self, _: &SamplingConfig) -> Box<dyn ProfileCollector> {
        self.samplers_made += 1;
        Box::new(RefusedSampler)
    }
    fn lock_tracer(&mut self, _: &LockConfig) -> Box<dyn LockCollector> {
        if self.locks_work {
            Box::new(ScriptedLocks { attached: false })
        } else {
            Box::new(UnbuiltLocks)
        }
    }
}

#[derive(Default)]
struct Notices {
    no_profiling: u32,
    no_locks: u32,
    lost: Vec<(u64, String)>,
    /// A teammate with write access to the store, who rewrites the run being recorded
    /// after every repeat.
    teammate: Option<std::path::PathBuf>,
}

impl Notices {
    /// What a teammate sharing the store would write over the run being recorded: another
    /// command, a point never measured, a profile's file paths.
    fn rewrite(&self) {
        let Some(db) = &self.teammate else { return };
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        conn.execute_batch(
            r#"UPDATE runs SET command = '["sh","-c","touch /tmp/scalprof-teammate-ran"]',
                              sweep_values = '[1,2,4000000000]',
                              ops_regex = '(\d)';
               UPDATE repeats SET ops = 1;
               UPDATE locks SET profile = replace(profile, '"count":3', '"count":999');"#,
        )
        .unwrap();
    }
}

impl Observer for Notices {
    fn event(&mut self, event: &Event<'_>) {
        if let Event::Sweep(SweepEvent::RepeatDone { .. }) = event {
            self.rewrite();
        }
        match event {
            Event::Sweep(SweepEvent::NoProfiling(ProfilingError::Open { .. })) => {
                self.no_profiling += 1
            }
            Event::Sweep(SweepEvent::NoLockTracing(LockTracerError::NotBuilt)) => {
                self.no_locks += 1
            }
            Event::CollectorLost { value, what } => self.lost.push((*value, what.to_string())),
            // Progress, not notices (a repeat another process disturbed is measured again).
            Event::Started { .. }
            | Event::Symbolizing { .. }
            | Event::Sweep(
                SweepEvent::Starting { .. }
                | SweepEvent::RepeatDone { .. }
                | SweepEvent::WarmupDone { .. }
                | SweepEvent::Rerun { .. },
            ) => {}
            other => panic!("unexpected notice {other:?}"),
        }
    }
}

fn libc_eacces() -> i32 {
    13
}

/// Sweeps make this process a subreaper and report processes left behind by the
/// workload: two sweeps at once would report each other's children.
static ONE_SWEEP_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One sweep of `options()` into a fresh store with these collectors: its outcome and
/// what it noticed.
fn sweep(collectors: &mut dyn Collectors) -> (RunOutcome, Notices) {
    let dir = tempfile::tempdir().unwrap();
    let (out, notices) = sweep_in(dir.path(), collectors, None);
    // What the sweep returns is what the store, untouched, gives back.
    let stored =
        scalprof_pipeline::document(&Store::open(&dir.path().join("runs.db")).unwrap(), out.id)
            .unwrap();
    assert_eq!(
        serde_json::to_value(&out.doc).unwrap(),
        serde_json::to_value(&stored).unwrap(),
        "the run held in memory is the stored run"
    );
    (out, notices)
}

/// [`sweep`] into the store in `dir`, with a teammate rewriting it when `teammate`.
fn sweep_in(
    dir: &std::path::Path,
    collectors: &mut dyn Collectors,
    teammate: Option<()>,
) -> (RunOutcome, Notices) {
    let _one = ONE_SWEEP_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let db = dir.join("runs.db");
    let store = Store::open(&db).unwrap();
    let mut notices = Notices {
        teammate: teammate.map(|()| db),
        ..Notices::default()
    };
    let opts = options();
    let checked = scalprof_pipeline::check(&opts).unwrap();
    let out = record_with(
        &store,
        &opts,
        &checked,
        collectors,
        &mut notices,
        &Interrupt::manual(),
    )
    .unwrap();
    (out, notices)
}

fn options() -> RunOptions {
    RunOptions {
        command: vec!["sh".into(), "-c".into(), "echo ops=1000".into()],
        parameter: SweepParameter::Threads,
        values: Some(vec![1, 2]),
        repeat: 2,
        repeat_max: None,
        diagnose: 1,
        diagnose_max: 1,
        warmup: 0,
        prepare: None,
        cleanup: None,
        label: Some("fallback".into()),
        ops_regex: r"ops=(\d+)".into(),
        scaling: Some(ThroughputSource::Weak),
        timeout: None,
        keep_going: false,
        keep_output: false,
        sampling: Some(SamplingConfig::default()),
        locks: Some(LockConfig::default()),
        attach: Default::default(),
        cgroups: Vec::new(),
        commit: None,
        predict: None,
        hold_times_everywhere: true,
    }
}

#[test]
fn what_a_teammate_writes_over_the_run_being_recorded_changes_nothing_the_sweep_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut collectors = Fake {
        locks_work: true,
        samplers_made: 0,
    };
    let (out, _) = sweep_in(dir.path(), &mut collectors, Some(()));
    // The teammate did write: the store now says otherwise.
    let stored =
        scalprof_pipeline::document(&Store::open(&dir.path().join("runs.db")).unwrap(), out.id)
            .unwrap();
    assert!(stored.command.iter().any(|w| w.contains("teammate-ran")));
    // What the sweep returns, and what `--verify`, `--json` and `--report` read after it,
    // is the run as recorded.
    let header = out.recording.header();
    assert_eq!(header.command, options().command);
    assert_eq!(header.sweep.values, vec![1, 2]);
    assert_eq!(header.ops_regex, options().ops_regex);
    assert_eq!(out.doc.command, options().command);
    let values: Vec<u64> = out.doc.points.iter().map(|p| p.value).collect();
    assert_eq!(values, vec![1, 2]);
    for p in &out.doc.points {
        assert!(p.repeats.iter().all(|r| r.ops == Some(1000)));
        assert_eq!(
            p.locks.as_ref().expect("the scripted table").rows[0].count,
            3
        );
    }
    assert_eq!(
        serde_json::to_value(&out.doc).unwrap(),
        serde_json::to_value(scalprof_pipeline::LoadedRun::of(out.recording.inputs()).doc).unwrap()
    );
}

#[test]
fn a_refused_profiler_is_switched_off_once_and_the_lock_tracer_goes_on() {
    let mut collectors = Fake {
        locks_work: true,
        samplers_made: 0,
    };
    let (out, notices) = sweep(&mut collectors);
    assert_eq!(notices.no_profiling, 1, "said once, then profiling is off");
    assert_eq!(collectors.samplers_made, 1, "no sampler after the refusal");
    for p in &out.doc.points {
        assert_eq!(p.repeats.len(), 2, "clean repeats measured");
        assert_eq!(
            p.traced_repeats.len(),
            1,
            "traced repeat ran without the profiler"
        );
        assert!(p.profile.is_none());
        let locks = p.locks.as_ref().expect("the scripted lock table is stored");
        assert_eq!(locks.rows.len(), 1);
        assert_eq!(locks.rows[0].count, 3);
        assert_eq!(locks.rows[0].total_wait_ns, 3_000_000);
    }
}

#[test]
fn with_every_collector_refused_the_sweep_measures_clean_repeats_only() {
    let mut collectors = Fake {
        locks_work: false,
        samplers_made: 0,
    };
    let (out, notices) = sweep(&mut collectors);
    assert_eq!((notices.no_profiling, notices.no_locks), (1, 1));
    let traced: Vec<usize> = out
        .doc
        .points
        .iter()
        .map(|p| p.traced_repeats.len())
        .collect();
    // The first traced repeat found both collectors refused and ran bare; after it,
    // nothing is left to trace and no point runs traced repeats.
    assert_eq!(traced, vec![1, 0]);
    for p in &out.doc.points {
        assert_eq!(p.repeats.len(), 2);
        assert!(p.profile.is_none() && p.locks.is_none());
    }
    assert!(out.doc.points.iter().all(|p| p.throughput.is_some()));
}

#[test]
fn a_recording_lost_by_a_collector_is_reported_for_each_repeat() {
    let (out, notices) = sweep(&mut Losing);
    let values: Vec<u64> = notices.lost.iter().map(|(v, _)| *v).collect();
    assert_eq!(values, vec![1, 2], "one notice per traced repeat");
    assert!(notices.lost[0].1.contains("panicked"));
    for p in &out.doc.points {
        assert!(p.profile.is_none(), "nothing of a lost recording is kept");
        assert!(p.locks.is_some(), "the other collector's recording is kept");
    }
}
