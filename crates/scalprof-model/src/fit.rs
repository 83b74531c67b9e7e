//! The fitted scaling model (USL or Amdahl) and its parameters' estimates.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    /// Universal Scalability Law (σ, κ, λ).
    Usl,
    /// Amdahl's law (κ fixed at 0), used when there are fewer than 3 distinct points.
    Amdahl,
}

/// Standard errors and 95% confidence intervals of the fitted parameters, where the
/// fit had degrees of freedom to spare.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub std_error: f64,
    pub ci95: [f64; 2],
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub kind: ModelKind,
    /// Contention (serial fraction).
    pub sigma: f64,
    /// Coherency (crosstalk) penalty; 0 for Amdahl.
    pub kappa: f64,
    /// Throughput of one unit of concurrency, fitted.
    pub lambda: f64,
    /// N* = sqrt((1−σ)/κ); `null` when κ = 0 (throughput never peaks).
    pub peak: Option<f64>,
    pub r2: f64,
    /// Number of observations the fit used.
    pub observations: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_est: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kappa_est: Option<Estimate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_est: Option<Estimate>,
    /// Why a simpler model was used, or what limits this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The throughput expected past the measured points, from the causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<crate::Prediction>,
}

impl Model {
    /// Predicted throughput at concurrency `n`.
    pub fn predict(&self, n: f64) -> f64 {
        // λ last, so that a λ near the largest double does not overflow before the division.
        self.lambda * (n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0)))
    }
}
