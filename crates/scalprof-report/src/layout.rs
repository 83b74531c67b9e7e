//! Cache-line layouts for the terminal: a binary's globals by line, and a kernel struct.

/// The `nm | sort` view, automated: data objects by address, grouped by cache line, with
/// types and members; lines where a lock or an atomically written object shares with
/// other data are flagged with the reason.
/// `lines` is the analysis of `l` at `line` bytes (`scalprof_analyze::layout::lay_out`).
pub fn layout_text(
    l: &scalprof_model::layout::Layout,
    lines: &[scalprof_model::layout::LaidOutLine],
    what: &str,
    line: u64,
) -> String {
    let mut out = format!("layout of {what}, {line}-byte cache lines\n");
    if let Some(arch) = &l.foreign_architecture {
        out += &format!("warning: the binary is for {arch}, not this machine's architecture: its atomic instructions are not decoded, and the cache-line size is this machine's (--line-size to set the target's)\n");
    }
    if !l.has_symbols {
        return out + "no data symbols: the symbol table was stripped; nothing to lay out\n";
    }
    if !l.has_dwarf {
        out += "debug info missing: symbols only (no types or members); build with -g or install the debug symbols\n";
    }
    let mut flags = Vec::new();
    for cl in lines {
        let start = cl.start;
        out += &format!("\nline {start:#x}\n");
        for o in cl.objects.iter().filter_map(|&i| l.objects.get(i)) {
            let mut marks = Vec::new();
            if o.lock_type {
                marks.push("lock");
            }
            if o.atomic_target {
                marks.push("atomic target");
            }
            out += &format!(
                "  {:#x}  {:<24} {:>6} B  {}{}\n",
                o.address,
                o.name,
                o.size,
                o.type_name.as_deref().unwrap_or("?"),
                if marks.is_empty() {
                    String::new()
                } else {
                    format!("  [{}]", marks.join(", "))
                }
            );
            for m in &o.members {
                let a = o.address + m.offset;
                if a + m.size.max(1) <= start || a >= start + line {
                    continue;
                }
                out += &format!(
                    "      +{:<4} {:<20} {:>4} B  {}\n",
                    m.offset, m.name, m.size, m.type_name
                );
            }
        }
        if let Some(risk) = &cl.risk {
            flags.push(line_risk_text(risk));
        }
    }
    if !flags.is_empty() {
        out += "\nflagged:\n";
        for f in flags {
            out += &format!("  ! {f}\n");
        }
    }
    out
}

pub(crate) fn line_risk_text(risk: &scalprof_model::layout::LineRisk) -> String {
    use scalprof_model::layout::LineRisk;
    match risk {
        LineRisk::HotObjects { line, hot, others } => format!(
            "line {line:#x}: {} (written by locks/atomics) share the line with {}: a write by one CPU invalidates the line in the others (false sharing); align the hot object to its own line and pad it",
            hot.join(", "),
            if others.is_empty() {
                "each other".to_string()
            } else {
                others.join(", ")
            }
        ),
        LineRisk::Locks { line, object, locks } => format!(
            "line {line:#x}: locks {} of {object} share the line: taking one invalidates the other in every CPU's cache (false sharing); give each lock its own cache line",
            locks.join(", ")
        ),
        LineRisk::AtomicFields {
            line,
            object,
            fields,
        } => format!(
            "line {line:#x}: {object} is written atomically and its fields {} share the line — threads updating different fields bounce it (false sharing); move the written counters apart and pad them",
            fields.join(", ")
        ),
    }
}

/// A kernel struct from BTF, member by member, grouped into cache lines.
pub fn kernel_struct_text(
    name: &str,
    size: u64,
    members: &[scalprof_model::layout::Member],
    line: u64,
) -> String {
    let mut out =
        format!("{name} ({size} bytes, {line}-byte cache lines) — from the running kernel's BTF\n");
    let mut current = u64::MAX;
    for m in members {
        if m.offset / line != current {
            current = m.offset / line;
            out += &format!("--- cache line {current} (offset {}) ---\n", current * line);
        }
        let lock = if scalprof_model::layout::is_kernel_lock_member(&m.type_name) {
            "  [lock]"
        } else {
            ""
        };
        let straddles = if m.size > 0 && (m.offset + m.size - 1) / line != current {
            "  (straddles into the next line)"
        } else {
            ""
        };
        out += &format!(
            "  +{:<6} {:<32} {:>5} B  {}{lock}{straddles}\n",
            m.offset, m.name, m.size, m.type_name
        );
    }
    out
}
