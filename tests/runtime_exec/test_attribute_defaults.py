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
  * LpPool at opsets 1, 2, 11, 18 and 22 and GlobalLpPool at opsets 1, 2 and 22: p defaults
    to 2, is a float in the first version (2.5 raises to that power), and opset 18 adds
    dilations and ceil_mode; against onnx.reference, and against onnxruntime too where it
    implements the version (not LpPool-1, GlobalLpPool-1 or GlobalLpPool-22); GlobalLpPool,
    which onnx.reference lacks, against a float64 numpy norm instead, and ceil_mode windows
    that run past the end padding against onnxruntime only (onnx.reference counts their
    missing taps).

With `--device cuda` (tools/gpu-run.sh) every model runs on the CUDA backend, the Resize ones
with `--no-fallback`: their scales and sizes are initializers, so the CUDA image kernels must
take them (runtime/cuda/README.md, "Image ops"); the LpPool and GlobalLpPool ones too (the
pooling kernels take every case here).

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
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover
    print(f"onnx, numpy and onnxruntime are required: {e}", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from mpc_testlib import run_mpc_outputs  # noqa: E402

MPC = None
DEVICE = "cpu"
# The ops whose models must run wholly on a --device other than cpu.
NO_FALLBACK = ("Resize", "LpPool", "GlobalLpPool")


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
        extra = ["--device", DEVICE] + (["--no-fallback"] if op in NO_FALLBACK else [])
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

    def same_as_reference(self, op, x, attrs, opset, ort_too, numpy_oracle=None,
                          reference=True):
        """`mpc run` against onnx.reference (unless not `reference`; or `numpy_oracle`, a
        float64 result, for an op it does not implement) and, with ort_too, against
        onnxruntime."""
        model = model_of(op, {"x": x}, {}, attrs, opset)
        got = run_mpc(model, {"x": x}, self.tmp.name, op)
        oracles = [] if not reference else [ReferenceEvaluator(model).run(None, {"x": x})[0]
                                            if numpy_oracle is None else numpy_oracle]
        if ort_too:
            oracles.append(run_ort(model, {"x": x}))
        for want in oracles:
            self.assertEqual(got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_lppool_per_opset(self):
        x = self.rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
        window = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]}
        checked = 0
        for opset in (2, 11, 18, 22):
            for p in (None, 1, 3):
                attrs = dict(window, **({} if p is None else {"p": p}))
                with self.subTest(opset=opset, p=p):
                    self.same_as_reference("LpPool", x, attrs, opset, True)
                    checked += 1
                if opset >= 18:
                    # onnx.reference scales a window's mean by the whole kernel size, which
                    # counts the taps of a ceil_mode window beyond the end padding: only
                    # onnxruntime here (which sums the taps inside the input, as ONNX says).
                    attrs.update(dilations=[2, 1], ceil_mode=1)
                    with self.subTest(opset=opset, p=p, dilations=True):
                        self.same_as_reference("LpPool", x, attrs, opset, True, reference=False)
                        checked += 1
        with self.subTest(opset=1):
            self.same_as_reference("LpPool", x, dict(window, p=2.5), 1, False)
        x1 = self.rng.standard_normal((2, 3, 9)).astype(np.float32)
        with self.subTest(rank=1):
            self.same_as_reference("LpPool", x1, {"kernel_shape": [4], "pads": [2, 1]}, 18, True)
        x3 = self.rng.standard_normal((1, 2, 4, 5, 3)).astype(np.float32)
        with self.subTest(rank=3):
            self.same_as_reference("LpPool", x3, {"kernel_shape": [2, 3, 2], "p": 1}, 18, True)
        self.assertEqual(checked, 4 * 3 + 2 * 3)

    def test_globallppool_per_opset(self):
        x = self.rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
        for opset, attrs, ort_too in ((1, {"p": 2.5}, False), (1, {}, False), (2, {}, True),
                                      (2, {"p": 3}, True), (22, {"p": 1}, False)):
            p = attrs.get("p", 2)
            norm = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1 / p)
            with self.subTest(opset=opset, attrs=attrs):
                self.same_as_reference("GlobalLpPool", x, attrs, opset, ort_too, norm)

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
