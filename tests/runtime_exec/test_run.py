#!/usr/bin/env python3
"""End-to-end tests of `mpc run` against onnx.reference.ReferenceEvaluator.

    python3 tests/runtime_exec/test_run.py --mpc build/tools/mpc --source-dir . [-v] [-k PATTERN]

For each shipped model (models/*.onnx) and its `mpc rewrite` output (fp16 and bf16):
  * inputs written as .npy, outputs read back from --outputs, compared with the reference
    evaluator on the same model (fp32: rtol 1e-4; fp16 models against their own reference
    evaluation: relative L2 <= 1e-2; bf16 models, which onnx.reference cannot run, against
    the fp32 model's reference evaluation: relative L2 <= 5e-2);
  * `--compare` between a model and its rewrite: lines, exit status 0, and exit 1 when the
    tolerance is violated; integer outputs compared and printed exactly (INT64_MAX against
    INT64_MAX - 1 fails);
  * inputs from .npz and TensorProto .pb; --random-inputs reproducible by --seed;
  * sequence-typed inputs (SequenceProto .pb, .npz arr_0, arr_1, ..., empty) and outputs
    (DIR/NAME.pb SequenceProto) against the reference evaluator; --compare of sequences
    (same length required); bad sequence inputs (a TensorProto, wrong element type,
    corrupt .pb, --random-inputs): exit 1, one line, nothing written;
  * optional-typed inputs (OptionalProto .pb: empty, a tensor, a sequence) and outputs
    (DIR/NAME.pb OptionalProto): OptionalHasElement, and If over OptionalGetElement, against
    the reference evaluator; Optional and Identity of optionals against the spec (the
    reference evaluator mis-wraps them); --compare of optionals; bad optional inputs: exit
    1, one line, nothing written;
  * SequenceMap over a sequence and a tensor, two sequences (against the reference
    evaluator), two sequences and a tensor (against numpy), and empty sequences; sequences
    of different lengths: exit 1;
  * control flow: a Loop body whose shapes change from trip to trip (slice bounds carried
    by the loop, a Range bounded by the trip count) against the reference evaluator; Scan-8
    (batch axis, sequence_lens, a reversed scan input) against the spec's pseudo-code;
  * bad input (missing input, wrong shape, wrong dtype, corrupt .npy, compressed .npz, a
    header claiming a huge array, unsupported op, --device cuda): exit 1, one line on
    stderr naming the problem, nothing written.

The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when onnx
or numpy is missing.
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
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover
    print(f"onnx (with onnx.reference) and numpy are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None
SOURCE_DIR = None
MODELS = ("mlp", "cnn", "transformer", "lstm")
TIMEOUT_S = 300


def mpc(*args, check=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    r = subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=env)
    if check is not None and r.returncode != check:
        raise AssertionError(f"mpc {' '.join(map(str, args))}: exit {r.returncode}, "
                             f"expected {check}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def np_dtype(elem):
    return helper.tensor_dtype_to_np_dtype(elem)


def model_inputs(model, seed=0):
    """Random inputs for the declared (static) input shapes."""
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dt = np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.floating):
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(dt)
        else:
            feeds[i.name] = rng.integers(0, 10, shape).astype(dt)
    return feeds


def rel_l2(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    n = np.linalg.norm(b)
    return np.linalg.norm(a - b) / (n if n > 0 else 1.0)


class RunCase(unittest.TestCase):
    rewritten = {}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        for m in MODELS:
            src = os.path.join(SOURCE_DIR, "models", f"{m}.onnx")
            for target in ("fp16", "bf16"):
                out = os.path.join(cls.dir, f"{m}.{target}.onnx")
                mpc("rewrite", src, "-o", out, "--target", target, check=0)
                cls.rewritten[(m, target)] = out

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_model(self, path, feeds, extra=()):
        """Runs `mpc run` with .npy inputs; returns the outputs it wrote and stdout."""
        work = tempfile.mkdtemp(dir=self.dir)
        args = ["run", path]
        for name, arr in feeds.items():
            f = os.path.join(work, f"in_{name}.npy")
            np.save(f, arr)
            args += ["--input", f"{name}={f}"]
        outdir = os.path.join(work, "out")
        r = mpc(*args, "--outputs", outdir, *extra, check=0)
        model = onnx.load(path)
        outs = {}
        for o in model.graph.output:
            outs[o.name] = np.load(os.path.join(outdir, f"{o.name}.npy"))
        return outs, r.stdout

    def check_against_reference(self, path, rtol=None, l2=None):
        model = onnx.load(path)
        feeds = model_inputs(model)
        got, stdout = self.run_model(path, feeds)
        ref = ReferenceEvaluator(model).run(None, feeds)
        for o, want in zip(model.graph.output, ref):
            g = got[o.name]
            self.assertEqual(g.shape, want.shape, o.name)
            self.assertEqual(g.dtype, want.dtype, o.name)
            if rtol is not None:
                np.testing.assert_allclose(g, want, rtol=rtol, atol=rtol, err_msg=o.name)
            else:
                self.assertLessEqual(rel_l2(g, want), l2, o.name)
        self.assertIn("planned peak", stdout)
        self.assertIn("time: median", stdout)

    def test_fp32_models_match_reference(self):
        for m in MODELS:
            with self.subTest(model=m):
                self.check_against_reference(os.path.join(SOURCE_DIR, "models", f"{m}.onnx"),
                                             rtol=1e-4)

    def test_fp16_rewrites_match_their_reference(self):
        for m in MODELS:
            with self.subTest(model=m):
                self.check_against_reference(self.rewritten[(m, "fp16")], l2=1e-2)

    def test_bf16_rewrites_match_fp32_reference(self):
        # onnx.reference cannot run MatMul in bfloat16, so the oracle is the reference
        # evaluation of the original fp32 model on the same inputs.
        for m in MODELS:
            with self.subTest(model=m):
                src = os.path.join(SOURCE_DIR, "models", f"{m}.onnx")
                model = onnx.load(src)
                feeds = model_inputs(model)
                ref = ReferenceEvaluator(model).run(None, feeds)
                got, _ = self.run_model(self.rewritten[(m, "bf16")], feeds)
                for o, want in zip(model.graph.output, ref):
                    self.assertEqual(got[o.name].shape, want.shape, o.name)
                    self.assertLessEqual(rel_l2(got[o.name], want), 5e-2, o.name)

    def test_compare_within_tolerance(self):
        for m in MODELS:
            with self.subTest(model=m):
                src = os.path.join(SOURCE_DIR, "models", f"{m}.onnx")
                r = mpc("run", src, "--random-inputs", "--compare",
                        self.rewritten[(m, "fp16")], check=0)
                self.assertRegex(r.stdout, r"compare '.*': max abs error .* relative L2 "
                                 r"error .* tolerance 0.01 \(fp16\): ok")

    def test_compare_device(self):
        # The same model on another backend: on a machine without a GPU only the CPU is at
        # hand, so the two runs must agree bit for bit; the line names both sides.
        for m in MODELS:
            with self.subTest(model=m):
                src = os.path.join(SOURCE_DIR, "models", f"{m}.onnx")
                r = mpc("run", src, "--random-inputs", "--compare-device", "cpu", check=0)
                self.assertIn(f"compare: '{src}' on cpu against '{src}' on cpu\n", r.stdout)
                lines = [l for l in r.stdout.splitlines() if l.startswith("compare '")]
                self.assertTrue(lines)
                for line in lines:
                    self.assertRegex(line, r"max abs error 0\.000000e\+00, relative L2 error "
                                           r"0\.000000e\+00, tolerance 1e-05 \(f32\): ok$")
        # With --compare, OTHER runs on the named backend.
        src = os.path.join(SOURCE_DIR, "models", "mlp.onnx")
        r = mpc("run", src, "--random-inputs", "--compare", self.rewritten[("mlp", "fp16")],
                "--compare-device", "cpu", check=0)
        self.assertIn("tolerance 0.01 (fp16): ok", r.stdout)
        r = mpc("run", src, "--random-inputs", "--compare-device", "gpu", check=2)
        self.assertIn("--compare-device must be cpu or cuda, not 'gpu'", r.stderr)

    def test_profile(self):
        for m in MODELS:
            with self.subTest(model=m):
                src = os.path.join(SOURCE_DIR, "models", f"{m}.onnx")
                r = mpc("run", src, "--random-inputs", "--profile", "--repeat", "2", check=0)
                lines = r.stdout.splitlines()
                head = [i for i, l in enumerate(lines) if l.startswith("profile: ")]
                self.assertEqual(len(head), 2, r.stdout)
                # --repeat 2: the first run is a warm-up, left out of the times.
                match = re.match(r"profile: (\d+) node\(s\), ([0-9.]+) ms of node time per run "
                                 r"\(the last 1 run; the first, a warm-up, is left out\)$",
                                 lines[head[0]])
                self.assertTrue(match, lines[head[0]])
                rows = []
                for l in lines[head[0] + 1:]:
                    row = re.match(r"^ +([0-9.]+) ms +([0-9.]+)%  node '(.*)' \((\w+)\)$", l)
                    if not row:
                        break
                    rows.append((float(row.group(1)), float(row.group(2)), row.group(3)))
                names = {n.name for n in onnx.load(src).graph.node}
                self.assertEqual(len(rows), min(10, int(match.group(1))))
                self.assertEqual([r_[0] for r_ in rows], sorted((r_[0] for r_ in rows),
                                                                reverse=True))
                # Each share is printed to 0.01%: at most 0.005 high each (the float sum
                # of 33.34 + 33.34 + 33.33 is above 100.01).
                self.assertLessEqual(sum(r_[1] for r_ in rows), 100 + 0.005 * len(rows) + 1e-9)
                for _, _, name in rows:
                    self.assertIn(name, names)
                # Then the same node time by op type: the model's op types, counts summing
                # to the node count, the total that of the header (both to 0.001 ms).
                by = re.match(r"profile: node time by op type per run \(the warm-up left out\): "
                              r"([0-9.]+) ms in (\d+) node\(s\)$", lines[head[1]])
                self.assertTrue(by, lines[head[1]])
                self.assertEqual(by.group(2), match.group(1))
                self.assertAlmostEqual(float(by.group(1)), float(match.group(2)), delta=0.0011)
                types = {n.op_type for n in onnx.load(src).graph.node}
                counted = 0
                for l in lines[head[1] + 1:]:
                    row = re.match(r"^ +([0-9.]+) ms +([0-9.]+)%  (\w+) x(\d+)$", l)
                    if not row:
                        break
                    self.assertIn(row.group(3), types)
                    counted += int(row.group(4))
                self.assertLessEqual(counted, int(match.group(1)))
                if len(types) <= 15:
                    self.assertEqual(counted, int(match.group(1)))
                # One run: nothing to leave out, the header has no note.
                r1 = mpc("run", src, "--random-inputs", "--profile", check=0)
                self.assertRegex(r1.stdout, r"(?m)^profile: \d+ node\(s\), [0-9.]+ ms of node "
                                 r"time per run$")
                self.assertRegex(r1.stdout, r"(?m)^profile: node time by op type per run "
                                 r"\(every run\): ")

    def test_compare_out_of_tolerance_exits_1(self):
        # A model whose output is x + 1 compared with one computing x + 2.
        paths = []
        for k in (1.0, 2.0):
            g = helper.make_graph(
                [helper.make_node("Add", ["x", "c"], ["y"])], "g",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                [numpy_helper.from_array(np.full([4], k, np.float32), "c")])
            p = os.path.join(self.dir, f"add{k}.onnx")
            onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
            paths.append(p)
        r = mpc("run", paths[0], "--random-inputs", "--compare", paths[1], check=1)
        self.assertIn("FAIL", r.stdout)

    def const_model(self, name, dtype, values):
        """A model with no input whose output 'y' is the constant `values` (numpy dtype)."""
        arr = np.array(values, dtype)
        g = helper.make_graph(
            [helper.make_node("Identity", ["c"], ["y"])], "g", [],
            [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(arr.dtype),
                                           list(arr.shape))],
            [numpy_helper.from_array(arr, "c")])
        p = os.path.join(self.dir, name)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        return p

    def test_compare_integers_exactly(self):
        # INT64_MAX and INT64_MAX - 1 are the same double: compared through a double, they were
        # equal. Integer outputs are compared (and printed) exactly.
        big = 2 ** 63 - 1
        for dtype, a, b in ((np.int64, [big, 5], [big - 1, 5]),
                            (np.int64, [-2 ** 63, 0], [-2 ** 63 + 1, 0]),
                            (np.uint64, [2 ** 64 - 1], [2 ** 64 - 2]),
                            (np.int32, [7, 2 ** 31 - 1], [7, 2 ** 31 - 2])):
            with self.subTest(dtype=dtype.__name__, a=a):
                pa = self.const_model("a.onnx", dtype, a)
                pb = self.const_model("b.onnx", dtype, b)
                r = mpc("run", pa, "--compare", pb, check=1)
                self.assertRegex(r.stdout, r"compare 'y': max abs error 1\.0+e\+00, .* 1 "
                                 r"element\(s\) differ, tolerance 0 \(integers\): FAIL")
                self.assertIn(f"first [{', '.join(map(str, a))}]", r.stdout)
                self.assertEqual(r.stderr, "")
                r = mpc("run", pa, "--compare", pa, check=0)
                self.assertRegex(r.stdout, r"compare 'y': max abs error 0\.0+e\+00, .* 0 "
                                 r"element\(s\) differ, tolerance 0 \(integers\): ok")
        pa = self.const_model("a.onnx", np.int64, [big, -2 ** 63, 3])
        r = mpc("run", pa, check=0)
        self.assertIn(f"output 'y': i64 [3]  min {-2 ** 63} max {big} mean ", r.stdout)
        self.assertIn(f"first [{big}, {-2 ** 63}, 3]", r.stdout)

    def test_compare_non_finite_values(self):
        """The same NaN or infinity on both sides matches (numpy's assert_allclose with
        equal_nan): a model compared with itself on an input holding inf was a FAIL (inf - inf
        is NaN). A non-finite value on one side only is an infinite error, and a matched
        infinity must not hide a finite error elsewhere (it made the reference's norm
        infinite, so every relative error 0)."""
        inf, nan = float("inf"), float("nan")
        pa = self.const_model("a.onnx", np.float32, [inf, -inf, nan, 1.0])
        r = mpc("run", pa, "--compare", pa, check=0)
        self.assertRegex(r.stdout, r"compare 'y': max abs error 0\.0+e\+00, relative L2 error "
                                   r"0\.0+e\+00, .*: ok")
        for other, why in (([inf, -inf, nan, 2.0], "a finite error beside matched ones"),
                           ([inf, inf, nan, 1.0], "infinities of opposite signs"),
                           ([inf, -inf, 0.0, 1.0], "NaN on one side only"),
                           ([1.0, -inf, nan, 1.0], "an infinity on one side only")):
            with self.subTest(why=why):
                pb = self.const_model("b.onnx", np.float32, other)
                r = mpc("run", pa, "--compare", pb, check=1)
                self.assertRegex(r.stdout, r"compare 'y': .*: FAIL")
                self.assertEqual(r.stderr, "")
        pb = self.const_model("b.onnx", np.float32, [inf, -inf, nan, 2.0])
        r = mpc("run", pa, "--compare", pb, check=1)
        self.assertIn("compare 'y': max abs error 1.000000e+00, relative L2 error "
                      "1.000000e+00", r.stdout)

    def test_npz_and_pb_inputs(self):
        src = os.path.join(SOURCE_DIR, "models", "mlp.onnx")
        model = onnx.load(src)
        feeds = model_inputs(model)
        ref = ReferenceEvaluator(model).run(None, feeds)[0]
        npz = os.path.join(self.dir, "in.npz")
        np.savez(npz, **feeds)
        out = os.path.join(self.dir, "npz_out")
        mpc("run", src, "--input", npz, "--outputs", out, check=0)
        np.testing.assert_allclose(np.load(os.path.join(out, "probs.npy")), ref, rtol=1e-4)
        pb = os.path.join(self.dir, "x.pb")
        with open(pb, "wb") as f:
            f.write(numpy_helper.from_array(feeds["x"], "x").SerializeToString())
        out = os.path.join(self.dir, "pb_out")
        mpc("run", src, "--input", f"x={pb}", "--outputs", out, check=0)
        np.testing.assert_allclose(np.load(os.path.join(out, "probs.npy")), ref, rtol=1e-4)

    def test_random_inputs_are_seeded(self):
        src = os.path.join(SOURCE_DIR, "models", "cnn.onnx")
        a = mpc("run", src, "--random-inputs", "--seed", "7", check=0).stdout.splitlines()[0]
        b = mpc("run", src, "--random-inputs", "--seed", "7", check=0).stdout.splitlines()[0]
        c = mpc("run", src, "--random-inputs", "--seed", "8", check=0).stdout.splitlines()[0]
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_symbolic_dims(self):
        g = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
        p = os.path.join(self.dir, "sym.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        r = mpc("run", p, "--random-inputs", check=1)
        self.assertIn("--dim batch=", r.stderr)
        r = mpc("run", p, "--random-inputs", "--dim", "batch=5", check=0)
        self.assertIn("[5, 3]", r.stdout)

    def assert_bad_input(self, args, *needles):
        outdir = os.path.join(self.dir, "bad_out")
        r = mpc(*args, "--outputs", outdir, check=1)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        # Nothing left behind: no outputs, and not the folder the run would have made.
        self.assertFalse(os.path.exists(outdir), "left the --outputs folder")

    def test_run_time_error_leaves_nothing(self):
        # An error found while running (an index out of range), after the --outputs folder
        # was made: one line naming the node, and the folder, with its new parent, removed.
        g = helper.make_graph(
            [helper.make_node("Gather", ["data", "idx"], ["y"], axis=0, name="gather")], "g",
            [helper.make_tensor_value_info("idx", TensorProto.INT64, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
            initializer=[helper.make_tensor("data", TensorProto.FLOAT, [4, 2],
                                            np.arange(8, dtype=np.float32))])
        p = os.path.join(self.dir, "oob.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        idx = os.path.join(self.dir, "idx.npy")
        np.save(idx, np.array([1, 7], dtype=np.int64))
        self.assert_bad_input(["run", p, "--input", f"idx={idx}"],
                              "node 'gather' (Gather): index 7 out of range for [4, 2]")
        nested = os.path.join(self.dir, "new_parent", "out")
        r = mpc("run", p, "--input", f"idx={idx}", "--outputs", nested, check=1)
        self.assertFalse(os.path.exists(os.path.dirname(nested)), r.stderr)
        # A folder that existed before stays, with what was in it.
        keep = os.path.join(self.dir, "existing")
        os.makedirs(keep)
        open(os.path.join(keep, "mine.txt"), "w").close()
        mpc("run", p, "--input", f"idx={idx}", "--outputs", keep, check=1)
        self.assertEqual(os.listdir(keep), ["mine.txt"])

    def test_bad_inputs(self):
        src = os.path.join(SOURCE_DIR, "models", "mlp.onnx")
        d = self.dir
        self.assert_bad_input(["run", src], "missing input 'x'")
        wrong_shape = os.path.join(d, "wrong_shape.npy")
        np.save(wrong_shape, np.zeros([3, 64], np.float32))
        self.assert_bad_input(["run", src, "--input", f"x={wrong_shape}"], "input 'x'",
                              "[3, 64]")
        wrong_dtype = os.path.join(d, "wrong_dtype.npy")
        np.save(wrong_dtype, np.zeros([8, 64], np.float64))
        self.assert_bad_input(["run", src, "--input", f"x={wrong_dtype}"], "input 'x'", "f64")
        corrupt = os.path.join(d, "corrupt.npy")
        with open(corrupt, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00garbage")
        self.assert_bad_input(["run", src, "--input", f"x={corrupt}"], "input 'x'")
        truncated = os.path.join(d, "truncated.npy")
        np.save(truncated, np.zeros([8, 64], np.float32))
        with open(truncated, "r+b") as f:
            f.truncate(200)
        self.assert_bad_input(["run", src, "--input", f"x={truncated}"], "input 'x'")
        huge = os.path.join(d, "huge.npy")
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000), }"
        header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
        with open(huge, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        self.assert_bad_input(["run", src, "--input", f"x={huge}"], "input 'x'",
                              "too large for memory")
        compressed = os.path.join(d, "compressed.npz")
        np.savez_compressed(compressed, x=np.zeros([8, 64], np.float32))
        self.assert_bad_input(["run", src, "--input", compressed], "compressed")
        self.assert_bad_input(["run", src, "--input", "x=/nonexistent.npy"], "input 'x'")
        self.assert_bad_input(["run", src, "--random-inputs", "--device", "cuda"], "cuda")

    def test_unsupported_op_is_one_error(self):
        g = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Det", ["r"], ["y"], name="det0")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
        p = os.path.join(self.dir, "det.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        self.assert_bad_input(["run", p, "--random-inputs"], "Det", "opset 17", "det0",
                              "ai.onnx")

    def test_shape_computation_folded(self):
        # Shape -> Gather -> Unsqueeze -> Concat -> Reshape: evaluated while planning.
        nodes = [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
            helper.make_node("Unsqueeze", ["b", "zero1"], ["b1"]),
            helper.make_node("Concat", ["b1", "minus1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
        ]
        g = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
            [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "zero1"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")])
        p = os.path.join(self.dir, "shapes.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        model = onnx.load(p)
        feeds = model_inputs(model)
        got, _ = self.run_model(p, feeds)
        np.testing.assert_array_equal(got["y"], feeds["x"].reshape(2, 12))

    def test_control_flow_and_data_dependent_shapes(self):
        # If (captures outer values), Loop with scan outputs, Scan, NonZero: dynamic mode.
        op = [helper.make_opsetid("", 17)]
        paths = {k: os.path.join(self.dir, f"{k}.onnx") for k in ("if", "loop", "scan", "nonzero")}
        # If: y = cond ? x*2 : x-1, where cond = ReduceSum(x) > 0; captures x
        then_g = helper.make_graph([helper.make_node("Mul",["x","two"],["t"])],"then",[],[helper.make_tensor_value_info("t",TensorProto.FLOAT,[3])])
        else_g = helper.make_graph([helper.make_node("Sub",["x","one"],["e"])],"else",[],[helper.make_tensor_value_info("e",TensorProto.FLOAT,[3])])
        g = helper.make_graph([
          helper.make_node("ReduceSum",["x"],["s"],keepdims=0),
          helper.make_node("Greater",["s","zero"],["c"]),
          helper.make_node("If",["c"],["y"],then_branch=then_g,else_branch=else_g)],"g",
          [helper.make_tensor_value_info("x",TensorProto.FLOAT,[3])],[helper.make_tensor_value_info("y",TensorProto.FLOAT,[3])],
          [numpy_helper.from_array(np.array(2,np.float32),"two"),numpy_helper.from_array(np.array(1,np.float32),"one"),numpy_helper.from_array(np.array(0,np.float32),"zero")])
        onnx.save(helper.make_model(g,opset_imports=op),paths["if"])
        # Loop: acc = acc + x, M trips; scan out acc each iter
        body = helper.make_graph([
          helper.make_node("Identity",["cin"],["cout"]),
          helper.make_node("Add",["acc","x"],["acc2"]),
          helper.make_node("Identity",["acc2"],["sc"])],"body",
          [helper.make_tensor_value_info("i",TensorProto.INT64,[]),helper.make_tensor_value_info("cin",TensorProto.BOOL,[]),helper.make_tensor_value_info("acc",TensorProto.FLOAT,[3])],
          [helper.make_tensor_value_info("cout",TensorProto.BOOL,[]),helper.make_tensor_value_info("acc2",TensorProto.FLOAT,[3]),helper.make_tensor_value_info("sc",TensorProto.FLOAT,[3])])
        g = helper.make_graph([helper.make_node("Loop",["M","cond","a0"],["af","scans"],body=body)],"g",
          [helper.make_tensor_value_info("x",TensorProto.FLOAT,[3]),helper.make_tensor_value_info("a0",TensorProto.FLOAT,[3])],
          [helper.make_tensor_value_info("af",TensorProto.FLOAT,[3]),helper.make_tensor_value_info("scans",TensorProto.FLOAT,[None,3])],
          [numpy_helper.from_array(np.array(4,np.int64),"M"),
          numpy_helper.from_array(np.array(True),"cond")])
        onnx.save(helper.make_model(g,opset_imports=op),paths["loop"])
        # Scan: cumulative sum over rows
        body = helper.make_graph([helper.make_node("Add",["s","r"],["s2"]),helper.make_node("Identity",["s2"],["o"])],"b",
          [helper.make_tensor_value_info("s",TensorProto.FLOAT,[4]),helper.make_tensor_value_info("r",TensorProto.FLOAT,[4])],
          [helper.make_tensor_value_info("s2",TensorProto.FLOAT,[4]),helper.make_tensor_value_info("o",TensorProto.FLOAT,[4])])
        g = helper.make_graph([helper.make_node("Scan",["s0","xs"],["sf","os"],body=body,num_scan_inputs=1)],"g",
          [helper.make_tensor_value_info("s0",TensorProto.FLOAT,[4]),helper.make_tensor_value_info("xs",TensorProto.FLOAT,[5,4])],
          [helper.make_tensor_value_info("sf",TensorProto.FLOAT,[4]),helper.make_tensor_value_info("os",TensorProto.FLOAT,[5,4])])
        onnx.save(helper.make_model(g,opset_imports=op),paths["scan"])
        # NonZero then Transpose
        g = helper.make_graph([helper.make_node("NonZero",["x"],["nz"]),helper.make_node("Transpose",["nz"],["y"])],"g",
          [helper.make_tensor_value_info("x",TensorProto.FLOAT,[3,4])],[helper.make_tensor_value_info("y",TensorProto.INT64,[None,2])])
        onnx.save(helper.make_model(g,opset_imports=op),paths["nonzero"])
        for name, path in paths.items():
            for seed in (0, 1):
                with self.subTest(model=name, seed=seed):
                    model = onnx.load(path)
                    feeds = model_inputs(model, seed)
                    got, stdout = self.run_model(path, feeds)
                    ref = ReferenceEvaluator(model).run(None, feeds)
                    for o, want in zip(model.graph.output, ref):
                        np.testing.assert_allclose(got[o.name], want, rtol=1e-5, atol=1e-6)
                    self.assertIn("dynamic mode", stdout)

    def sequence_model(self):
        """s: sequence(f32 [?, 3]), x: f32 [?, 3] -> s2 = SequenceInsert(s, x) (a sequence),
        first = s2[0], cat = ConcatFromSequence(s2), n = SequenceLength(s2)."""
        seq = helper.make_tensor_sequence_value_info
        g = helper.make_graph([
            helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
            helper.make_node("SequenceAt", ["s2", "zero"], ["first"]),
            helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=0),
            helper.make_node("SequenceLength", ["s2"], ["n"])], "g",
            [seq("s", TensorProto.FLOAT, [None, 3]),
             helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
            [seq("s2", TensorProto.FLOAT, [None, 3]),
             helper.make_tensor_value_info("first", TensorProto.FLOAT, [None, 3]),
             helper.make_tensor_value_info("cat", TensorProto.FLOAT, [None, 3]),
             helper.make_tensor_value_info("n", TensorProto.INT64, [])],
            [numpy_helper.from_array(np.array(0, np.int64), "zero")])
        p = os.path.join(self.dir, "seq.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        return p

    def test_sequence_inputs_and_outputs(self):
        path = self.sequence_model()
        model = onnx.load(path)
        rng = np.random.default_rng(3)
        x = rng.uniform(-1, 1, [1, 3]).astype(np.float32)
        xf = os.path.join(self.dir, "seq_x.npy")
        np.save(xf, x)
        cases = {"pb3": [rng.uniform(-1, 1, [k, 3]).astype(np.float32) for k in (2, 4, 1)],
                 "npz2": [rng.uniform(-1, 1, [2, 3]).astype(np.float32) for _ in range(2)],
                 "pb_empty": [], "npz_empty": []}
        for case, items in cases.items():
            with self.subTest(case=case):
                sf = os.path.join(self.dir, f"seq_{case}")
                if case.startswith("pb"):
                    sf += ".pb"
                    with open(sf, "wb") as f:
                        f.write(numpy_helper.from_list(items, "s").SerializeToString())
                else:
                    sf += ".npz"
                    np.savez(sf, *items)
                out = os.path.join(self.dir, f"seq_out_{case}")
                r = mpc("run", path, "--input", f"s={sf}", "--input", f"x={xf}",
                        "--outputs", out, check=0)
                want = ReferenceEvaluator(model).run(None, {"s": items, "x": x})
                got = onnx.SequenceProto()
                with open(os.path.join(out, "s2.pb"), "rb") as f:
                    got.ParseFromString(f.read())
                got = numpy_helper.to_list(got)
                self.assertEqual(len(got), len(want[0]))
                for g_, w in zip(got, want[0]):
                    self.assertEqual(g_.dtype, np.float32)
                    np.testing.assert_array_equal(g_, w)
                for name, w in zip(("first", "cat", "n"), want[1:]):
                    np.testing.assert_array_equal(np.load(os.path.join(out, f"{name}.npy")), w,
                                                  err_msg=name)
                n = len(items) + 1
                self.assertIn(f"output 's2': sequence of {n} f32 tensor", r.stdout)
                self.assertIn("  element 0: f32 [", r.stdout)
                self.assertFalse(os.path.exists(os.path.join(out, "s2.npy")))
        # --compare: sequences element by element; a different length fails.
        sf = os.path.join(self.dir, "seq_pb3.pb")
        r = mpc("run", path, "--input", f"s={sf}", "--input", f"x={xf}", "--compare", path,
                check=0)
        self.assertRegex(r.stdout, r"compare 's2' \(sequence of 4\): max abs error .*: ok")
        longer = onnx.load(path)
        longer.graph.node.insert(1, helper.make_node("SequenceInsert", ["s2", "x"], ["s3"]))
        for n in longer.graph.node[2:]:
            n.input[0] = "s3"
        longer.graph.output[0].name = "s3"
        lp = os.path.join(self.dir, "seq_longer.onnx")
        onnx.save(longer, lp)
        r = mpc("run", path, "--input", f"s={sf}", "--input", f"x={xf}", "--compare", lp,
                check=1)
        self.assertIn("compare 's2': sequence length differs (4 vs 5): FAIL", r.stdout)

    def test_upsample_and_scatter_of_old_opsets_against_onnxruntime(self):
        """Upsample (opset 7: scales an attribute; 9: an input) is Resize-10 under an older
        name, and Scatter (opset 9) is ScatterElements without a reduction: models of those
        opsets ran nowhere. Integer and fractional scales, both modes, 2-D to 5-D; scatters
        along each axis with negative indices; against onnxruntime."""
        try:
            import onnxruntime as ort
        except ImportError:
            self.skipTest("onnxruntime is required")
        T = TensorProto
        rng = np.random.default_rng(5)

        def check(name, node, opset, feeds, inits=()):
            g = helper.make_graph(
                [node], "g",
                [helper.make_tensor_value_info(k, T.INT64 if v.dtype == np.int64 else T.FLOAT,
                                               v.shape) for k, v in feeds.items()],
                [helper.make_tensor_value_info("y", T.FLOAT, None)], list(inits))
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
            m.ir_version = 3 if opset < 9 else 4
            path = os.path.join(self.dir, f"{name}.onnx")
            onnx.save(m, path)
            got, _ = self.run_model(path, feeds)
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
                None, feeds)[0]
            self.assertEqual(got["y"].shape, want.shape)
            np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)

        for opset in (7, 9):
            for mode in ("nearest", "linear"):
                for scales, shape in (([1, 1, 2, 3], [2, 3, 4, 5]), ([1, 1, 1.5, 2.5], [1, 2, 4, 5]),
                                      ([1.7, 1.0], [4, 5]), ([1, 1, 2, 2, 2], [1, 2, 3, 2, 2])):
                    with self.subTest(op="Upsample", opset=opset, mode=mode, scales=scales):
                        feeds = {"x": rng.normal(size=shape).astype(np.float32)}
                        if opset == 7:
                            node = helper.make_node("Upsample", ["x"], ["y"], mode=mode,
                                                    scales=[float(s) for s in scales])
                            inits = []
                        else:
                            node = helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode)
                            inits = [numpy_helper.from_array(np.array(scales, np.float32), "s")]
                        check(f"up{opset}{mode}{len(shape)}{scales[-1]}", node, opset, feeds,
                              inits)
        for axis in (0, 1, -1):
            with self.subTest(op="Scatter", axis=axis):
                data = rng.normal(size=[3, 4]).astype(np.float32)
                dim = data.shape[axis]
                idx = rng.integers(-dim, dim, size=[2, 3]).astype(np.int64)
                feeds = {"data": data, "idx": idx,
                         "upd": rng.normal(size=[2, 3]).astype(np.float32)}
                check(f"scatter{axis}", helper.make_node("Scatter", ["data", "idx", "upd"], ["y"],
                                                         axis=axis), 9, feeds)
        # onnxruntime refuses a scale below 1 (Upsample enlarges): one line here too.
        path = os.path.join(self.dir, "updown.onnx")
        g = helper.make_graph([helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 0.5])],
                              "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 7)])
        m.ir_version = 3
        onnx.save(m, path)
        self.assert_bad_input(["run", path, "--random-inputs"], "Upsample",
                              "scales must be 1 or more", "not 0.5")

    def test_quantize_and_dequantize_linear_against_onnxruntime(self):
        """QuantizeLinear and DequantizeLinear: per tensor, per axis (first, middle, last)
        and blocked (opset 21); u8, i8, u16 and i16 (and i32 for dequantizing); with and
        without a zero point; f16 scales; values at .5 steps (rounded half to even) and past
        the type's range (saturated). Against onnxruntime, exactly."""
        try:
            import onnxruntime as ort
        except ImportError:
            self.skipTest("onnxruntime is required")
        T = TensorProto
        rng = np.random.default_rng(17)
        np_of = {T.UINT8: np.uint8, T.INT8: np.int8, T.UINT16: np.uint16, T.INT16: np.int16,
                 T.INT32: np.int32, T.FLOAT: np.float32, T.FLOAT16: np.float16}
        x_shape = [2, 6, 4]
        cases = []
        for qtype in (T.UINT8, T.INT8, T.UINT16, T.INT16):
            for axis, block in ((None, 0), (0, 0), (1, 0), (-1, 0), (1, 2), (2, 3)):
                for zero in (True, False):
                    cases.append((qtype, axis, block, zero, T.FLOAT))
        cases += [(T.UINT8, 1, 0, True, T.FLOAT16), (T.INT8, None, 0, False, T.FLOAT16)]
        for i, (qtype, axis, block, zero, stype) in enumerate(cases):
            if axis is None:
                s_shape = []
            elif block:
                s_shape = list(x_shape)
                s_shape[axis] = -(-x_shape[axis] // block)
            else:
                s_shape = [x_shape[axis]]
            info = np.iinfo(np_of[qtype])
            scale = rng.choice([0.5, 0.25, 2.0, 0.1, 3.0], size=s_shape).astype(np_of[stype])
            zp = rng.integers(info.min // 4 if info.min else 0, info.max // 4,
                              size=s_shape).astype(np_of[qtype])
            # Multiples of half a scale (ties), and values past the range.
            x = (rng.integers(-600, 600, size=x_shape) / 2.0).astype(np.float32)
            if qtype in (T.UINT16, T.INT16):
                x *= 150
            attrs = {}
            if axis is not None:
                attrs["axis"] = axis
            if block:
                attrs["block_size"] = block
            opset = 21
            for op in ("QuantizeLinear", "DequantizeLinear"):
                with self.subTest(op=op, case=i, qtype=qtype, axis=axis, block=block, zero=zero):
                    names = ["x", "s"] + (["z"] if zero else [])
                    if op == "QuantizeLinear":
                        xin = x.astype(np_of[stype]) if stype == T.FLOAT16 else x
                        if not zero:
                            attrs_q = dict(attrs, output_dtype=qtype)
                        else:
                            attrs_q = attrs
                        out_t = qtype
                    else:
                        xin = rng.integers(info.min, info.max, size=x_shape,
                                           endpoint=True).astype(np_of[qtype])
                        attrs_q = attrs
                        out_t = stype
                    feeds = {"x": xin, "s": scale}
                    if zero:
                        feeds["z"] = zp
                    g = helper.make_graph(
                        [helper.make_node(op, names, ["y"], **attrs_q)], "g",
                        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                       list(v.shape)) for k, v in feeds.items()],
                        [helper.make_tensor_value_info("y", out_t, None)])
                    path = os.path.join(self.dir, f"q{i}{op}.onnx")
                    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
                              path)
                    got, _ = self.run_model(path, feeds)
                    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
                        None, feeds)[0]
                    self.assertEqual(got["y"].dtype, want.dtype)
                    np.testing.assert_array_equal(got["y"], want)
        # NaN (from x or the scale) and infinities: the type's lowest and its saturation
        # (seed 204 of the value mutants: NaN gave 0).
        for qtype in (T.UINT8, T.INT8, T.UINT16, T.INT16):
            with self.subTest(op="QuantizeLinear", nan=qtype):
                g = helper.make_graph(
                    [helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=qtype,
                                      axis=0)], "g",
                    [helper.make_tensor_value_info("x", T.FLOAT, [4, 2]),
                     helper.make_tensor_value_info("s", T.FLOAT, [4])],
                    [helper.make_tensor_value_info("y", qtype, None)])
                path = os.path.join(self.dir, f"qnan{qtype}.onnx")
                onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)
                feeds = {"x": np.array([[np.nan, 1], [np.inf, -np.inf], [3, -3], [1, 2]],
                                       np.float32),
                         "s": np.array([0.5, 1, 2, np.nan], np.float32)}
                got, _ = self.run_model(path, feeds)
                want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
                    None, feeds)[0]
                np.testing.assert_array_equal(got["y"], want)
        # i32 dequantized (no zero point), and the refusals.
        xi = rng.integers(-2**31, 2**31 - 1, size=[5], dtype=np.int64).astype(np.int32)
        feeds = {"x": xi, "s": np.array(0.001, np.float32)}
        g = helper.make_graph([helper.make_node("DequantizeLinear", ["x", "s"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.INT32, [5]),
                               helper.make_tensor_value_info("s", T.FLOAT, [])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
        path = os.path.join(self.dir, "dq32.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        got, _ = self.run_model(path, feeds)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_array_equal(got["y"], want)
        g = helper.make_graph([helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=1)],
                              "g", [helper.make_tensor_value_info("x", T.INT8, [2, 3]),
                                    helper.make_tensor_value_info("s", T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
        path = os.path.join(self.dir, "dqbad.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        self.assert_bad_input(["run", path, "--random-inputs"], "DequantizeLinear",
                              "the scale is [2]; per-axis quantization along axis 1 of [2, 3] "
                              "needs [3]")
        # A zero point of the scale's size but not its shape (the differential suite's
        # default seed: onnxruntime refuses it).
        g = helper.make_graph(
            [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)],
            "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 4]),
                  helper.make_tensor_value_info("s", T.FLOAT, [3, 2]),
                  helper.make_tensor_value_info("z", T.INT8, [1, 3, 2])],
            [helper.make_tensor_value_info("y", T.INT8, None)])
        path = os.path.join(self.dir, "qzbad.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)
        self.assert_bad_input(["run", path, "--random-inputs"], "QuantizeLinear",
                              "the zero point is [1, 3, 2]; it must have the scale's shape [3, 2]")

    def test_roi_align_against_onnxruntime(self):
        """RoiAlign (opsets 10 and 16): regions inside, across and outside the image, thin
        and empty ones, both modes and both coordinate modes, a fixed and an adaptive
        sampling grid, a spatial scale, rois of several images; against onnxruntime (whose
        max mode takes the largest weighted pixel per sample, as mpc does)."""
        try:
            import onnxruntime as ort
        except ImportError:
            self.skipTest("onnxruntime is required")
        T = TensorProto
        rng = np.random.default_rng(13)
        x = rng.normal(size=[2, 3, 9, 11]).astype(np.float32)
        rois = np.array([[0, 0, 10, 8], [2.5, 1.2, 6.1, 7.9], [-3, -2, 4, 3], [8, 6, 30, 20],
                         [5, 5, 5.2, 5.1], [4, 4, 4, 4], [12, 12, 15, 16], [1, 2, 9, 7]],
                        np.float32)
        batch = np.array([0, 1, 1, 0, 1, 0, 1, 0], np.int64)
        cases = [(16, "avg", "half_pixel", 0, 1.0), (16, "max", "half_pixel", 2, 1.0),
                 (16, "avg", "output_half_pixel", 2, 0.5), (16, "max", "output_half_pixel", 0, 1.0),
                 (10, "avg", None, 0, 1.0), (10, "max", None, 3, 0.75)]
        adaptive = None
        for opset, mode, coord, ratio, scale in cases:
            with self.subTest(opset=opset, mode=mode, coord=coord, ratio=ratio):
                attrs = dict(mode=mode, output_height=3, output_width=4, sampling_ratio=ratio,
                             spatial_scale=scale)
                if coord:
                    attrs["coordinate_transformation_mode"] = coord
                g = helper.make_graph(
                    [helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], **attrs)], "g",
                    [helper.make_tensor_value_info("x", T.FLOAT, list(x.shape)),
                     helper.make_tensor_value_info("rois", T.FLOAT, list(rois.shape)),
                     helper.make_tensor_value_info("batch", T.INT64, list(batch.shape))],
                    [helper.make_tensor_value_info("y", T.FLOAT, None)])
                path = os.path.join(self.dir, f"roi{opset}{mode}{coord}.onnx")
                adaptive = adaptive if ratio else path  # (an adaptive grid: for the refusals)
                onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
                          path)
                feeds = {"x": x, "rois": rois, "batch": batch}
                got, _ = self.run_model(path, feeds)
                want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
                    None, feeds)[0]
                self.assertEqual(got["y"].shape, (8, 3, 3, 4))
                np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6)
        # A batch index past X's images is one line.
        np.save(os.path.join(self.dir, "roi_batch_bad.npy"), np.array([0, 2, 0, 0, 0, 0, 0, 0]))
        args = ["run", path]
        for k in ("x", "rois"):
            np.save(os.path.join(self.dir, f"roi_{k}.npy"), feeds[k])
            args += ["--input", f"{k}={os.path.join(self.dir, f'roi_{k}.npy')}"]
        args += ["--input", f"batch={os.path.join(self.dir, 'roi_batch_bad.npy')}"]
        self.assert_bad_input(args, "RoiAlign", "batch_indices[1] is 2; X has 2 images")
        # A region with a NaN or infinite corner (its grid size was an undefined conversion)
        # and one so large that its adaptive grid would never end: one line each.
        for corner, needle in ((np.nan, "holds a coordinate that is NaN or infinite"),
                               (np.inf, "holds a coordinate that is NaN or infinite"),
                               (3e4, "a grid of 10000 x 7500 samples per bin is past the "
                                     "1048576 mpc takes (set sampling_ratio)")):
            with self.subTest(corner=corner):
                bad = rois.copy()
                bad[2] = [0, 0, corner, corner]
                np.save(os.path.join(self.dir, "roi_rois_bad.npy"), bad)
                args = ["run", adaptive, "--input", f"x={os.path.join(self.dir, 'roi_x.npy')}",
                        "--input", f"rois={os.path.join(self.dir, 'roi_rois_bad.npy')}",
                        "--input", f"batch={os.path.join(self.dir, 'roi_batch.npy')}"]
                np.save(os.path.join(self.dir, "roi_batch.npy"), batch)
                self.assert_bad_input(args, "RoiAlign", "rois[2]", needle)

    def nms_model(self, name, center, inputs):
        """NonMaxSuppression over the model inputs boxes, scores and those of
        max_output_boxes_per_class, iou_threshold, score_threshold named in `inputs`."""
        T = TensorProto
        info = {"m": ("max_output_boxes_per_class", T.INT64), "iou": ("iou_threshold", T.FLOAT),
                "st": ("score_threshold", T.FLOAT)}
        g = helper.make_graph(
            [helper.make_node("NonMaxSuppression",
                              ["boxes", "scores"] + [k if k in inputs else ""
                                                     for k in ("m", "iou", "st")],
                              ["selected"], center_point_box=center)], "g",
            [helper.make_tensor_value_info("boxes", T.FLOAT, None),
             helper.make_tensor_value_info("scores", T.FLOAT, None)] +
            [helper.make_tensor_value_info(k, info[k][1], [1]) for k in ("m", "iou", "st")
             if k in inputs],
            [helper.make_tensor_value_info("selected", T.INT64, [None, 3])])
        path = os.path.join(self.dir, f"{name}.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), path)
        return path

    def test_non_max_suppression_against_onnxruntime(self):
        """Boxes on a coarse grid with scores from a few values, so that equal scores,
        identical and nested boxes and overlaps exactly at the threshold all occur; both box
        formats, with and without each optional input. The selected triples must be
        onnxruntime's, in its order."""
        try:
            import onnxruntime as ort
        except ImportError:
            self.skipTest("onnxruntime is required")
        rng = np.random.default_rng(11)
        selected = 0
        for case in range(24):
            center = case % 2
            batches, classes, count = [(1, 1, 1), (2, 3, 7), (1, 2, 200), (3, 1, 25)][case % 4]
            if center:
                xy = rng.integers(0, 10, [batches, count, 2])
                wh = rng.integers(0, 6, [batches, count, 2])
                boxes = np.concatenate([xy, wh], axis=2).astype(np.float32)
            else:
                boxes = rng.integers(0, 10, [batches, count, 4]).astype(np.float32)
            scores = (rng.integers(0, 5, [batches, classes, count]) / 4).astype(np.float32)
            inputs = [k for k, p in (("m", 0.9), ("iou", 0.8), ("st", 0.7)) if rng.random() < p]
            feeds = {"boxes": boxes, "scores": scores}
            if "m" in inputs:
                feeds["m"] = np.array([rng.choice([0, 1, 3, 100, 100, 100, -2])], np.int64)
            if "iou" in inputs:
                feeds["iou"] = np.array([rng.choice([0.0, 0.25, 0.5, 1.0, 1 / 3])], np.float32)
            if "st" in inputs:
                feeds["st"] = np.array([rng.choice([0.0, 0.25, 0.5])], np.float32)
            with self.subTest(case=case, center=center, inputs=inputs):
                path = self.nms_model(f"nms{case}", center, inputs)
                got, _ = self.run_model(path, feeds)
                want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
                    None, feeds)[0]
                self.assertEqual(got["selected"].dtype, np.int64)
                np.testing.assert_array_equal(got["selected"], want.reshape(-1, 3))
                selected += len(want)
        self.assertGreater(selected, 300)  # the cases select boxes (not only empty outputs)
        # What onnxruntime refuses, one line each.
        path = self.nms_model("nms_bad", 0, ["m", "iou"])
        box = np.zeros([1, 2, 4], np.float32)
        for feeds, needle in [
                ({"boxes": np.zeros([1, 2, 3], np.float32)}, "boxes must be [batches, boxes, 4]"),
                ({"scores": np.zeros([1, 1, 3], np.float32)}, "scores must be [batches, classes"),
                ({"iou": np.array([1.5], np.float32)}, "iou_threshold must be within [0, 1]")]:
            full = {"boxes": box, "scores": np.zeros([1, 1, 2], np.float32),
                    "m": np.array([2], np.int64), "iou": np.array([0.5], np.float32)}
            full.update(feeds)
            args = ["run", path]
            for k, v in full.items():
                f = os.path.join(self.dir, f"nms_bad_{k}.npy")
                np.save(f, v)
                args += ["--input", f"{k}={f}"]
            with self.subTest(needle=needle):
                self.assert_bad_input(args, "NonMaxSuppression", needle)

    def test_a_loop_grows_its_sequence_in_place_and_others_see_no_change(self):
        """A Loop whose body inserts into (and erases from) the sequence it carries: the
        body holds that sequence alone, so it is changed in place (a copy each iteration
        made such a loop quadratic). Where something else still reads a sequence after the
        insert (a later SequenceLength of the body's input, an Identity alias, the Loop's
        initial value read after the Loop) the insert copies; all against onnx.reference."""
        seq = helper.make_tensor_sequence_value_info
        T = TensorProto
        body = helper.make_graph([
            helper.make_node("Identity", ["cin"], ["cout"]),
            helper.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
            helper.make_node("Mul", ["x", "fi"], ["xi"]),
            # the carried sequence: insert at the front, append, erase position 1
            helper.make_node("SequenceInsert", ["sin", "xi", "zero"], ["sa"]),
            helper.make_node("SequenceInsert", ["sa", "xi"], ["sb"]),
            helper.make_node("SequenceErase", ["sb", "one"], ["sout"]),
            # `sin` read after the insert above: that insert copies (this is the length
            # before it)
            helper.make_node("SequenceLength", ["sin"], ["len_in"]),
            # an alias of the carried sequence, grown, must leave `sin` as it was
            helper.make_node("Identity", ["sin"], ["alias"]),
            helper.make_node("SequenceInsert", ["alias", "x"], ["grown"]),
            helper.make_node("SequenceLength", ["grown"], ["len_grown"]),
            helper.make_node("Add", ["len_in", "len_grown"], ["len_sum"]),
            # a scan output of shape [1] (onnx.reference stacks scalar ones as [N, 1])
            helper.make_node("Unsqueeze", ["len_sum", "zero1"], ["lens_i"])], "body",
            [helper.make_tensor_value_info("i", T.INT64, []),
             helper.make_tensor_value_info("cin", T.BOOL, []), seq("sin", T.FLOAT, [1, 3])],
            [helper.make_tensor_value_info("cout", T.BOOL, []), seq("sout", T.FLOAT, [1, 3]),
             helper.make_tensor_value_info("lens_i", T.INT64, [1])],
            [numpy_helper.from_array(np.array([0], np.int64), "zero1"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one")])
        g = helper.make_graph([
            helper.make_node("SequenceConstruct", ["x", "x"], ["s0"]),
            helper.make_node("Loop", ["M", "c", "s0"], ["sf", "lens"], body=body),
            helper.make_node("SequenceLength", ["s0"], ["n0"]),
            helper.make_node("ConcatFromSequence", ["sf"], ["cat"], axis=0),
            helper.make_node("SequenceLength", ["sf"], ["nf"])], "g",
            [helper.make_tensor_value_info("x", T.FLOAT, [1, 3]),
             helper.make_tensor_value_info("M", T.INT64, [])],
            [helper.make_tensor_value_info("n0", T.INT64, []),
             helper.make_tensor_value_info("cat", T.FLOAT, [None, 3]),
             helper.make_tensor_value_info("nf", T.INT64, []),
             helper.make_tensor_value_info("lens", T.INT64, [None, 1])],
            [numpy_helper.from_array(np.array(True), "c")])
        path = os.path.join(self.dir, "loop_seq.onnx")
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(model, path)
        x = np.array([[1.0, -2.0, 0.5]], np.float32)
        for trips in (1, 2, 5, 3000):  # (onnx.reference cannot stack 0 scan parts)
            with self.subTest(trips=trips):
                feeds = {"x": x, "M": np.array(trips, np.int64)}
                got, _ = self.run_model(path, feeds)
                want = ReferenceEvaluator(model).run(None, feeds)
                for o, w in zip(model.graph.output, want):
                    np.testing.assert_array_equal(got[o.name], w, err_msg=o.name)
                self.assertEqual(int(got["nf"]), 2 + trips)

    def test_sequence_bad_inputs(self):
        path = self.sequence_model()
        d = self.dir
        xf = os.path.join(d, "seqbad_x.npy")
        np.save(xf, np.zeros([1, 3], np.float32))
        x = ["--input", f"x={xf}"]
        tensor_pb = os.path.join(d, "seqbad_tensor.pb")
        with open(tensor_pb, "wb") as f:
            f.write(numpy_helper.from_array(np.zeros([2, 3], np.float32), "s")
                    .SerializeToString())
        self.assert_bad_input(["run", path, "--input", f"s={tensor_pb}", *x], "input 's'",
                              "not an ONNX SequenceProto")
        i64 = os.path.join(d, "seqbad_i64.pb")
        with open(i64, "wb") as f:
            f.write(numpy_helper.from_list([np.zeros([2, 3], np.int64)], "s")
                    .SerializeToString())
        self.assert_bad_input(["run", path, "--input", f"s={i64}", *x], "input 's'", "i64",
                              "f32")
        mixed = os.path.join(d, "seqbad_mixed.npz")
        np.savez(mixed, np.zeros([2, 3], np.float32), np.zeros([2, 3], np.float64))
        self.assert_bad_input(["run", path, "--input", f"s={mixed}", *x], "input 's'", "f64")
        corrupt = os.path.join(d, "seqbad_corrupt.pb")
        with open(corrupt, "wb") as f:
            f.write(b"\x1a\xff\xff\x01garbage")
        self.assert_bad_input(["run", path, "--input", f"s={corrupt}", *x], "input 's'",
                              "not a valid ONNX SequenceProto")
        npy = os.path.join(d, "seqbad.npy")
        np.save(npy, np.zeros([2, 3], np.float32))
        self.assert_bad_input(["run", path, "--input", f"s={npy}", *x], "input 's'",
                              "SequenceProto")
        self.assert_bad_input(["run", path, "--random-inputs"], "input 's'", "--input")
        self.assert_bad_input(["run", path, *x], "missing input 's'")

    def test_loop_body_with_value_dependent_shapes(self):
        # The body slices x with loop-carried bounds [lo, hi) that grow apart each trip,
        # appends the slice to a loop-carried tensor (a new shape every trip) and sums a
        # Range whose float bounds come from the iteration number: no plan fits every
        # trip, so the body falls back to dynamic mode.
        f32, i64 = TensorProto.FLOAT, TensorProto.INT64
        vi = helper.make_tensor_value_info
        consts = [numpy_helper.from_array(np.array([1], np.int64), "one"),
                  numpy_helper.from_array(np.array([2], np.int64), "two"),
                  numpy_helper.from_array(np.array(0, np.float32), "zf"),
                  numpy_helper.from_array(np.array(1, np.float32), "of")]
        body = helper.make_graph([
            helper.make_node("Identity", ["cin"], ["cout"]),
            helper.make_node("Slice", ["x", "lo", "hi"], ["s"]),
            helper.make_node("Add", ["lo", "one"], ["lo2"]),
            helper.make_node("Add", ["hi", "two"], ["hi2"]),
            helper.make_node("Concat", ["cat", "s"], ["cat2"], axis=0),
            helper.make_node("Cast", ["i"], ["fi"], to=f32),
            helper.make_node("Range", ["zf", "fi", "of"], ["r"]),
            helper.make_node("ReduceSum", ["r"], ["rs"], keepdims=1),
            helper.make_node("ReduceSum", ["s"], ["ss"], keepdims=1),
            helper.make_node("Add", ["rs", "ss"], ["sc"])], "body",
            [vi("i", i64, []), vi("cin", TensorProto.BOOL, []), vi("lo", i64, [1]),
             vi("hi", i64, [1]), vi("cat", f32, [None])],
            [vi("cout", TensorProto.BOOL, []), vi("lo2", i64, [1]), vi("hi2", i64, [1]),
             vi("cat2", f32, [None]), vi("sc", f32, [1])], consts)
        g = helper.make_graph(
            [helper.make_node("Loop", ["M", "cond", "lo0", "hi0", "cat0"],
                              ["lof", "hif", "catf", "scans"], body=body)], "g",
            [vi("x", f32, [12]), vi("M", i64, []), vi("cond", TensorProto.BOOL, []),
             vi("lo0", i64, [1]), vi("hi0", i64, [1]), vi("cat0", f32, [0])],
            [vi("lof", i64, [1]), vi("hif", i64, [1]), vi("catf", f32, [None]),
             vi("scans", f32, [None, 1])])
        path = os.path.join(self.dir, "loop_slice.onnx")
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(model, path)
        x = np.arange(12, dtype=np.float32) * 1.5 - 4
        for trips, lo, hi in ((4, 0, 1), (3, 2, 2), (1, 1, 3)):
            with self.subTest(trips=trips, lo=lo, hi=hi):
                feeds = {"x": x, "M": np.array(trips, np.int64), "cond": np.array(True),
                         "lo0": np.array([lo], np.int64), "hi0": np.array([hi], np.int64),
                         "cat0": np.zeros(0, np.float32)}
                got, stdout = self.run_model(path, feeds)
                ref = ReferenceEvaluator(model).run(None, feeds)
                for o, want in zip(model.graph.output, ref):
                    self.assertEqual(got[o.name].shape, want.shape, o.name)
                    np.testing.assert_allclose(got[o.name], want, rtol=1e-6, err_msg=o.name)
                self.assertIn("dynamic mode", stdout)

    def test_scan8_batches_with_sequence_lens(self):
        # Scan-8: batch axis 0, scan axis 1, per-entry lengths, the second scan input
        # (the same tensor) read backwards. onnx.reference has no Scan-8: the oracle is
        # the spec's pseudo-code in numpy. Past an entry's length the scan outputs are
        # undefined by the spec; only the meaningful part is compared.
        f32 = TensorProto.FLOAT
        vi = helper.make_tensor_value_info
        body = helper.make_graph([
            helper.make_node("Add", ["s", "fwd"], ["t"]),
            helper.make_node("Mul", ["rev", "w"], ["rw"]),
            helper.make_node("Sub", ["t", "rw"], ["s2"]),
            helper.make_node("Identity", ["s2"], ["b1"]),
            helper.make_node("Identity", ["rev"], ["b2"])], "body",
            [vi("s", f32, [2]), vi("fwd", f32, [2]), vi("rev", f32, [2])],
            [vi("s2", f32, [2]), vi("b1", f32, [2]), vi("b2", f32, [2])],
            [numpy_helper.from_array(np.array([0.5, 2], np.float32), "w")])
        g = helper.make_graph(
            [helper.make_node("Scan", ["lens", "s0", "xs", "xs"], ["sf", "o1", "o2"],
                              body=body, num_scan_inputs=2, directions=[0, 1])], "g",
            [vi("lens", TensorProto.INT64, [3]), vi("s0", f32, [3, 2]), vi("xs", f32, [3, 4, 2])],
            [vi("sf", f32, [3, 2]), vi("o1", f32, [3, 4, 2]), vi("o2", f32, [3, 4, 2])])
        path = os.path.join(self.dir, "scan8.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)]), path)
        rng = np.random.default_rng(3)
        s0 = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
        xs = rng.uniform(-1, 1, (3, 4, 2)).astype(np.float32)
        w = np.array([0.5, 2], np.float32)
        lens = np.array([4, 2, 0], np.int64)
        got, _ = self.run_model(path, {"lens": lens, "s0": s0, "xs": xs})
        for o in ("sf", "o1", "o2"):
            self.assertEqual(got[o].shape, (3, 2) if o == "sf" else (3, 4, 2), o)
        for b in range(3):
            s = s0[b].copy()
            n = int(lens[b])
            for t in range(n):
                rev = xs[b, n - 1 - t]
                s = (s + xs[b, t]) - rev * w
                np.testing.assert_allclose(got["o1"][b, t], s, rtol=1e-6, atol=1e-6)
                np.testing.assert_allclose(got["o2"][b, t], rev, rtol=0, atol=0)
            np.testing.assert_allclose(got["sf"][b], s, rtol=1e-6, atol=1e-6)
        # Without sequence_lens every entry runs the full length.
        g.node[0].input[0] = ""
        del g.input[0]
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)]), path)
        got, _ = self.run_model(path, {"s0": s0, "xs": xs})
        for b in range(3):
            s = s0[b].copy()
            for t in range(4):
                s = (s + xs[b, t]) - xs[b, 3 - t] * w
                np.testing.assert_allclose(got["o1"][b, t], s, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(got["sf"][b], s, rtol=1e-6, atol=1e-6)

    def optional_model(self):
        """o: optional(f32 [?]), x: f32 [3] -> has = OptionalHasElement(o), ident =
        Identity(o) (an optional), wrapped = Optional(x), none = an empty optional
        sequence, y = If(has, OptionalGetElement(o) + x, x)."""
        f32 = TensorProto.FLOAT
        vi = helper.make_tensor_value_info
        opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(f32, [None]))
        seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(f32, None))
        then = helper.make_graph([
            helper.make_node("OptionalGetElement", ["o"], ["got"]),
            helper.make_node("Add", ["got", "x"], ["y_then"])], "then", [],
            [vi("y_then", f32, [3])])
        other = helper.make_graph([helper.make_node("Identity", ["x"], ["y_else"])], "else",
                                  [], [vi("y_else", f32, [3])])
        g = helper.make_graph([
            helper.make_node("OptionalHasElement", ["o"], ["has"]),
            helper.make_node("Identity", ["o"], ["ident"]),
            helper.make_node("Optional", ["x"], ["wrapped"]),
            helper.make_node("Optional", [], ["none"], type=seq_t),
            helper.make_node("If", ["has"], ["y"], then_branch=then, else_branch=other)], "g",
            [helper.make_value_info("o", opt_t), vi("x", f32, [3])],
            [vi("has", TensorProto.BOOL, []), helper.make_value_info("ident", opt_t),
             helper.make_value_info("wrapped", helper.make_optional_type_proto(
                 helper.make_tensor_type_proto(f32, [3]))),
             helper.make_value_info("none", helper.make_optional_type_proto(seq_t)),
             vi("y", f32, [3])])
        p = os.path.join(self.dir, "opt.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), p)
        return p

    def test_optional_inputs_and_outputs(self):
        path = self.optional_model()
        model = onnx.load(path)
        x = np.array([1, 2, 3], np.float32)
        xf = os.path.join(self.dir, "opt_x.npy")
        np.save(xf, x)
        for case, o in {"empty": None, "tensor": np.array([10, 20, 30], np.float32)}.items():
            with self.subTest(case=case):
                of = os.path.join(self.dir, f"opt_{case}.pb")
                with open(of, "wb") as f:
                    f.write(numpy_helper.from_optional(o, "o").SerializeToString())
                out = os.path.join(self.dir, f"opt_out_{case}")
                r = mpc("run", path, "--input", f"o={of}", "--input", f"x={xf}",
                        "--outputs", out, check=0)
                # onnx.reference is the oracle of the tensor outputs (its Optional returns
                # [x] and its Identity refuses None, so the optional outputs are checked
                # against the spec: ident is o, wrapped holds x, none is empty).
                ref = onnx.ModelProto()
                ref.CopyFrom(model)
                for k in (3, 2, 1):
                    del ref.graph.node[k]
                for k in (3, 2, 1):
                    del ref.graph.output[k]
                want = dict(zip(("has", "y"),
                                ReferenceEvaluator(ref).run(None, {"o": o, "x": x})))
                for name in ("has", "y"):
                    np.testing.assert_array_equal(np.load(os.path.join(out, f"{name}.npy")),
                                                  want[name], err_msg=name)
                want.update(ident=o, wrapped=x, none=None)
                for name in ("ident", "wrapped", "none"):
                    got = onnx.OptionalProto()
                    with open(os.path.join(out, f"{name}.pb"), "rb") as f:
                        got.ParseFromString(f.read())
                    got = numpy_helper.to_optional(got)
                    if want[name] is None:
                        self.assertIsNone(got, name)
                    else:
                        self.assertEqual(got.dtype, np.float32, name)
                        np.testing.assert_array_equal(got, want[name], err_msg=name)
                self.assertIn("output 'none': optional sequence, empty", r.stdout)
                self.assertIn("output 'wrapped': optional holding: f32 [3]", r.stdout)
                self.assertIn("output 'ident': optional " +
                              ("tensor, empty" if o is None else "holding: f32 [3]"), r.stdout)
        # --compare: optionals both empty or both holding matching values.
        of = os.path.join(self.dir, "opt_tensor.pb")
        r = mpc("run", path, "--input", f"o={of}", "--input", f"x={xf}", "--compare", path,
                check=0)
        self.assertRegex(r.stdout, r"compare 'ident' \(optional\): max abs error .*: ok")
        self.assertRegex(r.stdout, r"compare 'none' \(empty optional\): .*: ok")
        emptied = onnx.load(path)
        emptied.graph.node[1].CopyFrom(helper.make_node(
            "Optional", [], ["ident"], type=helper.make_tensor_type_proto(TensorProto.FLOAT,
                                                                           [None])))
        ep = os.path.join(self.dir, "opt_emptied.onnx")
        onnx.save(emptied, ep)
        r = mpc("run", path, "--input", f"o={of}", "--input", f"x={xf}", "--compare", ep,
                check=1)
        self.assertIn("compare 'ident': an empty optional in one model, a value in the other: "
                      "FAIL", r.stdout)

    def test_optional_sequence_input(self):
        # o: optional(seq(f32)) -> s = OptionalGetElement(o) (a sequence), n = its length.
        f32 = TensorProto.FLOAT
        seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(f32, None))
        g = helper.make_graph([
            helper.make_node("OptionalGetElement", ["o"], ["s"]),
            helper.make_node("SequenceLength", ["s"], ["n"])], "g",
            [helper.make_value_info("o", helper.make_optional_type_proto(seq_t))],
            [helper.make_value_info("s", seq_t),
             helper.make_tensor_value_info("n", TensorProto.INT64, [])])
        path = os.path.join(self.dir, "optseq.onnx")
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        onnx.save(model, path)
        items = [np.array([1, 2], np.float32), np.array([3, 4, 5], np.float32)]
        for case, o in {"two": items, "none": []}.items():
            with self.subTest(case=case):
                of = os.path.join(self.dir, f"optseq_{case}.pb")
                with open(of, "wb") as f:
                    f.write(numpy_helper.from_optional(
                        o, "o", onnx.OptionalProto.SEQUENCE).SerializeToString())
                out = os.path.join(self.dir, f"optseq_out_{case}")
                mpc("run", path, "--input", f"o={of}", "--outputs", out, check=0)
                want = ReferenceEvaluator(model).run(None, {"o": o})
                got = onnx.SequenceProto()
                with open(os.path.join(out, "s.pb"), "rb") as f:
                    got.ParseFromString(f.read())
                got = numpy_helper.to_list(got)
                self.assertEqual(len(got), len(want[0]))
                for g_, w in zip(got, want[0]):
                    np.testing.assert_array_equal(g_, w)
                np.testing.assert_array_equal(np.load(os.path.join(out, "n.npy")), want[1])
        # An empty optional: OptionalGetElement refuses it, naming the node.
        of = os.path.join(self.dir, "optseq_empty.pb")
        with open(of, "wb") as f:
            f.write(numpy_helper.from_optional(None, "o").SerializeToString())
        self.assert_bad_input(["run", path, "--input", f"o={of}"], "OptionalGetElement",
                              "holds no value")

    def test_optional_bad_inputs(self):
        path = self.optional_model()
        d = self.dir
        xf = os.path.join(d, "optbad_x.npy")
        np.save(xf, np.zeros([3], np.float32))
        x = ["--input", f"x={xf}"]
        tensor_pb = os.path.join(d, "optbad_tensor.pb")
        with open(tensor_pb, "wb") as f:
            f.write(numpy_helper.from_array(np.zeros([2, 3], np.float32), "o")
                    .SerializeToString())
        self.assert_bad_input(["run", path, "--input", f"o={tensor_pb}", *x], "input 'o'",
                              "not a valid ONNX OptionalProto")
        i64 = os.path.join(d, "optbad_i64.pb")
        with open(i64, "wb") as f:
            f.write(numpy_helper.from_optional(np.zeros([3], np.int64), "o")
                    .SerializeToString())
        self.assert_bad_input(["run", path, "--input", f"o={i64}", *x], "input 'o'", "i64",
                              "f32")
        seq = os.path.join(d, "optbad_seq.pb")
        with open(seq, "wb") as f:
            f.write(numpy_helper.from_optional([np.zeros([3], np.float32)], "o")
                    .SerializeToString())
        self.assert_bad_input(["run", path, "--input", f"o={seq}", *x], "input 'o'",
                              "optional f32 tensor", "not an optional sequence")
        npy = os.path.join(d, "optbad.npy")
        np.save(npy, np.zeros([3], np.float32))
        self.assert_bad_input(["run", path, "--input", f"o={npy}", *x], "input 'o'",
                              "OptionalProto")
        self.assert_bad_input(["run", path, "--random-inputs"], "input 'o'", "--input")
        self.assert_bad_input(["run", path, *x], "missing input 'o'")

    def test_sequence_map_matches_reference(self):
        # SequenceMap over sequences and a tensor: the body adds its element(s) and the
        # tensor, and returns the element's shape; elements differ in length. onnx.reference
        # maps one sequence plus tensors, or two sequences: it is the oracle there; with two
        # sequences and a tensor the oracle is the same sum in numpy.
        f32, i64 = TensorProto.FLOAT, TensorProto.INT64
        vi = helper.make_tensor_value_info
        seq = helper.make_tensor_sequence_value_info
        rng = np.random.default_rng(5)
        t = np.array(0.5, np.float32)
        tf = os.path.join(self.dir, "seqmap_t.npy")
        np.save(tf, t)

        def make(outer):
            """SequenceMap over the graph inputs `outer` (sequences s1, s2, tensor t)."""
            body_in = [vi(f"b_{n}", f32, [None] if n != "t" else []) for n in outer]
            nodes, acc = [], "b_s1"
            for n in outer[1:]:
                nodes.append(helper.make_node("Add", [acc, f"b_{n}"], [f"acc_{n}"]))
                acc = f"acc_{n}"
            nodes += [helper.make_node("Identity", [acc], ["sum"]),
                      helper.make_node("Shape", ["b_s1"], ["shape"])]
            body = helper.make_graph(nodes, "body", body_in,
                                     [vi("sum", f32, [None]), vi("shape", i64, [1])])
            g = helper.make_graph(
                [helper.make_node("SequenceMap", outer, ["sums", "shapes"], body=body)], "g",
                [seq(n, f32, [None]) if n != "t" else vi("t", f32, []) for n in outer],
                [seq("sums", f32, [None]), seq("shapes", i64, [1])])
            model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            path = os.path.join(self.dir, f"seqmap_{'_'.join(outer)}.onnx")
            onnx.save(model, path)
            return model, path

        def write_seq(name, items):
            f = os.path.join(self.dir, f"seqmap_{name}.pb")
            with open(f, "wb") as fh:
                fh.write(numpy_helper.from_list(items, name.split("_")[0]).SerializeToString())
            return f

        for outer in (("s1", "t"), ("s1", "s2"), ("s1", "s2", "t")):
            model, path = make(outer)
            for n in (3, 0):
                with self.subTest(inputs=outer, length=n):
                    feeds = {"t": t}
                    args = ["run", path, "--outputs", os.path.join(self.dir, "seqmap_out")]
                    for name in outer:
                        if name == "t":
                            args += ["--input", f"t={tf}"]
                            continue
                        feeds[name] = [rng.uniform(-1, 1, [k + 1]).astype(np.float32)
                                       for k in range(n)]
                        args += ["--input", f"{name}={write_seq(f'{name}_{n}', feeds[name])}"]
                    r = mpc(*args, check=0)
                    feeds = {k: v for k, v in feeds.items() if k in outer}
                    if n == 0:  # onnx.reference cannot map empty sequences
                        want = [[], []]
                    elif len(outer) == 3:
                        want = [[a + b + t for a, b in zip(feeds["s1"], feeds["s2"])],
                                [np.array(a.shape, np.int64) for a in feeds["s1"]]]
                    else:
                        want = ReferenceEvaluator(model).run(None, feeds)
                    for name, w in zip(("sums", "shapes"), want):
                        got = onnx.SequenceProto()
                        with open(os.path.join(self.dir, "seqmap_out", f"{name}.pb"),
                                  "rb") as f:
                            got.ParseFromString(f.read())
                        got = numpy_helper.to_list(got)
                        self.assertEqual(len(got), n, name)
                        for g_, w_ in zip(got, w):
                            self.assertEqual(g_.dtype, w_.dtype, name)
                            np.testing.assert_allclose(g_, w_, rtol=1e-6, err_msg=name)
                    self.assertIn("dynamic mode", r.stdout)
        # Sequences of different lengths: exit 1, naming the node.
        f1 = write_seq("s1_short", [np.zeros([1], np.float32)])
        f2 = write_seq("s2_long", [np.zeros([1], np.float32)] * 2)
        self.assert_bad_input(["run", path, "--input", f"s1={f1}", "--input", f"s2={f2}",
                               "--input", f"t={tf}"], "SequenceMap",
                              "input 1 is a sequence of 2 tensors; input 0 has 1")

    def test_help(self):
        r = mpc("run", "--help", check=0)
        for flag in ("--input", "--random-inputs", "--dim", "--seed", "--device",
                     "--repeat", "--outputs", "--compare", "--threads"):
            self.assertIn(flag, r.stdout)


def main():
    global MPC, SOURCE_DIR
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("-k", dest="pattern")
    args = ap.parse_args()
    MPC = os.path.abspath(args.mpc)
    SOURCE_DIR = os.path.abspath(args.source_dir)
    loader = unittest.TestLoader()
    if args.pattern:
        loader.testNamePatterns = [f"*{args.pattern}*"]
    suite = loader.loadTestsFromTestCase(RunCase)
    result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
