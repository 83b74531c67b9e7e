#!/usr/bin/env bash
# What tracing a Go program's goroutines costs it: a program of corpus/runtimes (PROGRAM,
# default go_mutex: one sync.Mutex) at each of THREADS (default "1 2", GOMAXPROCS) timed
# untraced, in scalprof's traced repeat with the profiler alone (--no-locks), and with the
# lock tracer and its Go runtime probes (a mutex's park, release, ready, execute: four
# uprobe traps per contended hand-off; a channel's park, hand-off, ready, execute), which
# run in bursts where their hits would cost more than 1% of the CPUs.
# Medians of ROUNDS alternating runs, in one session; the ratios are the observer's cost.
# Usage: [PROGRAM=go_funnel] [THREADS="1 2"] benches/runtime-probes.sh [ROUNDS]   (root; go)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
cargo build --release -q -p scalprof
bin=$PWD/target/release/scalprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prog="$work/${PROGRAM:-go_mutex}"
GOCACHE="$work/gocache" go build -o "$prog" "corpus/runtimes/${PROGRAM:-go_mutex}.go"
traced_wall() { # the traced repeat's wall time of one `scalprof run` (extra flags: $@)
    "$bin" --db "$work/runs.db" run -t "$t" --repeat 1 --diagnose 1 --diagnose-max 1 "$@" \
        --json "$work/run.json" -- "$prog" '{threads}' >/dev/null 2>&1
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["points"][0]["traced_repeats"][0]["wall_s"])' "$work/run.json"
}
for t in ${THREADS:-1 2}; do
for i in $(seq "$rounds"); do
    s=$(date +%s%N); "$prog" "$t" >/dev/null; e=$(date +%s%N)
    echo "$(( (e - s) / 1000 ))e-6" >> "$work/plain$t"
    traced_wall --no-locks >> "$work/profiled$t"
    traced_wall >> "$work/probed$t"
done
python3 - "$work" "$t" "$(basename "$prog")" <<'PY'
import statistics, sys
work, t, name = sys.argv[1:4]
med = lambda n: statistics.median(float(x) for x in open(f"{work}/{n}{t}"))
plain, prof, probed = med("plain"), med("profiled"), med("probed")
print(f"{name} at {t} threads")
print(f"  untraced                      {plain:.3f} s")
print(f"  profiled (--no-locks)         {prof:.3f} s  {prof / plain:.2f}x")
print(f"  profiled + locks + Go probes  {probed:.3f} s  {probed / plain:.2f}x  ({probed / prof:.2f}x the profiled run)")
PY
done
