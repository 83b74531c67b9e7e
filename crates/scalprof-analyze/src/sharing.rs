//! False and true sharing from the samples, without a PMU.
//!
//! The converter (`scalprof_symbolize::sharing`) resolved the locked writes among the hot
//! user instructions to the globals they write, with their DWARF layouts, and the run
//! stores them ([`SharingInputs`]). When that instruction's cost per operation grows with the thread count:
//! an operand indexed per thread, into an object whose fields share a cache line, is
//! `false_sharing` (each thread writes its own field of one line); a single fixed address
//! written by every thread is `true_sharing` (one variable bouncing). The evidence is
//! static plus sampled, not measured per address: the run document says so.

use scalprof_model::locks::Scope;
use scalprof_model::FindingKind;
use std::path::Path;

use scalprof_model::layout::SharingInputs;
use scalprof_model::{Finding, PointProfile};
use scalprof_model::{FindingDetails, SharingDetails};

/// A sharing finding needs its instructions' growth to explain this share of the cost.
pub const SHARING_MIN_SCORE: f64 = 0.05;

struct Target {
    file: String,
    object: String,
    object_address: u64,
    line_start: u64,
    indexed: bool,
    offsets: Vec<u64>,
    ips: Vec<u64>,
    functions: Vec<String>,
    first: f64,
    last: f64,
}

/// `points`: (threads, work, profile) in sweep order; `inputs`: the sites and layouts
/// read from the binaries at the end of the sweep.
pub fn sharing_findings(
    points: &[(u64, f64, &PointProfile)],
    inputs: &SharingInputs,
) -> Vec<Finding> {
    let line = inputs.line.max(1);
    let (Some(&(v0, w0, p0)), Some(&(v1, w1, p1))) = (points.first(), points.last()) else {
        return Vec::new();
    };
    if v1 < 2 || v0 == v1 || w0 <= 0.0 || w1 <= 0.0 {
        return Vec::new();
    }
    let total_last: f64 = p1.folded.iter().map(|f| f.weight as f64).sum::<f64>() / w1;
    if total_last <= 0.0 {
        return Vec::new();
    }
    let mut targets: Vec<Target> = Vec::new();
    let weight_at = |p: &PointProfile, file: &str, ip: u64| -> f64 {
        p.hot
            .iter()
            .filter(|h| h.file == file && h.address == ip)
            .map(|h| h.weight as f64)
            .sum()
    };
    let object_of = |file: &str, name: &str| {
        inputs
            .objects
            .iter()
            .find(|o| o.file == file && o.object.name == name)
            .map(|o| &o.object)
    };
    for site in &inputs.sites {
        let Some(obj) = object_of(&site.file, &site.object) else {
            continue;
        };
        // The samples on the sampled instruction (which may be just after the locked one).
        let (first, last) = (
            weight_at(p0, &site.file, site.sampled) / w0,
            weight_at(p1, &site.file, site.sampled) / w1,
        );
        let offset = site.address - obj.address;
        match targets
            .iter_mut()
            .find(|t| t.file == site.file && t.object == obj.name)
        {
            Some(t) => {
                t.indexed |= site.indexed;
                if !t.offsets.contains(&offset) {
                    t.offsets.push(offset);
                }
                if !t.ips.contains(&site.ip) {
                    t.ips.push(site.ip);
                }
                for f in &site.functions {
                    if !t.functions.contains(f) {
                        t.functions.push(f.clone());
                    }
                }
                t.first += first;
                t.last += last;
            }
            None => targets.push(Target {
                file: site.file.clone(),
                object: obj.name.clone(),
                object_address: obj.address,
                line_start: site.address / line * line,
                indexed: site.indexed,
                offsets: vec![offset],
                ips: vec![site.ip],
                functions: site.functions.clone(),
                first,
                last,
            }),
        }
    }
    let mut out = Vec::new();
    for t in targets {
        let score = ((t.last - t.first) / total_last).clamp(0.0, 1.0);
        if score < SHARING_MIN_SCORE {
            continue;
        }
        let obj = object_of(&t.file, &t.object);
        // The fields that share a cache line: for a per-thread index, on any line of the
        // object; for fixed offsets, on the written line.
        let fields: Vec<String> = obj
            .map(|o| {
                let line_of =
                    |m: &scalprof_model::layout::Member| (o.address + m.offset) / line * line;
                let crowded = |l: u64| o.members.iter().filter(|m| line_of(m) == l).count() >= 2;
                o.members
                    .iter()
                    .filter(|m| {
                        let l = line_of(m);
                        crowded(l) && (t.indexed || l == t.line_start)
                    })
                    .map(|m| m.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        let written: Vec<String> = obj
            .map(|o| {
                t.offsets
                    .iter()
                    .filter_map(|off| {
                        o.members
                            .iter()
                            .find(|m| *off >= m.offset && *off < m.offset + m.size.max(1))
                    })
                    .map(|m| m.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        let false_sharing = (t.indexed || t.offsets.len() >= 2) && fields.len() >= 2;
        let file = Path::new(&t.file)
            .file_name()
            .map_or(t.file.clone(), |f| f.to_string_lossy().into_owned());
        let ips: Vec<String> = t.ips.iter().map(|ip| format!("{file}+{ip:#x}")).collect();
        let growth = format!(
            "the locked writes at {} grew from {:.2} to {:.2} ns/op between {v0} and {v1} threads ({:.0}% of the cost per op at {v1})",
            ips.join(", "),
            t.first,
            t.last,
            score * 100.0
        );
        let (kind, evidence, suggestion) = if false_sharing {
            (
                FindingKind::FalseSharing,
                format!(
                    "{growth}; they write {} {} of one {line}-byte line holding fields {}",
                    t.object,
                    if t.indexed { "at an offset indexed per thread" } else { "at different offsets" },
                    fields.join(", ")
                ),
                format!(
                    "give each written field of {} its own cache line: align/pad the hot members (_Alignas({line})), or move the written counters to the end of the struct and pad them, or make them per-thread/per-CPU",
                    t.object
                ),
            )
        } else if !t.indexed && t.offsets.len() == 1 {
            (
                FindingKind::TrueSharing,
                format!("{growth}; every thread writes the same address, {}{}", t.object, written.first().map(|f| format!(".{f}")).unwrap_or_default()),
                format!(
                    "stop every thread from writing {}: split it per thread or per CPU and combine when read (per-CPU counters), or batch the updates",
                    t.object
                ),
            )
        } else {
            continue;
        };
        out.push(Finding { score_interval: None,
            kind,
            scope: Some(Scope::User),
            subject: t.object.clone(),
            score,
            evidence,
            suggestion,
            details: FindingDetails::Sharing(SharingDetails {
                file: t.file.clone(),
                address: format!("{:#x}", t.object_address),
                cache_line: format!("{:#x}", t.line_start),
                fields,
                written_fields: written,
                indexed: t.indexed,
                instructions: ips,
                evidence_kind: "sampled locked instructions, operands resolved statically (no PMU memory samples)".into(),
                strength: if score >= 0.25 { "strong" } else { "moderate" }.into(),
                functions: t.functions.clone(),
            }),
            what_if: None,
        });
    }
    out
}
