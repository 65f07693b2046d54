#!/usr/bin/env python3
"""`mpc run` on nodes with an invalid attribute value: one line, before anything runs.

    python3 tests/runtime_exec/test_bad_attributes.py --mpc build/tools/mpc --source-dir .

The registry's parsers (runtime/ops/OpParams.cpp) reject attribute values that no input shape
could make valid; Executor::create reports the first one as
`mpc: error: MODEL: node 'NAME' (Op): attribute 'a' is V; RULE` and `mpc run` exits 1 without
writing any output. Each case is a one-node model built with onnx.helper, run twice: with the
bad value (the exact line on stderr, nothing on stdout, exit 1, the --outputs directory left
empty, the model file unchanged) and with a valid value in its place (exit 0 and the output
written), so the failure comes from the attribute and not from the rest of the model.
Before the parsers checked them, some of these crashed (a stride of 0 divided by zero), some
ran with a silently substituted value (an unknown auto_pad, direction or approximate) and
others were found only by a shape function or at launch.

Exit 1 on failure, 77 when onnx or numpy is missing.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx
    from onnx import AttributeProto, TensorProto, helper
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required: {e}", file=sys.stderr)
    sys.exit(77)

MPC = None
F = TensorProto.FLOAT


def init(name, shape, dtype=np.float32):
    data = np.linspace(-1.0, 1.0, int(np.prod(shape))).astype(dtype).reshape(shape)
    return helper.make_tensor(name, F, shape, data.flatten())


def one_node(op, inputs, outputs, attrs, inits=(), opset=17, name="c1"):
    """A model with one node named `name`: graph inputs (name, elem, shape), outputs (name,
    elem) and initializers appended to the node's inputs (None: an absent optional input)."""
    lists = {k: v for k, v in attrs.items() if isinstance(v, list) and not v}
    node = helper.make_node(op, [i[0] for i in inputs] + [t.name if t else "" for t in inits],
                            [o[0] for o in outputs], name=name,
                            **{k: v for k, v in attrs.items() if k not in lists})
    for k in lists:  # an empty list has no kind the helper could infer
        node.attribute.append(helper.make_attribute(k, [], attr_type=AttributeProto.INTS))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        initializer=[t for t in inits if t])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


X4 = [("x", F, [1, 3, 5, 5])]
W_CONV = [init("w", [4, 3, 3, 3])]
W_DECONV = [init("w", [3, 2, 3, 3])]
Y = [("y", F)]
HID = 2


def rnn_weights(gates):
    return [init("W", [1, gates * HID, 3]), init("R", [1, gates * HID, HID])]


X_SEQ = [("x", F, [2, 1, 3])]
U8 = TensorProto.UINT8

# Resize of a [1, 1, 2, 2] image by 2 on both spatial axes: (roi absent, scales) from opset 11,
# (scales) at opset 10.
X_IMG = [("x", F, [1, 1, 2, 2])]
SCALES = helper.make_tensor("scales", F, [4], [1.0, 1.0, 2.0, 2.0])
RESIZE = [None, SCALES]
# Attention on 4-D Q, K, V [batch, heads, seq, head_size].
QKV = [(n, F, [1, 2, 3, 4]) for n in ("q", "k", "v")]
# RotaryEmbedding of x [batch, heads, seq, head_size 6] with caches [batch, seq, 3].
ROTARY = [("x", F, [1, 2, 3, 6]), ("cos", F, [1, 3, 3]), ("sin", F, [1, 3, 3])]
# ReverseSequence of x [time 3, batch 2, 4] with lengths 1 and 3.
LENS = [helper.make_tensor("lens", TensorProto.INT64, [2], [1, 3])]

# (case, op, inputs, outputs, initializers, opset, attribute, bad value, good value,
#  extra attributes, the message after "node 'c1' (Op): ")
CASES = [
    ("conv_group", "Conv", X4, Y, W_CONV, 17, "group", 0, 1, {},
     "attribute 'group' is 0; it must be at least 1"),
    ("conv_strides", "Conv", X4, Y, W_CONV, 17, "strides", [0, 1], [1, 1], {},
     "attribute 'strides' is [0, 1]; every value must be at least 1"),
    ("conv_dilations", "Conv", X4, Y, W_CONV, 17, "dilations", [1, -2], [1, 2], {},
     "attribute 'dilations' is [1, -2]; every value must be at least 1"),
    ("conv_pads", "Conv", X4, Y, W_CONV, 17, "pads", [-1, 0, 0, 0], [1, 0, 0, 0], {},
     "attribute 'pads' is [-1, 0, 0, 0]; every value must be at least 0"),
    ("convtranspose_auto_pad", "ConvTranspose", X4, Y, W_DECONV, 17, "auto_pad", "same",
     "SAME_UPPER", {"strides": [2, 2]},
     "attribute 'auto_pad' is 'same'; it must be NOTSET, SAME_UPPER, SAME_LOWER or VALID"),
    # Differential suite, seed 1: a size below 1 was taken as no output_shape at all.
    ("convtranspose_output_shape", "ConvTranspose", X4, Y, W_DECONV, 17, "output_shape",
     [-10, 8], [10, 8], {"strides": [2, 2]},
     "attribute 'output_shape' is [-10, 8]; every value must be at least 1"),
    ("maxpool_kernel_shape", "MaxPool", X4, Y, [], 17, "kernel_shape", [0, 2], [2, 2], {},
     "attribute 'kernel_shape' is [0, 2]; every value must be at least 1"),
    # Differential suite over the wheel's models, seed 1: an empty kernel_shape ran as if
    # absent (the kernel's from W); onnxruntime and ONNX's inference refuse it.
    ("conv_kernel_shape_empty", "Conv", X4, Y, W_CONV, 17, "kernel_shape", [], [3, 3], {},
     "attribute 'kernel_shape' is []; it lists one value per spatial axis"),
    ("maxpool_strides_empty", "MaxPool", X4, Y, [], 17, "strides", [], [1, 1],
     {"kernel_shape": [2, 2]},
     "attribute 'strides' is []; it lists one value per spatial axis"),
    ("maxpool_storage_order", "MaxPool", X4, Y, [], 17, "storage_order", 2, 1,
     {"kernel_shape": [2, 2]},
     "attribute 'storage_order' is 2; it must be 0 (row-major) or 1 (column-major)"),
    ("averagepool_auto_pad", "AveragePool", X4, Y, [], 17, "auto_pad", "same", "SAME_LOWER",
     {"kernel_shape": [2, 2]},
     "attribute 'auto_pad' is 'same'; it must be NOTSET, SAME_UPPER, SAME_LOWER or VALID"),
    ("lstm_direction", "LSTM", X_SEQ, Y, rnn_weights(4), 17, "direction", "sideways", "reverse",
     {"hidden_size": HID},
     "attribute 'direction' is 'sideways'; it must be forward, reverse or bidirectional"),
    ("gru_layout", "GRU", X_SEQ, Y, rnn_weights(3), 17, "layout", 2, 0, {"hidden_size": HID},
     "attribute 'layout' is 2; it must be 0 or 1"),
    ("rnn_hidden_size", "RNN", X_SEQ, Y, rnn_weights(1), 17, "hidden_size", 0, HID, {},
     "attribute 'hidden_size' is 0; it must be at least 1"),
    ("gelu_approximate", "Gelu", [("x", F, [2, 3])], Y, [], 20, "approximate", "fast", "tanh",
     {}, "attribute 'approximate' is 'fast'; it must be none or tanh"),
    ("bitshift_direction", "BitShift", [("x", U8, [4]), ("s", U8, [4])], [("y", U8)], [], 17,
     "direction", "UP", "LEFT", {}, "attribute 'direction' is 'UP'; it must be LEFT or RIGHT"),
    ("bitshift_no_direction", "BitShift", [("x", U8, [4]), ("s", U8, [4])], [("y", U8)], [],
     17, "direction", None, "RIGHT", {},
     # Required by the schema: the verifier refuses the model before the run.
     "graph 'g': node 'c1' (BitShift) lacks attribute 'direction', which BitShift-11 requires"),
    ("groupnorm_num_groups", "GroupNormalization", [("x", F, [1, 4, 2, 2])], Y,
     [init("scale", [4]), init("bias", [4])], 21, "num_groups", 0, 2, {},
     "attribute 'num_groups' is 0; it must be at least 1"),
    ("lpnorm_p", "LpNormalization", [("x", F, [2, 3])], Y, [], 17, "p", 3, 1, {},
     "attribute 'p' is 3; it must be 1 or 2"),
    ("lppool_p", "LpPool", X4, Y, [], 18, "p", 0, 3, {"kernel_shape": [2, 2]},
     "attribute 'p' is 0; it must be positive"),
    ("lppool_float_p", "LpPool", X4, Y, [], 1, "p", -1.5, 1.5, {"kernel_shape": [2, 2]},
     "attribute 'p' is -1.5; it must be positive"),
    ("globallppool_p", "GlobalLpPool", X4, Y, [], 2, "p", -2, 1, {},
     "attribute 'p' is -2; it must be positive"),
    ("resize_mode", "Resize", X_IMG, Y, RESIZE, 19, "mode", "bicubic", "cubic", {},
     "attribute 'mode' is 'bicubic'; it must be nearest, linear or cubic"),
    ("resize_mode_opset10", "Resize", X_IMG, Y, [SCALES], 10, "mode", "cubic", "linear", {},
     "attribute 'mode' is 'cubic'; it must be nearest or linear (opset 10)"),
    ("resize_coordinate_transformation_mode", "Resize", X_IMG, Y, RESIZE, 13,
     "coordinate_transformation_mode", "half", "align_corners", {"mode": "linear"},
     "attribute 'coordinate_transformation_mode' is 'half'; it must be half_pixel, "
     "half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn "
     "or tf_crop_and_resize"),
    ("resize_nearest_mode", "Resize", X_IMG, Y, RESIZE, 13, "nearest_mode", "round", "floor", {},
     "attribute 'nearest_mode' is 'round'; it must be round_prefer_floor, round_prefer_ceil, "
     "floor or ceil"),
    ("resize_keep_aspect_ratio_policy", "Resize", X_IMG, Y, RESIZE, 18,
     "keep_aspect_ratio_policy", "fit", "not_larger", {},
     "attribute 'keep_aspect_ratio_policy' is 'fit'; it must be stretch, not_larger or "
     "not_smaller"),
    ("lrn_size", "LRN", [("x", F, [1, 3, 2, 2])], Y, [], 17, "size", 0, 3, {},
     "attribute 'size' is 0; it must be at least 1"),
    ("lrn_no_size", "LRN", [("x", F, [1, 3, 2, 2])], Y, [], 17, "size", None, 1, {},
     "graph 'g': node 'c1' (LRN) lacks attribute 'size', which LRN-13 requires"),
    ("attention_qk_matmul_output_mode", "Attention", QKV, Y, [], 23, "qk_matmul_output_mode",
     4, 3, {}, "attribute 'qk_matmul_output_mode' is 4; it must be 0, 1, 2 or 3"),
    ("rotary_odd_dim", "RotaryEmbedding", ROTARY, Y, [], 23, "rotary_embedding_dim", 5, 6, {},
     "attribute 'rotary_embedding_dim' is 5; it must be even"),
    ("rotary_negative_dim", "RotaryEmbedding", ROTARY, Y, [], 23, "rotary_embedding_dim", -2, 0,
     {}, "attribute 'rotary_embedding_dim' is -2; it must be at least 0"),
    ("reversesequence_same_axes", "ReverseSequence", [("x", F, [3, 2, 4])], Y, LENS, 10,
     "time_axis", 1, 0, {"batch_axis": 1},
     "attribute 'time_axis' is 1; it must differ from batch_axis"),
    ("reversesequence_batch_axis", "ReverseSequence", [("x", F, [2, 3, 4])], Y, LENS, 10,
     "batch_axis", 2, 0, {"time_axis": 1},
     "attribute 'batch_axis' is 2; it must be 0 or 1"),
    ("constantofshape_value", "ConstantOfShape", [], Y,
     [helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])], 17, "value",
     helper.make_tensor("v", F, [2], [1.0, 2.0]), helper.make_tensor("v", F, [1], [1.5]), {},
     "attribute 'value' is a tensor of 2 elements; it must hold exactly one element"),
    ("depthtospace_mode", "DepthToSpace", [("x", F, [1, 4, 2, 2])], Y, [], 13, "mode", "RDC",
     "CRD", {"blocksize": 2}, "attribute 'mode' is 'RDC'; it must be DCR or CRD"),
    ("scatterelements_reduction", "ScatterElements", [("x", F, [2, 3])], Y,
     [helper.make_tensor("idx", TensorProto.INT64, [1, 2], [1, 0]), init("upd", [1, 2])], 18,
     "reduction", "avg", "max", {"axis": 1},
     "attribute 'reduction' is 'avg'; it must be none, add, mul, max or min"),
    ("scatternd_reduction", "ScatterND", [("x", F, [2, 3])], Y,
     [helper.make_tensor("idx", TensorProto.INT64, [1, 1], [1]), init("upd", [1, 3])], 18,
     "reduction", "sum", "mul", {},
     "attribute 'reduction' is 'sum'; it must be none, add, mul, max or min"),
]


class BadAttributeTest(unittest.TestCase):
    def run_case(self, tmp, case, op, inputs, outputs, inits, opset, attr, value, extra):
        attrs = dict(extra)
        if value is not None:
            attrs[attr] = value
        path = os.path.join(tmp, f"{case}.onnx")
        onnx.save(one_node(op, inputs, outputs, attrs, inits, opset), path)
        with open(path, "rb") as f:
            before = f.read()
        out_dir = os.path.join(tmp, f"out_{case}_{value}")
        os.makedirs(out_dir)
        r = subprocess.run([MPC, "run", path, "--random-inputs", "--outputs", out_dir],
                           capture_output=True, text=True, timeout=60)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before, f"{path} was rewritten")
        return path, r, sorted(os.listdir(out_dir))

    def test_each_bad_value_is_one_line_and_nothing_runs(self):
        ops = set()
        with tempfile.TemporaryDirectory() as tmp:
            for case, op, ins, outs, inits, opset, attr, bad, good, extra, msg in CASES:
                with self.subTest(case=case):
                    path, r, written = self.run_case(tmp, case, op, ins, outs, inits, opset,
                                                     attr, bad, extra)
                    self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                    where = "" if msg.startswith("graph ") else f"node 'c1' ({op}): "
                    self.assertEqual(r.stderr, f"mpc: error: {path}: {where}{msg}\n")
                    self.assertEqual(r.stdout, "")
                    self.assertEqual(written, [])
                    path, r, written = self.run_case(tmp, case, op, ins, outs, inits, opset,
                                                     attr, good, extra)
                    self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                    self.assertEqual(written, [f"{outs[0][0]}.npy"])
                    ops.add(op)
        self.assertGreaterEqual(len(ops), 16)

    def test_the_first_bad_node_is_reported(self):
        # Two bad nodes in a chain: the first in graph order is named, the run never starts.
        nodes = [helper.make_node("Gelu", ["x"], ["h"], name="g1", approximate="exact"),
                 helper.make_node("Gelu", ["h"], ["y"], name="g2", approximate="quick")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2])],
                                  [helper.make_tensor_value_info("y", F, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "two.onnx")
            onnx.save(model, path)
            r = subprocess.run([MPC, "run", path, "--random-inputs", "--outputs", tmp],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr, f"mpc: error: {path}: node 'g1' (Gelu): attribute "
                                       f"'approximate' is 'exact'; it must be none or tanh\n")
            self.assertEqual(sorted(os.listdir(tmp)), ["two.onnx"])


def main():
    global MPC
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir")
    args, rest = ap.parse_known_args()
    MPC = os.path.abspath(args.mpc)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
