#!/usr/bin/env python3
"""run_bench.py - fp32 inference time of mpc's CPU backend next to onnxruntime's.

For each shipped model, draws one seeded input set, writes it as .npy, and in
the same run times `mpc run --threads 1 --repeat N` (the median mpc prints) and
an onnxruntime InferenceSession with one intra-op thread (median of N runs of
`session.run`, after one warm-up run). Both exclude process start and model
loading. Prints a Markdown table with the ratio mpc / onnxruntime; the bar is
within 3x on one thread. Also prints the memory planner's planned arena peak
against the sum of all tensor sizes. A benchmark, not a test.

With --baseline OLD_MPC (a binary of the tree before a change, copied somewhere
stable) it instead compares the two mpc binaries on the same inputs: --rounds
rounds, each running old and new once (alternating which goes first), the
median of the per-round medians for each. With --instructions it also counts
the instructions of one inference under callgrind (valgrind): each binary runs
with --repeat 1 and --repeat 1+K (K = --instr-runs), and (I(1+K) - I(1)) / K
is the count of one run without process start, loading and planning. Give it
binaries without debug information (`strip -g` copies): callgrind cannot read
clang 14's DWARF 5.

usage: python3 bench/run_bench.py --mpc build/tools/mpc [--repeat 200] [--models cnn,transformer]
       python3 bench/run_bench.py --mpc NEW --baseline OLD [--rounds 7] [--instructions]
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


def mpc_args(mpc, model, feeds, repeat, tmp):
    args = [mpc, "run", model, "--threads", "1", "--repeat", str(repeat)]
    for name, arr in feeds.items():
        path = os.path.join(tmp, f"{len(args)}.npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    return args


def time_mpc(mpc, model, feeds, repeat, tmp):
    args = mpc_args(mpc, model, feeds, repeat, tmp)
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


def instructions(mpc, model, feeds, repeat, tmp):
    """Instructions callgrind counts for a whole `mpc run --repeat N` process."""
    args = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    args += mpc_args(mpc, model, feeds, repeat, tmp)
    err = subprocess.run(args, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"Collected : (\d+)", err).group(1))


def compare(args, tmp):
    """New binary against --baseline, interleaved; instructions per run."""
    head = "| model | old ms | new ms | new / old |"
    rule = "|---|---:|---:|---:|"
    if args.instructions:
        head += " old instructions | new instructions | new / old |"
        rule += "---:|---:|---:|"
    print(f"{args.rounds} rounds of --repeat {args.repeat}, old and new alternating; "
          "median of the round medians\n")
    print(head)
    print(rule)
    for name in args.models.split(","):
        model = os.path.join(ROOT, "models", f"{name}.onnx")
        feeds = make_inputs(model)
        times = {"old": [], "new": []}
        for r in range(args.rounds):
            order = (("old", args.baseline), ("new", args.mpc))
            for key, mpc in order if r % 2 == 0 else order[::-1]:
                times[key].append(time_mpc(mpc, model, feeds, args.repeat, tmp)[0])
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        line = f"| {name} | {old:.4f} | {new:.4f} | {new / old:.3f} |"
        if args.instructions:
            k = args.instr_runs
            per_run = {}
            for key, mpc in (("old", args.baseline), ("new", args.mpc)):
                one = instructions(mpc, model, feeds, 1, tmp)
                more = instructions(mpc, model, feeds, 1 + k, tmp)
                per_run[key] = (more - one) / k
            line += (f" {per_run['old']:,.0f} | {per_run['new']:,.0f} | "
                     f"{per_run['new'] / per_run['old']:.4f} |")
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--models", default="mlp,cnn,transformer,lstm")
    ap.add_argument("--baseline", help="the mpc binary of the tree before a change")
    ap.add_argument("--rounds", type=int, default=7, help="with --baseline: rounds")
    ap.add_argument("--instructions", action="store_true",
                    help="with --baseline: instructions per run under callgrind")
    ap.add_argument("--instr-runs", type=int, default=10,
                    help="with --instructions: the extra runs K the count is divided by")
    args = ap.parse_args()
    if args.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            compare(args, tmp)
        return 0
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
