//! `scalprof completions SHELL` and `scalprof man`: generated from the clap definitions,
//! so that they never disagree with `--help`.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};

/// `scalprof completions SHELL`: the shell's completion script on standard output.
pub fn completions(args: CompletionsArgs) -> Result<ExitCode> {
    let mut cli = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "scalprof", &mut script);
    crate::out::stdout_bytes(&script)?;
    Ok(ExitCode::SUCCESS)
}

/// `scalprof man`: one man page (roff) on standard output.
pub fn man() -> Result<ExitCode> {
    crate::out::stdout_bytes(&man_page()?)?;
    Ok(ExitCode::SUCCESS)
}

/// The page: the top level (synopsis, description, global options), a COMMANDS section
/// with each command's synopsis, description and options (as `git help` pages list a
/// command's options), then the exit status table of `--help`.
fn man_page() -> std::io::Result<Vec<u8>> {
    let mut cli = Cli::command();
    // Gives each command its full name (`scalprof run`) for its synopsis.
    cli.build();
    let mut page = Vec::new();
    let top = clap_mangen::Man::new(cli.clone());
    top.render_title(&mut page)?;
    top.render_name_section(&mut page)?;
    top.render_synopsis_section(&mut page)?;
    top.render_description_section(&mut page)?;
    top.render_options_section(&mut page)?;
    page.extend_from_slice(b".SH COMMANDS\n");
    for command in cli.get_subcommands().filter(|c| c.get_name() != "help") {
        let name = command.get_bin_name().map_or_else(
            || format!("scalprof {}", command.get_name()),
            str::to_string,
        );
        page.extend_from_slice(format!(".SS \"{name}\"\n").as_bytes());
        let man = clap_mangen::Man::new(command.clone());
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        man.render_description_section(&mut part)?;
        if command.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut part)?;
        }
        // Its sections become paragraphs of the command's subsection.
        for line in String::from_utf8_lossy(&part).lines() {
            match line.strip_prefix(".SH ") {
                Some("SYNOPSIS" | "DESCRIPTION") => page.extend_from_slice(b".PP\n"),
                Some(heading) => {
                    page.extend_from_slice(format!(".PP\n\\fB{}:\\fR\n", title(heading)).as_bytes())
                }
                None => page.extend_from_slice(format!("{line}\n").as_bytes()),
            }
        }
    }
    page.extend_from_slice(exit_status().as_bytes());
    top.render_version_section(&mut page)?;
    Ok(page)
}

/// The EXIT STATUS section, from the table `--help` shows ([`crate::cli::EXIT_STATUS`]):
/// each status a tagged paragraph.
fn exit_status() -> String {
    let mut roff = String::from(".SH \"EXIT STATUS\"\n");
    for line in crate::cli::EXIT_STATUS.lines().skip(1) {
        let line = line.trim();
        match line.split_once(' ') {
            Some((code, text)) if code.parse::<u8>().is_ok() => {
                roff += &format!(".TP\n\\fB{code}\\fR\n{}\n", escape(text.trim()));
            }
            // The previous status's text goes on.
            _ => roff += &format!("{}\n", escape(line)),
        }
    }
    roff
}

/// Text as roff takes it: backslashes doubled, a leading `.` or `'` guarded, and `-` as
/// a hyphen-minus (`--fail-if-slower` is typed as it is printed).
fn escape(text: &str) -> String {
    let text = text.replace('\\', "\\\\").replace('-', "\\-");
    if text.starts_with(['.', '\'']) {
        format!("\\&{text}")
    } else {
        text
    }
}

/// `OPTIONS` as `Options`.
fn title(heading: &str) -> String {
    let heading = heading.trim_matches('"');
    let mut chars = heading.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_string() + &chars.as_str().to_lowercase()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_man_page_has_every_command_and_the_exit_status() {
        let page = String::from_utf8(super::man_page().unwrap()).unwrap();
        assert!(page.starts_with(".ie"), "{}", &page[..200.min(page.len())]);
        for needle in [
            ".SS \"scalprof run\"",
            ".SS \"scalprof compare\"",
            "\\-\\-prepare",
            "\\-\\-fail\\-if\\-slower",
            ".SH \"EXIT STATUS\"\n.TP\n\\fB0\\fR\nsuccess\n",
            ".TP\n\\fB1\\fR\na gate failed: compare \\-\\-fail\\-if\\-slower",
        ] {
            assert!(page.contains(needle), "no {needle}");
        }
        // One section of each name: the commands' own are subsections.
        assert_eq!(page.matches(".SH SYNOPSIS").count(), 1);
        assert_eq!(page.matches(".SH OPTIONS").count(), 1);
        // No pages of their own to point to.
        assert!(!page.contains("scalprof\\-run(1)"));
    }
}
