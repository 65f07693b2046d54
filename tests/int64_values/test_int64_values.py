#!/usr/bin/env python3
"""Integer values that drive shapes, indices and trip counts, read exactly as int64.

    python3 tests/int64_values/test_int64_values.py --mpc build/tools/mpc --source-dir . [-v] [-k PATTERN]

Exporters write INT64_MAX and INT64_MIN for "to the end"; read through a double they become
2^63 (undefined as int64). Each case is a small model run with `mpc run` and compared exactly
with onnxruntime: Slice with INT64_MAX/INT64_MIN bounds, negative and huge steps; a Loop with
trip count INT64_MAX that its condition stops; Range, Tile, Expand, ConstantOfShape, Gather,
TopK, Pad, Reshape, Unsqueeze, Split and OneHot with int64 operands. The last line printed is
'N passed, N failed'; exit status 1 on any failure, 77 when numpy, onnx or onnxruntime is
missing.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError as e:  # pragma: no cover
    print(f"numpy, onnx and onnxruntime are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)

MPC = None
TESTLIB = None
TIMEOUT_S = 120
MAX = 2 ** 63 - 1
MIN = -2 ** 63
I64 = TensorProto.INT64
F32 = TensorProto.FLOAT


def ints(name, values, shape=None):
    values = list(values)
    return helper.make_tensor(name, I64, [len(values)] if shape is None else shape, values)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


class Int64Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def run_both(self, m, feeds):
        """Runs `m` with mpc and onnxruntime; asserts equal outputs (shape, dtype, values)."""
        want = ort.InferenceSession(m.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
        work = self.tmp.name
        path = os.path.join(work, "m.onnx")
        onnx.save(m, path)
        args = [MPC, "run", path, "--outputs", os.path.join(work, "out")]
        for name, arr in feeds.items():
            f = os.path.join(work, f"in_{name}.npy")
            np.save(f, arr)
            args += ["--input", f"{name}={f}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
        r = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        for out, ref in zip(m.graph.output, want):
            got = np.load(os.path.join(work, "out", f"{out.name}.npy"))
            self.assertEqual(got.shape, ref.shape, out.name)
            self.assertEqual(got.dtype, ref.dtype, out.name)
            np.testing.assert_array_equal(got, ref, err_msg=out.name)

    def slice_case(self, starts, ends, steps, axes=None, shape=(10,)):
        axes = list(range(len(starts))) if axes is None else axes
        m = model([helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
                  [vi("x", F32, list(shape))], [vi("y", F32, None)],
                  [ints("s", starts), ints("e", ends), ints("a", axes), ints("t", steps)])
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        self.run_both(m, {"x": x})

    def test_slice_to_int64_max(self):
        self.slice_case([0], [MAX], [1])
        self.slice_case([3], [MAX], [2])
        self.slice_case([MIN], [MAX], [1])
        self.slice_case([1, 0], [MAX, MAX], [1, 1], shape=(3, 4))

    def test_slice_negative_steps(self):
        self.slice_case([MAX], [MIN], [-1])
        self.slice_case([-1], [MIN], [-3])
        self.slice_case([7], [2], [-2])
        self.slice_case([-15], [-20], [-1])  # start clamps to 0 (the spec): one element
        self.slice_case([MAX], [MIN], [MIN])
        self.slice_case([MIN], [MAX], [MAX])

    def test_loop_with_int64_max_trips_stops_on_its_condition(self):
        # body: i -> (i < 4, acc + 1); scan output: the iteration number.
        body = helper.make_graph(
            [helper.make_node("Constant", [], ["four"], value=ints("c4", [4], [])),
             helper.make_node("Constant", [], ["one"], value=ints("c1", [1], [])),
             helper.make_node("Less", ["i", "four"], ["cond_out"]),
             helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
             helper.make_node("Identity", ["i"], ["scan"])],
            "body", [vi("i", I64, []), vi("cond_in", TensorProto.BOOL, []),
                     vi("acc_in", I64, [])],
            [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", I64, []), vi("scan", I64, [])])
        m = model([helper.make_node("Loop", ["trips", "cond", "acc0"], ["acc", "iters"],
                                    body=body)],
                  [vi("acc0", I64, [])], [vi("acc", I64, []), vi("iters", I64, None)],
                  [ints("trips", [MAX], []),
                   helper.make_tensor("cond", TensorProto.BOOL, [], [True])])
        self.run_both(m, {"acc0": np.array(10, dtype=np.int64)})

    def test_range_with_int64_bounds(self):
        for start, limit, delta in [(0, MAX, MAX // 2), (MAX, MIN, MIN), (MAX - 3, MAX, 1),
                                    (MIN, MIN + 7, 3), (5, -5, -4)]:
            with self.subTest(start=start, limit=limit, delta=delta):
                m = model([helper.make_node("Range", ["a", "b", "c"], ["y"])], [],
                          [vi("y", I64, None)],
                          [ints("a", [start], []), ints("b", [limit], []),
                           ints("c", [delta], [])])
                self.run_both(m, {})

    def test_large_int64_values_flow_through(self):
        # Values near INT64_MAX (not representable as a double) survive the data ops.
        big = np.array([MAX, MAX - 1, MIN + 1, 2 ** 53 + 1], dtype=np.int64)
        cases = [
            ("Tile", [ints("r", [2])]), ("Expand", [ints("r", [2, 4], [2])]),
            ("Gather", [ints("r", [3, -4, 0], [3])]), ("Unsqueeze", [ints("r", [0])]),
        ]
        for op, inits in cases:
            with self.subTest(op=op):
                m = model([helper.make_node(op, ["x", "r"], ["y"])], [vi("x", I64, [4])],
                          [vi("y", I64, None)], inits)
                self.run_both(m, {"x": big})

    def test_shape_operands_read_as_int64(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        cases = [
            ("TopK", ["x", "k"], [ints("k", [2])], 2, {"axis": 1}),
            ("Pad", ["x", "p"], [ints("p", [0, 1, 2, 0])], 1, {}),
            ("Reshape", ["x", "p"], [ints("p", [2, -1, 3])], 1, {}),
            ("Split", ["x", "p"], [ints("p", [1, 3])], 2, {"axis": 1}),
        ]
        for op, ins, inits, nout, attrs in cases:
            with self.subTest(op=op):
                outs = [f"y{i}" for i in range(nout)]
                m = model([helper.make_node(op, ins, outs, **attrs)], [vi("x", F32, [3, 4])],
                          [vi(o, F32 if op != "TopK" or i == 0 else I64, None)
                           for i, o in enumerate(outs)], inits)
                self.run_both(m, {"x": x})
        m = model([helper.make_node("ConstantOfShape", ["s"], ["y"],
                                    value=ints("v", [MAX - 5], [1]))],
                  [], [vi("y", I64, None)], [ints("s", [2, 3])])
        self.run_both(m, {})
        m = model([helper.make_node("OneHot", ["i", "d", "v"], ["y"])],
                  [vi("i", I64, [3])], [vi("y", I64, None)],
                  [ints("d", [5], []), ints("v", [MIN, MAX])])
        self.run_both(m, {"i": np.array([0, 4, -1], dtype=np.int64)})


def main():
    global MPC, TESTLIB
    p = argparse.ArgumentParser()
    p.add_argument("--mpc", required=True)
    p.add_argument("--source-dir", default=".")
    p.add_argument("-v", action="store_true")
    p.add_argument("-k", default=None)
    args = p.parse_args()
    MPC = os.path.abspath(args.mpc)
    sys.path.insert(0, os.path.join(args.source_dir, "tests", "python"))
    import mpc_testlib
    TESTLIB = mpc_testlib
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [f"*{args.k}*"]
    suite = loader.loadTestsFromTestCase(Int64Case)
    return mpc_testlib.run_suite(suite, verbosity=2 if args.v else 1)


if __name__ == "__main__":
    sys.exit(main())
