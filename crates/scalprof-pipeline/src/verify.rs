//! `scalprof verify`: a diagnosis proved by experiment. Each cause is lengthened by known
//! delays at one point of a stored run, with a zero-delay control, the levels interleaved
//! round by round; the throughput's answer is judged against what the cause would give on
//! the critical path ([`scalprof_analyze::experiment`]), and the experiments are stored
//! with the run.
//!
//! Lengthened today: system calls (where they return, [`scalprof_collect::delay`]). A cause
//! of another kind (a user or kernel lock, a function, false sharing) is said to be not
//! lengthened, with why; none is guessed at.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use regex::Regex;
use scalprof_analyze::experiment::{judge, settled, Execution, Setting};
use scalprof_collect::delay::{DelaySpec, DelayTarget, Delayer};
use scalprof_collect::exec::{self, Attach, ExecSpec};
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::sweep::{match_ops, parameter_env, read_tail, substitute, OutputPolicy};
use scalprof_model::experiment::Experiment;
use scalprof_model::foreign::Foreign;
use scalprof_model::locks::HoldTimes;
use scalprof_model::{Repeat, RunDocument};
use scalprof_store::Store;

use crate::LoadedRun;

mod cause;
use cause::{lengthenable, not_lengthened, Executable, Lengthening};

/// What to verify.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// The causes, as named (a system call, a finding's subject); the run's top findings
    /// (up to [`TOP_FINDINGS`]) when empty.
    pub causes: Vec<String>,
    /// The point; the largest measured one when `None`.
    pub point: Option<u64>,
    /// Rounds of the interleaved levels (each level runs once per round).
    pub rounds: u32,
    /// The command to execute, given again by the user; `None`: the stored one, which runs
    /// only under this user's seal ([`crate::seal`]) or once `approve` says yes.
    pub command: Option<Vec<String>>,
}

/// A stored command that this user did not record (or that was changed since), shown
/// before anything runs so that the user can say whether to run it.
#[derive(Clone, Debug)]
pub struct Approval {
    pub run: i64,
    pub command: Vec<String>,
    /// The sweep's parameter and the value it would run at.
    pub parameter: scalprof_model::SweepParameter,
    pub value: u64,
    pub causes: Vec<String>,
    /// Why it is not known to be this user's.
    pub why: String,
}

/// How many findings `verify` takes when no cause is named.
pub const TOP_FINDINGS: usize = 3;

/// The delays, as shares of the control's time per operation that the injection adds if
/// the cause is a bottleneck: large enough to stand out of a noisy machine's spread, small
/// enough that the workload still runs as it did.
const LEVELS: [f64; 2] = [0.25, 0.5];

/// Control executions that measure the cause's frequency before the levels are chosen.
const CALIBRATION: u32 = 2;

/// Runs the experiments and stores them with the run; `progress` is told each execution
/// and, first, the command; `approve` is asked before a stored command that is not this
/// user's own runs (what a teammate wrote to a shared store is data, never code).
pub fn verify(
    store: &Store,
    id: i64,
    opts: &VerifyOptions,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(&str),
    approve: &mut dyn FnMut(&Approval) -> Result<bool>,
) -> Result<Vec<Experiment>> {
    let run = LoadedRun::load(store, id)?;
    if !run.inputs.header.sweep.parameter.swept() {
        bail!(
            "run {id} watched a running server (`scalprof watch`): verify lengthens a cause by \
             running the command again, and a watched server was not started by scalprof; \
             sweep a client against it (`scalprof run --attach-name NAME -- CLIENT`) and \
             verify that run"
        );
    }
    let point = chosen_point(&run.inputs.header, &run.doc, opts.point)?;
    let causes = causes_of(&run.doc, opts)?;
    let command = command_to_run(store, id, &run, opts, point, &causes, approve)?;
    experiments(
        store, id, &run, &command, point, &causes, opts, interrupt, progress,
    )
}

/// `run --verify`: the run this process has just recorded, as it holds it in memory (a
/// teammate's rewrite of its rows in a shared store meanwhile changes nothing here), with
/// the command the user gave.
pub fn verify_recorded(
    store: &Store,
    recording: &crate::recording::Recording,
    opts: &VerifyOptions,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Experiment>> {
    let run = LoadedRun::of(recording.inputs());
    let point = chosen_point(&run.inputs.header, &run.doc, opts.point)?;
    let causes = causes_of(&run.doc, opts)?;
    let command = recording.header().command.clone();
    let id = recording.id();
    experiments(
        store, id, &run, &command, point, &causes, opts, interrupt, progress,
    )
}

/// The causes to lengthen: those named, else the run's top findings.
fn causes_of(doc: &RunDocument, opts: &VerifyOptions) -> Result<Vec<String>> {
    let causes = if opts.causes.is_empty() {
        top_causes(doc)
    } else {
        opts.causes.clone()
    };
    if causes.is_empty() {
        bail!(
            "run {} has no finding to verify: name a cause with --cause (a system call such \
             as fdatasync)",
            doc.id
        );
    }
    Ok(causes)
}

/// Runs the experiments on `run`'s causes with `command` at `point`, and stores them.
#[allow(clippy::too_many_arguments)]
fn experiments(
    store: &Store,
    id: i64,
    run: &LoadedRun,
    command: &[String],
    point: u64,
    causes: &[String],
    opts: &VerifyOptions,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Experiment>> {
    let doc = &run.doc;
    progress(&format!(
        "the command: {} at {} {point}",
        scalprof_model::units::shell_line(command),
        doc.sweep.parameter
    ));
    // The store's own folder for the run, never the stored `output_dir` (a teammate's
    // text): root makes no folder where a shared store says.
    let dir = scalprof_collect::private::private_dir(&store.run_output_dir(id)?.join("verify"))?;
    let exe = Executable::open(command, doc);
    let mut done = Vec::new();
    for subject in causes {
        if interrupt.requested() {
            break;
        }
        let named = !opts.causes.is_empty();
        let experiment = match lengthenable(doc, exe.as_ref(), subject, named) {
            Some(how) => {
                let regex = &run.inputs.header.ops_regex;
                let bench =
                    Bench::new(doc, command, regex, point, dir.clone(), how.target.clone())?;
                lengthen(
                    &bench,
                    doc,
                    subject,
                    &how,
                    point,
                    opts.rounds,
                    interrupt,
                    progress,
                )?
            }
            None => not_lengthened(doc, subject, point),
        };
        done.push(experiment);
    }
    store.add_experiments(id, &done)?;
    Ok(done)
}

/// The command the experiments execute: the user's, or the stored one once
/// [`stored_command_if_sealed_or_approved`] lets it through.
fn command_to_run(
    store: &Store,
    id: i64,
    run: &LoadedRun,
    opts: &VerifyOptions,
    point: u64,
    causes: &[String],
    approve: &mut dyn FnMut(&Approval) -> Result<bool>,
) -> Result<Vec<String>> {
    if let Some(given) = &opts.command {
        return Ok(given.clone());
    }
    // Read from the store: a teammate's words until the seal or the user says otherwise.
    let stored = Foreign::new(run.inputs.header.command.clone());
    stored_command_if_sealed_or_approved(store, id, run, stored, point, causes, approve)
}

/// The checked function between a stored command and `exec`: the command, when this
/// user's seal holds on the run (recorded by this user on this host, as this run of this
/// store, unchanged), or when `approve` says yes after seeing it and the point.
#[allow(clippy::disallowed_methods)] // Foreign::into_checked, after the seal or the user.
#[allow(clippy::too_many_arguments)]
fn stored_command_if_sealed_or_approved(
    store: &Store,
    id: i64,
    run: &LoadedRun,
    stored: Foreign<Vec<String>>,
    point: u64,
    causes: &[String],
    approve: &mut dyn FnMut(&Approval) -> Result<bool>,
) -> Result<Vec<String>> {
    let header = &run.inputs.header;
    let provenance = match crate::seal::Sealed::of(store, header) {
        // The seal is computed over the command being let through, not a copy of it.
        Ok(sealed) => crate::seal::provenance(
            crate::seal::Sealed {
                command: stored.shown(),
                ..sealed
            },
            store.seal(id)?.as_deref(),
        ),
        Err(e) => crate::seal::Provenance::Foreign(format!("the store has no identity ({e})")),
    };
    let why = match provenance {
        crate::seal::Provenance::Ours => return Ok(stored.into_checked()),
        crate::seal::Provenance::Foreign(why) => why,
    };
    let ask = Approval {
        run: id,
        command: stored.shown().clone(),
        parameter: header.sweep.parameter,
        value: point,
        causes: causes.to_vec(),
        why,
    };
    if approve(&ask)? {
        return Ok(stored.into_checked());
    }
    bail!(
        "run {id}'s stored command was not run: {}; it is `{}`, at {} {}. To run it, give the \
         command again after `--` (scalprof verify {id} -- COMMAND…), or confirm it on a \
         terminal",
        ask.why,
        scalprof_model::units::shell_line(&ask.command),
        ask.parameter,
        ask.value
    )
}

/// The point to run at: the one asked for, if the run measured it, else the largest. Only
/// the sweep's own values count (those the seal covers): a point added to the run's
/// repeats afterwards is no point to run at.
fn chosen_point(
    header: &scalprof_model::RunHeader,
    doc: &RunDocument,
    asked: Option<u64>,
) -> Result<u64> {
    let measured: Vec<u64> = doc
        .points
        .iter()
        .filter(|p| p.throughput.is_some() && header.sweep.values.contains(&p.value))
        .map(|p| p.value)
        .collect();
    match asked {
        Some(v) if measured.contains(&v) => Ok(v),
        Some(v) => bail!(
            "run {} has no measured point {v} (measured: {measured:?})",
            doc.id
        ),
        None => measured
            .iter()
            .max()
            .copied()
            .with_context(|| format!("run {} has no measured point", doc.id)),
    }
}

/// The run's top findings' subjects, the highest score first.
fn top_causes(doc: &RunDocument) -> Vec<String> {
    let mut findings: Vec<_> = doc.findings.iter().collect();
    findings.sort_by(|a, b| b.score.total_cmp(&a.score));
    findings
        .into_iter()
        .take(TOP_FINDINGS)
        .map(|f| f.subject.clone())
        .collect()
}

/// One execution set-up: the run's command at the point, where its outputs go, how its
/// work is measured, and the system call to lengthen.
struct Bench {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    dir: PathBuf,
    ops_regex: Regex,
    value: u64,
    source: scalprof_model::ThroughputSource,
    target: DelayTarget,
    timeout: Option<std::time::Duration>,
}

impl Bench {
    fn new(
        doc: &RunDocument,
        command: &[String],
        ops_regex: &str,
        value: u64,
        dir: PathBuf,
        target: DelayTarget,
    ) -> Result<Bench> {
        let parameter = doc.sweep.parameter.as_str();
        Ok(Bench {
            argv: substitute(command, parameter, value),
            env: vec![(parameter_env(parameter), value.to_string())],
            dir,
            ops_regex: Regex::new(ops_regex)
                .with_context(|| format!("the run's ops regex {ops_regex:?}"))?,
            value,
            source: doc.throughput.source,
            target,
            timeout: None,
        })
    }

    /// Runs the workload once with the call lengthened by `delay_ns` (0: counted only).
    fn execute(&self, delay_ns: u64, tag: &str, interrupt: &Interrupt) -> Result<Execution> {
        let mut delayer = Delayer::new(DelaySpec {
            target: self.target.clone(),
            delay_ns,
        });
        let mut env = self.env.clone();
        let (delay_env, inherit) = delayer.environment(&self.dir)?;
        env.extend(delay_env);
        let spec = ExecSpec {
            argv: self.argv.clone(),
            env,
            stdout: self.dir.join(format!("{tag}.stdout")),
            stderr: self.dir.join(format!("{tag}.stderr")),
            timeout: self.timeout,
            attached: Vec::new(),
            inherit,
        };
        let r = exec::run_capped(
            &spec,
            &OutputPolicy::ops_lines(&self.ops_regex),
            interrupt,
            &mut [&mut delayer as &mut dyn Attach],
        )?;
        let ops = match_ops(&read_tail(&spec.stdout, 4 << 20), &self.ops_regex).unwrap_or(None);
        let repeat = Repeat {
            index: 0,
            wall_s: r.wall_s,
            user_s: r.user_s,
            sys_s: r.sys_s,
            ops,
            exit_code: r.exit_code,
            signal: r.signal,
            timed_out: r.timed_out,
            voluntary_csw: r.voluntary_csw,
            involuntary_csw: r.involuntary_csw,
            minor_faults: r.minor_faults,
            major_faults: r.major_faults,
            counts: None,
            stdout_path: None,
            stderr_path: None,
            traced: false,
            interference: None,
            throttling: None,
        };
        if r.exit_code != Some(0) {
            bail!(
                "the workload failed during the experiment ({}); its output is in {}",
                repeat.outcome(),
                spec.stderr.display()
            );
        }
        let throughput =
            scalprof_analyze::summary::repeat_throughput(self.value, &repeat, self.source)
                .context("the execution printed no operation count the run's regex reads")?;
        let counts = delayer.take().unwrap_or_default();
        Ok(Execution {
            delay_ns,
            work: throughput * r.wall_s,
            wall_s: r.wall_s,
            cpu_s: r.user_s + r.sys_s,
            occurrences: counts.calls,
            spun_s: counts.spun_ns as f64 * 1e-9,
        })
    }
}

/// Lengthens one system call: two control executions measure how often it occurs, the
/// levels are chosen from that, then the rounds run the control and the levels in
/// rotating order.
#[allow(clippy::too_many_arguments)]
fn lengthen(
    bench: &Bench,
    doc: &RunDocument,
    subject: &str,
    how: &Lengthening,
    point: u64,
    rounds: u32,
    interrupt: &Interrupt,
    progress: &mut dyn FnMut(&str),
) -> Result<Experiment> {
    let call = how.what.as_str();
    let mut runs = Vec::new();
    for i in 0..CALIBRATION {
        progress(&format!("{call}: control {}/{CALIBRATION}", i + 1));
        runs.push(bench.execute(0, &format!("{call}-control{i}"), interrupt)?);
    }
    if matches!(how.target, DelayTarget::UserLock { .. }) && runs.iter().all(|e| e.occurrences == 0)
    {
        let mut e = not_lengthened(doc, subject, point);
        e.primitive = how.primitive.clone();
        e.reason = format!(
            "{call} was never released through pthread_mutex_unlock, pthread_rwlock_unlock or \
             pthread_spin_unlock at the address its symbol gives (not a pthread lock, or a \
             static or setuid program, which ignores LD_PRELOAD): nothing was lengthened"
        );
        return Ok(e);
    }
    if matches!(how.target, DelayTarget::Sleeps) && runs.iter().all(|e| e.occurrences == 0) {
        let mut e = not_lengthened(doc, subject, point);
        e.primitive = how.primitive.clone();
        e.reason = format!(
            "the workload never called libc's nanosleep, clock_nanosleep or usleep, so {call} \
             was not lengthened (it sleeps through another entry point, or the syscall \
             itself): name the call it sleeps in with --cause"
        );
        return Ok(e);
    }
    if let Some(e) = too_hot_to_probe(doc, subject, point, how, &runs) {
        return Ok(e);
    }
    let setting = Setting {
        subject: subject.into(),
        kind: how.kind.clone(),
        point,
        primitive: how.primitive.clone(),
        cpus: doc.host.cpus,
        own_ns_per_op: own_wait(doc, point, how),
        hold: own_hold(doc, point, how),
        bound: doc
            .findings
            .iter()
            .find(|f| f.subject == subject)
            .and_then(|f| f.what_if.as_ref())
            .map(|w| w.speedup),
    };
    let delays = levels(&runs, how.target.min_delay_ns(), how.target.max_delay_ns());
    if delays.len() > 1 {
        for round in 0..rounds {
            for (k, d) in round_order(&delays, round).into_iter().enumerate() {
                if interrupt.requested() {
                    break;
                }
                progress(&format!(
                    "{call}: round {}/{rounds}, delay {}",
                    round + 1,
                    scalprof_model::units::human_ns(d as f64)
                ));
                runs.push(bench.execute(d, &format!("{call}-r{round}-{k}-d{d}"), interrupt)?);
            }
            if settled(&judge(&setting, &runs)) {
                break;
            }
        }
    }
    Ok(judge(&setting, &runs))
}

/// A function whose uprobe alone (the control) cut the throughput to less than this share
/// of the run's clean one is not lengthened: what the experiment would measure is the
/// traps, not the function.
const PROBE_COST_LIMIT: f64 = 1.0 / 3.0;

/// A function called so often that its uprobe's traps dominate the control, said as such:
/// how much of the throughput they took, and how often it is called.
fn too_hot_to_probe(
    doc: &RunDocument,
    subject: &str,
    point: u64,
    how: &Lengthening,
    control: &[Execution],
) -> Option<Experiment> {
    if !matches!(how.target, DelayTarget::Function { .. }) {
        return None;
    }
    let clean = doc.points.iter().find(|p| p.value == point)?.throughput?;
    let (work, wall, calls) = control.iter().fold((0.0, 0.0, 0u64), |(w, t, c), e| {
        (w + e.work, t + e.wall_s, c + e.occurrences)
    });
    let probed = work / wall.max(1e-9);
    if probed >= clean * PROBE_COST_LIMIT {
        return None;
    }
    let mut e = not_lengthened(doc, subject, point);
    e.primitive = how.primitive.clone();
    e.occurrences_per_op = calls as f64 / work.max(1e-12);
    e.reason = format!(
        "{subject} is called {:.1} times per operation, and the uprobe's trap at each call \
         alone cut the throughput to {:.0}% of the run's: lengthening it would measure the \
         traps; a function called less often (its caller) can be lengthened instead",
        e.occurrences_per_op,
        probed / clean * 100.0
    );
    Some(e)
}

/// The delays of one round. The first follows the calibration's two controls with the
/// longest delay twice: two executions at the control and at the longest delay are what a
/// verdict (and the slope) needs, so a clear one stops there, after four executions; the
/// shorter delays, which only show how the answer grows, wait for a second round. Later
/// rounds run every level, the control too, each round starting one level further, so
/// that a drift of the machine spreads over the levels.
fn round_order(delays: &[u64], round: u32) -> Vec<u64> {
    let top = delays.last().copied().unwrap_or(0);
    if round == 0 {
        return vec![top, top];
    }
    (0..delays.len())
        .map(|k| delays[(k + round as usize) % delays.len()])
        .collect()
}

/// The control followed by the delays that add [`LEVELS`] of the control's time per
/// operation if the call is a bottleneck, between `floor_ns` and `cap_ns`; the control
/// alone if the call never occurred.
fn levels(control: &[Execution], floor_ns: u64, cap_ns: u64) -> Vec<u64> {
    let (mut t0, mut c) = (0.0, 0.0);
    for e in control {
        t0 += e.wall_s / e.work.max(1e-12);
        c += e.occurrences as f64 / e.work.max(1e-12);
    }
    if c == 0.0 {
        return vec![0];
    }
    let per_call_s = t0 / c;
    let mut out = vec![0];
    for share in LEVELS {
        let d = (share * per_call_s * 1e9).clamp(floor_ns as f64, cap_ns as f64) as u64;
        if !out.contains(&d) {
            out.push(d);
        }
    }
    // Two levels at least, for a slope: when both shares fall under the floor, the floor
    // and twice it.
    if out.len() == 2 && out[1] < cap_ns {
        out.push((2 * out[1]).min(cap_ns));
    }
    out
}

/// A user lock's hold times at the point, where the run timed them.
fn own_hold(doc: &RunDocument, point: u64, how: &Lengthening) -> Option<HoldTimes> {
    if !matches!(how.target, DelayTarget::UserLock { .. }) {
        return None;
    }
    let p = doc.points.iter().find(|p| p.value == point)?;
    let rows = &p.locks.as_ref()?.rows;
    rows.iter()
        .find(|r| r.name == how.what && r.hold.is_some())
        .and_then(|r| r.hold.clone())
}

/// The cause's own wait per operation at the point, from the run's lock table, in ns: the
/// lock's rows, or the rows of the system calls that name the call.
fn own_wait(doc: &RunDocument, point: u64, how: &Lengthening) -> Option<f64> {
    let p = doc.points.iter().find(|p| p.value == point)?;
    let rows = &p.locks.as_ref()?.rows;
    let what = how.what.as_str();
    let total: f64 = rows
        .iter()
        .filter(|r| match how.target {
            DelayTarget::UserLock { .. } | DelayTarget::KernelLock(_) => r.name == what,
            DelayTarget::Function { .. } => false,
            DelayTarget::Syscall(_) | DelayTarget::Sleeps => {
                r.address == scalprof_model::locks::LockAddress::Syscall
                    && r.name
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .any(|w| w == what)
            }
        })
        .filter_map(|r| r.wait_ns_per_op)
        .sum();
    (total > 0.0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_round_runs_the_longest_delay_twice_and_later_ones_rotate() {
        let d = [0, 50, 100];
        assert_eq!(round_order(&d, 0), [100, 100]);
        assert_eq!(round_order(&d, 1), [50, 100, 0]);
        assert_eq!(round_order(&d, 2), [100, 0, 50]);
        assert_eq!(round_order(&[0, 7], 0), [7, 7]);
    }

    fn control(wall_s: f64, occurrences: u64) -> Execution {
        Execution {
            delay_ns: 0,
            work: 1e6,
            wall_s,
            cpu_s: wall_s,
            occurrences,
            spun_s: 0.0,
        }
    }

    #[test]
    fn levels_add_a_quarter_and_a_half_of_the_time_per_occurrence() {
        // 1 s for 1000 calls: 1 ms a call.
        let l = levels(&[control(1.0, 1000), control(1.0, 1000)], 1_000, 10_000_000);
        assert_eq!(l, vec![0, 250_000, 500_000]);
    }

    #[test]
    fn levels_under_the_floor_are_the_floor_and_twice_it() {
        // 0.1 s for a million releases: 100 ns each, a quarter of it under the floor.
        let l = levels(&[control(0.1, 1_000_000)], 50, 10_000_000);
        assert_eq!(l, vec![0, 50, 100]);
        // Shorter still: both shares under the floor.
        let l = levels(&[control(0.01, 1_000_000)], 50, 10_000_000);
        assert_eq!(l, vec![0, 50, 100]);
        // A cause that never occurred: the control alone.
        assert_eq!(levels(&[control(1.0, 0)], 50, 10_000_000), vec![0]);
        // A cap: a kernel lock's 200 µs.
        let l = levels(&[control(1.0, 100)], 1_000, 200_000);
        assert_eq!(l, vec![0, 200_000]);
    }
}
