#!/usr/bin/env python3
"""The common real architectures run on the GPU with no CPU fallback, decided without a GPU.

    python3 tests/cuda_host/test_family_placement.py --mpc build/tools/mpc --source-dir . [-v]

`mpc run MODEL --device cuda --placement-only` prints the placement the CUDA backend makes
for a static plan (the kernel table's decision with every shape and folded value known),
without running anything: `cuda: N nodes; cpu fallback: none`, or the fallback's op list.
This suite asserts `cpu fallback: none` for

  * the PyTorch exports of tests/train/torch_fixtures (ResNet-18, MobileNetV2, an
    EfficientNet MBConv block, BERT-, GPT-, T5- and ViT-like encoders, a transformer
    encoder, LSTM and GRU classifiers, ...: every model of manifest.json), and
  * the ONNX backend's light models (AlexNet, DenseNet-121, Inception v1/v2, ResNet-50,
    ShuffleNet, SqueezeNet, VGG-19, ZFNet-512: opset 9 exports whose Dropout predates the
    boolean mask), when the onnx wheel ships them,

and a model of LpPool, GlobalLpPool and FusedMatMul with transBatchA/B (the kernels added
last), each as exported (fp32) and after `mpc rewrite` to fp16 and to bf16; and, for every fixture,
its training step (`mpc train-graph` with cross-entropy, Adam and the manifest's flags, then
fp32, the fp16 rewrite with dynamic loss scaling and the bf16 rewrite) through
`mpc run --train --data NAME.data.npz --batch 8 --device cuda --placement-only`. A model
that has a node the CUDA backend cannot take fails with the placement line naming the ops.
The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when onnx
is missing.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import mpc_trainlib as tl  # noqa: E402

try:
    import onnx
except ImportError as e:  # pragma: no cover
    print(f"onnx is required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

ARGS = None
NONE = re.compile(r"^cuda: [0-9]+ nodes; cpu fallback: none\n$")
# Sizes of the symbolic dimensions of the fixtures (batch, sequence): the sequence length
# the fixtures were exported and trained with.
DIMS = ["--dim", "N=2", "--dim", "T=6"]


def mpc(*args):
    return subprocess.run([ARGS.mpc, *args], capture_output=True, text=True, timeout=300)


FIXTURES = os.path.join(HERE, "..", "train", "torch_fixtures")


def fixture_models():
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        models = json.load(f)["models"]
    return [(n, os.path.join(FIXTURES, n + ".onnx"), e["train_graph_flags"])
            for n, e in models.items()]


def light_models():
    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    if not os.path.isdir(folder):
        return []
    return [(f[len("light_"):-len(".onnx")], os.path.join(folder, f))
            for f in sorted(os.listdir(folder)) if f.endswith(".onnx")]


class FamilyPlacement(unittest.TestCase):
    def check(self, path, run_args, variants=("fp32", "fp16", "bf16")):
        with tempfile.TemporaryDirectory() as tmp:
            for variant in variants:
                model = path
                if variant != "fp32":
                    model = os.path.join(tmp, f"{variant}.onnx")
                    r = mpc("rewrite", path, "-o", model, "--target", variant)
                    self.assertEqual(r.returncode, 0, f"{variant} rewrite: {r.stderr}")
                r = mpc("run", model, *run_args, "--device", "cuda", "--placement-only")
                self.assertEqual(r.returncode, 0, f"{variant}: {r.stderr}")
                self.assertRegex(r.stdout, NONE, f"{variant}: {r.stdout}")

    def check_training(self, name, path, flags):
        with tempfile.TemporaryDirectory() as tmp:
            step = os.path.join(tmp, f"{name}.train.onnx")
            r = mpc("train-graph", path, "--loss", "cross-entropy", "--optimizer", "adam",
                    *flags, "-o", step)
            self.assertEqual(r.returncode, 0, f"train-graph: {r.stderr}")
            data = os.path.join(FIXTURES, f"{name}.data.npz")
            self.check(step, ["--train", "--data", data, "--batch", "8"])


def gap_ops_model(path):
    """A model of the ops the CUDA backend took last (runtime/cuda/README.md's kernel list):
    LpPool (p 2, padded, strided; opset 18 with dilations), GlobalLpPool (p 3) and
    com.microsoft FusedMatMul with transBatchA and transBatchB."""
    from onnx import TensorProto, helper
    ms = "com.microsoft"
    nodes = [
        helper.make_node("LpPool", ["x"], ["p1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("LpPool", ["p1"], ["p2"], kernel_shape=[2, 2], dilations=[2, 1],
                         ceil_mode=1, p=1),
        helper.make_node("GlobalLpPool", ["p2"], ["g"], p=3),
        helper.make_node("FusedMatMul", ["a", "b"], ["m"], domain=ms, transBatchA=1,
                         transBatchB=1, transB=1, alpha=0.5),
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "gaps",
        [helper.make_tensor_value_info("x", f, [2, 3, 9, 9]),
         helper.make_tensor_value_info("a", f, [4, 2, 3, 8]),
         helper.make_tensor_value_info("b", f, [5, 2, 3, 8])],
        [helper.make_tensor_value_info("g", f, None), helper.make_tensor_value_info("m", f, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid(ms, 1)])
    model.ir_version = 9
    onnx.save(model, path)


def _add_tests():
    def gap_ops(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "gaps.onnx")
            gap_ops_model(path)
            self.check(path, ["--random-inputs"])
    FamilyPlacement.test_gap_ops = gap_ops
    fixtures = fixture_models()
    for name, path, flags in fixtures:  # (embedding_bag, exported with a Loop, is not listed)
        setattr(FamilyPlacement, f"test_fixture_{name}",
                lambda self, p=path: self.check(p, ["--random-inputs", *DIMS]))
        setattr(FamilyPlacement, f"test_training_{name}",
                lambda self, n=name, p=path, f=flags: self.check_training(n, p, f))
    for name, path in light_models():
        setattr(FamilyPlacement, f"test_light_{name}",
                lambda self, p=path: self.check(p, ["--random-inputs", *DIMS]))


_add_tests()


def _set_args(args):
    global ARGS
    ARGS = args


if __name__ == "__main__":
    sys.exit(tl.test_main((FamilyPlacement,), _set_args))
