//! A real perf.data file (recorded with `perf record -e cpu-clock:u -g`, see
//! `golden/golden.c`) through the import, the converter and the store, against its
//! expected folded stacks. `SCALPROF_BLESS=1` rewrites the expected file.

use std::path::{Path, PathBuf};

/// Where the program was when it was recorded: the file's mmap records name this path.
const RECORDED_AT: &str = "/tmp/scalprof-golden/golden";

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

#[test]
fn a_recorded_perf_data_file_folds_to_its_expected_stacks() {
    // The binary goes back where it was recorded, so its symbols resolve.
    let at = Path::new(RECORDED_AT);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let same = std::fs::read(at).ok() == Some(std::fs::read(golden("golden")).unwrap());
    if !same {
        std::fs::copy(golden("golden"), at).unwrap();
    }
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
