#!/usr/bin/env python3
"""run_bench.py - fp32 inference time of mpc's CPU backend next to onnxruntime's.

For each shipped model, draws one seeded input set, writes it as .npy, and in
the same run times `mpc run --threads 1 --repeat N` (the median mpc prints) and
an onnxruntime InferenceSession with one intra-op thread (median of N runs of
`session.run`, after one warm-up run). Both exclude process start and model
loading. Prints a Markdown table with the ratio mpc / onnxruntime; the bar is
within 3x on one thread. Also prints the memory planner's planned arena peak
against the sum of all tensor sizes. A benchmark, not a test.

usage: python3 bench/run_bench.py --mpc build/tools/mpc [--repeat 200] [--models cnn,transformer]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_inputs(model_path, seed=0):
    m = onnx.load(model_path)
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in m.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def time_mpc(mpc, model, feeds, repeat, tmp):
    args = [mpc, "run", model, "--threads", "1", "--repeat", str(repeat)]
    for name, arr in feeds.items():
        path = os.path.join(tmp, f"{len(args)}.npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    ms = float(re.search(r"time: median ([0-9.]+) ms", out).group(1))
    mem = re.search(r"planned peak ([0-9.]+ \w+), no-reuse sum ([0-9.]+ \w+)", out)
    return ms, mem.group(1), mem.group(2)


def time_ort(model, feeds, repeat):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--models", default="mlp,cnn,transformer,lstm")
    args = ap.parse_args()
    print(f"onnxruntime {ort.__version__}, {args.repeat} runs each, one thread\n")
    print("| model | mpc ms | onnxruntime ms | mpc / ort | planned arena peak | sum of tensor sizes |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = os.path.join(ROOT, "models", f"{name}.onnx")
            feeds = make_inputs(model)
            mpc_ms, planned, total = time_mpc(args.mpc, model, feeds, args.repeat, tmp)
            ort_ms = time_ort(model, feeds, args.repeat)
            print(f"| {name} | {mpc_ms:.3f} | {ort_ms:.3f} | {mpc_ms / ort_ms:.2f} | {planned} "
                  f"| {total} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
