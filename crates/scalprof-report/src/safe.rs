//! Text that is safe to print: control and bidi characters made visible, commands
//! shell-quoted, multi-line text on one line, text for XML, SVG and HTML escaped.

/// Text for a terminal: control characters other than newline — which a workload's label,
/// command, output or symbol names may carry (ESC sequences can rewrite the screen or the
/// window title) — are shown in caret notation (`^[`), as `cat -v` does; C1 controls and
/// Unicode's noncharacters (U+FFFE, U+FFFF, U+FDD0…) as `\u{9b}`.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            c => push_shown(&mut out, c),
        }
    }
    out
}

/// `c` as text may show it: itself, or where it is a control, bidi or noncharacter, its
/// visible form ([`terminal_safe`]).
fn push_shown(out: &mut String, c: char) {
    match c {
        c if (c as u32) < 0x20 => {
            out.push('^');
            out.push(char::from(b'@' + c as u8));
        }
        '\u{7f}' => out.push_str("^?"),
        c if ('\u{80}'..='\u{9f}').contains(&c) || is_noncharacter(c) => {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
        // Bidirectional overrides and isolates reorder what follows them on screen
        // (a fake verdict could read as a real one): shown as their code.
        c if is_bidi_control(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push(c),
    }
}

/// Unicode's noncharacters: U+FDD0 to U+FDEF, and the last two code points of every
/// plane (U+FFFE, U+FFFF, U+1FFFE, …). XML 1.0 forbids U+FFFE and U+FFFF outright and
/// discourages the others (its `Char` production and §2.2).
fn is_noncharacter(c: char) -> bool {
    let c = c as u32;
    (0xfdd0..=0xfdef).contains(&c) || c & 0xfffe == 0xfffe
}

/// Text in XML, SVG or HTML, in an element or a quoted attribute: `& < > " '` as
/// entities, and every character XML 1.0 does not allow — or that would show unseen —
/// in its visible form, as a terminal shows it ([`terminal_safe`]; tab and line breaks
/// stay). What comes out holds only XML 1.0's `Char`s, so a stored frame, label or
/// commit cannot make a flame graph, a JUnit file or a report ill-formed. The one way
/// scalprof writes such text.
pub(crate) fn markup_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    markup_text_into(&mut out, text);
    out
}

/// [`markup_text`], appended to `out`.
pub(crate) fn markup_text_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c => push_shown(out, c),
        }
    }
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

/// Characters a stored frame or label may hold that XML 1.0 forbids (U+FFFF, U+FFFE,
/// U+0001), noncharacters it allows but no text should carry (U+FDD0, U+1FFFF), and
/// what would end a CDATA section.
#[cfg(test)]
pub(crate) const HOSTILE: &str = "a\u{ffff}b\u{fffe}c\u{fdd0}d\u{1ffff}e\u{1}f]]>g";

/// Fails unless `xml` is a well-formed XML document (checked by a parser that checks
/// every character) holding no noncharacter.
#[cfg(test)]
pub(crate) fn assert_well_formed(xml: &str) {
    // inferno's SVG names the SVG 1.1 DTD: allowed (it is not fetched).
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    if let Err(e) = roxmltree::Document::parse_with_options(xml, options) {
        panic!("not well-formed XML ({e}): {xml}");
    }
    assert!(!xml.chars().any(is_noncharacter), "a noncharacter: {xml}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_refuses_what_xml_forbids() {
        // Else the checks below would prove nothing.
        for c in ['\u{ffff}', '\u{fffe}', '\u{1}'] {
            assert!(roxmltree::Document::parse(&format!("<a>{c}</a>")).is_err());
        }
    }

    #[test]
    fn markup_text_holds_only_characters_xml_allows_and_shows_the_others() {
        let text = markup_text(HOSTILE);
        assert_eq!(text, "a\\u{ffff}b\\u{fffe}c\\u{fdd0}d\\u{1ffff}e^Af]]&gt;g",);
        assert_well_formed(&format!("<a b=\"{text}\">{text}</a>"));
        assert_eq!(markup_text("<&>\"'\t\n"), "&lt;&amp;&gt;&quot;&#39;\t\n");
        // Every plane's last two code points, and the block of noncharacters.
        for c in ['\u{fdef}', '\u{2fffe}', '\u{10ffff}'] {
            assert_eq!(
                markup_text(&c.to_string()),
                format!("\\u{{{:x}}}", c as u32)
            );
        }
        for c in ['\u{fdcf}', '\u{fdf0}', '\u{fffd}', '\u{1fffd}', '\u{10000}'] {
            assert_eq!(markup_text(&c.to_string()), c.to_string());
        }
    }

    #[test]
    fn a_terminal_shows_noncharacters_as_their_code() {
        assert_eq!(terminal_safe("x\u{ffff}\u{fdd0}"), "x\\u{ffff}\\u{fdd0}");
    }
}
