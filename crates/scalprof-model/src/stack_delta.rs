//! A user-stack copy kept as its difference from an earlier copy of the same thread.
//!
//! Every sample copies up to 8 KiB of the thread's stack for the unwinder, and a sampler
//! that keeps each copy writes that much fresh memory per sample: at 100k samples/s,
//! most of the reader's time went to faulting in new pages. Two samples of one thread
//! mostly copy the same memory (the outer frames, the thread's control block above them),
//! so the sampler keeps a full copy now and then (a key) and, for the samples after it,
//! only the 8-byte words that differ from the key at the same addresses. Decoding copies
//! the key and lays the changed words over it: the bytes are the sampled ones exactly.
//!
//! The encoded form replaces the stack bytes of a sample record held in memory (never a
//! file): `key position, key sp, key length` (u64 each), then runs of
//! `offset | length << 32` (u64) followed by `length` literal bytes, offsets from `sp`,
//! lengths multiples of 8. A record is encoded when its stack size field is smaller than
//! its `dyn_size` (the kernel never writes such a record: `dyn_size` ≤ size).
//!
//! Written here: no library keeps perf stack copies this way.

/// Where a thread's last full copy lies in the records buffer, and what it copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// Offset of the copy's first byte in the records buffer.
    pub pos: usize,
    /// The stack pointer it was copied at.
    pub sp: u64,
    /// Bytes copied (a multiple of 8).
    pub len: usize,
}

const HEAD: usize = 24;

/// Appends to `out` the encoding of `stack` (copied at `sp`; a multiple of 8 bytes)
/// against `key`, whose bytes are `key_bytes`, if it takes at most a quarter of the copy;
/// otherwise appends nothing and returns false (keep a full copy, the next key).
pub fn encode(stack: &[u8], sp: u64, key: &Key, key_bytes: &[u8], out: &mut Vec<u8>) -> bool {
    let budget = stack.len() / 4;
    let start = out.len();
    out.extend_from_slice(&(key.pos as u64).to_ne_bytes());
    out.extend_from_slice(&key.sp.to_ne_bytes());
    out.extend_from_slice(&(key.len as u64).to_ne_bytes());
    // The key's word at this copy's word i, if the two copies overlap on word bounds.
    let shift = sp.wrapping_sub(key.sp) as i64;
    let aligned = shift % 8 == 0 && key_bytes.len() >= key.len;
    let same = |i: usize| -> bool {
        if !aligned {
            return false;
        }
        let Some(at) = (i as i64 * 8).checked_add(shift) else {
            return false;
        };
        if at < 0 || at as usize + 8 > key.len {
            return false;
        }
        let at = at as usize;
        stack[i * 8..i * 8 + 8] == key_bytes[at..at + 8]
    };
    let words = stack.len() / 8;
    let mut i = 0;
    while i < words {
        if same(i) {
            i += 1;
            continue;
        }
        // A run of changed words; one unchanged word between two changed ones joins
        // them (its literal costs what a second run's header would).
        let from = i;
        let mut to = i + 1;
        while to < words {
            if !same(to) {
                to += 1;
            } else if to + 1 < words && !same(to + 1) {
                to += 2;
            } else {
                break;
            }
        }
        let bytes = (to - from) * 8;
        if out.len() - start + 8 + bytes > budget {
            out.truncate(start);
            return false;
        }
        let header = (from as u64 * 8) | ((bytes as u64) << 32);
        out.extend_from_slice(&header.to_ne_bytes());
        out.extend_from_slice(&stack[from * 8..to * 8]);
        i = to;
    }
    true
}

/// Rebuilds into `out` the `len` bytes of a stack copied at `sp` from its encoding `enc`;
/// `records` is the buffer its key's position refers to. False when the encoding does
/// not fit the buffer (`out` is then empty).
pub fn decode(enc: &[u8], sp: u64, len: usize, records: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let ok = decode_into(enc, sp, len, records, out).is_some();
    if !ok {
        out.clear();
    }
    ok
}

fn decode_into(enc: &[u8], sp: u64, len: usize, records: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(enc.get(at..at + 8)?.try_into().ok()?))
    };
    // perf copies at most 64 KiB of stack.
    if len > 1 << 16 {
        return None;
    }
    let (pos, key_sp, key_len) = (word(0)? as usize, word(8)?, word(16)? as usize);
    let key = records.get(pos..pos.checked_add(key_len)?)?;
    out.resize(len, 0);
    // The key's bytes at the addresses both copies cover.
    let shift = sp.wrapping_sub(key_sp) as i64;
    if shift % 8 == 0 {
        let (from, at) = if shift >= 0 {
            (0usize, shift as usize)
        } else {
            ((-shift) as usize, 0usize)
        };
        if from < len && at < key_len {
            let n = (len - from).min(key_len - at);
            out[from..from + n].copy_from_slice(&key[at..at + n]);
        }
    }
    let mut at = HEAD;
    while at < enc.len() {
        let header = word(at)?;
        let (off, bytes) = ((header & 0xffff_ffff) as usize, (header >> 32) as usize);
        let lit = enc.get(at + 8..at + 8 + bytes)?;
        out.get_mut(off..off.checked_add(bytes)?)?
            .copy_from_slice(lit);
        at += 8 + bytes;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack of `words` words with a recognizable pattern, changed where `changed`.
    fn stack(words: usize, seed: u64, changed: &[usize]) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..words {
            let w = if changed.contains(&i) {
                seed ^ (i as u64 * 0x9e37_79b9)
            } else {
                0x1000 + i as u64
            };
            v.extend_from_slice(&w.to_ne_bytes());
        }
        v
    }

    fn round_trip(cur: &[u8], sp: u64, key_sp: u64, key_bytes: &[u8]) -> Option<Vec<u8>> {
        // The key sits somewhere inside a larger records buffer.
        let mut records = vec![0xaau8; 40];
        let key = Key {
            pos: records.len(),
            sp: key_sp,
            len: key_bytes.len(),
        };
        records.extend_from_slice(key_bytes);
        records.extend_from_slice(&[0x55; 16]);
        let mut enc = Vec::new();
        if !encode(cur, sp, &key, key_bytes, &mut enc) {
            assert!(enc.is_empty(), "a refused encoding leaves nothing behind");
            return None;
        }
        assert!(
            enc.len() < cur.len(),
            "an encoding is smaller than the copy"
        );
        let mut out = Vec::new();
        assert!(decode(&enc, sp, cur.len(), &records, &mut out));
        Some(out)
    }

    #[test]
    fn a_copy_with_a_few_changed_words_comes_back_exactly() {
        let key = stack(1024, 1, &[]);
        let cur = stack(1024, 7, &[0, 1, 2, 40, 42, 500, 1023]);
        assert_eq!(
            round_trip(&cur, 0x7000, 0x7000, &key).as_deref(),
            Some(&cur[..])
        );
    }

    #[test]
    fn a_deeper_or_shallower_copy_shares_the_addresses_both_cover() {
        // This copy starts 64 bytes below the key's (a deeper call): its first 8 words
        // are not in the key and travel as literals.
        let key = stack(1024, 1, &[]);
        let mut cur = vec![0u8; 8192];
        cur[..64].copy_from_slice(&[0x11; 64]);
        cur[64..].copy_from_slice(&key[..8192 - 64]);
        assert_eq!(
            round_trip(&cur, 0x7000 - 64, 0x7000, &key).as_deref(),
            Some(&cur[..])
        );
        // 64 bytes above the key's (a shallower one): its last 8 words are past the key.
        let mut cur = key[64..].to_vec();
        cur.extend_from_slice(&[0x22; 64]);
        assert_eq!(
            round_trip(&cur, 0x7000 + 64, 0x7000, &key).as_deref(),
            Some(&cur[..])
        );
    }

    #[test]
    fn a_copy_too_different_from_its_key_is_kept_whole() {
        let key = stack(1024, 1, &[]);
        let changed: Vec<usize> = (0..1024).step_by(3).collect();
        let cur = stack(1024, 9, &changed);
        assert_eq!(round_trip(&cur, 0x7000, 0x7000, &key), None);
        // A stack pointer off the key's word grid shares nothing.
        assert_eq!(round_trip(&key, 0x7004, 0x7000, &key), None);
    }

    #[test]
    fn an_encoding_that_does_not_fit_its_buffer_is_refused() {
        let key_bytes = stack(64, 1, &[]);
        let key = Key {
            pos: 0,
            sp: 0x7000,
            len: key_bytes.len(),
        };
        let cur = stack(64, 3, &[5]);
        let mut enc = Vec::new();
        assert!(encode(&cur, 0x7000, &key, &key_bytes, &mut enc));
        let mut out = Vec::new();
        // The key is past the end of a shorter buffer.
        assert!(!decode(
            &enc,
            0x7000,
            cur.len(),
            &key_bytes[..100],
            &mut out
        ));
        assert!(out.is_empty());
        // A run past the end of the copy, and a cut encoding.
        let mut bad = enc.clone();
        bad[24..32].copy_from_slice(&((600u64) | (8u64 << 32)).to_ne_bytes());
        assert!(!decode(&bad, 0x7000, cur.len(), &key_bytes, &mut out));
        assert!(!decode(
            &enc[..enc.len() - 4],
            0x7000,
            cur.len(),
            &key_bytes,
            &mut out
        ));
        assert!(!decode(&enc[..10], 0x7000, cur.len(), &key_bytes, &mut out));
    }
}
