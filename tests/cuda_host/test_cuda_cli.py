#!/usr/bin/env python3
"""`mpc run --device cuda` and `mpc rewrite --backend cuda` where they cannot run.

    python3 tests/cuda_host/test_cuda_cli.py --mpc build/tools/mpc --source-dir . \
        --cuda-built 0|1 [-v]

Without a CUDA backend in the build (--cuda-built 0), or with one but no usable GPU
(--cuda-built 1 on a machine without a device, as in CI): exit 1, exactly one line on
stderr saying which, and nothing written (no outputs folder entries, no rewritten model).
Where a GPU is present the refusals cannot be provoked and those cases are skipped with a
line saying so. --tf32 or --no-fallback without --device cuda is a usage error (exit 2).

The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when onnx
or numpy is missing.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None
CUDA_BUILT = False

NO_BUILD = ("mpc: error: --device cuda: this build has no CUDA backend (configure with "
            "MPC_ENABLE_CUDA=ON on a machine with the CUDA toolkit)")
NO_BUILD_REWRITE = ("mpc: error: --backend cuda: this build has no CUDA backend to say which "
                    "ops run in 16 bits there; rewrite with --backend any (the ONNX schemas "
                    "only) or --backend cpu")
# cudaGetDeviceCount's own text and error name follow in the parentheses.
NO_DEVICE = r"no CUDA device found \(cudaGetDeviceCount: .+\)"


def mpc(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def write_model(path):
    """y = x @ W + b: a MatMul and an Add, both in the CUDA kernel table."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
         helper.make_node("Add", ["h", "b"], ["y"], name="add")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


class CudaCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.model = os.path.join(self.dir, "m.onnx")
        write_model(self.model)

    def tearDown(self):
        self.tmp.cleanup()

    def one_line(self, r):
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        return lines[0]

    def test_run_device_cuda(self):
        out = os.path.join(self.dir, "out")
        for extra in ([], ["--tf32"], ["--no-fallback"]):
            r = mpc("run", self.model, "--random-inputs", "--device", "cuda", "--outputs", out,
                    *extra)
            if r.returncode == 0:
                self.skipTest("a CUDA device is present: the refusal cannot be provoked")
            self.assertEqual(r.returncode, 1, r.stderr)
            line = self.one_line(r)
            if CUDA_BUILT:
                self.assertRegex(line, "^mpc: error: --device cuda: " + NO_DEVICE + "$")
            else:
                self.assertEqual(line, NO_BUILD)
            self.assertEqual(r.stdout, "")
            self.assertFalse(os.path.exists(out) and os.listdir(out), "wrote outputs")

    def test_rewrite_backend_cuda(self):
        out = os.path.join(self.dir, "m.amp.onnx")
        r = mpc("rewrite", self.model, "--backend", "cuda", "-o", out)
        if r.returncode == 0:
            self.skipTest("a CUDA device is present: the refusal cannot be provoked")
        self.assertEqual(r.returncode, 1, r.stderr)
        line = self.one_line(r)
        if CUDA_BUILT:
            self.assertRegex(line, "^mpc: error: --backend cuda: " + NO_DEVICE + "$")
        else:
            self.assertEqual(line, NO_BUILD_REWRITE)
        self.assertFalse(os.path.exists(out))

    def test_tf32_needs_cuda(self):
        r = mpc("run", self.model, "--random-inputs", "--tf32")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--tf32 applies to --device cuda only", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_compare_device_cuda(self):
        # The CPU run is fine; the compared run on cuda is refused in one line, before
        # anything runs or is written.
        out = os.path.join(self.dir, "out_cmp")
        r = mpc("run", self.model, "--random-inputs", "--compare-device", "cuda", "--outputs",
                out)
        if r.returncode == 0:
            self.skipTest("a CUDA device is present: the refusal cannot be provoked")
        self.assertEqual(r.returncode, 1, r.stderr)
        line = self.one_line(r)
        if CUDA_BUILT:
            self.assertRegex(line, "^mpc: error: --compare-device cuda: " + NO_DEVICE + "$")
        else:
            self.assertEqual(line, NO_BUILD.replace("--device cuda", "--compare-device cuda"))
        self.assertEqual(r.stdout, "")
        self.assertFalse(os.path.exists(out) and os.listdir(out), "wrote outputs")

    def test_no_fallback_needs_cuda(self):
        r = mpc("run", self.model, "--random-inputs", "--no-fallback")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--no-fallback applies to --device cuda only", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_cuda_graph_option(self):
        # Parsed for `mpc run` and `mpc run --train` alike, before anything is read.
        train = ["--train", "--data", os.path.join(self.dir, "absent.npz"), "--batch", "2"]
        for extra in (["--random-inputs"], train):
            with self.subTest(train=bool(extra)):
                r = mpc("run", self.model, "--cuda-graph", "off", *extra)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--cuda-graph applies to --device cuda only", r.stderr)
                self.assertEqual(r.stdout, "")
                r = mpc("run", self.model, "--device", "cuda", "--cuda-graph", "sometimes",
                        *extra)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--cuda-graph must be on or off, not 'sometimes'", r.stderr)
                r = mpc("run", self.model, *extra, "--device", "cuda", "--cuda-graph")
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("option '--cuda-graph' needs a value", r.stderr)

    def test_train_tf32_needs_cuda(self):
        r = mpc("run", self.model, "--train", "--data", os.path.join(self.dir, "absent.npz"),
                "--batch", "2", "--tf32")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--tf32 applies to --device cuda only", r.stderr)


def main():
    global MPC, CUDA_BUILT
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", default=".")
    ap.add_argument("--cuda-built", type=int, choices=(0, 1), required=True)
    ap.add_argument("-v", action="store_true")
    args, rest = ap.parse_known_args()
    MPC = os.path.abspath(args.mpc)
    CUDA_BUILT = bool(args.cuda_built)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(CudaCliTest)
    result = unittest.TextTestRunner(verbosity=2 if args.v else 1).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
