//! Compiles the BPF programs (src/bpf/*.bpf.c) with clang and generates their Rust
//! skeletons (libbpf-cargo). Needs clang and libelf-dev: `apt-get install clang libelf-dev`.
//! Builds the lock-delay interposer (src/delay/interpose.c) as a shared object with the
//! system's C compiler: it needs no BPF, so it is built with or without the feature.
//! Also marks the tests that need root (`privileged`).

#[path = "../../build/privileged.rs"]
mod privileged;

fn main() {
    println!("cargo::rerun-if-changed=../../build/privileged.rs");
    privileged::emit();
    build_bpf();
    build_interposer();
}

/// `OUT_DIR/libscalprof-delay.so`, which the crate embeds and `scalprof verify` (and a
/// sweep's traced repeats, for the hold times) write out and preload into the workload.
fn build_interposer() {
    let src = "src/delay/interpose.c";
    let parts = [
        "src/delay/holds.c",
        "src/delay/copy.c",
        "src/delay/gaps.c",
        "src/delay/holds.h",
        "src/delay/copy.h",
        "src/delay/gaps.h",
    ];
    println!("cargo:rerun-if-changed={src}");
    for part in parts {
        println!("cargo:rerun-if-changed={part}");
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"))
        .join("libscalprof-delay.so");
    // Without debug info: the object is written to a file for each traced repeat (a
    // workload's `ulimit -f` applies), and its symbol table names its frames.
    let compiler = cc::Build::new().opt_level(2).debug(false).get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(src)
        .arg(parts[0])
        .arg(parts[1])
        .arg(parts[2])
        .arg("-ldl")
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!(
            "building {src} with {:?} failed ({other:?}): scalprof needs a C compiler (apt-get install gcc)",
            compiler.path()
        ),
    }
}

#[cfg(feature = "bpf")]
fn build_bpf() {
    for (src, skel) in [
        ("src/bpf/locks.bpf.c", "locks.skel.rs"),
        ("src/bpf/delay.bpf.c", "delay.skel.rs"),
        ("src/bpf/ticks.bpf.c", "ticks.skel.rs"),
    ] {
        build_one(src, skel);
    }
    // The parts locks.bpf.c includes, in order (one compilation unit).
    for part in [
        "maps",
        "kernel_locks",
        "waits",
        "runqueue",
        "mmap_holds",
        "go_waits",
    ] {
        println!("cargo:rerun-if-changed=src/bpf/{part}.bpf.h");
    }
    // The tree every object includes.
    println!("cargo:rerun-if-changed=src/bpf/tree.bpf.h");
}

/// Compiles one BPF program and writes its skeleton to `OUT_DIR/skel`.
#[cfg(feature = "bpf")]
fn build_one(src: &str, skel: &str) {
    use std::path::PathBuf;

    use libbpf_cargo::SkeletonBuilder;

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join(skel);
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        other => other,
    };
    if let Err(e) = SkeletonBuilder::new()
        .source(src)
        // clang -target bpf does not search the multiarch include directory.
        .clang_args([
            format!("-I/usr/include/{multiarch}"),
            "-O2".into(),
            "-g".into(),
        ])
        .build_and_generate(&out)
    {
        panic!(
            "building {src} failed: {e:#}\n\
             scalprof's BPF programs need clang and libelf-dev: apt-get install -y clang libelf-dev"
        );
    }
    println!("cargo:rerun-if-changed={src}");
}

/// Without the `bpf` feature there is nothing to build.
#[cfg(not(feature = "bpf"))]
fn build_bpf() {}
