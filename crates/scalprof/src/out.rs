//! Everything scalprof writes for the user: standard output and the files named by `-o`,
//! `--json` and `--report`. A closed pipe (`scalprof runs | head -1`) or a full disk is an
//! error that names what could not be written — never a panic, and never blamed on the
//! store's disk.

use std::io::Write;
use std::path::Path;

/// What could not be written, and why.
#[derive(Debug)]
pub struct WriteError {
    /// "standard output", or the file's path.
    pub target: String,
    pub source: std::io::Error,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "writing {}", self.target)
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl WriteError {
    pub fn stdout(source: std::io::Error) -> WriteError {
        WriteError {
            target: "standard output".into(),
            source,
        }
    }

    /// The reader of our output went away: not an error worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        self.source.kind() == std::io::ErrorKind::BrokenPipe
    }
}

/// `print!` that returns an error instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).map_err($crate::out::WriteError::stdout)?
    }};
}

/// `println!` that returns an error instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).map_err($crate::out::WriteError::stdout)?
    }};
}

/// Writes bytes to standard output and flushes them.
pub fn stdout_bytes(bytes: &[u8]) -> Result<(), WriteError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(WriteError::stdout)
}

/// Flushes what `out!` left buffered (a line without its newline).
pub fn flush() -> Result<(), WriteError> {
    std::io::stdout().flush().map_err(WriteError::stdout)
}

/// Writes a whole file the user named (a report, a document, an export).
pub fn file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), WriteError> {
    std::fs::write(path, bytes).map_err(|source| WriteError {
        target: path.display().to_string(),
        source,
    })
}
