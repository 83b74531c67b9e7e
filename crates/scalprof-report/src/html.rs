//! The self-contained HTML report: one file, nothing fetched from the network.
//!
//! Every string that comes from the profiled program (symbols, lock names, paths, the
//! command) is untrusted: pages are built as [`markup::Html`], which escapes every value
//! and takes markup only from literals. Flame graphs are embedded as frames of
//! their own (data: URIs, an opaque origin), so inferno's script runs apart from the page.
//!
//! One view per file: `run` (a run's report), `compare` (two runs), `plot` (the SVG plots
//! both draw); `markup` is the escaping writer they share.

mod compare;
pub(crate) mod markup;
mod plot;
mod run;
pub use compare::compare_report;
use markup::{markup, Html};
pub(crate) use plot::budget_bars;
pub use plot::scaling_plot;
pub use run::run_report;

/// Where a section sits: on a run's own page, or nested under a test of the suite's page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Heading {
    Page,
    Nested,
}

/// A flame graph as a frame of its own, so that inferno's script runs (an `<img>` shows a
/// picture whose search, zoom and tooltips never work) and each graph's ids and functions
/// stay apart from the page's and the other graphs'. As tall as the SVG says it is.
fn flame_frame(id: &str, title: &str, svg: &[u8]) -> Html {
    let head = String::from_utf8_lossy(&svg[..svg.len().min(2048)]);
    let height = head
        .find("<svg")
        .and_then(|i| {
            let rest = &head[i..];
            let h = rest.find(" height=\"")? + " height=\"".len();
            rest[h..].split('"').next()?.parse::<u32>().ok()
        })
        .unwrap_or(600);
    markup!(
        "<iframe class=\"flame\" id=\"{}\" title=\"{}\" height=\"{}\" src=\"data:image/svg+xml;base64,{}\"></iframe>",
        id,
        title,
        height + 4,
        base64(svg)
    )
}

/// Standard base64 (RFC 4648), for data: URIs; a dozen lines do not warrant a dependency.
fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

pub(crate) const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}\
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .6em;border-bottom:1px solid #eee;text-align:right}\
td:first-child,th:first-child{text-align:left}.l{text-align:left}\
.finding{border-left:4px solid #c33;padding:.3em .8em;margin:.6em 0;background:#fcf6f6}\
.bar{display:flex;height:1.4em;width:100%;max-width:720px;border:1px solid #999}.seg{height:100%}.budget-row{margin:.4em 0}.budget-label{font-weight:bold}\
.score{font-weight:bold}.muted{color:#777}.warn{color:#a60}iframe.flame{width:100%;border:1px solid #ddd}\
code{background:#f4f4f4;padding:0 .2em}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_encodes_every_tail_length() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
