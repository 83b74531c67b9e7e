//! Units as a person reads them.

/// A duration in nanoseconds in the unit a person reads it in: `850 ns`, `23.2 µs`,
/// `73.2 ms`, `1.35 s`.
pub fn human_ns(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2} s", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} ms", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} µs", v / 1e3)
    } else if a < 0.5 {
        // Not "-0 ns" for a tiny negative difference.
        "0 ns".into()
    } else {
        format!("{v:.0} ns")
    }
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

#[cfg(test)]
#[test]
fn durations_read_in_their_unit() {
    assert_eq!(human_ns(850.0), "850 ns");
    assert_eq!(human_ns(23_240.0), "23.2 µs");
    assert_eq!(human_ns(1.35e9), "1.35 s");
    assert_eq!(human_ns(-0.2), "0 ns");
}
