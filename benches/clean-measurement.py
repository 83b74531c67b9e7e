#!/usr/bin/env python3
"""What tracing costs the program, and whether the speedup scalprof reports is the program's.

For each corpus program (syscall-heavy, dup/close, mmap churn) at 1 and 2 threads, in
alternating rounds of one session, the workload's throughput (its printed ops / wall) is
measured:

  untraced          the program alone (through a tiny timing wrapper)
  scalprof traced   the diagnosis repeat of `scalprof run` (profile + locks, the default)
  scalprof clean    the untraced repeat of the same `scalprof run` (what it reports)
  perf record -g    the program under `perf record -g`
  perf lock record  the program under `perf lock record`

With --components, the traced repeat once per collector set, to price each part:

  profile only      --no-locks (perf sampling with stack copies)
  locks only        --no-profile (BPF lock tracing and the hold-timing interposer)
  locks, no holds   --no-profile --no-hold-times (BPF lock tracing alone)
  no holds          --no-hold-times (everything but the interposer)

Prints medians, each arm's cost at 1 thread and its speedup at 2 threads next to the
untraced speedup. Targets (issue 9): traced cost <= 5% at 1 thread; the reported speedup
within 5% of the untraced one.

Usage: benches/clean-measurement.py [ROUNDS] [--bin PATH] [--programs a,b] [--components]
Needs root (BPF, kernel stacks) and Debian's linux-perf for the perf arms.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


TIMED = """#!/bin/sh
# Times the workload inside whatever traces it (the tracer's start-up is not counted).
s=$(date +%s%N); "$2" "$3" > "$1.out"; e=$(date +%s%N)
echo "$(sed -n 's/^ops=//p' "$1.out" | tail -1) $(( e - s ))" > "$1"
"""


def run_wrapped(work, argv, prog, threads):
    """Runs prog under argv (a tracer prefix, or nothing); returns its ops/s."""
    result = f"{work}/timed.result"
    out = subprocess.run(argv + [f"{work}/timed.sh", result, prog, str(threads)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv + [prog])} failed:\n{out.stderr[-2000:]}")
    ops, ns = open(result).read().split()
    return int(ops) / (int(ns) / 1e9)


def traced_tput(point):
    """Throughput of a point's diagnosis repeats (old scalprof: its only repeats)."""
    reps = point.get("traced_repeats") or point["repeats"]
    vals = [r["ops"] / r["wall_s"] for r in reps if r.get("exit_code") == 0 and r.get("ops")]
    return statistics.median(vals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/scalprof"))
    ap.add_argument("--programs", default="syscall_loop,dup_close,mmap_churn")
    ap.add_argument("--no-perf", action="store_true", help="skip the perf arms")
    ap.add_argument("--components", action="store_true",
                    help="also each collector set's traced repeat")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="scalprof-bench-")
    try:
        subprocess.run([args.bin, "corpus", "--out", f"{work}/corpus"], check=True,
                       capture_output=True)
        with open(f"{work}/timed.sh", "w") as f:
            f.write(TIMED)
        os.chmod(f"{work}/timed.sh", 0o755)
        perf = shutil.which("perf") and not args.no_perf
        db = f"{work}/runs.db"
        arms = ["untraced", "scalprof traced", "scalprof clean"]
        if perf:
            arms += ["perf record -g", "perf lock record"]
        components = {
            "profile only": ["--no-locks"],
            "locks only": ["--no-profile"],
            "locks, no holds": ["--no-profile", "--no-hold-times"],
            "no holds": ["--no-hold-times"],
        } if args.components else {}
        arms += list(components)
        res = {}
        for name in args.programs.split(","):
            prog = f"{work}/corpus/{name}"
            for rnd in range(args.rounds):
                for t in (1, 2):
                    def add(arm, v):
                        res.setdefault((name, arm, t), []).append(v)
                    add("untraced", run_wrapped(work, [], prog, t))
                    out = subprocess.run(
                        [args.bin, "--db", db, "run", "-t", str(t), "--repeat", "1",
                         "--json", f"{work}/doc.json", "--", prog, "{threads}"],
                        capture_output=True, text=True)
                    if out.returncode != 0:
                        raise SystemExit(f"scalprof run failed:\n{out.stderr[-2000:]}")
                    doc = json.load(open(f"{work}/doc.json"))
                    p = doc["points"][0]
                    add("scalprof traced", traced_tput(p))
                    if p.get("traced_repeats"):
                        add("scalprof clean", p["throughput"])
                    for arm, flags in components.items():
                        out = subprocess.run(
                            [args.bin, "--db", db, "run", "-t", str(t), "--repeat", "1", *flags,
                             "--json", f"{work}/doc.json", "--", prog, "{threads}"],
                            capture_output=True, text=True)
                        if out.returncode != 0:
                            raise SystemExit(f"scalprof run {flags} failed:\n{out.stderr[-2000:]}")
                        add(arm, traced_tput(json.load(open(f"{work}/doc.json"))["points"][0]))
                    if perf:
                        add("perf record -g",
                            run_wrapped(work, ["perf", "record", "-q", "-g", "-o", f"{work}/p.data", "--"], prog, t))
                        add("perf lock record",
                            run_wrapped(work, ["perf", "lock", "record", "-q", "-o", f"{work}/l.data", "--"], prog, t))
        print(f"{'program':14} {'arm':18} {'ops/s @1':>12} {'cost @1':>8} {'ops/s @2':>12} {'speedup':>8} {'vs untraced':>11}")
        for name in args.programs.split(","):
            base1 = statistics.median(res[(name, "untraced", 1)])
            base2 = statistics.median(res[(name, "untraced", 2)])
            for arm in arms:
                if (name, arm, 1) not in res:
                    continue
                a = statistics.median(res[(name, arm, 1)])
                b = statistics.median(res[(name, arm, 2)])
                sp, sp0 = b / a, base2 / base1
                print(f"{name:14} {arm:18} {a:12.4g} {100 * (a / base1 - 1):+7.1f}% {b:12.4g} "
                      f"{sp:7.2f}x {100 * (sp / sp0 - 1):+10.1f}%")
        print(f"({args.rounds} alternating rounds, medians; cost = throughput change at 1 thread; "
              "'vs untraced' = reported speedup against the untraced speedup)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
