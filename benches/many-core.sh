#!/usr/bin/env bash
# The corpus at 1..N threads into a store, and the verdict per program at each point: the
# top cause, unexplained, and the model. Run it on a big machine to record a many-core
# fixture (crates/scalprof/tests/fixtures/), or with --from STORE to read one back with
# this build (the fixture's table in the README comes from that).
#
#   benches/many-core.sh                              # 1,4,8,16 threads (or 1..CPUs), the 11 programs
#   THREADS=1,8,32,64 benches/many-core.sh            # other points
#   benches/many-core.sh --from crates/scalprof/tests/fixtures/corpus16.db
#
# Records with CORPUS_SCALE=0.2, 3 clean repeats (the fixture's settings); the store goes to
# $STORE (default /tmp/scalprof-many-core.db). Needs root (tracing), as every sweep does.
set -euo pipefail
cd "$(dirname "$0")/.."
scalprof=${SCALPROF:-target/release/scalprof}
[ -x "$scalprof" ] || cargo build --release -q -p scalprof
programs=(hash_global_mutex counters_packed side_lock mmap_churn clean_parallel index_rebuild
    refcount_global hash_sharded pwrite_same_file journal_sync gil_handoff)

if [ "${1:-}" = --from ]; then
    store=$2
else
    store=${STORE:-/tmp/scalprof-many-core.db}
    cpus=$(nproc)
    default=1
    for t in 4 8 16 32 64 128; do
        [ "$t" -le "$cpus" ] && default+=",$t"
    done
    threads=${THREADS:-$default}
    corpus=$(mktemp -d)
    trap 'rm -rf "$corpus"' EXIT
    "$scalprof" corpus --out "$corpus" >/dev/null
    echo "recording ${#programs[@]} programs at $threads threads on $cpus CPUs into $store"
    for p in "${programs[@]}"; do
        CORPUS_SCALE=${CORPUS_SCALE:-0.2} "$scalprof" --db "$store" run -t "$threads" --repeat 3 \
            --label "$p" -- "$corpus/$p" '{threads}' >/dev/null 2>&1 || echo "  $p: failed (see scalprof --db $store show $p)"
    done
fi

for p in "${programs[@]}"; do
    "$scalprof" --db "$store" show "$p" --json 2>/dev/null || echo '{}'
done | python3 -c '
import json, sys
docs = []
decoder = json.JSONDecoder()
text = sys.stdin.read()
i = 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    doc, i = decoder.raw_decode(text, i)
    docs.append(doc)
print("%-18s %-50s %s" % ("program", "top cause (unexplained) at each point past 1", "model"))
for d in docs:
    if not d:
        continue
    cells = []
    for p in d["points"][1:]:
        b = p.get("budget") or {}
        causes = b.get("causes") or []
        top = "%s %.0f%%" % (causes[0]["subject"], 100 * causes[0]["share"]) if causes else "-"
        cells.append("%d: %s (%.0f%%)" % (p["value"], top, 100 * b.get("unexplained", 0)))
    m = d.get("model")
    model = "none" if not m else "%s sigma %.3g kappa %.3g R2 %.2f" % (m["kind"], m["sigma"], m["kappa"], m["r2"])
    print("%-18s %-50s %s" % (d["label"], " | ".join(cells), model))
    print("%-18s findings: %s" % ("", ", ".join(f["subject"] for f in d.get("findings", [])) or "none"))
'
