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

/// `print!` for text meant to be read: made terminal-safe (see
/// `scalprof_report::terminal_safe`), and an error instead of a panic when it cannot be
/// written. Every human-readable line scalprof prints goes through here or [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::text(&format!($($arg)*))?
    };
}

/// `println!` counterpart of [`out!`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::text(&(format!($($arg)*) + "\n"))?
    };
}

/// How text reaches a terminal: wrapped to its width, in colour or not.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    /// The terminal's columns; `None` for a pipe or a file.
    pub columns: Option<u16>,
    pub colour: bool,
}

static STYLE: std::sync::OnceLock<Style> = std::sync::OnceLock::new();

/// Decides the style once, from `--color` (`auto`: colour on a terminal unless `NO_COLOR`
/// is set and not empty, as <https://no-color.org> asks) and the terminal's width; tables
/// are fitted to the same width.
pub fn set_style(color: crate::cli::ColorChoice) {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let columns = terminal
        .then(|| terminal_size::terminal_size_of(std::io::stdout()))
        .flatten()
        .map(|(w, _)| w.0)
        .filter(|&w| w >= 40);
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let colour = match color {
        crate::cli::ColorChoice::Always => true,
        crate::cli::ColorChoice::Never => false,
        crate::cli::ColorChoice::Auto => terminal && !no_color,
    };
    scalprof_report::set_terminal_width(columns);
    let _ = STYLE.set(Style { columns, colour });
}

/// Writes text for a reader, escaped of control and bidi characters, then wrapped and
/// coloured for the terminal ([`set_style`]).
pub fn text(s: &str) -> Result<(), WriteError> {
    let mut safe = scalprof_report::terminal_safe(s);
    let style = STYLE.get().copied().unwrap_or_default();
    if let Some(columns) = style.columns {
        safe = scalprof_report::wrap_to(&safe, usize::from(columns));
    }
    if style.colour {
        safe = scalprof_report::colour(&safe);
    }
    write_str(&safe)
}

/// Writes data meant for another program (JSON, folded stacks) as it is to a pipe or
/// file, and escaped like [`text`] when it reaches a terminal.
pub fn data(s: &str) -> Result<(), WriteError> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        write_str(&scalprof_report::terminal_safe(s))
    } else {
        write_str(s)
    }
}

fn write_str(s: &str) -> Result<(), WriteError> {
    std::io::stdout()
        .lock()
        .write_all(s.as_bytes())
        .map_err(WriteError::stdout)
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

/// Writes a whole file the user named (a report, a document, an export): never through
/// another user's link, never waiting on a FIFO, and never left half-written in place of
/// the previous file ([`scalprof_pipeline::facade::write_user_file`]).
pub fn file(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), WriteError> {
    scalprof_pipeline::facade::write_user_file(path, bytes.as_ref()).map_err(|source| WriteError {
        target: path.display().to_string(),
        source,
    })
}
