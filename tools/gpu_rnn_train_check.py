#!/usr/bin/env python3
"""Recurrent training on the CUDA backend against the CPU backend (GPU bundle).

    python3 tools/gpu_rnn_train_check.py --mpc MPC --source-dir SRC [--steps 100]
                                         [--devices cpu,cuda]

Trains `models/lstm.onnx` and a bidirectional GRU model written here (write_gru_model, with
linear_before_reset 0) through `mpc train-graph --loss mse --optimizer adam --lr 0.01`, each in
fp32 and as its AMP rewrite (`mpc rewrite`: fp16, dynamic loss scaling), on a fixed synthetic
sequence-regression set (seeded numpy: labels a smooth function of the inputs), with
`mpc run --train --batch 10 --steps S --eval-every 25 --shuffle none --log` on each of the two
devices. Checks, per model and precision:
- the first 20 steps' losses agree within 1e-4 relative (fp32) or 1e-2 (AMP);
- the final held-out loss is within 5% of the reference device's, and below the first
  step's loss (the model learned);
- the number of skipped steps is the same within 2;
- on cuda, the log is byte-identical to that of the same run with `--cuda-graph off`, and
  mpc's placement line names no recurrent op among the CPU fallbacks (LSTM, GRU, LSTMGrad
  and GRUGrad run on the GPU).
`--devices cpu,cpu` runs the reference twice on the CPU: the check of this script itself
(ctest gpu_rnn_train_check_cpu), the two logs then identical. Last line: 'N passed,
N failed'; exit status 1 on any failure, 77 when numpy or onnx is missing.
"""

import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"numpy and onnx are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_train_check import log_rows, mpc  # noqa: E402

RECURRENT = ("LSTM", "GRU", "LSTMGrad", "GRUGrad")


def write_gru_model(path, lbr, seq=10, batch=4, features=32, hidden=24, classes=8):
    """x[seq,batch,features] -> bidirectional GRU (linear_before_reset `lbr`) -> Transpose
    and Reshape the directions into the features -> MatMul + Add per step: the GRU
    counterpart of models/lstm.onnx (same input and output shapes by default)."""
    rng = np.random.default_rng(5 + lbr)
    init = lambda name, *shape: numpy_helper.from_array(
        (rng.standard_normal(shape) / np.sqrt(hidden)).astype(np.float32), name)
    inits = [init("W", 2, 3 * hidden, features), init("R", 2, 3 * hidden, hidden),
             init("B", 2, 6 * hidden), init("head_W", 2 * hidden, classes),
             init("head_B", classes),
             numpy_helper.from_array(np.array([seq, batch, 2 * hidden], np.int64), "shape")]
    nodes = [helper.make_node("GRU", ["x", "W", "R", "B"], ["y"], hidden_size=hidden,
                              direction="bidirectional", linear_before_reset=lbr),
             helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["yt", "shape"], ["h"]),
             helper.make_node("MatMul", ["h", "head_W"], ["m"]),
             helper.make_node("Add", ["m", "head_B"], ["out"])]
    graph = helper.make_graph(
        nodes, "gru", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [seq, batch, features])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [seq, batch, classes])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def write_data(path, samples=400, batch=4, features=32, classes=8):
    """x [samples, batch, features] and labels [samples, batch, classes]: a smooth function of
    each sample and the one before it, so the recurrence has something to learn."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((samples, batch, features)).astype(np.float32)
    labels = np.tanh(0.5 * x[:, :, :classes] + 0.3 * np.roll(x, 1, axis=0)[:, :, 8:8 + classes])
    np.savez(path, x=x, labels=labels.astype(np.float32))


def compare(ref, got, out, tol, checked):
    """What differs between the reference run's log rows and the checked run's."""
    problems = []
    for i in range(min(20, len(ref))):
        c, g = float(ref[i]["loss"]), float(got[i]["loss"])
        if abs(c - g) > tol * max(abs(c), 1e-12):
            problems.append(f"step {i + 1} loss {g} vs {c}")
            break
    evals = lambda rows: [float(r["eval_loss"]) for r in rows if r.get("eval_loss")]
    er, eg = evals(ref), evals(got)
    if not eg or abs(eg[-1] - er[-1]) > 0.05 * er[-1]:
        problems.append(f"final eval_loss {eg[-1] if eg else None} vs {er[-1]}")
    elif eg[-1] >= float(got[0]["loss"]):
        problems.append(f"final eval_loss {eg[-1]} not below the first loss {got[0]['loss']}")
    sk = lambda rows: sum(int(r["skipped"]) for r in rows)
    if abs(sk(got) - sk(ref)) > 2:
        problems.append(f"skipped {sk(got)} vs {sk(ref)}")
    placement = next((l for l in out.splitlines() if l.startswith(f"{checked}: ")), "")
    fallback = placement.split("cpu fallback:", 1)[1] if "cpu fallback:" in placement else ""
    for op in RECURRENT:
        if f"{op} x" in fallback:
            problems.append(f"{op} ran on the CPU ({placement})")
    return problems, placement


def self_check(rows, tol, dev):
    """With one device on both sides: compare() sees a changed loss, a worse final loss
    and a recurrent op among the fallbacks (the checks a GPU run relies on)."""
    problems = []
    loss = [dict(r) for r in rows]
    loss[3]["loss"] = str(float(loss[3]["loss"]) * (1 + 20 * tol))
    worse = [dict(r) for r in rows]
    worse[-1]["eval_loss"] = str(float(worse[-1]["eval_loss"]) * 1.2)
    line = f"{dev}: 40 nodes; cpu fallback: 2 nodes (GRUGrad x1, Mul x1)"
    for what, got, out in (("a changed step-4 loss", loss, ""),
                           ("a final loss 20% worse", worse, ""),
                           ("GRUGrad on the CPU", rows, line)):
        if not compare(rows, got, out, tol, dev)[0]:
            problems.append(f"self-check: compare() missed {what}")
    if compare(rows, rows, f"{dev}: 40 nodes; cpu fallback: none", tol, dev)[0]:
        problems.append("self-check: compare() flags identical runs")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--devices", default="cpu,cuda",
                    help="reference and checked device (cpu,cpu checks this script itself)")
    a = ap.parse_args()
    passed = failed = 0
    ref_dev, dev = a.devices.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "seq.npz")
        write_data(data)
        gru = os.path.join(tmp, "gru.onnx")
        write_gru_model(gru, 0)
        for name, src in (("lstm", os.path.join(a.source_dir, "models", "lstm.onnx")),
                          ("gru", gru)):
            train = os.path.join(tmp, f"{name}.train.onnx")
            amp = os.path.join(tmp, f"{name}.amp.onnx")
            try:
                mpc(a.mpc, "train-graph", src, "--loss", "mse", "--optimizer", "adam", "--lr",
                    "0.01", "-o", train)
                mpc(a.mpc, "rewrite", train, "-o", amp)
            except RuntimeError as e:
                failed += 2
                print(f"FAIL {name}: {e}")
                continue
            for label, model, tol in (("fp32", train, 1e-4), ("amp", amp, 1e-2)):
                run = lambda device, log, *extra: mpc(
                    a.mpc, "run", model, "--train", "--device", device, "--data", data,
                    "--batch", 10, "--steps", a.steps, "--eval-every", 25, "--shuffle", "none",
                    "--log", log, *extra)
                logs = [os.path.join(tmp, f"{name}.{label}.{i}.csv") for i in range(3)]
                try:
                    run(ref_dev, logs[0])
                    out = run(dev, logs[1]).stdout
                    same_as_eager = True
                    if dev == "cuda":
                        # Every step launched node by node: the same log, byte for byte.
                        run(dev, logs[2], "--cuda-graph", "off")
                        with open(logs[1], "rb") as f1, open(logs[2], "rb") as f2:
                            same_as_eager = f1.read() == f2.read()
                except RuntimeError as e:
                    failed += 1
                    print(f"FAIL {name} {label}: {e}")
                    continue
                ref, got = log_rows(logs[0]), log_rows(logs[1])
                problems, placement = compare(ref, got, out, tol, dev)
                if not same_as_eager:
                    problems.append("the log differs from a --cuda-graph off run's")
                if dev == ref_dev:
                    problems += self_check(ref, tol, dev)
                final = next((l for l in out.splitlines() if l.startswith("final: ")), "")
                if problems:
                    failed += 1
                    print(f"FAIL {name} {label}: {'; '.join(problems)} [{placement}]")
                else:
                    passed += 1
                    print(f"pass {name} {label}: {final} [{placement}]")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
