//! Where the team store's password comes from, in libpq's order: the URL (for `--db`, moved
//! out of scalprof's command line by the binary: [`set_url_password`]), then PGPASSWORD,
//! then the password file: the URL's `passfile=`, else PGPASSFILE, else `~/.pgpass`, read
//! only when no one but its owner may read it (mode 0600 or stricter), as libpq does.
//!
//! The binary calls [`take_from_environment`] first thing: the passwords then live in this
//! process's memory only, and no child (a workload, a hook, the keeper) inherits them.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::url::PgUrl;
use crate::StoreError;

/// The environment variable that carries the password the binary took out of `--db` (or
/// SCALPROF_DB) into the scalprof it re-executes without it. A process's environment is
/// readable only by its own user (and root), where its command line is everyone's.
pub const MOVED_PASSWORD_ENV: &str = "SCALPROF_DB_PASSWORD";

/// The environment variables that may hold the team store's password: no workload, hook
/// or other child of scalprof gets them.
pub const SECRET_ENV: [&str; 3] = ["SCALPROF_DB", "PGPASSWORD", MOVED_PASSWORD_ENV];

/// The longest password file read (one line per server: a file past this is not one).
const PASSFILE_LIMIT_BYTES: u64 = 1 << 20;

/// Passwords given to this process outside the URL it connects with.
struct Given {
    /// The password of `--db`, moved out of the URL.
    url: Option<Vec<u8>>,
    /// PGPASSWORD, taken out of the environment.
    env: Option<Vec<u8>>,
    /// Whether [`take_from_environment`] ran (then PGPASSWORD is no longer in it).
    taken: bool,
}

static GIVEN: Mutex<Given> = Mutex::new(Given {
    url: None,
    env: None,
    taken: false,
});

fn given() -> std::sync::MutexGuard<'static, Given> {
    GIVEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Moves PGPASSWORD and [`MOVED_PASSWORD_ENV`] from this process's environment into its
/// memory. Call once, at start, before any thread or child is started.
pub fn take_from_environment() {
    use std::os::unix::ffi::OsStringExt;
    let mut given = given();
    if let Some(v) = std::env::var_os("PGPASSWORD") {
        given.env = Some(v.into_vec());
    }
    if let Some(v) = std::env::var_os(MOVED_PASSWORD_ENV) {
        given.url = Some(v.into_vec());
    }
    given.taken = true;
    std::env::remove_var("PGPASSWORD");
    std::env::remove_var(MOVED_PASSWORD_ENV);
}

/// The password of the store's URL, given apart from it (taken out of `--db`).
pub fn set_url_password(password: Vec<u8>) {
    given().url = Some(password);
}

/// The password to connect to `url` with, if any (see the module's doc): `user`, `host`,
/// `port` and `dbname` as the client will use them, for the password file's lines.
pub(crate) fn password_for(
    url: &PgUrl<'_>,
    shown: &str,
    config: &postgres::Config,
) -> Result<Option<Vec<u8>>, StoreError> {
    if let Some(p) = &url.password {
        return Ok(Some(p.clone()));
    }
    {
        let given = given();
        if let Some(p) = given.url.clone() {
            return Ok(Some(p));
        }
        if let Some(p) = given.env.clone() {
            return Ok(Some(p));
        }
        if !given.taken {
            if let Some(p) = std::env::var_os("PGPASSWORD") {
                return Ok(Some(std::os::unix::ffi::OsStringExt::into_vec(p)));
            }
        }
    }
    let Some(file) = passfile(url) else {
        return Ok(None);
    };
    let Some(text) = read_passfile(&file, shown)? else {
        return Ok(None);
    };
    let user = config
        .get_user()
        .map(str::to_string)
        .unwrap_or_else(os_user);
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        Some(postgres::config::Host::Unix(p)) => socket_host(p),
        None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let db = config.get_dbname().unwrap_or(&user).to_string();
    Ok(lookup(&text, [&host, &port, &db, &user]))
}

/// The password file to read: `passfile=`, else PGPASSFILE, else `~/.pgpass`.
fn passfile(url: &PgUrl<'_>) -> Option<PathBuf> {
    if let Some(p) = url.param("passfile") {
        return Some(PathBuf::from(p));
    }
    if let Some(p) = std::env::var_os("PGPASSFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".pgpass"))
}

/// The password file's text; `None` when there is none. A file others may read (or one
/// that is not a plain file) is an error that says how to fix it: libpq ignores such a
/// file with a warning, and a password in it is no longer secret.
#[allow(clippy::disallowed_methods)] // opens: the user's own password file, checked owner-only
fn read_passfile(path: &Path, shown: &str) -> Result<Option<String>, StoreError> {
    let refuse = |reason: String| StoreError::Password {
        url: shown.to_string(),
        reason,
    };
    // Non-blocking: a FIFO put in its place must not hang scalprof.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(refuse(format!(
                "cannot read the password file {}: {e}",
                path.display()
            )))
        }
    };
    let meta = file.metadata().map_err(|e| {
        refuse(format!(
            "cannot read the password file {}: {e}",
            path.display()
        ))
    })?;
    if !meta.is_file() {
        return Err(refuse(format!(
            "the password file {} is not a plain file",
            path.display()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(refuse(format!(
            "the password file {} may be read by others (mode {:04o}); make it yours only: chmod 600 {}",
            path.display(),
            meta.mode() & 0o7777,
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(PASSFILE_LIMIT_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            refuse(format!(
                "cannot read the password file {}: {e}",
                path.display()
            ))
        })?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The password of the first line of a password file that matches `want` (host, port,
/// database, user): `hostname:port:database:username:password`, each of the first four a
/// value or `*`, `\:` and `\\` escaping a colon and a backslash, `#` starting a comment
/// line (PostgreSQL's "The Password File").
pub(crate) fn lookup(text: &str, want: [&str; 4]) -> Option<Vec<u8>> {
    'lines: for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut rest = line;
        for w in want {
            let Some((raw, value, after)) = field(rest) else {
                continue 'lines;
            };
            if raw != "*" && value != w {
                continue 'lines;
            }
            rest = after;
        }
        return Some(unescape(rest).into_bytes());
    }
    None
}

/// The first field of `s` (up to an unescaped `:`): as written, unescaped, and what
/// follows the colon. `None` without a colon.
fn field(s: &str) -> Option<(&str, String, &str)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, next)) = chars.next() {
                    value.push(next);
                }
            }
            ':' => return Some((&s[..i], value, &s[i + 1..])),
            c => value.push(c),
        }
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// A socket directory as the password file names it: the default one is `localhost`.
fn socket_host(dir: &Path) -> String {
    if dir == Path::new("/var/run/postgresql") || dir == Path::new("/run/postgresql") {
        "localhost".into()
    } else {
        dir.display().to_string()
    }
}

/// This process's user name, the user the client connects as when the URL names none.
fn os_user() -> String {
    // SAFETY: getpwuid returns a pointer into static storage or NULL; we copy the name
    // out at once, before any other call could reuse that storage.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            return String::new();
        }
        std::ffi::CStr::from_ptr((*pw).pw_name)
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::lookup;

    #[test]
    fn the_first_matching_line_of_a_password_file_gives_the_password() {
        let file = "# team\n\
                    db.lan:5432:runs:bob:wrong\n\
                    db.lan:5433:runs:ann:a\\:b\\\\c:d\r\n\
                    *:*:*:ann:fallback\n";
        assert_eq!(
            lookup(file, ["db.lan", "5433", "runs", "ann"]),
            Some(b"a:b\\c:d".to_vec())
        );
        assert_eq!(
            lookup(file, ["other", "1", "x", "ann"]),
            Some(b"fallback".to_vec())
        );
        assert_eq!(lookup(file, ["db.lan", "5432", "runs", "carl"]), None);
        assert_eq!(
            lookup("h\\:x:1:d:u:p\n", ["h:x", "1", "d", "u"]),
            Some(b"p".to_vec()),
            "an escaped colon in a field"
        );
        assert_eq!(
            lookup("too:few:fields\n", ["too", "few", "fields", "u"]),
            None
        );
    }
}
