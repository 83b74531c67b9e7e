#!/usr/bin/env bash
# Overhead of scalprof's lock tracer against `perf lock record`, on the corpus mmap/munmap
# program at 2 threads, in one session: wall time of the workload untraced, traced by
# scalprof (BPF, aggregated in the kernel), and traced by perf (events streamed to
# perf.data); and the bytes each writes. Medians over ROUNDS alternating runs.
# Usage: benches/lock-overhead.sh [ROUNDS]   (root; installs Debian's linux-perf if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
command -v perf >/dev/null || apt-get install -y -qq linux-perf
cargo build --release -q -p scalprof
bin=$PWD/target/release/scalprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" corpus --out "$work/corpus" >/dev/null
prog="$work/corpus/${PROGRAM:-mmap_churn}"
# The workload's own wall time, measured inside whatever traces it.
timed="$work/timed.sh"
cat > "$timed" <<SH
#!/bin/sh
s=\$(date +%s%N); "$prog" 2 >/dev/null; e=\$(date +%s%N); echo \$(( (e - s) / 1000 )) >> "\$1"
SH
chmod +x "$timed"
for i in $(seq "$rounds"); do
    "$timed" "$work/plain.us"
    "$bin" --db "$work/runs.db" run -t 2 --repeat 1 --no-profile -- "$timed" "$work/scalprof.us" >/dev/null 2>&1
    perf lock record -o "$work/perf-lock.data" -- "$timed" "$work/perf.us" >/dev/null 2>&1
done
perf_bytes=$(stat -c %s "$work/perf-lock.data")
# What scalprof keeps per traced run: the named lock table (JSON in the store).
ours_bytes=$("$bin" --db "$work/runs.db" show latest --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(json.dumps(d["points"][0].get("locks", {}))))')
python3 - "$work" "$perf_bytes" "$ours_bytes" <<'PY'
import statistics, sys
work, perf_bytes, ours_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
med = lambda name: statistics.median(int(x) for x in open(f"{work}/{name}.us")) / 1e6
plain, ours, perf = med("plain"), med("scalprof"), med("perf")
print(f"untraced               {plain:.3f} s")
print(f"scalprof (BPF)         {ours:.3f} s  overhead {100 * (ours / plain - 1):+.1f}%  writes {ours_bytes} bytes")
print(f"perf lock record       {perf:.3f} s  overhead {100 * (perf / plain - 1):+.1f}%  writes {perf_bytes} bytes")
print(f"scalprof's overhead is {(ours / plain - 1) / max(perf / plain - 1, 1e-9):.2f} of perf's; bytes {100 * ours_bytes / perf_bytes:.3f}% of perf's")
PY
