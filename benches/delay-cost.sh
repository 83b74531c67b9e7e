#!/usr/bin/env bash
# What the delay injector costs at zero delay: a program's clean throughput in a sweep
# (nothing attached) against the control level of `scalprof verify` on it (the sys_exit
# hook attached, no delay), back to back, at one point. A system-call tracepoint sends
# every system call of every task down the slow path: syscall_loop (pwrite + getppid,
# nothing else) is the worst case, journal_sync a lock-bound one. A user lock is
# lengthened by an interposer (LD_PRELOAD): hash_global_mutex, a 100 ns critical section
# two threads hand to each other, is its worst case. A kernel lock is lengthened at
# lock:contention_end (mmap_churn's mmap_lock), a function by a uprobe at its entry
# (index_rebuild's rebuild_index, called once in 2000 operations).
# Usage: benches/delay-cost.sh [THREADS]   (root: BPF)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
cargo build --release -q -p scalprof
bin=$PWD/target/release/scalprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" corpus --out "$work/corpus" >/dev/null
printf '%-14s %-10s %14s %14s %8s\n' program call clean control ratio
for case in "syscall_loop pwrite64" "journal_sync fdatasync" "hash_global_mutex table_lock" \
    "mmap_churn mmap_lock" "index_rebuild rebuild_index"; do
    set -- $case
    db="$work/$1.db"
    "$bin" --db "$db" run -t "$threads" --repeat 5 --diagnose 0 -- "$work/corpus/$1" '{threads}' >/dev/null 2>&1
    "$bin" --db "$db" verify 1 --cause "$2" --rounds 3 --json 2>/dev/null >"$work/$1.json"
    "$bin" --db "$db" show 1 --json >"$work/$1.run.json"
    python3 - "$1" "$2" "$work/$1.run.json" "$work/$1.json" <<'PY'
import json, sys
name, call, run, exp = sys.argv[1:]
clean = json.load(open(run))["points"][-1]["throughput"]
control = json.load(open(exp))[0]["throughput"][0]["throughput"]
print(f"{name:<14} {call:<10} {clean:14.0f} {control:14.0f} {control / clean:7.3f}x")
PY
done
