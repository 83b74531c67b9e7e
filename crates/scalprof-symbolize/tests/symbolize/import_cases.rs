//! The perf.data regression cases (kept in scalprof-collect) through the importer *and*
//! the profile builder, as the fuzz target runs them: no input may panic.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use scalprof_symbolize::profile::{ProfileBuilder, Symbols};

#[test]
fn fuzz_cases_go_through_the_profile_builder_without_panicking() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scalprof-collect/tests/import-cases");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        n += 1;
        let data = std::fs::read(&path).unwrap();
        let mut symbols = Symbols {
            kernel: Default::default(),
            files: Default::default(),
        };
        let mut builder = ProfileBuilder::new("test", 0, true);
        let mut handle =
            |rec: linux_perf_event_reader::EventRecord<'_>| builder.handle(rec, &mut symbols);
        let _ = scalprof_collect::import::read_from(
            &path.display().to_string(),
            std::io::Cursor::new(&data[..]),
            data.len() as u64,
            Some(&mut handle),
        );
        let _ = builder.finish();
    }
    assert!(n >= 5, "{n} cases");
}
