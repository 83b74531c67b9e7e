//! Running out of memory is said in one line, not as an abort.
//!
//! Rust's default answer to a failed allocation is "memory allocation of N bytes failed" and
//! SIGABRT (exit 134, a core dump where they are on). Under an address-space limit
//! (`ulimit -v`) that is an ordinary way for a big import or report to end, and the user
//! needs to hear which limit stopped it and how to lift it. [`SayOutOfMemory`] wraps the
//! system allocator; when an allocation fails it writes that line to standard error and
//! ends the process with exit code 1.
//!
//! Nothing on that path allocates: the line is formatted into a buffer on the stack,
//! written with `write(2)`, and the process ends with `_exit(2)` (no destructors, no
//! buffered output flushed: what the store committed is kept, SQLite sees the rest as an
//! interrupted transaction).
//!
//! Fallible requests end the same way here: `try_reserve`, and `std::fs::read`, which
//! uses it, would have said "out of memory" without the limit or the way out.
//!
//! A parser child ([`scalprof_debuginfo::sandbox`]) keeps Rust's default: it runs under its
//! own memory cap, asks for some buffers with `try_reserve` (which must see the failure),
//! and its parent reads an abort as "ran out of memory" (naming `ulimit -v` when that was
//! the limit the child ran into).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// The global allocator: [`System`], with a failed allocation said and the process ended.
pub struct SayOutOfMemory;

/// Off in a parser child, where a failure goes back to the caller (see the module's text).
static SAY_AND_EXIT: AtomicBool = AtomicBool::new(true);

/// From now on a failed allocation is handed back to the caller, as with [`System`]: for
/// a parser child, whose parent reads its abort.
pub fn leave_to_std() {
    SAY_AND_EXIT.store(false, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the same arguments and returns its result;
// the only addition, on a null result, never returns.
unsafe impl GlobalAlloc for SayOutOfMemory {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        checked(System.alloc(layout), layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        checked(System.alloc_zeroed(layout), layout.size())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        checked(System.realloc(ptr, layout, new_size), new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

fn checked(ptr: *mut u8, size_bytes: usize) -> *mut u8 {
    if ptr.is_null() && SAY_AND_EXIT.load(Ordering::Relaxed) {
        say_and_exit(size_bytes);
    }
    ptr
}

/// A line's worth of bytes on the stack; what does not fit is dropped.
struct Line {
    bytes: [u8; 512],
    len: usize,
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

#[cold]
fn say_and_exit(size_bytes: usize) -> ! {
    let mut line = Line {
        bytes: [0; 512],
        len: 0,
    };
    let _ = write_message(&mut line, size_bytes, address_space_limit_bytes());
    // Keep room for the newline: a cut line still ends as a line.
    line.len = line.len.min(line.bytes.len() - 1);
    line.bytes[line.len] = b'\n';
    line.len += 1;
    // SAFETY: write(2) reads `len` initialized bytes of a live buffer; _exit(2) ends the
    // process without running anything of it.
    unsafe {
        libc::write(2, line.bytes.as_ptr().cast(), line.len);
        libc::_exit(2);
    }
}

/// RLIMIT_AS (the limit `ulimit -v` sets, in KiB there), or None when there is none.
fn address_space_limit_bytes() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(limit.rlim_cur)
}

/// The line said, without its newline.
fn write_message(
    out: &mut impl std::fmt::Write,
    size_bytes: usize,
    limit_bytes: Option<u64>,
) -> std::fmt::Result {
    write!(
        out,
        "scalprof: error: {}an allocation of ",
        scalprof_model::signal::OUT_OF_MEMORY
    )?;
    write_size(out, size_bytes as u64)?;
    write!(out, " failed")?;
    match limit_bytes {
        Some(bytes) => {
            write!(out, " under the address-space limit (RLIMIT_AS) of ")?;
            write_size(out, bytes)?;
            write!(
                out,
                " (`ulimit -v {kib}`); raise it (`ulimit -v unlimited`, or well above {kib}) \
                 and run again",
                kib = bytes >> 10
            )
        }
        None => write!(
            out,
            " with no address-space limit (`ulimit -v` is unlimited): the machine, or the \
             memory cgroup scalprof runs in, has no memory left; free some and run again"
        ),
    }
}

/// `bytes` in the largest binary unit that keeps it at least 1.
fn write_size(out: &mut impl std::fmt::Write, bytes: u64) -> std::fmt::Result {
    match bytes {
        b if b >= 1 << 30 => write!(out, "{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => write!(out, "{} MiB", b >> 20),
        b if b >= 1 << 10 => write!(out, "{} KiB", b >> 10),
        b => write!(out, "{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    fn message(size_bytes: usize, limit: Option<u64>) -> String {
        let mut s = String::new();
        write_message(&mut s, size_bytes, limit).unwrap();
        s
    }

    #[test]
    fn the_message_names_the_limit_and_how_to_raise_it() {
        let m = message(50_331_648, Some(400_000 << 10));
        assert_eq!(
            m,
            "scalprof: error: out of memory: an allocation of 48 MiB failed under the \
             address-space limit (RLIMIT_AS) of 390 MiB (`ulimit -v 400000`); raise it \
             (`ulimit -v unlimited`, or well above 400000) and run again"
        );
        assert!(m.len() < 511, "{} bytes: the line would be cut", m.len());
        let m = message(1 << 40, None);
        assert!(m.contains("no address-space limit"), "{m}");
        assert!(m.len() < 511, "{} bytes: the line would be cut", m.len());
    }

    #[test]
    fn a_line_longer_than_its_buffer_is_cut_not_overrun() {
        let mut line = Line {
            bytes: [0; 512],
            len: 0,
        };
        for _ in 0..100 {
            line.write_str("0123456789").unwrap();
        }
        assert_eq!(line.len, 512);
    }
}
