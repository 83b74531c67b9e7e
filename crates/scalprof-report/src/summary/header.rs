//! The summary's header: the run's identity, command, host and machine, the limits in
//! force, the runtimes seen, and how its throughput is counted.

use scalprof_model::locks::Runtime;
use scalprof_model::{RunDocument, ThroughputSource};

use crate::safe::{one_line, shell_line};

/// A commit as people write it: the first 12 hex digits of an object id, else as given.
pub fn short_commit(c: &str) -> &str {
    if c.len() >= 40 && c.bytes().all(|b| b.is_ascii_hexdigit()) {
        &c[..12]
    } else {
        c
    }
}

/// The run's identity (id, label, status, points and repeats), its command and host, how
/// its throughput is counted, and the warnings that make the rest of the screen moot.
pub(super) fn header(doc: &RunDocument, headline: &[String]) -> String {
    let repeats: usize = doc
        .points
        .iter()
        .map(|p| p.repeats.len())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "run {} · {} · {} · {} point{} × {} repeat{}{}\n",
        doc.id,
        one_line(&doc.label),
        doc.status.as_str(),
        doc.points.len(),
        plural(doc.points.len()),
        repeats,
        plural(repeats),
        doc.commit.as_deref().map_or(String::new(), |c| format!(
            " · commit {}",
            one_line(short_commit(c))
        ))
    );
    out += &format!("command: {}\n", one_line(&shell_line(&doc.command)));
    out += &format!(
        "host:    Linux {}, {} CPUs{}, {}, {}{}\n",
        doc.host.kernel,
        doc.host.cpus,
        cores(doc),
        doc.host.cpu_model,
        if doc.host.pmu {
            "hardware PMU"
        } else {
            "no hardware PMU"
        },
        machine(doc)
    );
    out += &limits_line(doc);
    out += &runtimes_line(doc);
    out += &format!("throughput: {}\n", throughput_source_line(doc));
    if let Some(cost) = doc.observer {
        out += &format!(
            "scalprof: {:.1} s of CPU in {:.0} s ({:.1}% of one CPU) while it recorded\n",
            cost.cpu_s,
            cost.span_s,
            100.0 * cost.share()
        );
    }
    // Warnings that make the rest of the screen moot come first, not at its end.
    for w in headline {
        out += &format!("  ! {w}\n");
    }
    out
}

/// " (4 cores, SMT 2)" where cores run several threads; empty otherwise.
fn cores(doc: &RunDocument) -> String {
    match doc.host.topology.as_ref() {
        Some(t) if t.threads_per_core > 1 => {
            format!(" ({} cores, SMT {})", t.cores, t.threads_per_core)
        }
        _ => String::new(),
    }
}

/// ", virtual machine, governor powersave 800–3500 MHz": what may move the numbers.
fn machine(doc: &RunDocument) -> String {
    let Some(t) = doc.host.topology.as_ref() else {
        return String::new();
    };
    let mut out = String::new();
    if t.virtual_machine {
        out += ", virtual machine";
    }
    if let Some(g) = &t.governor {
        out += &format!(", governor {}", one_line(g));
        if let (Some(lo), Some(hi)) = (t.min_mhz, t.max_mhz) {
            out += &format!(" {lo}–{hi} MHz");
        }
    }
    out
}

/// "limits: CPU quota 1.00 CPU (cgroup v1 /ci) · CPU set 0 · usable: 1 of 2 CPUs": said
/// when the machine's limits narrow what the workload may use; empty otherwise.
fn limits_line(doc: &RunDocument) -> String {
    let Some(l) = doc.host.limits.as_ref() else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(q) = l.cpu_quota {
        let version = l.cgroup_version.map_or(String::new(), |v| format!("v{v} "));
        parts.push(format!(
            "CPU quota {q:.2} CPU{} (cgroup {version}{})",
            if q == 1.0 { "" } else { "s" },
            one_line(l.cgroup.as_deref().unwrap_or("?"))
        ));
    }
    if let (Some(set), Some(n)) = (&l.cpuset, l.cpuset_cpus) {
        if n < l.online_cpus {
            parts.push(format!("CPU set {}", one_line(set)));
        }
    }
    if l.affinity_cpus < l.online_cpus {
        parts.push(format!(
            "affinity {} CPU{}",
            l.affinity_cpus,
            plural(l.affinity_cpus as usize)
        ));
    }
    if let Some(b) = l.memory_limit_bytes {
        parts.push(format!("memory {}", crate::format::bytes(b)));
    }
    if parts.is_empty() {
        return String::new();
    }
    if l.usable_cpus < l.online_cpus {
        parts.push(format!(
            "usable: {} of {} CPUs",
            l.usable_cpus, l.online_cpus
        ));
    }
    format!("limits:  {}\n", parts.join(" · "))
}

/// ", on 4% of the traced time in bursts (their waits scaled to all of it)": where the Go
/// probes' hits cost more than their budget and they ran in bursts; empty where they were
/// on throughout.
fn go_bursts(doc: &RunDocument) -> String {
    let (probed, span) = doc
        .points
        .iter()
        .filter_map(|p| p.locks.as_ref())
        .fold((0u64, 0u64), |(p, s), l| {
            (p + l.tracer.go_probed_ns, s + l.tracer.go_span_ns)
        });
    if probed == 0 || probed >= span {
        return String::new();
    }
    format!(
        ", on {:.0}% of the traced time in bursts (their waits scaled to all of it)",
        100.0 * probed as f64 / span as f64
    )
}

/// "runtime: Go (go_mutex) · …": the language runtimes the traced processes ran, with
/// what scalprof did for each; empty when none was recognized.
fn runtimes_line(doc: &RunDocument) -> String {
    let mut seen: Vec<&scalprof_model::locks::RuntimeSeen> = doc
        .points
        .iter()
        .filter_map(|p| p.locks.as_ref())
        .flat_map(|l| &l.runtimes)
        .collect();
    seen.sort();
    seen.dedup();
    if seen.is_empty() {
        return String::new();
    }
    let bursts = go_bursts(doc);
    let parts: Vec<String> = seen
        .iter()
        .map(|r| {
            let note = match r.runtime {
                Runtime::Go => {
                    return format!(
                        "{} ({}) — goroutines' waits from the runtime's probes{bursts}; \
                         GOMAXPROCS={{threads}} sweeps its threads",
                        r.title(),
                        one_line(&r.process)
                    );
                }
                Runtime::HotSpot => {
                    " — traced repeats ran with -XX:+PreserveFramePointer \
                     -XX:+DumpPerfMapAtExit (JAVA_TOOL_OPTIONS) to name Java frames"
                }
                _ => "",
            };
            format!("{} ({}){note}", r.title(), one_line(&r.process))
        })
        .collect();
    format!("runtime: {}\n", parts.join(" · "))
}

pub(crate) fn throughput_source_line(doc: &RunDocument) -> String {
    if let Some(why) = &doc.throughput.inferred {
        let formula = match doc.throughput.source {
            ThroughputSource::Strong => "throughput = 1 / wall",
            _ => "throughput = N / wall",
        };
        return format!("{} — no ops line; {why}; {formula}", doc.throughput.unit);
    }
    match doc.throughput.source {
        ThroughputSource::Ops => format!(
            "{} — operations printed by the workload ({}) per second of wall time",
            doc.throughput.unit,
            doc.throughput.ops_regex.as_deref().unwrap_or("?")
        ),
        ThroughputSource::Weak => format!(
            "{} — weak scaling (no ops line found): each thread does the same work, throughput = N / wall",
            doc.throughput.unit
        ),
        ThroughputSource::Strong => format!(
            "{} — strong scaling (no ops line found): fixed total work, throughput = 1 / wall",
            doc.throughput.unit
        ),
    }
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
