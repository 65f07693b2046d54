"""`mpc rewrite --fused-unscale` (docs/training.md, "Loss scaling"): the loss-scaling
unscale and overflow check of every gradient as one ai.mpc.training MultiTensorUnscale
node, the way a user runs it:

    mpc train-graph models/digits_mlp.onnx ... -o m.train.onnx
    mpc rewrite m.train.onnx -o m.amp.onnx [--fused-unscale]
    mpc run m.amp.onnx --train --data models/data/digits.npz --seed 7 --log m.csv ...

Checked:
- the kernel (`mpc run` on a one-node model) against a float64 numpy oracle, bit for bit:
  u = float32(float64(g) * inv_scale) for f32, f16 and bf16 gradients holding inf, NaN,
  -0, subnormals and values that overflow after unscaling, and 400 gradients of 1 to 17
  elements next to one of 100,000; the per-gradient flags NaN exactly where the oracle's u
  is not finite, found_inf their "any";
- training with and without the flag (digits MLP and CNN, fp16 dynamic loss scaling
  started at 2^24 so that the first steps overflow and are skipped, 120 steps, same
  seed): the per-step logs, the final stdout line, the skipped-step lines and every
  tensor of the final checkpoints are byte-identical;
- the rewritten algorithm's node count: exactly the primitive form's minus the nodes
  the one fused node replaces;
- misuse: one line naming what is wrong, non-zero exit, no output file.
With --device cuda (a GPU machine) the kernel cases run the one-launch CUDA kernel and the
training cases train on the GPU. Prints "N passed, N failed"; exit status 77 (no
onnx/numpy/ml_dtypes) is a skip.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

try:
    import ml_dtypes
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"onnx, numpy and ml_dtypes are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mpc_trainlib as tl  # noqa: E402

MPC = None
SOURCE_DIR = None
DEVICE = "cpu"  # --device cuda on a GPU machine: the one-launch kernel against the same oracle
TIMEOUT_S = 600
ELEM = {"f32": (TensorProto.FLOAT, np.float32), "f16": (TensorProto.FLOAT16, np.float16),
        "bf16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16)}


def mpc(*args, check=0):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    r = subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env)
    if check is not None and r.returncode != check:
        shown = " ".join(map(str, args[:8])) + (" ..." if len(args) > 8 else "")
        raise AssertionError(f"mpc {shown}: exit {r.returncode}, "
                             f"expected {check}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def special_values(dt, rng, n):
    """n values of type dt: random normals at several magnitudes plus the edge cases."""
    t = ELEM[dt][1]
    tiny = float(np.finfo(t).smallest_subnormal) if dt != "bf16" else 2.0 ** -133
    big = float(np.finfo(t).max) if dt != "bf16" else 3.3895313892515355e38
    edge = [0.0, -0.0, tiny, -tiny, 3 * tiny, big, -big, 1.0, -1.0, 65504.0, 1e-30]
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 4, n)
    x[: len(edge)] = edge[:n]
    return x.astype(t)


def oracle(g, inv):
    """float64 product rounded once to float32 (exact: a float32 product has 48 bits)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (g.astype(np.float64) * np.float64(inv)).astype(np.float32)


def same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    keep = ~np.isnan(a)
    return np.array_equal(a[keep].view(np.uint32), b[keep].view(np.uint32))


class Kernel(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def run_op(self, grads, inv):
        """MultiTensorUnscale over grads [(dtype, array)] through `mpc run`. f32 and f16
        gradients are graph inputs of their type; a bf16 one (.npy has no bfloat16) is a
        float32 input holding the same values, Cast (exactly) to bfloat16."""
        d = self.tmp.name
        names = [f"g{i}" for i in range(len(grads))]
        outs = ["found", "flags"] + [f"u{i}" for i in range(len(grads))]
        inputs, casts, feeds, node_in = [], [], {}, []
        for n, (dt, a) in zip(names, grads):
            if dt == "bf16":
                inputs.append(helper.make_tensor_value_info(n, TensorProto.FLOAT,
                                                            list(a.shape)))
                feeds[n] = a.astype(np.float32)
                casts.append(helper.make_node("Cast", [n], [n + "_bf16"],
                                              to=TensorProto.BFLOAT16))
                node_in.append(n + "_bf16")
            else:
                inputs.append(helper.make_tensor_value_info(n, ELEM[dt][0], list(a.shape)))
                feeds[n] = a
                node_in.append(n)
        outputs = [helper.make_tensor_value_info("found", TensorProto.BOOL, []),
                   helper.make_tensor_value_info("flags", TensorProto.FLOAT, [len(grads)])]
        outputs += [helper.make_tensor_value_info(f"u{i}", TensorProto.FLOAT, list(a.shape))
                    for i, (_, a) in enumerate(grads)]
        node = helper.make_node("MultiTensorUnscale", ["inv"] + node_in, outs,
                                domain="ai.mpc.training")
        inv_t = numpy_helper.from_array(np.array(inv, np.float32), "inv")
        graph = helper.make_graph(casts + [node], "unscale", inputs, outputs, [inv_t])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("ai.mpc.training",
                                                                            1)])
        path = os.path.join(d, "m.onnx")
        onnx.save(model, path)
        args = ["run", path, "--device", DEVICE]
        for n, a in feeds.items():
            f = os.path.join(d, f"{n}.npy")
            np.save(f, a)
            args += ["--input", f"{n}={f}"]
        outdir = os.path.join(d, "out")
        mpc(*args, "--outputs", outdir)
        return [np.load(os.path.join(outdir, f"{o}.npy")) for o in outs]

    def check(self, grads, inv):
        found, flags, *us = self.run_op(grads, inv)
        self.assertEqual(flags.shape, (len(grads),))
        any_bad = False
        for i, ((dt, g), u) in enumerate(zip(grads, us)):
            want = oracle(g, np.float32(inv))
            self.assertEqual(u.dtype, np.float32)
            self.assertTrue(same_bits(u, want), f"gradient {i} ({dt}): {u} != {want}")
            bad = bool(np.any(~np.isfinite(want)))
            any_bad |= bad
            self.assertEqual(bool(np.isnan(flags[i])), bad, f"flag of gradient {i} ({dt})")
            if not bad:
                self.assertEqual(flags[i].view(np.uint32), 0, f"flag of gradient {i}")
        self.assertEqual(found.dtype, np.bool_)
        self.assertEqual(bool(found), any_bad)

    def test_every_dtype_with_edge_values(self):
        rng = np.random.default_rng(1)
        for inv in (2.0 ** -15, 1.0 / 3.0, 4.0):
            with self.subTest(inv=inv):
                grads = [(dt, special_values(dt, rng, 40).reshape(5, 8))
                         for dt in ("f32", "f16", "bf16")]
                # inv 4 makes the largest finite f32 and bf16 values overflow: flagged.
                self.check(grads, inv)

    def test_nonfinite_gradients_are_flagged_one_by_one(self):
        rng = np.random.default_rng(2)
        grads = []
        for i, dt in enumerate(("f16", "f32", "bf16", "f16", "f32")):
            g = special_values(dt, rng, 9)
            g = np.clip(g.astype(np.float32), -100, 100).astype(ELEM[dt][1])
            if i == 1:
                g[3] = np.inf
            if i == 2:
                g[8] = np.nan
            if i == 3:
                g[0] = -np.inf
            grads.append((dt, g))
        found, flags, *_ = self.run_op(grads, 2.0 ** -15)
        self.assertEqual(list(np.isnan(flags)), [False, True, True, True, False])
        self.assertTrue(bool(found))
        clean = [grads[0], grads[4]]
        found, flags, *_ = self.run_op(clean, 2.0 ** -15)
        self.assertFalse(bool(found))
        self.assertEqual(flags.tolist(), [0.0, 0.0])

    def test_many_small_tensors_and_one_large(self):
        rng = np.random.default_rng(3)
        dts = ("f32", "f16", "bf16")
        grads = [(dts[i % 3], special_values(dts[i % 3], rng, int(rng.integers(1, 18))))
                 for i in range(400)]
        grads.insert(200, ("f16", special_values("f16", rng, 100000).reshape(250, 400)))
        self.check(grads, 1.0 / 1024.0)


class Training(unittest.TestCase):
    STEPS = 120

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.data = os.path.join(SOURCE_DIR, "models", "data", "digits.npz")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def rewrite(self, train, name, *flags):
        out = self.path(name)
        r = mpc("rewrite", train, "-o", out, "--loss-scale-init", 2 ** 24, *flags)
        return out, r

    def train(self, model, tag):
        ck = self.path(f"{tag}.ck")
        log = self.path(f"{tag}.csv")
        r = mpc("run", model, "--train", "--device", DEVICE, "--data", self.data, "--batch", 32,
                "--steps", self.STEPS, "--seed", 7, "--eval-every", 40, "--log", log,
                "--checkpoint", ck)
        # On a GPU, the placement line counts the step's nodes, which the fused form has
        # fewer of; every node must be on the device, and the rest of the output must
        # match byte for byte.
        stdout = tl.without_placement(self, r.stdout)
        with open(log, "rb") as f:
            log_bytes = f.read()
        skipped = [line for line in r.stderr.splitlines() if "skipped" in line]
        ck_model = onnx.load(os.path.join(ck, "checkpoint.onnx"))
        state = {t.name: numpy_helper.to_array(t).tobytes()
                 for t in ck_model.graph.initializer}
        return log_bytes, stdout, skipped, state

    def algorithm_ops(self, path):
        m = onnx.load(path)
        return [n.op_type for n in m.training_info[0].algorithm.node]

    def check_model(self, model):
        train = self.path(f"{model}.train.onnx")
        mpc("train-graph", os.path.join(SOURCE_DIR, "models", f"{model}.onnx"), "--loss",
            "cross-entropy", "--labels", "labels", "--optimizer", "adam", "--lr", 0.01,
            "-o", train)
        each, r_each = self.rewrite(train, f"{model}.each.onnx")
        fused, r_fused = self.rewrite(train, f"{model}.fused.onnx", "--fused-unscale")
        self.assertIn("by one MultiTensorUnscale node", r_fused.stderr)

        # Node counts: the fused node replaces, per gradient, Mul(g, 1/S), Mul(u, 0),
        # Reshape and ReduceSum (and the inserted Cast of a 16-bit gradient), the
        # Concat/ReduceSum/IsNaN of found_inf and the two check constants; a reused
        # AMP Cast is folded into it.
        m = re.search(r"(\d+) gradient\(s\) unscaled in fp32 and checked \((\d+) cast\(s\) "
                      r"to fp32 inserted, (\d+) reused\)", r_each.stderr)
        self.assertIsNotNone(m, r_each.stderr)
        n, inserted, reused = map(int, m.groups())
        mf = re.search(r"(\d+) gradient\(s\) unscaled in fp32 and checked by one "
                       r"MultiTensorUnscale node \((\d+) cast\(s\) to fp32 folded in\)",
                       r_fused.stderr)
        self.assertIsNotNone(mf, r_fused.stderr)
        self.assertEqual(int(mf.group(1)), n)
        self.assertEqual(int(mf.group(2)), reused)
        ops_each, ops_fused = self.algorithm_ops(each), self.algorithm_ops(fused)
        self.assertEqual(len(ops_fused),
                         len(ops_each) - (4 * n + inserted + 3 + 2) + 1 - reused)
        self.assertEqual(ops_fused.count("MultiTensorUnscale"), 1)
        self.assertNotIn("IsNaN", ops_fused)

        # Training: byte-identical logs, skipped steps and final state.
        log_e = self.train_alike(each, fused, model)
        rows = list(csv.DictReader(log_e.decode().splitlines()))
        self.assertEqual(len(rows), self.STEPS)
        self.assertGreater(sum(int(r["skipped"]) for r in rows), 0,
                           "the 2^24 start scale should overflow the first steps")

    def train_alike(self, each, fused, tag):
        """Trains both models; asserts byte-identical logs, final lines, skipped-step lines
        (some) and checkpoint tensors; returns the log."""
        log_e, out_e, skip_e, state_e = self.train(each, f"{tag}.each")
        log_f, out_f, skip_f, state_f = self.train(fused, f"{tag}.fused")
        self.assertGreater(len(skip_e), 0)
        self.assertEqual(log_e, log_f)
        self.assertEqual(out_e, out_f)
        self.assertEqual(skip_e, skip_f)
        self.assertEqual(sorted(state_e), sorted(state_f))
        for name in state_e:
            self.assertEqual(state_e[name], state_f[name], f"checkpoint tensor {name}")
        return log_e

    def test_digits_mlp(self):
        self.check_model("digits_mlp")

    def test_digits_cnn(self):
        self.check_model("digits_cnn")

    def test_with_fused_optimizer_steps(self):
        # Both fused forms together (train-graph --fused-optimizer, rewrite --fused-unscale):
        # the unscale node's found_inf feeds every AdamStep's skip input, and training is
        # byte-identical to the default element-wise graph with per-gradient checks.
        src = os.path.join(SOURCE_DIR, "models", "digits_cnn.onnx")
        flags = ["--loss", "cross-entropy", "--labels", "labels", "--optimizer", "adam",
                 "--lr", 0.01]
        plain, fused = self.path("both.plain.train.onnx"), self.path("both.fused.train.onnx")
        mpc("train-graph", src, *flags, "-o", plain)
        mpc("train-graph", src, *flags, "--fused-optimizer", "-o", fused)
        each, _ = self.rewrite(plain, "both.each.onnx")
        both, r = self.rewrite(fused, "both.fused.onnx", "--fused-unscale")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"checked by one MultiTensorUnscale node .* \d+ update\(s\) "
                                   r"guarded, \d+ update\(s\) skipped by their fused optimizer "
                                   r"step")
        m = onnx.load(both)
        alg = m.training_info[0].algorithm.node
        unscale = [n for n in alg if n.op_type == "MultiTensorUnscale"]
        steps = [n for n in alg if n.op_type == "AdamStep"]
        self.assertEqual(len(unscale), 1)
        self.assertGreater(len(steps), 0)
        for n in steps:
            self.assertEqual(n.input[-1], unscale[0].output[0], n.name)
        self.train_alike(each, both, "both")

    def test_rewrite_is_deterministic_and_default_unchanged(self):
        train = self.path("det.train.onnx")
        mpc("train-graph", os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"), "--loss",
            "cross-entropy", "--labels", "labels", "--optimizer", "sgd", "-o", train)
        a, _ = self.rewrite(train, "det.a.onnx", "--fused-unscale")
        b, _ = self.rewrite(train, "det.b.onnx", "--fused-unscale")
        with open(a, "rb") as fa, open(b, "rb") as fb:
            self.assertEqual(fa.read(), fb.read())
        plain, _ = self.rewrite(train, "det.plain.onnx")
        self.assertNotIn("MultiTensorUnscale", self.algorithm_ops(plain))
        # --report counts the node under its own role, and no per-gradient check.
        report = self.path("det.report.json")
        self.rewrite(train, "det.r.onnx", "--fused-unscale", "--report", report)
        with open(report) as f:
            roles = json.load(f)["loss_scaling"]["inserted_nodes"]
        self.assertEqual(roles.get("multi-tensor unscale and check"), 1)
        self.assertNotIn("check", roles)


class Misuse(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.train = os.path.join(self.tmp.name, "m.train.onnx")
        mpc("train-graph", os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"), "--loss",
            "cross-entropy", "--labels", "labels", "--optimizer", "sgd", "-o", self.train)

    def tearDown(self):
        self.tmp.cleanup()

    def refused(self, src, *flags):
        out = os.path.join(self.tmp.name, "out.onnx")
        r = mpc("rewrite", src, "-o", out, "--fused-unscale", *flags, check=None)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(out))
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        return lines[0]

    def test_unscaled_modes(self):
        self.assertEqual(self.refused(self.train, "--loss-scale", "none"),
                         "mpc: error: --fused-unscale needs a scaled loss (--loss-scale "
                         "dynamic or a number); loss scaling none has no unscale to fuse")
        self.assertIn("loss scaling none has no unscale", self.refused(self.train, "--target",
                                                                       "bf16"))
        self.assertIn("loss scaling off has no unscale",
                      self.refused(self.train, "--loss-scale", "off"))

    def test_not_a_training_model(self):
        src = os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx")
        self.assertEqual(self.refused(src),
                         f"mpc: error: --fused-unscale: no loss scaling can be inserted into "
                         f"'{src}': not a training model")

    def test_already_scaled(self):
        once = os.path.join(self.tmp.name, "once.onnx")
        mpc("rewrite", self.train, "-o", once)
        self.assertIn("--fused-unscale: the model carries loss scaling already (dynamic",
                      self.refused(once))


def main():
    global MPC, SOURCE_DIR, DEVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("-k", help="run only tests whose name contains this")
    args = ap.parse_args()
    MPC, SOURCE_DIR = os.path.abspath(args.mpc), os.path.abspath(args.source_dir)
    DEVICE = args.device
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [f"*{args.k}*"]
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(c) for c in (Kernel, Training,
                                                                          Misuse))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
