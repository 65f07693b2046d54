#!/usr/bin/env python3
"""mpc's CPU kernels of the onnxruntime contrib ops (domain com.microsoft) through `mpc run`.

    python3 tests/contrib/test_contrib_kernels.py --mpc build/tools/mpc --source-dir . [-v] [-k PATTERN]
        [--device cpu|cuda]

  * FusedMatMul (alpha, transA, transB, transBatchA, transBatchB, batch broadcasting, vectors,
    2-D to 4-D) in float32, float16, bfloat16 and float64 on single-node models (with
    --device cuda, the 16- and 32-bit cases with --no-fallback: they must run on the GPU,
    transBatch layouts included). The oracle is
    onnxruntime's own CPU kernel in float32 on the inputs rounded to the type (16-bit results
    within one rounding of that); float64 is checked against a NumPy float64 product, which is
    itself checked against onnxruntime;
  * ConvGrad against tests/python/mpc_training_ref.py (float64, on the rounded inputs), and
    bit for bit against ai.mpc.training::ConvGrad on the same inputs, with omitted outputs too;
  * `mpc rewrite` then `mpc run --compare` on small models with these ops (fp16 within
    relative L2 1e-2); onnxruntime must also load and run the rewritten model;
  * bad shapes (K mismatch, scalar operand, transBatch with unequal ranks) fail `mpc run`
    with one error line naming the node, exit status 1.
The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when numpy,
onnx, ml_dtypes or onnxruntime is missing.
"""
import argparse
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
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"numpy, onnx, ml_dtypes and onnxruntime are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)

MPC = None
DEVICE = "cpu"  # --device: the backend `mpc run` uses (tests/python/mpc_device.py)
REF = None  # mpc_training_ref
TESTLIB = None  # mpc_testlib
MS = "com.microsoft"
TRAINING = "ai.mpc.training"
TIMEOUT_S = 120

# (ONNX element type, numpy type to round inputs through, relative tolerance against an
# oracle that computes in float32 (float64 for f64) from the same rounded inputs)
DTYPES = {
    "f32": (TensorProto.FLOAT, np.float32, 1e-5),
    "f16": (TensorProto.FLOAT16, np.float16, 2.0 ** -10),
    "bf16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16, 2.0 ** -7),
    "f64": (TensorProto.DOUBLE, np.float64, 1e-12),
}
ALL_DTYPES = ("f32", "f16", "bf16", "f64")


def run_mpc(args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    env.update(env_extra or {})
    if args[0] == "run" and DEVICE != "cpu":
        args = args[:2] + ["--device", DEVICE] + args[2:]
    return subprocess.run([MPC] + args, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env=env)


def mpc_run(model, feeds, out_names, workdir, env_extra=None, stderr_out=None, extra=()):
    """Runs `mpc run`; returns the outputs as arrays, or raises with mpc's stderr. env_extra:
    more environment variables; stderr_out: a list that gets mpc's stderr; extra: more
    arguments."""
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    args = ["run", path, *extra]
    for name, arr in feeds.items():
        f = os.path.join(workdir, f"in_{name}.npy")
        np.save(f, arr)
        args += ["--input", f"{name}={f}"]
    outdir = os.path.join(workdir, "out")
    r = run_mpc(args + ["--outputs", outdir], env_extra)
    if stderr_out is not None:
        stderr_out.append(r.stderr)
    if r.returncode != 0:
        raise AssertionError(f"mpc run failed ({r.returncode}): {r.stderr.strip()}")
    return [np.load(os.path.join(outdir, f"{n}.npy")) for n in out_names]


def make_model(nodes, inputs, outputs, initializers=(), domains=(MS,)):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    imports = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model


def single_node(op, domain, inputs, n_out, attrs, dt, omit=()):
    """A model running one op in type dt. inputs: (name, array) pairs, given as float32
    graph inputs Cast to dt (float64 inputs for f64); outputs are Cast back to float32
    (float64), which is exact. omit: indices of outputs left out (empty names)."""
    elem = DTYPES[dt][0]
    io_elem = TensorProto.DOUBLE if dt == "f64" else TensorProto.FLOAT
    io_np = np.float64 if dt == "f64" else np.float32
    nodes, graph_inputs, feeds, node_inputs = [], [], {}, []
    for name, arr in inputs:
        graph_inputs.append(helper.make_tensor_value_info(name, io_elem, list(arr.shape)))
        feeds[name] = arr.astype(io_np)
        if dt == "f64":
            node_inputs.append(name)
        else:
            nodes.append(helper.make_node("Cast", [name], [name + "_t"], to=elem))
            node_inputs.append(name + "_t")
    raw = ["" if i in omit else f"r{i}" for i in range(n_out)]
    nodes.append(helper.make_node(op, node_inputs, raw, name="node", domain=domain or None,
                                  **(attrs or {})))
    outs = []
    for i, r in enumerate(raw):
        if not r:
            continue
        nodes.append(helper.make_node("Cast", [r], [f"out{i}"], to=io_elem))
        outs.append(helper.make_tensor_value_info(f"out{i}", io_elem, None))
    domains = [domain] if domain else []
    return make_model(nodes, graph_inputs, outs, domains=domains), feeds, [o.name for o in outs]


def rounded(arr, dt):
    """arr rounded to type dt, as float64."""
    return arr.astype(DTYPES[dt][1]).astype(np.float64)


def fused_matmul_f64(a, b, alpha=1.0, transA=0, transB=0, transBatchA=0, transBatchB=0):
    """NumPy float64 FusedMatMul, following onnxruntime's contrib op definition."""
    def op(x, trans, trans_batch):
        if x.ndim < 2:
            return x
        if trans_batch:
            x = np.moveaxis(x, 0, -2)  # [M, b..., K] -> [b..., M, K]
        return np.swapaxes(x, -1, -2) if trans else x
    return alpha * np.matmul(op(a, transA, transBatchA), op(b, transB, transBatchB))


def ort_fused_matmul(a, b, attrs):
    """onnxruntime's CPU FusedMatMul in float32."""
    node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, **attrs)
    model = make_model([node], [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                                helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"a": a.astype(np.float32), "b": b.astype(np.float32)})[0]


def assert_close(test, got, want, tol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    test.assertEqual(got.shape, want.shape, what)
    # Absolute slack relative to the largest magnitude: fp32 accumulation error grows with
    # the terms, not the result.
    peak = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 1e-2 * (peak or 1.0),
                               err_msg=what)


# (A shape, B shape, attributes)
FUSED_CASES = [
    ((3, 4), (4, 5), {}),
    ((4, 3), (4, 5), {"transA": 1}),
    ((3, 4), (5, 4), {"transB": 1, "alpha": 0.5}),
    ((4, 3), (5, 4), {"transA": 1, "transB": 1, "alpha": -2.0}),
    ((2, 3, 4), (2, 4, 5), {"alpha": 0.125}),
    ((2, 4, 3), (2, 5, 4), {"transA": 1, "transB": 1}),
    ((2, 3, 4), (4, 5), {"transA": 0}),             # B shared by the batch
    ((2, 3, 4), (5, 4), {"transB": 1}),
    ((3, 4), (2, 4, 5), {"alpha": 3.0}),             # A shared by the batch
    ((2, 1, 3, 4), (1, 3, 5, 4), {"transB": 1}),     # 4-D, both broadcast
    ((2, 3, 4, 6), (3, 4, 7), {"transA": 1, "transB": 0, "alpha": 0.5}),
    ((4,), (4, 5), {"transA": 1}),                   # vectors: trans changes nothing
    ((3, 4), (4,), {"transB": 1}),
    ((2, 3, 4), (4,), {}),
    ((3, 2, 4), (2, 4, 5), {"transBatchA": 1}),      # A is [M, batch, K]
    ((2, 3, 4), (4, 2, 5), {"transBatchB": 1}),      # B is [K, batch, N]
    ((3, 2, 4), (4, 2, 5), {"transBatchA": 1, "transBatchB": 1, "alpha": 0.25}),
    ((4, 2, 3), (5, 2, 4), {"transBatchA": 1, "transA": 1, "transBatchB": 1, "transB": 1}),
    ((3, 2, 6, 4), (2, 6, 4, 5), {"transBatchA": 1}),
    ((3, 1, 4), (2, 4, 5), {"transBatchA": 1}),      # transBatch with broadcasting
    ((5, 2, 3, 4), (2, 3, 6, 4), {"transBatchA": 1, "transB": 1, "transA": 0}),
    ((2, 3, 4), (5, 2, 4), {"transBatchB": 1, "transB": 1}),  # B is [N, batch, K]
    ((3, 2, 1, 4), (2, 5, 4, 6), {"transBatchA": 1}),  # A broadcast on an inner batch axis
    ((2, 1, 3, 4), (4, 2, 5, 6), {"transBatchB": 1}),  # B is [K, batch..., N], A broadcast
    ((2, 4, 3, 5), (6, 4, 3, 5), {"transBatchA": 1, "transBatchB": 1, "transB": 1}),
    ((2, 65, 40), (40, 33), {"transB": 0}),          # larger than one SIMD panel
    ((40, 3, 65), (3, 33, 40), {"transBatchA": 1, "transA": 1, "transB": 1}),
]


class FusedMatMulTest(unittest.TestCase):
    rng = np.random.default_rng(20261122)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_fused(self, a, b, attrs, dt):
        model, feeds, outs = single_node("FusedMatMul", MS, [("a", a), ("b", b)], 1, attrs, dt)
        # On cuda every case of a type the CUDA row takes (transBatchA/B included) must run
        # there: --no-fallback makes a CPU fallback an error.
        extra = ["--no-fallback"] if DEVICE == "cuda" and dt != "f64" else []
        return mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name), extra=extra)[0]

    def test_reference_matches_onnxruntime(self):
        # The float64 oracle means what onnxruntime means.
        for sa, sb, attrs in FUSED_CASES:
            with self.subTest(a=sa, b=sb, attrs=attrs):
                a = rounded(self.rng.uniform(-1, 1, sa), "f32")
                b = rounded(self.rng.uniform(-1, 1, sb), "f32")
                assert_close(self, ort_fused_matmul(a, b, attrs), fused_matmul_f64(a, b, **attrs),
                             1e-5, "onnxruntime vs numpy")

    def test_against_onnxruntime(self):
        for sa, sb, attrs in FUSED_CASES:
            a0, b0 = self.rng.uniform(-1, 1, sa), self.rng.uniform(-1, 1, sb)
            for dt in ALL_DTYPES:
                with self.subTest(a=sa, b=sb, attrs=attrs, dtype=dt):
                    a, b = rounded(a0, dt), rounded(b0, dt)
                    got = self.run_fused(a, b, attrs, dt)
                    if dt == "f64":
                        want = fused_matmul_f64(a, b, **attrs)
                    else:
                        want = ort_fused_matmul(a, b, attrs)
                    assert_close(self, got, want, DTYPES[dt][2], f"FusedMatMul {dt}")

    def test_alpha_default_and_matmul_equivalence(self):
        # No attributes: bit for bit the default-domain MatMul kernel.
        a, b = self.rng.uniform(-1, 1, (2, 3, 7)), self.rng.uniform(-1, 1, (7, 5))
        for dt in ALL_DTYPES:
            with self.subTest(dtype=dt):
                a16, b16 = rounded(a, dt), rounded(b, dt)
                got = self.run_fused(a16, b16, {}, dt)
                model, feeds, outs = single_node("MatMul", "", [("a", a16), ("b", b16)], 1,
                                                 None, dt)
                want = mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name))[0]
                self.assertTrue(np.array_equal(got, want), f"FusedMatMul vs MatMul {dt}")

    def test_attributes_are_parsed_once_not_read_at_launch(self):
        # The kernel reads FusedMatMulParams, parsed when the executor prepares the node: with
        # the launch check on (docs/op-registry.md) no attribute is read while launching, and
        # every attribute still reaches the product (the float64 oracle).
        a, b = self.rng.uniform(-1, 1, (3, 2, 4)), self.rng.uniform(-1, 1, (5, 2, 4))
        attrs = {"alpha": -0.75, "transA": 0, "transB": 1, "transBatchA": 1, "transBatchB": 1}
        model, feeds, outs = single_node("FusedMatMul", MS, [("a", a), ("b", b)], 1, attrs, "f64")
        stderr = []
        got = mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name),
                      {"MPC_CHECK_LAUNCH_ATTRS": "1"}, stderr)[0]
        self.assertNotIn("reads attribute", stderr[0])
        self.assertEqual(got.shape, (2, 3, 5))
        assert_close(self, got, fused_matmul_f64(a, b, **attrs), 1e-12, "FusedMatMul f64")

    def expect_error(self, sa, sb, attrs, pattern):
        model, feeds, _ = single_node("FusedMatMul", MS, [("a", np.ones(sa)), ("b", np.ones(sb))],
                                      1, attrs, "f32")
        model.graph.node[-2].name = "fm"
        work = tempfile.mkdtemp(dir=self.tmp.name)
        path = os.path.join(work, "bad.onnx")
        onnx.save(model, path)
        args = ["run", path]
        for name, arr in feeds.items():
            f = os.path.join(work, f"{name}.npy")
            np.save(f, arr)
            args += ["--input", f"{name}={f}"]
        r = run_mpc(args)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("'fm'", lines[0])
        self.assertIn("FusedMatMul", lines[0])
        self.assertRegex(lines[0], pattern)

    def test_bad_shapes(self):
        self.expect_error((3, 4), (5, 4), {}, "do not multiply")
        self.expect_error((2, 3, 4), (2, 4, 5), {"transA": 1}, "do not multiply")
        self.expect_error((2, 3, 4), (3, 4, 5), {}, "do not multiply")  # batch 2 vs 3
        self.expect_error((), (4, 5), {}, "rank 1 or more")
        self.expect_error((3, 2, 4), (4, 5), {"transBatchA": 1}, "one rank, 3 or more")
        self.expect_error((3, 4), (4, 5), {"transBatchB": 1}, "one rank, 3 or more")


class ConvGradTest(unittest.TestCase):
    rng = np.random.default_rng(20261123)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_grad(self, domain, ins, attrs, dt, omit=(), n_out=3):
        model, feeds, outs = single_node("ConvGrad", domain, ins, n_out, attrs, dt, omit)
        return mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name))

    def conv(self, x_shape, w_shape, **attrs):
        x, w = self.rng.uniform(-1, 1, x_shape), self.rng.uniform(-1, 1, w_shape)
        # dY has the forward output's shape (onnxruntime's Conv says which).
        y_shape = self.forward_shape(x, w, attrs)
        dy = self.rng.uniform(-1, 1, y_shape)
        for dt in ALL_DTYPES:
            with self.subTest(x=x_shape, w=w_shape, attrs=attrs, dtype=dt):
                ins = [("dy", rounded(dy, dt)), ("x", rounded(x, dt)), ("w", rounded(w, dt))]
                got = self.run_grad(MS, ins, attrs, dt)
                mine = self.run_grad(TRAINING, ins, attrs, dt)
                for i, (g, m) in enumerate(zip(got, mine)):
                    self.assertTrue(np.array_equal(g, m) and g.dtype == m.dtype,
                                    f"output {i} differs from ai.mpc.training::ConvGrad")
                want = REF.conv_grad(*[a for _, a in ins], **attrs)
                # 16-bit: fp32 accumulation, one rounding per output (2 ulp of slack).
                tol = DTYPES[dt][2] * (2 if dt in ("f16", "bf16") else 10)
                for i, (g, w_) in enumerate(zip(got, want)):
                    assert_close(self, g, w_, tol, f"ConvGrad {dt} output {i}")

    @staticmethod
    def forward_shape(x, w, attrs):
        node = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
        model = make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                    helper.make_tensor_value_info("w", TensorProto.FLOAT, w.shape)],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                           domains=())
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, {"x": x.astype(np.float32), "w": w.astype(np.float32)})[0].shape

    def test_conv_grad(self):
        self.conv((2, 3, 5, 5), (4, 3, 3, 3))
        self.conv((2, 3, 5, 5), (4, 3, 3, 3), pads=[1, 1, 1, 1])
        self.conv((1, 4, 6, 5), (4, 2, 3, 2), group=2, strides=[2, 1], pads=[1, 0, 1, 1],
                  dilations=[1, 2])
        self.conv((2, 2, 9), (3, 2, 3), strides=[2], pads=[1, 2], dilations=[2])
        self.conv((1, 2, 5, 4), (2, 2, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2])
        self.conv((1, 3, 4, 4), (3, 1, 2, 2), group=3, auto_pad="SAME_LOWER")
        self.conv((2, 3, 4, 4), (5, 3, 1, 1))
        self.conv((1, 2, 3, 4, 4), (2, 2, 2, 2, 3), pads=[0, 1, 1, 1, 0, 1])

    def test_optional_outputs(self):
        x, w = self.rng.uniform(-1, 1, (2, 2, 5, 5)), self.rng.uniform(-1, 1, (3, 2, 3, 3))
        attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
        dy = self.rng.uniform(-1, 1, self.forward_shape(x, w, attrs))
        want = REF.conv_grad(dy, x, w, **attrs)
        # Outputs named "" are omitted, and so are the trailing ones a node does not list.
        for n_out, omit in ((3, (0, 2)), (3, (1,)), (3, (0, 1)), (3, (2,)), (1, ()), (2, (0,))):
            for dt in ("f32", "f64"):
                with self.subTest(n_out=n_out, omit=omit, dtype=dt):
                    ins = [("dy", dy), ("x", x), ("w", w)]
                    got = self.run_grad(MS, ins, attrs, dt, omit, n_out)
                    kept = [i for i in range(n_out) if i not in omit]
                    self.assertEqual(len(got), len(kept))
                    for i, g in zip(kept, got):
                        assert_close(self, g, want[i], DTYPES[dt][2] * 10, f"output {i}")


class RewriteTest(unittest.TestCase):
    """`mpc rewrite`, then `mpc run --compare` against the fp32 original."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def rewrite_and_compare(self, model, name, min_converted):
        work = tempfile.mkdtemp(dir=self.tmp.name)
        src, dst = os.path.join(work, f"{name}.onnx"), os.path.join(work, f"{name}.amp.onnx")
        onnx.save(model, src)
        r = run_mpc(["rewrite", src, "-o", dst])
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"Converted (\d+)/(\d+) nodes", r.stdout + r.stderr)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        self.assertGreaterEqual(int(m.group(1)), min_converted, r.stdout)
        r = run_mpc(["run", dst, "--random-inputs", "--compare", src])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        compared = re.findall(r"compare '([^']+)': .*relative L2 error ([0-9.e+-]+), "
                              r"tolerance [0-9.e+-]+ \(fp16\): ok", r.stdout + r.stderr)
        self.assertEqual(sorted(n for n, _ in compared),
                         sorted(o.name for o in model.graph.output), r.stdout)
        for out, err in compared:
            self.assertLessEqual(float(err), 1e-2, f"{out}: {r.stdout}")
        # The rewritten model is type-correct for onnxruntime too (its FusedMatMul and
        # ConvGrad outputs are fp16 where their inputs are) and agrees with the original.
        amp = onnx.load(dst)
        feeds = TESTLIB.random_inputs(model)
        want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)
        got = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, feeds)
        for o, g, w in zip(amp.graph.output, got, want):
            self.assertLessEqual(TESTLIB.relative_l2(w, g), 1e-2, o.name)
        return amp

    def test_fused_matmul_model(self):
        rng = np.random.default_rng(7)
        f32 = TensorProto.FLOAT
        inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (16, 8)).astype(np.float32), "w1"),
                 numpy_helper.from_array(rng.uniform(-0.5, 0.5, (6, 8, 5)).astype(np.float32),
                                         "w2")]
        nodes = [
            helper.make_node("FusedMatMul", ["x", "w1"], ["h"], name="fc", domain=MS,
                             transB=1, alpha=0.5),
            helper.make_node("Relu", ["h"], ["r"], name="relu"),
            helper.make_node("FusedMatMul", ["r", "r"], ["s"], name="scores", domain=MS,
                             transB=1, alpha=0.25),
            helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
            helper.make_node("FusedMatMul", ["x", "w2"], ["z"], name="batched", domain=MS,
                             transBatchA=1),
        ]
        model = make_model(nodes, [helper.make_tensor_value_info("x", f32, [4, 6, 8])],
                           [helper.make_tensor_value_info("p", f32, [4, 6, 6]),
                            helper.make_tensor_value_info("z", f32, [6, 4, 5])], inits)
        amp = self.rewrite_and_compare(model, "fused", 4)
        cast_to_f16 = [n for n in amp.graph.node if n.op_type == "Cast"
                       and helper.get_attribute_value(n.attribute[0]) == TensorProto.FLOAT16]
        self.assertTrue(cast_to_f16, "no Cast to float16 in the rewritten model")

    def test_conv_grad_model(self):
        f32 = TensorProto.FLOAT
        nodes = [helper.make_node("ConvGrad", ["dy", "x", "w"], ["dx", "dw", "db"], name="cg",
                                  domain=MS, pads=[1, 1, 1, 1])]
        model = make_model(nodes, [helper.make_tensor_value_info("dy", f32, [2, 4, 5, 5]),
                                   helper.make_tensor_value_info("x", f32, [2, 3, 5, 5]),
                                   helper.make_tensor_value_info("w", f32, [4, 3, 3, 3])],
                           [helper.make_tensor_value_info("dx", f32, [2, 3, 5, 5]),
                            helper.make_tensor_value_info("dw", f32, [4, 3, 3, 3]),
                            helper.make_tensor_value_info("db", f32, [4])])
        work = tempfile.mkdtemp(dir=self.tmp.name)
        src, dst = os.path.join(work, "cg.onnx"), os.path.join(work, "cg.amp.onnx")
        onnx.save(model, src)
        r = run_mpc(["rewrite", src, "-o", dst])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Converted 1/1 nodes", r.stdout + r.stderr)
        r = run_mpc(["run", dst, "--random-inputs", "--compare", src])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        errs = re.findall(r"relative L2 error ([0-9.e+-]+), tolerance [0-9.e+-]+ \(fp16\): ok",
                          r.stdout + r.stderr)
        self.assertEqual(len(errs), 3, r.stdout)
        self.assertTrue(all(float(e) <= 1e-2 for e in errs), r.stdout)


def main():
    global MPC, REF, TESTLIB, DEVICE
    p = argparse.ArgumentParser()
    p.add_argument("--mpc", required=True)
    p.add_argument("--source-dir", default=".")
    p.add_argument("-v", action="store_true")
    p.add_argument("-k", default=None)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import mpc_device
    mpc_device.add_device_option(p)
    args = p.parse_args()
    MPC = os.path.abspath(args.mpc)
    DEVICE = args.device
    mpc_device.skip_unless_available(MPC, DEVICE)
    sys.path.insert(0, os.path.join(args.source_dir, "tests", "python"))
    import mpc_testlib
    import mpc_training_ref
    REF = mpc_training_ref
    TESTLIB = mpc_testlib
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [f"*{args.k}*"]
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(c)
                                for c in (FusedMatMulTest, ConvGradTest, RewriteTest)])
    return mpc_testlib.run_suite(suite, verbosity=2 if args.v else 1)


if __name__ == "__main__":
    sys.exit(main())
