//! The tick sampler's plan and its records, without a kernel.

use super::{
    addresses_in, b, every_for, hz_in_config, perf_sample, ring_bytes, KernelAddresses, TickPlan,
    OFF_BP, OFF_CPU, OFF_IP, OFF_KERNEL, OFF_KERNEL_LEN, OFF_PID, OFF_SP, OFF_STACK, OFF_STACK_LEN,
    OFF_TID, OFF_TIME, PERF_RECORD_MISC_KERNEL, PERF_RECORD_MISC_USER,
};

#[test]
fn rates_become_whole_ticks() {
    assert_eq!(every_for(250, 249), 1);
    assert_eq!(every_for(250, 99), 3);
    assert_eq!(every_for(250, 49), 5);
    assert_eq!(every_for(1000, 999), 1);
    assert_eq!(every_for(1000, 49), 20);
    let plan = TickPlan {
        hz: 250,
        every: 3,
        kernel: KernelAddresses {
            tick_function: 1,
            entry: (2, 3),
        },
    };
    assert_eq!(plan.frequency(), 83);
    assert_eq!(plan.period_ns(), 12_000_000);
}

#[test]
fn the_tick_rate_is_read_from_the_configuration() {
    assert_eq!(
        hz_in_config("# CONFIG_HZ_1000 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"),
        Some(250)
    );
    assert_eq!(hz_in_config("CONFIG_NO_HZ=y\n"), None);
}

#[test]
fn the_tick_and_the_interrupt_entry_are_found_in_kallsyms() {
    let text = "ffffffff81000000 T _stext\n\
                ffffffff81000df0 T asm_sysvec_apic_timer_interrupt\n\
                ffffffff81000e10 T asm_sysvec_x86_platform_ipi\n\
                ffffffff814352e0 t tick_nohz_handler\n\
                ffffffff81435400 d some_data\n";
    let a = addresses_in(text).unwrap();
    assert_eq!(a.tick_function, 0xffffffff814352e0);
    assert_eq!(a.entry, (0xffffffff81000df0, 0xffffffff81000e10));
    // Addresses hidden (not root, kptr_restrict): nothing to attach to.
    let hidden: String = text
        .lines()
        .map(|l| format!("0000000000000000{}\n", &l[16..]))
        .collect();
    assert_eq!(addresses_in(&hidden), None);
}

/// A raw tick sample as ticks.bpf.c lays it out.
fn raw_sample(kernel: &[u64], stack: &[u8]) -> Vec<u8> {
    let mut r = vec![0u8; OFF_STACK];
    r[OFF_PID..OFF_PID + 4].copy_from_slice(&7u32.to_ne_bytes());
    r[OFF_TID..OFF_TID + 4].copy_from_slice(&8u32.to_ne_bytes());
    r[OFF_TIME..OFF_TIME + 8].copy_from_slice(&123u64.to_ne_bytes());
    r[OFF_CPU..OFF_CPU + 4].copy_from_slice(&1u32.to_ne_bytes());
    let klen = (kernel.len() * 8) as u32;
    r[OFF_KERNEL_LEN..OFF_KERNEL_LEN + 4].copy_from_slice(&klen.to_ne_bytes());
    r[OFF_IP..OFF_IP + 8].copy_from_slice(&0x401000u64.to_ne_bytes());
    r[OFF_SP..OFF_SP + 8].copy_from_slice(&0x7ffc0000u64.to_ne_bytes());
    r[OFF_BP..OFF_BP + 8].copy_from_slice(&0x7ffd0000u64.to_ne_bytes());
    r[OFF_STACK_LEN..OFF_STACK_LEN + 4].copy_from_slice(&(stack.len() as u32).to_ne_bytes());
    for (i, f) in kernel.iter().enumerate() {
        r[OFF_KERNEL + 8 * i..OFF_KERNEL + 8 * i + 8].copy_from_slice(&f.to_ne_bytes());
    }
    r.extend_from_slice(stack);
    r
}

/// Checks `record` parses as the sampler's sample and hands it to `check`.
fn parsed(record: &[u8], check: impl FnOnce(&linux_perf_event_reader::SampleRecord<'_>)) {
    use linux_perf_event_reader::{EventRecord, RawData, RawEventRecord, RecordType};
    let info = crate::perf::test_parse_info();
    let raw = RawEventRecord::new(
        RecordType(b::PERF_RECORD_SAMPLE),
        u16::from_ne_bytes([record[4], record[5]]),
        RawData::Single(&record[8..]),
        info,
    );
    match raw.parse().unwrap() {
        EventRecord::Sample(s) => check(&s),
        other => panic!("not a sample: {other:?}"),
    }
}

const PLAN: TickPlan = TickPlan {
    hz: 250,
    every: 1,
    kernel: KernelAddresses {
        tick_function: 0xffffffff814352e0,
        entry: (0xffffffff81000df0, 0xffffffff81000e10),
    },
};

#[test]
fn a_tick_in_user_space_is_a_user_sample_with_its_stack() {
    // The tick's own frames, then the entry: nothing of the kernel was running.
    let kernel = [0xffffffff81435300, 0xffffffff81200000, 0xffffffff81000e00];
    let stack: Vec<u8> = (0..100u8).collect();
    let mut out = Vec::new();
    assert!(perf_sample(&raw_sample(&kernel, &stack), &PLAN, &mut out));
    assert_eq!(out.len() % 8, 0);
    assert_eq!(u16::from_ne_bytes([out[4], out[5]]), PERF_RECORD_MISC_USER);
    parsed(&out, |s| {
        assert_eq!(s.ip, Some(0x401000));
        assert_eq!(s.pid, Some(7));
        assert_eq!(s.tid, Some(8));
        assert_eq!(s.timestamp, Some(123));
        assert_eq!(s.period, Some(4_000_000));
        assert!(s.callchain.as_ref().is_none_or(|c| c.is_empty()));
        let (stack, dyn_size) = s.user_stack.unwrap();
        assert_eq!((stack.len(), dyn_size), (104, 100));
        let regs = s.user_regs.as_ref().unwrap();
        assert_eq!(regs.get(b::PERF_REG_X86_SP as u64), Some(0x7ffc0000));
    });
}

#[test]
fn a_tick_in_the_kernel_keeps_what_it_interrupted_only() {
    let kernel = [
        0xffffffff81435300, // the tick
        0xffffffff81000e00, // the interrupt's entry
        0xffffffff81300000, // what was running
        0xffffffff81300100, // its caller
    ];
    let mut out = Vec::new();
    assert!(perf_sample(&raw_sample(&kernel, &[1; 16]), &PLAN, &mut out));
    assert_eq!(
        u16::from_ne_bytes([out[4], out[5]]),
        PERF_RECORD_MISC_KERNEL
    );
    parsed(&out, |s| {
        assert_eq!(s.ip, Some(0xffffffff81300000));
        let c = s.callchain.as_ref().unwrap();
        let chain: Vec<u64> = (0..c.len()).filter_map(|i| c.get(i)).collect();
        assert_eq!(
            chain,
            [
                b::PERF_CONTEXT_KERNEL,
                0xffffffff81300000,
                0xffffffff81300100
            ]
        );
    });
}

#[test]
fn a_short_sample_is_refused() {
    let mut out = Vec::new();
    assert!(!perf_sample(&[0u8; 40], &PLAN, &mut out));
}

#[test]
fn the_ring_holds_200_ms_of_every_cpu_within_bounds() {
    let mib = |b: u32| b >> 20;
    // 250 Hz on 2 CPUs: the floor.
    assert_eq!(mib(ring_bytes(250, 2, 8192)), 8);
    // 1000 Hz on 64 CPUs, 8 KiB stacks: 111 MiB wanted, 128 MiB given.
    assert_eq!(mib(ring_bytes(1000, 64, 8192)), 128);
    // 1000 Hz on 256 CPUs with 63 KiB stacks: the cap.
    assert_eq!(mib(ring_bytes(1000, 256, 63 * 1024)), 512);
    assert!(ring_bytes(99, 16, 32 * 1024).is_power_of_two());
}
