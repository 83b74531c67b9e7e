//! Merging lock tables: repeats into one table, the two sides of a reader-writer lock into
//! one row, and the elements of one lock array into one cause.

use scalprof_model::locks::{
    sort_holder_waits, sort_rows, top_callers, HeldWait, HoldTimes, HolderState, HolderWait,
    LockAddress, LockCaller, LockKind, LockProfile, LockRow, Scope, TOP_CALLERS,
};
use std::collections::HashMap;

/// The variable a user lock named `SYMBOL+0xOFFSET` lies in (`stripes` for
/// `stripes+0xb80`), when it is one: not unnamed code (`[zstd]+0x…`), nor a heap or
/// caller-named lock.
fn object_of(name: &str) -> Option<(&str, &str)> {
    // The element at offset 0 is named by the bare symbol.
    let (sym, off) = name.rsplit_once("+0x").unwrap_or((name, "0"));
    let plain = !sym.is_empty()
        && sym
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '$'));
    (plain && !off.is_empty() && off.chars().all(|c| c.is_ascii_hexdigit())).then_some((sym, off))
}

/// One object, one cause: user locks that are elements of one array or fields of one
/// struct (`stripes+0xb80`, `stripes+0x8c0`, …) become one row named by the variable,
/// with the count and the busiest elements in its `address`; waits and spinning add up,
/// the maximum is the largest, the callers are weighed by each element's wait. A variable
/// with one contended lock keeps its `SYMBOL+0xOFFSET` name.
pub fn group_objects(rows: &mut Vec<LockRow>) {
    use std::collections::BTreeMap;
    let mut groups: BTreeMap<(String, String, Option<String>), Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.scope != Scope::User || r.attributed_to.is_some() {
            continue;
        }
        if let Some((sym, _)) = object_of(&r.name) {
            groups
                .entry((sym.to_string(), r.lock_type.to_string(), r.process.clone()))
                .or_default()
                .push(i);
        }
    }
    let mut remove: Vec<usize> = Vec::new();
    for ((sym, _, _), idx) in groups {
        if idx.len() < 2 {
            continue;
        }
        let merged = merge_elements(rows, &idx, sym);
        remove.extend(idx.iter().skip(1).copied());
        let first = idx[0];
        rows[first] = merged;
    }
    remove.sort_unstable();
    for i in remove.into_iter().rev() {
        rows.remove(i);
    }
}

/// The rows `idx` of one variable `sym`'s elements as one row (see [`group_objects`]).
fn merge_elements(rows: &[LockRow], idx: &[usize], sym: String) -> LockRow {
    let cost = |r: &LockRow| (r.total_wait_ns + r.spin_ns.unwrap_or(0)) as f64;
    let total: f64 = idx.iter().map(|&i| cost(&rows[i])).sum::<f64>().max(1.0);
    let mut callers: HashMap<String, u64> = HashMap::new();
    let mut holders = Holders::default();
    let mut states: Seen = HashMap::new();
    let mut held_stacks: HashMap<String, (u64, u64)> = HashMap::new();
    let mut elements: Vec<(String, f64)> = Vec::new();
    let mut roots: HashMap<String, f64> = HashMap::new();
    let mut merged = rows[idx[0]].clone();
    merged.count = 0;
    merged.total_wait_ns = 0;
    merged.max_wait_ns = 0;
    merged.spin_ns = None;
    merged.hold = None;
    for &i in idx {
        let r = &rows[i];
        merged.hold = HoldTimes::merge(merged.hold.as_ref(), r.hold.as_ref());
        merged.count += r.count;
        merged.total_wait_ns += r.total_wait_ns;
        merged.max_wait_ns = merged.max_wait_ns.max(r.max_wait_ns);
        if let Some(s) = r.spin_ns {
            merged.spin_ns = Some(merged.spin_ns.unwrap_or(0) + s);
        }
        for c in &r.callers {
            *callers.entry(c.function.clone()).or_default() += (c.share * cost(r)) as u64;
        }
        for c in &r.holders {
            holders.add(c, c.share * cost(r));
            note_state(&mut states, c);
        }
        add_stacks(&mut held_stacks, &r.holder_stacks);
        for c in &r.waiter_roots {
            *roots.entry(c.function.clone()).or_default() += c.share * cost(r);
        }
        let off = object_of(&r.name).map_or("", |(_, o)| o);
        elements.push((format!("+0x{off}"), cost(r) / total));
    }
    elements.sort_by(|a, b| b.1.total_cmp(&a.1));
    let busiest: Vec<String> = elements
        .iter()
        .take(3)
        .map(|(o, s)| format!("{o} {:.0}%", s * 100.0))
        .collect();
    merged.name = sym;
    merged.address = LockAddress::Array {
        elements: idx.len(),
        busiest: busiest.join(", "),
    };
    let weight: u64 = callers.values().sum();
    merged.callers = top_callers(callers, weight.max(1));
    merged.holders = ranked_holders(holders.weights(), &states);
    merged.holder_stacks = heaviest_stacks(held_stacks);
    merged.waiter_roots = ranked(roots);
    merged
}

/// The rows of one lock (its read and write sides, or one row): counts and waits summed,
/// the heaviest side's type and callers, the longest wait.
pub(crate) fn combine_sides<'a>(rows: impl Iterator<Item = &'a LockRow>) -> Option<LockRow> {
    let mut rows: Vec<&LockRow> = rows.collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.total_wait_ns + r.spin_ns.unwrap_or(0)));
    let mut out = (*rows.first()?).clone();
    for r in &rows[1..] {
        out.count += r.count;
        out.total_wait_ns += r.total_wait_ns;
        out.max_wait_ns = out.max_wait_ns.max(r.max_wait_ns);
        out.channels = add_channels(out.channels, r.channels);
        out.hold = HoldTimes::merge(out.hold.as_ref(), r.hold.as_ref());
        if let Some(spin) = r.spin_ns {
            *out.spin_ns.get_or_insert(0) += spin;
        }
        if out.attributed_to.is_none() {
            out.attributed_to.clone_from(&r.attributed_to);
        }
    }
    Some(out)
}

/// The channels of two rows' waits (distinct objects: each repeat, each side has its own).
fn add_channels(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

/// (scope, name, type): what makes two rows the same lock.
type RowKey = (Scope, String, LockKind);

/// What the repeats said of one row, summed: the row with its counts and waits, and
/// the weights of its callers, holders and holders' waits.
struct RowSum {
    row: LockRow,
    callers: HashMap<String, f64>,
    holders: Holders,
    states: Seen,
    held_stacks: HashMap<String, (u64, u64)>,
    /// What the holders did, averaged over the repeats by their waits: (running × wait,
    /// wait), when a repeat measured it.
    running: Option<(f64, f64)>,
    chains: HashMap<HeldWait, f64>,
    chain_weight: Option<f64>,
    /// Where the waiting threads began, by wait.
    roots: HashMap<String, f64>,
}

impl RowSum {
    /// An empty sum for the lock of `r`: its names and type, nothing counted.
    fn new(r: &LockRow) -> Self {
        let mut row = r.clone();
        row.count = 0;
        row.total_wait_ns = 0;
        row.max_wait_ns = 0;
        row.callers.clear();
        row.hold = None;
        row.channels = None;
        RowSum {
            row,
            callers: HashMap::new(),
            holders: Holders::default(),
            states: HashMap::new(),
            held_stacks: HashMap::new(),
            running: None,
            chains: HashMap::new(),
            chain_weight: None,
            roots: HashMap::new(),
        }
    }

    /// Adds one repeat's row, its callers and holders weighed by its wait.
    fn add(&mut self, r: &LockRow) {
        self.row.hold = HoldTimes::merge(self.row.hold.as_ref(), r.hold.as_ref());
        self.row.count += r.count;
        self.row.total_wait_ns += r.total_wait_ns;
        self.row.max_wait_ns = self.row.max_wait_ns.max(r.max_wait_ns);
        self.row.channels = add_channels(self.row.channels, r.channels);
        for c in &r.callers {
            *self.callers.entry(c.function.clone()).or_default() +=
                c.share * r.total_wait_ns as f64;
        }
        for c in &r.holders {
            self.holders.add(c, c.share * r.total_wait_ns as f64);
            note_state(&mut self.states, c);
        }
        add_stacks(&mut self.held_stacks, &r.holder_stacks);
        for c in &r.waiter_roots {
            *self.roots.entry(c.function.clone()).or_default() += c.share * r.total_wait_ns as f64;
        }
        let w = r.total_wait_ns.max(1) as f64;
        if let Some(x) = r.holder_running {
            let e = self.running.get_or_insert_default();
            e.0 += x * w;
            e.1 += w;
        }
        if r.holder_running.is_some() || !r.holder_waits.is_empty() {
            *self.chain_weight.get_or_insert_default() += w;
            for hw in &r.holder_waits {
                *self.chains.entry(hw.on.clone()).or_default() += hw.share * w;
            }
        }
    }

    /// The merged row: callers and holders ranked, the holders' waits as shares.
    fn finish(self) -> LockRow {
        let mut row = self.row;
        row.callers = ranked(self.callers);
        row.holders = ranked_holders(self.holders.weights(), &self.states);
        row.holder_running = self.running.map(|(x, w)| x / w);
        row.holder_stacks = heaviest_stacks(self.held_stacks);
        row.waiter_roots = ranked(self.roots);
        let weight = self.chain_weight.unwrap_or(1.0);
        let mut waits: Vec<HolderWait> = self
            .chains
            .into_iter()
            .map(|(on, x)| HolderWait {
                on,
                share: x / weight,
            })
            .collect();
        sort_holder_waits(&mut waits);
        row.holder_waits = waits;
        row
    }
}

/// Adds a later repeat's header to the first's: snapshots, repeats, failures, the
/// tracer's cost and the attached processes.
fn add_header(o: &mut LockProfile, p: LockProfile) {
    o.snapshots += p.snapshots;
    o.snapshots_resolved += p.snapshots_resolved;
    o.repeats += p.repeats;
    let f = &mut o.failures;
    f.task_map_full += p.failures.task_map_full;
    f.stack_failures += p.failures.stack_failures;
    f.aggregation_map_full += p.failures.aggregation_map_full;
    f.nested += p.failures.nested;
    f.lost_snapshots += p.failures.lost_snapshots;
    f.undecoded += p.failures.undecoded;
    o.tracer.add(&p.tracer);
    o.hold_timed_repeats.extend(p.hold_timed_repeats);
    for a in p.attached {
        if !o.attached.contains(&a) {
            o.attached.push(a);
        }
    }
    for r in p.runtimes {
        if !o.runtimes.contains(&r) {
            o.runtimes.push(r);
        }
    }
    o.runtimes.sort();
}

/// Merges the lock profiles of a point's repeats: rows by (scope, name, type).
pub fn merge(profiles: impl IntoIterator<Item = LockProfile>) -> Option<LockProfile> {
    let mut out: Option<LockProfile> = None;
    let mut rows: HashMap<RowKey, RowSum> = HashMap::new();
    for mut p in profiles {
        for r in &p.rows {
            rows.entry((r.scope, r.name.clone(), r.lock_type.clone()))
                .or_insert_with(|| RowSum::new(r))
                .add(r);
        }
        match &mut out {
            None => {
                p.rows.clear();
                out = Some(p);
            }
            Some(o) => add_header(o, p),
        }
    }
    let mut out = out?;
    out.rows = rows.into_values().map(RowSum::finish).collect();
    sort_rows(&mut out.rows);
    Some(out)
}

/// Functions by weight, the heaviest [`TOP_CALLERS`] with their shares.
fn ranked(weights: HashMap<String, f64>) -> Vec<LockCaller> {
    let mut v: Vec<(String, f64)> = weights.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    // Summed in that order: a HashMap's order changes from one process to the next, and
    // with it the last bits of every share of the run document.
    let total: f64 = v.iter().map(|(_, w)| w).sum();
    v.into_iter()
        .take(TOP_CALLERS)
        .map(|(function, w)| LockCaller::new(function, if total > 0.0 { w / total } else { 0.0 }))
        .collect()
}

/// The holders of rows being merged, by weight: those sampled running apart from the
/// release points named where a repeat (or an element) had too few holder samples.
#[derive(Default)]
struct Holders {
    on_cpu: HashMap<String, f64>,
    released: HashMap<String, f64>,
}

impl Holders {
    fn add(&mut self, c: &LockCaller, weight: f64) {
        let to = if c.state == Some(HolderState::AtRelease) {
            &mut self.released
        } else {
            &mut self.on_cpu
        };
        *to.entry(c.function.clone()).or_default() += weight;
    }

    /// What the holders ran, where any repeat sampled them: the repeats that could only
    /// say where the lock was released are the same waits unsampled, and their release
    /// point is not what the holders did (kmap_flush's holder, sampled in its flush in
    /// one traced repeat, fell below 3 samples in the other, whose release point
    /// `kmap_high` then outweighed the flush, in 2 of the last 8 CI runs). Else the release
    /// points.
    fn weights(self) -> HashMap<String, f64> {
        if self.on_cpu.is_empty() {
            self.released
        } else {
            self.on_cpu
        }
    }
}

/// What the merged rows saw of each holder: its state (on-CPU evidence wins over a
/// release point) and a stack.
type Seen = HashMap<String, (Option<HolderState>, Option<String>)>;

fn note_state(seen: &mut Seen, c: &LockCaller) {
    let e = seen.entry(c.function.clone()).or_default();
    if c.state == Some(HolderState::OnCpu) || e.0.is_none() {
        e.0 = c.state.or(e.0);
    }
    if e.1.is_none() {
        e.1 = c.stack.clone();
    }
}

/// [`ranked`] holders, each with what was seen of it.
fn ranked_holders(weights: HashMap<String, f64>, seen: &Seen) -> Vec<LockCaller> {
    let mut v = ranked(weights);
    for c in &mut v {
        if let Some((state, stack)) = seen.get(&c.function) {
            c.state = *state;
            c.stack = stack.clone();
        }
    }
    v
}

/// Holder stacks summed, the heaviest kept.
fn add_stacks(to: &mut HashMap<String, (u64, u64)>, from: &[scalprof_model::profile::FoldedStack]) {
    for f in from {
        let e = to.entry(f.stack.clone()).or_default();
        e.0 += f.samples;
        e.1 += f.weight;
    }
}

fn heaviest_stacks(
    stacks: HashMap<String, (u64, u64)>,
) -> Vec<scalprof_model::profile::FoldedStack> {
    let mut v: Vec<scalprof_model::profile::FoldedStack> = stacks
        .into_iter()
        .map(
            |(stack, (samples, weight))| scalprof_model::profile::FoldedStack {
                stack,
                samples,
                weight,
            },
        )
        .collect();
    v.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.stack.cmp(&b.stack)));
    v.truncate(40);
    v
}

#[cfg(test)]
#[test]
fn elements_of_one_array_are_one_row() {
    let row = |name: &str, wait: u64, caller: &str| LockRow {
        address: scalprof_model::locks::LockAddress::Traced(0x1000),
        count: 10,
        total_wait_ns: wait,
        max_wait_ns: wait / 5,
        callers: vec![LockCaller {
            function: caller.into(),
            share: 1.0,
            state: None,
            stack: None,
        }],
        ..LockRow::new(Scope::User, name, LockKind::Mutex)
    };
    let mut rows = vec![
        row("stripes", 100, "update"),
        row("stripes+0x40", 300, "update"),
        row("stripes+0xb80", 600, "update"),
        row("table_lock", 50, "lookup"),
        row("[zstd]+0xae28", 70, "x"),
        row("_PyRuntime+0x188", 20, "take_gil"),
    ];
    group_objects(&mut rows);
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["stripes", "table_lock", "[zstd]+0xae28", "_PyRuntime+0x188"]
    );
    let s = &rows[0];
    assert_eq!((s.count, s.total_wait_ns, s.max_wait_ns), (30, 1000, 120));
    assert!(
        s.address
            .to_string()
            .starts_with("3 elements; busiest +0xb80 60%"),
        "{}",
        s.address
    );
    assert!(matches!(s.address, LockAddress::Array { elements: 3, .. }));
    assert_eq!(s.callers[0].function, "update");
}

#[cfg(test)]
#[test]
fn repeats_merge_holders_per_row_with_their_own_state_and_chain() {
    use scalprof_model::locks::{HeldWait, HolderWait};
    let holder = |f: &str, state: HolderState| LockCaller {
        state: Some(state),
        ..LockCaller::new(f, 1.0)
    };
    let row = |name: &str, wait: u64, h: LockCaller, running: f64, disk: f64| LockRow {
        count: 10,
        total_wait_ns: wait,
        holders: vec![h],
        holder_running: Some(running),
        holder_waits: vec![HolderWait {
            on: HeldWait::Syscall("fdatasync".into()),
            share: disk,
        }],
        ..LockRow::new(Scope::User, name, LockKind::Mutex)
    };
    let profile = |rows: Vec<LockRow>| LockProfile {
        rows,
        repeats: 1,
        ..Default::default()
    };
    let merged = merge([
        profile(vec![
            row("a", 100, holder("f", HolderState::OnCpu), 0.2, 0.6),
            row("b", 100, holder("f", HolderState::AtRelease), 0.5, 0.0),
        ]),
        profile(vec![row(
            "a",
            300,
            holder("f", HolderState::OnCpu),
            0.6,
            0.2,
        )]),
    ])
    .unwrap();
    let a = merged.rows.iter().find(|r| r.name == "a").unwrap();
    let b = merged.rows.iter().find(|r| r.name == "b").unwrap();
    // One row's on-CPU evidence does not change another's.
    assert_eq!(a.holders[0].state, Some(HolderState::OnCpu));
    assert_eq!(b.holders[0].state, Some(HolderState::AtRelease));
    // Averaged by the repeats' waits: (0.2·100 + 0.6·300) / 400.
    assert!((a.holder_running.unwrap() - 0.5).abs() < 1e-9);
    assert!((a.holder_waits[0].share - 0.3).abs() < 1e-9);
    // A repeat with too few holder samples names where the lock was released: the other
    // repeat's running holder stands for its waits, however long.
    let merged = merge([
        profile(vec![row(
            "c",
            100,
            holder("flush", HolderState::OnCpu),
            0.9,
            0.0,
        )]),
        profile(vec![row(
            "c",
            300,
            holder("unlock_site", HolderState::AtRelease),
            0.1,
            0.0,
        )]),
    ])
    .unwrap();
    let c = &merged.rows[0];
    assert_eq!(c.holders.len(), 1, "{:?}", c.holders);
    assert_eq!(c.holders[0].function, "flush");
    assert_eq!(c.holders[0].state, Some(HolderState::OnCpu));
}

#[cfg(test)]
#[test]
fn shares_have_the_same_bits_whatever_the_map_order() {
    // Weights whose float sum depends on its order; every HashMap iterates in its own.
    let pairs = [
        ("a", 1.0),
        ("b", 1e-16),
        ("c", 1e-16),
        ("d", 3e-16),
        ("e", 0.1),
    ];
    let bits = |callers: Vec<LockCaller>| -> Vec<u64> {
        callers.iter().map(|c| c.share.to_bits()).collect()
    };
    let first = bits(ranked(
        pairs.iter().map(|(k, w)| (k.to_string(), *w)).collect(),
    ));
    for _ in 0..50 {
        let again = bits(ranked(
            pairs.iter().map(|(k, w)| (k.to_string(), *w)).collect(),
        ));
        assert_eq!(again, first);
    }
}
