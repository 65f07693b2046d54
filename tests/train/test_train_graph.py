"""Tests of `mpc train-graph` (docs/training.md).

(a) Gradient checks: for every op with a gradient rule, a small float64 model whose float
    inputs are initializers and whose loss is ReduceSum(Y * R) (R frozen). The gradients the
    training model exposes (--expose-gradients), evaluated by onnx.reference on the
    standalone algorithm graph (and by `mpc run` when it can run it), must match central
    finite differences of the forward model in float64, also evaluated by onnx.reference.
(b) The shipped models with each optimizer: the output passes the ONNX checker
    (full_check), loads in mpc, and one step in onnx.reference gives a finite loss and, for
    sgd, parameters changed by exactly -lr * gradient.
(c) Bad input: exit status 1, one line on stderr, no output file.
(d) Lowering of ai.onnx.preview.training::Gradient in an existing training model, checked
    against the closed-form gradient of sum((x @ w)^2).

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
from onnx.reference import ReferenceEvaluator  # noqa: E402

import mpc_trainlib as tl  # noqa: E402

ARGS = None
REL_TOL = 1e-6
FD_STEP = 1e-5
OPSET = 17


def run_mpc(*args, timeout=120, env=None):
    return subprocess.run([ARGS.mpc, *args], capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else dict(os.environ, **env))


def training_ref_ops():
    try:
        import mpc_training_ref
        return {c.__name__ for c in mpc_training_ref.OPS}
    except ImportError:
        return set()


def algorithm_ops(model):
    return {(n.domain, n.op_type) for n in model.training_info[0].algorithm.node}


def missing_ref_ops(model):
    have = training_ref_ops()
    return sorted(op for dom, op in algorithm_ops(model)
                  if dom == "ai.mpc.training" and op not in have)


# --------------------------------------------------------------------------------------------
# (a) gradient checks
# --------------------------------------------------------------------------------------------

def f64(rng, *shape, low=-1.0, high=1.0, away=0.0):
    a = rng.uniform(low, high, size=shape)
    if away:
        a = np.where(np.abs(a) < away, np.sign(a + 1e-12) * away, a)
    return a.astype(np.float64)


def make_case_model(nodes, inits, y_shape, fd_nodes=None, opset=OPSET):
    """Forward model: nodes produce Y; L = ReduceSum(Y * R) over all axes (R frozen)."""
    rng = np.random.default_rng(7)
    r = f64(rng, *y_shape)
    tail = [helper.make_node("Mul", ["Y", "Rloss"], ["YR"], name="loss_mul"),
            helper.make_node("ReduceSum", ["YR"], ["L"], name="loss_sum", keepdims=0)]
    tensors = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    tensors.append(numpy_helper.from_array(r, "Rloss"))
    out = helper.make_tensor_value_info("L", TensorProto.DOUBLE, [])

    def build(ns):
        g = helper.make_graph(ns + tail, "gradcheck", [], [out], tensors)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8 if opset <= 17 else 9
        return m
    return build(nodes), build(fd_nodes if fd_nodes is not None else nodes)


def _erf64_op():
    """onnx.reference's Erf computes in float32 (np.vectorize(erf, otypes=["f"])): the
    finite-difference oracle needs float64."""
    import math
    from onnx.reference.op_run import OpRun

    class Erf(OpRun):
        op_domain = ""

        def _run(self, x):
            return (np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype),)
    return Erf


def _gelu64_op():
    """Gelu-20 in float64 numpy (onnx.reference only expands it from inferred types)."""
    import math
    from onnx.reference.op_run import OpRun

    class Gelu(OpRun):
        op_domain = ""

        def _run(self, x, approximate=None):
            a = approximate.decode() if isinstance(approximate, bytes) else approximate
            x64 = x.astype(np.float64)
            if a == "tanh":
                y = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
            else:
                erf = np.vectorize(math.erf, otypes=[np.float64])
                y = 0.5 * x64 * (1 + erf(x64 / math.sqrt(2)))
            return (y.astype(x.dtype),)
    return Gelu


FLOAT64_OPS = [_erf64_op(), _gelu64_op()]


def eval_loss(model, overrides):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if t.name in overrides:
            t.CopyFrom(numpy_helper.from_array(overrides[t.name], t.name))
    return float(ReferenceEvaluator(m, new_ops=FLOAT64_OPS).run(None, {})[0])


def finite_differences(model, params):
    grads = {}
    for name, value in params.items():
        g = np.zeros_like(value)
        flat = value.reshape(-1)
        for i in range(flat.size):
            plus, minus = flat.copy(), flat.copy()
            plus[i] += FD_STEP
            minus[i] -= FD_STEP
            lp = eval_loss(model, {name: plus.reshape(value.shape)})
            lm = eval_loss(model, {name: minus.reshape(value.shape)})
            g.reshape(-1)[i] = (lp - lm) / (2 * FD_STEP)
        grads[name] = g
    return grads


def rel_error(got, ref):
    got = np.asarray(got, dtype=np.float64).reshape(ref.shape)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-12))


def gradcheck_cases():
    """name -> (nodes, inits, Y shape, nodes of the finite-difference model or None)."""
    rng = np.random.default_rng(1234)
    C = {}

    def add(name, nodes, inits, y_shape, fd_nodes=None, opset=OPSET):
        C[name] = (nodes, inits, y_shape, fd_nodes, opset)

    n = helper.make_node
    add("Add", [n("Add", ["A", "B"], ["Y"])], {"A": f64(rng, 2, 3), "B": f64(rng, 3)}, [2, 3])
    add("Sub", [n("Sub", ["A", "B"], ["Y"])], {"A": f64(rng, 2, 3), "B": f64(rng, 2, 1)}, [2, 3])
    add("Mul", [n("Mul", ["A", "B"], ["Y"])], {"A": f64(rng, 2, 3), "B": f64(rng, 1, 3)}, [2, 3])
    add("Div", [n("Div", ["A", "B"], ["Y"])],
        {"A": f64(rng, 2, 3), "B": f64(rng, 3, low=0.5, high=2.0)}, [2, 3])
    add("Neg", [n("Neg", ["A"], ["Y"])], {"A": f64(rng, 2, 3)}, [2, 3])
    add("MatMul", [n("MatMul", ["A", "B"], ["Y"])],
        {"A": f64(rng, 2, 3, 4), "B": f64(rng, 4, 5)}, [2, 3, 5])
    add("MatMul_batched", [n("MatMul", ["A", "B"], ["Y"])],
        {"A": f64(rng, 2, 3, 4), "B": f64(rng, 1, 4, 2)}, [2, 3, 2])
    add("Gemm", [n("Gemm", ["A", "B", "C"], ["Y"], alpha=0.7, beta=1.3, transB=1)],
        {"A": f64(rng, 3, 4), "B": f64(rng, 5, 4), "C": f64(rng, 5)}, [3, 5])
    add("Gemm_transA", [n("Gemm", ["A", "B", "C"], ["Y"], transA=1)],
        {"A": f64(rng, 4, 3), "B": f64(rng, 4, 5), "C": f64(rng, 1, 5)}, [3, 5])
    add("Gemm_both", [n("Gemm", ["A", "B"], ["Y"], transA=1, transB=1, alpha=2.0)],
        {"A": f64(rng, 4, 3), "B": f64(rng, 5, 4)}, [3, 5])
    add("Relu", [n("Relu", ["A"], ["Y"])], {"A": f64(rng, 3, 4, away=0.05)}, [3, 4])
    add("Sigmoid", [n("Sigmoid", ["A"], ["Y"])], {"A": f64(rng, 3, 4)}, [3, 4])
    add("Tanh", [n("Tanh", ["A"], ["Y"])], {"A": f64(rng, 3, 4)}, [3, 4])
    add("Erf", [n("Erf", ["A"], ["Y"])], {"A": f64(rng, 3, 4)}, [3, 4])
    add("Gelu", [n("Gelu", ["A"], ["Y"])], {"A": f64(rng, 3, 4)}, [3, 4], opset=20)
    add("Gelu_tanh", [n("Gelu", ["A"], ["Y"], approximate="tanh")], {"A": f64(rng, 3, 4)},
        [3, 4], opset=20)
    add("Softmax", [n("Softmax", ["A"], ["Y"], axis=-1)], {"A": f64(rng, 3, 4)}, [3, 4])
    add("Softmax_axis1", [n("Softmax", ["A"], ["Y"], axis=1)], {"A": f64(rng, 2, 3, 4)},
        [2, 3, 4])
    add("LogSoftmax", [n("LogSoftmax", ["A"], ["Y"], axis=-1)], {"A": f64(rng, 3, 4)}, [3, 4])
    add("Identity", [n("Identity", ["A"], ["Y"])], {"A": f64(rng, 3, 4)}, [3, 4])
    add("Flatten", [n("Flatten", ["A"], ["Y"], axis=2)], {"A": f64(rng, 2, 3, 2)}, [6, 2])
    add("Reshape", [n("Reshape", ["A", "shape"], ["Y"])],
        {"A": f64(rng, 2, 6), "shape": np.array([3, 4], dtype=np.int64)}, [3, 4])
    add("Squeeze", [n("Squeeze", ["A", "axes"], ["Y"])],
        {"A": f64(rng, 2, 1, 3), "axes": np.array([1], dtype=np.int64)}, [2, 3])
    add("Unsqueeze", [n("Unsqueeze", ["A", "axes"], ["Y"])],
        {"A": f64(rng, 2, 3), "axes": np.array([0], dtype=np.int64)}, [1, 2, 3])
    add("Transpose", [n("Transpose", ["A"], ["Y"], perm=[1, 2, 0])], {"A": f64(rng, 2, 3, 4)},
        [3, 4, 2])
    add("Concat", [n("Concat", ["A", "B"], ["Y"], axis=1)],
        {"A": f64(rng, 2, 3), "B": f64(rng, 2, 2)}, [2, 5])
    add("ReduceSum", [n("ReduceSum", ["A", "axes"], ["Y"], keepdims=0)],
        {"A": f64(rng, 2, 3, 4), "axes": np.array([1], dtype=np.int64)}, [2, 4])
    add("ReduceMean", [n("ReduceMean", ["A"], ["Y"], axes=[0, 2], keepdims=1)],
        {"A": f64(rng, 2, 3, 4)}, [1, 3, 1])
    add("SharedUse", [n("Mul", ["A", "A"], ["T"]), n("Add", ["T", "A"], ["Y"])],
        {"A": f64(rng, 2, 3)}, [2, 3])
    add("Conv", [n("Conv", ["X", "W", "B"], ["Y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                   strides=[2, 2])],
        {"X": f64(rng, 1, 2, 5, 5), "W": f64(rng, 3, 2, 3, 3), "B": f64(rng, 3)}, [1, 3, 3, 3])
    distinct = rng.permutation(32).astype(np.float64).reshape(1, 2, 4, 4) / 8.0
    add("MaxPool", [n("MaxPool", ["X"], ["Y"], kernel_shape=[2, 2], strides=[2, 2])],
        {"X": distinct}, [1, 2, 2, 2])
    add("AveragePool", [n("AveragePool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2],
                          pads=[1, 1, 1, 1])],
        {"X": f64(rng, 1, 2, 5, 5)}, [1, 2, 3, 3])
    add("GlobalAveragePool", [n("GlobalAveragePool", ["X"], ["Y"])],
        {"X": f64(rng, 2, 3, 2, 2)}, [2, 3, 1, 1])
    add("LSTM", [n("LSTM", ["X", "W", "R", "B"], ["Yl"], hidden_size=3),
                 n("Squeeze", ["Yl", "axes1"], ["Y"])],
        {"X": f64(rng, 3, 2, 4), "W": f64(rng, 1, 12, 4), "R": f64(rng, 1, 12, 3),
         "B": f64(rng, 1, 24), "axes1": np.array([1], dtype=np.int64)}, [3, 2, 3])
    # Y is named but unused: onnx.reference binds an omitted ("") output to the name "",
    # which would then feed every omitted input downstream.
    add("LSTM_noBias_lastState", [n("LSTM", ["X", "W", "R"], ["Yunused", "Y"], hidden_size=2)],
        {"X": f64(rng, 4, 1, 3), "W": f64(rng, 1, 8, 3), "R": f64(rng, 1, 8, 2)}, [1, 1, 2])
    # (onnx.reference's LSTM, the oracle, runs one direction only)
    add("LSTM_initial_states",
        [n("LSTM", ["X", "W", "R", "B", "", "h0", "c0"], ["Y"], hidden_size=3)],
        {"X": f64(rng, 3, 2, 4), "W": f64(rng, 1, 12, 4), "R": f64(rng, 1, 12, 3),
         "B": f64(rng, 1, 24), "h0": f64(rng, 1, 2, 3), "c0": f64(rng, 1, 2, 3)}, [3, 1, 2, 3])
    # GRU (onnx.reference's GRU, the oracle, runs one forward direction).
    add("GRU", [n("GRU", ["X", "W", "R", "B"], ["Yg"], hidden_size=3),
                n("Squeeze", ["Yg", "axes1"], ["Y"])],
        {"X": f64(rng, 3, 2, 4), "W": f64(rng, 1, 9, 4), "R": f64(rng, 1, 9, 3),
         "B": f64(rng, 1, 18), "axes1": np.array([1], dtype=np.int64)}, [3, 2, 3])
    # PyTorch's export: linear_before_reset=1; the last state and an initial state.
    add("GRU_linear_before_reset_initial_h",
        [n("GRU", ["X", "W", "R", "B", "", "h0"], ["Yunused", "Y"], hidden_size=2,
           linear_before_reset=1)],
        {"X": f64(rng, 4, 2, 3), "W": f64(rng, 1, 6, 3), "R": f64(rng, 1, 6, 2),
         "B": f64(rng, 1, 12), "h0": f64(rng, 1, 2, 2)}, [1, 2, 2])
    # y[:, -1] of a batch-first GRU: Y [T, 1, N, H] -> [N, T, H] -> Gather(-1, axis 1).
    add("GRU_last_step_noBias",
        [n("GRU", ["X", "W", "R"], ["Yg"], hidden_size=2, linear_before_reset=1),
         n("Squeeze", ["Yg", "axes1"], ["Ys"]), n("Transpose", ["Ys"], ["Yt"], perm=[1, 0, 2]),
         n("Gather", ["Yt", "last"], ["Y"], axis=1)],
        {"X": f64(rng, 3, 2, 3), "W": f64(rng, 1, 6, 3), "R": f64(rng, 1, 6, 2),
         "axes1": np.array([1], dtype=np.int64), "last": np.array(-1, np.int64)}, [2, 2])
    i64 = lambda *v: np.array(v, dtype=np.int64)
    big = np.iinfo(np.int64)
    # nn.Embedding: repeated and negative indices (their gradients add up).
    add("Gather_embedding", [n("Gather", ["W", "ids"], ["Y"])],
        {"W": f64(rng, 5, 3), "ids": np.array([[0, 2, 2], [-1, 0, 4]], np.int64)}, [2, 3, 3])
    # y[:, -1]: a scalar index on axis 1.
    add("Gather_last_step", [n("Gather", ["X", "last"], ["Y"], axis=1)],
        {"X": f64(rng, 2, 4, 3), "last": np.array(-1, np.int64)}, [2, 3])
    add("Gather_axis_neg_int32", [n("Gather", ["X", "ids"], ["Y"], axis=-1)],
        {"X": f64(rng, 2, 3, 4), "ids": np.array([[3, 3], [0, -4]], np.int32)}, [2, 3, 2, 2])
    add("Slice_steps_int64_max", [n("Slice", ["A", "st", "en", "ax", "sp"], ["Y"])],
        {"A": f64(rng, 4, 6), "st": i64(1, 0), "en": i64(3, big.max), "ax": i64(0, 1),
         "sp": i64(1, 2)}, [2, 3])
    add("Slice_negative_step", [n("Slice", ["A", "st", "en", "ax", "sp"], ["Y"])],
        {"A": f64(rng, 5, 4), "st": i64(-1), "en": i64(big.min), "ax": i64(0),
         "sp": i64(-2)}, [3, 4])
    add("Slice_negative_bounds_no_axes", [n("Slice", ["A", "st", "en"], ["Y"])],
        {"A": f64(rng, 3, 5), "st": i64(-2, -3), "en": i64(big.max, -1)}, [2, 2])
    add("Slice_empty", [n("Slice", ["A", "st", "en", "ax"], ["E"]),
                        n("Slice", ["A", "st2", "en2", "ax"], ["S"]),
                        n("Concat", ["E", "S"], ["Y"], axis=0)],
        {"A": f64(rng, 4, 3), "st": i64(3), "en": i64(1), "ax": i64(0), "st2": i64(0),
         "en2": i64(2)}, [2, 3])
    # Packed q/k/v: three slices of one projection, each used.
    qkv = [n("Slice", ["P", f"s{i}", f"e{i}", "ax"], [f"qkv{i}"]) for i in range(3)]
    add("Slice_packed_qkv", qkv + [n("Mul", ["qkv0", "qkv1"], ["QK"]),
                                   n("Add", ["QK", "qkv2"], ["Y"])],
        {"P": f64(rng, 2, 9), "ax": i64(-1), "s0": i64(0), "e0": i64(3), "s1": i64(3),
         "e1": i64(6), "s2": i64(6), "e2": i64(9)}, [2, 3])
    # Split (opset 13, split as input); the last output is unused.
    add("Split_sizes_input", [n("Split", ["A", "sizes"], ["P1", "Q", "Unused"], axis=1),
                              n("Mul", ["Q", "Q"], ["QQ"]), n("Add", ["QQ", "P1"], ["Y"])],
        {"A": f64(rng, 2, 6), "sizes": i64(1, 2, 3)}, [2, 2])
    add("Split_equal", [n("Split", ["A"], ["P1", "P2"], axis=-1), n("Mul", ["P1", "P2"], ["Y"])],
        {"A": f64(rng, 2, 4)}, [2, 2])
    # Split 18: num_outputs, uneven (3, 3, 1); the middle output is unused.
    add("Split_num_outputs", [n("Split", ["A"], ["P1", "Unused", "P3"], axis=0, num_outputs=3),
                              n("Concat", ["P3", "P1"], ["Y"], axis=0)],
        {"A": f64(rng, 7, 2)}, [4, 2], opset=18)
    add("Where", [n("Where", ["cond", "A", "B"], ["Y"])],
        {"cond": np.array([[True, False, True], [False, False, True]]), "A": f64(rng, 2, 3),
         "B": f64(rng, 3)}, [2, 3])
    add("Where_broadcast_cond", [n("Where", ["cond", "A", "B"], ["Y"])],
        {"cond": np.array([[True, False, True]]), "A": f64(rng, 2, 1), "B": f64(rng, 2, 3)},
        [2, 3])
    # ReLU6 as exported: bounds from Constant nodes, inputs away from them.
    relu6_x = np.array([[-1.5, 0.5, 2.0, 5.5], [6.5, 7.0, -0.2, 3.0], [0.1, 5.9, 8.0, -3.0]])
    add("Clip_relu6", [n("Constant", [], ["lo"], value=numpy_helper.from_array(np.array(0.0))),
                       n("Constant", [], ["hi"], value=numpy_helper.from_array(np.array(6.0))),
                       n("Clip", ["X", "lo", "hi"], ["Y"])], {"X": relu6_x}, [3, 4])
    # Bounds as initializers are buffers (buf_*): never trained, X's gradient unchanged.
    add("Clip_bound_initializers", [n("Clip", ["X", "buf_lo", "buf_hi"], ["Y"])],
        {"X": relu6_x / 5.0 - 0.5, "buf_lo": np.array(-0.3), "buf_hi": np.array(0.4)}, [3, 4])
    add("Clip_max_only", [n("Clip", ["X", "", "buf_hi"], ["Y"])],
        {"X": relu6_x / 5.0 - 0.5, "buf_hi": np.array(0.4)}, [3, 4])
    add("Clip_no_bounds", [n("Clip", ["X"], ["Y"])], {"X": f64(rng, 2, 3)}, [2, 3])
    add("Concat_three_negative_axis", [n("Concat", ["A", "B", "C"], ["Y"], axis=-1)],
        {"A": f64(rng, 2, 1), "B": f64(rng, 2, 3), "C": f64(rng, 2, 2)}, [2, 6])
    bn_inits = {"X": f64(rng, 3, 2, 2, 2), "scale": f64(rng, 2), "bias": f64(rng, 2),
                "mean": np.zeros(2), "var": np.ones(2)}
    add("BatchNormalization",
        [n("BatchNormalization", ["X", "scale", "bias", "mean", "var"], ["Y"], epsilon=1e-5)],
        bn_inits, [3, 2, 2, 2],
        # The training step differentiates training-mode batch normalization.
        [n("BatchNormalization", ["X", "scale", "bias", "mean", "var"], ["Y"], epsilon=1e-5,
           training_mode=1)])
    add("LayerNormalization",
        [n("LayerNormalization", ["X", "scale", "bias"], ["Y"], axis=-1, epsilon=1e-5)],
        {"X": f64(rng, 2, 3, 4), "scale": f64(rng, 4), "bias": f64(rng, 4)}, [2, 3, 4])
    # Element-wise rules composed of existing ops (Sqrt, Reciprocal, Pow, Exp, Log, Abs, ...).
    pos = lambda *shape: f64(rng, *shape, low=0.5, high=2.0)
    const = lambda name, v: n("Constant", [], [name], value=numpy_helper.from_array(v))
    add("Sqrt", [n("Sqrt", ["A"], ["Y"])], {"A": pos(2, 3)}, [2, 3])
    add("Reciprocal", [n("Reciprocal", ["A"], ["Y"])], {"A": pos(2, 3)}, [2, 3])
    add("Exp", [n("Exp", ["A"], ["Y"])], {"A": f64(rng, 2, 3)}, [2, 3])
    add("Log", [n("Log", ["A"], ["Y"])], {"A": pos(2, 3)}, [2, 3])
    add("Abs", [n("Abs", ["A"], ["Y"])], {"A": f64(rng, 2, 3, away=0.05)}, [2, 3])
    add("Softplus", [n("Softplus", ["A"], ["Y"])], {"A": f64(rng, 2, 3, low=-3, high=3)}, [2, 3])
    # x.pow(2) as exported: a constant exponent; an integer one is cast.
    add("Pow_constant_exponent", [const("e", np.array(2.0)), n("Pow", ["A", "e"], ["Y"])],
        {"A": f64(rng, 2, 3)}, [2, 3])
    add("Pow_int_exponent", [const("e", np.array(3, np.int64)), n("Pow", ["A", "e"], ["Y"])],
        {"A": f64(rng, 2, 3)}, [2, 3])
    add("Pow_tensor_exponent", [n("Pow", ["A", "B"], ["Y"])],
        {"A": pos(2, 3), "B": f64(rng, 3, low=-1.5, high=2.5)}, [2, 3])
    # A base of 0 with B > 0: dB is 0 there (PyTorch; 0^B stays 0 around B).
    add("Pow_zero_base", [const("base", np.array([0.0, 1.5, 0.0, 0.7])),
                          n("Pow", ["base", "B"], ["Y"])],
        {"B": pos(4)}, [4])
    add("Expand", [n("Expand", ["A", "shape"], ["Y"])],
        {"A": f64(rng, 3, 1), "shape": i64(2, 3, 4)}, [2, 3, 4])
    add("Sum_variadic", [n("Sum", ["A", "B", "C"], ["Y"])],
        {"A": f64(rng, 2, 3), "B": f64(rng, 3), "C": f64(rng, 2, 1)}, [2, 3])
    add("Mean_variadic", [n("Mean", ["A", "B", "C"], ["Y"])],
        {"A": f64(rng, 2, 3), "B": f64(rng, 3), "C": f64(rng, 2, 1)}, [2, 3])
    # Ties: both inputs get dY/2 (PyTorch's maximum/minimum), which central differences see.
    tie_a = np.array([[0.25, -0.5, 0.75], [1.0, 0.125, -0.25]])
    tie_b = np.array([[0.25, 0.5, -0.75], [1.0, -0.125, -0.25]])
    add("Max_ties", [n("Max", ["A", "B"], ["Y"])], {"A": tie_a, "B": tie_b}, [2, 3])
    add("Min_ties", [n("Min", ["A", "B"], ["Y"])], {"A": tie_a, "B": tie_b}, [2, 3])
    add("Max_three_broadcast", [n("Max", ["A", "B", "C"], ["Y"])],
        {"A": f64(rng, 2, 3), "B": f64(rng, 3), "C": f64(rng, 2, 1)}, [2, 3])
    add("LeakyRelu", [n("LeakyRelu", ["A"], ["Y"], alpha=0.1)],
        {"A": f64(rng, 3, 4, away=0.05)}, [3, 4])
    # Both saturated regions and the slope, away from the kinks.
    hard_x = np.array([[-4.5, -3.2, -2.0, -0.7], [0.3, 1.1, 2.6, 3.4], [5.0, -0.1, 2.9, -2.9]])
    add("HardSigmoid", [n("HardSigmoid", ["X"], ["Y"], alpha=0.25, beta=0.4)], {"X": hard_x},
        [3, 4])
    add("HardSwish", [n("HardSwish", ["X"], ["Y"])], {"X": hard_x}, [3, 4])
    add("Tile", [n("Tile", ["A", "reps"], ["Y"])], {"A": f64(rng, 2, 3), "reps": i64(2, 3)},
        [4, 9])
    add("Tile_rank3", [n("Tile", ["A", "reps"], ["Y"])],
        {"A": f64(rng, 1, 2, 2), "reps": i64(3, 1, 2)}, [3, 2, 4])
    # The fill value, an initializer here, takes no gradient (a number in PyTorch).
    add("Pad_constant", [n("Pad", ["A", "pads", "buf_value"], ["Y"])],
        {"A": f64(rng, 2, 3), "pads": i64(1, 0, 2, 1), "buf_value": np.array(0.5)}, [5, 4])
    add("Pad_axes", [n("Pad", ["A", "pads", "", "axes"], ["Y"])],
        {"A": f64(rng, 2, 3, 2), "pads": i64(2, 1), "axes": i64(-2)}, [2, 6, 2], opset=18)
    # A float64 -> float32 -> float64 round trip: the gradient is cast back at each Cast
    # (PyTorch's rule); the finite differences differentiate the identity it stands for.
    add("Cast_float_types",
        [n("Cast", ["A"], ["A32"], to=TensorProto.FLOAT), n("Cast", ["A32"], ["Y"],
                                                             to=TensorProto.DOUBLE)],
        {"A": f64(rng, 2, 3)}, [2, 3], [n("Identity", ["A"], ["Y"])])
    return C


class GradientCheck(unittest.TestCase):
    pass


def _make_gradcheck(name, case):
    def test(self):
        nodes, inits, y_shape, fd_nodes, opset = case
        model, fd_model = make_case_model(nodes, inits, y_shape, fd_nodes, opset)
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "L", "--freeze", "^Rloss$", "--optimizer",
                        "sgd", "--expose-gradients", "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            train = onnx.load(dst)
            onnx.checker.check_model(train, full_check=True)
            missing = missing_ref_ops(train)
            if missing:
                self.skipTest("no onnx.reference implementation of ai.mpc.training::"
                              + ", ".join(missing))
            alg = tl.algorithm_as_model(train)
            import mpc_training_ref
            outs = ReferenceEvaluator(alg, new_ops=list(mpc_training_ref.OPS) + FLOAT64_OPS
                                      ).run(None, {})
            by_name = dict(zip([o.name for o in alg.graph.output], outs))
            pairs = dict(tl.gradient_pairs(train))
            # BatchNormalization statistics and buffers (buf_*) are not trained.
            params = {k: v for k, v in inits.items() if v.dtype == np.float64
                      and k not in ("mean", "var") and not k.startswith("buf_")}
            self.assertEqual(sorted(pairs), sorted(params), "parameters with a gradient")
            fd = finite_differences(fd_model, params)
            for p in params:
                err = rel_error(by_name[pairs[p]], fd[p])
                self.assertLess(err, REL_TOL, f"d/d{p}: relative error {err:.3g} "
                                f"(onnx.reference)")
            mpc_run_check(self, alg, tmp, by_name, pairs, params, fd)
    return test


def mpc_run_check(test, alg, tmp, by_name, pairs, params, fd):
    """Runs the standalone algorithm graph with `mpc run` when mpc can (else says why)."""
    path = os.path.join(tmp, "alg.onnx")
    onnx.save(alg, path)
    outdir = os.path.join(tmp, "out")
    os.makedirs(outdir, exist_ok=True)
    r = run_mpc("run", path, "--outputs", outdir)
    if r.returncode < 0:
        test.fail(f"mpc run crashed (signal {-r.returncode}) on the algorithm graph")
    if r.returncode != 0:
        print(f"  [{test.id().split('.')[-1]}] mpc run skipped: "
              f"{(r.stderr.strip().splitlines() or ['?'])[-1][:160]}")
        return
    for p in params:
        safe = "".join(c if c.isalnum() or c in "_-." else "_" for c in pairs[p])
        fname = os.path.join(outdir, safe + ".npy")
        if not os.path.exists(fname):
            print(f"  mpc run: no {fname}; comparison skipped")
            return
        err = rel_error(np.load(fname), fd[p])
        test.assertLess(err, REL_TOL, f"d/d{p}: relative error {err:.3g} (mpc run)")


for _name, _case in gradcheck_cases().items():
    setattr(GradientCheck, f"test_{_name}", _make_gradcheck(_name, _case))


# --------------------------------------------------------------------------------------------
# (b) shipped models
# --------------------------------------------------------------------------------------------

SHIPPED = {"mlp": "cross-entropy", "cnn": "cross-entropy", "transformer": "mse", "lstm": "mse"}
LR = 0.05


def model_feeds(model, train):
    rng = np.random.default_rng(99)
    alg = train.training_info[0].algorithm
    labels = tl.metadata(train)["mpc.training.labels"]
    feeds = {}
    for vi in alg.input:
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 2 for d in tt.shape.dim]
        if vi.name == labels and tt.elem_type == TensorProto.INT64:
            # classes: the last dim of the logits
            feeds[vi.name] = rng.integers(0, 8, size=shape).astype(np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


class ShippedModels(unittest.TestCase):
    pass


def _make_shipped(model_name, loss, optimizer):
    def test(self):
        src = os.path.join(ARGS.source_dir, "models", model_name + ".onnx")
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "train.onnx")
            r = run_mpc("train-graph", src, "--loss", loss, "--optimizer", optimizer, "--lr",
                        str(LR), "--expose-gradients", "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            train = onnx.load(dst)
            onnx.checker.check_model(train, full_check=True)
            md = tl.metadata(train)
            for key in ("mpc.training.loss", "mpc.training.loss_grad_seed",
                        "mpc.training.gradients", "mpc.training.labels",
                        "mpc.training.predictions", "mpc.training.loss_kind",
                        "mpc.training.optimizer", "mpc.training.step_counter",
                        "mpc.training.fp32_nodes"):
                self.assertIn(key, md)
            alg = train.training_info[0].algorithm
            self.assertEqual(alg.output[0].name, md["mpc.training.loss"])
            seed = [nd for nd in alg.node if md["mpc.training.loss_grad_seed"] in nd.output]
            self.assertEqual(seed[0].op_type, "Constant")
            inference_inputs = [i.name for i in train.graph.input]
            self.assertEqual([i.name for i in alg.input][:len(inference_inputs)],
                             inference_inputs)
            binding = {b.key: b.value for b in train.training_info[0].update_binding}
            inits = {t.name for t in train.graph.initializer}
            self.assertTrue(set(binding) <= inits)
            self.assertIn(md["mpc.training.step_counter"], binding)
            # determinism: same input, same bytes
            dst2 = os.path.join(tmp, "train2.onnx")
            r2 = run_mpc("train-graph", src, "--loss", loss, "--optimizer", optimizer, "--lr",
                         str(LR), "--expose-gradients", "-o", dst2)
            self.assertEqual(r2.returncode, 0, r2.stderr)
            self.assertEqual(lib.read_bytes(dst), lib.read_bytes(dst2), "output not deterministic")
            missing = missing_ref_ops(train)
            if missing:
                self.skipTest("no onnx.reference implementation of ai.mpc.training::"
                              + ", ".join(missing))
            sa = tl.algorithm_as_model(train)
            outs = tl.reference_evaluator(sa).run(None, model_feeds(train, train))
            by_name = dict(zip([o.name for o in sa.graph.output], outs))
            loss_value = by_name[md["mpc.training.loss"]]
            self.assertTrue(np.isfinite(loss_value).all(), f"loss {loss_value}")
            params = {t.name: numpy_helper.to_array(t) for t in train.graph.initializer}
            for p, g in tl.gradient_pairs(train):
                new = by_name[binding[p]]
                grad = by_name[g]
                self.assertEqual(new.shape, params[p].shape)
                self.assertTrue(np.isfinite(new).all(), p)
                # First step from zero state: momentum gives v' = g, adam m_hat = g and
                # v_hat = g^2 (docs/training.md optimizers, independent numpy formulas).
                if optimizer == "adam":
                    g64 = grad.astype(np.float64)
                    expect = params[p] - LR * g64 / (np.abs(g64) + 1e-8)
                    np.testing.assert_allclose(by_name[binding[p + ".adam_m"]], 0.1 * grad,
                                               rtol=1e-5, atol=1e-7, err_msg=p)
                    tol = dict(rtol=1e-4, atol=1e-4 * LR)
                else:
                    if optimizer == "momentum":
                        np.testing.assert_allclose(by_name[binding[p + ".momentum"]], grad,
                                                   rtol=1e-6, err_msg=p)
                    expect = params[p] - np.float32(LR) * grad
                    tol = dict(rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(new, expect, err_msg=p, **tol)
            self.assertEqual(int(by_name[binding[md["mpc.training.step_counter"]]]), 1)
    return test


def _make_loads(model_name, loss):
    def test(self):
        src = os.path.join(ARGS.source_dir, "models", model_name + ".onnx")
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "train.onnx")
            r = run_mpc("train-graph", src, "--loss", loss, "--optimizer", "adam", "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            # mpc imports and verifies a model before refusing one that already trains, so
            # this error means the training model loaded and passed the verifier.
            r3 = run_mpc("train-graph", dst, "--loss", loss, "-o", os.path.join(tmp, "x.onnx"))
            self.assertEqual(r3.returncode, 1)
            self.assertIn("already has training_info", r3.stderr,
                          "the training model does not load in mpc (docs/training.md gives the "
                          "algorithm inputs the inference inputs' names; the importer must let "
                          "training stages see only the main graph's initializers)")
    return test


for _m, _loss in SHIPPED.items():
    setattr(ShippedModels, f"test_{_m}_loads_in_mpc", _make_loads(_m, _loss))
for _m, _loss in SHIPPED.items():
    for _opt in ("sgd", "momentum", "adam"):
        setattr(ShippedModels, f"test_{_m}_{_opt}", _make_shipped(_m, _loss, _opt))


# --------------------------------------------------------------------------------------------
# (c) bad input
# --------------------------------------------------------------------------------------------

class Options(unittest.TestCase):
    def build(self, tmp, *args):
        src = os.path.join(ARGS.source_dir, "models", "mlp.onnx")
        dst = os.path.join(tmp, "t.onnx")
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--expose-gradients",
                    *args, "-o", dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Softmax", r.stderr)  # the note about taking the logits
        return onnx.load(dst)

    def test_freeze_and_weight_decay(self):
        with tempfile.TemporaryDirectory() as tmp:
            train = self.build(tmp, "--freeze", "^fc0/", "--weight-decay", "0.1", "--lr", "0.5")
            pairs = dict(tl.gradient_pairs(train))
            self.assertEqual(sorted(pairs), ["fc1/B", "fc1/W", "fc2/B", "fc2/W"])
            binding = {b.key: b.value for b in train.training_info[0].update_binding}
            self.assertNotIn("fc0/W", binding)
            md = tl.metadata(train)
            self.assertEqual(md["mpc.training.optimizer"], "sgd lr=0.5 weight_decay=0.1")
            missing = missing_ref_ops(train)
            if missing:
                self.skipTest("no onnx.reference implementation of " + ", ".join(missing))
            sa = tl.algorithm_as_model(train)
            outs = tl.reference_evaluator(sa).run(None, model_feeds(train, train))
            by_name = dict(zip([o.name for o in sa.graph.output], outs))
            params = {t.name: numpy_helper.to_array(t) for t in train.graph.initializer}
            for p, g in pairs.items():
                w = params[p]
                expect = w - np.float32(0.5) * (by_name[g] + np.float32(0.1) * w)
                np.testing.assert_allclose(by_name[binding[p]], expect, rtol=1e-5, atol=1e-6)

    def test_labels_name_and_metadata(self):
        with tempfile.TemporaryDirectory() as tmp:
            train = self.build(tmp, "--labels", "target", "--optimizer", "momentum")
            alg = train.training_info[0].algorithm
            self.assertEqual(alg.input[-1].name, "target")
            self.assertEqual(alg.input[-1].type.tensor_type.elem_type, TensorProto.INT64)
            md = tl.metadata(train)
            self.assertEqual(md["mpc.training.labels"], "target")
            self.assertEqual(md["mpc.training.loss_kind"], "cross-entropy")
            fp32 = set(md["mpc.training.fp32_nodes"].splitlines())
            names = {n.name for n in alg.node}
            self.assertTrue(fp32 <= names)
            loss_nodes = [n.name for n in alg.node if n.op_type == "SoftmaxCrossEntropyLoss"]
            self.assertEqual(len(loss_nodes), 1)
            self.assertIn(loss_nodes[0], fp32)
            self.assertEqual(len(names), len(alg.node), "node names are unique")


def save_opset17(graph, path):
    """Saves `graph` as an opset-17 model at `path`; returns the model."""
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return m


class BadInput(unittest.TestCase):
    def check_error(self, args, *expect, src=None):
        with tempfile.TemporaryDirectory() as tmp:
            if src is None:
                src = os.path.join(ARGS.source_dir, "models", "mlp.onnx")
            dst = os.path.join(tmp, "out.onnx")
            full = ["train-graph", src, *args]
            if "-o" not in args:
                full += ["-o", dst]
            r = run_mpc(*full)
            self.assertEqual(r.returncode, 1, r.stderr)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            for e in expect:
                self.assertIn(e, lines[0])
            self.assertFalse(os.path.exists(dst), "an output file was written")
            self.assertEqual([f for f in os.listdir(tmp) if f != os.path.basename(src)], [])

    def test_no_such_loss_output(self):
        self.check_error(["--loss", "nope"], "nope", "no output")

    def test_loss_not_scalar(self):
        self.check_error(["--loss", "probs"], "probs", "scalar")

    def test_labels_wrong_type(self):
        self.check_error(["--loss", "cross-entropy", "--labels", "x"], "labels input 'x'",
                         "int64")

    def test_op_without_gradient_rule(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "sin.onnx")
            x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
            y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
            w = numpy_helper.from_array(np.ones((3, 3), np.float32), "w")
            g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                                   helper.make_node("Sin", ["h"], ["s"], name="the_sin"),
                                   helper.make_node("Relu", ["s"], ["y"], name="act")],
                                  "g", [x], [y], [w])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            m.ir_version = 8
            onnx.save(m, src)
            self.check_error(["--loss", "mse"], "'the_sin' (Sin)", "no gradient rule",
                             "'y' <- 's'", src=src)

    def pad_model(self, tmp, **pad):
        """x [2, 3] -> MatMul(w) -> Pad(**pad) -> y."""
        src = os.path.join(tmp, "pad.onnx")
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        inits = [numpy_helper.from_array(np.ones((3, 3), np.float32), "w"),
                 numpy_helper.from_array(np.array(pad.pop("pads"), np.int64), "pads")]
        g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                               helper.make_node("Pad", ["h", "pads"], ["y"], name="the_pad",
                                                **pad)], "g", [x], [y], inits)
        save_opset17(g, src)
        return src

    def test_pad_reflect(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = self.pad_model(tmp, pads=[0, 1, 0, 1], mode="reflect")
            self.check_error(["--loss", "mse"], "'the_pad' (Pad): gradient not supported",
                             "mode 'reflect' (only constant)", src=src)

    def test_pad_negative(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = self.pad_model(tmp, pads=[0, 1, 0, -1])
            self.check_error(["--loss", "mse"], "'the_pad' (Pad): gradient not supported",
                             "negative amounts", src=src)

    def test_freeze_everything(self):
        self.check_error(["--loss", "cross-entropy", "--freeze", "."], "--freeze", "all")

    def test_output_is_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "mlp.onnx")
            with open(os.path.join(ARGS.source_dir, "models", "mlp.onnx"), "rb") as f:
                data = f.read()
            with open(src, "wb") as f:
                f.write(data)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "-o", src)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("is the input model", r.stderr)
            self.assertEqual(lib.read_bytes(src), data)

    def test_no_loss_given(self):
        r = run_mpc("train-graph", os.path.join(ARGS.source_dir, "models", "mlp.onnx"), "-o",
                    os.path.join(tempfile.gettempdir(), "never-written.onnx"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--loss is required", r.stderr)


class ShapeInference(unittest.TestCase):
    """The shapes train-graph infers for the rules that need a rank, and what --verbose says."""

    @staticmethod
    def patch_tokens_model(path, shape_input=False):
        """A ViT's front as torch.onnx.export writes it: x [N, 2, 4] flattened by a Reshape to
        a computed shape (libonnx loses the rank there), transposed to tokens, a class token
        expanded to the batch (x.shape[0], -1, -1 through ConstantOfShape, Mul, Equal and
        Where) and concatenated in front, MatMul(w), L = ReduceSum(Y * Y). With shape_input the
        Reshape's target is a graph input: no rank can be known."""
        n = helper.make_node
        c = lambda name, v: n("Constant", [], [name], value=numpy_helper.from_array(
            np.array(v, np.int64)))
        nodes = [n("Shape", ["x"], ["sx"]), c("z", [0]), c("two", [2]), c("minus1", [-1]),
                 n("Slice", ["sx", "z", "two"], ["lead"]),
                 n("Concat", ["lead", "minus1"], ["target"], axis=0),
                 n("Reshape", ["x", "shape_in" if shape_input else "target"], ["flat"]),
                 n("Transpose", ["flat"], ["tokens"], perm=[0, 2, 1]),
                 c("zero", 0), n("Gather", ["sx", "zero"], ["batch"]), c("ax0", [0]),
                 n("Unsqueeze", ["batch", "ax0"], ["batch1"]),
                 n("Concat", ["batch1", "minus1", "minus1"], ["want"], axis=0),
                 c("three", [3]),
                 n("ConstantOfShape", ["three"], ["ones"],
                   value=numpy_helper.from_array(np.array([1], np.int64))),
                 n("Mul", ["ones", "minus1"], ["negs"]), n("Equal", ["want", "negs"], ["keep"]),
                 n("Where", ["keep", "ones", "want"], ["eshape"]),
                 n("Expand", ["cls", "eshape"], ["clsN"]),
                 n("Concat", ["clsN", "tokens"], ["seq"], axis=1),
                 n("MatMul", ["seq", "w"], ["Y"], name="proj"),
                 n("Mul", ["Y", "Y"], ["YY"]), n("ReduceSum", ["YY"], ["L"], keepdims=0)]
        rng = np.random.default_rng(3)
        inits = [numpy_helper.from_array(rng.standard_normal((1, 1, 2)), "cls"),
                 numpy_helper.from_array(rng.standard_normal((2, 3)), "w")]
        ins = [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 2, 2, 2])]
        if shape_input:
            ins.append(helper.make_tensor_value_info("shape_in", TensorProto.INT64, [None]))
        g = helper.make_graph(nodes, "patches", ins,
                              [helper.make_tensor_value_info("L", TensorProto.DOUBLE, [])],
                              inits)
        return save_opset17(g, path)

    def test_vit_front_gradients(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            model = self.patch_tokens_model(src)
            r = run_mpc("train-graph", src, "--loss", "L", "--expose-gradients", "--verbose",
                        "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("train-graph: shape inference: every floating-point value has a "
                          "rank\n", r.stdout)
            # The gradients against float64 finite differences at a batch of 3.
            x = np.random.default_rng(5).standard_normal((3, 2, 2, 2))
            self.assert_fd_gradients(model, dst, {"x": x})

    def assert_fd_gradients(self, model, dst, feeds):
        """The exposed gradients of training model `dst` (built from `model`) on `feeds`,
        run by onnx.reference, against float64 central finite differences."""
        alg = tl.algorithm_as_model(onnx.load(dst))
        import mpc_training_ref
        outs = ReferenceEvaluator(alg, new_ops=list(mpc_training_ref.OPS) + FLOAT64_OPS).run(
            None, feeds)
        by_name = dict(zip([o.name for o in alg.graph.output], outs))
        params = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}

        def loss(p):
            m = onnx.ModelProto()
            m.CopyFrom(model)
            for t in m.graph.initializer:
                t.CopyFrom(numpy_helper.from_array(p.get(t.name, params[t.name]), t.name))
            return float(ReferenceEvaluator(m, new_ops=FLOAT64_OPS).run(None, feeds)[0])
        pairs = tl.gradient_pairs(onnx.load(dst))
        self.assertTrue(pairs)
        for name, grad in pairs:
            fd = np.zeros_like(params[name])
            for i in range(fd.size):
                step = np.zeros(fd.size)
                step[i] = FD_STEP
                step = step.reshape(fd.shape)
                fd.reshape(-1)[i] = (loss({name: params[name] + step}) -
                                     loss({name: params[name] - step})) / (2 * FD_STEP)
            self.assertLess(rel_error(by_name[grad], fd), REL_TOL, name)

    def erf_gelu_model(self, path, constants_as):
        """x [N, 4] @ w, then GELU in the erf form an opset-17 exporter writes
        (Div by sqrt2, Erf, Add 1, Mul x, Mul 0.5), @ v, summed: the constants as
        Constant nodes or as (trainable) initializers."""
        n = helper.make_node
        rng = np.random.default_rng(13)
        consts = {"sqrt2": np.sqrt(2.0), "one": 1.0, "half": 0.5}
        nodes, inits = [], [numpy_helper.from_array(rng.standard_normal((4, 6)), "w"),
                            numpy_helper.from_array(rng.standard_normal((6, 3)), "v")]
        for name, value in consts.items():
            t = numpy_helper.from_array(np.array(value, np.float64), name)
            if constants_as == "nodes":
                nodes.append(n("Constant", [], [name], value=t))
            else:
                inits.append(t)
        nodes += [n("MatMul", ["x", "w"], ["h"]), n("Div", ["h", "sqrt2"], ["hs"]),
                  n("Erf", ["hs"], ["e"]), n("Add", ["e", "one"], ["e1"]),
                  n("Mul", ["h", "e1"], ["he"]), n("Mul", ["he", "half"], ["g"]),
                  n("MatMul", ["g", "v"], ["y"]), n("ReduceSum", ["y"], ["L"], keepdims=0)]
        g = helper.make_graph(
            nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", 4])],
            [helper.make_tensor_value_info("L", TensorProto.DOUBLE, [])], inits)
        return save_opset17(g, path)

    def test_erf_gelu_is_differentiated_whole(self):
        # The chain's gradient is one GeluGrad(dY, h) (exact erf GELU), not the
        # Div/Erf/Add/Mul rules in turn; the gradients against finite
        # differences. Where the chain's constants are trainable initializers
        # their gradients are asked for: the rules run node by node (ErfGrad),
        # unless --freeze keeps them constant.
        x = np.random.default_rng(5).standard_normal((3, 4))
        for constants, freeze, whole in (("nodes", None, True), ("inits", None, False),
                                         ("inits", "^(sqrt2|one|half)$", True)):
            with self.subTest(constants=constants, freeze=freeze), \
                    tempfile.TemporaryDirectory() as tmp:
                src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
                model = self.erf_gelu_model(src, constants)
                extra = ["--freeze", freeze] if freeze else []
                r = run_mpc("train-graph", src, "--loss", "L", "--expose-gradients", *extra,
                            "-o", dst)
                self.assertEqual(r.returncode, 0, r.stderr)
                ops = [nd.op_type for nd in onnx.load(dst).training_info[0].algorithm.node]
                note = ("GELU in erf form: 1 chain(s) (Div, Erf, Add, Mul, Mul) "
                        "differentiated as one GeluGrad each")
                if whole:
                    self.assertEqual((ops.count("GeluGrad"), ops.count("ErfGrad")), (1, 0), ops)
                    self.assertIn(note, r.stderr)
                else:
                    self.assertEqual((ops.count("GeluGrad"), ops.count("ErfGrad")), (0, 1), ops)
                    self.assertNotIn("GELU in erf form", r.stderr)
                self.assert_fd_gradients(model, dst, {"x": x})

    def trained(self, tmp, name, nodes, inits, x_shape):
        """Saves the float64 model of `nodes` (input x of `x_shape`, loss output L) in
        `tmp` and builds its training graph with the gradients exposed: (model, path)."""
        g = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("x", TensorProto.DOUBLE, x_shape)],
            [helper.make_tensor_value_info("L", TensorProto.DOUBLE, [])], inits)
        src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
        model = save_opset17(g, src)
        r = run_mpc("train-graph", src, "--loss", "L", "--expose-gradients", "-o", dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        return model, dst

    def test_batched_products_read_their_operands_transposed(self):
        # Attention-like products of two activations ([N, 3, 4] x [N, 4, 3],
        # then [N, 3, 3] x [N, 3, 4]): each of the four gradient products reads
        # one operand transposed through com.microsoft::FusedMatMul, no
        # Transpose copies; the model imports com.microsoft. The weights (2-D)
        # get theirs from Gemm over flattened rows. Finite differences agree.
        n = helper.make_node
        nodes = [n("MatMul", ["x", "wq"], ["q"]), n("MatMul", ["x", "wk"], ["k"]),
                 n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
                 n("MatMul", ["q", "kt"], ["s"]), n("Softmax", ["s"], ["p"], axis=-1),
                 n("MatMul", ["p", "q"], ["o"]), n("Mul", ["o", "o"], ["oo"]),
                 n("ReduceSum", ["oo"], ["L"], keepdims=0)]
        rng = np.random.default_rng(17)
        inits = [numpy_helper.from_array(rng.standard_normal((4, 4)), "wq"),
                 numpy_helper.from_array(rng.standard_normal((4, 4)), "wk")]
        with tempfile.TemporaryDirectory() as tmp:
            model, dst = self.trained(tmp, "attention", nodes, inits, ["N", 3, 4])
            t = onnx.load(dst)
            alg = t.training_info[0].algorithm
            fused = sorted((nd.input[0], nd.input[1], [a.name for a in nd.attribute])
                           for nd in alg.node if nd.op_type == "FusedMatMul")
            self.assertEqual(fused, [
                ("fwd/p", "grad/sum/o", ["transA"]), ("fwd/q", "grad/p/dX", ["transA"]),
                ("grad/p/dX", "fwd/kt", ["transB"]), ("grad/sum/o", "fwd/q", ["transB"])])
            self.assertIn(("com.microsoft", 1), [(o.domain, o.version) for o in t.opset_import])
            # The forward's Transpose and its gradient (a Transpose of dKt): no others.
            self.assertEqual(sum(nd.op_type == "Transpose" for nd in alg.node), 2)
            x = np.random.default_rng(5).standard_normal((2, 3, 4))
            self.assert_fd_gradients(model, dst, {"x": x})
            # MPC_TRAIN_GRAPH_PLAIN (measurements): the node-by-node rules, no
            # FusedMatMul, no Gemm over flattened rows, no contrib import; the
            # same gradients.
            plain = os.path.join(tmp, "plain.onnx")
            r = run_mpc("train-graph", os.path.join(tmp, "m.onnx"), "--loss", "L",
                        "--expose-gradients", "-o", plain, env={"MPC_TRAIN_GRAPH_PLAIN": "1"})
            self.assertEqual(r.returncode, 0, r.stderr)
            p = onnx.load(plain)
            ops = [nd.op_type for nd in p.training_info[0].algorithm.node]
            self.assertEqual((ops.count("FusedMatMul"), ops.count("Gemm")), (0, 0), ops)
            self.assertEqual(ops.count("Transpose"), 8, ops)  # 4 products, 2 weights, 2 as above
            self.assertNotIn("com.microsoft", [o.domain for o in p.opset_import])
            self.assert_fd_gradients(model, plain, {"x": x})

    def test_same_symbolic_shapes_need_no_reduction(self):
        # x [N, 3, 4]: a residual block whose Add and Mul operands have the
        # output's shape, the batch axis "N" included. Their gradients are the
        # output's gradient itself: one BiasGrad remains, for the broadcast
        # bias b [4] (before, every operand with the symbol N got a BiasGrad,
        # each a copy of its tensor per step).
        n = helper.make_node
        nodes = [n("MatMul", ["x", "w"], ["h"]), n("Add", ["h", "b"], ["hb"]),
                 n("Tanh", ["hb"], ["t"]), n("Add", ["t", "x"], ["r"]),
                 n("Mul", ["r", "x"], ["rx"]), n("MatMul", ["rx", "rx_t"], ["s"]),
                 n("ReduceSum", ["s"], ["L"], keepdims=0)]
        rng = np.random.default_rng(11)
        inits = [numpy_helper.from_array(rng.standard_normal((4, 4)), "w"),
                 numpy_helper.from_array(rng.standard_normal(4), "b"),
                 numpy_helper.from_array(rng.standard_normal((4, 2)), "rx_t")]
        with tempfile.TemporaryDirectory() as tmp:
            model, dst = self.trained(tmp, "residual", nodes, inits, ["N", 3, 4])
            alg = onnx.load(dst).training_info[0].algorithm
            reductions = sorted(list(nd.input)[0] for nd in alg.node
                                if nd.op_type == "BiasGrad")
            # Only b's bias gradient (Tanh's input gradient summed over N and
            # 3) is a reduction. The 2-D weights w and rx_t, applied to every
            # row of [N, 3, 4] operands, get theirs from one GEMM each over
            # the rows folded together (Flatten, Gemm transA), not from a
            # batch of [4, 4] and [4, 2] products summed over N.
            self.assertEqual(reductions, ["grad/t/dX"])
            gemms = sorted((list(nd.input), [a.i for a in nd.attribute if a.name == "transA"])
                           for nd in alg.node if nd.op_type == "Gemm")
            self.assertEqual(gemms, [(["grad/h/A2", "grad/h/dY2"], [1]),
                                     (["grad/s/A2", "grad/s/dY2"], [1])])
            x = np.random.default_rng(5).standard_normal((2, 3, 4))
            self.assert_fd_gradients(model, dst, {"x": x})

    def test_rank_unknown_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            self.patch_tokens_model(src, shape_input=True)
            r = run_mpc("train-graph", src, "--loss", "L", "--verbose", "-o", dst)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("'proj' (MatMul): gradient not supported: MatMul operands need a "
                          "known rank", r.stderr)
            self.assertRegex(r.stdout, r"train-graph: shape inference: \d+ floating-point "
                             r"value\(s\) without a rank: 'flat', 'tokens', ")
            self.assertFalse(os.path.exists(dst))
            # Without --verbose: the error alone.
            r = run_mpc("train-graph", src, "--loss", "L", "-o", dst)
            self.assertEqual((r.returncode, r.stdout), (1, ""))


def embedding_classifier(V, D, T, C, seed):
    """tokens [N, T] -> Gather(E) -> ReduceMean over T -> Gemm(W, b, transB) -> logits [N, C]
    (an nn.Embedding + mean-pool classifier, batch dimension symbolic)."""
    rng = np.random.default_rng(seed)
    params = {"E": rng.standard_normal((V, D)).astype(np.float32),
              "W": (rng.standard_normal((C, D)) * 0.5).astype(np.float32),
              "b": (rng.standard_normal(C) * 0.1).astype(np.float32)}
    nodes = [helper.make_node("Gather", ["E", "tokens"], ["emb"], name="emb/Gather"),
             helper.make_node("ReduceMean", ["emb"], ["pooled"], axes=[1], keepdims=0,
                              name="pool"),
             helper.make_node("Gemm", ["pooled", "W", "b"], ["logits"], transB=1, name="fc")]
    g = helper.make_graph(
        nodes, "embedding_classifier",
        [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", T])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", C])],
        [numpy_helper.from_array(v, k) for k, v in params.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m, params


def embedding_classifier_sgd(params, tokens, labels, lr, steps):
    """float64 numpy: full-batch SGD on the mean softmax cross-entropy."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    n, t = tokens.shape
    for _ in range(steps):
        pooled = p["E"][tokens].mean(axis=1)
        z = pooled @ p["W"].T + p["b"]
        prob = np.exp(z - z.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        dz = prob.copy()
        dz[np.arange(n), labels] -= 1.0
        dz /= n
        d_emb = np.repeat((dz @ p["W"])[:, None, :] / t, t, axis=1)
        d_e = np.zeros_like(p["E"])
        np.add.at(d_e, tokens, d_emb)
        p["W"] -= lr * dz.T @ pooled
        p["b"] -= lr * dz.sum(axis=0)
        p["E"] -= lr * d_e
    return p


def gru_classifier(I, H, T, C, seed, last="gather"):
    """x [N, T, I] -> Transpose -> GRU (linear_before_reset=1, as PyTorch exports nn.GRU) ->
    Y [T, 1, N, H] -> Squeeze -> Transpose -> y[:, -1] (Gather or Slice + Squeeze) ->
    Gemm(Wfc, bfc, transB) -> logits [N, C]; the batch dimension is symbolic."""
    rng = np.random.default_rng(seed)
    u = lambda *shape: rng.uniform(-0.6, 0.6, shape).astype(np.float32)
    params = {"W": u(1, 3 * H, I), "R": u(1, 3 * H, H), "B": u(1, 6 * H), "Wfc": u(C, H),
              "bfc": u(C)}
    consts = {"axes1": np.array([1], np.int64), "last": np.array(-1, np.int64),
              "st": np.array([-1], np.int64), "en": np.array([T], np.int64)}
    n = helper.make_node
    nodes = [n("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="tx"),
             n("GRU", ["xt", "W", "R", "B"], ["Y"], hidden_size=H, linear_before_reset=1,
               name="gru"),
             n("Squeeze", ["Y", "axes1"], ["Ys"], name="sq"),
             n("Transpose", ["Ys"], ["Yb"], perm=[1, 0, 2], name="ty")]
    if last == "gather":
        nodes.append(n("Gather", ["Yb", "last"], ["h"], axis=1, name="last"))
    else:
        nodes += [n("Slice", ["Yb", "st", "en", "axes1"], ["hs"], name="last"),
                  n("Squeeze", ["hs", "axes1"], ["h"], name="sq_last")]
    nodes.append(n("Gemm", ["h", "Wfc", "bfc"], ["logits"], transB=1, name="fc"))
    g = helper.make_graph(
        nodes, "gru_classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", T, I])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", C])],
        [numpy_helper.from_array(v, k) for k, v in {**params, **consts}.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m, params


def gru_classifier_sgd(params, x, labels, lr, steps):
    """float64 numpy: full-batch SGD on the mean softmax cross-entropy of gru_classifier.
    The GRU forward is written out here; its backward is mpc_training_ref.gru_grad (itself
    checked against finite differences of onnx.reference's GRU)."""
    import mpc_training_ref as ref
    p = {k: v.astype(np.float64) for k, v in params.items()}
    n, t, _ = x.shape
    hid = p["R"].shape[2]
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))
    xt = np.transpose(x.astype(np.float64), (1, 0, 2))
    for _ in range(steps):
        w, r, wb, rb = p["W"][0], p["R"][0], p["B"][0, :3 * hid], p["B"][0, 3 * hid:]
        h = np.zeros((n, hid))
        for step in range(t):
            zr = sig(xt[step] @ w[:2 * hid].T + h @ r[:2 * hid].T + wb[:2 * hid] + rb[:2 * hid])
            z, rg = zr[:, :hid], zr[:, hid:]
            ht = np.tanh(xt[step] @ w[2 * hid:].T + wb[2 * hid:] +
                         rg * (h @ r[2 * hid:].T + rb[2 * hid:]))
            h = (1 - z) * ht + z * h
        logits = h @ p["Wfc"].T + p["bfc"]
        prob = np.exp(logits - logits.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        dz = prob.copy()
        dz[np.arange(n), labels] -= 1.0
        dz /= n
        dh = dz @ p["Wfc"]
        _, dw, dr, db, _ = ref.gru_grad(None, dh[None], xt, p["W"], p["R"], p["B"],
                                        linear_before_reset=1)
        p["Wfc"] -= lr * dz.T @ h
        p["bfc"] -= lr * dz.sum(axis=0)
        p["W"] -= lr * dw
        p["R"] -= lr * dr
        p["B"] -= lr * db
    return p


class EndToEnd(unittest.TestCase):
    def test_embedding_classifier_matches_numpy(self):
        """train-graph -> run --train: fp32 parameters after 6 full-batch SGD steps equal a
        float64 numpy reference from the same initial weights and data (full batches, so
        the trainer's sample order only permutes the terms of each sum)."""
        V, D, T, C, N, lr, steps = 9, 4, 5, 3, 12, 0.5, 6
        model, params = embedding_classifier(V, D, T, C, seed=3)
        rng = np.random.default_rng(4)
        tokens = rng.integers(0, V - 1, size=(N, T)).astype(np.int64)  # row V-1 unused
        tokens[0] = [2, 2, 2, 5, 2]  # a token repeated within a sample
        labels = rng.integers(0, C, size=N).astype(np.int64)
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "emb.onnx"), os.path.join(tmp, "emb.train.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--optimizer", "sgd",
                        "--lr", str(lr), "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            lab = tl.metadata(onnx.load(dst))["mpc.training.labels"]
            data = os.path.join(tmp, "data.npz")
            np.savez(data, tokens=tokens, **{lab: labels})
            ck = os.path.join(tmp, "ck")
            r = run_mpc("run", dst, "--train", "--data", data, "--batch", str(N), "--steps",
                        str(steps), "--holdout", "0", "--checkpoint", ck)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = {t.name: numpy_helper.to_array(t)
                   for t in onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}
        want = embedding_classifier_sgd(params, tokens, labels, lr, steps)
        for k in ("E", "W", "b"):
            self.assertGreater(np.abs(want[k] - params[k]).max(), 1e-3, f"{k} did not train")
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
        np.testing.assert_array_equal(got["E"][V - 1], params["E"][V - 1])


    def test_gru_classifier_matches_numpy(self):
        """nn.GRU + y[:, -1] + Linear as exported (Gather, and Slice for y[:, -1:]):
        train-graph -> run --train, fp32 parameters after 5 full-batch SGD steps equal a
        float64 numpy reference."""
        I, H, T, C, N, lr, steps = 3, 4, 5, 3, 8, 0.5, 5
        rng = np.random.default_rng(12)
        x = rng.standard_normal((N, T, I)).astype(np.float32)
        labels = rng.integers(0, C, size=N).astype(np.int64)
        for last in ("gather", "slice"):
            model, params = gru_classifier(I, H, T, C, seed=11, last=last)
            with tempfile.TemporaryDirectory() as tmp:
                src, dst = os.path.join(tmp, "gru.onnx"), os.path.join(tmp, "gru.train.onnx")
                onnx.save(model, src)
                r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--optimizer",
                            "sgd", "--lr", str(lr), "-o", dst)
                self.assertEqual(r.returncode, 0, r.stderr)
                train = onnx.load(dst)
                self.assertIn("GRUGrad", {nd.op_type for nd in
                                          train.training_info[0].algorithm.node})
                lab = tl.metadata(train)["mpc.training.labels"]
                data = os.path.join(tmp, "data.npz")
                np.savez(data, x=x, **{lab: labels})
                ck = os.path.join(tmp, "ck")
                r = run_mpc("run", dst, "--train", "--data", data, "--batch", str(N),
                            "--steps", str(steps), "--holdout", "0", "--checkpoint", ck)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = {t.name: numpy_helper.to_array(t) for t in
                       onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}
            want = gru_classifier_sgd(params, x, labels, lr, steps)
            for k in params:
                self.assertGreater(np.abs(want[k] - params[k]).max(), 1e-3, f"{k} did not train")
                np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6,
                                           err_msg=f"{k} ({last})")

    def test_gru_unsupported_attribute_is_one_line(self):
        model, _ = gru_classifier(2, 3, 4, 2, seed=1)
        for node in model.graph.node:
            if node.op_type == "GRU":
                node.attribute.append(helper.make_attribute("clip", 3.0))
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "gru.onnx"), os.path.join(tmp, "t.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "-o", dst)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("node 'gru' (GRU): gradient not supported: GRU attribute 'clip'; the "
                          "gradient reaches it from the loss through 'loss/sce' <- 'logits' <- "
                          "'h' <- 'Yb' <- 'Ys' <- 'Y'", r.stderr)
            self.assertFalse(os.path.exists(dst))


def masked_model():
    """Gemm -> Where(Equal(tril, 0), -inf, h) (masked_fill with a float buffer) -> Add(mask
    with -inf) -> Softmax -> Clip(lo, hi initializers) -> Gemm -> logits [N, 3]."""
    rng = np.random.default_rng(21)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    inits = {"W1": f32(4, 4), "b1": f32(4), "tril": np.array([1, 1, 0, 1], np.float32),
             "zero_f": np.array(0.0, np.float32), "ninf": np.array(-np.inf, np.float32),
             "addmask": np.array([0, 0, 0, -np.inf], np.float32),
             "lo": np.array(0.0, np.float32), "hi": np.array(0.9, np.float32),
             "W2": f32(4, 3), "b2": f32(3)}
    n = helper.make_node
    nodes = [n("Gemm", ["x", "W1", "b1"], ["h"], name="fc1"),
             n("Equal", ["tril", "zero_f"], ["masked"], name="eq"),
             n("Where", ["masked", "ninf", "h"], ["hm"], name="fill"),
             n("Add", ["hm", "addmask"], ["ha"], name="add_mask"),
             n("Softmax", ["ha"], ["p"], axis=-1, name="soft"),
             n("Clip", ["p", "lo", "hi"], ["pc"], name="clip"),
             n("Gemm", ["pc", "W2", "b2"], ["logits"], name="fc2")]
    g = helper.make_graph(nodes, "masked", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 4])], [helper.make_tensor_value_info(
            "logits", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m, inits


class Buffers(unittest.TestCase):
    def test_summary_and_what_is_trained(self):
        """Masks, comparison inputs and Clip bounds are not trained; the summary says which
        float initializers are trained and why the others are not (docs/training.md)."""
        model, inits = masked_model()
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            onnx.save(model, src)
            r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--freeze", "^b2$",
                        "--lr", "0.5", "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            self.assertEqual(lines[0], f"train-graph: 3 parameter(s) trained, "
                             f"{lines[0].split(', ')[1].split()[0]} gradient node(s), optimizer "
                             f"sgd lr=0.5 weight_decay=0 -> {dst}")
            self.assertEqual(lines[1:], [
                "train-graph: trained: 'W1', 'b1', 'W2'",
                "train-graph: not trained: 'tril', 'zero_f' (no gradient reaches it from the "
                "loss); 'ninf', 'addmask' (holds inf or NaN: a mask constant); 'lo', 'hi' "
                "(only a Clip bound); 'b2' (--freeze)"])
            train = onnx.load(dst)
            self.assertEqual(sorted(p for p, _ in tl.gradient_pairs(train)), ["W1", "W2", "b1"])
            binding = {b.key for b in train.training_info[0].update_binding}
            for k in ("tril", "zero_f", "ninf", "addmask", "lo", "hi", "b2"):
                self.assertNotIn(k, binding)
            # Two steps: the trained parameters move, finite; the buffers stay bit for bit.
            lab = tl.metadata(train)["mpc.training.labels"]
            rng = np.random.default_rng(2)
            data = os.path.join(tmp, "d.npz")
            np.savez(data, x=rng.standard_normal((8, 4)).astype(np.float32),
                     **{lab: rng.integers(0, 3, 8).astype(np.int64)})
            ck = os.path.join(tmp, "ck")
            r = run_mpc("run", dst, "--train", "--data", data, "--batch", "8", "--steps", "2",
                        "--holdout", "0", "--checkpoint", ck)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = {t.name: numpy_helper.to_array(t) for t in
                   onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}
        for k in ("W1", "b1", "W2"):
            self.assertTrue(np.isfinite(got[k]).all(), k)
            self.assertFalse(np.array_equal(got[k], inits[k]), f"{k} did not train")
        for k in ("tril", "zero_f", "ninf", "addmask", "lo", "hi", "b2"):
            np.testing.assert_array_equal(got[k], inits[k], err_msg=k)

    def test_only_masks_is_nothing_to_train(self):
        """A model whose only float initializers are masks has nothing to train."""
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
        mask = numpy_helper.from_array(np.array([0, -np.inf], np.float32), "mask")
        g = helper.make_graph([helper.make_node("Add", ["x", "mask"], ["y"])], "g", [x], [y],
                              [mask])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            onnx.save(m, src)
            r = run_mpc("train-graph", src, "--loss", "mse", "-o", dst)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("all masks (inf or NaN) or BatchNormalization running statistics: "
                          "nothing to train", r.stderr)
            self.assertFalse(os.path.exists(dst))


def bn_model(C, seed):
    """x [N, C, 2, 2] -> BatchNormalization(momentum 0.8) -> Flatten -> Gemm -> logits [N, 3]."""
    rng = np.random.default_rng(seed)
    inits = {"scale": rng.uniform(0.5, 1.5, C).astype(np.float32),
             "bias": rng.uniform(-0.5, 0.5, C).astype(np.float32),
             "mean": rng.uniform(-0.5, 0.5, C).astype(np.float32),
             "var": rng.uniform(0.5, 1.5, C).astype(np.float32),
             "W": rng.standard_normal((4 * C, 3)).astype(np.float32)}
    n = helper.make_node
    nodes = [n("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], momentum=0.8,
               epsilon=1e-5, name="bn"),
             n("Flatten", ["y"], ["f"], name="flat"), n("MatMul", ["f", "W"], ["logits"])]
    g = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", C, 2, 2])], [helper.make_tensor_value_info(
            "logits", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m, inits


class BatchNormVariance(unittest.TestCase):
    def train(self, tmp, model, x, steps, batch, *flags):
        src, dst = os.path.join(tmp, "bn.onnx"), os.path.join(tmp, "bn.train.onnx")
        onnx.save(model, src)
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", *flags, "-o", dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        lab = tl.metadata(onnx.load(dst))["mpc.training.labels"]
        data = os.path.join(tmp, "d.npz")
        np.savez(data, x=x, **{lab: np.arange(len(x), dtype=np.int64) % 3})
        ck = os.path.join(tmp, "ck")
        r = run_mpc("run", dst, "--train", "--data", data, "--batch", str(batch), "--steps",
                    str(steps), "--holdout", "0", "--checkpoint", ck)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {t.name: numpy_helper.to_array(t) for t in
               onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}
        return got, lib.read_bytes(dst)

    def test_running_variance_biased_and_unbiased(self):
        """Running statistics after 3 full-batch steps against float64 numpy: ONNX's biased
        batch variance by default, PyTorch's unbiased one (n/(n-1)) with --bn-variance
        unbiased; an explicit --bn-variance biased writes the default's bytes."""
        C, N, steps, mom = 2, 4, 3, 0.8
        model, inits = bn_model(C, seed=5)
        x = np.random.default_rng(6).standard_normal((N, C, 2, 2)).astype(np.float32) * 2 + 1
        x64 = x.astype(np.float64)
        mean_b, var_b = x64.mean(axis=(0, 2, 3)), x64.var(axis=(0, 2, 3))
        n = N * 4
        results = {}
        with tempfile.TemporaryDirectory() as tmp:
            for mode in ("default", "biased", "unbiased"):
                flags = [] if mode == "default" else ["--bn-variance", mode]
                results[mode] = self.train(tmp, model, x, steps, N, *flags)
        self.assertEqual(results["default"][1], results["biased"][1],
                         "--bn-variance biased changed the training model")
        for mode, factor in (("biased", 1.0), ("unbiased", n / (n - 1))):
            rm, rv = inits["mean"].astype(np.float64), inits["var"].astype(np.float64)
            for _ in range(steps):
                rm = mom * rm + (1 - mom) * mean_b
                rv = mom * rv + (1 - mom) * var_b * factor
            got = results[mode][0]
            np.testing.assert_allclose(got["mean"], rm, rtol=1e-6, err_msg=mode)
            np.testing.assert_allclose(got["var"], rv, rtol=1e-6, err_msg=mode)
        self.assertGreater(abs(results["unbiased"][0]["var"] / results["biased"][0]["var"] - 1)
                           .min(), 0.01)

    def test_bad_value(self):
        src = os.path.join(ARGS.source_dir, "models", "cnn.onnx")
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--bn-variance", "pytorch",
                    "-o", os.path.join(tempfile.gettempdir(), "never-written.onnx"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("--bn-variance must be biased or unbiased, not 'pytorch'", r.stderr)


def token_model(V, D, T, C, seed, layout):
    """tokens [N, T] -> Gather(E) -> MatMul(W) -> logits [N, T, C] (a language model's
    per-token logits); layout "NCT" transposes them to [N, C, T], "softmax" ends in a Softmax
    over the last axis."""
    rng = np.random.default_rng(seed)
    params = {"E": rng.standard_normal((V, D)).astype(np.float32),
              "W": (rng.standard_normal((D, C)) * 0.5).astype(np.float32)}
    n = helper.make_node
    nodes = [n("Gather", ["E", "tokens"], ["emb"], name="emb"),
             n("MatMul", ["emb", "W"], ["z"], name="head")]
    shape = ["N", T, C]
    if layout == "NCT":
        nodes.append(n("Transpose", ["z"], ["out"], perm=[0, 2, 1], name="to_nct"))
        shape = ["N", C, T]
    elif layout == "softmax":
        nodes.append(n("Softmax", ["z"], ["out"], axis=-1, name="probs"))
    else:
        nodes.append(n("Identity", ["z"], ["out"]))
    inits = dict(params)
    g = helper.make_graph(
        nodes, "lm", [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", T])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m, params


def token_model_sgd(params, tokens, labels, lr, steps):
    """float64 numpy: full-batch SGD on the mean per-token softmax cross-entropy."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    n, t = tokens.shape
    for _ in range(steps):
        emb = p["E"][tokens]
        z = emb @ p["W"]
        prob = np.exp(z - z.max(axis=-1, keepdims=True))
        prob /= prob.sum(axis=-1, keepdims=True)
        dz = prob
        dz[np.arange(n)[:, None], np.arange(t)[None, :], labels] -= 1.0
        dz /= n * t
        d_e = np.zeros_like(p["E"])
        np.add.at(d_e, tokens, dz @ p["W"].T)
        p["W"] -= lr * np.einsum("ntd,ntc->dc", emb, dz)
        p["E"] -= lr * d_e
    return p


def token_eval(p, tokens, labels, ignore=None):
    """Accuracy and mean cross-entropy over the labels other than `ignore`."""
    z = p["E"][tokens].astype(np.float64) @ p["W"]
    lse = z.max(-1) + np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1))
    picked = np.take_along_axis(z, np.maximum(labels, 0)[..., None], -1)[..., 0]
    keep = labels != ignore
    return (float(np.mean((z.argmax(-1) == labels)[keep])),
            float(np.mean((lse - picked)[keep])))


class PerTokenLoss(unittest.TestCase):
    V, D, T, C, N, NT, LR, STEPS = 7, 3, 4, 5, 6, 5, 0.5, 4

    def data(self):
        rng = np.random.default_rng(31)
        tok = rng.integers(0, self.V, size=(self.N + self.NT, self.T)).astype(np.int64)
        lab = rng.integers(0, self.C, size=(self.N + self.NT, self.T)).astype(np.int64)
        return tok, lab

    def run_layout(self, tmp, layout, *flags, test_labels=None, edit=False, ignore=None):
        model, params = token_model(self.V, self.D, self.T, self.C, 8, layout)
        tok, lab = self.data()
        src, dst = os.path.join(tmp, layout + ".onnx"), os.path.join(tmp, layout + ".t.onnx")
        onnx.save(model, src)
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--lr", str(self.LR),
                    *flags, "-o", dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        name = tl.metadata(onnx.load(dst))["mpc.training.labels"]
        if edit:  # the inference graph's output made by a Relu, unlike the step's copy
            t = onnx.load(dst)
            for node in t.graph.node:
                if node.op_type == "Identity":
                    node.op_type = "Relu"
            onnx.save(t, dst)
        if ignore is not None:  # the loss and its gradient ignore a label value
            t = onnx.load(dst)
            for node in t.training_info[0].algorithm.node:
                if node.op_type.startswith("SoftmaxCrossEntropyLoss"):
                    node.attribute.append(helper.make_attribute("ignore_index", ignore))
            onnx.save(t, dst)
        data = os.path.join(tmp, layout + ".npz")
        np.savez(data, tokens=tok[:self.N], tokens_test=tok[self.N:], **{
            name: lab[:self.N],
            name + "_test": lab[self.N:] if test_labels is None else test_labels})
        ck, log = os.path.join(tmp, layout + "_ck"), os.path.join(tmp, layout + ".csv")
        r = run_mpc("run", dst, "--train", "--data", data, "--batch", str(self.N), "--steps",
                    str(self.STEPS), "--checkpoint", ck, "--log", log)
        return r, params, ck, log

    def test_layouts_train_and_evaluate(self):
        """[N, T, C] logits (--class-axis -1), [N, C, T] scores (ONNX's layout, the default)
        and a Softmax over the last axis: the same per-token model trains to the float64
        numpy parameters, and evaluation reads the held-out [N, T] labels as the loss does."""
        tok, lab = self.data()
        with tempfile.TemporaryDirectory() as tmp:
            for layout, flags in (("NTC", ["--class-axis", "-1"]), ("NCT", []),
                                  ("softmax", [])):
                r, params, ck, log = self.run_layout(tmp, layout, *flags)
                self.assertEqual(r.returncode, 0, f"{layout}: {r.stderr}")
                want = token_model_sgd(params, tok[:self.N], lab[:self.N], self.LR, self.STEPS)
                got = {t.name: numpy_helper.to_array(t) for t in
                       onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}
                for k in ("E", "W"):
                    np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6,
                                               err_msg=f"{k} ({layout})")
                acc, ce = token_eval(want, tok[self.N:], lab[self.N:])
                with open(log) as f:
                    last = list(__import__("csv").DictReader(f))[-1]
                self.assertAlmostEqual(float(last["eval_accuracy"]), acc, delta=1e-6,
                                       msg=layout)
                self.assertAlmostEqual(float(last["eval_loss"]), ce, delta=1e-4, msg=layout)

    def test_evaluation_skips_ignored_labels(self):
        """Held-out labels equal to the loss's ignore_index count in neither accuracy nor
        loss (PyTorch's -100 padding)."""
        tok, lab = self.data()
        test = lab[self.N:].copy()
        test[:, -1] = -100
        with tempfile.TemporaryDirectory() as tmp:
            r, _, ck, log = self.run_layout(tmp, "NTC", "--class-axis", "-1", test_labels=test,
                                            ignore=-100)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = {t.name: numpy_helper.to_array(t) for t in
                   onnx.load(os.path.join(ck, "checkpoint.onnx")).graph.initializer}
            with open(log) as f:
                last = list(__import__("csv").DictReader(f))[-1]
        acc, ce = token_eval(got, tok[self.N:], test, ignore=-100)
        self.assertAlmostEqual(float(last["eval_accuracy"]), acc, delta=1e-6)
        self.assertAlmostEqual(float(last["eval_loss"]), ce, delta=1e-4)

    def test_refusals_before_step_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            # Held-out labels that do not fit the output's layout.
            _, lab = self.data()
            r, _, ck, _ = self.run_layout(tmp, "NCT",
                                          test_labels=lab[self.N:, :self.T - 1].copy())
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("'labels_test'", r.stderr)
            self.assertFalse(os.path.exists(ck))
            # A training model whose loss scores something else than the first output.
            r, _, ck, _ = self.run_layout(tmp, "NTC", "--class-axis", "-1", edit=True)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("cannot tell which axis of the first output 'out' holds the classes",
                          r.stderr)
            self.assertNotIn("step 1", r.stderr)
            self.assertFalse(os.path.exists(ck))
            # A Softmax over the last axis says where the classes are.
            model, _ = token_model(self.V, self.D, self.T, self.C, 8, "softmax")
            onnx.save(model, os.path.join(tmp, "sm.onnx"))
            r = run_mpc("train-graph", os.path.join(tmp, "sm.onnx"), "--loss", "cross-entropy",
                        "--class-axis", "1", "-o", os.path.join(tmp, "x.onnx"))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("sm.onnx: --class-axis 1: output 'out' is a Softmax over its last "
                          "axis, so its classes are on the last axis", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "x.onnx")))
            r = run_mpc("train-graph", os.path.join(tmp, "NCT.onnx"), "--loss",
                        "cross-entropy", "--class-axis", "2", "-o", os.path.join(tmp, "x.onnx"))
            self.assertEqual(r.returncode, 2)
            self.assertIn("--class-axis must be 1 or -1, not '2'", r.stderr)


class DocsList(unittest.TestCase):
    def test_docs_list_the_rule_table(self):
        """docs/training.md's list of ops with gradient rules is GradRules.cpp's table."""
        import re
        with open(os.path.join(ARGS.source_dir, "passes", "train", "GradRules.cpp")) as f:
            src = f.read()
        table = src[src.index("kRules[]"):]
        rules = re.findall(r'\{"(\w+)",', table[:table.index("};")])
        with open(os.path.join(ARGS.source_dir, "docs", "training.md")) as f:
            doc = f.read()
        section = doc[doc.index("## Ops with gradient rules"):doc.index("Conventions where")]
        listed = re.findall(r"`(\w+)`", section.split("from the loss:")[1])
        self.assertEqual(sorted(listed), sorted(rules))


def gradient_op_model(xs_name="w"):
    """A training model whose algorithm computes L = sum((xa @ w)^2) and Gradient(L, w)."""
    rng = np.random.default_rng(5)
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 2])
    w = numpy_helper.from_array(rng.standard_normal((3, 2)), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    xa = helper.make_tensor_value_info("xa", TensorProto.DOUBLE, [2, 3])
    alg = helper.make_graph(
        [helper.make_node("MatMul", ["xa", "w"], ["t"], name="mm"),
         helper.make_node("Mul", ["t", "t"], ["s"], name="sq"),
         helper.make_node("ReduceSum", ["s"], ["L"], keepdims=0, name="sum"),
         helper.make_node("Gradient", ["w", "xa"], ["dw"], domain="ai.onnx.preview.training",
                          xs=[xs_name], zs=["xa"], y="L", name="grad_node")],
        "alg", [xa], [helper.make_tensor_value_info("L", TensorProto.DOUBLE, []),
                      helper.make_tensor_value_info("dw", TensorProto.DOUBLE, [3, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.preview.training", 1)])
    m.ir_version = 8
    m.training_info.add().algorithm.CopyFrom(alg)
    return m


class GradientOp(unittest.TestCase):
    def test_lowered(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "g.onnx"), os.path.join(tmp, "l.onnx")
            onnx.save(gradient_op_model(), src)
            r = run_mpc("train-graph", src, "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = onnx.load(dst)
            onnx.checker.check_model(out, full_check=True)
            self.assertNotIn("Gradient", {n.op_type for n in out.training_info[0].algorithm.node})
            rng = np.random.default_rng(6)
            xa = rng.standard_normal((2, 3))
            sa = tl.algorithm_as_model(out)
            loss, dw = tl.reference_evaluator(sa).run(None, {"xa": xa})
            w = numpy_helper.to_array(out.graph.initializer[0])
            np.testing.assert_allclose(dw, 2 * xa.T @ (xa @ w), rtol=1e-12)
            np.testing.assert_allclose(loss, np.sum((xa @ w) ** 2), rtol=1e-12)

    def test_bad_xs(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "g.onnx"), os.path.join(tmp, "l.onnx")
            onnx.save(gradient_op_model("nope"), src)
            r = run_mpc("train-graph", src, "-o", dst)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn("grad_node", r.stderr)
            self.assertIn("'nope'", r.stderr)
            self.assertFalse(os.path.exists(dst))


def dropout_model(path, dropout=None, opset=OPSET, ir=8, training_input=False):
    """x [8, 3] -> MatMul(w) -> [Dropout(h, *dropout)] -> Relu -> y, w and b initializers;
    `dropout`: None (no Dropout), or the extra inputs after h as (name, array or None)
    pairs; `training_input`: training_mode is a graph input. IR < 4: every initializer is
    also a graph input (as exporters of that time wrote)."""
    rng = np.random.default_rng(5)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])
    inits = [numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm")]
    inputs = [x]
    act_in = "h"
    if dropout is not None:
        names = ["h"]
        for name, arr in dropout:
            names.append(name)
            if arr is not None:
                inits.append(numpy_helper.from_array(arr, name))
        if training_input:
            inputs.append(helper.make_tensor_value_info("train", TensorProto.BOOL, []))
            names.append("train")
        nodes.append(helper.make_node("Dropout", names, ["d"], name="drop"))
        act_in = "d"
    nodes.append(helper.make_node("Relu", [act_in], ["y"], name="act"))
    if ir < 4:
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                   for t in inits]
    g = helper.make_graph(nodes, "g", inputs, [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    onnx.save(m, path)


class Dropout(unittest.TestCase):
    """Dropout in inference mode is the identity in the step; training mode is refused."""

    def train_log(self, tmp, src, expect_note):
        dst, log = os.path.join(tmp, "t.onnx"), os.path.join(tmp, "log.csv")
        r = run_mpc("train-graph", src, "--loss", "mse", "--optimizer", "adam", "-o", dst)
        self.assertEqual(r.returncode, 0, r.stderr)
        note = "1 Dropout node(s) (node 'drop' (Dropout)) in inference mode, the identity: " \
               "the training step applies no dropout"
        self.assertEqual(note in r.stderr, expect_note, r.stderr)
        train = onnx.load(dst)
        onnx.checker.check_model(train)
        self.assertGreaterEqual(train.ir_version, 7)
        rng = np.random.default_rng(1)
        data = os.path.join(tmp, "d.npz")
        np.savez(data, x=rng.standard_normal((32, 3)).astype(np.float32),
                 **{tl.metadata(train)["mpc.training.labels"]:
                    rng.standard_normal((32, 4)).astype(np.float32)})
        r = run_mpc("run", dst, "--train", "--data", data, "--batch", "8", "--steps", "6",
                    "--shuffle", "none", "--holdout", "0", "--log", log)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(log) as f:
            return f.read()

    def test_inference_mode_trains_as_without_it(self):
        half = np.array(0.5, np.float32)
        cases = {
            "ratio, no training_mode": [("ratio", half)],
            "no ratio": [],
            "training_mode false": [("ratio", half), ("mode", np.array(False))],
            "training_mode true, ratio 0": [("ratio", np.array(0.0, np.float32)),
                                            ("mode", np.array(True))],
        }
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "plain.onnx")
            dropout_model(src)
            want = self.train_log(tmp, src, expect_note=False)
            for what, extra in cases.items():
                dropout_model(src, extra)
                self.assertEqual(self.train_log(tmp, src, expect_note=True), want, what)

    def test_training_mode_is_refused(self):
        half = np.array(0.5, np.float32)
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "m.onnx")
            for extra, training_input, why in (
                    ([("ratio", half), ("mode", np.array(True))], False, "training_mode = true"),
                    ([("ratio", half)], True, "its training_mode input is not a constant")):
                dropout_model(src, extra, training_input=training_input)
                BadInput.check_error(self, ["--loss", "mse"],
                                     "node 'drop' (Dropout): gradient not supported: Dropout "
                                     f"in training mode ({why}) is random; train-graph "
                                     "differentiates Dropout in inference mode only (the "
                                     "identity): export the model in eval mode", src=src)

    def test_ir_version_3_model(self):
        """Initializers listed as graph inputs (IR < 4): the training model is IR 7 (its
        training_info needs it; its new initializers are no graph inputs) and trains as the
        IR 8 model does."""
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "m.onnx")
            dropout_model(src, opset=13)
            want = self.train_log(tmp, src, expect_note=False)
            dropout_model(src, opset=13, ir=3)
            self.assertEqual(self.train_log(tmp, src, expect_note=False), want)


def main():
    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((BadInput, Dropout, Options, Buffers, BatchNormVariance, PerTokenLoss,
                         GradientOp, DocsList, EndToEnd, ShippedModels, GradientCheck, ShapeInference),
                        set_args)


if __name__ == "__main__":
    sys.exit(main())
