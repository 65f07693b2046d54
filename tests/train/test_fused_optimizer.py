"""The fused optimizer steps (docs/training.md, "Fused optimizer steps"): SGDStep, MomentumStep
and AdamStep of ai.mpc.training, and `mpc train-graph --fused-optimizer`, through the CLI.

(a) Kernel: one-node models run by `mpc run` against a float32 numpy emulation of the
    primitive update (bit for bit: numpy rounds each float32 operation once, as the kernel
    must) and the float64 reference of tests/python/mpc_training_ref.py (float32 and float64
    parameters, with and without weight decay); a true skip flag (bool or float) copies
    param and states bit for bit, NaN gradients included.
(b) Training: digits_mlp and digits_cnn with SGD (weight decay), momentum and Adam (weight
    decay), built with and without --fused-optimizer, trained by `mpc run --train` at the same
    seed in fp32 and after `mpc rewrite --target fp16` with dynamic loss scaling (an interval
    of 5 grows the scale into overflows, so steps are skipped): the logs are byte-identical,
    and so are the final checkpoints' initializers.
(c) An injected overflow (an input beyond fp16's range at a known step, --shuffle none) skips
    that step: weights, moments and the step counter equal the previous step's checkpoint,
    the scale halves.
(d) Node counts of the training graphs, and the loss-scaling summary, exactly.
(e) Misuse: wrong input count, skip or scalar types, float16 parameters: exit status 1, one
    line naming the node.

Prints "N passed, N failed[, N skipped]".
"""
import csv
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
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402
import mpc_training_ref as ref  # noqa: E402

ARGS = None
DOMAIN = "ai.mpc.training"
STATES = {"sgd": [], "momentum": ["velocity"], "adam": ["m", "v"]}
SCALARS = {"sgd": ["lr"], "momentum": ["lr", "momentum"],
           "adam": ["lr", "beta1", "beta2", "one_minus_beta1", "one_minus_beta2", "epsilon",
                    "bias_correction1", "bias_correction2"]}
OP = {"sgd": "SGDStep", "momentum": "MomentumStep", "adam": "AdamStep"}


def run_mpc(*args, timeout=300):
    return subprocess.run([ARGS.mpc, *args], capture_output=True, text=True, timeout=timeout)


def source(*parts):
    return os.path.join(ARGS.source_dir, *parts)


def step_model(kind, dtype=TensorProto.FLOAT, decay=False, skip=None, shape=(3, 5),
               n_inputs=None, skip_type=TensorProto.BOOL, scalar_type=None):
    """A model of one fused step whose operands are all graph inputs."""
    names = ["param", "grad"] + STATES[kind] + SCALARS[kind]
    types = [dtype] * len(names)
    shapes = [list(shape)] * (2 + len(STATES[kind])) + [[]] * len(SCALARS[kind])
    if scalar_type is not None:
        types[2 + len(STATES[kind])] = scalar_type
    if decay or skip is not None:
        names.append("weight_decay" if decay else "")
        types.append(dtype)
        shapes.append([])
    if skip is not None:
        names.append("skip")
        types.append(skip_type)
        shapes.append([])
    if n_inputs is not None:
        names, types, shapes = names[:n_inputs], types[:n_inputs], shapes[:n_inputs]
    outs = ["param_out"] + [s + "_out" for s in STATES[kind]]
    node = helper.make_node(OP[kind], names, outs, name="step", domain=DOMAIN)
    inputs = [helper.make_tensor_value_info(n, t, s)
              for n, t, s in zip(names, types, shapes) if n]
    outputs = [helper.make_tensor_value_info(o, dtype, list(shape)) for o in outs]
    g = helper.make_graph([node], "fused_step", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid(DOMAIN, 1)])


def feeds_for(kind, np_dtype, rng, decay):
    shape = (3, 5)
    f = {"param": rng.standard_normal(shape).astype(np_dtype),
         "grad": rng.standard_normal(shape).astype(np_dtype)}
    if kind == "momentum":
        f["velocity"] = rng.standard_normal(shape).astype(np_dtype)
    if kind == "adam":
        f["m"] = (0.1 * rng.standard_normal(shape)).astype(np_dtype)
        f["v"] = (0.01 * rng.random(shape) + 1e-4).astype(np_dtype)
    vals = {"lr": 0.01, "momentum": 0.9, "beta1": 0.9, "beta2": 0.999,
            "one_minus_beta1": 1 - 0.9, "one_minus_beta2": 1 - 0.999, "epsilon": 1e-8,
            "bias_correction1": 1 - 0.9 ** 3, "bias_correction2": 1 - 0.999 ** 3}
    for s in SCALARS[kind]:
        f[s] = np.array(vals[s], dtype=np_dtype)
    if decay:
        f["weight_decay"] = np.array(0.05, dtype=np_dtype)
    return f


def emulate(kind, f):
    """The primitive update, one numpy operation (one rounding) per graph node."""
    p, g = f["param"], f["grad"]
    if "weight_decay" in f:
        g = g + f["weight_decay"] * p
    if kind == "sgd":
        return [p - f["lr"] * g]
    if kind == "momentum":
        v = f["momentum"] * f["velocity"] + g
        return [p - f["lr"] * v, v]
    m = f["beta1"] * f["m"] + f["one_minus_beta1"] * g
    v = f["beta2"] * f["v"] + f["one_minus_beta2"] * (g * g)
    d = (m / f["bias_correction1"]) / (np.sqrt(v / f["bias_correction2"]) + f["epsilon"])
    return [p - f["lr"] * d, m, v]


class Runner:
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="mpc_fused_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def run_step(self, model, feeds, tag):
        path = os.path.join(self.tmp, tag + ".onnx")
        onnx.save(model, path)
        npz = os.path.join(self.tmp, tag + ".npz")
        np.savez(npz, **feeds)
        outdir = os.path.join(self.tmp, tag + "_out")
        r = run_mpc("run", path, "--input", npz, "--outputs", outdir)
        self.assertEqual(r.returncode, 0, r.stderr)
        outs = [o.name for o in model.graph.output]
        return [np.load(os.path.join(outdir, o + ".npy")) for o in outs]


class Kernel(Runner, unittest.TestCase):
    def check(self, kind, np_dtype, onnx_dtype, decay):
        rng = np.random.default_rng(7)
        f = feeds_for(kind, np_dtype, rng, decay)
        got = self.run_step(step_model(kind, onnx_dtype, decay), f, f"{kind}_{np_dtype.__name__}")
        want = emulate(kind, f)
        f64 = ref.optimizer_step(kind, f["param"], f["grad"], [f[s] for s in STATES[kind]],
                                 [f[s] for s in SCALARS[kind]], f.get("weight_decay"))
        for name, g, w, o in zip(["param"] + STATES[kind], got, want, f64):
            self.assertEqual(g.dtype, np_dtype, name)
            self.assertEqual(g.tobytes(), w.astype(np_dtype).tobytes(),
                             f"{kind} {name}: not the primitive update bit for bit")
            tol = 1e-5 if np_dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, o, rtol=tol, atol=tol, err_msg=f"{kind} {name}")
        # The parameter moved: the check above is not comparing inputs with inputs.
        self.assertFalse(np.array_equal(got[0], f["param"]))

    def test_float32(self):
        for kind in STATES:
            for decay in (False, True):
                with self.subTest(kind=kind, decay=decay):
                    self.check(kind, np.float32, TensorProto.FLOAT, decay)

    def test_float64(self):
        for kind in STATES:
            with self.subTest(kind=kind):
                self.check(kind, np.float64, TensorProto.DOUBLE, True)

    def test_skip_copies_bit_for_bit(self):
        rng = np.random.default_rng(3)
        for kind in STATES:
            for skip_type, flag in ((TensorProto.BOOL, np.array(True)),
                                    (TensorProto.FLOAT, np.array(2.5, np.float32))):
                with self.subTest(kind=kind, flag=str(flag.dtype)):
                    f = feeds_for(kind, np.float32, rng, True)
                    f["grad"][0, 0] = np.nan  # a skipped step reads no gradient
                    f["param"][0, 1] = -0.0
                    f["skip"] = flag
                    m = step_model(kind, decay=True, skip=True, skip_type=skip_type)
                    got = self.run_step(m, f, f"skip_{kind}")
                    for name, g in zip(["param"] + STATES[kind], got):
                        self.assertEqual(g.tobytes(), f[name].tobytes(), name)

    def test_false_skip_steps(self):
        rng = np.random.default_rng(4)
        for skip_type, flag in ((TensorProto.BOOL, np.array(False)),
                                (TensorProto.FLOAT, np.array(0.0, np.float32))):
            f = feeds_for("adam", np.float32, rng, False)
            want = emulate("adam", f)
            f["skip"] = flag
            got = self.run_step(step_model("adam", skip=True, skip_type=skip_type), f, "noskip")
            for g, w in zip(got, want):
                self.assertEqual(g.tobytes(), w.tobytes())


def initializers(path):
    m = onnx.load(path)
    return {i.name: i.SerializeToString() for i in m.graph.initializer}, m


class TrainRunner(Runner):
    OPTS = {"sgd": ["--optimizer", "sgd", "--weight-decay", "0.01", "--lr", "0.05"],
            "momentum": ["--optimizer", "momentum"],
            "adam": ["--optimizer", "adam", "--weight-decay", "0.01", "--lr", "0.003"]}

    def build(self, model, opt, fused, amp):
        tag = f"{model}_{opt}_{'f' if fused else 'p'}"
        dst = os.path.join(self.tmp, tag + ".onnx")
        r = run_mpc("train-graph", source("models", model + ".onnx"), "--loss", "cross-entropy",
                    *self.OPTS[opt], *(["--fused-optimizer"] if fused else []), "-o", dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        if amp:
            amp_dst = os.path.join(self.tmp, tag + "_amp.onnx")
            r = run_mpc("rewrite", dst, "--target", "fp16", "--loss-scale", "dynamic",
                        "--loss-scale-interval", "5", "-o", amp_dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            return amp_dst, r.stderr
        return dst, r.stdout

    def train(self, path, tag, data=None, steps=120, extra=()):
        log = os.path.join(self.tmp, tag + ".csv")
        ck = os.path.join(self.tmp, tag + "_ck")
        r = run_mpc("run", path, "--train", "--data", data or source("models", "data",
                                                                     "digits.npz"),
                    "--batch", "32", "--steps", str(steps),
                    *(() if "--shuffle" in extra else ("--seed", "5")), "--log", log,
                    "--checkpoint", ck, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(log, "rb") as fh:
            return fh.read(), os.path.join(ck, "checkpoint.onnx")


class Training(TrainRunner, unittest.TestCase):
    def test_bit_identical(self):
        for model in ("digits_mlp", "digits_cnn"):
            for opt in self.OPTS:
                for amp in (False, True):
                    with self.subTest(model=model, opt=opt, amp=amp):
                        runs = []
                        for fused in (False, True):
                            path, _ = self.build(model, opt, fused, amp)
                            runs.append(self.train(path, f"{model}_{opt}_{amp}_{fused}"))
                        (log_p, ck_p), (log_f, ck_f) = runs
                        self.assertEqual(log_p, log_f, "training logs differ")
                        init_p, _ = initializers(ck_p)
                        init_f, mf = initializers(ck_f)
                        self.assertEqual(sorted(init_p), sorted(init_f))
                        for name in init_p:
                            self.assertEqual(init_p[name], init_f[name], name)
                        ops = {n.op_type for n in mf.training_info[0].algorithm.node}
                        self.assertIn(OP[opt], ops)
                        rows = list(csv.DictReader(log_f.decode().splitlines()))
                        self.assertEqual(len(rows), 120)
                        if amp:  # the skip path ran: the growing scale overflowed
                            self.assertGreater(sum(int(r["skipped"]) for r in rows), 0)

    def test_injected_overflow_skips_the_step(self):
        d = dict(np.load(source("models", "data", "digits.npz")))
        bad_step = 6
        d["x"] = d["x"].copy()
        # Finite in fp32 (the trainer refuses non-finite data), inf once cast to fp16.
        d["x"][(bad_step - 1) * 32 + 3, 5] = 1e6
        data = os.path.join(self.tmp, "bad.npz")
        np.savez(data, **d)
        for opt in ("momentum", "adam"):
            with self.subTest(opt=opt):
                path, _ = self.build("digits_mlp", opt, True, True)
                _, before = self.train(path, opt + "_before", data, bad_step - 1,
                                       ("--shuffle", "none"))
                log, after = self.train(path, opt + "_after", data, bad_step,
                                        ("--shuffle", "none"))
                rows = list(csv.DictReader(log.decode().splitlines()))
                self.assertEqual([r["skipped"] for r in rows],
                                 ["0"] * (bad_step - 1) + ["1"])
                ib, mb = initializers(before)
                ia, _ = initializers(after)
                meta = {p.key: p.value for p in mb.metadata_props}
                scale = meta["mpc.training.loss_scale_state"].splitlines()[0]
                step = meta["mpc.training.step_counter"]
                trained = [n for n in ib if n.endswith((".adam_m", ".adam_v", ".momentum"))]
                self.assertTrue(trained)
                for name in ib:
                    if name == scale or name.startswith(scale):
                        continue
                    self.assertEqual(ib[name], ia[name], name)
                self.assertIn(step, ib)
                s0 = numpy_helper.to_array(onnx.TensorProto.FromString(ib[scale]))
                s1 = numpy_helper.to_array(onnx.TensorProto.FromString(ia[scale]))
                self.assertEqual(float(s1), float(s0) / 2)


class NodeCounts(TrainRunner, unittest.TestCase):
    def test_counts_and_summary(self):
        t = self
        counts, summaries = {}, {}
        for fused in (False, True):
            path, _ = t.build("digits_mlp", "adam", fused, False)
            alg = onnx.load(path).training_info[0].algorithm
            counts[fused] = [n.op_type for n in alg.node]
            _, summaries[fused] = t.build("digits_mlp", "adam", fused, True)
        # 4 parameters; Adam with weight decay is 16 element-wise nodes each, fused 1.
        self.assertEqual(len(counts[False]), 94)
        self.assertEqual(len(counts[True]), 34)
        self.assertEqual(counts[True].count("AdamStep"), 4)
        for op in ("Sqrt", "Div"):
            self.assertEqual(counts[True].count(op), 0, op)
        self.assertEqual(counts[False].count("Sqrt"), 4)
        self.assertIn("4 gradient(s) unscaled in fp32 and checked (0 cast(s) to fp32 inserted, "
                      "2 reused), 13 update(s) guarded, 53 node(s) inserted", summaries[False])
        self.assertIn("4 gradient(s) unscaled in fp32 and checked (0 cast(s) to fp32 inserted, "
                      "2 reused), 1 update(s) guarded, 12 update(s) skipped by their fused "
                      "optimizer step, 41 node(s) inserted", summaries[True])
        amp = onnx.load(os.path.join(self.tmp, "digits_mlp_adam_f_amp.onnx"))
        found = {p.key: p.value for p in amp.metadata_props}["mpc.training.found_inf"]
        steps = [n for n in amp.training_info[0].algorithm.node if n.op_type == "AdamStep"]
        self.assertEqual(len(steps), 4)
        for n in steps:
            self.assertEqual(len(n.input), 14)
            self.assertTrue(n.input[12].endswith("weight_decay"), n.input[12])
            self.assertEqual(n.input[13], found)
        wheres = [n for n in amp.training_info[0].algorithm.node
                  if n.op_type == "Where" and n.input[0] == found]
        # The step counter's guard and the dynamic scale's state update.
        self.assertEqual(len([w for w in wheres if "Guard" in w.name]), 1)


class BadInput(Runner, unittest.TestCase):
    def fails(self, model, feeds, *needles):
        path = os.path.join(self.tmp, "bad.onnx")
        onnx.save(model, path)
        npz = os.path.join(self.tmp, "bad.npz")
        np.savez(npz, **feeds)
        outdir = os.path.join(self.tmp, "bad_out")
        r = run_mpc("run", path, "--input", npz, "--outputs", outdir)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertFalse(os.path.exists(outdir))

    def test_too_few_inputs(self):
        rng = np.random.default_rng(0)
        f = feeds_for("adam", np.float32, rng, False)
        m = step_model("adam", n_inputs=6)
        self.fails(m, {k: f[k] for k in ["param", "grad", "m", "v", "lr", "beta1"]},
                   "'step'", "AdamStep")

    def test_skip_of_a_wrong_type(self):
        rng = np.random.default_rng(0)
        f = feeds_for("sgd", np.float32, rng, False)
        f["skip"] = np.array(1, np.int64)
        self.fails(step_model("sgd", skip=True, skip_type=TensorProto.INT64), f, "'step'",
                   "skip")

    def test_scalar_of_another_type(self):
        rng = np.random.default_rng(0)
        f = feeds_for("momentum", np.float32, rng, False)
        f["lr"] = f["lr"].astype(np.float64)
        self.fails(step_model("momentum", scalar_type=TensorProto.DOUBLE), f, "'step'", "lr")

    def test_float16_parameters(self):
        rng = np.random.default_rng(0)
        f = {k: v.astype(np.float16) for k, v in feeds_for("sgd", np.float32, rng, False).items()}
        self.fails(step_model("sgd", TensorProto.FLOAT16), f, "'step'")

    def test_train_graph_float16_model(self):
        m = onnx.load(source("models", "digits_mlp.onnx"))
        for init in m.graph.initializer:
            if init.data_type == TensorProto.FLOAT:
                init.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(init).astype(np.float16), init.name))
        for vi in list(m.graph.input) + list(m.graph.output):
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
        src = os.path.join(self.tmp, "half.onnx")
        onnx.save(m, src)
        dst = os.path.join(self.tmp, "half_train.onnx")
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--fused-optimizer",
                    "-o", dst)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = [l for l in r.stderr.strip().splitlines() if not l.startswith("mpc: note")]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("--fused-optimizer", lines[0])
        self.assertIn("'fc0/W' is f16", lines[0])
        self.assertFalse(os.path.exists(dst))


def main():
    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((Kernel, Training, NodeCounts, BadInput), set_args)


if __name__ == "__main__":
    sys.exit(main())
