"""Parity with PyTorch on models exported by torch.onnx.export (docs/training.md, "Parity with
PyTorch"). The fixtures in tests/train/torch_fixtures/ were written by generate.py there (with
PyTorch, which is not a test dependency): each model exported from ordinary PyTorch code
before training (in float32, and converted to float64), its data, and what 10 steps of
torch.optim.SGD with momentum and of torch.optim.Adam gave in float32 and in float64: the
loss of every step and every initializer's value after the last step, keyed by the node
input that reads it.

For each model and optimizer this runs the user's path, `mpc train-graph` (cross-entropy, the
manifest's flags) then `mpc run --train --shuffle none` with the same batches, and compares
the logged losses and the checkpoint's initializers, found through the same node inputs
(so untied copies are compared with PyTorch's separate tensors), with PyTorch's: the float32
export against PyTorch's float32 run, the float64 export against its float64 run. Every
parameter mpc trains must be among them and most must have moved; BatchNorm running
statistics are compared too (PyTorch's unbiased variance: --bn-variance unbiased). For a
model whose float32 training is chaotic (MobileNetV2) the float32 comparison is against the
spread of PyTorch float32 runs that differ only by rounding (SPREAD_FACTOR below); its float64
comparison is as tight as the others'.

nn.EmbeddingBag (exported as a Loop) and other control flow are refused with one line that
says what to export instead.

Prints "N passed, N failed[, N skipped]".
"""
import csv
import json
import os
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
from onnx import numpy_helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402

ARGS = None
FIXTURES = os.path.join(HERE, "torch_fixtures")
# float32 (the user's path): |mpc - torch| <= SCALE * (RTOL * |torch| + ATOL), element-wise,
# for parameters and statistics (losses: SCALE 1). Both sides are float32; the differences are
# rounding (summation order) carried through 10 steps: at most 8% of the tolerance for most.
# The two BatchNorm models reach 1.5-1.7 times the tolerance on a few elements (SCALE 3):
# their float64 runs agree to 1e-13, so the math is the same, and directions that a following
# normalization nearly cancels amplify the rounding. (They reached 7-8 times while mpc summed
# the batch statistics in float32; it sums them in double now.)
RTOL, ATOL = 1e-5, 1e-6
SCALE = {("bn_cnn", "momentum"): 3, ("mobilenet_block", "adam"): 3}
# An element whose gradient is zero in exact arithmetic (a key bias under softmax, a scale
# that a following normalization cancels) gets rounding noise for a gradient, which Adam
# normalizes to steps of about lr: PyTorch's float32 and float64 runs differ there by
# O(lr), and so may mpc. Such elements (PyTorch's float32 result more than RTOL/ATOL from its
# float64 one) are only checked to be within 2 * steps * lr of PyTorch's float32 values, and
# may be at most MAX_LOOSE of a model's elements.
MAX_LOOSE = 0.05
# Chaotic training (the manifest's `rounding_spread`, generate.py's CHAOTIC: the whole
# MobileNetV2): 10 float32 steps of PyTorch part from its own float64 run far beyond the bounds
# above (losses up to 6.3e-3 (SGD-momentum) and 9.0e-3 (Adam) apart; 53% and 89% of the
# elements beyond the element-wise tolerance, by up to 3e4 times), and so do PyTorch float32
# runs that differ only by rounding (initial values one unit in the last place apart). No
# element-wise bound can be derived; mpc's float32 run is held to that rounding spread instead:
# each step's loss within the float32 tolerance plus SPREAD_FACTOR times the largest loss
# difference of those runs at that step (tight for the first steps, before the runs part),
# and the trained values, all slots together, within SPREAD_FACTOR times their largest L2
# distance from PyTorch's float32 result (relative to how far that result moved).
# SPREAD_FACTOR 2: the spread is the largest of 16 draws of a heavy-tailed distance, and mpc's
# rounding differs from PyTorch's in every operation of every step, not only in the initial
# values. (Measured: mpc at 0.08 (momentum) and 0.04 (Adam) against spreads of 0.11 and 0.08;
# a learning rate 10% off fails at the loss after the first update.) The float64 comparison
# below is the strong check for these models.
SPREAD_FACTOR = 2
# float64 (the same models exported in float64, trained by mpc in float64): the math, gradient
# rules, optimizer and running-statistic conventions, against PyTorch's float64 run. The
# fixtures' hyperparameters are binary fractions, so they mean the same in float32 and
# float64 (mpc holds them, and ONNX its epsilon and momentum attributes, as float32).
# Models that compute some of their math in float32 whatever the input type get the float32
# bound below: LayerNormalization's statistics (ONNX's stash_type, 1 = float32 by default) and
# mpc's LSTM and GRU kernels, which compute in float32.
# ATOL64 is for the elements whose exact gradient is zero (above): Adam turns float64
# rounding noise into steps of about 1e-11 to 1e-10, and that noise depends on the summation
# order of the BLAS kernels the host CPU selects (MobileNetV2's BatchNormalization biases
# reached 8.8e-10 against PyTorch's -1.8e-10 on a 2-core VM with OpenBLAS 0.3.21, 2026-11-26);
# a parameter that really trains moves by more than 1e-4 (slot_values).
RTOL64, ATOL64 = 1e-10, 1e-8
RTOL64_PART32, ATOL64_PART32 = 1e-6, 1e-8
PART32 = {"lstm_last", "gru_last", "transformer_encoder", "gpt", "bert_encoder", "vit"}


def run_mpc(*args, timeout=120):
    return subprocess.run([ARGS.mpc, *args], capture_output=True, text=True, timeout=timeout)


def manifest():
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        return json.load(f)


def resolve(graph, node_name, index):
    """The initializer that input `index` of the node named `node_name` reads (through
    Identity nodes), or None."""
    ident = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Identity"}
    (node,) = [n for n in graph.node if n.name == node_name]
    v = node.input[index]
    while v in ident:
        v = ident[v]
    return v if v in {t.name for t in graph.initializer} else None


class TorchParity(unittest.TestCase):
    def train(self, tmp, name, opt, f64=False):
        """train-graph -> run --train as the manifest says; returns the losses logged, the
        checkpoint's graph, the initial inference graph and train-graph's parameters."""
        m = manifest()
        entry = m["models"][name]
        src = os.path.join(FIXTURES, f"{name}.f64.onnx" if f64 else f"{name}.onnx")
        dst = os.path.join(tmp, f"{name}.train.onnx")
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", *entry["train_graph_flags"],
                    *entry["optimizers"][opt], "-o", dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        train = onnx.load(dst)
        data = dict(np.load(os.path.join(FIXTURES, f"{name}.data.npz")))
        data[tl.metadata(train)["mpc.training.labels"]] = data.pop("labels")
        if f64:
            data = {k: v.astype(np.float64) if v.dtype == np.float32 else v
                    for k, v in data.items()}
        npz, ck, log = (os.path.join(tmp, f) for f in ("d.npz", "ck", "log.csv"))
        np.savez(npz, **data)
        rr = run_mpc("run", dst, "--train", "--data", npz, "--batch", str(m["batch"]),
                     "--steps", str(m["steps"]), "--shuffle", "none", "--holdout", "0",
                     "--checkpoint", ck, "--log", log)
        self.assertEqual(rr.returncode, 0, rr.stderr)
        with open(log) as f:
            losses = np.array([float(row["loss"]) for row in csv.DictReader(f)])
        trained = [p for p, _ in tl.gradient_pairs(train)]
        return losses, onnx.load(os.path.join(ck, "checkpoint.onnx")).graph, train.graph, trained

    def check(self, name, opt):
        """mpc float32 against PyTorch float32 (PyTorch float64 tells which elements
        PyTorch's float32 run itself does not reproduce)."""
        entry = manifest()["models"][name]
        want = np.load(os.path.join(FIXTURES, f"{name}.{opt}.npz"))
        with tempfile.TemporaryDirectory() as tmp:
            losses, after, before, trained = self.train(tmp, name, opt)
        slots = self.slot_values(name, opt, entry, after, before, trained)
        if "rounding_spread" in entry:
            self.check_within_spread(entry["rounding_spread"][opt], want, losses, slots)
            return
        np.testing.assert_allclose(losses, want["loss"], rtol=RTOL, atol=ATOL, err_msg="loss")
        scale = SCALE.get((name, opt), 1)
        flags = entry["optimizers"][opt]
        loose_bound = 2 * manifest()["steps"] * float(flags[flags.index("--lr") + 1])
        loose = 0
        for where, got, _, key in slots:
            t32, t64 = want[key], want[key + "_f64"]
            own = np.abs(t32 - t64) > RTOL * np.abs(t64) + ATOL
            loose += int(own.sum())
            np.testing.assert_allclose(np.where(own, t32, got), t32, rtol=RTOL * scale,
                                       atol=ATOL * scale, err_msg=where)
            np.testing.assert_array_less(np.abs(got - t32)[own], loose_bound, err_msg=where)
        self.assertLessEqual(loose, MAX_LOOSE * sum(want[k].size for *_, k in entry["slots"]))

    def check_within_spread(self, spread, want, losses, slots):
        """mpc float32 against PyTorch float32 for a chaotic model: within SPREAD_FACTOR times
        the spread of PyTorch float32 runs that differ only by rounding (above)."""
        bound = RTOL * np.abs(want["loss"]) + ATOL + SPREAD_FACTOR * np.array(spread["loss"])
        np.testing.assert_array_less(np.abs(losses - want["loss"]), bound, err_msg="loss")
        flat = lambda arrays: np.concatenate([a.ravel().astype(np.float64) for a in arrays])
        got, start = flat(s[1] for s in slots), flat(s[2] for s in slots)
        t32 = flat(want[s[3]] for s in slots)
        distance = np.linalg.norm(got - t32) / np.linalg.norm(t32 - start)
        self.assertLessEqual(distance, SPREAD_FACTOR * spread["params"],
                             "distance of the trained values from PyTorch's float32 run")

    def check_f64(self, name, opt):
        """mpc float64 against PyTorch float64."""
        entry = manifest()["models"][name]
        want = np.load(os.path.join(FIXTURES, f"{name}.{opt}.npz"))
        with tempfile.TemporaryDirectory() as tmp:
            losses, after, before, trained = self.train(tmp, name, opt, f64=True)
        # The log holds 8 decimals.
        np.testing.assert_allclose(losses, want["loss_f64"], rtol=0, atol=1e-8, err_msg="loss")
        for where, got, _, key in self.slot_values(name, opt, entry, after, before, trained):
            self.assertEqual(got.dtype, np.float64, where)
            tol = (RTOL64_PART32, ATOL64_PART32) if name in PART32 else (RTOL64, ATOL64)
            np.testing.assert_allclose(got, want[key + "_f64"], rtol=tol[0], atol=tol[1],
                                       err_msg=where)

    def slot_values(self, name, opt, entry, after, before, trained):
        """(description, trained value, initial value, fixture key) for every slot of the
        manifest; checks that the slot reads the same initializer before and after training,
        that every parameter mpc trains is read by a slot, and that most of them moved."""
        got = {t.name: numpy_helper.to_array(t) for t in after.initializer}
        initial = {t.name: numpy_helper.to_array(t) for t in before.initializer}
        out, compared, moved = [], set(), set()
        for node_name, index, key in entry["slots"]:
            init = resolve(after, node_name, index)
            where = f"{name} {opt}: input {index} of '{node_name}' ('{init}')"
            self.assertIsNotNone(init, where)
            self.assertEqual(init, resolve(before, node_name, index), where)
            out.append((where, got[init], initial[init], key))
            compared.add(init)
            if np.abs(got[init] - initial[init]).max() > 1e-4:
                moved.add(init)
        self.assertEqual(sorted(set(trained) - compared), [], "trained but not compared")
        self.assertGreater(len(moved & set(trained)), 0.6 * len(trained), "too few moved")
        return out

    def test_embedding_bag_is_refused(self):
        """nn.EmbeddingBag exports as a Loop gathering rows of its table: one line that names
        the node and the table and says what to export instead; no file."""
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "bag.train.onnx")
            src = os.path.join(FIXTURES, "embedding_bag.onnx")
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "-o", dst)
            self.assertFalse(os.path.exists(dst))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, (
            f"mpc: error: {src}: node '/bag/Loop' (Loop): ops with subgraphs are not supported "
            "by train-graph; its body gathers rows of 'bag.weight', as nn.EmbeddingBag "
            "exports: use nn.Embedding and a sum or mean over the bag axis (fixed-length bags, "
            "padding_idx for shorter ones)\n"))


    def test_control_flow_is_refused(self):
        """Any other op with a subgraph: one line naming it, saying to export without control
        flow."""
        from onnx import TensorProto, helper
        f = TensorProto.FLOAT
        branch = lambda name, op: helper.make_graph(
            [helper.make_node(op, ["x", "W"], [name])], name, [],
            [helper.make_tensor_value_info(name, f, [2])])
        model = helper.make_model(helper.make_graph(
            [helper.make_node("If", ["c"], ["y"], name="/If", then_branch=branch("a", "Add"),
                              else_branch=branch("b", "Mul"))],
            "if", [helper.make_tensor_value_info("x", f, ["N", 2]),
                   helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
            [helper.make_tensor_value_info("y", f, ["N", 2])],
            [numpy_helper.from_array(np.ones(2, np.float32), "W")]),
            opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "if.onnx"), os.path.join(tmp, "if.train.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "mse", "-o", dst)
            self.assertFalse(os.path.exists(dst))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, f"mpc: error: {src}: node '/If' (If): ops with subgraphs "
                         "are not supported by train-graph; export the model without control "
                         "flow\n")


def _add_parity_tests():
    for name, entry in manifest()["models"].items():
        for opt in entry["optimizers"]:
            def test(self, name=name, opt=opt):
                self.check(name, opt)
            test.__doc__ = f"{name}, {opt}: 10 float32 steps match PyTorch's"
            setattr(TorchParity, f"test_{name}_{opt}", test)

            if not entry.get("f64_export", True):
                continue  # no float64 export in the fixtures (generate.py, NO_F64_EXPORT)

            def test64(self, name=name, opt=opt):
                self.check_f64(name, opt)
            test64.__doc__ = f"{name}, {opt}: 10 float64 steps match PyTorch's"
            setattr(TorchParity, f"test_{name}_{opt}_f64", test64)


_add_parity_tests()


def _set_args(args):
    global ARGS
    ARGS = args


if __name__ == "__main__":
    sys.exit(tl.test_main((TorchParity,), _set_args))
