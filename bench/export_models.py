#!/usr/bin/python3
"""Makes the benchmark models that ../shared does not hold (needs Debian's python3-torch, python3-onnx).

  gpt2_medium_like.onnx        LM(50257, 1024, 1024, 16, 24) of ../shared/tools/export_zoo.py, structure only
  gpt2_medium_like_train.onnx  the same in training mode (the graph the training-step benchmarks use)
  swin_t.onnx                  torchvision's Swin-T, eval mode: the ~6.6k-node forward graph of the
                               planning and rendering targets (stochastic depth off)

Usage: bench/export_models.py OUTDIR
"""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "tools"))
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

