"""`mpc rewrite --fuse-gemm-epilogues` (docs/user-guide.md, "GEMM epilogues"): MatMul/Gemm
with a 2-D B, its bias Add (optional), a Relu or Gelu and a Cast as one
ai.mpc.training::GemmBiasAct node, the way a user runs it:

    mpc rewrite model.onnx -o model.amp.onnx [--fuse-gemm-epilogues]
    mpc run model.amp.onnx --input x=x.npy --outputs DIR

Checked:
- the pass's exact decisions (the -v 1 lines and the summary line) on the shipped
  transformer and digits MLP, and on hand-built chains: fused; not fused because of a
  second reader, a graph output, a B of rank 3 or of unknown rank, a bias that broadcasts
  over more than the last axis, Gemm's alpha; the erf pattern in its three orders;
- without a bias: a weight gradient's GEMM (Gemm transA=1 of two graph inputs) and a
  MatMul into Cast(float32) write float32 themselves, against float64 numpy within the
  fp32 accumulation (which the unfused rewrite, rounding to 16 bits first, is not);
  MatMul + Relu bit for bit; a graph-input weight with its bias bit for bit;
- a training graph (the digits MLP, Adam, fp16): the exact decisions (both weight
  gradients and the logits write float32), and 60 steps trained with the flag against
  the same steps without it;
- the kernel without a folded cast against the unfused rewrite through `mpc run`: bit for bit
  (f32, f16, bf16; MatMul + Add, Gemm with C, Relu, Gelu and its tanh form), and against
  a float64 numpy oracle within the storage type's rounding;
- a folded cast (16-bit GEMM to float32, float32 GEMM to float16): rounds once, checked
  against float64 numpy (tolerance stated per case) and onnxruntime on the unfused model;
- the shipped models end to end: every model in models/ rewritten to fp16 and bf16 with and
  without the flag, outputs bit for bit where no cast or GELU was folded, else within a stated
  relative L2; the digits MLP and transformer also against onnxruntime on the unfused rewrite;
  a training model left alone;
- determinism (two runs write byte-identical files), the default rewrite unchanged,
  misuse of the op (one line, non-zero exit).
Prints "N passed, N failed"; exit status 77 (no onnx/numpy/ml_dtypes) is a skip.
"""
import argparse
import json
import math
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
except ImportError as e:  # pragma: no cover
    print(f"onnx, numpy and ml_dtypes are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover
    ort = None

MPC = None
SOURCE_DIR = None
DEVICE = "cpu"
TIMEOUT_S = 300
ELEM = {"f32": (TensorProto.FLOAT, np.float32), "f16": (TensorProto.FLOAT16, np.float16),
        "bf16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16)}
DOMAIN = "ai.mpc.training"


def mpc(*args, check=0):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    r = subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env)
    if check is not None and r.returncode != check:
        raise AssertionError(f"mpc {' '.join(map(str, args[:6]))}: exit {r.returncode}, "
                             f"stderr: {r.stderr.strip()[-600:]}")
    return r


def run_model(path, feeds, tmp, tag):
    """`mpc run` on `path`; returns {output name: array} (bfloat16 outputs come back widened
    exactly to float32)."""
    args = ["run", path]
    for name, arr in feeds.items():
        # .npy has no bfloat16: such inputs go as ONNX TensorProto files.
        f = os.path.join(tmp, f"{tag}.{name}.pb")
        with open(f, "wb") as fh:
            fh.write(numpy_helper.from_array(arr, name).SerializeToString())
        args += ["--input", f"{name}={f}"]
    out = os.path.join(tmp, f"{tag}.out")
    mpc(*args, "--device", DEVICE, "--outputs", out)
    model = onnx.load(path, load_external_data=False)
    return {o.name: np.load(os.path.join(out, o.name + ".npy")) for o in model.graph.output}


def const(name, arr, dt):
    return numpy_helper.from_array(np.asarray(arr).astype(ELEM[dt][1]), name)


def save(model, tmp, name):
    path = os.path.join(tmp, name)
    onnx.save(model, path)
    return path


def model_of(nodes, inputs, outputs, inits, opset=17, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    m.ir_version = 8
    return m


def vinfo(name, dt, shape):
    return helper.make_tensor_value_info(name, ELEM[dt][0], shape)


def fuse(path, tmp, extra=()):
    """`mpc rewrite --fuse-gemm-epilogues` without AMP changes to float types (TENSOR_CORES
    level keeps the given types when everything is already 16-bit); returns (out path,
    decision lines, summary line)."""
    out = path.replace(".onnx", ".fused.onnx")
    r = mpc("rewrite", path, "-o", out, "--fuse-gemm-epilogues", "-v", "1", *extra)
    lines = [l for l in r.stderr.splitlines() if l.startswith("GEMM ")]
    summary = [l for l in r.stderr.splitlines() if l.startswith("Fused GEMM epilogues")]
    return out, lines, summary[0] if summary else None


def op_types(path):
    m = onnx.load(path)
    return [(n.domain + "::" if n.domain else "") + n.op_type for n in m.graph.node]


def gelu64(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_tanh64(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACT64 = {"none": lambda v: v, "relu": lambda v: np.maximum(v, 0), "gelu": gelu64,
         "gelu_tanh": gelu_tanh64}


def fused_node_model(a, w, b, dt_in, dt_bias, dt_out, act, trans_b=False, after=0):
    """A one-node GemmBiasAct model (inputs A; W and bias initializers)."""
    attrs = {"activation": act, "to": ELEM[dt_out][0]}
    if trans_b:
        attrs["transB"] = 1
    if after:
        attrs["bias_after_rounding"] = 1
    n = helper.make_node("GemmBiasAct", ["a", "w", "b"], ["y"], domain=DOMAIN, **attrs)
    return model_of([n], [vinfo("a", dt_in, list(a.shape))],
                    [vinfo("y", dt_out, list(a.shape[:-1]) + [w.shape[0 if trans_b else 1]])],
                    [const("w", w, dt_in), const("b", b, dt_bias)],
                    extra_opsets=[helper.make_opsetid(DOMAIN, 1)])


def chain_model(dt, act, gemm=False, cast_to=None, rank3=False, opset=17, vector=False):
    """x -> MatMul (or Gemm with C) -> [Add bias] -> act -> [Cast]; returns the model."""
    rng = np.random.default_rng(7)
    k, n = 24, 40
    w = rng.standard_normal((k, n)) / math.sqrt(k)
    b = rng.standard_normal(n) * 0.5
    inits = [const("W", w, dt), const("B", b, dt)]
    xshape = [2, 5, k] if rank3 else [k] if vector else [6, k]
    nodes = []
    if gemm:
        nodes.append(helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="fc/Gemm"))
    else:
        nodes.append(helper.make_node("MatMul", ["x", "W"], ["m"], name="fc/MatMul"))
        nodes.append(helper.make_node("Add", ["m", "B"], ["h"], name="fc/Add"))
    cur = "h"
    if act == "relu":
        nodes.append(helper.make_node("Relu", [cur], ["r"], name="act/Relu"))
        cur = "r"
    elif act in ("gelu", "gelu_tanh"):
        nodes.append(helper.make_node("Gelu", [cur], ["r"], name="act/Gelu",
                                      approximate="tanh" if act == "gelu_tanh" else "none"))
        cur = "r"
    out_dt = dt
    if cast_to:
        nodes.append(helper.make_node("Cast", [cur], ["c"], name="out/Cast",
                                      to=ELEM[cast_to][0]))
        cur, out_dt = "c", cast_to
    nodes[-1].output[0] = "y"
    return model_of(nodes, [vinfo("x", dt, xshape)], [vinfo("y", out_dt, xshape[:-1] + [n])],
                    inits, opset=opset), xshape


def assert_as_unfused(test, got, ref, dt):
    """The fused node against the unfused nodes on the same device: bit for bit on the CPU;
    on CUDA cuBLASLt adds the bias before its one rounding where MatMul + Add round twice, so
    within two roundings of the 16-bit type (2^-10 for f16, 2^-7 for bf16, relative to the
    largest value; float32: 1e-5)."""
    test.assertEqual(got.dtype, ref.dtype)
    test.assertEqual(got.shape, ref.shape)
    if DEVICE == "cpu":
        test.assertTrue(np.array_equal(got.view(np.uint8), ref.view(np.uint8)),
                        f"max diff {np.max(np.abs(got.astype(float) - ref.astype(float)))}")
    else:
        tol = {"f32": 1e-5, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}[dt]
        scale = max(1.0, float(np.max(np.abs(ref.astype(np.float64)))))
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=0,
                                   atol=tol * scale)


def assert_run_refused(test, path, tmp, want):
    """`mpc run path --input a=TMP/a.npy` fails with one line naming GemmBiasAct and `want`."""
    r = mpc("run", path, "--input", f"a={os.path.join(tmp, 'a.npy')}", check=None)
    test.assertNotEqual(r.returncode, 0)
    lines = r.stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, r.stderr)
    test.assertIn(want, lines[0])
    test.assertIn("GemmBiasAct", lines[0])


def inputs_for(xshape, dt, seed=3):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(xshape).astype(ELEM[dt][1])}


# Rewrites without AMP conversions, so that the tests see only the fusion: a float32 model
# keeps every node fp32 with --deny-nodes '.*'; a 16-bit model has nothing left to convert.
def no_amp(dt):
    return ("--deny-nodes", ".*") if dt == "f32" else ()


NO_AMP = no_amp("f32")


def shipped_decisions(model_name, tmp):
    """`mpc rewrite models/NAME --fuse-gemm-epilogues -v 1`: (output path, the decision and
    summary lines)."""
    src = os.path.join(SOURCE_DIR, "models", model_name)
    out = os.path.join(tmp, "out.onnx")
    r = mpc("rewrite", src, "-o", out, "--fuse-gemm-epilogues", "-v", "1")
    return out, [l for l in r.stderr.splitlines() if l.startswith(("GEMM ", "Fused GEMM"))]


class Decisions(unittest.TestCase):
    """Exact decision lines and node lists."""

    def test_digits_mlp(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, got = shipped_decisions("digits_mlp.onnx", tmp)
            self.assertEqual(got, [
                "GEMM 'fc0/Gemm': fused with 'fc0/Relu' (activation relu)",
                "GEMM 'fc1/Gemm': fused with 'fc1/Gemm/CastToFp32' (activation none, "
                "output f32)",
                "Fused GEMM epilogues: 2 of 2 GEMMs (1 with an activation, 1 with a cast, 0 with a bias gradient; "
                "4 nodes removed)"])
            self.assertEqual(op_types(out), ["Cast", f"{DOMAIN}::GemmBiasAct",
                                             f"{DOMAIN}::GemmBiasAct", "Softmax"])

    def test_transformer(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, got = shipped_decisions("transformer.onnx", tmp)
            after = "(activation none, bias after rounding)"
            self.assertEqual(got, [
                f"GEMM 'attn/q/MatMul': fused with 'attn/q/Add' {after}",
                f"GEMM 'attn/k/MatMul': fused with 'attn/k/Add' {after}",
                f"GEMM 'attn/v/MatMul': fused with 'attn/v/Add' {after}",
                "GEMM 'attn/scores/MatMul': not fused: B 'attn/k/Transpose' has no known "
                "rank (rank 2 is needed)",
                "GEMM 'attn/context/MatMul': not fused: B 'attn/v/Transpose' has no known "
                "rank (rank 2 is needed)",
                f"GEMM 'attn/out/MatMul': fused with 'attn/out/Add' {after}",
                "GEMM 'ffn/up/MatMul': fused with 'ffn/up/Add', 'gelu/Div', 'gelu/Erf', "
                "'gelu/Add', 'gelu/Mul', 'gelu/Mul_1' (activation gelu, bias after rounding)",
                "GEMM 'ffn/down/MatMul': fused with 'ffn/down/MatMul/CastToFp32', "
                "'ffn/down/Add' (activation none, output f32)",
                "Fused GEMM epilogues: 6 of 8 GEMMs (1 with an activation, 1 with a cast, 0 with a bias gradient; "
                "18 nodes removed)"])
            m = onnx.load(out)
            # The erf pattern's constants went with its nodes; the graph output kept its name.
            names = {t.name for t in m.graph.initializer}
            self.assertFalse(names & {"gelu/sqrt2", "gelu/one", "gelu/half"}, names)
            self.assertEqual([o.name for o in m.graph.output], ["y"])
            self.assertIn((DOMAIN, 1), [(o.domain, o.version) for o in m.opset_import])

    def test_not_fused_reasons(self):
        dt = "f32"
        k, n = 8, 4
        w = np.ones((k, n))
        b = np.ones(n)
        cases = {
            # second reader of the product
            "second_reader": ([helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                               helper.make_node("Add", ["m", "B"], ["h"], name="add"),
                               helper.make_node("Relu", ["m"], ["y2"], name="other")],
                              ["h", "y2"],
                              "GEMM 'mm': not fused: 'm' has 2 readers"),
            # the product is a graph output
            "graph_output": ([helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                              helper.make_node("Add", ["m", "B"], ["h"], name="add")],
                             ["h", "m"],
                             "GEMM 'mm': not fused: 'm' is a graph output"),
            # B's rank is unknown (W reshaped to a shape read from an input of unknown length)
            "unknown_rank": ([helper.make_node("Reshape", ["W", "S"], ["U"], name="reshape"),
                              helper.make_node("MatMul", ["x", "U"], ["m"], name="mm"),
                              helper.make_node("Add", ["m", "B"], ["h"], name="add")],
                             ["h"],
                             "GEMM 'mm': not fused: B 'U' has no known rank (rank 2 is "
                             "needed)"),
            # B is a batch of matrices
            "batched_b": ([helper.make_node("MatMul", ["x", "V3"], ["m"], name="mm"),
                           helper.make_node("Relu", ["m"], ["h"], name="relu")],
                          ["h"],
                          "GEMM 'mm': not fused: B 'V3' has rank 3, not 2"),
            # the product's only reader is not a bias Add, activation or cast
            "other_reader": ([helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                              helper.make_node("Sigmoid", ["m"], ["h"], name="sig")],
                             ["h"],
                             "GEMM 'mm': not fused: nothing to fold (no bias Add, activation "
                             "or cast follows)"),
            # a bias that broadcasts over the rows too ([6, 4] matrix)
            "matrix_bias": ([helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                             helper.make_node("Add", ["m", "M6"], ["h"], name="add")],
                            ["h"],
                            "GEMM 'mm': not fused: 'add' is not the Add of a bias of 4 "
                            "broadcast over the last axis"),
            # Gemm with alpha
            "alpha": ([helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="gm", alpha=2.0),
                       helper.make_node("Relu", ["h"], ["r"], name="relu")],
                      ["r"], "GEMM 'gm': not fused: alpha is not 1"),
            # Gemm with C and nothing after it
            "gemm_alone": ([helper.make_node("Gemm", ["x", "W", "B"], ["h"], name="gm")],
                           ["h"], "GEMM 'gm': not fused: nothing to fold (its bias is Gemm's "
                                  "C, and no activation or cast follows)"),
        }
        with tempfile.TemporaryDirectory() as tmp:
            for name, (nodes, outs, want) in cases.items():
                with self.subTest(name):
                    shape = [1, 6, n] if name == "batched_b" else [6, n]
                    out_infos = [vinfo(o, dt, shape) for o in outs]
                    ins = [vinfo("x", dt, [6, k])]
                    if name == "unknown_rank":
                        ins.append(helper.make_tensor_value_info("S", TensorProto.INT64, ["r"]))
                    if name == "batched_b":
                        ins.append(vinfo("V3", dt, [1, k, n]))
                    m = model_of(nodes, ins,
                                 out_infos, [const("W", w, dt), const("B", b, dt),
                                             const("M6", np.ones((6, n)), dt)])
                    path = save(m, tmp, name + ".onnx")
                    out, lines, summary = fuse(path, tmp, NO_AMP)
                    self.assertEqual(lines, [want])
                    self.assertEqual(summary, "Fused GEMM epilogues: 0 of 1 GEMMs (0 with an "
                                              "activation, 0 with a cast, 0 with a bias gradient; 0 nodes removed)")
                    # Nothing fused: the file equals the rewrite without the flag.
                    plain = os.path.join(tmp, name + ".plain.onnx")
                    mpc("rewrite", path, "-o", plain, *NO_AMP)
                    with open(out, "rb") as f1, open(plain, "rb") as f2:
                        self.assertEqual(f1.read(), f2.read())

    def test_erf_pattern_orders(self):
        """x*0.5*(1+erf(x/sqrt2)) in the three orders exporters write, and x*(1/sqrt2)."""
        dt = "f32"
        k, n = 8, 4
        r2 = math.sqrt(2.0)

        def erf_nodes(order, scale_op):
            s = [helper.make_node(scale_op, ["h", "S"], ["d"], name="g/scale"),
                 helper.make_node("Erf", ["d"], ["e"], name="g/Erf"),
                 helper.make_node("Add", ["ONE", "e"], ["e1"], name="g/Add")]
            if order == 0:
                s += [helper.make_node("Mul", ["h", "e1"], ["p"], name="g/Mul"),
                      helper.make_node("Mul", ["p", "HALF"], ["y"], name="g/Mul_1")]
            elif order == 1:
                s += [helper.make_node("Mul", ["HALF", "h"], ["p"], name="g/Mul"),
                      helper.make_node("Mul", ["p", "e1"], ["y"], name="g/Mul_1")]
            else:
                s += [helper.make_node("Mul", ["e1", "HALF"], ["p"], name="g/Mul"),
                      helper.make_node("Mul", ["h", "p"], ["y"], name="g/Mul_1")]
            return s

        with tempfile.TemporaryDirectory() as tmp:
            for order in range(3):
                for scale_op, sval in (("Div", r2), ("Mul", 1 / r2)):
                    with self.subTest(order=order, scale=scale_op):
                        nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                                 helper.make_node("Add", ["m", "B"], ["h"], name="add")]
                        nodes += erf_nodes(order, scale_op)
                        rng = np.random.default_rng(order)
                        m = model_of(nodes, [vinfo("x", dt, [6, k])], [vinfo("y", dt, [6, n])],
                                     [const("W", rng.standard_normal((k, n)), dt),
                                      const("B", rng.standard_normal(n), dt),
                                      const("S", np.float32(sval), dt),
                                      const("ONE", np.float32(1), dt),
                                      const("HALF", np.float32(0.5), dt)])
                        path = save(m, tmp, f"erf{order}{scale_op}.onnx")
                        out, lines, _ = fuse(path, tmp, NO_AMP)
                        self.assertEqual(lines, [
                            "GEMM 'mm': fused with 'add', 'g/scale', 'g/Erf', 'g/Add', "
                            "'g/Mul', 'g/Mul_1' (activation gelu, bias after rounding)"])
                        self.assertEqual(op_types(out), [f"{DOMAIN}::GemmBiasAct"])
                        feeds = inputs_for([6, k], dt)
                        got = run_model(out, feeds, tmp, "f")["y"]
                        x = feeds["x"].astype(np.float64)
                        w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float64)
                        b = numpy_helper.to_array(m.graph.initializer[1]).astype(np.float64)
                        want = gelu64(x @ w + b)
                        # float32 storage; a few ulps from the product and erf
                        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    def test_wrong_constants_not_fused(self):
        """A Div by 2 (not sqrt 2) is not GELU: the Add is fused, the rest stays."""
        dt = "f32"
        nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                 helper.make_node("Add", ["m", "B"], ["h"], name="add"),
                 helper.make_node("Div", ["h", "S"], ["d"], name="g/Div"),
                 helper.make_node("Erf", ["d"], ["e"], name="g/Erf"),
                 helper.make_node("Add", ["e", "ONE"], ["e1"], name="g/Add"),
                 helper.make_node("Mul", ["h", "e1"], ["p"], name="g/Mul"),
                 helper.make_node("Mul", ["p", "HALF"], ["y"], name="g/Mul_1")]
        m = model_of(nodes, [vinfo("x", dt, [6, 8])], [vinfo("y", dt, [6, 4])],
                     [const("W", np.ones((8, 4)), dt), const("B", np.ones(4), dt),
                      const("S", np.float32(2), dt), const("ONE", np.float32(1), dt),
                      const("HALF", np.float32(0.5), dt)])
        with tempfile.TemporaryDirectory() as tmp:
            out, lines, _ = fuse(save(m, tmp, "m.onnx"), tmp, NO_AMP)
            self.assertEqual(lines, ["GEMM 'mm': fused with 'add' (activation none, bias "
                                     "after rounding)"])
            self.assertEqual(op_types(out), [f"{DOMAIN}::GemmBiasAct", "Div", "Erf", "Add",
                                             "Mul", "Mul"])

    def test_training_graph(self):
        """A training model (the digits MLP, Adam, the default fp16 rewrite with loss
        scaling): the weights are AMP's fp16 copies of the fp32 masters. Fused: the main
        graph's layers; in the step, fc1 with its logits' Cast to float32 and both weight
        gradients' GEMMs with the Cast into their fp32 unscale (no bias: the dW of a Gemm).
        Not fused: fc0 of the step (the backward reads its pre-activation) and fc1's input
        gradient (nothing follows it)."""
        with tempfile.TemporaryDirectory() as tmp:
            train = os.path.join(tmp, "m.train.onnx")
            mpc("train-graph", os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"), "--loss",
                "cross-entropy", "--labels", "labels", "--optimizer", "adam", "-o", train)
            plain, fused = os.path.join(tmp, "plain.onnx"), os.path.join(tmp, "fused.onnx")
            mpc("rewrite", train, "-o", plain)
            r = mpc("rewrite", train, "-o", fused, "--fuse-gemm-epilogues", "-v", "1")
            lines = [l for l in r.stderr.splitlines() if l.startswith(("GEMM ", "Fused GEMM"))]
            f32 = "(activation none, output f32)"
            self.assertEqual(lines, [
                "GEMM 'fc0/Gemm': fused with 'fc0/Relu' (activation relu)",
                f"GEMM 'fc1/Gemm': fused with 'fc1/Gemm/CastToFp32' {f32}",
                "GEMM 'fwd/fc0/Gemm_1': not fused: 'fwd/fc0/Gemm' has 2 readers",
                f"GEMM 'fwd/fc1/Gemm_1': fused with 'fwd/fc1/Gemm/CastToFp32' {f32}",
                "GEMM 'grad/fc1/Gemm/dA.Gemm': not fused: nothing to fold (no bias Add, "
                "activation or cast follows)",
                f"GEMM 'grad/fc1/Gemm/dB.Gemm': fused with 'grad/fc1/W/CastToFp32' {f32}",
                "GEMM 'grad/fc0/Gemm/dB.Gemm': fused with 'grad/fc0/W/CastToFp32', "
                "'grad/fc0/Gemm/dC.BiasGrad' (activation none, output f32, bias gradient of B)",
                "Fused GEMM epilogues: 5 of 7 GEMMs (1 with an activation, 4 with a cast, 1 with "
                "a bias gradient; 12 nodes removed)"])
            # The step: three Casts and one BiasGrad (fc0's; fc1's sums the float32 loss
            # gradient, not the GEMM's fp16 operand) fewer, the weight gradients' nodes
            # without a bias, fc0's with the bias gradient as its second output.
            def step_ops(path):
                m = onnx.load(path)
                return [(n.op_type, list(n.input), list(n.output))
                        for n in m.training_info[0].algorithm.node]
            p_ops, f_ops = step_ops(plain), step_ops(fused)
            count = lambda ops, t: sum(o == t for o, _, _ in ops)  # noqa: E731
            self.assertEqual(count(f_ops, "Cast"), count(p_ops, "Cast") - 3)
            self.assertEqual(count(f_ops, "Gemm"), count(p_ops, "Gemm") - 3)
            self.assertEqual(count(f_ops, "BiasGrad"), count(p_ops, "BiasGrad") - 1)
            ports = sorted((len(i), len(o)) for t, i, o in f_ops if t == "GemmBiasAct")
            self.assertEqual(ports, [(2, 1), (2, 2), (3, 1)])
            self.assertIn(("GemmBiasAct", ["x/CastToFp16_1", "grad/fc0/Relu/dX"],
                           ["grad/fc0/W/CastToFp32", "grad/fc0/B"]),
                          [(t, i, o) for t, i, o in f_ops if t == "GemmBiasAct"])
            # Trained: the same data and steps, the losses within the fp16 roundings the
            # fused nodes leave out (measured: 2e-3 relative at most over the 60 steps).
            logs = {}
            for tag, path in (("p", plain), ("f", fused)):
                log = os.path.join(tmp, f"{tag}.csv")
                mpc("run", path, "--train", "--data",
                    os.path.join(SOURCE_DIR, "models", "data", "digits.npz"), "--batch", "32",
                    "--steps", "60", "--shuffle", "none", "--device", DEVICE, "--log", log)
                with open(log) as f:
                    rows = [l.strip().split(",") for l in f if l.strip()]
                col = rows[0].index("loss")
                logs[tag] = np.array([float(r[col]) for r in rows[1:]])
            self.assertEqual(len(logs["p"]), 60)
            np.testing.assert_allclose(logs["f"], logs["p"], rtol=2e-2)
            self.assertLess(logs["f"][-10:].mean(), 0.5 * logs["f"][:10].mean())

    def test_report_counts_the_fused_gemms(self):
        """--report: a GemmBiasAct is GEMM work (2*M*N*K plus the bias) running in its
        operands' type, so the transformer's tensor-core rows and fp16 FLOP fraction stay
        those of the unfused rewrite (8 GEMMs, all 16-bit), and the GEMM FLOPs are the
        unfused MatMuls' plus one per biased output element."""
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(SOURCE_DIR, "models", "transformer.onnx")
            reports = {}
            for tag, extra in (("p", ()), ("f", ("--fuse-gemm-epilogues",))):
                rep = os.path.join(tmp, f"{tag}.json")
                mpc("rewrite", src, "-o", os.path.join(tmp, f"{tag}.onnx"), "--report", rep,
                    *extra)
                with open(rep) as f:
                    reports[tag] = json.load(f)
            p, f = reports["p"], reports["f"]
            self.assertEqual(f["tensor_cores"]["gemm_nodes"], 8)
            self.assertEqual(f["tensor_cores"]["half_gemm_nodes"], 8)
            self.assertGreater(f["fp16_flops_fraction"], 0.998)
            by_op = lambda r: {o["op"]: o["flops"] for o in r["flops"]["by_op"]}  # noqa: E731
            # q, k, v, out: [2, 16, 64] outputs; ffn/up [2, 16, 256]; ffn/down [2, 16, 64].
            bias_elements = 5 * 2 * 16 * 64 + 2 * 16 * 256
            self.assertEqual(by_op(f)[f"{DOMAIN}::GemmBiasAct"] + by_op(f)["MatMul"],
                             by_op(p)["MatMul"] + bias_elements)

    def test_deterministic(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(SOURCE_DIR, "models", "transformer.onnx")
            outs = []
            for i in range(2):
                out = os.path.join(tmp, f"t{i}.onnx")
                mpc("rewrite", src, "-o", out, "--fuse-gemm-epilogues")
                with open(out, "rb") as f:
                    outs.append(f.read())
            self.assertEqual(outs[0], outs[1])

    def test_default_unchanged(self):
        """Without the flag no GemmBiasAct appears and no summary line is printed."""
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(SOURCE_DIR, "models", "transformer.onnx")
            out = os.path.join(tmp, "t.onnx")
            r = mpc("rewrite", src, "-o", out)
            self.assertNotIn("Fused GEMM", r.stderr)
            self.assertNotIn("GemmBiasAct", op_types(out))


class Kernel(unittest.TestCase):
    """The CPU kernel: unfused rewrite bit for bit, float64 oracle within tolerance."""

    def test_bit_identical_without_cast(self):
        with tempfile.TemporaryDirectory() as tmp:
            for dt in ("f32", "f16", "bf16"):
                for act in ("none", "relu", "gelu", "gelu_tanh"):
                    for gemm in ((False, True) if act != "none" else (False,)):
                        for rank3 in ((False, True) if not gemm else (False,)):
                            opset = 20 if act.startswith("gelu") else 17
                            with self.subTest(dt=dt, act=act, gemm=gemm, rank3=rank3):
                                m, xshape = chain_model(dt, act, gemm=gemm, rank3=rank3,
                                                        opset=opset)
                                path = save(m, tmp, f"c_{dt}_{act}_{gemm}_{rank3}.onnx")
                                plain = path.replace(".onnx", ".plain.onnx")
                                mpc("rewrite", path, "-o", plain, *no_amp(dt))
                                out, lines, _ = fuse(path, tmp, no_amp(dt))
                                self.assertEqual(len(lines), 1)
                                self.assertIn("fused with", lines[0])
                                self.assertEqual(op_types(out), [f"{DOMAIN}::GemmBiasAct"])
                                feeds = inputs_for(xshape, dt)
                                got = run_model(out, feeds, tmp, "f")["y"]
                                ref = run_model(plain, feeds, tmp, "p")["y"]
                                assert_as_unfused(self, got, ref, dt)

    def test_vector_input(self):
        """A 1-D A (MatMul's row vector, its axis dropped): Y is [N], bit for bit the unfused
        MatMul + Add + Relu."""
        with tempfile.TemporaryDirectory() as tmp:
            for dt in ("f32", "f16"):
                with self.subTest(dt=dt):
                    m, xshape = chain_model(dt, "relu", vector=True)
                    path = save(m, tmp, f"v_{dt}.onnx")
                    plain = path.replace(".onnx", ".plain.onnx")
                    mpc("rewrite", path, "-o", plain, *no_amp(dt))
                    out, lines, _ = fuse(path, tmp, no_amp(dt))
                    self.assertEqual(op_types(out), [f"{DOMAIN}::GemmBiasAct"])
                    feeds = inputs_for(xshape, dt)
                    got = run_model(out, feeds, tmp, "f")["y"]
                    ref = run_model(plain, feeds, tmp, "p")["y"]
                    self.assertEqual(got.shape, (40,))
                    assert_as_unfused(self, got, ref, dt)

    def test_folded_cast_rounds_once(self):
        """16-bit GEMM -> Cast(float) and float GEMM -> Cast(float16): against float64 numpy
        (the fp32 accumulation of K = 24 terms: rtol 1e-5 for a float32 result; one rounding
        of a 16-bit result: 2^-11 (f16) relative to the largest value)."""
        with tempfile.TemporaryDirectory() as tmp:
            for dt, cast_to in (("f16", "f32"), ("bf16", "f32"), ("f32", "f16"),
                                ("f32", "bf16")):
                for act in ("none", "relu", "gelu"):
                    for gemm in (False, True):
                        with self.subTest(dt=dt, cast=cast_to, act=act, gemm=gemm):
                            m, xshape = chain_model(dt, act, gemm=gemm, cast_to=cast_to,
                                                    opset=20 if act == "gelu" else 17)
                            path = save(m, tmp, f"k_{dt}_{cast_to}_{act}_{gemm}.onnx")
                            out, lines, _ = fuse(path, tmp, no_amp(dt))
                            self.assertIn(f"output {cast_to}", lines[0])
                            self.assertEqual(op_types(out), [f"{DOMAIN}::GemmBiasAct"])
                            feeds = inputs_for(xshape, dt)
                            got = run_model(out, feeds, tmp, "f")["y"]
                            self.assertEqual(got.dtype, np.float32 if cast_to == "bf16"
                                             else ELEM[cast_to][1])
                            x = feeds["x"].astype(np.float64)
                            w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float64)
                            b = numpy_helper.to_array(m.graph.initializer[1]).astype(np.float64)
                            want = ACT64[act](x @ w + b)
                            if cast_to == "f32":
                                # The unfused graph rounds the product to 16 bits (relative
                                # error up to 2^-9 for bf16); the fused node keeps float32.
                                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
                            else:
                                # float32 result rounded once to 16 bits: within half an ulp
                                # of the 16-bit type (plus the float32 error).
                                ulp = 2.0 ** (-11 if cast_to == "f16" else -8)
                                err = np.abs(got.astype(np.float64) - want)
                                self.assertTrue(np.all(err <= ulp * np.abs(want) + 1e-6),
                                                f"max rel {np.max(err / (np.abs(want) + 1e-30))}")
                            # The unfused model's Cast rounds the same float32 values: with a
                            # float32 GEMM the fused result is bit-identical.
                            if dt == "f32":
                                plain = path.replace(".onnx", ".plain.onnx")
                                mpc("rewrite", path, "-o", plain, *NO_AMP)
                                ref = run_model(plain, feeds, tmp, "p")["y"]
                                assert_as_unfused(self, got, ref, cast_to)

    def test_no_bias_into_float32(self):
        """A weight gradient's GEMM as train-graph writes it (Gemm transA=1 of two graph
        inputs, X [R, K] and dY [R, N]) and a MatMul of two graph inputs, each into
        Cast(float32): one GemmBiasAct without a bias that writes float32 itself. Against
        float64 numpy within the fp32 accumulation of R or K terms (rtol 1e-5 of the largest
        value); the unfused rewrite rounds the product to 16 bits first (2^-11 or 2^-8
        relative) and is not within it, so this tells the two apart."""
        rows, k, n = 64, 24, 40
        with tempfile.TemporaryDirectory() as tmp:
            for dt in ("f16", "bf16"):
                for form in ("gemm_transA", "matmul"):
                    with self.subTest(dt=dt, form=form):
                        rng = np.random.default_rng(5)
                        if form == "gemm_transA":
                            gemm = helper.make_node("Gemm", ["x", "d"], ["g"], name="dw",
                                                    transA=1)
                            shapes = {"x": [rows, k], "d": [rows, n]}
                        else:
                            gemm = helper.make_node("MatMul", ["x", "d"], ["g"], name="dw")
                            shapes = {"x": [rows, k], "d": [k, n]}
                        cast = helper.make_node("Cast", ["g"], ["y"], name="dw/Cast",
                                                to=TensorProto.FLOAT)
                        yshape = [k, n] if form == "gemm_transA" else [rows, n]
                        m = model_of([gemm, cast], [vinfo(v, dt, sh) for v, sh in shapes.items()],
                                     [vinfo("y", "f32", yshape)], [])
                        path = save(m, tmp, f"nb_{dt}_{form}.onnx")
                        plain = path.replace(".onnx", ".plain.onnx")
                        mpc("rewrite", path, "-o", plain)
                        out, lines, _ = fuse(path, tmp)
                        self.assertEqual(lines, ["GEMM 'dw': fused with 'dw/Cast' (activation "
                                                 "none, output f32)"])
                        fused_model = onnx.load(out)
                        self.assertEqual(op_types(out), [f"{DOMAIN}::GemmBiasAct"])
                        self.assertEqual(list(fused_model.graph.node[0].input), ["x", "d"])
                        feeds = {v: rng.standard_normal(sh).astype(ELEM[dt][1])
                                 for v, sh in shapes.items()}
                        got = run_model(out, feeds, tmp, "f")["y"]
                        ref = run_model(plain, feeds, tmp, "p")["y"]
                        x64, d64 = (feeds[v].astype(np.float64) for v in ("x", "d"))
                        want = x64.T @ d64 if form == "gemm_transA" else x64 @ d64
                        self.assertEqual(got.dtype, np.float32)
                        self.assertEqual(got.shape, want.shape)
                        atol = 1e-5 * float(np.max(np.abs(want)))
                        np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)
                        self.assertFalse(np.allclose(ref, want, rtol=1e-5, atol=atol),
                                         "the unfused rewrite was expected to round to 16 bits")

    def test_bias_gradient(self):
        """A weight gradient's GEMM with the BiasGrad of the same dY, as train-graph writes
        them: a MatMul layer's (Flatten(-1) of X [2, 5, K] and dY [2, 5, N], Gemm transA=1,
        BiasGrad(dY, Shape(b))) and a Gemm layer's (Gemm transA=1 of dY [R, N] and X, the
        BiasGrad of dY = A). One GemmBiasAct with the bias gradient as its second output:
        against float64 numpy (dW within the fp32 accumulation; db the same sums), and db bit
        for bit the unfused BiasGrad's on the CPU (the same body)."""
        k, n = 12, 20
        with tempfile.TemporaryDirectory() as tmp:
            for dt in ("f16", "bf16", "f32"):
                for form in ("matmul_layer", "gemm_layer"):
                    with self.subTest(dt=dt, form=form):
                        rng = np.random.default_rng(13)
                        to = {"to": TensorProto.FLOAT} if dt != "f32" else {}
                        nodes = [helper.make_node("Shape", ["b"], ["bs"], name="shape"),
                                 helper.make_node("BiasGrad", ["d", "bs"], ["db"],
                                                  domain=DOMAIN, name="dbias", **to)]
                        if form == "matmul_layer":
                            shapes = {"x": [2, 5, k], "d": [2, 5, n]}
                            nodes += [helper.make_node("Flatten", ["x"], ["x2"], axis=-1),
                                      helper.make_node("Flatten", ["d"], ["d2"], axis=-1),
                                      helper.make_node("Gemm", ["x2", "d2"], ["g"], name="dw",
                                                       transA=1)]
                            wshape, of = [k, n], "B"
                        else:
                            shapes = {"d": [10, n], "x": [10, k]}
                            nodes.append(helper.make_node("Gemm", ["d", "x"], ["g"], name="dw",
                                                          transA=1))
                            wshape, of = [n, k], "A"
                        if dt != "f32":
                            nodes.append(helper.make_node("Cast", ["g"], ["w"], name="dw/Cast",
                                                          to=TensorProto.FLOAT))
                        else:
                            nodes[-1].output[0] = "w"
                        m = model_of(nodes, [vinfo(v, dt, sh) for v, sh in shapes.items()],
                                     [vinfo("w", "f32", wshape), vinfo("db", "f32", [n])],
                                     [const("b", np.zeros(n), "f32")],
                                     extra_opsets=[helper.make_opsetid(DOMAIN, 1)])
                        path = save(m, tmp, f"bg_{dt}_{form}.onnx")
                        plain = path.replace(".onnx", ".plain.onnx")
                        mpc("rewrite", path, "-o", plain, *no_amp(dt))
                        out, lines, summary = fuse(path, tmp, no_amp(dt))
                        absorbed = "'dw/Cast', 'dbias'" if dt != "f32" else "'dbias'"
                        output = ", output f32" if dt != "f32" else ""
                        self.assertEqual(lines, [f"GEMM 'dw': fused with {absorbed} (activation "
                                                 f"none{output}, bias gradient of {of})"])
                        self.assertIn("1 with a bias gradient", summary)
                        fm = onnx.load(out)
                        fused = [nd for nd in fm.graph.node if nd.op_type == "GemmBiasAct"]
                        self.assertEqual(len(fused), 1)
                        self.assertEqual(list(fused[0].output), ["w", "db"])
                        self.assertNotIn("BiasGrad", [nd.op_type for nd in fm.graph.node])
                        self.assertNotIn("Shape", [nd.op_type for nd in fm.graph.node])
                        feeds = {v: rng.standard_normal(sh).astype(ELEM[dt][1])
                                 for v, sh in shapes.items()}
                        got = run_model(out, feeds, tmp, "f")
                        ref = run_model(plain, feeds, tmp, "p")
                        x64 = feeds["x"].astype(np.float64).reshape(-1, k)
                        d64 = feeds["d"].astype(np.float64).reshape(-1, n)
                        want_w = x64.T @ d64 if form == "matmul_layer" else d64.T @ x64
                        atol = 1e-5 * float(np.max(np.abs(want_w)))
                        np.testing.assert_allclose(got["w"], want_w, rtol=1e-5, atol=atol)
                        np.testing.assert_allclose(got["db"], d64.sum(0), rtol=1e-5, atol=1e-5)
                        if DEVICE == "cpu":
                            self.assertTrue(np.array_equal(got["db"], ref["db"]))

    def test_bias_gradient_left_alone(self):
        """Where the BiasGrad is not the operand's column sum, or the fused node would compute
        an operand from its own bias gradient, it stays: a BiasGrad to [1] (all of dY), a
        Flatten over axis 1 of a rank-3 dY (its columns are not dY's last axis), X computed
        from the bias gradient (a cycle)."""
        k, n = 6, 8
        cases = {
            "to_one": "GEMM 'dw': not fused: 'w' is a graph output",
            "flatten_axis1": "GEMM 'dw': not fused: 'w' is a graph output",
            "cycle": "GEMM 'dw': not fused: an operand may be computed from its bias gradient",
        }
        with tempfile.TemporaryDirectory() as tmp:
            for name, want in cases.items():
                with self.subTest(name):
                    bshape = [1] if name == "to_one" else [n]
                    nodes = [helper.make_node("Shape", ["b"], ["bs"], name="shape"),
                             helper.make_node("BiasGrad", ["d", "bs"], ["db"], domain=DOMAIN,
                                              name="dbias")]
                    dshape = [2, 4, n] if name == "flatten_axis1" else [8, n]
                    ins = [vinfo("d", "f32", dshape), vinfo("x0", "f32", [8, k])]
                    if name == "flatten_axis1":
                        nodes.append(helper.make_node("Flatten", ["d"], ["d2"], axis=1))
                        nodes.append(helper.make_node("Gemm", ["x0", "d2"], ["w"], name="dw",
                                                      transA=1))
                        wshape = [k, 4 * n]
                        ins[1] = vinfo("x0", "f32", [2, k])
                    elif name == "cycle":
                        nodes += [helper.make_node("ReduceSum", ["db"], ["s"], keepdims=0),
                                  helper.make_node("Mul", ["x0", "s"], ["x"]),
                                  helper.make_node("Gemm", ["x", "d"], ["w"], name="dw",
                                                   transA=1)]
                        wshape = [k, n]
                    else:
                        nodes.append(helper.make_node("Gemm", ["x0", "d"], ["w"], name="dw",
                                                      transA=1))
                        wshape = [k, n]
                    m = model_of(nodes, ins, [vinfo("w", "f32", wshape),
                                              vinfo("db", "f32", bshape)],
                                 [const("b", np.zeros(bshape), "f32")],
                                 extra_opsets=[helper.make_opsetid(DOMAIN, 1)])
                    path = save(m, tmp, f"bgl_{name}.onnx")
                    out, lines, _ = fuse(path, tmp, NO_AMP)
                    self.assertEqual(lines, [want])
                    self.assertNotIn("GemmBiasAct", op_types(out))

    def test_bias_grad_misuse(self):
        """A bias_grad output the op cannot compute: one line naming the node and why, a
        non-zero exit."""
        rng = np.random.default_rng(2)
        a = rng.standard_normal((3, 4)).astype(np.float32)
        cases = [
            ("with_bias", ["a", "w", "b"], ["y", "db"], {"bias_grad_of": 1},
             "bias_grad needs no bias input and activation none"),
            ("trans_b", ["a", "w"], ["y", "db"], {"bias_grad_of": 1, "transB": 1},
             "bias_grad of B needs transB = 0 (B stored [K, N])"),
            ("operand", ["a", "w"], ["y", "db"], {"bias_grad_of": 5},
             "bias_grad_of 5 is not 0 (A) or 1 (B)"),
            ("no_output", ["a", "w"], ["y"], {"bias_grad_of": 1},
             "bias_grad_of is set but the node has no bias_grad output"),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            np.save(os.path.join(tmp, "a.npy"), a)
            for name, ins, outs, attrs, want in cases:
                with self.subTest(name):
                    w = np.ones((6, 4)) if attrs.get("transB") else np.ones((4, 6))
                    nd = helper.make_node("GemmBiasAct", ins, outs, domain=DOMAIN, **attrs)
                    m = model_of([nd], [vinfo("a", "f32", [3, 4])],
                                 [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                  for o in outs],
                                 [const("w", w, "f32"), const("b", np.ones(6), "f32")],
                                 extra_opsets=[helper.make_opsetid(DOMAIN, 1)])
                    assert_run_refused(self, save(m, tmp, name + ".onnx"), tmp, want)

    def test_no_bias_and_graph_input_weight_as_unfused(self):
        """MatMul + Relu without a bias (constant weight), and MatMul + Add with the weight a
        graph input: bit for bit the unfused rewrite on the CPU (f32, f16, bf16)."""
        k, n = 24, 40
        with tempfile.TemporaryDirectory() as tmp:
            for dt in ("f32", "f16", "bf16"):
                for form in ("relu_no_bias", "input_weight"):
                    with self.subTest(dt=dt, form=form):
                        rng = np.random.default_rng(9)
                        w = rng.standard_normal((k, n)) / math.sqrt(k)
                        if form == "relu_no_bias":
                            nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                                     helper.make_node("Relu", ["m"], ["y"], name="relu")]
                            ins, inits = [vinfo("x", dt, [2, 5, k])], [const("W", w, dt)]
                            want_line = "GEMM 'mm': fused with 'relu' (activation relu)"
                        else:
                            nodes = [helper.make_node("MatMul", ["x", "V"], ["m"], name="mm"),
                                     helper.make_node("Add", ["m", "B"], ["y"], name="add")]
                            ins = [vinfo("x", dt, [2, 5, k]), vinfo("V", dt, [k, n])]
                            inits = [const("B", rng.standard_normal(n), dt)]
                            want_line = ("GEMM 'mm': fused with 'add' (activation none, bias "
                                         "after rounding)")
                        m = model_of(nodes, ins, [vinfo("y", dt, [2, 5, n])], inits)
                        path = save(m, tmp, f"u_{dt}_{form}.onnx")
                        plain = path.replace(".onnx", ".plain.onnx")
                        mpc("rewrite", path, "-o", plain, *no_amp(dt))
                        out, lines, _ = fuse(path, tmp, no_amp(dt))
                        self.assertEqual(lines, [want_line])
                        self.assertEqual(op_types(out), [f"{DOMAIN}::GemmBiasAct"])
                        feeds = inputs_for([2, 5, k], dt)
                        if form == "input_weight":
                            feeds["V"] = w.astype(ELEM[dt][1])
                        got = run_model(out, feeds, tmp, "f")["y"]
                        ref = run_model(plain, feeds, tmp, "p")["y"]
                        assert_as_unfused(self, got, ref, dt)

    def test_against_onnxruntime(self):
        """A folded cast against onnxruntime running the unfused model: the unfused model
        rounds the product to 16 bits before the bias (ORT's fp16 MatMul and Add), the fused
        node does not, so they differ by up to one 16-bit rounding of the pre-activation."""
        if ort is None:
            self.skipTest("onnxruntime not installed")
        with tempfile.TemporaryDirectory() as tmp:
            for act in ("none", "relu"):
                with self.subTest(act=act):
                    m, xshape = chain_model("f16", act, cast_to="f32")
                    path = save(m, tmp, f"ort_{act}.onnx")
                    out, _, _ = fuse(path, tmp, no_amp("f16"))
                    feeds = inputs_for(xshape, "f16")
                    got = run_model(out, feeds, tmp, "f")["y"]
                    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                    want = sess.run(None, feeds)[0]
                    np.testing.assert_allclose(got, want, rtol=2.0 ** -10, atol=2.0 ** -10)

    def test_misuse(self):
        """Bad attributes or types: one line naming the node, non-zero exit."""
        rng = np.random.default_rng(1)
        a = rng.standard_normal((3, 4)).astype(np.float32)
        cases = [
            ("activation", dict(activation="swish"), "activation 'swish' is not none, relu, "
                                                     "gelu or gelu_tanh"),
            ("bias", dict(bias=np.ones(5)), "bias [5] is not a vector of N = 6"),
            ("to", dict(to="f64"), "node #0 (ai.mpc.training::GemmBiasAct) output 'y' has "
                                   "type f64, which GemmBiasAct-1 does not accept for TY"),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for name, over, want in cases:
                with self.subTest(name):
                    bias = over.get("bias", np.ones(6))
                    m = fused_node_model(a, np.ones((4, 6)), bias, "f32", "f32", "f32",
                                         over.get("activation", "none"))
                    if "to" in over:
                        for at in m.graph.node[0].attribute:
                            if at.name == "to":
                                at.i = TensorProto.DOUBLE
                        # Declared as `to` says (else the verifier refuses the declared
                        # type the attribute contradicts); the schema's TY refuses f64.
                        for o in m.graph.output[:1]:
                            o.type.tensor_type.elem_type = TensorProto.DOUBLE
                    np.save(os.path.join(tmp, "a.npy"), a)
                    assert_run_refused(self, save(m, tmp, name + ".onnx"), tmp, want)


class Models(unittest.TestCase):
    """The shipped models end to end through the CLI."""

    def _both(self, name, feeds, tmp, extra=()):
        src = os.path.join(SOURCE_DIR, "models", name)
        plain, fused = os.path.join(tmp, "plain.onnx"), os.path.join(tmp, "fused.onnx")
        mpc("rewrite", src, "-o", plain, *extra)
        mpc("rewrite", src, "-o", fused, "--fuse-gemm-epilogues", *extra)
        return (plain, fused, run_model(plain, feeds, tmp, "p"),
                run_model(fused, feeds, tmp, "f"))

    def test_every_shipped_model(self):
        """Every model in models/, fp16 and bf16: the fused rewrite runs; where no cast and no
        GELU was folded its output is bit for bit the unfused rewrite's, elsewhere within a
        relative L2 of four roundings of the 16-bit type (4 * 2^-11 for fp16, 4 * 2^-8 for
        bf16; the measured figures are 6e-5 to 3e-4 and 1.5e-3 to 3.2e-3)."""
        models = sorted(f for f in os.listdir(os.path.join(SOURCE_DIR, "models"))
                        if f.endswith(".onnx"))
        with tempfile.TemporaryDirectory() as tmp:
            for name in models:
                for target, tol in (("fp16", 4 * 2.0 ** -11), ("bf16", 4 * 2.0 ** -8)):
                    with self.subTest(model=name, target=target):
                        src = os.path.join(SOURCE_DIR, "models", name)
                        paths = {}
                        for tag, extra in (("p", ()), ("f", ("--fuse-gemm-epilogues", "-v",
                                                                "1"))):
                            paths[tag] = os.path.join(tmp, f"{name}.{target}.{tag}.onnx")
                            r = mpc("rewrite", src, "-o", paths[tag], "--target", target,
                                    *extra)
                        fused = [l for l in r.stderr.splitlines() if ": fused with " in l]
                        exact = all("output " not in l and "activation gelu" not in l
                                    for l in fused)
                        outs = {}
                        for tag in ("p", "f"):
                            od = os.path.join(tmp, f"{name}.{target}.{tag}.out")
                            mpc("run", paths[tag], "--random-inputs", "--dim", "N=8",
                                "--seed", "3", "--device", DEVICE, "--outputs", od)
                            outs[tag] = {f: np.load(os.path.join(od, f))
                                         for f in sorted(os.listdir(od))}
                        self.assertEqual(sorted(outs["p"]), sorted(outs["f"]))
                        for k in outs["p"]:
                            a, b = outs["p"][k], outs["f"][k]
                            if exact and DEVICE == "cpu":
                                self.assertTrue(np.array_equal(a.view(np.uint8),
                                                               b.view(np.uint8)), k)
                            else:
                                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                                rel = np.linalg.norm(a64 - b64) / max(np.linalg.norm(a64),
                                                                      1e-30)
                                self.assertLessEqual(rel, tol, k)

    def test_digits_mlp(self):
        """fc0 (Gemm + Relu) is bit-identical; fc1's folded cast keeps the fp32 sum, so the
        softmax differs from the unfused rewrite by at most the fp16 rounding of fc1."""
        data = np.load(os.path.join(SOURCE_DIR, "models", "data", "digits.npz"))
        x = data["x_test"][:64].astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            plain, fused, p, f = self._both("digits_mlp.onnx", {"x": x}, tmp)
            np.testing.assert_allclose(f["probs"], p["probs"], rtol=0, atol=2e-3)
            self.assertTrue(np.array_equal(np.argmax(f["probs"], 1), np.argmax(p["probs"], 1)))
            if ort is not None:
                sess = ort.InferenceSession(plain, providers=["CPUExecutionProvider"])
                want = sess.run(None, {"x": x})[0]
                np.testing.assert_allclose(f["probs"], want, rtol=0, atol=2e-3)

    def test_digits_mlp_relu_only_bit_identical(self):
        """The digits MLP's first layer as a model of its own (an fp16 Gemm with C, then
        Relu, as the AMP rewrite leaves it): the default rewrite and the fused one are bit
        for bit the same."""
        m, xshape = chain_model("f16", "relu", gemm=True)
        with tempfile.TemporaryDirectory() as tmp:
            path = save(m, tmp, "g.onnx")
            plain = os.path.join(tmp, "g.plain.onnx")
            mpc("rewrite", path, "-o", plain)
            out = os.path.join(tmp, "g.fused.onnx")
            mpc("rewrite", path, "-o", out, "--fuse-gemm-epilogues")
            feeds = inputs_for(xshape, "f16")
            got = run_model(out, feeds, tmp, "f")["y"]
            ref = run_model(plain, feeds, tmp, "p")["y"]
            assert_as_unfused(self, got, ref, "f16")

    def test_transformer(self):
        """The fp16 rewrite with and without the flag: the erf pattern rounds once instead of
        five times and ffn/down keeps its fp32 sum, so the outputs differ by the fp16
        rounding of the block (atol 2e-2 on values of magnitude ~3); both are compared with
        onnxruntime on the unfused rewrite."""
        rng = np.random.default_rng(11)
        x = rng.standard_normal((2, 16, 64)).astype(np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            plain, fused, p, f = self._both("transformer.onnx", {"x": x}, tmp)
            np.testing.assert_allclose(f["y"], p["y"], rtol=0, atol=2e-2)
            if ort is not None:
                sess = ort.InferenceSession(plain, providers=["CPUExecutionProvider"])
                want = sess.run(None, {"x": x})[0]
                np.testing.assert_allclose(f["y"], want, rtol=0, atol=2e-2)
                np.testing.assert_allclose(p["y"], want, rtol=0, atol=2e-2)


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
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(c)
                               for c in (Decisions, Kernel, Models))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
