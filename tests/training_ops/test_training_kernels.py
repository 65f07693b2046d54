#!/usr/bin/env python3
"""mpc's kernels of the training ops (on the CPU by default) against the NumPy references.

    python3 tests/training_ops/test_training_kernels.py --mpc build/tools/mpc --source-dir . \
        [--device NAME] [-v] [-k PATTERN] [--jobs N]

--device NAME runs every node on that backend (`mpc run --device NAME`); a device mpc says is
not available here makes the suite print one line and exit 77, a skip
(tests/python/mpc_device.py). On a device other than the CPU, a case whose node that backend
has no kernel for is skipped, with mpc's line naming the op, and counted in the last line.

Every ai.mpc.training op of docs/training.md, and the default-domain training kernels
(SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, BatchNormalization training_mode=1),
runs through `mpc run` on single-node models in float32, float16, bfloat16 and float64:
  * 16-bit and float32 models take float32 inputs (already rounded to the type) and Cast
    them to the op's type, and Cast its outputs back, so both casts are exact;
  * the oracle is tests/python/mpc_training_ref.py (or onnx.reference for standard ops) in
    float64 on the same rounded inputs; tolerances follow the type's epsilon;
  * in float64, gradients are also compared with central finite differences of the forward
    op run by onnx.reference.
The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when onnx
or numpy is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import ml_dtypes
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover
    print(f"onnx (with onnx.reference), ml_dtypes and numpy are required ({e})",
          file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None
DEVICE = "cpu"
REF = None  # mpc_training_ref
FD = None  # test_training_ref (finite differences)
DOMAIN = "ai.mpc.training"
TIMEOUT_S = 120

# (ONNX element type, numpy type to round inputs through, relative tolerance)
DTYPES = {
    "f32": (TensorProto.FLOAT, np.float32, 2e-5),
    "f16": (TensorProto.FLOAT16, np.float16, 2e-3),
    "bf16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16, 1.6e-2),
    "f64": (TensorProto.DOUBLE, np.float64, 1e-12),
}


DEVICE_OPS = None  # ops with a kernel row on DEVICE (`mpc ops --json`), for DEVICE != cpu


def device_ops():
    global DEVICE_OPS
    if DEVICE_OPS is None:
        r = subprocess.run([MPC, "ops", "--json"], capture_output=True, text=True, timeout=60)
        rows = json.loads(r.stdout) if r.returncode == 0 else []
        DEVICE_OPS = {row["op"] for row in rows if row.get(f"{DEVICE}_kernels")}
    return DEVICE_OPS


def mpc_run(model, feeds, out_names, workdir):
    """Runs `mpc run`; returns the outputs as arrays, or raises with mpc's stderr."""
    if DEVICE != "cpu":
        # A node the device's kernel table lacks: skipped before starting mpc (on a GPU
        # machine each mpc process pays for initialising the device).
        missing = sorted({(n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                          for n in model.graph.node} - device_ops())
        if missing:
            raise unittest.SkipTest(f"{DEVICE} has no kernel for {', '.join(missing)}")
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    args = [MPC, "run", path, "--device", DEVICE]
    for name, arr in feeds.items():
        f = os.path.join(workdir, f"in_{name}.npy")
        np.save(f, arr)
        args += ["--input", f"{name}={f}"]
    outdir = os.path.join(workdir, "out")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    r = subprocess.run(args + ["--outputs", outdir], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env)
    if r.returncode != 0:
        if DEVICE != "cpu" and "has no kernel for it" in r.stderr:
            # Not yet on this device: a skip that names the op, never a pass.
            raise unittest.SkipTest(r.stderr.strip().splitlines()[-1])
        raise AssertionError(f"mpc run failed ({r.returncode}): {r.stderr.strip()}")
    return [np.load(os.path.join(outdir, f"{n}.npy")) for n in out_names]


def build(op, domain, inputs, n_out, attrs, dt, opset, keep=None, inits=()):
    """A model running op in type dt. inputs: list of (name, array); float arrays become
    float32 graph inputs Cast to dt (float64 inputs stay float64 for dt f64). keep: names
    of float inputs that keep their own type (parameters of another type)."""
    elem = DTYPES[dt][0]
    nodes, graph_inputs, feeds, initializers = [], [], {}, []
    node_inputs = []
    for name, arr in inputs:
        if name in inits:
            initializers.append(numpy_helper.from_array(arr, name))
            node_inputs.append(name)
            continue
        is_float = np.issubdtype(arr.dtype, np.floating) or arr.dtype == ml_dtypes.bfloat16
        if not is_float or (keep and name in keep):
            graph_inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
            feeds[name] = arr
            node_inputs.append(name)
            continue
        if dt == "f64":
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.DOUBLE,
                                                              list(arr.shape)))
            feeds[name] = arr.astype(np.float64)
            node_inputs.append(name)
            continue
        graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                          list(arr.shape)))
        feeds[name] = arr.astype(np.float32)
        nodes.append(helper.make_node("Cast", [name], [name + "_t"], to=elem))
        node_inputs.append(name + "_t")
    raw = [f"r{i}" for i in range(n_out)]
    nodes.append(helper.make_node(op, node_inputs, raw, domain=domain or None, **(attrs or {})))
    outs = []
    for i, r in enumerate(raw):
        o = f"out{i}"
        nodes.append(helper.make_node("Cast", [r], [o], to=TensorProto.DOUBLE
                                      if dt == "f64" else TensorProto.FLOAT))
        outs.append(helper.make_tensor_value_info(
            o, TensorProto.DOUBLE if dt == "f64" else TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g", graph_inputs, outs, initializer=initializers)
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model, feeds, [o.name for o in outs]


def rounded(arr, dt):
    """arr rounded to type dt, as float64."""
    if not np.issubdtype(arr.dtype, np.floating):
        return arr
    return arr.astype(DTYPES[dt][1]).astype(np.float64)


def reference(op, inputs, n_out, attrs, domain, opset):
    """float64 reference outputs: mpc_training_ref for the training domain, else
    onnx.reference."""
    names = [n for n, _ in inputs]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                         list(a.shape)) for n, a in inputs]
    outs = [helper.make_tensor_value_info(f"o{i}", TensorProto.UNDEFINED, None)
            for i in range(n_out)]
    node = helper.make_node(op, names, [f"o{i}" for i in range(n_out)], domain=domain or None,
                            **(attrs or {}))
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=imports)
    return ReferenceEvaluator(model, new_ops=REF.OPS).run(None, dict(inputs))


class KernelTest(unittest.TestCase):
    rng = np.random.default_rng(20261122)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def rand(self, *shape, lo=-1.0, hi=1.0):
        return self.rng.uniform(lo, hi, shape)

    def run_case(self, op, inputs, n_out=1, attrs=None, domain=DOMAIN, opset=17,
                 dtypes=("f32", "f16", "bf16", "f64"), keep=None, inits=(), fd=None,
                 atol_scale=None, tolerance=None):
        """Runs op through mpc in each dtype and compares with the float64 reference on
        the rounded inputs. fd: (forward, feeds, [(output index, input name)]) for a
        finite-difference check of the float64 result. tolerance: the relative tolerance
        instead of the dtype's (outputs of another type than the inputs')."""
        for dt in dtypes:
            with self.subTest(dtype=dt):
                rin = [(n, a if (keep and n in keep) or n in inits else rounded(a, dt))
                       for n, a in inputs]
                model, feeds, outs = build(op, domain, rin, n_out, attrs, dt, opset, keep,
                                           inits)
                work = tempfile.mkdtemp(dir=self.tmp.name)
                got = mpc_run(model, feeds, outs, work)
                ref_in = [(n, a.astype(np.float64) if np.issubdtype(a.dtype, np.floating)
                           else a) for n, a in rin]
                want = reference(op, ref_in, n_out, attrs, domain, opset)
                rtol = tolerance if tolerance is not None else DTYPES[dt][2]
                for i, (g, w) in enumerate(zip(got, want)):
                    w = np.asarray(w, np.float64)
                    self.assertEqual(g.shape, w.shape, f"{op} {dt} output {i}")
                    # Absolute slack relative to the output's largest magnitude:
                    # fp32 accumulation error grows with the terms, not the result.
                    peak = float(np.max(np.abs(w))) if w.size else 0.0
                    scale = atol_scale if atol_scale is not None else (peak or 1.0)
                    np.testing.assert_allclose(g.astype(np.float64), w, rtol=rtol,
                                               atol=rtol * scale,
                                               err_msg=f"{op} {dt} output {i}")
                if dt == "f64" and fd is not None:
                    forward, fd_feeds, pairs = fd
                    for out_index, wrt, dyname in pairs:
                        want_fd = FD.finite_diff(forward, fd_feeds, wrt, dict(inputs)[dyname])
                        np.testing.assert_allclose(got[out_index], want_fd, rtol=1e-5,
                                                   atol=1e-7,
                                                   err_msg=f"{op} f64 output {out_index} "
                                                           f"vs finite differences")

    # ------------------------------------------------------------- element-wise

    def test_bias_grad(self):
        for dy_shape, b_shape in [((2, 3, 4), (3, 1)), ((5, 8), (8,)), ((2, 3, 4), (1, 1, 1)),
                                  ((3, 4), (3, 4))]:
            dy = self.rand(*dy_shape)
            a = self.rand(*dy_shape)
            b = self.rand(*b_shape)
            fwd = lambda f: FD.run_forward("Add", f)[0]
            self.run_case("BiasGrad", [("dy", dy), ("shape", np.array(b_shape, np.int64))],
                          inits=("shape",),
                          fd=(fwd, {"a": a, "b": b}, [(0, "b", "dy")]))

    def test_bias_grad_to_float32(self):
        # A 16-bit dY summed into float32 (`to` = 1, a folded widening Cast): float32's
        # tolerance, not the input type's, so a kernel rounding through 16 bits fails.
        for dy_shape, b_shape in [((4, 16, 8), (8,)), ((2, 3, 4), (3, 1)), ((300, 5), (5,))]:
            dy = self.rand(*dy_shape)
            self.run_case("BiasGrad", [("dy", dy), ("shape", np.array(b_shape, np.int64))],
                          attrs={"to": TensorProto.FLOAT}, inits=("shape",),
                          dtypes=("f16", "bf16"), tolerance=1e-5)
        # The same bits as BiasGrad over dY widened to float32 first (the fold is exact).
        for dt in ("f16", "bf16"):
            dy = rounded(self.rand(64, 3, 32), dt)
            shape = numpy_helper.from_array(np.array([32], np.int64), "shape")
            results = []
            for folded in (True, False):
                nodes = [helper.make_node("Cast", ["dy"], ["dy16"], to=DTYPES[dt][0])]
                src = "dy16"
                if not folded:
                    nodes.append(helper.make_node("Cast", ["dy16"], ["wide"], to=TensorProto.FLOAT))
                    src = "wide"
                nodes.append(helper.make_node("BiasGrad", [src, "shape"], ["db"], domain=DOMAIN,
                                              **({"to": TensorProto.FLOAT} if folded else {})))
                graph = helper.make_graph(
                    nodes, "g", [helper.make_tensor_value_info("dy", TensorProto.FLOAT,
                                                               list(dy.shape))],
                    [helper.make_tensor_value_info("db", TensorProto.FLOAT, None)],
                    initializer=[shape])
                model = helper.make_model(graph, opset_imports=[
                    helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])
                model.ir_version = 8
                results.append(mpc_run(model, {"dy": dy.astype(np.float32)}, ["db"],
                                       tempfile.mkdtemp(dir=self.tmp.name))[0])
            with self.subTest(dtype=dt):
                self.assertEqual(results[0].dtype, np.float32)
                np.testing.assert_array_equal(results[0], results[1])

    def test_bias_grad_bad_to_is_refused(self):
        # `to` narrowing a float32 dY: one line naming the node, exit 1.
        model, feeds, outs = build("BiasGrad", DOMAIN, [("dy", self.rand(4, 3)),
                                                        ("shape", np.array([3], np.int64))],
                                   1, {"to": TensorProto.FLOAT16}, "f32", 17, inits=("shape",))
        with self.assertRaisesRegex(AssertionError, r"BiasGrad.*to = 10.*float32"):
            mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name))

    def unary(self, grad_op, fwd_op, x, uses_output, attrs=None, opset=17, fd=True,
              fwd=None):
        dy = self.rand(*x.shape)
        if fwd is None:
            fwd = lambda f: FD.run_forward(fwd_op, {"x": f["v"]}, attrs=attrs, opset=opset)[0]
        v = fwd({"v": x}) if uses_output else x
        self.run_case(grad_op, [("dy", dy), ("v", v)], attrs=attrs,
                      fd=(fwd, {"v": x}, [(0, "v", "dy")]) if fd else None)

    def test_relu_grad(self):
        x = self.rand(4, 9)
        x[np.abs(x) < 0.05] = 0.5
        x[0, 0] = 0.0  # dY where X > 0: zero passes nothing
        dy = self.rand(4, 9)
        self.run_case("ReluGrad", [("dy", dy), ("x", x)])
        fwd = lambda f: FD.run_forward("Relu", {"x": f["x"]})[0]
        x[0, 0] = 0.5
        self.run_case("ReluGrad", [("dy", dy), ("x", x)], dtypes=("f64",),
                      fd=(fwd, {"x": x}, [(0, "x", "dy")]))

    def test_sigmoid_tanh_grad(self):
        self.unary("SigmoidGrad", "Sigmoid", self.rand(3, 17, lo=-4, hi=4), True)
        self.unary("TanhGrad", "Tanh", self.rand(3, 17, lo=-2, hi=2), True)

    def test_erf_gelu_grad(self):
        erf = np.vectorize(__import__("math").erf, otypes=[np.float64])
        x = self.rand(3, 11, lo=-3, hi=3)
        # onnx.reference's Erf is float32; the finite differences use float64 erf.
        self.unary("ErfGrad", "Erf", x, False, fwd=lambda f: erf(f["v"]))
        self.unary("GeluGrad", "Gelu", x, False, attrs={"approximate": "none"},
                   fwd=lambda f: 0.5 * f["v"] * (1 + erf(f["v"] / np.sqrt(2))))
        self.unary("GeluGrad", "Gelu", x, False, attrs={"approximate": "tanh"}, opset=20)
        dy = self.rand(3, 11)
        self.run_case("GeluGrad", [("dy", dy), ("x", x)])  # default: none

    def test_softmax_grads(self):
        for shape, axis in [((3, 7), -1), ((2, 5, 3), 1), ((4, 6), 0)]:
            x = self.rand(*shape, lo=-2, hi=2)
            for grad_op, fwd_op in (("SoftmaxGrad", "Softmax"),
                                    ("LogSoftmaxGrad", "LogSoftmax")):
                self.unary(grad_op, fwd_op, x, True, attrs={"axis": axis})

    # ------------------------------------------------------------ normalization

    def test_layer_norm_grad(self):
        for shape, axis in [((4, 6), -1), ((2, 3, 4), 1)]:
            a = axis % len(shape)
            x, s, b = self.rand(*shape), self.rand(*shape[a:]), self.rand(*shape[a:])
            dy = self.rand(*shape)
            attrs = {"axis": axis, "epsilon": 1e-3}
            _, mean, inv = FD.run_forward("LayerNormalization", {"x": x, "s": s, "b": b}, 3,
                                          attrs)
            fwd = lambda f: FD.run_forward("LayerNormalization", f, 3, attrs)[0]
            feeds = {"x": x, "s": s, "b": b}
            # Mean and InvStdDev stay float32 (stash_type 1) for 16-bit data.
            for dt in ("f32", "f16", "bf16"):
                xr = rounded(x, dt)
                _, m32, i32 = FD.run_forward("LayerNormalization",
                                             {"x": xr.astype(np.float32),
                                              "s": rounded(s, dt).astype(np.float32),
                                              "b": rounded(b, dt).astype(np.float32)}, 3,
                                             attrs)
                self.run_case("LayerNormalizationGrad",
                              [("dy", dy), ("x", x), ("s", s), ("mean", m32), ("inv", i32)],
                              3, {"axis": axis}, dtypes=(dt,), keep=("mean", "inv"))
            self.run_case("LayerNormalizationGrad",
                          [("dy", dy), ("x", x), ("s", s), ("mean", mean), ("inv", inv)], 3,
                          {"axis": axis}, dtypes=("f64",),
                          fd=(fwd, feeds, [(0, "x", "dy"), (1, "s", "dy"), (2, "b", "dy")]))

    def test_batch_norm_grad(self):
        for shape in [(3, 2, 5), (2, 3, 2, 2), (6, 4), (1, 3, 7)]:
            c = shape[1]
            x, s, b = self.rand(*shape), self.rand(c), self.rand(c)
            mean, var = self.rand(c), self.rand(c, lo=0.5, hi=1.5)
            dy = self.rand(*shape)
            attrs = {"epsilon": 1e-3, "training_mode": 1}
            fwd = lambda f: FD.run_forward("BatchNormalization", f, 3, attrs, opset=15)[0]
            feeds = {"x": x, "s": s, "b": b, "mean": mean, "var": var}
            self.run_case("BatchNormalizationGrad", [("dy", dy), ("x", x), ("s", s)], 3,
                          {"epsilon": 1e-3},
                          fd=(fwd, feeds, [(0, "x", "dy"), (1, "s", "dy"), (2, "b", "dy")]))
        # Channels of more elements than a CUDA block has threads; only dX asked.
        x, s, dy = self.rand(3, 2, 700), self.rand(2), self.rand(3, 2, 700)
        self.run_case("BatchNormalizationGrad", [("dy", dy), ("x", x), ("s", s)], 3,
                      {"epsilon": 1e-3})
        self.run_case("BatchNormalizationGrad", [("dy", dy), ("x", x), ("s", s)], 1,
                      {"epsilon": 1e-3})
        # fp32 scale with 16-bit data (T1 kept fp32 by AMP).
        x, s, dy = self.rand(4, 3, 5), self.rand(3).astype(np.float32), self.rand(4, 3, 5)
        self.run_case("BatchNormalizationGrad", [("dy", dy), ("x", x), ("s", s)], 3,
                      dtypes=("f16", "bf16"), keep=("s",))

    def test_batch_norm_training(self):
        # A batch of one, and channels of more elements than a CUDA block has threads.
        for shape in [(4, 3, 5), (2, 3, 2, 3), (8, 2), (1, 5, 7), (3, 2, 700)]:
            c = shape[1]
            ins = [("x", self.rand(*shape, lo=-2, hi=3)), ("s", self.rand(c)),
                   ("b", self.rand(c)), ("mean", self.rand(c)),
                   ("var", self.rand(c, lo=0.5, hi=1.5))]
            for opset in (14, 15):
                self.run_case("BatchNormalization", ins, 3,
                              {"epsilon": 1e-3, "momentum": 0.8, "training_mode": 1},
                              domain="", opset=opset)
        # Default momentum and epsilon; only Y requested.
        self.run_case("BatchNormalization", ins, 1, {"training_mode": 1}, domain="",
                      opset=15)

    def test_batch_norm_statistics_of_many_values(self):
        # 32768 values per channel around 100: summed one by one in float32 the mean is
        # off by ~1e-5 relative, which (x - mean) turns into ~1e-3 on y. The statistics
        # must be as good as float32 inputs allow, as a GPU's tree reduction is.
        shape = (8, 2, 64, 64)
        ins = [("x", self.rand(*shape, lo=99, hi=101)), ("s", self.rand(2)),
               ("b", self.rand(2)), ("mean", self.rand(2)), ("var", self.rand(2, lo=0.5, hi=1.5))]
        self.run_case("BatchNormalization", ins, 3,
                      {"epsilon": 1e-3, "momentum": 0.8, "training_mode": 1},
                      domain="", opset=15, dtypes=("f32", "f64"))
        dy = self.rand(*shape)
        self.run_case("BatchNormalizationGrad", [("dy", dy), ("x", ins[0][1]), ("s", ins[1][1])],
                      3, {"epsilon": 1e-3}, dtypes=("f32", "f64"))

    # ------------------------------------------------------- conv and pooling

    def conv(self, x_shape, w_shape, dtypes=("f32", "f16", "bf16", "f64"), **attrs):
        x, w, b = self.rand(*x_shape), self.rand(*w_shape), self.rand(w_shape[0])
        y = FD.run_forward("Conv", {"x": x, "w": w, "b": b}, attrs=attrs)[0]
        dy = self.rand(*y.shape)
        fwd = lambda f: FD.run_forward("Conv", f, attrs=attrs)[0]
        self.run_case("ConvGrad", [("dy", dy), ("x", x), ("w", w)], 3, attrs, dtypes=dtypes,
                      fd=(fwd, {"x": x, "w": w, "b": b},
                          [(0, "x", "dy"), (1, "w", "dy"), (2, "b", "dy")]))

    def test_conv_grad(self):
        self.conv((2, 3, 5, 5), (4, 3, 3, 3))
        self.conv((1, 4, 6, 5), (4, 2, 3, 2), group=2, strides=[2, 1], pads=[1, 0, 1, 1],
                  dilations=[1, 2])
        self.conv((2, 2, 9), (3, 2, 3), strides=[2], pads=[1, 2], dilations=[2])
        self.conv((1, 2, 5, 4), (2, 2, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2])
        self.conv((1, 3, 4, 4), (3, 1, 2, 2), group=3, auto_pad="SAME_LOWER")
        self.conv((2, 3, 4, 4), (5, 3, 1, 1))

    def test_conv_grad_optional_outputs(self):
        x, w = self.rand(1, 2, 4, 4), self.rand(3, 2, 3, 3)
        dy = self.rand(1, 3, 2, 2)
        for dt in ("f32", "f64"):
            model, feeds, _ = build("ConvGrad", DOMAIN, [("dy", dy), ("x", x), ("w", w)], 3,
                                    None, dt, 17)
            node = [n for n in model.graph.node if n.op_type == "ConvGrad"][0]
            node.output[0] = ""
            node.output[2] = ""
            keep = [n for n in model.graph.node if n.op_type != "Cast" or n.input[0] == "r1"
                    or not n.input[0].startswith("r")]
            del model.graph.node[:]
            model.graph.node.extend(keep)
            del model.graph.output[:]
            model.graph.output.append(helper.make_tensor_value_info(
                "out1", TensorProto.DOUBLE if dt == "f64" else TensorProto.FLOAT, None))
            got = mpc_run(model, feeds, ["out1"], tempfile.mkdtemp(dir=self.tmp.name))[0]
            want = REF.conv_grad(dy, x, w)[1]
            np.testing.assert_allclose(got, want, rtol=DTYPES[dt][2] * 10,
                                       atol=DTYPES[dt][2] * 10)

    def pool(self, grad_op, fwd_op, x_shape, **attrs):
        x = self.rng.permutation(int(np.prod(x_shape))).reshape(x_shape) * 0.01 - 0.3
        y = FD.run_forward(fwd_op, {"x": x}, attrs=attrs)[0]
        dy = self.rand(*y.shape)
        fwd = lambda f: FD.run_forward(fwd_op, {"x": f["x"]}, attrs=attrs)[0]
        self.run_case(grad_op, [("dy", dy), ("x", x)], 1, attrs,
                      fd=(fwd, {"x": x}, [(0, "x", "dy")]))

    def test_max_pool_grad(self):
        self.pool("MaxPoolGrad", "MaxPool", (1, 2, 5, 5), kernel_shape=[2, 2])
        self.pool("MaxPoolGrad", "MaxPool", (2, 1, 5, 6), kernel_shape=[3, 3], strides=[1, 2],
                  pads=[1, 1, 1, 0])
        self.pool("MaxPoolGrad", "MaxPool", (1, 2, 9), kernel_shape=[3], strides=[2],
                  dilations=[2], pads=[1, 1])
        self.pool("MaxPoolGrad", "MaxPool", (1, 1, 5, 5), kernel_shape=[2, 2], strides=[2, 2],
                  ceil_mode=1)

    def test_max_pool_grad_ties(self):
        # Ties go to the first maximum of each window; padding never wins.
        x = np.zeros((1, 1, 4, 4))
        x[0, 0, 1, 1] = -1.0
        dy = self.rand(1, 1, 4, 4)
        self.run_case("MaxPoolGrad", [("dy", dy), ("x", x - 5.0)], 1,
                      {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0], "strides": [1, 1]})

    def test_average_pool_grad(self):
        for cip in (0, 1):
            self.pool("AveragePoolGrad", "AveragePool", (1, 2, 5, 5), kernel_shape=[3, 3],
                      pads=[1, 1, 1, 1], count_include_pad=cip)
            self.pool("AveragePoolGrad", "AveragePool", (2, 1, 6, 5), kernel_shape=[2, 3],
                      strides=[2, 2], pads=[0, 1, 1, 0], count_include_pad=cip)
            self.pool("AveragePoolGrad", "AveragePool", (1, 2, 7), kernel_shape=[3],
                      strides=[2], count_include_pad=cip)

    def test_global_average_pool_grad(self):
        for shape in [(2, 3, 4, 5), (1, 2, 6)]:
            x = self.rand(*shape)
            dy = self.rand(*shape[:2], *[1] * (len(shape) - 2))
            fwd = lambda f: FD.run_forward("GlobalAveragePool", {"x": f["x"]})[0]
            self.run_case("GlobalAveragePoolGrad", [("dy", dy), ("x", x)],
                          fd=(fwd, {"x": x}, [(0, "x", "dy")]))

    # ---------------------------------------------------------------- indexing

    def test_gather_grad(self):
        # many repeats of one row: the fp32 accumulation keeps f16/bf16 within rounding
        ids = np.array([[0, 2, 2, 2], [-1, 2, 4, -3]], np.int64)
        for shape, ind, axis in [((5, 3), ids, 0), ((2, 4, 3), np.array(-1, np.int64), 1),
                                 ((2, 3, 4), np.array([3, 3, -4], np.int32), -1)]:
            x = self.rand(*shape)
            y = FD.run_forward("Gather", {"x": x, "ind": ind}, attrs={"axis": axis})[0]
            dy = self.rand(*y.shape)
            fwd = lambda f: FD.run_forward("Gather", f, attrs={"axis": axis})[0]
            self.run_case("GatherGrad", [("dy", dy), ("shape", np.array(shape, np.int64)),
                                         ("ind", ind)], attrs={"axis": axis}, inits=("shape",),
                          fd=(fwd, {"x": x, "ind": ind}, [(0, "x", "dy")]))

    def test_gather_grad_index_out_of_range(self):
        model, feeds, outs = build("GatherGrad", DOMAIN,
                                   [("dy", self.rand(2, 3)),
                                    ("shape", np.array([4, 3], np.int64)),
                                    ("ind", np.array([1, 4], np.int64))],
                                   1, {"axis": 0}, "f32", 17, inits=("shape",))
        with self.assertRaisesRegex(AssertionError, "index 4 out of range"):
            mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name))

    def test_slice_grad(self):
        big = np.iinfo(np.int64)
        for shape, st, en, ax, sp in [((4, 6), [1, 0], [3, big.max], [0, 1], [1, 2]),
                                      ((5, 4), [-1], [big.min], [0], [-2]),
                                      ((3, 5), [-2, -3], [big.max, -1], None, None),
                                      ((4, 3), [3], [1], [0], None)]:
            x = self.rand(*shape)
            ins = [("st", np.array(st, np.int64)), ("en", np.array(en, np.int64))]
            if ax is not None:
                ins.append(("ax", np.array(ax, np.int64)))
            if sp is not None:
                ins.append(("sp", np.array(sp, np.int64)))
            y = FD.run_forward("Slice", dict([("x", x)] + ins))[0]
            dy = self.rand(*y.shape)
            fwd = lambda f: FD.run_forward("Slice", f)[0]
            names = ("shape",) + tuple(n for n, _ in ins)
            self.run_case("SliceGrad", [("dy", dy), ("shape", np.array(shape, np.int64))] + ins,
                          inits=names, fd=(fwd, dict([("x", x)] + ins), [(0, "x", "dy")]))

    # ------------------------------------------------------------------ losses

    def test_softmax_cross_entropy_loss_grad(self):
        cases = [((4, 5), "mean", None), ((4, 5), "sum", None), ((4, 5), "none", None),
                 ((3, 4, 2), "mean", None), ((6, 3), "mean", 1), ((3, 4, 2), "none", 2)]
        for shape, red, ignore in cases:
            scores = self.rand(*shape, lo=-2, hi=2)
            labels = self.rng.integers(0, shape[1], (shape[0],) + shape[2:]).astype(np.int64)
            attrs = {"reduction": red}
            if ignore is not None:
                attrs["ignore_index"] = ignore
                labels.flat[0] = ignore
            loss, log_prob = FD.run_forward("SoftmaxCrossEntropyLoss",
                                            {"s": scores, "l": labels}, 2, attrs)
            dloss = self.rand(*np.shape(loss)) if red == "none" else np.array(0.7)
            fwd = lambda f: FD.run_forward("SoftmaxCrossEntropyLoss", f, 2, attrs)[0]
            self.run_case("SoftmaxCrossEntropyLossGrad",
                          [("dloss", dloss), ("lp", log_prob), ("l", labels)], 1, attrs,
                          fd=(fwd, {"s": scores, "l": labels}, [(0, "s", "dloss")]))
        # int32 labels
        lp = FD.run_forward("LogSoftmax", {"x": self.rand(3, 4)})[0]
        self.run_case("SoftmaxCrossEntropyLossGrad",
                      [("dloss", np.array(1.5)), ("lp", lp),
                       ("l", np.array([0, 3, 1], np.int32))], 1, {"reduction": "sum"})

    def test_bad_input_is_refused(self):
        # A label outside [0, C) that is not ignore_index: exit 1, one line naming it.
        lp = FD.run_forward("LogSoftmax", {"x": self.rand(3, 4)})[0]
        model, feeds, outs = build("SoftmaxCrossEntropyLossGrad", DOMAIN,
                                   [("dloss", np.array(1.0)), ("lp", lp),
                                    ("l", np.array([0, 7, 1], np.int64))], 1, None, "f32", 17)
        with self.assertRaisesRegex(AssertionError, r"label 7 at index 1"):
            mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name))
        # dY that is not the forward output shape of the pool.
        model, feeds, outs = build("MaxPoolGrad", DOMAIN, [("dy", self.rand(1, 1, 2, 2)),
                                                           ("x", self.rand(1, 1, 4, 4))], 1,
                                   {"kernel_shape": [2, 2]}, "f32", 17)
        with self.assertRaisesRegex(AssertionError, r"not the forward output shape"):
            mpc_run(model, feeds, outs, tempfile.mkdtemp(dir=self.tmp.name))

    def test_mse_loss_grad(self):
        for red in ("mean", "sum", "none"):
            p, t = self.rand(3, 5), self.rand(3, 5)
            dloss = self.rand(3, 5) if red == "none" else np.array(1.3)

            def fwd(f, red=red):
                d = f["p"] - f["t"]
                sq = FD.run_forward("Mul", {"a": d, "b": d})[0]
                if red == "none":
                    return sq
                return FD.run_forward("ReduceMean" if red == "mean" else "ReduceSum",
                                      {"x": sq}, attrs={"keepdims": 0}, opset=13)[0]

            self.run_case("MSELossGrad", [("dloss", dloss), ("p", p), ("t", t)], 1,
                          {"reduction": red},
                          fd=(fwd, {"p": p, "t": t}, [(0, "p", "dloss")]))

    def test_softmax_cross_entropy_loss(self):
        for shape, red, ignore, weighted in [((4, 5), "mean", None, False),
                                             ((4, 5), "sum", None, True),
                                             ((3, 4, 2), "none", None, False),
                                             ((6, 3), "mean", 1, True),
                                             ((3, 4, 2), "mean", 2, False)]:
            scores = self.rand(*shape, lo=-2, hi=2)
            labels = self.rng.integers(0, shape[1], (shape[0],) + shape[2:]).astype(np.int64)
            attrs = {"reduction": red}
            if ignore is not None:
                attrs["ignore_index"] = ignore
                labels.flat[0] = ignore
            ins = [("s", scores), ("l", labels)]
            if weighted:
                ins.append(("w", self.rand(shape[1], lo=0.2, hi=1.5)))
            for op, first in (("SoftmaxCrossEntropyLoss", scores),
                              ("NegativeLogLikelihoodLoss",
                               FD.run_forward("LogSoftmax", {"x": scores},
                                              attrs={"axis": 1})[0])):
                cur = [("s", first)] + ins[1:]
                n_out = 2 if op == "SoftmaxCrossEntropyLoss" else 1
                # NegativeLogLikelihoodLoss takes bf16 from opset 22 (13 for the other).
                self.run_case(op, cur, n_out, attrs, domain="",
                              opset=13 if op == "SoftmaxCrossEntropyLoss" else 22)


# ------------------------------------------------------------------------ LSTM


def build_recurrent_grad(op, seed_keys, feed_keys, wrt, feeds, seeds, attrs, dt, outputs):
    """An LSTMGrad/GRUGrad model in type dt with absent inputs and unrequested outputs as
    empty names (float inputs are float32/float64 graph inputs, Cast for 16-bit and f32).
    Inputs: the seeds (seed_keys), then the forward inputs (feed_keys); outputs: names from
    wrt to compute. Returns (model, feeds, output names)."""
    elem = DTYPES[dt][0]
    wide = TensorProto.DOUBLE if dt == "f64" else TensorProto.FLOAT
    order = [("d" + k, seeds[k]) for k in seed_keys]
    order += [(n, feeds.get(n)) for n in feed_keys]
    nodes, graph_inputs, run_feeds, names, initializers = [], [], {}, [], []
    for name, arr in order:
        if arr is None:
            names.append("")
            continue
        if name == "sequence_lens":
            # A constant of the graph, as the CUDA rows take it (a graph input runs the
            # node on the CPU).
            initializers.append(numpy_helper.from_array(arr.astype(np.int32), name))
            names.append(name)
            continue
        graph_inputs.append(helper.make_tensor_value_info(name, wide, list(arr.shape)))
        run_feeds[name] = arr.astype(np.float64 if dt == "f64" else np.float32)
        if dt == "f64":
            names.append(name)
        else:
            nodes.append(helper.make_node("Cast", [name], [name + "_t"], to=elem))
            names.append(name + "_t")
    while not names[-1]:
        names.pop()
    raw = [f"r_{n}" if n in outputs else "" for n in wrt]
    while not raw[-1]:
        raw.pop()
    nodes.append(helper.make_node(op, names, raw, domain=DOMAIN, **attrs))
    outs = []
    for r in raw:
        if not r:
            continue
        nodes.append(helper.make_node("Cast", [r], ["o" + r[1:]], to=wide))
        outs.append(helper.make_tensor_value_info("o" + r[1:], wide, None))
    graph = helper.make_graph(nodes, "g", graph_inputs, outs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    return model, run_feeds, [o.name for o in outs]


def build_lstm_grad(feeds, seeds, attrs, dt, outputs):
    return build_recurrent_grad("LSTMGrad", ("y", "y_h", "y_c"),
                                ("x", "w", "r", "b", "sequence_lens", "initial_h",
                                 "initial_c"), FD.LSTM_WRT, feeds, seeds, attrs, dt, outputs)


def build_gru_grad(feeds, seeds, attrs, dt, outputs):
    return build_recurrent_grad("GRUGrad", ("y", "y_h"),
                                ("x", "w", "r", "b", "sequence_lens", "initial_h"),
                                FD.GRU_WRT, feeds, seeds, attrs, dt, outputs)


def compare_recurrent(test, wrt, outputs, got, want, dt, case, fd_loss, feeds):
    """got (the requested outputs of wrt) against the reference's full list want, within
    dt's tolerance; in float64 with fd_loss also against its finite differences."""
    rtol = DTYPES[dt][2]
    names = [n for n in wrt if n in outputs]
    want = [w for n, w in zip(wrt, want) if n in outputs]
    for name, g, w in zip(names, got, want):
        test.assertEqual(g.shape, w.shape, f"d{name} {dt}")
        peak = float(np.max(np.abs(w))) or 1.0
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=rtol, atol=rtol * peak,
                                   err_msg=f"d{name} {dt} {case}")
        if dt == "f64" and fd_loss and feeds.get(name) is not None:
            np.testing.assert_allclose(g, FD.finite_diff(fd_loss, feeds, name, 1.0),
                                       rtol=1e-5, atol=1e-8,
                                       err_msg=f"d{name} f64 vs finite differences {case}")


class LstmGradKernelTest(unittest.TestCase):
    """LSTMGrad through `mpc run` in every type against mpc_training_ref.lstm_grad on
    the rounded inputs; in float64 also against finite differences of the forward."""
    rng = np.random.default_rng(20261123)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_lstm(self, case, outputs=None, dtypes=tuple(DTYPES), fd=False):
        outputs = outputs or FD.LSTM_WRT
        feeds, attrs, seeds = FD.lstm_case(self.rng, **case)
        for dt in dtypes:
            with self.subTest(case=case, dtype=dt):
                rnd = lambda a: None if a is None or a.dtype == np.int32 else rounded(a, dt)
                rfeeds = {k: (v if v is None or v.dtype == np.int32 else rnd(v))
                          for k, v in feeds.items()}
                rseeds = {k: rnd(v) for k, v in seeds.items()}
                model, run_feeds, names = build_lstm_grad(rfeeds, rseeds, attrs, dt, outputs)
                got = mpc_run(model, run_feeds, names, tempfile.mkdtemp(dir=self.tmp.name))
                want = REF.lstm_grad(rseeds["y"], rseeds["y_h"], rseeds["y_c"], rfeeds["x"],
                                     rfeeds["w"], rfeeds["r"], rfeeds["b"],
                                     rfeeds["sequence_lens"], rfeeds["initial_h"],
                                     rfeeds["initial_c"], attrs["direction"])
                loss = lambda f: FD.lstm_loss(f, rseeds, attrs["direction"])
                compare_recurrent(self, FD.LSTM_WRT, outputs, got, want, dt, case,
                                  loss if fd else None, rfeeds)

    def test_directions(self):
        for direction in ("forward", "reverse", "bidirectional"):
            self.run_lstm(dict(direction=direction))

    def test_optional_inputs(self):
        self.run_lstm(dict(direction="forward", bias=False, states=False))
        self.run_lstm(dict(direction="bidirectional", bias=False))
        self.run_lstm(dict(direction="reverse", states=False, seeds=("y_h",)))
        self.run_lstm(dict(direction="forward", seeds=("y_c",)))
        self.run_lstm(dict(direction="bidirectional", seeds=("y", "y_c"), states=False))

    def test_sequence_lens(self):
        # dY at steps beyond an entry's length is random: the kernel must ignore it.
        for direction in ("forward", "reverse", "bidirectional"):
            self.run_lstm(dict(direction=direction, lens=True))
        self.run_lstm(dict(direction="reverse", lens=True, bias=False, seeds=("y_h", "y_c")))

    def test_larger_shapes(self):
        self.run_lstm(dict(direction="bidirectional", lens=True, seq=7, batch=3, inp=5,
                           hid=6))

    def test_some_outputs(self):
        self.run_lstm(dict(direction="bidirectional"), outputs=("w", "r"))
        self.run_lstm(dict(direction="reverse", lens=True), outputs=("x", "initial_c"))

    def test_float64_against_finite_differences(self):
        self.run_lstm(dict(direction="bidirectional", lens=True), dtypes=("f64",), fd=True)
        self.run_lstm(dict(direction="reverse", seeds=("y_h", "y_c")), dtypes=("f64",),
                      fd=True)

    def test_errors(self):
        feeds, attrs, seeds = FD.lstm_case(self.rng)
        for bad in ({"clip": 2.0}, {"input_forget": 1}, {"layout": 1},
                    {"activations": ["Tanh", "Tanh", "Tanh"]}):
            with self.subTest(attrs=bad):
                model, run_feeds, names = build_lstm_grad(feeds, seeds, {**attrs, **bad},
                                                          "f32", FD.LSTM_WRT)
                with self.assertRaisesRegex(AssertionError, "LSTMGrad|not supported"):
                    mpc_run(model, run_feeds, names, tempfile.mkdtemp(dir=self.tmp.name))


class GruGradKernelTest(unittest.TestCase):
    """GRUGrad through `mpc run` in every type against mpc_training_ref.gru_grad on the
    rounded inputs; in float64 also against finite differences of onnx.reference's GRU."""
    rng = np.random.default_rng(20261125)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_gru(self, case, outputs=None, dtypes=tuple(DTYPES), fd=False):
        outputs = outputs or FD.GRU_WRT
        feeds, attrs, seeds = FD.gru_case(self.rng, **case)
        for dt in dtypes:
            with self.subTest(case=case, dtype=dt):
                rnd = lambda a: None if a is None or a.dtype == np.int32 else rounded(a, dt)
                rfeeds = {k: rnd(v) if v is not None and v.dtype != np.int32 else v
                          for k, v in feeds.items()}
                rseeds = {k: rnd(v) for k, v in seeds.items()}
                model, run_feeds, names = build_gru_grad(rfeeds, rseeds, attrs, dt, outputs)
                got = mpc_run(model, run_feeds, names, tempfile.mkdtemp(dir=self.tmp.name))
                want = REF.gru_grad(rseeds["y"], rseeds["y_h"], rfeeds["x"], rfeeds["w"],
                                    rfeeds["r"], rfeeds["b"], rfeeds["sequence_lens"],
                                    rfeeds["initial_h"], attrs["direction"],
                                    attrs["linear_before_reset"])
                loss = lambda f: FD.gru_loss(f, rseeds, attrs)
                compare_recurrent(self, FD.GRU_WRT, outputs, got, want, dt, case,
                                  loss if fd else None, rfeeds)

    def test_directions_and_linear_before_reset(self):
        for direction in ("forward", "reverse", "bidirectional"):
            for lbr in (0, 1):
                self.run_gru(dict(direction=direction, lbr=lbr))

    def test_optional_inputs_and_outputs(self):
        self.run_gru(dict(direction="forward", lbr=1, bias=False, states=False))
        self.run_gru(dict(direction="reverse", lbr=0, states=False, seeds=("y_h",)))
        self.run_gru(dict(direction="bidirectional", lbr=1, seeds=("y",)), outputs=("w", "r"))
        self.run_gru(dict(direction="forward", lbr=0, lens=True), outputs=("x", "initial_h"))

    def test_sequence_lens_and_larger_shapes(self):
        # dY at steps beyond an entry's length is random: the kernel must ignore it.
        self.run_gru(dict(direction="bidirectional", lbr=1, lens=True))
        self.run_gru(dict(direction="reverse", lbr=0, lens=True, seq=7, batch=3, inp=5,
                          hid=6))

    def test_batch_one_and_odd_hidden_sizes(self):
        # Sizes that fill no warp or block evenly (the CUDA row's launch geometry).
        self.run_gru(dict(direction="bidirectional", lbr=0, batch=1, hid=5, seq=3))
        self.run_gru(dict(direction="forward", lbr=1, batch=1, hid=3, inp=7))
        self.run_gru(dict(direction="reverse", lbr=1, batch=3, hid=7, lens=True))
        self.run_gru(dict(direction="bidirectional", lbr=1, batch=5, hid=9, seq=6))

    def test_float64_against_finite_differences(self):
        self.run_gru(dict(direction="bidirectional", lbr=1, lens=True), dtypes=("f64",),
                     fd=True)
        self.run_gru(dict(direction="forward", lbr=0, seeds=("y_h",)), dtypes=("f64",),
                     fd=True)

    def test_errors(self):
        feeds, attrs, seeds = FD.gru_case(self.rng)
        for bad in ({"clip": 2.0}, {"layout": 1}, {"activations": ["Tanh", "Tanh"]}):
            with self.subTest(attrs=bad):
                model, run_feeds, names = build_gru_grad(feeds, seeds, {**attrs, **bad},
                                                         "f32", FD.GRU_WRT)
                with self.assertRaisesRegex(AssertionError, "GRUGrad.*not supported"):
                    mpc_run(model, run_feeds, names, tempfile.mkdtemp(dir=self.tmp.name))


def main():
    global MPC, DEVICE, REF, FD
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import mpc_device
    p = argparse.ArgumentParser()
    p.add_argument("--mpc", required=True)
    p.add_argument("--source-dir", default=".")
    p.add_argument("-v", action="store_true")
    p.add_argument("-k", default=None)
    p.add_argument("--jobs", type=int, default=1,
                   help="run the tests in N processes at once (on a GPU machine each case "
                        "starts an mpc that initialises the device)")
    p.add_argument("--shard", default=None, help=argparse.SUPPRESS)  # "I/N", for --jobs
    mpc_device.add_device_option(p)
    args = p.parse_args()
    MPC = os.path.abspath(args.mpc)
    DEVICE = args.device
    mpc_device.skip_unless_available(MPC, DEVICE)
    if args.jobs > 1 and args.shard is None:
        return run_shards(args.jobs)
    sys.path.insert(0, os.path.join(args.source_dir, "tests", "python"))
    sys.path.insert(0, os.path.join(args.source_dir, "tests", "training_ops"))
    import mpc_training_ref
    import test_training_ref
    REF = mpc_training_ref
    FD = test_training_ref
    FD.REF = mpc_training_ref
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [f"*{args.k}*"]
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(KernelTest),
                                loader.loadTestsFromTestCase(LstmGradKernelTest),
                                loader.loadTestsFromTestCase(GruGradKernelTest)])
    if args.shard is not None:
        i, n = map(int, args.shard.split("/"))
        suite = unittest.TestSuite([t for k, t in enumerate(flatten(suite)) if k % n == i])
    result = unittest.TextTestRunner(verbosity=2 if args.v else 1,
                                     resultclass=CaseCountingResult).run(suite)
    # Counted per case: a subtest is a case, and so is a test without subtests.
    failed = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    print(f"{result.cases_passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


def flatten(suite):
    """The tests of a suite, in order."""
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def run_shards(jobs):
    """--jobs N: this script N times at once, each on every N-th test (--shard I/N); prints
    each one's output but its count line, then the counts summed."""
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                               "--shard", f"{i}/{jobs}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(jobs)]
    total = [0, 0, 0]
    bad = 0
    for i, proc in enumerate(procs):
        out = proc.communicate()[0]
        lines = out.rstrip("\n").splitlines()
        counts = lines[-1].split() if lines else []
        if len(counts) == 6 and counts[1:6:2] == ["passed,", "failed,", "skipped"]:
            total = [t + int(c) for t, c in zip(total, counts[0:6:2])]
            lines = lines[:-1]
        elif proc.returncode != 77:
            bad += 1  # no count line: the shard itself broke
            lines.append(f"shard {i}/{jobs}: exit {proc.returncode} without a count line")
        if lines:
            print("\n".join(lines), flush=True)
    print(f"{total[0]} passed, {total[1] + bad} failed, {total[2]} skipped")
    return 1 if total[1] or bad else 0


class CaseCountingResult(unittest.TextTestResult):
    """Counts passing cases: each passing subtest, and each passing test that had none
    (unittest's testsRun counts tests, while its skip and failure lists hold subtests)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.cases_passed = 0
        self._with_subtests = set()

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        self._with_subtests.add(test.id())
        if err is None:
            self.cases_passed += 1

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        case = getattr(test, "test_case", None)
        if case is not None:
            self._with_subtests.add(case.id())

    def addSuccess(self, test):
        super().addSuccess(test)
        if test.id() not in self._with_subtests:
            self.cases_passed += 1


if __name__ == "__main__":
    sys.exit(main())
