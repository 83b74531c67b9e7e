//! Every file in tests/import-cases must be rejected (or read) cleanly: no panic.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use scalprof_collect::import::{for_each_record, ImportError};

#[test]
fn malformed_perf_data_gives_an_error_not_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import-cases");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        seen += 1;
        let result = std::panic::catch_unwind(|| for_each_record(&path, |_| {}));
        let result =
            result.unwrap_or_else(|_| panic!("{} made the importer panic", path.display()));
        if let Err(e) = result {
            let msg = e.to_string();
            assert!(
                matches!(
                    e,
                    ImportError::Corrupt { .. } | ImportError::NoEvents { .. }
                ),
                "{msg}"
            );
            assert!(
                msg.contains(&*path.display().to_string()),
                "the error names the file: {msg}"
            );
        }
    }
    assert!(seen >= 3);
}

#[test]
fn truncation_is_reported_with_the_offsets() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/import-cases/truncated-records.data");
    let e = for_each_record(&path, |_| {}).unwrap_err().to_string();
    assert!(e.contains("truncated") && e.contains("300000"), "{e}");
}
