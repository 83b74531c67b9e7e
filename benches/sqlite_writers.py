#!/usr/bin/env python3
"""N writer processes on one SQLite database file (rollback journal), one row per
transaction: the workload of the README's SQLite line.

    scalprof run -t 1,2 -- python3 benches/sqlite_writers.py {threads}

The second writer finds the database locked and sleeps in SQLite's busy handler; scalprof
names that sleep by the library function that sleeps. Prints `ops=N`.
"""
import multiprocessing
import os
import sqlite3
import sys
import tempfile

ROWS = 6000
DB = os.path.join(tempfile.gettempdir(), "scalprof-sqlite-writers.db")


def writer(i):
    c = sqlite3.connect(DB, timeout=30, isolation_level=None)
    c.execute("PRAGMA synchronous=OFF")
    for _ in range(ROWS):
        c.execute("BEGIN IMMEDIATE")
        c.execute("INSERT INTO t VALUES (?, ?)", (i, "x" * 100))
        c.execute("COMMIT")
    c.close()


def main():
    n = int(sys.argv[1])
    if os.path.exists(DB):
        os.remove(DB)
    c = sqlite3.connect(DB)
    c.execute("CREATE TABLE t (a, b)")
    c.commit()
    c.close()
    procs = [multiprocessing.Process(target=writer, args=(i,)) for i in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    os.remove(DB)
    print(f"ops={n * ROWS}")


if __name__ == "__main__":
    main()
