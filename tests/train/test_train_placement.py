#!/usr/bin/env python3
"""`mpc run --train --device cuda --placement-only`: the training step's placement, no GPU.

    python3 tests/train/test_train_placement.py --mpc build/tools/mpc --source-dir . [-v]

The training step of models/digits_mlp.onnx (`mpc train-graph --loss cross-entropy`), its
fp16 rewrite (dynamic loss scaling), and the same MLP in float64 (whose nodes the CUDA
table has no f64 row for, but for the element-wise ones) are planned for --batch rows of models/data/digits.npz and the
line `cuda: N nodes; cpu fallback: ...` is checked whole. Independently of mpc's own
count, N plus the fallback count must be the step graph's nodes less those the executor
folds while planning (Constant, Shape, Size), and the fallback list of the f64 model must
be its f64 ops counted by type from the ONNX file. Also: no step runs (no file written, no
progress on stderr), and the refusals are one line with exit 2.

Prints "N passed, N failed[, N skipped]"; exit status 1 on any failure, 77 when onnx or
numpy is missing.
"""

import collections
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import mpc_testlib as lib  # noqa: E402

lib.require_onnx_reference()
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402

MPC = None
SOURCE_DIR = None
FOLDED = {"Constant", "Shape", "Size"}
LINE = re.compile(r"^cuda: (\d+) nodes?; cpu fallback: (none|(\d+) nodes? \((.*)\))$")


def mpc(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([MPC, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env)


def step_ops(path):
    """The op types of the training step's nodes the executor launches (not folded)."""
    g = onnx.load(path).training_info[0].algorithm
    return collections.Counter(n.op_type for n in g.node if n.op_type not in FOLDED)


def parse(line):
    """(device nodes, {op: count} of the fallback) from a placement line."""
    m = LINE.match(line)
    if not m:
        raise AssertionError(f"not a placement line: {line!r}")
    host = {}
    if m.group(2) != "none":
        for part in m.group(4).split(", "):
            op, n = part.rsplit(" x", 1)
            host[op] = int(n)
        assert sum(host.values()) == int(m.group(3)), line
    return int(m.group(1)), host


class TrainPlacement(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        cls.data = os.path.join(SOURCE_DIR, "models", "data", "digits.npz")
        mlp = os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx")
        cls.fp32 = os.path.join(t, "mlp.train.onnx")
        cls.fp16 = os.path.join(t, "mlp.train.fp16.onnx")
        cls.f64 = os.path.join(t, "mlp64.train.onnx")
        for args in (("train-graph", mlp, "--loss", "cross-entropy", "-o", cls.fp32),
                     ("rewrite", cls.fp32, "--target", "fp16", "-o", cls.fp16)):
            r = mpc(*args)
            assert r.returncode == 0, r.stderr
        # The MLP in float64: x cast to f64 first, every weight f64.
        m = onnx.load(mlp)
        g = m.graph
        for i, init in enumerate(g.initializer):
            g.initializer[i].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(init).astype(np.float64), init.name))
        nodes = list(g.node)
        nodes[0].input[0] = "x64"
        del g.node[:]
        g.node.extend([helper.make_node("Cast", ["x"], ["x64"], to=TensorProto.DOUBLE,
                                        name="to64")] + nodes)
        g.output[0].type.tensor_type.elem_type = TensorProto.DOUBLE
        del g.value_info[:]
        src64 = os.path.join(t, "mlp64.onnx")
        onnx.save(m, src64)
        r = mpc("train-graph", src64, "--loss", "cross-entropy", "-o", cls.f64)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def placement(self, model, *extra):
        r = mpc("run", model, "--train", "--data", self.data, "--batch", 32, "--device", "cuda",
                "--placement-only", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")  # no step ran: no progress, no time line
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 1, r.stdout)
        return lines[0]

    def test_shipped_steps_stay_on_the_device(self):
        for model, want in ((self.fp32, "cuda: 21 nodes; cpu fallback: none"),
                            # 66: the hidden layer's BiasGrad reads ReluGrad's fp16
                            # result, its widening Cast folded (`to` = float32).
                            (self.fp16, "cuda: 66 nodes; cpu fallback: none")):
            with self.subTest(model=os.path.basename(model)):
                line = self.placement(model)
                self.assertEqual(line, want)
                device, host = parse(line)
                self.assertEqual(device + sum(host.values()), sum(step_ops(model).values()))

    def test_f64_step_falls_back_by_op(self):
        line = self.placement(self.f64)
        self.assertEqual(line, "cuda: 11 nodes; cpu fallback: 11 nodes (BiasGrad x2, Gemm x5, "
                               "ReluGrad x1, Softmax x1, SoftmaxCrossEntropyLoss x1, "
                               "SoftmaxCrossEntropyLossGrad x1)")
        device, host = parse(line)
        ops = step_ops(self.f64)
        self.assertEqual(device + sum(host.values()), sum(ops.values()))
        # What stays on the device: the input's Cast, the int64 step counter's Add and the
        # element-wise rows, which take f64 (Mul, Sub, Relu).
        on_device = ("Cast", "Add", "Mul", "Sub", "Relu")
        self.assertEqual(host, {op: n for op, n in ops.items() if op not in on_device})

    def test_options_that_write_nothing_are_allowed(self):
        line = self.placement(self.fp32, "--steps", 5, "--seed", 3, "--holdout", 0.2)
        self.assertEqual(line, "cuda: 21 nodes; cpu fallback: none")

    def test_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "log.csv")
            for extra, what in (
                    (["--device", "cpu"], "--placement-only applies to --device cuda only"),
                    (["--device", "cuda", "--no-fallback"], "not with --no-fallback"),
                    (["--device", "cuda", "--log", log], "runs no step"),
                    (["--device", "cuda", "--stats"], "runs no step"),
                    (["--device", "cuda", "--checkpoint", d], "runs no step")):
                r = mpc("run", self.fp32, "--train", "--data", self.data, "--batch", 32,
                        "--placement-only", *extra)
                self.assertEqual(r.returncode, 2, f"{extra}: {r.stderr}")
                self.assertEqual(r.stdout, "")
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertIn(what, r.stderr)
            self.assertFalse(os.path.exists(log))
            self.assertEqual(os.listdir(d), [])


def main():
    def set_args(args):
        global MPC, SOURCE_DIR
        MPC = os.path.abspath(args.mpc)
        SOURCE_DIR = os.path.abspath(args.source_dir)
    return tl.test_main((TrainPlacement,), set_args)


if __name__ == "__main__":
    sys.exit(main())
