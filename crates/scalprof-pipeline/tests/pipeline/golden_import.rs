//! A real perf.data file (recorded with `perf record -e cpu-clock:u -g`, see
//! `golden/golden.c`) through the import, the converter and the store, against its
//! expected folded stacks. `SCALPROF_BLESS=1` rewrites the expected file.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

/// Where the program was when it was recorded: the file's mmap records name this path.
const RECORDED_AT: &str = "/tmp/scalprof-golden/golden";

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// The binary goes back where it was recorded, so its symbols resolve.
fn place_binary() {
    let at = Path::new(RECORDED_AT);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let same = std::fs::read(at).ok() == Some(std::fs::read(golden("golden")).unwrap());
    if !same {
        // Another test (a thread of this process, or another process) may be copying it
        // at the same moment: write aside under a name of this thread's own, then rename.
        let aside = at.with_extension(format!(
            "{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::copy(golden("golden"), &aside).unwrap();
        std::fs::rename(&aside, at).unwrap();
    }
}

/// Several builders, each symbolizing its share of the samples, make the profile one
/// builder makes: stacks, hot instructions, every count, the timeline's serial estimate.
#[test]
fn several_builders_make_the_profile_one_builder_makes() {
    use scalprof_symbolize::profile::{parallel, ProfileBuilder, Symbols};
    place_binary();
    let path = golden("golden.perf.data");
    // Every record goes to every builder, which skips the samples not its own (the way of
    // a traced repeat's records).
    let run = |workers: usize, chunk: u64| {
        let mut symbols = Symbols {
            kernel: std::sync::Arc::new(scalprof_debuginfo::Kallsyms::default()),
            files: scalprof_debuginfo::SymbolCache::default(),
        };
        let b = parallel(
            workers,
            chunk,
            &mut symbols,
            &|_| ProfileBuilder::new("cpu-clock", 1000, true),
            &|b, s| {
                scalprof_collect::import::for_each_record(&path, |rec| b.handle(rec, s)).unwrap();
            },
        );
        b.finish()
    };
    // The import's way: one thread reads, the builders take batches of records.
    let streamed = |workers: usize, chunk: u64| {
        let times = scalprof_symbolize::convert::ModeTimes::default();
        let (b, _) = scalprof_symbolize::convert::perf_data(
            &scalprof_collect::import::PerfFile::open(&path).unwrap(),
            &|| ProfileBuilder::new("cpu-clock", 1000, true),
            workers,
            chunk,
            &|| std::sync::Arc::new(scalprof_debuginfo::Kallsyms::default()),
            &times,
        )
        .unwrap();
        (
            b.finish(),
            times.user_ns.into_inner() + times.sys_ns.into_inner(),
        )
    };
    let one = run(1, 1);
    assert!(one.stats.samples >= 20, "{:?}", one.stats);
    assert!(one.folded.len() >= 2, "{:?}", one.folded);
    for (workers, chunk) in [(2, 1), (3, 1), (3, 2), (4, 4096)] {
        assert_eq!(
            run(workers, chunk),
            one,
            "{workers} builders, chunks of {chunk}"
        );
    }
    let (alone, ns) = streamed(1, 1);
    assert_eq!(alone, one);
    assert!(ns > 0);
    for (workers, chunk) in [(2, 1), (3, 2), (4, 4096)] {
        let many = streamed(workers, chunk);
        assert_eq!(
            many,
            (one.clone(), ns),
            "{workers} streamed, chunks of {chunk}"
        );
    }
}

#[test]
fn a_recorded_perf_data_file_folds_to_its_expected_stacks() {
    place_binary();
    let dir = tempfile::tempdir().unwrap();
    let store = scalprof_store::Store::open(&dir.path().join("runs.db")).unwrap();
    let id = scalprof_pipeline::import::import(&store, &golden("golden.perf.data"), None).unwrap();
    let run = scalprof_pipeline::LoadedRun::load(&store, id).unwrap();
    let profile = run.profile(1).expect("the imported point has a profile");
    let text = scalprof_report::flame::folded_lines(profile).join("\n") + "\n";
    let expected_path = golden("golden.folded");
    if std::env::var_os("SCALPROF_BLESS").is_some() {
        std::fs::write(&expected_path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    assert_eq!(text, expected, "folded stacks changed");
    assert_eq!(profile.stats.bad_records, 0);
    assert_eq!(profile.stats.unresolved_frames, 0, "{:?}", profile.stats);
    // The run keeps the command line perf recorded.
    assert_eq!(
        run.doc.command.last().map(String::as_str),
        Some(RECORDED_AT)
    );
    assert_eq!(run.doc.command[0], "/usr/bin/perf");
}
