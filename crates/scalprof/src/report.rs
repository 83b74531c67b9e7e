//! `scalprof report`: the self-contained HTML report of a stored run.

use std::path::Path;

use anyhow::Result;
use scalprof_model::{PointProfile, ThroughputSource, TopFunctions};
use scalprof_pipeline::facade::{changed_functions, top_functions};
use scalprof_pipeline::LoadedRun;
use scalprof_report::html::{DiffFlame, PointFunctions, FUNCTION_ROWS};
use scalprof_store::Store;

pub fn write_report(store: &Store, id: i64, out: &Path) -> Result<()> {
    write_report_of(&LoadedRun::load(store, id)?, out)
}

/// The HTML report of `run` (one loaded from a store, or the one this process recorded).
pub fn write_report_of(run: &LoadedRun, out: &Path) -> Result<()> {
    let profiles = &run.inputs.profiles;
    let flames: Vec<(u64, &PointProfile)> = profiles.iter().map(|(v, p)| (*v, p)).collect();
    // What changed per operation between the first and the last profiled point.
    let diff = match (profiles.first(), profiles.last()) {
        (Some((va, a)), Some((vb, b))) if va != vb => {
            let title = format!("{} {va} → {vb}, per operation", run.doc.sweep.parameter);
            // Profiles with no samples (a workload too short to sample) have no diff;
            // the report says so for each point rather than failing.
            what_changed((a, run.work(*va)), (b, run.work(*vb)), &title)
                .ok()
                .flatten()
        }
        _ => None,
    };
    // Each profiled point's top functions, with its work when the run counts operations.
    let counts_ops = run.doc.throughput.source == ThroughputSource::Ops;
    let tops: Vec<(u64, TopFunctions)> = profiles
        .iter()
        .map(|(v, p)| (*v, top_functions(p, FUNCTION_ROWS)))
        .collect();
    let functions: Vec<PointFunctions<'_>> = tops
        .iter()
        .map(|(v, top)| PointFunctions {
            value: *v,
            top,
            ops: counts_ops.then(|| run.work(*v)),
        })
        .collect();
    let html = scalprof_report::html::run_report(&run.doc, &flames, diff.as_ref(), &functions);
    crate::out::file(out, html)?;
    eprintln!("scalprof: wrote {}", out.display());
    Ok(())
}

/// What changed per operation from `a` to `b` (each a profile and the work its repeats
/// did): their differential flame graph, or that no function changed beyond sampling
/// noise; `None` when a side did no work to divide by.
fn what_changed(
    (a, wa): (&PointProfile, f64),
    (b, wb): (&PointProfile, f64),
    title: &str,
) -> std::io::Result<Option<DiffFlame>> {
    if wa <= 0.0 || wb <= 0.0 {
        return Ok(None);
    }
    if changed_functions(a, wa, b, wb).is_empty() {
        return Ok(Some(DiffFlame::Unchanged));
    }
    let svg = scalprof_report::flame::diff_svg(
        a,
        wa,
        b,
        wb,
        title,
        Some("red: grew per operation, blue: shrank".into()),
    )?;
    Ok(Some(DiffFlame::Changed(svg)))
}

/// What changed per operation at the last point two runs share.
pub fn compare_diff(
    a: &LoadedRun,
    b: &LoadedRun,
    c: &scalprof_model::compare::Comparison,
) -> Result<Option<DiffFlame>> {
    let Some(v) = c.points.last().map(|p| p.value) else {
        return Ok(None);
    };
    let (Some(pa), Some(pb)) = (a.profile(v), b.profile(v)) else {
        return Ok(None);
    };
    let title = format!("run {} → run {} at {v}, per operation", a.doc.id, b.doc.id);
    Ok(what_changed((pa, a.work(v)), (pb, b.work(v)), &title)?)
}
