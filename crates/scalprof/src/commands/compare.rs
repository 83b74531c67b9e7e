//! `scalprof compare`: two runs or two suites, with a verdict and a gate for CI.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use scalprof_model::compare::{Comparison, Gate};
use scalprof_model::RunDocument;
use scalprof_pipeline::facade::{compare_runs, gate, ratio_words, slower_points};
use scalprof_pipeline::LoadedRun;
use scalprof_report::signed_pct;

use super::{open_store_read_only, Usage};
use crate::cli;
use crate::out;

/// `scalprof compare A B`: two runs (or two suite documents) side by side.
pub fn compare(db: &Option<PathBuf>, args: cli::CompareArgs) -> Result<ExitCode> {
    let (a_doc, b_doc) = (suite_file(db, &args.a)?, suite_file(db, &args.b)?);
    match (a_doc, b_doc) {
        (Some(a), Some(b)) => return compare_suites(db, &args, &a, &b),
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => {
            return Err(Usage(
                "compare: one of A and B is a suite document and the other is not; compare two suites (scalprof suite --json FILE) or two runs".into(),
            )
            .into())
        }
    }
    let store = open_store_read_only(db)?;
    let (ia, ib) = (store.resolve(&args.a)?, store.resolve(&args.b)?);
    warn_of_ambiguity(&store, &args, ia, ib)?;
    let (ra, rb) = (LoadedRun::load(&store, ia)?, LoadedRun::load(&store, ib)?);
    let (a, b) = (&ra.doc, &rb.doc);
    let mut c = compare_runs(a, b);
    c.gate = args.fail_if_slower.map(|pct| gate(&c, pct));
    if args.json {
        out::data(&(serde_json::to_string_pretty(&c)? + "\n"))?;
    } else {
        out!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::comparison(&c, &a.label, &b.label))
        );
    }
    if let Some(output) = &args.flame {
        differential_flame(&store, output, &c, a, b)?;
    }
    write_reports(&args, &ra, &rb, &c)?;
    if let Some(g) = &c.gate {
        if tell_gate(&c, g, a, args.json)? {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--flame`: the differential flame graph of A and B at their last common point.
fn differential_flame(
    store: &scalprof_store::Store,
    output: &std::path::Path,
    c: &Comparison,
    a: &RunDocument,
    b: &RunDocument,
) -> Result<()> {
    let last = c.points.last().map(|p| p.value);
    match last {
        Some(v) => crate::flame::flame(
            store,
            cli::FlameArgs {
                run: a.id.clone(),
                point: None,
                output: Some(output.to_path_buf()),
                folded: false,
                diff: Some(vec![format!("{}@{v}", a.id), format!("{}@{v}", b.id)]),
            },
        )?,
        None => eprintln!("scalprof: no common point: no differential flame graph"),
    }
    Ok(())
}

/// `--report` (HTML) and `--junit`, and the CI step summary where CI asks for one.
fn write_reports(
    args: &cli::CompareArgs,
    ra: &LoadedRun,
    rb: &LoadedRun,
    c: &Comparison,
) -> Result<()> {
    let (a, b) = (&ra.doc, &rb.doc);
    if let Some(path) = &args.report {
        let diff = crate::report::compare_diff(ra, rb, c)?;
        let html = scalprof_report::html::compare_report(c, &a.label, &b.label, diff.as_ref());
        crate::out::file(path, html)?;
        eprintln!("scalprof: wrote {}", path.display());
    }
    let parameter = a.sweep.parameter.as_str();
    if let Some(path) = &args.junit {
        out::file(path, scalprof_report::ci::comparison_junit(c, parameter))?;
        eprintln!("scalprof: wrote {}", path.display());
    }
    super::history::step_summary(&scalprof_report::ci::comparison_markdown(
        c, &a.label, &b.label, parameter,
    ))?;
    Ok(())
}

/// `--fail-if-slower`: says which points regressed and which could not be tested, then
/// the verdict as the log's last line; true when the gate failed.
fn tell_gate(c: &Comparison, g: &Gate, a: &RunDocument, json: bool) -> Result<bool> {
    for p in c
        .points
        .iter()
        .filter(|p| g.slower_points.contains(&p.value))
    {
        let r = p.throughput_ratio.expect("a slower point has a ratio");
        eprintln!(
            "scalprof: regression: B is {} at point {}, beyond the {}% allowed for all {} points at once (interval {:.2}–{:.2}× of A)",
            ratio_words(&r),
            p.value,
            g.threshold_pct,
            c.points.len(),
            r.ci_family[0],
            r.ci_family[1]
        );
    }
    if !g.untested_points.is_empty() {
        eprintln!(
            "scalprof: warning: --fail-if-slower could not test point(s) {:?}: fewer than 2 repeats on a side (--repeat 3)",
            g.untested_points
        );
    }
    // The verdict is the log's last line, where a CI reader looks.
    if let Some(line) = scalprof_report::gate_line(c, a.sweep.parameter.as_str()) {
        if !json {
            outln!("{line}");
        }
    }
    Ok(g.failed)
}

/// Says which run a label was taken to mean where it names several, and when A and B are
/// one run (nothing can differ). `compare sh sh` once compared the newest `sh` run with
/// itself without a word.
/// `arg` as a suite document, or `None` for a run. A run the store names wins over a file
/// of the same name in the working folder (another user may have planted `1` and `2` in
/// a shared one): that file is read only when written as a path (`./1`), and the user is
/// told which was taken.
fn suite_file(
    db: &Option<PathBuf>,
    arg: &str,
) -> Result<Option<scalprof_model::suite::SuiteDocument>> {
    let as_path = arg.contains('/');
    if !as_path && std::path::Path::new(arg).exists() {
        let run = open_store_read_only(db)
            .ok()
            .and_then(|s| s.resolve(arg).ok());
        if let Some(id) = run {
            eprintln!(
                "scalprof: note: {arg:?} is run {id} in the store, and also a file in this \
                 folder: comparing the run (write ./{arg} for the file)"
            );
            return Ok(None);
        }
    }
    scalprof_pipeline::suite::read_document(arg)
}

fn warn_of_ambiguity(
    store: &scalprof_store::Store,
    args: &cli::CompareArgs,
    ia: i64,
    ib: i64,
) -> Result<()> {
    let mut matches = Vec::new();
    // The same label twice is said once.
    let sides = if args.a == args.b {
        vec![(&args.a, ia)]
    } else {
        vec![(&args.a, ia), (&args.b, ib)]
    };
    for (reference, id) in sides {
        let all = store.labelled(reference)?;
        if all.len() > 1 {
            let list: Vec<String> = all.iter().map(i64::to_string).collect();
            eprintln!(
                "scalprof: warning: label {reference:?} matches runs {}; taking the latest, {id}: use a run id",
                list.join(", ")
            );
        }
        matches = all;
    }
    if ia == ib {
        // Where the label names several runs, the two newest are the likely pair.
        let pair = match matches.as_slice() {
            [.., older, newest] => format!("e.g. scalprof compare {older} {newest}"),
            _ => "scalprof runs lists them".to_string(),
        };
        eprintln!(
            "scalprof: warning: A and B are the same run ({ia}): nothing can differ; name two runs ({pair})"
        );
    }
    Ok(())
}

/// `scalprof compare A.json B.json`: two suites, test by test. The runs come from the store
/// when they are in it; a suite from another machine is compared from its document.
fn compare_suites(
    db: &Option<std::path::PathBuf>,
    args: &cli::CompareArgs,
    a: &scalprof_model::suite::SuiteDocument,
    b: &scalprof_model::suite::SuiteDocument,
) -> Result<ExitCode> {
    if args.flame.is_some() {
        return Err(Usage("compare: --flame compares two runs; for a suite, compare one test's runs (their ids are in the table)".into()).into());
    }
    let store = open_store_read_only(db).ok();
    let c = scalprof_pipeline::suite::compare(store.as_ref(), a, b);
    if args.json {
        out::data(&(serde_json::to_string_pretty(&c)? + "\n"))?;
    } else {
        out!(
            "{}",
            scalprof_report::terminal_safe(&scalprof_report::suite::comparison(&c))
        );
    }
    if let Some(path) = &args.report {
        crate::out::file(path, scalprof_report::suite::html_comparison(&c))?;
        eprintln!("scalprof: wrote {}", path.display());
    }
    if let Some(pct) = args.fail_if_slower {
        let mut slower = Vec::new();
        for t in &c.tests {
            for (v, d) in slower_points(&t.comparison, pct) {
                // A suite document is a file from anywhere: its names are shown, not obeyed.
                let (name, mode) = (
                    scalprof_report::terminal_line(&t.name),
                    scalprof_report::terminal_line(&t.mode),
                );
                eprintln!(
                    "scalprof: B is slower in {name} ({mode}) at {v} workers: throughput {d:+.1}% (proven at 95% confidence)",
                );
                slower.push(format!(
                    "{name} ({mode}) at {v} workers ({})",
                    signed_pct(d)
                ));
            }
        }
        // The verdict is the log's last line, where a CI reader looks.
        if !args.json {
            if slower.is_empty() {
                outln!("gate: no test slower than {pct}% — passed");
            } else {
                outln!(
                    "gate: B is slower than {pct}% in {} — failed",
                    slower.join(", ")
                );
            }
        }
        if !slower.is_empty() {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
