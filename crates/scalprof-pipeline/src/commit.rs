//! The commit of the code a run measures: `--commit`, else the HEAD of the git checkout
//! the workload runs from, else the CI's own variable (`GITHUB_SHA`, `CI_COMMIT_SHA`).
//!
//! The checkout is read by hand (`.git/HEAD`, the ref it names, `packed-refs`), not with
//! `git rev-parse`: scalprof runs as root, and git run as root in another user's checkout
//! either refuses it (safe.directory) or, told to trust it, reads that user's config,
//! whose settings may run commands.

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

/// The commit for a run of `command` started in `cwd`: `given`, the checkout's HEAD, or
/// the CI's variable; `None` when none is known.
pub fn commit_of(given: Option<&str>, command: &[String], cwd: &Path) -> Option<String> {
    if let Some(c) = given {
        return Some(c.to_string());
    }
    // The program's own directory when it is named by a path, then where it runs.
    let program_dir = command
        .first()
        .filter(|p| p.contains('/'))
        .and_then(|p| cwd.join(p).parent().map(Path::to_path_buf));
    let found = program_dir
        .iter()
        .map(PathBuf::as_path)
        .chain([cwd])
        .find_map(checkout_head);
    found.or_else(|| {
        ["GITHUB_SHA", "CI_COMMIT_SHA"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| is_object_id(s)))
    })
}

/// The commit HEAD names in the checkout that holds `dir`.
fn checkout_head(dir: &Path) -> Option<String> {
    let git = dir
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.symlink_metadata().is_ok())?;
    // A worktree or submodule: `.git` is a file naming the real directory.
    let git = if git.symlink_metadata().ok()?.is_file() {
        let text = read(&git, SMALL)?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        git.parent()?.join(target)
    } else {
        git
    };
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
        .unwrap_or_else(|| git.clone());
    [&git, &common].iter().find_map(|g| {
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
        assert_eq!(checkout_head(&repo.join("bench/sub")).as_deref(), Some(A));
        let cmd = vec!["repo/bench/run".to_string()];
        assert_eq!(commit_of(None, &cmd, dir.path()).as_deref(), Some(A));
        // A ref only in packed-refs.
        std::fs::remove_file(git.join("refs/heads/main")).unwrap();
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs\n{B} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(checkout_head(&repo).as_deref(), Some(B));
        // A worktree: .git names its folder, whose refs are the main repository's.
        let wt = dir.path().join("wt");
        let wt_git = git.join("worktrees/wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        std::fs::write(wt_git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        assert_eq!(checkout_head(&wt).as_deref(), Some(B));
        // A detached HEAD; a ref that climbs out is refused.
        std::fs::write(git.join("HEAD"), format!("{A}\n")).unwrap();
        assert_eq!(checkout_head(&repo).as_deref(), Some(A));
        std::fs::write(git.join("HEAD"), "ref: refs/../../../etc/passwd\n").unwrap();
        assert_eq!(checkout_head(&repo), None);
        // Given: taken as it is.
        assert_eq!(
            commit_of(Some("v1.2"), &cmd, dir.path()).as_deref(),
            Some("v1.2")
        );
    }
}
