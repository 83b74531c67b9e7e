//! Processes the sweep does not start — a server under a swept client — whose profiles and
//! waits are collected alongside the command's (`run --attach PID`, `--attach-name COMM`).
//! The targets are found again before every repeat: a server may have restarted, and the
//! processes it forked since (PostgreSQL's per-connection backends) belong to it.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::CollectError;

/// What to attach to, as the user named it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttachSpec {
    pub pids: Vec<i32>,
    /// Command names (`/proc/PID/comm`, at most 15 characters, as `ps -o comm` shows).
    pub names: Vec<String>,
    /// Each of `pids` with its start time (clock ticks after boot) when the sweep began
    /// ([`AttachSpec::pinned`]): a PID found again with another start time is another
    /// process, which took the number of one that exited.
    pub started: Vec<(i32, u64)>,
}

impl AttachSpec {
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.names.is_empty()
    }

    /// The spec with the start time of each of its PIDs now: later resolutions refuse a
    /// PID that another process has taken since.
    pub fn pinned(mut self) -> AttachSpec {
        let table = process_table(Path::new("/proc"));
        self.started = self
            .pids
            .iter()
            .filter_map(|pid| Some((*pid, table.get(pid)?.2)))
            .collect();
        self
    }

    /// The processes to observe now: the named ones, every process with a named command,
    /// and the descendants of all of them. scalprof itself is never a target.
    pub fn resolve(&self) -> Result<Vec<i32>, CollectError> {
        self.resolve_in(Path::new("/proc"), std::process::id() as i32)
    }

    fn resolve_in(&self, proc: &Path, own: i32) -> Result<Vec<i32>, CollectError> {
        let table = process_table(proc);
        let mut roots: BTreeSet<i32> = BTreeSet::new();
        for &pid in &self.pids {
            let Some((comm, _, start)) = table.get(&pid) else {
                return Err(CollectError::Attach(format!(
                    "--attach {pid}: no such process (is the server running? `pgrep -a NAME` \
                     lists candidates)"
                )));
            };
            if let Some(&(_, was)) = self.started.iter().find(|(p, _)| *p == pid) {
                if was != *start {
                    return Err(CollectError::Attach(format!(
                        "--attach {pid}: the process has exited, and its PID now belongs to \
                         another process ({comm}), which is not profiled; the points measured \
                         before are kept (attach by name, --attach-name, to follow a server \
                         that restarts)"
                    )));
                }
            }
            roots.insert(pid);
        }
        for name in &self.names {
            let before = roots.len();
            let wanted = truncate_comm(name);
            roots.extend(
                table
                    .iter()
                    .filter(|(_, (comm, _, _))| *comm == wanted)
                    .map(|(&pid, _)| pid),
            );
            if roots.len() == before && !table.values().any(|(c, _, _)| *c == wanted) {
                return Err(CollectError::Attach(format!(
                    "--attach-name {name}: no running process has that command name \
                     (`ps -eo comm` shows the names)"
                )));
            }
        }
        // Descendants: a server's workers that already run.
        let mut out = roots.clone();
        loop {
            let more: Vec<i32> = table
                .iter()
                .filter(|(pid, (_, ppid, _))| out.contains(ppid) && !out.contains(pid))
                .map(|(&pid, _)| pid)
                .collect();
            if more.is_empty() {
                break;
            }
            out.extend(more);
        }
        out.remove(&own);
        if out.is_empty() {
            return Err(CollectError::Attach(
                "nothing to attach to: the only match is scalprof itself".into(),
            ));
        }
        Ok(out.into_iter().collect())
    }
}

/// The kernel keeps the first 15 bytes of a command name.
fn truncate_comm(name: &str) -> String {
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

/// pid → (command name, parent pid, start time) of every process.
fn process_table(proc: &Path) -> HashMap<i32, (String, i32, u64)> {
    let mut out = HashMap::new();
    for (pid, path) in crate::processes(proc) {
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue; // exited meanwhile
        };
        // `pid (comm) state ppid …`: the name may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        // After the name: state (field 3), ppid (4), …, starttime (22).
        let field = |n: usize| -> Option<u64> {
            stat[close + 1..]
                .split_whitespace()
                .nth(n - 3)?
                .parse()
                .ok()
        };
        let ppid = field(4).unwrap_or(0) as i32;
        out.insert(pid, (comm, ppid, field(22).unwrap_or(0)));
    }
    out
}

/// A process's command name, if it still runs.
pub fn comm_of(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(procs: &[(i32, &str, i32)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for &(pid, comm, ppid) in procs {
            let p = dir.path().join(pid.to_string());
            std::fs::create_dir(&p).unwrap();
            // Fields 3–22: state, ppid, then 17 zeros, then the start time (pid · 10).
            let middle = "0 ".repeat(17);
            std::fs::write(
                p.join("stat"),
                format!("{pid} ({comm}) S {ppid} {middle}{} 0", pid * 10),
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn names_pids_and_their_descendants_resolve_and_unknown_ones_are_errors() {
        let proc = fake_proc(&[
            (1, "init", 0),
            (100, "postgres", 1),
            (101, "postgres", 100),
            (102, "walwriter (x)", 100),
            (200, "server", 1),
            (201, "worker", 200),
            (300, "scalprof", 1),
        ]);
        let spec = |pids: &[i32], names: &[&str]| AttachSpec {
            pids: pids.to_vec(),
            names: names.iter().map(|s| s.to_string()).collect(),
            started: Vec::new(),
        };
        assert_eq!(
            spec(&[], &["postgres"])
                .resolve_in(proc.path(), 300)
                .unwrap(),
            [100, 101, 102]
        );
        assert_eq!(
            spec(&[200], &[]).resolve_in(proc.path(), 300).unwrap(),
            [200, 201]
        );
        let e = spec(&[999], &[]).resolve_in(proc.path(), 300).unwrap_err();
        assert!(
            e.to_string().contains("--attach 999: no such process"),
            "{e}"
        );
        let e = spec(&[], &["mysqld"])
            .resolve_in(proc.path(), 300)
            .unwrap_err();
        assert!(e.to_string().contains("--attach-name mysqld"), "{e}");
        let e = spec(&[300], &[]).resolve_in(proc.path(), 300).unwrap_err();
        assert!(e.to_string().contains("scalprof itself"), "{e}");
        // A PID pinned with another start time was taken by another process.
        let mut pinned = spec(&[200], &[]);
        pinned.started = vec![(200, 2000)];
        assert_eq!(pinned.resolve_in(proc.path(), 300).unwrap(), [200, 201]);
        pinned.started = vec![(200, 1999)];
        let e = pinned.resolve_in(proc.path(), 300).unwrap_err();
        assert!(
            e.to_string()
                .contains("now belongs to another process (server)"),
            "{e}"
        );
        // Longer names match the kernel's 15-byte command name.
        let proc = fake_proc(&[(5, "a_very_long_ser", 1)]);
        assert_eq!(
            spec(&[], &["a_very_long_server_name"])
                .resolve_in(proc.path(), 1)
                .unwrap(),
            [5]
        );
    }
}
