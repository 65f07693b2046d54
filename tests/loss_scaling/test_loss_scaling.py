#!/usr/bin/env python3
"""Loss scaling in `mpc rewrite` (docs/training.md, "Loss scaling").

Training models are built by hand (ls_models.py) following docs/training.md. Oracles: the ONNX
reference evaluator running the algorithm graph (onnx.reference, shares no code with mpc), numpy
for the expected scale trajectory, and the fp32 original model for the AMP step.

  structure   seed scaled, one cast per parameter, gradients unscaled in fp32, guarded updates,
              metadata, ONNX full check
  numerics    one rewritten step vs one fp32 step; `mpc run` vs onnx.reference on the step
  overflow    an injected overflow skips the step bit for bit, halves S, flags the gradient
  growth      S doubles after `interval` clean steps, clamps at max and min
  modes       static, none, off, bf16 default, environment variables, bad values
  idempotence rewrite(rewrite(m)) == rewrite(m)
  inference   models/*.onnx rewrite exactly as the reference build does

Usage: test_loss_scaling.py --mpc build/tools/mpc --source-dir . [--reference-mpc OTHER_MPC]
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import mpc_testlib as lib  # noqa: E402

lib.require_onnx_reference()

import warnings  # noqa: E402
warnings.filterwarnings("ignore", category=RuntimeWarning)  # overflow is what we inject

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import ls_models  # noqa: E402
import mpc_trainlib  # noqa: E402

ARGS = None
# The algorithm input is named t/X: mpc's importer rejects an algorithm input that shadows an
# inference-graph input (docs/training.md wants the same name); see test_contract_input_names.
DATA = "t/X"


def md(model):
    return mpc_trainlib.metadata(model)


def lines(text):
    return [x for x in text.splitlines() if x]


class Rewritten:
    def __init__(self, rc, stdout, stderr, model, path):
        self.rc, self.stdout, self.stderr, self.model, self.path = rc, stdout, stderr, model, path


def rewrite(model, *flags, env=None, tmp=None, name="in"):
    """Runs mpc rewrite on `model` (a ModelProto or a path)."""
    tmp = tmp or tempfile.mkdtemp(prefix="mpc-ls-")
    if isinstance(model, str):
        src = model
    else:
        src = os.path.join(tmp, name + ".onnx")
        onnx.save(model, src)
    out = os.path.join(tmp, name + ".out.onnx")
    if os.path.exists(out):
        os.remove(out)
    e = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    e.update(env or {})
    p = subprocess.run([ARGS.mpc, "rewrite", src, "-o", out, *flags], capture_output=True,
                       text=True, env=e, timeout=120)
    m = onnx.load(out) if p.returncode == 0 and os.path.exists(out) else None
    return Rewritten(p.returncode, p.stdout, p.stderr, m, out)


def with_state(model, state):
    """A copy of `model` whose inference initializers take the values in `state`."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for init in m.graph.initializer:
        if init.name in state:
            init.CopyFrom(numpy_helper.from_array(np.asarray(state[init.name]), init.name))
    return m


def initial_state(model):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def step(model, feeds, state=None):
    """One step of the algorithm in onnx.reference: (outputs by name, new state)."""
    m = with_state(model, state) if state else model
    alg = mpc_trainlib.algorithm_as_model(m)
    sess = mpc_trainlib.reference_evaluator(alg)
    names = [o.name for o in alg.graph.output]
    vals = sess.run(None, feeds)
    outs = dict(zip(names, vals))
    new_state = dict(state or initial_state(model))
    for b in model.training_info[0].update_binding:
        new_state[b.key] = outs[b.value]
    return outs, new_state


def unscaled_values(model, feeds, state=None):
    """{gradient: the fp32 value the optimizer reads}, by running the algorithm with those
    values as extra outputs (found through the graph: the reader of the gradient, or of its
    one fp32 Cast, that multiplies by 1/S; the gradient itself in mode none)."""
    m = with_state(model, state) if state else model
    alg = mpc_trainlib.algorithm_as_model(m)
    g = alg.graph
    want = {}
    for _, grad in mpc_trainlib.gradient_pairs(model):
        x = grad
        casts = [n for n in readers(g, grad) if n.op_type == "Cast"]
        if casts:
            x = casts[0].output[0]
        muls = [n for n in readers(g, x) if n.op_type == "Mul" and
                any(i.endswith("/Reciprocal") for i in n.input)]
        want[grad] = muls[0].output[0] if muls else x
    have = {o.name for o in g.output}
    for v in sorted(set(want.values()) - have):
        g.output.append(onnx.helper.make_empty_tensor_value_info(v))
    sess = mpc_trainlib.reference_evaluator(alg)
    names = [o.name for o in g.output]
    vals = dict(zip(names, sess.run(None, feeds)))
    return {grad: vals[v] for grad, v in want.items()}


def rel_l2(ref, got):
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    n = np.linalg.norm(ref)
    return np.linalg.norm(ref - got) / (n if n > 0 else 1.0)


def nodes_by_output(graph):
    return {o: n for n in graph.node for o in n.output}


def readers(graph, name):
    return [n for n in graph.node if name in n.input]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mpc-ls-")
        cls.orig = ls_models.mlp_training_model(data_name=DATA)
        cls.feeds = ls_models.mlp_data()
        cls.feeds = {DATA: cls.feeds["X"], "labels": cls.feeds["labels"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def rw(self, *flags, model=None, env=None, name="in"):
        r = rewrite(model if model is not None else self.orig, *flags, env=env, tmp=self.tmp,
                    name=name)
        return r

    def ok(self, *flags, **kw):
        r = self.rw(*flags, **kw)
        self.assertEqual(r.rc, 0, r.stderr)
        return r


class Structure(Base):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = rewrite(cls.orig, "-v", "2", tmp=cls.tmp, name="structure")
        assert r.rc == 0, r.stderr
        cls.r = r
        cls.m = r.model
        cls.alg = cls.m.training_info[0].algorithm
        cls.meta = md(cls.m)

    def test_metadata(self):
        self.assertEqual(self.meta["mpc.training.loss_scale"],
                         "dynamic init=32768 growth=2 backoff=0.5 interval=2000 min=1 max=16777216")
        state = lines(self.meta["mpc.training.loss_scale_state"])
        self.assertEqual(len(state), 2)
        inits = {t.name: t for t in self.m.graph.initializer}
        s, tr = inits[state[0]], inits[state[1]]
        self.assertEqual((s.data_type, list(s.dims)), (onnx.TensorProto.FLOAT, []))
        self.assertEqual(numpy_helper.to_array(s), np.float32(32768))
        self.assertEqual((tr.data_type, list(tr.dims)), (onnx.TensorProto.INT64, []))
        outs = {o.name: o for o in self.alg.output}
        fi = outs[self.meta["mpc.training.found_inf"]]
        self.assertEqual(fi.type.tensor_type.elem_type, onnx.TensorProto.BOOL)
        gn = outs[self.meta["mpc.training.grad_nonfinite"]]
        self.assertEqual(gn.type.tensor_type.elem_type, onnx.TensorProto.FLOAT)
        binding = {b.key: b.value for b in self.m.training_info[0].update_binding}
        self.assertIn(state[0], binding)
        self.assertIn(state[1], binding)
        self.assertEqual(self.alg.output[0].name, "loss")

    def test_full_check(self):
        onnx.checker.check_model(self.m, full_check=True)
        onnx.checker.check_model(mpc_trainlib.algorithm_as_model(self.m), full_check=True)

    def test_seed_scaled(self):
        seed = self.meta["mpc.training.loss_grad_seed"]
        scale = lines(self.meta["mpc.training.loss_scale_state"])[0]
        rd = readers(self.alg, seed)
        self.assertEqual(len(rd), 1, [n.name for n in rd])
        self.assertEqual(rd[0].op_type, "Mul")
        self.assertEqual(sorted(rd[0].input), sorted([seed, scale]))
        # The loss itself is not scaled: the loss output is still the ReduceMean.
        prod = nodes_by_output(self.alg)
        self.assertEqual(prod["loss"].op_type, "ReduceMean")

    def test_one_cast_per_parameter(self):
        inits = {t.name for t in self.m.graph.initializer}
        defined = {o for n in self.alg.node for o in n.output} | {i.name for i in self.alg.input}
        for n in self.alg.node:
            for i in n.input:
                if i:
                    self.assertTrue(i in defined or i in inits,
                                    f"{n.name} reads '{i}', not an inference initializer")
        for p, _ in mpc_trainlib.gradient_pairs(self.m):
            casts = [n for n in self.alg.node if n.op_type == "Cast" and n.input[0] == p]
            self.assertEqual(len(casts), 1, f"{p}: {[c.name for c in casts]}")
            self.assertEqual(casts[0].attribute[0].i, onnx.TensorProto.FLOAT16)
        # The master weights stay fp32.
        for t in self.m.graph.initializer:
            if t.name in dict(mpc_trainlib.gradient_pairs(self.m)):
                self.assertEqual(t.data_type, onnx.TensorProto.FLOAT)

    def test_gradients_unscaled_in_fp32(self):
        alg_model = mpc_trainlib.algorithm_as_model(self.m)
        inferred = onnx.shape_inference.infer_shapes(alg_model, strict_mode=True)
        types = {v.name: v.type.tensor_type.elem_type
                 for v in list(inferred.graph.value_info) + list(inferred.graph.output)
                 + list(inferred.graph.input)}
        prod = nodes_by_output(self.alg)
        scale = lines(self.meta["mpc.training.loss_scale_state"])[0]
        recips = {n.output[0] for n in self.alg.node
                  if n.op_type == "Reciprocal" and n.input[0] == scale}
        self.assertEqual(len(recips), 1)
        half = 0
        for p, g in mpc_trainlib.gradient_pairs(self.m):
            x = g
            if types[g] != onnx.TensorProto.FLOAT:
                half += 1
                casts = [n for n in readers(self.alg, g) if n.op_type == "Cast"]
                self.assertEqual(len(casts), 1, g)
                self.assertEqual(casts[0].attribute[0].i, onnx.TensorProto.FLOAT)
                # Every reader of the 16-bit gradient is that cast.
                self.assertEqual(len(readers(self.alg, g)), 1, g)
                x = casts[0].output[0]
            rd = readers(self.alg, x)
            self.assertEqual(len(rd), 1, f"{x} read by {[n.name for n in rd]}")
            self.assertEqual(rd[0].op_type, "Mul")
            self.assertIn(next(iter(recips)), rd[0].input)
            u = rd[0].output[0]
            self.assertEqual(types[u], onnx.TensorProto.FLOAT)
            # The optimizer reads u (and the check reads it too).
            ops = sorted(n.op_type for n in readers(self.alg, u))
            self.assertIn("Add", ops, f"{u}: the momentum update must read the unscaled value")
        self.assertGreater(half, 0, "AMP should leave some gradient 16-bit in this model")
        del prod

    def test_updates_guarded(self):
        prod = nodes_by_output(self.alg)
        found = self.meta["mpc.training.found_inf"]
        state = lines(self.meta["mpc.training.loss_scale_state"])
        for b in self.m.training_info[0].update_binding:
            n = prod[b.value]
            self.assertEqual(n.op_type, "Where", b.value)
            self.assertEqual(n.input[0], found)
            if b.key not in state:
                self.assertEqual(n.input[1], b.key)

    def test_decision_log(self):
        for what in ("Loss scaling: mode dynamic", "seed 'grad/seed' scaled", "found_inf",
                     "guarded", "dynamic update", "gradient 'grad/W1' of 'W1'"):
            self.assertIn(what, self.r.stderr)
        summary = [l for l in self.r.stderr.splitlines() if l.startswith("Loss scaling: dynamic init=")]
        self.assertEqual(len(summary), 1, self.r.stderr)
        self.assertIn("4 gradient(s)", summary[0])
        self.assertIn("9 update(s) guarded", summary[0])

    def test_fp32_nodes_pinned(self):
        # The loss and optimizer nodes stay fp32 (mpc.training.fp32_nodes).
        alg_model = mpc_trainlib.algorithm_as_model(self.m)
        inferred = onnx.shape_inference.infer_shapes(alg_model)
        types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
        for v in ("loss/diff", "loss/sq", "opt/W1/v/Unguarded", "opt/W1/dp"):
            self.assertEqual(types.get(v), onnx.TensorProto.FLOAT, v)

    def test_report(self):
        import json
        path = os.path.join(self.tmp, "report.json")
        r = self.ok("--report", path, name="report")
        with open(path) as f:
            rep = json.load(f)
        ls = rep["loss_scaling"]
        self.assertTrue(ls["inserted"])
        self.assertEqual(ls["mode"], "dynamic")
        self.assertEqual(len(ls["gradients"]), 4)
        self.assertEqual(len(ls["guarded_updates"]), 9)
        self.assertEqual(ls["inserted_nodes"]["guard"], 9)
        self.assertEqual(ls["found_inf"], md(r.model)["mpc.training.found_inf"])


class Numerics(Base):
    def test_step_matches_fp32(self):
        r = self.ok(name="numerics")
        ref_out, ref_state = step(self.orig, self.feeds)
        out, state = step(r.model, self.feeds)
        self.assertLess(rel_l2(ref_out["loss"], out["loss"]), 1e-2)
        init = initial_state(self.orig)
        for p, _ in mpc_trainlib.gradient_pairs(self.orig):
            ref_delta = ref_state[p] - init[p]
            delta = state[p] - init[p]
            self.assertEqual(state[p].dtype, np.float32)
            self.assertLess(rel_l2(ref_delta, delta), 2e-2, p)
            self.assertLess(rel_l2(ref_state[p + ".momentum"], state[p + ".momentum"]), 2e-2)
        self.assertEqual(int(state["step"]), 1)
        meta = md(r.model)
        self.assertFalse(bool(out[meta["mpc.training.found_inf"]]))
        self.assertTrue(np.all(out[meta["mpc.training.grad_nonfinite"]] == 0))

    def test_seed_converted_by_amp(self):
        # The loss-gradient nodes are not pinned fp32 here: AMP may make the seed's consumers
        # 16-bit; the seed is still scaled in fp32 and the step still matches fp32.
        m = ls_models.mlp_training_model(data_name=DATA, loss_grad_fp32=False)
        r = self.ok(model=m, name="seed16")
        onnx.checker.check_model(r.model, full_check=True)
        ref_out, ref_state = step(m, self.feeds)
        out, state = step(r.model, self.feeds)
        self.assertFalse(bool(out[md(r.model)["mpc.training.found_inf"]]))
        init = initial_state(m)
        for p, _ in mpc_trainlib.gradient_pairs(m):
            self.assertLess(rel_l2(ref_state[p] - init[p], state[p] - init[p]), 2e-2, p)
        seed = md(r.model)["mpc.training.loss_grad_seed"]
        alg = r.model.training_info[0].algorithm
        scale = lines(md(r.model)["mpc.training.loss_scale_state"])[0]
        self.assertTrue([n for n in alg.node if n.op_type == "Mul" and scale in n.input and
                         (seed in n.input or any(seed in c.input for c in alg.node
                                                 if c.output[0] in n.input))])

    def test_mpc_run_matches_reference(self):
        r = self.ok(name="runcmp")
        alg = mpc_trainlib.algorithm_as_model(r.model)
        path = os.path.join(self.tmp, "alg.onnx")
        onnx.save(alg, path)
        npz = os.path.join(self.tmp, "feeds.npz")
        np.savez(npz, **self.feeds)
        outdir = os.path.join(self.tmp, "run-out")
        os.makedirs(outdir, exist_ok=True)
        p = subprocess.run([ARGS.mpc, "run", path, "--input", npz, "--outputs", outdir],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        ref = mpc_trainlib.reference_evaluator(alg).run(None, self.feeds)
        for o, want in zip(alg.graph.output, ref):
            fname = "".join(c if c.isalnum() or c in "_-." else "_" for c in o.name)
            got = np.load(os.path.join(outdir, fname + ".npy"))
            want = np.asarray(want)
            if want.dtype.kind == "f":
                self.assertLess(rel_l2(want, got), 1e-3, o.name)
            else:
                self.assertTrue(np.array_equal(want, got), o.name)


class Overflow(Base):
    def check_skipped(self, model, feeds, bad_grads):
        meta = md(model)
        state0 = initial_state(model)
        out, state = step(model, feeds)
        self.assertTrue(bool(out[meta["mpc.training.found_inf"]]))
        scale_name = lines(meta["mpc.training.loss_scale_state"])[0]
        for b in model.training_info[0].update_binding:
            if b.key in lines(meta["mpc.training.loss_scale_state"]):
                continue
            self.assertTrue(same_bits(state0[b.key], state[b.key]), b.key)
        nf = out[meta["mpc.training.grad_nonfinite"]]
        names = [g for _, g in mpc_trainlib.gradient_pairs(model)]
        self.assertEqual(nf.shape, (len(names),))
        values = unscaled_values(model, feeds)
        for i, g in enumerate(names):
            # Oracle: numpy's isfinite on the value the optimizer would have read.
            self.assertEqual(bool(np.isnan(nf[i])), not np.all(np.isfinite(values[g])),
                             f"{g}: {nf}")
            if bad_grads is not None:
                self.assertEqual(bool(np.isnan(nf[i])), g in bad_grads, f"{g}: {nf}")
        self.assertFalse(np.any(np.isinf(nf)))
        return state0[scale_name], state[scale_name], out, state

    def test_inf_input_skips_step(self):
        r = self.ok(name="overflow")
        feeds = dict(self.feeds)
        X = feeds[DATA].copy()
        X[0, 0] = np.inf
        feeds[DATA] = X
        # An inf input makes the forward (and so every gradient) non-finite.
        s0, s1, _, state = self.check_skipped(r.model, feeds, {"grad/W1", "grad/b1", "grad/W2",
                                                               "grad/b2"})
        self.assertEqual(float(s1), float(s0) * 0.5)
        tracker = lines(md(r.model)["mpc.training.loss_scale_state"])[1]
        self.assertEqual(int(state[tracker]), 0)

    def test_scaled_gradient_overflows(self):
        # A static scale of 65504*1e3: the loss is finite, every scaled gradient overflows fp16.
        r = self.ok("--loss-scale", "65504000", name="overflow-static")
        state0 = initial_state(r.model)
        ref_out, _ = step(self.orig, self.feeds)
        s0, s1, out, _ = self.check_skipped(r.model, self.feeds, None)
        nf = out[md(r.model)["mpc.training.grad_nonfinite"]]
        # The 16-bit weight gradients overflow; b2's gradient is a ReduceSum (deny list) of
        # the fp32 dY, so it stays finite: the flag is per gradient.
        self.assertTrue(np.isnan(nf[0]) and np.isnan(nf[2]), nf)
        self.assertFalse(np.isnan(nf[3]), nf)
        self.assertTrue(np.isfinite(out["loss"]))
        self.assertLess(rel_l2(ref_out["loss"], out["loss"]), 1e-2)
        self.assertEqual(float(s0), float(s1))  # static: S is not state
        del state0

    def test_only_one_gradient_bad(self):
        # Just above 65504/S: with S = 2^15 a dY entry of 4 overflows W2's fp16 Gemm only when
        # it meets a large activation; inject it through the labels so the loss stays finite in
        # fp32 and the 16-bit dW2 = a1^T dY overflows while the fp32 bias gradient does not.
        r = self.ok("--loss-scale", "32768", name="overflow-one")
        feeds = dict(self.feeds)
        lab = feeds["labels"].copy()
        lab[:, 0] = -3000.0
        feeds["labels"] = lab
        _, _, out, _ = self.check_skipped(r.model, feeds, None)
        nf = out[md(r.model)["mpc.training.grad_nonfinite"]]
        names = [g for _, g in mpc_trainlib.gradient_pairs(r.model)]
        bad = {g for g, v in zip(names, nf) if np.isnan(v)}
        self.assertIn("grad/W2", bad)
        self.assertNotIn("grad/b2", bad)  # ReduceSum (deny) keeps the bias gradient fp32
        # In fp32 the same step is finite: the overflow is the 16-bit range's.
        ref_out, _ = step(self.orig, feeds)
        self.assertTrue(all(np.all(np.isfinite(v)) for v in ref_out.values()))


class Growth(Base):
    def run_steps(self, model, n, state=None):
        traj = []
        meta = md(model)
        s_name, t_name = lines(meta["mpc.training.loss_scale_state"])
        state = state or initial_state(model)
        for _ in range(n):
            _, state = step(model, self.feeds, state)
            traj.append((float(state[s_name]), int(state[t_name])))
        return traj, state

    def test_doubles_after_interval(self):
        r = self.ok("--loss-scale-interval", "2", name="growth")
        traj, state = self.run_steps(r.model, 3)
        self.assertEqual(traj, [(32768.0, 1), (65536.0, 0), (65536.0, 1)])
        self.assertEqual(int(state["step"]), 3)

    def test_numpy_trajectory_with_overflow(self):
        # Expected trajectory of (S, tracker) computed in numpy from the spec.
        r = self.ok("--loss-scale-interval", "3", "--loss-scale-init", "1024", name="traj")
        meta = md(r.model)
        s_name, t_name = lines(meta["mpc.training.loss_scale_state"])
        bad = dict(self.feeds)
        X = bad[DATA].copy()
        X[1, 2] = np.nan
        bad[DATA] = X
        plan = [False, False, True, False, False, False, True]
        S, T = np.float32(1024), 0
        state = initial_state(r.model)
        for overflow in plan:
            _, state = step(r.model, bad if overflow else self.feeds, state)
            if overflow:
                S, T = max(S * np.float32(0.5), np.float32(1)), 0
            else:
                T += 1
                if T >= 3:
                    S, T = min(S * np.float32(2), np.float32(2 ** 24)), 0
            self.assertEqual((float(state[s_name]), int(state[t_name])), (float(S), T))
        self.assertEqual(int(state["step"]), plan.count(False))

    def test_clamp_max(self):
        r = self.ok("--loss-scale-interval", "1", "--loss-scale-init", "4096",
                    "--loss-scale-max", "8192", name="clampmax")
        traj, _ = self.run_steps(r.model, 3)
        self.assertEqual([s for s, _ in traj], [8192.0, 8192.0, 8192.0])

    def test_clamp_min(self):
        r = self.ok("--loss-scale-init", "3", "--loss-scale-min", "2", name="clampmin")
        meta = md(r.model)
        s_name = lines(meta["mpc.training.loss_scale_state"])[0]
        bad = dict(self.feeds)
        X = bad[DATA].copy()
        X[0, 0] = np.inf
        bad[DATA] = X
        state = initial_state(r.model)
        got = []
        for _ in range(3):
            _, state = step(r.model, bad, state)
            got.append(float(state[s_name]))
        self.assertEqual(got, [2.0, 2.0, 2.0])


class Modes(Base):
    def test_static(self):
        r = self.ok("--loss-scale", "128", name="static")
        meta = md(r.model)
        self.assertEqual(meta["mpc.training.loss_scale"], "static 128")
        state = lines(meta["mpc.training.loss_scale_state"])
        self.assertEqual(len(state), 1)
        binding = {b.key for b in r.model.training_info[0].update_binding}
        self.assertNotIn(state[0], binding)
        ref_out, ref_state = step(self.orig, self.feeds)
        out, st = step(r.model, self.feeds)
        init = initial_state(self.orig)
        for p, _ in mpc_trainlib.gradient_pairs(self.orig):
            self.assertLess(rel_l2(ref_state[p] - init[p], st[p] - init[p]), 2e-2, p)
        self.assertEqual(float(st[state[0]]), 128.0)

    def test_none(self):
        r = self.ok("--loss-scale", "none", name="none")
        meta = md(r.model)
        self.assertEqual(meta["mpc.training.loss_scale"], "none")
        self.assertEqual(lines(meta["mpc.training.loss_scale_state"]), [])
        alg = r.model.training_info[0].algorithm
        self.assertFalse([n for n in alg.node if n.op_type == "Reciprocal"])
        seed = meta["mpc.training.loss_grad_seed"]
        self.assertFalse([n for n in readers(alg, seed) if n.op_type == "Mul" and
                          any(i.startswith("mpc.loss_scale") for i in n.input)])
        # Check and skip stay.
        bad = dict(self.feeds)
        X = bad[DATA].copy()
        X[0, 0] = np.inf
        bad[DATA] = X
        out, state = step(r.model, bad)
        self.assertTrue(bool(out[meta["mpc.training.found_inf"]]))
        init = initial_state(r.model)
        for b in r.model.training_info[0].update_binding:
            self.assertTrue(same_bits(init[b.key], state[b.key]), b.key)

    def test_off(self):
        r = self.ok("--loss-scale", "off", name="off")
        meta = md(r.model)
        self.assertNotIn("mpc.training.loss_scale", meta)
        alg = r.model.training_info[0].algorithm
        self.assertFalse([n for n in alg.node if n.doc_string.startswith("mpc loss scaling")])
        self.assertEqual(len(alg.output), len(self.orig.training_info[0].algorithm.output))
        self.assertIn("Loss scaling: off", r.stderr)

    def test_bf16_default_none(self):
        r = self.ok("--target", "bf16", name="bf16")
        self.assertEqual(md(r.model)["mpc.training.loss_scale"], "none")
        r2 = self.ok("--target", "bf16", "--loss-scale", "dynamic", name="bf16dyn")
        self.assertTrue(md(r2.model)["mpc.training.loss_scale"].startswith("dynamic"))

    def test_env_mirrors_flags(self):
        env = {"MPC_AMP_LOSS_SCALE": "dynamic", "MPC_AMP_LOSS_SCALE_INIT": "256",
               "MPC_AMP_LOSS_SCALE_GROWTH": "4", "MPC_AMP_LOSS_SCALE_BACKOFF": "0.25",
               "MPC_AMP_LOSS_SCALE_INTERVAL": "7", "MPC_AMP_LOSS_SCALE_MIN": "2",
               "MPC_AMP_LOSS_SCALE_MAX": "4096"}
        flags = ["--loss-scale", "dynamic", "--loss-scale-init", "256", "--loss-scale-growth",
                 "4", "--loss-scale-backoff", "0.25", "--loss-scale-interval", "7",
                 "--loss-scale-min", "2", "--loss-scale-max", "4096"]
        a = self.ok(env=env, name="env")
        b = self.ok(*flags, name="flags")
        want = "dynamic init=256 growth=4 backoff=0.25 interval=7 min=2 max=4096"
        self.assertEqual(md(a.model)["mpc.training.loss_scale"], want)
        self.assertEqual(a.model.SerializeToString(), b.model.SerializeToString())
        c = self.ok(env={"MPC_AMP_LOSS_SCALE": "64"}, name="envstatic")
        self.assertEqual(md(c.model)["mpc.training.loss_scale"], "static 64")
        # A flag overrides the variable.
        d = self.ok("--loss-scale", "off", env={"MPC_AMP_LOSS_SCALE": "64"}, name="override")
        self.assertNotIn("mpc.training.loss_scale", md(d.model))

    def test_bad_values(self):
        bad = [({"MPC_AMP_LOSS_SCALE": "huge"}, []), ({"MPC_AMP_LOSS_SCALE": "-4"}, []),
               ({"MPC_AMP_LOSS_SCALE_INIT": "0"}, []), ({"MPC_AMP_LOSS_SCALE_INTERVAL": "1.5"}, []),
               ({"MPC_AMP_LOSS_SCALE_BACKOFF": "2"}, []), ({"MPC_AMP_LOSS_SCALE_GROWTH": "0.5"}, []),
               ({"MPC_AMP_LOSS_SCALE_MAX": "inf"}, []), ({"MPC_AMP_LOSS_SCALE_FOO": "1"}, []),
               ({}, ["--loss-scale", "dynamik"]), ({}, ["--loss-scale-min", "nan"]),
               ({}, ["--loss-scale-interval", "0"]),
               ({}, ["--loss-scale-min", "100", "--loss-scale-max", "10"]),
               ({}, ["--loss-scale-init", "1e9"])]
        for env, flags in bad:
            r = self.rw(*flags, env=env, name="bad")
            self.assertEqual(r.rc, 1, f"{env} {flags}: {r.stderr}")
            err = r.stderr.strip().splitlines()
            self.assertEqual(len(err), 1, r.stderr)
            self.assertTrue(err[0].startswith("mpc: error:"), err[0])
            self.assertIsNone(r.model)

    def test_no_metadata(self):
        m = ls_models.mlp_training_model(data_name=DATA, with_metadata=False)
        r = self.ok(model=m, name="nometa")
        self.assertIn("no loss scaling inserted", r.stderr)
        self.assertIn("mpc.training.loss_grad_seed", r.stderr)
        self.assertNotIn("mpc.training.loss_scale", md(r.model))

    def test_bad_metadata_is_an_error(self):
        m = ls_models.mlp_training_model(data_name=DATA)
        for p in m.metadata_props:
            if p.key == "mpc.training.loss_grad_seed":
                p.value = "no/such/value"
        r = self.rw(model=m, name="badmeta")
        self.assertEqual(r.rc, 1)
        self.assertIn("no/such/value", r.stderr)


class Fused(Base):
    """--fused-unscale against the per-gradient form, both run by `mpc run` (the algorithm
    graph as a model): every output bit for bit, a repeated mpc.training.gradients line
    (whose second unscaled copy nobody reads) and an injected inf included."""

    def run_alg(self, model, feeds, tag):
        alg = mpc_trainlib.algorithm_as_model(model)
        path = os.path.join(self.tmp, f"{tag}.alg.onnx")
        onnx.save(alg, path)
        npz = os.path.join(self.tmp, f"{tag}.feeds.npz")
        np.savez(npz, **feeds)
        outdir = os.path.join(self.tmp, f"{tag}-out")
        p = subprocess.run([ARGS.mpc, "run", path, "--input", npz, "--outputs", outdir],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = {}
        for o in alg.graph.output:
            fname = "".join(c if c.isalnum() or c in "_-." else "_" for c in o.name)
            got[o.name] = np.load(os.path.join(outdir, fname + ".npy"))
        return got

    def test_same_outputs_with_a_repeated_gradient_line(self):
        m = onnx.ModelProto()
        m.CopyFrom(self.orig)
        for p in m.metadata_props:
            if p.key == "mpc.training.gradients":
                first = p.value.splitlines()[0]
                p.value = p.value + "\nagain_" + first
        each = self.ok(model=m, name="rep-each")
        fused = self.ok("--fused-unscale", model=m, name="rep-fused")
        self.assertIn("by one MultiTensorUnscale node", fused.stderr)
        bad = dict(self.feeds)
        bad[DATA] = bad[DATA].copy()
        bad[DATA].flat[0] = np.inf
        for tag, feeds in (("clean", self.feeds), ("inf", bad)):
            want = self.run_alg(each.model, feeds, f"each-{tag}")
            got = self.run_alg(fused.model, feeds, f"fused-{tag}")
            self.assertEqual(sorted(want), sorted(got))
            nf = got["mpc.grad_nonfinite"]
            self.assertEqual(nf.shape, (len(lines(md(m)["mpc.training.gradients"])),))
            self.assertEqual(bool(got["mpc.found_inf"]), tag == "inf")
            self.assertEqual(np.isnan(nf).tolist(), np.isnan(want["mpc.grad_nonfinite"]).tolist())
            for name in want:
                if name != "mpc.grad_nonfinite":  # NaN payloads may differ; checked above
                    self.assertTrue(same_bits(want[name], got[name]), f"{tag}: {name}")


class Idempotence(Base):
    def test_twice_same_bytes(self):
        for flags in ([], ["--loss-scale", "128"], ["--loss-scale", "none"],
                      ["--target", "bf16"]):
            once = self.ok(*flags, name="once")
            twice = rewrite(once.path, *flags, tmp=self.tmp, name="twice")
            self.assertEqual(twice.rc, 0, twice.stderr)
            self.assertIn("already present", twice.stderr)
            with open(once.path, "rb") as f1, open(twice.path, "rb") as f2:
                a, b = f1.read(), f2.read()
            self.assertEqual(a, b, f"{flags}: {lib.first_difference(a, b)}")

    def test_deterministic(self):
        a = self.ok(name="det1")
        b = self.ok(name="det2")
        self.assertEqual(a.model.SerializeToString(), b.model.SerializeToString())


class Contract(Base):
    def test_contract_input_names(self):
        # docs/training.md: the algorithm's data inputs have the inference inputs' names.
        m = ls_models.mlp_training_model(data_name="X")
        r = self.rw(model=m, name="contract")
        if r.rc != 0 and "defined twice" in r.stderr:
            self.skipTest("mpc's importer rejects an algorithm input named like an inference "
                          "input: " + r.stderr.strip())
        self.assertEqual(r.rc, 0, r.stderr)
        out, _ = step(r.model, ls_models.mlp_data())
        self.assertFalse(bool(out[md(r.model)["mpc.training.found_inf"]]))


def rename_algorithm_inputs(model):
    """The algorithm's data inputs renamed train/NAME (works around the importer's rejection
    of an algorithm input named like an inference input)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    alg = m.training_info[0].algorithm
    main_inputs = {i.name for i in m.graph.input}
    ren = {}
    for i in alg.input:
        if i.name in main_inputs:
            ren[i.name] = "train/" + i.name
            i.name = ren[i.name]

    def fix(g):
        for n in g.node:
            for k, x in enumerate(n.input):
                if x in ren:
                    n.input[k] = ren[x]
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    fix(a.g)
    fix(alg)
    return m


def random_feeds(graph, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in graph.input:
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 2 for d in tt.shape.dim]
        if tt.elem_type == onnx.TensorProto.INT64:
            feeds[i.name] = rng.integers(0, 3, shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


class Builder(Base):
    """Models made by `mpc train-graph` (another part of mpc, same contract)."""

    def build(self, name, *flags):
        src = os.path.join(ARGS.source_dir, "models", name + ".onnx")
        out = os.path.join(self.tmp, name + ".train.onnx")
        p = subprocess.run([ARGS.mpc, "train-graph", src, "-o", out, *flags],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            self.skipTest("mpc train-graph failed: " + p.stderr.strip())
        return onnx.load(out)

    def check_step(self, orig, r):
        self.assertEqual(r.rc, 0, r.stderr)
        onnx.checker.check_model(r.model, full_check=True)
        feeds = random_feeds(orig.training_info[0].algorithm)
        ref_out, ref_state = step(orig, feeds)
        out, state = step(r.model, feeds)
        self.assertFalse(bool(out[md(r.model)["mpc.training.found_inf"]]))
        init = initial_state(orig)
        loss = orig.training_info[0].algorithm.output[0].name
        self.assertLess(rel_l2(ref_out[loss], out[loss]), 1e-2)
        for p, _ in mpc_trainlib.gradient_pairs(orig):
            self.assertLess(rel_l2(ref_state[p] - init[p], state[p] - init[p]), 5e-2, p)
        # A skipped step with an injected inf keeps every state tensor.
        bad = dict(feeds)
        name = next(k for k, v in bad.items() if v.dtype == np.float32)
        bad[name] = bad[name].copy()
        bad[name].flat[0] = np.inf
        out, state = step(r.model, bad)
        self.assertTrue(bool(out[md(r.model)["mpc.training.found_inf"]]))
        scale_state = lines(md(r.model)["mpc.training.loss_scale_state"])
        init = initial_state(r.model)
        for b in r.model.training_info[0].update_binding:
            if b.key not in scale_state:
                self.assertTrue(same_bits(init[b.key], state[b.key]), b.key)

    def test_digits_mlp_adam_renamed_inputs(self):
        orig = rename_algorithm_inputs(self.build("digits_mlp", "--loss", "cross-entropy",
                                                  "--optimizer", "adam"))
        self.check_step(orig, self.rw(model=orig, name="tg-renamed"))

    def test_exposed_gradients_are_unscaled(self):
        self.check_exposed()

    def test_exposed_gradients_are_unscaled_fused(self):
        self.check_exposed("--fused-unscale")

    def check_exposed(self, *flags):
        orig = rename_algorithm_inputs(self.build("mlp", "--loss", "mse", "--expose-gradients"))
        r = self.rw(*flags, model=orig, name="tg-exposed")
        self.assertEqual(r.rc, 0, r.stderr)
        feeds = random_feeds(orig.training_info[0].algorithm)
        ref_out, _ = step(orig, feeds)
        out, _ = step(r.model, feeds)
        pairs = mpc_trainlib.gradient_pairs(orig)
        exposed = {o.name for o in orig.training_info[0].algorithm.output}
        checked = 0
        for _, g in pairs:
            if g in exposed:
                checked += 1
                self.assertLess(rel_l2(ref_out[g], out[g]), 2e-2, g)
        self.assertEqual(checked, len(pairs))
        # The metadata keeps naming the exposed outputs, which hold the true gradients.
        new_pairs = mpc_trainlib.gradient_pairs(r.model)
        self.assertEqual(new_pairs, pairs)
        outputs = {o.name for o in r.model.training_info[0].algorithm.output}
        self.assertTrue(all(g in outputs for _, g in new_pairs))
        self.check_step(orig, r)

    def test_digits_mlp_fused_unscale(self):
        """--fused-unscale: the same step and the same skipped step, judged by onnx.reference
        with the ai.mpc.training reference ops (MultiTensorUnscale's included)."""
        orig = rename_algorithm_inputs(self.build("digits_mlp", "--loss", "cross-entropy",
                                                  "--optimizer", "adam"))
        r = self.rw("--fused-unscale", model=orig, name="tg-fused")
        ops = [n.op_type for n in r.model.training_info[0].algorithm.node]
        self.assertEqual(ops.count("MultiTensorUnscale"), 1)
        self.check_step(orig, r)

    def test_digits_mlp_contract_names(self):
        orig = self.build("digits_mlp", "--loss", "cross-entropy", "--optimizer", "momentum")
        r = self.rw(model=orig, name="tg")
        if r.rc != 0 and "defined twice" in r.stderr:
            self.skipTest("mpc's importer rejects an algorithm input named like an inference "
                          "input: " + r.stderr.strip())
        self.check_step(orig, r)


class Inference(Base):
    def test_loss_scale_settings_ignored(self):
        # Inference models: every loss-scale flag or variable leaves the output as it is.
        models = sorted(glob.glob(os.path.join(ARGS.source_dir, "models", "*.onnx")))
        self.assertTrue(models)
        for path in models:
            if onnx.load(path, load_external_data=False).training_info:
                continue
            base = rewrite(path, tmp=self.tmp, name="inf-base")
            self.assertEqual(base.rc, 0, base.stderr)
            self.assertNotIn("Loss scaling", base.stderr + base.stdout)
            with open(base.path, "rb") as f:
                want = f.read()
            for flags, env in ((["--loss-scale", "128", "--loss-scale-interval", "3"], {}),
                               ([], {"MPC_AMP_LOSS_SCALE": "none"}),
                               (["--loss-scale", "off"], {"MPC_AMP_LOSS_SCALE_MAX": "65536"}),
                               (["--loss-scale-init", "8"], {"MPC_AMP_LOSS_SCALE_MIN": "4"})):
                r = rewrite(path, *flags, env=env, tmp=self.tmp, name="inf-ls")
                self.assertEqual(r.rc, 0, r.stderr)
                with open(r.path, "rb") as f:
                    self.assertEqual(f.read(), want, f"{path} {flags} {env}")
                self.assertEqual((r.stdout, r.stderr), (base.stdout, base.stderr))

    def test_models_unchanged(self):
        ref = ARGS.reference_mpc
        if not ref or not os.path.exists(ref):
            self.skipTest("no --reference-mpc build to compare with")
        models = sorted(glob.glob(os.path.join(ARGS.source_dir, "models", "*.onnx")))
        self.assertTrue(models)
        for path in models:
            m = onnx.load(path, load_external_data=False)
            if m.training_info:
                continue
            for flags in ([], ["--target", "bf16"]):
                a = rewrite(path, *flags, tmp=self.tmp, name="inf-new")
                with open(a.path, "rb") as f:
                    new = f.read()
                out = os.path.join(self.tmp, "inf-ref.onnx")
                p = subprocess.run([ref, "rewrite", path, "-o", out, *flags],
                                   capture_output=True, text=True, timeout=300)
                self.assertEqual((a.rc, p.returncode), (0, 0), a.stderr + p.stderr)
                with open(out, "rb") as f:
                    old = f.read()
                self.assertEqual(new, old, f"{path} {flags}")
                self.assertEqual(a.stdout, p.stdout)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--reference-mpc", default="",
                    help="an mpc built without loss scaling, for the inference-model check")
    ap.add_argument("-k", default="", help="only tests whose id contains this")
    ARGS = ap.parse_args()
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for cls in (Structure, Numerics, Overflow, Growth, Modes, Fused, Idempotence, Contract,
                Builder, Inference):
        for t in loader.loadTestsFromTestCase(cls):
            if ARGS.k in t.id():
                suite.addTest(t)
    sys.exit(lib.run_suite(suite, verbosity=2, show_skips=True))


if __name__ == "__main__":
    main()
