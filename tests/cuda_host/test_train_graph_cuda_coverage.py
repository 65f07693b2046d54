#!/usr/bin/env python3
"""Every node of the shipped models' training steps has a CUDA kernel-table row.

    python3 tests/cuda_host/test_train_graph_cuda_coverage.py --mpc build/tools/mpc \
        --source-dir . [-v]

For each models/*.onnx, and the bidirectional GRU model of tools/gpu_rnn_train_check.py
(GRU and GRUGrad, both linear_before_reset values), and each loss (`mpc train-graph --loss cross-entropy|mse`),
the training graph and its two AMP rewrites (`mpc rewrite --target fp16`, with dynamic
loss scaling, and `--target bf16`) are built with the CLI; the op types of every node,
nested graphs included, are compared against the CUDA column of `mpc ops --json`. An op
without a CUDA row is a failure naming the model, the variant and the op, except the ops
the executor runs itself (control flow; their registry rows say run_by_executor) and those
it evaluates on the host while planning (Constant, Shape, Size). A model a loss does not
apply to (train-graph refuses it) is skipped with its one-line reason, never passed
silently.

This is what tells a GPU session that a whole training step can stay on the device.
The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when
onnx is missing.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import onnx
except ImportError as e:  # pragma: no cover
    print(f"onnx is required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None
SOURCE_DIR = None
# No op is exempt any more (the recurrent ops and their gradients have rows since
# GRUGrad's); kept so that a family still to come can be named here with its reason.
EXEMPT = set()
# Evaluated on the host while the executor plans (Executor.cpp: a node whose inputs are all
# known, or that reads only shapes), so never launched on a device: Constant (no inputs),
# Shape and Size of the static shapes of these steps.
FOLDED = {("", "Constant"), ("", "Shape"), ("", "Size")}


def mpc(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([MPC, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env)


def graph_ops(graph, out):
    """(domain, op_type) of every node of `graph` and of its nested graphs."""
    for n in graph.node:
        out.add(("" if n.domain in ("", "ai.onnx") else n.domain, n.op_type))
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                graph_ops(a.g, out)
            for g in a.graphs:
                graph_ops(g, out)
    return out


def model_ops(model):
    """The ops of the inference graph, the training step (training_info's algorithm and
    initialization) and the model's functions."""
    out = graph_ops(model.graph, set())
    for ti in model.training_info:
        graph_ops(ti.algorithm, out)
        graph_ops(ti.initialization, out)
    for f in model.functions:
        graph_ops(f, out)
    return out


_OPS = None


def cuda_ops():
    """{(domain, op_type): has a CUDA row} and the ops the executor runs itself."""
    global _OPS
    if _OPS is None:
        r = mpc("ops", "--json")
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)
        cuda = {("" if o["domain"] in ("", "ai.onnx") else o["domain"], o["op_type"]):
                bool(o["cuda_kernels"]) for o in rows}
        _OPS = cuda
    return _OPS


def run_by_executor(domain, op):
    r = mpc("ops", "--op", f"{domain}::{op}" if domain else op, "--json")
    if r.returncode != 0:
        return False
    rows = json.loads(r.stdout)["registry"]
    return bool(rows) and all(x["run_by_executor"] for x in rows)


def uncovered(ops):
    """The ops of `ops` with no CUDA row that the check does not exempt."""
    table = cuda_ops()
    return {k for k in ops if k not in EXEMPT and k not in FOLDED and not table.get(k, False)
            and not run_by_executor(*k)}


class TrainGraphCoverage(unittest.TestCase):
    def test_every_training_step_node_has_a_cuda_row(self):
        models = sorted(glob.glob(os.path.join(SOURCE_DIR, "models", "*.onnx")))
        self.assertGreaterEqual(len(models), 5, "the shipped models")
        checked = 0
        missing, seen = {}, set()
        with tempfile.TemporaryDirectory() as tmp:
            # The GRU model the GPU bundle trains (tools/gpu_rnn_train_check.py), in both
            # reset modes.
            sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))
            from gpu_rnn_train_check import write_gru_model
            for lbr in (0, 1):
                models.append(os.path.join(tmp, f"gru_lbr{lbr}.onnx"))
                write_gru_model(models[-1], lbr)
            for path in models:
                name = os.path.basename(path)[:-5]
                for loss in ("cross-entropy", "mse"):
                    train = os.path.join(tmp, f"{name}.{loss}.train.onnx")
                    r = mpc("train-graph", path, "--loss", loss, "-o", train)
                    if r.returncode != 0:
                        print(f"skip {name} --loss {loss}: {r.stderr.strip()}", file=sys.stderr)
                        continue
                    variants = {"fp32": train}
                    for target in ("fp16", "bf16"):
                        dst = os.path.join(tmp, f"{name}.{loss}.{target}.onnx")
                        r = mpc("rewrite", train, "--target", target, "-o", dst)
                        self.assertEqual(r.returncode, 0, f"{name} {loss} {target}: {r.stderr}")
                        variants[target] = dst
                    for variant, p in variants.items():
                        ops = model_ops(onnx.load(p))
                        # The step itself is read: its loss gradient is there.
                        grad = ("SoftmaxCrossEntropyLossGrad" if loss == "cross-entropy"
                                else "MSELossGrad")
                        self.assertIn(("ai.mpc.training", grad), ops, f"{name}/{loss}/{variant}")
                        checked += 1
                        seen |= ops
                        for key in uncovered(ops):
                            missing.setdefault(key, []).append(f"{name}/{loss}/{variant}")
        self.assertGreaterEqual(checked, 21, "training graphs built and checked")
        # The recurrent steps were among them (their gradients are no longer exempt).
        self.assertIn(("ai.mpc.training", "LSTMGrad"), seen)
        self.assertIn(("ai.mpc.training", "GRUGrad"), seen)
        real = missing
        text = "; ".join(f"{d + '::' if d else ''}{op} ({len(v)} graphs, e.g. {v[0]})"
                         for (d, op), v in sorted(real.items()))
        self.assertFalse(real, f"ops of training steps without a CUDA row: {text}")

    def test_the_check_sees_a_missing_row(self):
        # The comparison itself: an op the CUDA table lacks is reported, one it has, an
        # exempt one and one the executor runs are not.
        table = cuda_ops()
        lacking = sorted(k for k, has in table.items() if not has and k not in EXEMPT
                         and k not in FOLDED and not run_by_executor(*k))
        # Every op with a CPU kernel may have a CUDA row by now: then one row is taken
        # away from the table for the check.
        probe = lacking[0] if lacking else ("", "Relu")
        saved = table[probe]
        table[probe] = False
        try:
            self.assertEqual(uncovered({probe}), {probe})
        finally:
            table[probe] = saved
        self.assertEqual(uncovered({("", "Relu")}), set())
        self.assertEqual(uncovered({("", "SoftmaxCrossEntropyLoss"), ("", "LSTM"),
                                    ("ai.mpc.training", "SoftmaxCrossEntropyLossGrad"),
                                    ("ai.mpc.training", "BatchNormalizationGrad"),
                                    ("", "Clip")}), set())
        self.assertTrue(any(run_by_executor(*k) for k in (("", "If"), ("", "Loop"))))


def main():
    global MPC, SOURCE_DIR
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mpc", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    MPC, SOURCE_DIR = args.mpc, args.source_dir
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(TrainGraphCoverage)
    res = unittest.TextTestRunner(verbosity=2 if args.verbose else 1).run(suite)
    failed = len(res.failures) + len(res.errors)
    print(f"{res.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
