//! A run's default label: its command as a person would name it, short (hyperfine names a
//! benchmark by its command string). The program's file name alone made every `sh -c`
//! run "sh", and a label that names several runs picks only the newest.

use std::path::Path;

/// The longest default label, in characters, with its "…".
const LABEL_CHARS: usize = 40;

/// The label of a run of `command`: its words from the program on, without a leading
/// `env VAR=…` or the program's folder; for a shell's `-c SCRIPT`, the script. Runs of
/// whitespace become one space, and a longer label is cut at a word boundary to about
/// 40 characters, ending in "…".
pub fn default_label(command: &[String]) -> String {
    let start = crate::runtimes::program_at(command).unwrap_or(0);
    let argv = &command[start.min(command.len())..];
    let text = match shell_script(argv) {
        Some(script) => script.to_string(),
        None => argv
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { file_name(w) } else { w.as_str() })
            .collect::<Vec<_>>()
            .join(" "),
    };
    let label = shorten(&text);
    if label.is_empty() {
        // An empty script: the shell, at least.
        return argv.first().map_or("", |w| file_name(w)).to_string();
    }
    label
}

/// The program's file name: `./bench` is `bench`, `/usr/bin/xz` is `xz`.
fn file_name(word: &str) -> &str {
    Path::new(word)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(word)
}

/// The script of `sh -c SCRIPT` (also `bash -ec SCRIPT`, `bash -o pipefail -c SCRIPT`):
/// the first word after the shell's options, when one of them has `c`.
fn shell_script(argv: &[String]) -> Option<&str> {
    let shell = file_name(argv.first()?);
    if !matches!(
        shell,
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash" | "mksh"
    ) {
        return None;
    }
    let mut command_string = false;
    let mut words = argv[1..].iter();
    while let Some(w) = words.next() {
        match w.as_bytes() {
            // `-o OPTION` and `+o OPTION` take the next word.
            [b'-' | b'+', b'o'] => {
                words.next();
            }
            [b'-', b'-', ..] => {}
            [b'-' | b'+', flags @ ..] if !flags.is_empty() => {
                command_string |= flags.contains(&b'c');
            }
            _ => return command_string.then_some(w.as_str()),
        }
    }
    None
}

/// Whitespace runs as one space; past [`LABEL_CHARS`], cut after the last word that fits
/// (a word longer than that is cut itself), without a dangling `|`, `;`, `&` or
/// redirection, and ended with "…".
fn shorten(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let whole = words.join(" ");
    if whole.chars().count() <= LABEL_CHARS {
        return whole;
    }
    let mut out = String::new();
    for w in &words {
        let grown = out.chars().count() + usize::from(!out.is_empty()) + w.chars().count();
        if grown + 1 > LABEL_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    if out.is_empty() {
        out = whole.chars().take(LABEL_CHARS - 1).collect();
    }
    let out = out.trim_end_matches(['|', ';', '&', '>', '<', ' ']);
    format!("{out}…")
}

#[cfg(test)]
mod tests {
    use super::default_label;

    fn label(argv: &[&str]) -> String {
        default_label(&argv.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_shell_command_is_named_by_its_script() {
        assert_eq!(
            label(&["sh", "-c", "echo ops=1", "sh", "{threads}"]),
            "echo ops=1"
        );
        assert_eq!(
            label(&["/bin/bash", "-ec", "make\n   -j {threads}"]),
            "make -j {threads}"
        );
        assert_eq!(
            label(&["bash", "-o", "pipefail", "-c", "a | b"]),
            "a | b",
            "-o takes a word"
        );
        // No -c: a script file, named as the command.
        assert_eq!(label(&["sh", "./bench.sh", "4"]), "sh ./bench.sh 4");
        assert_eq!(label(&["sh", "-c", "  "]), "sh");
    }

    #[test]
    fn env_and_the_program_folder_are_left_out() {
        assert_eq!(
            label(&["env", "GOMAXPROCS={threads}", "./server", "--port", "1"]),
            "server --port 1"
        );
        assert_eq!(label(&["/usr/bin/python3", "bench.py"]), "python3 bench.py");
        assert_eq!(
            label(&["env", "-u", "X", "sh", "-c", "xz -T{threads} f"]),
            "xz -T{threads} f"
        );
    }

    #[test]
    fn a_long_command_is_cut_at_a_word_with_an_ellipsis() {
        let cut = label(&["sh", "-c", "xz -T{threads} -1 -k -c mid.txt > /dev/null"]);
        assert_eq!(cut, "xz -T{threads} -1 -k -c mid.txt…");
        assert!(cut.chars().count() <= 40);
        let long = "a".repeat(60);
        let cut = label(&[long.as_str()]);
        assert_eq!(cut.chars().count(), 40);
        assert!(cut.ends_with("a…"));
        // Exactly 40 is kept whole.
        let forty = format!("{} b", "a".repeat(38));
        assert_eq!(label(&["sh", "-c", &forty]), forty);
    }
}
