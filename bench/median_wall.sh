#!/bin/sh
# median_wall.sh - the median, fastest and slowest wall time of N runs of one command line under each of
# several memplan builds, the builds run in turn (interleaved, so that a machine's drift in speed falls on
# all of them alike).
#
#   bench/median_wall.sh N "MEMPLAN ARGS" BUILD_DIR...
#   e.g. bench/median_wall.sh 5 "../shared/models/torch/gpt2_small_like_train.onnx --batch 4 \
#        --dim sequence=1024 --budget 40.2% --reserve 0" build /tmp/oldsrc/build
#
# Needs /usr/bin/time. The exit status of memplan is not checked (an exit-3 line is timed as well).
set -eu
[ $# -ge 3 ] || { echo "usage: bench/median_wall.sh N \"MEMPLAN ARGS\" BUILD_DIR..." >&2; exit 2; }
N=$1 ARGS=$2
shift 2
[ -x /usr/bin/time ] || { echo "median_wall: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
for b in "$@"; do [ -x "$b/memplan" ] || { echo "median_wall: $b/memplan missing" >&2; exit 1; }; done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
i=0
while [ "$i" -lt "$N" ]; do
    k=0
    for b in "$@"; do
        # shellcheck disable=SC2086 # ARGS is a command line, split on purpose
        /usr/bin/time -f "%e" -o "$TMP/one" "$b/memplan" $ARGS >/dev/null 2>&1 || true
        tail -n 1 "$TMP/one" >>"$TMP/t$k"
        k=$((k + 1))
    done
    i=$((i + 1))
done
echo "| build | median s | fastest s | slowest s |"
echo "|---|---:|---:|---:|"
k=0
for b in "$@"; do
    sort -n "$TMP/t$k" | awk -v b="$b" '{a[NR] = $1} END {printf "| %s | %.2f | %.2f | %.2f |\n", b, a[int((NR + 1) / 2)], a[1], a[NR]}'
    k=$((k + 1))
done
