"""Mixed-precision training of the architectures of test_archs.py, test_exported.py and
test_models_full.py, the way a user runs it (docs/training.md, docs/user-guide.md):

    mpc train-graph model.onnx --loss cross-entropy --optimizer adam ... -o m.train.onnx
    mpc rewrite m.train.onnx --target fp16 -o m.fp16.onnx      (dynamic loss scaling)
    mpc rewrite m.train.onnx --target bf16 -o m.bf16.onnx      (overflow check and skip)
    mpc run M --train --data d.npz --batch B --steps S --seed 3 --holdout 0.2 --log M.csv

on a small synthetic task each model learns in fp32 (class templates plus noise; next-token
prediction of arithmetic sequences for the GPT decoder; the first token after [CLS] for the
BERT encoder, with a fifth of the labels random). For fp16 and bf16, against the fp32 run
with the same seed and batches:

- the rewrite (its --report) runs every Conv, MatMul, Gemm, LSTM and GRU of the step and
  their gradients in the 16-bit type (bf16: but the forward Conv, LSTM and GRU, whose
  opset-17 schemas have no bfloat16), and not the loss;
- every logged loss is finite and none in the second half exceeds 1.5 times the first
  step's;
- the mean training loss of the last sixth of the steps is within the batch-order noise of
  fp32's: within 10% (plus 0.01) of it, or within 1.5 times the distance between the fp32
  runs with seeds 3 and 4 when that is larger; the held-out accuracy likewise within 5
  points or 1.5 times the fp32 runs' distance;
- skipped steps are reported consistently: the `skipped` column of the log, one
  `step N skipped: ...` line per skipped step, and the final line's count agree, and at
  most 2% of the steps are skipped.

A second test starts fp16 loss scaling at its maximum (2^24) on the transformer encoder
block: its first steps overflow and are skipped, each logged with the halved scale, until
the scale fits; later skips stay under 2% of the steps, the log's scale halves exactly at
each skipped step, and training ends at fp32's loss.

--quick (the default ctest run): the MobileNetV2 block, the LSTM, the GPT decoder and the
skipped-steps test. Without it (ctest -C full, train_amp_archs_full): every architecture.
Prints "N passed, N failed[, N skipped]".
"""
import csv
import json
import os
import re
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

import mpc_trainlib as tl  # noqa: E402
import test_archs as ta  # noqa: E402
import test_exported as te  # noqa: E402
import test_models_full as tm  # noqa: E402

ARGS = None
HEAVY = {"Conv", "MatMul", "Gemm", "LSTM", "GRU", "ConvGrad", "LSTMGrad", "GRUGrad"}
BF16_KEPT = {"Conv", "LSTM", "GRU"}  # no bfloat16 in their opset-17 schemas
QUICK = ("mobilenet_block", "lstm", "gpt_decoder")
SAMPLES = 2000


def run_mpc(*args, timeout=600):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([ARGS.mpc, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def templates(shape, seed, noise, n=SAMPLES, classes=3):
    """Samples of one of `classes` random templates plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    tmpl = rng.standard_normal((classes, *shape))
    labels = rng.integers(0, classes, size=n)
    x = tmpl[labels] + noise * rng.standard_normal((n, *shape))
    return {"x": x.astype(np.float32)}, labels.astype(np.int64)


def arithmetic_sequences(seed, n=SAMPLES):
    """Next-token prediction on (start + k * step) mod V, steps 1 or 2."""
    V = te.GPT["V"]
    rng = np.random.default_rng(seed)
    start, step = rng.integers(0, V, n), rng.integers(1, 3, n)
    seq = ((start[:, None] + step[:, None] * np.arange(6)[None]) % V).astype(np.int64)
    return {"tokens": seq[:, :-1]}, seq[:, 1:]


def relabel(task, fraction=0.2, classes=3):
    """The task with `fraction` of its labels replaced by random classes (a loss floor)."""
    def noisy(seed):
        feeds, labels = task(seed)
        rng = np.random.default_rng(seed + 1)
        flip = rng.random(len(labels)) < fraction
        return feeds, np.where(flip, rng.integers(0, classes, len(labels)), labels)
    return noisy


def image(shape, noise):
    """Template classes plus noise: chosen per model so that fp32 ends near a loss of 0.1
    to 0.5 (not 0, where every precision agrees)."""
    return lambda seed: templates(shape, seed, noise)


# name: (model builder, task(seed), train-graph flags, Adam learning rate)
ARCHS = {
    "mobilenet_block": (lambda: ta.mobilenet_block()[0],
                        image((ta.MB["C"], ta.MB["HW"], ta.MB["HW"]), 1.2), (), 0.01),
    "resnet_block": (lambda: ta.resnet_block()[0],
                     image((ta.RB["C"], ta.RB["HW"], ta.RB["HW"]), 2.0), (), 0.01),
    "resnet_downsample": (lambda: ta.resnet_downsample_block()[0],
                          image((ta.RB["C"], ta.RB["HW"], ta.RB["HW"]), 2.0), (), 0.01),
    "lstm": (lambda: ta.lstm_classifier()[0], image((ta.LS["T"], ta.LS["I"]), 1.2), (), 0.01),
    "bilstm": (lambda: ta.bilstm_classifier()[0], image((ta.LS["T"], ta.LS["I"]), 1.2), (),
               0.01),
    "gru": (lambda: ta.gru_classifier()[0], image((ta.LS["T"], ta.LS["I"]), 0.8), (), 0.01),
    "encoder_block": (lambda: te.encoder_block()[0], image((te.ENC["T"], te.ENC["E"]), 1.6),
                      (), 0.01),
    "gpt_decoder": (lambda: te.gpt_decoder()[0], arithmetic_sequences, ("--class-axis", "-1"),
                    0.01),
    "bert": (lambda: tm.bert_encoder()[0],
             relabel(lambda seed: tm.bert_data(SAMPLES, 6, seed)), (), 0.005),
    "resnet18": (lambda: tm.resnet18()[0], image((3, 16, 16), 2.0), (), 0.003),
    "mobilenet_v2": (lambda: tm.mobilenet_v2()[0], image((3, 16, 16), 2.0), (), 0.003),
}


def read_log(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class Runs:
    """train-graph, the two rewrites and the three training runs of one architecture."""

    def __init__(self, test, tmp, name, steps, rewrite_flags=(),
                 modes=("fp32", "fp32@4", "fp16", "bf16")):
        build, task, flags, lr = ARCHS[name]
        src, train = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m.train.onnx")
        onnx.save(build(), src)
        r = run_mpc("train-graph", src, "--loss", "cross-entropy", "--optimizer", "adam",
                    "--lr", lr, *flags, "-o", train)
        test.assertEqual(r.returncode, 0, r.stderr)
        feeds, labels = task(sum(map(ord, name)))
        data = os.path.join(tmp, "d.npz")
        np.savez(data, **feeds, **{tl.metadata(onnx.load(train))["mpc.training.labels"]: labels})
        self.logs, self.out, self.rewrite = {}, {}, {}
        self.steps = steps
        for mode in modes:
            model, seed = train, 3
            if mode.startswith("fp32@"):
                seed = int(mode[5:])
            elif mode != "fp32":
                model = os.path.join(tmp, f"m.{mode}.onnx")
                report = os.path.join(tmp, f"{mode}.json")
                r = run_mpc("rewrite", train, "--target", mode, *rewrite_flags, "--report",
                            report, "-o", model)
                test.assertEqual(r.returncode, 0, r.stderr)
                with open(report) as f:
                    self.rewrite[mode] = json.load(f)
            log = os.path.join(tmp, f"{mode}.csv")
            r = run_mpc("run", model, "--train", "--data", data, "--batch", 32, "--steps", steps,
                        "--seed", seed, "--holdout", 0.2, "--eval-every", steps, "--log", log)
            test.assertEqual(r.returncode, 0, f"{name} {mode}: {r.stderr}")
            self.logs[mode], self.out[mode] = read_log(log), r.stdout + r.stderr

    def losses(self, mode):
        return np.array([float(row["loss"]) for row in self.logs[mode]])

    def tail(self, mode):
        return float(self.losses(mode)[-(self.steps // 6):].mean())

    def tolerance(self):
        """How far a 16-bit run's tail loss and held-out accuracy may lie from fp32's: the
        batch-order noise (1.5 times the distance between the fp32 runs with seeds 3 and 4)
        or 10% + 0.01 of the loss and 5 points of accuracy, whichever is larger."""
        base, acc = self.tail("fp32"), self.accuracy("fp32")
        return (max(0.1 * base + 0.01, 1.5 * abs(self.tail("fp32@4") - base)),
                max(0.05, 1.5 * abs(self.accuracy("fp32@4") - acc)))

    def accuracy(self, mode):
        return float([row["eval_accuracy"] for row in self.logs[mode]
                      if row["eval_accuracy"]][-1])

    def skipped(self, test, mode):
        """The skipped steps, checked to agree between the log, the per-step lines and the
        final line."""
        rows = self.logs[mode]
        logged = [int(row["step"]) for row in rows if row["skipped"] == "1"]
        lines = [int(s) for s in re.findall(r"^step (\d+) skipped: ", self.out[mode], re.M)]
        test.assertEqual(lines, logged, f"{mode}: skipped-step lines vs the log")
        final = re.findall(r"^final: .* skipped (\d+)", self.out[mode], re.M)
        test.assertEqual(final, [str(len(logged))], self.out[mode][-500:])
        return logged


class AmpArchitectures(unittest.TestCase):
    def check(self, name):
        steps = 300
        with tempfile.TemporaryDirectory() as tmp:
            runs = Runs(self, tmp, name, steps)
        first, base = runs.losses("fp32")[0], runs.tail("fp32")
        self.assertLess(base, 0.5 * first, f"{name}: fp32 did not learn")
        tol, acc_tol = runs.tolerance()
        report = [f"fp32 {first:.4f} -> {base:.4f} acc {runs.accuracy('fp32'):.3f} (seed 4: "
                  f"{runs.tail('fp32@4'):.4f}, {runs.accuracy('fp32@4'):.3f})"]
        for mode in ("fp16", "bf16"):
            nodes = runs.rewrite[mode]["nodes"]
            ops = {n["op"] for n in nodes if n["color"] == "allow"}
            # The heavy ops and their gradients run in 16 bits, except (bf16) where the op's
            # ONNX schema at opset 17 has no bfloat16 (Conv, LSTM, GRU); the loss stays fp32.
            heavy = [n for n in nodes if n["op"].split("::")[-1] in HEAVY]
            no_schema = sorted({n["op"] for n in heavy if n["color"] != "allow" and
                                n["reason"] == "schema does not accept the target type"})
            self.assertEqual([n["name"] for n in heavy
                              if n["color"] != "allow" and n["op"] not in no_schema], [])
            self.assertLessEqual(set(no_schema), set() if mode == "fp16" else BF16_KEPT)
            self.assertFalse({"SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLossGrad"} & ops)
            converted = (f"{len([n for n in nodes if n['color'] == 'allow'])}/{len(nodes)} "
                         "nodes 16-bit")
            if no_schema:
                converted += f", {', '.join(no_schema)} fp32"
            loss = runs.losses(mode)
            self.assertTrue(np.isfinite(loss).all(), f"{name} {mode}: non-finite loss")
            self.assertLessEqual(loss[len(loss) // 2:].max(), 1.5 * loss[0],
                                 f"{name} {mode} diverged")
            skipped = runs.skipped(self, mode)
            self.assertLessEqual(len(skipped), 0.02 * steps, f"{name} {mode}: {skipped}")
            # One-sided: a 16-bit run must reach fp32's loss and accuracy within the noise;
            # ending better than fp32 is noise too (MobileNetV2's float32 training is
            # chaotic, and two fp32 seeds under-estimate its spread).
            tail = runs.tail(mode)
            self.assertLessEqual(tail - base, tol,
                                 f"{name} {mode}: final loss {tail} vs fp32 {base}")
            acc = runs.accuracy(mode)
            self.assertLessEqual(runs.accuracy("fp32") - acc, acc_tol, f"{name} {mode}")
            report.append(f"{mode} {tail:.4f} acc {acc:.3f} skipped {len(skipped)} "
                          f"({converted})")
        print(f"  {name}: " + "; ".join(report) + f"; tolerances {tol:.4f}, {acc_tol:.3f}")

    def test_skipped_steps_while_the_scale_backs_off(self):
        """fp16 with the scale starting at 2^24 on the encoder block: the first steps
        overflow and are skipped, each line naming the halved scale, then none is."""
        steps = 300
        with tempfile.TemporaryDirectory() as tmp:
            runs = Runs(self, tmp, "encoder_block", steps,
                        ("--loss-scale-init", 2 ** 24), ("fp32", "fp32@4", "fp16"))
        skipped = runs.skipped(self, "fp16")
        backoff = 0
        while backoff + 1 in skipped:
            backoff += 1
        self.assertGreater(backoff, 0)
        self.assertLessEqual(len(skipped) - backoff, 0.02 * steps, skipped)
        # The scale halves at every skipped step and stays otherwise (the growth interval,
        # 2000 clean steps, is not reached); each skipped step's line says so.
        scale = 2.0 ** 24
        for row in runs.logs["fp16"]:
            step, before = int(row["step"]), scale
            if step in skipped:
                scale /= 2
                self.assertRegex(runs.out["fp16"], rf"(?m)^step {step} skipped: non-finite "
                                 rf"gradient of .*; loss scale {re.escape(f'{before:g}')} -> "
                                 rf"{re.escape(f'{scale:g}')}$")
            self.assertEqual(float(row["loss_scale"]), scale, row)
        tail, base = runs.tail("fp16"), runs.tail("fp32")
        self.assertLessEqual(tail - base, runs.tolerance()[0])
        print(f"  encoder_block fp16 from 2^24: steps {skipped} skipped, scale {scale:g} at the "
              f"end; final loss {tail:.4f} vs fp32 {base:.4f}")


def add_tests():
    for name in ARCHS:
        setattr(AmpArchitectures, f"test_{name}", lambda self, n=name: self.check(n))


add_tests()


def main():
    quick = "--quick" in sys.argv
    if quick:
        sys.argv.remove("--quick")

    def set_args(args):
        global ARGS
        ARGS = args
        tm.set_args(args)
        if quick:
            for name in ARCHS:
                if name not in QUICK:
                    delattr(AmpArchitectures, f"test_{name}")
    return tl.test_main((AmpArchitectures,), set_args)


if __name__ == "__main__":
    sys.exit(main())
