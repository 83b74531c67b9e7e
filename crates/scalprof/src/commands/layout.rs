//! `scalprof layout`: what shares a cache line, in a binary or the kernel.

use std::process::ExitCode;

use anyhow::{Context, Result};
use scalprof_pipeline::facade;

use crate::cli;

/// `scalprof layout`: what shares a cache line, in a binary or the kernel.
pub fn layout(args: cli::LayoutArgs) -> Result<ExitCode> {
    let line = args.line_size.unwrap_or_else(facade::cache_line_size);
    if line == 0 || !line.is_power_of_two() {
        anyhow::bail!("--line-size must be a power of two (64 on x86-64, 128 on some arm64)");
    }
    if args.kernel {
        out!("{}", kernel_layout(&args, line)?);
        return Ok(ExitCode::SUCCESS);
    }
    let binary = args
        .binary
        .as_ref()
        .expect("clap requires it without --kernel");
    let (layout, lines) = facade::lay_out_binary(binary, line)?;
    out!(
        "{}",
        scalprof_report::layout_text(&layout, &lines, &binary.display().to_string(), line)
    );
    Ok(ExitCode::SUCCESS)
}
/// `layout --kernel`: a struct from BTF, or the globals around an address from kallsyms.
fn kernel_layout(args: &cli::LayoutArgs, line: u64) -> Result<String> {
    let mut out = String::new();
    if let Some(name) = &args.struct_name {
        let s = facade::kernel_struct(name)?;
        out += &scalprof_report::kernel_struct_text(&s.name, s.size, &s.members, line);
    }
    if let Some(addr) = &args.addr {
        let a = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
            .with_context(|| format!("--addr {addr:?} is not a hex address"))?;
        let k = facade::Kallsyms::load();
        if !k.is_usable() {
            anyhow::bail!(
                "/proc/kallsyms shows no addresses: run as root (kernel.kptr_restrict hides them)"
            );
        }
        let start = a / line * line;
        out += &format!("kernel cache line {start:#x}..{:#x} around {a:#x} (sizes are upper bounds: the distance to the next symbol)\n", start + line);
        let near = k.data_around(start, start + line);
        if k.data_symbols() < 1000 {
            out += &format!(
                "  note: kallsyms lists only {} kernel variables (CONFIG_KALLSYMS_ALL is off): most globals cannot be named\n",
                k.data_symbols()
            );
        }
        if near.is_empty() {
            out += "  no kernel variable here: a dynamic (slab or per-CPU) address\n";
        }
        for (addr, name, size) in near {
            let mark = if addr <= a && a < addr + size.max(1) {
                "  ← this address"
            } else {
                ""
            };
            out += &format!("  {addr:#x}  {name:<40} ≤{size} B{mark}\n");
        }
    }
    if out.is_empty() {
        anyhow::bail!("layout --kernel needs --struct NAME or --addr ADDR");
    }
    Ok(out)
}
