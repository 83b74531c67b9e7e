//! One sample: its process and thread, its kernel and user frames, folded into a stack
//! with its weight, and its instruction counted for the sharing analysis.

use linux_perf_event_reader::{CpuMode, SampleRecord};
use scalprof_debuginfo::Kallsyms;
use scalprof_model::profile::ToolCost;

use super::user::file_address;
use super::{ProfileBuilder, Symbols, MIN_CODE_ADDRESS, PERF_CONTEXT_MAX, PERF_CONTEXT_USER};

impl ProfileBuilder {
    pub(super) fn handle_sample(&mut self, s: &SampleRecord<'_>, symbols: &mut Symbols) {
        let (Some(pid), Some(tid)) = (s.pid, s.tid) else {
            self.stats.bad_records += 1;
            return;
        };
        self.stats.samples += 1;
        let weight = s.period.unwrap_or(1);
        // The vectors of frames are the builder's, reused from sample to sample.
        let (mut kernel, mut frames, mut user_ids) = std::mem::take(&mut self.scratch);
        let user_chain = self.split_callchain(s, &symbols.kernel, &mut kernel);
        // User part: unwind the copied stack; else the recorded user callchain.
        let user_addrs = self.user_addresses(pid, s, user_chain);
        frames.clear();
        frames.push(self.comm_id(pid));
        self.user_frame_ids(pid, &user_addrs, &mut user_ids);
        frames.extend(&user_ids);
        frames.extend(kernel.iter().rev());
        self.stats.frames += (frames.len() - 1) as u64;
        let leaf_user = user_ids.last().copied().unwrap_or(u32::MAX);
        // The tool's own work is its overhead, never the program's cost: its BPF programs,
        // and its interposer timing the holds inside the program's threads (nor what a
        // holder did: it would make short critical sections look longer).
        let interposer = self.in_interposer(pid, &user_addrs);
        if let Some(t) = s.timestamp {
            self.timeline.push((t, tid, leaf_user));
            self.thread_pid.insert(tid, pid);
            if !interposer {
                self.blame_sample(pid, tid, t, weight, &user_addrs, &frames);
            }
        }
        let tool = kernel
            .iter()
            .filter_map(|&id| self.tool_names[id as usize])
            .min();
        if let Some(cost) = tool.or(interposer.then_some(ToolCost::Tracer)) {
            self.stats.count_overhead(cost, 1, weight);
        } else {
            if kernel.is_empty() {
                if let Some(&ip) = user_addrs.first() {
                    self.count_hot(pid, ip, weight);
                }
            }
            self.count_stack(&frames, weight);
        }
        self.scratch = (kernel, frames, user_ids);
    }

    /// Splits a sample's callchain at the user context marker: the kernel frames' name ids
    /// into `kernel`, leaf first (for a kernel-mode sample without them, its instruction),
    /// and the user addresses returned, leaf first.
    fn split_callchain(
        &mut self,
        s: &SampleRecord<'_>,
        kallsyms: &Kallsyms,
        kernel: &mut Vec<u32>,
    ) -> Vec<u64> {
        kernel.clear();
        let mut user_chain: Vec<u64> = Vec::new();
        if let Some(chain) = &s.callchain {
            let mut in_user = false;
            for i in 0..chain.len() {
                let Some(addr) = chain.get(i) else { break };
                if addr >= PERF_CONTEXT_MAX {
                    in_user = addr == PERF_CONTEXT_USER;
                    continue;
                }
                if in_user {
                    // Nothing executes below the lowest mappable page: such an entry is
                    // a frame-pointer walk that ran past the outermost frame.
                    if addr >= MIN_CODE_ADDRESS {
                        user_chain.push(addr);
                    }
                } else {
                    kernel.push(self.kernel_frame(addr, kallsyms));
                }
            }
        }
        if kernel.is_empty() && s.cpu_mode == CpuMode::Kernel {
            if let Some(ip) = s.ip {
                kernel.push(self.kernel_frame(ip, kallsyms));
            }
        }
        user_chain
    }

    /// The name id of a sample's process: its command, or `pid-N` while it has none.
    fn comm_id(&mut self, pid: i32) -> u32 {
        let process = self.processes.entry(pid).or_default();
        if let Some(id) = process.comm_id {
            return id;
        }
        let named = !process.comm.is_empty();
        let comm = if named {
            process.comm.clone()
        } else {
            format!("pid-{pid}")
        };
        let id = self.intern(&comm);
        // A process without a name yet may get one: only a name is kept.
        if let Some(p) = self.processes.get_mut(&pid).filter(|_| named) {
            p.comm_id = Some(id);
        }
        id
    }

    /// The name ids of a user stack's frames into `user_ids`, outermost first, inlined
    /// functions included.
    fn user_frame_ids(&mut self, pid: i32, user_addrs: &[u64], user_ids: &mut Vec<u32>) {
        user_ids.clear();
        for (i, &addr) in user_addrs.iter().enumerate().rev() {
            // Return addresses point after the call: look up the call instruction.
            let lookup = if i == 0 { addr } else { addr.saturating_sub(1) };
            let ids = self.user_frames(pid, lookup);
            user_ids.extend(ids.iter().rev());
        }
        if !user_addrs.is_empty() {
            self.stats.user_stacks += 1;
        }
    }

    /// Counts where a user-mode sample landed, by file and stated address: the
    /// instructions the sharing analysis decodes.
    fn count_hot(&mut self, pid: i32, ip: u64, weight: u64) {
        if let Some(key) = self.processes.get(&pid).and_then(|p| file_address(p, ip)) {
            let e = self.hot.entry(key).or_insert((0, 0));
            e.0 += 1;
            e.1 = e.1.saturating_add(weight);
        }
    }

    /// Counts a sample's stack: one seen before is found by its frames, without a copy
    /// of them.
    fn count_stack(&mut self, frames: &[u32], weight: u64) {
        match self.stacks.get_mut(frames) {
            Some(e) => {
                e.0 += 1;
                e.1 = e.1.saturating_add(weight);
            }
            None => {
                self.stacks.insert(frames.to_vec(), (1, weight));
            }
        }
    }

    /// Counts a holder thread's sample for every wait of its waiters it falls in, by the
    /// innermost function outside the C library and the loader (the lock code itself is
    /// libc's: the holder's own function is what held the lock).
    fn blame_sample(
        &mut self,
        pid: i32,
        tid: i32,
        t: u64,
        weight: u64,
        user_addrs: &[u64],
        frames: &[u32],
    ) {
        // The waits this sample falls in: its thread's waiters' (the latest few starting
        // by t: a holder's older ones have ended), and the waits of other threads that
        // have no known holder.
        let mut locks: Vec<usize> = Vec::new();
        if let Some(windows) = self.blame_windows.get(&tid) {
            let upto = windows.partition_point(|w| w.0 <= t);
            locks.extend(
                windows[upto.saturating_sub(64)..upto]
                    .iter()
                    .filter(|w| t < w.1)
                    .map(|w| w.2),
            );
        }
        let upto = self.blame_others.partition_point(|w| w.0 <= t);
        locks.extend(
            self.blame_others[upto.saturating_sub(64)..upto]
                .iter()
                .filter(|w| t < w.1 && w.3 != tid)
                .map(|w| w.2),
        );
        if locks.is_empty() {
            return;
        }
        locks.sort_unstable();
        locks.dedup();
        let Some(holder) = self.own_function(pid, user_addrs) else {
            return;
        };
        let stack = frames
            .iter()
            .map(|&id| self.names[id as usize].as_str())
            .collect::<Vec<_>>()
            .join(";");
        for lock in locks {
            let b = self.blamed.entry(lock).or_default();
            let e = b.functions.entry(holder.clone()).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(weight);
            let e = b
                .stacks
                .entry(stack.clone())
                .or_insert_with(|| (holder.clone(), 0, 0));
            e.1 += 1;
            e.2 = e.2.saturating_add(weight);
        }
    }

    /// Whether a sample's innermost user code is scalprof's interposer (or the clock it
    /// reads from the vDSO): where its leaf user frame, or the one under a vDSO leaf, lies
    /// in `libscalprof-delay.so`.
    fn in_interposer(&self, pid: i32, user_addrs: &[u64]) -> bool {
        let Some(process) = self.processes.get(&pid) else {
            return false;
        };
        let file = |i: usize| {
            let lookup = if i == 0 {
                user_addrs[0]
            } else {
                user_addrs[i].saturating_sub(1)
            };
            process
                .mapping(lookup)
                .map(|m| m.path.rsplit('/').next().unwrap_or(&m.path).to_string())
        };
        match user_addrs.len() {
            0 => false,
            n => match file(0) {
                Some(f) if f.starts_with("libscalprof-delay") => true,
                Some(f) if f == "[vdso]" && n > 1 => {
                    file(1).is_some_and(|f| f.starts_with("libscalprof-delay"))
                }
                _ => false,
            },
        }
    }

    /// The innermost function of a user stack outside the C library and the loader (the
    /// lock code itself is libc's: the holder's own function is what held the lock),
    /// preferring one with a symbol to a bare address in a stripped library.
    fn own_function(&mut self, pid: i32, user_addrs: &[u64]) -> Option<String> {
        let mut bare = None;
        for (i, &addr) in user_addrs.iter().enumerate() {
            let lookup = if i == 0 { addr } else { addr.saturating_sub(1) };
            let library = self
                .processes
                .get(&pid)
                .and_then(|p| p.mapping(lookup))
                .is_some_and(|m| crate::locks::is_runtime_library(&m.path));
            if library {
                continue;
            }
            // An address's functions, innermost first: its inlined calls, then the
            // function they were inlined into.
            let ids: Vec<u32> = self.user_frames(pid, lookup).to_vec();
            for id in ids {
                let name = &self.names[id as usize];
                // A program's lock layer, or lock code linked into it (a static libc's,
                // Rust std's): the holder is the function that took the lock, past them.
                if scalprof_model::vocabulary::is_lock_wrapper(name)
                    || scalprof_model::vocabulary::is_user_lock_code(name)
                {
                    continue;
                }
                // Rust's std inlined into the critical section: the program's function
                // that called it holds the lock (the std frame is kept in case none
                // follows).
                if scalprof_model::vocabulary::is_rust_library_frame(name) {
                    bare.get_or_insert_with(|| name.clone());
                    continue;
                }
                if !name.starts_with('[') {
                    return Some(name.clone());
                }
                bare.get_or_insert_with(|| name.clone());
            }
        }
        bare
    }

    pub(super) fn kernel_frame(&mut self, addr: u64, kallsyms: &Kallsyms) -> u32 {
        let (id, unresolved) = match self.kernel_cache.get(&addr) {
            Some(&hit) => hit,
            None => {
                let (name, unresolved) = match kallsyms.lookup(addr) {
                    Some(n) => (format!("{n}_[k]"), false),
                    None => ("[unknown]_[k]".to_string(), true),
                };
                let id = self.intern(&name);
                self.kernel_cache.insert(addr, (id, unresolved));
                (id, unresolved)
            }
        };
        // Every frame that has no name counts, not each address once.
        if unresolved {
            self.stats.unresolved_frames += 1;
        }
        id
    }
}
