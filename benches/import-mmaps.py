#!/usr/bin/env python3
"""Import speed against the number of MMAP records: a perf.data with N mappings of distinct
libraries (as `perf inject --jit` writes, one MMAP2 per jitted method) and one sample in
each, imported by `scalprof import` at N = 50k, 100k and 200k. Prints the seconds and the
ratio of the 200k time to the 50k time: about 4 when the import is linear in MMAP records
(it was 16, quadratic: 2.7 s, 9.9 s, 43 s).

Usage: benches/import-mmaps.py [--bin PATH]   (build first: cargo build --release)
"""
import argparse
import os
import struct
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CTX_USER = (1 << 64) - 512


def rec(ty, misc, body):
    return struct.pack("<IHH", ty, misc, 8 + len(body)) + body


def padded(s):
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 8)


def sample_id(pid, tid, t):
    return struct.pack("<IIQII", pid, tid, t, 0, 0)


def perf_data(path, n):
    """A file-mode perf.data: one attribute (IP|TID|TIME|CPU|PERIOD|CALLCHAIN,
    sample_id_all), a COMM, then n × (MMAP of /nonexistent/libI.so, a sample in it)."""
    pid = 100
    out = [rec(3, 0, struct.pack("<II", pid, pid) + padded("jit") + sample_id(pid, pid, 10**9))]
    t = 10**9
    for i in range(n):
        a = 0x10000000 + i * 0x10000
        out.append(rec(1, 2, struct.pack("<IIQQQ", pid, pid, a, 0x10000, 0)
                       + padded(f"/nonexistent/lib{i}.so") + sample_id(pid, pid, t)))
        out.append(rec(9, 2, struct.pack("<QIIQIIQQ", a + 0x100, pid, pid, t + 1, 0, 0, 1000000, 2)
                       + struct.pack("<QQ", CTX_USER, a + 0x100)))
        t += 1000
    attr = struct.pack("<IIQQQQQIIQQQQIiQIHH", 1, 128, 0, 999, 1 | 2 | 4 | 32 | 128 | 256, 0,
                       (1 << 10) | (1 << 18), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    attr += b"\0" * (128 - len(attr)) + struct.pack("<QQ", 0, 0)
    data = b"".join(out)
    header = b"PERFILE2" + struct.pack("<QQQQQQQQ", 104, 144, 104, len(attr), 104 + len(attr),
                                       len(data), 0, 0) + b"\0" * 32
    with open(path, "wb") as f:
        f.write(header + attr + data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "scalprof"))
    args = ap.parse_args()
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (50_000, 100_000, 200_000):
            path = os.path.join(tmp, f"m{n}.data")
            perf_data(path, n)
            start = time.monotonic()
            subprocess.run([args.bin, "--db", os.path.join(tmp, f"m{n}.db"), "import", path],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[n] = time.monotonic() - start
            print(f"{n:>7} MMAP records: {times[n]:6.2f} s")
    print(f"200k / 50k: {times[200_000] / times[50_000]:.1f}× (linear: 4, quadratic: 16)")


if __name__ == "__main__":
    main()
