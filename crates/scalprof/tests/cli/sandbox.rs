//! Parsing without privileges, and with bounds: the bytes of binaries and their debug info,
//! which other users may control, are parsed in a child that gave up root first, under a
//! memory cap; a hostile file costs its own symbols, never the run; and what inflates
//! (compressed sections, compressed perf.data records) is measured before it is believed.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::require_root;
use crate::common::scalprof;

fn scalprof_bin() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_scalprof"))
}

/// A small program with DWARF, built here: its frames have names.
fn spin(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("spin.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <time.h>\n\
         static double work(void) { double s = 0; struct timespec a, b;\n\
         clock_gettime(CLOCK_MONOTONIC, &a);\n\
         do { for (int i = 0; i < 100000; i++) s += (double)i * i;\n\
         clock_gettime(CLOCK_MONOTONIC, &b); }\n\
         while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < 0.3);\n\
         return s; }\n\
         int main(void) { volatile double s = work(); (void)s; printf(\"ops=1\\n\"); return 0; }\n",
    )
    .unwrap();
    let bin = dir.join("spin");
    let ok = Command::new("cc")
        .args(["-O1", "-g", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cc failed");
    bin
}

/// `bin` with its `.debug_str` replaced by a zlib section that says it inflates to 3 GiB
/// (a decompression bomb: 64 MiB of zeros compress to ~64 KB).
fn with_bomb(bin: &Path) -> std::path::PathBuf {
    let dir = bin.parent().unwrap();
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        z.write_all(&zeros).unwrap();
    }
    let packed = z.finish().unwrap();
    // Elf64_Chdr: ch_type 1 (zlib), reserved, ch_size, ch_addralign.
    let mut section = Vec::new();
    section.extend_from_slice(&1u32.to_le_bytes());
    section.extend_from_slice(&0u32.to_le_bytes());
    section.extend_from_slice(&(3u64 << 30).to_le_bytes());
    section.extend_from_slice(&1u64.to_le_bytes());
    section.extend_from_slice(&packed);
    let raw = dir.join("bomb.bin");
    std::fs::write(&raw, &section).unwrap();
    let out = dir.join("spin_zbomb");
    let ok = Command::new("objcopy")
        .args(["--remove-section", ".debug_str", "--add-section"])
        .arg(format!(".debug_str={}", raw.display()))
        .args(["--set-section-flags", ".debug_str=readonly,debug"])
        .arg(bin)
        .arg(&out)
        .status()
        .unwrap()
        .success();
    assert!(ok, "objcopy failed");
    // Mark the section SHF_COMPRESSED (objcopy adds it as plain bytes).
    let mut d = std::fs::read(&out).unwrap();
    let u16_at = |d: &[u8], o: usize| u16::from_le_bytes([d[o], d[o + 1]]) as usize;
    let u32_at = |d: &[u8], o: usize| u32::from_le_bytes(d[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |d: &[u8], o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap()) as usize;
    let shoff = u64_at(&d, 0x28);
    let (ent, num, stridx) = (u16_at(&d, 0x3a), u16_at(&d, 0x3c), u16_at(&d, 0x3e));
    let strtab = u64_at(&d, shoff + stridx * ent + 0x18);
    let mut marked = false;
    for i in 0..num {
        let o = shoff + i * ent;
        let name_at = strtab + u32_at(&d, o);
        if d[name_at..].starts_with(b".debug_str\0") {
            let flags = u64_at(&d, o + 8) as u64 | 0x800;
            d[o + 8..o + 16].copy_from_slice(&flags.to_le_bytes());
            marked = true;
        }
    }
    assert!(marked, "no .debug_str in {}", out.display());
    std::fs::write(&out, d).unwrap();
    out
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_decompression_bomb_in_debug_info_costs_only_its_dwarf() {
    crate::common::corpus::require_profiling();
    let dir = tempfile::tempdir().unwrap();
    let bomb = with_bomb(&spin(dir.path()));
    let json = dir.path().join("run.json");
    let out = scalprof(&dir.path().join("runs.db"))
        .args([
            "run",
            "-t",
            "1",
            "--repeat",
            "1",
            "--diagnose",
            "1",
            "--no-locks",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--")
        .arg(&bomb)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = crate::common::corpus::read_json(&json);
    assert_eq!(doc["status"], "complete", "{stdout}");
    // The warning names the file and why its DWARF was not read; its symbols still are.
    assert!(
        stdout.contains("spin_zbomb: its DWARF: its compressed section .debug_str would inflate"),
        "{stdout}"
    );
    let folded = crate::common::corpus::folded(&dir.path().join("runs.db"), 1);
    assert!(
        folded.iter().any(|(stack, _)| stack.ends_with(";main")),
        "the symbol table still names the function: {folded:?}"
    );
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_parser_runs_as_nobody_without_privileges_under_a_memory_cap() {
    require_root("a_parser_runs_as_nobody_without_privileges_under_a_memory_cap");
    // A root-only file: root opens it and hands the descriptor over; the child, as
    // nobody, could not open it itself.
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path());
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let file = std::fs::File::open(&bin).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    let mut cmd = Command::new(scalprof_bin());
    cmd.args(["__scalprof-parse", "dwarf"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    // SAFETY: dup2 and fcntl are async-signal-safe and act on a descriptor this process
    // owns.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                libc::fcntl(fd, libc::F_SETFD, 0);
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // The DWARF server answers that it loaded the file, then waits for addresses.
    let mut out = child.stdout.take().unwrap();
    let mut len = [0u8; 8];
    out.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u64::from_le_bytes(len) as usize];
    out.read_exact(&mut body).unwrap();
    assert_eq!(
        &body[..8],
        &0u64.to_le_bytes(),
        "the parser could not load a root-only file"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(field("Uid:"), "65534 65534 65534 65534", "{status}");
    assert_eq!(field("Gid:"), "65534 65534 65534 65534", "{status}");
    assert_eq!(field("Groups:"), "", "{status}");
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    assert_eq!(field("CapEff:"), "0000000000000000", "{status}");
    // Filtered: this process's own filters (a container's, a service manager's) and the
    // parser's (no x32 calls, the deny list, the calls that answer ENOSYS). Not a
    // session's leader's terminal either: it has a session of its own.
    let own_filters: usize = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp_filters:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    assert_eq!(field("Seccomp:"), "2", "{status}");
    assert_eq!(
        field("Seccomp_filters:"),
        (own_filters + scalprof_debuginfo::seccomp::count()).to_string(),
        "{status}"
    );
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
    let after_comm: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // Fields 6 (session) and 7 (controlling terminal), counted from the state (3).
    assert_eq!(after_comm[3], child.id().to_string(), "session: {stat}");
    assert_eq!(after_comm[4], "0", "controlling terminal: {stat}");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let address_space = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))
        .unwrap();
    assert!(address_space.contains("1073741824"), "{limits}");
    // Closing its input ends it.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

/// A perf.data record: type, misc, size, body.
fn record(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = ty.to_le_bytes().to_vec();
    r.extend_from_slice(&misc.to_le_bytes());
    r.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
    r.extend_from_slice(body);
    r
}

/// A file-mode perf.data with one attribute (IP|TID|TIME|CPU|PERIOD|CALLCHAIN,
/// sample_id_all) and `records` as its data section.
fn perf_data(records: &[u8]) -> Vec<u8> {
    let mut attr = Vec::new();
    for v in [1u32, 128] {
        attr.extend_from_slice(&v.to_le_bytes());
    }
    for v in [
        0u64,
        999,
        1 | 2 | 4 | 32 | 128 | 256,
        0,
        (1 << 10) | (1 << 18),
    ] {
        attr.extend_from_slice(&v.to_le_bytes());
    }
    attr.resize(128, 0);
    attr.extend_from_slice(&[0u8; 16]); // the ids section: none
    let mut f = b"PERFILE2".to_vec();
    let data_at = 104 + attr.len() as u64;
    for v in [
        104u64,
        144,
        104,
        attr.len() as u64,
        data_at,
        records.len() as u64,
        0,
        0,
    ] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(&[0u8; 32]);
    f.extend_from_slice(&attr);
    f.extend_from_slice(records);
    f
}

fn sample(pid: u32, t: u64, ip: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&ip.to_le_bytes());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&t.to_le_bytes());
    b.extend_from_slice(&[0u8; 8]); // cpu, res
    b.extend_from_slice(&1_000_000u64.to_le_bytes());
    b.extend_from_slice(&2u64.to_le_bytes());
    b.extend_from_slice(&((1u64 << 63).wrapping_neg() | (u64::MAX - 511)).to_le_bytes());
    b.extend_from_slice(&ip.to_le_bytes());
    record(9, 2, &b)
}

#[test]
fn a_compressed_record_bomb_is_refused_before_it_inflates() {
    // 100 MiB of one sample, zstd-compressed into one PERF_RECORD_COMPRESSED of a few KB
    // (the repro's 18 KB file became 2.6 M samples and 875 MB of memory).
    let one = sample(100, 2_000_000_000, 0x401000);
    let payload: Vec<u8> = one.iter().copied().cycle().take(100 << 20).collect();
    let mut packed = vec![0u8; zstd_safe::compress_bound(payload.len())];
    let n = zstd_safe::compress(&mut packed[..], &payload, 3).unwrap();
    packed.truncate(n);
    assert!(packed.len() < 60_000, "{} bytes", packed.len());
    let mut records = Vec::new();
    for _ in 0..6 {
        records.extend(record(81, 0, &packed));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zrec.data");
    std::fs::write(&file, perf_data(&records)).unwrap();
    let out = scalprof(&dir.path().join("runs.db"))
        .arg("import")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the compressed records inflate past"),
        "{stderr}"
    );
    assert!(stderr.contains("decompression bomb"), "{stderr}");
}

/// The 8-byte padded, NUL-terminated string of a perf record.
fn padded(s: &str) -> Vec<u8> {
    let mut b = s.as_bytes().to_vec();
    b.push(0);
    while !b.len().is_multiple_of(8) {
        b.push(0);
    }
    b
}

fn sample_id(pid: u32, t: u64) -> Vec<u8> {
    let mut b = pid.to_le_bytes().to_vec();
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&t.to_le_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b
}

#[test]
#[cfg_attr(not(privileged), ignore = "needs root (always runs in CI)")]
fn a_jit_map_is_trusted_as_the_perf_data_owners_not_a_live_pids() {
    require_root("a_jit_map_is_trusted_as_the_perf_data_owners_not_a_live_pids");
    // Another user runs a process and writes a perf map for its PID, naming code that
    // root's perf.data samples at that PID.
    let sleeper = Command::new("sleep")
        .arg("60")
        .uid(65534)
        .gid(65534)
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let map = std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"));
    std::fs::write(&map, "7f0000000100 100 spoofed_by_another_user\n").unwrap();
    std::os::unix::fs::chown(&map, Some(65534), Some(65534)).unwrap();
    let mut records = Vec::new();
    let mut body = pid.to_le_bytes().to_vec();
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend(padded("jit"));
    body.extend(sample_id(pid, 1_000_000_000));
    records.extend(record(3, 0, &body));
    let mut body = pid.to_le_bytes().to_vec();
    body.extend_from_slice(&pid.to_le_bytes());
    for v in [0x7f00_0000_0000u64, 0x1000, 0] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend(padded("//anon"));
    body.extend(sample_id(pid, 1_000_000_000));
    records.extend(record(1, 2, &body));
    for i in 0..50u64 {
        records.extend(sample(pid, 2_000_000_000 + i * 1000, 0x7f00_0000_0100));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("anon.data");
    std::fs::write(&file, perf_data(&records)).unwrap();
    let imported_names = |db: &str| {
        let db = dir.path().join(db);
        let out = scalprof(&db).arg("import").arg(&file).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let flame = scalprof(&db)
            .args(["flame", "1", "--folded"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&flame.stdout).into_owned()
    };
    // Root's file: the live PID's owner is nobody to it.
    let roots = imported_names("root.db");
    // The same file handed over by that user: their maps name their code.
    std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
    let theirs = imported_names("theirs.db");
    let _ = std::fs::remove_file(&map);
    let mut sleeper = sleeper;
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(!roots.contains("spoofed"), "{roots}");
    assert!(theirs.contains("spoofed_by_another_user"), "{theirs}");
}
