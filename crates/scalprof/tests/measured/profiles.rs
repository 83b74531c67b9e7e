//! Profiles of the corpus and of real runtimes: the stacks reach the thread functions,
//! JIT frames are named from perf maps, exports read back in other tools, the HTML report
//! runs in a browser, and `layout` reads the binaries' data. Apart from `corpus.rs`, which
//! measures scaling, so that these do not compete with its measurements.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use assert_cmd::Command;

use crate::common::corpus::{corpus, folded, require_profiling, run_corpus, run_corpus_scaled};
use crate::common::{exclusive, scalprof};

/// `go`, where Go is installed (on PATH or in its default place).
fn go_tool() -> Option<PathBuf> {
    let on_path = StdCommand::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return Some(PathBuf::from("go"));
    }
    let default = PathBuf::from("/usr/local/go/bin/go");
    default.exists().then_some(default)
}

/// The latest run's pprof export holds both points' stacks, kernel frames in the kernel's
/// file, labelled by point and process, and Go's pprof (where Go is installed) reads it;
/// the folded export is the flame command's folded output.
fn export_reads_back(db: &Path, dir: &Path) {
    use prost::Message;
    use scalprof_report::pprof::{Profile, KERNEL_FILE};
    use std::io::Read;

    let file = dir.join("all.pb.gz");
    scalprof(db)
        .args([
            "export", "latest", "--point", "all", "--format", "pprof", "-o",
        ])
        .arg(&file)
        .assert()
        .success();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap())
        .read_to_end(&mut raw)
        .expect("a gzip file");
    let p = Profile::decode(&raw[..]).expect("a profile.proto message");
    let s = |i: i64| p.string_table[i as usize].as_str();
    for point in [1i64, 2] {
        let samples: i64 = p
            .sample
            .iter()
            .filter(|x| {
                x.label
                    .iter()
                    .any(|l| s(l.key) == "threads" && l.num == point)
            })
            .map(|x| x.value[0])
            .sum();
        let stored: u64 = folded(db, point as u64).iter().map(|f| f.1).sum();
        assert_eq!(samples as u64, stored, "point {point}");
    }
    let munmap = p
        .function
        .iter()
        .find(|f| s(f.name) == "__x64_sys_munmap")
        .expect("the kernel's munmap in the export");
    assert_eq!(s(munmap.filename), KERNEL_FILE);
    assert!(p.sample.iter().all(|x| x
        .label
        .iter()
        .any(|l| s(l.key) == "process" && s(l.str) == "mmap_churn")));
    match go_tool() {
        Some(go) => {
            let out = StdCommand::new(go)
                .args(["tool", "pprof", "-traces", "-tagfocus", "threads=2"])
                .arg(&file)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success()
                    && text.contains("__x64_sys_munmap")
                    && text.contains("worker"),
                "go tool pprof: {}\n{text:.2000}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        None => eprintln!("go is not installed: the pprof export was checked with prost only"),
    }
    let folded_file = dir.join("p2.folded");
    scalprof(db)
        .args([
            "export", "latest", "--point", "2", "--format", "folded", "-o",
        ])
        .arg(&folded_file)
        .assert()
        .success();
    let exported = std::fs::read_to_string(&folded_file).unwrap();
    let lines: Vec<(String, u64)> = exported
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(lines, folded(db, 2));
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn mmap_churn_profiles_name_the_munmap_and_fault_paths() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // Half its work: at 2 threads a full run takes 4 s on 2 CPUs (the mmap_lock).
    let doc = run_corpus_scaled(&db, "mmap_churn", &dir.path().join("mmap.json"), "0.5");
    // Counted, not sampled, in the clean repeats: each thread faults in its own pages, so
    // the faults double with the threads; the waiters on mmap_lock switch out.
    let counters = |v: usize| doc["points"][v]["counters"].clone();
    let faults = |v: usize| counters(v)["page_faults"].as_f64().unwrap();
    assert!(
        (faults(1) / faults(0) - 2.0).abs() < 0.2,
        "page faults should double: {} → {}",
        faults(0),
        faults(1)
    );
    assert!(
        counters(1)["context_switches"].as_u64().unwrap()
            > 10 * counters(0)["context_switches"].as_u64().unwrap().max(1),
        "{}",
        counters(1)
    );
    assert!(counters(1)["cpu_migrations"].is_u64(), "{}", counters(1));
    // The PMU's counts exist exactly where there is a PMU.
    assert_eq!(
        counters(1)["ipc"].is_f64(),
        doc["host"]["pmu"] == true,
        "{}",
        counters(1)
    );
    assert_eq!(
        doc["sampling"]["event"],
        if doc["host"]["pmu"] == true {
            "cycles"
        } else {
            "cpu-clock"
        }
    );
    // What a sample costs the thread it interrupts, measured before the sweep (1–20 µs
    // on the machines measured; 13–14 µs in this project's 2-CPU VM).
    let cost = doc["host"]["sample_cost_ns"].as_f64();
    assert!(cost.is_some_and(|c| c > 0.0 && c < 1e6), "{}", doc["host"]);
    for point in [1u64, 2] {
        let stacks = folded(&db, point);
        let total: u64 = stacks.iter().map(|s| s.1).sum();
        assert!(total > 100, "point {point}: only {total} samples");
        let with = |needle: &str| {
            stacks
                .iter()
                .filter(|s| s.0.contains(needle))
                .map(|s| s.1)
                .sum::<u64>()
        };
        assert!(
            with("__x64_sys_munmap_[k]") > 0,
            "point {point}: no kernel munmap path"
        );
        assert!(
            with("exc_page_fault_[k]") > 0,
            "point {point}: no page-fault path"
        );
        // User frames reach the thread function through libc (no frame pointers anywhere).
        assert!(
            with("start_thread;worker;") * 10 > total * 9,
            "point {point}: stacks do not reach worker"
        );
        // An SVG flame graph per point, kernel frames marked.
        let svg = dir.path().join(format!("p{point}.svg"));
        scalprof(&db)
            .args(["flame", "latest", "--point", &point.to_string(), "-o"])
            .arg(&svg)
            .assert()
            .success();
        let text = std::fs::read_to_string(&svg).unwrap();
        // inferno shows kernel frames without their `_[k]` mark, in the kernel color
        // (orange: no blue component); user frames are red (green == blue).
        let fill = |frame: &str| -> (u32, u32, u32) {
            let at = text
                .find(&format!("<title>{frame} ("))
                .unwrap_or_else(|| panic!("{frame} not in the SVG"));
            let rest = &text[at..];
            let f = &rest[rest.find("fill=\"rgb(").unwrap() + 10..];
            let nums: Vec<u32> = f[..f.find(')').unwrap()]
                .split(',')
                .map(|n| n.parse().unwrap())
                .collect();
            (nums[0], nums[1], nums[2])
        };
        let (_, _, kb) = fill("__x64_sys_munmap");
        assert_eq!(kb, 0, "kernel frame not in the kernel color");
        let (_, ug, ub) = fill("worker");
        assert_eq!(ug, ub, "user frame not in the user color");
    }
    export_reads_back(&db, dir.path());
    // What grew: kernel functions of the munmap/fault paths lead the kernel table.
    let diff = &doc["scaling_diff"];
    let top: Vec<&str> = diff["kernel"]
        .as_array()
        .unwrap()
        .iter()
        .take(5)
        .map(|r| r["function"].as_str().unwrap())
        .collect();
    let stacks = folded(&db, 2);
    let on_path = |f: &str| {
        stacks.iter().any(|(s, _)| {
            (s.contains("munmap") || s.contains("page_fault")) && s.ends_with(&format!(";{f}_[k]"))
        })
    };
    assert!(
        top.iter().filter(|f| on_path(f)).count() >= 2,
        "top kernel growth {top:?} not on the munmap/fault paths"
    );
    assert!(diff["kernel"][0]["growth"].as_f64().unwrap() > 0.0);
    // Locks: mmap_lock, named by its callers in the munmap and page-fault paths.
    let findings = doc["findings"].as_array().unwrap();
    let mmap_lock = findings
        .iter()
        .find(|f| f["kind"] == "lock_contention" && f["subject"] == "mmap_lock")
        .unwrap_or_else(|| {
            panic!(
                "no mmap_lock finding: {findings:?}; points: {:?}; warnings: {}",
                doc["points"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| (
                        p["efficiency"].clone(),
                        p["throughput_spread"].clone(),
                        p["perturbation"].clone(),
                        p["budget"].clone()
                    ))
                    .collect::<Vec<_>>(),
                doc["warnings"]
            )
        });
    assert_eq!(mmap_lock["scope"], "kernel");
    let rows = doc["points"][1]["locks"]["rows"].as_array().unwrap();
    let callers: Vec<&str> = rows
        .iter()
        .filter(|r| r["name"] == "mmap_lock")
        .flat_map(|r| {
            r["callers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["function"].as_str().unwrap())
        })
        .collect();
    assert!(callers.iter().any(|c| c.contains("munmap")), "{callers:?}");
    assert!(
        callers
            .iter()
            .any(|c| c.contains("fault") || c.contains("lock_mm_and_find_vma")),
        "{callers:?}"
    );
    // Who held it: the kernel functions whose release woke the waiters, from the
    // map/unmap and fault paths, never the lock or wakeup machinery itself.
    let holders: Vec<&str> = rows
        .iter()
        .filter(|r| r["name"] == "mmap_lock")
        .filter_map(|r| r.get("holders"))
        .flat_map(|h| h.as_array().unwrap().iter())
        .map(|h| h["function"].as_str().unwrap())
        .collect();
    assert!(!holders.is_empty(), "no holders: {rows:?}");
    assert!(
        holders.iter().all(|h| !h.starts_with("up_")
            && !h.contains("wake")
            && !h.starts_with("rwsem_")
            && *h != "downgrade_write"),
        "{holders:?}"
    );
    assert!(
        holders
            .iter()
            .any(|h| h.contains("mmap") || h.contains("munmap") || h.contains("fault")),
        "{holders:?}"
    );
    // A differential flame graph of 1 → 2 threads, per operation.
    let out = dir.path().join("diff.svg");
    scalprof(&db)
        .args(["flame", "--diff", "@1", "@2", "-o"])
        .arg(&out)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&out).unwrap().contains("<svg"));
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn clean_program_stacks_reach_the_thread_function_and_raise_no_finding() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let doc = run_corpus(&db, "clean_parallel", &dir.path().join("clean.json"));
    // -O2, no frame pointers in the program or in Debian's libc: the copied stack is
    // unwound with .eh_frame.
    let stacks = folded(&db, 2);
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    let reach: u64 = stacks
        .iter()
        .filter(|s| s.0.contains("start_thread;worker"))
        .map(|s| s.1)
        .sum();
    assert!(
        reach * 10 >= total * 9,
        "{reach} of {total} samples reach worker"
    );
    // Other work on the machine can take a CPU from the two threads (a busy CI host); that
    // is named as such, and is no cause of the program's own. The CPU time scalprof itself
    // takes is the observer's, never a finding.
    let findings = doc["findings"].as_array().unwrap();
    assert!(
        findings.iter().all(|f| f["score"].as_f64().unwrap() <= 0.05
            || f["subject"] == "waiting for a CPU behind other processes"),
        "clean program produced findings: {findings:?}"
    );
    let rows = doc["points"][1]["locks"]["rows"].as_array().unwrap();
    if let Some(me) = rows
        .iter()
        .find(|r| r["name"] == "waiting for a CPU behind scalprof")
    {
        assert_eq!(me["attributed_to"], "the observer", "{me}");
    }
    let st = &doc["points"][1]["profile"]["stats"];
    assert_eq!(st["lost_samples"], 0);
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn jit_code_is_named_from_the_perf_map_and_unwound_by_frame_pointer() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let doc = run_corpus(&db, "jit_spin", &dir.path().join("jit.json"));
    // The map files it left behind (read after the exits): the test's to clean up.
    remove_perf_maps("jit:corpus_spin_loop");
    for point in [1u64, 2] {
        let stacks = folded(&db, point);
        let total: u64 = stacks.iter().map(|s| s.1).sum();
        // The generated code is the leaf of nearly every sample, by the name the program
        // published, and the frame-pointer step out of it reaches the C caller.
        let named: u64 = stacks
            .iter()
            .filter(|s| s.0.ends_with("start_thread;worker;jit:corpus_spin_loop"))
            .map(|s| s.1)
            .sum();
        assert!(
            total > 100 && named * 10 >= total * 8,
            "point {point}: {named} of {total} samples name the JIT code under worker: {:?}",
            &stacks[..stacks.len().min(5)]
        );
        assert!(!stacks.iter().any(|s| s.0.contains("[anon]")));
    }
    let findings = doc["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .all(|f| f["score"].as_f64().unwrap() <= 0.05),
        "a scaling JIT program produced findings: {findings:?}"
    );
}

/// Removes the perf maps in /tmp whose text contains `marker` (runtimes leave them).
fn remove_perf_maps(marker: &str) {
    for entry in std::fs::read_dir("/tmp").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("perf-") && name.ends_with(".map") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            if text.contains(marker) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn node_worker_threads_name_the_hot_js_function_and_reach_the_thread_root() {
    require_profiling();
    let node = StdCommand::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have Node (apt-get install nodejs)"
        );
        eprintln!("skipped: node is not installed (apt-get install nodejs)");
        return;
    }
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let script = dir.path().join("node_workers.js");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/node_workers.js"),
        &script,
    )
    .unwrap();
    // An event loop's frame (uv__io_poll) holds 12 KiB of epoll events: the root is past
    // the default 8 KiB copy.
    scalprof(&db)
        .args([
            "run",
            "-t",
            "1,2",
            "--repeat",
            "1",
            "--stack-size",
            "32k",
            "--",
        ])
        // V8 leaves isolate-*.log files in its working directory.
        .current_dir(dir.path())
        .args(["node", "--perf-basic-prof"])
        .arg(&script)
        .arg("{threads}")
        .assert()
        .success();
    remove_perf_maps(&script.display().to_string());
    let stacks = folded(&db, 2);
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    let sum =
        |f: &dyn Fn(&str) -> bool| -> u64 { stacks.iter().filter(|s| f(&s.0)).map(|s| s.1).sum() };
    let hot = sum(&|s: &str| s.rsplit(';').next().unwrap_or("").contains("hotLoop"));
    assert!(
        total > 500 && hot * 10 >= total * 7,
        "{hot} of {total} samples have hotLoop as their leaf"
    );
    // From the JIT code, by frame pointers, through V8's builtins and node's C++ (CFI),
    // to the worker thread's start.
    let rooted = sum(&|s: &str| {
        s.contains("hotLoop") && s.contains(";start_thread;") && s.contains("Worker::Run")
    });
    assert!(
        rooted * 10 >= hot * 8,
        "{rooted} of {hot} hotLoop samples reach the worker thread's root"
    );
    assert!(sum(&|s: &str| s.ends_with("[anon]")) * 20 < total);
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn profiles_follow_forked_children() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    // The shell forks; the child execs the program: both must be followed.
    let script = format!("{} $1; true", corpus().join("clean_parallel").display());
    scalprof(&db)
        .env("CORPUS_SCALE", "0.3")
        .args([
            "run",
            "-t",
            "2",
            "--repeat",
            "1",
            "--",
            "sh",
            "-c",
            &script,
            "sh",
            "{threads}",
        ])
        .assert()
        .success();
    let stacks = folded(&db, 2);
    let worker: u64 = stacks
        .iter()
        .filter(|(s, _)| s.starts_with("clean_parallel;") && s.contains("start_thread;worker"))
        .map(|s| s.1)
        .sum();
    assert!(
        worker > 20,
        "the forked child's threads were not sampled: {stacks:?}"
    );
}

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

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_html_report_loads_in_chromium_with_plot_and_flame_graphs() {
    require_profiling();
    let Some(browser) = chromium() else { return };
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let html = dir.path().join("report.html");
    scalprof(&db)
        .env("CORPUS_SCALE", "0.5")
        .args(["run", "-t", "1,2", "--repeat", "2", "--report"])
        .arg(&html)
        .arg("--")
        .arg(corpus().join("mmap_churn"))
        .arg("{threads}")
        .assert()
        .success();
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        !text.contains("src=\"http") && !text.contains("href=\"http"),
        "nothing fetched from the network"
    );
    let profile = dir.path().join("chromium");
    let run = |extra: &[&str]| {
        std::process::Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(format!("file://{}", html.display()))
            .output()
            .unwrap()
    };
    let dom = run(&["--dump-dom"]);
    assert!(dom.status.success());
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(dom_text.contains("id=\"scaling-plot\"") && dom_text.contains("class=\"measured\""));
    // The linear-scaling line, and the budget of the point after the first.
    assert!(dom_text.contains("id=\"linear\""), "no linear-scaling line");
    assert!(
        dom_text.contains("id=\"budget\"") && dom_text.contains("class=\"budget-row\""),
        "no budget bars"
    );
    assert!(
        dom_text.contains("id=\"flame-1\"")
            && dom_text.contains("id=\"flame-2\"")
            && dom_text.contains("id=\"flame-diff\"")
    );
    // Flame graphs are frames of their own, where inferno's script runs (an <img> never
    // runs it: no search, zoom or tooltips); the legend and the CPU count are on the plot.
    assert!(
        dom_text.contains("<iframe class=\"flame\""),
        "flame graphs are not frames"
    );
    assert!(!dom_text.contains("<img class=\"flame\""));
    // Each point's top functions, in a table sorted by a click.
    assert!(
        dom_text.contains("<table class=\"sortable\" id=\"functions-2\">"),
        "no function table"
    );
    assert!(dom_text.contains("id=\"legend\""), "no legend");
    let stderr = String::from_utf8_lossy(&dom.stderr);
    let console_errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:?}");
    let png = dir.path().join("report.png");
    let shot = run(&[
        "--window-size=1280,2000",
        &format!("--screenshot={}", png.display()),
    ]);
    assert!(shot.status.success());
    assert!(
        std::fs::metadata(&png).unwrap().len() > 10_000,
        "an empty screenshot"
    );
    // inferno's search runs: a flame graph opened with ?s=REGEX highlights the matches and
    // says how much of the profile they are.
    let svg = dir.path().join("flame.svg");
    scalprof(&db)
        .args(["flame", "latest", "-o"])
        .arg(&svg)
        .assert()
        .success();
    let searched = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=3000", "--dump-dom"])
        .arg(format!("file://{}?s=mmap", svg.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&searched.stdout);
    assert!(
        dom.contains("Matched: "),
        "the flame graph's search did not run"
    );
}

fn layout(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::cargo_bin("scalprof")
        .unwrap()
        .arg("layout")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn layout_flags_two_locks_on_one_line_and_works_without_debug_info() {
    // Reading the kernel's BTF and the binaries' DWARF keeps a CPU busy for seconds (more in
    // a debug build): never while another test measures scaling.
    let _turn = exclusive();
    let bin = corpus().join("adjacent_locks");
    let (ok, text) = layout(&[bin.as_os_str()]);
    assert!(ok, "{text}");
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with('!'))
        .collect();
    assert!(
        flagged
            .iter()
            .any(|l| l.contains("pageq_lock") && l.contains("fpageq_lock")),
        "{text}"
    );
    assert!(
        text.contains("pthread_mutex_t"),
        "DWARF types are shown: {text}"
    );
    // A lock-prefixed RIP-relative add marks its target.
    let (_, text) = layout(&[corpus().join("refcount_global").as_os_str()]);
    assert!(
        text.lines()
            .any(|l| l.contains("obj_refcount") && l.contains("atomic target")),
        "{text}"
    );
    // The padded counters: each on its own line, nothing flagged about vm_cnt's fields.
    let (_, text) = layout(&[corpus().join("counters_padded").as_os_str()]);
    assert!(!text.contains("fields v_swtch, v_trap"), "{text}");
    // Stripped of debug info: symbols only, and it says so.
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("adjacent_locks.stripped");
    let st = std::process::Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&stripped)
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success());
    let (ok, text) = layout(&[stripped.as_os_str()]);
    assert!(ok);
    assert!(text.contains("debug info missing"), "{text}");
    assert!(
        text.contains("uvm"),
        "the symbol table still names the objects: {text}"
    );
    // A line size that is not a power of two is refused.
    let (ok, text) = layout(&[bin.as_os_str(), "--line-size".as_ref(), "48".as_ref()]);
    assert!(!ok && text.contains("power of two"), "{text}");
}

/// The tick sampler (a rate at or below the kernel's tick): its samples walk to the
/// thread function in user space and name the system calls in the kernel, with none of
/// the tick's own frames, the document says it sampled at the tick, and the tracing line
/// states its cost in its program and nothing per block. The perf event, asked for by
/// SCALPROF_SAMPLER=perf, profiles the same program to the same functions.
#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn the_tick_sampler_profiles_user_and_kernel_code_without_its_own_frames() {
    require_profiling();
    let _turn = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let program = corpus().join("syscall_loop");
    let sweep = |sampler: &str, json: &Path| {
        scalprof(&db)
            .env("SCALPROF_SAMPLER", sampler)
            .env("CORPUS_SCALE", "2")
            .args(["run", "-t", "1", "--repeat", "2", "--diagnose", "2"])
            .args(["--diagnose-max", "2", "-F", "99", "--no-locks", "--json"])
            .arg(json)
            .arg("--")
            .arg(&program)
            .arg("{threads}")
            .assert()
            .success();
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(json).unwrap()).unwrap()
    };
    let tick = sweep("tick", &dir.path().join("tick.json"));
    let stats = &tick["points"][0]["profile"]["stats"];
    let hz = stats["tick_hz"].as_u64().expect("sampled at the tick");
    assert!(matches!(hz, 100 | 250 | 300 | 1000), "{stats}");
    let samples = stats["samples"].as_u64().unwrap();
    assert!(samples > 50, "{stats}");
    let timed = stats["tick_samples"].as_u64().unwrap();
    assert!(timed > samples / 2 && timed <= samples, "{stats}");
    let stacks = folded(&db, 1);
    let share = |needle: &str| {
        let n: u64 = stacks
            .iter()
            .filter(|s| s.0.contains(needle))
            .map(|s| s.1)
            .sum();
        n as f64 / samples as f64
    };
    assert!(share("worker") > 0.9, "{stacks:?}");
    assert!(share("_[k]") > 0.3, "kernel frames: {stacks:?}");
    assert!(share("__x64_sys_getppid_[k]") > 0.02, "{stacks:?}");
    // The program's own frames (`bpf_prog_…`, `bpf_trace_run…`), not any `bpf_` function: a
    // write passes `bpf_lsm_file_permission`, the LSM hook's stub, and is sampled there.
    for own in [
        "hrtimer",
        "tick_nohz",
        "apic_timer",
        "bpf_prog",
        "bpf_trace_run",
    ] {
        assert_eq!(share(own), 0.0, "the tick's own frames ({own}): {stacks:?}");
    }
    let text = scalprof(&db)
        .args(["show", "latest", "-v"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("at the kernel's {hz} Hz tick"))
            && text.contains("nothing when a thread blocks")
            && !text.contains("times a traced run: up to"),
        "{text}"
    );

    let perf = sweep("perf", &dir.path().join("perf.json"));
    let stats = &perf["points"][0]["profile"]["stats"];
    assert!(stats.get("tick_hz").is_none(), "{stats}");
    let stacks = folded(&db, 1);
    assert!(
        stacks.iter().any(|s| s.0.contains("__x64_sys_getppid_[k]")),
        "{stacks:?}"
    );

    // Where the tick sampler cannot sample, the perf event does, and the run says why,
    // once (two traced repeats here); not where the perf event was asked for.
    let said = |sampler: &str| {
        let out = scalprof(&db)
            .env("SCALPROF_SAMPLER", sampler)
            .env("CORPUS_SCALE", "0.5")
            .args(["run", "-t", "1", "--repeat", "1", "--diagnose", "2"])
            .args(["--diagnose-max", "2", "-F", "99", "--no-locks", "--"])
            .arg(&program)
            .arg("{threads}")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr)
            .matches("the tick sampler could not sample (SCALPROF_SAMPLER=neither")
            .count()
    };
    assert_eq!(said("neither"), 1);
    assert_eq!(said("perf"), 0);
}
