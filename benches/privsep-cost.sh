#!/usr/bin/env bash
# What the privilege split costs: two scalprof binaries (one that parses in its own process,
# one that parses in unprivileged children), timed back to back in alternating rounds on
#   demo     the README's first command (corpus build, packed vs padded sweeps)
#   cpython  run -t 1,2 of CPython threads (libpython's 23 MB of DWARF is parsed each repeat)
#   import   a perf.data of >= 1,000,000 samples (cpu-clock, frame-pointer callchains)
# Prints each arm's median seconds and the ratio AFTER / BEFORE.
# Usage: benches/privsep-cost.sh BEFORE AFTER [ROUNDS]   (root; Debian's linux-perf)
# BEFORE is, for instance, a release build of the commit before the split.
set -euo pipefail
before=$(readlink -f "$1")
after=$(readlink -f "$2")
rounds=${3:-3}
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/threads.py" <<'EOF'
import sys, threading
n = int(sys.argv[1])
def work():
    s = 0
    for i in range(6_000_000 // n):
        s += i * i % 7
threads = [threading.Thread(target=work) for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print("ops=6000000")
EOF

# One recording, imported by both binaries: ~25 kHz per CPU of a syscall-heavy loop.
want=${SAMPLES:-1000000}
freq=25000
cpus=$(nproc)
secs=$(( want * 14 / 10 / (freq * cpus) + 2 ))
"$after" corpus --out "$work/corpus" >/dev/null
echo "recording ~${want} samples (${freq} Hz x ${cpus} CPUs x ${secs} s)..."
perf record -q -F "$freq" -a -g -o "$work/perf.data" -- sleep "$secs" 2>/dev/null &
rec=$!
sleep 0.2
while kill -0 "$rec" 2>/dev/null; do
    CORPUS_SCALE=1 "$work/corpus/mmap_churn" "$cpus" >/dev/null || true
done
wait "$rec" || true
samples=$(perf report -i "$work/perf.data" --stats 2>/dev/null | awk '/SAMPLE events/ {print $3; exit}')
echo "perf.data: $(du -h "$work/perf.data" | cut -f1), ${samples:-?} samples"

secs_of() { # ARM BIN: seconds of one timed run, in a fresh store
    local arm=$1 bin=$2 db="$work/$RANDOM.db" t0 t1
    t0=$(date +%s.%N)
    case $arm in
    demo) HOME="$work/home" "$bin" --db "$db" demo >/dev/null 2>&1 ;;
    cpython) "$bin" --db "$db" run -t 1,2 -- "$py" "$work/threads.py" '{threads}' >/dev/null 2>&1 ;;
    import) "$bin" --db "$db" import "$work/perf.data" >/dev/null 2>&1 ;;
    esac
    t1=$(date +%s.%N)
    rm -rf "$db" "$db".d "$db"-*
    echo "$t1 - $t0" | bc
}

mkdir -p "$work/home"
declare -A times
for r in $(seq "$rounds"); do
    for arm in demo cpython import; do
        for side in before after; do
            bin=$before
            [ "$side" = after ] && bin=$after
            s=$(secs_of "$arm" "$bin")
            times[$arm.$side]+="$s "
            printf 'round %d %-8s %-6s %6.2f s\n' "$r" "$arm" "$side" "$s"
        done
    done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '\n%-8s %10s %10s %8s\n' arm before after ratio
for arm in demo cpython import; do
    b=$(echo "${times[$arm.before]}" | median)
    a=$(echo "${times[$arm.after]}" | median)
    printf '%-8s %9.2fs %9.2fs %7.2fx\n' "$arm" "$b" "$a" "$(echo "$a / $b" | bc -l)"
done
