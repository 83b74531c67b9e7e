//! The sweep's tests: lists, substitution, ops, and whole sweeps of `sh -c` scripts.

use super::{
    default_values, execute_plan, match_ops, parameter_env, parse_ops, parse_values, substitute,
    AttachSpec, Interrupt, Keep, OutputPolicy, Regex, SweepEnd, SweepEvent, SweepPlan, SweepSink,
};
use scalprof_model::Repeat;

#[test]
fn sweep_lists() {
    assert_eq!(parse_values("1,2,4").unwrap(), vec![1, 2, 4]);
    assert_eq!(parse_values("1-4,8, 2").unwrap(), vec![1, 2, 3, 4, 8]);
    assert!(parse_values("0,1").is_err());
    assert!(parse_values("4-1").is_err());
    assert!(parse_values("1,,2").is_err());
    assert!(parse_values("two")
        .unwrap_err()
        .to_string()
        .contains("\"two\""));
}

#[test]
fn default_sweep_is_powers_of_two_plus_cpu_count() {
    assert_eq!(default_values(1), vec![1]);
    assert_eq!(default_values(2), vec![1, 2]);
    assert_eq!(default_values(6), vec![1, 2, 4, 6]);
    assert_eq!(default_values(8), vec![1, 2, 4, 8]);
}

#[test]
fn ops_parsing_takes_the_last_match() {
    let re = Regex::new(r"ops=(\d+)").unwrap();
    assert_eq!(parse_ops("warmup ops=5\nops=1200\n", &re), Some(1200));
    assert_eq!(parse_ops("nothing here", &re), None);
    let re = Regex::new(r"([0-9.]+) ops/s").unwrap();
    assert_eq!(parse_ops("rate: 12.6 ops/s", &re), Some(13));
    let re = Regex::new(r"ops=(\w+)").unwrap();
    assert_eq!(match_ops("ops=abc\n", &re), Err("ops=abc".to_string()));
    assert_eq!(match_ops("none\n", &re), Ok(None));
}

#[test]
fn substitutes_the_thread_count() {
    let cmd: Vec<String> = ["./b", "-t{threads}", "x"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(substitute(&cmd, "threads", 8), vec!["./b", "-t8", "x"]);
    let cmd: Vec<String> = ["./flows", "{size}"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(substitute(&cmd, "size", 5000), vec!["./flows", "5000"]);
    assert_eq!(parameter_env("size"), "SCALPROF_SIZE");
}

pub(super) struct Collect(pub(super) Vec<(u64, Repeat)>, pub(super) u32);
impl SweepSink for Collect {
    fn event(&mut self, event: SweepEvent<'_>) -> Result<(), crate::SinkError> {
        match event {
            SweepEvent::RepeatDone { value, repeat, .. } => self.0.push((value, repeat.clone())),
            SweepEvent::WarmupDone { .. } => self.1 += 1,
            _ => {}
        }
        Ok(())
    }
}

pub(super) fn plan(dir: &tempfile::TempDir, script: &str, keep_going: bool) -> SweepPlan {
    SweepPlan {
        command: vec![
            "sh".into(),
            "-c".into(),
            script.into(),
            "sh".into(),
            "{threads}".into(),
        ],
        parameter: scalprof_model::SweepParameter::Threads,
        values: vec![1, 2, 3],
        repeat: 2,
        repeat_max: 2,
        diagnose: 1,
        diagnose_max: 1,
        // Exact repeat lists: the tests beside these must not add re-runs.
        max_reruns: 0,
        warmup: 1,
        prepare: None,
        cleanup: None,
        timeout: None,
        keep_going,
        output_dir: dir.path().join("out"),
        ops_regex: Regex::new(r"ops=(\d+)").unwrap(),
        output: OutputPolicy::keep_all(),
        sampling: None,
        locks: None,
        attach: AttachSpec::default(),
        traced_env: Vec::new(),
    }
}

/// The sweeps of these tests run one at a time: a sweep reaps the zombie children that
/// appeared while its workload ran (`exec::leftovers`), and in one test process those can
/// be another test's workload or `--prepare` command, whose own wait then finds nothing
/// (ECHILD).
pub(super) fn one_sweep_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_flood_of_output_keeps_its_head_and_tail() {
    let _turn = one_sweep_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(
        &dir,
        "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; echo ops=7",
        false,
    );
    p.values = vec![1];
    p.repeat = 1;
    p.warmup = 0;
    p.output = OutputPolicy {
        stdout: Keep::HeadTail(1000),
        stderr: Keep::HeadTail(1000),
    };
    let mut sink = Collect(vec![], 0);
    execute_plan(&p, &mut sink, &Interrupt::manual()).unwrap();
    let r = &sink.0[0].1;
    assert_eq!(r.ops, Some(7), "ops read before the cut");
    let text = std::fs::read_to_string(r.stdout_path.as_ref().unwrap()).unwrap();
    assert!(text.starts_with("line0\n"));
    assert!(text.ends_with("ops=7\n"));
    assert!(text.contains("bytes cut here"), "{text}");
    assert!(text.len() < 1200, "{}", text.len());
}

#[test]
fn runs_every_point_and_reads_ops() {
    let _turn = one_sweep_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let p = plan(
        &dir,
        "echo ops=$(( $1 * 10 )); [ \"$SCALPROF_THREADS\" = \"$1\" ]",
        false,
    );
    let mut sink = Collect(vec![], 0);
    assert_eq!(
        execute_plan(&p, &mut sink, &Interrupt::manual()).unwrap(),
        SweepEnd::Complete
    );
    assert_eq!(sink.1, 3, "one warm-up per point");
    let got: Vec<(u64, u32, Option<u64>)> =
        sink.0.iter().map(|(v, r)| (*v, r.index, r.ops)).collect();
    assert_eq!(
        got,
        vec![
            (1, 0, Some(10)),
            (1, 1, Some(10)),
            (2, 0, Some(20)),
            (2, 1, Some(20)),
            (3, 0, Some(30)),
            (3, 1, Some(30))
        ]
    );
    assert!(sink.0.iter().all(|(_, r)| r.succeeded()));
}

#[test]
fn a_failure_stops_the_sweep_unless_keep_going() {
    let _turn = one_sweep_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let script = "echo boom >&2; [ $1 -ne 2 ]";
    let mut sink = Collect(vec![], 0);
    let mut p = plan(&dir, script, false);
    p.warmup = 0;
    match execute_plan(&p, &mut sink, &Interrupt::manual()).unwrap() {
        SweepEnd::Failed { value, repeat } => {
            assert_eq!(value, 2);
            assert_eq!(repeat.exit_code, Some(1));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(sink.0.len(), 3, "point 1 twice, then the failed repeat");
    let mut sink = Collect(vec![], 0);
    p.keep_going = true;
    assert_eq!(
        execute_plan(&p, &mut sink, &Interrupt::manual()).unwrap(),
        SweepEnd::Complete
    );
    assert_eq!(sink.0.len(), 6);
}

#[test]
fn an_interrupt_keeps_finished_repeats() {
    let _turn = one_sweep_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let p = plan(&dir, "sleep 0.05", false);
    let interrupt = Interrupt::manual();
    struct StopAfter(Collect, Interrupt);
    impl SweepSink for StopAfter {
        fn event(&mut self, event: SweepEvent<'_>) -> Result<(), crate::SinkError> {
            if let SweepEvent::RepeatDone { .. } = event {
                self.0.event(event)?;
                if self.0 .0.len() == 3 {
                    self.1.trigger();
                }
            }
            Ok(())
        }
    }
    let mut sink = StopAfter(Collect(vec![], 0), interrupt.clone());
    assert_eq!(
        execute_plan(&p, &mut sink, &interrupt).unwrap(),
        SweepEnd::Interrupted(None)
    );
    assert_eq!(sink.0 .0.len(), 3);
}

/// A sampler that attaches and records nothing; the sizes it was made with are kept.
struct Sizes(Vec<u32>);

struct Quiet;

impl crate::exec::Attach for Quiet {
    fn attach(&mut self, _pid: i32, _attached: &[i32]) -> Result<(), crate::CollectError> {
        Ok(())
    }
    fn finish(&mut self) {}
}

impl super::ProfileCollector for Quiet {
    fn take(&mut self) -> Option<crate::perf::RawProfile> {
        None
    }
}

impl super::Collectors for Sizes {
    fn sampler(
        &mut self,
        config: &crate::perf::SamplingConfig,
    ) -> Box<dyn super::ProfileCollector> {
        self.0.push(config.stack_bytes);
        Box::new(Quiet)
    }
    fn lock_tracer(&mut self, _: &crate::locks::LockConfig) -> Box<dyn super::LockCollector> {
        unreachable!("no lock tracing in this plan")
    }
}

/// A sink whose every traced repeat had `cut` of its user stacks cut short.
struct Cut(f64, Vec<(u32, u32)>);

impl SweepSink for Cut {
    fn event(&mut self, event: SweepEvent<'_>) -> Result<(), crate::SinkError> {
        if let SweepEvent::StackGrown { from, to, .. } = event {
            self.1.push((from, to));
        }
        Ok(())
    }
    fn stacks_cut(&mut self) -> Option<f64> {
        Some(self.0)
    }
}

#[test]
fn cut_stacks_double_the_copy_up_to_32k_unless_the_user_chose_it() {
    let _turn = one_sweep_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(&dir, "echo ops=1", false);
    p.values = vec![1, 2];
    p.repeat = 1;
    p.warmup = 0;
    p.diagnose = 2;
    p.diagnose_max = 2;
    p.sampling = Some(crate::perf::SamplingConfig::default());
    let run = |p: &SweepPlan, cut: f64| {
        let (mut sizes, mut sink) = (Sizes(Vec::new()), Cut(cut, Vec::new()));
        super::execute_plan_with(p, &mut sizes, &mut sink, &Interrupt::manual()).unwrap();
        (sizes.0, sink.1)
    };
    let (sizes, grown) = run(&p, 0.5);
    assert_eq!(sizes, [8192, 16384, 32768, 32768]);
    assert_eq!(grown, [(8192, 16384), (16384, 32768)]);
    // Few stacks cut: the copy stays.
    assert_eq!(run(&p, 0.05).0, [8192; 4]);
    // A size the user gave stays.
    p.sampling.as_mut().unwrap().grow_stack = false;
    assert_eq!(run(&p, 0.5), (vec![8192; 4], vec![]));
}

/// A sink that keeps the rates the sweep chose.
struct Rates(Vec<(u64, u64)>);

impl SweepSink for Rates {
    fn event(&mut self, event: SweepEvent<'_>) -> Result<(), crate::SinkError> {
        if let SweepEvent::RateChosen { value, hz, .. } = event {
            self.0.push((value, hz));
        }
        Ok(())
    }
}

#[test]
fn each_point_samples_at_the_rate_its_clean_repeats_call_for_unless_the_user_chose_it() {
    let sampling = crate::perf::SamplingConfig {
        adaptive: true,
        ..Default::default()
    };
    let mut state = super::step::SweepState {
        on: super::Enabled {
            sampling: Some(sampling),
            locks: None,
        },
        count_pmu: false,
        cpus: 2,
        quota: None,
        ceiling_hz: Some(999),
        // Point 1: a disturbed repeat among three (the median counts); point 2 long.
        clean_cpu_s: vec![(1, 0.5), (1, 8.0), (4, 40.0), (1, 9.0), (8, 0.9)],
    };
    let mut sink = Rates(Vec::new());
    let rate = |state: &super::step::SweepState| state.on.sampling.as_ref().unwrap().frequency;
    // 4000 samples from 8 CPU seconds: 500 Hz, odd.
    super::step::choose_rate(1, &mut sink, &mut state).unwrap();
    assert_eq!(rate(&state), 499);
    super::step::choose_rate(4, &mut sink, &mut state).unwrap();
    assert_eq!(rate(&state), 99);
    // A short point keeps the ceiling: the default rate.
    super::step::choose_rate(8, &mut sink, &mut state).unwrap();
    assert_eq!(rate(&state), 999);
    // A point without a clean repeat that succeeded keeps the last rate, unsaid.
    super::step::choose_rate(16, &mut sink, &mut state).unwrap();
    assert_eq!(rate(&state), 999);
    assert_eq!(sink.0, [(1, 499), (4, 99), (8, 999)]);
    // -F: the rate stays.
    state.on.sampling.as_mut().unwrap().adaptive = false;
    super::step::choose_rate(4, &mut sink, &mut state).unwrap();
    assert_eq!(rate(&state), 999);
}

#[test]
fn the_rate_rule_keeps_between_its_floor_and_the_ceiling() {
    use crate::perf::{point_frequency, MIN_ADAPTIVE_HZ};
    assert_eq!(point_frequency(1.0, 999), 999);
    assert_eq!(point_frequency(4.0, 999), 999);
    assert_eq!(point_frequency(10.0, 999), 399);
    assert_eq!(point_frequency(160.0, 999), MIN_ADAPTIVE_HZ);
    assert_eq!(point_frequency(1e6, 999), MIN_ADAPTIVE_HZ);
    // The data-rate limit lowered the ceiling: never above it.
    assert_eq!(point_frequency(0.5, 255), 255);
    // Nothing measured: the ceiling.
    assert_eq!(point_frequency(0.0, 999), 999);
    assert_eq!(point_frequency(f64::NAN, 999), 999);
}

/// A sink that asks for another clean repeat while fewer than `want` ran at a point, and
/// keeps how many clean repeats each point got.
struct Unsteady {
    want: u32,
    clean: Vec<u64>,
    asked: Vec<(u64, u32)>,
}

impl SweepSink for Unsteady {
    fn event(&mut self, event: SweepEvent<'_>) -> Result<(), crate::SinkError> {
        if let SweepEvent::RepeatDone { value, repeat, .. } = event {
            if !repeat.traced {
                self.clean.push(value);
            }
        }
        Ok(())
    }
    fn more_clean(&mut self, value: u64, done: u32) -> bool {
        self.asked.push((value, done));
        done < self.want
    }
}

#[test]
fn unsteady_clean_repeats_go_on_up_to_repeat_max_and_are_asked_about_only_past_repeat() {
    let _turn = one_sweep_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(&dir, "echo ops=1", false);
    p.values = vec![1, 2];
    p.warmup = 0;
    p.repeat = 2;
    p.repeat_max = 4;
    let run = |p: &SweepPlan, want: u32| {
        let mut sink = Unsteady {
            want,
            clean: Vec::new(),
            asked: Vec::new(),
        };
        execute_plan(p, &mut sink, &Interrupt::manual()).unwrap();
        (sink.clean, sink.asked)
    };
    // Steady after 3: one more each, asked at 2 and 3.
    let (clean, asked) = run(&p, 3);
    assert_eq!(clean, [1, 1, 1, 2, 2, 2]);
    assert_eq!(asked, [(1, 2), (1, 3), (2, 2), (2, 3)]);
    // Never steady: repeat_max in all, and not asked at repeat_max.
    let (clean, asked) = run(&p, 100);
    assert_eq!(clean, [1, 1, 1, 1, 2, 2, 2, 2]);
    assert_eq!(asked, [(1, 2), (1, 3), (2, 2), (2, 3)]);
    // repeat_max at repeat: never asked.
    p.repeat_max = 2;
    assert_eq!(run(&p, 100), (vec![1, 1, 2, 2], vec![]));
}
