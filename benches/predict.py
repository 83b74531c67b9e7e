#!/usr/bin/env python3
"""The prediction's error against measured many-core throughput.

Fixture part (always): each run of the 16-CPU fixture is cut to its first two points
(1 and 4 threads) in a copy of the store; `show --predict 16` then predicts 8 and 16,
which the full run measured. Prints, per program, the error at 8 and 16, whether the
measured value falls in the interval, and the limiting cause; then the median and worst
error at 16 and how many programs are within +-25%.

Local part (--local, needs root): records the same programs here at 1 and 2 threads with
CORPUS_SCALE=0.2 (the fixture's scale), predicts 16, and compares the predicted speedup
at 16 (over this machine's own 1-thread throughput: the machines' CPUs differ) with the
fixture's measured speedup.

    benches/predict.py [--local] [--store FIXTURE] [--upto 2|4] [--scalprof BIN]
"""

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "crates/scalprof/tests/fixtures/corpus16.db")


def show(scalprof, db, run, *extra):
    out = subprocess.run(
        [scalprof, "--db", db, "show", str(run), "--json", *extra],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


def prediction(doc):
    return (doc.get("model") or {}).get("prediction")


def cut_store(src, dst, upto):
    shutil.copy(src, dst)
    db = sqlite3.connect(dst)
    for table in ("repeats", "profiles", "locks"):
        db.execute(f"DELETE FROM {table} WHERE value > ?", (upto,))
    db.commit()
    db.close()


def fixture_part(scalprof, store, work, upto):
    full = os.path.join(work, "full.db")
    cut = os.path.join(work, "cut.db")
    shutil.copy(store, full)
    cut_store(store, cut, upto)
    runs = json.loads(subprocess.run([scalprof, "--db", full, "runs", "--json"],
                                     capture_output=True, text=True, check=True).stdout)
    print(f"fixture: predict 8 and 16 threads from the points up to {upto} (16-CPU machine)")
    print(f"{'program':20} {'8: error':>9} {'16: error':>10} {'curve only':>11} {'in interval':>12}  limiting cause")
    errors, curves, needed = {}, {}, {}
    for r in runs:
        truth = {p["value"]: p["throughput"] for p in show(scalprof, full, r["id"])["points"]}
        if not all(truth.get(n) for n in (8, 16)):
            print(f"{r['label']:20} not measured at 8 and 16 threads (an interrupted sweep)")
            continue
        doc = show(scalprof, cut, r["id"], "--predict", "16")
        p = prediction(doc)
        if not p:
            print(f"{r['label']:20} no prediction")
            continue
        at = {q["threads"]: q for q in p["points"]}
        err = {n: at[n]["throughput"] / truth[n] - 1 for n in (8, 16)}
        inside = all(at[n]["interval"][0] <= truth[n] <= at[n]["interval"][1] for n in (8, 16))
        lim = p.get("limiting")
        cause = f"{lim['subject']} from {lim['from_threads']}" if lim else "none"
        curve = usl(doc["model"], 16) / truth[16] - 1
        print(f"{r['label']:20} {err[8]:>+9.0%} {err[16]:>+10.0%} {curve:>+11.0%} "
              f"{'yes' if inside else 'no':>12}  {cause}")
        errors[r["label"]] = err[16]
        curves[r["label"]] = curve
        needed[r["label"]] = max(width_needed(doc, at[n], truth[n]) for n in (8, 16))
    summarize(errors)
    leave_one_out(needed)
    print("the curve alone (the model fitted to 1 and 4 threads, no causes):", end=" ")
    summarize(curves)
    return errors


ERROR_PER_DOUBLING = 0.12  # predict.rs: the width the intervals are made with


def width_needed(doc, q, measured):
    """The width per doubling (and per unseen thing) the interval of the predicted point
    `q` would need to hold `measured`: predict.rs's interval, solved for its constant."""
    p = prediction(doc)
    last = next(pt for pt in doc["points"] if pt["value"] == p["from_point"])
    spread = last.get("throughput_spread") or {}
    lo = spread["min"] / spread["median"] if spread.get("median") else 1.0
    hi = spread["max"] / spread["median"] if spread.get("median") else 1.0
    steps = math.log2(q["threads"] / p["from_point"]) + len(p["unseen"])
    x = q["throughput"]
    e0 = ERROR_PER_DOUBLING * steps
    # The low end as made: the convoy's floor where a parking lock was contended.
    convoy = abs(q["interval"][0] / (x * lo) - min(0.25, max(1 - e0, 0.1))) < 1e-6 and 1 - e0 > 0.25
    if measured > x * hi:
        return (measured / (x * hi) - 1) / steps
    ratio = measured / (x * lo)
    if ratio >= 1 or (convoy and ratio >= 0.25):
        return 0.0
    return (1 - ratio) / steps if ratio >= 0.1 else math.inf


def leave_one_out(needed):
    """Each program's interval judged with the width chosen without it: the smallest that
    holds every other program (predict.rs ships the one chosen from all, rounded up)."""
    if len(needed) < 3:
        return
    chosen = max
    inside = 0
    for label, k in needed.items():
        others = [v for other, v in needed.items() if other != label]
        inside += k <= chosen(others)
    print(f"intervals, leave one program out: {inside} of {len(needed)} inside; the width "
          f"chosen from all: {chosen(needed.values()):.3f} per doubling (made with "
          f"{ERROR_PER_DOUBLING}); needed: " +
          ", ".join(f"{k} {v:.2f}" for k, v in sorted(needed.items(), key=lambda kv: -kv[1])))


def usl(m, n):
    return m["lambda"] * n / (1 + m["sigma"] * (n - 1) + m["kappa"] * n * (n - 1))


def summarize(errors, band=0.25):
    if not errors:
        return
    absolute = sorted(abs(e) for e in errors.values())
    worst = max(errors, key=lambda k: abs(errors[k]))
    within = sum(1 for e in absolute if e <= band)
    print(f"at 16 threads: median |error| {statistics.median(absolute):.0%}, worst "
          f"{errors[worst]:+.0%} ({worst}); within +-{band:.0%}: {within} of {len(absolute)}")


def recorded(scalprof, db, label):
    """Whether the store `db` (kept with --keep) already holds a run labelled `label`."""
    if not os.path.exists(db):
        return False
    runs = json.loads(subprocess.run([scalprof, "--db", db, "runs", "--json"],
                                     capture_output=True, text=True, check=True).stdout)
    return any(r["label"] == label for r in runs)


def local_part(scalprof, store, work):
    corpus = os.path.join(work, "corpus")
    subprocess.run([scalprof, "corpus", "--out", corpus], check=True, capture_output=True)
    full = os.path.join(work, "full.db")
    runs = json.loads(subprocess.run([scalprof, "--db", full, "runs", "--json"],
                                     capture_output=True, text=True, check=True).stdout)
    local = os.path.join(work, "local.db")
    env = dict(os.environ, CORPUS_SCALE="0.2")
    print("\nlocal: predict 16 threads from 1 and 2 on this machine, against the fixture's speedup")
    print(f"{'program':20} {'predicted':>10} {'interval':>14} {'measured':>9} {'error':>7} "
          f"{'inside':>6}  limiting cause")
    errors, inside = {}, {}
    for r in runs:
        program = os.path.join(corpus, r["label"])
        if not os.path.exists(program):
            continue
        if not recorded(scalprof, local, r["label"]):
            subprocess.run([scalprof, "--db", local, "run", "-t", "1,2", "--repeat", "5", "--predict", "16",
                            "--label", r["label"], "--", program, "{threads}"],
                           env=env, check=True, capture_output=True)
        truth = {p["value"]: p["throughput"] for p in show(scalprof, full, r["id"])["points"]}
        doc = show(scalprof, local, r["label"], "--predict", "16")
        p = prediction(doc)
        if not p:
            print(f"{r['label']:20} no prediction")
            continue
        x1 = doc["points"][0]["throughput"]
        at16 = p["points"][-1]
        predicted = at16["throughput"] / x1
        lo, hi = (v / x1 for v in at16["interval"])
        measured = truth[16] / truth[1]
        lim = p.get("limiting")
        cause = f"{lim['subject']} from {lim['from_threads']}" if lim else "none"
        errors[r["label"]] = predicted / measured - 1
        inside[r["label"]] = lo <= measured <= hi
        print(f"{r['label']:20} {predicted:>9.2f}x {lo:>6.2f}-{hi:<6.2f}x {measured:>8.2f}x "
              f"{errors[r['label']]:>+7.0%} {'yes' if inside[r['label']] else 'no':>6}  {cause}")
    summarize(errors, 0.30)
    print(f"measured inside the interval: {sum(inside.values())} of {len(inside)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--local", action="store_true", help="also record 1 and 2 threads here")
    ap.add_argument("--store", default=FIXTURE)
    ap.add_argument("--upto", type=int, default=4, help="the fixture's points used (default 4)")
    ap.add_argument("--scalprof", default=os.path.join(ROOT, "target/release/scalprof"))
    ap.add_argument("--keep", metavar="DIR", help="keep the stores in DIR")
    args = ap.parse_args()
    if not os.path.exists(args.scalprof):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "scalprof"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as work:
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            work = args.keep
        fixture_part(args.scalprof, args.store, work, args.upto)
        if args.local:
            local_part(args.scalprof, args.store, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
