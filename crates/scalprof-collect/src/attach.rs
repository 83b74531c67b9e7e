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
}

impl AttachSpec {
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.names.is_empty()
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
            if !table.contains_key(&pid) {
                return Err(CollectError::Attach(format!(
                    "--attach {pid}: no such process (is the server running? `pgrep -a NAME` \
                     lists candidates)"
                )));
            }
            roots.insert(pid);
        }
        for name in &self.names {
            let before = roots.len();
            let wanted = truncate_comm(name);
            roots.extend(
                table
                    .iter()
                    .filter(|(_, (comm, _))| *comm == wanted)
                    .map(|(&pid, _)| pid),
            );
            if roots.len() == before && !table.values().any(|(c, _)| *c == wanted) {
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
                .filter(|(pid, (_, ppid))| out.contains(ppid) && !out.contains(pid))
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

/// pid → (command name, parent pid) of every process.
fn process_table(proc: &Path) -> HashMap<i32, (String, i32)> {
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
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        out.insert(pid, (comm, ppid));
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
            std::fs::write(p.join("stat"), format!("{pid} ({comm}) S {ppid} 1 1 0")).unwrap();
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
