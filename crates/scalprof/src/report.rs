//! `scalprof report`: the self-contained HTML report of a stored run.

use std::path::Path;

use anyhow::Result;
use scalprof_pipeline::LoadedRun;
use scalprof_store::Store;

pub fn write_report(store: &Store, id: i64, out: &Path) -> Result<()> {
    let run = LoadedRun::load(store, id)?;
    let profiles = &run.inputs.profiles;
    let flames: Vec<(u64, &scalprof_model::PointProfile)> =
        profiles.iter().map(|(v, p)| (*v, p)).collect();
    // What changed per operation between the first and the last profiled point.
    let diff = match (profiles.first(), profiles.last()) {
        (Some((va, a)), Some((vb, b))) if va != vb => {
            let (wa, wb) = (run.work(*va), run.work(*vb));
            if wa > 0.0 && wb > 0.0 {
                // Profiles with no samples (a workload too short to sample) have no diff;
                // the report says so for each point rather than failing.
                scalprof_report::flame::diff_svg(
                    a,
                    wa,
                    b,
                    wb,
                    &format!("{} {va} → {vb}, per operation", run.doc.sweep.parameter),
                    Some("red: grew per operation, blue: shrank".into()),
                )
                .ok()
            } else {
                None
            }
        }
        _ => None,
    };
    let html = scalprof_report::html::run_report(&run.doc, &flames, diff.as_deref());
    crate::out::file(out, html)?;
    eprintln!("scalprof: wrote {}", out.display());
    Ok(())
}

/// The per-operation differential flame graph of the last point two runs share.
pub fn compare_diff(
    a: &LoadedRun,
    b: &LoadedRun,
    c: &scalprof_model::compare::Comparison,
) -> Result<Option<Vec<u8>>> {
    let Some(v) = c.points.last().map(|p| p.value) else {
        return Ok(None);
    };
    fn profile(run: &LoadedRun, v: u64) -> Option<(&scalprof_model::PointProfile, f64)> {
        let work = run.work(v);
        run.profile(v).filter(|_| work > 0.0).map(|p| (p, work))
    }
    let (Some((pa, wa)), Some((pb, wb))) = (profile(a, v), profile(b, v)) else {
        return Ok(None);
    };
    Ok(Some(scalprof_report::flame::diff_svg(
        pa,
        wa,
        pb,
        wb,
        &format!("run {} → run {} at {v}, per operation", a.doc.id, b.doc.id),
        Some("red: grew per operation, blue: shrank".into()),
    )?))
}
