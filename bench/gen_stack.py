#!/usr/bin/env python3
"""Writes a synthetic model of about N nodes in one of several graph shapes.

    python3 bench/gen_stack.py --nodes 100000 -o /tmp/stack100k.onnx
    python3 bench/gen_stack.py --shape wide --nodes 100000 -o /tmp/wide100k.onnx

Shapes (--shape; the node count includes the nodes of nested graphs):

  stack      pre-LN transformer encoder blocks, each with its own weights (the default)
  shared     the same stack, every block reading one shared set of weights (a weight tied
             across layers: each shared initializer feeds N / 33 nodes)
  const      a chain of MatMul / Add / Pow / Mul units that all read one constant K
             (one initializer feeding every node, wanted in fp16 and in fp32)
  wide       groups of --width parallel branches (MatMul or Exp) reading one value and
             joined by one node: Sum, or Concat + ReduceMean (fan-out and fan-in of --width)
  widest     one group of N - 1 branches: a fan-out and a Sum of N - 1 inputs
  chain      one deep chain of MatMul / Exp / Relu (a cast between most neighbours)
  subgraphs  alternating If (a 2-node then and else branch) and Loop (a 3-node body)
             nodes, every body capturing the previous result and one shared weight
  outputs    N / 2 branches MatMul -> Exp of one input, every branch a graph output

The transformer stack:

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
    if args.shape not in ("stack", "shared"):
        return build_shape(args)
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
    shared = writer.block_weights("shared/") if args.shape == "shared" else None
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


SHAPES = ["stack", "shared", "const", "wide", "widest", "chain", "subgraphs", "outputs"]


def count_nodes(graph):
    """Nodes of `graph` and of every graph nested in its nodes' attributes."""
    total = 0
    stack = [graph]
    while stack:
        g = stack.pop()
        total += len(g.node)
        for n in g.node:
            for a in n.attribute:
                if a.HasField("g"):
                    stack.append(a.g)
                stack.extend(a.graphs)
    return total


class ShapeWriter(StackWriter):
    """The other shapes: units appended until about N nodes (nested ones counted)."""

    def __init__(self, graph, args):
        super().__init__(graph, args)
        self.count = 0
        self.dims = [args.batch, args.seq, args.hidden]

    def node(self, op_type, inputs, name, attrs=None, graph=None):
        """Like StackWriter.node; `graph` is the (nested) graph to append to."""
        n = (graph or self.graph).node.add()
        n.op_type = op_type
        n.name = name
        n.input.extend(inputs)
        n.output.append(name)
        for a in attrs or []:
            n.attribute.add().CopyFrom(a)
        self.count += 1
        return n

    def value_info(self, name, elem=TensorProto.FLOAT, dims=None):
        return helper.make_tensor_value_info(name, elem, self.dims if dims is None else dims)

    def square(self, name):
        h = self.args.hidden
        return self.weight(name, [h, h], 1 / math.sqrt(h))

    def const_unit(self, i, x, k):
        """MatMul (allow), Add (infer), Pow (deny), Mul (infer), each reading K."""
        p = f"u{i}/"
        y = self.node("MatMul", [x, k], f"{p}MatMul").output[0]
        y = self.node("Add", [y, k], f"{p}Add").output[0]
        y = self.node("Pow", [y, k], f"{p}Pow").output[0]
        return self.node("Mul", [y, k], f"{p}Mul").output[0]

    def wide_group(self, i, x, w, width):
        """`width` branches of x (MatMul and Exp alternating), joined by one node."""
        p = f"g{i}/"
        outs = []
        for j in range(width):
            if j % 2 == 0:
                outs.append(self.node("MatMul", [x, w], f"{p}{j}/MatMul").output[0])
            else:
                outs.append(self.node("Exp", [x], f"{p}{j}/Exp").output[0])
        if i % 2 == 0:
            return self.node("Sum", outs, f"{p}Sum").output[0]
        y = self.node("Concat", outs, f"{p}Concat",
                      [helper.make_attribute("axis", 0)]).output[0]
        return self.node("ReduceMean", [y], f"{p}ReduceMean",
                         [helper.make_attribute("axes", [0]),
                          helper.make_attribute("keepdims", 1)]).output[0]

    def chain_unit(self, i, x, pool):
        p = f"c{i}/"
        y = self.node("MatMul", [x, pool[i % len(pool)]], f"{p}MatMul").output[0]
        y = self.node("Exp", [y], f"{p}Exp").output[0]
        return self.node("Relu", [y], f"{p}Relu").output[0]

    def if_node(self, i, x, cond, w):
        """If(cond): then MatMul(x, w) -> Relu; else Exp(x) -> Identity."""
        p = f"if{i}/"
        branches = []
        for label, ops in (("then", [("MatMul", [x, w]), ("Relu", None)]),
                           ("else", [("Exp", [x]), ("Identity", None)])):
            body = onnx.GraphProto()
            body.name = f"{p}{label}"
            prev = None
            for op, ins in ops:
                prev = self.node(op, ins or [prev], f"{p}{label}/{op}", graph=body).output[0]
            body.output.append(self.value_info(prev))
            branches.append(body)
        return self.node("If", [cond], f"{p}If",
                         [helper.make_attribute("then_branch", branches[0]),
                          helper.make_attribute("else_branch", branches[1])]).output[0]

    def loop_node(self, i, x, trips, w):
        """Loop(trips, "", x): v <- Relu(MatMul(v, w)), cond passed through."""
        p = f"loop{i}/"
        body = onnx.GraphProto()
        body.name = f"{p}body"
        body.input.extend([self.value_info(f"{p}iter", TensorProto.INT64, []),
                           self.value_info(f"{p}cond_in", TensorProto.BOOL, []),
                           self.value_info(f"{p}v")])
        c = self.node("Identity", [f"{p}cond_in"], f"{p}cond_out", graph=body).output[0]
        y = self.node("MatMul", [f"{p}v", w], f"{p}MatMul", graph=body).output[0]
        y = self.node("Relu", [y], f"{p}Relu", graph=body).output[0]
        body.output.extend([self.value_info(c, TensorProto.BOOL, []), self.value_info(y)])
        return self.node("Loop", [trips, "", x], f"{p}Loop",
                         [helper.make_attribute("body", body)]).output[0]


def build_shape(args):
    """The ModelProto of a shape other than the transformer stack."""
    model = onnx.ModelProto()
    model.ir_version = IR_VERSION
    model.producer_name = "mpc bench/gen_stack.py"
    model.producer_version = "1"
    model.opset_import.add(domain="", version=OPSET)
    graph = model.graph
    graph.name = f"{args.shape}{args.nodes}"
    w = ShapeWriter(graph, args)
    n = args.nodes
    x = "x"
    graph.input.append(w.value_info("x"))
    if args.shape == "const":
        k = w.square("K")
        for i in range(max(1, round(n / 4))):
            x = w.const_unit(i, x, k)
    elif args.shape in ("wide", "widest"):
        weight = w.square("W")
        width = max(2, n - 1) if args.shape == "widest" else args.width
        groups = max(1, round(n / (width + 1.5)))
        for i in range(groups):
            x = w.wide_group(i, x, weight, width)
    elif args.shape == "chain":
        pool = [w.square(f"W{j}") for j in range(16)]
        for i in range(max(1, round(n / 3))):
            x = w.chain_unit(i, x, pool)
    elif args.shape == "subgraphs":
        weight = w.square("W")
        trips = w.initializer("trips", np.array(2, dtype=np.int64))
        graph.input.append(w.value_info("cond", TensorProto.BOOL, []))
        i = 0
        while w.count < n:
            x = w.if_node(i, x, "cond", weight) if i % 2 == 0 else w.loop_node(i, x, trips, weight)
            i += 1
    elif args.shape == "outputs":
        weight = w.square("W")
        for i in range(max(1, round(n / 2))):
            y = w.node("MatMul", [x, weight], f"o{i}/MatMul").output[0]
            graph.output.append(w.value_info(w.node("Exp", [y], f"o{i}/Exp").output[0]))
    if args.shape != "outputs":
        graph.node[-1].output[0] = "y"
        graph.output.append(w.value_info("y"))
    model.doc_string = f"Synthetic {args.shape} graph of {w.count} nodes."
    graph.doc_string = model.doc_string
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
    parser.add_argument("--shape", choices=SHAPES, default="stack",
                        help="graph shape (default: stack; see above)")
    parser.add_argument("--width", type=int, default=10000,
                        help="branches per group of --shape wide (default 10000)")
    parser.add_argument("--share-weights", action="store_true",
                        help="the same as --shape shared")
    parser.add_argument("--check", action="store_true", help="run onnx.checker on the result")
    args = parser.parse_args()
    args.ffn = args.ffn or 4 * args.hidden
    if args.share_weights:
        args.shape = "shared"
    if args.nodes < 1 or args.hidden % args.heads or args.width < 2:
        parser.error("--nodes must be positive, --hidden divisible by --heads and --width "
                     "at least 2")

    start = time.perf_counter()
    model = build(args)
    built = time.perf_counter()
    data = model.SerializeToString()
    with open(args.output, "wb") as f:
        f.write(data)
    done = time.perf_counter()
    if args.check:
        onnx.checker.check_model(args.output, full_check=True)
    print(f"{args.output}: {count_nodes(model.graph)} nodes, {len(model.graph.initializer)} "
          f"initializers, {len(data) / 1e6:.1f} MB (build {built - start:.1f}s, "
          f"write {done - built:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
