#!/usr/bin/env python3
"""The CUDA backend's error paths through `mpc run`, for the GPU bundle (tools/gpu-run.sh).

    python3 tools/gpu_error_check.py --mpc MPC --source-dir SRC [--device cuda]

Each check expects exit status 1, exactly one line on stderr, and no output file:
- a launch that fails (MPC_CUDA_FAIL_NODE names the shipped CNN's Gemm, eagerly and with
  --repeat 3, where later runs would be captured): the line names the node and the op;
- an index out of range in a Gather: the same line as the CPU backend's (on the device when
  Gather has a CUDA kernel there; the placement line says which side ran it);
- a plan larger than the device (a 200000 x 1 by 1 x 200000 fp32 MatMul, 149 GiB, summed to
  one number): the line states the bytes asked, and what the device has free and in all.
`--device cpu` runs the checks that do not need a GPU (a self-check of this script).
Prints one line per check and, last, 'N passed, N failed'; exit 1 on a failure.
"""

import argparse
import os
import re
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

import mpc_proc  # tools/mpc_proc.py, beside this script (in the bundle too)


def run(mpc, args, env=None):
    return mpc_proc.run([mpc, *args], env=mpc_proc.clean_env(env), timeout=300)


def one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    return lines[0] if r.returncode == 1 and len(lines) == 1 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    results = []

    def check(name, ok, detail):
        results.append(ok)
        print(f"{'pass' if ok else 'FAIL'} {name}: {detail}")

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        cnn = os.path.join(a.source_dir, "models", "cnn.onnx")
        if a.device == "cuda":
            for extra in ([], ["--repeat", 3]):
                r = run(a.mpc, ["run", cnn, "--device", "cuda", "--random-inputs", *extra,
                                "--outputs", out], {"MPC_CUDA_FAIL_NODE": "fc/Gemm"})
                line = one_error_line(r)
                want = ("mpc: error: node 'fc/Gemm' (Gemm): launch failed on purpose "
                        "(MPC_CUDA_FAIL_NODE)")
                ok = line is not None and line.endswith(want[len("mpc: error: "):]) \
                    and not os.path.exists(out)
                check(f"failed launch{' --repeat 3' if extra else ''}", ok,
                      line or f"exit {r.returncode}: {r.stderr.strip()[-300:]}")

        # Gather with an index out of range, on the device and on the CPU.
        g = helper.make_graph(
            [helper.make_node("Gather", ["data", "idx"], ["g"], axis=0, name="gather"),
             helper.make_node("Relu", ["g"], ["y"], name="relu")], "oob",
            [helper.make_tensor_value_info("idx", TensorProto.INT64, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
            initializer=[helper.make_tensor("data", TensorProto.FLOAT, [4, 2],
                                            np.arange(8, dtype=np.float32))])
        path = os.path.join(tmp, "oob.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        idx = os.path.join(tmp, "idx.npy")
        np.save(idx, np.array([1, 7], dtype=np.int64))
        lines = {}
        for dev in ("cpu", a.device):
            r = run(a.mpc, ["run", path, "--device", dev, "--input", f"idx={idx}",
                            "--outputs", out])
            lines[dev] = (one_error_line(r), r)
        (cl, _), (dl, dr) = lines["cpu"], lines[a.device]
        placement = next((l for l in dr.stdout.splitlines() if l.startswith("cuda: ")),
                         "cpu backend")
        check("gather index out of range", cl is not None and cl == dl
              and "index 7 out of range" in cl and not os.path.exists(out),
              f"{dl or dr.stderr.strip()[-300:]} [{placement}]")

        if a.device == "cuda":
            n = 200000
            # The product is an intermediate, reduced to one number: the host never holds
            # it, so only the device's memory can refuse it (a 149 GiB graph output was
            # refused by the host's 128 GiB first on the H200, 2026-11-26).
            g = helper.make_graph(
                [helper.make_node("MatMul", ["a", "b"], ["p"], name="outer"),
                 helper.make_node("ReduceSum", ["p"], ["y"], name="total", keepdims=0)],
                "huge",
                [helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, 1]),
                 helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, n])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
            path = os.path.join(tmp, "huge.onnx")
            onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
            r = run(a.mpc, ["run", path, "--device", "cuda", "--random-inputs",
                            "--outputs", out])
            line = one_error_line(r)
            ok = line is not None and re.search(r"\d+ bytes .*\(\d+ bytes free of \d+ bytes\)",
                                                line) is not None
            check("plan larger than the device", ok and not os.path.exists(out),
                  line or f"exit {r.returncode}: {r.stderr.strip()[-300:]}")
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
