#!/bin/sh
# remat_bench.sh - the rematerialization ILP against the sqrt, greedy and lookahead baselines on the Checkmate and
# Moccasin graphs of ../shared/remat-graphs, at budgets of 0.5 .. 0.9 of each graph's store-everything peak.
#
#   bench/remat_bench.sh [BUILD_DIR] [--time-limit SEC] [--expand NODES] [--retain-over N] [--wide NODES]
#       (default: build, the solver's default limit, no recipes making an input inside, retaining candidates only
#       where no recipe is offered, and everywhere on graphs of at most 200 nodes, the wide space on graphs of at
#       most 32)
#
# Prints the markdown table of docs/benchmarks.md; exits 1 if a plan's recount disagrees with the ILP.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
    BUILD=$1
    shift
fi
GRAPHS=$ROOT/../shared/remat-graphs
[ -d "$GRAPHS" ] || { echo "remat_bench: $GRAPHS is absent, skipped"; exit 0; }
BIN=$BUILD/memplan-remat-bench
[ -x "$BIN" ] || { echo "remat_bench: no $BIN (cmake --build $BUILD --target memplan-remat-bench)" >&2; exit 2; }
exec "$BIN" "$@" "$GRAPHS"
