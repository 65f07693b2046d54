#!/usr/bin/env python3
"""Writes mpc's small example models (mlp, cnn, transformer, lstm) into this directory.

The output is deterministic: weights come from one seeded numpy generator per model, and
nothing depends on time, host or onnx version (producer_version is fixed). Every model uses the
default ONNX domain at opset 17 and IR version 8, the newest that mpc's libonnx 1.12 reads.

    python3 models/make_models.py            # write models/*.onnx and verify them
    python3 models/make_models.py --no-verify
    python3 models/make_models.py -o /tmp/models

Verification runs onnx.checker (full_check) and compares the ONNX reference evaluator with
onnxruntime (when installed) on seeded random inputs. See models/README.md.
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "mpc models/make_models.py"
PRODUCER_VERSION = "1"


class GraphBuilder:
    """Collects nodes and initializers with readable, unique, '/'-scoped names."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []

    def weight(self, name, shape, scale=None):
        """A float32 initializer with N(0, scale^2) entries (default scale: 1/sqrt(fan_in))."""
        if scale is None:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
            scale = 1.0 / math.sqrt(fan_in)
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.const(name, value)

    def const(self, name, value):
        """An initializer holding `value` (a numpy array)."""
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op_type, inputs, name, num_outputs=1, **attrs):
        """Adds a node named `name`; its outputs are `name` (one) or `name:i` (several)."""
        outputs = [name] if num_outputs == 1 else [f"{name}:{i}" for i in range(num_outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=name, **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    def model(self, inputs, outputs, doc):
        """The finished ModelProto.

        `inputs` lists (name, shape) of float inputs; `outputs` lists (tensor, graph output
        name, element type, shape): each tensor is renamed to its graph output name.
        """
        # Rename the last producers' outputs to the requested graph-output names.
        renames = {old: new for old, new, _, _ in outputs}
        for n in self.nodes:
            n.output[:] = [renames.get(o, o) for o in n.output]
            n.input[:] = [renames.get(i, i) for i in n.input]
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(new, t, s) for _, new, t, s in outputs],
            initializer=self.initializers, doc_string=doc)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name=PRODUCER, producer_version=PRODUCER_VERSION,
                                  doc_string=doc)
        model.ir_version = IR_VERSION
        return model


def make_mlp():
    """x[8,64] -> Gemm 64->128 -> Relu -> Gemm 128->64 -> Relu -> Gemm 64->10 -> Softmax."""
    b = GraphBuilder("mlp", seed=1)
    h = "x"
    for i, (k, n) in enumerate([(64, 128), (128, 64), (64, 10)]):
        h = b.node("Gemm", [h, b.weight(f"fc{i}/W", [k, n], 1 / math.sqrt(k)),
                            b.weight(f"fc{i}/B", [n], 0.1)], f"fc{i}/Gemm")
        if i < 2:
            h = b.node("Relu", [h], f"fc{i}/Relu")
    h = b.node("Softmax", [h], "softmax/Softmax", axis=-1)
    return b.model([("x", [8, 64])], [(h, "probs", TensorProto.FLOAT, [8, 10])],
                   "Three-layer perceptron with a softmax head (mpc example model).")


def make_cnn():
    """image[2,3,32,32] -> (Conv, BN, Relu) -> MaxPool -> (Conv, BN, Relu) -> GAP -> Gemm."""
    b = GraphBuilder("cnn", seed=2)
    h = "image"
    for i, (cin, cout) in enumerate([(3, 16), (16, 32)]):
        h = b.node("Conv", [h, b.weight(f"conv{i}/W", [cout, cin, 3, 3]),
                            b.weight(f"conv{i}/B", [cout], 0.1)],
                   f"conv{i}/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        bn = [b.const(f"bn{i}/scale", (1.0 + 0.1 * b.rng.standard_normal(cout)).astype(np.float32)),
              b.weight(f"bn{i}/bias", [cout], 0.1),
              b.weight(f"bn{i}/mean", [cout], 0.1),
              b.const(f"bn{i}/var", (0.5 + b.rng.random(cout)).astype(np.float32))]
        h = b.node("BatchNormalization", [h] + bn, f"bn{i}/BatchNormalization", epsilon=1e-5)
        h = b.node("Relu", [h], f"conv{i}/Relu")
        if i == 0:
            h = b.node("MaxPool", [h], "pool0/MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    h = b.node("GlobalAveragePool", [h], "gap/GlobalAveragePool")
    h = b.node("Flatten", [h], "gap/Flatten", axis=1)
    h = b.node("Gemm", [h, b.weight("fc/W", [32, 10]), b.weight("fc/B", [10], 0.1)], "fc/Gemm")
    return b.model([("image", [2, 3, 32, 32])], [(h, "logits", TensorProto.FLOAT, [2, 10])],
                   "Two-stage convolutional classifier with batch normalization (mpc example).")


def make_transformer(batch=2, seq=16, hidden=64, heads=4, ffn=256):
    """One pre-LN encoder block: x + Attn(LN(x)), then h + FFN(LN(h)) with an Erf GELU."""
    b = GraphBuilder("transformer", seed=3)
    head_dim = hidden // heads
    split_shape = b.const("shape/heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_shape = b.const("shape/merged", np.array([0, 0, hidden], dtype=np.int64))

    def layer_norm(x, scope):
        gamma = (1.0 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32)
        scale = b.const(f"{scope}/scale", gamma)
        return b.node("LayerNormalization", [x, scale, b.weight(f"{scope}/bias", [hidden], 0.1)],
                      f"{scope}/LayerNormalization", axis=-1, epsilon=1e-5)

    def linear(x, scope, k, n):
        y = b.node("MatMul", [x, b.weight(f"{scope}/W", [k, n])], f"{scope}/MatMul")
        return b.node("Add", [y, b.weight(f"{scope}/B", [n], 0.1)], f"{scope}/Add")

    ln1 = layer_norm("x", "ln1")
    q, k, v = (b.node("Reshape", [linear(ln1, f"attn/{p}", hidden, hidden), split_shape],
                      f"attn/{p}/Reshape") for p in "qkv")
    q = b.node("Transpose", [q], "attn/q/Transpose", perm=[0, 2, 1, 3])     # [B,H,S,D]
    k = b.node("Transpose", [k], "attn/k/Transpose", perm=[0, 2, 3, 1])     # [B,H,D,S]
    v = b.node("Transpose", [v], "attn/v/Transpose", perm=[0, 2, 1, 3])     # [B,H,S,D]
    scores = b.node("MatMul", [q, k], "attn/scores/MatMul")
    scale = b.const("attn/scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    scores = b.node("Mul", [scores, scale], "attn/scores/Mul")
    probs = b.node("Softmax", [scores], "attn/Softmax", axis=-1)
    ctx = b.node("MatMul", [probs, v], "attn/context/MatMul")
    ctx = b.node("Transpose", [ctx], "attn/context/Transpose", perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, merge_shape], "attn/context/Reshape")
    h = b.node("Add", ["x", linear(ctx, "attn/out", hidden, hidden)], "attn/residual/Add")

    ln2 = layer_norm(h, "ln2")
    f = linear(ln2, "ffn/up", hidden, ffn)
    # GELU(f) = f * 0.5 * (1 + erf(f / sqrt(2)))
    g = b.node("Div", [f, b.const("gelu/sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))],
               "gelu/Div")
    g = b.node("Erf", [g], "gelu/Erf")
    g = b.node("Add", [g, b.const("gelu/one", np.array(1.0, dtype=np.float32))], "gelu/Add")
    g = b.node("Mul", [f, g], "gelu/Mul")
    g = b.node("Mul", [g, b.const("gelu/half", np.array(0.5, dtype=np.float32))], "gelu/Mul_1")
    f = linear(g, "ffn/down", ffn, hidden)
    y = b.node("Add", [h, f], "ffn/residual/Add")
    return b.model([("x", [batch, seq, hidden])],
                   [(y, "y", TensorProto.FLOAT, [batch, seq, hidden])],
                   "One pre-LN transformer encoder block, 4 heads, Erf GELU (mpc example).")


def make_lstm(seq=10, batch=4, features=32, hidden=48, classes=8):
    """x[10,4,32] -> LSTM(48) -> Squeeze the direction axis -> MatMul 48->8 + Add per step."""
    b = GraphBuilder("lstm", seed=4)
    scale = 1.0 / math.sqrt(hidden)
    w = b.weight("lstm/W", [1, 4 * hidden, features], scale)
    r = b.weight("lstm/R", [1, 4 * hidden, hidden], scale)
    bias = b.weight("lstm/B", [1, 8 * hidden], 0.1)
    # Only Y is used; the optional Y_h and Y_c outputs are omitted.
    y = b.node("LSTM", ["x", w, r, bias], "lstm/LSTM", hidden_size=hidden, direction="forward")
    # Y is [seq, num_directions=1, batch, hidden]; drop the direction axis.
    y = b.node("Squeeze", [y, b.const("lstm/squeeze_axes", np.array([1], dtype=np.int64))],
               "lstm/Squeeze")
    h = b.node("MatMul", [y, b.weight("head/W", [hidden, classes])], "head/MatMul")
    h = b.node("Add", [h, b.weight("head/B", [classes], 0.1)], "head/Add")
    return b.model([("x", [seq, batch, features])],
                   [(h, "out", TensorProto.FLOAT, [seq, batch, classes])],
                   "Single-layer LSTM over all time steps with a linear head (mpc example).")


def make_digits_mlp():
    """x[N,64] -> Gemm 64->64 -> Relu -> Gemm 64->10 -> Softmax: the digits classifier."""
    b = GraphBuilder("digits_mlp", seed=5)
    h = b.node("Gemm", ["x", b.weight("fc0/W", [64, 64]), b.const("fc0/B", np.zeros(64, np.float32))],
               "fc0/Gemm")
    h = b.node("Relu", [h], "fc0/Relu")
    h = b.node("Gemm", [h, b.weight("fc1/W", [64, 10]), b.const("fc1/B", np.zeros(10, np.float32))],
               "fc1/Gemm")
    h = b.node("Softmax", [h], "softmax/Softmax", axis=-1)
    return b.model([("x", ["N", 64])], [(h, "probs", TensorProto.FLOAT, ["N", 10])],
                   "Digits classifier: two-layer perceptron with a softmax head (mpc training demo).")


def make_digits_cnn():
    """x[N,64] -> Reshape [N,1,8,8] -> (Conv, BN, Relu) -> MaxPool -> (Conv, BN, Relu) -> GAP -> Gemm."""
    b = GraphBuilder("digits_cnn", seed=6)
    h = b.node("Reshape", ["x", b.const("image/shape", np.array([-1, 1, 8, 8], np.int64))],
               "image/Reshape")
    for i, (cin, cout) in enumerate([(1, 16), (16, 32)]):
        h = b.node("Conv", [h, b.weight(f"conv{i}/W", [cout, cin, 3, 3]),
                            b.const(f"conv{i}/B", np.zeros(cout, np.float32))],
                   f"conv{i}/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        bn = [b.const(f"bn{i}/scale", np.ones(cout, np.float32)),
              b.const(f"bn{i}/bias", np.zeros(cout, np.float32)),
              b.const(f"bn{i}/mean", np.zeros(cout, np.float32)),
              b.const(f"bn{i}/var", np.ones(cout, np.float32))]
        h = b.node("BatchNormalization", [h] + bn, f"bn{i}/BatchNormalization", epsilon=1e-5,
                   momentum=0.9)
        h = b.node("Relu", [h], f"conv{i}/Relu")
        if i == 0:
            h = b.node("MaxPool", [h], "pool0/MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    h = b.node("GlobalAveragePool", [h], "gap/GlobalAveragePool")
    h = b.node("Flatten", [h], "gap/Flatten", axis=1)
    h = b.node("Gemm", [h, b.weight("fc/W", [32, 10]), b.const("fc/B", np.zeros(10, np.float32))],
               "fc/Gemm")
    return b.model([("x", ["N", 64])], [(h, "logits", TensorProto.FLOAT, ["N", 10])],
                   "Digits classifier: two-stage CNN with batch normalization (mpc training demo).")


def make_digits_tanh_mlp():
    """x[N,64] -> (Gemm 64->64, Tanh) x2 -> Gemm 64->10: the loss-scaling demo's classifier."""
    b = GraphBuilder("digits_tanh_mlp", seed=7)
    h = "x"
    for i, (k, n) in enumerate([(64, 64), (64, 64), (64, 10)]):
        h = b.node("Gemm", [h, b.weight(f"fc{i}/W", [k, n]),
                            b.const(f"fc{i}/B", np.zeros(n, np.float32))], f"fc{i}/Gemm")
        if i < 2:
            h = b.node("Tanh", [h], f"fc{i}/Tanh")
    return b.model([("x", ["N", 64])], [(h, "logits", TensorProto.FLOAT, ["N", 10])],
                   "Digits classifier with tanh layers (mpc loss-scaling demo).")


MODELS = {"mlp": make_mlp, "cnn": make_cnn, "transformer": make_transformer, "lstm": make_lstm,
          "digits_mlp": make_digits_mlp, "digits_cnn": make_digits_cnn,
          "digits_tanh_mlp": make_digits_tanh_mlp}


def random_feeds(model, seed=0):
    """Seeded standard-normal float32 data for every graph input."""
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value if d.HasField("dim_value") else 4
                                         for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in model.graph.input}


def verify(model, path):
    """Checker, reference evaluator and onnxruntime agreement; raises on any problem."""
    onnx.checker.check_model(model, full_check=True)
    assert all(n.name for n in model.graph.node), "every node must be named"
    assert os.path.getsize(path) < 1 << 20, f"{path} is over 1 MB"
    from onnx.reference import ReferenceEvaluator
    feeds = random_feeds(model)
    ref = ReferenceEvaluator(model).run(None, feeds)
    for out in ref:
        assert np.all(np.isfinite(out)), "non-finite reference output"
    try:
        import onnxruntime
    except ImportError:
        return "reference ok (onnxruntime not installed)"
    sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    worst = 0.0
    for r, g in zip(ref, got):
        err = np.linalg.norm(r.astype(np.float64) - g) / max(np.linalg.norm(r), 1e-30)
        worst = max(worst, float(err))
    assert worst < 1e-5, f"reference and onnxruntime disagree: relative L2 {worst:.3g}"
    return f"reference == onnxruntime (relative L2 {worst:.1e})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output-dir", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--no-verify", action="store_true", help="skip checker and evaluation")
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    for name, make in MODELS.items():
        model = make()
        path = os.path.join(args.output_dir, f"{name}.onnx")
        onnx.save(model, path)
        note = "" if args.no_verify else verify(model, path)
        print(f"{path}: {len(model.graph.node)} nodes, {os.path.getsize(path)} bytes {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
