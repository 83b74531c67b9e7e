//! The pipeline's refusals in the words of the command line: each names the flag that set
//! the option (the pipeline knows options, not flags).

use scalprof_pipeline::suite::SelectError;
use scalprof_pipeline::Refusal;

use crate::commands::Usage;

/// `refusal` as the error the user sees.
pub fn worded(refusal: Refusal) -> anyhow::Error {
    match refusal {
        Refusal::NoRepeats => anyhow::anyhow!("--repeat must be at least 1"),
        Refusal::NoValues => anyhow::anyhow!("the sweep has no values"),
        Refusal::Cgroup(e) => e.into(),
        Refusal::TooFewSizes => anyhow::anyhow!(
            "--sizes needs at least three sizes to fit an exponent (e.g. 5000,10000,20000,40000)"
        ),
        Refusal::Program(e) | Refusal::Attach(e) => e.into(),
        Refusal::OpsRegex { regex, error } => {
            anyhow::Error::new(error).context(format!("--ops-regex {regex:?} is not a valid regex"))
        }
        Refusal::OpsRegexNoGroup { regex } => anyhow::anyhow!(
            "--ops-regex {regex:?} needs a capture group around the number, e.g. 'ops=(\\d+)'"
        ),
        Refusal::AttachUntraced => anyhow::anyhow!(
            "--attach observes processes in the traced repeats, and this run has \
             none (--diagnose 0, or --no-profile with --no-locks)"
        ),
        Refusal::AttachMaySample { paranoid } => anyhow::anyhow!(
            "--attach samples every CPU, which needs root (or CAP_PERFMON) or \
             perf_event_paranoid ≤ 0 (it is {}): `sudo sysctl kernel.perf_event_paranoid=0`, \
             or add --no-profile to trace only locks",
            paranoid.map_or("unknown".into(), |p| p.to_string())
        ),
        Refusal::AttachMayTrace => anyhow::anyhow!(
            "--attach traces the processes' locks with BPF, which needs root (or \
             CAP_BPF and CAP_PERFMON); or add --no-locks to profile only"
        ),
        Refusal::LocksNotBuilt(e) => e.into(),
        Refusal::LocksMayTrace => anyhow::anyhow!(
            "tracing locks loads BPF programs, which needs root (or CAP_BPF and \
             CAP_PERFMON): run it with sudo"
        ),
    }
}

/// A refusal found in an error's chain, worded; other errors as they are.
pub fn reworded(e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<Refusal>() {
        Ok(refusal) => worded(refusal),
        Err(e) => e,
    }
}

/// A `--tests` list that selects nothing runnable: a usage error (exit 2) where the list
/// names no test, an error otherwise.
pub fn tests_worded(e: SelectError) -> anyhow::Error {
    match e {
        SelectError::NoSuchTest { .. } => Usage(format!("--tests: {e}")).into(),
        SelectError::Empty => Usage("--tests selected no test".into()).into(),
        SelectError::ThreadsOnly { .. } | SelectError::NoSuchMode { .. } => {
            anyhow::anyhow!("--tests: {e}")
        }
    }
}
