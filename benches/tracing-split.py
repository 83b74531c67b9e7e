#!/usr/bin/env python3
"""What each of scalprof's parts costs a traced repeat, and how much of the slowdown they
account for: the split the tracing line gives, over several runs of several programs.

For each program and thread count, ROUNDS fresh `scalprof run -t T --repeat 3` sweeps; from
each run document, the point's measured slowdown (traced vs clean throughput) and its parts,
each in % of the traced repeats' thread-time (wall x threads), the slowdown's basis; the
parts paid in CPU time are their share of the CPU time times `busy`, the share of the
thread-time the threads ran or waited for a lock (whose holder runs); a thread blocked on the
disk, a sleep or a peer runs for part of its time, and that part is not lengthened:

  sampler     the sampler's interrupts at the point's rate (host.sample_cost_ns x rate; at
              the tick, its program's own time per sample x rate)
  blocks      the sampler's events at each block, a bound outside `accounted`: the traced
              repeats' context switches x what one costs at the point's rate, measured on
              10 us sleeps (host.switch_cost); longer blocks cost less; none at the tick
  records     samples in the kernel's records for the sampler
  traps       uprobe traps: the larger of their samples and Go hits x the cost of one
  bpf         the tracer's BPF programs: the larger of their samples and the kernel's timing,
              with the timing by family (scheduler, kernel locks, mmap_lock, Go runtime)
  holds       the hold-timing interposer: its traced repeats against those without it, in
              the share of traced repeats it was loaded in
  observer    the workload's waits for a CPU behind scalprof's own threads (the lock
              tracer's `runqueue:scalprof` row), in % of the traced thread-time
  accounted   their sum, and what of the slowdown it covers

Prints medians over the rounds. The same arithmetic as the report's tracing line
(crates/scalprof-report/src/summary/tracing.rs), from the document's fields.

Usage: benches/tracing-split.py [ROUNDS] [--bin PATH] [--threads 1,2]
         [--program NAME=COMMAND ...]   (COMMAND with {threads}; default: corpus programs)
         [--ops-regex REGEX]
Needs root (BPF, kernel stacks).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = ["syscall_loop", "clean_parallel", "hash_global_mutex", "mmap_churn", "journal_sync"]
FAMILIES = ["scheduler", "kernel_locks", "mmap_lock", "go_runtime"]


def sampler_ns(doc, st):
    """What a sample cost: the tick sampler's own timing where it sampled, else the perf
    event's measured before the sweep."""
    if st.get("tick_hz") and st.get("tick_samples"):
        return st.get("tick_sample_ns", 0) / st["tick_samples"]
    return doc["host"].get("sample_cost_ns") or 0


# Row kinds that are not a lock a running holder keeps: hand-offs, structure, blocked
# waits, Go's locks (a parked goroutine's wait is not its thread's) and Java's parks (a
# queue's idle worker as often as a lock's waiter).
NOT_LOCKS = {"condvar", "join", "barrier", "semaphore", "sync.WaitGroup", "chan", "once",
             "sync.Cond", "sleep", "idle", "io", "syscall", "disk-io", "cpu-wait",
             "sync.Mutex", "sync.RWMutex", "park"}


def parts(doc, p):
    """The point's slowdown and its parts, in %; None where it was not traced."""
    prof, locks = p.get("profile"), p.get("locks") or {}
    if p.get("perturbation") is None or not prof:
        return None
    traced = [r for r in p.get("traced_repeats", [])
              if r.get("exit_code") == 0 and not r.get("timed_out")]
    cpu = sum((r["user_s"] + r["sys_s"]) * 1e9 for r in traced)
    st = prof["stats"]
    samples = max(st.get("samples", 0), 1)
    probe, side = st.get("probe_samples", 0), st.get("side_band_samples", 0)
    in_programs = max(st.get("overhead_samples", 0) - probe - side, 0)
    t = locks.get("tracer", {})
    pct_cpu = (lambda ns: 100.0 * ns / cpu) if cpu > 0 else (lambda ns: 0.0)
    go = pct_cpu(t.get("go_hits", 0) * t.get("go_hit_ns", 0))
    thr = 1 if doc["sweep"]["parameter"] == "size" else max(p["value"], 1)
    thread_time = sum(r["wall_s"] * 1e9 * thr for r in traced)
    walls = [r["wall_s"] for r in traced]
    thread_ns = (sum(walls) / len(walls)) * 1e9 * thr * locks.get("repeats", 0) if walls else 0
    # A thread waiting on a lock waits for a holder that runs (the model's LockKind::is_lock,
    # less Go's locks and Java's parks, and rows listed but never a cause), less the share
    # of the waits its holders spent blocked in a system call (the disk).
    waited = sum(r.get("total_wait_ns", 0)
                 * min(max(1.0 - sum(w["share"] for w in r.get("holder_waits", [])
                                     if not w.get("lock")), 0.0), 1.0)
                 for r in locks.get("rows", [])
                 if r.get("lock_type", "").split(":")[0] not in NOT_LOCKS
                 and not r.get("attributed_to"))
    lock_waits = waited / thread_ns if thread_ns > 0 else 0.0
    busy = min(cpu / thread_time + lock_waits, 1.0) if cpu > 0 and thread_time > 0 else 1.0
    out = {
        "slowdown": -100.0 * p["perturbation"],
        "busy": 100.0 * busy,
        "sampler": busy * sampler_ns(doc, st) * prof["frequency"] / 1e7,
        "records": busy * 100.0 * side / samples,
        "traps": busy * max(100.0 * probe / samples, go),
        "bpf": busy * max(100.0 * in_programs / samples, pct_cpu(t.get("bpf_run_ns", 0))),
    }
    for f in FAMILIES:
        out[f] = busy * sum(pct_cpu(x["run_ns"]) for x in t.get("bpf_families", [])
                            if x["family"] == f)
    cost, timed = locks.get("hold_timing_cost"), len(locks.get("hold_timed_repeats", []))
    n = len(p.get("traced_repeats", []))
    out["holds"] = -100.0 * cost * min(timed, n) / n if cost is not None and cost < 0 and n else 0.0
    # Sampled at the tick: no event of its own to switch at a block.
    switch = doc["host"].get("switch_cost") if not st.get("tick_hz") else None
    blocks = sum(r.get("voluntary_csw", 0) + r.get("involuntary_csw", 0) for r in traced)
    out["blocks"] = busy * pct_cpu(blocks * (switch["base_ns"] + switch["per_hz_ns"] * prof["frequency"])) \
        if switch else 0.0
    # Waits for a CPU behind scalprof's own threads, in % of the traced thread-time.
    behind = sum(r.get("total_wait_ns", 0) for r in locks.get("rows", [])
                 if r.get("address") == "runqueue:scalprof")
    out["observer"] = 100.0 * behind / thread_ns if thread_ns > 0 else 0.0
    out["accounted"] = sum(out[k] for k in ("sampler", "records", "traps", "bpf", "holds",
                                            "observer"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/scalprof"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--program", action="append", default=[],
                    help="NAME=COMMAND, the command with {threads}")
    ap.add_argument("--ops-regex", help="scalprof's --ops-regex for every program (a "
                    "fixed-time benchmark such as will-it-scale needs its own count)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="scalprof-split-")
    programs = []
    for spec in args.program:
        name, _, cmd = spec.partition("=")
        programs.append((name, shlex.split(cmd)))
    if not programs:
        subprocess.run([args.bin, "corpus", "--out", f"{work}/corpus"], check=True,
                       capture_output=True)
        programs = [(n, [f"{work}/corpus/{n}", "{threads}"]) for n in CORPUS]
    threads = [int(t) for t in args.threads.split(",")]
    seen = {}
    for rnd in range(args.rounds):
        for name, cmd in programs:
            for t in threads:
                db, out = f"{work}/runs.db", f"{work}/doc.json"
                regex = ["--ops-regex", args.ops_regex] if args.ops_regex else []
                run = subprocess.run([args.bin, "--db", db, "run", "-t", str(t), "--repeat", "3",
                                      *regex, "--json", out, "--", *cmd],
                                     capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"{name} @{t}: scalprof failed: {run.stderr.strip()[-300:]}",
                          file=sys.stderr)
                    continue
                doc = json.load(open(out))
                got = parts(doc, doc["points"][0])
                if got:
                    seen.setdefault((name, t), []).append(got)
    cols = ["slowdown", "busy", "sampler", "blocks", "records", "traps", "bpf", "holds", "observer",
            "accounted"]
    print(f"{'program':18} {'thr':>3} " + " ".join(f"{c:>9}" for c in cols) + "  bpf by family")
    for (name, t), runs in seen.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        fam = ", ".join(f"{f} {med[f]:.2f}" for f in FAMILIES if med[f] >= 0.005)
        print(f"{name:18} {t:>3} " + " ".join(f"{med[c]:9.2f}" for c in cols) + f"  {fam}")
        print(f"{'':18} {'':>3} slowdowns: " + ", ".join(f"{r['slowdown']:+.1f}" for r in runs))
    print(f"({args.rounds} rounds of `run -t T --repeat 3`; medians of each column, in %)")


if __name__ == "__main__":
    sys.exit(main())
