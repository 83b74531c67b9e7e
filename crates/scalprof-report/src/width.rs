//! The terminal's width, for the tables: set once by the command line when its output is a
//! terminal; unset (a pipe, a file, the tests), tables take the width their cells need.

use std::sync::atomic::{AtomicU16, Ordering};

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{ContentArrangement, Table};

/// 0: no limit.
static WIDTH: AtomicU16 = AtomicU16::new(0);

/// Below this width the points table leaves out its user and system time columns.
pub const NARROW: u16 = 120;

/// Tables fit in `columns` from now on (`None`: as wide as their cells).
pub fn set_terminal_width(columns: Option<u16>) {
    WIDTH.store(columns.unwrap_or(0), Ordering::Relaxed);
}

/// The width tables must fit in, if any.
pub fn terminal_width() -> Option<u16> {
    match WIDTH.load(Ordering::Relaxed) {
        0 => None,
        w => Some(w),
    }
}

/// A table in scalprof's style, its cells wrapped to fit the terminal when there is one.
pub(crate) fn table() -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
    if let Some(w) = terminal_width() {
        t.set_content_arrangement(ContentArrangement::Dynamic);
        t.set_width(w);
    }
    t
}

/// Wraps every line wider than `columns` at spaces, its continuation indented under its
/// text: a warning's (`  ! `), a finding's (`    37%  `) or two more than the line's own
/// indent. Table lines (box-drawn) are left as they are: their cells were fitted when
/// the table was made ([`table`]).
pub fn wrap_to(text: &str, columns: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if textwrap::core::display_width(body) <= columns || is_table_line(body) {
            out += line;
            continue;
        }
        let indent = " ".repeat(continuation_indent(body).min(columns / 3));
        let options = textwrap::Options::new(columns)
            .subsequent_indent(&indent)
            .break_words(true);
        out += &textwrap::fill(body, options);
        out += newline;
    }
    out
}

fn is_table_line(line: &str) -> bool {
    line.trim_start()
        .starts_with(['│', '┌', '└', '╞', '├', '╘', '╒', '┆', '╭', '╰'])
}

/// Where a wrapped line's continuation starts.
fn continuation_indent(line: &str) -> usize {
    let lead = line.len() - line.trim_start().len();
    let rest = &line[lead..];
    if rest.starts_with("! ") {
        return lead + 2;
    }
    // A finding: `  37%  lock_contention  …`.
    if let Some(pct) = rest.find("%  ") {
        if rest[..pct].trim().parse::<f64>().is_ok() {
            return lead + pct + 3;
        }
    }
    lead + 2
}

/// ANSI colour for a terminal, on text already made safe: headings bold, a warning's `!`
/// yellow, a finding's share and kind bold red, "what to do:" green.
pub fn colour(text: &str) -> String {
    const BOLD: &str = "\x1b[1m";
    const YELLOW: &str = "\x1b[33m";
    const RED: &str = "\x1b[1;31m";
    const GREEN: &str = "\x1b[32m";
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive('\n') {
        let lead = line.len() - line.trim_start().len();
        let (indent, rest) = line.split_at(lead);
        let heading = lead == 0
            && (line.trim_end().ends_with(':') || line.starts_with("verdict"))
            && !line.contains("  ");
        if heading {
            out += &format!("{BOLD}{}{RESET}\n", line.trim_end_matches('\n'));
            if !line.ends_with('\n') {
                out.pop();
            }
        } else if let Some(after) = rest.strip_prefix("! ") {
            out += &format!("{indent}{YELLOW}!{RESET} {after}");
        } else if let Some(after) = rest.strip_prefix("what to do:") {
            out += &format!("{indent}{GREEN}what to do:{RESET}{after}");
        } else if let Some(end) = finding_head(rest) {
            out += &format!("{indent}{RED}{}{RESET}{}", &rest[..end], &rest[end..]);
        } else {
            out += line;
        }
    }
    out
}

/// The end of `37%  lock_contention` at the start of a finding's line.
fn finding_head(rest: &str) -> Option<usize> {
    let pct = rest.find("%  ")?;
    rest[..pct].trim().parse::<f64>().ok()?;
    let kind_start = pct + 3;
    let kind_len = rest[kind_start..].find("  ")?;
    let kind = &rest[kind_start..kind_start + kind_len];
    kind.chars()
        .all(|c| c.is_ascii_lowercase() || c == '_')
        .then_some(kind_start + kind_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_under_their_text_and_tables_stay() {
        let text = "warnings:\n  ! threads 2: wall time of 3 repeats spreads 19% (0.356–0.425 s); run more repeats on a quieter machine\n│ 1   1.57   1.00×   100%   0.638 (0.634–0.654)   0.603 (0.600–0.609) │\n    37%  lock_contention  table_lock: wait per op 0 ns → 375.6 ms at 2 threads\n";
        let out = wrap_to(text, 40);
        for line in out.lines() {
            assert!(
                line.starts_with('│') || textwrap::core::display_width(line) <= 40,
                "{line:?}"
            );
        }
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[1].starts_with("  ! threads 2"), "{out}");
        assert!(lines[2].starts_with("    spreads"), "{out}");
        let finding = lines.iter().position(|l| l.contains("37%")).unwrap();
        assert!(lines[finding + 1].starts_with("         "), "{out}");
        assert!(!lines[finding + 1].starts_with("          "), "{out}");
        assert!(out.contains("│ 1   1.57"), "{out}");
        assert_eq!(wrap_to("short\n", 40), "short\n");
    }

    #[test]
    fn colour_marks_headings_warnings_and_findings_only() {
        let out = colour("findings:\n    37%  lock_contention  table_lock: x\n  ! noisy\n         what to do: shard it\nplain text line\n");
        assert!(out.starts_with("\x1b[1mfindings:\x1b[0m\n"), "{out:?}");
        assert!(
            out.contains("\x1b[1;31m37%  lock_contention\x1b[0m  table_lock"),
            "{out:?}"
        );
        assert!(out.contains("  \x1b[33m!\x1b[0m noisy"), "{out:?}");
        assert!(
            out.contains("\x1b[32mwhat to do:\x1b[0m shard it"),
            "{out:?}"
        );
        assert!(out.ends_with("plain text line\n"), "{out:?}");
    }
}
