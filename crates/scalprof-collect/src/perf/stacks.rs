//! Sample records copied out of the ring buffers: each user-stack copy cut to the bytes
//! the kernel filled and, once the thread has a full copy kept (its key), stored as the
//! words that differ from it ([`scalprof_model::stack_delta`]).

use std::collections::HashMap;

use scalprof_model::stack_delta::{self, Key};

use super::{b, USER_REGS_MASK};

/// Fills `dst` from the ring `data` at `pos` (taken modulo its size), wrapping at its end.
pub(super) fn copy_wrapped(data: &[u8], pos: u64, dst: &mut [u8]) {
    let n = data.len();
    let start = (pos % n as u64) as usize;
    let first = dst.len().min(n - start);
    dst[..first].copy_from_slice(&data[start..start + first]);
    let rest = dst.len() - first;
    dst[first..].copy_from_slice(&data[..rest]);
}

/// A record in the ring buffer, possibly wrapping around its end.
pub(super) struct RecordView<'a> {
    pub(super) data: &'a [u8],
    pub(super) pos: u64,
    pub(super) len: usize,
}

impl RecordView<'_> {
    pub(super) fn u64_at(&self, off: usize) -> Option<u64> {
        if off + 8 > self.len {
            return None;
        }
        let mut b = [0u8; 8];
        copy_wrapped(self.data, self.pos + off as u64, &mut b);
        Some(u64::from_ne_bytes(b))
    }

    /// Appends bytes `range` of the record to `out` (copied once: no zero-fill first).
    pub(super) fn append(&self, range: std::ops::Range<usize>, out: &mut Vec<u8>) {
        let size = self.data.len() as u64;
        let at = ((self.pos + range.start as u64) % size) as usize;
        let first = range.len().min(self.data.len() - at);
        out.extend_from_slice(&self.data[at..at + first]);
        out.extend_from_slice(&self.data[..range.len() - first]);
    }
}

/// What the reader keeps between records: each thread's key (its last full stack
/// copy), and scratch space.
#[derive(Default)]
pub(super) struct StackKeys {
    /// Whether copies are stored as differences (false: every copy whole).
    delta: bool,
    keys: HashMap<u32, Key>,
    stack: Vec<u8>,
    encoded: Vec<u8>,
}

/// Where a sample's stack copy lies in its record: the offset of its size field, of its
/// `dyn_size` field, `dyn_size`, the thread and the stack pointer.
struct StackLayout {
    size_off: usize,
    dyn_off: usize,
    dyn_size: usize,
    tid: u32,
    sp: Option<u64>,
}

/// The layout follows SAMPLE_TYPE (perf_event_open(2), "PERF_RECORD_SAMPLE"): header 8,
/// ip 8, pid/tid 8, time 8, cpu 8, period 8, callchain (nr and entries), user regs (abi
/// and the registers of USER_REGS_MASK in bit order), user stack (size, bytes, dyn_size).
fn stack_layout(rec: &RecordView<'_>) -> Option<StackLayout> {
    let tid = (rec.u64_at(16)? >> 32) as u32;
    let nr = rec.u64_at(48)? as usize;
    let mut off = 56usize.checked_add(nr.checked_mul(8)?)?;
    let abi = rec.u64_at(off)?;
    off += 8;
    let mut sp = None;
    if abi != 0 {
        #[cfg(target_arch = "x86_64")]
        {
            let below = USER_REGS_MASK & ((1u64 << b::PERF_REG_X86_SP) - 1);
            sp = rec.u64_at(off + 8 * below.count_ones() as usize);
        }
        off += 8 * USER_REGS_MASK.count_ones() as usize;
    }
    let size = rec.u64_at(off)? as usize;
    let dyn_off = off.checked_add(8)?.checked_add(size)?;
    let dyn_size = (rec.u64_at(dyn_off)? as usize).min(size);
    (size != 0).then_some(StackLayout {
        size_off: off,
        dyn_off,
        dyn_size,
        tid,
        sp,
    })
}

impl StackKeys {
    pub(super) fn new(delta: bool) -> StackKeys {
        StackKeys {
            delta,
            ..Default::default()
        }
    }

    /// Appends a sample record with its user-stack copy cut to the bytes the kernel filled
    /// (`dyn_size`, rounded up to 8; an 8 KiB copy of a shallow stack is mostly unused)
    /// and, when the thread has a key the copy differs little from, encoded against it.
    /// Either way the bytes are written once, into `out`: fresh memory per sample is what
    /// the reader thread pays most for.
    pub(super) fn append_sample(&mut self, rec: &RecordView<'_>, out: &mut Vec<u8>) {
        let Some(l) = stack_layout(rec) else {
            rec.append(0..rec.len, out);
            return;
        };
        let keep = l.dyn_size.div_ceil(8) * 8;
        let bytes = l.size_off + 8..l.size_off + 8 + keep;
        let start = out.len();
        rec.append(0..l.size_off, out);
        let sp = l.sp.filter(|_| self.delta && keep > 0);
        let mut encoded = false;
        if let Some(sp) = sp {
            self.stack.clear();
            rec.append(bytes.clone(), &mut self.stack);
            if let Some(key) = self.keys.get(&l.tid) {
                self.encoded.clear();
                let key_bytes = &out[key.pos..key.pos + key.len];
                encoded = stack_delta::encode(&self.stack, sp, key, key_bytes, &mut self.encoded)
                    && self.encoded.len() < l.dyn_size;
            }
            if encoded {
                out.extend_from_slice(&(self.encoded.len() as u64).to_ne_bytes());
                out.extend_from_slice(&self.encoded);
            } else {
                out.extend_from_slice(&(keep as u64).to_ne_bytes());
                let pos = out.len();
                out.extend_from_slice(&self.stack);
                self.keys.insert(l.tid, Key { pos, sp, len: keep });
            }
        } else {
            out.extend_from_slice(&(keep as u64).to_ne_bytes());
            rec.append(bytes, out);
        }
        out.extend_from_slice(&(l.dyn_size as u64).to_ne_bytes());
        rec.append(l.dyn_off + 8..rec.len, out);
        let total = (out.len() - start) as u16;
        out[start + 6..start + 8].copy_from_slice(&total.to_ne_bytes());
    }
}

/// The records of `records` (concatenated, as the reader keeps them) with every sample's
/// stack copy stored as the reader with differences on stores it: what a test compares
/// against the whole copies.
pub fn delta_encoded(records: &[u8]) -> Vec<u8> {
    let mut keys = StackKeys::new(true);
    let mut out = Vec::with_capacity(records.len());
    let mut pos = 0;
    while pos + 8 <= records.len() {
        let size = u16::from_ne_bytes([records[pos + 6], records[pos + 7]]) as usize;
        if size < 8 || pos + size > records.len() {
            break;
        }
        let view = RecordView {
            data: &records[pos..pos + size],
            pos: 0,
            len: size,
        };
        let kind = u32::from_ne_bytes(records[pos..pos + 4].try_into().expect("4 bytes"));
        if kind == b::PERF_RECORD_SAMPLE {
            keys.append_sample(&view, &mut out);
        } else {
            view.append(0..size, &mut out);
        }
        pos += size;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_copies_cross_the_end_of_the_buffer() {
        let data: Vec<u8> = (0..16).collect();
        let mut dst = [0u8; 6];
        copy_wrapped(&data, 13, &mut dst);
        assert_eq!(dst, [13, 14, 15, 0, 1, 2]);
        copy_wrapped(&data, 16 + 2, &mut dst);
        assert_eq!(dst, [2, 3, 4, 5, 6, 7]);
    }

    /// A sample record laid out as SAMPLE_TYPE says: header, ip, pid/tid, time, cpu,
    /// period, callchain, user regs, user stack (size, bytes, dyn_size).
    fn sample_record(stack_size: usize, dyn_size: usize) -> Vec<u8> {
        let mut r = Vec::new();
        let mut put = |v: u64| r.extend_from_slice(&v.to_ne_bytes());
        put(0); // header, patched below
        put(0x401000); // ip
        put((7u64 << 32) | 7); // pid, tid
        put(123); // time
        put(1); // cpu + reserved
        put(1_000_000); // period
        put(2); // callchain nr
        put(b::PERF_CONTEXT_KERNEL);
        put(0xffffffff81000000);
        put(2); // regs abi 64
        put(0x7ffd0000); // bp
        put(0x7ffc0000); // sp
        put(0x401000); // ip
        put(stack_size as u64);
        for i in 0..stack_size / 8 {
            put(i as u64);
        }
        put(dyn_size as u64);
        let len = r.len() as u16;
        r[0..4].copy_from_slice(&b::PERF_RECORD_SAMPLE.to_ne_bytes());
        r[6..8].copy_from_slice(&len.to_ne_bytes());
        r
    }

    #[test]
    fn trimming_keeps_only_the_copied_stack_and_stays_parseable() {
        use linux_perf_event_reader::{EventRecord, RawData, RawEventRecord, RecordType};
        let rec = sample_record(4096, 100);
        let mut out = Vec::new();
        let view = RecordView {
            data: &rec,
            pos: 0,
            len: rec.len(),
        };
        StackKeys::new(false).append_sample(&view, &mut out);
        // The same record wrapped around the end of a ring buffer trims the same way.
        let split = 200;
        let mut ring = rec[split..].to_vec();
        ring.extend_from_slice(&rec[..split]);
        let wrapped = RecordView {
            data: &ring,
            pos: (ring.len() - split) as u64,
            len: rec.len(),
        };
        let mut out2 = Vec::new();
        StackKeys::new(false).append_sample(&wrapped, &mut out2);
        assert_eq!(out, out2);
        // 100 bytes round up to 104.
        assert_eq!(out.len(), rec.len() - 4096 + 104);
        let size = u16::from_ne_bytes([out[6], out[7]]) as usize;
        assert_eq!(size, out.len());

        let info = super::super::test_parse_info();
        let raw = RawEventRecord::new(
            RecordType(b::PERF_RECORD_SAMPLE),
            0,
            RawData::Single(&out[8..]),
            info,
        );
        let EventRecord::Sample(s) = raw.parse().unwrap() else {
            panic!("not a sample")
        };
        let (stack, dyn_size) = s.user_stack.unwrap();
        assert_eq!((stack.len(), dyn_size), (104, 100));
        assert_eq!(
            s.user_regs.unwrap().get(b::PERF_REG_X86_SP as u64),
            Some(0x7ffc0000)
        );
        assert_eq!(s.period, Some(1_000_000));
        assert_eq!(s.callchain.unwrap().len(), 2);
    }

    #[test]
    fn a_threads_next_copy_is_kept_as_its_differences_and_rebuilt_exactly() {
        let first = sample_record(4096, 4096);
        // The same thread a moment later: two words of its stack changed.
        let mut second = first.clone();
        // The stack bytes, before the trailing dyn_size.
        let at = first.len() - 8 - 4096;
        second[at + 80..at + 88].copy_from_slice(&0xdead_beefu64.to_ne_bytes());
        second[at + 4000..at + 4008].copy_from_slice(&7u64.to_ne_bytes());
        let mut keys = StackKeys::new(true);
        let mut out = Vec::new();
        for rec in [&first, &second] {
            keys.append_sample(
                &RecordView {
                    data: rec,
                    pos: 0,
                    len: rec.len(),
                },
                &mut out,
            );
        }
        // The first is whole; the second holds its two words and where its key is.
        assert_eq!(&out[..first.len()], &first[..]);
        let rest = &out[first.len()..];
        assert!(
            rest.len() < first.len() - 4096 + 200,
            "{} bytes",
            rest.len()
        );
        assert_eq!(u16::from_ne_bytes([rest[6], rest[7]]) as usize, rest.len());
        // Its stack: size field, encoding, dyn_size (4096: larger than the size field).
        let size_off = at - 8;
        let size = u64::from_ne_bytes(rest[size_off..size_off + 8].try_into().unwrap()) as usize;
        let enc = &rest[size_off + 8..size_off + 8 + size];
        let dyn_size = u64::from_ne_bytes(rest[size_off + 8 + size..][..8].try_into().unwrap());
        assert_eq!(dyn_size, 4096);
        let mut rebuilt = Vec::new();
        assert!(stack_delta::decode(
            enc,
            0x7ffc0000,
            4096,
            &out,
            &mut rebuilt
        ));
        assert_eq!(&rebuilt[..], &second[at..at + 4096]);
        // The offline encoder stores the records the same way.
        let mut both = first.clone();
        both.extend_from_slice(&second);
        assert_eq!(delta_encoded(&both), out);
    }
}
