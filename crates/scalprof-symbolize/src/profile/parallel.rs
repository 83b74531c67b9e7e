//! Several builders over one stream of records, each symbolizing its share of the
//! samples, merged into the profile one builder makes.

use std::sync::Arc;

use linux_perf_event_reader::{Endianness, EventRecord, PerfEventAttr, RawData};
use linux_perf_event_reader::{RawEventRecord, RecordParseInfo, RecordType, SampleRecord};
use scalprof_model::ProfileStats;

use super::{Blamed, FastMap, ProfileBuilder, ProfileError, Symbols};
use super::{PERF_RECORD_SAMPLE, REG_SP};

/// One of several builders over the same records ([`parallel`]): every builder handles
/// every record that changes what is known of the processes (mappings, names, forks,
/// execs), so each knows at each of its samples what a single builder would; the samples
/// themselves go to the builders in turn, `chunk` consecutive ones each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub index: usize,
    pub of: usize,
    pub chunk: u64,
}

/// The records of a buffer of concatenated records, in time order: (time, position,
/// size). Records come per CPU; every record carries a time (sample_id_all), so an exec's
/// mappings are known before its samples.
pub struct RecordIndex {
    parse_info: RecordParseInfo,
    order: Vec<(u64, usize, usize)>,
    /// 1 when the buffer ends in a record that does not fit.
    bad: u64,
}

impl RecordIndex {
    pub fn new(attr: &[u8], records: &[u8]) -> Result<RecordIndex, ProfileError> {
        let (attr, _) = PerfEventAttr::parse::<_, byteorder::NativeEndian>(attr)
            .map_err(|e| ProfileError::Attr(e.to_string()))?;
        let parse_info = RecordParseInfo::new(&attr, Endianness::NATIVE);
        let mut order: Vec<(u64, usize, usize)> = Vec::new();
        let mut bad = 0;
        let mut pos = 0usize;
        while pos + 8 <= records.len() {
            let size =
                u16::from_ne_bytes(records[pos + 6..pos + 8].try_into().expect("2 bytes")) as usize;
            if size < 8 || pos + size > records.len() {
                bad = 1;
                break;
            }
            let raw = raw_record(records, pos, size, parse_info);
            order.push((raw.timestamp().unwrap_or(0), pos, size));
            pos += size;
        }
        order.sort_unstable_by_key(|&(t, pos, _)| (t, pos));
        Ok(RecordIndex {
            parse_info,
            order,
            bad,
        })
    }
}

impl Share {
    /// Whether the sample of this ordinal (0, 1, … over the stream's samples) is this
    /// share's.
    pub fn takes(&self, ordinal: u64) -> bool {
        (ordinal / self.chunk.max(1)) % self.of as u64 == self.index as u64
    }
}

/// What one builder of a [`parallel`] run hands back: names and what refers to them.
pub struct Part {
    names: Vec<String>,
    stacks: FastMap<Vec<u32>, (u64, u64)>,
    timeline: Vec<(u64, i32, u32)>,
    thread_pid: FastMap<i32, i32>,
    hot: FastMap<(Arc<str>, u64), (u64, u64)>,
    stats: ProfileStats,
    blamed: Blamed,
}

impl ProfileBuilder {
    /// Symbolizes only this share of the samples (see [`parallel`]).
    pub fn share(mut self, share: Share) -> ProfileBuilder {
        self.share = (share.of > 1).then_some(share);
        self
    }

    /// Whether the next sample record is this builder's to symbolize (counts it).
    pub(super) fn takes_sample(&mut self) -> bool {
        let n = self.sample_ordinal;
        self.sample_ordinal += 1;
        self.share.is_none_or(|s| s.takes(n))
    }

    /// This builder, no longer one of a share (its parts merged): it counts everything.
    pub fn unshared(mut self) -> ProfileBuilder {
        self.share = None;
        self
    }

    /// This builder's share of the samples, if it has one: for a reader that leaves the
    /// other samples unparsed and hands this builder the rest with
    /// [`Self::handle_taken`].
    pub fn share_of(&self) -> Option<Share> {
        self.share
    }

    /// Whether this builder counts what belongs to the stream rather than to a sample
    /// (lost and throttled records, unparsable ones): the first of a share, or the only.
    pub(super) fn counts_stream(&self) -> bool {
        self.share.is_none_or(|s| s.index == 0)
    }

    /// What this builder symbolized, apart from what it knows of the processes (each
    /// builder keeps its own): for [`Self::absorb`].
    pub fn into_part(self) -> Part {
        Part {
            names: self.names,
            stacks: self.stacks,
            timeline: self.timeline,
            thread_pid: self.thread_pid,
            hot: self.hot,
            stats: self.stats,
            blamed: self.blamed,
        }
    }

    /// Adds what another builder of the same records symbolized (its share of the
    /// samples): stacks, timeline, hot instructions, per-sample counts, blamed holders.
    pub fn absorb(&mut self, o: Part) {
        let ids: Vec<u32> = o.names.iter().map(|n| self.intern(n)).collect();
        let map = |id: u32| if id == u32::MAX { id } else { ids[id as usize] };
        for (frames, (samples, weight)) in o.stacks {
            let frames: Vec<u32> = frames.into_iter().map(map).collect();
            let e = self.stacks.entry(frames).or_insert((0, 0));
            e.0 += samples;
            e.1 = e.1.saturating_add(weight);
        }
        self.timeline.extend(
            o.timeline
                .into_iter()
                .map(|(t, tid, leaf)| (t, tid, map(leaf))),
        );
        self.thread_pid.extend(o.thread_pid);
        for (key, (samples, weight)) in o.hot {
            let e = self.hot.entry(key).or_insert((0, 0));
            e.0 += samples;
            e.1 = e.1.saturating_add(weight);
        }
        // The other builders count no lost, throttled or unparsable stream records (only
        // the first does), and the same unreadable files: a plain sum.
        self.stats.add(&o.stats);
        for (lock, theirs) in o.blamed {
            let mine = self.blamed.entry(lock).or_default();
            for (f, (samples, weight)) in theirs.functions {
                let e = mine.functions.entry(f).or_default();
                e.0 += samples;
                e.1 = e.1.saturating_add(weight);
            }
            for (stack, (holder, samples, weight)) in theirs.stacks {
                let e = mine.stacks.entry(stack).or_insert_with(|| (holder, 0, 0));
                e.1 += samples;
                e.2 = e.2.saturating_add(weight);
            }
        }
    }

    /// Handles the records of a buffer in the order of its [`RecordIndex`] (built once
    /// for all the builders of a [`parallel`] run).
    pub fn handle_indexed(&mut self, records: &[u8], index: &RecordIndex, symbols: &mut Symbols) {
        if self.counts_stream() {
            self.stats.bad_records += index.bad;
        }
        for &(_, pos, size) in &index.order {
            // Another builder's sample is not even parsed.
            let ty = u32::from_ne_bytes(records[pos..pos + 4].try_into().expect("4 bytes"));
            if ty == PERF_RECORD_SAMPLE && !self.takes_sample() {
                continue;
            }
            match raw_record(records, pos, size, index.parse_info).parse() {
                Ok(EventRecord::Sample(s)) => self.handle_live_sample(s, records, symbols),
                Ok(rec) => self.handle_record(rec, symbols),
                Err(_) if ty == PERF_RECORD_SAMPLE || self.counts_stream() => {
                    self.stats.bad_records += 1
                }
                Err(_) => {}
            }
        }
    }
}

impl ProfileBuilder {
    /// Handles a sample of the live sampler's records, whose stack copy may be kept as
    /// differences from an earlier copy in `records` ([`scalprof_model::stack_delta`]):
    /// rebuilt here, exactly as copied. One that does not fit its buffer is unwound
    /// without a copy (the kernel's user callchain, if any).
    fn handle_live_sample(&mut self, s: SampleRecord<'_>, records: &[u8], symbols: &mut Symbols) {
        let encoded = match &s.user_stack {
            Some((bytes, dyn_size)) if (*dyn_size as usize) > bytes.len() => {
                Some((bytes.as_slice(), *dyn_size as usize))
            }
            _ => None,
        };
        let Some((enc, dyn_size)) = encoded else {
            self.handle_record(EventRecord::Sample(s), symbols);
            return;
        };
        let mut copy = std::mem::take(&mut self.stack_copy);
        // Rebound after `copy`, so the record may borrow it.
        let mut s = s;
        let sp = s.user_regs.as_ref().and_then(|r| r.get(REG_SP));
        let len = dyn_size.div_ceil(8) * 8;
        let rebuilt = sp.is_some_and(|sp| {
            scalprof_model::stack_delta::decode(&enc, sp, len, records, &mut copy)
        });
        s.user_stack = rebuilt.then(|| (RawData::Single(&copy), dyn_size as u64));
        self.handle_record(EventRecord::Sample(s), symbols);
        self.stack_copy = copy;
    }
}

/// Samples below this are symbolized by one builder: threads would cost more than they
/// save (each builder parses every record that is not a sample, builds its own unwinder
/// per process and names each address it meets again, from the shared files).
pub const PARALLEL_MIN_SAMPLES: u64 = 100_000;
/// Samples per builder at least, above that.
const SAMPLES_PER_BUILDER: u64 = 50_000;
/// Consecutive samples symbolized by one builder of a [`parallel`] run: long enough runs of
/// one thread's samples to keep its caches warm.
pub const PARALLEL_CHUNK: u64 = 4096;

/// How many builders to run for `samples` samples on this machine: one under
/// [`PARALLEL_MIN_SAMPLES`], else one per 50,000 samples, at most one per core and 16.
pub fn parallel_workers(samples: u64) -> usize {
    if samples < PARALLEL_MIN_SAMPLES {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(16));
    cores.min((samples / SAMPLES_PER_BUILDER) as usize).max(1)
}

/// Symbolizes one stream of records with `workers` builders on as many threads, each
/// taking its [`Share`] of the samples, and merges them into the first. `make` configures
/// a builder (the same way for each), `feed` gives it every record. The result is the one
/// a single builder makes: stacks, counts and the timeline are sums or unions, and the
/// profile is sorted when finished (a test compares the two). Every builder uses
/// `symbols`' kernel symbols and files (a shared cache: each file opened, its DWARF read,
/// once).
pub fn parallel(
    workers: usize,
    chunk: u64,
    symbols: &mut Symbols,
    make: &(dyn Fn(&mut Symbols) -> ProfileBuilder + Sync),
    feed: &(dyn Fn(&mut ProfileBuilder, &mut Symbols) + Sync),
) -> ProfileBuilder {
    if workers <= 1 {
        let mut b = make(symbols);
        feed(&mut b, symbols);
        return b;
    }
    let share = |index| Share {
        index,
        of: workers,
        chunk,
    };
    let (kernel, files) = (symbols.kernel.clone(), symbols.files.clone());
    std::thread::scope(|scope| {
        let handles: Vec<_> = (1..workers)
            .map(|index| {
                let (kernel, files) = (kernel.clone(), files.clone());
                scope.spawn(move || {
                    let mut own = Symbols { kernel, files };
                    let mut b = make(&mut own).share(share(index));
                    feed(&mut b, &mut own);
                    b.into_part()
                })
            })
            .collect();
        // The first share on this thread, with the caller's symbols.
        let mut first = make(symbols).share(share(0));
        feed(&mut first, symbols);
        for h in handles {
            match h.join() {
                Ok(part) => first.absorb(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        first.share = None;
        first
    })
}

/// The record of `size` bytes at `pos` in `records`, its header read in place.
fn raw_record(
    records: &[u8],
    pos: usize,
    size: usize,
    parse_info: RecordParseInfo,
) -> RawEventRecord<'_> {
    let ty = u32::from_ne_bytes(records[pos..pos + 4].try_into().expect("4 bytes"));
    let misc = u16::from_ne_bytes(records[pos + 4..pos + 6].try_into().expect("2 bytes"));
    RawEventRecord::new(
        RecordType(ty),
        misc,
        RawData::Single(&records[pos + 8..pos + size]),
        parse_info,
    )
}
