//! JIT-compiled code named by its runtime: `/tmp/perf-PID.map`, the text file V8/Node
//! (`--perf-basic-prof`), the JVM (with an agent), CPython 3.12 (`-X perf`), LuaJIT and
//! others write for perf. One line per code object: `START SIZE name`, hexadecimal, with or
//! without `0x`; the name runs to the end of the line and may contain spaces. A runtime
//! that moves or recompiles code appends a new line, so for an address the latest line
//! that covers it wins.
//!
//! No crate reads this format on its own (samply and perf each carry their own reader), so
//! it is parsed here. The file stays after the process exits, which is when scalprof
//! symbolizes a repeat's samples.
//!
//! `/tmp` is shared, so a map is read only when it is a regular file (a FIFO planted there
//! would block the reader forever) owned by root, by us or by the process's user (as perf
//! does), and names lose their control and bidi characters (a name is printed to terminals).

use std::path::{Path, PathBuf};

/// One process's perf map.
#[derive(Debug, Default)]
pub struct PerfMap {
    /// (start, end, line number) sorted by start; the name is `names[line]`.
    ranges: Vec<(u64, u64, usize)>,
    names: Vec<String>,
    /// The longest range, to bound the backwards scan of a lookup.
    longest: u64,
}

/// Where a process's perf map is.
pub fn path_of(pid: i32) -> PathBuf {
    PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

impl PerfMap {
    /// Reads a perf map; `None` when there is none (the process published no JIT code) or
    /// it is not one we trust: not a regular file, or owned by someone other than root and
    /// the `owners` the caller vouches for (scalprof's user, an attached process's user).
    /// Never "whoever this process runs as": a parser child runs as `nobody`.
    pub fn load(path: &Path, owners: &[u32]) -> Option<PerfMap> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        // Not through a symlink either: the name is in a directory anyone can write.
        if std::fs::symlink_metadata(path)
            .ok()?
            .file_type()
            .is_symlink()
        {
            return None;
        }
        let mut f = scalprof_debuginfo::open_regular(path).ok()?;
        let owner = f.metadata().ok()?.uid();
        if !(owner == 0 || owners.contains(&owner)) {
            return None;
        }
        let mut text = Vec::new();
        f.read_to_end(&mut text).ok()?;
        Some(PerfMap::parse(&String::from_utf8_lossy(&text)))
    }

    /// Parses the file's text; malformed lines are skipped, as perf does.
    pub fn parse(text: &str) -> PerfMap {
        let mut map = PerfMap::default();
        for line in text.lines() {
            let mut parts = line.trim_start().splitn(3, ' ');
            let (Some(start), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let (Some(start), Some(size)) = (hex(start), hex(size)) else {
                continue;
            };
            let name = name.trim();
            if size == 0 || name.is_empty() {
                continue;
            }
            map.ranges
                .push((start, start.saturating_add(size), map.names.len()));
            map.names.push(printable(name));
            map.longest = map.longest.max(size);
        }
        map.ranges.sort_unstable();
        map
    }

    /// The name of the code at `addr`: the latest line whose range covers it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        let floor = addr.saturating_sub(self.longest);
        self.ranges[..i]
            .iter()
            .rev()
            .take_while(|r| r.0 >= floor)
            .filter(|r| addr < r.1)
            .max_by_key(|r| r.2)
            .map(|r| self.names[r.2].as_str())
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A name with control characters (ESC, BEL) and bidi overrides replaced by U+FFFD.
fn printable(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}') {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_line_covering_an_address_names_it() {
        let map = PerfMap::parse(
            "18c4000 300 Builtin:DeoptimizationEntry_Eager\n\
             7f0fb400ab40 2c4 JS:*hotLoop /tmp/node/workers.js:3:17\n\
             garbage line\n\
             0x7f0fb400ab40 40 JS:*replaced after a deopt\n\
             7f0fb4000000 10 zero\n\
             7f0fb4000100 0 empty\n",
        );
        assert_eq!(map.len(), 4);
        assert_eq!(
            map.lookup(0x18c4000 + 0x2ff),
            Some("Builtin:DeoptimizationEntry_Eager")
        );
        assert_eq!(map.lookup(0x18c4000 + 0x300), None);
        // Both lines cover +0x10: the later one wins; past its end, the earlier one.
        assert_eq!(
            map.lookup(0x7f0f_b400_ab50),
            Some("JS:*replaced after a deopt")
        );
        assert_eq!(
            map.lookup(0x7f0f_b400_ab40 + 0x100),
            Some("JS:*hotLoop /tmp/node/workers.js:3:17")
        );
        assert_eq!(map.lookup(0x7f0f_b400_0008), Some("zero"));
        assert_eq!(map.lookup(0x10), None);
    }

    #[test]
    fn planted_maps_are_not_read_and_names_are_printable() {
        let dir =
            std::env::temp_dir().join(format!("scalprof-perfmap-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A FIFO would block a plain read forever: refused at once.
        let fifo = dir.join("perf-1.map");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(PerfMap::load(&fifo, &[]).is_none());
        let file = dir.join("perf-2.map");
        std::fs::write(&file, "1000 10 evil\x1b]0;title\x07\u{202e}name\n").unwrap();
        let map = PerfMap::load(&file, &[]).unwrap();
        assert_eq!(
            map.lookup(0x1000),
            Some("evil\u{FFFD}]0;title\u{FFFD}\u{FFFD}name")
        );
        // Another user's map is not trusted (as perf), unless the process ran as that user.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
            assert!(PerfMap::load(&file, &[]).is_none());
            assert!(PerfMap::load(&file, &[65534]).is_some());
        }
        // A symlink is not followed.
        let link = dir.join("perf-3.map");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        assert!(PerfMap::load(&link, &[]).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
