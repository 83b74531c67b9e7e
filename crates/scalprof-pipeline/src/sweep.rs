//! Running a sweep: every finished repeat is symbolized, its locks named, and committed
//! to the store before the next starts; at the end, the sharing sites are read from the
//! binaries while they are still there.

mod events;
mod plan;
mod steady;

use anyhow::{Context, Result};
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::sweep::{
    self, Collected, Collectors, SweepEnd, SweepEvent, SweepPlan, SweepSink, SystemCollectors,
};
use scalprof_model::{Repeat, RunDocument, RunStatus, Sweep, SweepParameter};
use scalprof_store::{NewRun, Store};

use crate::check::Checked;
use crate::recording::{Recorder, Recording};
pub use events::{Event, Observer, Shape};
use plan::sweep_plan;

pub use crate::options::{RunOptions, DIAGNOSE, DIAGNOSE_MAX, STEADY};
use scalprof_symbolize::convert::Converted;
use scalprof_symbolize::profile::Symbols;

/// What a sweep produced.
pub struct RunOutcome {
    pub id: i64,
    pub doc: RunDocument,
    pub end: SweepEnd,
    /// The run as this process recorded it: what comes after the sweep (`--verify`, the
    /// JSON document, the report) reads this, not the store ([`crate::recording`]).
    pub recording: Recording,
}

/// Runs a sweep into the store and returns its run document. A sweep stopped by a failed
/// repeat or a signal still returns (with `end` saying why); every finished repeat is kept.
/// `checked` is what [`crate::check()`] made of `opts`: the options are checked once, before
/// anything is created, by the caller that says what they found.
pub fn record(
    store: &Store,
    opts: &RunOptions,
    checked: &Checked,
    observer: &mut dyn Observer,
    interrupt: &Interrupt,
) -> Result<RunOutcome> {
    record_with(
        store,
        opts,
        checked,
        &mut SystemCollectors::default(),
        observer,
        interrupt,
    )
}

/// [`record`] with the given collectors (tests inject failing or scripted ones). Reads as
/// its steps: create the run → execute the sweep (each repeat committed,
/// its locks named and its samples symbolized as it ends, in [`StoreSink`]) → record the
/// end → the sharing sites, while the symbols are loaded → assemble the document once.
pub fn record_with(
    store: &Store,
    opts: &RunOptions,
    checked: &Checked,
    collectors: &mut dyn Collectors,
    observer: &mut dyn Observer,
    interrupt: &Interrupt,
) -> Result<RunOutcome> {
    // What the workload leaves running is reparented to scalprof, and reported.
    scalprof_collect::exec::become_subreaper();
    let mut host = scalprof_collect::host::probe();
    // Once the command is known to run: what the sampler costs here (see `Host`).
    if opts.diagnose > 0 {
        if let Some(c) = &opts.sampling {
            plan::measure_sampler(&mut host, c);
        }
    }
    let commit = crate::commit::commit_of(
        opts.commit.as_deref(),
        &opts.command,
        &std::env::current_dir().unwrap_or_default(),
    );
    if let Some(untrusted) = &commit.untrusted {
        observer.event(&Event::UntrustedCheckout(untrusted));
    }
    let plan_cost_ns = host.sample_cost_ns;
    let (recorder, plan, unsealed) = create_run(store, opts, checked, host, commit.commit)?;
    let id = recorder.id();
    // Traced repeats run only with a profiler or a tracer to attach.
    let tracing = plan.sampling.is_some() || plan.locks.is_some();
    let diagnose = if tracing { opts.diagnose } else { 0 };
    observer.event(&Event::Started {
        id,
        label: &checked.label,
        shape: &Shape {
            points: plan.values.len(),
            repeat: opts.repeat,
            warmup: opts.warmup,
            traced: diagnose,
        },
    });
    if let Some(why) = &unsealed {
        observer.event(&Event::Unsealed { why });
    }
    if let (Some(asked), Some(chosen)) = (opts.sampling.as_ref(), plan.sampling.as_ref()) {
        let tick = scalprof_collect::perf::tick_ceiling(chosen) == Some(chosen.frequency);
        if chosen.frequency < asked.frequency && (tick || plan_cost_ns.is_some()) {
            observer.event(&Event::SamplerCeiling {
                hz: chosen.frequency,
                was: asked.frequency,
                cost_ns: plan_cost_ns.unwrap_or(0.0),
                share: scalprof_collect::perf::SAMPLER_SHARE,
                tick,
            });
        }
    }
    let mut sink = StoreSink::new(
        recorder,
        observer,
        tracing,
        &plan.traced_env,
        HoldPolicy {
            everywhere: opts.hold_times_everywhere,
            threads: opts.parameter == SweepParameter::Threads,
        },
    );
    sink.first = plan.values.first().copied();
    sink.last = plan.values.last().copied();
    let end = sweep::execute_plan_with(&plan, collectors, &mut sink, interrupt);
    let (mut recorder, symbols) = sink.into_parts();
    let end = record_end(&mut recorder, end)?;
    if opts.sampling.is_some() && opts.parameter == SweepParameter::Threads {
        if let Some(symbols) = symbols {
            sharing_sites(&mut recorder, symbols)?;
        }
    }
    let recording = recorder.into_recording();
    let mut inputs = recording.inputs();
    inputs.predict_to = opts.predict;
    let doc = scalprof_analyze::assemble(&inputs);
    Ok(RunOutcome {
        id,
        doc,
        end,
        recording,
    })
}

/// The run in the store (status running), its recorder, the plan its sweep executes, and
/// why the run has no seal, if it has none.
fn create_run<'a>(
    store: &'a Store,
    opts: &RunOptions,
    checked: &crate::check::Checked,
    host: scalprof_model::Host,
    commit: Option<String>,
) -> Result<(Recorder<'a>, SweepPlan, Option<String>)> {
    let (host_pmu, sample_cost_ns) = (host.pmu, host.sample_cost_ns);
    let new = new_run(opts, checked, host, commit);
    let id = store.create_run(&new)?;
    // Checked to be ours and made owner-only, not through another user's link.
    let output_dir = store.run_output_dir(id)?;
    store.set_output_dir(id, &output_dir)?;
    let header = header_of(id, new, &output_dir);
    // `verify` runs this command again only under this user's seal (seal.rs); a run
    // without one is shown and confirmed first, so a failure here costs a question later,
    // and is said now.
    let unsealed = match crate::seal::Sealed::of(store, &header).and_then(crate::seal::seal) {
        Ok(seal) => {
            store.set_seal(id, &seal)?;
            None
        }
        Err(e) => Some(e.to_string()),
    };
    let plan = sweep_plan(opts, checked, host_pmu, sample_cost_ns, output_dir);
    Ok((Recorder::new(store, id, header), plan, unsealed))
}

/// The header of run `id` as created from `new`: what `show` would read back from an
/// untouched store.
pub(crate) fn header_of(
    id: i64,
    new: NewRun,
    output_dir: &std::path::Path,
) -> scalprof_model::RunHeader {
    scalprof_model::RunHeader {
        id: id.to_string(),
        label: new.label,
        created: new.created,
        command: new.command,
        status: RunStatus::Running,
        sweep: new.sweep,
        host: new.host,
        scaling: new.scaling,
        ops_regex: new.ops_regex,
        output_dir: output_dir.display().to_string(),
        commit: new.commit,
        observer: None,
    }
}

/// The run's header as the store first keeps it: what was asked, on which machine, at
/// which commit.
fn new_run(
    opts: &RunOptions,
    checked: &crate::check::Checked,
    host: scalprof_model::Host,
    commit: Option<String>,
) -> NewRun {
    NewRun {
        label: checked.label.clone(),
        created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: opts.command.clone(),
        sweep: Sweep {
            parameter: opts.parameter,
            values: checked.values.clone(),
        },
        host,
        scaling: opts.scaling,
        ops_regex: opts.ops_regex.clone(),
        commit,
    }
}

/// The run's status from how its sweep ended. An error still leaves every repeat
/// measured so far in the store.
pub(crate) fn record_end(
    recorder: &mut Recorder<'_>,
    end: Result<SweepEnd, scalprof_collect::CollectError>,
) -> Result<SweepEnd> {
    let id = recorder.id();
    let end = match end {
        Ok(end) => end,
        Err(e) => {
            // The sweep's error says why it stopped: a store that cannot take the status
            // (the disk the workload's output filled) must not hide it.
            let marked = match recorder.set_status(RunStatus::Failed) {
                Ok(()) => String::new(),
                Err(s) => format!(" (and could not be marked failed in the store: {s})"),
            };
            return Err(e).context(format!(
                "run {id} stopped{marked}; the repeats measured so far are kept"
            ));
        }
    };
    let status = match &end {
        SweepEnd::Complete => RunStatus::Complete,
        SweepEnd::Interrupted(_) => RunStatus::Interrupted,
        SweepEnd::Failed { .. } => RunStatus::Failed,
    };
    recorder.set_status(status)?;
    Ok(end)
}

/// The sharing analysis reads the binaries, so its sites are read now, while the files
/// are here, and stored with the run (the findings are computed from them on each load).
pub(crate) fn sharing_sites(recorder: &mut Recorder<'_>, mut symbols: Symbols) -> Result<()> {
    // The hot instructions this process recorded: paths it saw mapped, not what the
    // store's rows say now.
    let inputs = recorder.recording().inputs();
    let Some((_, last)) = inputs.profiles.last() else {
        return Ok(());
    };
    let sites = scalprof_symbolize::sharing::resolve(
        &last.hot,
        &mut symbols.files,
        scalprof_debuginfo::cache_line_size(),
    );
    if !sites.sites.is_empty() {
        recorder.set_sharing(sites)?;
    }
    Ok(())
}

/// Commits each repeat as the sweep (or the watch) reports it.
pub(crate) struct StoreSink<'a> {
    recorder: Recorder<'a>,
    observer: &'a mut dyn Observer,
    /// Kernel and ELF symbols, loaded once for the whole sweep.
    symbols: Option<Symbols>,
    profile_error_shown: bool,
    /// The traced repeats asked the JVM for a perf map at exit: once a repeat's samples
    /// and stacks are named, its JVMs' maps are removed (they are scalprof's doing).
    jvm_perf_maps: bool,
    /// The traced repeats asked CPython for perf maps: removed likewise, those that were
    /// not there when the traced repeat started (`maps_before`).
    python_perf_maps: bool,
    maps_before: std::collections::HashSet<u32>,
    /// The sweep's first value: the baseline, never repeated for a verdict.
    first: Option<u64>,
    /// The sweep's last value: where findings are scored.
    last: Option<u64>,
    /// Where the later traced repeats time the user locks' holds.
    holds: HoldPolicy,
    /// Per point: whether its first traced repeat saw a thread wait on a user lock.
    contended: std::collections::HashMap<u64, bool>,
    /// The share of the last stored profile's user stacks that were cut short.
    stacks_cut: Option<f64>,
    /// Whether the run was told the tick sampler could not sample.
    tick_refusal_said: bool,
}

/// Where the hold-timing interposer goes. It lengthens every lock call, so it costs most
/// where no lock is contended and there is nothing for hold times to explain.
pub(crate) struct HoldPolicy {
    /// `--hold-times-everywhere`: every point, contended or not.
    pub(crate) everywhere: bool,
    /// A thread sweep: its 1-thread point contends for nothing.
    pub(crate) threads: bool,
}

/// Whether a repeat's lock table shows a thread waiting on a user lock that lets one
/// holder in at a time (a mutex, a write side), its holds being worth timing.
fn user_lock_contended(table: &scalprof_model::locks::LockProfile) -> bool {
    table.rows.iter().any(|r| {
        r.scope == scalprof_model::locks::Scope::User
            && r.count > 0
            // A reader-writer lock of unknown side may be a writer's.
            && r.lock_type.one_holder() != Some(false)
    })
}

impl<'a> StoreSink<'a> {
    /// A sink that records into `recorder`, symbolizing the traced repeats' samples when
    /// `tracing`, with the runtimes' perf maps the traced repeats' environment
    /// (`traced_env`) asked for removed once read.
    pub(crate) fn new(
        recorder: Recorder<'a>,
        observer: &'a mut dyn Observer,
        tracing: bool,
        traced_env: &[(String, String)],
        holds: HoldPolicy,
    ) -> StoreSink<'a> {
        StoreSink {
            recorder,
            observer,
            symbols: tracing.then(Symbols::load),
            profile_error_shown: false,
            jvm_perf_maps: traced_env.iter().any(|(k, _)| k == "JAVA_TOOL_OPTIONS"),
            python_perf_maps: traced_env
                .iter()
                .any(|(k, _)| k == crate::runtimes::PYTHON_PERF),
            maps_before: Default::default(),
            first: None,
            last: None,
            holds,
            contended: Default::default(),
            stacks_cut: None,
            tick_refusal_said: false,
        }
    }

    /// The recorder, once the sink's work is done, with the symbols it loaded.
    pub(crate) fn into_parts(self) -> (Recorder<'a>, Option<Symbols>) {
        (self.recorder, self.symbols)
    }

    /// Stores a measured repeat, and, when it succeeded and was traced, what its
    /// collectors recorded, converted.
    fn record(
        &mut self,
        value: u64,
        repeat: &Repeat,
        collected: Collected,
    ) -> Result<(), scalprof_collect::SinkError> {
        self.recorder.add_repeat(value, repeat).map_err(Box::new)?;
        for what in &collected.lost {
            self.observer.event(&Event::CollectorLost { value, what });
        }
        if let Some(why) = collected
            .profile
            .as_ref()
            .and_then(|p| p.tick_refused.as_deref())
        {
            if !self.tick_refusal_said {
                self.tick_refusal_said = true;
                self.observer.event(&Event::TickSamplerRefused { why });
            }
        }
        // Only successful repeats count.
        if !repeat.succeeded() {
            return Ok(());
        }
        if let Some(symbols) = self.symbols.as_mut() {
            let observer = &mut *self.observer;
            let mut converted = scalprof_symbolize::convert::repeat(
                collected.profile,
                collected.locks.as_ref(),
                symbols,
                &mut |samples| observer.event(&Event::Symbolizing { value, samples }),
            );
            if let Some(l) = converted.locks.as_mut() {
                if collected.locks.as_ref().is_some_and(|raw| raw.holds_timed) {
                    l.hold_timed_repeats = vec![repeat.index];
                }
            }
            self.record_converted(value, repeat.index, converted)?;
        }
        if self.jvm_perf_maps {
            if let Some(locks) = &collected.locks {
                crate::runtimes::remove_jvm_perf_maps(&locks.maps);
            }
        }

        Ok(())
    }

    /// Stores what a repeat's collectors recorded, converted; a profile that could not be
    /// read is said once per sweep.
    fn record_converted(
        &mut self,
        value: u64,
        index: u32,
        converted: Converted,
    ) -> Result<(), scalprof_collect::SinkError> {
        self.stacks_cut = match &converted.profile {
            Some(Ok(p)) if p.stats.user_stacks > 0 => {
                Some(p.stats.truncated_stacks as f64 / p.stats.user_stacks as f64)
            }
            _ => None,
        };
        match converted.profile {
            Some(Ok(p)) => self
                .recorder
                .add_profile(value, index, &p)
                .map_err(Box::new)?,
            Some(Err(error)) if !self.profile_error_shown => {
                self.profile_error_shown = true;
                self.observer.event(&Event::ProfileUnusable {
                    value,
                    error: &error,
                });
            }
            Some(Err(_)) | None => {}
        }
        if let Some(table) = converted.locks {
            // The point's first traced repeat decides whether its later ones time holds.
            self.contended
                .entry(value)
                .or_insert_with(|| user_lock_contended(&table));
            self.recorder
                .add_locks(value, index, &table)
                .map_err(Box::new)?;
        }
        Ok(())
    }
}

impl SweepSink for StoreSink<'_> {
    fn event(&mut self, event: SweepEvent<'_>) -> Result<(), scalprof_collect::SinkError> {
        if let SweepEvent::Starting {
            kind: scalprof_collect::sweep::RepeatKind::Traced,
            ..
        } = event
        {
            if self.python_perf_maps {
                self.maps_before = crate::runtimes::perf_map_pids();
            }
        }
        let event = match event {
            SweepEvent::RepeatDone {
                value,
                repeat,
                collected,
            } => {
                self.record(value, repeat, *collected)?;
                if self.python_perf_maps && repeat.traced {
                    // Named (or failed): the maps CPython wrote for it are done with.
                    crate::runtimes::remove_python_perf_maps(&self.maps_before);
                }
                SweepEvent::RepeatDone {
                    value,
                    repeat,
                    collected: Box::default(),
                }
            }
            other => other,
        };
        self.observer.event(&Event::Sweep(&event));
        Ok(())
    }

    fn stacks_cut(&mut self) -> Option<f64> {
        self.stacks_cut.take()
    }

    fn more_clean(&mut self, value: u64, done: u32) -> bool {
        let inputs = self.recorder.recording().inputs();
        let clean: Vec<&scalprof_model::Repeat> = inputs
            .repeats
            .iter()
            .filter(|r| r.value == value && !r.repeat.traced && r.repeat.succeeded())
            .filter(|r| r.repeat.wall_s > 0.0)
            .map(|r| &r.repeat)
            .collect();
        // Operations a second where every repeat printed them, else runs a second (the
        // same spread whether the work is fixed or grows with the threads).
        let ops = clean.iter().all(|r| r.ops.is_some());
        let x: Vec<f64> = clean
            .iter()
            .map(|r| if ops { r.ops.unwrap_or(0) as f64 } else { 1.0 } / r.wall_s)
            .collect();
        let Some(spread) = steady::relative_half_width(&x).filter(|s| *s > STEADY) else {
            return false;
        };
        self.observer.event(&Event::Unsteady {
            value,
            done,
            spread,
        });
        true
    }

    fn time_holds(&mut self, value: u64) -> bool {
        let HoldPolicy {
            everywhere,
            threads,
        } = self.holds;
        everywhere || (!(threads && value == 1) && self.contended.get(&value) == Some(&true))
    }

    fn more_traced(&mut self, value: u64, done: u32) -> bool {
        // Only a diagnosis can be unsettled, and the first point has nothing to settle.
        if self.symbols.is_none() || Some(value) == self.first {
            return false;
        }
        let inputs = self.recorder.recording().inputs();
        // A cause on the edge of the threshold matters only where findings are scored:
        // the last point (mid-sweep, the document's last point is this one).
        let last = Some(value) == self.last;
        let Some(settling) = scalprof_analyze::settling_at(&inputs, value)
            .filter(|s| !s.settled && (last || s.candidates.len() > 1))
        else {
            return false;
        };
        self.observer.event(&Event::Unsettled {
            value,
            done,
            settling: &settling,
        });
        true
    }
}
