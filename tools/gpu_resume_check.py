#!/usr/bin/env python3
"""Checkpoints across devices and a skipped step on the device (GPU bundle, step `resume`).

    python3 tools/gpu_resume_check.py --mpc MPC --source-dir SRC [--devices cpu,cuda]

Issue 14 asks that "a checkpoint written on the GPU resumes on the CPU and the other way
round" and that "an injected-inf step [is] skipped with state bit-identical". On the digits
MLP's training graph (cross-entropy, Adam, lr 0.01), fp32 and its AMP rewrite:

- skipped step: the AMP graph rewritten with `--loss-scale-init 16777216` overflows its first
  step on the checked device; one step with `--checkpoint` must log `skipped` 1, and every
  tensor of the checkpoint must be byte-identical to the training model's initializer except
  `mpc.loss_scale`, halved;
- resume, both ways: a checkpoint of step 50 written on each device is resumed on the same
  device and on the other one for 20 more steps; the losses of those 20 steps must agree
  within 1e-4 relative (fp32) or 1e-2 (AMP) across the devices, and bit for bit where both
  devices are the same (`--devices cpu,cpu`, the ctest self-check). A state that did not
  survive the trip (Adam's moments, the step counter, the loss scale) moves the losses far
  more than that.

Prints one line per check and, last, 'N passed, N failed'; exit 1 on a failure.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from gpu_train_check import log_rows, mpc  # beside this script (in the bundle too)

STEPS, MORE = 50, 20


def tensors(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--devices", default="cpu,cuda",
                    help="reference and checked device (cpu,cpu checks this script itself)")
    a = ap.parse_args()
    ref, dev = a.devices.split(",")
    data = os.path.join(a.source_dir, "models", "data", "digits.npz")
    results = []

    def check(name, ok, detail):
        results.append(ok)
        print(f"{'pass' if ok else 'FAIL'} {name}: {detail}", flush=True)

    def train(model, device, log, *extra):
        return mpc(a.mpc, "run", model, "--train", "--device", device, "--data", data,
                   "--batch", 32, "--shuffle", "none", "--eval-every", 1000, "--log", log, *extra)

    with tempfile.TemporaryDirectory() as tmp:
        path = lambda name: os.path.join(tmp, name)
        fp32, amp, hot = path("fp32.onnx"), path("amp.onnx"), path("hot.onnx")
        mpc(a.mpc, "train-graph", os.path.join(a.source_dir, "models", "digits_mlp.onnx"),
            "--loss", "cross-entropy", "--optimizer", "adam", "--lr", "0.01", "-o", fp32)
        mpc(a.mpc, "rewrite", fp32, "-o", amp)
        mpc(a.mpc, "rewrite", fp32, "-o", hot, "--loss-scale-init", 16777216)

        # A step whose gradients overflow leaves every tensor as it was, the scale halved.
        try:
            train(hot, dev, path("hot.csv"), "--steps", 1, "--checkpoint", path("hot.ck"))
            rows = log_rows(path("hot.csv"))
            before, after = tensors(hot), tensors(path("hot.ck/checkpoint.onnx"))
            changed = sorted(k for k in before
                             if k not in after or before[k].tobytes() != after[k].tobytes())
            scale = float(after["mpc.loss_scale"]) if "mpc.loss_scale" in after else None
            ok = (len(rows) == 1 and rows[0]["skipped"] == "1"
                  and changed == ["mpc.loss_scale"] and scale == 8388608.0)
            check(f"skipped step on {dev}", ok,
                  f"skipped {rows[0]['skipped'] if rows else None}, tensors changed {changed}, "
                  f"loss scale {scale}")
        except RuntimeError as e:
            check(f"skipped step on {dev}", False, str(e))

        for label, model, tol in (("fp32", fp32, 1e-4), ("amp", amp, 1e-2)):
            try:
                cks = {}
                for d in (ref, dev) if ref != dev else (ref,):
                    cks[d] = path(f"{label}.{d}.ck")
                    train(model, d, path(f"{label}.{d}.csv"), "--steps", STEPS,
                          "--checkpoint", cks[d])
                cks.setdefault(dev, cks[ref])
                for wrote, other in ((dev, ref), (ref, dev)):
                    logs = {}
                    for d in (wrote, other):
                        log = path(f"{label}.{wrote}-{d}.{len(logs)}.csv")
                        train(model, d, log, "--steps", STEPS + MORE, "--resume", cks[wrote])
                        logs[len(logs)] = log_rows(log)
                    same, moved = logs[0], logs[1]
                    steps = [int(r["step"]) for r in moved]
                    problems = []
                    if steps != list(range(STEPS + 1, STEPS + MORE + 1)):
                        problems.append(f"resumed steps {steps[:3]}...{steps[-1:]}")
                    worst = 0.0
                    for r0, r1 in zip(same, moved):
                        c, g = float(r0["loss"]), float(r1["loss"])
                        worst = max(worst, abs(c - g) / max(abs(c), 1e-12))
                    exact = ref == dev
                    if exact and same != moved:
                        problems.append("the logs differ on one device")
                    elif worst > tol:
                        problems.append(f"loss differs by {worst:.2e} relative (tolerance {tol})")
                    check(f"{label} checkpoint of {wrote} resumed on {other}", not problems,
                          "; ".join(problems) or
                          f"steps {STEPS + 1}-{STEPS + MORE}, losses within {worst:.2e} of "
                          f"the run resumed on {wrote}; final loss {moved[-1]['loss']}")
            except RuntimeError as e:
                check(f"{label} resume", False, str(e))
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
