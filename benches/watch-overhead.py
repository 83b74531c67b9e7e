#!/usr/bin/env python3
"""What `scalprof watch` costs the server it watches, and what it costs itself.

The corpus server `phase_server` runs BUSY workers for SECONDS and prints the requests it
served every 200 ms. Each round runs it twice, alternately unwatched and watched
(`scalprof watch --attach PID --ops-file LOG …` for all but its first and last second);
the server's rate is the median of its 200 ms lines between those marks, so both runs are
judged on the server's own count over the same stretch. scalprof's own CPU is its
children's rusage over the watch.

Prints, per busy-worker count: the median unwatched and watched rates over the rounds,
their ratio, and scalprof's CPU in % of one CPU.

Usage: benches/watch-overhead.py [ROUNDS] [--bin PATH] [--busy 1,2] [--seconds 12]
         [--window 1s] [--trace-every 2] [--no-trace]
Needs root (the traced windows sample every CPU and load BPF).
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rates(log, skip_first, skip_last, every=0.2):
    """The per-second rates of the server's lines, its first and last seconds left out."""
    counts = [int(m.group(1)) for m in re.finditer(r"served (\d+)", open(log).read())]
    first, last = int(skip_first / every), len(counts) - int(skip_last / every)
    return [c / every for c in counts[first:last]]


def one(bin, corpus, busy, seconds, watch_args, watched, workdir):
    log = os.path.join(workdir, "server.log")
    server = subprocess.Popen([os.path.join(corpus, "phase_server"), "--phases",
                               f"{busy}:{seconds}"], stdout=open(log, "w"))
    time.sleep(1.0)
    cpu = None
    if watched:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        subprocess.run([bin, "--db", os.path.join(workdir, "runs.db"), "watch",
                        "--attach", str(server.pid), "--ops-file", log,
                        "--ops-regex", r"served (\d+)", "--duration", f"{seconds - 2}s",
                        *watch_args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) / wall
    server.wait()
    r = rates(log, 1.5, 1.0)
    return statistics.median(r), cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/scalprof"))
    ap.add_argument("--busy", default="1,2")
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--window", default="1s")
    ap.add_argument("--trace-every", default="8")
    ap.add_argument("--no-trace", action="store_true")
    a = ap.parse_args()
    watch_args = ["--window", a.window, "--trace-every", a.trace_every]
    if a.no_trace:
        watch_args += ["--no-profile", "--no-locks"]
    with tempfile.TemporaryDirectory() as workdir:
        corpus = os.path.join(workdir, "corpus")
        subprocess.run([a.bin, "corpus", "--out", corpus], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"watch overhead: {a.rounds} rounds, phase_server {a.seconds} s, "
              f"watch {' '.join(watch_args)}")
        print(f"{'busy':>4} {'unwatched':>10} {'watched':>10} {'ratio':>7} {'scalprof CPU':>13}")
        for busy in [int(b) for b in a.busy.split(",")]:
            clean, watched, cpu = [], [], []
            for _ in range(a.rounds):
                clean.append(one(a.bin, corpus, busy, a.seconds, watch_args, False, workdir)[0])
                x, c = one(a.bin, corpus, busy, a.seconds, watch_args, True, workdir)
                watched.append(x)
                cpu.append(c)
            mc, mw = statistics.median(clean), statistics.median(watched)
            print(f"{busy:>4} {mc:>10.0f} {mw:>10.0f} {mw / mc - 1:>+7.1%} "
                  f"{statistics.median(cpu):>12.1%}", flush=True)
            print(f"     rounds: unwatched {[round(x) for x in clean]}, "
                  f"watched {[round(x) for x in watched]}", file=sys.stderr)


if __name__ == "__main__":
    main()
