//! One function per command; `main` dispatches to them.

mod compare;
mod complexity;
mod corpus;
mod demo;
mod docs;
mod export;
mod fit;
mod flame;
mod gc;
mod history;
mod import;
mod layout;
mod locks;
mod report;
mod run;
mod runs;
mod show;
mod suite;
mod verify;
mod watch;

pub use compare::compare;
pub use complexity::complexity;
pub use corpus::corpus;
pub use demo::demo;
pub use docs::{completions, man};
pub use export::export;
pub use fit::fit;
pub use flame::flame;
pub use gc::gc;
pub use history::history;
pub use import::import;
pub use layout::layout;
pub use locks::locks;
pub use report::report;
pub use run::run;
pub use runs::runs;
pub use show::show;
pub use suite::suite;
pub use verify::verify;
pub use watch::watch;

use std::process::ExitCode;

use anyhow::Result;
use scalprof_model::RunStatus;
use scalprof_pipeline::facade::Interrupt;
use scalprof_store::{DiskFault, Store};

fn open_store(cli_db: &Option<std::path::PathBuf>) -> Result<Store> {
    let path = cli_db.clone().unwrap_or_else(scalprof_store::default_path);
    warn_before_connecting(&path);
    Ok(Store::open(&path)?)
}

/// For the commands that only read the store.
fn open_store_read_only(cli_db: &Option<std::path::PathBuf>) -> Result<Store> {
    let path = cli_db.clone().unwrap_or_else(scalprof_store::default_path);
    warn_before_connecting(&path);
    Ok(Store::open_read_only(&path)?)
}

/// Says once, before a team store's password goes to a server whose certificate is not
/// checked, that it does ([`scalprof_store::pg::password_warning`]).
fn warn_before_connecting(path: &std::path::Path) {
    static SAID: std::sync::Once = std::sync::Once::new();
    if !scalprof_store::pg::is_url(path) {
        return;
    }
    if let Some(w) = scalprof_store::pg::password_warning(&path.to_string_lossy()) {
        SAID.call_once(|| eprintln!("scalprof: warning: {}", scalprof_report::terminal_safe(&w)));
    }
}

/// 0 for a complete run with a measurement; 128 + the signal when interrupted (130 for
/// SIGINT, 143 for SIGTERM); 2 (an error, as in [`crate::cli::EXIT_STATUS`]) when the
/// workload failed, also when `--keep-going` went on past failures and no repeat succeeded.
fn exit_code_for(doc: &scalprof_model::RunDocument, interrupt: &Interrupt) -> ExitCode {
    match doc.status {
        RunStatus::Interrupted => {
            ExitCode::from(128u8.saturating_add(interrupt.signal().unwrap_or(2) as u8))
        }
        RunStatus::Failed => ExitCode::from(2),
        RunStatus::Complete | RunStatus::Running => {
            let any_ok = doc
                .points
                .iter()
                .any(|p| p.repeats.iter().any(|r| r.succeeded()));
            if any_ok || doc.points.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
    }
}

/// Arguments that make no sense together, found after parsing: said as a usage error
/// (exit 2, as every error).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// What to do about an error, when its cause is one the user can fix: a full disk. SQLite
/// reports it as "disk full", or as an I/O error when its shared-memory file cannot grow,
/// so an I/O error is checked against the free space where the store lives.
pub fn hint(e: &anyhow::Error, db: &Option<std::path::PathBuf>) -> Option<String> {
    // An output the user named (or standard output): its own disk, not the store's.
    if let Some(w) = e
        .chain()
        .find_map(|c| c.downcast_ref::<crate::out::WriteError>())
    {
        return (w.source.raw_os_error() == Some(libc::ENOSPC)).then(|| {
            format!(
                "no space left where {} is written: free space there or write it elsewhere; the run itself is kept in the store",
                w.target
            )
        });
    }
    let full = e.chain().any(|c| {
        let sqlite = scalprof_store::disk_fault(c);
        sqlite == Some(DiskFault::Full)
            || (sqlite == Some(DiskFault::Io) && store_disk_full(db))
            || c.downcast_ref::<std::io::Error>()
                .and_then(|e| e.raw_os_error())
                == Some(libc::ENOSPC)
    });
    if full {
        return Some("the disk is full: free space where the store and the workload output live (--db), then rerun; every finished repeat is kept".to_string());
    }
    file_size_limit_hint(e, db)
}

/// Under a file-size limit (`ulimit -f`) a write past it fails with EFBIG (scalprof
/// catches the SIGXFSZ that would kill it): said as the limit. An error of our own names
/// its file; SQLite says "disk I/O error" for any of the store's files (the database, its
/// -wal, its -shm, which grows 32 KiB at a time), so the hint names the store.
fn file_size_limit_hint(e: &anyhow::Error, db: &Option<std::path::PathBuf>) -> Option<String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through the pointer we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) } != 0
        || limit.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let ours = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(|e| e.raw_os_error())
            == Some(libc::EFBIG)
    });
    let store = db.clone().unwrap_or_else(scalprof_store::default_path);
    let sqlite = !scalprof_store::pg::is_url(&store)
        && e.chain()
            .any(|c| scalprof_store::disk_fault(c) == Some(DiskFault::Io));
    let what = if ours {
        "stopped the write above".to_string()
    } else if sqlite {
        format!(
            "kept the store ({}, with its -wal and -shm files) from growing",
            store.display()
        )
    } else {
        return None;
    };
    Some(format!(
        "the file-size limit (`ulimit -f`: {} KiB) {what}: raise it (`ulimit -f unlimited`) and rerun; every finished repeat is kept",
        limit.rlim_cur >> 10
    ))
}

/// Whether the filesystem holding the store has no space left.
fn store_disk_full(db: &Option<std::path::PathBuf>) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let path = db.clone().unwrap_or_else(scalprof_store::default_path);
    if scalprof_store::pg::is_url(&path) {
        // The server's disk: its own error says so.
        return false;
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs is plain old data; zeroed is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and st a writable statvfs.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    r == 0 && st.f_bavail == 0
}
