#!/usr/bin/env bash
# PostgreSQL under pgbench, swept over client counts with the server attached
# (`--attach-name postgres --attach-uid postgres`: the server's processes are the postgres
# user's), with and without a flush of the WAL at every commit. First the same sweep untraced (pgbench alone), so that the traced figures can be compared with it.
#
#   benches/postgres_pgbench.sh            # needs root and Debian's postgresql (15)
#
# Set up once: apt-get install -y postgresql. The script starts the `15 main` cluster if it
# is down, creates the database `bench` and initializes it with `pgbench -i -s 1`. At the
# end, `scalprof compare` of the two sweeps: which causes explain the difference.
set -euo pipefail
cd "$(dirname "$0")/.."
scalprof=${SCALPROF:-target/release/scalprof}
db=${SCALPROF_DB:-/tmp/scalprof-pgbench.db}
seconds=${SECONDS_PER_RUN:-5}
[ -x "$scalprof" ] || cargo build --release -q -p scalprof
command -v pg_ctlcluster >/dev/null || { echo "install PostgreSQL: apt-get install -y postgresql" >&2; exit 1; }

pg_ctlcluster 15 main status >/dev/null 2>&1 || pg_ctlcluster 15 main start
as_pg() { runuser -u postgres -- "$@"; }
as_pg psql -tAc "select 1 from pg_database where datname = 'bench'" | grep -q 1 || as_pg createdb bench
as_pg pgbench -i -s 1 -q bench >/dev/null 2>&1

for commit in on off; do
    export PGOPTIONS="-c synchronous_commit=$commit"
    echo "== synchronous_commit=$commit: pgbench alone (tps)"
    for c in 1 2; do
        printf '  %s client(s): ' "$c"
        as_pg pgbench -n -c "$c" -j "$c" -T "$seconds" bench 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
    done
    echo "== synchronous_commit=$commit: scalprof run --attach-name postgres --attach-uid postgres"
    "$scalprof" --db "$db" run -t 1,2 --repeat 3 --attach-name postgres --attach-uid postgres \
        --label "pgbench-commit-$commit" \
        --ops-regex 'number of transactions actually processed: (\d+)' \
        -- runuser -u postgres -- pgbench -n -c '{threads}' -j '{threads}' -T "$seconds" bench \
        2>&1 | sed -n '/^verdict/,/^$/p;/^│ [12] /p;/^tracing:/p;/^findings:/,/^$/p'
done
echo "== compare: synchronous_commit=on (A) against off (B)"
"$scalprof" --db "$db" compare pgbench-commit-on pgbench-commit-off 2>&1 \
    | grep -v '^[│┌└╞]'
