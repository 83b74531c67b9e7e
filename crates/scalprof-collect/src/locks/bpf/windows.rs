//! The tracer of `scalprof watch`: loaded once, then attached to the server for each traced
//! window and detached after it, each window starting from empty maps (see
//! `locks/resident.rs` for the handle the watch holds).

use std::mem::MaybeUninit;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;

use libbpf_rs::MapCore;

use crate::LockTracerError;

use super::{
    attach_go_probes, bpf_cause, bursts, mmap_lock_events, open_and_load, traced, with_libbpf_log,
    LockConfig, RawLocks, Switched, Tracer,
};

/// A tracer loaded once and attached window by window (a watch's traced windows, a
/// sweep's traced repeats), so that the kernel verifies its programs once, not for every
/// window (0.05 to 0.24 s of a CPU each on the 2-CPU VM measured, by boot). For each
/// window's processes and configuration received on `windows` (the same but for
/// `hold_times`, which attaches the mmap_lock's programs): attaches, says on `ready`
/// whether it could, traces until `stop`, detaches and sends what the window saw on
/// `done`. Returns when `windows` closes.
pub(in crate::locks) fn resident(
    config: &LockConfig,
    windows: mpsc::Receiver<(Vec<u32>, LockConfig)>,
    ready: mpsc::Sender<Result<(), LockTracerError>>,
    done: mpsc::Sender<RawLocks>,
    stop: &AtomicBool,
) {
    let Ok((mut tgids, mut window)) = windows.recv() else {
        return;
    };
    let mut object = MaybeUninit::uninit();
    let mut tracer = match Tracer::load_detached(&mut object, config) {
        Ok(t) => t,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    loop {
        match tracer.attach_window(&tgids, &window) {
            Ok((mut links, switched)) => {
                let raw = traced(&tracer.skel, &tgids, &window, switched, &ready, stop);
                bursts::detach(&mut links);
                if done.send(raw).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = ready.send(Err(LockTracerError::Load {
                    cause: bpf_cause(e.kind() == libbpf_rs::ErrorKind::PermissionDenied, ""),
                    message: format!("attaching the loaded tracer: {e:#}"),
                }));
            }
        }
        match windows.recv() {
            Ok(next) => (tgids, window) = next,
            Err(_) => return,
        }
    }
}

impl<'obj> Tracer<'obj> {
    /// Loads the programs without attaching them (see [`resident`]), the mmap_lock's too:
    /// a window attaches them where it times holds.
    fn load_detached(
        object: &'obj mut MaybeUninit<libbpf_rs::OpenObject>,
        config: &LockConfig,
    ) -> Result<Self, LockTracerError> {
        let all = LockConfig {
            hold_times: true,
            ..config.clone()
        };
        let skel = with_libbpf_log(|| open_and_load(object, &all))?;
        Ok(Tracer { skel })
    }

    /// Attaches the loaded programs to `tgids` for one window, starting from nothing: the
    /// last window's processes, aggregates, stacks, names, failure counts and unread
    /// records are dropped (a pid of the last window may be another process's now), and
    /// the waits its tasks began before this attach are forgotten (`attached_at`).
    /// Returns the programs' links and those the drain switches (the Go probes', the
    /// contention programs'); dropping them detaches.
    fn attach_window(
        &mut self,
        tgids: &[u32],
        config: &LockConfig,
    ) -> Result<(Vec<libbpf_rs::Link>, Switched), libbpf_rs::Error> {
        let maps = &self.skel.maps;
        for map in [
            &maps.waker_comms as &dyn MapCore,
            &maps.kernel_locks,
            &maps.kernel_stacks,
            &maps.kernel_wakers,
            &maps.user_locks,
            &maps.syscall_waits,
            &maps.syscall_stacks,
            &maps.wakers,
            &maps.runqueue,
            &maps.rq_slices,
            &maps.stacks,
            &maps.mmap_holds,
            &maps.go_parked,
            &maps.go_releasing,
            &maps.go_waits,
            &maps.go_wakers,
            &maps.go_seen,
        ] {
            bursts::clear(map);
        }
        // Records the last window left in the ring buffer after its drain ended.
        let mut unread = libbpf_rs::RingBufferBuilder::new();
        unread.add(&maps.snapshots, |_| 0)?;
        unread.build()?.consume()?;
        crate::tree::clear(&maps.tree)?;
        crate::tree::add(&maps.tree, tgids)?;
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            // Nothing runs the programs while they are detached: plain writes.
            bss.fail_task_map = 0;
            bss.fail_stack = 0;
            bss.fail_agg_map = 0;
            bss.fail_nested = 0;
            bss.lost_snapshots = 0;
            bss.go_hits = 0;
            bss.klock_seen = 0;
            bss.attached_at = crate::perf::clock_ns(libc::CLOCK_MONOTONIC);
        }
        let p = &self.skel.progs;
        let holds = config.hold_times && mmap_lock_events();
        let mut progs = vec![
            &p.on_exec,
            &p.tree_fork,
            &p.on_wakeup,
            &p.on_wakeup_new,
            &p.on_switch,
        ];
        if holds {
            progs.extend([&p.on_mmap_acquired, &p.on_mmap_released]);
        }
        let links = progs
            .into_iter()
            .map(|prog| prog.attach())
            .collect::<Result<Vec<_>, _>>()?;
        // Attached last: a contention's start is stale before this.
        let from = crate::perf::clock_ns(libc::CLOCK_MONOTONIC);
        self.skel.maps.klocks_from.update(
            &0u32.to_ne_bytes(),
            &from.to_ne_bytes(),
            libbpf_rs::MapFlags::ANY,
        )?;
        let klocks = [&p.on_contention_begin, &p.on_contention_end]
            .into_iter()
            .map(|prog| prog.attach())
            .collect::<Result<Vec<_>, _>>()?;
        let go = attach_go_probes(&self.skel, &config.go_probes)?;
        Ok((links, Switched { go, klocks }))
    }
}
