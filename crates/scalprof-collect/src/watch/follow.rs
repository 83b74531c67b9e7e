//! Following a server's log for its operations (`watch --ops-file PATH --ops-regex RE`: a
//! matching line adds its first group, or counts one where the regex has none), as
//! `tail -F` follows it: from its end when the watch starts, through rotation (a new file
//! at the path), truncation and disappearance, a bounded read at a time.
//!
//! The log is the server's: what it holds decides nothing scalprof runs or opens. It is
//! read only if it is a regular file (a FIFO or device at the path is refused, and never
//! opened for reading), and each poll reads at most [`MOST_PER_POLL`].

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use regex::Regex;

/// What one poll reads at most: a log that grew by more is skipped to its end, said.
pub const MOST_PER_POLL: u64 = 8 << 20;

/// A line longer than this is not an ops line: it is dropped, said once.
const LONGEST_LINE: usize = 64 << 10;

/// A log followed for its ops lines.
pub struct Follower {
    path: PathBuf,
    regex: Regex,
    /// Lines whose first group is one operation's latency, in milliseconds.
    latency: Option<Regex>,
    /// The file followed, with its device and inode.
    file: Option<(File, (u64, u64))>,
    /// Where the next read starts.
    offset: u64,
    /// The end of the last read when it was not the end of a line.
    partial: Vec<u8>,
    /// Said already: the path is gone, a line was too long.
    said_gone: bool,
    said_long: bool,
}

/// What one poll found.
#[derive(Debug, Default, PartialEq)]
pub struct Polled {
    /// The sum of the matching lines' first groups; `None`: no line matched.
    pub ops: Option<u64>,
    /// Matching lines whose group is not a number.
    pub not_numbers: u64,
    /// The latencies the latency lines gave: their sum in seconds, and how many.
    pub latency_s: f64,
    pub latencies: u64,
    /// What happened to the log, a sentence each (rotated, truncated, gone, skipped).
    pub notes: Vec<String>,
}

impl Follower {
    /// Follows `path` from its end. It must be a regular file now: the watch starts from
    /// what is there, and a mistyped path is better said at once.
    pub fn open(path: &Path, regex: Regex) -> Result<Follower, String> {
        let file = open_log(path)?;
        let offset = file.0.metadata().map_err(|e| describe(path, &e))?.len();
        Ok(Follower {
            path: path.to_path_buf(),
            regex,
            latency: None,
            file: Some(file),
            offset,
            partial: Vec::new(),
            said_gone: false,
            said_long: false,
        })
    }

    /// Also reads latencies: each line `latency` matches gives one operation's, in
    /// milliseconds, in its first group.
    pub fn with_latency(mut self, latency: Option<Regex>) -> Follower {
        self.latency = latency;
        self
    }

    /// Reads what was appended since the last poll (of the file at the path now, after the
    /// rest of the one it replaced), and adds up its ops lines.
    pub fn poll(&mut self) -> Polled {
        let mut polled = Polled::default();
        match std::fs::metadata(&self.path) {
            Err(_) => {
                // Renamed or deleted: what the old file still gets is read; the path is
                // watched for a new one.
                if !self.said_gone {
                    self.said_gone = true;
                    polled.notes.push(format!(
                        "{} is gone: reading what its last file still gets, and waiting for the path to come back",
                        self.path.display()
                    ));
                }
                self.read_new(&mut polled);
            }
            Ok(now) => {
                let same = self
                    .file
                    .as_ref()
                    .is_some_and(|(_, id)| *id == (now.dev(), now.ino()));
                if same {
                    if now.len() < self.offset {
                        polled.notes.push(format!(
                            "{} was truncated: following it from its start",
                            self.path.display()
                        ));
                        self.offset = 0;
                        self.partial.clear();
                    }
                    self.read_new(&mut polled);
                } else {
                    // Rotated (or back): the old file's last lines, then the new one's.
                    self.read_new(&mut polled);
                    self.switch(&mut polled);
                }
            }
        }
        polled
    }

    /// Follows the file now at the path, from its start.
    fn switch(&mut self, polled: &mut Polled) {
        match open_log(&self.path) {
            Ok(file) => {
                polled.notes.push(format!(
                    "{} {}: following the new file from its start",
                    self.path.display(),
                    if self.said_gone {
                        "is back"
                    } else {
                        "was rotated"
                    }
                ));
                self.file = Some(file);
                self.offset = 0;
                self.partial.clear();
                self.said_gone = false;
                self.read_new(polled);
            }
            Err(why) if !self.said_gone => {
                self.said_gone = true;
                polled.notes.push(format!("{why}: not followed"));
            }
            Err(_) => {}
        }
    }

    /// Reads the followed file from `offset`, at most [`MOST_PER_POLL`].
    fn read_new(&mut self, polled: &mut Polled) {
        let Some((file, _)) = &self.file else {
            return;
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(self.offset);
        if len <= self.offset {
            return;
        }
        if len - self.offset > MOST_PER_POLL {
            polled.notes.push(format!(
                "{} grew by {} MiB between two reads: skipped to its end (the operations in it are not counted)",
                self.path.display(),
                (len - self.offset) >> 20
            ));
            self.offset = len;
            self.partial.clear();
            return;
        }
        let mut data = vec![0u8; (len - self.offset) as usize];
        let mut got = 0;
        while got < data.len() {
            match file.read_at(&mut data[got..], self.offset + got as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        data.truncate(got);
        self.offset += got as u64;
        self.add_lines(&data, polled);
    }

    /// Adds up the complete lines of `partial` + `data`; keeps the incomplete end.
    fn add_lines(&mut self, data: &[u8], polled: &mut Polled) {
        self.partial.extend_from_slice(data);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            if self.partial.len() > LONGEST_LINE {
                self.partial.clear();
                self.say_long(polled);
            }
            return;
        };
        let rest = self.partial.split_off(last + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        for line in complete.split(|&b| b == b'\n') {
            if line.len() > LONGEST_LINE {
                self.say_long(polled);
                continue;
            }
            let text = String::from_utf8_lossy(line);
            if let Some(ms) = self
                .latency
                .as_ref()
                .and_then(|re| re.captures(&text)?.get(1)?.as_str().parse::<f64>().ok())
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
            {
                polled.latency_s += ms / 1e3;
                polled.latencies += 1;
            }
            // A regex without a group counts its lines: one operation each.
            if self.regex.captures_len() < 2 {
                if self.regex.is_match(&text) {
                    polled.ops = Some(polled.ops.unwrap_or(0).saturating_add(1));
                }
                continue;
            }
            match crate::sweep::match_ops(&text, &self.regex) {
                Ok(Some(n)) => polled.ops = Some(polled.ops.unwrap_or(0).saturating_add(n)),
                Ok(None) => {}
                Err(_) => polled.not_numbers += 1,
            }
        }
    }

    fn say_long(&mut self, polled: &mut Polled) {
        if !self.said_long {
            self.said_long = true;
            polled.notes.push(format!(
                "{} has a line longer than {} KiB: not an ops line, skipped",
                self.path.display(),
                LONGEST_LINE >> 10
            ));
        }
    }
}

/// Opens the log if it is a regular file (without blocking on a FIFO), with its identity.
fn open_log(path: &Path) -> Result<(File, (u64, u64)), String> {
    let file = scalprof_debuginfo::open_regular(path).map_err(|e| describe(path, &e))?;
    let meta = file.metadata().map_err(|e| describe(path, &e))?;
    Ok((file, (meta.dev(), meta.ino())))
}

fn describe(path: &Path, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "--ops-file {}: no such file (the server's log, as `tail -F` would follow it)",
            path.display()
        ),
        std::io::ErrorKind::InvalidInput => format!(
            "--ops-file {}: not a regular file (a FIFO, device or directory): watch follows a log file",
            path.display()
        ),
        _ => format!("--ops-file {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn follower(dir: &Path) -> (PathBuf, Follower) {
        let path = dir.join("server.log");
        std::fs::write(&path, "served 1000\nserved 2000\n").unwrap();
        let f = Follower::open(&path, Regex::new(r"served (\d+)").unwrap()).unwrap();
        (path, f)
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn only_lines_written_after_it_started_count_and_a_half_line_waits_for_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut f) = follower(dir.path());
        assert_eq!(f.poll(), Polled::default(), "the lines before the start");
        append(&path, "served 5\nother line\nserved 7\nserv");
        assert_eq!(f.poll().ops, Some(12));
        append(&path, "ed 30\n");
        assert_eq!(
            f.poll().ops,
            Some(30),
            "the line completed across two polls"
        );
        let mut words = Follower::open(&path, Regex::new(r"served (\S+)").unwrap()).unwrap();
        append(&path, "served x\nserved 4\n");
        let p = words.poll();
        assert_eq!((p.ops, p.not_numbers), (Some(4), 1));
    }

    #[test]
    fn a_regex_without_a_group_counts_the_lines_it_matches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        std::fs::write(&path, "GET /old\n").unwrap();
        let mut f = Follower::open(&path, Regex::new(r#""GET "#).unwrap()).unwrap();
        append(&path, "\"GET /a\" 200\n\"POST /b\" 200\n\"GET /c\" 404\n");
        assert_eq!(f.poll().ops, Some(2));
    }

    #[test]
    fn latency_lines_give_their_milliseconds_beside_the_operations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        std::fs::write(&path, "").unwrap();
        let mut f = Follower::open(&path, Regex::new("GET").unwrap())
            .unwrap()
            .with_latency(Some(Regex::new(r"took ([0-9.]+)ms").unwrap()));
        append(&path, "GET / took 4ms\nGET /a took 2.5ms\nPOST took xms\n");
        let p = f.poll();
        assert_eq!((p.ops, p.latencies), (Some(2), 2));
        assert!((p.latency_s - 0.0065).abs() < 1e-12, "{p:?}");
    }

    #[test]
    fn a_rotated_log_gives_its_last_lines_then_the_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut f) = follower(dir.path());
        append(&path, "served 3\n");
        std::fs::rename(&path, dir.path().join("server.log.1")).unwrap();
        append(&dir.path().join("server.log.1"), "served 4\n");
        let p = f.poll();
        assert_eq!(p.ops, Some(7), "{p:?}");
        assert!(p.notes[0].contains("is gone"), "{p:?}");
        std::fs::write(&path, "served 10\n").unwrap();
        let p = f.poll();
        assert_eq!(p.ops, Some(10), "{p:?}");
        assert!(p.notes[0].contains("is back"), "{p:?}");
        // Rotation without a gap between two polls (copy-rename).
        std::fs::write(dir.path().join("next"), "served 100\n").unwrap();
        append(&path, "served 1\n");
        std::fs::rename(dir.path().join("next"), &path).unwrap();
        let p = f.poll();
        assert_eq!(p.ops, Some(101), "{p:?}");
        assert!(p.notes[0].contains("was rotated"), "{p:?}");
    }

    #[test]
    fn a_truncated_log_is_read_again_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut f) = follower(dir.path());
        std::fs::write(&path, "served 9\n").unwrap();
        let p = f.poll();
        assert_eq!(p.ops, Some(9), "{p:?}");
        assert!(p.notes[0].contains("truncated"), "{p:?}");
    }

    #[test]
    fn a_log_that_grows_by_more_than_a_poll_reads_is_skipped_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut f) = follower(dir.path());
        let line = "served 1\n".repeat(((MOST_PER_POLL as usize) / 9) + 10);
        append(&path, &line);
        let p = f.poll();
        assert_eq!(p.ops, None);
        assert!(p.notes[0].contains("skipped to its end"), "{p:?}");
        append(&path, "served 2\n");
        assert_eq!(f.poll().ops, Some(2));
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let Err(why) = Follower::open(&fifo, Regex::new("(x)").unwrap()) else {
            panic!("a FIFO was followed");
        };
        assert!(why.contains("not a regular file"), "{why}");
        let Err(why) = Follower::open(&dir.path().join("nope"), Regex::new("(x)").unwrap()) else {
            panic!("a missing file was followed");
        };
        assert!(why.contains("no such file"), "{why}");
    }
}
