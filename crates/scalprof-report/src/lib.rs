//! scalprof reports for the terminal: the run summary (per-point table, model line,
//! user/system split, tracing line, what grew, lock tables, warnings, findings), the list
//! of stored runs, comparisons and layouts. HTML is in [`html`], flame graphs in [`flame`].

pub mod flame;
pub mod html;
pub mod pprof;
pub mod suite;

mod compare;
mod layout;
mod locks;
pub use compare::comparison;
pub use layout::{kernel_struct_text, layout_text};
pub(crate) use locks::ns;
use locks::row_share;
pub use locks::{lock_growth, lock_table};

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, Table};
use scalprof_model::{Model, ModelKind, Point, RunDocument, Spread};

/// Text for a terminal: control characters other than newline — which a workload's label,
/// command, output or symbol names may carry (ESC sequences can rewrite the screen or the
/// window title) — are shown in caret notation (`^[`), as `cat -v` does; C1 controls as
/// `\u{9b}`.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            '\u{7f}' => out.push_str("^?"),
            c if ('\u{80}'..='\u{9f}').contains(&c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            // Bidirectional overrides and isolates reorder what follows them on screen
            // (a fake verdict could read as a real one): shown as their code.
            c if is_bidi_control(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A command line as a shell would take it back: an argument with a space or a shell
/// character is single-quoted (`sh -c 'echo ops=1'`), so that it can be copied and rerun.
/// (Written here: the rule is four lines, and quoting for display only.)
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./{}-".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value from the workload or the user (a label, an argument, a symbol) put on one line
/// of a report: a newline in it would start a line of its own, so it is shown as `\n`.
pub fn one_line(value: &str) -> String {
    if !value.contains(['\n', '\r']) {
        return value.to_string();
    }
    value.replace('\n', "\\n").replace('\r', "\\r")
}

/// The terminal summary of a run.
pub fn summary(doc: &RunDocument) -> String {
    summary_with(doc, false, false)
}

/// The summary; `all_locks` shows every lock row instead of those above 1% of the
/// point's thread-time.
pub fn summary_with(doc: &RunDocument, all_locks: bool, verbose: bool) -> String {
    // The default screen is what to read first: the verdict, the points, the causes and
    // what to do. The measurement's own details (time split, counters, profile quality,
    // what grew, each point's lock table) come with `verbose` (`show -v`), or `--locks`.
    let verbose = verbose || all_locks;
    let mut out = String::new();
    let repeats: usize = doc
        .points
        .iter()
        .map(|p| p.repeats.len())
        .max()
        .unwrap_or(0);
    out += &format!(
        "run {} · {} · {} · {} point{} × {} repeat{}\n",
        doc.id,
        one_line(&doc.label),
        doc.status.as_str(),
        doc.points.len(),
        plural(doc.points.len()),
        repeats,
        plural(repeats)
    );
    out += &format!("command: {}\n", one_line(&shell_line(&doc.command)));
    out += &format!(
        "host:    Linux {}, {} CPUs, {}, {}\n",
        doc.host.kernel,
        doc.host.cpus,
        doc.host.cpu_model,
        if doc.host.pmu {
            "hardware PMU"
        } else {
            "no hardware PMU"
        }
    );
    out += &format!("throughput: {}\n", throughput_source_line(doc));
    // Warnings that make the rest of the screen moot come first, not at its end.
    for w in doc.warnings.iter().filter(|w| is_headline_warning(w.kind)) {
        out += &format!("  ! {}\n", w.message);
    }
    // The baseline's budget is useful work and scalprof's cost only: no verdict to read.
    let verdicts: Vec<String> = doc
        .points
        .iter()
        .skip(1)
        .filter_map(|p| {
            Some(verdict_line(
                doc.sweep.parameter.as_str(),
                p.value,
                p.budget.as_ref()?,
            ))
        })
        .collect();
    if !verdicts.is_empty() {
        out += "verdict (where the thread-time per operation went):\n";
        for v in verdicts {
            out += &format!("  {v}\n");
        }
    }
    out.push('\n');

    if doc.points.is_empty() {
        out += "no point was measured\n";
    } else {
        out += &points_table(doc).to_string();
        out.push('\n');
    }
    out += &format!(
        "\nmodel: {}\n",
        model_line(doc.model.as_ref(), doc.sweep.parameter.as_str())
    );
    if verbose {
        out += &details(doc, all_locks);
    }
    out += &lock_growth(doc);
    if let Some(c) = &doc.complexity {
        out += &complexity_table(c);
    }
    out += &warnings_and_findings(doc);
    if !verbose && !doc.points.is_empty() {
        out += &format!(
            "more: scalprof show {} -v (time split, counters, profile, what grew, lock tables)\n",
            doc.id
        );
    }
    out
}

/// The measurement's details: time split, counters, profile and tracing quality, what
/// grew, each point's lock table.
fn details(doc: &RunDocument, all_locks: bool) -> String {
    let mut out = String::new();
    if let Some(split) = split_line(&doc.points, doc.sweep.parameter.as_str()) {
        out += &format!("time:  {split}\n");
    }
    if let Some(line) = counters_line(doc) {
        out += &format!("counted: {line}\n");
    }
    if let Some(line) = profile_line(doc) {
        out += &format!("profile: {line}\n");
    }
    if let Some(line) = tracing_line(doc) {
        out += &format!("tracing: {line}\n");
    }
    if let Some(d) = &doc.scaling_diff {
        if d.points.len() >= 2 {
            out += &what_grew(d);
        }
    }
    for p in &doc.points {
        if let Some(l) = &p.locks {
            if all_locks {
                out += &lock_table(doc.sweep.parameter.as_str(), p.value, l);
                continue;
            }
            let mut shown = l.clone();
            shown
                .rows
                .retain(|r| row_share(p, r).is_none_or(|s| s >= 0.01));
            let hidden = l.rows.len() - shown.rows.len();
            let table = lock_table(doc.sweep.parameter.as_str(), p.value, &shown);
            out += &if hidden > 0 && shown.rows.is_empty() {
                table.replace(
                    "  no contended locks\n",
                    "  no lock above 1% of the thread-time\n",
                )
            } else {
                table
            };
            if hidden > 0 {
                out += &format!(
                    "  ({hidden} row{} below 1% of the thread-time not shown: scalprof show {} --locks)\n",
                    plural(hidden),
                    doc.id
                );
            }
        }
    }
    out
}

/// Warnings, then the findings with what to do, then where the workload's output is.
fn warnings_and_findings(doc: &RunDocument) -> String {
    let mut out = String::new();
    let rest: Vec<_> = doc
        .warnings
        .iter()
        .filter(|w| !is_headline_warning(w.kind))
        .collect();
    if !rest.is_empty() {
        out += "\nwarnings:\n";
        for w in rest {
            out += &format!("  ! {}\n", w.message);
        }
    }
    if !doc.findings.is_empty() {
        out += "\nfindings:\n";
        for f in &doc.findings {
            out += &format!(
                "  {:>4.0}%  {}  {}: {}\n",
                f.score * 100.0,
                f.kind,
                one_line(&f.subject),
                one_line(&f.evidence)
            );
            if let Some(w) = f.what_if {
                out += &format!(
                    "         without it: up to {:.2}× at {} {} (an upper bound)\n",
                    w.speedup, w.value, doc.sweep.parameter
                );
            }
            if !f.suggestion.is_empty() {
                out += &format!("         what to do: {}\n", one_line(&f.suggestion));
            }
        }
    }
    out += &format!("\nworkload output: {}\n", doc.output_dir);
    out
}

/// `2 threads: 54% useful · mmap_lock 40% (rwsem:W; __vm_munmap) · unexplained 6%`.
pub fn verdict_line(parameter: &str, value: u64, b: &scalprof_model::Budget) -> String {
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let mut parts = vec![format!("{} useful", pct(b.useful))];
    for c in b.causes.iter().filter(|c| c.share >= 0.01).take(3) {
        parts.push(if c.detail.is_empty() {
            format!("{} {}", one_line(&c.subject), pct(c.share))
        } else {
            format!(
                "{} {} ({})",
                one_line(&c.subject),
                pct(c.share),
                one_line(&c.detail)
            )
        });
    }
    let minor: f64 = b
        .causes
        .iter()
        .enumerate()
        .filter(|(i, c)| *i >= 3 || c.share < 0.01)
        .map(|(_, c)| c.share)
        .sum();
    if minor >= 0.005 {
        parts.push(format!("other causes {}", pct(minor)));
    }
    if b.overhead >= 0.005 {
        parts.push(format!("scalprof {}", pct(b.overhead)));
    }
    parts.push(format!("unexplained {}", pct(b.unexplained)));
    format!("{value} {parameter}: {}", parts.join(" · "))
}

/// Per point: how much slower (or faster) the traced repeats ran than the clean ones, and
/// scalprof's own cost in them (samples in its frames; its BPF programs' run time as a
/// share of the traced repeats' CPU time).
fn tracing_line(doc: &RunDocument) -> Option<String> {
    let parts: Vec<String> = doc
        .points
        .iter()
        .filter(|p| !p.traced_repeats.is_empty())
        .map(|p| {
            let mut bits = Vec::new();
            match p.perturbation {
                Some(x) => bits.push(format!("traced {:+.1}% vs clean", 100.0 * x)),
                None => bits.push("traced throughput unknown".into()),
            }
            if let Some(st) = p.profile.as_ref().map(|pr| &pr.stats) {
                let all = st.samples.max(1);
                bits.push(format!(
                    "overhead (scalprof) {:.1}% of samples",
                    100.0 * st.overhead_samples as f64 / all as f64
                ));
            }
            // The program's threads runnable while scalprof's own threads held the CPU.
            let behind: u64 = p.locks.as_ref().map_or(0, |l| {
                l.rows
                    .iter()
                    .filter(|r| r.name == scalprof_model::locks::CPU_WAIT_OBSERVER)
                    .map(|r| r.total_wait_ns)
                    .sum()
            });
            if behind > 0 {
                bits.push(format!(
                    "{} waiting for a CPU behind scalprof",
                    ns(behind as f64)
                ));
            }
            if let Some(l) = p.locks.as_ref().filter(|l| l.tracer.bpf_runs > 0) {
                let cpu_ns: f64 = p
                    .traced_repeats
                    .iter()
                    .filter(|r| r.succeeded())
                    .map(|r| (r.user_s + r.sys_s) * 1e9)
                    .sum();
                let share = if cpu_ns > 0.0 {
                    format!(
                        " ({:.2}% of CPU time)",
                        100.0 * l.tracer.bpf_run_ns as f64 / cpu_ns
                    )
                } else {
                    String::new()
                };
                bits.push(format!(
                    "BPF {:.1} ms in {} runs{share}",
                    l.tracer.bpf_run_ns as f64 / 1e6,
                    l.tracer.bpf_runs
                ));
            }
            format!("{} {}: {}", doc.sweep.parameter, p.value, bits.join(", "))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A sweep that swept nothing, or throughput computed on a wrong assumption: said under
/// the header, before any number.
fn is_headline_warning(kind: scalprof_model::WarningKind) -> bool {
    use scalprof_model::WarningKind::*;
    matches!(kind, NotSwept | FixedWork)
}

fn throughput_source_line(doc: &RunDocument) -> String {
    use scalprof_model::ThroughputSource::*;
    if let Some(why) = &doc.throughput.inferred {
        let formula = match doc.throughput.source {
            Strong => "throughput = 1 / wall",
            _ => "throughput = N / wall",
        };
        return format!("{} — no ops line; {why}; {formula}", doc.throughput.unit);
    }
    match doc.throughput.source {
        Ops => format!(
            "{} — operations printed by the workload ({}) per second of wall time",
            doc.throughput.unit,
            doc.throughput.ops_regex.as_deref().unwrap_or("?")
        ),
        Weak => format!(
            "{} — weak scaling (no ops line found): each thread does the same work, throughput = N / wall",
            doc.throughput.unit
        ),
        Strong => format!(
            "{} — strong scaling (no ops line found): fixed total work, throughput = 1 / wall",
            doc.throughput.unit
        ),
    }
}

fn points_table(doc: &RunDocument) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        doc.sweep.parameter.as_str(),
        "throughput",
        "speedup",
        "efficiency",
        "wall s (min–max)",
        "user s (min–max)",
        "sys s (min–max)",
        "ok",
    ]);
    for p in &doc.points {
        let ok = p.repeats.iter().filter(|r| r.succeeded()).count();
        t.add_row(vec![
            p.value.to_string(),
            p.throughput.map_or("—".into(), si),
            p.speedup.map_or("—".into(), |s| format!("{s:.2}×")),
            p.efficiency
                .map_or("—".into(), |e| format!("{:.0}%", e * 100.0)),
            spread(p.wall_s),
            spread(p.user_s),
            spread(p.sys_s),
            format!("{ok}/{}", p.repeats.len()),
        ]);
    }
    for i in 1..8 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

fn spread(s: Option<Spread>) -> String {
    match s {
        None => "—".into(),
        Some(s) => format!("{:.3} ({:.3}–{:.3})", s.median, s.min, s.max),
    }
}

/// Compact number: 3 significant digits with k/M/G suffixes.
pub fn si(x: f64) -> String {
    // Past tera (or below a thousandth, but not zero), scientific notation stays short.
    if x.is_finite() && x != 0.0 && (x.abs() >= 1e12 || x.abs() < 1e-3) {
        return format!("{x:.3e}");
    }
    let (v, suffix) = match x.abs() {
        a if a >= 1e9 => (x / 1e9, "G"),
        a if a >= 1e6 => (x / 1e6, "M"),
        a if a >= 1e3 => (x / 1e3, "k"),
        _ => (x, ""),
    };
    let digits = match v.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        _ => 2,
    };
    format!("{v:.digits$}{suffix}")
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

/// Three significant digits without an exponent for ordinary magnitudes.
fn g(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    if (-5..6).contains(&mag) {
        let decimals = (2 - mag).max(0) as usize;
        format!("{x:.decimals$}")
    } else {
        format!("{x:.2e}")
    }
}

/// "user/sys: 1 → 0.17 s user, 0.00 s sys (0% sys); 2 → …" — the split the case
/// studies read first.
fn split_line(points: &[Point], parameter: &str) -> Option<String> {
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
fn profile_line(doc: &RunDocument) -> Option<String> {
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
            Some(format!(
                "{} {}: {} samples ({} lost, {:.1}% truncated, {:.1}% unresolved)",
                doc.sweep.parameter,
                p.value,
                st.samples,
                st.lost_samples,
                pct(st.truncated_stacks, st.samples),
                pct(st.unresolved_frames, st.frames)
            ))
        })
        .collect();
    Some(format!(
        "{} @ {} Hz; {}",
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

/// A count: exact below a thousand, else with an SI suffix.
fn count(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else {
        si(n as f64)
    }
}

/// What-grew rows below this share of the last point's cost per op are not shown.
const MIN_SHARE_SHOWN: f64 = 0.01;

/// The "what grew" tables: top functions by growth in self cost per operation.
pub fn what_grew(d: &scalprof_model::ScalingDiff) -> String {
    let mut out = String::new();
    let (first, last) = (d.total_per_op[0], d.total_per_op[d.total_per_op.len() - 1]);
    if last <= first * 1.05 {
        return format!(
            "\nwhat grew: nothing notable; the sampled cost per op is flat ({} → {} {})\n",
            si(first),
            si(last),
            d.unit
        );
    }
    for (scope, rows) in [("kernel", &d.kernel), ("user", &d.user)] {
        // Rows that explain less than 1% of the cost at the last point are noise.
        let rows: Vec<_> = rows
            .iter()
            .filter(|r| r.share_of_loss >= MIN_SHARE_SHOWN)
            .take(8)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let mut t = Table::new();
        t.load_style(UTF8_BORDERS_ONLY);
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
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
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

/// One row of `scalprof runs`.
pub struct RunRow {
    pub id: i64,
    pub label: String,
    pub command: String,
    pub created: String,
    pub status: String,
    pub points: String,
}

pub fn runs_table(rows: &[RunRow]) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "id", "label", "status", "points", "created", "command",
    ]);
    for r in rows {
        t.add_row(vec![
            r.id.to_string(),
            one_line(&r.label),
            r.status.clone(),
            r.points.clone(),
            r.created.clone(),
            one_line(&r.command),
        ]);
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_sweep_says_why_it_has_no_model() {
        assert!(model_line(None, "size").contains("a·nᵏ"));
        assert!(model_line(None, "threads").contains("fewer than two"));
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(
            terminal_safe("a\x1b]0;pwned\x07b\nc\td\x7f\u{9b}2J"),
            "a^[]0;pwned^Gb\nc^Id^?\\u{9b}2J"
        );
        assert_eq!(terminal_safe("plain · text ✓"), "plain · text ✓");
        assert_eq!(
            terminal_safe("abc\u{202e}fed\u{2066}"),
            "abc\\u202efed\\u2066"
        );
        assert_eq!(one_line("a\nb\r"), "a\\nb\\r");
        let argv: Vec<String> = ["sh", "-c", "echo ops=1", "it's", "{threads}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_line(&argv), "sh -c 'echo ops=1' 'it'\\''s' {threads}");
    }

    #[test]
    fn compact_numbers() {
        assert_eq!(si(235_300_000.0), "235M");
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(12.345), "12.3");
        assert_eq!(si(0.5), "0.50");
        assert_eq!(g(0.0277), "0.0277");
        assert_eq!(g(0.000104), "0.000104");
        assert_eq!(g(1.5e-9), "1.50e-9");
    }

    fn growth(
        function: &str,
        kernel: bool,
        per_op: [f64; 2],
        share: f64,
    ) -> scalprof_model::FunctionGrowth {
        scalprof_model::FunctionGrowth {
            function: function.into(),
            in_kernel: kernel,
            self_per_op: per_op.to_vec(),
            inclusive_per_op: per_op.to_vec(),
            growth: per_op[1] - per_op[0],
            share_of_loss: share,
        }
    }

    #[test]
    fn what_grew_shows_growth_and_hides_noise() {
        let mut d = scalprof_model::ScalingDiff {
            unit: "ns/op".into(),
            points: vec![1, 2],
            total_per_op: vec![4.6, 31.2],
            samples: vec![500, 500],
            user: vec![growth("worker", false, [4.6, 31.1], 0.85)],
            kernel: vec![growth("handle_softirqs", true, [0.01, 0.03], 0.0006)],
        };
        let text = what_grew(&d);
        assert!(text.contains("worker") && text.contains("85%"), "{text}");
        assert!(
            !text.contains("handle_softirqs"),
            "noise rows are hidden: {text}"
        );
        d.total_per_op = vec![4.56, 4.53];
        assert!(what_grew(&d).contains("nothing notable"));
    }

    #[test]
    fn model_line_names_the_peak() {
        let m = Model {
            kind: ModelKind::Usl,
            sigma: 0.0277,
            kappa: 0.000104,
            lambda: 90.0,
            peak: Some(96.5),
            r2: 0.99,
            observations: 7,
            sigma_est: None,
            kappa_est: None,
            lambda_est: None,
            note: None,
        };
        let line = model_line(Some(&m), "threads");
        assert!(
            line.starts_with("USL σ=0.0277 κ=0.000104 λ=90.0 → peak ≈ 96.5 threads"),
            "{line}"
        );
    }
}
