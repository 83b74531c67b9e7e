//! The pathology corpus, embedded in the binary so that `scalprof demo` works from an
//! installed scalprof. Built with the system C compiler at -O2 -g, without frame
//! pointers, like distribution binaries; one program statically linked, and one in Rust
//! (`rustc -O -g`, when rustc is installed).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// (program name, C source).
pub const PROGRAMS: &[(&str, &str)] = &[
    (
        "counters_packed",
        include_str!("../../../corpus/counters_packed.c"),
    ),
    (
        "counters_padded",
        include_str!("../../../corpus/counters_padded.c"),
    ),
    (
        "hash_global_mutex",
        include_str!("../../../corpus/hash_global_mutex.c"),
    ),
    (
        "hash_sharded",
        include_str!("../../../corpus/hash_sharded.c"),
    ),
    ("mmap_churn", include_str!("../../../corpus/mmap_churn.c")),
    ("gil_handoff", include_str!("../../../corpus/gil_handoff.c")),
    (
        "fcntl_same_file",
        include_str!("../../../corpus/fcntl_same_file.c"),
    ),
    ("sleep_retry", include_str!("../../../corpus/sleep_retry.c")),
    (
        "pwrite_same_file",
        include_str!("../../../corpus/pwrite_same_file.c"),
    ),
    (
        "refcount_global",
        include_str!("../../../corpus/refcount_global.c"),
    ),
    ("flow_expiry", include_str!("../../../corpus/flow_expiry.c")),
    (
        "flow_expiry_fixed",
        include_str!("../../../corpus/flow_expiry_fixed.c"),
    ),
    (
        "adjacent_locks",
        include_str!("../../../corpus/adjacent_locks.c"),
    ),
    (
        "clean_parallel",
        include_str!("../../../corpus/clean_parallel.c"),
    ),
    ("side_lock", include_str!("../../../corpus/side_lock.c")),
    ("dup_close", include_str!("../../../corpus/dup_close.c")),
    ("jit_spin", include_str!("../../../corpus/jit_spin.c")),
    ("lock_server", include_str!("../../../corpus/lock_server.c")),
    ("lock_client", include_str!("../../../corpus/lock_client.c")),
    (
        "syscall_loop",
        include_str!("../../../corpus/syscall_loop.c"),
    ),
    (
        "striped_locks",
        include_str!("../../../corpus/striped_locks.c"),
    ),
    (
        "index_rebuild",
        include_str!("../../../corpus/index_rebuild.c"),
    ),
    (
        "journal_sync",
        include_str!("../../../corpus/journal_sync.c"),
    ),
    ("kmap_flush", include_str!("../../../corpus/kmap_flush.c")),
    ("sync_server", include_str!("../../../corpus/sync_server.c")),
    ("loop_server", include_str!("../../../corpus/loop_server.c")),
    (
        "phase_server",
        include_str!("../../../corpus/phase_server.c"),
    ),
];

/// Programs built otherwise than as dynamically linked C: (name, source, how).
pub const OTHER_PROGRAMS: &[(&str, &str, Build)] = &[
    // The global-mutex table, statically linked: glibc's lock and wake-up code are the
    // program's own functions, as in Go binaries and musl builds.
    (
        "hash_global_static",
        include_str!("../../../corpus/hash_global_mutex.c"),
        Build::StaticC,
    ),
    (
        "rust_mutex",
        include_str!("../../../corpus/rust_mutex.rs"),
        Build::Rust,
    ),
    (
        "rust_funnel",
        include_str!("../../../corpus/rust_funnel.rs"),
        Build::Rust,
    ),
    (
        "rust_funnel_sharded",
        include_str!("../../../corpus/rust_funnel_sharded.rs"),
        Build::Rust,
    ),
];

/// How a program of [`OTHER_PROGRAMS`] is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// The C compiler with `-static`.
    StaticC,
    /// `rustc -O -g` (`$RUSTC`, else `rustc`); skipped, and said, where none is installed.
    Rust,
}

const COMMON_H: &str = include_str!("../../../corpus/common.h");

/// `$XDG_CACHE_HOME/scalprof/corpus`, else `~/.cache/scalprof/corpus`; with neither set,
/// `$TMPDIR/scalprof-UID/corpus` (per user, so that another user's directory of the same
/// name is never taken for ours: [`build`] refuses any directory that is not private).
pub fn default_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(|v| PathBuf::from(v).join("scalprof"))
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache/scalprof"))
        })
        .unwrap_or_else(|| {
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            std::env::temp_dir().join(format!("scalprof-{uid}"))
        })
        .join("corpus")
}

/// Writes the sources to `dir` and compiles each program whose source changed or whose
/// binary is missing. Returns (name, binary path) pairs. `dir` must be private (see
/// [`scalprof_collect::private`]): programs found there are run, as root too.
pub fn build(dir: &Path) -> Result<Vec<(&'static str, PathBuf)>> {
    let dir = scalprof_collect::private::private_dir(dir)?;
    write_if_changed(&dir.join("common.h"), COMMON_H)?;
    let mut built = Vec::new();
    for (name, source) in PROGRAMS {
        let bin = compile(&dir, name, source)?;
        built.push((*name, bin));
    }
    for &(name, source, how) in OTHER_PROGRAMS {
        match how {
            Build::StaticC => built.push((name, compile_with(&dir, name, source, &["-static"])?)),
            // The Rust programs are extras: a compiler that is missing or fails (rustup with
            // no default toolchain) skips them, and says why, rather than the whole corpus.
            Build::Rust => match compile_rust(&dir, name, source) {
                Ok(Some(bin)) => built.push((name, bin)),
                Ok(None) => eprintln!(
                    "scalprof: skipped {name}: no Rust compiler (`rustc`) found; install \
                     Rust (apt-get install -y rustc, or rustup) or set RUSTC"
                ),
                Err(e) => {
                    let why = format!("{e:#}");
                    let why: Vec<&str> = why
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .take(3)
                        .collect();
                    eprintln!(
                        "scalprof: skipped {name}: the Rust compiler failed ({}); fix it or set RUSTC",
                        why.join(" ")
                    );
                }
            },
        }
    }
    Ok(built)
}

/// Writes `NAME.rs` to `dir` and compiles it with `rustc -O -g` (`$RUSTC`) unless the
/// source is unchanged and the binary exists. `None` when no Rust compiler is installed.
pub fn compile_rust(dir: &Path, name: &str, source: &str) -> Result<Option<PathBuf>> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let flags = ["-O", "-g", "--edition", "2021"];
    compile_source(dir, &format!("{name}.rs"), name, source, &rustc, &flags)
}

/// Writes `NAME.c` to `dir` and compiles it to `dir/NAME` (-O2 -g -pthread, no frame
/// pointers) unless the source is unchanged and the binary exists.
pub fn compile(dir: &Path, name: &str, source: &str) -> Result<PathBuf> {
    compile_with(dir, name, source, &[])
}

/// [`compile`] with more compiler flags (`-static`).
fn compile_with(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Result<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let flags = [&["-O2", "-g", "-pthread"], flags].concat();
    compile_source(dir, &format!("{name}.c"), name, source, &cc, &flags)?.with_context(|| {
        format!("running the C compiler `{cc}`: not found (install one: apt-get install -y gcc, or set CC)")
    })
}

/// Writes `source` to `dir/file` and runs `compiler FLAGS -o dir/NAME dir/file` unless the
/// source is unchanged and the binary exists. `None` when the compiler is not installed.
#[allow(clippy::disallowed_methods)] // runs: the system's cc on the corpus, in a checked private folder
fn compile_source(
    dir: &Path,
    file: &str,
    name: &str,
    source: &str,
    compiler: &str,
    flags: &[&str],
) -> Result<Option<PathBuf>> {
    let dir = &scalprof_collect::private::private_dir(dir)?;
    let src = dir.join(file);
    let bin = dir.join(name);
    let changed = write_if_changed(&src, source)?;
    if !changed && bin.exists() {
        return Ok(Some(bin));
    }
    let out = match Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("running the compiler `{compiler}`")),
    };
    if !out.status.success() {
        bail!(
            "compiling {} failed:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(Some(bin))
}

fn write_if_changed(path: &Path, text: &str) -> Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    use std::io::Write;
    scalprof_collect::private::create_file(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(true)
}
