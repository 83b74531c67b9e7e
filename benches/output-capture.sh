#!/usr/bin/env bash
# What capturing a chatty workload's output costs it: a shell pipeline writing MB
# megabytes of short lines (none, or every one, an ops line), timed with its output to
# /dev/null, and as scalprof's clean repeats with the default capture (only the ops lines
# kept, the pattern run over each chunk) and with --keep-output (64 MiB kept). Medians of
# the repeats, in one session; the ratios are the observer's cost.
# Usage: benches/output-capture.sh [MB] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
mb="${1:-300}"
repeats="${2:-5}"
cargo build --release -q -p scalprof
bin=$PWD/target/release/scalprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for line in "request 12345 served in 3 ms" "ops=12345 served in 3 ms"; do
    script="yes '$line' | head -c $((mb * 1000000)); echo ops=1"
    plain=()
    for i in $(seq "$repeats"); do
        s=$(date +%s%N); sh -c "$script" >/dev/null; e=$(date +%s%N)
        plain+=("$(( (e - s) / 1000 ))e-6")
    done
    for keep in "" --keep-output; do
        "$bin" --db "$work/runs.db" run -t 1 --repeat "$repeats" --diagnose 0 $keep \
            --json "$work/${keep:-default}.json" -- sh -c "$script" >/dev/null 2>&1
    done
    python3 - "$work" "$line" "${plain[@]}" <<'PY'
import json, statistics, sys
work, line, plain = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3:]]
base = statistics.median(plain)
print(f"lines {line!r}: /dev/null {base:.3f} s")
for name in ("default", "--keep-output"):
    d = json.load(open(f"{work}/{name}.json"))
    wall = d["points"][0]["wall_s"]["median"]
    print(f"  {name:14} {wall:.3f} s  ({wall / base:.2f}x)")
PY
done
