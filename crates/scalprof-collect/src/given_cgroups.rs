//! Cgroups the user puts the workload in (`scalprof run --cgroup PATH`): "what if the
//! quota were 4 CPUs" without a container runtime. Each workload process joins them
//! before its exec, after scalprof's own workload cgroup (see [`crate::cgroup`]); on a v1
//! machine those are other hierarchies and both hold, on v2 the given one replaces it
//! (the workload's orphans are still found: scalprof is their subreaper). The limits and
//! the throttling are then read for the given cgroups, as the kernel applies them.
//!
//! Set once, before the sweep, like the workload cgroup's own path. Written by hand: a
//! few files under /sys/fs/cgroup.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where cgroup hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A cgroup given with `--cgroup`.
#[derive(Clone, Debug, PartialEq)]
struct Given {
    dir: PathBuf,
    /// The v1 hierarchy's controllers (`cpu,cpuacct`); empty for v2.
    controllers: String,
    /// From its hierarchy's root, without the leading `/`.
    path: String,
}

static GIVEN: OnceLock<Vec<Given>> = OnceLock::new();

/// Why a `--cgroup` cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("--cgroup {path}: {why}")]
pub struct CgroupError {
    pub path: PathBuf,
    pub why: String,
}

/// Puts every workload this process starts from now on into the cgroups at `dirs`
/// (directories of a mounted cgroup hierarchy, v1 or v2). Checked now: each must exist,
/// lie under /sys/fs/cgroup and take processes. Set once; a second call with other
/// cgroups is refused.
pub fn place_workloads_in(dirs: &[PathBuf]) -> Result<(), CgroupError> {
    let given = dirs
        .iter()
        .map(|d| resolve(Path::new(CGROUP_ROOT), d))
        .collect::<Result<Vec<_>, _>>()?;
    if GIVEN.get_or_init(|| given.clone()) != &given {
        return Err(CgroupError {
            path: dirs.first().cloned().unwrap_or_default(),
            why: "the workload's cgroups were already set in this process".into(),
        });
    }
    Ok(())
}

/// Which hierarchy `dir` is in, under the mounts at `root`.
fn resolve(root: &Path, dir: &Path) -> Result<Given, CgroupError> {
    let fail = |why: &str| CgroupError {
        path: dir.to_path_buf(),
        why: why.into(),
    };
    let real = dir
        .canonicalize()
        .map_err(|e| fail(&format!("{e} (make it first: mkdir, then set its limits)")))?;
    let root = root
        .canonicalize()
        .map_err(|_| fail("no cgroup hierarchy is mounted"))?;
    let rest = real
        .strip_prefix(&root)
        .map_err(|_| fail(&format!("not a cgroup: it is not under {}", root.display())))?;
    if !real.join("cgroup.procs").is_file() {
        return Err(fail("not a cgroup: it has no cgroup.procs"));
    }
    if let Some(why) = not_ours(&root, &real).or_else(|| frozen(&root, &real)) {
        return Err(fail(&why));
    }
    let mut parts = rest.components();
    let text = |p: &Path| p.to_string_lossy().into_owned();
    // v2 at the root, or beside v1 at `unified`; else the v1 hierarchy named by its mount.
    if root.join("cgroup.controllers").is_file() {
        return Ok(Given {
            dir: real.clone(),
            controllers: String::new(),
            path: text(rest),
        });
    }
    let first = parts
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .ok_or_else(|| fail("the hierarchies' root is not a cgroup to run in"))?;
    Ok(Given {
        dir: real.clone(),
        controllers: if first == "unified" {
            String::new()
        } else {
            first
        },
        path: text(parts.as_path()),
    })
}

/// Why the cgroup at `real` (under `root`) is not one only we and root control: it, or a
/// cgroup above it, belongs to another user, who could freeze the workload or change its
/// limits in the middle of the sweep.
fn not_ours(root: &Path, real: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    real.ancestors()
        .take_while(|d| d.starts_with(root) && *d != root)
        .find_map(|d| {
            let uid = std::fs::symlink_metadata(d).ok()?.uid();
            (uid != me && uid != 0).then(|| {
                format!(
                    "{} belongs to another user (uid {uid}), who could freeze the workload \
                     or change its limits during the sweep; use a cgroup of your own \
                     (mkdir under {})",
                    d.display(),
                    root.display()
                )
            })
        })
}

/// Why the cgroup at `real` cannot run a workload now: it (or one above it) is frozen
/// (v1 `freezer.state`, v2 `cgroup.events`' `frozen 1`), where a workload would wait
/// past any timeout.
fn frozen(root: &Path, real: &Path) -> Option<String> {
    let read = |p: &Path| {
        crate::private::read_shared(p, 4096)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    real.ancestors()
        .take_while(|d| d.starts_with(root) && *d != root)
        .find_map(|d| {
            let v1 = read(&d.join("freezer.state")).is_some_and(|s| s.trim() != "THAWED");
            let v2 = read(&d.join("cgroup.events"))
                .is_some_and(|s| s.lines().any(|l| l.trim() == "frozen 1"));
            (v1 || v2).then(|| {
                format!(
                    "{} is frozen: a workload there would never run (thaw it first)",
                    d.display()
                )
            })
        })
}

/// `/proc/self/cgroup`'s text as the workload will have it: each given cgroup in place of
/// this process's own in its hierarchy.
pub(crate) fn workload_cgroups(own: &str) -> String {
    substitute(own, GIVEN.get().map_or(&[][..], Vec::as_slice))
}

fn substitute(own: &str, given: &[Given]) -> String {
    own.lines()
        .map(|line| {
            let mut fields = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(_)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return format!("{line}\n");
            };
            let hit = given.iter().find(|g| {
                if g.controllers.is_empty() {
                    controllers.is_empty()
                } else {
                    controllers
                        .split(',')
                        .any(|c| g.controllers.split(',').any(|d| d == c))
                }
            });
            match hit {
                Some(g) => format!("{id}:{controllers}:/{}\n", g.path),
                None => format!("{line}\n"),
            }
        })
        .collect()
}

/// Moves the suspended workload `pid` into the given cgroups; false if one refused it.
pub(crate) fn join(pid: i32) -> bool {
    GIVEN
        .get()
        .into_iter()
        .flatten()
        .all(|g| std::fs::write(g.dir.join("cgroup.procs"), pid.to_string()).is_ok())
}

/// Whether the workload runs in given cgroups.
pub fn any() -> bool {
    GIVEN.get().is_some_and(|g| !g.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_cgroup_takes_the_place_of_its_hierarchy_s_line() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("cpu,cpuacct/what-if")).unwrap();
        std::fs::write(r.join("cpu,cpuacct/what-if/cgroup.procs"), "").unwrap();
        std::fs::create_dir_all(r.join("cpuset")).unwrap();
        let g = resolve(r, &r.join("cpu,cpuacct/what-if")).unwrap();
        assert_eq!(g.controllers, "cpu,cpuacct");
        assert_eq!(g.path, "what-if");
        let own = "5:cpuset:/\n3:cpu,cpuacct:/user.slice\n0::/user.slice/s.scope\n";
        assert_eq!(
            substitute(own, &[g]),
            "5:cpuset:/\n3:cpu,cpuacct:/what-if\n0::/user.slice/s.scope\n"
        );
        // Not a cgroup: said, with what to do.
        let e = resolve(r, &r.join("cpuset")).unwrap_err();
        assert!(e.to_string().contains("no cgroup.procs"), "{e}");
        let e = resolve(r, Path::new("/tmp")).unwrap_err();
        assert!(e.to_string().contains("not under"), "{e}");
        let e = resolve(r, &r.join("missing")).unwrap_err();
        assert!(e.to_string().contains("mkdir"), "{e}");
        // Frozen, itself or from above: refused, not waited on.
        std::fs::write(
            r.join("cpu,cpuacct/what-if/cgroup.events"),
            "populated 0\nfrozen 1\n",
        )
        .unwrap();
        let e = resolve(r, &r.join("cpu,cpuacct/what-if")).unwrap_err();
        assert!(e.to_string().contains("is frozen"), "{e}");
    }

    #[test]
    fn another_user_s_cgroup_is_refused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("another_user_s_cgroup_is_refused: skipped, chown needs root");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("cpu/theirs/mine")).unwrap();
        std::fs::write(r.join("cpu/theirs/mine/cgroup.procs"), "").unwrap();
        std::os::unix::fs::chown(r.join("cpu/theirs"), Some(65534), Some(65534)).unwrap();
        let e = resolve(r, &r.join("cpu/theirs/mine")).unwrap_err();
        assert!(e.to_string().contains("uid 65534"), "{e}");
    }
}
