"""The architectures people train, through the CLI (`mpc train-graph` -> `mpc run --train`),
against float64 numpy references (docs/training.md). Models are built with onnx.helper as
torch.onnx.export writes them (PyTorch is not a test dependency); the reference gradients are
central finite differences of a float64 numpy forward, the optimizer steps are applied in
numpy.

(a) A MobileNetV2 inverted-residual block: 1x1 expand Conv -> BatchNormalization -> ReLU6
    (Clip with its bounds as initializers) -> depthwise 3x3 Conv (group = channels) -> BN ->
    ReLU6 -> 1x1 project Conv -> BN -> residual Add -> GlobalAveragePool -> Flatten -> Gemm;
    SGD, Adam, and SGD with ReLU6's bounds from Constant nodes.
(b) A ResNet basic block: Conv-BN-Relu-Conv-BN + identity Add -> Relu -> MaxPool -> Flatten ->
    Gemm; and a stage's first block (stride-2 Conv doubling the channels, 1x1 stride-2 Conv +
    BN shortcut, AveragePool head); SGD.
(c) LSTM, bidirectional LSTM and GRU (linear_before_reset=1) classifiers on the last step:
    batch-first input transposed to [T, N, I] -> LSTM/GRU -> Squeeze of the direction axis
    (bidirectional: Transpose + Reshape to [T, N, 2H]) -> Transpose -> Gather(-1) on the time
    axis (`y[:, -1]`) -> Gemm; SGD.
(d) A block exported in training mode (BatchNormalization with training_mode = 1 and its
    statistic outputs) is refused with one line naming the node (docs/training.md: export
    in eval mode).

Parameters (and BatchNorm running statistics) after 10 full-batch steps match within rtol
1e-5.
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
BN_MOMENTUM = 0.9  # ONNX's; PyTorch's 0.1
node = helper.make_node


def run_mpc(*args, timeout=120):
    return subprocess.run([ARGS.mpc, *args], capture_output=True, text=True, timeout=timeout)


def make_model(nodes, x_shape, n_classes, inits, name):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                         ["N", n_classes])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m


def train_cli(test, model, x, labels, steps, *flags):
    """train-graph (cross-entropy) -> run --train with full batches; returns the checkpoint's
    initializers."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m.train.onnx")
        onnx.save(model, src)
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", *flags, "-o", dst)
        test.assertEqual(r.returncode, 0, r.stderr)
        lab = tl.metadata(onnx.load(dst))["mpc.training.labels"]
        data = os.path.join(tmp, "d.npz")
        np.savez(data, x=x, **{lab: labels})
        ck = os.path.join(tmp, "ck")
        rr = run_mpc("run", dst, "--train", "--data", data, "--batch", str(len(labels)),
                     "--steps", str(steps), "--holdout", "0", "--checkpoint", ck)
        test.assertEqual(rr.returncode, 0, rr.stderr)
        return {t.name: numpy_helper.to_array(t)
                for t in onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}


# --------------------------------------------------------------------------------------------
# float64 numpy pieces
# --------------------------------------------------------------------------------------------

def conv2d(x, w, pad=0, group=1, stride=1):
    """ONNX Conv (symmetric padding, no bias) on [N, C, H, W]."""
    n, _, h, wd = x.shape
    co, cig, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    cog = co // group
    out = np.zeros((n, co, oh, ow))
    for g in range(group):
        xs, ws = xp[:, g * cig:(g + 1) * cig], w[g * cog:(g + 1) * cog]
        for i in range(kh):
            for j in range(kw):
                out[:, g * cog:(g + 1) * cog] += np.einsum(
                    "nchw,oc->nohw", xs[:, :, i:i + oh, j:j + ow], ws[:, :, i, j])
    return out[:, :, ::stride, ::stride]


def batch_norm(v, s, b, stats):
    """Training-mode BatchNormalization; appends the batch mean and (biased) variance."""
    mean, var = v.mean(axis=(0, 2, 3)), v.var(axis=(0, 2, 3))
    stats.append((mean, var))
    y = (v - mean[:, None, None]) / np.sqrt(var + 1e-5)[:, None, None]
    return y * s[:, None, None] + b[:, None, None]


def relu6(v):
    return np.clip(v, 0.0, 6.0)


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def reference_training(forward, params, bn_layers, steps, optimizer, lr, gradients=None):
    """float64 training of forward(p) -> (loss, [(batch mean, batch var) per BN layer]):
    `optimizer` "sgd" or "adam" (beta1 0.9, beta2 0.999, epsilon 1e-8, bias-corrected);
    BN running statistics (initialized 0 and 1) follow with momentum BN_MOMENTUM. The
    gradients are gradients(forward, p) when given, else central finite differences.
    Returns parameters and statistics by name."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    stats = {}
    for name in bn_layers:
        c = len(params[name + ".weight"])
        stats[name + ".running_mean"], stats[name + ".running_var"] = np.zeros(c), np.ones(c)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v2 = {k: np.zeros_like(v) for k, v in p.items()}
    for t in range(1, steps + 1):
        _, batch = forward(p)
        for name, (mean, var) in zip(bn_layers, batch):
            for stat, val in (("running_mean", mean), ("running_var", var)):
                key = f"{name}.{stat}"
                stats[key] = BN_MOMENTUM * stats[key] + (1 - BN_MOMENTUM) * val
        g = (gradients(forward, p) if gradients
             else fd_gradients(lambda q: forward(q)[0], p))
        for k in p:
            if optimizer == "sgd":
                p[k] -= lr * g[k]
            else:
                m[k] = 0.9 * m[k] + 0.1 * g[k]
                v2[k] = 0.999 * v2[k] + 0.001 * g[k] ** 2
                mh, vh = m[k] / (1 - 0.9 ** t), v2[k] / (1 - 0.999 ** t)
                p[k] -= lr * mh / (np.sqrt(vh) + 1e-8)
    return {**p, **stats}


def bn_inits(name, c, rng, scale=1.0):
    """A BatchNormalization layer's parameters (perturbed from PyTorch's initialization so
    the test sees them) and statistics at PyTorch's initialization."""
    return {f"{name}.weight": (scale * (1 + 0.2 * rng.standard_normal(c))).astype(np.float32),
            f"{name}.bias": (0.2 * rng.standard_normal(c)).astype(np.float32),
            f"{name}.running_mean": np.zeros(c, np.float32),
            f"{name}.running_var": np.ones(c, np.float32)}


def bn_node(name, x, y):
    return node("BatchNormalization", [x] + [f"{name}.{k}" for k in
                                             ("weight", "bias", "running_mean", "running_var")],
                [y], epsilon=1e-5, momentum=BN_MOMENTUM, name=f"/{name}/BatchNormalization")


def head_nodes(x):
    """Flatten -> Gemm(fc.weight^T) + fc.bias as torch exports nn.Linear."""
    return [node("Flatten", [x], ["flat"], axis=1, name="/Flatten"),
            node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], alpha=1.0, beta=1.0,
                 transB=1, name="/fc/Gemm")]


def split_inits(inits):
    """(trained parameters, everything) -- statistics and Clip bounds are not trained."""
    params = {k: v for k, v in inits.items()
              if "running" not in k and not k.startswith("clip.")}
    return params, inits


# --------------------------------------------------------------------------------------------
# (a) MobileNetV2 inverted residual block
# --------------------------------------------------------------------------------------------

MB = dict(C=2, E=4, HW=4, K=3)


def mobilenet_block(seed=70, clip_constants=False):
    """`clip_constants`: ReLU6's bounds come from Constant nodes instead of initializers (both
    occur in exports)."""
    C, E, K, NC = MB["C"], MB["E"], MB["K"], 3
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.5: (rng.standard_normal(shape) * sc).astype(np.float32)
    # bn1's scale is large so that some activations pass ReLU6's upper bound.
    inits = {"conv1.weight": u(E, C, 1, 1, sc=0.8), **bn_inits("bn1", E, rng, scale=4.0),
             "conv2.weight": u(E, 1, K, K), **bn_inits("bn2", E, rng),
             "conv3.weight": u(C, E, 1, 1), **bn_inits("bn3", C, rng),
             "fc.weight": u(NC, C, sc=0.8), "fc.bias": u(NC, sc=0.1),
             "clip.min": np.array(0.0, np.float32), "clip.max": np.array(6.0, np.float32)}
    nodes = [node("Conv", ["x", "conv1.weight"], ["c1"], kernel_shape=[1, 1], pads=[0] * 4,
                  strides=[1, 1], group=1, name="/conv1/Conv"),
             bn_node("bn1", "c1", "b1"),
             node("Clip", ["b1", "clip.min", "clip.max"], ["r1"], name="/relu6_1/Clip"),
             node("Conv", ["r1", "conv2.weight"], ["c2"], kernel_shape=[K, K], pads=[1] * 4,
                  strides=[1, 1], group=E, name="/conv2/Conv"),
             bn_node("bn2", "c2", "b2"),
             node("Clip", ["b2", "clip.min", "clip.max"], ["r2"], name="/relu6_2/Clip"),
             node("Conv", ["r2", "conv3.weight"], ["c3"], kernel_shape=[1, 1], pads=[0] * 4,
                  strides=[1, 1], group=1, name="/conv3/Conv"),
             bn_node("bn3", "c3", "b3"),
             node("Add", ["x", "b3"], ["res"], name="/Add"),
             node("GlobalAveragePool", ["res"], ["pool"], name="/GlobalAveragePool"),
             *head_nodes("pool")]
    if clip_constants:
        nodes[:0] = [node("Constant", [], [k], value=numpy_helper.from_array(inits.pop(k)),
                          name=f"/Constant_{i}") for i, k in enumerate(("clip.min", "clip.max"))]
    return make_model(nodes, ["N", C, MB["HW"], MB["HW"]], NC, inits, "mobilenet_block"), inits


def mobilenet_forward(x, labels):
    def forward(p):
        st = []
        h = relu6(batch_norm(conv2d(x, p["conv1.weight"]), p["bn1.weight"], p["bn1.bias"], st))
        h = relu6(batch_norm(conv2d(h, p["conv2.weight"], pad=1, group=MB["E"]),
                             p["bn2.weight"], p["bn2.bias"], st))
        h = batch_norm(conv2d(h, p["conv3.weight"]), p["bn3.weight"], p["bn3.bias"], st)
        pooled = (x + h).mean(axis=(2, 3))
        return cross_entropy(pooled @ p["fc.weight"].T + p["fc.bias"], labels), st
    return forward


# --------------------------------------------------------------------------------------------
# (b) ResNet basic block
# --------------------------------------------------------------------------------------------

RB = dict(C=2, HW=4)


def resnet_block(seed=72):
    C, NC = RB["C"], 3
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.5: (rng.standard_normal(shape) * sc).astype(np.float32)
    inits = {"conv1.weight": u(C, C, 3, 3), **bn_inits("bn1", C, rng),
             "conv2.weight": u(C, C, 3, 3), **bn_inits("bn2", C, rng),
             "fc.weight": u(NC, C * (RB["HW"] // 2) ** 2, sc=0.5), "fc.bias": u(NC, sc=0.1)}
    conv = lambda i, x, y: node("Conv", [x, f"conv{i}.weight"], [y], kernel_shape=[3, 3],
                                pads=[1] * 4, strides=[1, 1], name=f"/conv{i}/Conv")
    nodes = [conv(1, "x", "c1"), bn_node("bn1", "c1", "b1"),
             node("Relu", ["b1"], ["r1"], name="/relu/Relu"),
             conv(2, "r1", "c2"), bn_node("bn2", "c2", "b2"),
             node("Add", ["b2", "x"], ["res"], name="/Add"),
             node("Relu", ["res"], ["r2"], name="/relu_1/Relu"),
             node("MaxPool", ["r2"], ["pool"], kernel_shape=[2, 2], strides=[2, 2],
                  pads=[0] * 4, ceil_mode=0, dilations=[1, 1], name="/maxpool/MaxPool"),
             *head_nodes("pool")]
    return make_model(nodes, ["N", C, RB["HW"], RB["HW"]], NC, inits, "resnet_block"), inits


def resnet_forward(x, labels):
    def forward(p):
        st = []
        h = np.maximum(batch_norm(conv2d(x, p["conv1.weight"], pad=1), p["bn1.weight"],
                                  p["bn1.bias"], st), 0)
        h = batch_norm(conv2d(h, p["conv2.weight"], pad=1), p["bn2.weight"], p["bn2.bias"], st)
        h = np.maximum(h + x, 0)
        n, c, hh, ww = h.shape
        pooled = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
        return cross_entropy(pooled.reshape(n, -1) @ p["fc.weight"].T + p["fc.bias"],
                             labels), st
    return forward


def resnet_downsample_block(seed=76):
    """The first block of a ResNet stage: 3x3 Conv with stride 2 doubling the channels, BN,
    Relu, 3x3 Conv, BN, plus a shortcut of a 1x1 stride-2 Conv and BN; Relu -> AveragePool
    -> Flatten -> Gemm."""
    C, NC, HW = RB["C"], 3, RB["HW"]
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.5: (rng.standard_normal(shape) * sc).astype(np.float32)
    inits = {"conv1.weight": u(2 * C, C, 3, 3), **bn_inits("bn1", 2 * C, rng),
             "conv2.weight": u(2 * C, 2 * C, 3, 3, sc=0.3), **bn_inits("bn2", 2 * C, rng),
             "down.0.weight": u(2 * C, C, 1, 1), **bn_inits("down.1", 2 * C, rng),
             "fc.weight": u(NC, 2 * C, sc=0.5), "fc.bias": u(NC, sc=0.1)}
    nodes = [node("Conv", ["x", "conv1.weight"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4,
                  strides=[2, 2], name="/conv1/Conv"),
             bn_node("bn1", "c1", "b1"),
             node("Relu", ["b1"], ["r1"], name="/relu/Relu"),
             node("Conv", ["r1", "conv2.weight"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4,
                  strides=[1, 1], name="/conv2/Conv"),
             bn_node("bn2", "c2", "b2"),
             node("Conv", ["x", "down.0.weight"], ["d0"], kernel_shape=[1, 1], pads=[0] * 4,
                  strides=[2, 2], name="/downsample/downsample.0/Conv"),
             bn_node("down.1", "d0", "d1"),
             node("Add", ["b2", "d1"], ["res"], name="/Add"),
             node("Relu", ["res"], ["r2"], name="/relu_1/Relu"),
             node("AveragePool", ["r2"], ["pool"], kernel_shape=[HW // 2, HW // 2],
                  strides=[HW // 2, HW // 2], pads=[0] * 4, ceil_mode=0,
                  name="/avgpool/AveragePool"),
             *head_nodes("pool")]
    return make_model(nodes, ["N", C, HW, HW], NC, inits, "resnet_downsample"), inits


def resnet_downsample_forward(x, labels):
    def forward(p):
        st = []
        h = np.maximum(batch_norm(conv2d(x, p["conv1.weight"], pad=1, stride=2),
                                  p["bn1.weight"], p["bn1.bias"], st), 0)
        h = batch_norm(conv2d(h, p["conv2.weight"], pad=1), p["bn2.weight"], p["bn2.bias"], st)
        d = batch_norm(conv2d(x, p["down.0.weight"], stride=2), p["down.1.weight"],
                       p["down.1.bias"], st)
        pooled = np.maximum(h + d, 0).mean(axis=(2, 3))
        return cross_entropy(pooled @ p["fc.weight"].T + p["fc.bias"], labels), st
    return forward


# --------------------------------------------------------------------------------------------
# (c) LSTM classifier on the last time step
# --------------------------------------------------------------------------------------------

LS = dict(T=4, I=3, H=4)


def lstm_classifier(seed=74):
    T, I, H, NC = LS["T"], LS["I"], LS["H"], 3
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.5: (rng.standard_normal(shape) * sc).astype(np.float32)
    inits = {"lstm.W": u(1, 4 * H, I), "lstm.R": u(1, 4 * H, H), "lstm.B": u(1, 8 * H, sc=0.2),
             "fc.weight": u(NC, H, sc=0.8), "fc.bias": u(NC, sc=0.1),
             "axes1": np.array([1], np.int64), "last": np.array(-1, np.int64)}
    nodes = [node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="/Transpose"),
             node("LSTM", ["xt", "lstm.W", "lstm.R", "lstm.B"], ["y"], hidden_size=H,
                  direction="forward", name="/lstm/LSTM"),
             node("Squeeze", ["y", "axes1"], ["y3"], name="/lstm/Squeeze"),
             node("Transpose", ["y3"], ["yb"], perm=[1, 0, 2], name="/Transpose_1"),
             node("Gather", ["yb", "last"], ["h"], axis=1, name="/Gather"),
             node("Gemm", ["h", "fc.weight", "fc.bias"], ["logits"], alpha=1.0, beta=1.0,
                  transB=1, name="/fc/Gemm")]
    inits_no_consts = {k: v for k, v in inits.items() if k not in ("axes1", "last")}
    return make_model(nodes, ["N", T, I], NC, inits, "lstm_classifier"), inits_no_consts


def lstm_steps(x, W, R, B):
    """float64 ONNX LSTM (one direction, zero initial state) over x [N, T, I]: the hidden
    states [N, T, H]."""
    H = R.shape[1]
    b = B[:4 * H] + B[4 * H:]
    h, c, ys = np.zeros((len(x), H)), np.zeros((len(x), H)), []
    for t in range(x.shape[1]):
        z = x[:, t] @ W.T + h @ R.T + b
        i, o, f, g = (z[:, k * H:(k + 1) * H] for k in range(4))  # ONNX order i, o, f, c
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys, axis=1)


def lstm_forward(x, labels):
    def forward(p):
        h = lstm_steps(x, p["lstm.W"][0], p["lstm.R"][0], p["lstm.B"][0])[:, -1]
        return cross_entropy(h @ p["fc.weight"].T + p["fc.bias"], labels), []
    return forward


def bilstm_classifier(seed=82):
    """nn.LSTM(bidirectional=True, batch_first) on y[:, -1] as exported: Y [T, 2, N, H] ->
    Transpose(0, 2, 1, 3) -> Reshape [0, 0, -1] -> [T, N, 2H] -> Transpose -> Gather(-1) ->
    Gemm."""
    T, I, H, NC = LS["T"], LS["I"], LS["H"], 3
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.5: (rng.standard_normal(shape) * sc).astype(np.float32)
    params = {"lstm.W": u(2, 4 * H, I), "lstm.R": u(2, 4 * H, H), "lstm.B": u(2, 8 * H, sc=0.2),
              "fc.weight": u(NC, 2 * H, sc=0.8), "fc.bias": u(NC, sc=0.1)}
    consts = {"merge": np.array([0, 0, -1], np.int64), "last": np.array(-1, np.int64)}
    nodes = [node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="/Transpose"),
             node("LSTM", ["xt", "lstm.W", "lstm.R", "lstm.B"], ["y"], hidden_size=H,
                  direction="bidirectional", name="/lstm/LSTM"),
             node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3], name="/lstm/Transpose"),
             node("Reshape", ["yt", "merge"], ["y3"], name="/lstm/Reshape"),
             node("Transpose", ["y3"], ["yb"], perm=[1, 0, 2], name="/Transpose_1"),
             node("Gather", ["yb", "last"], ["h"], axis=1, name="/Gather"),
             node("Gemm", ["h", "fc.weight", "fc.bias"], ["logits"], alpha=1.0, beta=1.0,
                  transB=1, name="/fc/Gemm")]
    return make_model(nodes, ["N", T, I], NC, {**params, **consts}, "bilstm"), params


def bilstm_forward(x, labels):
    def forward(p):
        W, R, B = p["lstm.W"], p["lstm.R"], p["lstm.B"]
        fwd = lstm_steps(x, W[0], R[0], B[0])
        rev = lstm_steps(x[:, ::-1], W[1], R[1], B[1])[:, ::-1]
        h = np.concatenate([fwd, rev], axis=2)[:, -1]
        return cross_entropy(h @ p["fc.weight"].T + p["fc.bias"], labels), []
    return forward


def gru_classifier(seed=78):
    """nn.GRU(batch_first) on y[:, -1] as exported: LSTM's pattern with a GRU node
    (linear_before_reset=1, PyTorch's formulation)."""
    model, _ = lstm_classifier(seed)
    T, I, H, NC = LS["T"], LS["I"], LS["H"], 3
    rng = np.random.default_rng(seed)
    u = lambda *shape, sc=0.5: (rng.standard_normal(shape) * sc).astype(np.float32)
    params = {"gru.W": u(1, 3 * H, I), "gru.R": u(1, 3 * H, H), "gru.B": u(1, 6 * H, sc=0.2),
              "fc.weight": u(NC, H, sc=0.8), "fc.bias": u(NC, sc=0.1)}
    g = model.graph
    (rnn,) = [n for n in g.node if n.op_type == "LSTM"]
    rnn.CopyFrom(node("GRU", ["xt", "gru.W", "gru.R", "gru.B"], ["y"], hidden_size=H,
                      direction="forward", linear_before_reset=1, name="/gru/GRU"))
    consts = [t for t in g.initializer if t.name in ("axes1", "last")]
    del g.initializer[:]
    g.initializer.extend(consts + [numpy_helper.from_array(v, k) for k, v in params.items()])
    return model, params


def gru_forward(x, labels):
    H = LS["H"]

    def forward(p):
        W, R, B = p["gru.W"][0], p["gru.R"][0], p["gru.B"][0]
        wb, rb = B[:3 * H], B[3 * H:]
        h = np.zeros((len(x), H))
        for t in range(x.shape[1]):
            xw, hr = x[:, t] @ W.T + wb, h @ R.T + rb
            z = sigmoid(xw[:, :H] + hr[:, :H])  # ONNX order z, r, h
            r = sigmoid(xw[:, H:2 * H] + hr[:, H:2 * H])
            n = np.tanh(xw[:, 2 * H:] + r * hr[:, 2 * H:])
            h = (1 - z) * n + z * h
        return cross_entropy(h @ p["fc.weight"].T + p["fc.bias"], labels), []
    return forward


# --------------------------------------------------------------------------------------------

class Architectures(unittest.TestCase):
    def check(self, build, forward, x_shape, bn_layers, seed, optimizer="sgd", lr=0.1,
              steps=10, n=6):
        model, inits = build()
        params, _ = split_inits(inits)
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((n, *x_shape)).astype(np.float32)
        labels = rng.integers(0, 3, size=n).astype(np.int64)
        got = train_cli(self, model, x, labels, steps, "--optimizer", optimizer, "--lr", str(lr))
        want = reference_training(forward(x.astype(np.float64), labels), params, bn_layers,
                                  steps, optimizer, lr)
        for k, v in want.items():
            if k in params:
                self.assertGreater(np.abs(v - params[k]).max(), 1e-4, f"{k} did not train")
            np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=2e-6, err_msg=k)
        for k in inits:
            if k.startswith("clip."):
                np.testing.assert_array_equal(got[k], inits[k], err_msg=k)
        return x

    def test_mobilenet_block_sgd(self):
        x = self.check(mobilenet_block, mobilenet_forward, (MB["C"], MB["HW"], MB["HW"]),
                       ("bn1", "bn2", "bn3"), 71)
        # ReLU6's upper bound is reached (the test covers both ends of the Clip).
        model, inits = mobilenet_block()
        st = []
        h = batch_norm(conv2d(x.astype(np.float64), inits["conv1.weight"].astype(np.float64)),
                       inits["bn1.weight"], inits["bn1.bias"], st)
        self.assertTrue((h > 6).any() and (h < 0).any())

    def test_mobilenet_block_adam(self):
        self.check(mobilenet_block, mobilenet_forward, (MB["C"], MB["HW"], MB["HW"]),
                   ("bn1", "bn2", "bn3"), 71, optimizer="adam", lr=0.01)

    def test_resnet_basic_block_sgd(self):
        self.check(resnet_block, resnet_forward, (RB["C"], RB["HW"], RB["HW"]),
                   ("bn1", "bn2"), 73)

    def test_mobilenet_block_clip_bounds_from_constants(self):
        self.check(lambda: mobilenet_block(clip_constants=True), mobilenet_forward,
                   (MB["C"], MB["HW"], MB["HW"]), ("bn1", "bn2", "bn3"), 77)

    def test_resnet_downsample_block_sgd(self):
        self.check(resnet_downsample_block, resnet_downsample_forward,
                   (RB["C"], RB["HW"], RB["HW"]), ("bn1", "bn2", "down.1"), 79)

    def test_bidirectional_lstm_last_step_sgd(self):
        self.check(bilstm_classifier, bilstm_forward, (LS["T"], LS["I"]), (), 83, lr=0.3)

    def test_gru_last_step_sgd(self):
        self.check(gru_classifier, gru_forward, (LS["T"], LS["I"]), (), 80, lr=0.3)

    def test_training_mode_export_is_refused(self):
        """torch.onnx.export(training=TRAINING) writes BatchNormalization with
        training_mode = 1 and the running statistics as extra outputs: one line, no output."""
        model, _ = mobilenet_block()
        for n in model.graph.node:
            if n.op_type == "BatchNormalization":
                n.attribute.append(helper.make_attribute("training_mode", 1))
                n.output.extend([n.name + ".mean_out", n.name + ".var_out"])
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m.train.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "-o", dst)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stdout, "")
            self.assertEqual(r.stderr, f"mpc: error: {src}: node '/bn1/BatchNormalization' "
                             "(BatchNormalization): BatchNormalization already in training mode "
                             "(its running statistics are outputs); export the model in eval mode "
                             "(model.eval() before torch.onnx.export): train-graph adds the "
                             "training-mode statistics itself\n")
            self.assertFalse(os.path.exists(dst))

    def test_lstm_last_step_sgd(self):
        self.check(lstm_classifier, lstm_forward, (LS["T"], LS["I"]), (), 75, lr=0.3)


def main():
    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((Architectures,), set_args)


if __name__ == "__main__":
    sys.exit(main())
