//! For the build scripts of the crates whose tests need root (profiling, BPF, mounts):
//! `#[path = "../../build/privileged.rs"] mod privileged;` then `privileged::emit()`.
//!
//! Such a test is marked `#[cfg_attr(not(privileged), ignore = "…")]`: where it cannot
//! run — outside CI, built by a user other than root — it shows as ignored instead of
//! passing. In CI (`CI` set) it always runs, and fails if it lacks the privileges.

pub fn emit() {
    println!("cargo::rustc-check-cfg=cfg(privileged)");
    println!("cargo::rerun-if-env-changed=CI");
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uid = status.lines().find(|l| l.starts_with("Uid:"))?;
            // Real, effective, saved, filesystem: the effective one decides.
            uid.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false);
    if root || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=privileged");
    }
}
