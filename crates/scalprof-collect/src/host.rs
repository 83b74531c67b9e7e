//! Facts about the machine, recorded with every run.

use scalprof_model::Host;

pub fn probe() -> Host {
    let cpus = online_cpus();
    Host {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        cpus,
        cpu_model: cpu_model().unwrap_or_else(|| "unknown".into()),
        pmu: has_cycles_pmu(),
        limits: Some(crate::limits::probe(cpus)),
        topology: Some(crate::topology::probe()),
        sample_cost_ns: None,
        switch_cost: None,
    }
}

/// CPUs online now (not the affinity mask: the sweep default follows the machine).
pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as u32
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
    }
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name") || l.starts_with("Model"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Whether a hardware cycles counter can be opened for this process (user space only,
/// so it works under perf_event_paranoid 2). Many VMs have no PMU: then sampling
/// falls back to cpu-clock.
pub fn has_cycles_pmu() -> bool {
    // A minimal perf_event_attr (PERF_ATTR_SIZE_VER5, 112 bytes): type, size, config
    // and the flag word; everything else zero.
    #[repr(C)]
    struct Attr {
        type_: u32,
        size: u32,
        config: u64,
        sample_period: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        rest: [u64; 8],
    }
    const PERF_TYPE_HARDWARE: u32 = 0;
    const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
    const DISABLED: u64 = 1 << 0;
    const EXCLUDE_KERNEL: u64 = 1 << 5;
    const EXCLUDE_HV: u64 = 1 << 6;
    let attr = Attr {
        type_: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<Attr>() as u32,
        config: PERF_COUNT_HW_CPU_CYCLES,
        sample_period: 0,
        sample_type: 0,
        read_format: 0,
        flags: DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV,
        rest: [0; 8],
    };
    // SAFETY: attr is a valid, fully initialized perf_event_attr of the declared size;
    // the returned descriptor is closed immediately.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            0,
            -1,
            -1,
            0,
        );
        if fd >= 0 {
            libc::close(fd as i32);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_reads_this_machine() {
        let h = super::probe();
        assert!(h.cpus >= 1);
        assert!(
            h.kernel.chars().next().unwrap().is_ascii_digit(),
            "{}",
            h.kernel
        );
    }
}
