//! The self-contained HTML report: one file, nothing fetched from the network.
//!
//! Every string that comes from the profiled program (symbols, lock names, paths, the
//! command) is untrusted: pages are built as [`markup::Html`], which escapes every value
//! and takes markup only from literals. Flame graphs are embedded as frames of
//! their own (data: URIs, an opaque origin), so inferno's script runs apart from the page.
//!
//! One view per file: `run` (a run's report), `compare` (two runs), `plot` (the SVG plots
//! both draw), `flames` (flame graphs in their boxes), `functions` (the sortable table
//! of top functions); `markup` is the escaping writer they share.

mod compare;
mod flames;
mod functions;
pub(crate) mod markup;
mod plot;
mod run;
pub use compare::compare_report;
pub use flames::{DiffFlame, MAX_HEIGHT_PX};
pub use functions::{PointFunctions, FUNCTION_ROWS};
pub(crate) use plot::budget_bars;
pub use plot::scaling_plot;
pub use run::run_report;

/// Where a section sits: on a run's own page, or nested under a test of the suite's page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Heading {
    Page,
    Nested,
}

/// The pages' style. A flame graph's box (`.flame-box`) is capped at [`MAX_HEIGHT_PX`] and
/// scrolls inside; laid out as a reversed column, it starts scrolled to its end, where a
/// flame graph has its root.
pub(crate) const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}\
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .6em;border-bottom:1px solid #eee;text-align:right}\
td:first-child,th:first-child{text-align:left}.l{text-align:left}\
.finding{border-left:4px solid #c33;padding:.3em .8em;margin:.6em 0;background:#fcf6f6}\
.bar{display:flex;height:1.4em;width:100%;max-width:720px;border:1px solid #999}.seg{height:100%}.budget-row{margin:.4em 0}.budget-label{font-weight:bold}\
.score{font-weight:bold}.muted{color:#777}.warn{color:#a60}\
details.flame>summary{font-weight:bold;margin:.8em 0 .3em;cursor:pointer}\
.flame-box{max-height:600px;overflow-y:auto;display:flex;flex-direction:column-reverse;border:1px solid #ddd}\
iframe.flame{width:100%;border:0;flex:none;display:block}\
details.functions>summary{font-weight:bold;margin:.8em 0 .3em;cursor:pointer}\
table.sortable th{cursor:pointer;user-select:none}table.sortable th[data-sort=asc]::after{content:' ▲'}\
table.sortable th[data-sort=desc]::after{content:' ▼'}\
code{background:#f4f4f4;padding:0 .2em}";
