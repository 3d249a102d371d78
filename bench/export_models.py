#!/usr/bin/python3
"""Makes the benchmark models that ../shared does not hold (needs Debian's python3-torch, python3-onnx).

  gpt2_medium_like.onnx        LM(50257, 1024, 1024, 16, 24) of ../shared/tools/export_zoo.py, structure only
  gpt2_medium_like_train.onnx  the same in training mode (the graph the training-step benchmarks use)
  swin_t.onnx                  torchvision's Swin-T, eval mode: the ~6.6k-node forward graph of the
                               planning and rendering targets (stochastic depth off)
  --zoo: also zoo/NAME_train.onnx for each model of bench/zoo_models.py (training mode), and zoo/options.txt
         (one line per model: its file and memplan's options), read by bench/models_bench.sh

Usage: bench/export_models.py OUTDIR [--zoo]
"""
import os, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "shared", "tools"))
sys.path.insert(0, here)
import export_zoo  # noqa: E402  (the shared exporter's LM and export())

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
export_zoo.ZOO["gpt2_medium_like"] = (lambda: export_zoo.LM(50257, 1024, 1024, 16, 24), ("tokens", 1, 1024))
export_zoo.ZOO["swin_t"] = (lambda: export_zoo.no_drop_path(export_zoo.M.swin_t()), (1, 3, 224, 224))
if not os.path.exists(os.path.join(out, "swin_t.onnx")):
    export_zoo.export("swin_t", out, False)
for train in (False, True):
    if not os.path.exists(os.path.join(out, "gpt2_medium_like%s.onnx" % ("_train" if train else ""))):
        export_zoo.export("gpt2_medium_like", out, train)

if "--zoo" in sys.argv[2:]:
    import zoo_models  # noqa: E402
    zdir = os.path.join(out, "zoo")
    os.makedirs(zdir, exist_ok=True)
    lines = []
    for name, (make, shape, options) in zoo_models.zoo(export_zoo.M, export_zoo.no_drop_path).items():
        export_zoo.ZOO[name] = (make, shape)
        if not os.path.exists(os.path.join(zdir, name + "_train.onnx")):
            try:
                export_zoo.export(name, zdir, True)
            except FileNotFoundError:  # every weight under the external-data threshold: no weights file to remove
                pass
        lines.append("%s_train.onnx %s\n" % (name, options))
    with open(os.path.join(zdir, "options.txt"), "w") as f:
        f.writelines(lines)
