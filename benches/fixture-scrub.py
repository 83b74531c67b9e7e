#!/usr/bin/env python3
"""Makes a recorded run store fit to commit as a test fixture.

Copies STORE to OUT and, in every text field of every table, rewrites the corpus directory
the recording ran from to /opt/corpus/ and the store's output folder to /var/lib/sp/NAME.d
(NAME: OUT's file name), clears each run's commit (the checkout the recorder ran in, not the
workload's), and compacts the file. The runs keep every measured input.

    benches/fixture-scrub.py STORE OUT --corpus /path/the/programs/ran/from/
"""
import argparse
import os
import shutil
import sqlite3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("out")
    ap.add_argument("--corpus", required=True, help="the directory the programs ran from")
    args = ap.parse_args()
    corpus = args.corpus.rstrip("/") + "/"
    shutil.copy(args.store, args.out)
    db = sqlite3.connect(args.out)
    outputs = db.execute("SELECT output_dir FROM runs LIMIT 1").fetchone()[0]
    old_d = os.path.dirname(outputs)
    new_d = "/var/lib/sp/" + os.path.basename(args.out) + ".d"
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    changed = 0
    for t in tables:
        cols = [c[1] for c in db.execute(f"PRAGMA table_info({t})")]
        for (rowid, *values) in db.execute(f"SELECT rowid, * FROM {t}").fetchall():
            new = [v.replace(corpus, "/opt/corpus/").replace(old_d, new_d)
                   if isinstance(v, str) else v for v in values]
            if new != values:
                sets = ", ".join(f'"{c}" = ?' for c in cols)
                db.execute(f"UPDATE {t} SET {sets} WHERE rowid = ?", (*new, rowid))
                changed += 1
    db.execute("UPDATE runs SET commit_sha = NULL")
    db.commit()
    db.execute("VACUUM")
    db.close()
    print(f"{args.out}: {changed} rows rewritten ({corpus} -> /opt/corpus/, {old_d} -> {new_d})")


if __name__ == "__main__":
    main()
