"""A widening Cast folded into BiasGrad (docs/amp-algorithm.md, "Cast folding"): after the AMP
rewrite of a training graph, a BiasGrad that would read `Cast(dY16, to=float32)` reads the
16-bit dY itself with `to` = 1, so the float32 copy of a gradient as large as the activations
is neither written nor read. The way a user runs it:

    mpc train-graph models/digits_mlp.onnx --loss cross-entropy --optimizer adam ... -o t.onnx
    mpc rewrite t.onnx [--target bf16] -o t.amp.onnx
    mpc run t.amp.onnx --train --data models/data/digits.npz --log t.csv --checkpoint ck

A 16-bit BiasGrad whose result only a Cast to float32 reads (bf16 paints the reduction bf16
whole) gets `to` = 1 too: its sum is rounded once into float32 instead of into 16 bits first,
which is the bits of BiasGrad over dY widened first.

For the digits MLPs (ReLU: per-op and fused Adam, fp16 with dynamic loss scaling grown into
skipped steps, and bf16; tanh: fp16 and bf16):
(a) the decisions exactly: no BiasGrad reads a Cast from a 16-bit value to float32; each
    BiasGrad whose gradient is 16-bit has `to` = 1 and a float32 result; every other BiasGrad
    has no `to`; and the fp32 training graph has none at all;
(b) the same bits as the unfolded model: the rewritten model with each folded BiasGrad
    reading dY through a Cast to float32 and summing in float32 without `to` (built here with
    onnx) trains to the same log, stdout and bytes of every state tensor of the final
    checkpoint.

--device cuda (on a GPU machine) runs the same on the GPU.
Prints "N passed, N failed[, N skipped]".
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import mpc_testlib as lib  # noqa: E402

lib.require_onnx_reference()
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402

ARGS = None
DEVICE = "cpu"
DOMAIN = "ai.mpc.training"
SIXTEEN = (TensorProto.FLOAT16, TensorProto.BFLOAT16)


def run_mpc(*args, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([ARGS.mpc, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def source(*parts):
    return os.path.join(ARGS.source_dir, *parts)


def elem_types(graph):
    """Element type of every value of `graph` whose type the file states."""
    out = {}
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        if v.type.HasField("tensor_type"):
            out[v.name] = v.type.tensor_type.elem_type
    for t in graph.initializer:
        out[t.name] = t.data_type
    for n in graph.node:
        if n.op_type == "Cast" and n.domain in ("", "ai.onnx"):
            out[n.output[0]] = next(a.i for a in n.attribute if a.name == "to")
    return out


def to_of(node):
    return next((a.i for a in node.attribute if a.name == "to"), None)


class BiasGradFold(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mpc-biasgrad-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def ok(self, *args):
        r = run_mpc(*args)
        self.assertEqual(r.returncode, 0, f"mpc {' '.join(map(str, args))}:\n{r.stderr}")
        return r

    def build(self, name, model, fused, target):
        train = os.path.join(self.dir, name + ".train.onnx")
        self.ok("train-graph", source("models", model), "--loss", "cross-entropy",
                "--optimizer", "adam", "--lr", "0.01",
                *(["--fused-optimizer"] if fused else []), "-o", train)
        out = os.path.join(self.dir, name + ".amp.onnx")
        scaling = ["--loss-scale", "dynamic", "--loss-scale-interval", "5"] \
            if target == "fp16" else []
        self.ok("rewrite", train, "--target", target, *scaling, "-o", out)
        return train, out

    def train(self, model, tag):
        ck = os.path.join(self.dir, tag)
        log = os.path.join(self.dir, tag + ".csv")
        r = self.ok("run", model, "--train", "--device", DEVICE, "--data",
                    source("models", "data", "digits.npz"), "--batch", "32", "--steps", "60",
                    "--eval-every", "20", "--seed", "5", "--log", log, "--checkpoint", ck)
        # The checkpoint holds the model it trains (which differs by the Casts): its state
        # tensors are compared byte for byte.
        saved = onnx.load(os.path.join(ck, "checkpoint.onnx"))
        state = sorted((t.name, t.SerializeToString()) for t in saved.graph.initializer)
        with open(log) as f:
            return r.stdout, f.read(), state

    def decisions(self, path):
        """(a): the folded BiasGrad nodes of the algorithm graph, checked."""
        m = onnx.load(path)
        alg = m.training_info[0].algorithm
        types = elem_types(alg)
        producer = {o: n for n in alg.node for o in n.output}
        folded = []
        for n in alg.node:
            if n.op_type != "BiasGrad" or n.domain != DOMAIN:
                continue
            p = producer.get(n.input[0])
            if p is not None and p.op_type == "Cast":
                self.assertNotIn(types.get(p.input[0]), SIXTEEN,
                                 f"BiasGrad '{n.name}' still reads the widening Cast "
                                 f"'{p.name}'")
            if types.get(n.input[0]) in SIXTEEN or to_of(n) is not None:
                self.assertEqual(to_of(n), TensorProto.FLOAT, n.name)
                folded.append(n)
        return m, folded

    def unfold(self, m, folded, path):
        """The model with each folded BiasGrad reading its own Cast to float32 again."""
        alg = m.training_info[0].algorithm
        nodes = []
        names = {n.name for n in folded}
        for n in alg.node:
            if n.op_type == "BiasGrad" and n.name in names:
                wide = n.input[0] + "/unfolded_f32"
                nodes.append(helper.make_node("Cast", [n.input[0]], [wide],
                                              name=n.name + "/unfolded", to=TensorProto.FLOAT))
                n.input[0] = wide
                kept = [a for a in n.attribute if a.name != "to"]
                del n.attribute[:]
                n.attribute.extend(kept)
            nodes.append(n)
        del alg.node[:]
        alg.node.extend(nodes)
        onnx.save(m, path)
        return path

    def check(self, name, model, fused, target, want_folded):
        train, amp = self.build(name, model, fused, target)
        # The fp32 training graph has no `to` anywhere.
        fp32 = onnx.load(train).training_info[0].algorithm
        self.assertEqual([n.name for n in fp32.node
                          if n.op_type == "BiasGrad" and to_of(n) is not None], [])
        m, folded = self.decisions(amp)
        self.assertEqual(len(folded), want_folded, [n.name for n in folded])
        unfolded = self.unfold(m, folded, os.path.join(self.dir, name + ".unfolded.onnx"))
        a = self.train(amp, name + "-folded")
        b = self.train(unfolded, name + "-unfolded")
        self.assertEqual(tl.without_placement(self, a[0]), tl.without_placement(self, b[0]),
                         "stdout")
        self.assertEqual(a[1], b[1], "log")
        # Names of the state tensors whose bytes differ (a diff of the bytes is useless).
        self.assertEqual([n for (n, x), (_, y) in zip(a[2], b[2]) if x != y], [])
        self.assertEqual([n for n, _ in a[2]], [n for n, _ in b[2]])
        if target == "fp16":
            header, *rows = [r.split(",") for r in a[1].splitlines()]
            self.assertIn("1", [r[header.index("skipped")] for r in rows], "no step skipped")

    def test_relu_mlp_fp16_per_op_and_fused(self):
        # digits_mlp: Gemm, Relu, Gemm; the hidden layer's bias gradient is ReluGrad's fp16
        # result (the output layer's comes from the fp32 loss gradient).
        for fused in (False, True):
            with self.subTest(fused=fused):
                self.check(f"relu16-{int(fused)}", "digits_mlp.onnx", fused, "fp16", 1)

    def test_relu_mlp_bf16(self):
        # bf16 paints the hidden layer's BiasGrad bf16 whole; its result's only reader, a
        # Cast to float32, becomes its `to`: the sum is no longer rounded to bf16 first.
        self.check("relu-bf16", "digits_mlp.onnx", True, "bf16", 1)

    def test_tanh_mlp_fp16_and_bf16(self):
        # digits_tanh_mlp: both hidden layers' bias gradients are TanhGrad's 16-bit results.
        for target in ("fp16", "bf16"):
            with self.subTest(target=target):
                self.check("tanh-" + target, "digits_tanh_mlp.onnx", True, target, 2)


def main():
    global DEVICE
    DEVICE = tl.pop_device_arg()

    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((BiasGradFold,), set_args)


if __name__ == "__main__":
    sys.exit(main())
