//! Reading `perf.data` files recorded elsewhere (`perf record -g`, `--call-graph dwarf`)
//! with linux-perf-data. The records go to the same analysis as live samples.

use std::cell::Cell;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

use linux_perf_data::{PerfFileReader, PerfFileRecord};
use linux_perf_event_reader::{EventRecord, RawEventRecord, RecordType, SamplingPolicy};

mod validate;
use validate::HeaderError;

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

#[allow(clippy::disallowed_methods)] // opens: the perf.data the user named, checked regular and handed to a parser child
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
    let refused = |(reason, offset): validate::Refusal| ImportError::Corrupt {
        path: name.to_string(),
        reason,
        offset,
        size,
    };
    let (header, big_endian) = validate::read_file_header(&mut file).map_err(|e| match e {
        HeaderError::Io(source) => io_err(source),
        HeaderError::Refused(refusal) => refused(refusal),
    })?;
    validate::check_file(&mut file, &header, big_endian, size, handle.is_some())
        .map_err(refused)?;
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
