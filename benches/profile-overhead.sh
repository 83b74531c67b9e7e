#!/usr/bin/env bash
# Overhead of scalprof's sampler: wall time of the clean corpus program at 2 threads,
# unprofiled vs profiled at the default frequency, alternating runs in one session, medians.
# Usage: benches/profile-overhead.sh [ROUNDS]   (needs root or perf_event_paranoid <= 1)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-7}"
threads="${THREADS:-2}"
program="${PROGRAM:-clean_parallel}"
cargo build --release -q -p scalprof
bin=target/release/scalprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" corpus --out "$work/corpus" >/dev/null
db="$work/runs.db"
for i in $(seq "$rounds"); do
    "$bin" --db "$db" run -t "$threads" --repeat 1 --label plain --no-profile --no-locks -- "$work/corpus/$program" '{threads}' >/dev/null 2>&1
    "$bin" --db "$db" run -t "$threads" --repeat 1 --label profiled --no-locks ${FREQ:+--freq $FREQ} -- "$work/corpus/$program" '{threads}' >/dev/null 2>&1
done
python3 - "$bin" "$db" <<'PY'
import json, statistics, subprocess, sys
bin, db = sys.argv[1], sys.argv[2]
runs = subprocess.run([bin, "--db", db, "runs"], capture_output=True, text=True).stdout
walls = {"plain": [], "profiled": []}
samples = []
for line in runs.splitlines():
    cells = [c.strip() for c in line.strip("│ ").split("  ") if c.strip()]
    if len(cells) < 2 or not cells[0].isdigit():
        continue
    doc = json.loads(subprocess.run([bin, "--db", db, "show", cells[0], "--json"], capture_output=True, text=True).stdout)
    walls[doc["label"]].append(doc["points"][0]["repeats"][0]["wall_s"])
    prof = doc["points"][0].get("profile")
    if prof:
        samples.append(prof["stats"]["samples"])
a, b = statistics.median(walls["plain"]), statistics.median(walls["profiled"])
print(f"unprofiled median wall {a:.4f} s over {len(walls['plain'])} runs")
print(f"profiled   median wall {b:.4f} s over {len(walls['profiled'])} runs ({statistics.median(samples):.0f} samples/run)")
print(f"overhead {100 * (b / a - 1):+.1f}%")
PY
