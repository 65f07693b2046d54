#!/usr/bin/env python3
"""float64 LSTM, GRU and RNN computed in float64 (`mpc run` against a float64 numpy oracle).

    python3 tests/runtime_exec/test_rnn_double.py --mpc build/tools/mpc --source-dir .

A double model must not lose precision to float32 arithmetic inside the recurrent kernels:
each op (forward, reverse and bidirectional; GRU with linear_before_reset 0 and 1; LSTM with
peepholes) runs on float64 inputs whose float32 rounding changes the outputs at about 1e-7
relative, and every output must match the oracle written from the ONNX operator equations in
float64 to 1e-12 (relative, plus 1e-13 absolute). A float32 copy of the same models must still
match the oracle to float32 accuracy (1e-5), which checks that the oracle is the right one.

Prints "N passed, N failed"; exit 1 on failure, 77 when onnx or numpy is missing.
"""

import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required: {e}", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)

SEQ, BATCH, IN, HID = 5, 3, 4, 6


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_ref(x, w, r, b, p, h0, c0, direction):
    dirs = 2 if direction == "bidirectional" else 1
    y = np.zeros((SEQ, dirs, BATCH, HID))
    yh = np.zeros((dirs, BATCH, HID))
    yc = np.zeros((dirs, BATCH, HID))
    for d in range(dirs):
        h, c = h0[d].copy(), c0[d].copy()
        wb, rb = b[d, :4 * HID], b[d, 4 * HID:]
        pi, po, pf = p[d, :HID], p[d, HID:2 * HID], p[d, 2 * HID:]
        steps = range(SEQ - 1, -1, -1) if direction == "reverse" or d == 1 else range(SEQ)
        for t in steps:
            g = x[t] @ w[d].T + h @ r[d].T + wb + rb
            gi, go, gf, gc = np.split(g, 4, axis=1)
            i = sigmoid(gi + pi * c)
            f = sigmoid(gf + pf * c)
            cand = np.tanh(gc)
            c = f * c + i * cand
            o = sigmoid(go + po * c)
            h = o * np.tanh(c)
            y[t, d] = h
        yh[d], yc[d] = h, c
    return [y, yh, yc]


def gru_ref(x, w, r, b, h0, direction, lbr):
    dirs = 2 if direction == "bidirectional" else 1
    y = np.zeros((SEQ, dirs, BATCH, HID))
    yh = np.zeros((dirs, BATCH, HID))
    for d in range(dirs):
        h = h0[d].copy()
        wz, wr, wh = np.split(w[d], 3)
        rz, rr, rh = np.split(r[d], 3)
        wbz, wbr, wbh, rbz, rbr, rbh = np.split(b[d], 6)
        steps = range(SEQ - 1, -1, -1) if direction == "reverse" or d == 1 else range(SEQ)
        for t in steps:
            z = sigmoid(x[t] @ wz.T + h @ rz.T + wbz + rbz)
            rt = sigmoid(x[t] @ wr.T + h @ rr.T + wbr + rbr)
            if lbr:
                ht = np.tanh(x[t] @ wh.T + rt * (h @ rh.T + rbh) + wbh)
            else:
                ht = np.tanh(x[t] @ wh.T + (rt * h) @ rh.T + rbh + wbh)
            h = (1 - z) * ht + z * h
            y[t, d] = h
        yh[d] = h
    return [y, yh]


def rnn_ref(x, w, r, b, h0, direction):
    dirs = 2 if direction == "bidirectional" else 1
    y = np.zeros((SEQ, dirs, BATCH, HID))
    yh = np.zeros((dirs, BATCH, HID))
    for d in range(dirs):
        h = h0[d].copy()
        steps = range(SEQ - 1, -1, -1) if direction == "reverse" or d == 1 else range(SEQ)
        for t in steps:
            h = np.tanh(x[t] @ w[d].T + h @ r[d].T + b[d, :HID] + b[d, HID:])
            y[t, d] = h
        yh[d] = h
    return [y, yh]


def make_case(op, direction, lbr, rng):
    dirs = 2 if direction == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    # Values with full 53-bit mantissas (float32 rounding shows at ~1e-7).
    feeds = {
        "X": rng.uniform(-1, 1, (SEQ, BATCH, IN)),
        "W": rng.uniform(-0.6, 0.6, (dirs, gates * HID, IN)),
        "R": rng.uniform(-0.6, 0.6, (dirs, gates * HID, HID)),
        "B": rng.uniform(-0.3, 0.3, (dirs, 2 * gates * HID)),
        "initial_h": rng.uniform(-0.5, 0.5, (dirs, BATCH, HID)),
    }
    inputs = ["X", "W", "R", "B", "", "initial_h"]
    outputs = ["Y", "Y_h"]
    attrs = {"hidden_size": HID, "direction": direction}
    if op == "LSTM":
        feeds["initial_c"] = rng.uniform(-0.5, 0.5, (dirs, BATCH, HID))
        feeds["P"] = rng.uniform(-0.3, 0.3, (dirs, 3 * HID))
        inputs += ["initial_c", "P"]
        outputs.append("Y_c")
        ref = lstm_ref(feeds["X"], feeds["W"], feeds["R"], feeds["B"], feeds["P"],
                       feeds["initial_h"], feeds["initial_c"], direction)
    elif op == "GRU":
        attrs["linear_before_reset"] = lbr
        ref = gru_ref(feeds["X"], feeds["W"], feeds["R"], feeds["B"], feeds["initial_h"],
                      direction, lbr)
    else:
        ref = rnn_ref(feeds["X"], feeds["W"], feeds["R"], feeds["B"], feeds["initial_h"],
                      direction)
    return feeds, inputs, outputs, attrs, ref


def build_model(op, feeds, inputs, outputs, attrs, elem):
    node = helper.make_node(op, inputs, outputs, name=f"{op.lower()}0", **attrs)
    g = helper.make_graph(
        [node], "rnn",
        [helper.make_tensor_value_info(n, elem, feeds[n].shape) for n in inputs if n],
        [helper.make_tensor_value_info(n, elem, None) for n in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


def run_case(mpc, work, tag, model, feeds, outputs):
    path = os.path.join(work, f"{tag}.onnx")
    onnx.save(model, path)
    args = [mpc, "run", path]
    for name, value in feeds.items():
        f = os.path.join(work, f"{tag}_{name}.npy")
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    out_dir = os.path.join(work, f"{tag}_out")
    os.makedirs(out_dir, exist_ok=True)
    proc = subprocess.run(args + ["--outputs", out_dir], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"mpc run {tag}: {proc.stderr.strip()}")
    return [np.load(os.path.join(out_dir, f"{n}.npy")) for n in outputs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir")
    args = ap.parse_args()
    rng = np.random.default_rng(12)
    passed = failed = 0
    cases = [("LSTM", d, 0) for d in ("forward", "reverse", "bidirectional")]
    cases += [("GRU", d, lbr) for d in ("forward", "bidirectional") for lbr in (0, 1)]
    cases += [("RNN", d, 0) for d in ("forward", "reverse", "bidirectional")]
    with tempfile.TemporaryDirectory(prefix="mpc-rnn64-") as work:
        for op, direction, lbr in cases:
            feeds, inputs, outputs, attrs, ref = make_case(op, direction, lbr, rng)
            for elem, dt, rtol, atol in ((TensorProto.DOUBLE, np.float64, 1e-12, 1e-13),
                                         (TensorProto.FLOAT, np.float32, 1e-5, 1e-6)):
                tag = f"{op}_{direction}_{lbr}_{np.dtype(dt).name}"
                try:
                    got = run_case(args.mpc, work, tag,
                                   build_model(op, feeds, inputs, outputs, attrs, elem),
                                   {k: v.astype(dt) for k, v in feeds.items()}, outputs)
                    for name, g, want in zip(outputs, got, ref):
                        if g.dtype != dt or g.shape != want.shape:
                            raise AssertionError(f"{name}: {g.dtype} {g.shape}, expected "
                                                 f"{np.dtype(dt).name} {want.shape}")
                        err = np.abs(g.astype(np.float64) - want)
                        bound = atol + rtol * np.abs(want)
                        if not np.all(err <= bound):
                            worst = float(np.max(err / (np.abs(want) + 1e-300)))
                            raise AssertionError(f"{name}: max relative error {worst:.3g} "
                                                 f"exceeds {rtol:g}")
                    passed += 1
                except AssertionError as e:
                    failed += 1
                    print(f"FAIL {tag}: {e}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
