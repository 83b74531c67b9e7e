//! Processes the sweep does not start — a server under a swept client — whose profiles and
//! waits are collected alongside the command's (`run --attach PID`, `--attach-name COMM`).
//! The targets are found again before every repeat: a server may have restarted, and the
//! processes it forked since (PostgreSQL's per-connection backends) belong to it.
//!
//! Only processes of the user who runs scalprof (its real uid; root's own for root) are
//! targets, unless `--attach-uid` names another user: a process is a user's when all its
//! uids (real, effective, saved and filesystem) are that user's. Another user's process
//! found by name is skipped, and one that changes its uids after it was attached to is
//! dropped, with a line saying so.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::CollectError;

/// What to attach to, as the user named it.
#[derive(Clone, Debug, Default)]
pub struct AttachSpec {
    pub pids: Vec<i32>,
    /// Command names (`/proc/PID/comm`, at most 15 characters, as `ps -o comm` shows).
    pub names: Vec<String>,
    /// Each of `pids` with its start time (clock ticks after boot) when the sweep began
    /// ([`AttachSpec::pinned`]): a PID found again with another start time is another
    /// process, which took the number of one that exited.
    pub started: Vec<(i32, u64)>,
    /// Users whose processes are targets besides the invoking user's (`--attach-uid`).
    pub uids: Vec<u32>,
    /// The targets attached to so far, by PID and start time, with their command names:
    /// one found again with uids no longer allowed is dropped with a line
    /// ([`AttachSpec::resolve_noting`]). Shared by clones.
    attached: Arc<Mutex<BTreeMap<(i32, u64), String>>>,
}

impl PartialEq for AttachSpec {
    fn eq(&self, other: &Self) -> bool {
        (&self.pids, &self.names, &self.started, &self.uids)
            == (&other.pids, &other.names, &other.started, &other.uids)
    }
}

impl Eq for AttachSpec {}

/// The processes to observe now, and what was left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    pub pids: Vec<i32>,
    /// Targets attached to before that now run with other uids, one sentence each: they
    /// are no longer observed.
    pub dropped: Vec<String>,
    /// Other users' processes with a named command, or descendants of a target, that are
    /// not targets (a sentence naming how many and whose, and the flag); `None`: none.
    pub skipped: Option<String>,
}

/// A process's real, effective, saved and filesystem uids (`Uid:` of /proc/PID/status).
type Uids = [u32; 4];

impl AttachSpec {
    /// The processes `pids`, those with the command names `names`, and their descendants,
    /// of the invoking user and the users `uids` ([`AttachSpec::pinned`] pins the PIDs).
    pub fn new(pids: Vec<i32>, names: Vec<String>, uids: Vec<u32>) -> AttachSpec {
        AttachSpec {
            pids,
            names,
            uids,
            ..Default::default()
        }
    }

    /// The uid of a user `/etc/passwd` names: what `--attach-uid NAME` means.
    pub fn uid_of_user(name: &str) -> Option<u32> {
        uid_of_user(name)
    }

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
            .filter_map(|pid| Some((*pid, table.get(pid)?.start)))
            .collect();
        self
    }

    /// The processes to observe now: the named ones, every process with a named command,
    /// and the descendants of all of them, those of allowed users only. scalprof itself
    /// is never a target.
    pub fn resolve(&self) -> Result<Vec<i32>, CollectError> {
        self.resolve_in(
            Path::new("/proc"),
            std::process::id() as i32,
            real_uid(),
            false,
        )
        .map(|r| r.pids)
    }

    /// [`AttachSpec::resolve`], with the other users' processes it left alone in words.
    pub fn resolve_found(&self) -> Result<Resolved, CollectError> {
        self.resolve_in(
            Path::new("/proc"),
            std::process::id() as i32,
            real_uid(),
            false,
        )
    }

    /// [`AttachSpec::resolve`], remembering the targets: one attached to before that now
    /// runs with other uids is dropped, and said so in [`Resolved::dropped`]. Called
    /// before each traced repeat.
    pub fn resolve_noting(&self) -> Result<Resolved, CollectError> {
        self.resolve_in(
            Path::new("/proc"),
            std::process::id() as i32,
            real_uid(),
            true,
        )
    }

    /// Whether a process with these uids is a target: all four are one user's, and that
    /// user is `me` or one `--attach-uid` named.
    fn allows(&self, me: u32, uids: &Uids) -> bool {
        uids.iter().all(|&u| u == uids[0]) && (uids[0] == me || self.uids.contains(&uids[0]))
    }

    fn resolve_in(
        &self,
        proc: &Path,
        own: i32,
        me: u32,
        note: bool,
    ) -> Result<Resolved, CollectError> {
        let table = process_table(proc);
        let mut attached = self.attached.lock().unwrap_or_else(|e| e.into_inner());
        let mut dropped = Vec::new();
        // A process attached to before whose uids no longer pass: dropped, with a line.
        let mut drop_if_changed = |pid: i32, start: u64, uids: &Uids| -> bool {
            let Some(comm) = attached.get(&(pid, start)).cloned() else {
                return false;
            };
            if note {
                attached.remove(&(pid, start));
                dropped.push(format!(
                    "attached process {pid} ({comm}) now runs as {}: it is no longer observed \
                     (--attach-uid {} would allow that user)",
                    describe_uids(uids),
                    uids[0]
                ));
            }
            true
        };
        let mut roots: BTreeSet<i32> = BTreeSet::new();
        for &pid in &self.pids {
            let found = table
                .get(&pid)
                .and_then(|p| Some((p, read_uids(proc, pid)?)));
            let Some((p, uids)) = found else {
                return Err(CollectError::Attach(format!(
                    "--attach {pid}: no such process (is the server running? `pgrep -a NAME` \
                     lists candidates)"
                )));
            };
            if let Some(&(_, was)) = self.started.iter().find(|(p, _)| *p == pid) {
                if was != p.start {
                    return Err(CollectError::Attach(format!(
                        "--attach {pid}: the process has exited, and its PID now belongs to \
                         another process ({}), which is not profiled; the points measured \
                         before are kept (attach by name, --attach-name, to follow a server \
                         that restarts)",
                        p.comm
                    )));
                }
            }
            if !self.allows(me, &uids) {
                if drop_if_changed(pid, p.start, &uids) {
                    continue;
                }
                return Err(CollectError::Attach(format!(
                    "--attach {pid}: the process ({}) runs as {}, not as you ({}); scalprof \
                     attaches only to your own processes unless --attach-uid names their \
                     user: add --attach-uid {}",
                    p.comm,
                    describe_uids(&uids),
                    user_label(me),
                    uids[0]
                )));
            }
            roots.insert(pid);
        }
        // Other users' processes left out, with their owners (real uid), and those
        // dropped: each counted once, however it was found.
        let mut skipped: BTreeMap<i32, u32> = BTreeMap::new();
        let mut gone: BTreeSet<i32> = BTreeSet::new();
        for name in &self.names {
            let wanted = truncate_comm(name);
            let matching: Vec<(i32, &Proc, Uids)> = table
                .iter()
                .filter(|(_, p)| p.comm == wanted)
                .filter_map(|(&pid, p)| Some((pid, p, read_uids(proc, pid)?)))
                .collect();
            if matching.is_empty() {
                return Err(CollectError::Attach(format!(
                    "--attach-name {name}: no running process has that command name \
                     (`ps -eo comm` shows the names)"
                )));
            }
            let mut others: BTreeMap<u32, usize> = BTreeMap::new();
            let (mut allowed, mut changed) = (0, 0);
            for (pid, p, uids) in &matching {
                if self.allows(me, uids) {
                    roots.insert(*pid);
                    allowed += 1;
                } else if drop_if_changed(*pid, p.start, uids) {
                    gone.insert(*pid);
                    changed += 1;
                } else {
                    skipped.insert(*pid, uids[0]);
                    *others.entry(uids[0]).or_default() += 1;
                }
            }
            if allowed == 0 && changed == 0 {
                let n: usize = others.values().sum();
                return Err(CollectError::Attach(format!(
                    "--attach-name {name}: {} with that command name {} to other users \
                     ({}), and scalprof attaches only to your own ({}) unless --attach-uid \
                     names their user: add --attach-uid {}",
                    plural(n, "process", "processes"),
                    if n == 1 { "belongs" } else { "belong" },
                    by_owner(&others),
                    user_label(me),
                    uid_list(&others)
                )));
            }
        }
        // Descendants: a server's workers that already run, of allowed users only.
        let mut tree = roots.clone();
        loop {
            let more: Vec<i32> = table
                .iter()
                .filter(|(pid, p)| tree.contains(&p.ppid) && !tree.contains(pid))
                .map(|(&pid, _)| pid)
                .collect();
            if more.is_empty() {
                break;
            }
            tree.extend(more);
        }
        let mut out = BTreeSet::new();
        for pid in tree {
            if skipped.contains_key(&pid) || gone.contains(&pid) {
                continue;
            }
            if roots.contains(&pid) {
                out.insert(pid);
                continue;
            }
            let Some(uids) = read_uids(proc, pid) else {
                continue; // exited meanwhile
            };
            if self.allows(me, &uids) {
                out.insert(pid);
            } else if !drop_if_changed(pid, table[&pid].start, &uids) {
                skipped.insert(pid, uids[0]);
            }
        }
        out.remove(&own);
        if out.is_empty() {
            return Err(CollectError::Attach(if dropped.is_empty() {
                "nothing to attach to: the only match is scalprof itself".into()
            } else {
                format!(
                    "nothing left to attach to: {}; the points measured before are kept",
                    dropped.join("; ")
                )
            }));
        }
        if note {
            for &pid in &out {
                attached
                    .entry((pid, table[&pid].start))
                    .or_insert_with(|| table[&pid].comm.clone());
            }
        }
        let mut owners: BTreeMap<u32, usize> = BTreeMap::new();
        for uid in skipped.values() {
            *owners.entry(*uid).or_default() += 1;
        }
        let skipped = (!owners.is_empty()).then(|| {
            let n = skipped.len();
            format!(
                "{} of other users ({}) {} not attached to (--attach-uid {} would take them)",
                plural(n, "process", "processes"),
                by_owner(&owners),
                if n == 1 { "is" } else { "are" },
                uid_list(&owners)
            )
        });
        Ok(Resolved {
            pids: out.into_iter().collect(),
            dropped,
            skipped,
        })
    }
}

/// The real uid scalprof runs as: whose processes are targets without `--attach-uid`.
fn real_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// A process's uids, or `None` where it exited (or /proc hides them).
fn read_uids(proc: &Path, pid: i32) -> Option<Uids> {
    let status = std::fs::read_to_string(proc.join(pid.to_string()).join("status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    let mut uids = line.split_whitespace().map(|u| u.parse::<u32>().ok());
    Some([uids.next()??, uids.next()??, uids.next()??, uids.next()??])
}

/// "uid 1000 (alice)"; a process whose uids differ: "uids 1000/0/0/0 (real/effective/saved/fs)".
fn describe_uids(uids: &Uids) -> String {
    if uids.iter().all(|&u| u == uids[0]) {
        user_label(uids[0])
    } else {
        format!(
            "uids {}/{}/{}/{} (real/effective/saved/fs; real: {})",
            uids[0],
            uids[1],
            uids[2],
            uids[3],
            user_label(uids[0])
        )
    }
}

/// "uid 1000 (alice): 10, uid 1001: 4".
fn by_owner(counts: &BTreeMap<u32, usize>) -> String {
    counts
        .iter()
        .map(|(uid, n)| format!("{}: {n}", user_label(*uid)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "1000,1001": the value of an `--attach-uid` that takes them.
fn uid_list(counts: &BTreeMap<u32, usize>) -> String {
    counts
        .keys()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `/etc/passwd`'s (name, uid) pairs; local users only (no NSS lookups).
fn passwd() -> Vec<(String, u32)> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let uid = f.nth(1)?.parse().ok()?;
            Some((name.to_string(), uid))
        })
        .collect()
}

/// "uid 65534 (nobody)", or "uid 65534" where `/etc/passwd` does not name it.
pub fn user_label(uid: u32) -> String {
    match passwd().into_iter().find(|(_, u)| *u == uid) {
        Some((name, _)) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

/// The uid of a user named in `/etc/passwd` (`--attach-uid postgres`).
pub fn uid_of_user(name: &str) -> Option<u32> {
    passwd()
        .into_iter()
        .find_map(|(n, uid)| (n == name).then_some(uid))
}

/// The kernel keeps the first 15 bytes of a command name.
fn truncate_comm(name: &str) -> String {
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

/// One process of the table.
struct Proc {
    comm: String,
    ppid: i32,
    /// Clock ticks after boot: with the PID, which process this is.
    start: u64,
}

/// Every process, by pid.
fn process_table(proc: &Path) -> HashMap<i32, Proc> {
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
        let start = field(22).unwrap_or(0);
        out.insert(pid, Proc { comm, ppid, start });
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

    /// A /proc with these processes: (pid, command name, parent, uids).
    fn fake_proc(procs: &[(i32, &str, i32, Uids)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for &(pid, comm, ppid, uids) in procs {
            let p = dir.path().join(pid.to_string());
            std::fs::create_dir(&p).unwrap();
            // Fields 3–22: state, ppid, then 17 zeros, then the start time (pid · 10).
            let middle = "0 ".repeat(17);
            std::fs::write(
                p.join("stat"),
                format!("{pid} ({comm}) S {ppid} {middle}{} 0", pid * 10),
            )
            .unwrap();
            set_uids(dir.path(), pid, uids);
        }
        dir
    }

    fn set_uids(proc: &Path, pid: i32, [r, e, s, f]: Uids) {
        std::fs::write(
            proc.join(pid.to_string()).join("status"),
            format!("Name:\tx\nPid:\t{pid}\nUid:\t{r}\t{e}\t{s}\t{f}\nGid:\t0\t0\t0\t0\n"),
        )
        .unwrap();
    }

    fn spec(pids: &[i32], names: &[&str]) -> AttachSpec {
        AttachSpec {
            pids: pids.to_vec(),
            names: names.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    const ROOT: Uids = [0; 4];
    const ALICE: Uids = [1000; 4];
    const BOB: Uids = [1001; 4];

    #[test]
    fn names_pids_and_their_descendants_resolve_and_unknown_ones_are_errors() {
        let proc = fake_proc(&[
            (1, "init", 0, ROOT),
            (100, "postgres", 1, ROOT),
            (101, "postgres", 100, ROOT),
            (102, "walwriter (x)", 100, ROOT),
            (200, "server", 1, ROOT),
            (201, "worker", 200, ROOT),
            (300, "scalprof", 1, ROOT),
        ]);
        let pids = |s: &AttachSpec, own| s.resolve_in(proc.path(), own, 0, false).map(|r| r.pids);
        assert_eq!(
            pids(&spec(&[], &["postgres"]), 300).unwrap(),
            [100, 101, 102]
        );
        assert_eq!(pids(&spec(&[200], &[]), 300).unwrap(), [200, 201]);
        let e = pids(&spec(&[999], &[]), 300).unwrap_err();
        assert!(
            e.to_string().contains("--attach 999: no such process"),
            "{e}"
        );
        let e = pids(&spec(&[], &["mysqld"]), 300).unwrap_err();
        assert!(e.to_string().contains("--attach-name mysqld"), "{e}");
        let e = pids(&spec(&[300], &[]), 300).unwrap_err();
        assert!(e.to_string().contains("scalprof itself"), "{e}");
        // A PID pinned with another start time was taken by another process.
        let mut pinned = spec(&[200], &[]);
        pinned.started = vec![(200, 2000)];
        assert_eq!(pids(&pinned, 300).unwrap(), [200, 201]);
        pinned.started = vec![(200, 1999)];
        let e = pids(&pinned, 300).unwrap_err();
        assert!(
            e.to_string()
                .contains("now belongs to another process (server)"),
            "{e}"
        );
        // Longer names match the kernel's 15-byte command name.
        let proc = fake_proc(&[(5, "a_very_long_ser", 1, ROOT)]);
        assert_eq!(
            spec(&[], &["a_very_long_server_name"])
                .resolve_in(proc.path(), 1, 0, false)
                .unwrap()
                .pids,
            [5]
        );
    }

    #[test]
    fn only_the_invoking_user_s_processes_are_targets_unless_attach_uid_names_another() {
        let proc = fake_proc(&[
            (1, "init", 0, ROOT),
            (100, "postgres", 1, ROOT),
            (101, "postgres", 100, ROOT),
            // A root server's worker that changed to another user.
            (102, "postgres", 100, ALICE),
            (200, "postgres", 1, ALICE),
            (201, "postgres", 200, ALICE),
            (300, "postgres", 1, BOB),
            // A setuid-root program another user started: real uid theirs.
            (400, "passwd", 1, [1000, 0, 0, 0]),
            (500, "mysqld", 1, ALICE),
        ]);
        let resolve = |s: &AttachSpec, me| s.resolve_in(proc.path(), 1, me, false);
        // Root takes root's, and says what it left out and how to take it.
        let r = resolve(&spec(&[], &["postgres"]), 0).unwrap();
        assert_eq!(r.pids, [100, 101]);
        let skipped = r.skipped.unwrap();
        let owners = format!("{}: 3, {}: 1", user_label(1000), user_label(1001));
        assert!(
            skipped.contains(&format!("4 processes of other users ({owners})")),
            "{skipped}"
        );
        assert!(skipped.contains("--attach-uid 1000,1001"), "{skipped}");
        // Another user takes only theirs, the descendants of a target included.
        assert_eq!(
            resolve(&spec(&[], &["postgres"]), 1000).unwrap().pids,
            [102, 200, 201]
        );
        // --attach-uid adds that user's.
        let mut alice = spec(&[], &["postgres"]);
        alice.uids = vec![1000];
        assert_eq!(resolve(&alice, 0).unwrap().pids, [100, 101, 102, 200, 201]);
        // A name that only other users' processes have: how many, whose, and the flag.
        let e = resolve(&spec(&[], &["mysqld"]), 0).unwrap_err().to_string();
        assert!(e.contains("--attach-name mysqld: 1 process"), "{e}");
        assert!(e.contains("uid 1000"), "{e}");
        assert!(e.contains("add --attach-uid 1000"), "{e}");
        // A PID of another user: refused, naming the owner and the flag.
        let e = resolve(&spec(&[300], &[]), 0).unwrap_err().to_string();
        assert!(
            e.contains("--attach 300: the process (postgres) runs as uid 1001"),
            "{e}"
        );
        assert!(e.contains("add --attach-uid 1001"), "{e}");
        let mut bob = spec(&[300], &[]);
        bob.uids = vec![1001];
        assert_eq!(resolve(&bob, 0).unwrap().pids, [300]);
        // Mixed uids are no one user's: not even the real user's --attach-uid takes them.
        let mut setuid = spec(&[400], &[]);
        setuid.uids = vec![1000];
        let e = resolve(&setuid, 0).unwrap_err().to_string();
        assert!(e.contains("uids 1000/0/0/0"), "{e}");
        assert!(resolve(&spec(&[400], &[]), 1000).is_err());
    }

    #[test]
    fn a_target_that_changes_its_uids_between_resolutions_is_dropped_with_a_line() {
        let proc = fake_proc(&[
            (1, "init", 0, ROOT),
            (100, "server", 1, ROOT),
            (101, "server", 100, ROOT),
            (200, "solo", 1, ROOT),
        ]);
        let s = spec(&[], &["server"]);
        let noting = |s: &AttachSpec| s.resolve_in(proc.path(), 1, 0, true);
        assert_eq!(noting(&s).unwrap().pids, [100, 101]);
        set_uids(proc.path(), 101, ALICE);
        // A look that notes nothing does not drop it, and takes it no more either.
        assert_eq!(s.resolve_in(proc.path(), 1, 0, false).unwrap().pids, [100]);
        let r = noting(&s).unwrap();
        assert_eq!(r.pids, [100]);
        assert_eq!(r.dropped.len(), 1, "{:?}", r.dropped);
        assert!(
            r.dropped[0].contains("attached process 101 (server) now runs as uid 1000"),
            "{:?}",
            r.dropped
        );
        // Said once.
        assert!(noting(&s).unwrap().dropped.is_empty());
        // A PID given, attached to, then changed: dropped; with nothing left, the error
        // says why.
        let solo = spec(&[200], &[]);
        assert_eq!(noting(&solo).unwrap().pids, [200]);
        set_uids(proc.path(), 200, [0, 1000, 0, 0]);
        let e = noting(&solo).unwrap_err().to_string();
        assert!(e.contains("nothing left to attach to"), "{e}");
        assert!(e.contains("200 (solo) now runs as uids 0/1000/0/0"), "{e}");
    }

    use crate::test_support::require_root;

    #[test]
    #[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
    fn another_user_s_process_with_the_same_name_is_not_a_target() {
        let test = "another_user_s_process_with_the_same_name_is_not_a_target";
        require_root(test);
        use std::os::unix::fs::PermissionsExt;
        // A copy of sleep with a name no other process has, that nobody may run too.
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let name = format!("spat{}", std::process::id() % 100_000_000);
        let exe = dir.path().join(&name);
        let sleep = ["/usr/bin/sleep", "/bin/sleep"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("sleep is installed");
        std::fs::copy(sleep, &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut mine = std::process::Command::new(&exe).arg("30").spawn().unwrap();
        let mut theirs = std::process::Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(&exe)
            .arg("30")
            .spawn()
            .unwrap();
        let (me, nobody) = (mine.id() as i32, theirs.id() as i32);
        // Both have exec'd once both carry the name.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while [me, nobody]
            .iter()
            .any(|&p| comm_of(p).as_deref() != Some(name.as_str()))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the sleepers did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let by_name = spec(&[], &[&name]);
        let r = by_name.resolve_noting();
        let mut other = spec(&[nobody], &[]);
        let refused = other.resolve();
        other.uids = vec![65534];
        let allowed = other.resolve();
        let mut both = by_name.clone();
        both.uids = vec![65534];
        let all = both.resolve();
        for child in [&mut mine, &mut theirs] {
            let _ = child.kill();
            let _ = child.wait();
        }
        let r = r.unwrap();
        assert_eq!(r.pids, [me]);
        let skipped = r.skipped.unwrap();
        assert!(
            skipped.contains("1 process of other users (uid 65534"),
            "{skipped}"
        );
        let e = refused.unwrap_err().to_string();
        assert!(e.contains("runs as uid 65534"), "{e}");
        assert!(e.contains("--attach-uid 65534"), "{e}");
        assert_eq!(allowed.unwrap(), [nobody]);
        let mut all = all.unwrap();
        all.sort();
        let mut want = vec![me, nobody];
        want.sort();
        assert_eq!(all, want);
    }
}
