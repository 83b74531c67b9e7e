//! The report's scripts, run in headless Chromium: the golden report page (which the
//! golden test keeps equal to what the views write) with a few clicks added.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

/// Headless Chromium, as the machine's Debian package installs it.
fn chromium() -> Option<&'static str> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install chromium (apt-get install chromium)"
        );
        eprintln!("skipped: chromium is not installed (apt-get install chromium)");
    }
    found
}

/// Clicks the headers of the 2-thread function table and writes the rows' order after
/// each click into the page, for `--dump-dom` to show.
const CLICKS: &str = "<script>\
const t = document.getElementById('functions-2'), th = t.tHead.rows[0].cells;\
const order = () => Array.from(t.tBodies[0].rows).map(r => r.cells[0].textContent).join(',');\
const seen = [];\
th[3].click(); seen.push(order());\
th[0].click(); seen.push(order());\
th[0].click(); seen.push(order());\
const out = document.createElement('pre'); out.id = 'clicked'; out.textContent = seen.join(' | ');\
document.body.append(out);\
</script></body>";

#[test]
fn clicking_a_function_table_header_sorts_its_rows() {
    let Some(browser) = chromium() else { return };
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/report-mutex.html");
    let page = std::fs::read_to_string(golden)
        .unwrap()
        .replace("</body>", CLICKS);
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    std::fs::write(&html, page).unwrap();
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(out.status.success());
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom.find("<pre id=\"clicked\">").expect("the clicks ran") + 18;
    let clicked: Vec<&str> = dom[at..dom[at..].find("</pre>").unwrap() + at]
        .split(" | ")
        .collect();
    // Total, largest first (ties keep their order); then function A to Z, then Z to A.
    assert_eq!(
        clicked,
        [
            "worker,start_thread,futex_wait,__lll_lock_wait,__x64_sys_futex,table_lookup",
            "__lll_lock_wait,__x64_sys_futex,futex_wait,start_thread,table_lookup,worker",
            "worker,table_lookup,start_thread,futex_wait,__x64_sys_futex,__lll_lock_wait",
        ]
    );
}
