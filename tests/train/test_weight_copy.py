"""`mpc rewrite --optimizer-weight-copy` (docs/training.md, "The 16-bit weight copy"): each
parameter updated by a fused optimizer step and cast to the 16-bit type gets a persistent
copy that the step writes (its optional param_copy output), and the forward reads the copy
instead of a per-step Cast. The way a user runs it:

    mpc train-graph models/digits_mlp.onnx --fused-optimizer ... -o m.train.onnx
    mpc rewrite m.train.onnx --optimizer-weight-copy -o m.amp.onnx
    mpc run m.amp.onnx --train --data models/data/digits.npz --seed 5 --log m.csv ...

(a) Kernel: one-node SGDStep/MomentumStep/AdamStep models with the param_copy output, f16
    and bf16, run by `mpc run`: the copy is the float32 param the step computes (itself bit
    for bit the float32 emulation of the update) rounded to nearest even, against a float64
    numpy oracle (numpy's float64 -> float16, and bfloat16 rounding done on the float32
    bits in integers); SGD with lr 0 leaves the param as given, so the rounding is checked
    on chosen values (ties, the largest finite, overflow to inf, subnormals, -0). A true
    skip flag gives the input param rounded, param and states bit for bit.
(b) Training: digits_mlp and digits_cnn (Adam with weight decay), fp16 with dynamic loss
    scaling (interval 5: the scale grows into overflows, so steps are skipped) and bf16,
    120 steps at one seed, with and without the flag: logs and stdout byte-identical,
    every initializer of the final checkpoints byte-identical, and each copy equal to its
    final master weight rounded.
(c) An injected overflow skips its step: weights, moments, the step counter and the copies
    equal the previous step's checkpoint, the scale halves.
(d) Resume from a mid-run checkpoint gives the straight run's checkpoint byte for byte.
(e) Node counts: exactly the parameter Casts are gone, nothing is added; the summary line;
    the same rewrite twice gives the same bytes.
(f) The checkpoint still runs as an inference model (`mpc run`), like the one without; one
    step in onnx.reference gives the Casts' loss and updates, and the copies rounded.
(g) The CUDA kernel table places every node of the step with the copies on the GPU
    (`--placement-only`, no GPU needed).
(h) Misuse: one line, exit 1, no output: no fused step, not a training model, no cast
    parameter, copies already present; `mpc run` of a step whose param_copy has no copy_to
    or a double param.

--device cuda (on a GPU machine) runs the kernel cases and the training on the GPU: the
CUDA kernel against the same oracles, and CUDA training with and without the flag.
Prints "N passed, N failed[, N skipped]".
"""
import csv
import itertools
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
# The one-node step models' operands and the float32 emulation of the update.
from test_fused_optimizer import OP, SCALARS, STATES, emulate, feeds_for  # noqa: E402

ARGS = None
DEVICE = "cpu"
DOMAIN = "ai.mpc.training"
COPY = {"f16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
COPIES_KEY = "mpc.training.weight_copies"


def run_mpc(*args, timeout=300):
    return subprocess.run([ARGS.mpc, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def source(*parts):
    return os.path.join(ARGS.source_dir, *parts)


# ------------------------------------------------------------------------- oracles


def f16_bits(p32):
    """float32 -> float16 through float64 (numpy's double -> half rounds correctly, and
    the float32 is exact in float64): the uint16 bits."""
    with np.errstate(over="ignore"):
        return np.asarray(p32, np.float32).astype(np.float64).astype(np.float16).view(np.uint16)


def bf16_bits(p32):
    """float32 -> bfloat16 rounded to nearest even on the bits, in integers: add 0x7fff
    plus the kept part's lowest bit, drop the low half (NaN stays a quiet NaN)."""
    b = np.asarray(p32, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(p32, np.float32))
    r[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def copy_bits(p32, dt):
    return f16_bits(p32) if dt == "f16" else bf16_bits(p32)


def bits_of(a):
    """The uint16 bits of a float16 or bfloat16 array as numpy_helper gives it, or of a
    bfloat16 output `mpc run` wrote as float32 (exact: the low 16 bits are zero)."""
    a = np.asarray(a)
    if a.dtype == np.float32:
        b = a.view(np.uint32)
        assert not np.any(b & 0xFFFF), "a float32 that is no widened bfloat16"
        return (b >> 16).astype(np.uint16)
    return a.view(np.uint16)


# -------------------------------------------------------------------------- kernel


def step_model(kind, dt, decay=False, skip=False, shape=(3, 5), ptype=TensorProto.FLOAT,
               copy_to=True):
    names = ["param", "grad"] + STATES[kind] + SCALARS[kind]
    shapes = [list(shape)] * (2 + len(STATES[kind])) + [[]] * len(SCALARS[kind])
    types = [ptype] * len(names)
    if decay or skip:
        names.append("weight_decay" if decay else "")
        types.append(ptype)
        shapes.append([])
    if skip:
        names.append("skip")
        types.append(TensorProto.BOOL)
        shapes.append([])
    outs = ["param_out"] + [s + "_out" for s in STATES[kind]] + ["param_copy"]
    node = helper.make_node(OP[kind], names, outs, name="step", domain=DOMAIN,
                            **({"copy_to": COPY[dt]} if copy_to else {}))
    inputs = [helper.make_tensor_value_info(n, t, s)
              for n, t, s in zip(names, types, shapes) if n]
    outputs = [helper.make_tensor_value_info(o, ptype, list(shape)) for o in outs[:-1]]
    outputs.append(helper.make_tensor_value_info("param_copy", COPY[dt], list(shape)))
    g = helper.make_graph([node], "step_with_copy", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid(DOMAIN, 1)])


class Runner:
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="mpc_wcopy_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp, name)

    def ok(self, *args):
        r = run_mpc(*args)
        self.assertEqual(r.returncode, 0, f"mpc {' '.join(map(str, args[:6]))}:\n{r.stderr}")
        return r


class Kernel(Runner, unittest.TestCase):
    def run_step(self, model, feeds, tag):
        path = self.path(tag + ".onnx")
        onnx.save(model, path)
        npz = self.path(tag + ".npz")
        np.savez(npz, **feeds)
        outdir = self.path(tag + "_out")
        self.ok("run", path, "--device", DEVICE, "--input", npz, "--outputs", outdir)
        return [np.load(os.path.join(outdir, o.name + ".npy")) for o in model.graph.output]

    def test_copy_of_the_updated_param(self):
        rng = np.random.default_rng(11)
        for kind, dt in itertools.product(STATES, COPY):
            with self.subTest(kind=kind, dt=dt):
                f = feeds_for(kind, np.float32, rng, True)
                *got, copy = self.run_step(step_model(kind, dt, decay=True), f,
                                           f"{kind}_{dt}")
                want = emulate(kind, f)
                for name, g, w in zip(["param"] + STATES[kind], got, want):
                    self.assertEqual(g.tobytes(), w.tobytes(), f"{kind} {name}")
                self.assertEqual(copy.shape, f["param"].shape)
                self.assertEqual(bits_of(copy).tobytes(), copy_bits(got[0], dt).tobytes(),
                                 f"{kind} {dt}: copy is not the new param rounded")
                # The float64 update rounds to the same 16-bit value but for the
                # float32 rounding in between: within one 16-bit ulp of it.
                p64 = ref.optimizer_step(kind, f["param"], f["grad"],
                                         [f[s] for s in STATES[kind]],
                                         [f[s] for s in SCALARS[kind]],
                                         f["weight_decay"])[0]
                c = (bits_of(copy).astype(np.uint32) << 16).view(np.float32) \
                    if dt == "bf16" else copy
                c = c.astype(np.float64)
                ulp = 2.0 ** (np.floor(np.log2(np.abs(p64))) - (10 if dt == "f16" else 7))
                self.assertTrue(np.all(np.abs(c - p64) <= ulp), f"{kind} {dt}")
                self.assertFalse(np.array_equal(got[0], f["param"]))

    def test_rounding_of_chosen_values(self):
        """SGD with lr 0 returns the param as given: its copy is the Cast of these values."""
        vals = np.array([
            1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,      # f16 ties: to even (down, up)
            1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8,        # bf16 ties
            65504.0, 65519.0, 65520.0, -70000.0,         # f16 max, below and at overflow
            2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -24,      # f16 subnormal ties and smallest
            -0.0, 0.0, 3.0e38, -1.0e-40,                 # bf16 large, float32 subnormal
            0.1, -0.3, 1.0 / 3.0, 1234.5678, -2.0 ** -14, 7.0, 1e-8, -1e4, 2.0 ** 16,
        ], np.float32).reshape(4, 6)
        for dt in COPY:
            with self.subTest(dt=dt):
                f = feeds_for("sgd", np.float32, np.random.default_rng(0), False)
                f["param"] = vals
                f["grad"] = np.ones_like(vals)
                f["lr"] = np.array(0.0, np.float32)
                p, copy = self.run_step(step_model("sgd", dt, shape=vals.shape), f,
                                        f"round_{dt}")
                self.assertEqual(p.tobytes(), vals.tobytes())
                self.assertEqual(bits_of(copy).tobytes(), copy_bits(vals, dt).tobytes())
                if dt == "f16":  # the oracle itself, on values whose result is known
                    self.assertEqual(float(copy.flat[0]), 1.0)
                    self.assertEqual(float(copy.flat[1]), 1.0 + 2.0 ** -9)
                    self.assertEqual(float(copy.flat[5]), 65504.0)
                    self.assertEqual(float(copy.flat[6]), np.inf)
                    self.assertEqual(float(copy.flat[8]), 0.0)
                    self.assertEqual(float(copy.flat[9]), 2.0 ** -23)

    def test_skip_rounds_the_unchanged_param(self):
        rng = np.random.default_rng(5)
        for kind, dt in itertools.product(STATES, COPY):
            with self.subTest(kind=kind, dt=dt):
                f = feeds_for(kind, np.float32, rng, True)
                f["grad"][0, 0] = np.nan  # a skipped step reads no gradient
                f["param"][0, 1] = -0.0
                f["skip"] = np.array(True)
                *got, copy = self.run_step(step_model(kind, dt, decay=True, skip=True), f,
                                           f"skip_{kind}_{dt}")
                for name, g in zip(["param"] + STATES[kind], got):
                    self.assertEqual(g.tobytes(), f[name].tobytes(), name)
                self.assertEqual(bits_of(copy).tobytes(),
                                 copy_bits(f["param"], dt).tobytes())


# ------------------------------------------------------------------------ training


def initializers(path):
    m = onnx.load(path)
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}, m


def metadata(m):
    return {p.key: p.value for p in m.metadata_props}


class TrainRunner(Runner):
    STEPS = 120

    def build(self, model, target, copy, fused=True, tag=""):
        train = self.path(f"{model}_{'f' if fused else 'p'}.train.onnx")
        if not os.path.exists(train):
            self.ok("train-graph", source("models", model + ".onnx"), "--loss", "cross-entropy",
                    "--optimizer", "adam", "--weight-decay", "0.01", "--lr", "0.003",
                    *(["--fused-optimizer"] if fused else []), "-o", train)
        out = self.path(f"{model}_{target}_{'copy' if copy else 'cast'}{tag}.onnx")
        scaling = ["--loss-scale", "dynamic", "--loss-scale-interval", "5"] \
            if target == "fp16" else []
        r = self.ok("rewrite", train, "--target", target, *scaling,
                    *(["--optimizer-weight-copy"] if copy else []), "-o", out)
        return out, r.stderr

    def train(self, path, tag, steps=None, data=None, extra=()):
        log = self.path(tag + ".csv")
        ck = self.path(tag + "_ck")
        r = self.ok("run", path, "--train", "--device", DEVICE, "--data",
                    data or source("models", "data", "digits.npz"), "--batch", 32,
                    "--steps", steps or self.STEPS, "--eval-every", 40, "--log", log,
                    "--checkpoint", ck, *(extra or ("--seed", 5)))
        # On a GPU, the placement line counts the step's nodes, which the fused form has
        # fewer of; every node must be on the device, and the rest of the output must
        # match byte for byte.
        stdout = tl.without_placement(self, r.stdout)
        with open(log, "rb") as fh:
            return fh.read(), stdout, os.path.join(ck, "checkpoint.onnx")

    def check_copies(self, inits, m, target):
        """Every copy listed in the metadata is its master weight rounded, bit for bit."""
        lines = metadata(m)[COPIES_KEY].splitlines()
        self.assertTrue(lines)
        for line in lines:
            param, copy = line.split("=")
            want = copy_bits(inits[param], "f16" if target == "fp16" else "bf16")
            self.assertEqual(bits_of(inits[copy]).tobytes(), want.tobytes(), copy)
        return dict(line.split("=") for line in lines)


class Training(TrainRunner, unittest.TestCase):
    def test_byte_identical_to_the_casts(self):
        for model in ("digits_mlp", "digits_cnn"):
            for target in ("fp16", "bf16"):
                with self.subTest(model=model, target=target):
                    cast, _ = self.build(model, target, False)
                    copy, _ = self.build(model, target, True)
                    log_a, out_a, ck_a = self.train(cast, f"{model}_{target}_cast")
                    log_b, out_b, ck_b = self.train(copy, f"{model}_{target}_copy")
                    self.assertEqual(log_a, log_b, "training logs differ")
                    self.assertEqual(out_a, out_b)
                    ia, _ = initializers(ck_a)
                    ib, mb = initializers(ck_b)
                    copies = self.check_copies(ib, mb, target)
                    self.assertEqual(sorted(ia), sorted(set(ib) - set(copies.values())))
                    for name in ia:
                        self.assertEqual(ia[name].tobytes(), ib[name].tobytes(), name)
                    rows = list(csv.DictReader(log_b.decode().splitlines()))
                    self.assertEqual(len(rows), self.STEPS)
                    if target == "fp16":  # the skip path ran
                        self.assertGreater(sum(int(r["skipped"]) for r in rows), 0)

    def test_initializers_listed_as_inputs(self):
        # torch.onnx.export(keep_initializers_as_inputs=True) lists every
        # initializer among the graph inputs too (IR 3 style): the parameters
        # are still the trainer's state, and the copies apply to them (the
        # rewrite once refused: "no parameter ... is cast"). Training gives
        # the bytes of the same model without the listing.
        m = onnx.load(source("models", "digits_mlp.onnx"))
        listed = {i.name for i in m.graph.input}
        for init in m.graph.initializer:
            if init.name not in listed:
                m.graph.input.append(helper.make_tensor_value_info(
                    init.name, init.data_type, list(init.dims)))
        onnx.save(m, self.path("listed.onnx"))
        train = self.path("listed.train.onnx")
        self.ok("train-graph", self.path("listed.onnx"), "--loss", "cross-entropy",
                "--optimizer", "adam", "--weight-decay", "0.01", "--lr", "0.003",
                "--fused-optimizer", "-o", train)
        out = self.path("listed_fp16_copy.onnx")
        r = self.ok("rewrite", train, "--target", "fp16", "--loss-scale", "dynamic",
                    "--loss-scale-interval", "5", "--optimizer-weight-copy", "-o", out)
        self.assertIn("Weight copies: 4 parameter(s) read through a persistent float16 copy",
                      r.stderr)
        plain, _ = self.build("digits_mlp", "fp16", True)
        log_a, out_a, ck_a = self.train(plain, "plain_copy")
        log_b, out_b, ck_b = self.train(out, "listed_copy")
        self.assertEqual(log_a, log_b)
        self.assertEqual(out_a, out_b)
        ia, _ = initializers(ck_a)
        ib, mb = initializers(ck_b)
        self.check_copies(ib, mb, "fp16")
        self.assertEqual(sorted(ia), sorted(ib))
        for name in ia:
            self.assertEqual(ia[name].tobytes(), ib[name].tobytes(), name)

    def test_injected_overflow_skips_the_step(self):
        d = dict(np.load(source("models", "data", "digits.npz")))
        bad_step = 6
        d["x"] = d["x"].copy()
        # Finite in fp32 (the trainer refuses non-finite data), inf once cast to fp16.
        d["x"][(bad_step - 1) * 32 + 3, 5] = 1e6
        data = self.path("bad.npz")
        np.savez(data, **d)
        path, _ = self.build("digits_mlp", "fp16", True)
        _, _, before = self.train(path, "before", bad_step - 1, data, ("--shuffle", "none"))
        log, _, after = self.train(path, "after", bad_step, data, ("--shuffle", "none"))
        rows = list(csv.DictReader(log.decode().splitlines()))
        self.assertEqual([r["skipped"] for r in rows], ["0"] * (bad_step - 1) + ["1"])
        ib, mb = initializers(before)
        ia, _ = initializers(after)
        scale = metadata(mb)["mpc.training.loss_scale_state"].splitlines()[0]
        copies = self.check_copies(ia, mb, "fp16")
        self.assertEqual(len(copies), 4)
        for name in ib:
            if not name.startswith(scale):
                self.assertEqual(ib[name].tobytes(), ia[name].tobytes(), name)
        self.assertEqual(float(ia[scale]), float(ib[scale]) / 2)
        # The run did move the copies before the skipped step.
        i0, _ = initializers(path)
        self.assertTrue(any(i0[c].tobytes() != ib[c].tobytes() for c in copies.values()))

    def test_resume_is_byte_identical(self):
        path, _ = self.build("digits_cnn", "fp16", True)
        _, _, straight = self.train(path, "straight", 60)
        _, _, first = self.train(path, "first", 25)
        self.train(path, "resumed", 60, extra=("--resume", first))
        with open(straight, "rb") as a, open(self.path("resumed_ck/checkpoint.onnx"), "rb") as c:
            self.assertEqual(a.read(), c.read(), "straight and resumed checkpoints differ")

    def test_onnx_reference_step(self):
        """One step of the algorithm in onnx.reference (mpc_training_ref's ops): the same
        loss and updates as the graph with the Casts, each copy the new param rounded."""
        from onnx.reference import ReferenceEvaluator
        d = np.load(source("models", "data", "digits.npz"))
        feeds = {"x": d["x"][:32].astype(np.float32), "labels": d["labels"][:32]}
        results = []
        for copy in (False, True):
            path, _ = self.build("digits_mlp", "fp16", copy)
            m = onnx.load(path)
            alg = m.training_info[0].algorithm
            g = helper.make_graph(alg.node, "step", alg.input, alg.output,
                                  list(m.graph.initializer))
            ev = ReferenceEvaluator(helper.make_model(g, opset_imports=m.opset_import),
                                    new_ops=ref.OPS)
            out = dict(zip([o.name for o in alg.output], ev.run(None, feeds)))
            bound = {e.key: out[e.value] for e in m.training_info[0].update_binding}
            results.append((out[alg.output[0].name], bound, m))
        (loss_a, new_a, _), (loss_b, new_b, mb) = results
        self.assertEqual(loss_a.tobytes(), loss_b.tobytes())
        for name, v in new_a.items():
            self.assertEqual(v.tobytes(), new_b[name].tobytes(), name)
        for line in metadata(mb)[COPIES_KEY].splitlines():
            param, copy = line.split("=")
            self.assertEqual(bits_of(new_b[copy]).tobytes(), f16_bits(new_b[param]).tobytes())

    def test_checkpoint_runs_for_inference(self):
        x = np.load(source("models", "data", "digits.npz"))["x"][:16].astype(np.float32)
        npy = self.path("x.npy")
        np.save(npy, x)
        outs = []
        for copy in (False, True):
            path, _ = self.build("digits_mlp", "fp16", copy)
            _, _, ck = self.train(path, f"infer_{copy}", 40)
            outdir = self.path(f"infer_{copy}_out")
            self.ok("run", ck, "--device", DEVICE, "--input", f"x={npy}", "--outputs", outdir)
            outs.append(np.load(os.path.join(outdir, "probs.npy")))
            onnx.checker.check_model(onnx.load(ck))
        self.assertEqual(outs[0].tobytes(), outs[1].tobytes())


class NodeCounts(TrainRunner, unittest.TestCase):
    def test_casts_gone_nothing_added(self):
        for model, target, removed in (("digits_mlp", "fp16", 4), ("digits_mlp", "bf16", 4),
                                       ("digits_cnn", "fp16", 6), ("digits_cnn", "bf16", None)):
            with self.subTest(model=model, target=target):
                cast, _ = self.build(model, target, False)
                copy, summary = self.build(model, target, True)
                a = onnx.load(cast).training_info[0].algorithm
                b = onnx.load(copy)
                alg = b.training_info[0].algorithm
                params = {line.split("=")[0] for line in metadata(b)[COPIES_KEY].splitlines()}
                param_casts = [n for n in a.node if n.op_type == "Cast" and n.input[0] in params]
                if removed is not None:
                    self.assertEqual(len(param_casts), removed)
                    self.assertEqual(len(params), removed)
                self.assertEqual(len(alg.node), len(a.node) - len(param_casts))
                self.assertFalse([n for n in alg.node
                                  if n.op_type == "Cast" and n.input[0] in params])
                ops_a = sorted(n.op_type for n in a.node if n not in param_casts)
                self.assertEqual(sorted(n.op_type for n in alg.node), ops_a)
                self.assertIn(f"Weight copies: {len(params)} parameter(s) read through a "
                              f"persistent {'float16' if target == 'fp16' else 'bfloat16'} "
                              f"copy written by their fused optimizer step "
                              f"({len(param_casts)} parameter cast(s) removed", summary)
                steps = [n for n in alg.node if n.op_type == "AdamStep"]
                with_copy = [n for n in steps if len(n.output) == 4]
                self.assertEqual(len(with_copy), len(params))
                binding = dict((e.key, e.value) for e in b.training_info[0].update_binding)
                for line in metadata(b)[COPIES_KEY].splitlines():
                    p, c = line.split("=")
                    step = next(n for n in with_copy if n.input[0] == p)
                    self.assertEqual(binding[c], step.output[3])
                    self.assertEqual(step.attribute[0].name, "copy_to")
                # Deterministic: the same rewrite again gives the same bytes.
                again, _ = self.build(model, target, True, tag="_again")
                with open(copy, "rb") as x, open(again, "rb") as y:
                    self.assertEqual(x.read(), y.read(), "the rewrite is not deterministic")


    def test_cuda_placement_of_the_steps(self):
        """`--placement-only` (the CUDA kernel table, no GPU): every node of the step with
        the copies is placed on the GPU, the AdamSteps with param_copy included."""
        for target in ("fp16", "bf16"):
            with self.subTest(target=target):
                path, _ = self.build("digits_mlp", target, True)
                tl.check_all_on_cuda(self, ARGS.mpc, path,
                                     source("models", "data", "digits.npz"))


class BadInput(TrainRunner, unittest.TestCase):
    def refused(self, model, *needles, flags=()):
        out = self.path("out.onnx")
        r = run_mpc("rewrite", model, "--optimizer-weight-copy", *flags, "-o", out)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = [l for l in r.stderr.strip().splitlines()
                 if l.startswith("mpc: error") or "error" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        for n in ("--optimizer-weight-copy",) + needles:
            self.assertIn(n, lines[0])
        self.assertFalse(os.path.exists(out))

    def test_no_fused_step(self):
        self.ok("train-graph", source("models", "digits_mlp.onnx"), "--loss", "cross-entropy",
                "-o", self.path("p.onnx"))
        self.refused(self.path("p.onnx"), "no fused optimizer step", "--fused-optimizer")

    def test_not_a_training_model(self):
        self.refused(source("models", "digits_mlp.onnx"), "'", "not a training model")

    def test_no_parameter_cast(self):
        self.ok("train-graph", source("models", "digits_mlp.onnx"), "--loss", "cross-entropy",
                "--fused-optimizer", "-o", self.path("f.onnx"))
        self.refused(self.path("f.onnx"), "is cast to float16", flags=("--deny-nodes", ".*"))

    def run_refused(self, model, feeds, *needles):
        """`mpc run` of a one-node step: exit 1, one line naming the node, no outputs."""
        path, npz, outdir = self.path("bad.onnx"), self.path("bad.npz"), self.path("bad_out")
        onnx.save(model, path)
        np.savez(npz, **feeds)
        r = run_mpc("run", path, "--input", npz, "--outputs", outdir)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for n in ("'step'", "param_copy") + needles:
            self.assertIn(n, lines[0])
        self.assertFalse(os.path.exists(outdir))

    def test_param_copy_without_copy_to(self):
        f = feeds_for("sgd", np.float32, np.random.default_rng(0), False)
        self.run_refused(step_model("sgd", "f16", copy_to=False), f, "copy_to")

    def test_param_copy_of_a_double_param(self):
        f = feeds_for("sgd", np.float64, np.random.default_rng(0), False)
        self.run_refused(step_model("sgd", "f16", ptype=TensorProto.DOUBLE), f, "float param")

    def test_copies_already_present(self):
        path, _ = self.build("digits_mlp", "fp16", True)
        self.refused(path, COPIES_KEY)


def main():
    global DEVICE
    DEVICE = tl.pop_device_arg()  # ours; the rest is mpc_trainlib's

    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((Kernel, Training, NodeCounts, BadInput), set_args)


if __name__ == "__main__":
    sys.exit(main())
