//! Any byte string given to the perf.data importer, and the records it yields to the
//! profile builder, must produce a result or an error — never a panic or a hang.
//!
//! Fuzz builds check arithmetic overflow everywhere. An overflow inside the perf.data
//! parsing crates (linux-perf-data, linux-perf-event-reader) wraps in release builds and
//! ends in a parse error there, so such panics are tolerated here; scalprof's own code,
//! and any other panic, still crashes the target.
#![no_main]

use std::sync::atomic::{AtomicBool, Ordering};

use libfuzzer_sys::fuzz_target;
use scalprof_symbolize::profile::{ProfileBuilder, Symbols};

static IN_DEPENDENCY: AtomicBool = AtomicBool::new(false);

fn run(data: &[u8]) {
    let mut symbols = Symbols {
        kernel: Default::default(),
        files: Default::default(),
    };
    let mut builder = ProfileBuilder::new("fuzz", 0, true);
    let mut handle = |rec: linux_perf_event_reader::EventRecord<'_>| builder.handle(rec, &mut symbols);
    let _ = scalprof_collect::import::read_from("fuzz", std::io::Cursor::new(data), data.len() as u64, Some(&mut handle));
    let _ = builder.finish();
}

fuzz_target!(|data: &[u8]| {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        // libfuzzer-sys's hook aborts on any panic; let parser overflows through to
        // catch_unwind below instead.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let overflow_in_parser = info.location().is_some_and(|l| {
                l.file().contains("linux-perf-event-reader") || l.file().contains("linux-perf-data")
            }) && info.to_string().contains("overflow");
            IN_DEPENDENCY.store(overflow_in_parser, Ordering::SeqCst);
            if !overflow_in_parser {
                previous(info);
            }
        }));
    });
    IN_DEPENDENCY.store(false, Ordering::SeqCst);
    if std::panic::catch_unwind(|| run(data)).is_err() && !IN_DEPENDENCY.load(Ordering::SeqCst) {
        std::process::abort();
    }
});
