//! Flame graphs on a page: each a frame of its own in a collapsible section, as tall as
//! its graph up to [`MAX_HEIGHT_PX`] and scrolled there, opened at its root.

use scalprof_model::{PointProfile, RunDocument};

use super::markup::{html, markup, Html};
use crate::flame::svg as flame_svg;

/// The tallest a flame graph's box is drawn; a deeper graph scrolls inside it. Deep stacks
/// (an interpreter's) made graphs of 1,800 px, most of it empty above a few deep towers.
pub const MAX_HEIGHT_PX: u32 = 600;

/// A differential flame graph, or the word that there is nothing to draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiffFlame {
    /// Some function's cost per operation changed: the graph's SVG.
    Changed(Vec<u8>),
    /// No function's cost per operation changed beyond sampling noise.
    Unchanged,
}

/// A closed section's script: on opening, its frames load their graphs.
const LOAD_ON_OPEN: &str = "if(this.open){for(const f of this.querySelectorAll('iframe[data-src]')){f.src=f.dataset.src;f.removeAttribute('data-src')}}";

/// The height an SVG declares on its root element, in px.
fn svg_height(svg: &[u8]) -> Option<u32> {
    let head = String::from_utf8_lossy(&svg[..svg.len().min(2048)]);
    let rest = &head[head.find("<svg")?..];
    let h = rest.find(" height=\"")? + " height=\"".len();
    rest[h..].split('"').next()?.parse::<u32>().ok()
}

/// A flame graph as a frame of its own, so that inferno's script runs (an `<img>` shows a
/// picture whose search, zoom and tooltips never work) and each graph's ids and functions
/// stay apart from the page's and the other graphs'. The frame is as tall as the SVG says
/// it is; the box around it caps that. `summary` labels the section, `open` opens it.
pub(crate) fn flame_frame(id: &str, summary: &Html, title: &str, svg: &[u8], open: bool) -> Html {
    let height = svg_height(svg).unwrap_or(MAX_HEIGHT_PX);
    // A closed section's frame gets its graph when first opened: laid out at no width,
    // inferno's script would size the graph negative (Chromium logs an error per graph),
    // and the page loads only the graphs it shows.
    let (mut h, source) = if open {
        (
            markup!(
                "<details class=\"flame\" open><summary>{}</summary>",
                summary
            ),
            "src",
        )
    } else {
        (
            markup!(
                "<details class=\"flame\" ontoggle=\"{}\"><summary>{}</summary>",
                LOAD_ON_OPEN,
                summary
            ),
            "data-src",
        )
    };
    html!(
        h,
        "<div class=\"flame-box\"><iframe class=\"flame\" id=\"{}\" title=\"{}\" height=\"{}\" {}=\"data:image/svg+xml;base64,{}\"></iframe></div>",
        id,
        title,
        height,
        source,
        base64(svg)
    );
    if height > MAX_HEIGHT_PX {
        html!(
            h,
            "<p class=\"muted\">{} px tall: scroll up inside the box for the deeper stacks and the graph's Search.</p>",
            height
        );
    }
    h += "</details>";
    h
}

/// A flame graph per profiled point (the first open, the others one click away), then
/// the differential one of the first and last.
pub(crate) fn run_flames(
    doc: &RunDocument,
    flames: &[(u64, &PointProfile)],
    diff: Option<&DiffFlame>,
) -> Html {
    let mut h = Html::new();
    h += "<h2>Flame graphs</h2>";
    if flames.is_empty() {
        h += "<p>No profiles (recorded with --no-profile).</p>";
    }
    for (i, (v, p)) in flames.iter().enumerate() {
        let t = format!("{} {v}", doc.sweep.parameter);
        match flame_svg(p, &format!("scalprof: run {}, {t}", doc.id), None) {
            Ok(svg) => {
                let id = format!("flame-{v}");
                h += flame_frame(
                    &id,
                    &markup!("{}", &t),
                    &format!("flame graph, {t}"),
                    &svg,
                    i == 0,
                );
            }
            Err(e) => {
                html!(
                    h,
                    "<p class=\"warn\">flame graph of {}: {}</p>",
                    &t,
                    &e.to_string()
                );
            }
        }
    }
    if let (Some(diff), Some((first, _)), Some((last, _))) = (diff, flames.first(), flames.last()) {
        let what = markup!(
            "What changed per operation, {} {} → {}",
            doc.sweep.parameter.as_str(),
            first,
            last
        );
        h += diff_section(&what, diff, false);
    }
    h
}

/// The differential flame graph under `summary`, or the sentence that says nothing changed.
pub(crate) fn diff_section(summary: &Html, diff: &DiffFlame, open: bool) -> Html {
    match diff {
        DiffFlame::Changed(svg) => {
            flame_frame("flame-diff", summary, "differential flame graph", svg, open)
        }
        DiffFlame::Unchanged => markup!(
            "<p class=\"no-change\"><b>{}</b>: no function changed per operation (beyond sampling noise).</p>",
            summary
        ),
    }
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

    fn svg(height: u32) -> Vec<u8> {
        format!(
            "<?xml version=\"1.0\"?><svg version=\"1.1\" width=\"1200\" height=\"{height}\"></svg>"
        )
        .into_bytes()
    }

    #[test]
    fn a_flame_graph_is_as_tall_as_its_svg_in_a_capped_collapsible_box() {
        let short = flame_frame("f", &markup!("threads 1"), "t", &svg(310), true).into_string();
        assert!(
            short.starts_with("<details class=\"flame\" open><summary>threads 1</summary>"),
            "{short}"
        );
        assert!(short.contains("<div class=\"flame-box\"><iframe class=\"flame\" id=\"f\""));
        assert!(short.contains("height=\"310\""), "{short}");
        assert!(!short.contains("scroll up"), "{short}");
        let deep = flame_frame("g", &markup!("threads 2"), "t", &svg(1822), false).into_string();
        assert!(
            deep.starts_with("<details class=\"flame\" ontoggle="),
            "{deep}"
        );
        // Closed, its graph waits in data-src until the section is opened.
        assert!(deep.contains(" data-src=\"data:image/svg+xml") && !deep.contains(" src="));
        assert!(short.contains(" src=\"data:image/svg+xml") && !short.contains("data-src"));
        assert!(deep.contains("height=\"1822\"") && deep.contains("scroll up"));
        // The cap is the box's, in the page's style.
        assert!(super::super::STYLE.contains(&format!(
            ".flame-box{{max-height:{MAX_HEIGHT_PX}px;overflow-y:auto"
        )));
        assert_eq!(svg_height(b"<svg width=\"1\">"), None);
    }

    #[test]
    fn an_unchanged_diff_is_said_not_drawn() {
        let said =
            diff_section(&markup!("What changed"), &DiffFlame::Unchanged, true).into_string();
        assert!(said.contains("no function changed per operation"), "{said}");
        assert!(!said.contains("<iframe"), "{said}");
        let drawn = diff_section(
            &markup!("What changed"),
            &DiffFlame::Changed(svg(400)),
            true,
        );
        assert!(drawn.as_str().contains("id=\"flame-diff\""));
    }
}
