//! `scalprof export`: stored profiles as pprof, speedscope's JSON or folded stacks, for
//! other tools.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use scalprof_pipeline::LoadedRun;
use scalprof_report::pprof::{self, ExportMeta, ExportPoint};
use scalprof_store::Store;

use crate::cli::{ExportArgs, ExportFormat};

/// `scalprof export`: the chosen points' profiles, encoded, to a file or standard output.
pub fn export(store: &Store, args: ExportArgs) -> Result<()> {
    let id = store.resolve(&args.run)?;
    let loaded = LoadedRun::load(store, id)?;
    let (values, all) = chosen_points(&loaded, id, args.point.as_deref())?;
    let parameter = loaded.doc.sweep.parameter.as_str();
    let which = if all {
        "all".to_string()
    } else {
        values[0].to_string()
    };
    let (bytes, default_name) = match args.format {
        ExportFormat::Folded => {
            if all {
                bail!(
                    "folded stacks carry no labels, so points cannot be told apart: \
                     export one point (--point N), or use --format pprof or speedscope for all of them"
                );
            }
            let profile = loaded.profile(values[0]).expect("profiled point");
            let mut text = String::new();
            for line in scalprof_report::flame::folded_lines(profile) {
                text.push_str(&line);
                text.push('\n');
            }
            (text.into_bytes(), format!("scalprof-{id}@{which}.folded"))
        }
        ExportFormat::Pprof => (
            pprof_bytes(&loaded, id, &values)?,
            format!("scalprof-{id}@{which}.pb.gz"),
        ),
        ExportFormat::Speedscope => {
            let points = export_points(&loaded, &values);
            let name = format!("scalprof run {id} ({})", loaded.doc.label);
            let file = scalprof_report::speedscope::file(&points, parameter, &name);
            (
                scalprof_report::speedscope::to_json(&file),
                format!("scalprof-{id}@{which}.speedscope.json"),
            )
        }
    };
    let out = args.output.unwrap_or_else(|| PathBuf::from(default_name));
    if out.as_os_str() == "-" {
        if args.format == ExportFormat::Pprof && std::io::stdout().is_terminal() {
            bail!("pprof is a binary format: write it to a file (-o FILE) or a pipe");
        }
        return write_stdout(&bytes);
    }
    crate::out::file(&out, &bytes)?;
    eprintln!(
        "scalprof: wrote {} ({} of run {id}, {parameter} {which})",
        out.display(),
        match args.format {
            ExportFormat::Pprof => "pprof profile",
            ExportFormat::Folded => "folded stacks",
            ExportFormat::Speedscope => "speedscope profile",
        }
    );
    Ok(())
}

/// The points `--point` names (a value, `all`, or by default the largest profiled one),
/// each checked to have a profile; and whether it was `all`.
fn chosen_points(loaded: &LoadedRun, id: i64, point: Option<&str>) -> Result<(Vec<u64>, bool)> {
    let profiled: Vec<u64> = loaded.inputs.profiles.iter().map(|p| p.0).collect();
    if profiled.is_empty() {
        bail!("run {id} has no profiles (recorded with --no-profile, or every repeat failed)");
    }
    let values: Vec<u64> = match point {
        Some("all") => profiled.clone(),
        Some(v) => {
            let v: u64 = v
                .parse()
                .with_context(|| format!("--point {v:?}: expected a point value or `all`"))?;
            if !profiled.contains(&v) {
                let have: Vec<String> = profiled.iter().map(|p| p.to_string()).collect();
                bail!(
                    "run {id} has no profile at point {v} (profiled points: {})",
                    have.join(", ")
                );
            }
            vec![v]
        }
        None => vec![*profiled.iter().max().expect("non-empty")],
    };
    Ok((values, point == Some("all")))
}

/// The chosen points' profiles ([`chosen_points`] checked that each has one).
fn export_points<'a>(loaded: &'a LoadedRun, values: &[u64]) -> Vec<ExportPoint<'a>> {
    values
        .iter()
        .filter_map(|&value| {
            loaded
                .profile(value)
                .map(|profile| ExportPoint { value, profile })
        })
        .collect()
}

/// The points' profiles as one gzipped pprof, with the run and each point's sampling
/// said in its comments.
fn pprof_bytes(loaded: &LoadedRun, id: i64, values: &[u64]) -> Result<Vec<u8>> {
    let doc = &loaded.doc;
    let parameter = doc.sweep.parameter.as_str();
    let points = export_points(loaded, values);
    let mut comments = vec![format!(
        "scalprof run {id} ({}): {}",
        doc.label,
        doc.command.join(" ")
    )];
    for p in &points {
        let st = &p.profile.stats;
        comments.push(format!(
            "{parameter} {}: {} @ {} Hz, {} samples over {} traced repeats; \
             {} lost, {} truncated stacks, {} unresolved frames",
            p.value,
            p.profile.event,
            p.profile.frequency,
            st.samples,
            p.profile.repeats,
            st.lost_samples,
            st.truncated_stacks,
            st.unresolved_frames
        ));
    }
    let time_nanos = humantime::parse_rfc3339_weak(&doc.created)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(0));
    let meta = ExportMeta {
        parameter: parameter.to_string(),
        comments,
        time_nanos,
        main_binary: doc.command.first().cloned().unwrap_or_default(),
    };
    Ok(pprof::encode_gz(&pprof::profile(&points, &meta))?)
}

/// Writes an export to standard output: as it is to a pipe, terminal-safe to a terminal.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    if std::io::stdout().is_terminal() {
        // Text for a terminal (pprof is refused there): no raw ESC or BEL from a symbol.
        crate::out::text(&String::from_utf8_lossy(bytes))?;
        return Ok(crate::out::flush()?);
    }
    Ok(crate::out::stdout_bytes(bytes)?)
}
