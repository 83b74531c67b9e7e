//! The profile's own warnings: lost samples, truncated stacks, unresolved frames,
//! stripped binaries (with the package to install), and a CPython profile without the
//! Python functions' names.

use scalprof_model::profile::folded;
use scalprof_model::{PointProfile, RunHeader, SweepParameter, Unreadable, Warning, WarningKind};

/// Binaries whose code without a symbol (`[pigz]` frames) is in at least 10% of the
/// samples, with that share, most first.
pub fn unnamed_binaries(p: &PointProfile) -> Vec<(String, f64)> {
    let total: u64 = p.folded.iter().map(|s| s.samples).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut by: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for s in &p.folded {
        let mut seen: Vec<&str> = Vec::new();
        for f in folded::frames(&s.stack) {
            if let Some(b) = f.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
                if !matches!(b, "unknown" | "k" | "vdso" | "anon") && !seen.contains(&b) {
                    seen.push(b);
                }
            }
        }
        for b in seen {
            *by.entry(b).or_default() += s.samples;
        }
    }
    let mut out: Vec<(String, f64)> = by
        .into_iter()
        .map(|(b, n)| (b.to_string(), n as f64 / total as f64))
        .filter(|(_, share)| *share >= 0.10)
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Lost samples, truncated stacks and unresolved frames, when they are large enough to
/// mislead.
pub(super) fn profile_warnings(
    header: &RunHeader,
    profiles: &[(u64, PointProfile)],
    packages: &[(String, String)],
) -> Vec<Warning> {
    let mut out = Vec::new();
    for (v, p) in profiles {
        let problems = profile_problems(p);
        if !problems.is_empty() {
            out.push(Warning {
                kind: WarningKind::ProfileQuality,
                point: Some(*v),
                message: format!(
                    "{} {v}: profile: {}",
                    header.sweep.parameter,
                    problems.join("; ")
                ),
            });
        }
    }
    out.extend(stripped_binaries(profiles, packages));
    out
}

/// What is wrong with one point's profile, each said with its fix.
fn profile_problems(p: &PointProfile) -> Vec<String> {
    let st = &p.stats;
    let total = st.samples + st.lost_samples;
    let mut problems = Vec::new();
    if st.lost_samples > 0 {
        problems.push(format!(
            "{} of {total} samples lost (buffers full; lower --freq)",
            st.lost_samples
        ));
    }
    if st.samples > 0 && st.truncated_stacks * 10 > st.samples {
        problems.push(format!(
            "{:.0}% of user stacks could not be walked to their root (deep stacks or \
             large frames: copy more of each with --stack-size 32k)",
            100.0 * st.truncated_stacks as f64 / st.samples as f64
        ));
    }
    if unnamed_binaries(p).is_empty() && st.frames > 0 && st.unresolved_frames * 10 > st.frames {
        problems.push(format!(
            "{:.0}% of frames have no symbol (stripped binaries? install debug symbols)",
            100.0 * st.unresolved_frames as f64 / st.frames as f64
        ));
    }
    // A file whose DWARF alone was refused keeps its symbol-table names.
    let (dwarf, unread): (Vec<&Unreadable>, Vec<&Unreadable>) = st
        .unreadable_binaries
        .iter()
        .partition(|b| matches!(b, Unreadable::Dwarf { .. }));
    let list = |v: &[&Unreadable]| {
        v.iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !unread.is_empty() {
        problems.push(format!(
            "binaries that could not be read, whose frames have no names: {}",
            list(&unread)
        ));
    }
    if !dwarf.is_empty() {
        problems.push(format!(
            "debug info that could not be read (frames named by the symbol table, without \
             inlined functions): {}",
            list(&dwarf)
        ));
    }
    if !st.kernel_stacks {
        problems.push(
            "no kernel stacks (not permitted: run as root or lower perf_event_paranoid)".into(),
        );
    }
    problems
}

/// Stripped binaries: said once, from the last profile, with what to install.
fn stripped_binaries(
    profiles: &[(u64, PointProfile)],
    packages: &[(String, String)],
) -> Option<Warning> {
    let unnamed = profiles
        .last()
        .map(|(_, p)| unnamed_binaries(p))
        .unwrap_or_default();
    if unnamed.is_empty() {
        return None;
    }
    // The package that installed the binary, where the host knows it (`sort` is
    // coreutils'; libz.so is zlib1g's): its -dbgsym has the symbols.
    let example = unnamed
        .iter()
        .find_map(|(b, _)| packages.iter().find(|(file, _)| file == b))
        .map(|(_, package)| format!("e.g. `apt-get install {package}-dbgsym`; "))
        .unwrap_or_default();
    let list: Vec<String> = unnamed
        .iter()
        .map(|(b, share)| format!("{b} (in {:.0}% of samples)", share * 100.0))
        .collect();
    Some(Warning {
        kind: WarningKind::ProfileQuality,
        point: None,
        message: format!(
            "profile: code without names in {}: stripped binaries; install their debug \
             symbols, which scalprof reads from /usr/lib/debug (Debian: the -dbgsym \
             packages from the debian-debug archive, {example}`dpkg -S FILE` names a \
             library's package)",
            list.join(", "),
        ),
    })
}

/// A size sweep of a CPython program whose profiles name only the interpreter's functions
/// (`_PyEval_EvalFrameDefault`, `long_richcompare`): the complexity fits cannot name the
/// Python function that grows. CPython 3.12+ names them (scalprof asks it to); say so.
pub(super) fn python_without_names(
    header: &RunHeader,
    profiles: &[(u64, PointProfile)],
) -> Option<Warning> {
    if header.sweep.parameter != SweepParameter::Size {
        return None;
    }
    let (_, last) = profiles.last()?;
    let frames = || last.folded.iter().flat_map(|s| folded::frames(&s.stack));
    let interpreted = frames().any(|f| f == "_PyEval_EvalFrameDefault");
    if !interpreted || frames().any(crate::complexity::is_python_frame) {
        return None;
    }
    Some(Warning {
        kind: WarningKind::ProfileQuality,
        point: None,
        message:
            "profile: CPython's own functions only, not the Python functions that ran on them: \
                  CPython 3.12 or later names them when PYTHONPERFSUPPORT=1 (scalprof sets it in \
                  the profiled runs of a command whose program is python…; behind a shell or a \
                  script's #!, export it yourself, or run `python3 -X perf`)"
                .into(),
    })
}
