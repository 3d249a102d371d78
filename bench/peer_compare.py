#!/usr/bin/env python3
"""Compares memplan's training-step memory with PyTorch's measured figures (../shared/peers/torch-cpu.txt).

Usage: bench/peer_compare.py [MEMPLAN_BIN]   (default build/memplan; standard library only)
Prints a Markdown table: parameters, AdamW state, saved-for-backward bytes and step peak, memplan vs PyTorch.
PyTorch's peak is its step peak above the resident bytes plus the resident parameters and optimizer state.
"""
import json, os, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
shared = os.path.join(root, "..", "shared")
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build", "memplan")
peers = os.path.join(shared, "peers", "torch-cpu.txt")
if not os.path.exists(peers):
    sys.exit(f"peer_compare: {peers} absent")

def pct(a, b):
    return f"{100.0 * (a - b) / b:+.1f} %"

print("| model | batch | parameters (memplan = torch?) | AdamW state memplan / torch | saved memplan / torch | diff |"
      " peak memplan / torch | diff |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
for line in open(peers):
    if not line.startswith("model="):
        continue
    p = dict(kv.split("=", 1) for kv in line.split())
    args = [binary, os.path.join(shared, "models", "torch", p["model"] + "_train.onnx"), "--batch", p["batch"], "--json"]
    if "seq" in p:
        args += ["--dim", "sequence=" + p["seq"]]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        print(f"| {p['model']} | {p['batch']} | error: {r.stderr.strip()[:80]} | | | | | |")
        continue
    j = json.loads(r.stdout)
    m = j["memory"]
    params = m["totals"]["parameters"] // 4
    opt, saved, peak = m["totals"]["optimizer_state"], j["saved_activation_bytes"], m["peak_bytes"]
    t_opt, t_saved = int(p["optimizer_state_bytes"]), int(p["saved_for_backward_bytes"])
    t_peak = int(p["step_peak_above_resident_bytes"]) + int(p["resident_bytes"])
    same = "yes" if params == int(p["params"]) else f"no: {params} vs {p['params']}"
    print(f"| {p['model']} | {p['batch']} | {same} | {opt:,} / {t_opt:,} | {saved:,} / {t_saved:,} | {pct(saved, t_saved)} |"
          f" {peak:,} / {t_peak:,} | {pct(peak, t_peak)} |")
