//! What one Go runtime probe hit costs the goroutine it traps, measured on this machine.
//!
//! A uprobe hit is a breakpoint trap, the kernel's lookup of the probe, the BPF program and
//! the return: 0.3–1.4 µs on bare metal, several times that on a virtual machine. The
//! bursts ([`super::bursts`]) keep the probes' cost within a budget, and the tracing line
//! accounts for it, from this figure. It is measured: this thread calls two identical
//! functions in turns of short windows, one of them probed (by one of the Go programs,
//! which returns at once for an untracked process: the trap is what is measured, a floor
//! for a traced goroutine's hit), and the difference of their windows gives the cost. Kept
//! once a boot, as the sampler's cost is. Written by hand: no library measures a uprobe.

use std::path::Path;
use std::time::Instant;

use super::skel::LocksSkel;

/// Calls per window and pairs of windows; the median pair is kept.
const CALLS: u32 = 2000;
const ROUNDS: usize = 9;

// The functions the calibration calls: the probed one and its twin, each a `nop` (the
// probe's place: the kernel emulates it, as it emulates the branch after a Go function's
// stack check where the Go probes sit, rather than single-stepping it out of line; on the
// first instruction of a compiled function a hit cost 16.6 µs here, out of line), then
// `x + 1`. In assembly so that the probed instruction is that `nop`.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text.scalprof_probe_calls,\"ax\",@progbits",
    ".globl scalprof_probed_call",
    ".type scalprof_probed_call,@function",
    "scalprof_probed_call:",
    "nop",
    "lea rax, [rdi + 1]",
    "ret",
    ".size scalprof_probed_call, . - scalprof_probed_call",
    ".globl scalprof_unprobed_call",
    ".type scalprof_unprobed_call,@function",
    "scalprof_unprobed_call:",
    "nop",
    "lea rax, [rdi + 1]",
    "ret",
    ".size scalprof_unprobed_call, . - scalprof_unprobed_call",
    ".popsection",
);

#[cfg(target_arch = "x86_64")]
extern "C" {
    fn scalprof_probed_call(x: u64) -> u64;
    fn scalprof_unprobed_call(x: u64) -> u64;
}

/// [`hit_cost_ns`], measured once a boot and kept beside the sampler's cost (root's
/// `/run/scalprof`, else `$XDG_RUNTIME_DIR/scalprof`, checked private).
pub(super) fn cached_hit_cost_ns(skel: &LocksSkel<'_>) -> Option<f64> {
    match crate::perf::cost::runtime_dir() {
        Some(dir) => crate::perf::cost::kept_or_measured(
            &dir,
            "probe-hit-cost",
            &crate::perf::cost::boot_key(),
            || hit_cost_ns(skel),
        ),
        None => hit_cost_ns(skel),
    }
}

/// Nanoseconds one probe hit adds to the call it traps, or `None` where the probe could not
/// be attached or the difference is lost in noise.
#[cfg(not(target_arch = "x86_64"))]
fn hit_cost_ns(_skel: &LocksSkel<'_>) -> Option<f64> {
    // The Go probes read x86-64 registers: there is nothing to measure elsewhere.
    None
}

#[cfg(target_arch = "x86_64")]
fn hit_cost_ns(skel: &LocksSkel<'_>) -> Option<f64> {
    let exe = Path::new("/proc/self/exe");
    let offset = file_offset(scalprof_probed_call as *const () as usize)?;
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let prog = &skel.progs.go_release;
    // Attached as the Go probes are: a multi-uprobe link where the kernel has them.
    let link = if super::uprobe_multi() {
        prog.attach_uprobe_multi_with_opts(
            pid,
            exe,
            "",
            libbpf_rs::UprobeMultiOpts {
                offsets: vec![offset],
                cookies: vec![0],
                ..Default::default()
            },
        )
    } else {
        prog.attach_uprobe_with_opts(pid, exe, offset, libbpf_rs::UprobeOpts::default())
    }
    .ok()?;
    let window = |f: unsafe extern "C" fn(u64) -> u64| {
        let start = Instant::now();
        let mut x = 1u64;
        for _ in 0..CALLS {
            // SAFETY: the assembly above: it reads rdi and writes rax, as the C ABI has it.
            x = unsafe { f(std::hint::black_box(x)) };
        }
        std::hint::black_box(x);
        start.elapsed().as_nanos() as f64
    };
    let diffs: Vec<f64> = (0..ROUNDS)
        .map(|_| window(scalprof_probed_call) - window(scalprof_unprobed_call))
        .collect();
    drop(link);
    let cost = crate::perf::cost::median(diffs)? / f64::from(CALLS);
    (cost > 0.0).then_some(cost)
}

#[cfg(target_arch = "x86_64")]
/// The offset in its file of the code at `addr` of this process (its executable mapping).
fn file_offset(addr: usize) -> Option<usize> {
    let addr = addr as u64;
    crate::locks::read_proc_maps(std::process::id())
        .into_iter()
        .find(|m| m.executable && addr >= m.start && addr < m.end)
        .map(|m| (addr - m.start + m.offset) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_probed_function_is_found_in_this_executable() {
        let off =
            file_offset(scalprof_probed_call as *const () as usize).expect("an executable mapping");
        let twin = file_offset(scalprof_unprobed_call as *const () as usize).unwrap();
        assert_ne!(off, twin);
        // The offset is where the function's bytes are in the file.
        let exe = std::fs::read("/proc/self/exe").unwrap();
        // SAFETY: the function's first 8 bytes are mapped, readable code.
        let code = unsafe { std::slice::from_raw_parts(scalprof_probed_call as *const u8, 8) };
        assert_eq!(&exe[off..off + 8], code);
    }
}
