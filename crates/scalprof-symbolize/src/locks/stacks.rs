//! The copied user stacks of waiters and wakers, unwound with `.eh_frame` and named
//! through the process's mappings: which frames are the program's and which are the
//! locking machinery of libc and the loader.

use std::collections::HashMap;

use scalprof_model::locks::{RawLocks, StackSnapshot};

use crate::profile::{Symbols, UserSpace};

/// libc / dynamic loader / vDSO frames are the locking machinery of user space.
pub(crate) fn is_runtime_library(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    // scalprof's own interposer, preloaded to time the holds: a lock function of its own
    // wraps the C library's.
    file.starts_with("libscalprof-delay")
        || file.starts_with("libc.so")
        || file.starts_with("libpthread")
        || file.starts_with("ld-linux")
        || path.starts_with('[')
}

/// A stack copy's return addresses, innermost first, and its process's address space to
/// name them (built once per process). `None` when the copy's process map was not read.
pub(super) fn unwind_copy<'a>(
    raw: &RawLocks,
    s: &StackSnapshot,
    symbols: &mut Symbols,
    spaces: &'a mut HashMap<u32, UserSpace>,
) -> Option<(&'a UserSpace, Vec<u64>)> {
    let maps = raw.maps.get(&s.tgid)?;
    let space = spaces
        .entry(s.tgid)
        .or_insert_with(|| UserSpace::from_maps(maps, &mut symbols.files));
    let addrs = space.unwind(s.ip, s.sp, s.bp, &s.stack);
    Some((space, addrs))
}

/// The address to name for the `i`th return address of a stack, innermost first: return
/// addresses point after the call, so all but the innermost look up the byte before.
pub(super) fn lookup_address(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

/// The frames of a stack copy outside libc and the loader, innermost first (the first is
/// the function that waits), and the libc frames above them (they tell the kind of
/// wait). `None` when the copy's process map was not read.
pub(super) fn snapshot_frames(
    raw: &RawLocks,
    s: &StackSnapshot,
    symbols: &mut Symbols,
    spaces: &mut HashMap<u32, UserSpace>,
) -> Option<(Vec<String>, Vec<String>)> {
    let (space, addrs) = unwind_copy(raw, s, symbols, spaces)?;
    let mut libc = Vec::new();
    let mut own = Vec::new();
    for (i, &a) in addrs.iter().enumerate() {
        let Some((func, path)) = space.symbolize(lookup_address(i, a)) else {
            continue;
        };
        if is_runtime_library(&path) {
            if own.is_empty() && !libc.contains(&func) && libc.len() < 16 {
                libc.push(func);
            }
        } else {
            own.push(func);
        }
    }
    Some((own, libc))
}

/// A frame named only by its file and offset (`libsqlite3.so.0.8.6+0xaa1b4`: a stripped
/// library's internal function).
fn is_unnamed_frame(f: &str) -> bool {
    f.contains("+0x")
}

/// The function that waits, for a wait's name: the innermost frame outside libc; if a
/// stripped library left it unnamed, with the nearest named function that called it
/// (`libsqlite3.so.0.8.6+0xaa1b4 under sqlite3_step`).
pub(super) fn waiting_function(own: &[String]) -> Option<String> {
    let first = own.first()?;
    if !is_unnamed_frame(first) {
        return Some(first.clone());
    }
    Some(match own.iter().find(|f| !is_unnamed_frame(f)) {
        Some(named) => format!("{first} under {named}"),
        None => first.clone(),
    })
}
