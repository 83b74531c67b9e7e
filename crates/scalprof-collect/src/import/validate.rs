//! Checks a perf.data file recorded elsewhere before linux-perf-data reads it. The parser
//! trusts the sizes and offsets it finds (for its allocations and seeks), so a file is
//! refused here when its magic, its header's sections, its feature table, its attribute
//! ids or its records' framing do not fit inside it, with the reason and the byte offset
//! where it goes wrong.

use std::io::{Read, Seek, SeekFrom};

/// Why a file is refused: the reason, and the byte offset of the offending field or record.
pub(super) type Refusal = (String, u64);

/// Why the file header could not be had: the file could not be read, or it is not a
/// file-mode perf.data.
pub(super) enum HeaderError {
    Io(std::io::Error),
    Refused(Refusal),
}

/// The file's 104-byte header and whether it is big-endian, once its magic says it is a
/// file-mode perf.data.
pub(super) fn read_file_header<R: Read + Seek>(
    file: &mut R,
) -> Result<([u8; 104], bool), HeaderError> {
    let mut magic = [0u8; 8];
    let mut n = 0;
    while n < 8 {
        match file.read(&mut magic[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(HeaderError::Io(e)),
        }
    }
    if n < 8 || !(magic == *b"PERFILE2" || magic == *b"2ELIFREP") {
        return Err(HeaderError::Refused((
            format!(
                "it does not start with perf's magic PERFILE2 (found {:?}); record with `perf record -o FILE`, not a pipe",
                String::from_utf8_lossy(&magic[..n])
            ),
            0,
        )));
    }
    let big_endian = magic == *b"2ELIFREP";
    // Pipe mode (`perf record -o -`): a 16-byte header (magic, size 16) and the records
    // follow, with the attributes as records; only file mode has the sections read here.
    let mut size_field = [0u8; 8];
    file.seek(SeekFrom::Start(8)).map_err(HeaderError::Io)?;
    if file.read_exact(&mut size_field).is_ok() && u64_at(&size_field, big_endian) == 16 {
        return Err(HeaderError::Refused((
            "pipe-mode perf.data (recorded with `perf record -o -`); scalprof reads file-mode perf.data: record with `perf record -o FILE` (or convert it: `perf inject -i IN -o OUT.data`)".into(),
            8,
        )));
    }
    let mut header = [0u8; 104];
    file.seek(SeekFrom::Start(0)).map_err(HeaderError::Io)?;
    if file.read_exact(&mut header).is_err() {
        return Err(HeaderError::Refused((
            "truncated: shorter than perf's 104-byte file header".into(),
            0,
        )));
    }
    Ok((header, big_endian))
}

/// Checks the header's sections, the feature table and the attribute ids; with `records`,
/// walks every record's framing too (needed only when the records are about to be parsed).
pub(super) fn check_file<R: Read + Seek>(
    file: &mut R,
    h: &[u8; 104],
    big_endian: bool,
    file_size: u64,
    records: bool,
) -> Result<(), Refusal> {
    check_header(h, big_endian, file_size)
        .and_then(|()| check_feature_table(file, h, big_endian, file_size))
        .and_then(|()| check_id_sections(file, h, big_endian, file_size))
        .and_then(|()| {
            if records {
                check_records(file, h, big_endian)
            } else {
                Ok(())
            }
        })
}

/// Checks the perf.data file header (tools/perf/Documentation/perf.data-file-format.txt):
/// magic, header size, attr size, then the attrs, data and event-types sections as
/// (offset, size) pairs. Every section must lie inside the file; otherwise the file was
/// truncated or corrupted, and we say which section and where, before any parser follows
/// the offsets. Returns the reason and the byte offset of the offending field.
fn check_header(h: &[u8; 104], big_endian: bool, file_size: u64) -> Result<(), Refusal> {
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

/// The feature sections' (offset, size) table follows the data section, one entry per
/// feature bit set in the header; each must lie inside the file too (a corrupt size there
/// would otherwise become a huge allocation).
fn check_feature_table<R: Read + Seek>(
    file: &mut R,
    h: &[u8; 104],
    big_endian: bool,
    file_size: u64,
) -> Result<(), Refusal> {
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

/// perf header feature bits (tools/perf/util/header.h).
const FEATURE_CMDLINE: usize = 11;
const FEATURE_EVENT_DESC: usize = 12;

/// Each entry of the attributes section (and of the old event-types section) ends with
/// the (offset, size) of a list of event ids; those lists must lie inside the file.
fn check_id_sections<R: Read + Seek>(
    file: &mut R,
    h: &[u8; 104],
    big_endian: bool,
    file_size: u64,
) -> Result<(), Refusal> {
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
) -> Result<(), Refusal> {
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

fn u64_at(b: &[u8], big_endian: bool) -> u64 {
    let b: [u8; 8] = b[..8].try_into().expect("8 bytes");
    if big_endian {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

fn u32_at(b: &[u8], off: usize, big_endian: bool) -> Option<u32> {
    let b: [u8; 4] = b.get(off..off + 4)?.try_into().ok()?;
    Some(if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::{
        attr_size_is_valid, check_file, read_file_header, HeaderError, Refusal, FEATURE_CMDLINE,
        FEATURE_EVENT_DESC,
    };

    /// Header fields: the attribute size, then the (offset, size) of each section, then
    /// the feature bits (perf.data-file-format.txt).
    const ATTR_SIZE_FIELD: usize = 16;
    const ATTRIBUTES: usize = 24;
    const DATA: usize = 40;
    const EVENT_TYPES: usize = 56;
    const FEATURE_BITS: usize = 72;
    /// One attributes entry: a 64-byte perf_event_attr (PERF_ATTR_SIZE_VER0), then the
    /// (offset, size) of its ids.
    const ATTR_ENTRY: u64 = 80;
    const ATTR_AT: usize = 104;
    const PERF_RECORD_SAMPLE: u32 = 9;
    const PERF_RECORD_AUXTRACE: u32 = 71;
    const PERF_RECORD_COMPRESSED: u32 = 81;
    const PERF_RECORD_COMPRESSED2: u32 = 83;

    /// A small file-mode perf.data, written field by field in its byte order, and where
    /// its parts are.
    struct PerfData {
        bytes: Vec<u8>,
        big_endian: bool,
        data_at: u64,
        table: u64,
        cmdline: u64,
        event_desc: u64,
    }

    impl PerfData {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }

        fn raw(&mut self, b: &[u8]) -> &mut Self {
            self.bytes.extend_from_slice(b);
            self
        }

        fn zeros(&mut self, n: usize) -> &mut Self {
            self.bytes.resize(self.bytes.len() + n, 0);
            self
        }

        fn put16(&mut self, x: u16) -> &mut Self {
            let b = if self.big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            };
            self.raw(&b)
        }

        fn put32(&mut self, x: u32) -> &mut Self {
            let b = if self.big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            };
            self.raw(&b)
        }

        fn put64(&mut self, x: u64) -> &mut Self {
            let b = if self.big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            };
            self.raw(&b)
        }

        fn set32(&mut self, at: u64, x: u32) {
            let b = if self.big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            };
            self.bytes[at as usize..at as usize + 4].copy_from_slice(&b);
        }

        fn set64(&mut self, at: u64, x: u64) {
            let b = if self.big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            };
            self.bytes[at as usize..at as usize + 8].copy_from_slice(&b);
        }

        /// A 64-byte perf_event_attr: its type, its own size, the rest zero.
        fn attr(&mut self) -> &mut Self {
            self.put32(0).put32(64).zeros(56)
        }

        /// A record's 8-byte header; the caller writes the rest of its `size` bytes.
        fn record(&mut self, ty: u32, size: usize) -> &mut Self {
            self.put32(ty).put16(0).put16(size as u16)
        }

        fn set_feature_bit(&mut self, bit: usize) {
            self.bytes[FEATURE_BITS + bit / 8] |= 1 << (bit % 8);
        }
    }

    /// A well-formed file: one attribute with one id, the data section's records written
    /// by `records`, and a command line and an event description as its feature sections.
    fn perf_data(big_endian: bool, records: impl FnOnce(&mut PerfData)) -> PerfData {
        let mut f = PerfData {
            bytes: Vec::new(),
            big_endian,
            data_at: 0,
            table: 0,
            cmdline: 0,
            event_desc: 0,
        };
        f.raw(if big_endian { b"2ELIFREP" } else { b"PERFILE2" });
        f.put64(104).put64(ATTR_ENTRY);
        f.put64(ATTR_AT as u64).put64(ATTR_ENTRY);
        f.put64(0).put64(0).put64(0).put64(0).zeros(32);
        f.set_feature_bit(FEATURE_CMDLINE);
        f.set_feature_bit(FEATURE_EVENT_DESC);
        let ids = ATTR_AT as u64 + ATTR_ENTRY;
        f.attr().put64(ids).put64(8).put64(42);
        f.data_at = f.len();
        records(&mut f);
        f.set64(DATA as u64, f.data_at);
        f.set64(DATA as u64 + 8, f.len() - f.data_at);
        // The feature table follows the data section: one entry per bit, in bit order.
        f.table = f.len();
        f.zeros(32);
        f.cmdline = f.len();
        f.put32(2).put32(8).raw(b"scalprof").put32(4).raw(b"run\0");
        f.event_desc = f.len();
        f.put32(1).put32(64).attr();
        f.put32(1).put32(8).raw(b"cycles\0\0").put64(42);
        let (table, cmdline, event_desc, end) = (f.table, f.cmdline, f.event_desc, f.len());
        f.set64(table, cmdline);
        f.set64(table + 8, event_desc - cmdline);
        f.set64(table + 16, event_desc);
        f.set64(table + 24, end - event_desc);
        f
    }

    /// A well-formed little-endian file with one sample record.
    fn one_sample() -> PerfData {
        perf_data(false, |f| {
            f.record(PERF_RECORD_SAMPLE, 16).put64(7);
        })
    }

    /// A zstd frame of `len` zero bytes in RLE blocks (RFC 8878, 3.1.1.2): 4 bytes for
    /// each 128 KiB, so it inflates tens of thousands of times.
    fn zstd_zeros(len: usize) -> Vec<u8> {
        const BLOCK: usize = 128 << 10;
        // The magic; no content size, no checksum; a 128 KiB window (2^(10 + 7)).
        let mut z = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3];
        let mut left = len;
        loop {
            let n = left.min(BLOCK);
            left -= n;
            // Block_Size, Block_Type 1 (RLE), Last_Block.
            let header = (n as u32) << 3 | 1 << 1 | u32::from(left == 0);
            z.extend_from_slice(&header.to_le_bytes()[..3]);
            z.push(0);
            if left == 0 {
                return z;
            }
        }
    }

    /// What the validator says of `bytes` when the file's size is `file_size`, its
    /// records walked.
    fn check_bytes(bytes: &[u8], file_size: u64) -> Result<(), Refusal> {
        let mut file = Cursor::new(bytes);
        let (h, big_endian) = match read_file_header(&mut file) {
            Ok(header) => header,
            Err(HeaderError::Refused(refusal)) => return Err(refusal),
            Err(HeaderError::Io(e)) => panic!("reading from memory failed: {e}"),
        };
        check_file(&mut file, &h, big_endian, file_size, true)
    }

    fn check(f: &PerfData) -> Result<(), Refusal> {
        check_bytes(&f.bytes, f.len())
    }

    /// The reason and offset of a refusal, checking the reason says `says`.
    fn refused(f: &PerfData, says: &str) -> u64 {
        let (reason, offset) = check(f).expect_err("the file is refused");
        assert!(reason.contains(says), "{reason:?} does not say {says:?}");
        offset
    }

    #[test]
    fn a_well_formed_file_is_accepted_in_either_byte_order() {
        for big_endian in [false, true] {
            let f = perf_data(big_endian, |f| {
                f.record(PERF_RECORD_SAMPLE, 16).put64(7);
                // An AUX trace record and the 16 bytes of trace that follow it.
                f.record(PERF_RECORD_AUXTRACE, 48)
                    .put64(16)
                    .zeros(32)
                    .zeros(16);
                let z = zstd_zeros(1000);
                f.record(PERF_RECORD_COMPRESSED, 8 + z.len()).raw(&z);
                f.record(PERF_RECORD_COMPRESSED2, 16 + z.len())
                    .put64(z.len() as u64)
                    .raw(&z);
            });
            assert_eq!(check(&f), Ok(()), "big-endian: {big_endian}");
        }
    }

    #[test]
    fn a_file_without_perfs_magic_is_refused_at_byte_0() {
        for bytes in [&b"\x7fELF and the rest of a binary"[..], b"PER"] {
            let (reason, offset) = check_bytes(bytes, bytes.len() as u64).unwrap_err();
            assert!(reason.contains("perf's magic PERFILE2"), "{reason}");
            assert_eq!(offset, 0);
        }
    }

    #[test]
    fn a_pipe_mode_file_is_refused_with_the_command_that_converts_it() {
        let mut f = one_sample();
        f.set64(8, 16);
        assert_eq!(refused(&f, "perf inject -i IN -o OUT.data"), 8);
    }

    #[test]
    fn a_file_shorter_than_the_104_byte_header_is_refused() {
        let f = one_sample();
        let (reason, offset) = check_bytes(&f.bytes[..60], 60).unwrap_err();
        assert!(
            reason.contains("shorter than perf's 104-byte file header"),
            "{reason}"
        );
        assert_eq!(offset, 0);
    }

    #[test]
    fn an_implausible_attribute_size_is_refused() {
        for size in [63, 4097, u64::MAX] {
            let mut f = one_sample();
            f.set64(ATTR_SIZE_FIELD as u64, size);
            let says = format!("implausible attribute size {size}");
            assert_eq!(refused(&f, &says), ATTR_SIZE_FIELD as u64);
        }
    }

    #[test]
    fn a_section_past_the_end_of_the_file_is_refused_as_a_truncation() {
        for (name, field) in [
            ("attributes", ATTRIBUTES),
            ("data", DATA),
            ("event types", EVENT_TYPES),
        ] {
            let mut f = one_sample();
            let end = f.len();
            f.set64(field as u64, end - 8);
            f.set64(field as u64 + 8, 9);
            let says = format!(
                "truncated: the {name} section ends at byte {}, but the file ends at byte {end}",
                end + 1
            );
            assert_eq!(refused(&f, &says), field as u64);
        }
    }

    #[test]
    fn a_section_whose_offset_and_size_overflow_is_refused() {
        let mut f = one_sample();
        f.set64(ATTRIBUTES as u64, u64::MAX - 8);
        f.set64(ATTRIBUTES as u64 + 8, 16);
        let says = "the attributes section's offset and size overflow";
        assert_eq!(refused(&f, says), ATTRIBUTES as u64);
    }

    #[test]
    fn an_empty_section_is_not_followed() {
        let mut f = one_sample();
        f.set64(EVENT_TYPES as u64, u64::MAX);
        assert_eq!(check(&f), Ok(()));
    }

    #[test]
    fn a_feature_table_past_the_end_of_the_file_is_refused() {
        let mut f = one_sample();
        for bit in 0..256 {
            f.set_feature_bit(bit);
        }
        let says = format!(
            "the feature table ends at byte {}, but the file ends at byte {}",
            f.table + 256 * 16,
            f.len()
        );
        assert_eq!(refused(&f, &says), f.table);
    }

    #[test]
    fn a_feature_section_outside_the_file_or_overflowing_is_refused() {
        let mut f = one_sample();
        let end = f.len();
        f.set64(f.table + 16, end);
        let says = format!("feature section 1 (offset {end}, size ");
        assert_eq!(refused(&f, &says), f.table + 16);

        let mut f = one_sample();
        f.set64(f.table, u64::MAX);
        let says = format!("feature section 0 (offset {}, size ", u64::MAX);
        assert_eq!(refused(&f, &says), f.table);
    }

    #[test]
    fn a_command_line_whose_strings_run_past_it_is_refused() {
        let mut f = one_sample();
        // The second string claims one byte more than the section holds.
        f.set32(f.cmdline + 16, 5);
        let says = "the command line section is malformed";
        assert_eq!(refused(&f, says), f.cmdline);
    }

    #[test]
    fn an_event_description_whose_counts_exceed_it_is_refused() {
        let mut f = one_sample();
        // Two ids where the section holds one (nr_ids follows the count, the attribute
        // size and the 64-byte attribute).
        f.set32(f.event_desc + 8 + 64, 2);
        let says = "the event description section is malformed";
        assert_eq!(refused(&f, says), f.event_desc);

        let mut f = one_sample();
        // The described attribute's own size lies between two published layouts.
        f.set32(f.event_desc + 8 + 4, 100);
        assert_eq!(refused(&f, says), f.event_desc);
    }

    #[test]
    fn an_attribute_with_a_size_between_two_layouts_is_refused() {
        let mut f = one_sample();
        f.set32(ATTR_AT as u64 + 4, 100);
        let says = "entry 0 of the attributes section has an invalid perf_event_attr size";
        assert_eq!(refused(&f, says), ATTR_AT as u64);
    }

    #[test]
    fn attribute_ids_outside_the_file_are_refused() {
        for ids_at in [u64::MAX, 0] {
            let mut f = one_sample();
            let ids_at = if ids_at == 0 { f.len() - 4 } else { ids_at };
            f.set64(ATTR_AT as u64 + 64, ids_at);
            let says = format!(
                "entry 0 of the attributes section points to ids outside the file (offset {ids_at}, size 8)"
            );
            assert_eq!(refused(&f, &says), ATTR_AT as u64);
        }
    }

    #[test]
    fn event_type_ids_outside_the_file_are_refused() {
        let mut f = one_sample();
        // One event-types entry at the end: the attribute padded to the attributes'
        // entry size, then its ids' (offset, size).
        let entry = f.len();
        f.attr().zeros(16).put64(u64::MAX - 1).put64(8);
        f.set64(EVENT_TYPES as u64, entry);
        f.set64(EVENT_TYPES as u64 + 8, ATTR_ENTRY + 16);
        let says = "entry 0 of the event types section points to ids outside the file";
        assert_eq!(refused(&f, says), entry);
    }

    #[test]
    fn a_record_smaller_than_its_header_is_refused() {
        let f = perf_data(false, |f| {
            f.record(PERF_RECORD_SAMPLE, 4);
        });
        let says = format!(
            "the record at byte {} (type 9, 4 bytes) does not fit the data section",
            f.data_at
        );
        assert_eq!(refused(&f, &says), f.data_at);
    }

    #[test]
    fn a_record_that_runs_past_the_data_section_is_refused() {
        let f = perf_data(false, |f| {
            f.record(PERF_RECORD_SAMPLE, 16).put64(7);
            f.record(PERF_RECORD_SAMPLE, 64).put64(7);
        });
        let second = f.data_at + 16;
        let says = format!("the record at byte {second} (type 9, 64 bytes) does not fit");
        assert_eq!(refused(&f, &says), second);
    }

    #[test]
    fn an_aux_trace_record_claiming_data_past_the_section_is_refused() {
        let f = perf_data(false, |f| {
            f.record(PERF_RECORD_AUXTRACE, 48).put64(1 << 40).zeros(32);
        });
        let says = format!(
            "the AUX trace record at byte {} claims 1099511627776 bytes beyond the data section",
            f.data_at
        );
        assert_eq!(refused(&f, &says), f.data_at);
    }

    #[test]
    fn a_compressed_record_that_is_not_zstd_is_refused() {
        let f = perf_data(false, |f| {
            f.record(PERF_RECORD_COMPRESSED, 16).raw(b"not zstd");
        });
        let says = format!(
            "the compressed record at byte {}: not valid zstd",
            f.data_at
        );
        assert_eq!(refused(&f, &says), f.data_at);
    }

    #[test]
    fn a_decompression_bomb_is_refused_before_the_parser_inflates_it() {
        // 80 MiB of zeros in 2.5 KiB: past the 64 MiB allowed at any ratio.
        let z = zstd_zeros(80 << 20);
        let f = perf_data(false, |f| {
            f.record(PERF_RECORD_COMPRESSED, 8 + z.len()).raw(&z);
        });
        assert_eq!(refused(&f, "a decompression bomb"), f.data_at);
    }

    #[test]
    fn a_file_that_ends_inside_a_record_is_refused() {
        // No feature sections, so that the records are the last thing in the file; the
        // file then ends 4 bytes into the first record's body (it shrank after its size
        // was taken).
        let mut f = one_sample();
        f.bytes[FEATURE_BITS..FEATURE_BITS + 32].fill(0);
        let cut = &f.bytes[..f.data_at as usize + 12];
        let (reason, offset) = check_bytes(cut, f.len()).unwrap_err();
        assert!(
            reason.contains("truncated: the data section ends early"),
            "{reason}"
        );
        assert_eq!(offset, f.data_at);
    }

    #[test]
    fn records_are_walked_only_when_they_will_be_parsed() {
        let f = perf_data(false, |f| {
            f.record(PERF_RECORD_SAMPLE, 4);
        });
        let mut file = Cursor::new(&f.bytes[..]);
        let Ok((h, big_endian)) = read_file_header(&mut file) else {
            panic!("the header is well formed");
        };
        assert_eq!(
            check_file(&mut file, &h, big_endian, f.len(), false),
            Ok(())
        );
        assert!(check_file(&mut file, &h, big_endian, f.len(), true).is_err());
    }

    #[test]
    fn attribute_sizes_are_the_published_layouts_or_larger() {
        for size in [64, 72, 80, 96, 104, 112, 120, 128, 136, 4096] {
            assert!(attr_size_is_valid(size), "{size}");
        }
        for size in [0, 63, 65, 88, 100, 130, 4104] {
            assert!(!attr_size_is_valid(size), "{size}");
        }
    }
}
