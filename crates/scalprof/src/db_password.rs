//! The team store's password kept out of sight.
//!
//! A password in `--db postgres://user:secret@…` is in scalprof's command line, which every
//! user of the machine reads (`ps`, /proc/PID/cmdline) for as long as scalprof runs. So
//! scalprof says so once and re-executes itself (/proc/self/exe, the same pid) with the URL
//! less its password, handing the password over in [`MOVED_PASSWORD_ENV`]: a process's
//! environment is readable by its own user and root only. The moment before the
//! re-execution, and the shell's history, still hold it: PGPASSWORD or ~/.pgpass keep it
//! out of both.
//!
//! Then PGPASSWORD, the handed-over password and SCALPROF_DB (after clap has read it) leave
//! scalprof's environment for its memory, so that no workload, hook or helper process
//! inherits them; the workload launcher withholds the same names
//! ([`scalprof_collect`'s `WITHHELD_ENV`]) whatever is left.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use scalprof_store::pg::password::{self, MOVED_PASSWORD_ENV};

/// Takes the store's passwords out of sight; re-executes scalprof when `--db` holds one
/// (returning only if that fails). Call first thing, before any thread or child starts.
pub fn hide() {
    password::take_from_environment();
    let args: Vec<OsString> = std::env::args_os().collect();
    match db_argument(&args) {
        Some(at) => {
            if let Some((clean, secret)) = split(&args[at.index], at.inline) {
                eprintln!(
                    "scalprof: warning: the password in --db is visible to other users in ps; \
                     use PGPASSWORD or ~/.pgpass (scalprof takes it out of its own command \
                     line now)"
                );
                let mut args = args;
                args[at.index] = clean;
                reexec_without(&args, secret);
            }
            // --db wins over SCALPROF_DB, which is then only a secret to keep from children.
        }
        None => {
            let Some(value) = std::env::var_os("SCALPROF_DB") else {
                return;
            };
            if let Some((clean, secret)) = split(&value, false) {
                eprintln!(
                    "scalprof: warning: the password in SCALPROF_DB reaches every program \
                     started with that environment; use ~/.pgpass (or PGPASSWORD for one command)"
                );
                password::set_url_password(secret);
                std::env::set_var("SCALPROF_DB", clean);
            }
        }
    }
}

/// Removes SCALPROF_DB from the environment once clap has read it: no child needs it.
pub fn forget_db_variable() {
    std::env::remove_var("SCALPROF_DB");
}

/// Where `--db`'s URL is in the arguments: `--db URL` (the next argument) or `--db=URL`.
struct DbArgument {
    index: usize,
    /// `--db=URL`: the argument holds the option's name too.
    inline: bool,
}

/// The last `--db` before the workload's command (`--`), as clap reads it.
fn db_argument(args: &[OsString]) -> Option<DbArgument> {
    let mut found = None;
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_bytes();
        if a == b"--" {
            break;
        }
        if a == b"--db" && i + 1 < args.len() {
            found = Some(DbArgument {
                index: i + 1,
                inline: false,
            });
            i += 1;
        } else if a.starts_with(b"--db=") {
            found = Some(DbArgument {
                index: i,
                inline: true,
            });
        }
        i += 1;
    }
    found
}

/// The argument (or variable) without the URL's password, and the password; `None` when
/// it names no URL with a password.
fn split(value: &OsStr, inline: bool) -> Option<(OsString, Vec<u8>)> {
    let text = value.to_str()?;
    let (prefix, url) = if inline {
        text.split_at("--db=".len())
    } else {
        ("", text)
    };
    if !scalprof_store::pg::is_url(std::path::Path::new(url)) {
        return None;
    }
    let (clean, secret) = scalprof_store::pg::split_password(url)?;
    Some((OsString::from(format!("{prefix}{clean}")), secret))
}

/// Replaces this process with scalprof run with `args`, `secret` in its environment.
/// Returns only if that fails: the password is then used from memory, still visible.
#[allow(clippy::disallowed_methods)] // runs: scalprof's own binary again, without the password in its argv
fn reexec_without(args: &[OsString], secret: Vec<u8>) {
    use std::os::unix::process::CommandExt;
    let moved = OsString::from_vec(secret.clone());
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(&args[0])
        .args(&args[1..])
        .env(MOVED_PASSWORD_ENV, &moved)
        .exec();
    eprintln!(
        "scalprof: warning: could not restart without the password in the command line \
         ({err}); it stays visible in ps while scalprof runs"
    );
    password::set_url_password(secret);
}

#[cfg(test)]
mod tests {
    use super::{db_argument, split};
    use std::ffi::OsString;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_db_argument_is_found_before_the_workloads_command_only() {
        let a = args(&["scalprof", "--db", "postgres://u:p@h/d", "runs"]);
        assert_eq!(
            db_argument(&a).map(|d| (d.index, d.inline)),
            Some((2, false))
        );
        let a = args(&["scalprof", "run", "--db=postgres://u:p@h/d", "--", "x"]);
        assert_eq!(
            db_argument(&a).map(|d| (d.index, d.inline)),
            Some((2, true))
        );
        let a = args(&[
            "scalprof",
            "run",
            "--",
            "tool",
            "--db",
            "postgres://u:p@h/d",
        ]);
        assert!(db_argument(&a).is_none(), "the workload's own --db");
    }

    #[test]
    fn the_password_is_taken_out_of_the_argument() {
        let (clean, secret) = split("--db=postgres://u:p%40ss@h/d".as_ref(), true).unwrap();
        assert_eq!(clean, "--db=postgres://u@h/d");
        assert_eq!(secret, b"p@ss");
        let (clean, secret) = split(
            "postgresql://u@h/d?password=x&sslmode=require".as_ref(),
            false,
        )
        .unwrap();
        assert_eq!(clean, "postgresql://u@h/d?sslmode=require");
        assert_eq!(secret, b"x");
        assert!(split("postgres://u@h/d".as_ref(), false).is_none());
        assert!(split("/tmp/runs.db".as_ref(), false).is_none());
    }

    #[test]
    fn the_workloads_are_kept_from_every_variable_that_may_hold_the_password() {
        assert_eq!(
            scalprof_collect::exec::WITHHELD_ENV,
            scalprof_store::pg::password::SECRET_ENV
        );
    }
}
