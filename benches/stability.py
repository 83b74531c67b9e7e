#!/usr/bin/env python3
"""Same verdict every time? Runs each program N times (fresh `scalprof run -t 1,2`, its
own store) and prints, per program, the top cause of every run, the agreement (n/N) and
what the adaptive traced repeats cost.

The top cause is the run's first finding ("-" when it has none: a program that scales
must give "-" every time). Where the last point's top two causes could not be told apart,
it is printed as "A|B" (the candidates), which counts as agreeing with neither.

Usage: benches/stability.py [RUNS] [--bin PATH] [--programs a,b,...]
Programs are corpus names, or `sqlite` (benches/sqlite_writers.py, rollback journal).
Needs root (BPF, kernel stacks) and a built scalprof (cargo build --release).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = [
    "hash_global_mutex",   # a global mutex
    "index_rebuild",       # a rare long holder
    "journal_sync",        # a lock held across fdatasync
    "sqlite",              # SQLite writers, rollback journal
    "pwrite_same_file",    # the inode lock
    "gil_handoff",         # a condvar hand-off
    "clean_parallel",      # scales: no finding
    "side_lock",           # scales, with a contended lock off the workers' path
    "hash_sharded",        # scales, with a lock off the workers' path
]


def command(corpus, program):
    if program == "sqlite":
        return ["python3", os.path.join(ROOT, "benches", "sqlite_writers.py"), "{threads}"]
    return [os.path.join(corpus, program), "{threads}"]


def one_run(scalprof, corpus, program):
    with tempfile.TemporaryDirectory() as tmp:
        doc_path = os.path.join(tmp, "run.json")
        start = time.monotonic()
        out = subprocess.run(
            [scalprof, "--db", os.path.join(tmp, "runs.db"), "run", "-t", "1,2",
             "--json", doc_path, "--"] + command(corpus, program),
            capture_output=True, text=True)
        took = time.monotonic() - start
        if out.returncode != 0:
            return {"top": "error", "took": took, "traced": 0, "why": out.stderr[-300:]}
        doc = json.load(open(doc_path))
    last = doc["points"][-1]
    settling = last.get("settling") or {}
    if settling.get("settled") is False and len(settling.get("candidates") or []) > 1:
        top = "|".join(settling["candidates"])
    else:
        # Settled, or only a smaller cause on the edge of the threshold: the top stands.
        top = doc["findings"][0]["subject"] if doc["findings"] else "-"
    traced = sum(len(p.get("traced_repeats", [])) for p in doc["points"])
    return {"top": top, "took": took, "traced": traced,
            "pert1": doc["points"][0].get("perturbation")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="?", type=int, default=5)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "scalprof"))
    ap.add_argument("--programs", default=",".join(DEFAULT))
    args = ap.parse_args()
    corpus = tempfile.mkdtemp(prefix="scalprof-stability-")
    subprocess.run([args.bin, "corpus", "--out", corpus], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"{'program':<20} {'agree':>6}  {'traced (min-max)':>16} {'s per run':>9}  "
          f"{'perturbation @1':>15}  top cause of each run")
    extra = []
    for program in args.programs.split(","):
        runs = [one_run(args.bin, corpus, program) for _ in range(args.runs)]
        tops = [r["top"] for r in runs]
        most = max(set(tops), key=tops.count)
        agree = tops.count(most) if "|" not in most else 0
        traced = [r["traced"] for r in runs]
        took = statistics.median(r["took"] for r in runs)
        pert = [r["pert1"] for r in runs if r.get("pert1") is not None]
        pert_s = f"{statistics.median(pert) * 100:+.1f}%" if pert else "-"
        print(f"{program:<20} {agree:>3}/{len(runs):<2}  {min(traced):>7}-{max(traced):<8} "
              f"{took:>9.1f}  {pert_s:>15}  {', '.join(tops)}", flush=True)
        # Traced repeats beyond the minimum (2 per point), as a share of the executions.
        base = 2 * 2 + 3 * 2
        extra += [(t - 4) / base for t in traced]
        for r in runs:
            if r["top"] == "error":
                print(f"   error: {r['why']}", file=sys.stderr)
    if extra:
        print(f"\nadaptive traced repeats: median {statistics.median(extra) * 100:.0f}% more "
              f"executions, worst {max(extra) * 100:.0f}%")


if __name__ == "__main__":
    main()
