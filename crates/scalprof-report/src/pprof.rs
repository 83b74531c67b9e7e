//! pprof export: stored profiles as gzipped `profile.proto` (perftools.profiles), the format
//! `go tool pprof`, Pyroscope, Parca and Grafana read.
//!
//! The messages are declared here with prost's derive (field numbers from profile.proto), so
//! no protobuf compiler or build script is needed. A stored profile keeps folded stacks by
//! function name, not addresses: each distinct frame name becomes one function and one
//! location. Kernel frames (`_[k]` in the folded form) keep their name without the suffix
//! and have `[kernel.kallsyms]` as their file. The process name, the folded form's root
//! frame, becomes the sample's `process` label, and the sweep point a numeric label named
//! after the sweep parameter, so `go tool pprof -tagfocus threads=2` (or `-tagroot process`)
//! works on an export of several points.

use scalprof_model::profile::folded;
use std::collections::HashMap;
use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;
use scalprof_model::{FoldedStack, PointProfile};

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// One sweep point's profile to export.
pub struct ExportPoint<'a> {
    pub value: u64,
    pub profile: &'a PointProfile,
}

/// What the export says about where the profiles came from.
pub struct ExportMeta {
    /// The sweep parameter (`threads`, `size`): the numeric label's key.
    pub parameter: String,
    /// Lines shown by `go tool pprof -comments`.
    pub comments: Vec<String>,
    /// When the run was recorded (ns since the epoch), 0 if unknown.
    pub time_nanos: i64,
    /// The swept command's program: the profile's first mapping, which pprof shows as the
    /// main binary.
    pub main_binary: String,
}

/// The file name of kernel frames, as perf names the kernel's mapping.
pub const KERNEL_FILE: &str = "[kernel.kallsyms]";

/// The kernel's mapping id (the main binary's is 1).
const KERNEL_MAPPING: u64 = 2;

/// Builds the profile message from stored profiles (see the module documentation).
pub fn profile(points: &[ExportPoint<'_>], meta: &ExportMeta) -> Profile {
    let mut b = Builder::default();
    b.string(""); // index 0 is the empty string, by the format's rule
    let (mut out, keys) = skeleton(&mut b, points, meta);
    for p in points {
        for stack in &p.profile.folded {
            let sample = b.sample(stack, p.value, &keys);
            out.sample.push(sample);
        }
    }
    out.location = b.locations;
    out.function = b.functions;
    out.string_table = b.strings;
    out
}

/// The string ids every sample refers to: its labels' keys and the kernel's file name.
struct Keys {
    process: i64,
    point: i64,
    kernel_file: i64,
}

/// The profile without its samples (value types, period, mappings, time, comments) and
/// the keys the samples will use. Strings are numbered as they are first met, so the
/// order of the calls here is the order of the string table.
fn skeleton(b: &mut Builder, points: &[ExportPoint<'_>], meta: &ExportMeta) -> (Profile, Keys) {
    let (samples_vt, weight_vt, period) = value_types(b, points);
    let keys = Keys {
        process: b.string("process"),
        point: b.string(&meta.parameter),
        kernel_file: b.string(KERNEL_FILE),
    };
    // Frames carry names already: `has_functions` tells readers not to symbolize again.
    // User frames come from many files and have no mapping; kernel frames have the kernel's.
    let mapping = |id: u64, filename: i64| Mapping {
        id,
        filename,
        has_functions: true,
        ..Mapping::default()
    };
    let main_binary = b.string(&meta.main_binary);
    let mut out = Profile {
        sample_type: vec![samples_vt, weight_vt.clone()],
        period_type: Some(weight_vt.clone()),
        period,
        default_sample_type: weight_vt.r#type,
        mapping: vec![
            mapping(1, main_binary),
            mapping(KERNEL_MAPPING, keys.kernel_file),
        ],
        time_nanos: meta.time_nanos,
        ..Profile::default()
    };
    for c in &meta.comments {
        let id = b.string(c);
        out.comment.push(id);
    }
    (out, keys)
}

/// The samples' two values (a count and a weight) and the sampling period. cpu-clock
/// weights are nanoseconds on a CPU, with a period of a second over the frequency; a
/// hardware event's are its count, with no period.
fn value_types(b: &mut Builder, points: &[ExportPoint<'_>]) -> (ValueType, ValueType, i64) {
    let event = points
        .first()
        .map(|p| p.profile.event.clone())
        .unwrap_or_else(|| "cpu-clock".into());
    let frequency = points.first().map(|p| p.profile.frequency).unwrap_or(0);
    let (weight_type, weight_unit) = if event == "cpu-clock" {
        ("cpu", "nanoseconds")
    } else {
        (event.as_str(), "count")
    };
    let samples_vt = ValueType {
        r#type: b.string("samples"),
        unit: b.string("count"),
    };
    let weight_vt = ValueType {
        r#type: b.string(weight_type),
        unit: b.string(weight_unit),
    };
    let period = if event == "cpu-clock" && frequency > 0 {
        (1_000_000_000 / frequency) as i64
    } else {
        0
    };
    (samples_vt, weight_vt, period)
}

/// The gzipped encoding of [`profile`]: the bytes of a `.pb.gz` file.
pub fn encode_gz(profile: &Profile) -> std::io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()
}

#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    locations: Vec<Location>,
    location_ids: HashMap<String, u64>,
    functions: Vec<Function>,
}

impl Builder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    /// One folded stack of sweep point `value` as a sample: its locations leaf first, its
    /// count and weight, its process and point labels.
    fn sample(&mut self, stack: &FoldedStack, value: u64, keys: &Keys) -> Sample {
        let process = folded::process(&stack.stack);
        let mut location_id: Vec<u64> = folded::frames(&stack.stack)
            .filter(|f| !f.is_empty())
            .map(|f| self.location(f, keys.kernel_file))
            .collect();
        location_id.reverse();
        let process = self.string(process);
        Sample {
            location_id,
            value: vec![
                i64::try_from(stack.samples).unwrap_or(i64::MAX),
                i64::try_from(stack.weight).unwrap_or(i64::MAX),
            ],
            label: vec![
                Label {
                    key: keys.process,
                    str: process,
                    ..Label::default()
                },
                Label {
                    key: keys.point,
                    num: i64::try_from(value).unwrap_or(i64::MAX),
                    ..Label::default()
                },
            ],
        }
    }

    /// The location of one folded frame (one function, one location per distinct name).
    fn location(&mut self, frame: &str, kernel_file: i64) -> u64 {
        if let Some(&id) = self.location_ids.get(frame) {
            return id;
        }
        let (name, file, mapping_id) = match folded::kernel(frame) {
            Some(n) => (n, kernel_file, KERNEL_MAPPING),
            None => (frame, 0, 0),
        };
        let name = self.string(name);
        let id = self.locations.len() as u64 + 1;
        self.functions.push(Function {
            id,
            name,
            system_name: name,
            filename: file,
            start_line: 0,
        });
        self.locations.push(Location {
            id,
            mapping_id,
            line: vec![Line {
                function_id: id,
                line: 0,
            }],
            ..Location::default()
        });
        self.location_ids.insert(frame.to_string(), id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::FoldedStack;
    use std::io::Read;

    fn point(stacks: &[(&str, u64, u64)]) -> PointProfile {
        PointProfile {
            event: "cpu-clock".into(),
            frequency: 1000,
            folded: stacks
                .iter()
                .map(|&(s, samples, weight)| FoldedStack {
                    stack: s.into(),
                    samples,
                    weight,
                })
                .collect(),
            ..PointProfile::default()
        }
    }

    #[test]
    fn stacks_round_trip_through_the_gzipped_message_leaf_first_with_labels() {
        let one = point(&[("app;main;work", 3, 3_000_000)]);
        let two = point(&[
            ("app;main;work;futex_wait_[k]", 5, 5_000_000),
            ("app;main;work", 2, 2_000_000),
        ]);
        let meta = ExportMeta {
            parameter: "threads".into(),
            comments: vec!["scalprof run 1".into()],
            time_nanos: 7,
            main_binary: "app".into(),
        };
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
        let gz = encode_gz(&profile(&points, &meta)).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .unwrap();
        let p = Profile::decode(&raw[..]).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|v| (s(v.r#type), s(v.unit)))
            .collect();
        assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
        assert_eq!(p.period, 1_000_000);
        assert_eq!(s(p.mapping[0].filename), "app");
        assert_eq!(s(p.mapping[1].filename), KERNEL_FILE);
        assert!(p.location.iter().all(|l| (l.mapping_id == KERNEL_MAPPING)
            == (s(p.function[(l.line[0].function_id - 1) as usize].filename) == KERNEL_FILE)));
        assert_eq!(s(p.comment[0]), "scalprof run 1");
        assert_eq!(p.sample.len(), 3);
        let function_of = |loc: u64| {
            let l = &p.location[(loc - 1) as usize];
            assert_eq!(l.id, loc);
            let f = &p.function[(l.line[0].function_id - 1) as usize];
            (s(f.name), s(f.filename))
        };
        let kernel = &p.sample[1];
        let frames: Vec<(&str, &str)> =
            kernel.location_id.iter().map(|&l| function_of(l)).collect();
        assert_eq!(
            frames,
            [("futex_wait", KERNEL_FILE), ("work", ""), ("main", ""),]
        );
        assert_eq!(kernel.value, [5, 5_000_000]);
        let labels: Vec<(&str, &str, i64)> = kernel
            .label
            .iter()
            .map(|l| (s(l.key), s(l.str), l.num))
            .collect();
        assert_eq!(labels, [("process", "app", 0), ("threads", "", 2)]);
        // Same frame name, same location: `work` is shared by all three samples.
        assert_eq!(p.location.len(), 3);
        let total: i64 = p.sample.iter().map(|x| x.value[1]).sum();
        assert_eq!(total, 10_000_000);
    }
}
