//! The commit of the code a run measures: `--commit`, else the HEAD of the git checkout
//! the workload runs from, else the CI's own variable (`GITHUB_SHA`, `CI_COMMIT_SHA`).
//!
//! The checkout is read by hand (`.git/HEAD`, the ref it names, `packed-refs`), not with
//! `git rev-parse`: scalprof runs as root, and git run as root in another user's checkout
//! either refuses it (safe.directory) or, told to trust it, reads that user's config,
//! whose settings may run commands.
//!
//! A checkout is trusted only where git would trust it (its `safe.directory` rule): the
//! directory holding `.git`, the `.git` itself and, for a `.git` file, the directory it
//! names must all belong to the effective user. Another user's `/tmp/.git` would
//! otherwise choose the commit that root's run under `/tmp` is filed under, and `history`
//! would blame or hide a regression on it.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most a checkout's HEAD, ref or `.git` file may hold to be read.
const SMALL: usize = 4096;

/// The most `packed-refs` may hold to be read (a repository with many tags).
const PACKED: usize = 16 << 20;

/// A file of the checkout, as text: read without blocking on a FIFO, following no link
/// in its last component, and never past `cap` bytes (the checkout may be another
/// user's, and what they put there is data to validate, not a file to trust).
fn read(path: &Path, cap: usize) -> Option<String> {
    let bytes = scalprof_collect::private::read_shared(path, cap).ok()?;
    String::from_utf8(bytes).ok()
}

/// The commit a run is filed under, and the checkout it was not read from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommitOf {
    pub commit: Option<String>,
    /// A checkout another user owns, passed over: worth a warning.
    pub untrusted: Option<UntrustedCheckout>,
}

/// A git checkout whose HEAD was not read because another user owns part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntrustedCheckout {
    /// The directory holding `.git`.
    pub repository: PathBuf,
    /// What another user owns: that directory, its `.git`, or the directory a `.git`
    /// file names.
    pub owned: PathBuf,
    pub owner_uid: u32,
    /// The effective user scalprof runs as.
    pub user_uid: u32,
}

impl fmt::Display for UntrustedCheckout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the git checkout at {} is not trusted, so the run records no commit from it: {} \
             belongs to {}, not to {} (git's safe.directory rule); pass --commit SHA, or run \
             from a checkout you own",
            self.repository.display(),
            self.owned.display(),
            user_name(self.owner_uid),
            user_name(self.user_uid),
        )
    }
}

/// "uid 65534 (nobody)", or "uid 65534" where `/etc/passwd` does not name it.
fn user_name(uid: u32) -> String {
    let name = std::fs::read_to_string("/etc/passwd").ok().and_then(|t| {
        t.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_string())
        })
    });
    match name {
        Some(n) => format!("uid {uid} ({n})"),
        None => format!("uid {uid}"),
    }
}

/// The commit for a run of `command` started in `cwd`: `given`, the HEAD of a checkout
/// the effective user owns, or the CI's variable (set by the user, so theirs to trust);
/// `commit` is `None` when none is known.
pub fn commit_of(given: Option<&str>, command: &[String], cwd: &Path) -> CommitOf {
    if let Some(c) = given {
        return CommitOf {
            commit: Some(c.to_string()),
            untrusted: None,
        };
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // The program's own directory when it is named by a path, then where it runs.
    let program_dir = command
        .first()
        .filter(|p| p.contains('/'))
        .and_then(|p| cwd.join(p).parent().map(Path::to_path_buf));
    let mut untrusted = None;
    let found = program_dir
        .iter()
        .map(PathBuf::as_path)
        .chain([cwd])
        .find_map(|dir| match checkout_head(dir, me) {
            Ok(head) => head,
            Err(u) => {
                untrusted.get_or_insert(u);
                None
            }
        });
    let commit = found.or_else(|| {
        ["GITHUB_SHA", "CI_COMMIT_SHA"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| is_object_id(s)))
    });
    CommitOf { commit, untrusted }
}

/// `Err` naming the first of `paths` that `me` does not own (as git's `safe.directory`
/// check: root too trusts only what root owns). `lstat` and `stat` both: neither a link
/// nor what it leads to may be another user's.
fn owned_by(me: u32, repository: &Path, paths: &[&Path]) -> Result<(), UntrustedCheckout> {
    for path in paths {
        let owners = [path.symlink_metadata(), path.metadata()];
        for owner in owners.iter().flatten().map(MetadataExt::uid) {
            if owner != me {
                return Err(UntrustedCheckout {
                    repository: repository.to_path_buf(),
                    owned: path.to_path_buf(),
                    owner_uid: owner,
                    user_uid: me,
                });
            }
        }
    }
    Ok(())
}

/// The commit HEAD names in the checkout that holds `dir`, read only when `me` owns the
/// checkout (the nearest `.git` decides, as for git: one further up is not looked for).
fn checkout_head(dir: &Path, me: u32) -> Result<Option<String>, UntrustedCheckout> {
    let Some(git) = dir
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.symlink_metadata().is_ok())
    else {
        return Ok(None);
    };
    let Some(repository) = git.parent() else {
        return Ok(None);
    };
    owned_by(me, repository, &[repository, &git])?;
    trusted_head(&git, repository, me)
}

/// HEAD's commit, `git` being a `.git` that `me` owns: where it is a file (a worktree or
/// a submodule), the directory it names must be `me`'s too.
fn trusted_head(
    git: &Path,
    repository: &Path,
    me: u32,
) -> Result<Option<String>, UntrustedCheckout> {
    let is_file = git.symlink_metadata().is_ok_and(|m| m.is_file());
    let git = if is_file {
        let Some(target) = read(git, SMALL).and_then(|text| {
            let target = text.trim().strip_prefix("gitdir:")?.trim().to_string();
            Some(repository.join(target))
        }) else {
            return Ok(None);
        };
        owned_by(me, repository, &[&target])?;
        target
    } else {
        git.to_path_buf()
    };
    Ok(head_of(&git))
}

/// The commit HEAD names in the git directory `git`.
fn head_of(git: &Path) -> Option<String> {
    let head = read(&git.join("HEAD"), SMALL)?;
    let head = head.trim();
    let Some(name) = head.strip_prefix("ref:") else {
        return is_object_id(head).then(|| head.to_string());
    };
    let name = name.trim();
    // A ref's name stays inside refs/: nothing in it may climb out.
    if !name.starts_with("refs/") || name.split('/').any(|p| p == ".." || p.is_empty()) {
        return None;
    }
    // A worktree keeps its refs in the main repository (`commondir`).
    let common = read(&git.join("commondir"), SMALL)
        .map(|c| git.join(c.trim()))
        .unwrap_or_else(|| git.to_path_buf());
    [git, common.as_path()].iter().find_map(|g| {
        read(&g.join(name), SMALL)
            .map(|t| t.trim().to_string())
            .filter(|t| is_object_id(t))
            .or_else(|| packed(g, name))
    })
}

/// `name` in `packed-refs`.
fn packed(git: &Path, name: &str) -> Option<String> {
    read(&git.join("packed-refs"), PACKED)?
        .lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(_, r)| *r == name)
        .map(|(id, _)| id.to_string())
        .filter(|id| is_object_id(id))
}

/// SHA-1 or SHA-256 in hex.
fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "89abcdef0123456789abcdef0123456789abcdef";

    fn me() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }

    /// The HEAD of the checkout holding `dir`, which must be ours.
    fn head(dir: &Path) -> Option<String> {
        checkout_head(dir, me()).unwrap()
    }

    #[test]
    fn head_is_read_through_its_ref_packed_refs_and_a_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let git = repo.join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        std::fs::create_dir_all(repo.join("bench/sub")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{A}\n")).unwrap();
        // From a folder below the checkout, and for a program named by its path.
        assert_eq!(head(&repo.join("bench/sub")).as_deref(), Some(A));
        let cmd = vec!["repo/bench/run".to_string()];
        assert_eq!(commit_of(None, &cmd, dir.path()).commit.as_deref(), Some(A));
        // A ref only in packed-refs.
        std::fs::remove_file(git.join("refs/heads/main")).unwrap();
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs\n{B} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(head(&repo).as_deref(), Some(B));
        // A worktree: .git names its folder, whose refs are the main repository's.
        let wt = dir.path().join("wt");
        let wt_git = git.join("worktrees/wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        std::fs::write(wt_git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        assert_eq!(head(&wt).as_deref(), Some(B));
        // A detached HEAD; a ref that climbs out is refused.
        std::fs::write(git.join("HEAD"), format!("{A}\n")).unwrap();
        assert_eq!(head(&repo).as_deref(), Some(A));
        std::fs::write(git.join("HEAD"), "ref: refs/../../../etc/passwd\n").unwrap();
        assert_eq!(head(&repo), None);
        // Given: taken as it is.
        assert_eq!(
            commit_of(Some("v1.2"), &cmd, dir.path()).commit.as_deref(),
            Some("v1.2")
        );
    }

    /// A checkout of our own whose HEAD is a FIFO or a link to /dev/zero is not waited on
    /// nor read without end: no commit.
    #[test]
    fn a_head_that_is_a_fifo_or_endless_gives_no_commit() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir(&git).unwrap();
        let file = git.join("HEAD");
        let made = std::process::Command::new("mkfifo")
            .arg(&file)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(head(dir.path()), None);
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        assert_eq!(head(dir.path()), None);
    }

    /// Another user, to own what a test makes: `nobody`. Changing a file's owner takes
    /// root; without it the test is skipped, except in CI, where it must run.
    fn other_user() -> Option<u32> {
        if me() != 0 {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs the tests as root: the checkout owned by another user must be tested"
            );
            eprintln!("skipped: changing a file's owner to another user takes root");
            return None;
        }
        Some(65534)
    }

    fn chown(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
    }

    #[test]
    fn a_checkout_another_user_owns_gives_no_commit_and_says_why() {
        let Some(other) = other_user() else { return };
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let git = repo.join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        std::fs::create_dir_all(repo.join("bench")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{A}\n")).unwrap();
        let cmd = vec!["./run".to_string()];
        let bench = repo.join("bench");
        // Ours: read.
        assert_eq!(commit_of(None, &cmd, &bench).commit.as_deref(), Some(A));
        assert_eq!(commit_of(None, &cmd, &bench).untrusted, None);
        // Its `.git` is another user's (the `/tmp/.git` case): not read, and said.
        chown(&git, other);
        let got = commit_of(None, &cmd, &bench);
        assert_ne!(got.commit.as_deref(), Some(A));
        let untrusted = got.untrusted.expect("the untrusted checkout is named");
        assert_eq!(untrusted.repository, repo);
        assert_eq!(untrusted.owned, git);
        assert_eq!(untrusted.owner_uid, other);
        let said = untrusted.to_string();
        for part in [&*repo.display().to_string(), "uid 65534", "--commit SHA"] {
            assert!(said.contains(part), "{said:?} names {part:?}");
        }
        // A `.git` further up does not stand in for it.
        let outer = dir.path().join(".git");
        std::fs::create_dir_all(outer.join("refs/heads")).unwrap();
        std::fs::write(outer.join("HEAD"), format!("{B}\n")).unwrap();
        assert!(checkout_head(&bench, me()).is_err());
        std::fs::remove_dir_all(&outer).unwrap();
        // Ours again, in a folder another user owns: not read either.
        chown(&git, me());
        chown(&repo, other);
        assert_eq!(checkout_head(&bench, me()).unwrap_err().owned, repo);
        chown(&repo, me());
        assert_eq!(head(&bench).as_deref(), Some(A));
        // A `.git` file of ours that names another user's directory.
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", git.display())).unwrap();
        assert_eq!(head(&wt).as_deref(), Some(A));
        chown(&git, other);
        assert_eq!(checkout_head(&wt, me()).unwrap_err().owned, git);
        // A link named `.git`, ours, to another user's directory.
        let linked = dir.path().join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(&git, linked.join(".git")).unwrap();
        assert_eq!(
            checkout_head(&linked, me()).unwrap_err().owned,
            linked.join(".git")
        );
        chown(&git, me());
        assert_eq!(head(&linked).as_deref(), Some(A));
    }
}
