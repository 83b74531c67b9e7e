#!/usr/bin/env bash
# Analysis throughput: one perf.data with >= 1,000,000 samples, turned into folded stacks and
# an SVG flame graph, by `perf script | inferno-collapse-perf | inferno-flamegraph` and by
# `scalprof import` + `scalprof flame`, timed in the same session. Prints the ratio.
# Installs what it needs: Debian's linux-perf, and inferno from crates.io.
# Usage: benches/analysis-speed.sh   (needs root or perf_event_paranoid <= 1)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || apt-get install -y -qq linux-perf
command -v inferno-flamegraph >/dev/null || cargo install -q inferno
cargo build --release -q -p scalprof
bin=$PWD/target/release/scalprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" corpus --out "$work/corpus" >/dev/null
# ~25 kHz on each of the CPUs with frame-pointer callchains (small records): the mmap
# program spends most of its time in deep kernel stacks.
want=${SAMPLES:-1000000}
freq=${FREQ:-25000}
cpus=$(nproc)
# the kernel throttles high rates a little: record 40% longer than the nominal need
secs=$(( want * 14 / 10 / (freq * cpus) + 2 ))
echo "recording ~${want} samples (${freq} Hz × ${cpus} CPUs × ${secs} s)…"
perf record -q -F "$freq" -a -g -o "$work/perf.data" -- sleep "$secs" &
rec=$!
sleep 0.2
while kill -0 "$rec" 2>/dev/null; do
    CORPUS_SCALE=1 "$work/corpus/mmap_churn" "$cpus" >/dev/null || true
done
wait "$rec" || true
ls -l "$work/perf.data"

t0=$(date +%s.%N)
perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf > "$work/perf.folded"
inferno-flamegraph < "$work/perf.folded" > "$work/perf.svg"
t1=$(date +%s.%N)
"$bin" --db "$work/runs.db" import "$work/perf.data" > "$work/import.txt" 2>&1
"$bin" --db "$work/runs.db" flame latest -o "$work/scalprof.svg" 2>/dev/null
t2=$(date +%s.%N)

# The import's summary leaves the sample count to the details (`show -v`).
samples=$("$bin" --db "$work/runs.db" show latest -v | grep -o '[0-9][0-9]* samples' | head -1)
perf_total=$(awk '{s += $NF} END {printf "%.0f", s}' "$work/perf.folded")
ours_total=$("$bin" --db "$work/runs.db" flame latest --folded | awk '{s += $NF} END {print s}')
echo "folded totals: perf+inferno ${perf_total} (weighted by period), scalprof ${ours_total} samples"
python3 - "$t0" "$t1" "$t2" "$samples" <<'PY'
import sys
t0, t1, t2 = map(float, sys.argv[1:4])
perf, ours = t1 - t0, t2 - t1
print(f"profile: {sys.argv[4]}")
print(f"perf script | inferno-collapse-perf | inferno-flamegraph: {perf:.2f} s")
print(f"scalprof import + scalprof flame:                        {ours:.2f} s")
print(f"scalprof is {perf / ours:.1f}x faster")
PY
