//! speedscope export: stored profiles in speedscope's JSON file format, which
//! speedscope.app opens (drop the file on the page) with its time-order, left-heavy and
//! sandwich views.
//!
//! The format (speedscope's `src/lib/file-format-spec.ts`, published as the JSON schema
//! at [`SCHEMA`]): frames shared by every profile, and profiles of type `sampled`, each a
//! list of stacks (frame indices, root first) with one weight per stack. Each exported
//! sweep point is one profile, so speedscope's profile picker switches between points. A
//! stored profile keeps merged folded stacks, not a timeline: each distinct stack is one
//! sample weighted by its CPU time, heaviest first. Frames are named as in the pprof
//! export: a kernel frame without its `_[k]` mark and with `[kernel.kallsyms]` as its
//! file; the process name stays the root frame, as in the flame graphs.

use std::collections::HashMap;

use scalprof_model::profile::folded;
use serde::Serialize;

use crate::pprof::ExportPoint;

/// The `$schema` every speedscope file names.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// A speedscope file.
#[derive(Debug, Serialize)]
pub struct File {
    #[serde(rename = "$schema")]
    pub schema: &'static str,
    pub shared: Shared,
    pub profiles: Vec<Profile>,
    /// The name speedscope shows for the file.
    pub name: String,
    #[serde(rename = "activeProfileIndex")]
    pub active_profile_index: usize,
    pub exporter: String,
}

/// What the profiles share: their frames.
#[derive(Debug, Default, Serialize)]
pub struct Shared {
    pub frames: Vec<Frame>,
}

#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct Frame {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// A `sampled` profile: stacks of frame indices, root first, and one weight each.
#[derive(Debug, Serialize)]
pub struct Profile {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    /// `nanoseconds` for cpu-clock profiles; `none` for cycles, or for sample counts when
    /// the profile has no weights.
    pub unit: &'static str,
    #[serde(rename = "startValue")]
    pub start_value: u64,
    #[serde(rename = "endValue")]
    pub end_value: u64,
    pub samples: Vec<Vec<usize>>,
    pub weights: Vec<u64>,
}

/// The points' profiles as one file named `name`; `parameter` names the points
/// (`threads 2`).
pub fn file(points: &[ExportPoint<'_>], parameter: &str, name: &str) -> File {
    let mut shared = Shared::default();
    let mut index: HashMap<(String, bool), usize> = HashMap::new();
    let mut frame = |text: &str| -> usize {
        let (name, kernel) = match folded::kernel(text) {
            Some(n) => (n, true),
            None => (text, false),
        };
        *index.entry((name.to_string(), kernel)).or_insert_with(|| {
            shared.frames.push(Frame {
                name: name.to_string(),
                file: kernel.then(|| "[kernel.kallsyms]".to_string()),
            });
            shared.frames.len() - 1
        })
    };
    let mut profiles = Vec::new();
    for p in points {
        let prof = p.profile;
        // Weights are the samples' periods (ns of CPU for cpu-clock); a profile without
        // them is weighed by its sample counts.
        let weighed = prof.folded.iter().any(|f| f.weight > 0);
        let mut stacks: Vec<(&str, u64)> = prof
            .folded
            .iter()
            .map(|f| (f.stack.as_str(), if weighed { f.weight } else { f.samples }))
            .filter(|(_, w)| *w > 0)
            .collect();
        stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let samples: Vec<Vec<usize>> = stacks
            .iter()
            .map(|(stack, _)| stack.split(';').map(&mut frame).collect())
            .collect();
        let weights: Vec<u64> = stacks.iter().map(|s| s.1).collect();
        // The clock events' periods are nanoseconds (an import keeps perf's modifiers:
        // `cpu-clock:ppp`); cycles and other counts have no unit speedscope knows.
        let clock = matches!(
            prof.event.split(':').next(),
            Some("cpu-clock" | "task-clock")
        );
        let unit = if weighed && clock {
            "nanoseconds"
        } else {
            "none"
        };
        profiles.push(Profile {
            kind: "sampled",
            name: format!(
                "{parameter} {} ({}, {} samples)",
                p.value, prof.event, prof.stats.samples
            ),
            unit,
            start_value: 0,
            end_value: weights.iter().sum(),
            samples,
            weights,
        });
    }
    File {
        schema: SCHEMA,
        shared,
        profiles,
        name: name.to_string(),
        active_profile_index: 0,
        exporter: format!("scalprof {}", env!("CARGO_PKG_VERSION")),
    }
}

/// The file as JSON.
pub fn to_json(file: &File) -> Vec<u8> {
    // Plain structs of strings and numbers: serializing them cannot fail.
    serde_json::to_vec(file).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::{FoldedStack, PointProfile};

    fn prof(event: &str, stacks: &[(&str, u64, u64)]) -> PointProfile {
        PointProfile {
            event: event.into(),
            folded: stacks
                .iter()
                .map(|(s, n, w)| FoldedStack {
                    stack: s.to_string(),
                    samples: *n,
                    weight: *w,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn points_are_profiles_over_shared_frames() {
        let one = prof(
            "cpu-clock",
            &[("prog;main;work", 3, 3000), ("prog;main", 1, 1000)],
        );
        let two = prof(
            "cpu-clock",
            &[
                ("prog;main;work", 2, 2000),
                ("prog;main;munmap_[k]", 5, 5000),
            ],
        );
        let points = [
            ExportPoint {
                value: 1,
                profile: &one,
            },
            ExportPoint {
                value: 2,
                profile: &two,
            },
        ];
        let f = file(&points, "threads", "scalprof run 3");
        let names: Vec<(&str, Option<&str>)> = f
            .shared
            .frames
            .iter()
            .map(|fr| (fr.name.as_str(), fr.file.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                ("prog", None),
                ("main", None),
                ("work", None),
                ("munmap", Some("[kernel.kallsyms]")),
            ]
        );
        assert_eq!(f.profiles.len(), 2);
        let p = &f.profiles[1];
        assert_eq!((p.kind, p.unit), ("sampled", "nanoseconds"));
        assert_eq!(p.name, "threads 2 (cpu-clock, 0 samples)");
        // Heaviest stack first, root first, one weight per stack, end = their sum.
        assert_eq!(p.samples, [vec![0, 1, 3], vec![0, 1, 2]]);
        assert_eq!(p.weights, [5000, 2000]);
        assert_eq!((p.start_value, p.end_value), (0, 7000));
        let json: serde_json::Value = serde_json::from_slice(&to_json(&f)).unwrap();
        assert_eq!(json["$schema"], SCHEMA);
        assert_eq!(json["profiles"][0]["startValue"], 0);
        assert_eq!(json["profiles"][0]["endValue"], 4000);
        assert_eq!(json["activeProfileIndex"], 0);
        assert!(json["shared"]["frames"][0].get("file").is_none());
    }

    #[test]
    fn an_imported_clock_profile_is_in_nanoseconds() {
        let p = prof("cpu-clock:ppp", &[("prog;main", 7, 7000)]);
        let points = [ExportPoint {
            value: 1,
            profile: &p,
        }];
        assert_eq!(
            file(&points, "threads", "x").profiles[0].unit,
            "nanoseconds"
        );
    }

    #[test]
    fn a_profile_without_weights_is_weighed_by_its_samples() {
        let p = prof("cycles", &[("prog;main", 7, 0)]);
        let f = file(
            &[ExportPoint {
                value: 1,
                profile: &p,
            }],
            "size",
            "x",
        );
        assert_eq!(f.profiles[0].weights, [7]);
        assert_eq!(f.profiles[0].unit, "none");
    }
}
