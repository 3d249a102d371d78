#!/usr/bin/python3
"""What running each update inside the backward saves, in PyTorch and in memplan's count.

PyTorch 1.13 on the CPU (Debian's python3-torch), the zoo models of ../shared/tools/export_zoo.py: the step
peak (profiler allocation events, as ../shared/tools/torch_peer.py measures it) plus the resident parameters
and AdamW state, for the usual loop (backward, then opt.step()) and with one AdamW per parameter stepped in a
post-hook of the parameter's AccumulateGrad node (1.13 has no register_post_accumulate_grad_hook), which
frees each gradient as soon as it is made. memplan: `memplan MODEL_train.onnx --batch N --json` peak, without
and with --optimizer-in-backward.

Usage: bench/torch_in_backward.py [MEMPLAN_BIN] [NAME:BATCH[:SEQ] ...]   (default: the models below)
"""
import json, os, subprocess, sys
import torch
from torch.profiler import profile, ProfilerActivity

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
shared = os.path.join(root, "..", "shared")
sys.path.insert(0, os.path.join(shared, "tools"))
from export_zoo import ZOO  # noqa: E402

def torch_peak(name, batch, seq, in_backward):
    make, shape = ZOO[name]
    torch.manual_seed(0)
    model = make().train()
    x = torch.randint(0, 1000, (batch, seq)) if shape[0] == "tokens" else torch.randn(batch, *shape[1:])
    params = list(model.parameters())
    if in_backward:
        opts, keep = {p: torch.optim.AdamW([p], lr=1e-4) for p in params}, []
        for p in params:
            acc = p.view_as(p).grad_fn.next_functions[0][0]  # the AccumulateGrad node of p
            def step(_gi, _go, o=opts[p]):
                o.step()
                o.zero_grad(set_to_none=True)
            acc.register_hook(step)
            keep.append(acc)  # the tensor holds its accumulator weakly
        state = lambda: sum(v.numel() * v.element_size() for o in opts.values() for st in o.state.values()
                            for v in st.values() if torch.is_tensor(v))
        finish = lambda: None
    else:
        opt = torch.optim.AdamW(params, lr=1e-4)
        state = lambda: sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values()
                            if torch.is_tensor(v))
        def finish():
            opt.step()
            opt.zero_grad(set_to_none=True)
    model(x).float().mean().backward()  # warm-up: the optimizer state exists before the measured step
    finish()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model(x).float().mean().backward()
        finish()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_us())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return peak + sum(p.numel() * p.element_size() for p in params) + state()

def memplan_peak(binary, name, batch, seq, in_backward):
    args = [binary, os.path.join(shared, "models", "torch", name + "_train.onnx"), "--batch", str(batch), "--json"]
    if seq:
        args += ["--dim", f"sequence={seq}"]
    if in_backward:
        args.append("--optimizer-in-backward")
    return json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)["memory"]["peak_bytes"]

def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build", "memplan")
    specs = sys.argv[2:] or ["resnet50:32", "mobilenet_v3_large:32", "vgg16:16", "vit_b_16:4", "gpt2_small_like:1:512"]
    mib = lambda b: f"{b / 2**20:,.1f}"
    print("| model | batch | torch MiB | in the backward | saved | memplan MiB | in the backward | saved |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for spec in specs:
        name, batch, *rest = spec.split(":")
        batch, seq = int(batch), int(rest[0]) if rest else 0
        t0, t1 = torch_peak(name, batch, seq, False), torch_peak(name, batch, seq, True)
        m0, m1 = memplan_peak(binary, name, batch, seq, False), memplan_peak(binary, name, batch, seq, True)
        tag = f"{batch}" + (f" (seq {seq})" if seq else "")
        print(f"| {name} | {tag} | {mib(t0)} | {mib(t1)} | {mib(t0 - t1)} | {mib(m0)} | {mib(m1)} | {mib(m0 - m1)} |",
              flush=True)

if __name__ == "__main__":
    main()
