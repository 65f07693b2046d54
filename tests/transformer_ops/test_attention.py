#!/usr/bin/env python3
"""Attention (opset 23) through `mpc run`, against onnx.reference.

Each case builds a one-op model whose float32 inputs are cast to the tested type (f32, f16)
and whose outputs are cast back to float32 (exact), runs it with `mpc run`, and compares every
output with onnx's reference Attention evaluated in float64 on the inputs rounded to the
tested type. The kernel computes in fp32 and rounds once, so the tolerance is the output
type's rounding plus fp32 noise. Cases: GQA with is_causal and a past cache (present outputs
too), a bool mask shorter than the key sequence, 3-D inputs with a different value head size
(softcap, explicit scale). A bad head count is one error line naming the node.

usage: test_attention.py --mpc build/tools/mpc --source-dir .
"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_transformer_ops as harness  # noqa: E402  (exits 77 without numpy/onnx)

import numpy as np  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

# type -> (ONNX element type, numpy type for rounding, relative tolerance)
TYPES = {"f32": (TensorProto.FLOAT, np.float32, 1e-5),
         "f16": (TensorProto.FLOAT16, np.float16, 2e-3)}
OUTPUTS = ["y", "present_key", "present_value"]


def attention_model(inputs, elem, attrs, n_out, cast=True):
    """inputs: [(name, array)], "" for an omitted one. With cast, float inputs are float32
    cast to `elem` and the outputs cast back to float32; else everything is `elem`."""
    nodes, graph_inputs, names = [], [], []
    for name, arr in inputs:
        if not name:
            names.append("")
            continue
        is_bool = arr.dtype == np.bool_
        io_elem = TensorProto.BOOL if is_bool else (TensorProto.FLOAT if cast else elem)
        graph_inputs.append(helper.make_tensor_value_info(name, io_elem, list(arr.shape)))
        if cast and not is_bool:
            nodes.append(helper.make_node("Cast", [name], [name + "_t"], to=elem))
            names.append(name + "_t")
        else:
            names.append(name)
    outs = OUTPUTS[:n_out]
    op_outs = [o + "_t" for o in outs] if cast else outs
    nodes.append(helper.make_node("Attention", names, op_outs, name="op", **attrs))
    if cast:
        nodes += [helper.make_node("Cast", [o + "_t"], [o], to=TensorProto.FLOAT) for o in outs]
    out_elem = TensorProto.FLOAT if cast else elem
    graph = helper.make_graph(nodes, "g", graph_inputs,
                              [helper.make_tensor_value_info(o, out_elem, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    return model


def reference(inputs, attrs, n_out, dt):
    """onnx.reference's Attention in float64 on the inputs rounded to `dt`."""
    rounded = [(n, a if a is None or a.dtype == np.bool_
                else a.astype(TYPES[dt][1]).astype(np.float64)) for n, a in inputs]
    model = attention_model(rounded, TensorProto.DOUBLE, attrs, n_out, cast=False)
    feeds = {n: a for n, a in rounded if n}
    return ReferenceEvaluator(model).run(None, feeds)


class AttentionTest(unittest.TestCase):
    rng = np.random.default_rng(20261123)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mpc-attn-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def normal(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def check(self, inputs, attrs, n_out=1):
        for dt in TYPES:
            with self.subTest(dt=dt):
                model = attention_model(inputs, TYPES[dt][0], attrs, n_out)
                code, got = harness.run_outputs(model, {n: a for n, a in inputs if n},
                                                OUTPUTS[:n_out], self.tmp)
                self.assertEqual(code, 0, got)
                want = reference(inputs, attrs, n_out, dt)
                tol = TYPES[dt][2]
                for name, g, w in zip(OUTPUTS, got, want):
                    self.assertEqual(g.shape, w.shape, name)
                    err = np.abs(g - w)
                    bound = tol * (np.abs(w) + np.max(np.abs(w)) * 1e-2) + 1e-6
                    self.assertTrue(np.all(err <= bound),
                                    f"{name}: max error {err.max():.3g}")

    def test_gqa_causal_past(self):
        # 4 query heads over 2 kv heads; 3 new tokens after 5 cached ones.
        inputs = [("q", self.normal(2, 4, 3, 8)), ("k", self.normal(2, 2, 3, 8)),
                  ("v", self.normal(2, 2, 3, 8)), ("", None),
                  ("past_k", self.normal(2, 2, 5, 8)), ("past_v", self.normal(2, 2, 5, 8))]
        self.check(inputs, {"is_causal": 1}, n_out=3)

    def test_bool_mask(self):
        # [batch, 1, q, 5] over 6 keys: the last key is masked by padding; key 0 is
        # always kept so that no row is fully masked.
        mask = self.rng.random((2, 1, 4, 5)) < 0.6
        mask[..., 0] = True
        inputs = [("q", self.normal(2, 3, 4, 8)), ("k", self.normal(2, 3, 6, 8)),
                  ("v", self.normal(2, 3, 6, 8)), ("mask", mask)]
        self.check(inputs, {})

    def test_3d_different_v_head_size(self):
        inputs = [("q", self.normal(2, 4, 24)), ("k", self.normal(2, 5, 24)),
                  ("v", self.normal(2, 5, 18)), ("mask", self.normal(4, 5))]
        self.check(inputs, {"q_num_heads": 3, "kv_num_heads": 3, "softcap": 2.0,
                            "scale": 0.25})

    def test_bad_heads_is_one_line(self):
        inputs = [("q", self.normal(1, 2, 12)), ("k", self.normal(1, 2, 8)),
                  ("v", self.normal(1, 2, 8))]
        model = attention_model(inputs, TensorProto.FLOAT, {"q_num_heads": 3,
                                                            "kv_num_heads": 2}, 1)
        code, err = harness.run_outputs(model, dict(inputs), ["y"], self.tmp)
        self.assertEqual(code, 1, err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertIn("not a multiple of kv heads", lines[0])
        self.assertIn("'op'", lines[0])


if __name__ == "__main__":
    sys.exit(harness.main(AttentionTest, __doc__))
