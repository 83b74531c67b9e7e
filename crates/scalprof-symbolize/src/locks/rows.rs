//! One row's accumulation, shared by every source of rows: the waits summed over the
//! locks or calls that got its name, their callers, and the processes that waited.

use std::collections::HashMap;

use scalprof_model::locks::top_callers;
use scalprof_model::locks::{LockKind, LockRow, RawLocks};

/// A row's identity: waits of one name and kind are one row, over the processes of the
/// tree.
pub(super) type RowKey = (String, LockKind);

/// A row being summed: the row, its callers by wait, its wait by process.
pub(super) struct RowBuilder {
    pub row: LockRow,
    /// Caller → the wait it made.
    callers: HashMap<String, u64>,
    /// Process → its wait, to say which attached process did it.
    procs: HashMap<u32, u64>,
    /// Where the waiting threads began → their sampled wait.
    roots: HashMap<String, u64>,
}

impl RowBuilder {
    /// Starts a row with no waits yet.
    pub fn new(row: LockRow) -> RowBuilder {
        RowBuilder {
            row,
            callers: HashMap::new(),
            procs: HashMap::new(),
            roots: HashMap::new(),
        }
    }

    /// Adds `count` waits of process `tgid`, `total_ns` in all, the longest `max_ns`.
    pub fn add_wait(&mut self, tgid: u32, count: u64, total_ns: u64, max_ns: u64) {
        self.row.count += count;
        self.row.total_wait_ns += total_ns;
        self.row.max_wait_ns = self.row.max_wait_ns.max(max_ns);
        *self.procs.entry(tgid).or_default() += total_ns;
    }

    /// Adds `ns` of wait made by `caller`.
    pub fn add_caller(&mut self, caller: &str, ns: u64) {
        *self.callers.entry(caller.to_string()).or_default() += ns;
    }

    /// Adds waits by caller.
    pub fn add_callers(&mut self, callers: Option<&HashMap<String, u64>>) {
        for (f, &ns) in callers.into_iter().flatten() {
            self.add_caller(f, ns);
        }
    }

    /// Adds sampled waits by the outermost program function of the waiting threads.
    pub fn add_roots(&mut self, roots: Option<&HashMap<String, u64>>) {
        for (f, &ns) in roots.into_iter().flatten() {
            *self.roots.entry(f.clone()).or_default() += ns;
        }
    }

    /// The row, with its heaviest callers by their shares of the callers' wait and the
    /// attached process that waited most, if one did.
    pub fn finish(self, raw: &RawLocks) -> LockRow {
        let mut row = self.row;
        let total: u64 = self.callers.values().sum();
        row.callers = top_callers(self.callers, total);
        let rooted: u64 = self.roots.values().sum();
        row.waiter_roots = top_callers(self.roots, rooted);
        row.process = attached_process(raw, &self.procs);
        row
    }
}

/// The command name of the process that waited most, when it is an attached one (a server
/// observed with `--attach`): findings then say whose lock it is.
fn attached_process(raw: &RawLocks, by_tgid: &HashMap<u32, u64>) -> Option<String> {
    let (tgid, _) = by_tgid
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
    let comm = raw.waker_comms.get(tgid)?;
    raw.attached_comms.contains(comm).then(|| comm.clone())
}

/// The caller with the most wait.
/// A channel's row name, by its two ends (`chan main.produce → main.collect`): a channel
/// has no name of its own (the runtime allocates it), its ends are what its users know it
/// by. An end not seen is `?`.
pub(super) fn chan_name(sender: Option<&str>, receiver: Option<&str>) -> String {
    format!(
        "chan {} → {}",
        sender.unwrap_or("?"),
        receiver.unwrap_or("?")
    )
}

/// A user row's name while the rows are made: a channel keeps its two ends (an end not
/// seen is `None`) until every row is named, then all become the row's string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum RowName {
    Named(String),
    /// Named from where its lock word is: the place, or the function that takes a lock
    /// in memory with no symbol.
    Placed {
        text: String,
        place: scalprof_model::locks::LockPlace,
    },
    Chan {
        sender: Option<String>,
        receiver: Option<String>,
    },
}

impl RowName {
    pub(super) fn chan(sender: Option<&str>, receiver: Option<&str>) -> RowName {
        RowName::Chan {
            sender: sender.map(Into::into),
            receiver: receiver.map(Into::into),
        }
    }

    /// Whether its lock word is in memory a thread has of its own: allocated, or the Go
    /// runtime's first M (`runtime.m0`), where its idle threads park.
    pub(super) fn in_thread_memory(&self) -> bool {
        matches!(self, RowName::Placed { place, .. }
            if place.is_dynamic() || place.symbol() == Some("runtime.m0"))
    }

    /// The row's name in the lock table and the run document.
    pub(super) fn text(&self) -> String {
        match self {
            RowName::Named(name) | RowName::Placed { text: name, .. } => name.clone(),
            RowName::Chan { sender, receiver } => chan_name(sender.as_deref(), receiver.as_deref()),
        }
    }
}

pub(super) fn top_caller(callers: &HashMap<String, u64>) -> Option<&str> {
    callers
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(f, _)| f.as_str())
}
