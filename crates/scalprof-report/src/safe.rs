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

pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A command line as a shell would take it back: an argument with a space or a shell
/// character is single-quoted (`sh -c 'echo ops=1'`), so that it can be copied and rerun.
/// (Written here: the rule is four lines, and quoting for display only.)
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./{}-".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value from the workload or the user (a label, an argument, a symbol) put on one line
/// of a report: a newline in it would start a line of its own, so it is shown as `\n`.
pub fn one_line(value: &str) -> String {
    if !value.contains(['\n', '\r']) {
        return value.to_string();
    }
    value.replace('\n', "\\n").replace('\r', "\\r")
}
