#!/usr/bin/env python3
"""End-to-end tests of `mpc run --train` and `mpc plot` against NumPy oracles.

    python3 tests/trainer/test_trainer.py --mpc build/tools/mpc --source-dir . [-v] [-k PATTERN]

The training models are built here by hand with onnx.helper, following docs/training.md:
softmax regression (cross-entropy written with LogSoftmax, one-hot by Equal, ReduceSum;
gradients with Gemm transA, ReduceSum; SGD), a 2-layer ReLU MLP (MSE, Where for the ReLU
gradient, SGD with momentum, gradients exposed as outputs) and a loss-scaled softmax
regression whose step outputs mpc.training.found_inf. The oracle is a NumPy
reimplementation of the same steps in float32 with the trainer's documented batch order
(splitmix64-seeded std::mt19937_64 driving a Fisher-Yates shuffle, runtime/Trainer.h),
reimplemented below from the published algorithms.

Checked: parameters after N steps (1e-5), per-step loss, loss scale and skipped columns,
skip lines naming the parameter, grad_zero_frac, eval accuracy and MSE; resume bit-exact
(byte-identical checkpoints); checkpoints pass onnx.checker; every bad input exits 1 with
one line and writes nothing; `mpc plot` writes valid, deterministic SVG.

The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when onnx
or numpy is missing.
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None
TIMEOUT_S = 300
MASK64 = (1 << 64) - 1


def mpc(*args, check=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    r = subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env)
    if check is not None and r.returncode != check:
        raise AssertionError(f"mpc {' '.join(map(str, args))}: exit {r.returncode}, "
                             f"expected {check}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


# ---------------------------------------------------------------------------------------
# The batch order, reimplemented: splitmix64 (Steele et al.), MT19937-64 (Matsumoto and
# Nishimura, as std::mt19937_64), Fisher-Yates with rejection sampling.
# ---------------------------------------------------------------------------------------

def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class MT19937_64:
    N, M = 312, 156

    def __init__(self, seed):
        self.mt = [seed & MASK64]
        for i in range(1, self.N):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64)
        self.index = self.N

    def _twist(self):
        upper, lower = 0xFFFFFFFF80000000, 0x7FFFFFFF
        mt = self.mt
        for i in range(self.N):
            x = (mt[i] & upper) | (mt[(i + 1) % self.N] & lower)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + self.M) % self.N] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= self.N:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def _check_mt():
    # C++11 [rand.predef]: the 10000th output of a default-seeded mt19937_64.
    g = MT19937_64(5489)
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042, "MT19937-64 oracle is wrong"


def permutation(seed, epoch, n):
    rng = MT19937_64(splitmix64((splitmix64(seed) + epoch) & MASK64))
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        threshold = (1 << 64) % bound
        r = rng()
        while r < threshold:
            r = rng()
        j = r % bound
        p[i], p[j] = p[j], p[i]
    return p


def batch_rows(seed, step, n_train, batch):
    """Rows of 0-based step `step`; seed None is --shuffle none (the data order)."""
    nb = n_train // batch
    epoch, b = divmod(step, nb)
    order = list(range(n_train)) if seed is None else permutation(seed, epoch, n_train)
    return order[b * batch:(b + 1) * batch], epoch


# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------

F = TensorProto.FLOAT
I64 = TensorProto.INT64
# The algorithm's data input: the inference input's name, as docs/training.md says. A model
# whose algorithm input has another name (test_eval_of_probability_output) is evaluated
# by position.
DATA = "X"


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def make_training_model(main_nodes, main_inputs, main_outputs, inits, alg_nodes, alg_inputs,
                        alg_outputs, alg_inits, bindings, meta):
    g = helper.make_graph(main_nodes, "inference", main_inputs, main_outputs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    alg = helper.make_graph(alg_nodes, "train_step", alg_inputs, alg_outputs, alg_inits)
    ti = onnx.TrainingInfoProto()
    ti.algorithm.CopyFrom(alg)
    for k, v in bindings:
        e = ti.update_binding.add()
        e.key, e.value = k, v
    model.training_info.append(ti)
    for k, v in meta.items():
        p = model.metadata_props.add()
        p.key, p.value = k, v
    return model


def softmax_regression(D, C, lr, seed=0, batch_dim="N", loss_scale=None, probs=False,
                       data=DATA):
    """Gemm logits; cross-entropy; SGD. loss_scale: initial S of a halve-on-overflow scale.
    probs: the inference graph outputs Softmax(logits) instead of the logits."""
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((D, C)) * 0.1).astype(np.float32)
    b = np.zeros(C, np.float32)
    inits = [const("W", W), const("b", b), const("step_count", np.array(0, np.int64))]
    if loss_scale is not None:
        inits.append(const("loss_scale", np.array(loss_scale, np.float32)))
    main = [helper.make_node("Gemm", ["X", "W", "b"], ["logits" if probs else "Y"])]
    if probs:
        main.append(helper.make_node("Softmax", ["logits"], ["Y"], axis=-1))
    n = helper.make_node
    alg_inits = [const("t_lr", np.array(lr, np.float32)),
                 const("t_classes", np.arange(C, dtype=np.int64)),
                 const("t_one", np.array(1, np.int64)),
                 const("t_zero_idx", np.array(0, np.int64)),
                 const("t_axes0", np.array([0], np.int64)),
                 const("t_axes1", np.array([1], np.int64))]
    alg = [
        n("Gemm", [data, "W", "b"], ["t_logits"]),
        n("LogSoftmax", ["t_logits"], ["t_lsm"], axis=1),
        n("Unsqueeze", ["labels", "t_axes1"], ["t_lab2"]),
        n("Equal", ["t_lab2", "t_classes"], ["t_eq"]),
        n("Cast", ["t_eq"], ["t_onehot"], to=F),
        n("Mul", ["t_lsm", "t_onehot"], ["t_picked"]),
        n("ReduceSum", ["t_picked", "t_axes1"], ["t_per"], keepdims=0),
        n("ReduceMean", ["t_per"], ["t_meanll"], keepdims=0),
        n("Neg", ["t_meanll"], ["loss"]),
        n("Softmax", ["t_logits"], ["t_sm"], axis=1),
        n("Sub", ["t_sm", "t_onehot"], ["t_diff"]),
        n("Shape", [data], ["t_shape"]),
        n("Gather", ["t_shape", "t_zero_idx"], ["t_n"]),
        n("Cast", ["t_n"], ["t_nf"], to=F),
        n("Div", ["t_diff", "t_nf"], ["t_dlogits"]),
    ]
    outputs = [helper.make_tensor_value_info("loss", F, [])]
    meta = {"mpc.training.loss": "loss", "mpc.training.labels": "labels",
            "mpc.training.gradients": "W=dW\nb=db", "mpc.training.loss_kind": "cross-entropy",
            "mpc.training.predictions": "Y", "mpc.training.step_counter": "step_count",
            "mpc.training.optimizer": f"sgd lr={lr}"}
    if loss_scale is None:
        alg += [
            n("Gemm", [data, "t_dlogits"], ["dW"], transA=1),
            n("ReduceSum", ["t_dlogits", "t_axes0"], ["db"], keepdims=0),
            n("Mul", ["dW", "t_lr"], ["t_uW"]), n("Sub", ["W", "t_uW"], ["W_new"]),
            n("Mul", ["db", "t_lr"], ["t_ub"]), n("Sub", ["b", "t_ub"], ["b_new"]),
            n("Add", ["step_count", "t_one"], ["step_new"]),
        ]
        outputs += [helper.make_tensor_value_info("W_new", F, [D, C]),
                    helper.make_tensor_value_info("b_new", F, [C]),
                    helper.make_tensor_value_info("step_new", I64, [])]
        bindings = [("W", "W_new"), ("b", "b_new"), ("step_count", "step_new")]
    else:
        alg_inits += [const("t_zero_f", np.array(0, np.float32)),
                      const("t_half", np.array(0.5, np.float32)),
                      const("t_shape1", np.array([1], np.int64))]
        alg += [
            n("Mul", ["t_dlogits", "loss_scale"], ["t_dls"]),
            n("Gemm", [data, "t_dls"], ["t_dWs"], transA=1),
            n("ReduceSum", ["t_dls", "t_axes0"], ["t_dbs"], keepdims=0),
            n("Reciprocal", ["loss_scale"], ["t_rs"]),
            n("Mul", ["t_dWs", "t_rs"], ["dW"]),
            n("Mul", ["t_dbs", "t_rs"], ["db"]),
            n("Mul", ["dW", "t_zero_f"], ["t_zW"]),
            n("ReduceSum", ["t_zW"], ["t_nW0"], keepdims=0),
            n("Reshape", ["t_nW0", "t_shape1"], ["t_nW"]),
            n("Mul", ["db", "t_zero_f"], ["t_zb"]),
            n("ReduceSum", ["t_zb"], ["t_nb0"], keepdims=0),
            n("Reshape", ["t_nb0", "t_shape1"], ["t_nb"]),
            n("Concat", ["t_nW", "t_nb"], ["grad_nonfinite"], axis=0),
            n("ReduceSum", ["grad_nonfinite"], ["t_nfsum"], keepdims=0),
            n("IsNaN", ["t_nfsum"], ["found_inf"]),
            n("Mul", ["dW", "t_lr"], ["t_uW"]), n("Sub", ["W", "t_uW"], ["t_W1"]),
            n("Where", ["found_inf", "W", "t_W1"], ["W_new"]),
            n("Mul", ["db", "t_lr"], ["t_ub"]), n("Sub", ["b", "t_ub"], ["t_b1"]),
            n("Where", ["found_inf", "b", "t_b1"], ["b_new"]),
            n("Add", ["step_count", "t_one"], ["t_step1"]),
            n("Where", ["found_inf", "step_count", "t_step1"], ["step_new"]),
            n("Mul", ["loss_scale", "t_half"], ["t_S1"]),
            n("Where", ["found_inf", "t_S1", "loss_scale"], ["loss_scale_new"]),
        ]
        outputs += [helper.make_tensor_value_info("W_new", F, [D, C]),
                    helper.make_tensor_value_info("b_new", F, [C]),
                    helper.make_tensor_value_info("step_new", I64, []),
                    helper.make_tensor_value_info("loss_scale_new", F, []),
                    helper.make_tensor_value_info("found_inf", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("grad_nonfinite", F, [2])]
        bindings = [("W", "W_new"), ("b", "b_new"), ("step_count", "step_new"),
                    ("loss_scale", "loss_scale_new")]
        meta.update({"mpc.training.loss_scale": f"dynamic init={loss_scale} backoff=0.5",
                     "mpc.training.loss_scale_state": "loss_scale",
                     "mpc.training.found_inf": "found_inf",
                     "mpc.training.grad_nonfinite": "grad_nonfinite"})
    main_in = [helper.make_tensor_value_info("X", F, [batch_dim, D])]
    main_out = [helper.make_tensor_value_info("Y", F, [batch_dim, C])]
    alg_in = [helper.make_tensor_value_info(data, F, [batch_dim, D]),
              helper.make_tensor_value_info("labels", I64, [batch_dim])]
    model = make_training_model(main, main_in, main_out, inits, alg, alg_in, outputs,
                                alg_inits, bindings, meta)
    return model, {"W": W, "b": b}


def embedding_regression():
    """Linear regression plus a row of a 4 x 2 table per sample, gathered by the integer data
    input 'ids' (node 'embed' in the step), SGD on W only: W <- W - lr * X^T (XW + E - T).
    Integer data inputs are not checked like labels, so an id out of range is found by the
    step's Gather. Returns the model, W, the table and lr."""
    n = helper.make_node
    W = np.array([[0.5, -1], [1, 0.25]], np.float32)
    table = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    lr = 0.05
    main = [n("Gather", ["table", "ids"], ["e"], axis=0, name="main_embed"),
            n("MatMul", ["X", "W"], ["h"]), n("Add", ["h", "e"], ["Y"])]
    alg = [n("Gather", ["table", "ids"], ["t_e"], axis=0, name="embed"),
           n("MatMul", ["X", "W"], ["t_h"]), n("Add", ["t_h", "t_e"], ["t_y"]),
           n("Sub", ["t_y", "targets"], ["t_d"]), n("Mul", ["t_d", "t_d"], ["t_sq"]),
           n("ReduceMean", ["t_sq"], ["loss"], keepdims=0),
           n("Transpose", ["X"], ["t_xt"], perm=[1, 0]),
           n("MatMul", ["t_xt", "t_d"], ["t_g"]), n("Mul", ["t_g", "t_lr"], ["t_u"]),
           n("Sub", ["W", "t_u"], ["W_new"])]
    vi = helper.make_tensor_value_info
    model = make_training_model(
        main, [vi("X", F, ["N", 2]), vi("ids", I64, ["N"])], [vi("Y", F, ["N", 2])],
        [const("W", W), const("table", table)], alg,
        [vi("X", F, ["N", 2]), vi("ids", I64, ["N"]), vi("targets", F, ["N", 2])],
        [vi("loss", F, []), vi("W_new", F, [2, 2])], [const("t_lr", np.float32(lr))],
        [("W", "W_new")], {"mpc.training.labels": "targets", "mpc.training.loss_kind": "mse"})
    return model, W, table, lr


def embedding_data(bad=None):
    """16 samples for embedding_regression (ids cycle 0..3; sample `bad` gets id 9) and a
    held-out split of 4 valid ones."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((16, 2)).astype(np.float32)
    T = rng.standard_normal((16, 2)).astype(np.float32)
    ids = (np.arange(16) % 4).astype(np.int64)
    if bad is not None:
        ids[bad] = 9
    return {"X": X, "ids": ids, "targets": T,
            "X_test": X[:4], "ids_test": (np.arange(4) % 4).astype(np.int64),
            "targets_test": T[:4]}


def mlp(D, H, C, lr, mu, seed=0):
    """Gemm-ReLU-Gemm, MSE against float targets, SGD with momentum; gradients exposed."""
    rng = np.random.default_rng(seed)
    params = {"W1": (rng.standard_normal((D, H)) * 0.5).astype(np.float32),
              "b1": (rng.standard_normal(H) * 0.1).astype(np.float32),
              "W2": (rng.standard_normal((H, C)) * 0.5).astype(np.float32),
              "b2": np.zeros(C, np.float32)}
    params["b1"][:3] = -100  # three dead ReLU units: exactly zero gradients
    inits = [const(k, v) for k, v in params.items()]
    inits += [const("v_" + k, np.zeros_like(v)) for k, v in params.items()]
    inits.append(const("step_count", np.array(0, np.int64)))
    main = [helper.make_node("Gemm", ["X", "W1", "b1"], ["Z1"]),
            helper.make_node("Relu", ["Z1"], ["H1"]),
            helper.make_node("Gemm", ["H1", "W2", "b2"], ["Y"])]
    n = helper.make_node
    alg_inits = [const("t_lr", np.array(lr, np.float32)),
                 const("t_mu", np.array(mu, np.float32)),
                 const("t_two", np.array(2, np.float32)),
                 const("t_zero_f", np.array(0, np.float32)),
                 const("t_one", np.array(1, np.int64)),
                 const("t_axes0", np.array([0], np.int64))]
    alg = [
        n("Gemm", [DATA, "W1", "b1"], ["t_Z1"]),
        n("Relu", ["t_Z1"], ["t_H1"]),
        n("Gemm", ["t_H1", "W2", "b2"], ["t_Y"]),
        n("Sub", ["t_Y", "targets"], ["t_diff"]),
        n("Mul", ["t_diff", "t_diff"], ["t_sq"]),
        n("ReduceMean", ["t_sq"], ["loss"], keepdims=0),
        n("Size", ["t_Y"], ["t_cnt"]),
        n("Cast", ["t_cnt"], ["t_cntf"], to=F),
        n("Mul", ["t_diff", "t_two"], ["t_d2"]),
        n("Div", ["t_d2", "t_cntf"], ["t_dY"]),
        n("Gemm", ["t_H1", "t_dY"], ["dW2"], transA=1),
        n("ReduceSum", ["t_dY", "t_axes0"], ["db2"], keepdims=0),
        n("Gemm", ["t_dY", "W2"], ["t_dH"], transB=1),
        n("Greater", ["t_Z1", "t_zero_f"], ["t_mask"]),
        n("Where", ["t_mask", "t_dH", "t_zero_f"], ["t_dZ1"]),
        n("Gemm", [DATA, "t_dZ1"], ["dW1"], transA=1),
        n("ReduceSum", ["t_dZ1", "t_axes0"], ["db1"], keepdims=0),
        n("Add", ["step_count", "t_one"], ["step_new"]),
    ]
    outputs = [helper.make_tensor_value_info("loss", F, [])]
    bindings = []
    shapes = {"W1": [D, H], "b1": [H], "W2": [H, C], "b2": [C]}
    for k in params:
        alg += [n("Mul", ["v_" + k, "t_mu"], [f"t_mv_{k}"]),
                n("Add", [f"t_mv_{k}", "d" + k], [f"v_{k}_new"]),
                n("Mul", [f"v_{k}_new", "t_lr"], [f"t_u_{k}"]),
                n("Sub", [k, f"t_u_{k}"], [f"{k}_new"])]
        outputs += [helper.make_tensor_value_info(f"{k}_new", F, shapes[k]),
                    helper.make_tensor_value_info(f"v_{k}_new", F, shapes[k])]
        bindings += [(k, f"{k}_new"), ("v_" + k, f"v_{k}_new")]
    outputs.append(helper.make_tensor_value_info("step_new", I64, []))
    bindings.append(("step_count", "step_new"))
    outputs += [helper.make_tensor_value_info("d" + k, F, shapes[k]) for k in params]
    meta = {"mpc.training.loss": "loss", "mpc.training.labels": "targets",
            "mpc.training.gradients": "\n".join(f"{k}=d{k}" for k in params),
            "mpc.training.loss_kind": "mse", "mpc.training.predictions": "Y",
            "mpc.training.step_counter": "step_count",
            "mpc.training.optimizer": f"sgd lr={lr} momentum={mu}"}
    model = make_training_model(
        main, [helper.make_tensor_value_info("X", F, ["N", D])],
        [helper.make_tensor_value_info("Y", F, ["N", C])], inits, alg,
        [helper.make_tensor_value_info(DATA, F, ["N", D]),
         helper.make_tensor_value_info("targets", F, ["N", C])],
        outputs, alg_inits, bindings, meta)
    return model, params


# ---------------------------------------------------------------------------------------
# NumPy oracles (float32, the same formulas)
# ---------------------------------------------------------------------------------------

f32 = np.float32


def np_log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    e = z - m
    return e - np.log(np.exp(e).sum(axis=1, keepdims=True))


def np_softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_regression_oracle(params, X, y, lr, C, seed, steps, batch, loss_scale=None):
    W, b = params["W"].copy(), params["b"].copy()
    S = f32(loss_scale) if loss_scale is not None else None
    rows = []
    n_train = X.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(steps):
            idx, epoch = batch_rows(seed, k, n_train, batch)
            xb, yb = X[idx], y[idx]
            logits = xb @ W + b
            onehot = (yb[:, None] == np.arange(C)[None, :]).astype(f32)
            loss = -np.mean((np_log_softmax(logits) * onehot).sum(axis=1))
            dlog = (np_softmax(logits) - onehot) / f32(batch)
            row = {"step": k + 1, "epoch": epoch, "loss": float(loss)}
            if S is None:
                W = W - (xb.T @ dlog) * f32(lr)
                b = b - dlog.sum(axis=0) * f32(lr)
            else:
                dls = (dlog * S).astype(f32)
                rs = f32(1) / S
                dW = (xb.T @ dls) * rs
                db = dls.sum(axis=0) * rs
                bad = [name for name, g in (("W", dW), ("b", db)) if not np.all(np.isfinite(g))]
                row.update(skipped=bool(bad), bad=bad, scale_before=float(S))
                if not bad:
                    W = W - dW * f32(lr)
                    b = b - db * f32(lr)
                else:
                    S = f32(S * f32(0.5))
                row["scale_after"] = float(S)
            rows.append(row)
    return {"W": W, "b": b}, rows


def mlp_oracle(params, X, T, lr, mu, seed, steps, batch):
    p = {k: v.copy() for k, v in params.items()}
    v = {k: np.zeros_like(a) for k, a in params.items()}
    rows = []
    for k in range(steps):
        idx, epoch = batch_rows(seed, k, X.shape[0], batch)
        xb, tb = X[idx], T[idx]
        z1 = xb @ p["W1"] + p["b1"]
        h1 = np.maximum(z1, f32(0))
        yv = h1 @ p["W2"] + p["b2"]
        diff = yv - tb
        loss = np.mean(diff * diff)
        dY = diff * f32(2) / f32(diff.size)
        g = {"W2": h1.T @ dY, "b2": dY.sum(axis=0)}
        dZ1 = np.where(z1 > 0, dY @ p["W2"].T, f32(0))
        g["W1"] = xb.T @ dZ1
        g["b1"] = dZ1.sum(axis=0)
        zeros = sum(int((a == 0).sum()) for a in g.values())
        total = sum(a.size for a in g.values())
        for name in p:
            v[name] = v[name] * f32(mu) + g[name]
            p[name] = p[name] - v[name] * f32(lr)
        rows.append({"step": k + 1, "epoch": epoch, "loss": float(loss),
                     "grad_zero_frac": zeros / total})
    return p, rows


def mlp_predict(p, X):
    return np.maximum(X @ p["W1"] + p["b1"], 0) @ p["W2"] + p["b2"]


# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------

def initializers(path):
    m = onnx.load(path)
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}, m


def read_log(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def listing(d):
    out = []
    for root, dirs, files in os.walk(d):
        out += [os.path.relpath(os.path.join(root, x), d) for x in dirs + files]
    return sorted(out)


class TrainerCase(unittest.TestCase):
    D, C = 6, 4

    @classmethod
    def setUpClass(cls):
        _check_mt()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        rng = np.random.default_rng(42)
        # Softmax regression: 100 samples, the last 20 held out (--holdout 0.2).
        cls.X = rng.standard_normal((100, cls.D)).astype(np.float32)
        true_w = rng.standard_normal((cls.D, cls.C))
        cls.y = np.argmax(cls.X @ true_w, axis=1).astype(np.int64)
        cls.sr_path = os.path.join(cls.dir, "softmax.onnx")
        cls.sr_model, cls.sr_params = softmax_regression(cls.D, cls.C, lr=0.5)
        onnx.save(cls.sr_model, cls.sr_path)
        cls.sr_data = os.path.join(cls.dir, "softmax.npz")
        np.savez(cls.sr_data, **{DATA: cls.X, "labels": cls.y})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def work(self):
        return tempfile.mkdtemp(dir=self.dir)

    def train(self, model, data, *extra, check=0):
        return mpc("run", model, "--train", "--data", data, *extra, check=check)

    def test_permutation_covers_epoch(self):
        p = permutation(7, 3, 50)
        self.assertEqual(sorted(p), list(range(50)))
        self.assertNotEqual(p, permutation(7, 4, 50))

    def test_softmax_regression_matches_numpy(self):
        w = self.work()
        log = os.path.join(w, "log.csv")
        ck = os.path.join(w, "ck")
        steps, batch, seed = 13, 16, 5  # 80 training samples: 5 batches per epoch
        r = self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", steps,
                       "--seed", seed, "--holdout", 0.2, "--log", log, "--checkpoint", ck)
        want, rows = softmax_regression_oracle(self.sr_params, self.X[:80], self.y[:80], 0.5,
                                               self.C, seed, steps, batch)
        got, _ = initializers(os.path.join(ck, "checkpoint.onnx"))
        for k in ("W", "b"):
            np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-5, err_msg=k)
        self.assertEqual(int(got["step_count"]), steps)
        self.assertGreater(np.abs(got["W"] - self.sr_params["W"]).max(), 1e-2)
        log_rows = read_log(log)
        self.assertEqual(len(log_rows), steps)
        for lr, orow in zip(log_rows, rows):
            self.assertEqual(int(lr["step"]), orow["step"])
            self.assertEqual(int(lr["epoch"]), orow["epoch"])
            self.assertAlmostEqual(float(lr["loss"]), orow["loss"], delta=1e-5)
            self.assertEqual(lr["skipped"], "0")
            self.assertEqual(lr["loss_scale"], "")
        # Evaluation on the last 20 samples with the trained parameters.
        pred = np.argmax(self.X[80:] @ want["W"] + want["b"], axis=1)
        acc = float(np.mean(pred == self.y[80:]))
        logits = self.X[80:] @ want["W"] + want["b"]
        ce = float(-np.mean(np_log_softmax(logits)[np.arange(20), self.y[80:]]))
        self.assertAlmostEqual(float(log_rows[-1]["eval_accuracy"]), acc, delta=1e-6)
        self.assertAlmostEqual(float(log_rows[-1]["eval_loss"]), ce, delta=1e-4)
        self.assertIn(f"final: step {steps} loss", r.stdout)
        self.assertIn(f"eval_accuracy {acc:.4f}", r.stdout)
        self.assertIn("skipped 0", r.stdout)

    def test_every_evaluation_reads_the_current_state(self):
        # Evaluation reads the state in place from the trainer's buffers, whose
        # halves swap every step: each evaluated row must see the parameters
        # of its own step, and no state is copied out for it (only a
        # checkpoint copies).
        w = self.work()
        log = os.path.join(w, "log.csv")
        steps, batch, seed = 13, 16, 5
        r = self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", steps,
                       "--seed", seed, "--holdout", 0.2, "--eval-every", 3, "--log", log,
                       "--stats")
        rows = read_log(log)
        evaluated = [int(x["step"]) for x in rows if x["eval_loss"]]
        self.assertEqual(evaluated, [3, 6, 9, 12, 13])
        for k in evaluated:
            want, _ = softmax_regression_oracle(self.sr_params, self.X[:80], self.y[:80], 0.5,
                                                self.C, seed, k, batch)
            logits = self.X[80:] @ want["W"] + want["b"]
            ce = float(-np.mean(np_log_softmax(logits)[np.arange(20), self.y[80:]]))
            acc = float(np.mean(np.argmax(logits, axis=1) == self.y[80:]))
            self.assertAlmostEqual(float(rows[k - 1]["eval_loss"]), ce, delta=1e-4, msg=k)
            self.assertAlmostEqual(float(rows[k - 1]["eval_accuracy"]), acc, delta=1e-6, msg=k)
        stats = next(l for l in r.stderr.splitlines() if l.startswith("stats:"))
        self.assertRegex(stats, r"outside steps: \d+ bytes uploaded, 0 bytes copied out")
        # The step's plan and everything the backend held: the backend's peak covers the
        # plan's arena and the plan's persistent buffers.
        mem = next(l for l in r.stderr.splitlines() if l.startswith("memory:"))
        unit = {"B": 1, "KiB": 1024, "MiB": 1 << 20}
        got = {k: float(v) * unit[u] for k, v, u in re.findall(
            r"(step plan peak|persistent|backend peak) ([0-9.]+) (B|KiB|MiB)", mem)}
        self.assertEqual(len(got), 3, mem)
        self.assertGreater(got["step plan peak"], 0, mem)
        self.assertGreaterEqual(got["backend peak"],
                                got["step plan peak"] + got["persistent"], mem)
        # An inference graph in dynamic mode (a NonZero output) cannot bind: it
        # evaluates a synced copy of the state, with the same results.
        m = onnx.load(self.sr_path)
        m.graph.node.append(helper.make_node("NonZero", ["X"], ["nz"]))
        m.graph.output.append(helper.make_tensor_value_info("nz", TensorProto.INT64, None))
        dyn, dlog = os.path.join(w, "dynamic.onnx"), os.path.join(w, "dynamic.csv")
        onnx.save(m, dyn)
        r = self.train(dyn, self.sr_data, "--batch", batch, "--steps", steps, "--seed", seed,
                       "--holdout", 0.2, "--eval-every", 3, "--log", dlog, "--stats")
        self.assertEqual(read_log(dlog), rows)
        stats = next(l for l in r.stderr.splitlines() if l.startswith("stats:"))
        self.assertRegex(stats, r"outside steps: \d+ bytes uploaded, [1-9]\d* bytes copied out")
        ck = os.path.join(w, "ck")
        r = self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", 2,
                       "--holdout", 0.2, "--checkpoint", ck, "--stats")
        stats = next(l for l in r.stderr.splitlines() if l.startswith("stats:"))
        self.assertRegex(stats, r"outside steps: \d+ bytes uploaded, [1-9]\d* bytes copied out")

    def test_mlp_momentum_matches_numpy(self):
        w = self.work()
        rng = np.random.default_rng(3)
        D, H, C = 5, 8, 3
        X = rng.standard_normal((64, D)).astype(np.float32)
        T = np.tanh(X @ rng.standard_normal((D, C))).astype(np.float32)
        Xt = rng.standard_normal((10, D)).astype(np.float32)
        Tt = np.tanh(Xt @ rng.standard_normal((D, C))).astype(np.float32)
        model, params = mlp(D, H, C, lr=0.1, mu=0.9)
        path = os.path.join(w, "mlp.onnx")
        onnx.save(model, path)
        data = os.path.join(w, "mlp.npz")
        np.savez(data, **{DATA: X, "targets": T, DATA + "_test": Xt, "targets_test": Tt})
        log = os.path.join(w, "log.csv")
        ck = os.path.join(w, "ck")
        # 64 samples, batch 10: 6 batches per epoch, 4 left out each epoch; 3 epochs.
        r = self.train(path, data, "--batch", 10, "--epochs", 3, "--seed", 11, "--log", log,
                       "--checkpoint", ck, "--eval-every", 6)
        want, rows = mlp_oracle(params, X, T, 0.1, 0.9, 11, 18, 10)
        got, _ = initializers(os.path.join(ck, "checkpoint.onnx"))
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-5, err_msg=k)
        log_rows = read_log(log)
        self.assertEqual(len(log_rows), 18)
        self.assertTrue(any(o["grad_zero_frac"] > 0 for o in rows))
        for lr, orow in zip(log_rows, rows):
            self.assertAlmostEqual(float(lr["loss"]), orow["loss"], delta=1e-5)
            self.assertAlmostEqual(float(lr["grad_zero_frac"]), orow["grad_zero_frac"],
                                   delta=1e-9)
        evaluated = [int(x["step"]) for x in log_rows if x["eval_loss"]]
        self.assertEqual(evaluated, [6, 12, 18])
        mse = float(np.mean((mlp_predict(want, Xt) - Tt) ** 2))
        self.assertAlmostEqual(float(log_rows[-1]["eval_loss"]), mse, delta=1e-5)
        self.assertEqual(log_rows[-1]["eval_accuracy"], "")
        self.assertIn("final: step 18", r.stdout)
        self.assertIn("eval_mse", r.stdout)

    def test_resume_is_bit_exact(self):
        w = self.work()
        args = ["--batch", 16, "--seed", 3, "--holdout", 0.2]
        straight, first, resumed = (os.path.join(w, d) for d in ("a", "b", "c"))
        log_a, log_c = os.path.join(w, "a.csv"), os.path.join(w, "c.csv")
        self.train(self.sr_path, self.sr_data, *args, "--steps", 12, "--checkpoint", straight,
                   "--log", log_a)
        self.train(self.sr_path, self.sr_data, *args, "--steps", 7, "--checkpoint", first)
        # --steps counts from the start: the resumed run does steps 8 to 12.
        self.train(self.sr_path, self.sr_data, *args, "--steps", 12, "--resume", first,
                   "--checkpoint", resumed, "--log", log_c)
        with open(os.path.join(straight, "checkpoint.onnx"), "rb") as f:
            a = f.read()
        with open(os.path.join(resumed, "checkpoint.onnx"), "rb") as f:
            c = f.read()
        self.assertEqual(a, c, "straight and resumed checkpoints differ")
        # Resuming from the .onnx file itself works too, and the log continues the steps.
        d = os.path.join(w, "d")
        self.train(self.sr_path, self.sr_data, *args, "--steps", 12, "--resume",
                   os.path.join(first, "checkpoint.onnx"), "--checkpoint", d)
        with open(os.path.join(d, "checkpoint.onnx"), "rb") as f:
            self.assertEqual(a, f.read())
        rows_a, rows_c = read_log(log_a), read_log(log_c)
        self.assertEqual([r["step"] for r in rows_c], [str(s) for s in range(8, 13)])
        for ra, rc in zip(rows_a[7:], rows_c):
            self.assertEqual(ra["loss"], rc["loss"])
        # The same run twice: the same bytes.
        e = os.path.join(w, "e")
        self.train(self.sr_path, self.sr_data, *args, "--steps", 12, "--checkpoint", e)
        with open(os.path.join(e, "checkpoint.onnx"), "rb") as f:
            self.assertEqual(a, f.read())

    def test_time_line_gives_the_steady_steps_by_wall_time(self):
        # After the first 4 steps (warm-up: on a device, eager runs and CUDA-graph
        # captures), the time line adds their wall-time rate, numbered from the
        # start of training; a run of 4 steps or fewer has none.
        args = ["--batch", 16, "--seed", 3, "--holdout", 0.2]
        steady = re.compile(r"; steps (\d+)-(\d+): ([0-9.]+) ms per step \(([0-9.]+) steps/s\) "
                            r"by wall time, the device's work included$", re.M)
        r = self.train(self.sr_path, self.sr_data, *args, "--steps", 9)
        m = steady.search(r.stderr)
        self.assertIsNotNone(m, r.stderr)
        self.assertEqual((m.group(1), m.group(2)), ("5", "9"))
        ms, rate = float(m.group(3)), float(m.group(4))
        self.assertGreater(ms, 0)
        # Both printed rounded: ms to 4 decimals, the rate to 1.
        self.assertAlmostEqual(rate, 1000 / ms, delta=0.051 + rate * 0.0001 / ms)
        self.assertIn("time: 9 step(s), median", r.stderr)
        r4 = self.train(self.sr_path, self.sr_data, *args, "--steps", 4)
        self.assertIn("time: 4 step(s), median", r4.stderr)
        self.assertIsNone(steady.search(r4.stderr), r4.stderr)
        # --profile: the step's node time by op type over the same steps.
        rp = self.train(self.sr_path, self.sr_data, *args, "--steps", 9, "--profile")
        nodes = re.search(r"^profile: (\d+) node\(s\) per step;", rp.stderr, re.M)
        by = re.search(r"^profile: node time by op type per step \(steps 5-9\): ([0-9.]+) ms "
                       r"in (\d+) node\(s\)$", rp.stderr, re.M)
        self.assertIsNotNone(nodes, rp.stderr)
        self.assertIsNotNone(by, rp.stderr)
        self.assertEqual(by.group(2), nodes.group(1))
        algo = {n.op_type for n in onnx.load(self.sr_path).training_info[0].algorithm.node}
        rows = re.findall(r"^ +([0-9.]+) ms +([0-9.]+)%  (\S+) x(\d+)$",
                          rp.stderr[by.end():], re.M)
        self.assertTrue(rows, rp.stderr)
        self.assertLessEqual({r_[2] for r_ in rows}, algo)
        self.assertLessEqual(sum(int(r_[3]) for r_ in rows), int(nodes.group(1)))
        self.assertEqual([float(r_[0]) for r_ in rows],
                         sorted((float(r_[0]) for r_ in rows), reverse=True))
        # Resumed at step 4 up to 12: steps 5-8 are that run's warm-up.
        w = self.work()
        first = os.path.join(w, "a")
        self.train(self.sr_path, self.sr_data, *args, "--steps", 4, "--checkpoint", first)
        r2 = self.train(self.sr_path, self.sr_data, *args, "--steps", 12, "--resume", first)
        m2 = steady.search(r2.stderr)
        self.assertIsNotNone(m2, r2.stderr)
        self.assertEqual((m2.group(1), m2.group(2)), ("9", "12"))

    def test_shuffle_none_and_seeded(self):
        """--shuffle none visits the data in order every epoch (numpy oracle over 13 steps,
        3 epochs of 5 batches), is kept by checkpoints and resumes; --shuffle seeded is the
        default, byte for byte, and its order is the permutation() above."""
        w = self.work()
        steps, batch = 13, 16
        ck = {k: os.path.join(w, k) for k in ("none", "seeded", "default", "first", "resumed")}
        self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", steps, "--shuffle",
                   "none", "--holdout", 0.2, "--checkpoint", ck["none"], check=0)
        want, _ = softmax_regression_oracle(self.sr_params, self.X[:80], self.y[:80], 0.5,
                                            self.C, None, steps, batch)
        got, m = initializers(os.path.join(ck["none"], "checkpoint.onnx"))
        for k in ("W", "b"):
            np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-5, err_msg=k)
        seeded, _ = softmax_regression_oracle(self.sr_params, self.X[:80], self.y[:80], 0.5,
                                              self.C, 0, steps, batch)
        self.assertGreater(np.abs(seeded["W"] - want["W"]).max(), 1e-3, "order made no change")
        meta = {p.key: p.value for p in m.metadata_props}
        self.assertEqual(meta.get("mpc.trainer.shuffle"), "none")
        # Resumed without --shuffle: the checkpoint's order, bit for bit.
        self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", 7, "--shuffle",
                   "none", "--holdout", 0.2, "--checkpoint", ck["first"], check=0)
        self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", steps, "--holdout",
                   0.2, "--resume", ck["first"], "--checkpoint", ck["resumed"], check=0)
        read = lambda k: open(os.path.join(ck[k], "checkpoint.onnx"), "rb").read()
        self.assertEqual(read("none"), read("resumed"))
        # A resumed run cannot change the order.
        r = self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", steps,
                       "--holdout", 0.2, "--shuffle", "seeded", "--resume", ck["first"],
                       "--checkpoint", os.path.join(w, "x"), check=1)
        self.assertEqual(r.stderr.strip().splitlines(), [
            "mpc: error: --shuffle seeded: the checkpoint was trained with --shuffle none (a "
            "resumed run keeps it)"])
        self.assertFalse(os.path.exists(os.path.join(w, "x")))
        # seeded is the default, and what the numpy permutation reproduces.
        self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", steps, "--shuffle",
                   "seeded", "--holdout", 0.2, "--checkpoint", ck["seeded"], check=0)
        self.train(self.sr_path, self.sr_data, "--batch", batch, "--steps", steps, "--holdout",
                   0.2, "--checkpoint", ck["default"], check=0)
        self.assertEqual(read("seeded"), read("default"))
        got, m = initializers(os.path.join(ck["seeded"], "checkpoint.onnx"))
        self.assertNotIn("mpc.trainer.shuffle", {p.key for p in m.metadata_props})
        np.testing.assert_allclose(got["W"], seeded["W"], rtol=0, atol=1e-5)

    def test_shuffle_usage_errors(self):
        for extra, msg in ((["--shuffle", "random"], "--shuffle must be none or seeded, not "
                            "'random'"),
                           (["--shuffle", "none", "--seed", 3],
                            "--seed has no effect with --shuffle none")):
            r = self.train(self.sr_path, self.sr_data, "--batch", 8, "--steps", 1, *extra,
                           check=2)
            self.assertIn(msg, r.stderr)

    def test_eval_of_probability_output(self):
        w = self.work()
        # The algorithm's data input is "X_batch": the inference input "X" reads it by
        # position.
        model, params = softmax_regression(self.D, self.C, lr=0.5, probs=True, data="X_batch")
        path = os.path.join(w, "probs.onnx")
        onnx.save(model, path)
        data = os.path.join(w, "d.npz")
        np.savez(data, X_batch=self.X, labels=self.y)
        log = os.path.join(w, "log.csv")
        self.train(path, data, "--batch", 10, "--steps", 6, "--holdout", 0.3, "--log", log)
        want, _ = softmax_regression_oracle(params, self.X[:70], self.y[:70], 0.5, self.C, 0,
                                            6, 10)
        logits = self.X[70:] @ want["W"] + want["b"]
        ce = float(-np.mean(np_log_softmax(logits)[np.arange(30), self.y[70:]]))
        acc = float(np.mean(np.argmax(logits, axis=1) == self.y[70:]))
        last = read_log(log)[-1]
        self.assertAlmostEqual(float(last["eval_loss"]), ce, delta=1e-4)
        self.assertAlmostEqual(float(last["eval_accuracy"]), acc, delta=1e-6)

    def test_checkpoint_is_valid_onnx(self):
        w = self.work()
        ck = os.path.join(w, "ck")
        self.train(self.sr_path, self.sr_data, "--batch", 8, "--steps", 4, "--checkpoint", ck,
                   "--seed", 9)
        path = os.path.join(ck, "checkpoint.onnx")
        m = onnx.load(path)
        onnx.checker.check_model(m)
        meta = {p.key: p.value for p in m.metadata_props}
        self.assertEqual(meta["mpc.trainer.step"], "4")
        self.assertEqual(meta["mpc.trainer.seed"], "9")
        self.assertEqual(meta["mpc.trainer.epoch"], "0")
        self.assertRegex(meta["mpc.trainer.model_hash"], r"^[0-9a-f]{16}$")
        self.assertEqual(meta["mpc.training.labels"], "labels")
        self.assertEqual(len(m.training_info), 1)
        self.assertEqual(len(m.training_info[0].update_binding), 3)
        self.assertEqual(sorted(os.listdir(ck)), ["checkpoint.onnx"])
        # The inference graph of the checkpoint runs with the trained parameters.
        got, _ = initializers(path)
        want, _ = softmax_regression_oracle(self.sr_params, self.X[:90], self.y[:90], 0.5,
                                            self.C, 9, 4, 8)
        np.testing.assert_allclose(got["W"], want["W"], atol=1e-5)

    def overflowing_model(self):
        """Softmax regression with a loss scale of 2^127: some steps overflow."""
        w = self.work()
        rng = np.random.default_rng(8)
        X = (rng.standard_normal((48, self.D)) * 6).astype(np.float32)
        y = rng.integers(0, self.C, 48).astype(np.int64)
        S0 = 2.0 ** 127
        model, params = softmax_regression(self.D, self.C, lr=0.1, seed=1, loss_scale=S0)
        path = os.path.join(w, "scaled.onnx")
        onnx.save(model, path)
        data = os.path.join(w, "d.npz")
        np.savez(data, **{DATA: X, "labels": y})
        return w, X, y, S0, params, path, data

    def test_found_inf_skips_steps(self):
        w, X, y, S0, params, path, data = self.overflowing_model()
        log = os.path.join(w, "log.csv")
        ck = os.path.join(w, "ck")
        steps = 9
        r = self.train(path, data, "--batch", 8, "--steps", steps, "--holdout", 0,
                       "--log", log, "--checkpoint", ck)
        want, rows = softmax_regression_oracle(params, X, y, 0.1, self.C, 0, steps, 8,
                                               loss_scale=S0)
        n_skipped = sum(o["skipped"] for o in rows)
        self.assertGreater(n_skipped, 0)
        self.assertLess(n_skipped, steps)
        log_rows = read_log(log)
        for lr, o in zip(log_rows, rows):
            self.assertEqual(lr["skipped"], "1" if o["skipped"] else "0", f"step {o['step']}")
            self.assertEqual(np.float32(float(lr["loss_scale"])), np.float32(o["scale_after"]))
        lines = [l for l in r.stderr.splitlines() if "skipped:" in l]
        expect = [f"step {o['step']} skipped: non-finite gradient of {', '.join(o['bad'])}; "
                  f"loss scale {o['scale_before']:g} -> {o['scale_after']:g}"
                  for o in rows if o["skipped"]]
        self.assertEqual(lines, expect)
        self.assertTrue(all(o["bad"] == ["W"] for o in rows if o["skipped"]))
        got, _ = initializers(os.path.join(ck, "checkpoint.onnx"))
        for k in ("W", "b"):
            np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-5, err_msg=k)
        self.assertEqual(int(got["step_count"]), steps - n_skipped)
        self.assertIn(f"skipped {n_skipped}", r.stdout)
        self.assertIn("eval_accuracy -", r.stdout)

    def test_skipped_step_keeps_state_bytes(self):
        # The step the oracle skips (found_inf) leaves every state tensor
        # bit-identical, except the loss scale, which it halves; checkpoints
        # before and after that one step are compared byte for byte.
        w, X, y, S0, params, path, data = self.overflowing_model()
        _, rows = softmax_regression_oracle(params, X, y, 0.1, self.C, 0, 9, 8, loss_scale=S0)
        k = next(o["step"] for o in rows if o["skipped"] and o["step"] > 1)
        a, b = os.path.join(w, "a"), os.path.join(w, "b")
        self.train(path, data, "--batch", 8, "--steps", k - 1, "--holdout", 0,
                   "--checkpoint", a)
        r = self.train(path, data, "--batch", 8, "--steps", k, "--holdout", 0,
                       "--resume", a, "--checkpoint", b, "--stats")
        self.assertIn(f"step {k} skipped", r.stderr)
        before = onnx.load(os.path.join(a, "checkpoint.onnx")).graph.initializer
        after = {i.name: i for i in onnx.load(os.path.join(b, "checkpoint.onnx")).graph.initializer}
        self.assertEqual(sorted(i.name for i in before), sorted(after))
        for init in before:
            old, new = numpy_helper.to_array(init), numpy_helper.to_array(after[init.name])
            if init.name == "loss_scale":
                self.assertEqual(float(new), float(old) / 2)
            else:
                self.assertEqual(old.tobytes(), new.tobytes(), init.name)
        # The state stayed in backend buffers: per step only the batch went in
        # (8 rows of D float32 features and int64 labels), nothing came out
        # but the logged values.
        stats = [l for l in r.stderr.splitlines() if l.startswith("stats:")]
        self.assertEqual(len(stats), 1, r.stderr)
        self.assertIn("state in backend buffers", stats[0])
        self.assertIn(f"per step: {8 * self.D * 4 + 8 * 8} bytes host->backend, "
                      "0 bytes backend->host, 0 bytes of state copied", stats[0])

    def test_copying_path_matches_device_state(self):
        # A step in dynamic mode copies the state around each step instead of
        # binding buffers; MPC_TRAIN_HOST_STATE forces that path here. With
        # device-resident state, the step writes W, b and the step count over
        # their old values (the guarded updates' Where reads each old value
        # last); MPC_TRAIN_DOUBLE_BUFFER gives every updated state a second
        # buffer instead. All three give the same log and checkpoint bytes,
        # skipped steps included.
        w, X, y, S0, params, path, data = self.overflowing_model()
        got = {}
        for mode, env in (("device", {}), ("host", {"MPC_TRAIN_HOST_STATE": "1"}),
                          ("double", {"MPC_TRAIN_DOUBLE_BUFFER": "1"})):
            ck, log = os.path.join(w, mode), os.path.join(w, mode + ".csv")
            r = subprocess.run([MPC, "run", path, "--train", "--data", data, "--batch",
                                "8", "--steps", "9", "--holdout", "0", "--log", log,
                                "--checkpoint", ck, "--stats"], capture_output=True, text=True,
                               env=dict(os.environ, **env))
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(ck, "checkpoint.onnx"), "rb") as f, open(log) as g:
                got[mode] = (f.read(), g.read())
            stats = next(l for l in r.stderr.splitlines() if l.startswith("stats:"))
            state = self.D * self.C * 4 + self.C * 4  # W and b, each read and written
            if mode == "host":
                self.assertIn("state copied around each step", stats)
                self.assertRegex(stats, rf"per step: \d+ bytes host->backend, \d+ bytes "
                                 rf"backend->host, \d+ bytes of state copied")
                copied = int(stats.split(" bytes of state copied")[0].split()[-1])
                self.assertGreaterEqual(copied, 2 * state)
            else:
                # W [D, C] and b [C] float32, the int64 step count: in place
                # unless forced apart; the loss scale (logged before and after
                # the step) always has its second buffer.
                moved = 3 if mode == "device" else 0
                inplace = state + 8 if mode == "device" else 0
                self.assertIn(f"state in backend buffers (4 tensor(s), {state + 12} B; "
                              f"{moved} updated in place, {inplace} B; {4 - moved} "
                              f"double-buffered, {state + 12 - inplace} B)", stats)
        self.assertIn("skipped", got["device"][1])
        self.assertEqual(got["device"], got["host"])
        self.assertEqual(got["device"], got["double"])

    def test_bad_inputs(self):
        w = self.work()
        n = lambda name: os.path.join(w, name)
        rng = np.random.default_rng(1)
        X, y = self.X, self.y
        np.savez(n("nolabels.npz"), **{DATA: X})
        np.savez(n("f64.npz"), **{DATA: X.astype(np.float64), "labels": y})
        np.savez(n("wide.npz"), **{DATA: np.zeros((100, self.D + 1), np.float32), "labels": y})
        np.savez(n("count.npz"), **{DATA: X, "labels": y[:90]})
        np.savez(n("halftest.npz"), **{DATA: X, "labels": y, DATA + "_test": X[:5]})
        np.savez(n("tiny.npz"), **{DATA: X[:5], "labels": y[:5]})
        fixed, _ = softmax_regression(self.D, self.C, 0.5, batch_dim=16)
        onnx.save(fixed, n("fixed.onnx"))
        other, _ = softmax_regression(self.D, self.C, 0.25)
        onnx.save(other, n("other.onnx"))
        inference = onnx.load(self.sr_path)
        del inference.training_info[:]
        onnx.save(inference, n("inference.onnx"))
        # A checkpoint of the model with another learning rate.
        self.train(n("other.onnx"), self.sr_data, "--batch", 8, "--steps", 2,
                   "--checkpoint", n("otherck"))
        self.train(self.sr_path, self.sr_data, "--batch", 8, "--steps", 2, "--checkpoint",
                   n("ck2"))
        self.train(self.sr_path, self.sr_data, "--batch", 4, "--steps", 2, "--checkpoint",
                   n("ck2b4"))
        out = n("out")
        os.mkdir(out)
        outs = ["--checkpoint", os.path.join(out, "ck"), "--log", os.path.join(out, "l.csv"),
                "--plot", os.path.join(out, "p.svg")]
        cases = {
            "missing array": (self.sr_path, n("nolabels.npz"), [], "labels"),
            "wrong dtype": (self.sr_path, n("f64.npz"), [], f"'{DATA}'"),
            "wrong trailing shape": (self.sr_path, n("wide.npz"), [], f"'{DATA}'"),
            "sample counts": (self.sr_path, n("count.npz"), [], "'labels'"),
            "missing _test": (self.sr_path, n("halftest.npz"), [], "labels_test"),
            "too few samples": (self.sr_path, n("tiny.npz"), [], "batch"),
            "fixed batch": (n("fixed.onnx"), self.sr_data, [], "16"),
            "other model": (self.sr_path, self.sr_data, ["--resume", n("otherck")],
                            "different model"),
            "no checkpoint": (self.sr_path, self.sr_data, ["--resume", n("nothing")],
                              "checkpoint"),
            "resume past the end": (self.sr_path, self.sr_data,
                                    ["--resume", n("ck2"), "--steps", 2], "step 2"),
            "resume other batch": (self.sr_path, self.sr_data, ["--resume", n("ck2b4")],
                                   "--batch 4"),
            "resume other seed": (self.sr_path, self.sr_data,
                                  ["--resume", n("ck2"), "--seed", 5], "seed 0"),
            "not training": (n("inference.onnx"), self.sr_data, [], "training"),
            "no data file": (self.sr_path, n("absent.npz"), [], "absent.npz"),
            "no model": (n("absent.onnx"), self.sr_data, [], "absent.onnx"),
            "log folder": (self.sr_path, self.sr_data,
                           ["--log", os.path.join(w, "nodir", "l.csv")], "nodir"),
        }
        for name, (model, data, extra, needle) in cases.items():
            with self.subTest(case=name):
                r = self.train(model, data, "--batch", 8, "--steps", 3, *outs, *extra, check=None)
                self.assertEqual(r.returncode, 1, r.stderr)
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("mpc: error: "), lines[0])
                self.assertIn(needle, lines[0])
                self.assertEqual(r.stdout, "")
                self.assertEqual(listing(out), [])
        usage = {"steps and epochs": ["--batch", 8, "--steps", 2, "--epochs", 1],
                 "no batch": ["--steps", 2], "bad holdout": ["--batch", 8, "--holdout", 1]}
        for name, extra in usage.items():
            with self.subTest(case=name):
                r = mpc("run", self.sr_path, "--train", "--data", self.sr_data, *extra, *outs)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1)
                self.assertEqual(listing(out), [])

    def test_bad_data_values(self):
        # Every value is checked before the first step: one line naming the file, the array,
        # the element and its value; no progress printed, nothing written.
        w = self.work()
        n = lambda name: os.path.join(w, name)
        X, y = self.X, self.y
        neg, big, big_test = y.copy(), y.copy(), y[:20].copy()
        neg[5] = -1
        big[7] = self.C  # the model has classes 0 .. C-1
        big_test[3] = 99
        nan_x, inf_test = X.copy(), X[:20].copy()
        nan_x[2, 1] = np.nan
        inf_test[4, 0] = -np.inf
        np.savez(n("neg.npz"), **{DATA: X, "labels": neg})
        np.savez(n("big.npz"), **{DATA: X, "labels": big})
        np.savez(n("bigtest.npz"), **{DATA: X, "labels": y, DATA + "_test": X[:20],
                                      "labels_test": big_test})
        np.savez(n("nan.npz"), **{DATA: nan_x, "labels": y})
        np.savez(n("inftest.npz"), **{DATA: X, "labels": y, DATA + "_test": inf_test,
                                      "labels_test": y[:20]})
        # A bad label in the held-out tail (--holdout) is found too.
        tail = y.copy()
        tail[95] = -3
        np.savez(n("tail.npz"), **{DATA: X, "labels": tail})
        cases = {
            "negative label": ("neg.npz", ["'labels' at [5]", "label -1", "4 classes"]),
            "label = classes": ("big.npz", ["'labels' at [7]", "label 4", "0 to 3", "'Y'"]),
            "held-out label": ("bigtest.npz", ["'labels_test' at [3]", "label 99"]),
            "held-out tail label": ("tail.npz", ["'labels' at [95]", "label -3"]),
            "NaN feature": ("nan.npz", [f"'{DATA}' at [2, 1]", "value nan is not finite"]),
            "held-out inf": ("inftest.npz", [f"'{DATA}_test' at [4, 0]", "value -inf"]),
        }
        out = n("out")
        os.mkdir(out)
        for name, (data, needles) in cases.items():
            with self.subTest(case=name):
                r = self.train(self.sr_path, n(data), "--batch", 8, "--steps", 3, "--holdout",
                               0.2, "--checkpoint", os.path.join(out, "ck"), "--log",
                               os.path.join(out, "l.csv"), check=None)
                self.assertEqual(r.returncode, 1, r.stderr)
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("mpc: error: " + n(data) + ": "), lines[0])
                for needle in needles:
                    self.assertIn(needle, lines[0])
                self.assertEqual(r.stdout, "")
                self.assertEqual(listing(out), [])

    def test_plot(self):
        w = self.work()
        logs = []
        for seed in (1, 2):
            log = os.path.join(w, f"run{seed}.csv")
            self.train(self.sr_path, self.sr_data, "--batch", 8, "--steps", 20, "--seed", seed,
                       "--eval-every", 5, "--log", log)
            logs.append(log)
        svg1, svg2 = os.path.join(w, "a.svg"), os.path.join(w, "b.svg")
        mpc("plot", *logs, "--label", "seed one", "--label", "seed <2>", "-o", svg1, check=0)
        mpc("plot", *logs, "--label", "seed one", "--label", "seed <2>", "-o", svg2, check=0)
        with open(svg1, "rb") as f1, open(svg2, "rb") as f2:
            b1 = f1.read()
            self.assertEqual(b1, f2.read())
        ns = "{http://www.w3.org/2000/svg}"
        root = ET.fromstring(b1)
        self.assertEqual(root.tag, ns + "svg")
        lines = root.findall(f".//{ns}polyline")
        self.assertEqual(len(lines), 2)
        self.assertEqual(len(lines[0].get("points").split()), 20)
        texts = [t.text for t in root.iter(ns + "text")]
        self.assertIn("seed one", texts)
        self.assertIn("seed <2>", texts)
        self.assertIn("step", texts)
        # Points lie inside the plot area and follow the losses in order.
        for poly, log in zip(lines, logs):
            pts = [tuple(map(float, p.split(","))) for p in poly.get("points").split()]
            xs = [p[0] for p in pts]
            self.assertEqual(xs, sorted(xs))
            losses = [float(r["loss"]) for r in read_log(log)]
            ys = [p[1] for p in pts]
            # SVG y grows downwards: the highest loss has the smallest y.
            self.assertEqual(int(np.argmin(ys)), int(np.argmax(losses)))
        # --log-y, another column, and the training run's own --plot.
        svg3 = os.path.join(w, "c.svg")
        mpc("plot", logs[0], "--column", "eval_accuracy", "--log-y", "-o", svg3, check=0)
        root = ET.parse(svg3).getroot()
        self.assertEqual(len(root.findall(f".//{ns}polyline")), 1)
        svg4 = os.path.join(w, "train.svg")
        self.train(self.sr_path, self.sr_data, "--batch", 8, "--steps", 20, "--eval-every", 5,
                   "--plot", svg4)
        root = ET.parse(svg4).getroot()
        self.assertEqual(len(root.findall(f".//{ns}g")), 2)  # loss and accuracy panels
        # Bad input: one line, exit 1, nothing written; bad usage: exit 2.
        bad = os.path.join(w, "bad.svg")
        r = mpc("plot", logs[0], "--column", "nope", "-o", bad)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        self.assertIn("nope", r.stderr)
        r = mpc("plot", os.path.join(w, "absent.csv"), "-o", bad)
        self.assertEqual(r.returncode, 1)
        self.assertFalse(os.path.exists(bad))
        self.assertEqual(mpc("plot", logs[0]).returncode, 2)

    def test_kernel_error_inside_a_step(self):
        """An embedding id out of range in the training data (integer data inputs are not
        checked like labels): the step's Gather finds it. One line naming the step, the node
        and the CPU's message, exit 1; the log and the checkpoint stop at the step before,
        whose state is the numpy oracle's; with valid ids the same run trains on."""
        w = self.work()
        model, W, table, lr = embedding_regression()
        path = os.path.join(w, "embed.onnx")
        onnx.save(model, path)
        arrays = embedding_data(bad=None)
        X, ids, T = arrays["X"], arrays["ids"], arrays["targets"]
        good, bad = os.path.join(w, "good.npz"), os.path.join(w, "bad.npz")
        np.savez(good, **arrays)
        np.savez(bad, **embedding_data(bad=5))  # batch 3 of 2 samples, in data order

        def run(data, sub):
            log, ck = os.path.join(w, sub + ".csv"), os.path.join(w, sub)
            r = self.train(path, data, "--batch", 2, "--steps", 6, "--shuffle", "none",
                           "--eval-every", 1, "--log", log, "--checkpoint", ck, check=None)
            return r, log, os.path.join(ck, "checkpoint.onnx")

        r, log, ckpt = run(bad, "bad")
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        # The progress lines of the evaluated steps 1 and 2, then the one error line.
        self.assertEqual([l.split(" epoch")[0] for l in lines[:-1]], ["step 1/6", "step 2/6"])
        self.assertEqual(lines[-1], "mpc: error: training step 3: node 'embed' (Gather): "
                         "index 9 out of range for [4, 2]")
        self.assertEqual(r.stdout, "")
        # The oracle: two SGD steps of the graph's update, in float64.
        w64, losses = W.astype(np.float64), []
        for step in range(2):
            rows = slice(2 * step, 2 * step + 2)
            d = X[rows] @ w64 + table[ids[rows]] - T[rows]
            losses.append(np.mean(d * d))
            w64 = w64 - lr * (X[rows].T.astype(np.float64) @ d)
        got, m = initializers(ckpt)
        meta = {p.key: p.value for p in m.metadata_props}
        self.assertEqual(meta["mpc.trainer.step"], "2")
        np.testing.assert_allclose(got["W"], w64, rtol=0, atol=1e-5)
        rows = read_log(log)
        self.assertEqual([int(x["step"]) for x in rows], [1, 2])
        for row, want in zip(rows, losses):
            self.assertAlmostEqual(float(row["loss"]), want, delta=1e-5)
        # The same run with valid ids: six steps, a checkpoint of step 6.
        r, log, ckpt = run(good, "good")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(read_log(log)), 6)
        _, m = initializers(ckpt)
        self.assertEqual({p.key: p.value for p in m.metadata_props}["mpc.trainer.step"], "6")

    def test_help(self):
        r = mpc("run", "--train", "--help", check=0)
        for flag in ("--data", "--batch", "--steps", "--epochs", "--eval-every", "--checkpoint",
                     "--resume", "--seed", "--log", "--plot", "--threads", "--holdout"):
            self.assertIn(flag, r.stdout)
        self.assertIn("--column", mpc("plot", "--help", check=0).stdout)


def main():
    global MPC
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("-k", dest="pattern")
    args = ap.parse_args()
    MPC = os.path.abspath(args.mpc)
    loader = unittest.TestLoader()
    if args.pattern:
        loader.testNamePatterns = [f"*{args.pattern}*"]
    suite = loader.loadTestsFromTestCase(TrainerCase)
    result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1).run(suite)
    # A failing subtest reports its test once per failing case: count tests.
    failed = len({getattr(t, "test_case", t).id() for t, _ in result.failures + result.errors})
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
