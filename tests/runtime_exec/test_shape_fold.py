#!/usr/bin/env python3
"""Shape arithmetic folded by the static plan, through `mpc run`.

    python3 tests/runtime_exec/test_shape_fold.py --mpc build/tools/mpc [--source-dir .] [-v]

A model written the way torch.onnx exports one (built here with onnx.helper): the
bounds of a Slice, the target of a Reshape, the shape of an Expand, the pads of a Pad,
the axes of a ReduceSum, the repeats of a Tile and the limit of a Range all computed by
small int64 subgraphs over Shape (Shape -> Gather -> Div/Mul/Sub -> Unsqueeze -> Concat,
Slice of a shape, Equal/Where on a dimension, Cast, ConstantOfShape). Checked:
  * outputs against onnxruntime, for two input shapes (each run is a new plan);
  * `--profile`: only the nodes that compute tensors run (the shape nodes are folded
    while planning and never launched);
  * `--device cuda --placement-only` (the CUDA kernel table's placement, decided
    without a GPU): every launched node on the device (their Slice bounds, Pad pads and
    ReduceSum axes are folded values);
  * --placement-only's refusals: one line, exit 2 (usage) or 1 (a model in dynamic mode).

The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when
onnx, numpy or onnxruntime is missing.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"onnx, numpy and onnxruntime are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None


def mpc(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


# The nodes that compute tensors (launched); every other node is shape arithmetic.
LAUNCHED = ["slice", "reshape", "unsqueeze", "expand", "pad", "reduce", "tile", "relu",
            "range_add"]


def exported_model():
    """x: [b, t, d] -> sum [b, 3 + pad], tiled [..], ramp [t]."""
    N = helper.make_node
    nodes = [
        N("Shape", ["x"], ["s"], name="shape"),
        N("Gather", ["s", "c2"], ["d"], axis=0, name="gather_d"),          # scalar
        N("Div", ["d", "c2"], ["half"], name="div"),
        N("Unsqueeze", ["half", "ax0"], ["half1"], name="unsq_half"),
        N("Slice", ["x", "z1", "half1", "two1"], ["xs"], name="slice"),
        N("Slice", ["s", "z1", "two1"], ["bt"], name="slice_shape"),
        N("Gather", ["bt", "c1"], ["t"], axis=0, name="gather_t"),
        N("Mul", ["t", "half"], ["th"], name="mul"),
        N("Unsqueeze", ["th", "ax0"], ["th1"], name="unsq_th"),
        N("Gather", ["s", "c0"], ["b"], axis=0, name="gather_b"),
        N("Unsqueeze", ["b", "ax0"], ["b1"], name="unsq_b"),
        N("Concat", ["b1", "th1"], ["target"], axis=0, name="concat_target"),
        N("Reshape", ["xs", "target"], ["r"], name="reshape"),
        N("Unsqueeze", ["r", "one1"], ["u"], name="unsqueeze"),
        N("Concat", ["b1", "three1", "th1"], ["eshape"], axis=0, name="concat_eshape"),
        N("Expand", ["u", "eshape"], ["e"], name="expand"),
        N("Equal", ["b", "c2"], ["is2"], name="equal"),
        N("Where", ["is2", "c2", "c1"], ["padend"], name="where"),
        N("Unsqueeze", ["padend", "ax0"], ["padend1"], name="unsq_pad"),
        N("Concat", ["z1", "z1", "z1", "z1", "padend1", "z1"], ["pads"], axis=0,
          name="concat_pads"),
        N("Pad", ["e", "pads"], ["p"], name="pad"),
        N("Shape", ["s"], ["rank"], name="rank"),
        N("Sub", ["rank", "one1"], ["last"], name="sub"),
        N("ReduceSum", ["p", "last"], ["sum"], keepdims=0, name="reduce"),
        N("Concat", ["one1", "padend1", "one1"], ["reps"], axis=0, name="concat_reps"),
        N("Tile", ["p", "reps"], ["tl"], name="tile"),
        N("Relu", ["tl"], ["tiled"], name="relu"),
        N("Unsqueeze", ["t", "ax0"], ["t1"], name="unsq_t"),
        N("ConstantOfShape", ["t1"], ["halves"],
          value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5]), name="cos"),
        N("Range", ["c0", "t", "c1"], ["steps"], name="range"),
        N("Cast", ["steps"], ["stepsf"], to=TensorProto.FLOAT, name="cast"),
        N("Add", ["stepsf", "halves"], ["ramp_pre"], name="add_shape"),
        N("Add", ["ramp_pre", "xrow"], ["ramp"], name="range_add"),
    ]
    inits = [i64("c0", 0), i64("c1", 1), i64("c2", 2), i64("ax0", [0]), i64("z1", [0]),
             i64("one1", [1]), i64("two1", [2]), i64("three1", [3])]
    g = helper.make_graph(
        nodes, "exported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", "d"]),
         helper.make_tensor_value_info("xrow", TensorProto.FLOAT, ["t"])],
        [helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["b", "rows"]),
         helper.make_tensor_value_info("tiled", TensorProto.FLOAT, ["n", "m", "k"]),
         helper.make_tensor_value_info("ramp", TensorProto.FLOAT, ["t"])],
        inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def dynamic_model():
    """A NonZero (its output shape depends on values): the model runs in dynamic mode."""
    N = helper.make_node
    g = helper.make_graph(
        [N("NonZero", ["x"], ["y"], name="nonzero")], "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, "nz"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


class ShapeFold(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.model = os.path.join(self.dir, "exported.onnx")
        self.proto = exported_model()
        onnx.save(self.proto, self.model)

    def tearDown(self):
        self.tmp.cleanup()

    def inputs(self, shape, seed):
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, size=shape).astype(np.float32)
        xrow = rng.uniform(-1, 1, size=[shape[1]]).astype(np.float32)
        paths = []
        for name, a in (("x", x), ("xrow", xrow)):
            p = os.path.join(self.dir, f"{name}.npy")
            np.save(p, a)
            paths += ["--input", f"{name}={p}"]
        return {"x": x, "xrow": xrow}, paths

    def test_outputs_match_onnxruntime_for_two_shapes(self):
        sess = ort.InferenceSession(self.proto.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        for k, shape in enumerate(([2, 3, 8], [5, 4, 6])):
            feeds, args = self.inputs(shape, k)
            out = os.path.join(self.dir, f"out{k}")
            r = mpc("run", self.model, *args, "--outputs", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            want = dict(zip(["sum", "tiled", "ramp"], sess.run(None, feeds)))
            for name, w in want.items():
                got = np.load(os.path.join(out, f"{name}.npy"))
                self.assertEqual(got.shape, w.shape, f"{name} for {shape}")
                if name == "sum":  # a float sum in another order
                    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
                else:  # data movement, Relu and one Add: exact
                    np.testing.assert_array_equal(got, w, f"{name} for {shape}")

    def test_shape_nodes_never_run(self):
        _, args = self.inputs([2, 3, 8], 0)
        r = mpc("run", self.model, *args, "--profile", "--repeat", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"profile: {len(LAUNCHED)} node(s)", r.stdout)
        # The ten slowest are listed: here every launched node, and nothing else.
        listed = re.findall(r"node '([^']+)'", r.stdout)
        self.assertEqual(sorted(listed), sorted(LAUNCHED), r.stdout)

    def test_placement_puts_the_folded_consumers_on_the_device(self):
        _, args = self.inputs([2, 3, 8], 0)
        r = mpc("run", self.model, *args, "--device", "cuda", "--placement-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"cuda: {len(LAUNCHED)} nodes; cpu fallback: none\n")
        self.assertEqual(r.stderr, "")

    def test_dynamic_mode_is_refused(self):
        path = os.path.join(self.dir, "dynamic.onnx")
        onnx.save(dynamic_model(), path)
        r = mpc("run", path, "--random-inputs", "--device", "cuda", "--placement-only")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("--placement-only", r.stderr)
        self.assertIn("dynamic mode", r.stderr)
        self.assertEqual(r.stdout, "")

    def test_refusals(self):
        for extra, what in (([], "applies to --device cuda only"),
                            (["--device", "cuda", "--no-fallback"], "not with --no-fallback"),
                            (["--device", "cuda", "--profile"], "runs nothing"),
                            (["--device", "cuda", "--compare-device", "cpu"], "runs nothing")):
            r = mpc("run", self.model, "--random-inputs", "--placement-only", *extra)
            self.assertEqual(r.returncode, 2, f"{extra}: {r.stderr}")
            self.assertIn(what, r.stderr)
            self.assertEqual(r.stdout, "")


def main():
    global MPC
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", default=".")
    ap.add_argument("-v", action="store_true")
    ap.add_argument("-k", default=None)
    args = ap.parse_args()
    MPC = os.path.abspath(args.mpc)
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [f"*{args.k}*"]
    suite = loader.loadTestsFromTestCase(ShapeFold)
    res = unittest.TextTestRunner(verbosity=2 if args.v else 1).run(suite)
    failed = len(res.failures) + len(res.errors)
    print(f"{res.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
