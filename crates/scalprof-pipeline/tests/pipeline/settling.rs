//! The sweep asks after each traced repeat whether the point is settled. It answers with
//! `settling_at`, which assembles only the variants that diagnose that point; the answer
//! must be the settling the whole document gives, on every point of the 16-CPU fixture.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

#[test]
fn settling_at_a_point_is_the_documents_settling() {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scalprof/tests/fixtures/corpus16.db");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("corpus16.db");
    std::fs::copy(&from, &db).unwrap();
    let store = scalprof_store::Store::open(&db).unwrap();
    let runs = store.list().unwrap();
    assert!(runs.len() >= 10, "{} runs", runs.len());
    let mut settled = 0;
    let mut checked = 0;
    for run in runs {
        let inputs = scalprof_pipeline::load(&store, run.id).unwrap();
        let doc = scalprof_analyze::assemble(&inputs);
        for p in &doc.points {
            let alone = scalprof_analyze::settling_at(&inputs, p.value);
            assert_eq!(alone, p.settling, "run {} at {}", run.id, p.value);
            checked += 1;
            settled += usize::from(alone.is_some_and(|s| s.settled));
        }
    }
    // Not vacuous: points after the first have a settling, and some of it says settled.
    assert!(
        checked >= 40 && settled > 0,
        "{checked} points, {settled} settled"
    );
}
