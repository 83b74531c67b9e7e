#!/usr/bin/env python3
"""Bad input, faults and a hostile second user against scalprof, as root.

Each case runs scalprof the way a new user, a broken machine or another local user
(uid 65534, nobody) would make it run, and checks what a careful tool does: a clear error
with the right exit code, no panic, no hang, nothing planted run or followed, no measured
run lost. Prints one line per case and the count; exits 1 if any case fails.

    sudo python3 scripts/bad_input_sweep.py [path/to/scalprof]

Needs root (to act as nobody via setpriv), gcc, python3, perf (the import cases) and node
(the JIT map cases; skipped without it). Takes under a minute.
"""

import json
import os
import pty
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

SCALPROF = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/scalprof")
NOBODY = 65534
ROOT = tempfile.mkdtemp(prefix="scalprof-sweep-")
os.chmod(ROOT, 0o711)
RESULTS = []


def run(args, db=None, timeout=60, env=None, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        as_nobody=False, cwd=None):
    cmd = [SCALPROF] + (["--db", db] if db else []) + args
    if as_nobody:
        cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + cmd
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                           timeout=timeout, env=env, cwd=cwd)
        out = p.stdout.decode(errors="replace") if isinstance(p.stdout, bytes) else ""
        return p.returncode, out, p.stderr.decode(errors="replace"), time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return "hang", "", "", time.monotonic() - t0


def case(name):
    def wrap(f):
        def go():
            try:
                ok, said = f()
            except Exception as e:  # a broken case is a failed case
                ok, said = False, f"case raised {e!r}"
            said = " ".join(str(said).split())[:160]
            RESULTS.append((name, ok, said))
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {said}", flush=True)
        CASES.append(go)
        NAMES.append(name)
        return f
    return wrap


CASES = []
NAMES = []


def d(name):
    path = os.path.join(ROOT, name)
    os.makedirs(path, exist_ok=True)
    return path


def store_with_run():
    db = os.path.join(d("base"), "runs.db")
    if not os.path.exists(db):
        rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--",
                             "sh", "-c", "echo ops=1"], db)
        assert rc == 0, err
    return db


def has_run(runs_output, run_id):
    return re.search(rf"^[│|\s]*{run_id}\s", runs_output, re.M) is not None


def first_line(s):
    lines = [l for l in s.splitlines() if l.strip()]
    return lines[0] if lines else ""


def clean(rc, err, want_rc, *must):
    ok = rc == want_rc and "panicked" not in err and all(m in err for m in must)
    return ok, f"rc {rc}: {first_line(err)}"


def chown_nobody(*paths):
    for p in paths:
        os.lchown(p, NOBODY, NOBODY)


# ---- the 25 reproductions --------------------------------------------------------

@case("r01 planted build dir under TMPDIR is refused, not run")
def _():
    t = d("r01")
    os.chmod(t, 0o1777)
    marker = os.path.join(t, "ran")
    for sub in ("scalprof/corpus", "scalprof-0/corpus"):
        os.makedirs(os.path.join(t, sub))
        for name in ("counters_packed", "counters_padded"):
            b = os.path.join(t, sub, name)
            open(b, "w").write(f"#!/bin/sh\ntouch {marker}\necho ops=1\n")
            os.chmod(b, 0o755)
            chown_nobody(b)
        chown_nobody(os.path.join(t, sub.split("/")[0]), os.path.join(t, sub))
    rc, _, err, _ = run(["demo", "-t", "1", "--repeat", "1"], os.path.join(t, "r.db"),
                        env={"PATH": "/usr/bin:/bin", "TMPDIR": t})
    ok, _ = clean(rc, err, 1, "owned by uid 65534")
    said = next((l for l in err.splitlines() if "owned by uid" in l), first_line(err))
    return ok and not os.path.exists(marker), f"rc {rc}: {said}"


@case("r02 suite never writes through a planted link")
def _():
    t = d("r02")
    victim = os.path.join(t, "victim")
    open(victim, "w").write("secret")
    os.chmod(victim, 0o600)
    theirs = d("r02/theirs")
    os.symlink(victim, os.path.join(theirs, "scalprof-suite-pwrite"))
    chown_nobody(theirs)
    args = ["suite", "--tests", "pwrite_same_file:threads", "-t", "1", "--seconds", "0.2",
            "--repeat", "1"]
    rc, _, err, _ = run(args, os.path.join(t, "r.db"), env={**os.environ, "SUITE_DIR": theirs})
    ok = rc == 1 and "SUITE_DIR" in err
    ours = d("r02/ours")
    os.symlink(victim, os.path.join(ours, "scalprof-suite-pwrite"))
    run(args, os.path.join(t, "r.db"), env={**os.environ, "SUITE_DIR": ours})
    return ok and open(victim).read() == "secret", f"theirs rc {rc}: {first_line(err)}; victim intact"


LEAVER = ("import os,time\npid=os.fork()\nif pid==0:\n os.setpgid(0,0)\n time.sleep(60)\n"
          " os._exit(0)\ntime.sleep(0.1)\nos.setpgid(0,pid)\ntime.sleep(60)\n")


def leftovers(pattern):
    p = subprocess.run(["pgrep", "-f", pattern], stdout=subprocess.PIPE)
    return p.stdout.decode().split()


@case("r03 --timeout reaches a workload that left the process group")
def _():
    rc, _, err, took = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--timeout",
                            "1s", "--", "python3", "-c", LEAVER], os.path.join(d("r03"), "r.db"))
    left = leftovers("os.setpgid")
    return took < 8 and not left, f"rc {rc} after {took:.1f} s, {len(left)} left: {first_line(err)}"


@case("r03b SIGTERM and a second Ctrl-C reach it too")
def _():
    results = []
    for sigs in ([signal.SIGTERM], [signal.SIGINT, signal.SIGINT]):
        p = subprocess.Popen([SCALPROF, "--db", os.path.join(d("r03"), "s.db"), "run", "-t", "1",
                              "--repeat", "1", "--diagnose", "0", "--", "python3", "-c", LEAVER],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.5)
        t0 = time.monotonic()
        for s in sigs:
            p.send_signal(s)
            time.sleep(0.2)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
        results.append((p.returncode, time.monotonic() - t0, len(leftovers("os.setpgid"))))
    ok = all(t < 6 and n == 0 for _, t, n in results)
    return ok, "; ".join(f"rc {rc} in {t:.1f} s, {n} left" for rc, t, n in results)


def next_pids(n):
    last = int(open("/proc/loadavg").read().split()[-1])
    return range(last + 1, last + n)


def node():
    return shutil.which("node") or shutil.which("nodejs")


def plant_maps(make, count=400):
    """Plants `make(path)` at /tmp/perf-PID.map for the next pids, owned by nobody; returns
    the paths planted, for the caller to remove."""
    planted = []
    for pid in next_pids(count):
        path = f"/tmp/perf-{pid}.map"
        if not os.path.lexists(path):
            make(path)
            os.lchown(path, NOBODY, NOBODY)
            planted.append(path)
    return planted


JS = "let s=0;for(let i=0;i<3e8;i++){s+=i%7};console.log('ops='+(s%5+1))"


@case("r04 a FIFO planted as a JIT's perf map does not hang scalprof")
def _():
    if not node():
        return True, "skipped: no node"
    planted = plant_maps(os.mkfifo)
    try:
        rc, _, err, took = run(["run", "-t", "1", "--repeat", "1", "--no-locks", "--", node(),
                                "-e", JS], os.path.join(d("r04"), "r.db"), timeout=90)
    finally:
        for p in planted:
            os.unlink(p)
    return rc == 0, f"rc {rc} in {took:.1f} s: {first_line(err)}"


@case("r05 another user's regular perf map does not rename root's frames")
def _():
    if not node():
        return True, "skipped: no node"
    planted = plant_maps(
        lambda path: open(path, "w").write("0 7fffffffffff \x1b[2J<script>evil</script>\n"))
    db = os.path.join(d("r05"), "r.db")
    try:
        rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--no-locks", "--", node(),
                             "-e", JS], db, timeout=90)
    finally:
        for p in planted:
            os.unlink(p)
    _, folded, _, _ = run(["flame", "1", "--folded"], db)
    return rc == 0 and "evil" not in folded and folded, f"rc {rc}, {len(folded.splitlines())} folded stacks, none named by the map"


@case("r06 closed pipe and full device: no panic")
def _():
    db = store_with_run()
    said = []
    ok = True
    for args in (["runs"], ["show", "1"], ["show", "1", "--json"], ["compare", "1", "1"]):
        p = subprocess.Popen([SCALPROF, "--db", db] + args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.close()
        err = p.stderr.read().decode()
        p.wait(30)
        full_rc, _, full_err, _ = run(args, db, stdout=open("/dev/full", "w"))
        want = 3 if args[0] == "compare" else 1
        ok &= p.returncode == 0 and "panicked" not in err + full_err and full_rc == want
        said.append(f"{args[0]}: pipe {p.returncode}, full {full_rc}")
    return ok, "; ".join(said)


def make_wal_store(path):
    """A store with two runs, the second committed only to its -wal (a SIGKILLed writer)."""
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "true"], path)
    assert rc == 0, err
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_autocheckpoint=0")
    row = con.execute("SELECT * FROM runs WHERE id=1").fetchone()
    cols = [c[1] for c in con.execute("PRAGMA table_info(runs)")]
    vals = list(row)
    vals[cols.index("id")] = 2
    con.execute(f"INSERT INTO runs VALUES ({','.join('?' * len(vals))})", vals)
    con.commit()
    # Copy while this connection holds the log open (no checkpoint at close).
    return con


@case("r07 a read-only store's -wal is read")
def _():
    t = d("r07")
    db = os.path.join(t, "x.db")
    con = make_wal_store(db)
    ro = d("r07/ro")
    for suffix in ("", "-wal"):
        shutil.copy(db + suffix, os.path.join(ro, "x.db" + suffix))
        os.chmod(os.path.join(ro, "x.db" + suffix), 0o644)
    con.close()
    os.chmod(ro, 0o555)
    rc, out, err, _ = run(["runs"], os.path.join(ro, "x.db"), as_nobody=True)
    listed = has_run(out, 1) + has_run(out, 2)
    return rc == 0 and listed == 2, f"rc {rc}, {listed} of 2 runs listed (as another user, read-only dir): {first_line(err)}"


@case("r08 two runs creating one new store: no migration race (10 trials)")
def _():
    t = d("r08")
    fails = 0
    for i in range(10):
        db = os.path.join(t, f"x{i}.db")
        ps = [subprocess.Popen([SCALPROF, "--db", db, "run", "-t", "1", "--repeat", "1",
                                "--diagnose", "0", "--", "/bin/true"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE) for _ in range(2)]
        for p in ps:
            p.wait(60)
            fails += p.returncode != 0
    return fails == 0, f"{fails} of 20 runs failed"


def cc(src, out, *flags):
    path = out + ".c"
    open(path, "w").write(src)
    subprocess.run(["gcc", "-O1", "-g", "-o", out, path, *flags], check=True,
                   stderr=subprocess.DEVNULL)
    return out


EVIL = "evil\x1b]0;pwned\x07\x1b[2Jvar"


def renamed(src, out, sym, *flags):
    """A binary whose symbol `sym` is renamed to EVIL (escape sequences in a symbol name)."""
    plain = cc(src, out + "-plain", *flags)
    # Without DWARF, whose own name for the function would be shown instead.
    subprocess.run(["objcopy", "--strip-debug", f"--redefine-sym={sym}={EVIL}", plain, out],
                   check=True)
    return out


@case("r09 layout prints a binary's escape sequences escaped")
def _():
    b = renamed("int victim_var = 1; int main(){return victim_var;}", os.path.join(d("r09"), "b"),
                "victim_var")
    rc, out, err, _ = run(["layout", b])
    return rc == 0 and "evil" in out and "\x1b" not in out + err and "\x07" not in out, f"rc {rc}, the symbol shown, no raw ESC/BEL in {len(out)} bytes"


@case("r10 --db through a dangling link makes an owner-only store")
def _():
    t = d("r10")
    os.symlink(os.path.join(t, "target.db"), os.path.join(t, "link.db"))
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "true"],
                        os.path.join(t, "link.db"))
    mode = oct(os.stat(os.path.join(t, "target.db")).st_mode & 0o777)
    return rc == 0 and mode == "0o600", f"rc {rc}, store mode {mode}"


@case("r11 one run with a malformed JSON column hides no other")
def _():
    db = os.path.join(d("r11"), "r.db")
    for _ in range(2):
        run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "true"], db)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET command='not json' WHERE id=2")
    con.commit()
    con.close()
    rc, out, err, _ = run(["runs"], db)
    return rc == 0 and has_run(out, 1), f"rc {rc}: run 1 listed ({has_run(out, 1)}), run 2 said: {first_line(err)}"


def in_pty(args):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(SCALPROF, [SCALPROF] + args)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out


@case("r12 flame --folded and export to a terminal escape ESC/BEL")
def _():
    t = d("r12")
    b = renamed("__attribute__((noinline)) long spin(long n){long s=0;"
                "for(long i=0;i<n;i++)s+=i*i%7;return s;}\n"
                "int main(){return (int)(spin(400000000)&1);}", os.path.join(t, "b"), "spin",
                "-fno-omit-frame-pointer")
    db = os.path.join(t, "r.db")
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--no-locks", "--", b], db)
    a = in_pty(["--db", db, "flame", "1", "--folded"])
    e = in_pty(["--db", db, "export", "1", "--format", "folded", "-o", "-"])
    named = b"evil" in a
    return rc == 0 and named and b"\x1b]" not in a + e and b"\x07" not in a + e, \
        f"rc {rc}, the frame shown ({named}), no raw ESC ] or BEL on the terminal"


@case("r13 a label cannot forge summary lines (newline, bidi)")
def _():
    db = os.path.join(d("r13"), "r.db")
    label = "x\n2 threads: 100% useful \u202e"
    rc, out, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--label", label,
                           "--", "true"], db)
    _, shown, _, _ = run(["show", "1"], db)
    forged = any(l.startswith("2 threads: 100%") for l in (out + shown).splitlines())
    return rc == 0 and not forged and "\u202e" not in out + shown, f"rc {rc}, no forged line, no raw U+202E"


def refused(args, flag, want=2):
    rc, _, err, _ = run(args, os.path.join(d("refused"), "r.db"))
    return clean(rc, err, want, flag)


case("r14 --fail-if-slower nan is refused")(
    lambda: refused(["compare", "1", "2", "--fail-if-slower", "nan"], "--fail-if-slower"))


@case("r15 unprivileged locks says it needs root, exit 1")
def _():
    rc, _, err, _ = run(["locks", "--", "true"], "/tmp/scalprof-nobody-r15.db", as_nobody=True)
    return clean(rc, err, 1, "needs root")


case("r16 --timeout 0 is refused")(
    lambda: refused(["run", "--timeout", "0", "--", "true"], "--timeout"))


@case("r17 a full report target is not blamed on the store")
def _():
    rc, _, err, _ = run(["report", "1", "-o", "/dev/full"], store_with_run())
    ok, said = clean(rc, err, 1, "/dev/full")
    return ok and "where the store" not in err, said


@case("r18 unprivileged --attach fails before running and says paranoid=0")
def _():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--no-locks", "--attach-name",
                             "sleep", "--", "true"], "/tmp/scalprof-nobody-r18.db", as_nobody=True)
    finally:
        sleeper.kill()
    return clean(rc, err, 1, "perf_event_paranoid=0")


@case("r19 unprivileged runs print no raw libbpf log")
def _():
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--", "true"],
                        "/tmp/scalprof-nobody-r19.db", as_nobody=True)
    return rc == 0 and "libbpf" not in err, f"rc {rc}: {first_line(err)}"


@case("r20 pipe-mode perf.data is named as such")
def _():
    t = d("r20")
    data = os.path.join(t, "pipe.data")
    with open(data, "wb") as f:
        subprocess.run(["perf", "record", "-q", "-o", "-", "--", "true"], stdout=f,
                       stderr=subprocess.DEVNULL)
    rc, _, err, _ = run(["import", data], os.path.join(t, "r.db"))
    return clean(rc, err, 1, "pipe-mode")


@case("r21 a zero-byte store is an empty store")
def _():
    db = os.path.join(d("r21"), "r.db")
    open(db, "w").close()
    rc, out, err, _ = run(["runs"], db)
    return rc == 1 and "is empty" in err, f"rc {rc}: {first_line(out + err)}"


@case("r22 a stopped sweep does not say one repeat per point")
def _():
    rc, out, err, _ = run(["run", "-t", "1,2", "--repeat", "2", "--diagnose", "0", "--", "sh", "-c",
                           "exit 3"], os.path.join(d("r22"), "r.db"))
    return rc == 1 and "one repeat per point" not in out + err, f"rc {rc}: {first_line(err)}"


@case("r23 an ops capture that is no number says so")
def _():
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--ops-regex",
                         r"ops=(\w+)", "--", "sh", "-c", "echo ops=abc"], os.path.join(d("r23"), "r.db"))
    return "not a number" in err and "panicked" not in err, f"rc {rc}: {first_line(err)}"


case("r24 locks -t 0 is refused")(lambda: refused(["locks", "-t", "0", "--", "true"], "--threads"))


@case("r25 an empty SCALPROF_DB means the default store")
def _():
    home = d("r25")
    rc, _, err, _ = run(["runs"], env={**os.environ, "SCALPROF_DB": "", "HOME": home,
                                       "XDG_DATA_HOME": ""})
    return rc == 0 and "--db" not in err, f"rc {rc}: {first_line(err)}"


# ---- more cases of our own ----------------------------------------------------------------

def plain(name, args, want_rc, *must, db=None, **kw):
    def f():
        path = db() if callable(db) else db
        rc, _, err, _ = run(args, path or os.path.join(d("own"), "r.db"), **kw)
        return clean(rc, err, want_rc, *must)
    case(name)(f)


plain("c01 run without a command", ["run"], 2)
plain("c02 a missing program", ["run", "-t", "1", "--", "/nonexistent/bench"], 1, "not found")
plain("c03 a program that is not executable", ["run", "-t", "1", "--", "/etc/passwd"], 1,
      "not executable")
plain("c04 -t with a word", ["run", "-t", "1,abc", "--", "true"], 2, "--threads")
plain("c05 -t empty", ["run", "-t", "", "--", "true"], 2)
plain("c06 --repeat 0", ["run", "--repeat", "0", "--", "true"], 2, "--repeat")
plain("c07 an invalid --ops-regex", ["run", "--ops-regex", "(", "--", "true"], 2, "--ops-regex")
plain("c08 an unknown flag", ["run", "--bogus", "--", "true"], 2)
plain("c09 show a run that does not exist", ["show", "999"], 1, "999", db=store_with_run)
plain("c10 show a label no run has", ["show", "abc"], 1, "no run \"abc\"", db=store_with_run)
plain("c11 compare with a missing run", ["compare", "1", "999"], 3, "no run", db=None)
plain("c12 import a missing file", ["import", "/nonexistent.data"], 1, "/nonexistent.data")
plain("c13 layout of a missing binary", ["layout", "/nonexistent"], 1, "/nonexistent")
plain("c14 layout of a text file", ["layout", "/etc/passwd"], 1, "/etc/passwd")
plain("c15 export in an unknown format", ["export", "1", "--format", "bogus"], 2, "--format")
plain("c16 suite with an unknown test", ["suite", "--tests", "bogus"], 2, "bogus")
plain("c17 fit of a missing file", ["fit", "/nonexistent.csv"], 1, "/nonexistent.csv")


@case("c18 a crashing workload: said, first point kept")
def _():
    db = os.path.join(d("c18"), "r.db")
    rc, out, err, _ = run(["run", "-t", "1,2", "--repeat", "1", "--diagnose", "0", "--", "sh",
                           "-c", 'if [ "$SCALPROF_THREADS" = 2 ]; then kill -SEGV $$; fi; echo ops=1'],
                          db)
    _, shown, _, _ = run(["show", "1", "--json"], db)
    points = len(json.loads(shown).get("points", [])) if shown.strip() else 0
    return rc == 1 and "signal 11" in err + out and points >= 1, f"rc {rc}, {points} point kept: {first_line(err)}"


@case("c19 Ctrl-C mid-sweep keeps the points measured")
def _():
    db = os.path.join(d("c19"), "r.db")
    p = subprocess.Popen([SCALPROF, "--db", db, "run", "-t", "1,2,3,4", "--repeat", "1",
                          "--diagnose", "0", "--", "sh", "-c", "sleep 0.6; echo ops=1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(2.0)
    p.send_signal(signal.SIGINT)
    p.wait(20)
    _, shown, _, _ = run(["show", "1", "--json"], db)
    doc = json.loads(shown)
    return p.returncode == 130 and len(doc["points"]) >= 1, f"rc {p.returncode}, {len(doc['points'])} points kept"


@case("c20 SIGKILL of scalprof: the run reads as interrupted, nothing left running")
def _():
    db = os.path.join(d("c20"), "r.db")
    env = {**os.environ, "ORPHAN": "scalprof-sweep-orphan"}
    p = subprocess.Popen([SCALPROF, "--db", db, "run", "-t", "1,2", "--repeat", "1", "--diagnose",
                          "0", "--", "bash", "-c",
                          'setsid bash -c \'exec -a "$ORPHAN" sleep 60\' & exec -a "$ORPHAN" sleep 60'],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    p.kill()
    p.wait()
    time.sleep(1.0)
    left = leftovers("scalprof-sweep-orphan")
    _, out, _, _ = run(["runs"], db)
    return not left and "interrupted" in out, f"{len(left)} left, runs says: {out.splitlines()[-1] if out else ''}"


plain("c21 --db is a directory", ["runs"], 1, db=d("c21"))


@case("c22 --db is a text file: refused, untouched")
def _():
    path = os.path.join(d("c22"), "notes.txt")
    open(path, "w").write("my notes\n" * 100)
    rc, _, err, _ = run(["run", "-t", "1", "--", "true"], path)
    ok, said = clean(rc, err, 1)
    return ok and open(path).read() == "my notes\n" * 100, said


@case("c23 --db is a truncated SQLite file")
def _():
    src = store_with_run()
    path = os.path.join(d("c23"), "cut.db")
    data = open(src, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    rc, _, err, _ = run(["runs"], path)
    return clean(rc, err, 1)


plain("c24 --db in a missing directory", ["run", "-t", "1", "--diagnose", "0", "--", "true"], 0,
      db="/tmp/scalprof-sweep-missing-dir/x/r.db")


@case("c25 import a truncated perf.data")
def _():
    t = d("c25")
    data = os.path.join(t, "p.data")
    subprocess.run(["perf", "record", "-q", "-g", "-o", data, "--", "sh", "-c",
                    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"], stderr=subprocess.DEVNULL)
    blob = open(data, "rb").read()
    open(data + ".cut", "wb").write(blob[: len(blob) * 2 // 3])
    rc, _, err, _ = run(["import", data + ".cut"], os.path.join(t, "r.db"))
    return rc in (0, 1) and "panicked" not in err, f"rc {rc}: {first_line(err)}"


@case("c26 import random bytes")
def _():
    t = d("c26")
    path = os.path.join(t, "rand.data")
    open(path, "wb").write(b"PERFILE2" + os.urandom(4096))
    rc, _, err, _ = run(["import", path], os.path.join(t, "r.db"))
    return clean(rc, err, 1)


plain("c27 import a directory", ["import", "/tmp"], 1)


@case("c28 import a FIFO: refused, not waited on")
def _():
    path = os.path.join(d("c28"), "p.data")
    os.mkfifo(path)
    rc, _, err, took = run(["import", path], os.path.join(d("c28"), "r.db"), timeout=10)
    ok, said = clean(rc, err, 1)
    return ok and took < 5, said


@case("c29 layout of a truncated ELF")
def _():
    path = os.path.join(d("c29"), "cut")
    data = open("/bin/ls", "rb").read()
    open(path, "wb").write(data[: len(data) // 3])
    rc, _, err, _ = run(["layout", path])
    return rc in (0, 1) and "panicked" not in err, f"rc {rc}: {first_line(err)}"


@case("c30 layout of a stripped binary says so")
def _():
    b = cc("int counter; int main(){return counter;}", os.path.join(d("c30"), "b"), "-s")
    rc, out, err, _ = run(["layout", b])
    return rc in (0, 1) and "panicked" not in err and "strip" in (out + err).lower(), f"rc {rc}: {first_line(err or out)}"


def fit_case(name, text, want_rc):
    def f():
        path = os.path.join(d("fit"), name.split()[0] + ".csv")
        open(path, "w").write(text)
        rc, _, err, _ = run(["fit", path])
        return clean(rc, err, want_rc)
    case(name)(f)


fit_case("c31 fit of an empty CSV", "", 1)
fit_case("c32 fit of words", "a,b\nc,d\n", 1)
fit_case("c33 fit of one row", "1,100\n", 1)
fit_case("c34 fit with NaN", "1,100\n2,nan\n4,300\n", 1)
fit_case("c35 fit with negative throughput", "1,100\n2,-5\n4,300\n", 1)


@case("c36 --json into a missing directory: refused before the sweep")
def _():
    rc, _, err, took = run(["run", "-t", "1", "--repeat", "1", "--json", "/nonexistent/dir/r.json",
                            "--", "sleep", "2"], os.path.join(d("c36"), "r.db"))
    ok, said = clean(rc, err, 2, "/nonexistent/dir")
    return ok and took < 1.5, said


@case("c37 --report through another user's link in /tmp: not followed")
def _():
    victim = os.path.join(d("c37"), "victim")
    open(victim, "w").write("secret")
    link = f"/tmp/scalprof-sweep-report-{os.getpid()}.html"
    os.symlink(victim, link)
    chown_nobody(link)
    try:
        rc, _, err, _ = run(["report", "1", "-o", link], store_with_run())
    finally:
        os.unlink(link)
    return open(victim).read() == "secret" and rc == 1, f"rc {rc}: {first_line(err)}"


@case("c38 export -o and flame -o to another user's link: not followed")
def _():
    t = d("c38")
    db = os.path.join(t, "r.db")
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--no-locks", "--", "sh", "-c",
                         "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo ops=1"], db)
    assert rc == 0, err
    victim = os.path.join(t, "victim")
    open(victim, "w").write("secret")
    link = f"/tmp/scalprof-sweep-export-{os.getpid()}"
    os.symlink(victim, link)
    chown_nobody(link)
    ok, said = True, []
    try:
        for args in (["export", "1", "-o", link], ["flame", "1", "-o", link]):
            rc, _, err, _ = run(args, db)
            said.append(f"{args[0]} rc {rc}")
            ok &= rc == 1 and "another user" in err
    finally:
        os.unlink(link)
    return ok and open(victim).read() == "secret", ", ".join(said) + ": " + first_line(err)


@case("c39 a workload that writes 100 MB: capped and said")
def _():
    db = os.path.join(d("c39"), "r.db")
    rc, out, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "sh", "-c",
                           "head -c 100000000 /dev/zero | tr '\\0' x; echo; echo ops=1"], db)
    sizes = [os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(db + ".d") for f in fs]
    return rc == 0 and max(sizes) <= 64 * 2**20 + 65536, f"rc {rc}, largest kept output {max(sizes) >> 20} MiB"


@case("c40 a workload that closes its stdout and stderr")
def _():
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "sh", "-c",
                         "exec >&- 2>&-; sleep 0.1"], os.path.join(d("c40"), "r.db"))
    return rc == 0 and "panicked" not in err, f"rc {rc}: {first_line(err)}"


@case("c41 a workload that ignores SIGTERM under --timeout")
def _():
    rc, _, err, took = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--timeout",
                            "1s", "--", "sh", "-c", "trap '' TERM INT; sleep 30"],
                           os.path.join(d("c41"), "r.db"))
    return took < 6 and "timed out" in err, f"rc {rc} after {took:.1f} s: {first_line(err)}"


@case("c42 non-UTF-8 argument and label")
def _():
    db = os.path.join(d("c42"), "r.db")
    p = subprocess.run([SCALPROF.encode(), b"--db", db.encode(), b"run", b"-t", b"1", b"--repeat",
                        b"1", b"--diagnose", b"0", b"--", b"echo", b"\xff\xfe\x1b[2J"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out = p.stdout + p.stderr
    return b"panicked" not in out and b"\x1b[2J" not in out, f"rc {p.returncode}: {first_line(p.stderr.decode(errors='replace'))}"


@case("c43 a command line of 100k characters")
def _():
    rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "echo"]
                        + ["x" * 1000] * 100, os.path.join(d("c43"), "r.db"))
    return rc == 0, f"rc {rc}: {first_line(err)}"


@case("c44 scalprof with stdin, stdout and stderr closed")
def _():
    db = os.path.join(d("c44"), "r.db")
    p = subprocess.run(f"{SCALPROF} --db {db} run -t 1 --repeat 1 --diagnose 0 -- true <&- >&- 2>&-",
                       shell=True, timeout=60)
    rc, out, _, _ = run(["runs"], db)
    return has_run(out, 1), f"rc {p.returncode}, the run was stored"


@case("c45 as another user: root's store is refused with a reason")
def _():
    db = store_with_run()
    rc, _, err, _ = run(["run", "-t", "1", "--", "true"], db, as_nobody=True)
    return clean(rc, err, 1)


@case("c46 as another user: a plain run measures and says what is missing")
def _():
    t = "/tmp/scalprof-sweep-nobody"
    shutil.rmtree(t, ignore_errors=True)
    os.makedirs(t, mode=0o777)
    os.chmod(t, 0o777)
    rc, out, err, _ = run(["run", "-t", "1,2", "--repeat", "1", "--", "sh", "-c", "echo ops=1"],
                          os.path.join(t, "n.db"), as_nobody=True)
    shutil.rmtree(t, ignore_errors=True)
    return rc == 0 and "panicked" not in err, f"rc {rc}: {first_line(err)}"


@case("c47 HOME and XDG unset: the store's default is said or used")
def _():
    rc, _, err, _ = run(["runs"], env={"PATH": "/usr/bin:/bin"})
    return rc in (0, 1) and "panicked" not in err, f"rc {rc}: {first_line(err)}"


@case("c48 a sweep store on a full disk keeps earlier runs")
def _():
    mnt = d("c48")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt]).returncode:
        return True, "skipped: cannot mount tmpfs"
    try:
        db = os.path.join(mnt, "r.db")
        run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "true"], db)
        subprocess.run(["sh", "-c", f"head -c 2000000 /dev/zero > {mnt}/fill"],
                       stderr=subprocess.DEVNULL)
        rc, _, err, _ = run(["run", "-t", "1", "--repeat", "1", "--", "sh", "-c",
                             "seq 1 100000; echo ops=1"], db)
        rc2, out, _, _ = run(["runs"], db)
        kept = has_run(out, 1)
        said = [l for l in err.splitlines() if "disk is full" in l]
        return rc == 1 and "panicked" not in err and kept and said, \
            f"rc {rc}: {said[0] if said else first_line(err)}; run 1 kept: {kept}"
    finally:
        subprocess.run(["umount", mnt])


@case("c49 complexity without {size} is warned")
def _():
    rc, out, err, _ = run(["complexity", "--sizes", "10,20,40", "--", "true"],
                          os.path.join(d("c49"), "r.db"))
    ok, said = clean(rc, err, 0)
    return ok and "has no {size}" in out, said + "; warns: the command has no {size}"


@case("c50 flame of a run without profiles")
def _():
    db = os.path.join(d("c50"), "r.db")
    run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--", "true"], db)
    rc, _, err, _ = run(["flame", "1", "-o", os.path.join(d("c50"), "f.svg")], db)
    return clean(rc, err, 1)


@case("c51 a SUITE_DIR that is another user's: refused")
def _():
    theirs = d("c51")
    chown_nobody(theirs)
    rc, _, err, _ = run(["suite", "--tests", "pwrite_same_file:threads", "-t", "1", "--seconds",
                         "0.2", "--repeat", "1"], os.path.join(d("c51b"), "r.db"),
                        env={**os.environ, "SUITE_DIR": theirs})
    return clean(rc, err, 1, "SUITE_DIR")


@case("c52 a label with ESC in runs and report")
def _():
    db = os.path.join(d("c52"), "r.db")
    run(["run", "-t", "1", "--repeat", "1", "--diagnose", "0", "--label", "\x1b]0;pwned\x07<b>x",
         "--", "true"], db)
    _, out, _, _ = run(["runs"], db)
    rep = os.path.join(d("c52"), "r.html")
    rc, _, err, _ = run(["report", "1", "-o", rep], db)
    html = open(rep).read() if os.path.exists(rep) else ""
    return "\x1b" not in out and "<b>x" not in html and rc == 0, f"runs escaped; report rc {rc}, label escaped in HTML"


@case("c53 a second user's perf map for a pid that is not theirs is ignored (no JIT)")
def _():
    db = os.path.join(d("c53"), "r.db")
    planted = plant_maps(lambda path: os.symlink("/etc/shadow", path), 100)
    try:
        rc, _, err, took = run(["run", "-t", "1", "--repeat", "1", "--no-locks", "--", "sh", "-c",
                                "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo ops=1"],
                               db, timeout=60)
    finally:
        for p in planted:
            os.unlink(p)
    _, folded, _, _ = run(["flame", "1", "--folded"], db)
    return rc == 0 and "root:" not in folded, f"rc {rc}: links to /etc/shadow not read"


def main():
    if os.geteuid() != 0:
        sys.exit("run as root: the hostile cases act as uid 65534 through setpriv")
    only = os.environ.get("ONLY", "").split(",")
    for go, name in zip(CASES, NAMES):
        if only == [""] or any(name.startswith(o) for o in only):
            go()
    failed = [n for n, ok, _ in RESULTS if not ok]
    print(f"\n{len(RESULTS)} cases, {len(RESULTS) - len(failed)} as they should be, {len(failed)} not")
    for n in failed:
        print(f"  not: {n}")
    shutil.rmtree(ROOT, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
