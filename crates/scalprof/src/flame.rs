//! `scalprof flame`: flame graphs of stored profiles.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use scalprof_model::PointProfile;
use scalprof_pipeline::facade::changed_functions;
use scalprof_pipeline::LoadedRun;
use scalprof_store::Store;

use crate::cli::FlameArgs;

/// A resolved profile: its run, point, merged stacks and the work it did.
struct Selected {
    run: String,
    point: u64,
    profile: PointProfile,
    work: f64,
}

fn select(store: &Store, run: &str, point: Option<u64>) -> Result<Selected> {
    let id = store.resolve(run)?;
    let loaded = LoadedRun::load(store, id)?;
    let profiles = &loaded.inputs.profiles;
    if profiles.is_empty() {
        bail!("run {id} has no profiles (recorded with --no-profile, or every repeat failed)");
    }
    let value = match point {
        Some(v) => v,
        None => profiles.iter().map(|p| p.0).max().expect("non-empty"),
    };
    let Some(profile) = loaded.profile(value) else {
        let have: Vec<String> = loaded
            .doc
            .points
            .iter()
            .map(|p| p.value.to_string())
            .collect();
        bail!(
            "run {id} has no profile at point {value} (points: {})",
            have.join(", ")
        );
    };
    Ok(Selected {
        run: id.to_string(),
        point: value,
        profile: profile.clone(),
        work: loaded.work(value),
    })
}

/// `RUN`, `RUN@POINT` or `@POINT` (a point of `default_run`).
fn parse_spec<'a>(spec: &'a str, default_run: &'a str) -> Result<(&'a str, Option<u64>)> {
    match spec.split_once('@') {
        Some((run, point)) => {
            let p = point
                .parse::<u64>()
                .with_context(|| format!("{spec:?}: the point after @ must be a number"))?;
            Ok((if run.is_empty() { default_run } else { run }, Some(p)))
        }
        None => Ok((spec, None)),
    }
}

pub fn flame(store: &Store, args: FlameArgs) -> Result<()> {
    if let Some(diff) = &args.diff {
        let (ra, pa) = parse_spec(&diff[0], &args.run)?;
        let (rb, pb) = parse_spec(&diff[1], &args.run)?;
        let a = select(store, ra, pa)?;
        let b = select(store, rb, pb)?;
        if a.work <= 0.0 || b.work <= 0.0 {
            bail!("cannot normalize per operation: a profile has no successful work recorded");
        }
        if args.folded {
            // "stack before after", per operation: what inferno-diff-folded and
            // flamegraph.pl's difference mode read.
            let mut text = String::new();
            for line in scalprof_report::flame::diff_lines(&a.profile, a.work, &b.profile, b.work) {
                text.push_str(&line);
                text.push('\n');
            }
            return crate::export::write_stdout(text.as_bytes());
        }
        let title = format!(
            "scalprof: run {} @{} → run {} @{} (cost per operation)",
            a.run, a.point, b.run, b.point
        );
        let svg = scalprof_report::flame::diff_svg(
            &a.profile,
            a.work,
            &b.profile,
            b.work,
            &title,
            Some("red: grew per operation, blue: shrank".into()),
        )?;
        let out = args.output.unwrap_or_else(|| {
            PathBuf::from(format!(
                "scalprof-{}@{}-vs-{}@{}-diff.svg",
                a.run, a.point, b.run, b.point
            ))
        });
        crate::out::file(&out, svg)?;
        eprintln!("scalprof: wrote {}", out.display());
        if changed_functions(&a.profile, a.work, &b.profile, b.work).is_empty() {
            eprintln!("scalprof: no function changed per operation beyond sampling noise");
        }
        return Ok(());
    }
    let s = select(store, &args.run, args.point)?;
    if args.folded {
        let mut text = String::new();
        for line in scalprof_report::flame::folded_lines(&s.profile) {
            text.push_str(&line);
            text.push('\n');
        }
        return crate::export::write_stdout(text.as_bytes());
    }
    let st = &s.profile.stats;
    let title = format!(
        "scalprof: run {}, {} threads ({})",
        s.run, s.point, s.profile.event
    );
    let subtitle = format!(
        "{} samples over {} repeats; {} lost, {} truncated stacks, {} unresolved frames",
        st.samples, s.profile.repeats, st.lost_samples, st.truncated_stacks, st.unresolved_frames
    );
    let svg = scalprof_report::flame::svg(&s.profile, &title, Some(subtitle))?;
    let out = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("scalprof-{}@{}.svg", s.run, s.point)));
    crate::out::file(&out, svg)?;
    eprintln!("scalprof: wrote {}", out.display());
    Ok(())
}
