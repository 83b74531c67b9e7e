//! `scalprof report`: the self-contained HTML report of a stored run.

use std::path::Path;

use anyhow::{Context, Result};
use scalprof_store::Store;

use crate::run::{load_document, merged_profiles};

pub fn write_report(store: &Store, id: i64, out: &Path) -> Result<()> {
    let doc = load_document(store, id)?;
    let profiles = merged_profiles(store, id)?;
    let flames: Vec<(u64, &scalprof_model::PointProfile)> =
        profiles.iter().map(|(v, p)| (*v, p)).collect();
    // What changed per operation between the first and the last profiled point.
    let diff = match (profiles.first(), profiles.last()) {
        (Some((va, a)), Some((vb, b))) if va != vb => {
            let work = |v: u64| {
                doc.points
                    .iter()
                    .find(|p| p.value == v)
                    .map(|p| scalprof_analyze::summary::point_work(p, doc.throughput.source))
                    .unwrap_or(0.0)
            };
            let (wa, wb) = (work(*va), work(*vb));
            if wa > 0.0 && wb > 0.0 {
                Some(scalprof_report::flame::diff_svg(
                    a,
                    wa,
                    b,
                    wb,
                    &format!("{} {va} → {vb}, per operation", doc.sweep.parameter),
                    Some("red: grew per operation, blue: shrank".into()),
                )?)
            } else {
                None
            }
        }
        _ => None,
    };
    let html = scalprof_report::html::run_report(&doc, &flames, diff.as_deref());
    std::fs::write(out, html).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("scalprof: wrote {}", out.display());
    Ok(())
}

/// The per-operation differential flame graph of the last point two runs share.
pub fn compare_diff(
    store: &Store,
    a: &scalprof_model::RunDocument,
    b: &scalprof_model::RunDocument,
    c: &scalprof_model::compare::Comparison,
) -> Result<Option<Vec<u8>>> {
    let Some(v) = c.points.last().map(|p| p.value) else {
        return Ok(None);
    };
    let profile =
        |doc: &scalprof_model::RunDocument| -> Result<Option<(scalprof_model::PointProfile, f64)>> {
            let id: i64 = doc.id.parse().context("run id")?;
            let prof = merged_profiles(store, id)?
                .into_iter()
                .find(|(pv, _)| *pv == v)
                .map(|(_, p)| p);
            let work = doc
                .points
                .iter()
                .find(|p| p.value == v)
                .map(|p| scalprof_analyze::summary::point_work(p, doc.throughput.source))
                .unwrap_or(0.0);
            Ok(prof.filter(|_| work > 0.0).map(|p| (p, work)))
        };
    let (Some((pa, wa)), Some((pb, wb))) = (profile(a)?, profile(b)?) else {
        return Ok(None);
    };
    Ok(Some(scalprof_report::flame::diff_svg(
        &pa,
        wa,
        &pb,
        wb,
        &format!("run {} → run {} at {v}, per operation", a.id, b.id),
        Some("red: grew per operation, blue: shrank".into()),
    )?))
}
