//! `scalprof import perf.data`: a one-point run from a file recorded elsewhere, through
//! the same converter and analysis as live profiles.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use anyhow::Result;
use linux_perf_event_reader::{
    CpuMode, EventRecord, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use scalprof_debuginfo::{Kallsyms, SymbolCache};
use scalprof_model::{Host, Repeat, RunStatus, Sweep, ThroughputSource};
use scalprof_store::{NewRun, Store};
use scalprof_symbolize::profile::{ProfileBuilder, Share, Symbols};

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
    // Loaded while the file's first records are read.
    let kernel = || {
        Arc::new(if same_kernel {
            Kallsyms::load()
        } else {
            Kallsyms::default()
        })
    };
    // One thread reads the file and hands its records, a batch at a time, to one builder
    // per core, each parsing and symbolizing its share of the samples (and counting their
    // CPU time by mode); the builders are merged into the first.
    let (user_ns, sys_ns) = (AtomicU64::new(0), AtomicU64::new(0));
    // A record is ~150–200 bytes with a callchain: the size says about how many samples.
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    let owner = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| m.uid())
    };
    let workers = scalprof_symbolize::profile::parallel_workers(size / 200);
    // The file is untrusted input: scalprof checks its structure first, and a panic in a
    // parser on a case the checks missed becomes an error, not a crash. While it parses,
    // a panic hook that checks [`PARSING`] keeps this thread's panics quiet (the binary installs one).
    PARSING.with(|p| p.set(true));
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // The sampling rate from the header: the threads' busy shares need it.
        read_in_parallel(
            path,
            &|| {
                let b = ProfileBuilder::new(&header.event, header.frequency, true);
                // The perf maps of the file's owner: whoever recorded it ran the processes.
                match owner {
                    Some(uid) => b.trust_perf_maps_of(uid),
                    None => b,
                }
            },
            workers,
            scalprof_symbolize::profile::PARALLEL_CHUNK,
            &kernel,
            (&user_ns, &sys_ns),
        )
    }));
    PARSING.with(|p| p.set(false));
    let (builder, info) = match read {
        Ok(result) => result?,
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

/// Records handed from the reading thread to the builders: their bytes, and per record
/// (type, misc, parse info, range in the bytes).
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    infos: Vec<RecordParseInfo>,
    records: Vec<(RecordType, u16, u8, usize, usize)>,
}

/// Records per batch.
const BATCH: usize = 16 * 1024;

impl Batch {
    fn push(&mut self, raw: &RawEventRecord<'_>) {
        let info = match self.infos.iter().position(|i| *i == raw.parse_info) {
            Some(i) => i,
            None => {
                self.infos.push(raw.parse_info);
                self.infos.len() - 1
            }
        };
        let start = self.bytes.len();
        match raw.data {
            RawData::Single(a) => self.bytes.extend_from_slice(a),
            RawData::Split(a, b) => {
                self.bytes.extend_from_slice(a);
                self.bytes.extend_from_slice(b);
            }
        }
        let info = u8::try_from(info).unwrap_or(u8::MAX);
        self.records
            .push((raw.record_type, raw.misc, info, start, self.bytes.len()));
    }
}

/// Reads `path` on one thread and symbolizes it with `workers` builders made by `make`
/// (this thread's the first), each taking its [`Share`] of the samples, `chunk` in a row,
/// with the kernel symbols `kernel` loads once reading has begun; gives the merged builder
/// and what the file says of itself. The CPU time of the samples by mode is added to
/// `user_ns` and `sys_ns`.
pub fn read_in_parallel(
    path: &Path,
    make: &(dyn Fn() -> ProfileBuilder + Sync),
    workers: usize,
    chunk: u64,
    kernel: &dyn Fn() -> Arc<Kallsyms>,
    (user_ns, sys_ns): (&AtomicU64, &AtomicU64),
) -> Result<(ProfileBuilder, scalprof_collect::import::ImportInfo)> {
    let workers = workers.max(1);
    let share = |index| Share {
        index,
        of: workers,
        chunk,
    };
    // What one builder does with the batches it receives.
    let consume = |b: &mut ProfileBuilder, symbols: &mut Symbols, rx: Receiver<Arc<Batch>>| {
        PARSING.with(|p| p.set(true));
        let mine = b.share_of().unwrap_or(share(0));
        let mut ordinal = 0u64;
        for batch in rx {
            for &(ty, misc, info, start, end) in &batch.records {
                let sample = ty == RecordType::SAMPLE;
                if sample {
                    ordinal += 1;
                    if !mine.takes(ordinal - 1) {
                        continue;
                    }
                }
                let Some(&info) = batch.infos.get(info as usize) else {
                    b.bad_record(sample);
                    continue;
                };
                let raw =
                    RawEventRecord::new(ty, misc, RawData::Single(&batch.bytes[start..end]), info);
                match raw.parse() {
                    Ok(rec) => {
                        if let EventRecord::Sample(s) = &rec {
                            let p = s.period.unwrap_or(0);
                            match s.cpu_mode {
                                CpuMode::Kernel => sys_ns.fetch_add(p, Ordering::Relaxed),
                                _ => user_ns.fetch_add(p, Ordering::Relaxed),
                            };
                        }
                        b.handle_taken(rec, symbols);
                    }
                    Err(_) => b.bad_record(sample),
                }
            }
        }
    };
    let mut senders: Vec<SyncSender<Arc<Batch>>> = Vec::new();
    let mut receivers: Vec<Receiver<Arc<Batch>>> = Vec::new();
    for _ in 0..workers {
        let (tx, rx) = sync_channel(8);
        senders.push(tx);
        receivers.push(rx);
    }
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            PARSING.with(|p| p.set(true));
            // Batches every builder is done with are filled again (fresh ones cost a page
            // fault per 4 KiB).
            let mut sent: std::collections::VecDeque<Arc<Batch>> = Default::default();
            let mut send = |batch: Batch| -> Batch {
                let batch = Arc::new(batch);
                // A builder that stopped (it panicked) no longer receives.
                for s in &senders {
                    let _ = s.send(batch.clone());
                }
                sent.push_back(batch);
                if sent.front().is_some_and(|b| Arc::strong_count(b) == 1) {
                    if let Some(Ok(mut again)) = sent.pop_front().map(Arc::try_unwrap) {
                        again.bytes.clear();
                        again.infos.clear();
                        again.records.clear();
                        return again;
                    }
                }
                // At most as many as can be in flight: the channels' and one per builder.
                if sent.len() > 16 {
                    sent.pop_front();
                }
                Batch::default()
            };
            let mut batch = Batch::default();
            let info = scalprof_collect::import::for_each_raw_record(path, |raw| {
                batch.push(&raw);
                if batch.records.len() >= BATCH {
                    let full = std::mem::take(&mut batch);
                    batch = send(full);
                }
            });
            if !batch.records.is_empty() {
                send(batch);
            }
            info
        });
        let kernel = kernel();
        // One cache for every builder: each file opened, and its DWARF read, once.
        let files = SymbolCache::default();
        let first_rx = receivers.remove(0);
        let handles: Vec<_> = receivers
            .into_iter()
            .enumerate()
            .map(|(k, rx)| {
                let (kernel, files) = (kernel.clone(), files.clone());
                scope.spawn(move || {
                    let mut own = Symbols { kernel, files };
                    let mut b = make().share(share(k + 1));
                    consume(&mut b, &mut own, rx);
                    b.into_part()
                })
            })
            .collect();
        let mut symbols = Symbols { kernel, files };
        let mut first = make().share(share(0));
        consume(&mut first, &mut symbols, first_rx);
        for h in handles {
            match h.join() {
                Ok(part) => first.absorb(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        let info = match reader.join() {
            Ok(info) => info?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        Ok((first.unshared(), info))
    })
}
