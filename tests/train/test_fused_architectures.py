"""The fused training forms on the PyTorch exports of tests/train/torch_fixtures, the user's
path, against the primitive graphs:

    mpc train-graph NAME.onnx --loss cross-entropy [the manifest's flags] --optimizer OPT
        [--fused-optimizer] -o T.onnx
    mpc rewrite T.onnx [--target bf16] [--fused-unscale] [--multi-tensor-optimizer] -o R.onnx
        (fp16: dynamic loss scaling)
    mpc run R.onnx --train --data d.npz --batch B --steps 6 --shuffle none --holdout 0 \\
        --log L.csv --checkpoint CK

docs/training.md promises that `--fused-optimizer` (one SGDStep/MomentumStep/AdamStep node
per parameter) trains bit for bit as the element-wise update does, and `--fused-unscale` (one
MultiTensorUnscale node) as the per-gradient unscale and check nodes do. test_fused_optimizer.py
and test_fused_unscale.py check that on the digits models; here every architecture of the
fixtures (ResNet, MobileNet, EfficientNet, BERT, GPT, T5, ViT, LSTM, GRU, embeddings: shared
weights, BatchNorm state, parameters of rank 1 to 4) is trained in fp32, fp16 with and
without the fused unscale, and bf16, with and without the fused optimizer, and in fp16 with
the fused unscale and the fused steps merged by `--multi-tensor-optimizer`: the logs and every
trained parameter of the checkpoints must be byte-identical to the primitive graph's.

--quick (the default ctest run): the MobileNetV2 block, the GRU and the GPT decoder with Adam.
Without it (ctest -C full, train_fused_architectures_full): every fixture model with Adam and
with momentum.
Prints "N passed, N failed[, N skipped]".
"""
import json
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
from onnx import numpy_helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402

FIXTURES = os.path.join(HERE, "torch_fixtures")
QUICK = ("mobilenet_block", "gru_last", "gpt")
STEPS = 6
ARGS = None

# (name, rewrite flags); None: the training graph itself (fp32).
PRECISIONS = (("fp32", None), ("fp16", []), ("fp16 fused unscale", ["--fused-unscale"]),
              ("fp16 multi-tensor", ["--fused-unscale", "--multi-tensor-optimizer"]),
              ("bf16", ["--target", "bf16"]))
# Compared with the primitive graph of another precision: the same steps in other nodes.
BASE = {"fp16 fused unscale": "fp16", "fp16 multi-tensor": "fp16"}
# Built from the fused optimizer's graph only (it merges the fused steps).
FUSED_ONLY = {"fp16 multi-tensor"}


def manifest():
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        return json.load(f)


def mpc(*args):
    return subprocess.run([ARGS.mpc, *args], capture_output=True, text=True, timeout=600)


class FusedArchitectures(unittest.TestCase):
    def train(self, tmp, name, opt, fused, precision, flags):
        """The run's log text and {trained parameter: its bytes} from the checkpoint."""
        m = manifest()
        entry = m["models"][name]
        tag = f"{opt}.{int(fused)}"
        train = os.path.join(tmp, f"{tag}.train.onnx")
        if not os.path.exists(train):
            r = mpc("train-graph", os.path.join(FIXTURES, f"{name}.onnx"), "--loss",
                    "cross-entropy", *entry["train_graph_flags"], *entry["optimizers"][opt],
                    *(["--fused-optimizer"] if fused else []), "-o", train)
            self.assertEqual(r.returncode, 0, r.stderr)
        model = train
        if flags is not None:
            model = os.path.join(tmp, f"{tag}.{precision.replace(' ', '_')}.onnx")
            r = mpc("rewrite", train, *flags, "-o", model)
            self.assertEqual(r.returncode, 0, r.stderr)
            if "--multi-tensor-optimizer" in flags:  # every step merged into one node
                self.assertRegex(r.stderr, r"Multi-tensor optimizer: \d+ fused step\(s\) merged "
                                           r"into 1 node\(s\) \(0 left per-parameter\)")
        data = dict(np.load(os.path.join(FIXTURES, f"{name}.data.npz")))
        labels = tl.metadata(onnx.load(train, load_external_data=False))["mpc.training.labels"]
        data[labels] = data.pop("labels")
        npz = os.path.join(tmp, "data.npz")
        np.savez(npz, **data)
        log = model + ".log.csv"
        ck = model + ".ck"
        r = mpc("run", model, "--train", "--data", npz, "--batch", str(m["batch"]), "--steps",
                str(STEPS), "--shuffle", "none", "--holdout", "0", "--log", log,
                "--checkpoint", ck)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(log) as f:
            text = f.read()
        trained = {p for p, _ in tl.gradient_pairs(onnx.load(train, load_external_data=False))}
        graph = onnx.load(os.path.join(ck, "checkpoint.onnx")).graph
        params = {t.name: numpy_helper.to_array(t).tobytes() for t in graph.initializer
                  if t.name in trained}
        self.assertEqual(set(params), trained, "every trained parameter is in the checkpoint")
        return text, params

    def check(self, name, opt):
        with tempfile.TemporaryDirectory() as tmp:
            runs = {}
            for precision, flags in PRECISIONS:
                for fused in ((True,) if precision in FUSED_ONLY else (False, True)):
                    runs[precision, fused] = self.train(tmp, name, opt, fused, precision, flags)
        for (precision, fused), (log, params) in runs.items():
            # The primitive graph of the same precision, or of BASE's.
            base_precision = BASE.get(precision, precision)
            if (base_precision, False) == (precision, fused):
                continue
            base_log, base_params = runs[base_precision, False]
            what = f"{name} {opt} {precision}{' fused optimizer' if fused else ''}"
            rows = len(log.splitlines()) - 1
            self.assertEqual(rows, STEPS, f"{what}: one log row per step")
            self.assertEqual(log, base_log, f"{what}: log differs from the primitive graph's")
            for p, b in params.items():
                self.assertEqual(b, base_params[p], f"{what}: parameter '{p}' differs")


def register():
    for name, entry in manifest()["models"].items():
        for opt in ("adam", "momentum"):
            if opt in entry["optimizers"]:
                setattr(FusedArchitectures, f"test_{name}_{opt}",
                        lambda self, n=name, o=opt: self.check(n, o))


register()


def main():
    if "--quick" in sys.argv:
        sys.argv.remove("--quick")
        for test in [t for t in dir(FusedArchitectures) if t.startswith("test_")]:
            if not any(test == f"test_{n}_adam" for n in QUICK):
                delattr(FusedArchitectures, test)
    return tl.test_main((FusedArchitectures,), lambda args: globals().update(ARGS=args))


if __name__ == "__main__":
    sys.exit(main())
