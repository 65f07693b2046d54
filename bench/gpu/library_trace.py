#!/usr/bin/env python3
"""Which cuBLASLt and cuDNN algorithms mpc's nodes run, next to PyTorch's for the same call.

    python3 bench/gpu/library_trace.py --mpc MPC [--device cuda] [--out DIR] [--lines N]

The sixteenth session's bench_matmul (docs/perf.md) found mpc's MatMul node 2.4-4x the bare
PyTorch call in TF32/f16/bf16 and its 1x1 convolutions 5-32x, with no way to tell whether the
libraries ran a slower algorithm or mpc spent the time elsewhere. This script runs, for
each case below, `mpc run --device D --random-inputs --repeat 3 --profile` and the same
call in PyTorch (`torch.matmul`; `conv2d` with cudnn.benchmark on, as gpu_matmul.py times
it) with the libraries' own logs on (`CUBLASLT_LOG_LEVEL=2`: each cublasLtMatmul with its
algorithm; `CUBLAS_LOGINFO_DBG=1` for cuBLAS; `CUDNN_LOGLEVEL_DBG=2` for cuDNN 9), and
prints, per case and side, the node's (or call's) time, the log lines that name a matmul or
convolution call (at most --lines each), and for PyTorch the CUDA kernels its profiler saw
(names and times): the kernel that ran is what to compare.

Cases: MatMul 8192x8192x8192 f16 and tf32; Conv 32x256x56x56 -> 64 1x1 f16 and 32x64x56x56
-> 64 3x3 f16 (NCHW, no bias). `--device cpu --tiny` runs small shapes of the same without
library logs (a smoke test of the script; no PyTorch kernels listed). Writes DIR/library_trace.md with --out.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench/: gpu_matmul's model builder
from gpu_matmul import one_node_model  # noqa: E402

LOG_ENV = {"CUBLASLT_LOG_LEVEL": "2", "CUBLAS_LOGINFO_DBG": "1", "CUBLAS_LOGDEST_DBG": "stderr",
           "CUDNN_LOGLEVEL_DBG": "2", "CUDNN_LOGDEST_DBG": "stderr"}
# Log lines worth keeping: the calls that run a product or a convolution, and algorithm names.
KEEP = re.compile(r"cublasLtMatmul\b|cublasLtMatmul\(|Gemm|gemm|algo|Algo|cudnnConvolution|"
                  r"engine|Engine|kernel", re.I)

# (label, op, input shapes, onnx type, extra mpc flags, torch call kind, padding)
CASES = [
    ("MatMul 8192x8192x8192 f16", "MatMul", [[8192, 8192], [8192, 8192]], TensorProto.FLOAT16,
     [], "matmul", 0),
    ("MatMul 8192x8192x8192 tf32", "MatMul", [[8192, 8192], [8192, 8192]], TensorProto.FLOAT,
     ["--tf32"], "matmul", 0),
    ("Conv 32x256x56x56 -> 64, 1x1 f16", "Conv", [[32, 256, 56, 56], [64, 256, 1, 1]],
     TensorProto.FLOAT16, [], "conv", 0),
    ("Conv 32x64x56x56 -> 64, 3x3 f16", "Conv", [[32, 64, 56, 56], [64, 64, 3, 3]],
     TensorProto.FLOAT16, [], "conv", 1),
]

TORCH_SNIPPET = r"""
import sys, time, torch
kind, pad, tf32, shapes = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", eval(sys.argv[4])
dtype = torch.float16 if sys.argv[5] == "f16" else torch.float32
dev = sys.argv[6]
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
args = [torch.randn(s, device=dev).to(dtype) for s in shapes]
call = (torch.matmul if kind == "matmul" else
        lambda x, w: torch.nn.functional.conv2d(x, w, padding=pad))
with torch.no_grad():
    for _ in range(3):
        call(*args)
    if dev == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    call(*args)
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"torch call: {(time.perf_counter() - t0) * 1e3:.3f} ms", flush=True)
    if dev == "cuda":
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call(*args)
            torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.device_type.name == "CUDA" or "CUDA" in str(e.device_type):
                t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
                print(f"torch kernel: {e.key[:160]} ({t / 1e3:.3f} ms)", flush=True)
"""


def picked(text, limit):
    lines = [l.rstrip() for l in text.splitlines() if KEEP.search(l)]
    return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--lines", type=int, default=12)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--tiny", action="store_true",
                    help="small shapes of the same ops: a smoke test on a CPU")
    a = ap.parse_args()
    env = dict(os.environ, **(LOG_ENV if a.device == "cuda" else {}))
    out = []
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, op, shapes, elem, flags, kind, pad in CASES:
            if a.tiny:
                shapes = ([[64, 64], [64, 64]] if op == "MatMul" else
                          [[2, 8, 6, 6], [4, 8, shapes[1][2], shapes[1][3]]])
                label += f" (tiny: {shapes})"
            if a.device != "cuda":
                flags = [f for f in flags if f != "--tf32"]
            if op == "MatMul":
                y = [shapes[0][0], shapes[1][1]]
                m = one_node_model("MatMul", [("a", shapes[0]), ("b", shapes[1])], y, elem)
            else:
                n, _, h, w = shapes[0]
                y = [n, shapes[1][0], h, w]
                m = one_node_model("Conv", [("x", shapes[0]), ("w", shapes[1])], y, elem,
                                   pads=[pad] * 4)
            path = os.path.join(tmp, re.sub(r"\W+", "_", label) + ".onnx")
            onnx.save(m, path)
            out.append(f"### {label}\n")
            try:
                p = subprocess.run([a.mpc, "run", path, "--device", a.device, "--random-inputs",
                                    "--repeat", "3", "--profile", *flags], capture_output=True,
                                   text=True, env=env, timeout=a.timeout)
                node = re.search(r"^ +([0-9.]+) ms +[0-9.]+%  node .*\(" + op + r"\)$",
                                 p.stdout, re.M)
                out.append(f"mpc: exit {p.returncode}, node "
                           f"{node.group(1) + ' ms' if node else 'time not found'}")
                failed += p.returncode != 0
                out += ["```"] + picked(p.stdout + "\n" + p.stderr, a.lines) + ["```"]
            except subprocess.TimeoutExpired:
                failed += 1
                out.append(f"mpc: timed out after {a.timeout} s")
            try:
                q = subprocess.run([sys.executable, "-c", TORCH_SNIPPET, kind, str(pad),
                                    "1" if "--tf32" in flags else "0", repr(shapes),
                                    "f16" if elem == TensorProto.FLOAT16 else "f32", a.device],
                                   capture_output=True, text=True, env=env,
                                   timeout=a.timeout)
                mine = [l for l in q.stdout.splitlines() if l.startswith("torch ")]
                out.append(f"PyTorch: exit {q.returncode}" +
                           ("" if q.returncode == 0 else
                            ": " + (q.stderr.strip().splitlines() or ["no output"])[-1][:200]))
                out += ["```"] + mine[:a.lines] + picked(q.stderr, a.lines) + ["```", ""]
            except subprocess.TimeoutExpired:
                out.append(f"PyTorch: timed out after {a.timeout} s\n")
    text = "\n".join(out) + "\n"
    print(text, end="")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "library_trace.md"), "w") as f:
            f.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
