//! scalprof analysis: turns stored measurements into the run document — per-point summaries,
//! the scaling model (USL / Amdahl), measurement warnings, and the findings (scaling
//! diff, locks, sharing, serial phases, complexity).

// Unit tests build, run and open what they made themselves: the action checks are for
// the product (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]

pub mod budget;
mod causes;
pub mod compare;
pub mod complexity;
pub mod experiment;
pub mod history;
pub mod layout;
pub mod locks;
pub mod predict;
pub mod profile;
pub mod scaling;
pub mod sharing;
pub mod stability;
pub mod stage;
pub mod summary;
pub mod top;
pub mod usl;
mod welch;
pub use welch::share_interval;

pub use summary::{assemble, settling_at};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CsvError {
    #[error(
        "line {line}: expected two comma-separated numbers (concurrency,throughput), got {text:?}"
    )]
    BadRow { line: usize, text: String },
    #[error("no data rows after the header line")]
    NoRows,
}

/// Parses a two-column CSV of (concurrency, throughput) with a header line, as R's `usl`
/// package and usl4j read. Blank lines and `#` comments are skipped; extra columns are
/// an error rather than silently ignored.
pub fn parse_two_column_csv(text: &str) -> Result<Vec<(f64, f64)>, CsvError> {
    let mut rows = Vec::new();
    let mut header_seen = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !header_seen {
            header_seen = true;
            // A header is required, but tolerate a file whose first line is already data.
            if parse_row(line).is_none() {
                continue;
            }
        }
        match parse_row(line) {
            Some(r) => rows.push(r),
            None => {
                return Err(CsvError::BadRow {
                    line: i + 1,
                    text: line.to_string(),
                })
            }
        }
    }
    if rows.is_empty() {
        return Err(CsvError::NoRows);
    }
    Ok(rows)
}

fn parse_row(line: &str) -> Option<(f64, f64)> {
    let mut it = line.split(',').map(|f| f.trim().trim_matches('"'));
    let a = it.next()?.parse().ok()?;
    let b = it.next()?.parse().ok()?;
    it.next().is_none().then_some((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_with_header_comments_and_blank_lines() {
        let rows = parse_two_column_csv("load,throughput\n# c\n\n1,64.9\n 18 , 995.9\n").unwrap();
        assert_eq!(rows, vec![(1.0, 64.9), (18.0, 995.9)]);
    }

    #[test]
    fn csv_errors_name_the_line() {
        assert_eq!(
            parse_two_column_csv("n,x\n1,2\n3,abc\n"),
            Err(CsvError::BadRow {
                line: 3,
                text: "3,abc".into()
            })
        );
        assert_eq!(parse_two_column_csv("n,x\n"), Err(CsvError::NoRows));
        assert!(parse_two_column_csv("n,x\n1,2,3\n").is_err());
    }
}
