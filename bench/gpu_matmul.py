#!/usr/bin/env python3
"""MatMul throughput of `mpc run --device cuda` (cuBLASLt through the CUDA backend).

    python3 bench/gpu_matmul.py --mpc MPC [--sizes 1024,4096,8192] [--repeat 20]

For each size N and type (f32 strict, f32 with --tf32, f16, bf16), writes a one-node model
Y = A @ B with A, B [N, N] as graph inputs, and runs `mpc run --device cuda --random-inputs
--repeat R --profile`. It prints the median time of a whole run (copying A and B to the
device and Y back included) and the MatMul node's own mean time from `--profile` (the
cuBLASLt call and one stream synchronization), with the TFLOP/s each implies (2 N^3 flops).
Needs onnx and a GPU.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

from onnx import TensorProto, helper, save

TYPES = [("f32", TensorProto.FLOAT, []), ("tf32", TensorProto.FLOAT, ["--tf32"]),
         ("f16", TensorProto.FLOAT16, []), ("bf16", TensorProto.BFLOAT16, [])]


def model(n, elem):
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                          [helper.make_tensor_value_info("a", elem, [n, n]),
                           helper.make_tensor_value_info("b", elem, [n, n])],
                          [helper.make_tensor_value_info("y", elem, [n, n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--sizes", default="1024,4096,8192")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    failed = 0
    print("| N | type | median run (ms) | TFLOP/s incl. copies | MatMul node (ms) | TFLOP/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, a.sizes.split(",")):
            for name, elem, extra in TYPES:
                path = os.path.join(tmp, f"mm{n}_{name}.onnx")
                save(model(n, elem), path)
                p = subprocess.run([a.mpc, "run", path, "--device", "cuda", "--random-inputs",
                                    "--repeat", str(a.repeat), "--profile", *extra],
                                   capture_output=True, text=True, timeout=600)
                # "time: median 1.234 ms over 20 runs"
                m = re.search(r"median ([0-9.]+) ms", p.stdout)
                if p.returncode != 0 or not m:
                    failed += 1
                    err = (p.stderr.strip().splitlines() or ["no time in output"])[-1]
                    print(f"| {n} | {name} | FAIL | {err} |")
                    continue
                ms = float(m.group(1))
                node = re.search(r"^ +([0-9.]+) ms +[0-9.]+%  node .*\(MatMul\)$", p.stdout, re.M)
                node_ms = float(node.group(1)) if node else float("nan")
                flops = 2 * n**3
                print(f"| {n} | {name} | {ms:.3f} | {flops / (ms * 1e-3) / 1e12:.1f} | "
                      f"{node_ms:.3f} | {flops / (node_ms * 1e-3) / 1e12:.1f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
