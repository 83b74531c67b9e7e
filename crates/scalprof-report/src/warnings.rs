//! Which warnings the summary shows: one line per kind (a kind found at several points is
//! said once, for the last, with the others named), the most consequential first, and at
//! most [`BUDGET`] of them without `-v`. Readers skip a block of six warnings, the one
//! that matters with the rest; the run document keeps them all.

use scalprof_model::{Warning, WarningKind};

/// Warnings shown without `-v`.
pub const BUDGET: usize = 2;

/// The warnings to print: under the header, in the warnings block, and how many were
/// left for `-v`.
pub(crate) struct Shown {
    pub headline: Vec<String>,
    pub rest: Vec<String>,
    pub hidden: usize,
}

/// A sweep that swept nothing, throughput computed on a wrong assumption, or a point
/// bound by the latency of waking CPUs: said under the header, before any number.
pub(crate) fn is_headline_warning(kind: WarningKind) -> bool {
    matches!(
        kind,
        WarningKind::NotSwept | WarningKind::FixedWork | WarningKind::IdleWakeups
    )
}

/// How much a warning changes what the rest of the screen means, most first: numbers on a
/// wrong footing, then failures, a busy machine, then the diagnosis's own quality, and
/// last facts about the host or the options that the user already knows.
fn rank(kind: WarningKind) -> u8 {
    match kind {
        WarningKind::NotSwept | WarningKind::FixedWork => 0,
        WarningKind::FailedRepeats | WarningKind::BeyondLimits => 1,
        WarningKind::IdleWakeups => 2,
        WarningKind::Interference => 3,
        WarningKind::NoisyRepeats | WarningKind::OutlierRepeat => 4,
        WarningKind::SuperLinear => 5,
        WarningKind::PerturbedDiagnosis => 6,
        WarningKind::FindingsWithheld | WarningKind::Unexplained => 7,
        WarningKind::ProfileQuality => 8,
        WarningKind::OversubscribedPoint => 9,
        WarningKind::SingleRepeat | WarningKind::TooFewPoints | WarningKind::BriefLevel => 10,
    }
}

/// The warnings as the summary prints them (`verbose`: all of them).
pub(crate) fn shown(warnings: &[Warning], parameter: &str, verbose: bool) -> Shown {
    let mut lines: Vec<(u8, bool, String)> = merged(warnings, parameter)
        .into_iter()
        .map(|(kind, text)| (rank(kind), is_headline_warning(kind), text))
        .collect();
    // Stable: a kind keeps its place among its rank.
    lines.sort_by_key(|(rank, _, _)| *rank);
    let total = lines.len();
    if !verbose {
        lines.truncate(BUDGET);
    }
    let hidden = total - lines.len();
    let (headline, rest): (Vec<_>, Vec<_>) = lines.into_iter().partition(|(_, h, _)| *h);
    Shown {
        headline: headline.into_iter().map(|(_, _, t)| t).collect(),
        rest: rest.into_iter().map(|(_, _, t)| t).collect(),
        hidden,
    }
}

/// One line per kind, in the order the kinds first appear: the last point's message,
/// and where other points had the same warning, which.
fn merged(warnings: &[Warning], parameter: &str) -> Vec<(WarningKind, String)> {
    let mut kinds: Vec<WarningKind> = Vec::new();
    for w in warnings {
        if !kinds.contains(&w.kind) {
            kinds.push(w.kind);
        }
    }
    kinds
        .into_iter()
        .flat_map(|kind| {
            let same: Vec<&Warning> = warnings.iter().filter(|w| w.kind == kind).collect();
            // Warnings about the whole run (no point) are each their own line.
            let (whole, at_points): (Vec<&Warning>, Vec<&Warning>) =
                same.into_iter().partition(|w| w.point.is_none());
            let mut out: Vec<(WarningKind, String)> =
                whole.iter().map(|w| (kind, w.message.clone())).collect();
            if let Some(last) = at_points.last() {
                let others: Vec<String> = at_points[..at_points.len() - 1]
                    .iter()
                    .filter_map(|w| w.point)
                    .map(|v| v.to_string())
                    .collect();
                let mut text = last.message.clone();
                if !others.is_empty() {
                    text += &format!(" (also at {parameter} {})", others.join(", "));
                }
                out.push((kind, text));
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(kind: WarningKind, point: Option<u64>, message: &str) -> Warning {
        Warning {
            kind,
            point,
            message: message.into(),
        }
    }

    #[test]
    fn one_line_per_kind_the_weightiest_first_within_the_budget() {
        let warnings = vec![
            w(WarningKind::NoisyRepeats, Some(1), "threads 1: spreads 34%"),
            w(
                WarningKind::PerturbedDiagnosis,
                Some(2),
                "threads 2: traced slower",
            ),
            w(WarningKind::NoisyRepeats, Some(2), "threads 2: spreads 19%"),
            w(WarningKind::TooFewPoints, None, "2 measured points"),
            w(
                WarningKind::Interference,
                Some(2),
                "threads 2: other processes",
            ),
            w(WarningKind::ProfileQuality, None, "profile: stripped"),
        ];
        let lines = merged(&warnings, "threads");
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0].1, "threads 2: spreads 19% (also at threads 1)");
        let s = shown(&warnings, "threads", false);
        assert!(s.headline.is_empty());
        assert_eq!(
            s.rest,
            vec![
                "threads 2: other processes".to_string(),
                "threads 2: spreads 19% (also at threads 1)".to_string()
            ]
        );
        assert_eq!(s.hidden, 3);
        let all = shown(&warnings, "threads", true);
        assert_eq!(all.rest.len(), 5);
        assert_eq!(all.hidden, 0);
        assert_eq!(all.rest[4], "2 measured points");
    }

    #[test]
    fn a_wrong_footing_is_a_headline_and_comes_first() {
        let warnings = vec![
            w(WarningKind::NoisyRepeats, Some(1), "noisy"),
            w(WarningKind::Interference, Some(1), "busy"),
            w(WarningKind::NotSwept, None, "no {threads}"),
        ];
        let s = shown(&warnings, "threads", false);
        assert_eq!(s.headline, vec!["no {threads}".to_string()]);
        assert_eq!(s.rest, vec!["busy".to_string()]);
        assert_eq!(s.hidden, 1);
    }
}
