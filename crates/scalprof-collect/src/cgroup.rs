//! A cgroup that holds every process of this scalprof's workloads, so that none outlives it.
//!
//! The keeper's token ([`crate::keeper`]) lives in the environment, which a daemon may clear,
//! and a process group is left by `setsid`. Cgroup membership is inherited by every child and
//! cannot be left without privileges: the workload is moved into `scalprof-TOKEN` (inside
//! scalprof's own cgroup, see [`path_for`]) while it is still suspended before its exec, and
//! when it ends, or scalprof ends however it ends (the keeper knows the path from the
//! token), everything still in the cgroup is killed and the cgroup removed. Freezing first stops a process that keeps forking: a loop of fork-and-exit never
//! leaves a moment with no live member.
//!
//! Without a writable cgroup hierarchy (not root, no delegation) nothing changes: the token
//! and the process group still apply. Written by hand: a few files under /sys/fs/cgroup.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Where this scalprof's workload cgroup goes (`None` where cgroups cannot be made). It is
/// made for each workload ([`add`]) and removed when that workload ends ([`remove`]), so
/// nothing is left between repeats, nor after a library caller that has no keeper.
pub fn tree() -> Option<&'static Path> {
    static TREE: OnceLock<Option<PathBuf>> = OnceLock::new();
    TREE.get_or_init(|| path_for(crate::token::token()))
        .as_deref()
}

/// The line of `/proc/self/cgroup` for `controller` (`""` for the v2 hierarchy): this
/// process's cgroup, relative to that hierarchy's root.
fn own_cgroup(controller: &str) -> Option<String> {
    cgroup_of(
        &std::fs::read_to_string("/proc/self/cgroup").ok()?,
        controller,
    )
}

/// The path (without its leading `/`) for `controller` (`""`: the v2 hierarchy) in the
/// text of a `/proc/PID/cgroup`.
pub(crate) fn cgroup_of(own: &str, controller: &str) -> Option<String> {
    own.lines().find_map(|l| {
        let (_, rest) = l.split_once(':')?;
        let (controllers, path) = rest.split_once(':')?;
        let hit = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        hit.then(|| path.trim_start_matches('/').to_string())
    })
}

/// Where the cgroup of `token` is. Inside this process's own cgroup (so that a scalprof run
/// as another's workload nests its cgroup inside the outer one's, which then holds, freezes
/// and kills both): in the v1 freezer hierarchy when it is mounted; on v2 when this cgroup
/// enables no controllers for its children (else a process may not sit beside a child
/// cgroup, and the new one goes next to this one). Deterministic, so that the keeper, which
/// shares scalprof's cgroup, finds it from the token.
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
        let own = own_cgroup("freezer").unwrap_or_default();
        return Some(v1.join(own).join(name));
    }
    let base = Path::new("/sys/fs/cgroup").join(own_cgroup("")?);
    // cgroup.kill (Linux 5.14) is what empties a v2 cgroup; the root cgroup has none.
    let inside = std::fs::read_to_string(base.join("cgroup.subtree_control"))
        .is_ok_and(|c| c.trim().is_empty());
    let dir = if inside {
        base
    } else {
        base.parent()?.to_path_buf()
    };
    dir.join("cgroup.kill").exists().then(|| dir.join(name))
}

/// Moves `pid` (a workload suspended before its exec) into the workload cgroup, making it
/// first; false where there is none or the move fails.
pub fn add(pid: i32) -> bool {
    let Some(dir) = tree() else { return false };
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return false,
    }
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok()
}

/// `dir` and every cgroup below it, parents before children.
fn cgroups_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(entries) = std::fs::read_dir(&out[i]) {
            for e in entries.flatten() {
                // Not a link: cgroupfs makes none, and a directory entry is a child cgroup.
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    out.push(e.path());
                }
            }
        }
        i += 1;
    }
    out
}

/// The processes in the cgroup at `dir` and below it.
fn members(dir: &Path) -> Vec<i32> {
    cgroups_under(dir)
        .iter()
        .flat_map(|d| {
            std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Kills every process in the cgroup at `dir` and below it, and waits until none is left (a
/// few rounds at most); gives how many were killed. On v2 `cgroup.kill` does it in the
/// kernel, with no process named by number; on v1 the cgroup is frozen (the freezer is
/// hierarchical), every member SIGKILLed, and thawed so the kills land.
pub fn kill_all(dir: &Path) -> usize {
    let v1 = dir.join("freezer.state").exists();
    let freeze = |on: bool| {
        let _ = std::fs::write(
            dir.join("freezer.state"),
            if on { "FROZEN" } else { "THAWED" },
        );
    };
    let mut killed = std::collections::HashSet::new();
    for _ in 0..20 {
        if v1 {
            freeze(true);
        }
        let now = members(dir);
        if now.is_empty() {
            if v1 {
                freeze(false);
            }
            break;
        }
        if v1 {
            for &pid in &now {
                // SAFETY: kill has no memory-safety preconditions; every pid is a member
                // of the cgroup scalprof made for its own workloads, frozen, so it can
                // neither exit nor be replaced before the signal.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            // A frozen process dies once thawed.
            freeze(false);
        } else {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        }
        killed.extend(now);
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.len()
}

/// Kills what is left in `dir` and below it, and removes the cgroups (children first).
pub fn remove(dir: &Path) {
    kill_all(dir);
    let mut all = cgroups_under(dir);
    all.reverse();
    for _ in 0..50 {
        all.retain(|d| std::fs::remove_dir(d).is_err() && d.exists());
        if all.is_empty() {
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

    /// A cgroup a nested scalprof made inside ours, with a process in it: killed and
    /// removed with ours.
    #[test]
    fn a_nested_cgroup_and_its_members_are_killed_and_removed() {
        use std::os::unix::process::ExitStatusExt;
        let dir = path_for(&format!("test{}-nested", std::process::id()));
        let Some(dir) = dir.filter(|d| std::fs::create_dir(d).is_ok()) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root with a cgroup hierarchy; this test needs both"
            );
            eprintln!("skipped: needs root and a writable cgroup hierarchy");
            return;
        };
        let inner = dir.join("scalprof-inner");
        std::fs::create_dir(&inner).unwrap();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(inner.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
        assert_eq!(members(&dir), vec![sleeper.id() as i32]);
        remove(&dir);
        let status = sleeper.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        assert!(!dir.exists(), "{} is left", dir.display());
    }
}
