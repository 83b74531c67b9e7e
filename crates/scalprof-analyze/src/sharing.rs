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

use scalprof_model::layout::{DataObject, Member, SharingInputs, SharingSite};
use scalprof_model::{Finding, PointProfile};
use scalprof_model::{FindingDetails, SharingDetails};

/// A sharing finding needs its instructions' growth to explain this share of the cost.
pub const SHARING_MIN_SCORE: f64 = 0.05;

/// One written object: the sites whose locked writes land in it, merged, with their cost
/// per operation (ns) at the first and the last point.
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
    let mut out = Vec::new();
    for t in targets(inputs, (p0, w0), (p1, w1)) {
        let score = ((t.last - t.first) / total_last).clamp(0.0, 1.0);
        if score < SHARING_MIN_SCORE {
            continue;
        }
        let obj = object_of(inputs, &t.file, &t.object);
        out.extend(t.finding(obj, score, (v0, v1), line));
    }
    out
}

/// The layout of the object `name` in `file`, when its DWARF was read.
fn object_of<'a>(inputs: &'a SharingInputs, file: &str, name: &str) -> Option<&'a DataObject> {
    inputs
        .objects
        .iter()
        .find(|o| o.file == file && o.object.name == name)
        .map(|o| &o.object)
}

/// The sites' writes gathered by the object they write, in the order first seen, costed
/// at the first and the last point (`(profile, work)` each).
fn targets(
    inputs: &SharingInputs,
    (p0, w0): (&PointProfile, f64),
    (p1, w1): (&PointProfile, f64),
) -> Vec<Target> {
    let line = inputs.line.max(1);
    let weight_at = |p: &PointProfile, file: &str, ip: u64| -> f64 {
        p.hot
            .iter()
            .filter(|h| h.file == file && h.address == ip)
            .map(|h| h.weight as f64)
            .sum()
    };
    let mut targets: Vec<Target> = Vec::new();
    for site in &inputs.sites {
        let Some(obj) = object_of(inputs, &site.file, &site.object) else {
            continue;
        };
        if scalprof_model::vocabulary::is_lock_word_write(&site.functions) {
            continue;
        }
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
            Some(t) => t.add(site, offset, first, last),
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
    targets
}

impl Target {
    /// Adds another site writing the same object, at `offset` into it.
    fn add(&mut self, site: &SharingSite, offset: u64, first: f64, last: f64) {
        self.indexed |= site.indexed;
        if !self.offsets.contains(&offset) {
            self.offsets.push(offset);
        }
        if !self.ips.contains(&site.ip) {
            self.ips.push(site.ip);
        }
        for f in &site.functions {
            if !self.functions.contains(f) {
                self.functions.push(f.clone());
            }
        }
        self.first += first;
        self.last += last;
    }

    /// The fields that share a cache line: for a per-thread index, on any line of the
    /// object; for fixed offsets, on the written line.
    fn crowded_fields(&self, o: &DataObject, line: u64) -> Vec<String> {
        let line_of = |m: &Member| (o.address + m.offset) / line * line;
        let crowded = |l: u64| o.members.iter().filter(|m| line_of(m) == l).count() >= 2;
        o.members
            .iter()
            .filter(|m| {
                let l = line_of(m);
                crowded(l) && (self.indexed || l == self.line_start)
            })
            .map(|m| m.name.clone())
            .collect()
    }

    /// The fields the locked writes land in.
    fn written_fields(&self, o: &DataObject) -> Vec<String> {
        self.offsets
            .iter()
            .filter_map(|off| {
                o.members
                    .iter()
                    .find(|m| *off >= m.offset && *off < m.offset + m.size.max(1))
            })
            .map(|m| m.name.clone())
            .collect()
    }

    /// The finding for this object (`obj`: its layout), scored `score` between the sweep's
    /// first and last thread counts `(v0, v1)`: false sharing when the writes land in
    /// several fields of a crowded line, true sharing when every thread writes one address.
    fn finding(
        self,
        obj: Option<&DataObject>,
        score: f64,
        (v0, v1): (u64, u64),
        line: u64,
    ) -> Option<Finding> {
        let fields = obj
            .map(|o| self.crowded_fields(o, line))
            .unwrap_or_default();
        let written = obj.map(|o| self.written_fields(o)).unwrap_or_default();
        let file = Path::new(&self.file)
            .file_name()
            .map_or(self.file.clone(), |f| f.to_string_lossy().into_owned());
        let ips: Vec<String> = self
            .ips
            .iter()
            .map(|ip| format!("{file}+{ip:#x}"))
            .collect();
        let growth = format!(
            "the locked writes at {} grew from {:.2} to {:.2} ns/op between {v0} and {v1} threads ({:.0}% of the cost per op at {v1})",
            ips.join(", "),
            self.first,
            self.last,
            score * 100.0
        );
        // The lines the object's fields lie on: an index per thread into fewer lines than
        // threads puts two threads on one line, however it is padded.
        let lines = obj.map_or(0, |o| {
            let mut l: Vec<u64> = o
                .members
                .iter()
                .map(|m| (o.address + m.offset) / line)
                .collect();
            l.sort_unstable();
            l.dedup();
            l.len() as u64
        });
        let (kind, evidence, suggestion) =
            self.diagnosis(&growth, &fields, &written, line, (lines, v1))?;
        Some(Finding {
            score_interval: None,
            kind,
            scope: Some(Scope::User),
            subject: self.object.clone(),
            score,
            evidence,
            suggestion,
            details: FindingDetails::Sharing(SharingDetails {
                file: self.file,
                address: format!("{:#x}", self.object_address),
                cache_line: format!("{:#x}", self.line_start),
                fields,
                written_fields: written,
                indexed: self.indexed,
                instructions: ips,
                evidence_kind: "sampled locked instructions, operands resolved statically (no PMU memory samples)".into(),
                strength: if score >= 0.25 { "strong" } else { "moderate" }.into(),
                functions: self.functions,
            }),
            what_if: None,
            experiment: None,
        })
    }

    /// False or true sharing, with the evidence after `growth` and the suggestion; none
    /// when the writes are neither (several fixed offsets on an uncrowded line).
    fn diagnosis(
        &self,
        growth: &str,
        fields: &[String],
        written: &[String],
        line: u64,
        (lines, threads): (u64, u64),
    ) -> Option<(FindingKind, String, String)> {
        let false_sharing = (self.indexed || self.offsets.len() >= 2) && fields.len() >= 2;
        if false_sharing {
            Some((
                FindingKind::FalseSharing,
                format!(
                    "{growth}; they write {} {} of one {line}-byte line holding fields {}",
                    self.object,
                    if self.indexed { "at an offset indexed per thread" } else { "at different offsets" },
                    fields.join(", ")
                ),
                format!(
                    "give each written field of {} its own cache line: align/pad the hot members (_Alignas({line})), or move the written counters to the end of the struct and pad them, or make them per-thread/per-CPU",
                    self.object
                ),
            ))
        } else if !self.indexed && self.offsets.len() == 1 {
            Some((
                FindingKind::TrueSharing,
                format!("{growth}; every thread writes the same address, {}{}", self.object, written.first().map(|f| format!(".{f}")).unwrap_or_default()),
                format!(
                    "stop every thread from writing {}: split it per thread or per CPU and combine when read (per-CPU counters), or batch the updates",
                    self.object
                ),
            ))
        } else if self.indexed && fields.is_empty() && lines > 0 && lines < threads {
            Some((
                FindingKind::TrueSharing,
                format!(
                    "{growth}; they write {} at an offset indexed per thread, and its fields lie on {lines} cache lines for {threads} threads: threads share a field's line",
                    self.object
                ),
                format!(
                    "give every thread its own slot of {}: as many padded fields as threads (or per-thread/per-CPU counters), not an index that wraps",
                    self.object
                ),
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::layout::FileObject;
    use scalprof_model::profile::{HotInstruction, ProfileStats, SerialStats};

    /// counters_padded: 8 counters, each on its own 64-byte line, bumped at
    /// `vm_cnt[id % 8]` by a locked add at 0x1200 (sampled at 0x1204).
    fn padded() -> SharingInputs {
        let members = (0..8)
            .map(|i| Member {
                name: format!("c{i}"),
                offset: i * 64,
                size: 8,
                type_name: "struct padded_counter".into(),
            })
            .collect();
        SharingInputs {
            line: 64,
            sites: vec![SharingSite {
                file: "/opt/corpus/counters_padded".into(),
                sampled: 0x1204,
                ip: 0x1200,
                address: 0x4000,
                indexed: true,
                object: "vm_cnt".into(),
                functions: vec!["worker".into()],
            }],
            objects: vec![FileObject {
                file: "/opt/corpus/counters_padded".into(),
                object: DataObject {
                    name: "vm_cnt".into(),
                    address: 0x4000,
                    size: 512,
                    type_name: Some("struct vmmeter_padded".into()),
                    members,
                    atomic_target: true,
                    lock_type: false,
                },
            }],
        }
    }

    /// A profile whose samples on the locked add weigh `weight` of `total`.
    fn profile(weight: u64, total: u64) -> PointProfile {
        PointProfile {
            event: "cpu-clock".into(),
            frequency: 999,
            stats: ProfileStats::default(),
            serial: SerialStats::default(),
            repeats: 1,
            hot: vec![HotInstruction {
                file: "/opt/corpus/counters_padded".into(),
                address: 0x1204,
                samples: 1,
                weight,
            }],
            folded: vec![scalprof_model::profile::FoldedStack {
                stack: "counters_padded;worker".into(),
                samples: 1,
                weight: total,
            }],
        }
    }

    #[test]
    fn an_index_that_wraps_over_padded_fields_is_sharing_past_as_many_threads() {
        let (p1, p16) = (profile(7, 10), profile(36, 40));
        let f = sharing_findings(&[(1, 1.0, &p1), (16, 1.0, &p16)], &padded());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].kind, f[0].subject.as_str()),
            (FindingKind::TrueSharing, "vm_cnt")
        );
        assert!(
            f[0].evidence.contains("8 cache lines for 16 threads"),
            "{}",
            f[0].evidence
        );
        // As many lines as threads: padding works, and whatever grew is not sharing.
        let f = sharing_findings(&[(1, 1.0, &p1), (8, 1.0, &p16)], &padded());
        assert!(f.is_empty(), "{f:?}");
    }
}
