#!/bin/sh
# backend_train_sweep.sh - bad input never crashes the planner: every model of
# ONNX's backend suite (../shared/onnx-backend: node, pytorch-*, simple) is
# planned for training as a user would try it, its first graph input the data
# and every other float input a parameter (--data-inputs), at 60 % of its peak:
#
#   memplan MODEL --data-inputs FIRST --budget 60% --reserve 0
#
# Every run must end with a plan (0), a one-line model error (2) or an
# impossible budget (3): another status, or a sanitizer report on stderr, is
# listed and makes the script exit 1. Prints the count per status and the most
# common model errors (names and numbers folded). Use a sanitizer build
# (build-asan) to check memory errors too. About 2 minutes (10 under ASan).
#
#   bench/backend_train_sweep.sh [BUILD_DIR]
set -u
BUILD=${1:-build}
M="$BUILD/memplan"
S="$(dirname "$0")/../../shared/onnx-backend"
[ -x "$M" ] || { echo "backend_train_sweep: build first ($M missing)"; exit 1; }
[ -d "$S" ] || { echo "backend_train_sweep: $S absent, skipped"; exit 0; }
OUT=$(mktemp -d /tmp/backend_sweep.XXXXXX)
bad=0
for d in "$S"/node/*/ "$S"/pytorch-*/*/ "$S"/simple/*/; do
    m="$d/model.onnx"
    [ -f "$m" ] || continue
    first=$("$M" inspect "$m" 2>/dev/null | sed -n '/^inputs$/{n;p;q}' | awk '{print $1}')
    if [ -n "$first" ]; then
        timeout 120 "$M" "$m" --data-inputs "$first" --budget 60% --reserve 0 >/dev/null 2>"$OUT/err"
    else
        timeout 120 "$M" "$m" --budget 60% --reserve 0 >/dev/null 2>"$OUT/err"
    fi
    rc=$?
    echo "$rc" >>"$OUT/codes"
    if { [ "$rc" != 0 ] && [ "$rc" != 2 ] && [ "$rc" != 3 ]; } ||
        grep -q "Sanitizer\|runtime error:" "$OUT/err"; then
        echo "FAIL (exit $rc): $m" >&2
        head -3 "$OUT/err" >&2
        bad=1
    fi
    [ "$rc" = 2 ] && head -n 1 "$OUT/err" >>"$OUT/errors"
done
echo "| exit status | models |"
echo "|---|---:|"
sort "$OUT/codes" | uniq -c | awk '{printf "| %s | %d |\n", $2, $1}'
echo
echo "| model error (names and numbers folded) | models |"
echo "|---|---:|"
[ -f "$OUT/errors" ] && sed "s/^memplan: [^:]*: //; s/'[^']*'/Q/g; s/[0-9][0-9]*/N/g" "$OUT/errors" | cut -c1-110 |
    sort | uniq -c | sort -rn | head -15 | awk '{n=$1; $1=""; sub(/^ /, ""); printf "| %s | %d |\n", $0, n}'
rm -rf "$OUT"
exit $bad
