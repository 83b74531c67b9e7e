//! The throughput expected at thread counts past the measured ones (`model.prediction`),
//! and the cause expected to limit it: made from the measured causes' costs per
//! operation, not from the curve's shape alone.

use serde::{Deserialize, Serialize};

use crate::stability::Interval;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// One point at every power of two past the last point used, and at the target.
    pub points: Vec<PredictedPoint>,
    /// The cause that costs the most at the target, once it costs as much thread-time
    /// as the work itself; `null` when no measured cause gets there by the target.
    pub limiting: Option<Limiting>,
    /// How the points were made, in a phrase.
    pub method: String,
    /// The measured point the causes' costs were read at (the largest within the CPUs).
    pub from_point: u64,
    /// Contention (σ) and coherency (κ) as the causes give them, summed.
    pub sigma: f64,
    pub kappa: f64,
    /// The tightest bound from a lock's hold times: no more operations per second than
    /// one over the serial time per operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
    /// What the measured points could not show, each of which widens the interval.
    pub unseen: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictedPoint {
    pub threads: u64,
    pub throughput: f64,
    pub interval: Interval,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limiting {
    /// The cause's finding kind (`lock_contention`, …) and subject, as in the budget.
    pub kind: crate::FindingKind,
    pub subject: String,
    /// The thread count from which it costs as much thread-time as the work itself.
    pub from_threads: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// Where the lock lives, known where the bound was made (not in the document).
    #[serde(skip)]
    pub scope: Option<crate::locks::Scope>,
    /// The lock whose holds bound the throughput.
    pub subject: String,
    /// Its serial time per operation: mean hold × acquisitions per operation.
    pub serial_ns_per_op: f64,
    /// One over it, in the run's throughput units per second.
    pub throughput: f64,
}

impl Bound {
    /// The bounding lock as a cause.
    pub fn id(&self) -> crate::CauseId<'_> {
        crate::CauseId {
            kind: crate::FindingKind::LockContention,
            scope: self.scope,
            subject: &self.subject,
        }
    }
}
