//! The converter: what the collectors recorded becomes a profile and a lock table, for a
//! live repeat ([`repeat`]) and for a perf.data file ([`perf_data`]) alike — samply's
//! converter serves its recorder and its importer the same way. Both feed the same
//! [`ProfileBuilder`], one per core, each taking its [`Share`] of the samples.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use linux_perf_event_reader::{
    CpuMode, EventRecord, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use scalprof_collect::import::{ImportInfo, PerfFile};
use scalprof_collect::perf::RawProfile;
use scalprof_debuginfo::{Kallsyms, SymbolCache};
use scalprof_model::locks::{LockProfile, RawLocks};
use scalprof_model::PointProfile;

use crate::profile::{
    parallel, parallel_workers, ProfileBuilder, ProfileError, RecordIndex, Share, Symbols,
    PARALLEL_CHUNK,
};

thread_local! {
    /// Set while this thread parses an untrusted perf.data file: a panic then becomes an
    /// import error, and is not printed (the binary's panic hook reads it).
    pub static PARSING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// One repeat converted: its profile (or why its samples could not be read) and its lock
/// table, each present when it was recorded.
pub struct Converted {
    pub profile: Option<Result<PointProfile, ProfileError>>,
    pub locks: Option<LockProfile>,
}

/// Converts what one live repeat recorded, now that its workload has exited: the samples
/// symbolized on every core, the holders' samples blamed for the waits they caused, then
/// the locks named with what the holders did. `symbolizing` is told the sample count
/// first (the symbolizing step is the long one).
pub fn repeat(
    profile: Option<RawProfile>,
    locks: Option<&RawLocks>,
    symbols: &mut Symbols,
    symbolizing: &mut dyn FnMut(u64),
) -> Converted {
    let (windows, keys) = locks.map(crate::locks::blame_windows).unwrap_or_default();
    let mut on_cpu = Default::default();
    let profile = profile.map(|raw| {
        symbolizing(raw.samples);
        let cpu_before = scalprof_collect::perf::process_cpu_ns();
        let mut b = symbolize_live(&raw, &windows, symbols)?;
        on_cpu = crate::locks::holder_samples(b.take_blamed(), &keys);
        let mut p = b.finish();
        p.stats.bad_records += raw.bad_records;
        p.stats.record_cpu_ns = raw.record_cpu_ns;
        p.stats.unmapped_processes = raw.maps.unmapped_exits;
        p.stats.lost_samples += raw.lost_samples;
        p.stats.tick_hz = raw.tick_hz.unwrap_or(0);
        p.stats.tick_samples = raw.tick_samples;
        p.stats.tick_sample_ns = raw.tick_sample_ns;
        p.stats.process_cpu_ns =
            scalprof_collect::perf::process_cpu_ns().saturating_sub(cpu_before);
        Ok(p)
    });
    Converted {
        profile,
        locks: locks.map(|raw| crate::locks::lock_profile(raw, symbols, &on_cpu)),
    }
}

/// A live repeat's samples, each builder its share, in the order of one index of the
/// records; the builders merged into one.
fn symbolize_live(
    raw: &RawProfile,
    windows: &[crate::profile::BlameWindow],
    symbols: &mut Symbols,
) -> Result<ProfileBuilder, ProfileError> {
    let make = |symbols: &mut Symbols| {
        let mut b = ProfileBuilder::new(&raw.event, raw.frequency, raw.kernel_stacks)
            .blame(windows)
            .recorded_here();
        if let Some(only) = &raw.only {
            b = b.only(only);
        }
        for p in &raw.initial {
            b.add_process(p.pid, &p.comm, &p.maps, symbols);
            if let Some(uid) = p.uid {
                b = b.trust_perf_maps_of(uid);
            }
        }
        b
    };
    let index = RecordIndex::new(&raw.attr, &raw.records)?;
    Ok(parallel(
        parallel_workers(raw.samples),
        PARALLEL_CHUNK,
        symbols,
        &make,
        &|b, symbols| b.handle_indexed(&raw.records, &index, symbols),
    ))
}

/// The CPU time of a file's samples by mode, counted as they are parsed.
#[derive(Default)]
pub struct ModeTimes {
    pub user_ns: AtomicU64,
    pub sys_ns: AtomicU64,
}

/// Reads a perf.data file on one thread and symbolizes it with `workers` builders made by
/// `make` (this thread's the first), each taking its [`Share`] of the samples, `chunk` in a
/// row, with the kernel symbols `kernel` loads once reading has begun; gives the merged
/// builder and what the file says of itself. The samples' CPU time is added to `times`.
pub fn perf_data(
    file: &PerfFile,
    make: &(dyn Fn() -> ProfileBuilder + Sync),
    workers: usize,
    chunk: u64,
    kernel: &dyn Fn() -> Arc<Kallsyms>,
    times: &ModeTimes,
) -> Result<(ProfileBuilder, ImportInfo), scalprof_collect::import::ImportError> {
    let workers = workers.max(1);
    let share = |index| Share {
        index,
        of: workers,
        chunk,
    };
    let (senders, mut receivers): (Vec<_>, Vec<_>) =
        (0..workers).map(|_| sync_channel::<Arc<Batch>>(8)).unzip();
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || read_batches(file, senders));
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
                    consume(&mut b, &mut own, rx, share(0), times);
                    b.into_part()
                })
            })
            .collect();
        let mut symbols = Symbols { kernel, files };
        let mut first = make().share(share(0));
        consume(&mut first, &mut symbols, first_rx, share(0), times);
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

/// What one builder does with the batches it receives: parses the records of its share of
/// the samples (`unshared` for a builder without one) and every other record, and handles
/// them.
fn consume(
    b: &mut ProfileBuilder,
    symbols: &mut Symbols,
    rx: Receiver<Arc<Batch>>,
    unshared: Share,
    times: &ModeTimes,
) {
    PARSING.with(|p| p.set(true));
    let mine = b.share_of().unwrap_or(unshared);
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
                            CpuMode::Kernel => times.sys_ns.fetch_add(p, Ordering::Relaxed),
                            _ => times.user_ns.fetch_add(p, Ordering::Relaxed),
                        };
                    }
                    b.handle_taken(rec, symbols);
                }
                Err(_) => b.bad_record(sample),
            }
        }
    }
}

/// The reading thread: the file's records, a batch at a time, to every builder.
fn read_batches(
    file: &PerfFile,
    senders: Vec<SyncSender<Arc<Batch>>>,
) -> Result<ImportInfo, scalprof_collect::import::ImportError> {
    PARSING.with(|p| p.set(true));
    let mut out = Outbox {
        senders,
        sent: VecDeque::new(),
    };
    let mut batch = Batch::default();
    let info = scalprof_collect::import::for_each_raw_record_of(file, |raw| {
        batch.push(&raw);
        if batch.records.len() >= BATCH {
            let full = std::mem::take(&mut batch);
            batch = out.send(full);
        }
    });
    if !batch.records.is_empty() {
        out.send(batch);
    }
    info
}

/// The batches in flight from the reading thread, kept so that one every builder is done
/// with is filled again (a fresh one costs a page fault per 4 KiB).
struct Outbox {
    senders: Vec<SyncSender<Arc<Batch>>>,
    sent: VecDeque<Arc<Batch>>,
}

impl Outbox {
    /// Sends `batch` to every builder; returns an empty batch to fill next.
    fn send(&mut self, batch: Batch) -> Batch {
        let batch = Arc::new(batch);
        // A builder that stopped (it panicked) no longer receives.
        for s in &self.senders {
            let _ = s.send(batch.clone());
        }
        self.sent.push_back(batch);
        if self.sent.front().is_some_and(|b| Arc::strong_count(b) == 1) {
            if let Some(Ok(mut again)) = self.sent.pop_front().map(Arc::try_unwrap) {
                again.bytes.clear();
                again.infos.clear();
                again.records.clear();
                return again;
            }
        }
        // At most as many as can be in flight: the channels' and one per builder.
        if self.sent.len() > 16 {
            self.sent.pop_front();
        }
        Batch::default()
    }
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
