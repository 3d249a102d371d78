#!/bin/sh
# import_bench.sh - import speed and memory of `memplan inspect --batch 1`, as a Markdown table.
#
#   bench/import_bench.sh [MEMPLAN_BIN]        (default: build/memplan)
#
# For every .onnx under ../shared/models and models/: wall time (best of 5, from
# date +%s%N around the run, so about 1 ms of process start is included) and peak RSS (/usr/bin/time -v, or a tiny getrusage
# helper built here when GNU time is absent). Models without a symbolic first
# dimension run without --batch. Then one row for a ~500 MB model with every
# weight inline (import must map it, not copy it): generated once into
# $BENCH_DIR (default /tmp/memplan-bench) with torchvision's VGG-16 through
# ../shared/tools/export_zoo.py when python3-torch is installed, else with
# python3-onnx + numpy (8 Gemm layers of 4096x4096), else skipped. That model
# runs once, not five times. Results go to docs/benchmarks.md by hand.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build/memplan}
SHARED=$ROOT/../shared
BENCH_DIR=${BENCH_DIR:-/tmp/memplan-bench}
RUNS=5
mkdir -p "$BENCH_DIR"
[ -x "$BIN" ] || { echo "import_bench: no memplan binary at $BIN (build first, or pass its path)" >&2; exit 2; }

# ---- peak RSS: GNU time, or a getrusage helper --------------------------------
if [ -x /usr/bin/time ] && /usr/bin/time -v true >/dev/null 2>&1; then
    peak_rss_kib() { # runs "$@", prints ru_maxrss in KiB
        /usr/bin/time -v -o "$BENCH_DIR/time.txt" "$@" >/dev/null 2>&1 || true
        sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$BENCH_DIR/time.txt"
    }
else
    cat >"$BENCH_DIR/maxrss.c" <<'EOF'
/* maxrss CMD ARGS...: runs CMD, prints the child's peak RSS in KiB (ru_maxrss). */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid) return 2;
    printf("%ld\n", ru.ru_maxrss);
    return 0;
}
EOF
    cc -O2 -o "$BENCH_DIR/maxrss" "$BENCH_DIR/maxrss.c"
    peak_rss_kib() { "$BENCH_DIR/maxrss" "$@"; }
fi

now_ns() { date +%s%N; }

# Arguments for a model: --batch 1 when it binds something.
model_args() {
    if "$BIN" inspect "$1" --batch 1 >/dev/null 2>"$BENCH_DIR/err.txt"; then
        echo "--batch 1"
    elif grep -q -- "--batch" "$BENCH_DIR/err.txt"; then
        echo ""
    else
        echo "error"
    fi
}

# One table row: name, file, number of timed runs.
bench_one() {
    name=$1 file=$2 runs=$3
    size=$(awk -v b="$(stat -c %s "$file")" 'BEGIN { printf "%.1f", b / 1048576 }')
    args=$(model_args "$file")
    if [ "$args" = error ]; then
        msg=$(sed 's/^memplan: [^:]*: //; s/|/\\|/g' "$BENCH_DIR/err.txt" | cut -c1-90)
        echo "| $name | $size | | | | | error: $msg |"
        return
    fi
    # shellcheck disable=SC2086  # $args is one or two words by construction
    "$BIN" inspect "$file" $args --json >"$BENCH_DIR/out.json"
    nodes=$(sed -n 's/^  "nodes": \([0-9]*\),$/\1/p' "$BENCH_DIR/out.json")
    params=$(awk '/^  "parameters": \{/ { p = 1 } p && /"count":/ { gsub(/[^0-9]/, ""); print; exit }' "$BENCH_DIR/out.json")
    best=""
    i=0
    while [ $i -lt "$runs" ]; do
        t0=$(now_ns)
        # shellcheck disable=SC2086
        "$BIN" inspect "$file" $args >/dev/null
        t1=$(now_ns)
        t=$(( (t1 - t0) / 1000 ))
        if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
        i=$((i + 1))
    done
    # shellcheck disable=SC2086
    rss=$(peak_rss_kib "$BIN" inspect "$file" $args)
    ms=$(awk -v u="$best" 'BEGIN { printf "%.1f", u / 1000 }')
    mib=$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')
    echo "| $name | $size | $nodes | $params | $ms | $mib | ${args:-(no --batch)}$4 |"
}

echo "memplan inspect import benchmark: $(uname -m), $(nproc) CPUs, $("$BIN" --version), best of $RUNS runs"
echo
echo "| model | file MiB | nodes | parameters | time ms | peak RSS MiB | notes |"
echo "|---|---:|---:|---:|---:|---:|---|"
# gpt2_medium_like*.onnx (3.3k/3.6k nodes): made once by bench/export_models.py into $BENCH_DIR when torch is here.
if [ ! -f "$BENCH_DIR/gpt2_medium_like_train.onnx" ] && /usr/bin/python3 -c "import torch, onnx" 2>/dev/null; then
    /usr/bin/python3 "$ROOT/bench/export_models.py" "$BENCH_DIR" >&2 || true
fi
{ find "$SHARED/models" -name '*.onnx' 2>/dev/null; ls "$ROOT"/models/*.onnx "$BENCH_DIR"/gpt2_medium_like*.onnx 2>/dev/null; } | sort | while read -r f; do
    case $f in
    "$SHARED"/*) rel=shared/${f#"$SHARED/"} ;;
    "$BENCH_DIR"/*) rel=bench/${f#"$BENCH_DIR/"} ;;
    *) rel=${f#"$ROOT/"} ;;
    esac
    bench_one "$rel" "$f" "$RUNS" ""
done

# ---- the inline-weights model ----------------------------------------------------
BIG=$BENCH_DIR/inline_weights.onnx
if [ ! -f "$BIG" ]; then
    if /usr/bin/python3 -c "import torch, torchvision, onnx" 2>/dev/null; then
        echo "import_bench: exporting VGG-16 with inline weights (once) to $BIG" >&2
        /usr/bin/python3 - "$SHARED/tools" "$BIG" <<'EOF'
import sys, torch
sys.path.insert(0, sys.argv[1])
import export_zoo  # torchvision's models as the shared exporter builds them
torch.manual_seed(0)
model = export_zoo.M.vgg16().eval()
with torch.no_grad():  # distinct values, as export_zoo does, so the exporter cannot merge equal initializers
    for p in model.parameters():
        p.normal_(0.0, 0.02)
torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), sys.argv[2], input_names=["input"], output_names=["output"],
                  opset_version=14, dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
EOF
        BIG_NOTE=" VGG-16 via export_zoo.py, weights inline, 1 run"
    elif /usr/bin/python3 -c "import onnx, numpy" 2>/dev/null; then
        echo "import_bench: python3-torch absent: building an 8 x Gemm 4096x4096 model with python3-onnx (once) to $BIG" >&2
        /usr/bin/python3 - "$BIG" <<'EOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
rng = np.random.default_rng(0)
nodes, inits, x = [], [], "input"
for i in range(8):
    w = numpy_helper.from_array(rng.standard_normal((4096, 4096), dtype=np.float32), f"fc{i}.weight")
    b = numpy_helper.from_array(np.zeros(4096, np.float32), f"fc{i}.bias")
    inits += [w, b]
    y = f"/fc{i}/Gemm_output_0"
    nodes.append(helper.make_node("Gemm", [x, w.name, b.name], [y], name=f"/fc{i}/Gemm", transB=1))
    if i < 7:
        nodes.append(helper.make_node("Relu", [y], [f"/relu{i}/Relu_output_0"], name=f"/relu{i}/Relu"))
        x = f"/relu{i}/Relu_output_0"
    else:
        x = y
g = helper.make_graph(nodes, "main_graph", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 4096])],
                      [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", 4096])], inits)
onnx.save(helper.make_model(g, producer_name="import_bench", opset_imports=[helper.make_opsetid("", 14)]), sys.argv[1])
EOF
        BIG_NOTE=" 8 x Gemm 4096x4096 via python3-onnx (python3-torch absent), weights inline, 1 run"
    else
        echo "import_bench: skipping the inline-weights model: neither python3-torch nor python3-onnx is installed" >&2
    fi
else
    BIG_NOTE=" weights inline (cached in $BENCH_DIR), 1 run"
fi
if [ -f "$BIG" ]; then bench_one "inline_weights.onnx" "$BIG" 1 "$BIG_NOTE"; fi
