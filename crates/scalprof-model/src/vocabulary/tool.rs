//! The frames that only run because scalprof is attached (its BPF programs, its probes'
//! traps, the kernel's records for its sampler), and how a profile's stacks are split by
//! them.

use super::{matches_any, Pat, Pat::Exact, Pat::Prefix};
use crate::profile::{folded, ToolCost};

const PROBE_FRAMES: &[Pat] = &[
    Exact("asm_exc_int3"),
    Exact("exc_int3"),
    Exact("uprobe_notify_resume"),
    Exact("handle_swbp"),
    Exact("handler_chain"),
    Exact("uprobe_dispatcher"),
    Exact("uretprobe_dispatcher"),
    Exact("__uprobe_perf_func"),
    Exact("uprobe_post_sstep_notifier"),
    Exact("uprobe_pre_sstep_notifier"),
    Prefix("arch_uprobe_"),
    Exact("uprobe_handle_trampoline"),
    Exact("__x64_sys_uretprobe"),
];

const SIDE_BAND_FRAMES: &[Pat] = &[
    Prefix("perf_event_mmap"),
    Exact("perf_event_comm"),
    Exact("perf_event_fork"),
    Exact("perf_event_task"),
    Exact("perf_event_namespaces"),
    Exact("perf_event_init_task"),
    Exact("perf_event_exit_task"),
    Exact("perf_event_free_task"),
    Exact("perf_event_exec"),
    Prefix("__perf_event_task_sched"),
    Exact("inherit_task_group"),
];

const TRACER_FRAMES: &[Pat] = &[
    Prefix("bpf_prog_"),
    Prefix("bpf_trace_run"),
    Prefix("__bpf_trace_"),
    Prefix("__bpf_prog_enter"),
    Prefix("bpf_get_stack"),
    Exact("__bpf_get_stackid"),
    Exact("get_perf_callchain"),
    Prefix("perf_callchain"),
    Exact("perf_event_overflow"),
    Exact("__perf_event_overflow"),
    Exact("perf_prepare_sample"),
    Exact("perf_output_sample"),
];

/// Which of scalprof's own costs a kernel frame (`name_[k]`) is, if it only runs because
/// a profiler or tracer is attached: a sample with one on its stack is scalprof's cost,
/// whatever ran below it. The clean repeats pay none of it.
pub fn tool_cost(name: &str) -> Option<ToolCost> {
    let f = name.strip_suffix("_[k]").unwrap_or(name);
    [
        (ToolCost::Probe, PROBE_FRAMES),
        (ToolCost::SideBand, SIDE_BAND_FRAMES),
        (ToolCost::Tracer, TRACER_FRAMES),
    ]
    .into_iter()
    .find(|(_, pats)| matches_any(pats, f))
    .map(|(cost, _)| cost)
}

/// Whether a frame is one of scalprof's own ([`tool_cost`]).
pub fn is_tool_frame(name: &str) -> bool {
    tool_cost(name).is_some()
}

/// The cost a stack's tool frames make it: the trap or side-band that led into a tracer's
/// program is that trap's; `None` for the program's own stack.
pub fn stack_tool_cost<'a>(frames: impl Iterator<Item = &'a str>) -> Option<ToolCost> {
    frames.filter_map(tool_cost).min()
}

/// Moves the stacks of `p` that pass through scalprof's own kernel frames ([`tool_cost`]:
/// a BPF program, a uprobe's trap, the sampler's side-band) to its overhead counters.
/// Recording does this per sample; a profile recorded before a frame joined these lists
/// gets the same split when read.
pub fn set_aside_tool_frames(p: &mut crate::PointProfile) {
    // A profile holds many stacks over few frame names: each name is matched once.
    let mut known: std::collections::HashMap<String, Option<ToolCost>> =
        std::collections::HashMap::new();
    let stats = &mut p.stats;
    p.folded.retain(|s| {
        let cost = folded::frames(&s.stack)
            .filter(|f| f.ends_with(folded::KERNEL_SUFFIX))
            .filter_map(|f| match known.get(f) {
                Some(c) => *c,
                None => *known.entry(f.to_string()).or_insert_with(|| tool_cost(f)),
            })
            .min();
        let Some(cost) = cost else {
            return true;
        };
        stats.count_overhead(cost, s.samples, s.weight);
        false
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(s: &str, weight: u64) -> crate::profile::FoldedStack {
        crate::profile::FoldedStack {
            stack: s.into(),
            samples: 1,
            weight,
        }
    }

    #[test]
    fn a_uprobe_trap_is_the_tool_s_cost_and_the_rest_stays() {
        let mut p = crate::PointProfile {
            event: "cpu-clock".into(),
            frequency: 999,
            stats: crate::profile::ProfileStats::default(),
            serial: crate::profile::SerialStats::default(),
            repeats: 1,
            hot: Vec::new(),
            folded: vec![
                stack("go;main.worker;runtime.semrelease1;asm_exc_int3_[k];exc_int3_[k];irqentry_exit_to_user_mode_[k]", 30),
                stack("go;runtime.ready;exc_int3_[k];uprobe_notify_resume_[k];handler_chain_[k];uprobe_dispatcher_[k];__uprobe_perf_func_[k];[unknown]_[k];htab_map_update_elem_[k]", 20),
                stack("go;main.worker;runtime.mapassign_fast64", 50),
                // A user function that shares a name with a tool frame is the program's.
                stack("go;main.worker;handler_chain", 7),
            ],
        };
        set_aside_tool_frames(&mut p);
        assert_eq!(p.stats.overhead_weight, 50);
        assert_eq!(p.stats.overhead_samples, 2);
        assert_eq!((p.stats.probe_samples, p.stats.side_band_samples), (2, 0));
        let left: Vec<&str> = p.folded.iter().map(|s| s.stack.as_str()).collect();
        assert_eq!(
            left,
            [
                "go;main.worker;runtime.mapassign_fast64",
                "go;main.worker;handler_chain"
            ]
        );
    }

    #[test]
    fn probe_traps_and_the_sampler_s_side_band_are_the_tool_s() {
        for f in [
            "exc_int3_[k]",
            "uprobe_notify_resume_[k]",
            "__uprobe_perf_func_[k]",
            "arch_uprobe_skip_sstep_[k]",
            "perf_event_mmap_[k]",
            "perf_event_mmap_output_[k]",
            "__perf_event_task_sched_in_[k]",
            "perf_event_exit_task_[k]",
        ] {
            assert!(is_tool_frame(f), "{f}");
        }
        // A trap that led into a tracer's program is the trap's, in either order.
        for stack in [
            ["exc_int3_[k]", "bpf_prog_1a2b_go_ready_[k]"],
            ["bpf_prog_1a2b_go_ready_[k]", "exc_int3_[k]"],
        ] {
            assert_eq!(stack_tool_cost(stack.into_iter()), Some(ToolCost::Probe));
        }
        // The work the program asked for is its own.
        for f in [
            "do_brk_flags_[k]",
            "do_mmap_[k]",
            "finish_task_switch.isra.0_[k]",
            "exc_page_fault_[k]",
        ] {
            assert!(!is_tool_frame(f), "{f}");
        }
    }
}
