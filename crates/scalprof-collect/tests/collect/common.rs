//! What the collector's tests share: building the small C programs they run.

/// Builds the C program `source` as `dir/name` (with `-pthread`; position-independent,
/// the default) and returns its path.
pub fn compile(dir: &std::path::Path, name: &str, source: &str) -> std::path::PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let bin = dir.join(name);
    let st = std::process::Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc {}", src.display());
    bin
}

/// The tests time their workloads: they must not run at the same time (a spin in one
/// takes a CPU from another's measured run).
#[allow(dead_code)] // not every test file times its workloads
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
