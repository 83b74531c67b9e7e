//! Golden files of the terminal output, built from fixed measurements through the real
//! analysis (`scalprof_analyze::assemble`). A change of wording or layout shows as a diff;
//! when it is intended, regenerate them with `SCALPROF_BLESS=1 cargo test -p scalprof-report`.

// Tests build, run and open what they made themselves: the action checks are for the product.
#![allow(clippy::disallowed_methods)]

use scalprof_model::locks::{HeldWait, HolderWait, LockKind, Scope};
use scalprof_report::html::PointFunctions;
use std::path::Path;

use scalprof_model::locks::{
    FamilyCost, LockCaller, LockProfile, LockRow, ProbeFamily, Side, TracerCost, THE_OBSERVER,
};
use scalprof_model::{
    FoldedStack, Host, PointProfile, PointRepeat, ProfileStats, Repeat, RunHeader, RunStatus,
    Sweep, SweepParameter, ThroughputSource,
};

fn check(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("SCALPROF_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no golden file {}: create it with SCALPROF_BLESS=1",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from the output (SCALPROF_BLESS=1 regenerates it if intended):\n{actual}",
        path.display()
    );
}

fn repeat(index: u32, wall: f64, threads: u64, traced: bool) -> Repeat {
    Repeat {
        user_s: wall * threads as f64 * 0.6,
        sys_s: wall * threads as f64 * 0.4,
        ops: Some(1_000_000 * threads),
        voluntary_csw: 10,
        involuntary_csw: 2,
        minor_faults: 100,
        traced,
        ..Repeat::ok(index, wall)
    }
}

fn profile(worker_ns: u64, lock_ns: u64, overhead: u64) -> PointProfile {
    let stacks = [
        ("prog;start_thread;worker", worker_ns),
        (
            "prog;start_thread;worker;table_lookup;__lll_lock_wait;__x64_sys_futex_[k];futex_wait_[k]",
            lock_ns,
        ),
    ];
    PointProfile {
        event: "cpu-clock".into(),
        frequency: 999,
        repeats: 1,
        stats: ProfileStats {
            samples: (worker_ns + lock_ns) / 1_000_000 + overhead,
            kernel_stacks: true,
            overhead_samples: overhead,
            // scalprof's own CPU: 2 µs per sample reading, 3 µs after.
            record_cpu_ns: 2_000 * ((worker_ns + lock_ns) / 1_000_000 + overhead),
            process_cpu_ns: 3_000 * ((worker_ns + lock_ns) / 1_000_000 + overhead),
            ..Default::default()
        },
        folded: stacks
            .iter()
            .filter(|(_, w)| *w > 0)
            .map(|(s, w)| FoldedStack {
                stack: s.to_string(),
                samples: w / 1_000_000,
                weight: *w,
            })
            .collect(),
        ..Default::default()
    }
}

fn locks(wait_ns: u64, count: u64) -> LockProfile {
    let mut rows = vec![LockRow {
        address: scalprof_model::locks::LockAddress::Traced(0x4040),
        count,
        total_wait_ns: wait_ns,
        max_wait_ns: wait_ns / count.max(1) * 4,
        callers: vec![LockCaller::new("table_lookup", 1.0)],
        ..LockRow::new(Scope::User, "table_lock", LockKind::from("mutex"))
    }];
    if count > 0 {
        // A uprobe's lookup waiting on the mmap_lock while the probes were put on: the
        // observer's, on the tracing line, never a cause.
        rows.push(LockRow {
            address: scalprof_model::locks::LockAddress::Traced(0x8080),
            count: 14,
            total_wait_ns: 3_800_000,
            max_wait_ns: 900_000,
            callers: vec![LockCaller::new("find_active_uprobe_rcu", 1.0)],
            attributed_to: Some(THE_OBSERVER.into()),
            ..LockRow::new(
                Scope::Kernel,
                "rwsem:R@find_active_uprobe_rcu",
                LockKind::Rwsem(Some(Side::Read)),
            )
        });
    }
    LockProfile {
        rows,
        repeats: 1,
        snapshots: 40,
        snapshots_resolved: 40,
        // The programs timed by the kernel in one 50 ms window of a traced repeat, scaled.
        tracer: TracerCost {
            bpf_run_ns: count * 300,
            bpf_runs: count * 3,
            bpf_families: vec![
                FamilyCost {
                    family: ProbeFamily::Scheduler,
                    run_ns: count * 100,
                    runs: count * 2,
                },
                FamilyCost {
                    family: ProbeFamily::KernelLocks,
                    run_ns: count * 200,
                    runs: count,
                },
            ],
            bpf_timed_ns: 50_000_000,
            bpf_span_ns: 500_000_000,
            // The futex's hash bucket spinlock contended: the contention programs went
            // off between bursts.
            klock_probed_ns: if count > 0 { 100_000_000 } else { 0 },
            klock_span_ns: if count > 0 { 500_000_000 } else { 0 },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A mutex-bound program at 1 and 2 threads: 3 clean repeats and 1 traced per point.
fn inputs() -> scalprof_model::RunInputs {
    let header = RunHeader {
        id: "7".into(),
        label: "hash_global_mutex".into(),
        created: "2026-11-22T00:00:00Z".into(),
        command: vec!["./hash_global_mutex".into(), "{threads}".into()],
        status: RunStatus::Complete,
        sweep: Sweep {
            parameter: SweepParameter::Threads,
            values: vec![1, 2],
        },
        host: Host {
            kernel: "6.18.0".into(),
            cpus: 2,
            cpu_model: "Test CPU".into(),
            pmu: false,
            limits: None,
            topology: None,
            sample_cost_ns: Some(13_800.0),
            switch_cost: Some(scalprof_model::SwitchCost {
                base_ns: 600.0,
                per_hz_ns: 4.0,
            }),
        },
        scaling: Some(ThroughputSource::Weak),
        ops_regex: r"ops=(\d+)".into(),
        output_dir: "/tmp/runs.db.d/7".into(),
        commit: None,
        observer: None,
    };
    let mut repeats = Vec::new();
    for (value, walls, traced_wall) in [
        (1u64, [0.100, 0.102, 0.101], 0.103),
        (2, [0.500, 0.510, 0.505], 0.560),
    ] {
        for (i, w) in walls.iter().enumerate() {
            repeats.push(PointRepeat {
                value,
                repeat: repeat(i as u32, *w, value, false),
            });
        }
        repeats.push(PointRepeat {
            value,
            repeat: repeat(3, traced_wall, value, true),
        });
    }
    let profiles = vec![
        (1, profile(100_000_000, 0, 0)),
        (2, profile(200_000_000, 700_000_000, 3)),
    ];
    let lock_profiles = vec![(1, locks(0, 0)), (2, locks(300_000_000, 4000))];
    scalprof_model::RunInputs {
        header,
        repeats,
        profiles,
        locks: lock_profiles,
        sharing: None,
        legacy_findings: Vec::new(),
        per_repeat: Vec::new(),
        experiments: Vec::new(),
        packages: Vec::new(),
        predict_to: None,
    }
}

fn document() -> scalprof_model::RunDocument {
    scalprof_analyze::assemble(&inputs())
}

#[test]
fn the_html_report_matches_its_golden_file() {
    let inputs = inputs();
    let doc = scalprof_analyze::assemble(&inputs);
    let flames: Vec<(u64, &PointProfile)> = inputs.profiles.iter().map(|(v, p)| (*v, p)).collect();
    let tops: Vec<(u64, scalprof_model::TopFunctions)> = inputs
        .profiles
        .iter()
        .map(|(v, p)| (*v, scalprof_analyze::top::top_functions(p, 10)))
        .collect();
    let functions: Vec<PointFunctions<'_>> = tops
        .iter()
        .map(|(v, top)| PointFunctions {
            value: *v,
            top,
            ops: Some(1e6 * *v as f64),
        })
        .collect();
    let html = scalprof_report::html::run_report(&doc, &flames, None, &functions);
    // The largest point's table is open, most self time first, sortable by a click.
    let table = &html[html
        .find("<details class=\"functions\" open><summary>threads 2")
        .unwrap()..];
    assert!(table.contains("<table class=\"sortable\" id=\"functions-2\">"));
    assert!(table.contains("<th>self ns/op</th>"));
    let first_row = &table[table.find("<tbody><tr>").unwrap()..];
    assert!(
        first_row.starts_with("<tbody><tr><td class=\"l\">futex_wait</td>"),
        "{first_row}"
    );
    assert!(
        html.contains("table.sortable th')"),
        "the sort script is in the page"
    );
    assert!(
        html.contains("table_lock"),
        "the finding's subject is in the page"
    );
    check("report-mutex.html", &html);
}

#[test]
fn the_summary_of_a_lock_bound_sweep_matches_its_golden_file() {
    check("summary-mutex.txt", &scalprof_report::summary(&document()));
}

#[test]
fn the_lock_table_matches_its_golden_file() {
    let doc = document();
    let p = &doc.points[1];
    check(
        "locks-mutex.txt",
        &scalprof_report::lock_table("threads", p.value, p.locks.as_ref().unwrap()),
    );
}

/// The same program with its lock sharded: point 2 runs as fast as point 1, no waits.
fn fixed_document() -> scalprof_model::RunDocument {
    let mut inputs = inputs();
    inputs.header.id = "8".into();
    inputs.header.label = "hash_sharded".into();
    for r in inputs.repeats.iter_mut().filter(|r| r.value == 2) {
        let w = r.repeat.wall_s / 5.0;
        r.repeat = repeat(r.repeat.index, w, 2, r.repeat.traced);
    }
    inputs.profiles[1] = (2, profile(200_000_000, 0, 3));
    inputs.locks[1] = (2, locks(0, 0));
    scalprof_analyze::assemble(&inputs)
}

#[test]
fn compare_s_headline_matches_its_golden_file() {
    let (a, b) = (document(), fixed_document());
    let mut c = scalprof_analyze::compare::compare(&a, &b);
    c.gate = Some(scalprof_analyze::compare::gate(&c, 5.0));
    assert!(!c.gate.as_ref().unwrap().failed);
    assert!(c.verdict.starts_with("B is 5.00× faster"), "{}", c.verdict);
    check(
        "compare-mutex.txt",
        &scalprof_report::comparison(&c, &a.label, &b.label),
    );
}

#[test]
fn the_default_screen_is_short_and_the_details_are_one_flag_away() {
    let doc = document();
    let short = scalprof_report::summary(&doc);
    assert!(short.lines().count() <= 40, "{short}");
    assert!(short.contains("what to do:"), "{short}");
    assert!(!short.contains("what grew ("), "{short}");
    check(
        "summary-mutex-verbose.txt",
        &scalprof_report::summary_with(&doc, false, true),
    );
}

#[test]
fn the_compare_page_overlays_a_and_b_and_leads_with_the_verdict() {
    let (a, b) = (document(), fixed_document());
    let c = scalprof_analyze::compare::compare(&a, &b);
    let html = scalprof_report::html::compare_report(&c, &a.label, &b.label, None);
    assert!(
        html.contains("<p id=\"verdict\"><b>B is 5.00× faster"),
        "{html}"
    );
    assert!(html.contains("id=\"compare-plot\""));
    assert!(html.contains("class=\"series-A\"") && html.contains("class=\"series-B\""));
}

#[test]
fn two_equal_runs_say_that_no_function_changed_instead_of_drawing_it() {
    let a = document();
    let c = scalprof_analyze::compare::compare(&a, &a);
    let profile = &inputs().profiles[1].1;
    // The same profile on both sides: nothing changed, and the page says so.
    assert!(scalprof_analyze::top::changed_functions(profile, 1.0, profile, 1.0).is_empty());
    let unchanged = scalprof_report::html::DiffFlame::Unchanged;
    let html = scalprof_report::html::compare_report(&c, &a.label, &a.label, Some(&unchanged));
    assert!(html.contains("no function changed per operation"), "{html}");
    assert!(!html.contains("id=\"flame-diff\""));
}

#[test]
fn a_peak_fitted_through_points_past_the_cpus_is_called_the_machine_s() {
    // 1 to 4 threads on 2 CPUs: the throughput rises to 3 and falls at 4, where two
    // threads share each CPU.
    let mut i = inputs();
    i.header.sweep.values = vec![1, 2, 3, 4];
    i.profiles.clear();
    i.locks.clear();
    i.repeats.clear();
    for (value, wall) in [(1u64, 0.100), (2, 0.105), (3, 0.125), (4, 0.182)] {
        for k in 0..3u32 {
            i.repeats.push(PointRepeat {
                value,
                repeat: repeat(k, wall * (1.0 + 0.002 * f64::from(k)), value, false),
            });
        }
    }
    let doc = scalprof_analyze::assemble(&i);
    assert!(
        doc.model.as_ref().and_then(|m| m.peak).is_some(),
        "{:?}",
        doc.model
    );
    let line = scalprof_report::run_model_line(&doc);
    assert!(
        line.contains("past this machine's 2 CPUs, so the peak is where it ran out of them"),
        "{line}"
    );
    // On 4 CPUs the same curve is the program's.
    i.header.host.cpus = 4;
    let line = scalprof_report::run_model_line(&scalprof_analyze::assemble(&i));
    assert!(
        line.contains("peak ≈") && !line.contains("ran out"),
        "{line}"
    );
}

#[test]
fn waits_behind_scalprof_count_in_the_accounted_slowdown_as_thread_time() {
    use scalprof_model::locks::{LockAddress, RunQueueBehind, CPU_WAIT_OBSERVER};
    // The 2-thread point (traced 9.8% slower than clean, one traced repeat of 0.111 s)
    // waited 4.44 ms for a CPU behind scalprof's threads: 2% of 2 × 0.111 s.
    let mut i = inputs();
    let (_, locks) = i.locks.iter_mut().find(|(v, _)| *v == 2).unwrap();
    locks.rows.push(LockRow {
        address: LockAddress::RunQueue(RunQueueBehind::Observer),
        count: 40,
        total_wait_ns: 4_440_000,
        max_wait_ns: 300_000,
        attributed_to: Some(THE_OBSERVER.into()),
        ..LockRow::new(Scope::Kernel, CPU_WAIT_OBSERVER, LockKind::CpuWait)
    });
    let doc = scalprof_analyze::assemble(&i);
    let wall = doc.points[1].traced_repeats[0].wall_s;
    let expected = 100.0 * 4.44e-3 / (2.0 * wall);
    let text = scalprof_report::summary_with(&doc, false, true);
    let line = text.lines().find(|l| l.starts_with("tracing:")).unwrap();
    assert!(
        line.contains(&format!("CPU waits behind scalprof {expected:.1}")),
        "{expected:.2}: {line}"
    );
}

/// The BPF programs' part of the 2-thread point's slowdown as the tracing line says it,
/// with their share of its CPU time (timed; and the larger of timed and sampled, the
/// part's own measure).
struct ProgramsPart {
    part: f64,
    timed_of_cpu: f64,
    of_cpu: f64,
    line: String,
}

/// [`ProgramsPart`] where the 2-thread point's threads ran `ran` of their traced time, and
/// its lock table's lock rows are replaced by `rows` (given the thread-time its traced
/// repeats merged, in ns).
fn programs_part(ran: f64, rows: impl FnOnce(f64) -> Vec<LockRow>) -> ProgramsPart {
    let mut i = inputs();
    for r in i
        .repeats
        .iter_mut()
        .filter(|r| r.value == 2 && r.repeat.traced)
    {
        r.repeat.user_s = r.repeat.wall_s * 2.0 * ran * 0.6;
        r.repeat.sys_s = r.repeat.wall_s * 2.0 * ran * 0.4;
    }
    let walls: Vec<f64> = i
        .repeats
        .iter()
        .filter(|r| r.value == 2 && r.repeat.traced && r.repeat.succeeded())
        .map(|r| r.repeat.wall_s)
        .collect();
    let mean_wall = walls.iter().sum::<f64>() / walls.len() as f64;
    let (_, locks) = i.locks.iter_mut().find(|(v, _)| *v == 2).unwrap();
    let merged_ns = mean_wall * 2e9 * f64::from(locks.repeats);
    locks.rows.retain(|r| !r.lock_type.is_lock());
    locks.rows.extend(rows(merged_ns));
    let doc = scalprof_analyze::assemble(&i);
    let p = &doc.points[1];
    let bpf_ns = p.locks.as_ref().unwrap().tracer.bpf_run_ns as f64;
    let cpu_ns: f64 = p
        .traced_repeats
        .iter()
        .map(|r| (r.user_s + r.sys_s) * 1e9)
        .sum();
    let text = scalprof_report::summary_with(&doc, false, true);
    let line = text
        .lines()
        .find(|l| l.starts_with("tracing:"))
        .unwrap()
        .to_string();
    let part = line
        .split("BPF programs ")
        .nth(1)
        .and_then(|rest| rest.split([',', ')']).next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no BPF programs part: {line}"));
    let stats = &p.profile.as_ref().unwrap().stats;
    let sampled = 100.0
        * stats
            .overhead_samples
            .saturating_sub(stats.probe_samples + stats.side_band_samples) as f64
        / stats.samples as f64;
    let timed_of_cpu = 100.0 * bpf_ns / cpu_ns;
    ProgramsPart {
        part,
        timed_of_cpu,
        of_cpu: timed_of_cpu.max(sampled),
        line,
    }
}

impl ProgramsPart {
    /// The part as said (one decimal) is `expected`.
    fn is_about(&self, expected: f64) {
        assert!(
            (self.part - expected).abs() < 0.051,
            "{} vs {expected:.2}: {}",
            self.part,
            self.line
        );
    }
}

#[test]
fn a_blocking_point_s_programs_count_in_the_slowdown_as_the_threads_paid_them() {
    // The 2-thread point's threads ran 40% of their traced time (they block, as on a
    // disk): the programs' time is 2.5 times as large a share of their CPU time as of the
    // run they lengthened. (The recording's mutex waits are left out: a thread waiting
    // for a lock waits for a holder that runs.)
    let p = programs_part(0.4, |_| Vec::new());
    let expected = p.timed_of_cpu * 0.4;
    p.is_about(expected);
    // Its share of the CPU time, said beside it, is the larger.
    assert!(p.timed_of_cpu > 2.0 * expected, "{}", p.line);
}

/// A mutex waited on for 30% of the thread-time, its holders blocked in system calls for
/// `holder_waits` of the waits.
fn a_mutex(merged_ns: f64, holder_waits: Vec<HolderWait>) -> Vec<LockRow> {
    vec![LockRow {
        count: 5000,
        total_wait_ns: (0.3 * merged_ns) as u64,
        max_wait_ns: 1_000_000,
        holder_waits,
        ..LockRow::new(Scope::User, "table_lock", LockKind::Mutex)
    }]
}

#[test]
fn a_lock_bound_point_s_programs_count_as_the_holders_paid_them() {
    // The threads ran 60% of their time and waited 30% for a holder that ran: the
    // programs' cost lengthens the waits as much as the runs, 90% of the thread-time.
    let p = programs_part(0.6, |ns| a_mutex(ns, Vec::new()));
    let expected = p.of_cpu * 0.9;
    p.is_about(expected);
    // Without the waits the part is the CPU's 60%.
    assert!(p.part > p.of_cpu * 0.6 + 0.05, "{}", p.line);
}

#[test]
fn a_lock_held_across_the_disk_lengthens_no_wait_by_the_programs() {
    // Its holders spent the waits in fdatasync: the waiters waited for the disk, and the
    // part is the running threads' 60%.
    let disk = HolderWait {
        on: HeldWait::Syscall("fdatasync".into()),
        share: 1.0,
    };
    let p = programs_part(0.6, |ns| a_mutex(ns, vec![disk]));
    let expected = p.of_cpu * 0.6;
    p.is_about(expected);
}
