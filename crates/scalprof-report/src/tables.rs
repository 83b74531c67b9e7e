//! The summary's tables and lines: points, the model, the time split, the profile and
//! counters lines, what grew, and the complexity table.

use comfy_table::{CellAlignment, Table};
use scalprof_model::{
    FunctionGrowth, Model, ModelKind, Point, RunDocument, ScalingDiff, Spread, ThroughputSource,
};

use crate::format::{count, g, ns, si};
use crate::view::PointView;

pub(crate) fn points_table(doc: &RunDocument) -> Table {
    let mut t = crate::width::table();
    // A narrow terminal gets the wall time's spread, not the user and system times'.
    let narrow = crate::width::terminal_width().is_some_and(|w| w < crate::width::NARROW);
    // A size sweep has no speedup or efficiency: each size is its own workload.
    let threads = doc.sweep.parameter.scales();
    let mut header = vec![doc.sweep.parameter.as_str(), "throughput"];
    if threads {
        header.extend(["speedup", "efficiency"]);
    }
    header.push("wall s (min–max)");
    if !narrow {
        header.extend(["user s (min–max)", "sys s (min–max)"]);
    }
    header.push("ok");
    t.set_header(header);
    // A speedup from the weak-scaling assumption has the wall time's beside it, so a
    // wrong assumption cannot hide a slower command.
    let weak = doc.throughput.source == ThroughputSource::Weak;
    for p in &doc.points {
        let ok = p.repeats.iter().filter(|r| r.succeeded()).count();
        let v = PointView::of(p);
        let speedup = match p.wall_speedup.filter(|_| weak && p.speedup.is_some()) {
            Some(w) => format!("{} (wall {w:.2}×)", v.speedup),
            None => v.speedup,
        };
        let mut row = vec![p.value.to_string(), v.throughput];
        if threads {
            row.extend([speedup, v.efficiency]);
        }
        row.push(spread(p.wall_s));
        if !narrow {
            row.extend([spread(p.user_s), spread(p.sys_s)]);
        }
        row.push(format!("{ok}/{}", p.repeats.len()));
        t.add_row(row);
    }
    for i in 1..8 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

pub(crate) fn spread(s: Option<Spread>) -> String {
    match s {
        None => "—".into(),
        Some(s) => format!("{:.3} ({:.3}–{:.3})", s.median, s.min, s.max),
    }
}

/// "USL σ=0.04 κ=0.001 → peak ≈ 31 threads (R² 0.99)".
pub fn model_line(model: Option<&Model>, parameter: &str) -> String {
    let Some(m) = model else {
        if parameter == "size" {
            return "none for a size sweep: each function's cost is fitted as a·nᵏ (complexity below)"
                .into();
        }
        return "none (fewer than two measured points)".into();
    };
    let mut s = match m.kind {
        ModelKind::Usl => format!("USL σ={} κ={} λ={}", g(m.sigma), g(m.kappa), si(m.lambda)),
        ModelKind::Amdahl => format!("Amdahl σ={} λ={}", g(m.sigma), si(m.lambda)),
    };
    match m.peak {
        Some(peak) => {
            s += &format!(
                " → peak ≈ {peak:.1} {parameter} ({} at the peak)",
                si(m.predict(peak))
            )
        }
        None if m.sigma > 1.0 => {
            s += " → retrograde: throughput falls as threads are added (σ > 1)"
        }
        None if m.sigma > 0.0 => {
            s += &format!(
                " → no peak; throughput approaches λ/σ = {}",
                si(m.lambda / m.sigma)
            )
        }
        None => s += " → no contention measured (linear scaling)",
    }
    // The model's note (e.g. why Amdahl) is repeated by the typed warnings.
    s += &format!(" (R² {:.3})", m.r2);
    s
}

/// "user/sys: 1 → 0.17 s user, 0.00 s sys (0% sys); 2 → …" — the split the case
/// studies read first.
pub(crate) fn split_line(points: &[Point], parameter: &str) -> Option<String> {
    let parts: Vec<String> = points
        .iter()
        .filter_map(|p| {
            let (u, s) = (p.user_s?.median, p.sys_s?.median);
            let share = if u + s > 0.0 {
                100.0 * s / (u + s)
            } else {
                0.0
            };
            Some(format!(
                "{parameter} {}: {u:.2}s user {s:.2}s system ({share:.0}% system)",
                p.value
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// "cpu-clock @ 999 Hz; threads 1: 664 samples, threads 2: 5094 samples (0 lost, 0.5% truncated, 0.0% unresolved)".
pub(crate) fn profile_line(doc: &RunDocument) -> Option<String> {
    let sampling = doc.sampling.as_ref()?;
    let parts: Vec<String> = doc
        .points
        .iter()
        .filter_map(|p| {
            let st = &p.profile.as_ref()?.stats;
            let pct = |a: u64, b: u64| {
                if b == 0 {
                    0.0
                } else {
                    100.0 * a as f64 / b as f64
                }
            };
            let unmapped = match st.unmapped_processes {
                0 => String::new(),
                n => format!(", {n} programs gone before their maps were read"),
            };
            Some(format!(
                "{} {}: {} samples ({} lost, {:.1}% truncated, {:.1}% unresolved{unmapped})",
                doc.sweep.parameter,
                p.value,
                st.samples,
                st.lost_samples,
                pct(st.truncated_stacks, st.samples),
                pct(st.unresolved_frames, st.frames)
            ))
        })
        .collect();
    // The observer's own cost, over every point's traced repeats.
    let (mut samples, mut record, mut process) = (0u64, 0u64, 0u64);
    for st in doc
        .points
        .iter()
        .filter_map(|p| Some(&p.profile.as_ref()?.stats))
    {
        if st.record_cpu_ns + st.process_cpu_ns > 0 {
            samples += st.samples;
            record += st.record_cpu_ns;
            process += st.process_cpu_ns;
        }
    }
    let own = if samples > 0 {
        let ms = |ns: u64| ns as f64 / 1e6;
        format!(
            "; scalprof's own CPU {:.0} ms ({:.0} reading while it ran, {:.0} unwinding and symbolizing after), {:.1} µs per sample",
            ms(record + process),
            ms(record),
            ms(process),
            (record + process) as f64 / 1e3 / samples as f64
        )
    } else {
        String::new()
    };
    Some(format!(
        "{} @ {} Hz; {}{own}",
        sampling.event,
        sampling.frequency,
        parts.join("; ")
    ))
}

/// The counted events per point (medians of the clean repeats, per run of the workload),
/// and once, which the machine cannot count.
pub fn counters_line(doc: &RunDocument) -> Option<String> {
    let parts: Vec<String> = doc
        .points
        .iter()
        .filter_map(|p| {
            let c = p.counters?;
            let mut s = format!(
                "{} {}: {} context switches, {} page faults",
                doc.sweep.parameter,
                p.value,
                count(c.context_switches),
                count(c.page_faults)
            );
            if c.major_faults > 0 {
                s += &format!(" ({} major)", count(c.major_faults));
            }
            if let Some(m) = c.cpu_migrations {
                s += &format!(", {} CPU migrations", count(m));
            }
            if let Some(ipc) = c.ipc {
                s += &format!(", IPC {ipc:.2}");
            }
            if let Some(l) = c.llc_misses {
                s += &format!(", {} LLC misses", count(l));
            }
            Some(s)
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    let counted_pmu = doc
        .points
        .iter()
        .any(|p| p.counters.is_some_and(|c| c.cycles.is_some()));
    let mut line = parts.join("; ");
    if !counted_pmu {
        line += " (no PMU here: cycles, instructions, IPC and LLC misses are not counted)";
    }
    Some(line)
}

/// What-grew rows below this share of the last point's cost per op are not shown.
pub(crate) const MIN_SHARE_SHOWN: f64 = 0.01;

/// The "what grew" rows of one scope worth showing, at most `n`: those that explain at
/// least [`MIN_SHARE_SHOWN`] of the cost at the last point (the others are noise).
pub(crate) fn grown(rows: &[FunctionGrowth], n: usize) -> Vec<&FunctionGrowth> {
    rows.iter()
        .filter(|r| r.share_of_loss >= MIN_SHARE_SHOWN)
        .take(n)
        .collect()
}

/// Why "what grew" has no table, when it has none: the sampled cost per operation is flat
/// (grew less than 5%), or no function's growth reaches [`MIN_SHARE_SHOWN`] of it.
pub(crate) fn nothing_grew(d: &ScalingDiff) -> Option<String> {
    let (first, last) = (d.total_per_op[0], d.total_per_op[d.total_per_op.len() - 1]);
    let totals = format!("{} → {} {}", si(first), si(last), d.unit);
    if last <= first * 1.05 {
        return Some(format!("the sampled cost per op is flat ({totals})"));
    }
    if grown(&d.kernel, 1).is_empty() && grown(&d.user, 1).is_empty() {
        return Some(format!(
            "no function's growth reaches {:.0}% of the cost per op ({totals})",
            MIN_SHARE_SHOWN * 100.0
        ));
    }
    None
}

/// The "what grew" tables: top functions by growth in self cost per operation.
pub fn what_grew(d: &ScalingDiff) -> String {
    let mut out = String::new();
    if let Some(why) = nothing_grew(d) {
        return format!("\nnothing grew: {why}\n");
    }
    for (scope, rows) in [("kernel", &d.kernel), ("user", &d.user)] {
        let rows = grown(rows, 8);
        if rows.is_empty() {
            continue;
        }
        let mut t = crate::width::table();
        let mut header = vec![format!("{scope} function (self)")];
        header.extend(d.points.iter().map(|p| format!("{} @{p}", d.unit)));
        header.push("growth".into());
        header.push("share of loss".into());
        t.set_header(header);
        for r in rows {
            let mut row = vec![r.function.clone()];
            row.extend(r.self_per_op.iter().map(|v| si(*v)));
            row.push(format!("+{}", si(r.growth)));
            row.push(format!("{:.0}%", r.share_of_loss * 100.0));
            t.add_row(row);
        }
        for i in 1..d.points.len() + 3 {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        out += &format!(
            "\nwhat grew ({scope}), total {}: {}\n",
            d.unit,
            d.total_per_op
                .iter()
                .map(|v| si(*v))
                .collect::<Vec<_>>()
                .join(" → ")
        );
        out += &t.to_string();
        out.push('\n');
    }
    out
}

/// Power-law fits of a size sweep: the workload and its steepest functions.
pub fn complexity_table(c: &scalprof_model::ComplexityReport) -> String {
    let mut t = crate::width::table();
    let (first, last) = (c.sizes[0], c.sizes[c.sizes.len() - 1]);
    t.set_header(vec![
        "function (self)".to_string(),
        "k (cost ≈ a·nᵏ)".into(),
        "95% interval".into(),
        "R²".into(),
        format!("cost @{first}"),
        format!("cost @{last}"),
    ]);
    t.add_row(vec![
        "(whole workload)".to_string(),
        format!("{:.2}", c.overall.exponent),
        format!("{:.2}–{:.2}", c.overall.ci95[0], c.overall.ci95[1]),
        format!("{:.3}", c.overall.r2),
        ns(c.total_cost[0]),
        ns(c.total_cost[c.total_cost.len() - 1]),
    ]);
    for f in c.functions.iter().take(10) {
        let mut name = f.function.clone();
        if f.in_kernel {
            name += " [k]";
        }
        if let Some(n) = f.absent_below {
            name += &format!(" (absent ≤{n})");
        }
        t.add_row(vec![
            name,
            format!("{:.2}", f.fit.exponent),
            format!("{:.2}–{:.2}", f.fit.ci95[0], f.fit.ci95[1]),
            format!("{:.3}", f.fit.r2),
            ns(f.self_cost[0]),
            ns(f.self_cost[f.self_cost.len() - 1]),
        ]);
    }
    format!(
        "\ncomplexity over sizes {}:\n{t}\n  (a function's self cost includes the libc memory and string calls it makes; \
         those keep their own rows, and are judged in their callers: their cost per call grows with the data)\n",
        c.sizes
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}
