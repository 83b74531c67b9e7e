//! Warnings about the machine a sweep ran on: points past the CPUs the workload may use
//! (online, or a CPU quota, CPU set or affinity mask), or past the physical cores where SMT
//! siblings share them.

use scalprof_model::{Point, RunHeader, Warning, WarningKind};

/// A thread count above the CPUs the workload may use (online, or fewer where a CPU
/// quota, CPU set or affinity mask says so): the point measures time-sharing, or the
/// limit; its efficiency is also judged against those CPUs.
pub(super) fn oversubscribed_point(header: &RunHeader, p: &Point) -> Option<Warning> {
    let cpus = header.host.cpus as u64;
    if !header.sweep.parameter.scales() || cpus == 0 {
        return None;
    }
    let limits = header.host.limits.as_ref();
    let usable = limits.map_or(cpus, |l| u64::from(l.usable_cpus).clamp(1, cpus));
    if p.value <= usable {
        return shared_cores(header, p);
    }
    let (kind, message) = match limits.filter(|_| usable < cpus) {
        None => (WarningKind::OversubscribedPoint, format!(
            "threads {}: more threads than the {cpus} online CPUs; this point measures time-sharing, not scaling",
            p.value
        )),
        Some(l) => {
            let against = p.speedup.map_or(String::new(), |s| {
                format!(
                    ": against the usable CPU{} its efficiency is {:.0}% ({:.0}% against its {} threads)",
                    if usable == 1 { "" } else { "s" },
                    s / usable as f64 * 100.0,
                    s / p.value as f64 * 100.0,
                    p.value
                )
            });
            (WarningKind::BeyondLimits, format!(
                "threads {}: more threads than the {usable} of {cpus} CPUs the workload may use, set by {}; this point measures the limit, not the program's scaling{against}",
                p.value,
                limiting(l, usable)
            ))
        }
    };
    Some(Warning {
        kind,
        point: Some(p.value),
        message,
    })
}

/// A thread count above the physical cores where a core runs several threads (SMT): from
/// there on, threads share cores, and two threads on one core are not two CPUs.
fn shared_cores(header: &RunHeader, p: &Point) -> Option<Warning> {
    let t = header.host.topology.as_ref()?;
    let cores = u64::from(t.cores);
    if t.threads_per_core < 2 || cores == 0 || p.value <= cores {
        return None;
    }
    Some(Warning {
        kind: WarningKind::OversubscribedPoint,
        point: Some(p.value),
        message: format!(
            "threads {}: more threads than the {cores} cores ({} hardware threads each, SMT): from {} threads on, threads share cores, which run two threads at well under twice one's speed; expect the efficiency to fall there whatever the program does",
            p.value,
            t.threads_per_core,
            cores + 1
        ),
    })
}

/// The limits that leave the workload `usable` CPUs, named: "the CPU quota (1.00 CPU,
/// cgroup /ci)", "the CPU set 0", "the affinity mask".
pub(crate) fn limiting(l: &scalprof_model::Limits, usable: u64) -> String {
    let mut named = Vec::new();
    if let Some(q) = l.cpu_quota.filter(|q| q.ceil() as u64 == usable) {
        named.push(format!(
            "the CPU quota ({q:.2} CPU{}, cgroup {})",
            if q == 1.0 { "" } else { "s" },
            l.cgroup.as_deref().unwrap_or("?")
        ));
    }
    if let (Some(set), Some(_)) = (&l.cpuset, l.cpuset_cpus.filter(|&n| u64::from(n) == usable)) {
        named.push(format!("the CPU set {set}"));
    }
    if u64::from(l.affinity_cpus) == usable {
        named.push("the affinity mask".into());
    }
    if named.is_empty() {
        "the machine's limits".into()
    } else {
        named.join(" and ")
    }
}

#[cfg(test)]
mod tests {
    use scalprof_model::{Limits, PointRepeat, Repeat, RunInputs, Topology, WarningKind};

    /// A weak-scaling sweep on 8 CPUs that scales linearly, with the host's facts set.
    fn warnings_of(
        limits: Option<Limits>,
        topology: Option<Topology>,
    ) -> Vec<(WarningKind, String)> {
        let mut header = crate::summary::tests::header(vec![1, 2, 4, 8]);
        header.host.cpus = 8;
        header.host.limits = limits;
        header.host.topology = topology;
        let repeats = [1u64, 2, 4, 8]
            .iter()
            .flat_map(|&value| {
                (0..3).map(move |i| PointRepeat {
                    value,
                    repeat: Repeat {
                        user_s: value as f64,
                        ops: Some(1000 * value),
                        ..Repeat::ok(i, 1.0)
                    },
                })
            })
            .collect();
        crate::assemble(&RunInputs::timing(header, repeats))
            .warnings
            .into_iter()
            .map(|w| (w.kind, w.message))
            .collect()
    }

    #[test]
    fn points_past_the_cores_or_the_limits_say_which() {
        let smt = Topology {
            cores: 4,
            threads_per_core: 2,
            ..Topology::default()
        };
        let w = warnings_of(None, Some(smt.clone()));
        let past: Vec<&String> = w
            .iter()
            .filter(|(k, _)| *k == WarningKind::OversubscribedPoint)
            .map(|(_, m)| m)
            .collect();
        assert_eq!(past.len(), 1, "{w:?}");
        assert!(
            past[0].starts_with("threads 8: more threads than the 4 cores"),
            "{w:?}"
        );
        // A CPU set of 2: the points past it name it, with their efficiency against 2.
        let set = Limits {
            cpuset: Some("0-1".into()),
            cpuset_cpus: Some(2),
            affinity_cpus: 8,
            online_cpus: 8,
            usable_cpus: 2,
            ..Limits::default()
        };
        let w = warnings_of(Some(set), Some(smt));
        let beyond: Vec<&String> = w
            .iter()
            .filter(|(k, _)| *k == WarningKind::BeyondLimits)
            .map(|(_, m)| m)
            .collect();
        assert_eq!(beyond.len(), 2, "{w:?}");
        assert!(beyond[0].contains("set by the CPU set 0-1"), "{w:?}");
        assert!(
            beyond[1].contains(
                "against the usable CPUs its efficiency is 400% (100% against its 8 threads)"
            ),
            "{w:?}"
        );
        // No limits, no SMT: nothing said.
        let w = warnings_of(None, None);
        assert!(
            !w.iter().any(|(k, _)| matches!(
                k,
                WarningKind::BeyondLimits | WarningKind::OversubscribedPoint
            )),
            "{w:?}"
        );
    }
}
