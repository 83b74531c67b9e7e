//! A cgroup that holds every process of this scalprof's workloads, so that none outlives it.
//!
//! The keeper's token ([`crate::keeper`]) lives in the environment, which a daemon may clear,
//! and a process group is left by `setsid`. Cgroup membership is inherited by every child and
//! cannot be left without privileges: the workload is moved into `scalprof-TOKEN` (under the
//! v1 freezer hierarchy, or next to scalprof's own cgroup on v2) while it is still suspended
//! before its exec, and when it ends, or scalprof ends however it ends (the keeper knows the
//! path from the token), everything still in the cgroup is frozen, killed and the cgroup
//! removed. Freezing first stops a process that keeps forking: a loop of fork-and-exit never
//! leaves a moment with no live member.
//!
//! Without a writable cgroup hierarchy (not root, no delegation) nothing changes: the token
//! and the process group still apply. Written by hand: a few files under /sys/fs/cgroup.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// This scalprof's workload cgroup, created at the first workload (`None` where cgroups
/// cannot be made).
pub fn tree() -> Option<&'static Path> {
    static TREE: OnceLock<Option<PathBuf>> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = path_for(crate::keeper::token())?;
        match std::fs::create_dir(&dir) {
            Ok(()) => Some(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(dir),
            Err(_) => None,
        }
    })
    .as_deref()
}

/// Where the cgroup of `token` is: the v1 freezer hierarchy when mounted, else a sibling of
/// this process's own v2 cgroup. Deterministic, so that the keeper finds it from the token.
pub fn path_for(token: &str) -> Option<PathBuf> {
    // A token is "PID-HEX": nothing in it can leave the directory.
    if token.is_empty()
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return None;
    }
    let name = format!("scalprof-{token}");
    let v1 = Path::new("/sys/fs/cgroup/freezer");
    if v1.join("cgroup.procs").exists() {
        return Some(v1.join(name));
    }
    // v2: "0::/path" in /proc/self/cgroup; the new cgroup goes beside ours (a process may
    // not be moved into a child of a cgroup that holds processes and controllers).
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let base = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let parent = base.parent()?;
    parent
        .join("cgroup.kill")
        .exists()
        .then(|| parent.join(name))
}

/// Moves `pid` (a workload suspended before its exec) into [`tree`]; false where there is
/// none or the move fails.
pub fn add(pid: i32) -> bool {
    tree().is_some_and(|dir| std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok())
}

/// The processes in the cgroup at `dir`.
fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Freezes the cgroup at `dir`, SIGKILLs every member, thaws it so the kills land, and
/// repeats until it is empty (a few rounds at most); gives how many were killed.
pub fn kill_all(dir: &Path) -> usize {
    let v1 = dir.join("freezer.state").exists();
    let freeze = |on: bool| {
        let _ = if v1 {
            std::fs::write(
                dir.join("freezer.state"),
                if on { "FROZEN" } else { "THAWED" },
            )
        } else {
            std::fs::write(dir.join("cgroup.freeze"), if on { "1" } else { "0" })
        };
    };
    let mut killed = 0;
    for _ in 0..20 {
        freeze(true);
        let now = members(dir);
        if now.is_empty() {
            freeze(false);
            break;
        }
        for &pid in &now {
            // SAFETY: kill has no memory-safety preconditions; every pid is a member of
            // the cgroup scalprof made for its own workloads.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        killed += now.len();
        // A frozen process dies once thawed.
        freeze(false);
        std::thread::sleep(Duration::from_millis(20));
    }
    killed
}

/// Kills what is left in `dir` and removes it (when it is empty).
pub fn remove(dir: &Path) {
    kill_all(dir);
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_one_directory_and_nothing_else() {
        assert!(path_for("").is_none());
        assert!(path_for("../../etc").is_none());
        assert!(path_for("12/34").is_none());
        if let Some(p) = path_for("123-00ff") {
            assert!(p.ends_with("scalprof-123-00ff"), "{}", p.display());
            assert!(p.starts_with("/sys/fs/cgroup"));
        }
    }
}
