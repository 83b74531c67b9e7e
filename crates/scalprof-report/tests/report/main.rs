//! The report's integration tests, one binary: the golden text and HTML reports, and the
//! HTML report opened in a headless browser.

// Tests build, run and open what they made themselves (clippy.toml's checks are for the
// product).
#![allow(clippy::disallowed_methods)]

mod browser;
mod golden;
