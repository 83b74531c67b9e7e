//! Kernel and user functions whose own cost per unit of work grew ("what grew"), less
//! those another cause already names.

use scalprof_model::locks::Scope;
use scalprof_model::vocabulary::{is_futex_path, is_spin_path, is_user_lock_code};
use scalprof_model::{Finding, FindingKind, Point, PointProfile, ScalingDiff};

use super::{Cause, Run};
use crate::budget::series::{sampled_to_ns, self_ns, Series};

pub(crate) struct Hotspots;

impl Cause for Hotspots {
    fn kinds(&self) -> &'static [FindingKind] {
        &[FindingKind::KernelHotspot, FindingKind::UserHotspot]
    }

    fn series(&self, run: &Run<'_>, _findings: &mut Vec<Finding>) -> Vec<Series> {
        run.scaling_diff.map_or_else(Vec::new, |diff| {
            hotspot_series(run.points, run.profiles, run.work, diff, run.claimed)
        })
    }
}

/// Functions whose self cost grew: on-CPU causes, in the kernel and in user space. Samples
/// that are a lock's own on-CPU time (its spin paths, the futex call, libc's lock code)
/// are counted with the lock, and functions `claimed` by a shared cache line with that
/// line, not here. Only the functions the scaling diff lists as grown are candidates.
fn hotspot_series(
    points: &[Point],
    profiles: &[Option<&PointProfile>],
    work: &[f64],
    diff: &ScalingDiff,
    claimed: &[String],
) -> Vec<Series> {
    let scale = sampled_to_ns(points, profiles, work);
    let kernel = diff
        .kernel
        .iter()
        .filter(|r| r.growth > 0.0 && !is_spin_path(&r.function) && !is_futex_path(&r.function))
        .map(|r| (r, true));
    let user = diff
        .user
        .iter()
        .filter(|r| {
            r.growth > 0.0 && !is_user_lock_code(&r.function) && !claimed.contains(&r.function)
        })
        .map(|r| (r, false));
    kernel
        .chain(user)
        .map(|(r, kernel)| Series {
            run_queue: None,
            kind: if kernel {
                FindingKind::KernelHotspot
            } else {
                FindingKind::UserHotspot
            },
            scope: Some(if kernel { Scope::Kernel } else { Scope::User }),
            subject: r.function.clone(),
            detail: if kernel {
                "kernel, on CPU"
            } else {
                "user, on CPU"
            }
            .into(),
            per_op: (0..points.len())
                .map(|i| self_ns(profiles, work, &scale, i, &r.function, kernel))
                .collect(),
            shares: None,
            late: None,
        })
        .collect()
}
