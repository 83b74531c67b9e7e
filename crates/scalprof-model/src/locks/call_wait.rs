//! The name of a row of waits in one system call: the call, what its descriptor named and
//! the function that made it (`disk I/O (fdatasync journal.dat) in journal_append`,
//! `read pipe in consume`, `nanosleep`). [`CallWait`] writes it, and [`CallWait::call_in`]
//! is the one place that reads the call back out of a stored row's name.

use std::fmt;

use super::LockKind;

/// A row of waits in a system call, by its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallWait {
    /// The row's kind: a file lock is named by its file, a sleep by who sleeps, the disk's
    /// waits as such.
    pub kind: LockKind,
    /// The system call (`fdatasync`).
    pub call: String,
    /// What its descriptor named, stable over runs (`journal.dat`, `/tmp/willitscale.`).
    pub object: Option<String>,
    /// The descriptor, for a file lock whose file is not known.
    pub fd: u64,
    /// The function of the program that made the call.
    pub caller: Option<String>,
}

impl fmt::Display for CallWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let call = &self.call;
        let file_lock = matches!(self.kind, LockKind::PosixLock | LockKind::Flock);
        let what = match (&self.kind, &self.object) {
            // A lock is named by itself: its file.
            (LockKind::PosixLock | LockKind::Flock, Some(object)) => object.clone(),
            (LockKind::PosixLock | LockKind::Flock, None) => format!("{call} fd {}", self.fd),
            (LockKind::Sleep, _) => "sleep".to_string(),
            (LockKind::DiskIo, Some(object)) => format!("disk I/O ({call} {object})"),
            (LockKind::DiskIo, None) => format!("disk I/O ({call})"),
            (_, Some(object)) => format!("{call} {object}"),
            (_, None) => call.clone(),
        };
        match &self.caller {
            Some(c) if !file_lock => write!(f, "{what} in {c}"),
            None if self.kind == LockKind::Sleep => f.write_str(call),
            _ => f.write_str(&what),
        }
    }
}

impl CallWait {
    /// The system call a row's name written by [`CallWait`]'s Display begins with, for a
    /// row of `kind` read back from a stored run document; `None` where the name does
    /// not carry it (a file lock named by its file, a sleep named by who sleeps).
    pub fn call_in<'a>(kind: &LockKind, name: &'a str) -> Option<&'a str> {
        match kind {
            LockKind::PosixLock | LockKind::Flock => {
                let (call, fd) = name.split_once(" fd ")?;
                let fd = !fd.is_empty() && fd.bytes().all(|b| b.is_ascii_digit());
                fd.then_some(call).filter(|c| leading_call(c) == Some(c))
            }
            LockKind::Sleep => leading_call(name).filter(|c| *c == name),
            LockKind::DiskIo => leading_call(name.strip_prefix("disk I/O (")?),
            _ => leading_call(name),
        }
    }
}

/// The system call's name `text` begins with: a word, or `syscall N` for a call with no
/// name (the form `syscall_name` gives it).
fn leading_call(text: &str) -> Option<&str> {
    let word = |s: &str| {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let end = word(text);
    let end = match text[end..].strip_prefix(' ') {
        Some(rest)
            if &text[..end] == "syscall" && rest.starts_with(|c: char| c.is_ascii_digit()) =>
        {
            end + 1
                + rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len())
        }
        _ => end,
    };
    (end > 0).then(|| &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(kind: LockKind, call: &str, object: Option<&str>, caller: Option<&str>) -> CallWait {
        CallWait {
            kind,
            call: call.into(),
            object: object.map(Into::into),
            fd: 3,
            caller: caller.map(Into::into),
        }
    }

    #[test]
    fn call_waits_write_the_names_rows_have_always_had_and_give_their_call_back() {
        let cases = [
            (
                wait(
                    LockKind::DiskIo,
                    "fdatasync",
                    Some("j.dat"),
                    Some("journal_append"),
                ),
                "disk I/O (fdatasync j.dat) in journal_append",
                Some("fdatasync"),
            ),
            (
                wait(LockKind::DiskIo, "fsync", None, None),
                "disk I/O (fsync)",
                Some("fsync"),
            ),
            (
                wait(LockKind::Io, "read", Some("pipe"), Some("consume")),
                "read pipe in consume",
                Some("read"),
            ),
            (
                wait(LockKind::Syscall, "wait4", None, None),
                "wait4",
                Some("wait4"),
            ),
            (
                wait(LockKind::Sleep, "nanosleep", None, None),
                "nanosleep",
                Some("nanosleep"),
            ),
            (
                wait(LockKind::Sleep, "nanosleep", None, Some("backoff")),
                "sleep in backoff",
                None,
            ),
            (
                wait(LockKind::PosixLock, "fcntl", Some("/tmp/lock."), Some("f")),
                "/tmp/lock.",
                None,
            ),
            (
                wait(LockKind::Flock, "flock", None, Some("f")),
                "flock fd 3",
                Some("flock"),
            ),
        ];
        for (w, name, call) in cases {
            assert_eq!(w.to_string(), name);
            assert_eq!(CallWait::call_in(&w.kind, name), call, "{name}");
        }
        // A word inside another's name is not its call.
        assert_eq!(
            CallWait::call_in(&LockKind::Io, "pread64 data.db in thread_read"),
            Some("pread64")
        );
        assert_eq!(CallWait::call_in(&LockKind::DiskIo, "table_lock"), None);
        let unnamed = wait(LockKind::Syscall, "syscall 435", None, Some("f"));
        assert_eq!(
            CallWait::call_in(&unnamed.kind, &unnamed.to_string()),
            Some("syscall 435")
        );
    }
}
