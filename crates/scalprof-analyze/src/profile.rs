//! Profiles as data: merging a point's repeats, and telling scalprof's own frames apart.

use std::collections::HashMap;

use scalprof_model::{FoldedStack, HotInstruction, PointProfile};

/// Merges several repeats' profiles of one point.
pub fn merge(profiles: impl IntoIterator<Item = PointProfile>) -> Option<PointProfile> {
    let mut out: Option<PointProfile> = None;
    let mut stacks: HashMap<String, (u64, u64)> = HashMap::new();
    let mut hot: HashMap<(String, u64), (u64, u64)> = HashMap::new();
    for p in profiles {
        for h in &p.hot {
            let e = hot.entry((h.file.clone(), h.address)).or_insert((0, 0));
            e.0 += h.samples;
            e.1 = e.1.saturating_add(h.weight);
        }
        for f in &p.folded {
            let e = stacks.entry(f.stack.clone()).or_insert((0, 0));
            e.0 += f.samples;
            e.1 = e.1.saturating_add(f.weight);
        }
        match &mut out {
            None => {
                let mut first = p;
                first.folded.clear();
                out = Some(first);
            }
            Some(o) => {
                o.stats.add(&p.stats);
                o.serial.add(&p.serial);
                o.repeats += p.repeats;
            }
        }
    }
    let mut out = out?;
    out.hot = hot
        .into_iter()
        .map(|((file, address), (samples, weight))| HotInstruction {
            file,
            address,
            samples,
            weight,
        })
        .collect();
    out.hot.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| a.address.cmp(&b.address))
    });
    out.folded = stacks
        .into_iter()
        .map(|(stack, (samples, weight))| FoldedStack {
            stack,
            samples,
            weight,
        })
        .collect();
    out.folded
        .sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.stack.cmp(&b.stack)));
    Some(out)
}
