#!/bin/sh
# near_min_bench.sh - planning time next to the smallest feasible budget, where
# the plans fragment, the ILP's space is empty and the fallbacks are placed:
# GPT-2 small (batch 4, seq 1024) from 39.4 % of its store-everything peak,
# ResNet-50 (batch 32) from its smallest feasible budget (936,422,080 bytes) up.
# Per budget: wall and user seconds, the overhead and where the order came from;
# with a second build, the same beside it, run one after the other.
#
#   bench/near_min_bench.sh [BUILD_DIR] [OTHER_BUILD_DIR]
#
# Needs /usr/bin/time, and python3 only to read the JSON.
set -eu
BUILD=${1:-build}
OTHER=${2:-}
SHARED="$(dirname "$0")/../../shared/models/torch"
[ -x "$BUILD/memplan" ] || { echo "near_min_bench: build first ($BUILD/memplan missing)"; exit 1; }
[ -d "$SHARED" ] || { echo "near_min_bench: $SHARED absent, nothing to run"; exit 0; }
[ -x /usr/bin/time ] || { echo "near_min_bench: needs /usr/bin/time (Debian package time)"; exit 1; }

one() { # memplan, budget, model args...: "wall / user | overhead from"
    m=$1 b=$2
    shift 2
    t=$(mktemp)
    if out=$(/usr/bin/time -f "%e %U" -o "$t" "$m" "$@" --budget "$b" --reserve 0 --json 2>/dev/null); then
        r=$(echo "$out" | python3 -c 'import json,sys; p=json.load(sys.stdin)["plan"]; print("%.2f %% %s" % (p["recompute_overhead_pct"], p["order_from"]))')
    else
        r="exit $?"
    fi
    set -- $(tail -n 1 "$t") # after "Command exited with non-zero status N" when it fails
    rm -f "$t"
    printf '%s / %s | %s' "$1" "$2" "$r"
}

row() { # label, budget, model args...
    label=$1 b=$2
    shift 2
    line="| $label | $(one "$BUILD/memplan" "$b" "$@") |"
    [ -z "$OTHER" ] || line="$line $(one "$OTHER/memplan" "$b" "$@") |"
    echo "$line"
}

if [ -z "$OTHER" ]; then
    echo "| model, budget | wall / user s | overhead, order from |"
    echo "|---|---:|---|"
else
    echo "| model, budget | wall / user s | overhead, order from | $OTHER: wall / user s | overhead, order from |"
    echo "|---|---:|---|---:|---|"
fi
G="$SHARED/gpt2_small_like_train.onnx"
for b in 39.42 39.5 39.55 39.6 39.7 39.8 39.9 40 40.2 40.5 41 42; do
    row "gpt2 b4 s1024, $b %" "$b%" "$G" --batch 4 --dim sequence=1024
done
R="$SHARED/resnet50_train.onnx"
for k in 0 1 3 5 10 15 20; do
    row "resnet50 b32, smallest + $k %" "$((936422080 + 936422080 * k / 100))B" "$R" --batch 32
done
