//! Any byte string given to the perf.data importer, and the records it yields to the
//! profile builder, must produce a result or an error — never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scalprof_analyze::profile::{ProfileBuilder, Symbols};

fuzz_target!(|data: &[u8]| {
    let mut symbols = Symbols {
        kernel: Default::default(),
        files: Default::default(),
    };
    let mut builder = ProfileBuilder::new("fuzz", 0, true);
    let mut handle = |rec: linux_perf_event_reader::EventRecord<'_>| builder.handle(rec, &mut symbols);
    let _ = scalprof_collect::import::read_from(
        "fuzz",
        std::io::Cursor::new(data),
        data.len() as u64,
        Some(&mut handle),
    );
    let _ = builder.finish();
});
