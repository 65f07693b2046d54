#!/usr/bin/env python3
"""loop_bench.py - `mpc run` of Loops that carry a sequence and append to it.

Builds, for each --iterations N, a model whose Loop runs N times and appends its input x
(--width floats) to the sequence it carries (SequenceInsert), then reads the sequence's
length and concatenates it; runs `mpc run MODEL --random-inputs` --repeat times for each
--mpc binary, interleaved, and prints a Markdown table of the median of mpc's own `time:`
line (the run, without start-up) and of the process's wall time. A copy of the whole
sequence per iteration makes the time grow as N^2; an append in place, as N. A benchmark,
not a test (tests/runtime_exec/test_run.py checks the results).

usage: python3 bench/loop_bench.py --mpc build/tools/mpc [--mpc /tmp/mpc-old]
                                   [--iterations 1000,4000,16000] [--width 256] [--repeat 3]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def build(path, iterations, width):
    import onnx
    from onnx import helper as h, TensorProto as T
    seq = h.make_tensor_sequence_value_info
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("SequenceInsert", ["seq_in", "x"], ["seq_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         seq("seq_in", T.FLOAT, None)],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), seq("seq_out", T.FLOAT, None)])
    g = h.make_graph(
        [h.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
         h.make_node("Constant", [], ["M"], value=h.make_tensor("M", T.INT64, [], [iterations])),
         h.make_node("Constant", [], ["c"], value=h.make_tensor("c", T.BOOL, [], [True])),
         h.make_node("Loop", ["M", "c", "s0"], ["s"], body=body),
         h.make_node("SequenceLength", ["s"], ["n"]),
         h.make_node("ConcatFromSequence", ["s"], ["cat"], axis=0)], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [width])],
        [h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("cat", T.FLOAT, None)])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def run_once(mpc, path):
    """(mpc's own time in ms, wall s) of one run."""
    start = time.perf_counter()
    r = subprocess.run([mpc, "run", path, "--random-inputs"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"{mpc} failed on {path}: {r.stderr.strip()}")
    m = re.search(r"time: median ([0-9.]+) ms", r.stdout)
    return float(m.group(1)) if m else float("nan"), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpc", action="append", required=True)
    ap.add_argument("--iterations", default="1000,4000,16000")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    counts = [int(v) for v in a.iterations.split(",")]
    with tempfile.TemporaryDirectory() as d:
        print("| iterations | binary | run ms (median) | process s (median) |")
        print("|---:|---|---:|---:|")
        for n in counts:
            path = os.path.join(d, f"loop{n}.onnx")
            build(path, n, a.width)
            results = {m: [] for m in a.mpc}
            for _ in range(a.repeat):
                for m in a.mpc:
                    results[m].append(run_once(m, path))
            for m in a.mpc:
                ms = statistics.median(r[0] for r in results[m])
                wall = statistics.median(r[1] for r in results[m])
                print(f"| {n:,} | {m} | {ms:.1f} | {wall:.3f} |", flush=True)


if __name__ == "__main__":
    main()
