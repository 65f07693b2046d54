#!/usr/bin/env python3
"""The training demonstrations of docs/training.md, as tests of the real `mpc` binary.

    python3 tests/demos/test_training_demos.py --mpc build/tools/mpc --source-dir . [-k NAME]

1. digits: the MLP and the CNN of models/digits_*.onnx, trained fp32 and AMP fp16 (dynamic loss
   scaling) for the same steps and seed on models/data/digits.npz, reach held-out accuracies
   within 1 point of each other (and both learn: above 90%).
2. underflow: the tanh MLP with its loss weighted by 2^-20 (its gradients lie below fp16's
   subnormal range) trained fp32, fp16 without loss scaling and fp16 with dynamic loss scaling:
   unscaled fp16 flushes (nearly) every gradient to zero and does not learn; scaled fp16 ends
   within 1% of fp32's loss. `mpc plot` draws the three curves.
3. overflow: a sample with a huge pixel overflows the MLP's scaled fp16 weight gradients: the
   step is skipped with every state tensor bit-identical, the loss scale halves, the log names
   the gradient, and the following clean step updates the weights.

The last line printed is 'N passed, N failed'; exit 1 on failure, 77 without onnx/numpy.
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
    from onnx import numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None
SOURCE_DIR = None
TIMEOUT_S = 900


def mpc(*args, check=0):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    r = subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env)
    if check is not None and r.returncode != check:
        raise AssertionError(f"mpc {' '.join(map(str, args))}: exit {r.returncode}, "
                             f"expected {check}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def read_log(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def final_accuracy(rows):
    acc = [float(r["eval_accuracy"]) for r in rows if r.get("eval_accuracy")]
    assert acc, "no eval_accuracy in the log"
    return acc[-1]


def tail_loss(rows, n=20):
    return float(np.mean([float(r["loss"]) for r in rows[-n:]]))


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


class Demo(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.data = os.path.join(SOURCE_DIR, "models", "data", "digits.npz")

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def build(self, model, *flags):
        train = self.path(f"{model}.train.onnx")
        mpc("train-graph", os.path.join(SOURCE_DIR, "models", f"{model}.onnx"), *flags,
            "-o", train)
        return train

    def train(self, model_path, log, *flags):
        r = mpc("run", model_path, "--train", "--data", self.data, "--seed", 7, "--log", log,
                *flags)
        return r, read_log(log)

    # -- 1. digits, fp32 vs AMP ------------------------------------------------------------
    def check_digits(self, model, steps, lr):
        train = self.build(model, "--loss", "cross-entropy", "--labels", "labels",
                           "--optimizer", "adam", "--lr", lr)
        amp = self.path(f"{model}.amp.onnx")
        mpc("rewrite", train, "-o", amp)
        common = ("--batch", 32, "--steps", steps, "--eval-every", steps // 4)
        _, fp32 = self.train(train, self.path("fp32.csv"), *common)
        _, half = self.train(amp, self.path("amp.csv"), *common)
        a32, a16 = final_accuracy(fp32), final_accuracy(half)
        print(f"  {model}: fp32 accuracy {a32:.4f}, AMP fp16 accuracy {a16:.4f}")
        self.assertGreater(a32, 0.90, "fp32 training did not learn")
        self.assertLessEqual(abs(a32 - a16), 0.01, "AMP accuracy is more than 1 point off")

    def test_digits_mlp(self):
        self.check_digits("digits_mlp", 400, 0.01)

    def test_digits_cnn(self):
        self.check_digits("digits_cnn", 1000, 0.01)

    # -- 2. the seeds' figure: gradients that underflow fp16 ---------------------------------
    def test_underflow(self):
        train = self.build("digits_tanh_mlp", "--loss", "cross-entropy", "--labels", "labels",
                           "--optimizer", "adam", "--lr", 0.003, "--loss-weight", 2.0 ** -20,
                           "--expose-gradients")
        runs = {"fp32": train}
        for mode, flag in (("fp16-unscaled", "off"), ("fp16-scaled", "dynamic")):
            runs[mode] = self.path(f"{mode}.onnx")
            mpc("rewrite", train, "-o", runs[mode], "--loss-scale", flag)
        logs = {}
        for mode, path in runs.items():
            _, logs[mode] = self.train(path, self.path(f"{mode}.csv"), "--batch", 64,
                                       "--steps", 300)
        first = float(logs["fp32"][0]["loss"])
        end = {m: tail_loss(rows) for m, rows in logs.items()}
        zero = {m: float(np.mean([float(r["grad_zero_frac"]) for r in rows]))
                for m, rows in logs.items()}
        print(f"  loss first {first:.4g}; last-20 mean: " +
              ", ".join(f"{m} {v:.4g}" for m, v in end.items()))
        print("  zero gradient fraction: " + ", ".join(f"{m} {v:.3f}" for m, v in zero.items()))
        self.assertLess(end["fp32"], 0.5 * first, "fp32 did not learn")
        self.assertGreater(end["fp16-unscaled"], 0.9 * first, "unscaled fp16 should not learn")
        self.assertGreater(zero["fp16-unscaled"], 0.9, "unscaled fp16 gradients should flush")
        self.assertLess(zero["fp32"], 0.2)
        self.assertLessEqual(abs(end["fp16-scaled"] - end["fp32"]) / end["fp32"], 0.01,
                             "scaled fp16 does not track fp32 within 1%")
        svg = self.path("curves.svg")
        mpc("plot", *[self.path(f"{m}.csv") for m in runs], *sum(
            (["--label", m] for m in runs), []), "--log-y", "-o", svg)
        root = ET.parse(svg).getroot()
        self.assertTrue(root.tag.endswith("svg"))

    # -- 3. an overflowing step is skipped -------------------------------------------------
    def test_overflow_skip(self):
        train = self.build("digits_mlp", "--loss", "cross-entropy", "--labels", "labels",
                           "--optimizer", "adam", "--lr", 0.003)
        amp = self.path("amp.onnx")
        mpc("rewrite", train, "-o", amp)
        d = np.load(self.data)
        x = d["x"][:64].copy()
        labels = d["labels"][:64].copy()
        bad = x.copy()
        bad[5, 20] = 3.0e3  # its activations, times the 2^15-scaled logit gradient, overflow fp16
        for name, arr in (("bad", bad), ("good", x)):
            np.savez(self.path(f"{name}.npz"), x=arr, labels=labels, x_test=x, labels_test=labels)
        ck0, ck1, ck2 = self.path("ck0"), self.path("ck1"), self.path("ck2")
        # Step 1 on clean data gives a starting checkpoint.
        mpc("run", amp, "--train", "--data", self.path("good.npz"), "--batch", 64, "--steps", 1,
            "--checkpoint", ck0)
        # Step 2 sees the spike: skipped.
        r = mpc("run", amp, "--train", "--data", self.path("bad.npz"), "--batch", 64,
                "--steps", 2, "--resume", ck0, "--checkpoint", ck1)
        self.assertRegex(r.stdout + r.stderr, r"step 2 skipped: non-finite gradient of fc\d/[WB]")
        before = initializers(os.path.join(ck0, "checkpoint.onnx"))
        after = initializers(os.path.join(ck1, "checkpoint.onnx"))
        for name, value in before.items():
            if name == "mpc.loss_scale":
                self.assertEqual(float(after[name]), float(value) / 2)
            elif name == "mpc.loss_scale_growth":  # clean-step count restarts
                self.assertEqual(int(after[name]), 0)
            else:
                self.assertEqual(value.tobytes(), after[name].tobytes(), f"{name} changed")
        # Step 3 on clean data updates the weights again.
        mpc("run", amp, "--train", "--data", self.path("good.npz"), "--batch", 64,
            "--steps", 3, "--resume", ck1, "--checkpoint", ck2)
        later = initializers(os.path.join(ck2, "checkpoint.onnx"))
        self.assertNotEqual(after["fc0/W"].tobytes(), later["fc0/W"].tobytes())


def main():
    global MPC, SOURCE_DIR
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("-k", help="run only tests whose name contains this")
    args = ap.parse_args()
    MPC, SOURCE_DIR = os.path.abspath(args.mpc), os.path.abspath(args.source_dir)
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [f"*{args.k}*"]
    suite = loader.loadTestsFromTestCase(Demo)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
