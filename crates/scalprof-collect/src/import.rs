//! Reading `perf.data` files recorded elsewhere (`perf record -g`, `--call-graph dwarf`)
//! with linux-perf-data. The records go to the same analysis as live samples.

use std::cell::Cell;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

use linux_perf_data::{PerfFileReader, PerfFileRecord};
use linux_perf_event_reader::{EventRecord, RawEventRecord, RecordType, SamplingPolicy};

/// What the file says about where and how it was recorded.
#[derive(Clone, Debug, Default)]
pub struct ImportInfo {
    pub event: String,
    /// Samples per second when recorded with -F, else 0.
    pub frequency: u64,
    pub os_release: Option<String>,
    pub hostname: Option<String>,
    pub cpu_desc: Option<String>,
    pub nr_cpus: Option<u32>,
    pub cmdline: Vec<String>,
    /// First and last sample time, ns.
    pub time_range_ns: Option<(u64, u64)>,
    pub records: u64,
    /// Records that could not be parsed (skipped and counted).
    pub bad_records: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot open {path}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a readable perf.data file: {reason} (read up to byte {offset} of {size})"
    )]
    Corrupt {
        path: String,
        reason: String,
        offset: u64,
        size: u64,
    },
    #[error("{path} has no sampling event (was it recorded with `perf stat`?)")]
    NoEvents { path: String },
}

/// A reader that remembers how far it got, to say where a file is broken.
struct Counting<R> {
    inner: R,
    pos: u64,
    furthest: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        self.furthest.set(self.furthest.get().max(self.pos));
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

/// The file's header facts, without reading its records.
pub fn read_header(path: &Path) -> Result<ImportInfo, ImportError> {
    read_header_of(&PerfFile::open(path)?)
}

/// An opened perf.data: a path opened here, or a descriptor handed over by a process that
/// may open what this one may not (a parser without privileges reads root's file).
pub struct PerfFile {
    pub name: String,
    file: std::fs::File,
    pub size: u64,
}

impl PerfFile {
    pub fn open(path: &Path) -> Result<PerfFile, ImportError> {
        let (name, file, size) = open(path)?;
        Ok(PerfFile { name, file, size })
    }

    /// An open file, named `name` in messages.
    pub fn handed(name: String, file: std::fs::File) -> PerfFile {
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        PerfFile { name, file, size }
    }

    /// The open file (to hand to a parser child).
    pub fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// A reader from its start.
    fn reader(&self) -> Result<std::fs::File, ImportError> {
        let mut f = self.file.try_clone().map_err(|source| ImportError::Open {
            path: self.name.clone(),
            source,
        })?;
        f.seek(SeekFrom::Start(0))
            .map_err(|source| ImportError::Open {
                path: self.name.clone(),
                source,
            })?;
        Ok(f)
    }
}

/// What the header of an opened perf.data says.
pub fn read_header_of(f: &PerfFile) -> Result<ImportInfo, ImportError> {
    read_from(&f.name, f.reader()?, f.size, None)
}

/// Calls `handle` with every record of the file, in time order.
pub fn for_each_record(
    path: &Path,
    mut handle: impl FnMut(EventRecord<'_>),
) -> Result<ImportInfo, ImportError> {
    let mut bad = 0u64;
    let mut info = for_each_raw_record(path, |raw| match raw.parse() {
        Ok(rec) => handle(rec),
        Err(_) => bad += 1,
    })?;
    info.bad_records += bad;
    Ok(info)
}

/// Calls `handle` with every event record of the file, in time order, unparsed (the
/// caller parses them, or hands them to threads that do). The records' framing is checked;
/// their bodies are not.
pub fn for_each_raw_record(
    path: &Path,
    handle: impl FnMut(RawEventRecord<'_>),
) -> Result<ImportInfo, ImportError> {
    for_each_raw_record_of(&PerfFile::open(path)?, handle)
}

/// [`for_each_raw_record`] of an opened perf.data.
pub fn for_each_raw_record_of(
    f: &PerfFile,
    mut handle: impl FnMut(RawEventRecord<'_>),
) -> Result<ImportInfo, ImportError> {
    // The reader asks for a record or a few at a time: 7 KiB per read(2) on average, 28k
    // system calls for a 194 MB file, without a buffer.
    let file = std::io::BufReader::with_capacity(1 << 20, f.reader()?);
    read_records(&f.name, file, f.size, Some(&mut handle))
}

fn open(path: &Path) -> Result<(String, std::fs::File, u64), ImportError> {
    let name = path.display().to_string();
    // Never a FIFO or device: it would block, or never end.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .and_then(|f| {
                if f.metadata()?.is_file() {
                    Ok(f)
                } else {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "not a regular file (a FIFO, device or directory)",
                    ))
                }
            })
    }
    .map_err(|source| ImportError::Open {
        path: name.clone(),
        source,
    })?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok((name, file, size))
}

/// Reads perf.data content from any seekable reader (`name` is for messages). Never
/// panics on malformed input: the fuzz target `import_perf_data` holds it to that.
pub fn read_from<R: Read + Seek>(
    name: &str,
    file: R,
    size: u64,
    handle: Option<&mut dyn FnMut(EventRecord<'_>)>,
) -> Result<ImportInfo, ImportError> {
    let Some(handle) = handle else {
        return read_records(name, file, size, None);
    };
    let mut bad = 0u64;
    let mut info = read_records(
        name,
        file,
        size,
        Some(&mut |raw: RawEventRecord<'_>| match raw.parse() {
            Ok(rec) => handle(rec),
            Err(_) => bad += 1,
        }),
    )?;
    info.bad_records += bad;
    Ok(info)
}

/// Reads the file's header facts and, given a `handle`, hands it every event record in
/// time order. The file is checked first (its magic, header, sections and record framing),
/// so that linux-perf-data never meets a size it would trust.
fn read_records<R: Read + Seek>(
    name: &str,
    mut file: R,
    size: u64,
    mut handle: Option<&mut dyn FnMut(RawEventRecord<'_>)>,
) -> Result<ImportInfo, ImportError> {
    let io_err = |source| ImportError::Open {
        path: name.to_string(),
        source,
    };
    let (header, big_endian) = read_file_header(name, &mut file, size)?;
    let checked = check_header(&header, big_endian, size)
        .and_then(|()| check_feature_table(&mut file, &header, big_endian, size))
        .and_then(|()| check_id_sections(&mut file, &header, big_endian, size))
        // Walking every record is only needed when they are about to be parsed.
        .and_then(|()| match handle {
            Some(_) => check_records(&mut file, &header, big_endian),
            None => Ok(()),
        });
    if let Err((reason, offset)) = checked {
        return Err(ImportError::Corrupt {
            path: name.to_string(),
            reason,
            offset,
            size,
        });
    }
    file.seek(SeekFrom::Start(0)).map_err(io_err)?;
    let furthest = Rc::new(Cell::new(0u64));
    let reader = Counting {
        inner: std::io::BufReader::new(file),
        pos: 0,
        furthest: furthest.clone(),
    };
    // linux-perf-data does not say where a file is broken; the furthest byte read is close.
    let corrupt = |e: linux_perf_data::Error| corrupt_at(name, size, e.to_string(), furthest.get());
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(reader).map_err(corrupt)?;
    let mut info = header_info(name, &perf_file)?;
    let Some(handle) = handle.as_mut() else {
        return Ok(info);
    };
    let (mut t0, mut t1) = (u64::MAX, 0u64);
    while let Some(record) = record_iter.next_record(&mut perf_file).map_err(corrupt)? {
        let PerfFileRecord::EventRecord { record, .. } = record else {
            continue;
        };
        info.records += 1;
        if record.record_type == RecordType::SAMPLE {
            if let Some(t) = record.timestamp() {
                t0 = t0.min(t);
                t1 = t1.max(t);
            }
        }
        handle(record);
    }
    if t0 <= t1 {
        info.time_range_ns = Some((t0, t1));
    }
    Ok(info)
}

/// The file's 104-byte header and whether it is big-endian, once its magic says it is a
/// file-mode perf.data.
fn read_file_header<R: Read + Seek>(
    name: &str,
    file: &mut R,
    size: u64,
) -> Result<([u8; 104], bool), ImportError> {
    let io_err = |source| ImportError::Open {
        path: name.to_string(),
        source,
    };
    let mut magic = [0u8; 8];
    let mut n = 0;
    while n < 8 {
        match file.read(&mut magic[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(e)),
        }
    }
    if n < 8 || !(magic == *b"PERFILE2" || magic == *b"2ELIFREP") {
        return Err(ImportError::Corrupt {
            path: name.to_string(),
            reason: format!(
                "it does not start with perf's magic PERFILE2 (found {:?}); record with `perf record -o FILE`, not a pipe",
                String::from_utf8_lossy(&magic[..n])
            ),
            offset: 0,
            size,
        });
    }
    let big_endian = magic == *b"2ELIFREP";
    // Pipe mode (`perf record -o -`): a 16-byte header (magic, size 16) and the records
    // follow, with the attributes as records; only file mode has the sections read here.
    let mut size_field = [0u8; 8];
    file.seek(SeekFrom::Start(8)).map_err(io_err)?;
    if file.read_exact(&mut size_field).is_ok() && u64_at(&size_field, big_endian) == 16 {
        return Err(ImportError::Corrupt {
            path: name.to_string(),
            reason: "pipe-mode perf.data (recorded with `perf record -o -`); scalprof reads file-mode perf.data: record with `perf record -o FILE` (or convert it: `perf inject -i IN -o OUT.data`)".into(),
            offset: 8,
            size,
        });
    }
    let mut header = [0u8; 104];
    file.seek(SeekFrom::Start(0)).map_err(io_err)?;
    if file.read_exact(&mut header).is_err() {
        return Err(ImportError::Corrupt {
            path: name.to_string(),
            reason: "truncated: shorter than perf's 104-byte file header".into(),
            offset: 0,
            size,
        });
    }
    Ok((header, big_endian))
}

/// The error for a file linux-perf-data could not read at about `offset`: a read past its
/// end is said as a truncation.
fn corrupt_at(name: &str, size: u64, reason: String, offset: u64) -> ImportError {
    let reason = if reason.contains("failed to fill whole buffer") || offset >= size {
        if offset > size {
            format!(
                "truncated: its header refers to byte {offset}, but the file ends at byte {size}"
            )
        } else {
            "truncated: it ends in the middle of a header or record".to_string()
        }
    } else {
        reason
    };
    ImportError::Corrupt {
        path: name.to_string(),
        reason,
        offset: offset.min(size),
        size,
    }
}

/// What the parsed header says about the recording: its first event and the machine.
fn header_info(
    name: &str,
    perf_file: &linux_perf_data::PerfFile,
) -> Result<ImportInfo, ImportError> {
    let attrs = perf_file.event_attributes();
    let Some(first) = attrs.first() else {
        return Err(ImportError::NoEvents {
            path: name.to_string(),
        });
    };
    Ok(ImportInfo {
        event: first.name.clone().unwrap_or_else(|| "unknown".into()),
        frequency: match first.attr.sampling_policy {
            SamplingPolicy::Frequency(f) => f,
            _ => 0,
        },
        os_release: perf_file.os_release().ok().flatten().map(str::to_string),
        hostname: perf_file.hostname().ok().flatten().map(str::to_string),
        cpu_desc: perf_file.cpu_desc().ok().flatten().map(str::to_string),
        nr_cpus: perf_file.nr_cpus().ok().flatten().map(|n| n.nr_cpus_online),
        cmdline: perf_file
            .cmdline()
            .ok()
            .flatten()
            .map(|v| v.into_iter().map(str::to_string).collect())
            .unwrap_or_default(),
        ..Default::default()
    })
}

fn u64_at(b: &[u8], big_endian: bool) -> u64 {
    let b: [u8; 8] = b[..8].try_into().expect("8 bytes");
    if big_endian {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

/// The feature sections' (offset, size) table follows the data section, one entry per
/// feature bit set in the header; each must lie inside the file too (a corrupt size there
/// would otherwise become a huge allocation).
fn check_feature_table<R: Read + Seek>(
    file: &mut R,
    h: &[u8; 104],
    big_endian: bool,
    file_size: u64,
) -> Result<(), (String, u64)> {
    let features: u32 = h[72..104].iter().map(|b| b.count_ones()).sum();
    if features == 0 {
        return Ok(());
    }
    let table = u64_at(&h[40..], big_endian).saturating_add(u64_at(&h[48..], big_endian));
    let table_end = table.saturating_add(u64::from(features) * 16);
    if table_end > file_size {
        return Err((
            format!("truncated: the feature table ends at byte {table_end}, but the file ends at byte {file_size}"),
            table,
        ));
    }
    let mut buf = vec![0u8; features as usize * 16];
    file.seek(SeekFrom::Start(table))
        .and_then(|_| file.read_exact(&mut buf))
        .map_err(|e| (format!("cannot read the feature table: {e}"), table))?;
    let bits = (0..256usize).filter(|b| h[72 + b / 8] & (1 << (b % 8)) != 0);
    for ((i, entry), bit) in buf.chunks_exact(16).enumerate().zip(bits) {
        let (start, len) = (u64_at(entry, big_endian), u64_at(&entry[8..], big_endian));
        if start.checked_add(len).is_none_or(|end| end > file_size) {
            return Err((
                format!("feature section {i} (offset {start}, size {len}) lies outside the file"),
                table + i as u64 * 16,
            ));
        }
        // Sections whose element counts the parser trusts for its allocations.
        if bit == FEATURE_CMDLINE || bit == FEATURE_EVENT_DESC {
            let mut data = vec![0u8; len as usize];
            file.seek(SeekFrom::Start(start))
                .and_then(|_| file.read_exact(&mut data))
                .map_err(|e| (format!("cannot read feature section {bit}: {e}"), start))?;
            let ok = if bit == FEATURE_CMDLINE {
                check_string_list(&data, big_endian)
            } else {
                check_event_desc(&data, big_endian)
            };
            if !ok {
                let what = if bit == FEATURE_CMDLINE {
                    "command line"
                } else {
                    "event description"
                };
                return Err((
                    format!("the {what} section is malformed (its counts exceed its size)"),
                    start,
                ));
            }
        }
    }
    Ok(())
}

/// Each entry of the attributes section (and of the old event-types section) ends with
/// the (offset, size) of a list of event ids; those lists must lie inside the file.
fn check_id_sections<R: Read + Seek>(
    file: &mut R,
    h: &[u8; 104],
    big_endian: bool,
    file_size: u64,
) -> Result<(), (String, u64)> {
    let attr_size = u64_at(&h[16..], big_endian);
    // attrs: entries of attr_size bytes, ids at the end; event types: attr + 16-byte ids.
    for (name, off, stride, ids_at) in [
        (
            "attributes",
            24usize,
            attr_size,
            attr_size.saturating_sub(16),
        ),
        ("event types", 56, attr_size + 16, attr_size),
    ] {
        let (start, len) = (
            u64_at(&h[off..], big_endian),
            u64_at(&h[off + 8..], big_endian),
        );
        if len == 0 || stride < 16 {
            continue;
        }
        let mut data = vec![0u8; len as usize];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(&mut data))
            .map_err(|e| (format!("cannot read the {name} section: {e}"), start))?;
        for (i, entry) in data.chunks_exact(stride as usize).enumerate() {
            if u32_at(entry, 4, big_endian).is_none_or(|size| !attr_size_is_valid(size)) {
                return Err((
                    format!("entry {i} of the {name} section has an invalid perf_event_attr size"),
                    start + i as u64 * stride,
                ));
            }
            let ids = &entry[ids_at as usize..ids_at as usize + 16];
            let (o, l) = (u64_at(ids, big_endian), u64_at(&ids[8..], big_endian));
            if l != 0 && o.checked_add(l).is_none_or(|end| end > file_size) {
                return Err((
                    format!("entry {i} of the {name} section points to ids outside the file (offset {o}, size {l})"),
                    start + i as u64 * stride,
                ));
            }
        }
    }
    Ok(())
}

/// A perf_event_attr's own `size` field must be one of the published layouts
/// (PERF_ATTR_SIZE_VER0..VER7) or larger than the newest: a size between two layouts
/// makes the parser stop mid-attribute and read the following fields from the wrong place.
fn attr_size_is_valid(size: u32) -> bool {
    matches!(size, 64 | 72 | 80 | 96 | 104 | 112 | 120 | 128)
        || (size > 128 && size.is_multiple_of(8) && size <= 4096)
}

/// Walks the record headers of the data section: every record must fit in it, and an
/// AUXTRACE record's trailing data (whose size the parser allocates) too. Gives the byte
/// offset of the first record that does not.
fn check_records<R: Read + Seek>(
    file: &mut R,
    h: &[u8; 104],
    big_endian: bool,
) -> Result<(), (String, u64)> {
    const PERF_RECORD_AUXTRACE: u32 = 71;
    const PERF_RECORD_COMPRESSED: u32 = 81;
    const PERF_RECORD_COMPRESSED2: u32 = 83;
    let mut inflation = Inflation::default();
    let start = u64_at(&h[40..], big_endian);
    let len = u64_at(&h[48..], big_endian);
    if len == 0 {
        return Ok(());
    }
    // check_header made sure the section lies inside the file: no overflow from here on.
    let end = start + len;
    file.seek(SeekFrom::Start(start))
        .map_err(|e| (format!("cannot read the data section: {e}"), start))?;
    let mut r = std::io::BufReader::with_capacity(1 << 16, file);
    let mut pos = start;
    let mut hdr = [0u8; 16];
    while pos + 8 <= end {
        r.read_exact(&mut hdr[..8])
            .map_err(|_| ("truncated: the data section ends early".to_string(), pos))?;
        let ty = u32_at(&hdr, 0, big_endian).unwrap_or(0);
        let size = u64::from(if big_endian {
            u16::from_be_bytes([hdr[6], hdr[7]])
        } else {
            u16::from_le_bytes([hdr[6], hdr[7]])
        });
        if size < 8 || size > end - pos {
            return Err((format!("the record at byte {pos} (type {ty}, {size} bytes) does not fit the data section"), pos));
        }
        if ty == PERF_RECORD_COMPRESSED || ty == PERF_RECORD_COMPRESSED2 {
            let mut body = vec![0u8; size as usize - 8];
            r.read_exact(&mut body)
                .map_err(|_| ("truncated: the data section ends early".to_string(), pos))?;
            // COMPRESSED2 has a u64 of its data's size before the data.
            let data = if ty == PERF_RECORD_COMPRESSED2 {
                body.get(8..).unwrap_or_default()
            } else {
                &body[..]
            };
            inflation.add(data).map_err(|reason| {
                (
                    format!("the compressed record at byte {pos}: {reason}"),
                    pos,
                )
            })?;
            pos += size;
            continue;
        }
        // Bytes of the record body already read, and trailing AUX data after the record.
        let (mut read, mut aux) = (0u64, 0u64);
        if ty == PERF_RECORD_AUXTRACE && size >= 16 {
            r.read_exact(&mut hdr[8..16])
                .map_err(|_| ("truncated: the data section ends early".to_string(), pos))?;
            read = 8;
            aux = u64_at(&hdr[8..], big_endian);
            if aux > end - pos - size {
                return Err((format!("the AUX trace record at byte {pos} claims {aux} bytes beyond the data section"), pos));
            }
        }
        let skip = size - 8 - read + aux;
        let skipped = std::io::copy(&mut (&mut r).take(skip), &mut std::io::sink())
            .map_err(|e| (format!("cannot read the data section: {e}"), pos))?;
        if skipped < skip {
            return Err(("truncated: the data section ends early".to_string(), pos));
        }
        pos += size + aux;
    }
    Ok(())
}

/// What a file's compressed records (`perf record -z`) inflate to, measured by inflating
/// them into a scratch buffer before the parser does: it inflates each record whole and
/// queues every record, so 18 KB of zstd can become 2.6 million samples and an 18 KB
/// file with six such records, more memory than the machine has.
#[derive(Default)]
struct Inflation {
    dctx: Option<zstd_safe::DCtx<'static>>,
    packed: u64,
    inflated: u64,
}

/// Inflated record bytes allowed in all...
const MAX_INFLATED_RECORDS: u64 = 2 << 30;
/// ...and, above [`INFLATE_FREE_RECORDS`], at most this many times their packed size
/// (perf's records compress 5–20 times; a bomb, thousands).
const MAX_RECORD_RATIO: u64 = 100;
const INFLATE_FREE_RECORDS: u64 = 64 << 20;

impl Inflation {
    fn add(&mut self, data: &[u8]) -> Result<(), String> {
        let dctx = self.dctx.get_or_insert_with(zstd_safe::DCtx::create);
        let mut scratch = vec![0u8; 1 << 17];
        let mut input = zstd_safe::InBuffer::around(data);
        self.packed += data.len() as u64;
        loop {
            let mut out = zstd_safe::OutBuffer::around(&mut scratch[..]);
            dctx.decompress_stream(&mut out, &mut input)
                .map_err(|code| format!("not valid zstd ({})", zstd_safe::get_error_name(code)))?;
            let produced = out.pos() as u64;
            self.inflated += produced;
            if self.inflated > MAX_INFLATED_RECORDS
                || (self.inflated > INFLATE_FREE_RECORDS
                    && self.inflated / self.packed.max(1) > MAX_RECORD_RATIO)
            {
                return Err(format!(
                    "the compressed records inflate past {} MiB from {} KiB ({}× or more; \
                     the cap is {} MiB, or {MAX_RECORD_RATIO}×): a decompression bomb, or a \
                     recording too large to import at once",
                    self.inflated >> 20,
                    self.packed >> 10,
                    self.inflated / self.packed.max(1),
                    MAX_INFLATED_RECORDS >> 20,
                ));
            }
            if produced < scratch.len() as u64 && input.pos() == data.len() {
                return Ok(());
            }
        }
    }
}

/// perf header feature bits (tools/perf/util/header.h).
const FEATURE_CMDLINE: usize = 11;
const FEATURE_EVENT_DESC: usize = 12;

fn u32_at(b: &[u8], off: usize, big_endian: bool) -> Option<u32> {
    let b: [u8; 4] = b.get(off..off + 4)?.try_into().ok()?;
    Some(if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

/// `u32 nr; { u32 len; char str[len]; } [nr]`: every string inside the section.
fn check_string_list(d: &[u8], be: bool) -> bool {
    let Some(nr) = u32_at(d, 0, be) else {
        return false;
    };
    let mut off = 4usize;
    for _ in 0..nr {
        let Some(len) = u32_at(d, off, be) else {
            return false;
        };
        off = off.saturating_add(4 + len as usize);
        if off > d.len() {
            return false;
        }
    }
    true
}

/// `u32 nr; u32 attr_size; { attr; u32 nr_ids; string; u64 ids[nr_ids]; } [nr]`.
fn check_event_desc(d: &[u8], be: bool) -> bool {
    let (Some(nr), Some(attr_size)) = (u32_at(d, 0, be), u32_at(d, 4, be)) else {
        return false;
    };
    if !(64..=4096).contains(&attr_size) {
        return nr == 0;
    }
    let mut off = 8usize;
    for _ in 0..nr {
        if u32_at(d, off + 4, be).is_none_or(|size| !attr_size_is_valid(size)) {
            return false;
        }
        off = off.saturating_add(attr_size as usize);
        let Some(nr_ids) = u32_at(d, off, be) else {
            return false;
        };
        let Some(len) = u32_at(d, off + 4, be) else {
            return false;
        };
        off = off
            .saturating_add(8 + len as usize)
            .saturating_add(8 * nr_ids as usize);
        if off > d.len() {
            return false;
        }
    }
    true
}

/// Checks the perf.data file header (tools/perf/Documentation/perf.data-file-format.txt):
/// magic, header size, attr size, then the attrs, data and event-types sections as
/// (offset, size) pairs. Every section must lie inside the file; otherwise the file was
/// truncated or corrupted, and we say which section and where, before any parser follows
/// the offsets. Returns the reason and the byte offset of the offending field.
fn check_header(h: &[u8; 104], big_endian: bool, file_size: u64) -> Result<(), (String, u64)> {
    let at = |off: usize| u64_at(&h[off..], big_endian);
    let attr_size = at(16);
    // PERF_ATTR_SIZE_VER0 is 64 bytes; nothing real is larger than a page.
    if !(64..=4096).contains(&attr_size) {
        return Err((format!("implausible attribute size {attr_size}"), 16));
    }
    for (name, off) in [("attributes", 24usize), ("data", 40), ("event types", 56)] {
        let (start, len) = (at(off), at(off + 8));
        if len == 0 {
            continue;
        }
        match start.checked_add(len) {
            Some(end) if end <= file_size => {}
            Some(end) => {
                return Err((
                    format!("truncated: the {name} section ends at byte {end}, but the file ends at byte {file_size}"),
                    off as u64,
                ))
            }
            None => return Err((format!("the {name} section's offset and size overflow"), off as u64)),
        }
    }
    Ok(())
}
