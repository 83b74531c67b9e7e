//! What the parser refuses, said with the fix: a workload's command typed without the `--`
//! before it (perf and hyperfine users type `scalprof run sleep 1`), a misspelt command
//! (`rnu` is `run`). clap's error keeps its shape and exit status; scalprof adds the tip.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::CommandFactory;

use crate::cli::Cli;

/// `error`, for the command line `args` (the program first), with scalprof's tip where it
/// has one.
pub fn with_tip(mut error: clap::Error, args: &[String]) -> clap::Error {
    match error.kind() {
        ErrorKind::UnknownArgument => {
            if let Some(line) = with_separator(&error, args) {
                add_tip(&mut error, format!("the command goes after --: {line}"));
            }
        }
        ErrorKind::InvalidSubcommand => {
            let typed = match error.get(ContextKind::InvalidSubcommand) {
                Some(ContextValue::String(typed)) => typed.clone(),
                _ => return error,
            };
            if let Some(best) = closest_command(&typed) {
                error.insert(
                    ContextKind::SuggestedSubcommand,
                    ContextValue::Strings(vec![best]),
                );
            }
        }
        _ => {}
    }
    error
}

fn add_tip(error: &mut clap::Error, tip: String) {
    let mut tips = match error.get(ContextKind::Suggested) {
        Some(ContextValue::StyledStrs(tips)) => tips.clone(),
        _ => Vec::new(),
    };
    tips.push(tip.into());
    error.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
}

/// The command line with `--` where the workload's command starts: where the argument
/// clap did not expect is the first word that is not an option (or an option's value)
/// of a command that takes a workload (`run`, `complexity`, `locks`).
fn with_separator(error: &clap::Error, args: &[String]) -> Option<String> {
    let Some(ContextValue::String(unexpected)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    if unexpected.starts_with('-') || args.iter().skip(1).any(|a| a == "--") {
        return None;
    }
    let mut cli = Cli::command();
    // Spreads the global options (`--db`) to the commands.
    cli.build();
    let at = 1 + *positionals(&cli, args.get(1..)?).first()?;
    let command = cli.find_subcommand(&args[at])?;
    if !command.get_arguments().any(|a| a.is_last_set()) {
        return None;
    }
    let rest = &args[at + 1..];
    let words = positionals(command, rest);
    let first = words
        .iter()
        .find(|&&i| rest[i] == *unexpected)
        .or(words.first())?;
    let cut = at + 1 + first;
    let program = std::path::Path::new(&args[0])
        .file_name()
        .map_or("scalprof".into(), |n| n.to_string_lossy().into_owned());
    let fixed: Vec<String> = std::iter::once(program)
        .chain(args[1..cut].iter().cloned())
        .chain(std::iter::once("--".to_string()))
        .chain(args[cut..].iter().cloned())
        .collect();
    Some(scalprof_report::shell_line(&fixed))
}

/// Where `args` has words that are neither `command`'s options nor their values, as
/// indices into `args` (up to a `--`).
fn positionals(command: &clap::Command, args: &[String]) -> Vec<usize> {
    let options = command.get_arguments().filter(|a| !a.is_positional());
    let (mut longs, mut shorts) = (Vec::new(), Vec::new());
    for option in options {
        let takes = values_taken(option);
        longs.extend(
            option
                .get_long_and_visible_aliases()
                .into_iter()
                .flatten()
                .map(|l| (l, takes)),
        );
        shorts.extend(
            option
                .get_short_and_visible_aliases()
                .into_iter()
                .flatten()
                .map(|s| (s, takes)),
        );
    }
    // How many words after `i` an option takes.
    let skip = |takes: Takes, i: usize| match takes {
        Takes::Nothing => 0,
        Takes::One => 1,
        Takes::Maybe => usize::from(args.get(i + 1).is_some_and(|n| !n.starts_with('-'))),
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = args[i].as_str();
        if word == "--" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            if !long.contains('=') {
                if let Some(&(_, takes)) = longs.iter().find(|(l, _)| *l == long) {
                    i += skip(takes, i);
                }
            }
        } else if let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) {
            // `-t2` carries its value; `-at 2` takes the next word.
            for (at, c) in cluster.char_indices() {
                match shorts.iter().find(|(s, _)| *s == c) {
                    Some(&(_, Takes::Nothing)) => continue,
                    Some(&(_, takes)) if at + c.len_utf8() == cluster.len() => i += skip(takes, i),
                    _ => {}
                }
                break;
            }
        } else {
            found.push(i);
        }
        i += 1;
    }
    found
}

/// What an option takes after it.
#[derive(Clone, Copy)]
enum Takes {
    Nothing,
    One,
    /// A value or none (`--json` alone, or `--json FILE`): the next word unless an option.
    Maybe,
}

fn values_taken(option: &clap::Arg) -> Takes {
    match option.get_num_args() {
        Some(n) if !n.takes_values() => Takes::Nothing,
        Some(n) if n.min_values() == 0 => Takes::Maybe,
        Some(_) => Takes::One,
        None if option.get_action().takes_values() => Takes::One,
        None => Takes::Nothing,
    }
}

/// The command `typed` was most likely meant to be: the fewest edits away (a swap of two
/// letters is one), at most two and fewer than its length; `run` on a tie, since it is
/// the command people type most (clap's own guess took `rnu` for `runs`).
fn closest_command(typed: &str) -> Option<String> {
    let cli = Cli::command();
    let names = cli
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .chain(std::iter::once("help".to_string()));
    let (distance, _, best) = names
        .map(|name| (edit_distance(typed, &name), name != "run", name))
        .min()?;
    (distance <= 2 && distance < typed.chars().count()).then_some(best)
}

/// Optimal string alignment distance (Damerau–Levenshtein without repeated edits of a
/// substring): insertions, deletions, substitutions and swaps of adjacent letters each
/// count one (Damerau 1964, "A technique for computer detection and correction of
/// spelling errors").
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn tip(line: &str) -> String {
        let args: Vec<String> = line.split(' ').map(String::from).collect();
        match Cli::try_parse_from(&args) {
            Ok(_) => panic!("{line} parsed"),
            Err(e) => with_tip(e, &args).render().to_string(),
        }
    }

    #[test]
    fn a_command_without_the_separator_is_shown_with_it() {
        let said = tip("scalprof run -t 1 --repeat 1 sleep 0.1");
        assert!(
            said.contains(
                "tip: the command goes after --: scalprof run -t 1 --repeat 1 -- sleep 0.1"
            ),
            "{said}"
        );
        // Options' values are not mistaken for the command, nor is `--db`'s.
        let said = tip("scalprof --db x.db run --label sleep -t2 sleep 1");
        assert!(
            said.contains("scalprof --db x.db run --label sleep -t2 -- sleep 1"),
            "{said}"
        );
        let said = tip("scalprof complexity --sizes 1,2,3 ./sort {size}");
        assert!(
            said.contains("scalprof complexity --sizes 1,2,3 -- ./sort '{size}'")
                || said.contains("scalprof complexity --sizes 1,2,3 -- ./sort {size}"),
            "{said}"
        );
        assert!(tip("scalprof locks -a ./bench").contains("scalprof locks -a -- ./bench"));
        // A misspelt option gets clap's suggestion, not this one.
        assert!(!tip("scalprof run --repaet 1 -- true").contains("goes after"));
        // A command that takes no workload: no such tip.
        assert!(!tip("scalprof show 1 2").contains("goes after"));
    }

    #[test]
    fn typos_of_run_suggest_run() {
        for typed in ["rnu", "rn", "urn", "rum"] {
            let said = tip(&format!("scalprof {typed}"));
            assert!(
                said.contains("similar subcommand exists: 'run'"),
                "{typed}: {said}"
            );
        }
        assert!(tip("scalprof rnus").contains("'runs'"));
        assert!(tip("scalprof compre").contains("'compare'"));
        assert_eq!(closest_command("xyzzy"), None);
    }

    #[test]
    fn swaps_count_as_one_edit() {
        assert_eq!(edit_distance("rnu", "run"), 1);
        assert_eq!(edit_distance("rnu", "runs"), 2);
        assert_eq!(edit_distance("", "run"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
