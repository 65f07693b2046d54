"""Tests of `mpc train-graph` on models written the way torch.onnx.export writes them
(docs/training.md), built with onnx.helper (PyTorch is not a test dependency).

(a) Initializers the exporter merged by value (eval-mode export): BatchNormalization running
    statistics read through Identity(gamma) / Identity(beta), normalization scales and biases
    shared by several layers. train-graph unties them (exact summary line), and the untied
    model trains through `train-graph -> run --train` exactly as the un-merged model does;
    both match a float64 numpy reference (central finite differences of a numpy forward).
    A statistic that is not an initializer is refused with one line.
(b) Shapes with a symbolic batch: a transformer-encoder block as exported (packed q/k/v,
    Slices with bounds computed from Shape, Reshapes to Concat-built shapes), whose ranks
    libonnx 1.12's inference loses: float64 gradients of the step (onnx.reference) against
    finite differences of a numpy forward, float32 SGD steps via the CLI against float64 numpy
    SGD, and a symbolic batch dimension carried to the labels input.
(c) A GPT-style decoder (embeddings, Split, masked_fill as Where with a causal-mask buffer,
    next-token loss on [N, T, V] logits), N and T symbolic: float32 SGD steps via the CLI
    against float64 numpy SGD; the mask buffer is not trained.

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
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402
from mpc_trainlib import cross_entropy, fd_gradients  # noqa: E402

ARGS = None
OPSET = 17


def run_mpc(*args, timeout=120):
    return subprocess.run([ARGS.mpc, *args], capture_output=True, text=True, timeout=timeout)


def make_model(nodes, inputs, output, inits, name):
    g = helper.make_graph(nodes, name, inputs, [output],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m


def train_cli(test, tmp, model, feeds, labels, steps, *flags):
    """train-graph (cross-entropy, sgd) -> run --train with full batches; returns the
    checkpoint's initializers and train-graph's stdout lines."""
    src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m.train.onnx")
    onnx.save(model, src)
    r = run_mpc("train-graph", src, "--loss", "cross-entropy", *flags, "-o", dst)
    test.assertEqual(r.returncode, 0, r.stderr)
    lab = tl.metadata(onnx.load(dst))["mpc.training.labels"]
    data = os.path.join(tmp, "d.npz")
    np.savez(data, **feeds, **{lab: labels})
    ck = os.path.join(tmp, "ck")
    n = len(labels)
    rr = run_mpc("run", dst, "--train", "--data", data, "--batch", str(n), "--steps",
                 str(steps), "--holdout", "0", "--checkpoint", ck)
    test.assertEqual(rr.returncode, 0, rr.stderr)
    got = {t.name: numpy_helper.to_array(t)
           for t in onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}
    return got, r.stdout.splitlines()


def layer_norm(v, s, b):
    mu, var = v.mean(axis=-1, keepdims=True), v.var(axis=-1, keepdims=True)
    return (v - mu) / np.sqrt(var + 1e-5) * s + b


def softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sgd_reference(loss, params, lr, steps):
    """float64 SGD on loss(p) with finite-difference gradients."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    for _ in range(steps):
        g = fd_gradients(loss, p)
        for k in p:
            p[k] -= lr * g[k]
    return p


# --------------------------------------------------------------------------------------------
# (a) initializers the exporter merged
# --------------------------------------------------------------------------------------------

C_BN = 2


def bn_stack(merged):
    """x [N, 2, 2, 2] -> BN1 -> Relu -> BN2 -> Flatten -> MatMul(W) -> logits [N, 3], BN at
    PyTorch's initialization (weight 1, bias 0, running mean 0, running var 1; momentum 0.9
    is PyTorch's 0.1). `merged`: as an eval-mode export writes it, with the duplicates of
    bn1.weight and bn1.bias read through Identity nodes; "stats": only bn2's statistics read
    bn1's (parameters kept apart, as a non-default initialization would)."""
    C = C_BN
    rng = np.random.default_rng(41)
    ones, zeros = np.ones(C, np.float32), np.zeros(C, np.float32)
    w = rng.standard_normal((4 * C, 3)).astype(np.float32)
    n = helper.make_node
    bn_names = lambda i: [f"bn{i}.weight", f"bn{i}.bias", f"bn{i}.running_mean",
                          f"bn{i}.running_var"]
    nodes = []
    if merged == "stats":
        # Only the statistics of the two layers merged (bn2's read bn1's).
        inits = {"bn1.weight": ones, "bn1.bias": zeros, "bn1.running_mean": zeros,
                 "bn1.running_var": ones, "bn2.weight": ones, "bn2.bias": zeros, "W": w}
        for stat in ("running_mean", "running_var"):
            nodes.append(n("Identity", [f"bn1.{stat}"], [f"bn2.{stat}"],
                           name=f"Identity_{len(nodes)}"))
    elif merged:
        inits = {"bn1.weight": ones, "bn1.bias": zeros, "W": w}
        for name, kept in (("bn1.running_mean", "bn1.bias"), ("bn1.running_var", "bn1.weight"),
                           ("bn2.weight", "bn1.weight"), ("bn2.bias", "bn1.bias"),
                           ("bn2.running_mean", "bn1.bias"), ("bn2.running_var", "bn1.weight")):
            nodes.append(n("Identity", [kept], [name], name=f"Identity_{len(nodes)}"))
    else:
        inits = {}
        for i in (1, 2):
            inits.update(zip(bn_names(i), (ones, zeros, zeros, ones)))
        inits["W"] = w
    nodes += [n("BatchNormalization", ["x", *bn_names(1)], ["h1"], epsilon=1e-5, momentum=0.9,
                name="/bn1/BatchNormalization"),
              n("Relu", ["h1"], ["r1"], name="/relu/Relu"),
              n("BatchNormalization", ["r1", *bn_names(2)], ["h2"], epsilon=1e-5,
                momentum=0.9, name="/bn2/BatchNormalization"),
              n("Flatten", ["h2"], ["f"], name="/Flatten"),
              n("MatMul", ["f", "W"], ["logits"], name="/fc/MatMul")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                            ["N", C, 2, 2])],
                      helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3]),
                      inits, "bn_stack")


def bn_stack_reference(x, labels, lr, steps):
    """float64 numpy: SGD on bn_stack (training-mode batch normalization, biased running
    variance as ONNX defines it); returns parameters and running statistics by their
    un-merged names."""
    C = C_BN
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64)
             for t in bn_stack(False).graph.initializer}
    x = x.astype(np.float64)
    p = {k: inits[k].copy() for k in ("bn1.weight", "bn1.bias", "bn2.weight", "bn2.bias", "W")}
    stats = {k: inits[k].copy() for k in inits if "running" in k}

    def bn(v, s, b):
        mean, var = v.mean(axis=(0, 2, 3)), v.var(axis=(0, 2, 3))
        y = (v - mean[:, None, None]) / np.sqrt(var + 1e-5)[:, None, None]
        return y * s[:, None, None] + b[:, None, None], mean, var

    def forward(q):
        h1, m1, v1 = bn(x, q["bn1.weight"], q["bn1.bias"])
        h2, m2, v2 = bn(np.maximum(h1, 0), q["bn2.weight"], q["bn2.bias"])
        return cross_entropy(h2.reshape(len(x), 4 * C) @ q["W"], labels), (m1, v1, m2, v2)

    for _ in range(steps):
        _, batch = forward(p)
        g = fd_gradients(lambda q: forward(q)[0], p)
        for i, (m, v) in enumerate((batch[:2], batch[2:]), start=1):
            stats[f"bn{i}.running_mean"] = 0.9 * stats[f"bn{i}.running_mean"] + 0.1 * m
            stats[f"bn{i}.running_var"] = 0.9 * stats[f"bn{i}.running_var"] + 0.1 * v
        for k in p:
            p[k] -= lr * g[k]
    return {**p, **stats}


def ln_stack(merged, zero_b1=False):
    """x [N, 4] -> LayerNormalization -> Gemm -> Tanh -> LayerNormalization -> Gemm ->
    logits [N, 3]; both LayerNorms at initialization (1, 0). `merged`: the second reads the
    first's scale and bias (Identity for the scale, the bias directly). `zero_b1`: the first
    Gemm's bias is zeros too, and merged it reads ln1.bias through Identity."""
    rng = np.random.default_rng(43)
    inits = {"ln1.weight": np.ones(4, np.float32), "ln1.bias": np.zeros(4, np.float32),
             "W1": rng.standard_normal((4, 4)).astype(np.float32),
             "b1": rng.standard_normal(4).astype(np.float32),
             "W2": rng.standard_normal((4, 3)).astype(np.float32),
             "b2": rng.standard_normal(3).astype(np.float32)}
    if zero_b1:
        inits["b1"] = np.zeros(4, np.float32)
    n = helper.make_node
    nodes = []
    if merged:
        nodes.append(n("Identity", ["ln1.weight"], ["ln2.weight"], name="Identity_0"))
        if zero_b1:
            del inits["b1"]
            nodes.append(n("Identity", ["ln1.bias"], ["b1"], name="Identity_1"))
        ln2 = ["ln2.weight", "ln1.bias"]
    else:
        inits.update({"ln2.weight": np.ones(4, np.float32), "ln2.bias": np.zeros(4, np.float32)})
        ln2 = ["ln2.weight", "ln2.bias"]
    nodes += [n("LayerNormalization", ["x", "ln1.weight", "ln1.bias"], ["a"], axis=-1,
                epsilon=1e-5, name="/ln1/LayerNormalization"),
              n("Gemm", ["a", "W1", "b1"], ["h"], name="/fc1/Gemm"),
              n("Tanh", ["h"], ["t"], name="/Tanh"),
              n("LayerNormalization", ["t", *ln2], ["c"], axis=-1, epsilon=1e-5,
                name="/ln2/LayerNormalization"),
              n("Gemm", ["c", "W2", "b2"], ["logits"], name="/fc2/Gemm")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                      helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3]),
                      inits, "ln_stack")


def ln_stack_reference(x, labels, lr, steps, zero_b1=False):
    x = x.astype(np.float64)

    def loss(q):
        t = np.tanh(layer_norm(x, q["ln1.weight"], q["ln1.bias"]) @ q["W1"] + q["b1"])
        return cross_entropy(layer_norm(t, q["ln2.weight"], q["ln2.bias"]) @ q["W2"] + q["b2"],
                             labels)
    return sgd_reference(loss, {t.name: numpy_helper.to_array(t)
                                for t in ln_stack(False, zero_b1).graph.initializer}, lr, steps)


class MergedInitializers(unittest.TestCase):
    def check_trains_as_unmerged(self, build, reference, feeds, labels, copies, steps=3,
                                 lr=0.3):
        """The merged model, untied, trains as the un-merged one (same bits for every
        tensor, by the un-merged name) and as the float64 numpy reference."""
        with tempfile.TemporaryDirectory() as tmp:
            merged, merged_out = train_cli(self, tmp, build(True), feeds, labels, steps,
                                           "--lr", str(lr))
        with tempfile.TemporaryDirectory() as tmp:
            plain, plain_out = train_cli(self, tmp, build(False), feeds, labels, steps,
                                         "--lr", str(lr))
        self.assertFalse(any("untied" in line for line in plain_out), plain_out)
        want = reference(feeds["x"], labels, lr, steps)
        for unmerged_name, merged_name in copies.items():
            np.testing.assert_array_equal(merged[merged_name], plain[unmerged_name],
                                          err_msg=f"{merged_name} vs {unmerged_name}")
        for k, v in want.items():
            np.testing.assert_allclose(plain[k], v, rtol=2e-5, atol=2e-6, err_msg=k)
        return merged_out

    def test_batchnorm_statistics_read_through_identity(self):
        rng = np.random.default_rng(44)
        x = (rng.standard_normal((6, C_BN, 2, 2)) * 2 + 0.5).astype(np.float32)
        labels = np.array([0, 1, 2, 0, 1, 2], np.int64)
        copies = {"bn1.weight": "bn1.weight", "bn1.bias": "bn1.bias",
                  "bn1.running_mean": "bn1.bias./bn1/BatchNormalization.mean",
                  "bn1.running_var": "bn1.weight./bn1/BatchNormalization.var",
                  "bn2.weight": "bn1.weight./bn2/BatchNormalization.scale",
                  "bn2.bias": "bn1.bias./bn2/BatchNormalization.bias",
                  "bn2.running_mean": "bn1.bias./bn2/BatchNormalization.mean",
                  "bn2.running_var": "bn1.weight./bn2/BatchNormalization.var", "W": "W"}
        out = self.check_trains_as_unmerged(bn_stack, bn_stack_reference, {"x": x}, labels,
                                            copies)
        b1, b2 = "'/bn1/BatchNormalization'", "'/bn2/BatchNormalization'"
        self.assertEqual(out[1], (
            "train-graph: untied (initializers the exporter merged): "
            f"'bn1.weight' -> 'bn1.weight./bn1/BatchNormalization.var' (running variance of {b1}), "
            f"'bn1.weight' -> 'bn1.weight./bn2/BatchNormalization.scale' (scale of {b2}), "
            f"'bn1.weight' -> 'bn1.weight./bn2/BatchNormalization.var' (running variance of {b2}), "
            f"'bn1.bias' -> 'bn1.bias./bn1/BatchNormalization.mean' (running mean of {b1}), "
            f"'bn1.bias' -> 'bn1.bias./bn2/BatchNormalization.bias' (bias of {b2}), "
            f"'bn1.bias' -> 'bn1.bias./bn2/BatchNormalization.mean' (running mean of {b2})"))
        self.assertEqual(out[2], "train-graph: trained: 'bn1.weight', 'bn1.bias', 'W', "
                         "'bn1.weight./bn2/BatchNormalization.scale', "
                         "'bn1.bias./bn2/BatchNormalization.bias'")

    def test_batchnorm_statistics_of_two_layers(self):
        rng = np.random.default_rng(46)
        x = (rng.standard_normal((6, C_BN, 2, 2)) - 0.5).astype(np.float32)
        labels = np.array([1, 1, 2, 0, 0, 2], np.int64)
        copies = {k: k for k in ("bn1.weight", "bn1.bias", "bn2.weight", "bn2.bias", "W",
                                 "bn1.running_mean", "bn1.running_var")}
        copies.update({"bn2.running_mean": "bn1.running_mean./bn2/BatchNormalization.mean",
                       "bn2.running_var": "bn1.running_var./bn2/BatchNormalization.var"})
        out = self.check_trains_as_unmerged(lambda m: bn_stack("stats" if m else False),
                                            bn_stack_reference, {"x": x}, labels, copies)
        b2 = "'/bn2/BatchNormalization'"
        self.assertEqual(out[1], (
            "train-graph: untied (initializers the exporter merged): "
            "'bn1.running_mean' -> 'bn1.running_mean./bn2/BatchNormalization.mean' (running "
            f"mean of {b2}), 'bn1.running_var' -> 'bn1.running_var./bn2/BatchNormalization.var' "
            f"(running variance of {b2})"))

    def test_layernorm_parameters_of_two_layers(self):
        rng = np.random.default_rng(45)
        x = rng.standard_normal((6, 4)).astype(np.float32)
        labels = np.array([2, 1, 0, 0, 1, 2], np.int64)
        copies = {k: k for k in ("ln1.weight", "ln1.bias", "W1", "b1", "W2", "b2")}
        copies.update({"ln2.weight": "ln1.weight./ln2/LayerNormalization.scale",
                       "ln2.bias": "ln1.bias./ln2/LayerNormalization.bias"})
        out = self.check_trains_as_unmerged(ln_stack, ln_stack_reference, {"x": x}, labels,
                                            copies)
        self.assertEqual(out[1], (
            "train-graph: untied (initializers the exporter merged): "
            "'ln1.weight' -> 'ln1.weight./ln2/LayerNormalization.scale' (scale of "
            "'/ln2/LayerNormalization'), 'ln1.bias' -> 'ln1.bias./ln2/LayerNormalization.bias' "
            "(bias of '/ln2/LayerNormalization')"))

    def test_layernorm_bias_merged_with_a_linear_bias(self):
        """All zeros: ln1.bias, fc1.bias (read through Identity) and ln2.bias are one tensor.
        The Gemm's use keeps the initializer; each LayerNormalization gets its own copy."""
        rng = np.random.default_rng(47)
        x = rng.standard_normal((6, 4)).astype(np.float32)
        labels = np.array([0, 2, 1, 1, 0, 2], np.int64)
        copies = {k: k for k in ("ln1.weight", "W1", "W2", "b2")}
        copies.update({"b1": "ln1.bias",
                       "ln1.bias": "ln1.bias./ln1/LayerNormalization.bias",
                       "ln2.weight": "ln1.weight./ln2/LayerNormalization.scale",
                       "ln2.bias": "ln1.bias./ln2/LayerNormalization.bias"})
        out = self.check_trains_as_unmerged(
            lambda m: ln_stack(m, zero_b1=True),
            lambda *a: ln_stack_reference(*a, zero_b1=True), {"x": x}, labels, copies)
        self.assertEqual(out[1], (
            "train-graph: untied (initializers the exporter merged): "
            "'ln1.weight' -> 'ln1.weight./ln2/LayerNormalization.scale' (scale of "
            "'/ln2/LayerNormalization'), 'ln1.bias' -> 'ln1.bias./ln1/LayerNormalization.bias' "
            "(bias of '/ln1/LayerNormalization'), 'ln1.bias' -> "
            "'ln1.bias./ln2/LayerNormalization.bias' (bias of '/ln2/LayerNormalization')"))

    def test_statistic_not_an_initializer_is_refused(self):
        """A running statistic computed by a node cannot be updated: one line, no output."""
        model = bn_stack(False)
        g = model.graph
        for node in g.node:
            if node.name == "/bn2/BatchNormalization":
                node.input[4] = "var_scaled"
        g.node.insert(0, helper.make_node("Mul", ["bn2.running_var", "bn2.running_var"],
                                          ["var_scaled"], name="/scale_var"))
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "-o", dst)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stderr, (
                f"mpc: error: {src}: node '/bn2/BatchNormalization' (BatchNormalization): its "
                "running variance 'var_scaled' is computed by node '/scale_var' (Mul), not an "
                "initializer, so training could not update it\n"))
            self.assertFalse(os.path.exists(dst))



# --------------------------------------------------------------------------------------------
# (b) shapes with a symbolic batch: a transformer-encoder block as torch.onnx.export writes it
# --------------------------------------------------------------------------------------------

ENC = dict(E=8, H=2, T=4, F=16, C=3)


def attention_layer(E, H, dtype, n_dim, t_dim, merge_inputs, mask_nodes=()):
    """The nodes of one post-norm transformer layer as exported, from x [N, T, E] and its
    packed q/k/v parts q0, k0, v0 to h2: heads by Reshape to Concat(n_dim, t_dim, hd) and
    Transpose, scaled scores s1 (mask_nodes, when given, turn them into s2), Softmax, heads
    merged by Reshape to Concat(*merge_inputs), out projection, residual, LayerNormalization,
    ReLU MLP, residual, LayerNormalization. Reads hd = [H, E/H] and the parameters."""
    n = helper.make_node
    scale = numpy_helper.from_array(np.array(1 / np.sqrt(E // H), dtype))
    nodes = [n("Concat", [n_dim, t_dim, "hd"], ["heads_shape"], axis=0, name="/attn/Concat")]
    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [n("Reshape", [name + "0", "heads_shape"], [name + "r"],
                    name=f"/attn/Reshape_{name}"),
                  n("Transpose", [name + "r"], [name + "t"], perm=perm,
                    name=f"/attn/Transpose_{name}")]
    nodes += [n("MatMul", ["qt", "kt"], ["s0"], name="/attn/MatMul"),
              n("Constant", [], ["scale"], value=scale, name="/attn/Constant"),
              n("Mul", ["s0", "scale"], ["s1"], name="/attn/Mul_1"), *mask_nodes,
              n("Softmax", ["s2" if mask_nodes else "s1"], ["p"], axis=-1, name="/attn/Softmax"),
              n("MatMul", ["p", "vt"], ["ctx0"], name="/attn/MatMul_1"),
              n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3], name="/attn/Transpose"),
              n("Concat", merge_inputs, ["merge_shape"], axis=0, name="/attn/Concat_merge"),
              n("Reshape", ["ctx1", "merge_shape"], ["ctx"], name="/attn/Reshape"),
              n("MatMul", ["ctx", "Wo"], ["o0"], name="/attn/out_proj/MatMul"),
              n("Add", ["o0", "bo"], ["o"], name="/attn/out_proj/Add"),
              n("Add", ["x", "o"], ["r1"], name="/Add_res1"),
              n("LayerNormalization", ["r1", "ln1.weight", "ln1.bias"], ["h1"], axis=-1,
                epsilon=1e-5, name="/norm1/LayerNormalization"),
              n("MatMul", ["h1", "W1"], ["f0"], name="/linear1/MatMul"),
              n("Add", ["f0", "b1"], ["f1"], name="/linear1/Add"),
              n("Relu", ["f1"], ["f2"], name="/Relu"),
              n("MatMul", ["f2", "W2"], ["f3"], name="/linear2/MatMul"),
              n("Add", ["f3", "b2"], ["f4"], name="/linear2/Add"),
              n("Add", ["h1", "f4"], ["r2"], name="/Add_res2"),
              n("LayerNormalization", ["r2", "ln2.weight", "ln2.bias"], ["h2"], axis=-1,
                epsilon=1e-5, name="/norm2/LayerNormalization")]
    return nodes


def attention_layer_forward(p, x, H, causal=False):
    """float64 numpy forward of attention_layer: h2."""
    n, t, e = x.shape
    qkv = x @ p["Wqkv"] + p["bqkv"]
    heads = lambda a: a.reshape(n, t, H, e // H).transpose(0, 2, 1, 3)
    q, k, v = (heads(qkv[..., i * e:(i + 1) * e]) for i in range(3))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(e // H)
    if causal:
        s = np.where(np.tril(np.ones((t, t))) == 0, -np.inf, s)
    ctx = (softmax(s) @ v).transpose(0, 2, 1, 3).reshape(n, t, e)
    h1 = layer_norm(x + ctx @ p["Wo"] + p["bo"], p["ln1.weight"], p["ln1.bias"])
    f = np.maximum(h1 @ p["W1"] + p["b1"], 0) @ p["W2"] + p["b2"]
    return layer_norm(h1 + f, p["ln2.weight"], p["ln2.bias"])


def encoder_block(dtype=np.float32, seed=50):
    """x [N, T, E] (N symbolic) -> packed q/k/v MatMul + Add -> three Slices whose bounds are
    computed from Shape (Gather, Div, Mul) -> Reshape to Concat(Shape(x)[0:1], Shape(x)[1:2],
    [H, Dh]) -> Transpose -> scaled dot-product attention -> Reshape to Concat(Shape(x)[0:1],
    [-1, E]) -> out projection, residual, LayerNormalization -> ReLU feed-forward, residual,
    LayerNormalization -> mean over T -> Gemm -> logits [N, C]. libonnx 1.12's shape
    inference loses the rank at the Slices and Reshapes."""
    E, H, T, F, C = (ENC[k] for k in "EHTFC")
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.4: (rng.standard_normal(shape) * sc).astype(dtype)
    params = {"Wqkv": u(E, 3 * E), "bqkv": u(3 * E, sc=0.1), "Wo": u(E, E), "bo": u(E, sc=0.1),
              "ln1.weight": (1 + u(E, sc=0.1)).astype(dtype), "ln1.bias": u(E, sc=0.1),
              "W1": u(E, F), "b1": u(F, sc=0.1), "W2": u(F, E), "b2": u(E, sc=0.1),
              "ln2.weight": (1 + u(E, sc=0.1)).astype(dtype), "ln2.bias": u(E, sc=0.1),
              "Wc": u(E, C), "bc": u(C, sc=0.1)}
    i64 = lambda *v: np.array(v, np.int64)
    consts = {"c0": i64(0), "c1": i64(1), "c2": i64(2), "ax2": i64(2),
              "two": np.array(2, np.int64), "three": np.array(3, np.int64),
              "hd": i64(H, E // H), "m1E": i64(-1, E), "ax0": i64(0), "ax1": i64(1)}
    n = helper.make_node
    nodes = [n("MatMul", ["x", "Wqkv"], ["qkv0"], name="/attn/in_proj/MatMul"),
             n("Add", ["qkv0", "bqkv"], ["qkv"], name="/attn/in_proj/Add"),
             n("Shape", ["qkv"], ["qs"], name="/attn/Shape"),
             n("Gather", ["qs", "two"], ["qlast"], axis=0, name="/attn/Gather"),
             n("Div", ["qlast", "three"], ["third"], name="/attn/Div"),
             n("Unsqueeze", ["third", "ax0"], ["e1"], name="/attn/Unsqueeze"),
             n("Mul", ["e1", "c2"], ["e2"], name="/attn/Mul"),
             n("Add", ["e1", "e2"], ["e3"], name="/attn/Add"),
             n("Slice", ["qkv", "c0", "e1", "ax2"], ["q0"], name="/attn/Slice"),
             n("Slice", ["qkv", "e1", "e2", "ax2"], ["k0"], name="/attn/Slice_1"),
             n("Slice", ["qkv", "e2", "e3", "ax2"], ["v0"], name="/attn/Slice_2"),
             n("Shape", ["x"], ["xs"], name="/Shape"),
             n("Slice", ["xs", "c0", "c1"], ["xN"], name="/Slice"),
             n("Slice", ["xs", "c1", "c2"], ["xT"], name="/Slice_1")]
    nodes += attention_layer(E, H, dtype, "xN", "xT", ["xN", "m1E"])
    nodes += [n("ReduceMean", ["h2", "ax1"], ["pooled"], keepdims=0, name="/ReduceMean"),
              n("Gemm", ["pooled", "Wc", "bc"], ["logits"], name="/head/Gemm")]
    et = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    g = helper.make_graph(nodes, "encoder_block",
                          [helper.make_tensor_value_info("x", et, ["N", T, E])],
                          [helper.make_tensor_value_info("logits", et, ["N", C])],
                          [numpy_helper.from_array(v, k) for k, v in {**params, **consts}.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m, params


def encoder_block_loss(p, x, labels):
    """float64 numpy forward of encoder_block and its mean cross-entropy."""
    h2 = attention_layer_forward(p, x, ENC["H"])
    return cross_entropy(h2.mean(axis=1) @ p["Wc"] + p["bc"], labels)


class SymbolicBatch(unittest.TestCase):
    def data(self, n, seed):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((n, ENC["T"], ENC["E"]))
        return x, rng.integers(0, ENC["C"], size=n).astype(np.int64)

    def test_encoder_block_gradients(self):
        """float64 block: train-graph succeeds (the MatMuls after the Reshapes get their
        gradients) and the step's gradients, run by onnx.reference, match central finite
        differences of the numpy forward."""
        model, params = encoder_block(np.float64)
        x, labels = self.data(3, 51)
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "enc.onnx"), os.path.join(tmp, "enc.train.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--expose-gradients",
                        "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            train = onnx.load(dst)
        self.assertEqual(r.stdout.splitlines()[1], "train-graph: trained: " + ", ".join(
            f"'{k}'" for k in params))
        alg = tl.algorithm_as_model(train)
        feeds = {"x": x, tl.metadata(train)["mpc.training.labels"]: labels}
        names = [o.name for o in alg.graph.output]
        outs = dict(zip(names, tl.reference_evaluator(alg).run(None, feeds)))
        p64 = {k: v.astype(np.float64) for k, v in params.items()}
        want = fd_gradients(lambda q: encoder_block_loss(q, x, labels), p64)
        self.assertAlmostEqual(float(outs[names[0]]), encoder_block_loss(p64, x, labels),
                               places=12)
        for param, grad in tl.gradient_pairs(train):
            np.testing.assert_allclose(outs[grad], want[param], rtol=1e-6, atol=1e-8,
                                       err_msg=param)

    def test_encoder_block_trains_as_numpy(self):
        """float32, as exported: train-graph -> run --train, 3 full-batch SGD steps on a
        batch of 5 (the file says N); parameters match float64 numpy SGD."""
        model, params = encoder_block(np.float32)
        x, labels = self.data(5, 52)
        lr, steps = 0.2, 3
        with tempfile.TemporaryDirectory() as tmp:
            got, _ = train_cli(self, tmp, model, {"x": x.astype(np.float32)}, labels, steps,
                               "--lr", str(lr))
        want = sgd_reference(lambda q: encoder_block_loss(q, x.astype(np.float32), labels),
                             params, lr, steps)
        for k in params:
            self.assertGreater(np.abs(want[k] - params[k]).max(), 1e-4, f"{k} did not train")
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=2e-6, err_msg=k)

    def test_symbolic_batch_reaches_the_labels(self):
        """Per-token logits [N, T, C] behind a Reshape to Concat(Shape(tokens)[0:1], [-1, D]):
        the rank and the dimensions survive, N as the symbol, so --class-axis -1 works and the
        labels input is declared [N, T]."""
        V, D, T, C = 6, 3, 4, 5
        rng = np.random.default_rng(53)
        inits = {"E": rng.standard_normal((V, D)).astype(np.float32),
                 "W": rng.standard_normal((D, C)).astype(np.float32),
                 "c0": np.array([0], np.int64), "c1": np.array([1], np.int64),
                 "tail": np.array([-1, D], np.int64)}
        n = helper.make_node
        nodes = [n("Gather", ["E", "tokens"], ["emb"], name="/emb/Gather"),
                 n("Shape", ["tokens"], ["ts"], name="/Shape"),
                 n("Slice", ["ts", "c0", "c1"], ["tn"], name="/Slice"),
                 n("Concat", ["tn", "tail"], ["target"], axis=0, name="/Concat"),
                 n("Reshape", ["emb", "target"], ["h"], name="/Reshape"),
                 n("MatMul", ["h", "W"], ["logits"], name="/head/MatMul")]
        model = make_model(nodes, [helper.make_tensor_value_info("tokens", TensorProto.INT64,
                                                                 ["N", T])],
                           helper.make_tensor_value_info("logits", TensorProto.FLOAT, None),
                           inits, "tokens")
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "t.onnx"), os.path.join(tmp, "t.train.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--class-axis", "-1",
                        "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            train = onnx.load(dst)
        lab = tl.metadata(train)["mpc.training.labels"]
        (vi,) = [i for i in train.training_info[0].algorithm.input if i.name == lab]
        dims = [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]
        self.assertEqual(dims, ["N", T])


# --------------------------------------------------------------------------------------------
# (c) a GPT-style decoder, trained on next-token prediction
# --------------------------------------------------------------------------------------------

GPT = dict(V=7, E=8, H=2, F=12, TMAX=6)


def gpt_decoder(seed=60):
    """tokens [N, T] (both symbolic) -> nn.Embedding (Gather) + position embedding (Gather of
    Range(0, T)) -> packed q/k/v MatMul -> Split -> heads (Reshape to Concat of Shape slices,
    Transpose) -> scores * scale -> masked_fill(bias[:, :, :T, :T] == 0, -inf) as Where (the
    causal mask a float tril buffer, sliced with bounds computed from Shape) -> Softmax ->
    merge heads -> out projection, residual, LayerNorm, ReLU MLP, residual, LayerNorm -> lm
    head -> logits [N, T, V], as torch.onnx.export writes a small GPT."""
    V, E, H, F, TMAX = (GPT[k] for k in ("V", "E", "H", "F", "TMAX"))
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.4: (rng.standard_normal(shape) * sc).astype(np.float32)
    params = {"wte": u(V, E, sc=0.8), "wpe": u(TMAX, E, sc=0.8), "Wqkv": u(E, 3 * E),
              "bqkv": u(3 * E, sc=0.1), "Wo": u(E, E), "bo": u(E, sc=0.1),
              "ln1.weight": (1 + u(E, sc=0.1)), "ln1.bias": u(E, sc=0.1), "W1": u(E, F),
              "b1": u(F, sc=0.1), "W2": u(F, E), "b2": u(E, sc=0.1),
              "ln2.weight": (1 + u(E, sc=0.1)), "ln2.bias": u(E, sc=0.1), "Wlm": u(E, V)}
    i64 = lambda *v: np.array(v, np.int64)
    buffers = {"attn.bias": np.tril(np.ones((TMAX, TMAX), np.float32))[None, None]}
    consts = {"c0": i64(0), "c1": i64(1), "c2": i64(2), "one": np.array(1, np.int64),
              "zero": np.array(0, np.int64), "split": i64(E, E, E), "hd": i64(H, E // H),
              "e_only": i64(E), "ax23": i64(2, 3), "c00": i64(0, 0), "zero_f": np.array(0.0, np.float32)}
    n = helper.make_node
    f32 = lambda v: numpy_helper.from_array(np.array(v, np.float32))
    nodes = [n("Shape", ["tokens"], ["ts"], name="/Shape"),
             n("Gather", ["ts", "one"], ["t"], axis=0, name="/Gather"),
             n("Range", ["zero", "t", "one"], ["pos"], name="/Range"),
             n("Gather", ["wte", "tokens"], ["tok_emb"], name="/wte/Gather"),
             n("Gather", ["wpe", "pos"], ["pos_emb"], name="/wpe/Gather"),
             n("Add", ["tok_emb", "pos_emb"], ["x"], name="/Add"),
             n("MatMul", ["x", "Wqkv"], ["qkv0"], name="/attn/c_attn/MatMul"),
             n("Add", ["qkv0", "bqkv"], ["qkv"], name="/attn/c_attn/Add"),
             n("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=2, name="/attn/Split"),
             n("Slice", ["ts", "c0", "c1"], ["tn"], name="/attn/Slice"),
             n("Slice", ["ts", "c1", "c2"], ["tt"], name="/attn/Slice_1")]
    mask = [n("Concat", ["tt", "tt"], ["mask_end"], axis=0, name="/attn/Concat_1"),
            n("Slice", ["attn.bias", "c00", "mask_end", "ax23"], ["mask"], name="/attn/Slice_2"),
            n("Equal", ["mask", "zero_f"], ["masked"], name="/attn/Equal"),
            n("Constant", [], ["ninf"], value=f32(-np.inf), name="/attn/Constant_1"),
            n("Where", ["masked", "ninf", "s1"], ["s2"], name="/attn/Where")]
    nodes += attention_layer(E, H, np.float32, "tn", "tt", ["tn", "tt", "e_only"], mask)
    nodes += [n("MatMul", ["h2", "Wlm"], ["logits"], name="/lm_head/MatMul")]
    model = make_model(nodes, [helper.make_tensor_value_info("tokens", TensorProto.INT64,
                                                             ["N", "T"])],
                       helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", "T", V]),
                       {**params, **buffers, **consts}, "gpt")
    return model, params, buffers


def gpt_loss(p, tokens, targets):
    """float64 numpy forward of gpt_decoder and its mean next-token cross-entropy."""
    n, t = tokens.shape
    x = p["wte"][tokens] + p["wpe"][:t]
    z = attention_layer_forward(p, x, GPT["H"], causal=True) @ p["Wlm"]
    return cross_entropy(z.reshape(n * t, -1), targets.reshape(-1))


class GptDecoder(unittest.TestCase):
    def test_next_token_training_matches_numpy(self):
        """train-graph --class-axis -1 -> run --train: 3 full-batch SGD steps on next-token
        prediction; every parameter matches float64 numpy SGD, the causal-mask buffer is not
        trained and stays bit for bit."""
        model, params, buffers = gpt_decoder()
        rng = np.random.default_rng(61)
        seq = rng.integers(0, GPT["V"], size=(4, 6)).astype(np.int64)
        tokens, targets = seq[:, :-1], seq[:, 1:]
        lr, steps = 0.2, 3
        with tempfile.TemporaryDirectory() as tmp:
            got, out = train_cli(self, tmp, model, {"tokens": tokens}, targets, steps,
                                 "--class-axis", "-1", "--lr", str(lr))
        self.assertEqual(out[1], "train-graph: trained: " + ", ".join(f"'{k}'" for k in params))
        self.assertEqual(out[2], "train-graph: not trained: 'attn.bias', 'zero_f' (no gradient "
                         "reaches it from the loss)")
        want = sgd_reference(lambda q: gpt_loss(q, tokens, targets), params, lr, steps)
        for k in params:
            self.assertGreater(np.abs(want[k] - params[k]).max(), 1e-4, f"{k} did not train")
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=2e-6, err_msg=k)
        np.testing.assert_array_equal(got["wpe"][5], params["wpe"][5])
        np.testing.assert_array_equal(got["attn.bias"], buffers["attn.bias"])



def main():
    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((MergedInitializers, SymbolicBatch, GptDecoder), set_args)


if __name__ == "__main__":
    sys.exit(main())
