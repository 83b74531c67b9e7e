//! The commands that read the store: `runs`, `show`, `report`, `flame`, `export`, and
//! the ones that need no run: `fit`, `layout`, `corpus`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use scalprof_pipeline::facade;

use super::open_store_read_only;
use crate::cli;
use crate::out;

/// `scalprof fit`: the USL fitted to a two-column CSV.
pub fn fit(args: cli::FitArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let obs = facade::parse_two_column_csv(&text)
        .with_context(|| format!("parsing {}", args.file.display()))?;
    let model =
        facade::fit_usl(&obs).with_context(|| format!("fitting {}", args.file.display()))?;
    if args.json {
        out::data(&(serde_json::to_string_pretty(&model)? + "\n"))?;
    } else {
        outln!("{}", scalprof_report::model_line(Some(&model), "N"));
        if let Some(note) = &model.note {
            outln!("  note: {note}");
        }
        for (name, est) in [
            ("σ", model.sigma_est),
            ("κ", model.kappa_est),
            ("λ", model.lambda_est),
        ] {
            if let Some(e) = est {
                let d = |x: f64| scalprof_report::decimal(x, e.std_error);
                outln!(
                    "  {name}: std. error {}, 95% interval {} … {}",
                    d(e.std_error),
                    d(e.ci95[0]),
                    d(e.ci95[1])
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `scalprof show`: a stored run's summary or document; `--top` its functions at a point.
pub fn show(db: &Option<PathBuf>, args: cli::ShowArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    let id = store.resolve(&args.run)?;
    if args.json {
        let doc = scalprof_pipeline::document(&store, id)?;
        out::data(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let run = scalprof_pipeline::LoadedRun::load(&store, id)?;
    if let Some(n) = args.top {
        let doc = &run.doc;
        outln!(
            "run {} · {} · {}",
            doc.id,
            doc.label,
            scalprof_report::shell_line(&doc.command)
        );
        out!("{}", top_at(&run, args.point, n)?);
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "{}",
        scalprof_report::summary_with(&run.doc, args.locks, args.verbose)
    );
    if args.verbose && !run.inputs.profiles.is_empty() {
        out!("\n{}", top_at(&run, None, 10)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// The top-functions table of `point` (default: the largest profiled one).
pub(super) fn top_at(
    run: &scalprof_pipeline::LoadedRun,
    point: Option<u64>,
    n: usize,
) -> Result<String> {
    let profiled: Vec<u64> = run.inputs.profiles.iter().map(|(v, _)| *v).collect();
    let Some(value) = point.or(profiled.last().copied()) else {
        anyhow::bail!(
            "run {} has no profiles (recorded with --no-profile or --diagnose 0): nothing to list",
            run.doc.id
        );
    };
    let Some(profile) = run.profile(value) else {
        anyhow::bail!(super::Usage(format!(
            "run {} has no profile at {} {}; profiled: {}",
            run.doc.id,
            run.doc.sweep.parameter,
            value,
            profiled
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let top = scalprof_pipeline::facade::top_functions(profile, n);
    let counts_ops = run.doc.throughput.source == scalprof_model::ThroughputSource::Ops;
    Ok(scalprof_report::top_table(
        run.doc.sweep.parameter.as_str(),
        value,
        &top,
        counts_ops.then(|| run.work(value)),
    ))
}

/// `scalprof corpus`: builds the pathology corpus.
pub fn corpus(args: cli::CorpusArgs) -> Result<ExitCode> {
    let dir = args
        .out
        .unwrap_or_else(scalprof_pipeline::corpus::default_dir);
    for (name, path) in scalprof_pipeline::corpus::build(&dir)? {
        outln!("{name:<20} {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

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

/// `scalprof report`: a run's HTML report.
pub fn report(db: &Option<PathBuf>, args: cli::ReportArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    let id = store.resolve(&args.run)?;
    let out = args
        .output
        .unwrap_or_else(|| std::path::PathBuf::from(format!("scalprof-report-{id}.html")));
    crate::report::write_report(&store, id, &out)?;
    Ok(ExitCode::SUCCESS)
}

/// `scalprof flame`: a flame graph, folded stacks or a differential flame graph.
pub fn flame(db: &Option<PathBuf>, args: cli::FlameArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    crate::flame::flame(&store, args)?;
    Ok(ExitCode::SUCCESS)
}

/// `scalprof export`: a point's profile for other tools.
pub fn export(db: &Option<PathBuf>, args: cli::ExportArgs) -> Result<ExitCode> {
    let store = open_store_read_only(db)?;
    crate::export::export(&store, args)?;
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
