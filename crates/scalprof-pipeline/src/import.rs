//! `scalprof import perf.data`: a one-point run from a file recorded elsewhere, through
//! the same converter and analysis as live profiles.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use linux_perf_event_reader::{CpuMode, EventRecord};
use scalprof_debuginfo::{Kallsyms, SymbolCache};
use scalprof_model::{Host, Repeat, RunStatus, Sweep, ThroughputSource};
use scalprof_store::{NewRun, Store};
use scalprof_symbolize::profile::{ProfileBuilder, Symbols};

thread_local! {
    /// Set while this thread parses an untrusted perf.data file: a panic then becomes an
    /// import error, and is not printed.
    pub static PARSING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub fn import(store: &Store, path: &Path, label: Option<String>) -> Result<i64> {
    let local_kernel = scalprof_collect::host::probe().kernel;
    // Kernel symbols of this machine only fit a file recorded on this kernel; we learn
    // the file's kernel from its header, so read the header first.
    let header = scalprof_collect::import::read_header(path)?;
    let same_kernel = header
        .os_release
        .as_deref()
        .is_none_or(|r| r == local_kernel);
    let mut symbols = Symbols {
        kernel: Arc::new(if same_kernel {
            Kallsyms::load()
        } else {
            Kallsyms::default()
        }),
        files: SymbolCache::default(),
    };
    // Every builder reads the whole file and parses and symbolizes its share of the
    // samples (counting their CPU time by mode); the first returns what the file says of
    // itself.
    let (user_ns, sys_ns) = (AtomicU64::new(0), AtomicU64::new(0));
    let first_read = Mutex::new(None);
    // A record is ~150–200 bytes with a callchain: the size says about how many samples.
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    let workers = scalprof_symbolize::profile::parallel_workers(size / 200);
    // The file is untrusted input: scalprof checks its structure first, and a panic in a
    // parser on a case the checks missed becomes an error, not a crash. While it parses,
    // a panic hook that checks [`PARSING`] keeps this thread's panics quiet (the binary installs one).
    PARSING.with(|p| p.set(true));
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        scalprof_symbolize::profile::parallel(
            workers,
            scalprof_symbolize::profile::PARALLEL_CHUNK,
            &mut symbols,
            &|_| ProfileBuilder::new("", 0, true),
            &|builder, symbols| {
                PARSING.with(|p| p.set(true));
                let first = builder.counts_stream();
                let share = builder.share_of();
                // Another builder's samples are not even parsed here.
                let keep = |n| share.is_none_or(|s| s.takes(n));
                let result = scalprof_collect::import::for_each_record_of(path, keep, |rec| {
                    if let EventRecord::Sample(s) = &rec {
                        let p = s.period.unwrap_or(0);
                        match s.cpu_mode {
                            CpuMode::Kernel => sys_ns.fetch_add(p, Ordering::Relaxed),
                            _ => user_ns.fetch_add(p, Ordering::Relaxed),
                        };
                    }
                    builder.handle_taken(rec, symbols);
                });
                if first {
                    *first_read.lock().expect("not poisoned") = Some(result);
                }
            },
        )
    }));
    PARSING.with(|p| p.set(false));
    let (builder, info) = match read {
        Ok(builder) => {
            let info = first_read.into_inner().expect("not poisoned");
            (builder, info.expect("the first builder read the file")?)
        }
        Err(_) => anyhow::bail!(
            "{} is malformed in a way the perf.data parser could not handle; nothing was imported",
            path.display()
        ),
    };
    let (user_ns, sys_ns) = (user_ns.into_inner(), sys_ns.into_inner());
    let mut profile = builder.finish();
    profile.event = info.event.clone();
    profile.frequency = info.frequency;
    profile.stats.bad_records += info.bad_records;
    if !same_kernel {
        eprintln!(
            "scalprof: {} was recorded on kernel {}, this is {local_kernel}: kernel frames stay unresolved",
            path.display(),
            info.os_release.as_deref().unwrap_or("?")
        );
    }

    let clock_like = info.event.contains("clock");
    let wall_s = info
        .time_range_ns
        .map_or(0.0, |(a, b)| (b - a) as f64 / 1e9);
    let id = store.create_run(&NewRun {
        label: label.unwrap_or_else(|| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "perf.data".into())
        }),
        created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: if info.cmdline.is_empty() {
            vec![format!("perf.data:{}", path.display())]
        } else {
            info.cmdline.clone()
        },
        sweep: Sweep {
            parameter: scalprof_model::SweepParameter::Threads,
            values: vec![1],
        },
        host: Host {
            kernel: info.os_release.clone().unwrap_or_else(|| "unknown".into()),
            cpus: info.nr_cpus.unwrap_or(0),
            cpu_model: info.cpu_desc.clone().unwrap_or_else(|| "unknown".into()),
            pmu: info.event.contains("cycles") || info.event.contains("instructions"),
        },
        scaling: Some(ThroughputSource::Strong),
        ops_regex: String::new(),
    })?;
    store.set_output_dir(id, path)?;
    store.add_repeat(
        id,
        1,
        &Repeat {
            // CPU time from the samples' periods, when the event counts time.
            user_s: if clock_like {
                user_ns as f64 / 1e9
            } else {
                0.0
            },
            sys_s: if clock_like { sys_ns as f64 / 1e9 } else { 0.0 },
            ..Repeat::ok(0, wall_s)
        },
    )?;
    store.add_profile(id, 1, 0, &profile)?;
    store.set_status(id, RunStatus::Complete)?;
    Ok(id)
}
