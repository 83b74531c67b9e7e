//! One CPU's perf ring buffer, mapped and drained by the reader thread (written by hand:
//! perf-event-open-sys gives the raw ABI only).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

use super::maps::{self, MapTracker};
use super::stacks::{copy_wrapped, RecordView, StackKeys};
use super::{b, page_size};
use crate::{CollectError, ProfilingError};

/// One CPU's ring buffer.
pub(super) struct Ring {
    pub(super) fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by this struct and only touched by the thread holding it.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps `pages` of data (a power of two), or fewer if the locked-memory limit
    /// refuses them.
    pub(super) fn map(fd: OwnedFd, pages: usize) -> Result<Ring, CollectError> {
        let page = page_size();
        let tries = [pages, 1024, 256, 64, 16];
        for pages in tries.into_iter().filter(|&p| p <= pages.max(1024)) {
            let len = (pages + 1) * page;
            // SAFETY: mapping a perf event fd as its documented ring buffer.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if base != libc::MAP_FAILED {
                return Ok(Ring {
                    fd,
                    base: base.cast(),
                    len,
                });
            }
        }
        Err(ProfilingError::Map(std::io::Error::last_os_error()).into())
    }

    /// Drops what the buffer holds unread.
    pub(super) fn discard(&self) {
        let meta = self.base.cast::<b::perf_event_mmap_page>();
        // SAFETY: meta is the kernel-shared control page of our mapping; the tail is
        // written after the head it copies (release).
        unsafe {
            let head = std::ptr::read_volatile(std::ptr::addr_of!((*meta).data_head));
            fence(Ordering::Release);
            std::ptr::write_volatile(std::ptr::addr_of_mut!((*meta).data_tail), head);
        }
    }

    pub(super) fn drain(
        &mut self,
        out: &mut Vec<u8>,
        keys: &mut StackKeys,
        tracker: &mut MapTracker,
        samples: &mut u64,
        bad: &mut u64,
    ) {
        let meta = self.base.cast::<b::perf_event_mmap_page>();
        // SAFETY: meta points at the kernel-shared control page of our mapping; head is
        // read before the data it covers (acquire), tail written after (release).
        let (head, tail, data_off, data_size) = unsafe {
            let head = std::ptr::read_volatile(&(*meta).data_head);
            fence(Ordering::Acquire);
            (
                head,
                (*meta).data_tail,
                (*meta).data_offset as usize,
                (*meta).data_size as usize,
            )
        };
        if data_size == 0 || data_off + data_size > self.len {
            return;
        }
        // SAFETY: data_off..data_off+data_size lies within the mapping (checked above).
        let data = unsafe { std::slice::from_raw_parts(self.base.add(data_off), data_size) };
        let mut pos = tail;
        while pos + 8 <= head {
            let mut hdr = [0u8; 8];
            copy_wrapped(data, pos, &mut hdr);
            let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
            if size < 8 || pos + size > head {
                *bad += 1;
                pos = head;
                break;
            }
            let view = RecordView {
                data,
                pos,
                len: size as usize,
            };
            let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let misc = u16::from_ne_bytes([hdr[4], hdr[5]]);
            tracker.see(maps::seen(kind, misc, view.len, |off| view.u64_at(off)));
            if kind == b::PERF_RECORD_SAMPLE {
                *samples += 1;
                keys.append_sample(&view, out);
            } else {
                view.append(0..view.len, out);
            }
            pos += size;
        }
        fence(Ordering::Release);
        // SAFETY: as above; publishing how far we have read.
        unsafe {
            std::ptr::write_volatile(&mut (*meta).data_tail, pos);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping created in `map`.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}
