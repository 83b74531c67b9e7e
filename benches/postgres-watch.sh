#!/usr/bin/env bash
# PostgreSQL watched under a load that changes by itself: pgbench with 1, 2, 1, 2 clients in
# turn (PHASE seconds each), its per-second progress lines followed as the operations, and
# `scalprof watch --attach-name postgres --attach-uid postgres` over all of it. Then the
# same server swept (`run -t 1,2` with pgbench as the client): the levels and causes of one
# against the other's points and causes.
#
#   benches/postgres-watch.sh            # needs root and Debian's postgresql (15)
set -euo pipefail
cd "$(dirname "$0")/.."
scalprof=${SCALPROF:-target/release/scalprof}
db=${SCALPROF_DB:-/tmp/scalprof-pgwatch.db}
phase=${PHASE:-8}
[ -x "$scalprof" ] || cargo build --release -q -p scalprof
command -v pg_ctlcluster >/dev/null || { echo "install PostgreSQL: apt-get install -y postgresql" >&2; exit 1; }

pg_ctlcluster 15 main status >/dev/null 2>&1 || pg_ctlcluster 15 main start
as_pg() { runuser -u postgres -- "$@"; }
as_pg psql -tAc "select 1 from pg_database where datname = 'bench'" | grep -q 1 || as_pg createdb bench
as_pg pgbench -i -s 1 -q bench >/dev/null 2>&1

log=$(mktemp /tmp/pgbench-progress.XXXXXX)
(
    for c in 1 2 1 2; do
        as_pg pgbench -n -c "$c" -j "$c" -T "$phase" -P 1 bench >/dev/null 2>>"$log" || true
    done
) &
load=$!
sleep 1.5
echo "== scalprof watch (pgbench 1, 2, 1, 2 clients, ${phase} s each)"
"$scalprof" --db "$db" watch --attach-name postgres --attach-uid postgres \
    --ops-file "$log" --ops-regex 'progress: [0-9.]+ s, ([0-9.]+) tps' \
    --duration "$((4 * phase - 3))s" --label pgbench-watched 2>&1 \
    | grep -v '^scalprof: window' \
    | sed -n '/^verdict/,/^$/p;/^│ [0-9]/p;/^findings:/,/^$/p'
wait "$load"
rm -f "$log"
echo "== scalprof run -t 1,2 (the same server, swept)"
"$scalprof" --db "$db" run -t 1,2 --repeat 3 --attach-name postgres --attach-uid postgres \
    --label pgbench-swept \
    --ops-regex 'number of transactions actually processed: (\d+)' \
    -- runuser -u postgres -- pgbench -n -c '{threads}' -j '{threads}' -T 5 bench \
    2>&1 | sed -n '/^verdict/,/^$/p;/^│ [12] /p;/^findings:/,/^$/p'
