#!/usr/bin/env python3
"""End-to-end check of the CUDA backend for the GPU bundle (tools/gpu-run.sh step 5).

    python3 tools/gpu_e2e.py --mpc MPC [--devices cpu,cuda] [--no-fallback-expected]
        MODEL.onnx [MODEL.onnx ...]

For each model, and for its AMP rewrite (`mpc rewrite --backend B`, B the checked device),
runs `mpc run` with `--device cpu` and `--device cuda`, and compares every output of
the CUDA run with the CPU run's: relative L2 error within 1e-5 for an fp32 model, 1e-2 for
the rewritten one (both backends run the same 16-bit graph; they differ in summation order
and device math functions). Nodes without a CUDA kernel run on the CPU (mpc's fallback): each
passing line ends with mpc's `cuda: N nodes; cpu fallback: ...` line. A model mpc refuses for
want of a kernel (`no kernel`, only with --no-fallback) counts as 'unsupported', not failed.
Inputs: a model with a `NAME.data.npz` beside it (the PyTorch fixtures of
tests/train/torch_fixtures) reads its first 4 samples of each input from there, since token
ids and token types must lie in their embedding's range; any other model gets seeded random
inputs, with 4 for every symbolic dimension. `--no-fallback-expected` makes a CUDA run whose
placement line is not `cpu fallback: none` a failure (the real-architecture step of the
bundle). `--devices A,B` compares device A's outputs with device B's (default `cpu,cuda`;
`cpu,cpu` checks the script itself where there is no GPU).
Prints one line per run and, last, 'N passed, N unsupported, N failed'; exit 1 on a failure.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def run(mpc, *args):
    return subprocess.run([mpc, *map(str, args)], capture_output=True, text=True, timeout=300)


def outputs(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".npy")}


def dim_args(model):
    """--dim NAME=4 for every symbolic dimension of the model's inputs."""
    import onnx
    names = set()
    for i in onnx.load(model, load_external_data=False).graph.input:
        for d in i.type.tensor_type.shape.dim:
            if d.dim_param:
                names.add(d.dim_param)
    return [a for n in sorted(names) for a in ("--dim", f"{n}=4")]


def input_args(model, data, tmp, tag):
    """--input NAME=FILE for the first SAMPLES samples of each input in `data` (an .npz),
    or seeded random inputs with the symbolic dimensions bound."""
    if data is None:
        return ["--random-inputs", "--seed", "3", *dim_args(model)]
    import onnx
    args = []
    with np.load(data) as arrays:
        for i in onnx.load(model, load_external_data=False).graph.input:
            if i.name not in arrays.files:
                continue
            path = os.path.join(tmp, f"{tag}-{i.name}.npy")
            np.save(path, arrays[i.name][:SAMPLES])
            args += ["--input", f"{i.name}={path}"]
    return args


SAMPLES = 4


def check(mpc, model, tol, tmp, tag, devices, data=None, no_fallback=False):
    res = {}
    placement = ""
    inputs = input_args(model, data, tmp, tag)
    for side, dev in enumerate(devices):
        d = os.path.join(tmp, f"{tag}-{side}-{dev}")
        os.makedirs(d, exist_ok=True)
        p = run(mpc, "run", model, "--device", dev, "--outputs", d, *inputs)
        if p.returncode != 0:
            line = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            if dev == "cuda" and "no kernel" in line:
                return "unsupported", line
            return "FAIL", f"{dev}: exit {p.returncode}: {line}"
        res[side] = outputs(d)
        if dev == "cuda":
            placement = next((l for l in p.stdout.splitlines() if l.startswith("cuda: ")), "")
            if no_fallback and not placement.endswith("cpu fallback: none"):
                return "FAIL", f"placement: {placement or '(no placement line)'}"
    worst = []
    for name, ref in res[0].items():
        got = res[1].get(name)
        if got is None or got.shape != ref.shape or got.dtype != ref.dtype:
            return "FAIL", (f"output {name}: {devices[1]} gave "
                            f"{None if got is None else (got.dtype, got.shape)}, "
                            f"{devices[0]} {(ref.dtype, ref.shape)}")
        if ref.dtype.kind in "biu":
            if not np.array_equal(ref, got):
                return "FAIL", f"output {name}: integer/bool values differ"
            continue
        r = ref.astype(np.float64)
        g = got.astype(np.float64)
        if not np.array_equal(np.isfinite(r), np.isfinite(g)):
            return "FAIL", f"output {name}: non-finite values differ"
        m = np.isfinite(r)
        err = np.linalg.norm(r[m] - g[m]) / max(np.linalg.norm(r[m]), 1e-30)
        worst.append(f"{name} rel {err:.2e}")
        if err > tol:
            return "FAIL", f"output {name}: relative L2 error {err:.3e} > {tol}"
    return "pass", ", ".join(worst) + (f" [{placement}]" if placement else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--devices", default="cpu,cuda",
                    help="the reference device and the checked one (default cpu,cuda)")
    ap.add_argument("--no-fallback-expected", action="store_true",
                    help="a CUDA run that leaves any node on the CPU fails")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    devices = a.devices.split(",")
    if len(devices) != 2 or any(d not in ("cpu", "cuda") for d in devices):
        ap.error("--devices takes two of cpu, cuda: A,B")
    counts = {"pass": 0, "unsupported": 0, "FAIL": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for m in a.models:
            base = os.path.basename(m)[:-5]
            amp = os.path.join(tmp, base + ".amp.onnx")
            cases = [(m, 1e-5, base)]
            p = run(a.mpc, "rewrite", m, "--backend", devices[1], "-o", amp)
            if p.returncode == 0:
                cases.append((amp, 1e-2, base + ".amp"))
            else:
                counts["FAIL"] += 1
                print(f"FAIL {base}: rewrite --backend {devices[1]}: {p.stderr.strip()}")
            data = m[:-len(".onnx")] + ".data.npz"
            data = data if os.path.exists(data) else None
            for model, tol, tag in cases:
                status, what = check(a.mpc, model, tol, tmp, tag, devices, data,
                                     a.no_fallback_expected)
                counts[status] += 1
                print(f"{status} {tag}: {what}")
    print(f"{counts['pass']} passed, {counts['unsupported']} unsupported, {counts['FAIL']} failed")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
