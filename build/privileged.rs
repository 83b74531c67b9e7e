//! The test tiers, for the build scripts of the crates whose tests measure (profiling,
//! BPF, sweeps, runtimes, PostgreSQL): `#[path = "../../build/privileged.rs"] mod
//! privileged;` then `privileged::emit()`.
//!
//! Such a test is marked `#[cfg_attr(not(privileged), ignore = "…")]`. It runs in CI (`CI`
//! set: there it fails if it lacks the privileges) and for root. A user who is not root
//! gets the fast tier: the unit tests and the tests that measure nothing, with the
//! measuring ones listed as ignored. `SCALPROF_TESTS=fast` asks for the fast tier as root
//! too (outside CI).

pub fn emit() {
    println!("cargo::rustc-check-cfg=cfg(privileged)");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=SCALPROF_TESTS");
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uid = status.lines().find(|l| l.starts_with("Uid:"))?;
            // Real, effective, saved, filesystem: the effective one decides.
            uid.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false);
    let ci = std::env::var_os("CI").is_some();
    let fast = std::env::var("SCALPROF_TESTS").is_ok_and(|v| v == "fast");
    if ci || (root && !fast) {
        println!("cargo::rustc-cfg=privileged");
    }
}
