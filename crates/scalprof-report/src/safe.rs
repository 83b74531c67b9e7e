//! Text that is safe to print: control and bidi characters made visible, commands
//! shell-quoted, multi-line text on one line.

/// Text for a terminal: control characters other than newline — which a workload's label,
/// command, output or symbol names may carry (ESC sequences can rewrite the screen or the
/// window title) — are shown in caret notation (`^[`), as `cat -v` does; C1 controls as
/// `\u{9b}`.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            '\u{7f}' => out.push_str("^?"),
            c if ('\u{80}'..='\u{9f}').contains(&c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            // Bidirectional overrides and isolates reorder what follows them on screen
            // (a fake verdict could read as a real one): shown as their code.
            c if is_bidi_control(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A value shown on one line of a terminal, a flame graph or a step summary: a label, a
/// commit, another process's name, a frame. Line breaks as `\n`, other controls as
/// [`terminal_safe`] shows them, so that it cannot start a line of its own (a forged
/// `scalprof:` line) nor carry a character XML forbids.
pub fn terminal_line(text: &str) -> String {
    terminal_safe(&one_line(text))
}

pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

pub use scalprof_model::units::shell_line;

/// A value from the workload or the user (a label, an argument, a symbol) put on one line
/// of a report: a newline in it would start a line of its own, so it is shown as `\n`.
pub fn one_line(value: &str) -> String {
    if !value.contains(['\n', '\r']) {
        return value.to_string();
    }
    value.replace('\n', "\\n").replace('\r', "\\r")
}
