//! The scalprof run document (`scalprof.run/1`) and its parts.
//!
//! These are plain serde types shared by every stage of the pipeline
//! (collect → analyze → model → store → report). The JSON shape is a contract read by
//! other tools and by our acceptance tests: add fields freely, never rename or remove one.

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod compare;
pub mod experiment;
pub mod foreign;
pub mod history;
pub mod layout;
pub mod locks;
pub mod profile;
pub mod signal;
pub mod stack_delta;
pub mod suite;
pub mod units;
pub mod vocabulary;
pub use profile::{
    ComplexityReport, FoldedStack, FunctionComplexity, FunctionGrowth, HotInstruction,
    PointProfile, PowerFit, ProfileStats, ScalingDiff, SerialStats, ThreadLoad, TopFunction,
    TopFunctions, Unreadable, MAX_UNREADABLE,
};

/// The value of the `schema` field of every run document.
pub const RUN_SCHEMA: &str = "scalprof.run/1";

mod finding;
mod fit;
mod identity;
pub mod prediction;
mod run;
pub mod stability;
pub use finding::{
    Budget, Cause, ComplexityDetails, Finding, FindingDetails, FindingKind, HotspotDetails,
    LockDetails, SerialDetails, SharingDetails, ThrottlingDetails, Warning, WarningKind, WhatIf,
    LISTED_SHARE, MIN_LEVEL_WINDOWS,
};
pub use fit::{Estimate, Model, ModelKind};
pub use identity::CauseId;
pub use prediction::Prediction;
pub use run::{
    Counters, EventCounts, Host, Limits, ObserverCpu, Point, PointRepeat, Repeat, RepeatTrace,
    RunDocument, RunHeader, RunInputs, RunStatus, Sampling, Spread, Sweep, SweepParameter,
    SwitchCost, Throttling, ThroughputInfo, ThroughputSource, Topology,
};
pub use stability::{ForeignProcess, Interference, Interval, Settling};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_through_its_string() {
        for s in [
            RunStatus::Running,
            RunStatus::Complete,
            RunStatus::Interrupted,
            RunStatus::Failed,
        ] {
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::Value::String(s.as_str().into())
            );
        }
        assert_eq!(RunStatus::parse("done"), None);
    }

    #[test]
    fn finding_kinds_serialize_as_their_contract_names() {
        for k in FindingKind::ALL {
            let v = serde_json::to_value(k).unwrap();
            assert_eq!(v, serde_json::Value::String(k.as_str().into()));
            assert_eq!(serde_json::from_value::<FindingKind>(v).unwrap(), k);
        }
    }

    #[test]
    fn every_kind_is_in_the_list_of_all_kinds() {
        // A kind added to the enum and not to `ALL` fails here, by the match (which the
        // compiler holds to every variant) or by the position.
        let position = |k: FindingKind| match k {
            FindingKind::LockContention => 0,
            FindingKind::FalseSharing => 1,
            FindingKind::TrueSharing => 2,
            FindingKind::SuperlinearCost => 3,
            FindingKind::KernelHotspot => 4,
            FindingKind::UserHotspot => 5,
            FindingKind::SerialFraction => 6,
            FindingKind::BlockedWait => 7,
            FindingKind::CpuThrottling => 8,
        };
        for (i, k) in FindingKind::ALL.into_iter().enumerate() {
            assert_eq!(position(k), i, "{k}");
        }
    }

    #[test]
    fn usl_prediction_matches_the_formula() {
        let m = Model {
            kind: ModelKind::Usl,
            sigma: 0.1,
            kappa: 0.01,
            lambda: 100.0,
            peak: None,
            r2: 1.0,
            observations: 0,
            sigma_est: None,
            kappa_est: None,
            lambda_est: None,
            note: None,
            prediction: None,
        };
        assert_eq!(m.predict(1.0), 100.0);
        // 100*4 / (1 + 0.3 + 0.12)
        assert!((m.predict(4.0) - 400.0 / 1.42).abs() < 1e-9);
    }

    #[test]
    fn repeat_outcome_names_signal_and_timeout() {
        let mut r = Repeat::ok(0, 1.0);
        assert!(r.succeeded());
        r.exit_code = None;
        r.signal = Some(11);
        assert_eq!(r.outcome(), "killed by SIGSEGV");
        assert!(!r.succeeded());
        r.timed_out = true;
        assert_eq!(r.outcome(), "timed out");
    }
}
