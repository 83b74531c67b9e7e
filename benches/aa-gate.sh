#!/usr/bin/env bash
# The gate's false alarms: N runs of one unchanged program (A/A), each consecutive pair
# compared with --fail-if-slower PCT, and the history of the series read for change
# points. Prints how many of the N-1 pairs failed and how many change points the history
# claimed; both should be 0.
#
#   benches/aa-gate.sh [N=12] [PCT=5] [PROGRAM=hash_sharded]
set -euo pipefail
n=${1:-12}
pct=${2:-5}
program=${3:-hash_sharded}
bin=${SCALPROF:-target/release/scalprof}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" corpus --out "$work/corpus" >/dev/null
db="$work/aa.db"
for i in $(seq 1 "$n"); do
    "$bin" --db "$db" run -t 1,2 --repeat 3 --label aa --commit "aa$i" \
        -- "$work/corpus/$program" '{threads}' >/dev/null 2>&1
done
failed=0
for i in $(seq 2 "$n"); do
    if ! "$bin" --db "$db" compare "$((i - 1))" "$i" --fail-if-slower "$pct" >/dev/null 2>&1; then
        rc=$?
        [ "$rc" -eq 1 ] || { echo "compare $((i - 1)) $i: error $rc" >&2; exit 2; }
        failed=$((failed + 1))
    fi
done
changes=$("$bin" --db "$db" history aa --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["change_points"]))')
echo "A/A pairs: $((n - 1)), failed the gate at ${pct}%: $failed"
echo "history of the $n A/A runs: $changes change point(s)"
