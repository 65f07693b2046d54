#!/usr/bin/env python3
"""Writes a synthetic stack of pre-LN transformer encoder blocks with about N nodes.

    python3 bench/gen_stack.py --nodes 100000 -o /tmp/stack100k.onnx

Each block is the pattern of models/transformer.onnx (33 nodes): LayerNormalization, Q/K/V
MatMul+Add, Reshape/Transpose into heads, MatMul QK^T, Mul by 1/sqrt(d), Softmax, MatMul with V,
Transpose/Reshape back, output projection, residual Add, LayerNormalization, FFN with an Erf GELU
(Div/Erf/Add/Mul/Mul), residual Add. The hidden size is tiny (8 by default) so a million nodes
stay a few hundred MB. The block count is round(N / 33); the exact node count is printed.

The output is deterministic (seeded weights, no timestamps), opset 17, IR version 8. NodeProtos
are built in place with `graph.node.add()` and attributes are copied from prototypes, so the
script is linear in N: about 10 s per million nodes plus serialization.
"""

import argparse
import math
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

NODES_PER_BLOCK = 33
OPSET = 17
IR_VERSION = 8


class StackWriter:
    """Appends blocks to one GraphProto; weights are raw float32 initializers."""

    def __init__(self, graph, args):
        self.graph = graph
        self.args = args
        self.rng = np.random.default_rng(args.seed)
        self.attrs = self._attribute_prototypes()

    def _attribute_prototypes(self):
        """Each attribute set is built once and copied into every node that needs it."""
        make = helper.make_attribute
        return {
            "ln": [make("axis", -1), make("epsilon", 1e-5)],
            "to_heads": [make("perm", [0, 2, 1, 3])],
            "k_to_heads": [make("perm", [0, 2, 3, 1])],
            "softmax": [make("axis", -1)],
        }

    def node(self, op_type, inputs, name, attrs=None):
        """Appends a node whose single output tensor is named like the node; returns it."""
        n = self.graph.node.add()
        n.op_type = op_type
        n.name = name
        n.input.extend(inputs)
        n.output.append(name)
        if attrs:
            n.attribute.extend(self.attrs[attrs])
        return name

    def initializer(self, name, array):
        t = self.graph.initializer.add()
        t.name = name
        t.dims.extend(array.shape)
        t.data_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        t.raw_data = array.tobytes()
        return name

    def weight(self, name, shape, scale):
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        return self.initializer(name, value)

    def block_weights(self, prefix):
        """Initializers of one block: names keyed by role (shared or per block)."""
        h, f = self.args.hidden, self.args.ffn
        spec = {
            "ln1/scale": ([h], None), "ln1/bias": ([h], 0.1),
            "q/W": ([h, h], 1 / math.sqrt(h)), "q/B": ([h], 0.1),
            "k/W": ([h, h], 1 / math.sqrt(h)), "k/B": ([h], 0.1),
            "v/W": ([h, h], 1 / math.sqrt(h)), "v/B": ([h], 0.1),
            "out/W": ([h, h], 0.1 / math.sqrt(h)), "out/B": ([h], 0.01),
            "ln2/scale": ([h], None), "ln2/bias": ([h], 0.1),
            "up/W": ([h, f], 1 / math.sqrt(h)), "up/B": ([f], 0.1),
            "down/W": ([f, h], 0.1 / math.sqrt(f)), "down/B": ([h], 0.01),
        }
        names = {}
        for role, (shape, scale) in spec.items():
            name = f"{prefix}{role}"
            if scale is None:  # LayerNorm scales: around 1
                self.initializer(name, (1.0 + 0.1 * self.rng.standard_normal(shape))
                                 .astype(np.float32))
            else:
                self.weight(name, shape, scale)
            names[role] = name
        return names

    def constants(self):
        """Scalars and shapes shared by every block."""
        a = self.args
        head_dim = a.hidden // a.heads
        c = {
            "heads": np.array([0, 0, a.heads, head_dim], dtype=np.int64),
            "merged": np.array([0, 0, a.hidden], dtype=np.int64),
            "scale": np.array(1.0 / math.sqrt(head_dim), dtype=np.float32),
            "sqrt2": np.array(math.sqrt(2.0), dtype=np.float32),
            "one": np.array(1.0, dtype=np.float32),
            "half": np.array(0.5, dtype=np.float32),
        }
        return {k: self.initializer(f"const/{k}", v) for k, v in c.items()}

    def block(self, i, x, w, c):
        """Appends encoder block `i` reading `x`; returns its output tensor name."""
        p = f"b{i}/"

        def linear(inp, scope):
            y = self.node("MatMul", [inp, w[f"{scope}/W"]], f"{p}{scope}/MatMul")
            return self.node("Add", [y, w[f"{scope}/B"]], f"{p}{scope}/Add")

        ln1 = self.node("LayerNormalization", [x, w["ln1/scale"], w["ln1/bias"]],
                        f"{p}ln1/LayerNormalization", "ln")
        heads = {}
        for role in "qkv":
            r = self.node("Reshape", [linear(ln1, role), c["heads"]], f"{p}{role}/Reshape")
            perm = "k_to_heads" if role == "k" else "to_heads"
            heads[role] = self.node("Transpose", [r], f"{p}{role}/Transpose", perm)
        s = self.node("MatMul", [heads["q"], heads["k"]], f"{p}scores/MatMul")
        s = self.node("Mul", [s, c["scale"]], f"{p}scores/Mul")
        s = self.node("Softmax", [s], f"{p}Softmax", "softmax")
        ctx = self.node("MatMul", [s, heads["v"]], f"{p}context/MatMul")
        ctx = self.node("Transpose", [ctx], f"{p}context/Transpose", "to_heads")
        ctx = self.node("Reshape", [ctx, c["merged"]], f"{p}context/Reshape")
        h = self.node("Add", [x, linear(ctx, "out")], f"{p}attn_residual/Add")
        ln2 = self.node("LayerNormalization", [h, w["ln2/scale"], w["ln2/bias"]],
                        f"{p}ln2/LayerNormalization", "ln")
        f = linear(ln2, "up")
        g = self.node("Div", [f, c["sqrt2"]], f"{p}gelu/Div")
        g = self.node("Erf", [g], f"{p}gelu/Erf")
        g = self.node("Add", [g, c["one"]], f"{p}gelu/Add")
        g = self.node("Mul", [f, g], f"{p}gelu/Mul")
        g = self.node("Mul", [g, c["half"]], f"{p}gelu/Mul_1")
        return self.node("Add", [h, linear(g, "down")], f"{p}ffn_residual/Add")


def build(args):
    """The ModelProto for `args` (see main for the options)."""
    blocks = max(1, round(args.nodes / NODES_PER_BLOCK))
    model = onnx.ModelProto()
    model.ir_version = IR_VERSION
    model.producer_name = "mpc bench/gen_stack.py"
    model.producer_version = "1"
    model.doc_string = f"Synthetic stack of {blocks} pre-LN transformer encoder blocks."
    model.opset_import.add(domain="", version=OPSET)
    graph = model.graph
    graph.name = f"stack{blocks}"
    graph.doc_string = model.doc_string

    writer = StackWriter(graph, args)
    consts = writer.constants()
    shared = writer.block_weights("shared/") if args.share_weights else None
    x = "x"
    for i in range(blocks):
        weights = shared or writer.block_weights(f"b{i}/")
        x = writer.block(i, x, weights, consts)
    # The last block's output tensor becomes the graph output "y".
    graph.node[-1].output[0] = "y"
    shape = [args.batch, args.seq, args.hidden]
    graph.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, shape))
    graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, shape))
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, required=True, help="approximate node count")
    parser.add_argument("-o", "--output", required=True, help="output .onnx path")
    parser.add_argument("--hidden", type=int, default=8, help="hidden size (default 8)")
    parser.add_argument("--heads", type=int, default=2, help="attention heads (default 2)")
    parser.add_argument("--ffn", type=int, default=None, help="FFN size (default 4*hidden)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--share-weights", action="store_true",
                        help="one weight set for all blocks (smaller file)")
    parser.add_argument("--check", action="store_true", help="run onnx.checker on the result")
    args = parser.parse_args()
    args.ffn = args.ffn or 4 * args.hidden
    if args.nodes < 1 or args.hidden % args.heads:
        parser.error("--nodes must be positive and --hidden divisible by --heads")

    start = time.perf_counter()
    model = build(args)
    built = time.perf_counter()
    data = model.SerializeToString()
    with open(args.output, "wb") as f:
        f.write(data)
    done = time.perf_counter()
    if args.check:
        onnx.checker.check_model(args.output, full_check=True)
    print(f"{args.output}: {len(model.graph.node)} nodes, {len(model.graph.initializer)} "
          f"initializers, {len(data) / 1e6:.1f} MB (build {built - start:.1f}s, "
          f"write {done - built:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
