"""`mpc rewrite --multi-tensor-optimizer` (docs/training.md, "Multi-tensor optimizer steps"):
the per-parameter fused steps of one kind that share their scalars, weight decay and skip flag
become one MultiTensorSGDStep / MultiTensorMomentumStep / MultiTensorAdamStep node. The way a
user runs it:

    mpc train-graph models/digits_mlp.onnx --fused-optimizer ... -o m.train.onnx
    mpc rewrite m.train.onnx --multi-tensor-optimizer -o m.amp.onnx
    mpc run m.amp.onnx --train --data models/data/digits.npz --seed 5 --log m.csv ...

(a) Kernel: one-node models of three groups of different shapes run by `mpc run`: every
    group's results equal, bit for bit, the float32 numpy emulation of the primitive update
    (test_fused_optimizer.emulate, one rounding per operation) on that group alone, with and
    without weight decay; a true skip flag (bool or float) copies every param and state bit
    for bit, NaN gradients included; a false one steps.
(b) Training: digits_mlp and digits_cnn with SGD (weight decay), momentum and Adam (weight
    decay), fp16 with dynamic loss scaling (interval 5: the scale grows into overflows, so
    steps are skipped through the merged node's skip input), 120 steps at one seed, with and
    without the flag: logs and stdout byte-identical, every initializer of the final
    checkpoints byte-identical. Adam also on digits_mlp in bf16, and on digits_cnn with
    --optimizer-weight-copy (the six steps with copies stay per-parameter, four merge).
(c) Node counts and the summary line, exactly; the same rewrite twice gives the same bytes; a
    step reading an lr of its own stays per-parameter while the others merge.
(d) The CUDA kernel table places the merged node on the GPU (`--placement-only`, no GPU).
(e) Misuse: one line, exit 1, no output: no fused step, not a training model (checked before
    the rewrite prints), every step with a weight copy (the one error line after the
    summaries); `mpc run` of a node with a partial group, a group of two shapes, a
    float16 scalar, or too few outputs.

--device cuda (on a GPU machine) runs (a) and (b) on the GPU: the one-launch kernel against
the same emulation, and CUDA training with and without the flag byte-identical.
Prints "N passed, N failed[, N skipped]".
"""
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
from onnx import TensorProto, helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402
import test_fused_optimizer as fused  # noqa: E402  (the float32 emulation of the update)

ARGS = None
DEVICE = "cpu"
DOMAIN = "ai.mpc.training"
MULTI = {"sgd": "MultiTensorSGDStep", "momentum": "MultiTensorMomentumStep",
         "adam": "MultiTensorAdamStep"}
SHAPES = [(3, 5), (7,), (2, 3, 4)]


def run_mpc(*args, timeout=600):
    return subprocess.run([ARGS.mpc, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def source(*parts):
    return os.path.join(ARGS.source_dir, *parts)


def group_names(kind, g):
    return [f"{r}{g}" for r in ["param", "grad"] + fused.STATES[kind]]


def multi_model(kind, groups=SHAPES, decay=False, skip=None, scalar_type=TensorProto.FLOAT,
                drop_inputs=0, drop_outputs=0, second_shape=None):
    """One MultiTensor*Step node whose operands are all graph inputs."""
    names = list(fused.SCALARS[kind]) + ["weight_decay" if decay else "",
                                         "skip" if skip is not None else ""]
    types = [scalar_type] * len(fused.SCALARS[kind]) + [TensorProto.FLOAT, skip]
    shapes = [[]] * (len(fused.SCALARS[kind]) + 2)
    outs, out_info = [], []
    for g, shape in enumerate(groups):
        for k, n in enumerate(group_names(kind, g)):
            names.append(n)
            types.append(TensorProto.FLOAT)
            shapes.append(list(second_shape) if second_shape and g == 0 and k == 1
                          else list(shape))
        for r in ["param"] + fused.STATES[kind]:
            outs.append(f"{r}{g}_out")
            out_info.append(helper.make_tensor_value_info(outs[-1], TensorProto.FLOAT,
                                                          list(shape)))
    if drop_inputs:
        names, types, shapes = names[:-drop_inputs], types[:-drop_inputs], shapes[:-drop_inputs]
    if drop_outputs:
        outs, out_info = outs[:-drop_outputs], out_info[:-drop_outputs]
    node = helper.make_node(MULTI[kind], names, outs, name="multi", domain=DOMAIN)
    inputs = [helper.make_tensor_value_info(n, t, s)
              for n, t, s in zip(names, types, shapes) if n]
    g = helper.make_graph([node], "multi_step", inputs, out_info)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid(DOMAIN, 1)])


def multi_feeds(kind, rng, decay, groups=SHAPES):
    """The scalars of test_fused_optimizer.feeds_for, and per group its tensors (its own
    shape); returns (feeds, [per-group feeds dict for the emulation])."""
    feeds, per = {}, []
    for g, shape in enumerate(groups):
        f = fused.feeds_for(kind, np.float32, rng, decay)
        for k in ["param", "grad"] + fused.STATES[kind]:
            f[k] = rng.standard_normal(shape).astype(np.float32)
            if k == "v":
                f[k] = (0.01 * rng.random(shape) + 1e-4).astype(np.float32)
        for k, n in zip(["param", "grad"] + fused.STATES[kind], group_names(kind, g)):
            feeds[n] = f[k]
        for s in fused.SCALARS[kind] + (["weight_decay"] if decay else []):
            feeds[s] = f[s]
        per.append(f)
    return feeds, per


class Runner:
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="mpc_multi_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def ok(self, *args):
        r = run_mpc(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def run_step(self, model, feeds, tag):
        path = self.path(tag + ".onnx")
        onnx.save(model, path)
        npz = self.path(tag + ".npz")
        np.savez(npz, **feeds)
        outdir = self.path(tag + "_out")
        self.ok("run", path, "--device", DEVICE, "--input", npz, "--outputs", outdir)
        return [np.load(os.path.join(outdir, o.name + ".npy")) for o in model.graph.output]


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class Kernel(Runner, unittest.TestCase):
    def test_each_group_is_the_per_parameter_update(self):
        for kind in MULTI:
            for decay in (False, True):
                with self.subTest(kind=kind, decay=decay):
                    feeds, per = multi_feeds(kind, np.random.default_rng(3), decay)
                    got = self.run_step(multi_model(kind, decay=decay), feeds,
                                        f"{kind}_{decay}")
                    want = [w for f in per for w in fused.emulate(kind, f)]
                    self.assertEqual(len(got), len(want))
                    for i, (a, b) in enumerate(zip(got, want)):
                        self.assertTrue(same_bits(a, b.astype(np.float32)), f"output {i}")
                    # The update happened: every param moved.
                    for g in range(len(SHAPES)):
                        self.assertFalse(np.array_equal(got[g * (1 + len(fused.STATES[kind]))],
                                                        feeds[f"param{g}"]))

    def test_skip_copies_bit_for_bit(self):
        for kind in MULTI:
            for skip_type, value in ((TensorProto.BOOL, np.array(True)),
                                     (TensorProto.FLOAT, np.array(-2.0, np.float32))):
                with self.subTest(kind=kind, skip=skip_type):
                    feeds, _ = multi_feeds(kind, np.random.default_rng(4), True)
                    feeds["grad1"][...] = np.nan
                    feeds["skip"] = value
                    got = self.run_step(multi_model(kind, decay=True, skip=skip_type), feeds,
                                        f"{kind}_skip_{skip_type}")
                    want = [feeds[n] for g in range(len(SHAPES))
                            for n in group_names(kind, g) if not n.startswith("grad")]
                    for i, (a, b) in enumerate(zip(got, want)):
                        self.assertTrue(same_bits(a, b), f"output {i}")

    def test_false_skip_steps(self):
        feeds, per = multi_feeds("adam", np.random.default_rng(5), False)
        feeds["skip"] = np.array(False)
        got = self.run_step(multi_model("adam", skip=TensorProto.BOOL), feeds, "adam_noskip")
        want = [w for f in per for w in fused.emulate("adam", f)]
        for i, (a, b) in enumerate(zip(got, want)):
            self.assertTrue(same_bits(a, b.astype(np.float32)), f"output {i}")


class TrainRunner(Runner):
    OPTS = {"sgd": ["--optimizer", "sgd", "--weight-decay", "0.01", "--lr", "0.05"],
            "momentum": ["--optimizer", "momentum"],
            "adam": ["--optimizer", "adam", "--weight-decay", "0.01", "--lr", "0.003"]}

    def build(self, model, opt, multi, target="fp16", extra=(), suffix=""):
        train = self.path(f"{model}_{opt}.train.onnx")
        if not os.path.exists(train):
            self.ok("train-graph", source("models", model + ".onnx"), "--loss", "cross-entropy",
                    *self.OPTS[opt], "--fused-optimizer", "-o", train)
        tag = f"{model}_{opt}_{target}_{'multi' if multi else 'per'}{'_'.join(extra)}{suffix}"
        out = self.path(tag + ".onnx")
        scaling = ["--loss-scale", "dynamic", "--loss-scale-interval", "5"] \
            if target == "fp16" else []
        r = self.ok("rewrite", train, "--target", target, *scaling, *extra,
                    *(["--multi-tensor-optimizer"] if multi else []), "-o", out)
        return out, r.stderr

    def train(self, path, tag):
        log = self.path(tag + ".csv")
        ck = self.path(tag + "_ck")
        r = self.ok("run", path, "--train", "--device", DEVICE, "--data",
                    source("models", "data", "digits.npz"), "--batch", 32, "--steps", 120,
                    "--seed", 5, "--log", log, "--checkpoint", ck)
        with open(log, "rb") as fh:
            return fh.read(), r.stdout, os.path.join(ck, "checkpoint.onnx")


def initializers(path):
    m = onnx.load(path)
    return {i.name: i.SerializeToString() for i in m.graph.initializer}, m


class Training(TrainRunner, unittest.TestCase):
    def compare(self, model, opt, target="fp16", extra=()):
        runs = []
        for multi in (False, True):
            path, _ = self.build(model, opt, multi, target, extra)
            runs.append(self.train(path, os.path.basename(path)[:-5]))
        (log_p, out_p, ck_p), (log_m, out_m, ck_m) = runs
        self.assertEqual(log_p, log_m, "training logs differ")
        self.assertEqual(tl.without_placement(self, out_p), tl.without_placement(self, out_m),
                         "stdout differs")
        init_p, _ = initializers(ck_p)
        init_m, mm = initializers(ck_m)
        self.assertEqual(sorted(init_p), sorted(init_m))
        for name in init_p:
            self.assertEqual(init_p[name], init_m[name], name)
        ops = [n.op_type for n in mm.training_info[0].algorithm.node]
        self.assertEqual(ops.count(MULTI[opt]), 1)
        return log_m, ops

    def test_byte_identical_to_the_per_parameter_steps(self):
        for model in ("digits_mlp", "digits_cnn"):
            for opt in self.OPTS:
                with self.subTest(model=model, opt=opt):
                    log, ops = self.compare(model, opt)
                    self.assertEqual(ops.count(fused.OP[opt]), 0)
                    rows = log.decode().splitlines()[1:]
                    self.assertEqual(len(rows), 120)
                    # The skip input ran: the growing scale overflowed.
                    header = log.decode().splitlines()[0].split(",")
                    col = header.index("skipped")
                    self.assertGreater(sum(int(r.split(",")[col]) for r in rows), 0)

    def test_bf16_and_weight_copies(self):
        self.compare("digits_mlp", "adam", "bf16")
        # digits_cnn: 6 parameters get copies (their steps stay), the 4 BatchNormalization
        # scales and biases are not cast and merge.
        _, ops = self.compare("digits_cnn", "adam", "fp16", ("--optimizer-weight-copy",))
        self.assertEqual(ops.count("AdamStep"), 6)


class NodeCounts(TrainRunner, unittest.TestCase):
    def test_counts_summary_and_determinism(self):
        per, _ = self.build("digits_mlp", "adam", False)
        multi, err = self.build("digits_mlp", "adam", True)
        mp, mm = onnx.load(per), onnx.load(multi)
        steps = [n for n in mp.training_info[0].algorithm.node if n.op_type == "AdamStep"]
        self.assertGreater(len(steps), 1)
        self.assertIn(f"Multi-tensor optimizer: {len(steps)} fused step(s) merged into 1 "
                      "node(s) (0 left per-parameter)", err.splitlines())
        alg = mm.training_info[0].algorithm
        self.assertEqual(len(alg.node), len(mp.training_info[0].algorithm.node)
                         - len(steps) + 1)
        node = [n for n in alg.node if n.op_type == "MultiTensorAdamStep"][0]
        self.assertEqual(len(node.input), 10 + 4 * len(steps))
        self.assertEqual(list(node.output), [o for s in steps for o in s.output])
        # The skip input reads loss scaling's found_inf, as the steps' did.
        self.assertEqual(node.input[9], steps[0].input[13])
        self.assertTrue(node.input[9])
        self.assertEqual([o.name for o in alg.output],
                         [o.name for o in mp.training_info[0].algorithm.output])
        again, _ = self.build("digits_mlp", "adam", True, suffix="_again")
        with open(multi, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_steps_of_another_lr_stay_apart(self):
        """One SGDStep reads an lr of its own (a second Constant): the other three merge,
        it stays per-parameter."""
        train = self.path("sgd.train.onnx")
        self.ok("train-graph", source("models", "digits_mlp.onnx"), "--loss", "cross-entropy",
                *self.OPTS["sgd"], "--fused-optimizer", "-o", train)
        m = onnx.load(train)
        alg = m.training_info[0].algorithm
        steps = [n for n in alg.node if n.op_type == "SGDStep"]
        self.assertEqual(len(steps), 4)
        lr2 = helper.make_node("Constant", [], ["other_lr"], name="other_lr",
                               value=helper.make_tensor("v", TensorProto.FLOAT, [], [0.01]))
        alg.node.insert(0, lr2)
        steps[1].input[2] = "other_lr"
        onnx.save(m, train)
        out = self.path("sgd.multi.onnx")
        r = self.ok("rewrite", train, "--multi-tensor-optimizer", "-v", 1, "-o", out)
        self.assertIn("Multi-tensor optimizer: 3 fused step(s) merged into 1 node(s) (1 left "
                      "per-parameter)", r.stderr.splitlines())
        ops = [n for n in onnx.load(out).training_info[0].algorithm.node
               if n.domain == DOMAIN and n.op_type.endswith("Step")]
        self.assertEqual([n.op_type for n in ops], ["SGDStep", "MultiTensorSGDStep"])
        self.assertEqual(ops[0].name, steps[1].name)
        self.assertEqual(len(ops[1].input), 3 + 2 * 3)

    def test_cuda_placement_of_the_merged_node(self):
        path, _ = self.build("digits_mlp", "adam", True)
        tl.check_all_on_cuda(self, ARGS.mpc, path, source("models", "data", "digits.npz"))
        self.assertIn("MultiTensorAdamStep",
                      [n.op_type for n in onnx.load(path).training_info[0].algorithm.node])


class BadInput(TrainRunner, unittest.TestCase):
    def refused(self, model, *needles, extra=()):
        out = self.path("refused.onnx")
        r = run_mpc("rewrite", model, "--multi-tensor-optimizer", *extra, "-o", out)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)  # checked before the rewrite prints
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertFalse(os.path.exists(out))

    def test_no_fused_step(self):
        train = self.path("plain.train.onnx")
        self.ok("train-graph", source("models", "digits_mlp.onnx"), "--loss", "cross-entropy",
                "--optimizer", "adam", "-o", train)
        self.refused(train, "--multi-tensor-optimizer", "no fused optimizer step")

    def test_not_a_training_model(self):
        self.refused(source("models", "digits_mlp.onnx"), "--multi-tensor-optimizer",
                     "not a training model")

    def test_every_step_has_a_copy(self):
        """digits_mlp's four parameters are all cast, so all get copies: nothing to merge.
        The error is the one line printed (the summary of the weight-copy pass, which ran,
        is printed only when the whole rewrite succeeds)."""
        train = self.path("m.train.onnx")
        self.ok("train-graph", source("models", "digits_mlp.onnx"), "--loss", "cross-entropy",
                "--optimizer", "sgd", "--fused-optimizer", "-o", train)
        out = self.path("x.onnx")
        r = run_mpc("rewrite", train, "--optimizer-weight-copy", "--multi-tensor-optimizer",
                    "-o", out)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("mpc: error: --multi-tensor-optimizer: no two of the 4 fused optimizer "
                      "step(s)", lines[0])
        self.assertFalse(os.path.exists(out))

    def run_refused(self, model, feeds, *needles):
        path = self.path("bad.onnx")
        onnx.save(model, path)
        npz = self.path("bad.npz")
        np.savez(npz, **feeds)
        outdir = self.path("bad_out")
        r = run_mpc("run", path, "--input", npz, "--outputs", outdir)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("multi", lines[0])
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertFalse(os.path.exists(outdir) and os.listdir(outdir))

    def test_partial_group(self):
        feeds, _ = multi_feeds("adam", np.random.default_rng(0), False)
        del feeds["v2"]
        self.run_refused(multi_model("adam", drop_inputs=1), feeds, "groups of 4")

    def test_group_of_two_shapes(self):
        feeds, _ = multi_feeds("momentum", np.random.default_rng(0), False)
        feeds["grad0"] = np.zeros((5, 3), np.float32)
        self.run_refused(multi_model("momentum", second_shape=(5, 3)), feeds,
                         "grad of group 0 (grad0)", "[3, 5]")

    def test_float16_scalar(self):
        feeds, _ = multi_feeds("sgd", np.random.default_rng(0), False)
        feeds["lr"] = feeds["lr"].astype(np.float16)
        self.run_refused(multi_model("sgd", scalar_type=TensorProto.FLOAT16), feeds, "'lr'")

    def test_too_few_outputs(self):
        feeds, _ = multi_feeds("sgd", np.random.default_rng(0), False)
        self.run_refused(multi_model("sgd", drop_outputs=1), feeds, "3 group(s) need 3 outputs")


def main():
    global DEVICE
    DEVICE = tl.pop_device_arg()  # ours; the rest is mpc_trainlib's

    def set_args(args):
        global ARGS
        ARGS = args
        fused.ARGS = args
    return tl.test_main((Kernel, Training, NodeCounts, BadInput), set_args)


if __name__ == "__main__":
    sys.exit(main())
