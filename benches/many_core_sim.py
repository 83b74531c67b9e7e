#!/usr/bin/env python3
"""The sampler at the sample rate of a many-core machine, simulated on this one.

A machine with C CPUs sampling at 999 Hz produces C x 999 samples per second. On this
machine's N CPUs the same rate is reached by raising --freq to C x 999 / N, with the
corpus's clean_parallel program keeping every CPU busy. For C in 2, 32, 64 and 128, with
and without lock tracing, one `scalprof run -t N --repeat 1` (one clean and one traced
execution) is timed under /usr/bin/time, and this prints per rate:

  samples        samples kept in the traced execution, and lost ones
  truncated      stacks cut short (the copy was too small or the walk failed)
  us/sample      scalprof's own CPU (the run's CPU minus the workload's, both executions)
                 per sample kept: recording, unwinding, symbolizing, storing
  marginal       the same for the samples added over the first rate's run (without the
                 fixed cost of loading symbols and tracers): the cost per sample that scales
  read, after    scalprof's own measure of the same (profile.stats): the reader thread's CPU
                 while the workload ran, and the CPU of indexing, unwinding and symbolizing
                 the samples after it exited (every builder thread), per sample kept
  KiB/sample     scalprof's peak resident memory per sample kept
  perturbation   the traced execution's throughput against the clean one

Usage: benches/many_core_sim.py [--bin PATH] [--cpus 2,32,64,128] [--scale 1]
Needs root (perf events on every CPU, BPF for the lock-tracing rows).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/scalprof"))
    ap.add_argument("--cpus", default="2,32,64,128")
    ap.add_argument("--scale", default="1", help="CORPUS_SCALE for clean_parallel")
    args = ap.parse_args()
    here = os.cpu_count() or 1
    work = tempfile.mkdtemp(prefix="scalprof-sim-")
    corpus = os.path.join(work, "corpus")
    subprocess.run([args.bin, "corpus", "--out", corpus], check=True, capture_output=True)
    prog = os.path.join(corpus, "clean_parallel")
    print(f"this machine: {here} CPUs; clean_parallel at {here} threads, CORPUS_SCALE={args.scale}")
    print(f"{'as if':>8} {'locks':>5} {'--freq':>7} {'samples':>9} {'lost':>6} {'truncated':>9} "
          f"{'us/sample':>9} {'marginal':>8} {'read':>6} {'after':>6} {'KiB/sample':>10} "
          f"{'perturbation':>12}")
    first = {}
    for cpus in [int(c) for c in args.cpus.split(",")]:
        freq = max(1, min(100_000, round(cpus * 999 / here)))
        for locks in (False, True):
            db = os.path.join(work, f"runs-{cpus}-{int(locks)}.db")
            out = os.path.join(work, f"run-{cpus}-{int(locks)}.json")
            timing = os.path.join(work, "time.txt")
            cmd = ["/usr/bin/time", "-f", "%U %S %M", "-o", timing, args.bin, "--db", db,
                   "run", "-t", str(here), "--repeat", "1", "--freq", str(freq),
                   "--json", out]
            if not locks:
                cmd.append("--no-locks")
            cmd += ["--", prog, "{threads}"]
            env = dict(os.environ, CORPUS_SCALE=args.scale)
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print(f"{cpus:>8} failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
                continue
            user, sys_, max_kib = open(timing).read().split()[-3:]
            doc = json.load(open(out))
            p = doc["points"][0]
            stats = (p.get("profile") or {}).get("stats", {})
            samples = stats.get("samples", 0)
            workload = sum(x["user_s"] + x["sys_s"] for x in p["repeats"] + p["traced_repeats"])
            own = float(user) + float(sys_) - workload
            us = 1e6 * own / samples if samples else float("nan")
            kib = int(max_kib) / samples if samples else float("nan")
            pert = p.get("perturbation")
            base = first.setdefault(locks, (own, samples))
            marginal = (1e6 * (own - base[0]) / (samples - base[1])
                        if samples > base[1] else float("nan"))
            read = stats.get("record_cpu_ns", 0) / 1e3 / samples if samples else float("nan")
            after = stats.get("process_cpu_ns", 0) / 1e3 / samples if samples else float("nan")
            print(f"{cpus:>8} {'on' if locks else 'off':>5} {freq:>7} {samples:>9} "
                  f"{stats.get('lost_samples', 0):>6} {stats.get('truncated_stacks', 0):>9} "
                  f"{us:>9.1f} {marginal:>8.1f} {read:>6.1f} {after:>6.1f} {kib:>10.2f} "
                  f"{'n/a' if pert is None else f'{100 * pert:+.1f}%':>12}")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
