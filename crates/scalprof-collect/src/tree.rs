//! The workload's process tree as the BPF programs see it (`src/bpf/tree.bpf.h`): an
//! array map of 64-bit words, one bit per process id, which the programs test with an
//! inlined load at every context switch. User space sets the roots; the programs' fork
//! hook adds the children.

use libbpf_rs::{MapCore, MapFlags};

/// Words in the map (`TREE_WORDS`): the kernel's largest process id, 4 Mi, in 64-bit words.
const WORDS: u32 = 65536;

/// The word that holds `tgid`'s bit, and the bit.
fn place(tgid: u32) -> (u32, u64) {
    ((tgid >> 6) & (WORDS - 1), 1u64 << (tgid & 63))
}

/// Puts these processes in the tree. Call it before the programs attach (or while they
/// are detached): the word is read, or'ed and written back, which a fork hook running at
/// the same time could undo.
pub(crate) fn add(map: &dyn MapCore, tgids: &[u32]) -> Result<(), libbpf_rs::Error> {
    for &tgid in tgids {
        let (word, bit) = place(tgid);
        let key = word.to_ne_bytes();
        let old = map
            .lookup(&key, MapFlags::ANY)?
            .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
            .map_or(0, u64::from_ne_bytes);
        map.update(&key, &(old | bit).to_ne_bytes(), MapFlags::ANY)?;
    }
    Ok(())
}

/// Empties the tree (an array map's entries cannot be deleted, only zeroed): the map is
/// mappable (`BPF_F_MMAPABLE`), and zeroed through a shared mapping of its words; one
/// that cannot be mapped gets a batch update of every word (20 ms of a CPU here).
pub(crate) fn clear(map: &dyn MapCore) -> Result<(), libbpf_rs::Error> {
    if zero_mapped(map) {
        return Ok(());
    }
    let keys: Vec<u8> = (0..WORDS).flat_map(u32::to_ne_bytes).collect();
    let values = vec![0u8; WORDS as usize * 8];
    map.update_batch(&keys, &values, WORDS, MapFlags::ANY, MapFlags::ANY)
}

/// Zeroes the map's words through a shared mapping; false where it cannot be mapped.
fn zero_mapped(map: &dyn MapCore) -> bool {
    use std::os::fd::AsRawFd;
    let len = WORDS as usize * 8;
    // SAFETY: a fresh shared mapping of the map's value area, of the map's own size, that
    // nothing else in this process refers to; the kernel checks the fd and the size.
    let words = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            map.as_fd().as_raw_fd(),
            0,
        )
    };
    if words == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: `words` is the `len`-byte writable mapping made above, unmapped once
    // zeroed; the programs that also write it are detached (see `add`).
    unsafe {
        std::ptr::write_bytes(words.cast::<u8>(), 0, len);
        libc::munmap(words, len);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_id_has_its_own_bit() {
        assert_eq!(place(0), (0, 1));
        assert_eq!(place(63), (0, 1 << 63));
        assert_eq!(place(64), (1, 1));
        // The largest id the kernel gives (PID_MAX_LIMIT - 1) is in the last word.
        assert_eq!(place((4 << 20) - 1), (WORDS - 1, 1 << 63));
    }

    #[test]
    #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
    fn roots_are_added_beside_the_bits_already_set_and_a_clear_empties_every_word() {
        crate::test_support::require_root(
            "roots_are_added_beside_the_bits_already_set_and_a_clear_empties_every_word",
        );
        // A map shaped like tree.bpf.h's, created directly (no program needed).
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            map_flags: libbpf_sys::BPF_F_MMAPABLE,
            ..Default::default()
        };
        let map = libbpf_rs::MapHandle::create(
            libbpf_rs::MapType::Array,
            Some("tree_test"),
            4,
            8,
            WORDS,
            &opts,
        )
        .unwrap();
        let word = |w: u32| {
            let v = map
                .lookup(&w.to_ne_bytes(), MapFlags::ANY)
                .unwrap()
                .unwrap();
            u64::from_ne_bytes(v.try_into().unwrap())
        };
        add(&map, &[65, 64]).unwrap();
        // A second add to the same word keeps the bits already there (a fork's).
        add(&map, &[127, (4 << 20) - 1]).unwrap();
        assert_eq!(word(1), 1 | 2 | 1 << 63);
        assert_eq!(word(WORDS - 1), 1 << 63);
        assert_eq!(word(0), 0);
        // Zeroed through its mapping, not word by word.
        assert!(zero_mapped(&map));
        assert_eq!((word(1), word(WORDS - 1)), (0, 0));
        add(&map, &[64]).unwrap();
        clear(&map).unwrap();
        assert_eq!(word(1), 0);
    }
}
