//! A workload's stdout or stderr, kept within a size while it is written.
//!
//! The workload writes into a pipe; a thread of ours copies it to the output file in the
//! store's folder as its [`Keep`] says: at most `limit` bytes (the first `limit / 2` as
//! they come, the last `limit / 2` in memory until the end, and between them a line
//! saying how much was cut), or only the last lines a pattern matches (the ops lines).
//! It reads on past the limit, so a workload that writes without end neither fills the
//! disk nor blocks. A write that fails (a full disk) is kept, and said after the
//! repeat: the workload goes on writing into the pipe and never sees it.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use regex::Regex;

/// What an output keeps of what the workload wrote.
#[derive(Clone, Debug)]
pub enum Keep {
    /// At most this many bytes: the first and last halves.
    HeadTail(u64),
    /// Only the last [`MATCHED_LINES`] lines the pattern matches, the rest discarded.
    Matching(Regex),
}

/// How many matching lines [`Keep::Matching`] keeps: the ops regex reads the last.
pub const MATCHED_LINES: usize = 64;

/// A line longer than this is matched on its last this many bytes (the last match wins).
const LONGEST_LINE: usize = 64 << 10;

/// How long a finished repeat's output is read on, at most, when a process it left
/// running still holds the pipe open (and may write for ever).
const DRAIN: Duration = Duration::from_secs(1);

/// What one output received.
pub(super) struct Captured {
    /// Bytes the workload wrote, kept or not.
    pub(super) bytes: u64,
    /// The first failed write to the file, if one failed.
    pub(super) error: Option<io::Error>,
}

/// The copying thread of one output, and the pipe end that tells it the workload ended.
pub(super) struct Capture {
    thread: JoinHandle<Captured>,
    ended: OwnedFd,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors that we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Capture {
    /// Starts copying into `file`; returns the pipe end to give the workload.
    pub(super) fn start(file: File, keep: Keep) -> io::Result<(File, Capture)> {
        let (read, write) = pipe()?;
        // A larger pipe: a writer waits on us less often (the kernel may refuse: fine).
        // SAFETY: fcntl on a descriptor we own, with integer arguments.
        unsafe {
            libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
        }
        let (ended_read, ended) = pipe()?;
        let thread = std::thread::Builder::new()
            .name("scalprof-output".into())
            .spawn(move || copy(read, ended_read, file, keep))?;
        Ok((File::from(write), Capture { thread, ended }))
    }

    /// Tells the thread the workload was reaped, and waits for it: what is left in the
    /// pipe is read (for [`DRAIN`] at most), then the file is completed.
    pub(super) fn finish(self) -> Captured {
        drop(self.ended);
        self.thread.join().unwrap_or_else(|_| Captured {
            bytes: 0,
            error: Some(io::Error::other("the thread copying the output panicked")),
        })
    }
}

/// The kept part of an output: the head goes to the file as it comes, the tail waits in
/// a ring in memory (allocated only as the output grows past the head).
struct Kept {
    file: File,
    half: usize,
    bytes: u64,
    written: usize,
    ring: Vec<u8>,
    /// Where the oldest byte of a full ring is.
    oldest: usize,
    error: Option<io::Error>,
}

impl Kept {
    fn new(file: File, limit: u64) -> Kept {
        Kept {
            file,
            half: usize::try_from(limit / 2).unwrap_or(usize::MAX).max(1),
            bytes: 0,
            written: 0,
            ring: Vec::new(),
            oldest: 0,
            error: None,
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        self.bytes += data.len() as u64;
        if self.written < self.half {
            let n = (self.half - self.written).min(data.len());
            self.write(&data[..n]);
            self.written += n;
            data = &data[n..];
        }
        if data.len() >= self.half {
            self.ring.clear();
            self.ring.extend_from_slice(&data[data.len() - self.half..]);
            self.oldest = 0;
            return;
        }
        let room = (self.half - self.ring.len()).min(data.len());
        self.ring.extend_from_slice(&data[..room]);
        data = &data[room..];
        while !data.is_empty() {
            let n = (self.half - self.oldest).min(data.len());
            self.ring[self.oldest..self.oldest + n].copy_from_slice(&data[..n]);
            self.oldest = (self.oldest + n) % self.half;
            data = &data[n..];
        }
    }

    fn write(&mut self, data: &[u8]) {
        if self.error.is_none() {
            if let Err(e) = self.file.write_all(data) {
                self.error = Some(e);
            }
        }
    }

    fn end(mut self) -> Captured {
        let kept = (self.written + self.ring.len()) as u64;
        if self.bytes > kept {
            let line = format!(
                "\n[scalprof: {} bytes cut here; the first and last {} bytes of {} are kept]\n",
                self.bytes - kept,
                self.half,
                self.bytes
            );
            self.write(line.as_bytes());
        }
        let ring = std::mem::take(&mut self.ring);
        self.write(&ring[self.oldest..]);
        self.write(&ring[..self.oldest]);
        Captured {
            bytes: self.bytes,
            error: self.error,
        }
    }
}

/// Where a copied output goes.
enum Sink {
    HeadTail(Kept),
    Matching(Lines),
}

impl Sink {
    fn push(&mut self, data: &[u8]) {
        match self {
            Sink::HeadTail(k) => k.push(data),
            Sink::Matching(l) => l.push(data),
        }
    }

    fn end(self) -> Captured {
        match self {
            Sink::HeadTail(k) => k.end(),
            Sink::Matching(l) => l.end(),
        }
    }
}

/// The last lines a pattern matches, written at the end; the rest is counted and dropped.
///
/// The pattern runs over each chunk as it comes (up to its last line end), not line by
/// line: a workload writing 300 MB of short lines ran 1.25 s under a per-line match
/// against 0.54 s with every byte kept, the pipe full while the matching lagged. A search
/// of the whole chunk skips to the pattern's literal part (`ops=`) at memchr's speed.
struct Lines {
    file: File,
    re: regex::bytes::Regex,
    bytes: u64,
    /// What came after the last line end: the start of the next line (its last
    /// [`LONGEST_LINE`] bytes, up to twice that between trims).
    pending: Vec<u8>,
    matched: std::collections::VecDeque<Vec<u8>>,
}

fn is_line_end(b: &u8) -> bool {
    *b == b'\n' || *b == b'\r'
}

impl Lines {
    fn new(file: File, re: Regex) -> Lines {
        // The same pattern over bytes, `^` and `$` at line ends as when matched per line.
        let re = regex::bytes::RegexBuilder::new(re.as_str())
            .multi_line(true)
            .build()
            .expect("a pattern that compiled as text compiles over bytes");
        Lines {
            file,
            re,
            bytes: 0,
            pending: Vec::new(),
            matched: std::collections::VecDeque::new(),
        }
    }

    /// A carriage return ends a line too: a progress counter redrawn in place
    /// (`\rops=1000 … \rops=980000`) is a line per value, the last one kept.
    fn push(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        let Some(last_end) = data.iter().rposition(is_line_end) else {
            self.pending.extend_from_slice(data);
            if self.pending.len() > 2 * LONGEST_LINE {
                self.pending.drain(..self.pending.len() - LONGEST_LINE);
            }
            return;
        };
        if self.pending.is_empty() {
            self.scan(&data[..last_end]);
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(&data[..last_end]);
            self.scan(&joined);
        }
        self.pending.extend_from_slice(&data[last_end + 1..]);
    }

    /// Keeps the lines of `text` (whole lines, without the last one's end) that a match
    /// touches, each once.
    fn scan(&mut self, text: &[u8]) {
        // Only the last MATCHED_LINES matched lines count, so the search goes back from
        // the end in line-aligned windows that double: a workload printing an ops line per
        // line of output is done after the last few kilobytes, one printing none costs
        // two passes of the chunk at the pattern's literal speed.
        let mut found: Vec<(usize, usize)> = Vec::new();
        let (mut to, mut window) = (text.len(), 4096);
        loop {
            let cut = to.saturating_sub(window);
            let from = text[..cut]
                .iter()
                .rposition(is_line_end)
                .map_or(0, |i| i + 1);
            let region = &text[from..to];
            let mut here: Vec<(usize, usize)> = Vec::new();
            let mut kept_to = 0;
            for m in self.re.find_iter(region) {
                if m.start() < kept_to {
                    continue;
                }
                let start = region[..m.start()]
                    .iter()
                    .rposition(is_line_end)
                    .map_or(0, |i| i + 1);
                let end = region[m.end()..]
                    .iter()
                    .position(is_line_end)
                    .map_or(region.len(), |i| m.end() + i);
                here.push((
                    from + start.max(end.saturating_sub(LONGEST_LINE)),
                    from + end,
                ));
                kept_to = end;
            }
            here.append(&mut found);
            found = here;
            if found.len() >= MATCHED_LINES || from == 0 {
                break;
            }
            (to, window) = (from, window * 2);
        }
        for &(start, end) in &found[found.len().saturating_sub(MATCHED_LINES)..] {
            if self.matched.len() == MATCHED_LINES {
                self.matched.pop_front();
            }
            self.matched.push_back(text[start..end].to_vec());
        }
    }

    fn end(mut self) -> Captured {
        let rest = std::mem::take(&mut self.pending);
        if !rest.is_empty() {
            self.scan(&rest);
        }
        let mut text = Vec::new();
        for l in &self.matched {
            text.extend_from_slice(l);
            text.push(b'\n');
        }
        let error = self.file.write_all(&text).err();
        Captured {
            bytes: self.bytes,
            error,
        }
    }
}

fn copy(read: OwnedFd, ended: OwnedFd, file: File, keep: Keep) -> Captured {
    let mut kept = match keep {
        Keep::HeadTail(limit) => Sink::HeadTail(Kept::new(file, limit)),
        Keep::Matching(re) => Sink::Matching(Lines::new(file, re)),
    };
    // As large as the pipe (see `start`): one read empties it.
    let mut buf = vec![0u8; 1 << 20];
    // Set once the workload was reaped: read what is left, until then at most.
    let mut drain_until: Option<Instant> = None;
    loop {
        let mut fds = [read.as_raw_fd(), ended.as_raw_fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        let (watched, wait_ms) = if drain_until.is_some() {
            (1, 0)
        } else {
            (2, -1)
        };
        // SAFETY: fds is a valid array of at least `watched` pollfds.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), watched, wait_ms) };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[0].revents != 0 {
            // SAFETY: buf is writable for buf.len() bytes; read is our pipe's read end.
            let n = unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if n <= 0 {
                // End of file: every writer is gone.
                break;
            }
            kept.push(&buf[..n as usize]);
            if drain_until.is_some_and(|t| Instant::now() >= t) {
                break;
            }
        } else if drain_until.is_some() {
            // Nothing left to read.
            break;
        }
        if watched == 2 && fds[1].revents != 0 {
            drain_until = Some(Instant::now() + DRAIN);
        }
    }
    kept.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(limit: u64, chunks: &[&[u8]]) -> (String, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut k = Kept::new(File::create(&path).unwrap(), limit);
        for c in chunks {
            k.push(c);
        }
        let got = k.end();
        assert!(got.error.is_none());
        (std::fs::read_to_string(&path).unwrap(), got.bytes)
    }

    #[test]
    fn keeps_only_the_last_matching_lines_whatever_the_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let re = Regex::new(r"ops=(\d+)").unwrap();
        let mut l = Lines::new(File::create(&path).unwrap(), re);
        let mut written = 0;
        for i in 0..200 {
            let chunk = format!("noise {i} {}\nop", "x".repeat(100));
            l.push(chunk.as_bytes());
            l.push(format!("s={i}\n").as_bytes());
            written += chunk.len() + format!("s={i}\n").len();
        }
        l.push(b"tail ops=999");
        let got = l.end();
        assert_eq!(got.bytes as usize, written + 12);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), MATCHED_LINES);
        assert_eq!(lines[0], "ops=137");
        assert_eq!(lines[MATCHED_LINES - 2], "ops=199");
        assert_eq!(lines[MATCHED_LINES - 1], "tail ops=999");
    }

    #[test]
    fn a_line_redrawn_in_place_or_longer_than_kept_gives_its_last_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let re = Regex::new(r"ops=(\d+)").unwrap();
        let mut l = Lines::new(File::create(&path).unwrap(), re);
        // A progress counter redrawn with \r, 200 KiB before its newline.
        for i in 0..20_000 {
            l.push(format!("\rops={i}   ").as_bytes());
        }
        l.push(b"\n");
        // One line far longer than kept, its count at the end.
        l.push(&vec![b'x'; 3 * LONGEST_LINE]);
        l.push(b" ops=123456\n");
        l.end();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[lines.len() - 2], "ops=19999   ", "{}", lines.len());
        assert!(lines[lines.len() - 1].ends_with("x ops=123456"));
        assert!(lines[lines.len() - 1].len() <= LONGEST_LINE);
    }

    #[test]
    fn keeps_the_head_and_the_tail_in_order_whatever_the_chunks() {
        assert_eq!(kept(8, &[b"ab", b"cdef"]), ("abcdef".into(), 6));
        assert_eq!(kept(8, &[b"abcdefgh"]), ("abcdefgh".into(), 8));
        let (text, n) = kept(8, &[b"abc", b"defgh", b"ij", b"klmnopq"]);
        assert_eq!(n, 17);
        assert!(
            text.starts_with("abcd\n[scalprof: 9 bytes cut here"),
            "{text}"
        );
        assert!(text.ends_with("of 17 are kept]\nnopq"), "{text}");
        let (text, _) = kept(8, &[b"ab", b"cdefghijk", b"l"]);
        assert!(text.ends_with("]\nijkl"), "{text}");
    }

    #[test]
    fn a_full_disk_is_kept_and_the_pipe_still_drained() {
        let (file, capture) =
            Capture::start(File::create("/dev/full").unwrap(), Keep::HeadTail(1 << 20)).unwrap();
        let writer = std::thread::spawn(move || {
            let mut file = file;
            // Four times the limit, past any pipe buffer: it must not block.
            for _ in 0..64 {
                file.write_all(&[b'x'; 64 << 10]).unwrap();
            }
        });
        writer.join().unwrap();
        let got = capture.finish();
        assert_eq!(got.bytes, 4 << 20);
        assert_eq!(got.error.and_then(|e| e.raw_os_error()), Some(libc::ENOSPC));
    }
}
