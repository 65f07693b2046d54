#!/usr/bin/env python3
"""The fused unscale and optimizer kernels' bytes per second against the memory bandwidth
(issue 15: "the fused unscale + optimizer kernel's bytes per second against the memory
bandwidth"; goal: the fused optimizer at >= 80% of the bandwidth bound).

    python3 bench/gpu/optimizer_bench.py --mpc MPC [--device cuda] [--params bert|tiny]
        [--steps 6] [--bandwidth GBPS] [--out DIR]

Builds a model whose trainable parameters have the shapes of BERT-base's (110 M parameters:
the token, position and type embeddings, and per layer the fused QKV weight 768x2304, the
output projection, the two feed-forward weights, their biases and the LayerNorm vectors; or
`tiny`, a few small shapes, for a smoke test on a CPU) and a forward that costs next to
nothing (each parameter, as a [rows, cols] matrix, multiplied by a [1, rows] input and summed,
so the AMP rewrite puts its gradient in float16). Its Adam training graph is built with
`mpc train-graph --fused-optimizer`, rewritten with `mpc rewrite --target fp16 --fused-unscale
--multi-tensor-optimizer`, and run with `mpc run --train --profile`: the profile's time per
step of the one MultiTensorUnscale node (per element: the float16 gradient read, 2 bytes, its
unscaled float32 copy written, 4) and of the one MultiTensorAdamStep node (per element: the
float32 gradient, parameter and both moments read, 16 bytes, the parameter and moments
written, 12) gives bytes per second. A second row times the per-parameter AdamStep nodes of
the graph without --multi-tensor-optimizer (the same bytes over one launch per parameter).

The bound: --bandwidth in GB/s, else on cuda the rate of a 1 GiB device-to-device copy through
PyTorch (read plus write), else the H100 SXM's 3350 GB/s. Each profiled node is waited for
(docs/user-guide.md, `--profile`), which adds a synchronization of some microseconds to a node
of about a millisecond at BERT-base's size. Prints a markdown table; --out also writes
optimizer_bench.json. Exit status 0 when every row has a figure.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"optimizer_bench: onnx and numpy are required ({e})", file=sys.stderr)
    sys.exit(77)

H100_SXM_GBPS = 3350.0


def bert_base_shapes():
    """BERT-base's trainable parameter shapes (110 M elements)."""
    d, ff, layers = 768, 3072, 12
    shapes = [(30522, d), (512, d), (2, d), (1, d), (1, d)]  # embeddings and their LayerNorm
    for _ in range(layers):
        shapes += [(d, 3 * d), (1, 3 * d), (d, d), (1, d), (1, d), (1, d),
                   (d, ff), (1, ff), (ff, d), (1, d), (1, d), (1, d)]
    return shapes + [(d, d), (1, d), (d, 2), (1, 2)]  # pooler and classifier


TINY_SHAPES = [(64, 32), (1, 32), (32, 96), (1, 96), (96, 32), (1, 1)]


def build_model(shapes, path):
    """y[1] = sum_i ReduceSum(MatMul(x_rows_i, W_i)): one [1, rows] input per distinct row
    count, each parameter an initializer of its [rows, cols] shape."""
    rng = np.random.default_rng(0)
    nodes, inits, inputs, total = [], [], {}, None
    for i, (r, c) in enumerate(shapes):
        w = f"w{i}"
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((r, c)) * 0.02).astype(np.float32), w))
        x = f"x{r}"
        inputs.setdefault(x, helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, r]))
        nodes.append(helper.make_node("MatMul", [x, w], [f"p{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node("ReduceSum", [f"p{i}"], [f"s{i}"], name=f"sum{i}",
                                      keepdims=1))
        if total is None:
            total = f"s{i}"
        else:
            nodes.append(helper.make_node("Add", [total, f"s{i}"], [f"t{i}"], name=f"add{i}"))
            total = f"t{i}"
    nodes.append(helper.make_node("Reshape", [total, "one"], ["y"], name="out"))
    inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "one"))
    g = helper.make_graph(nodes, "optimizer_bench", list(inputs.values()),
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    data = {name: np.ones((4, int(name[1:])), np.float32) * 0.01 for name in inputs}
    data["labels"] = np.zeros(4, np.float32)
    return data


def run(cmd, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        last = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
        raise RuntimeError(f"{' '.join(cmd[:3])}: exit {p.returncode}: {last[:200]}")
    return p


def profile_ms(stderr, op):
    """(ms per step, node count) of `op` in `--profile`'s node time by op type, or None."""
    m = re.search(r"^\s+([0-9.]+) ms\s+[0-9.]+%\s+" + re.escape(op) + r" x(\d+)$", stderr,
                  re.MULTILINE)
    return (float(m.group(1)), int(m.group(2))) if m else None


def torch_copy_gbps():
    """A 1 GiB device-to-device copy's rate (bytes read plus written), or None."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
        a = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
        b = torch.empty_like(a)
        for _ in range(3):
            b.copy_(a)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            b.copy_(a)
        end.record()
        torch.cuda.synchronize()
        return 2 * a.numel() * 4 * 10 / (start.elapsed_time(end) / 1e3) / 1e9
    except Exception:  # no usable PyTorch: the spec figure
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--params", default="bert", choices=["bert", "tiny"])
    ap.add_argument("--steps", type=int, default=6, help="steps run; the last 2 are profiled")
    ap.add_argument("--bandwidth", type=float, default=None, help="the bound in GB/s")
    ap.add_argument("--run-timeout", type=int, default=600)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    shapes = bert_base_shapes() if a.params == "bert" else TINY_SHAPES
    elements = sum(r * c for r, c in shapes)
    bound, source = a.bandwidth, "--bandwidth"
    if bound is None and a.device == "cuda":
        bound, source = torch_copy_gbps(), "a 1 GiB device copy (PyTorch)"
    if bound is None:
        bound, source = H100_SXM_GBPS, "the H100 SXM's specification"
    rows, failures = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.onnx")
        data = build_model(shapes, model)
        npz = os.path.join(tmp, "data.npz")
        np.savez(npz, **data)
        train = os.path.join(tmp, "train.onnx")
        try:
            run([a.mpc, "train-graph", model, "--loss", "mse", "--labels", "labels",
                 "--optimizer", "adam", "--fused-optimizer", "-o", train], a.run_timeout)
        except RuntimeError as e:
            print(f"optimizer_bench: {e}", file=sys.stderr)
            return 1
        variants = [("multi-tensor", ["--fused-unscale", "--multi-tensor-optimizer"],
                     [("ai.mpc.training::MultiTensorUnscale", 6),
                      ("ai.mpc.training::MultiTensorAdamStep", 28)]),
                    ("per-parameter", [], [("ai.mpc.training::AdamStep", 28)])]
        for name, flags, ops in variants:
            out = os.path.join(tmp, f"{name}.onnx")
            try:
                run([a.mpc, "rewrite", train, "--target", "fp16", *flags, "-o", out],
                    a.run_timeout)
                p = run([a.mpc, "run", out, "--train", "--data", npz, "--batch", "1",
                         "--steps", str(a.steps), "--shuffle", "none", "--device", a.device,
                         "--profile"], a.run_timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                failures += 1
                rows.append({"variant": name, "error": str(e).splitlines()[0][:200]})
                continue
            for op, per_element in ops:
                got = profile_ms(p.stderr, op)
                row = {"variant": name, "op": op, "elements": elements,
                       "bytes_per_element": per_element}
                if got is None:
                    failures += 1
                    row["error"] = "not in --profile's rows"
                else:
                    ms, count = got
                    gbps = elements * per_element / (ms / 1e3) / 1e9
                    row.update(ms=ms, nodes=count, gbps=gbps, fraction=gbps / bound)
                rows.append(row)
    print(f"Optimizer kernels, {elements:,} parameters ({a.params}), device {a.device}; "
          f"bound {bound:.0f} GB/s ({source}); goal: MultiTensorAdamStep >= 80% of it")
    print()
    print("| variant | op | nodes | ms per step | bytes per element | GB/s | of the bound |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['variant']} | {r.get('op', '')} | | | | {r['error']} | |")
        else:
            print(f"| {r['variant']} | {r['op']} | {r['nodes']} | {r['ms']:.4f} | "
                  f"{r['bytes_per_element']} | {r['gbps']:.1f} | {100 * r['fraction']:.1f}% |")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "optimizer_bench.json"), "w") as f:
            json.dump({"device": a.device, "params": a.params, "elements": elements,
                       "bound_gbps": bound, "bound_source": source, "rows": rows}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
