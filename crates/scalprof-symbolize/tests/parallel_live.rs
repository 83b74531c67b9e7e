//! The live sampler's records (DWARF stack copies of a two-threaded corpus program)
//! symbolized by one builder and by several: the same profile. Needs perf events on a
//! process (root or perf_event_paranoid <= 2; CI runs as root).

use std::path::Path;
use std::process::Command;

use scalprof_collect::exec::{self, Attach, ExecSpec};
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::perf::{Sampler, SamplingConfig};
use scalprof_symbolize::profile::{parallel, ProfileBuilder, RecordIndex, Symbols};

#[test]
fn several_builders_symbolize_live_records_as_one_does() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var_os("CI").is_none(), "CI must run as root");
        eprintln!("skipped: sampling needs root here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("hash_global_mutex");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus/hash_global_mutex.c");
    let st = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let spec = ExecSpec {
        argv: vec![bin.display().to_string(), "2".into()],
        env: vec![("CORPUS_SCALE".into(), "0.5".into())],
        stdout: dir.path().join("out"),
        stderr: dir.path().join("err"),
        timeout: None,
        attached: Vec::new(),
    };
    let mut sampler = Sampler::new(SamplingConfig {
        frequency: 4999,
        ..Default::default()
    });
    let r = exec::run_with(
        &spec,
        &Interrupt::manual(),
        &mut [&mut sampler as &mut dyn Attach],
    )
    .unwrap();
    assert_eq!(r.exit_code, Some(0));
    let raw = sampler.take().expect("records");
    let index = RecordIndex::new(&raw.attr, &raw.records).unwrap();
    let build = |workers: usize, chunk: u64| {
        let mut symbols = Symbols::load();
        parallel(
            workers,
            chunk,
            &mut symbols,
            &|_| ProfileBuilder::new(&raw.event, raw.frequency, raw.kernel_stacks),
            &|b, s| b.handle_indexed(&raw.records, &index, s),
        )
        .finish()
    };
    let one = build(1, 1);
    assert!(one.stats.samples >= 200, "{:?}", one.stats);
    assert!(
        one.folded.iter().any(|f| f.stack.contains("table_lookup")),
        "{:?}",
        &one.folded[..one.folded.len().min(5)]
    );
    for (workers, chunk) in [(2, 1), (3, 7), (4, 4096)] {
        assert_eq!(
            build(workers, chunk),
            one,
            "{workers} builders, chunks of {chunk}"
        );
    }
}
