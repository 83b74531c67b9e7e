//! `--prepare` and `--cleanup`: a shell command run before and after every execution of
//! the workload, outside its timed window (hyperfine's habit: drop the page cache, reset
//! a database). A hook that fails stops the sweep: the repeats after it would measure a
//! state nobody set up.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::execution::Step;
use super::{parameter_env, substitute, RepeatKind, SweepPlan};
use crate::exec::ExecSpec;
use crate::interrupt::Interrupt;
use crate::{CollectError, HookFailed};

/// Which of the plan's hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Prepare,
    Cleanup,
}

impl Hook {
    /// The flag that sets it, which the error names.
    pub fn flag(self) -> &'static str {
        match self {
            Hook::Prepare => "--prepare",
            Hook::Cleanup => "--cleanup",
        }
    }

    fn when(self) -> &'static str {
        match self {
            Hook::Prepare => "before",
            Hook::Cleanup => "after",
        }
    }

    fn command(self, plan: &SweepPlan) -> Option<&str> {
        match self {
            Hook::Prepare => plan.prepare.as_deref(),
            Hook::Cleanup => plan.cleanup.as_deref(),
        }
    }
}

/// Runs the plan's `hook` for one step, if the plan has one: `sh -c` with the point's
/// value put in for `{parameter}` and in the environment, as the workload gets it. Its
/// standard error goes to a file beside the step's outputs, kept only when it fails.
/// Stopped by Ctrl-C it is no failure: the caller sees the interrupt.
#[allow(clippy::disallowed_methods)] // runs: --prepare/--cleanup as the user typed them
pub(super) fn run_hook(
    plan: &SweepPlan,
    hook: Hook,
    step: &Step,
    spec: &ExecSpec,
    interrupt: &Interrupt,
) -> Result<(), CollectError> {
    let Some(script) = hook.command(plan) else {
        return Ok(());
    };
    let script = substitute(&[script.to_string()], plan.parameter.as_str(), step.value).remove(0);
    let stderr_path = spec.stdout.with_extension(match hook {
        Hook::Prepare => "prepare.stderr",
        Hook::Cleanup => "cleanup.stderr",
    });
    let stderr =
        std::fs::File::create(&stderr_path).map_err(|source| CollectError::OutputFile {
            path: stderr_path.clone(),
            source,
        })?;
    let mut sh = Command::new("sh");
    for name in crate::exec::WITHHELD_ENV {
        sh.env_remove(name);
    }
    let status = sh
        .arg("-c")
        .arg(&script)
        .env(
            parameter_env(plan.parameter.as_str()),
            step.value.to_string(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .status()
        .map_err(|source| CollectError::Spawn {
            program: "sh".into(),
            source,
        })?;
    if status.success() || interrupt.requested() {
        let _ = std::fs::remove_file(&stderr_path);
        return Ok(());
    }
    let outcome = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by {}", scalprof_model::signal::name(signal)),
        (None, None) => "failed".into(),
    };
    let kind = match step.kind {
        RepeatKind::Warmup => "warm-up",
        RepeatKind::Clean => "repeat",
        RepeatKind::Traced => "traced repeat",
    };
    Err(CollectError::Hook(Box::new(HookFailed {
        flag: hook.flag(),
        command: script,
        outcome,
        when: hook.when(),
        step: format!(
            "{} {}, {kind} {}",
            plan.parameter.as_str(),
            step.value,
            step.of + 1
        ),
        said: last_line(&stderr_path)
            .map(|l| format!(": {l} (its stderr: {})", stderr_path.display()))
            .unwrap_or_default(),
    })))
}

/// The last non-empty line of a small file's tail.
fn last_line(path: &Path) -> Option<String> {
    let text = super::read_tail(&path.to_path_buf(), 4096);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{one_sweep_at_a_time, plan, Collect};
    use super::super::{execute_plan, SweepEnd};
    use crate::interrupt::Interrupt;

    #[test]
    fn prepare_and_cleanup_run_around_every_execution_with_the_point() {
        let _turn = one_sweep_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let l = log.display();
        let mut p = plan(&dir, &format!("echo run $1 >> {l}; echo ops=1"), false);
        p.values = vec![1, 2];
        p.prepare = Some(format!("echo prepare {{threads}} $SCALPROF_THREADS >> {l}"));
        p.cleanup = Some(format!("echo cleanup {{threads}} >> {l}"));
        let mut sink = Collect(vec![], 0);
        assert_eq!(
            execute_plan(&p, &mut sink, &Interrupt::manual()).unwrap(),
            SweepEnd::Complete
        );
        let got = std::fs::read_to_string(&log).unwrap();
        // Per point: one warm-up and two repeats, each wrapped.
        let point = |v: u32| format!("prepare {v} {v}\nrun {v}\ncleanup {v}\n").repeat(3);
        assert_eq!(got, point(1) + &point(2));
        assert_eq!(sink.0.len(), 4);
        // A hook that succeeds leaves no file behind.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("out"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("prepare"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_failing_prepare_stops_the_sweep_and_says_where_and_why() {
        let _turn = one_sweep_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let mut p = plan(&dir, "echo ops=1", true);
        p.warmup = 0;
        p.prepare = Some("[ {threads} -ne 2 ] || { echo no database >&2; exit 4; }".into());
        let mut sink = Collect(vec![], 0);
        let err = execute_plan(&p, &mut sink, &Interrupt::manual())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--prepare `[ 2 -ne 2 ] ||")
                && err.contains("exited with status 4 before threads 2, repeat 1: no database"),
            "{err}"
        );
        assert!(err.contains("p2-r0.prepare.stderr"), "{err}");
        // Point 1's repeats were measured; nothing of point 2 ran, even with keep_going.
        let values: Vec<u64> = sink.0.iter().map(|(v, _)| *v).collect();
        assert_eq!(values, vec![1, 1]);
    }

    #[test]
    fn a_failing_cleanup_stops_the_sweep_after_its_repeat_is_kept() {
        let _turn = one_sweep_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let mut p = plan(&dir, "echo ops=1", false);
        p.warmup = 0;
        p.cleanup = Some("exit 1".into());
        let mut sink = Collect(vec![], 0);
        let err = execute_plan(&p, &mut sink, &Interrupt::manual())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--cleanup `exit 1` exited with status 1 after threads 1, repeat 1"
        );
        assert_eq!(sink.0.len(), 1, "the repeat measured before it is kept");
    }

    #[test]
    fn the_prepare_command_is_outside_the_timed_window() {
        let _turn = one_sweep_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let mut p = plan(&dir, "echo ops=1", false);
        (p.values, p.repeat, p.warmup) = (vec![1], 1, 0);
        p.prepare = Some("sleep 0.6".into());
        let mut sink = Collect(vec![], 0);
        execute_plan(&p, &mut sink, &Interrupt::manual()).unwrap();
        let wall_s = sink.0[0].1.wall_s;
        assert!(
            wall_s < 0.5,
            "the repeat's wall time took the prepare's sleep: {wall_s}"
        );
    }
}
