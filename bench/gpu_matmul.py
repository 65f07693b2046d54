#!/usr/bin/env python3
"""GEMM and convolution throughput of `mpc run --device cuda` against the bare library call.

    python3 bench/gpu_matmul.py --mpc MPC [--sizes 1024,4096,8192] [--convs resnet50]
        [--repeat 20] [--device cuda] [--no-torch] [--json FILE]

GEMMs: for each size N and type (f32 strict, f32 with --tf32, f16, bf16), a one-node model
Y = A @ B with A, B [N, N] as graph inputs. Convolutions (`--convs resnet50`, the default;
`--convs none` skips them): the distinct 3x3 and 1x1 convolutions of a ResNet-50 bottleneck
stage at batch 32 (NCHW, stride 1, "same" padding, no bias), X and W as graph inputs, in
f32, f16 and bf16 (opset 22, whose Conv takes bf16).

Each model runs once under `mpc run --device D --random-inputs --repeat R --profile`: the
median time of a whole run (copying the inputs to the device and the output back included)
and the node's own mean time from `--profile` (its cuBLASLt or cuDNN call and one stream
synchronization; the first run, a warm-up, left out), with the TFLOP/s each implies (2 N^3 flops for a GEMM; 2 N K C R S P Q for
a convolution). Where PyTorch is importable (the GPU machine has it) the same operation on
the same device and type runs as the "bare" call: `torch.matmul` (cuBLAS/cuBLASLt;
`allow_tf32` only on the tf32 row) and `torch.nn.functional.conv2d` (cuDNN, benchmark mode,
TF32 off), timed the way mpc's profile times a node (the call plus a synchronization, the
median of R calls after 3 warm-up calls). The last column is the node's time over the bare
call's: 1.00 means mpc's node costs what the library call costs.

Linear layers (`--linear TxD,...`, issue 15's GEMM epilogues; default 8192x1024,512x1024,
`--linear none` skips them): Y = act(X @ W + b) with X [T, D] a graph input, W [D, 4D] and b
[4D] initializers, act Relu or Gelu (opset 20, erf and tanh forms), in f16 and bf16, each as the
unfused MatMul, Add and activation nodes and as the `mpc rewrite --fuse-gemm-epilogues` output
(one GemmBiasAct node: cuBLASLt's BIAS / RELU_BIAS / GELU_BIAS epilogue). The row gives the
median run and the sum of the nodes' profiled times of both, and unfused over fused.

`--device cpu` runs the same (but the tf32 rows) on the CPU backend and torch's CPU kernels:
a smoke test of the script where there is no GPU. `--json FILE` writes every figure. Exit status 1 when any
mpc run fails.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from onnx import TensorProto, helper, save

TYPES = [("f32", TensorProto.FLOAT, []), ("tf32", TensorProto.FLOAT, ["--tf32"]),
         ("f16", TensorProto.FLOAT16, []), ("bf16", TensorProto.BFLOAT16, [])]
CONV_TYPES = [t for t in TYPES if t[0] != "tf32"]
# (N, C, H, W, K, kernel side): a ResNet-50 stage-2 bottleneck at batch 32 (56x56, 64 and
# 256 channels) and a stage-5 3x3 (7x7, 512 channels).
CONVS = {"resnet50": [(32, 64, 56, 56, 64, 1), (32, 64, 56, 56, 64, 3), (32, 64, 56, 56, 256, 1),
                      (32, 256, 56, 56, 64, 1), (32, 512, 7, 7, 512, 3)],
         "tiny": [(2, 8, 6, 6, 4, 1), (2, 8, 6, 6, 4, 3)],  # the CPU smoke test's
         "none": []}
WARMUP = 3


def one_node_model(op, inputs, out_shape, elem, opset=17, **attrs):
    g = helper.make_graph([helper.make_node(op, [n for n, _ in inputs], ["y"], **attrs)], op,
                          [helper.make_tensor_value_info(n, elem, s) for n, s in inputs],
                          [helper.make_tensor_value_info("y", elem, out_shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def linear_model(t, d, elem, act, seed=0):
    """X [t, d] -> MatMul W [d, 4d] -> Add b -> Relu | Gelu (approximate none/tanh)."""
    import numpy as np
    from onnx import numpy_helper
    np_type = {TensorProto.FLOAT16: np.float16, TensorProto.FLOAT: np.float32}
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((d, 4 * d)) / np.sqrt(d)
    b = rng.standard_normal(4 * d) * 0.1

    def init(name, arr):
        if elem == TensorProto.BFLOAT16:  # through float32: make_tensor rounds to bfloat16
            return helper.make_tensor(name, elem, arr.shape, arr.astype(np.float32).ravel())
        return numpy_helper.from_array(arr.astype(np_type[elem]), name)

    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="fc/MatMul"),
             helper.make_node("Add", ["m", "b"], ["h"], name="fc/Add")]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["h"], ["y"], name="fc/Relu"))
    else:
        nodes.append(helper.make_node("Gelu", ["h"], ["y"], name="fc/Gelu",
                                      approximate="tanh" if act == "gelu_tanh" else "none"))
    g = helper.make_graph(nodes, "linear", [helper.make_tensor_value_info("x", elem, [t, d])],
                          [helper.make_tensor_value_info("y", elem, [t, 4 * d])],
                          [init("W", w), init("b", b)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 8
    return m


def node_sum(stdout):
    """The sum of the profiled node times of one run (the ten slowest: every node here)."""
    return sum(float(t) for t in re.findall(r"^ +([0-9.]+) ms +[0-9.]+%  node ", stdout, re.M))


def run_linear(mpc, path, device, repeat):
    """(median run ms, node-time sum ms) or (None, reason)."""
    p = subprocess.run([mpc, "run", path, "--device", device, "--random-inputs",
                        "--repeat", str(repeat), "--profile"],
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"median ([0-9.]+) ms", p.stdout)
    if p.returncode != 0 or not m:
        return None, (p.stderr.strip().splitlines() or ["no time in output"])[-1]
    return float(m.group(1)), node_sum(p.stdout)


def bench_linear(a, tmp):
    """The Linear-layer rows: unfused nodes against one GemmBiasAct node; returns (rows,
    failures)."""
    rows, failed = [], 0
    sizes = [] if a.linear == "none" else [tuple(map(int, s.split("x")))
                                           for s in a.linear.split(",")]
    if not sizes:
        return rows, failed
    print()
    print("| linear T x D -> 4D | type | act | unfused run (ms) | fused run (ms) | unfused nodes "
          "(ms) | fused node (ms) | unfused / fused nodes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (t, d) in sizes:
        for name, elem in (("f16", TensorProto.FLOAT16), ("bf16", TensorProto.BFLOAT16)):
            for act in ("relu", "gelu", "gelu_tanh"):
                plain = os.path.join(tmp, f"linear_{t}_{d}_{name}_{act}.onnx")
                save(linear_model(t, d, elem, act), plain)
                fused = plain.replace(".onnx", ".fused.onnx")
                r = subprocess.run([a.mpc, "rewrite", plain, "-o", fused,
                                    "--fuse-gemm-epilogues"], capture_output=True, text=True,
                                   timeout=600)
                label = f"{t} x {d} -> {4 * d}"
                if r.returncode != 0:
                    failed += 1
                    print(f"| {label} | {name} | {act} | FAIL | {r.stderr.strip()[-200:]} |")
                    continue
                pu = run_linear(a.mpc, plain, a.device, a.repeat)
                pf = run_linear(a.mpc, fused, a.device, a.repeat)
                if pu[0] is None or pf[0] is None:
                    failed += 1
                    print(f"| {label} | {name} | {act} | FAIL | {pu[1] if pu[0] is None else pf[1]} |")
                    continue
                ratio = pu[1] / pf[1] if pf[1] else float("nan")
                print(f"| {label} | {name} | {act} | {pu[0]:.3f} | {pf[0]:.3f} | {pu[1]:.3f} | "
                      f"{pf[1]:.3f} | {ratio:.2f} |")
                rows.append({"case": f"linear {label}", "type": name, "act": act,
                             "unfused_run_ms": pu[0], "fused_run_ms": pf[0],
                             "unfused_nodes_ms": pu[1], "fused_node_ms": pf[1]})
    return rows, failed


def run_mpc(mpc, path, device, repeat, extra, op):
    """(median run ms, node ms) or (None, one-line reason)."""
    p = subprocess.run([mpc, "run", path, "--device", device, "--random-inputs",
                        "--repeat", str(repeat), "--profile", *extra],
                       capture_output=True, text=True, timeout=600)
    # "time: median 1.234 ms over 20 runs"
    m = re.search(r"median ([0-9.]+) ms", p.stdout)
    if p.returncode != 0 or not m:
        return None, (p.stderr.strip().splitlines() or ["no time in output"])[-1]
    node = re.search(r"^ +([0-9.]+) ms +[0-9.]+%  node .*\(" + op + r"\)$", p.stdout, re.M)
    return float(m.group(1)), float(node.group(1)) if node else float("nan")


def torch_timer(device):
    """A function (type name, operand shapes, ("matmul"|"conv", padding), repeat) -> median
    ms of the bare call on random operands, or None
    when PyTorch (or its device) is not there."""
    try:
        import torch
    except ImportError:
        return None
    if device == "cuda" and not torch.cuda.is_available():
        return None
    dtypes = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16,
              "bf16": torch.bfloat16}

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def timed(name, shapes, what, repeat):
        kind, pad = what
        call = (torch.matmul if kind == "matmul" else
                lambda x, w: torch.nn.functional.conv2d(x, w, padding=pad))
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.benchmark = True
        gen = torch.Generator(device=device).manual_seed(3)
        args = [torch.randn(s, generator=gen, device=device, dtype=torch.float32)
                .to(dtypes[name]) for s in shapes]
        times = []
        with torch.no_grad():
            for i in range(WARMUP + repeat):
                sync()
                t0 = time.perf_counter()
                call(*args)
                sync()
                if i >= WARMUP:
                    times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    return timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--sizes", default="1024,4096,8192", help="N,... or none")
    ap.add_argument("--convs", default="resnet50", choices=sorted(CONVS))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--linear", default="8192x1024,512x1024",
                    help="Linear-layer epilogue cases TxD,... or none")
    a = ap.parse_args()
    bare = None if a.no_torch else torch_timer(a.device)
    if bare is None:
        print("(no bare-call column: PyTorch " +
              ("not used" if a.no_torch else f"with device {a.device} not available") + ")")
    cases = []  # (label, type name, elem, extra, model, op, flops, shapes, call)
    for n in (map(int, a.sizes.split(",")) if a.sizes and a.sizes != "none" else []):
        for name, elem, extra in TYPES:
            if extra and a.device != "cuda":
                continue  # --tf32 is a CUDA option
            m = one_node_model("MatMul", [("a", [n, n]), ("b", [n, n])], [n, n], elem)
            cases.append((f"MatMul {n}x{n}x{n}", name, extra, m, "MatMul", 2 * n**3,
                          [[n, n], [n, n]], ("matmul", 0)))
    for (n, c, h, w, k, r) in CONVS[a.convs]:
        for name, elem, extra in CONV_TYPES:
            p = r // 2
            m = one_node_model("Conv", [("x", [n, c, h, w]), ("w", [k, c, r, r])], [n, k, h, w],
                               elem, opset=22, kernel_shape=[r, r], pads=[p, p, p, p])
            cases.append((f"Conv {n}x{c}x{h}x{w} -> {k}, {r}x{r}", name, extra, m, "Conv",
                          2 * n * k * c * r * r * h * w, [[n, c, h, w], [k, c, r, r]],
                          ("conv", p)))

    failed = 0
    rows = []
    print("| op and shape | type | median run (ms) | TFLOP/s incl. copies | node (ms) | TFLOP/s |"
          " bare call (ms) | TFLOP/s | node / bare |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, name, extra, m, op, flops, shapes, call) in enumerate(cases):
            path = os.path.join(tmp, f"case{i}.onnx")
            save(m, path)
            run_ms, node_ms = run_mpc(a.mpc, path, a.device, a.repeat, extra, op)
            if run_ms is None:
                failed += 1
                print(f"| {label} | {name} | FAIL | {node_ms} |")
                rows.append({"case": label, "type": name, "error": node_ms})
                continue
            bare_ms = bare(name, shapes, call, a.repeat) if bare else float("nan")
            tf = lambda ms: flops / (ms * 1e-3) / 1e12  # noqa: E731
            print(f"| {label} | {name} | {run_ms:.3f} | {tf(run_ms):.2f} | {node_ms:.3f} | "
                  f"{tf(node_ms):.2f} | {bare_ms:.3f} | {tf(bare_ms):.2f} | "
                  f"{node_ms / bare_ms:.2f} |")
            rows.append({"case": label, "type": name, "run_ms": run_ms, "node_ms": node_ms,
                         "bare_ms": bare_ms, "flops": flops})
        linear_rows, linear_failed = bench_linear(a, tmp)
        rows += linear_rows
        failed += linear_failed
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, "repeat": a.repeat, "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
