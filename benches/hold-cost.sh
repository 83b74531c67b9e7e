#!/usr/bin/env bash
# What timing the user locks' holds costs: a program run bare against the same run with
# scalprof's interposer preloaded as a traced repeat preloads it (hold timing on),
# interleaved, the median wall time of each. hash_global_mutex (a 100 ns critical section
# taken 20 M times a second) is the worst case; xz compresses with a pool of threads that
# hand work over under pthread mutexes and condition variables.
# Usage: benches/hold-cost.sh [ROUNDS]   (no privileges needed)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
cargo build --release -q -p scalprof
object=$(ls -t target/release/build/scalprof-collect-*/out/libscalprof-delay.so | head -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target/release/scalprof corpus --out "$work/corpus" >/dev/null
head -c 4000000 /dev/urandom | base64 >"$work/input"
python3 - "$object" "$work" "$rounds" <<'PY'
import os, statistics, struct, subprocess, sys, time
obj, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
# The records area a traced repeat gives the workload (holds.c): a memfd with a header
# of the magic ("scphold1") and a nonce, inherited; a fresh one for each run.
MAGIC, NONCE = 0x31646C6F68706373, 0x5CA1
def area():
    fd = os.memfd_create("scalprof-holds")
    os.ftruncate(fd, 64 << 20)
    os.pwrite(fd, struct.pack("=QQ", MAGIC, NONCE), 0)
    return fd
cases = [
    ("hash_global_mutex 1", [f"{work}/corpus/hash_global_mutex", "1"]),
    ("hash_global_mutex 2", [f"{work}/corpus/hash_global_mutex", "2"]),
    ("xz -T2", ["xz", "-T2", "-3", "-c", f"{work}/input"]),
]
def wall(argv, env, fds=()):
    e = dict(os.environ, **env)
    t = time.perf_counter()
    subprocess.run(argv, env=e, stdout=subprocess.DEVNULL, check=True, pass_fds=fds)
    return time.perf_counter() - t
print(f"{'program':<22} {'bare s':>8} {'preload s':>10} {'timed s':>8} {'preload':>8} {'timed':>8}")
for name, argv in cases:
    runs = {"bare": [], "preload": [], "timed": []}
    for _ in range(rounds):
        runs["bare"].append(wall(argv, {}))
        runs["preload"].append(wall(argv, {"LD_PRELOAD": obj}))
        fd = area()
        holds = f"{fd}:{NONCE:x}"
        runs["timed"].append(wall(argv, {"LD_PRELOAD": obj, "SCALPROF_HOLDS": holds}, (fd,)))
        os.close(fd)
    m = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{name:<22} {m['bare']:8.3f} {m['preload']:10.3f} {m['timed']:8.3f} "
          f"{m['preload'] / m['bare']:7.2f}x {m['timed'] / m['bare']:7.2f}x")
PY
