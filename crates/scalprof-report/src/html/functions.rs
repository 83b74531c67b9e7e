//! The table of top functions: where each profiled point's time went, function by
//! function (`perf report`'s view), sortable by any column with a few lines of script
//! in the page.

use scalprof_model::{RunDocument, TopFunctions};

use super::markup::{html, markup, Html};
use crate::format::si;

/// The rows a point's table shows: what [`scalprof_model::TopFunctions`] should hold.
pub const FUNCTION_ROWS: usize = 30;

/// One profiled point's functions for the table.
#[derive(Clone, Copy, Debug)]
pub struct PointFunctions<'a> {
    /// The point (the sweep parameter's value).
    pub value: u64,
    pub top: &'a TopFunctions,
    /// The operations its profiled repeats did, when the run counts operations
    /// (`--ops-regex`): the table then has costs per operation.
    pub ops: Option<f64>,
}

/// Sorts a `table.sortable` by the column whose header is clicked: by the cells'
/// `data-v` numbers where they have one, else by their text; numbers largest first and
/// text A to Z on the first click, the other way on the next.
const SORT_SCRIPT: &str = "<script>\
for (const th of document.querySelectorAll('table.sortable th')) {\
th.addEventListener('click', () => {\
const body = th.closest('table').tBodies[0], i = th.cellIndex;\
const next = th.dataset.sort ? (th.dataset.sort === 'asc' ? 'desc' : 'asc') : (th.classList.contains('l') ? 'asc' : 'desc');\
for (const other of th.parentNode.children) delete other.dataset.sort;\
th.dataset.sort = next;\
const key = r => { const c = r.cells[i]; return c.dataset.v === undefined ? c.textContent : Number(c.dataset.v); };\
const rows = Array.from(body.rows).sort((a, b) => { const x = key(a), y = key(b);\
const d = typeof x === 'number' ? x - y : x.localeCompare(y); return next === 'asc' ? d : -d; });\
body.append(...rows);\
});\
}\
</script>";

/// The section: a table per profiled point, the largest point's open; nothing without
/// profiles.
pub(crate) fn function_tables(doc: &RunDocument, points: &[PointFunctions<'_>]) -> Html {
    let mut h = Html::new();
    if points.iter().all(|p| p.top.functions.is_empty()) {
        return h;
    }
    let unit = match doc.sampling.as_ref().map(|s| s.event.as_str()) {
        Some("cycles") => "cycles/op",
        _ => "ns/op",
    };
    h += "<h2>Top functions</h2><p class=\"muted\">Each point's functions by their own \
          sampled time (self), and with what they called (total). Click a column to sort.</p>";
    let largest = points.iter().map(|p| p.value).max();
    for p in points.iter().filter(|p| !p.top.functions.is_empty()) {
        let summary = markup!(
            "{} {} · {} samples",
            doc.sweep.parameter.as_str(),
            p.value,
            p.top.samples
        );
        if Some(p.value) == largest {
            html!(
                h,
                "<details class=\"functions\" open><summary>{}</summary>",
                summary
            );
        } else {
            html!(
                h,
                "<details class=\"functions\"><summary>{}</summary>",
                summary
            );
        }
        h += table(p, unit);
        h += "</details>";
    }
    h += SORT_SCRIPT;
    h
}

/// One point's table, most self time first.
fn table(p: &PointFunctions<'_>, unit: &str) -> Html {
    let id = format!("functions-{}", p.value);
    let mut h = markup!(
        "<table class=\"sortable\" id=\"{}\"><thead><tr><th class=\"l\">function</th>\
         <th class=\"l\">scope</th><th data-sort=\"desc\">self</th><th>total</th>\
         <th>self samples</th>",
        &id
    );
    let ops = p.ops.filter(|&w| w > 0.0);
    if ops.is_some() {
        html!(h, "<th>self {}</th><th>total {}</th>", unit, unit);
    }
    h += "</tr></thead><tbody>";
    let share = |w: u64| {
        if p.top.weight == 0 {
            0.0
        } else {
            w as f64 / p.top.weight as f64
        }
    };
    for f in &p.top.functions {
        let (s, t) = (share(f.self_weight), share(f.total_weight));
        html!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td data-v=\"{:.6}\">{:.1}%</td>\
             <td data-v=\"{:.6}\">{:.1}%</td><td data-v=\"{}\">{}</td>",
            &f.function,
            if f.in_kernel { "kernel" } else { "user" },
            s,
            s * 100.0,
            t,
            t * 100.0,
            f.self_samples,
            f.self_samples
        );
        if let Some(ops) = ops {
            let (x, y) = (f.self_weight as f64 / ops, f.total_weight as f64 / ops);
            html!(
                h,
                "<td data-v=\"{}\">{}</td><td data-v=\"{}\">{}</td>",
                x,
                si(x),
                y,
                si(y)
            );
        }
        h += "</tr>";
    }
    h += "</tbody></table>";
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::TopFunction;

    fn top() -> TopFunctions {
        let f = |name: &str, kernel, self_samples: u64, total_samples: u64| TopFunction {
            function: name.into(),
            in_kernel: kernel,
            self_samples,
            total_samples,
            self_weight: self_samples * 1_000_000,
            total_weight: total_samples * 1_000_000,
        };
        TopFunctions {
            samples: 200,
            weight: 200_000_000,
            functions: vec![
                f("hash<int>", false, 150, 150),
                f("futex_wait", true, 40, 40),
                f("main", false, 0, 200),
            ],
        }
    }

    #[test]
    fn a_point_s_table_has_shares_costs_per_op_and_sort_keys() {
        let top = top();
        let p = PointFunctions {
            value: 2,
            top: &top,
            ops: Some(1_000.0),
        };
        let h = table(&p, "ns/op").into_string();
        assert!(
            h.starts_with("<table class=\"sortable\" id=\"functions-2\">"),
            "{h}"
        );
        assert!(h.contains("<th>self ns/op</th><th>total ns/op</th>"), "{h}");
        // Escaped name, shares of the profile's weight, numbers to sort by, per-op costs.
        assert!(
            h.contains(
                "<tr><td class=\"l\">hash&lt;int&gt;</td><td class=\"l\">user</td>\
                 <td data-v=\"0.750000\">75.0%</td><td data-v=\"0.750000\">75.0%</td>\
                 <td data-v=\"150\">150</td><td data-v=\"150000\">150k</td>\
                 <td data-v=\"150000\">150k</td></tr>"
            ),
            "{h}"
        );
        assert!(h.contains("<td class=\"l\">futex_wait</td><td class=\"l\">kernel</td>"));
        assert!(
            h.contains("<td data-v=\"1.000000\">100.0%</td>"),
            "main's total: {h}"
        );
        // Without counted operations, no per-op columns.
        let h = table(&PointFunctions { ops: None, ..p }, "ns/op").into_string();
        assert!(!h.contains("/op"), "{h}");
    }

    #[test]
    fn the_sort_script_is_inline_and_fetches_nothing() {
        assert!(SORT_SCRIPT.starts_with("<script>") && SORT_SCRIPT.ends_with("</script>"));
        assert!(!SORT_SCRIPT.contains("src=") && !SORT_SCRIPT.contains("http"));
        assert!(SORT_SCRIPT.contains("querySelectorAll('table.sortable th')"));
    }
}
