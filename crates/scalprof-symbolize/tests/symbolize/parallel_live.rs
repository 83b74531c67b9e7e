//! The live sampler's records (DWARF stack copies of a two-threaded corpus program)
//! symbolized by one builder and by several, with every stack copy whole and kept as
//! differences from each thread's earlier copy: the same profile. Needs perf events on a
//! process (root or perf_event_paranoid <= 2; CI runs as root).

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;

use scalprof_collect::exec::{self, Attach, ExecSpec};
use scalprof_collect::interrupt::Interrupt;
use scalprof_collect::perf::{delta_encoded, Sampler, SamplingConfig};
use scalprof_symbolize::profile::{parallel, ProfileBuilder, RecordIndex, Symbols};

#[test]
#[cfg_attr(
    not(privileged),
    ignore = "measures: runs as root or in CI (SCALPROF_TESTS=fast skips it)"
)]
fn several_builders_and_stack_differences_symbolize_live_records_as_one_does() {
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
        inherit: Vec::new(),
    };
    let mut sampler = Sampler::new(SamplingConfig {
        frequency: 4999,
        // Whole copies, encoded below the way the reader encodes them by default.
        delta_stacks: false,
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
    let encoded = delta_encoded(&raw.records);
    assert!(
        encoded.len() * 2 < raw.records.len(),
        "differences take {} bytes, whole copies {}",
        encoded.len(),
        raw.records.len()
    );
    let build = |records: &[u8], workers: usize, chunk: u64| {
        let index = RecordIndex::new(&raw.attr, records).unwrap();
        let mut symbols = Symbols::load();
        parallel(
            workers,
            chunk,
            &mut symbols,
            &|_| ProfileBuilder::new(&raw.event, raw.frequency, raw.kernel_stacks),
            &|b, s| b.handle_indexed(records, &index, s),
        )
        .finish()
    };
    let one = build(&raw.records, 1, 1);
    assert!(one.stats.samples >= 200, "{:?}", one.stats);
    assert!(
        one.folded.iter().any(|f| f.stack.contains("table_lookup")),
        "{:?}",
        &one.folded[..one.folded.len().min(5)]
    );
    assert_eq!(build(&encoded, 1, 1), one, "stack differences, one builder");
    for (workers, chunk) in [(2, 1), (3, 7), (4, 4096)] {
        assert_eq!(
            build(&raw.records, workers, chunk),
            one,
            "{workers} builders, chunks of {chunk}"
        );
        assert_eq!(
            build(&encoded, workers, chunk),
            one,
            "stack differences, {workers} builders, chunks of {chunk}"
        );
    }
}
