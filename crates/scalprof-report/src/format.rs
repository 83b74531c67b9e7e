//! Number formats shared by the terminal and HTML views: compact numbers, three
//! significant digits, durations and counts.

/// Compact number: 3 significant digits with k/M/G suffixes.
pub fn si(x: f64) -> String {
    // Past tera (or below a thousandth, but not zero), scientific notation stays short.
    if x.is_finite() && x != 0.0 && (x.abs() >= 1e12 || x.abs() < 1e-3) {
        return format!("{x:.3e}");
    }
    let (v, suffix) = match x.abs() {
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e3 => (x / 1e3, "k"),
        _ => (x, ""),
    };
    let digits = match v.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        _ => 2,
    };
    format!("{v:.digits$}{suffix}")
}

/// Three significant digits without an exponent for ordinary magnitudes.
pub(crate) fn g(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    if (-5..6).contains(&mag) {
        let decimals = (2 - mag).max(0) as usize;
        format!("{x:.decimals$}")
    } else {
        format!("{x:.2e}")
    }
}

/// `x` in plain decimals (never an exponent) to the precision its standard error `se`
/// supports: two significant digits of the error, as R's `summary()` tables print an
/// estimate beside its error (`98.95` for an error of 0.58; `0.000123` for 0.000012).
/// Without a usable error, four significant digits.
pub fn decimal(x: f64, se: f64) -> String {
    let digits = |v: f64, significant: i32| {
        if v.is_finite() && v != 0.0 {
            (significant - 1 - v.abs().log10().floor() as i32).clamp(0, 12) as usize
        } else {
            0
        }
    };
    let decimals = if se.is_finite() && se > 0.0 {
        digits(se, 2)
    } else {
        digits(x, 4)
    };
    format!("{x:.decimals$}")
}

/// A duration in the unit a person reads it in (one formatter for text and HTML, and the
/// findings' evidence).
pub(crate) fn ns(v: f64) -> String {
    scalprof_model::units::human_ns(v)
}

/// A count: exact below a thousand, else with an SI suffix.
pub(crate) fn count(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else {
        si(n as f64)
    }
}

/// A size in bytes as people read it: `812 B`, `4.0 KiB`, `47.3 MiB`, `1.2 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut x = n as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_bytes() {
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(4096), "4.0 KiB");
        assert_eq!(bytes(49_600_000), "47.3 MiB");
    }

    #[test]
    fn compact_numbers() {
        assert_eq!(si(235_300_000.0), "235M");
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(12.345), "12.3");
        assert_eq!(si(0.5), "0.50");
        assert_eq!(g(0.0277), "0.0277");
        assert_eq!(g(0.000104), "0.000104");
        assert_eq!(g(1.5e-9), "1.50e-9");
    }

    #[test]
    fn estimates_print_as_plain_decimals_to_their_error() {
        assert_eq!(decimal(98.95, 0.5826), "98.95");
        assert_eq!(decimal(101.28, 0.5826), "101.28");
        assert_eq!(decimal(0.000_123_4, 0.000_012), "0.000123");
        assert_eq!(decimal(-0.0031, 0.0042), "-0.0031");
        assert_eq!(decimal(12345.6, 210.0), "12346");
        // No usable error: four significant digits, still without an exponent.
        assert_eq!(decimal(0.000_098_76, 0.0), "0.00009876");
        assert_eq!(decimal(1.0e7, f64::NAN), "10000000");
        assert_eq!(decimal(0.0, 0.0), "0");
    }
}
