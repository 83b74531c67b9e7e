//! The command line's value parsers: durations, output paths, regexes, sweep lists,
//! percentages, seconds and stack sizes, each refused with what was expected.

use std::path::PathBuf;
use std::time::Duration;

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        if secs > 0.0 && secs.is_finite() {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err("must be a positive time (examples: 30s, 2m, 1.5)".into());
    }
    match humantime::parse_duration(s) {
        Ok(d) if d.is_zero() => Err("must be a positive time (examples: 30s, 2m, 1.5)".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (examples: 30s, 2m, 1.5)")),
    }
}

/// A file to write when the command ends (`--json`, `--report`): checked now, so that a
/// typo in its folder is said before a sweep of many minutes, not after it.
pub(super) fn parse_output_path(s: &str) -> Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    let path = PathBuf::from(s);
    if s.is_empty() {
        return Err("is empty".into());
    }
    // Standard output.
    if s == "-" {
        return Ok(path);
    }
    if path.is_dir() {
        return Err(format!("{s} is a directory; name a file"));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(format!("the folder {} does not exist", dir.display()));
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| "contains a NUL byte".to_string())?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!("the folder {} is not writable", dir.display()));
    }
    if let Some(why) = scalprof_pipeline::facade::foreign_output(&path) {
        return Err(format!("{s}: {why}: scalprof will not write through it"));
    }
    Ok(path)
}

/// A regex, checked when parsed: a typo is a usage error (exit 2) before anything runs.
pub(super) fn parse_regex(s: &str) -> Result<String, String> {
    regex::Regex::new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("not a valid regex: {e}"))
}

/// A sweep list (`1,2,4`, `1-8`, `1-4,8`), checked when parsed: the same error, and exit
/// status 2, in every command that takes one.
pub(super) fn parse_list(s: &str) -> Result<String, String> {
    scalprof_pipeline::facade::parse_sweep_list(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// A slowdown threshold in percent, `5` or `5%`: a finite number from 0 to below 100
/// (`nan` would never fire, and B cannot be 100% or more slower than A: such a gate could
/// never fail).
pub(super) fn parse_percent(s: &str) -> Result<f64, String> {
    let number = s.trim().strip_suffix('%').unwrap_or(s.trim()).trim_end();
    match number.parse::<f64>() {
        Ok(p) if p.is_finite() && (0.0..100.0).contains(&p) => Ok(p),
        Ok(p) if p.is_finite() && p >= 100.0 => Err(format!(
            "{p}% slower would mean a throughput of zero or less, so the gate could never \
             fail: give a percentage below 100 (e.g. 5 or 5%)"
        )),
        _ => Err("must be a percentage from 0 to below 100 (e.g. 5 or 5%)".into()),
    }
}

/// Seconds a suite test runs: in (0, 3600].
pub(super) fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 3600.0 => Ok(x),
        _ => Err("must be a number of seconds in (0, 3600]".into()),
    }
}

/// `8192`, `8k`, `32K`: a user stack copy size, a multiple of 8 the kernel accepts.
pub(super) fn parse_stack_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (digits, unit) = match t.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1024),
        None => (t, 1),
    };
    let n: u32 = digits
        .parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{s:?} is not a size (e.g. 16k or 16384)"))?;
    // The kernel takes at most 0xfff8 bytes per copy, a multiple of 8.
    if !(1024..=63 * 1024).contains(&n) || !n.is_multiple_of(8) {
        return Err(format!(
            "{s:?}: the stack copy must be 1k–63k, a multiple of 8 bytes"
        ));
    }
    Ok(n)
}

/// `1000` or `postgres`: a user whose processes `--attach` may take, by uid or by a name
/// `/etc/passwd` gives.
pub(super) fn parse_user(s: &str) -> Result<u32, String> {
    let t = s.trim();
    if let Ok(uid) = t.parse::<u32>() {
        return Ok(uid);
    }
    scalprof_pipeline::facade::AttachSpec::uid_of_user(t).ok_or_else(|| {
        format!("{s:?} is neither a uid nor a user /etc/passwd names (`id -u NAME` gives a uid)")
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_percent, parse_user};

    #[test]
    fn a_user_is_a_uid_or_a_name_from_passwd() {
        assert_eq!(parse_user("1000"), Ok(1000));
        assert_eq!(parse_user(" 65534 "), Ok(65534));
        assert_eq!(parse_user("root"), Ok(0));
        let e = parse_user("no-such-user-here").unwrap_err();
        assert!(e.contains("neither a uid nor a user"), "{e}");
        assert!(parse_user("-1").is_err());
    }

    #[test]
    fn a_percentage_is_taken_as_people_type_it() {
        assert_eq!(parse_percent("5"), Ok(5.0));
        assert_eq!(parse_percent("5%"), Ok(5.0));
        assert_eq!(parse_percent("2.5 %"), Ok(2.5));
        assert_eq!(parse_percent("0"), Ok(0.0));
        for bad in ["-1", "nan", "inf", "%", "five"] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
        let e = parse_percent("150%").unwrap_err();
        assert!(e.contains("could never fail"), "{e}");
    }
}
