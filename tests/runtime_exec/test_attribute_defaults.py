#!/usr/bin/env python3
"""Attribute defaults that depend on the opset, through `mpc run`, against onnxruntime.

    python3 tests/runtime_exec/test_attribute_defaults.py --mpc build/tools/mpc --source-dir . \
        [--device cuda]

The registry's parsers (runtime/ops/OpParams.cpp) fill an op's parameter struct once per node,
with the defaults of the node's opset where they differ. The ONNX backend node tests are
written at one opset per op, so the older opsets' defaults are checked here: one-node models
with the attributes left out, run by `mpc run` and by onnxruntime (the oracle), compared
elementwise.
  * Resize at opsets 10, 11, 13, 18 and 19: opset 10 has asymmetric coordinates and its own
    nearest rounding (ceil when downscaling, floor otherwise); opset 11 on defaults to
    half_pixel and round_prefer_floor, cubic_coeff_a -0.75 and exclude_outside 0; opset 18
    adds keep_aspect_ratio_policy (stretch) and axes (all). Nearest, linear and cubic, up-
    and downscaling, by scales and (opset 11 on) by sizes.
  * ReverseSequence (batch_axis 1, time_axis 0) and Compress without an axis (flattened).

With `--device cuda` (tools/gpu-run.sh) every model runs on the CUDA backend, the Resize ones
with `--no-fallback`: their scales and sizes are initializers, so the CUDA image kernels must
take them (runtime/cuda/README.md, "Image ops").

Prints "N passed, N failed"; exit 1 on failure, 77 when onnx, numpy or onnxruntime is missing.
"""

import argparse
import os
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"onnx, numpy and onnxruntime are required: {e}", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from mpc_testlib import run_mpc_outputs  # noqa: E402

MPC = None
DEVICE = "cpu"


def model_of(op, inputs, consts, attrs, opset):
    """One node `op` over graph inputs `inputs` (name -> array) and initializers `consts`
    (name -> array, or None for an absent optional input), in the order given."""
    names = list(inputs) + [n if a is not None else "" for n, a in consts.items()]
    node = helper.make_node(op, names, ["y"], name="n", **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(
            next(iter(inputs.values())).dtype), None)],
        initializer=[numpy_helper.from_array(a, n) for n, a in consts.items() if a is not None])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def run_mpc(model, feeds, tmp, op):
    extra = []
    if DEVICE != "cpu":
        extra = ["--device", DEVICE] + (["--no-fallback"] if op == "Resize" else [])
    code, got = run_mpc_outputs(MPC, model, feeds, ["y"], tmp, extra_args=extra)
    if code != 0:
        raise AssertionError(f"mpc run failed: {got.strip()}")
    return got[0]


def run_ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(["y"], feeds)[0]


class AttributeDefaultsTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(12)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def same(self, op, inputs, consts, attrs, opset):
        model = model_of(op, inputs, consts, attrs, opset)
        want = run_ort(model, inputs)
        got = run_mpc(model, inputs, self.tmp.name, op)
        self.assertEqual(got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_resize_defaults_per_opset(self):
        x = self.rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
        f32 = lambda v: np.array(v, np.float32)  # noqa: E731
        scales = [f32([1, 1, 2, 3]), f32([1, 1, 0.5, 0.6]), f32([1, 1, 1.5, 0.8])]
        checked = 0
        for opset in (10, 11, 13, 18, 19):
            # roi and scales are optional from opset 13; before, an unused one is empty.
            absent = None if opset >= 13 else np.zeros((0,), np.float32)
            modes = ("nearest", "linear") if opset == 10 else ("nearest", "linear", "cubic")
            for mode in modes:
                for s in scales:
                    with self.subTest(opset=opset, mode=mode, scales=s.tolist()):
                        consts = {"scales": s} if opset == 10 else {"roi": absent, "scales": s}
                        self.same("Resize", {"x": x}, consts, {"mode": mode}, opset)
                        checked += 1
                if opset >= 11:
                    with self.subTest(opset=opset, mode=mode, sizes=[1, 2, 7, 3]):
                        consts = {"roi": absent, "scales": absent,
                                  "sizes": np.array([1, 2, 7, 3], np.int64)}
                        self.same("Resize", {"x": x}, consts, {"mode": mode}, opset)
                        checked += 1
        self.assertEqual(checked, 2 * 3 + 4 * 3 * 4)

    def test_resize_default_mode_is_nearest(self):
        x = self.rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
        for opset in (10, 13, 19):
            with self.subTest(opset=opset):
                s = np.array([1, 1, 1.7, 0.6], np.float32)
                consts = {"scales": s} if opset == 10 else {"roi": None, "scales": s}
                self.same("Resize", {"x": x}, consts, {}, opset)

    def test_reverse_sequence_default_axes(self):
        # batch_axis 1, time_axis 0: x is [time, batch, ...].
        x = self.rng.standard_normal((4, 3, 2)).astype(np.float32)
        lens = np.array([4, 1, 2], np.int64)
        self.same("ReverseSequence", {"x": x}, {"lens": lens}, {}, 10)

    def test_compress_without_axis_flattens(self):
        x = self.rng.standard_normal((3, 4)).astype(np.float32)
        cond = np.array([1, 0, 0, 1, 1, 0, 1], bool)
        for opset in (9, 11):
            with self.subTest(opset=opset):
                self.same("Compress", {"x": x}, {"cond": cond}, {}, opset)


def main():
    global MPC, DEVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir")
    ap.add_argument("--device", default="cpu", help="the device mpc runs the models on")
    args = ap.parse_args()
    MPC = os.path.abspath(args.mpc)
    DEVICE = args.device
    result = unittest.TextTestRunner(verbosity=1, stream=sys.stdout).run(
        unittest.TestLoader().loadTestsFromTestCase(AttributeDefaultsTest))
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
