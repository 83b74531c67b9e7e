//! `scalprof import perf.data`: a one-point run from a file recorded elsewhere, through
//! the same converter and analysis as live profiles.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use scalprof_debuginfo::sandbox::{self, Wire};
use scalprof_debuginfo::Kallsyms;
use scalprof_model::{Host, Repeat, RunStatus, Sweep, ThroughputSource};
use scalprof_store::{NewRun, Store};
use scalprof_symbolize::convert::ModeTimes;
use scalprof_symbolize::profile::ProfileBuilder;

/// Set while a thread parses an untrusted perf.data file (the binary's panic hook reads it).
pub use scalprof_symbolize::convert::PARSING;

pub fn import(store: &Store, path: &Path, label: Option<String>) -> Result<i64> {
    let local_kernel = scalprof_collect::host::probe().kernel;
    // The file and every binary it names are other users' bytes: parsed in a child
    // without privileges when separation is on, here otherwise (library tests).
    let Parsed {
        profile,
        info,
        user_ns,
        sys_ns,
        same_kernel,
    } = match scalprof_debuginfo::sandbox::parser() {
        Some(exe) => parse_in_child(exe, path, &local_kernel)?,
        None => {
            let file = scalprof_collect::import::PerfFile::open(path)?;
            parse(&file, &local_kernel, &Kallsyms::load, &map_owners(path))?
        }
    };
    if !same_kernel {
        eprintln!(
            "scalprof: {} was recorded on kernel {}, this is {local_kernel}: kernel frames stay unresolved",
            path.display(),
            info.os_release.as_deref().unwrap_or("?")
        );
    }

    let clock_like = info.event.contains("clock");
    let wall_s = info
        .time_range_ns
        .map_or(0.0, |(a, b)| (b - a) as f64 / 1e9);
    let id = store.create_run(&NewRun {
        label: label.unwrap_or_else(|| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "perf.data".into())
        }),
        created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        command: if info.cmdline.is_empty() {
            vec![format!("perf.data:{}", path.display())]
        } else {
            info.cmdline.clone()
        },
        sweep: Sweep {
            parameter: scalprof_model::SweepParameter::Threads,
            values: vec![1],
        },
        host: Host {
            kernel: info.os_release.clone().unwrap_or_else(|| "unknown".into()),
            cpus: info.nr_cpus.unwrap_or(0),
            cpu_model: info.cpu_desc.clone().unwrap_or_else(|| "unknown".into()),
            pmu: info.event.contains("cycles") || info.event.contains("instructions"),
            limits: None,
            topology: None,
            sample_cost_ns: None,
            switch_cost: None,
        },
        scaling: Some(ThroughputSource::Strong),
        ops_regex: String::new(),
        commit: None,
    })?;
    store.set_output_dir(id, path)?;
    store.add_repeat(
        id,
        1,
        &Repeat {
            // CPU time from the samples' periods, when the event counts time.
            user_s: if clock_like {
                user_ns as f64 / 1e9
            } else {
                0.0
            },
            sys_s: if clock_like { sys_ns as f64 / 1e9 } else { 0.0 },
            ..Repeat::ok(0, wall_s)
        },
    )?;
    store.add_profile(id, 1, 0, &profile)?;
    store.set_status(id, RunStatus::Complete)?;
    Ok(id)
}

/// What a perf.data gave.
struct Parsed {
    profile: scalprof_model::PointProfile,
    info: scalprof_collect::import::ImportInfo,
    user_ns: u64,
    sys_ns: u64,
    same_kernel: bool,
}

/// Whose perf maps an import trusts: this process's user's, and the file's owner's (whoever
/// recorded it ran the processes).
fn map_owners(path: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let mut owners = vec![unsafe { libc::geteuid() }];
    owners.extend(std::fs::metadata(path).ok().map(|m| m.uid()));
    owners
}

/// Parses an opened perf.data into one profile, the kernel's symbols loaded by `kallsyms`
/// when the file was recorded on `local_kernel`, the perf maps of `owners` trusted.
fn parse(
    file: &scalprof_collect::import::PerfFile,
    local_kernel: &str,
    kallsyms: &(dyn Fn() -> Kallsyms + Sync),
    owners: &[u32],
) -> Result<Parsed> {
    // Kernel symbols of this machine only fit a file recorded on this kernel; we learn
    // the file's kernel from its header, so read the header first.
    let header = scalprof_collect::import::read_header_of(file)?;
    let same_kernel = header
        .os_release
        .as_deref()
        .is_none_or(|r| r == local_kernel);
    // Loaded while the file's first records are read.
    let kernel = || {
        Arc::new(if same_kernel {
            kallsyms()
        } else {
            Kallsyms::default()
        })
    };
    // One thread reads the file and hands its records, a batch at a time, to one builder
    // per core, each parsing and symbolizing its share of the samples (and counting their
    // CPU time by mode); the builders are merged into the first.
    let times = ModeTimes::default();
    // A record is ~150–200 bytes with a callchain: the size says about how many samples.
    let workers = scalprof_symbolize::profile::parallel_workers(file.size / 200);
    // The file is untrusted input: scalprof checks its structure first, and a panic in a
    // parser on a case the checks missed becomes an error, not a crash. While it parses,
    // a panic hook that checks [`PARSING`] keeps this thread's panics quiet (the binary installs one).
    PARSING.with(|p| p.set(true));
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // The sampling rate from the header: the threads' busy shares need it.
        scalprof_symbolize::convert::perf_data(
            file,
            &|| {
                ProfileBuilder::new(&header.event, header.frequency, true)
                    .with_perf_map_owners(owners.to_vec())
            },
            workers,
            scalprof_symbolize::profile::PARALLEL_CHUNK,
            &kernel,
            &times,
        )
    }));
    PARSING.with(|p| p.set(false));
    let (builder, info) = match read {
        Ok(result) => result?,
        Err(_) => anyhow::bail!(
            "{} is malformed in a way the perf.data parser could not handle; nothing was imported",
            file.name
        ),
    };
    let mut profile = builder.finish();
    profile.event = info.event.clone();
    profile.frequency = info.frequency;
    profile.stats.bad_records += info.bad_records;
    Ok(Parsed {
        profile,
        info,
        user_ns: times.user_ns.into_inner(),
        sys_ns: times.sys_ns.into_inner(),
        same_kernel,
    })
}

/// The import child's address-space cap: its builders' threads each reserve arenas, and a
/// large file's profile is built in memory; what inflates is capped on the way in.
const IMPORT_MEMORY_CAP: u64 = 8 << 30;
/// How long an import may take in its child.
const IMPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);
/// The most kallsyms text handed over.
const MAX_KALLSYMS: usize = 64 << 20;

/// Root opens the file and reads this kernel's symbols (which only root sees); a child
/// without privileges parses the file and the binaries it names, and sends the profile.
fn parse_in_child(exe: &Path, path: &Path, local_kernel: &str) -> Result<Parsed> {
    use scalprof_debuginfo::sandbox::{Ended, Parser};
    let file = scalprof_collect::import::PerfFile::open(path)?;
    let owners = map_owners(path);
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let mut child = Parser::spawn_brokered(exe, "import", file.file())
        .map_err(|e| anyhow::anyhow!("cannot start the parser for {}: {e}", path.display()))?;
    let mut w = Wire::default();
    w.str(&file.name);
    w.str(local_kernel);
    w.u64(owners.len() as u64);
    for &o in &owners {
        w.u64(u64::from(o));
    }
    w.str(&kallsyms[..kallsyms.len().min(MAX_KALLSYMS)]);
    let failed = |e: Ended| {
        // Out of memory under the user's own limit is said as the child said it.
        if e.out_of_memory {
            anyhow::anyhow!("{}", e.why)
        } else {
            anyhow::anyhow!("{}: nothing was imported: {}", path.display(), e.why)
        }
    };
    child.send(&w.framed()).map_err(failed)?;
    child.close_input();
    let mut r = child.reply_within(IMPORT_TIMEOUT).map_err(failed)?;
    if let Err(message) = r.get_status() {
        // The child's own error, as it would have been said here.
        anyhow::bail!("{message}");
    }
    decode_parsed(&mut r).map_err(|why| failed(Ended::other(why)))
}

/// The import child's main (scalprof run as the parser with job `import`): confined
/// before it reads a byte, it parses the perf.data on descriptor 3 and sends what
/// [`parse_in_child`] decodes. Never returns.
pub fn serve_child() -> ! {
    use scalprof_debuginfo::child;
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    if let Err(e) = child::confine(IMPORT_MEMORY_CAP) {
        let _ = writeln!(std::io::stderr(), "cannot drop privileges: {e}");
        std::process::exit(3);
    }
    // Binaries, debug files and perf maps come from the parent (only root may open some);
    // the DWARF loader's memory files need RLIMIT_FSIZE above zero here.
    sandbox::use_broker();
    // SAFETY: the parent put the perf.data on descriptor 3 for this child, and nothing
    // else here owns it.
    let file = unsafe { std::fs::File::from_raw_fd(3) };
    let answer = (|| -> Result<Wire, String> {
        let mut input = Vec::new();
        std::io::stdin()
            .take(MAX_KALLSYMS as u64 + (1 << 20))
            .read_to_end(&mut input)
            .map_err(|e| e.to_string())?;
        let mut r = Wire::from_frame(input)?;
        let name = r.get_name()?;
        let local_kernel = r.get_name()?;
        let n = r.get_count(8)?;
        let owners = (0..n.min(8))
            .map(|_| r.get_u64().map(|o| o as u32))
            .collect::<Result<Vec<_>, _>>()?;
        let kallsyms = String::from_utf8_lossy(r.get_bytes()?).into_owned();
        let file = scalprof_collect::import::PerfFile::handed(name, file);
        let p = parse(
            &file,
            &local_kernel,
            &|| Kallsyms::parse(&kallsyms),
            &owners,
        )
        .map_err(|e| format!("{e:#}"))?;
        encode_parsed(&p)
    })();
    let w = answer.unwrap_or_else(|e| {
        let mut w = Wire::default();
        w.u64(1);
        w.str(&e);
        w
    });
    let mut out = std::io::stdout().lock();
    let ok = out
        .write_all(&w.framed())
        .and_then(|()| out.flush())
        .is_ok();
    std::process::exit(if ok { 0 } else { 1 })
}

/// The parser child's answer to a parse: a 0 status, then the file's facts, the CPU time
/// the parse took, and the profile as JSON (read back by [`decode_parsed`]). Names are cut
/// to what the wire carries.
fn encode_parsed(p: &Parsed) -> Result<Wire, String> {
    let mut w = Wire::default();
    w.u64(0);
    let opt = |w: &mut Wire, v: &Option<String>| match v {
        Some(s) => {
            w.u64(1);
            w.str(&sandbox::cut_name(s));
        }
        None => w.u64(0),
    };
    w.str(&sandbox::cut_name(&p.info.event));
    w.u64(p.info.frequency);
    opt(&mut w, &p.info.os_release);
    opt(&mut w, &p.info.hostname);
    opt(&mut w, &p.info.cpu_desc);
    w.u64(p.info.nr_cpus.map_or(u64::MAX, u64::from));
    w.u64(p.info.cmdline.len() as u64);
    for a in &p.info.cmdline {
        w.str(&sandbox::cut_name(a));
    }
    match p.info.time_range_ns {
        Some((a, b)) => {
            w.u64(1);
            w.u64(a);
            w.u64(b);
        }
        None => w.u64(0),
    }
    w.u64(p.info.records);
    w.u64(p.info.bad_records);
    w.u64(p.user_ns);
    w.u64(p.sys_ns);
    w.u64(u64::from(p.same_kernel));
    w.bytes(&serde_json::to_vec(&p.profile).map_err(|e| e.to_string())?);
    Ok(w)
}

/// [`encode_parsed`]'s answer read back, after its status.
fn decode_parsed(r: &mut Wire) -> Result<Parsed, String> {
    let opt = |r: &mut Wire| -> Result<Option<String>, String> {
        Ok(match r.get_u64()? {
            0 => None,
            _ => Some(r.get_name()?),
        })
    };
    let event = r.get_name()?;
    let frequency = r.get_u64()?;
    let os_release = opt(r)?;
    let hostname = opt(r)?;
    let cpu_desc = opt(r)?;
    let nr_cpus = match r.get_u64()? {
        u64::MAX => None,
        n => Some(u32::try_from(n).map_err(|_| "a CPU count out of range")?),
    };
    let n = r.get_count(8)?;
    let cmdline = (0..n.min(4096))
        .map(|_| r.get_name())
        .collect::<Result<Vec<_>, _>>()?;
    let time_range_ns = match r.get_u64()? {
        0 => None,
        _ => Some((r.get_u64()?, r.get_u64()?)),
    };
    let records = r.get_u64()?;
    let bad_records = r.get_u64()?;
    let user_ns = r.get_u64()?;
    let sys_ns = r.get_u64()?;
    let same_kernel = r.get_u64()? != 0;
    let profile = serde_json::from_slice(r.get_bytes()?)
        .map_err(|e| format!("the parser's profile does not decode: {e}"))?;
    Ok(Parsed {
        profile,
        info: scalprof_collect::import::ImportInfo {
            event,
            frequency,
            os_release,
            hostname,
            cpu_desc,
            nr_cpus,
            cmdline,
            time_range_ns,
            records,
            bad_records,
        },
        user_ns,
        sys_ns,
        same_kernel,
    })
}
