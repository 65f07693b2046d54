#!/usr/bin/env python3
"""RMSNormalization and RotaryEmbedding (opset 23) through `mpc run`.

Each case builds a one-op model whose float32 inputs are cast to the tested type (f32, f16,
bf16) and whose output is cast back to float32 (exact), runs it with `mpc run`, and compares
with a float64 reference written here from the ONNX specification, evaluated on the inputs
rounded to the tested type. The kernels compute in fp32 and round once, so the tolerance is
the output type's rounding (relative to each element's magnitude) plus fp32 noise. Bad
attributes and out-of-range positions (an index error against cos_cache's rows, as the CUDA
launcher records it) are one clear error line naming the node.

usage: test_transformer_ops.py --mpc build/tools/mpc --source-dir .
"""
import argparse
import os
import shutil
import sys
import tempfile
import unittest

try:
    import ml_dtypes
    import numpy as np
    from onnx import TensorProto, helper
    import onnx
except ImportError as e:  # pragma: no cover
    print(f"numpy, onnx and ml_dtypes are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from mpc_testlib import run_mpc_outputs  # noqa: E402

MPC = None
# type -> (ONNX element type, numpy type for rounding, relative tolerance)
TYPES = {"f32": (TensorProto.FLOAT, np.float32, 2e-6),
         "f16": (TensorProto.FLOAT16, np.float16, 2e-3),
         "bf16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16, 1.6e-2)}


def run_outputs(model, feeds, out_names, tmp):
    """`mpc run` on model with .npy inputs; returns (returncode, [outputs] or stderr)."""
    return run_mpc_outputs(MPC, model, feeds, out_names, tmp)


def run_model(model, feeds, tmp):
    """run_outputs for the one output y: (returncode, y or stderr)."""
    code, got = run_outputs(model, feeds, ["y"], tmp)
    return code, got[0] if code == 0 else got


def one_op(op, inputs, dt, attrs, int_inputs=()):
    """A model: float32 inputs -> Cast(dt) -> op -> Cast(float32) -> y. int_inputs: names
    of int64 inputs passed as they are."""
    elem = TYPES[dt][0]
    nodes, graph_inputs, names = [], [], []
    for name, arr in inputs:
        if name in int_inputs:
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.INT64,
                                                              list(arr.shape)))
            names.append(name)
            continue
        graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                          list(arr.shape)))
        nodes.append(helper.make_node("Cast", [name], [name + "_t"], to=elem))
        names.append(name + "_t")
    nodes.append(helper.make_node(op, names, ["r"], name="op", **attrs))
    nodes.append(helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT))
    graph = helper.make_graph(nodes, "g", graph_inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    return model


def rounded(arr, dt):
    return arr.astype(TYPES[dt][1]).astype(np.float64)


def rms_reference(x, scale, axis, eps):
    axes = tuple(range(axis % x.ndim, x.ndim))
    ms = np.mean(x * x, axis=axes, keepdims=True)
    return x / np.sqrt(ms + eps) * scale


def rotary_reference(x, cos, sin, pos, interleaved, dim, num_heads):
    """Rotates [batch, heads, seq, head] (or [batch, seq, hidden] with num_heads)."""
    three_d = x.ndim == 3
    if three_d:
        b, s, hidden = x.shape
        x = x.reshape(b, s, num_heads, hidden // num_heads).transpose(0, 2, 1, 3)
    if pos is not None:
        cos, sin = cos[pos], sin[pos]  # [batch, seq, dim/2]
    y = x.copy()
    dim = dim or x.shape[-1]
    half = dim // 2
    c, s_ = cos[:, None, :, :], sin[:, None, :, :]
    if interleaved:
        x1, x2 = x[..., 0:dim:2], x[..., 1:dim:2]
        y[..., 0:dim:2] = c * x1 - s_ * x2
        y[..., 1:dim:2] = s_ * x1 + c * x2
    else:
        x1, x2 = x[..., :half], x[..., half:dim]
        y[..., :half] = c * x1 - s_ * x2
        y[..., half:dim] = s_ * x1 + c * x2
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, s, hidden)
    return y


class TransformerOpsTest(unittest.TestCase):
    rng = np.random.default_rng(20261122)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mpc-tops-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check(self, model, feeds, want, dt):
        code, got = run_model(model, feeds, self.tmp)
        self.assertEqual(code, 0, got)
        tol = TYPES[dt][2]
        err = np.abs(got - want)
        bound = tol * (np.abs(want) + np.max(np.abs(want)) * 1e-3) + 1e-6
        self.assertTrue(np.all(err <= bound),
                        f"max error {err.max():.3g} (element {np.argmax(err - bound)})")

    def test_rms_normalization(self):
        for dt in TYPES:
            for shape, axis, scale_shape, eps in [((3, 4), -1, (4,), 1e-5),
                                                  ((2, 3, 5), 1, (3, 5), 0.1),
                                                  ((2, 3, 40), -1, (1,), 1e-6),
                                                  ((4, 6, 8), 1, (6, 1), 1e-5)]:
                with self.subTest(dt=dt, shape=shape, axis=axis, scale=scale_shape):
                    x = self.rng.standard_normal(shape).astype(np.float32) * 3
                    sc = self.rng.uniform(-2, 2, scale_shape).astype(np.float32)
                    model = one_op("RMSNormalization", [("x", x), ("s", sc)], dt,
                                   {"axis": axis, "epsilon": eps})
                    want = rms_reference(rounded(x, dt), rounded(sc, dt), axis, eps)
                    self.check(model, {"x": x, "s": sc}, want, dt)

    def test_rotary_embedding(self):
        cases = [  # (x shape, interleaved, rotary dim, num_heads, with positions)
            ((2, 3, 5, 8), 0, 0, 0, False),
            ((2, 3, 5, 8), 1, 0, 0, True),
            ((2, 5, 12), 0, 4, 3, True),   # 3-D input, partial rotation
            ((1, 2, 4, 6), 1, 4, 0, False),
        ]
        for dt in TYPES:
            for shape, inter, dim, heads, with_pos in cases:
                with self.subTest(dt=dt, shape=shape, interleaved=inter, dim=dim):
                    x = self.rng.standard_normal(shape).astype(np.float32)
                    batch, seq = shape[0], shape[2] if len(shape) == 4 else shape[1]
                    head = shape[3] if len(shape) == 4 else shape[2] // heads
                    half = (dim or head) // 2
                    if with_pos:
                        angles = self.rng.uniform(-3, 3, (7, half))
                        pos = self.rng.integers(0, 7, (batch, seq)).astype(np.int64)
                    else:
                        angles = self.rng.uniform(-3, 3, (batch, seq, half))
                        pos = None
                    cos = np.cos(angles).astype(np.float32)
                    sin = np.sin(angles).astype(np.float32)
                    inputs = [("x", x), ("cos", cos), ("sin", sin)]
                    if with_pos:
                        inputs.append(("pos", pos))
                    attrs = {"interleaved": inter}
                    if dim:
                        attrs["rotary_embedding_dim"] = dim
                    if heads:
                        attrs["num_heads"] = heads
                    model = one_op("RotaryEmbedding", inputs, dt, attrs, int_inputs=("pos",))
                    want = rotary_reference(rounded(x, dt), rounded(cos, dt), rounded(sin, dt),
                                            pos, inter, dim, heads)
                    self.check(model, dict(inputs), want, dt)

    def test_bad_input_is_one_line(self):
        x = np.zeros((1, 2, 3, 6), np.float32)
        cos = np.zeros((1, 3, 3), np.float32)
        cases = [
            ("RotaryEmbedding", [("x", x), ("cos", cos), ("sin", cos)],
             {"rotary_embedding_dim": 5}, "must be even"),
            ("RotaryEmbedding", [("x", x), ("cos", np.zeros((4, 3), np.float32)),
                                 ("sin", np.zeros((4, 3), np.float32)),
                                 ("pos", np.array([[0, 1, 9]], np.int64))], {},
             "index 9 out of range for [4, 3]"),
            ("RMSNormalization", [("x", x), ("s", np.ones((4,), np.float32))], {},
             "does not broadcast"),
        ]
        for op, inputs, attrs, message in cases:
            with self.subTest(op=op, message=message):
                model = one_op(op, inputs, "f32", attrs, int_inputs=("pos",))
                code, err = run_model(model, dict(inputs), self.tmp)
                self.assertEqual(code, 1, err)
                lines = err.strip().splitlines()
                self.assertEqual(len(lines), 1, err)
                self.assertIn(message, lines[0])
                self.assertIn("'op'", lines[0])


def main(case, doc):
    """Runs the unittest case `case` with --mpc and --source-dir, as ctest calls it."""
    global MPC
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--source-dir", default=".")
    args = parser.parse_args()
    MPC = os.path.abspath(args.mpc)
    result = unittest.TextTestRunner(verbosity=1, stream=sys.stdout).run(
        unittest.TestLoader().loadTestsFromTestCase(case))
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(TransformerOpsTest, __doc__))
