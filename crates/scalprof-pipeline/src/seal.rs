//! Who recorded a run: a keyed hash (HMAC-SHA256) over what decides what `verify` would
//! execute again — which store and which run, the command, the sweep's parameter and its
//! values, the ops regex — with the recorder's uid and host, keyed by a secret only that
//! user on that host reads (`$XDG_DATA_HOME/scalprof/seal.key`, mode 0600). A teammate
//! with write access to a shared store can change a run's command or add a point, or copy
//! a sealed run's command and seal into a run of their own, but cannot make a seal that
//! this user's key accepts: `verify` runs a stored command only when the seal holds, and
//! otherwise shows it and asks (see [`crate::verify`]).

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use scalprof_model::{RunHeader, SweepParameter};
use scalprof_store::Store;

/// What a seal covers: what decides what `verify` would execute again.
#[derive(Clone, Debug)]
pub struct Sealed<'a> {
    /// The store's identity on this machine: the folder of its outputs (beside an SQLite
    /// store, named by a team store's UUID).
    pub store: String,
    /// The run's number in that store.
    pub run: &'a str,
    pub command: &'a [String],
    pub parameter: SweepParameter,
    /// The sweep's values: `verify` runs at one of them only.
    pub values: &'a [u64],
    pub ops_regex: &'a str,
}

impl<'a> Sealed<'a> {
    /// What the seal of `header`, a run of `store`, covers; an error where the store has
    /// no identity yet (a team store opened read-only before its first run).
    pub fn of(store: &Store, header: &'a RunHeader) -> std::io::Result<Sealed<'a>> {
        let folder = store.outputs_folder().map_err(std::io::Error::other)?;
        Ok(Sealed {
            store: folder.display().to_string(),
            run: &header.id,
            command: &header.command,
            parameter: header.sweep.parameter,
            values: &header.sweep.values,
            ops_regex: &header.ops_regex,
        })
    }
}

/// Why a run's command is not known to be this user's.
#[derive(Clone, Debug, PartialEq)]
pub enum Provenance {
    /// Recorded by this user on this host, in this store as this run, and unchanged since.
    Ours,
    /// Anything else, in words: no seal, another user, host, store or run, or changed since.
    Foreign(String),
}

const KEY_LEN: usize = 32;

/// The seal of `header` under this user's key, made now (the key is created on first use).
pub fn seal(header: Sealed) -> std::io::Result<String> {
    seal_at(&key_path(), header)
}

/// Whether `stored` is this user's seal of `header`.
pub fn provenance(header: Sealed, stored: Option<&str>) -> Provenance {
    provenance_at(&key_path(), header, stored)
}

fn seal_at(path: &Path, header: Sealed) -> std::io::Result<String> {
    let key = key(path, true)?;
    Ok(hex(&mac(&key, header)))
}

fn provenance_at(path: &Path, header: Sealed, stored: Option<&str>) -> Provenance {
    let Some(stored) = stored else {
        return Provenance::Foreign(
            "it carries no recorder's seal (recorded elsewhere, or by a scalprof before seals)"
                .into(),
        );
    };
    let Ok(key) = key(path, false) else {
        return Provenance::Foreign(format!(
            "this user has no usable seal key ({}): it was not recorded here",
            path.display()
        ));
    };
    let Some(tag) = unhex(stored) else {
        return Provenance::Foreign("its seal is malformed".into());
    };
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&key).expect("any key length");
    feed(&mut m, header);
    match m.verify_slice(&tag) {
        Ok(()) => Provenance::Ours,
        Err(_) => Provenance::Foreign(
            "its seal is not this user's seal of this run: it was recorded by another user or \
             host, or as another run or in another store, or its command, points or ops regex \
             were changed since"
                .into(),
        ),
    }
}

fn mac(key: &[u8], header: Sealed) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    feed(&mut m, header);
    m.finalize().into_bytes().to_vec()
}

/// The sealed fields, each length-prefixed so that no two headers feed the same bytes.
fn feed(m: &mut Hmac<Sha256>, header: Sealed<'_>) {
    let uid = current_uid().to_string();
    let host = hostname();
    let command = serde_json::to_string(&header.command).expect("strings serialize");
    let values = serde_json::to_string(&header.values).expect("numbers serialize");
    let fields: [&[u8]; 9] = [
        b"scalprof run seal 2",
        uid.as_bytes(),
        host.as_bytes(),
        header.store.as_bytes(),
        header.run.as_bytes(),
        command.as_bytes(),
        header.parameter.as_str().as_bytes(),
        values.as_bytes(),
        header.ops_regex.as_bytes(),
    ];
    for f in fields {
        m.update(&(f.len() as u64).to_le_bytes());
        m.update(f);
    }
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn key_path() -> PathBuf {
    scalprof_store::default_path().with_file_name("seal.key")
}

/// This user's key: read (owner-only, ours, not through a link), or made when `create`.
#[allow(clippy::disallowed_methods)] // opens: this user's seal key, O_NOFOLLOW, checked owner-only
fn key(path: &Path, create: bool) -> std::io::Result<Vec<u8>> {
    let open = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    match open {
        Ok(mut f) => {
            let meta = f.metadata()?;
            if !meta.is_file() || meta.uid() != current_uid() || meta.mode() & 0o077 != 0 {
                return Err(std::io::Error::other(format!(
                    "{} is not a file of this user's, readable by it alone",
                    path.display()
                )));
            }
            let mut key = Vec::with_capacity(KEY_LEN);
            Read::by_ref(&mut f)
                .take(KEY_LEN as u64 + 1)
                .read_to_end(&mut key)?;
            if key.len() != KEY_LEN {
                return Err(std::io::Error::other(format!(
                    "{} is not a seal key",
                    path.display()
                )));
            }
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            // The key's folder is checked as the store's are: one another user can change
            // (their home, under `sudo -E`) is refused, never made or written in.
            let dir = path.parent().unwrap_or(Path::new("."));
            let dir = scalprof_collect::private::private_dir(dir).map_err(std::io::Error::other)?;
            let mut fresh = vec![0u8; KEY_LEN];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut fresh)?;
            let made = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(dir.join(path.file_name().unwrap_or_default()));
            match made {
                Ok(mut f) => {
                    f.write_all(&fresh)?;
                    Ok(fresh)
                }
                // Another recorder made it first: use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => key(path, false),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &[&str]) -> Vec<String> {
        command.iter().map(|s| s.to_string()).collect()
    }

    fn sealed(command: &[String]) -> Sealed<'_> {
        Sealed {
            store: "/home/ann/.local/share/scalprof/runs.db.d".into(),
            run: "7",
            command,
            parameter: SweepParameter::Threads,
            values: &[1, 2, 4],
            ops_regex: "ops=(\\d+)",
        }
    }

    #[test]
    fn a_seal_holds_for_its_run_and_breaks_when_the_command_changes() {
        let home = tempfile::tempdir().unwrap();
        let key = home.path().join("scalprof/seal.key");
        let ours = words(&["./bench", "{threads}"]);
        let s = seal_at(&key, sealed(&ours)).unwrap();
        assert_eq!(
            provenance_at(&key, sealed(&ours), Some(&s)),
            Provenance::Ours
        );
        assert_eq!(seal_at(&key, sealed(&ours)).unwrap(), s, "one key, kept");
        let forged = words(&["sh", "-c", "id > /tmp/pwned"]);
        let foreign = |c: &[String], s: Option<&str>| {
            matches!(provenance_at(&key, sealed(c), s), Provenance::Foreign(_))
        };
        assert!(foreign(&forged, Some(&s)));
        assert!(foreign(&ours, None));
        assert!(foreign(&ours, Some("zz")));
        // Another parameter, the same words: another seal.
        let other = Sealed {
            parameter: SweepParameter::Size,
            ..sealed(&ours)
        };
        assert!(matches!(
            provenance_at(&key, other, Some(&s)),
            Provenance::Foreign(_)
        ));
        // Another run, store or set of points: another seal. A teammate who copies this
        // run's command and seal into a run of their own, or adds a point, breaks it.
        let other_run = Sealed {
            run: "8",
            ..sealed(&ours)
        };
        let other_store = Sealed {
            store: "/srv/theirs/runs.db.d".into(),
            ..sealed(&ours)
        };
        let more_points = Sealed {
            values: &[1, 2, 4, 4_000_000_000],
            ..sealed(&ours)
        };
        for changed in [other_run, other_store, more_points] {
            assert!(matches!(
                provenance_at(&key, changed, Some(&s)),
                Provenance::Foreign(_)
            ));
        }
        // A key folder another user owns is refused, nothing made in it (root can chown).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = home.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(seal_at(&theirs.join("scalprof/seal.key"), sealed(&ours)).is_err());
            assert!(!theirs.join("scalprof").exists());
        }
        // A key another user could read is refused, not used.
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        assert!(foreign(&ours, Some(&s)));
    }
}
