"""Tests of `mpc train-graph` on models written the way torch.onnx.export writes them
(docs/training.md), built with onnx.helper (PyTorch is not a test dependency).

(a) Initializers the exporter merged by value (eval-mode export): BatchNormalization running
    statistics read through Identity(gamma) / Identity(beta), normalization scales and biases
    shared by several layers. train-graph unties them (exact summary line), and the untied
    model trains through `train-graph -> run --train` exactly as the un-merged model does;
    both match a float64 numpy reference (central finite differences of a numpy forward).
    A statistic that is not an initializer is refused with one line.

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

ARGS = None
OPSET = 17
FD_STEP = 1e-6


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


def cross_entropy(z, labels):
    z = z - z.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(labels)), labels]))


def fd_gradients(loss, p):
    """Central finite differences of loss(p) (float64) for every entry of p."""
    grads = {}
    for k, v in p.items():
        g = np.zeros_like(v)
        for i in range(v.size):
            saved = v.flat[i]
            v.flat[i] = saved + FD_STEP
            lp = loss(p)
            v.flat[i] = saved - FD_STEP
            lm = loss(p)
            v.flat[i] = saved
            g.flat[i] = (lp - lm) / (2 * FD_STEP)
        grads[k] = g
    return grads


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


def ln_stack(merged):
    """x [N, 4] -> LayerNormalization -> Gemm -> Tanh -> LayerNormalization -> Gemm ->
    logits [N, 3]; both LayerNorms at initialization (1, 0). `merged`: the second reads the
    first's scale and bias (Identity for the scale, the bias directly)."""
    rng = np.random.default_rng(43)
    inits = {"ln1.weight": np.ones(4, np.float32), "ln1.bias": np.zeros(4, np.float32),
             "W1": rng.standard_normal((4, 4)).astype(np.float32),
             "b1": rng.standard_normal(4).astype(np.float32),
             "W2": rng.standard_normal((4, 3)).astype(np.float32),
             "b2": rng.standard_normal(3).astype(np.float32)}
    n = helper.make_node
    nodes = []
    if merged:
        nodes.append(n("Identity", ["ln1.weight"], ["ln2.weight"], name="Identity_0"))
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


def ln_stack_reference(x, labels, lr, steps):
    p = {t.name: numpy_helper.to_array(t).astype(np.float64)
         for t in ln_stack(False).graph.initializer}
    x = x.astype(np.float64)

    def ln(v, s, b):
        mu, var = v.mean(axis=-1, keepdims=True), v.var(axis=-1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * s + b

    def loss(q):
        t = np.tanh(ln(x, q["ln1.weight"], q["ln1.bias"]) @ q["W1"] + q["b1"])
        return cross_entropy(ln(t, q["ln2.weight"], q["ln2.bias"]) @ q["W2"] + q["b2"], labels)

    for _ in range(steps):
        g = fd_gradients(loss, p)
        for k in p:
            p[k] -= lr * g[k]
    return p


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


def main():
    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((MergedInitializers,), set_args)


if __name__ == "__main__":
    sys.exit(main())
