#!/usr/bin/env python3
"""The importer's errors through the real CLI, on files as a user has them.

    python3 tests/fuzz/test_import_errors.py --mpc build/tools/mpc --source-dir . [-v]

  * an initializer whose data_type does not match its raw data (the use-after-free repro of
    issue 11: files of 16 KiB and more crashed, smaller ones named the wrong problem);
  * external data whose file is missing or short: the line names the tensor and the file;
  * graphs nested up to the limit (64) work end to end (inspect, rewrite, run, and the
    rewritten model runs to the same values); one level more, and 2000, are one line naming
    the depth, the limit and the node path;
  * what the mutation suite found (tests/fuzz/test_mutations.py, seeds 5, 23 and 77): a Loop
    whose body's condition is a float tensor ran forever, an If with an empty condition read
    past it, an If without branches crashed `mpc run`,
    an op type holding a newline split `mpc run`'s error and `mpc inspect`'s tables, and an
    attribute name holding a carriage return split the ONNX checker's message that `mpc
    rewrite` quotes.

Every failure: exit status 1, exactly one line on stderr, no output file. The last line printed
is 'N passed, N failed'; exit status 1 on any failure, 77 when onnx is missing.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SKIP_EXIT_CODE = 77
try:
    import onnx
    from onnx import TensorProto, helper
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"onnx is required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(SKIP_EXIT_CODE)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_mutations import MAX_GRAPH_DEPTH, nested_if_model  # noqa: E402

MPC = None
SOURCE_DIR = None


def mpc(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([MPC] + list(args), cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


def save_model(path, nodes, inputs, outputs, opset, inits=(), extra_opsets=()):
    """A one-graph model ('g') of the default domain's `opset` (IR 8), written to `path`."""
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] +
                          [helper.make_opsetid(d, v) for d, v in extra_opsets])
    m.ir_version = 8
    onnx.save(m, path)
    return m


class CliCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mpc-import-errors-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def expect_one_error(self, args, message):
        """Runs `mpc args` in the folder: exit 1, exactly `mpc: error: message`, no output."""
        r = mpc(*args, cwd=self.dir)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, f"mpc: error: {message}\n")
        self.assertEqual(r.stdout, "")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out.onnx")))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out.onnx.data")))

    def each_command(self, model, message):
        self.expect_one_error(["inspect", model], message)
        self.expect_one_error(["rewrite", model, "-o", "out.onnx"], message)
        self.expect_one_error(["run", model, "--random-inputs"], message)

    def run_case(self, node, feeds, message, opset=18):
        """`mpc run` of a model of `node` on `feeds` (name: array, shapes declared) fails
        with exactly `message` and writes no outputs folder."""
        f = helper.make_tensor_value_info
        inputs = [f(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                  for k, v in feeds.items()]
        save_model(os.path.join(self.dir, "m.onnx"), [node], inputs,
                   [f("y", TensorProto.FLOAT, None)], opset)
        args = ["run", "m.onnx", "--outputs", "o"]
        for k, v in feeds.items():
            np.save(os.path.join(self.dir, k + ".npy"), v)
            args += ["--input", f"{k}={k}.npy"]
        self.expect_one_error(args, message)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "o")))

    def run_as_onnxruntime(self, nodes, feeds, outputs, opset=18, extra=(), compare=None):
        """Saves a model of `nodes` whose inputs are `feeds` (name: array, shapes declared)
        and whose outputs are `outputs` (name: TensorProto type, no shape), runs it with
        `mpc run --input` of each and `extra`, checks every output against onnxruntime's
        (exactly, or with `compare(got, want, name)`) and returns mpc's stdout."""
        import onnxruntime as ort
        f = helper.make_tensor_value_info
        save_model(os.path.join(self.dir, "m.onnx"), nodes,
                   [f(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                    for k, v in feeds.items()],
                   [f(k, t, None) for k, t in outputs.items()], opset)
        args = ["run", "m.onnx", "--outputs", "o"] + list(extra)
        for k, v in feeds.items():
            np.save(os.path.join(self.dir, k + ".npy"), v)
            args += ["--input", f"{k}={k}.npy"]
        r = mpc(*args, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = ort.InferenceSession(os.path.join(self.dir, "m.onnx"),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
        for name, w in zip(outputs, want):
            got = np.load(os.path.join(self.dir, "o", name + ".npy"))
            self.assertEqual(got.shape, w.shape, name)
            if compare:
                compare(got, w, name)
            else:
                np.testing.assert_array_equal(got, w, err_msg=name)
        shutil.rmtree(os.path.join(self.dir, "o"))
        return r.stdout


class DataTypeMismatchTest(CliCase):
    def test_the_repro_names_the_initializer(self):
        # Model sizes on both sides of 16 KiB, where the file is mapped instead of read.
        for name, size in (("digits_mlp", 19780), ("mlp", 69532)):
            m = onnx.load(os.path.join(SOURCE_DIR, "models", name + ".onnx"))
            t = m.graph.initializer[0]
            t.data_type = TensorProto.DOUBLE
            dims = ", ".join(str(d) for d in t.dims)
            n = len(t.raw_data)
            onnx.save(m, os.path.join(self.dir, "r.onnx"))
            self.each_command("r.onnx", f"r.onnx: graph '{m.graph.name}', initializer "
                                        f"'{t.name}': raw data has {n} bytes, its shape needs "
                                        f"{2 * n} (f64 [{dims}])")
        small = onnx.load(os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"))
        del small.graph.initializer[1:]
        t = small.graph.initializer[0]
        t.data_type = TensorProto.DOUBLE
        t.raw_data = t.raw_data[:64]
        del t.dims[:]
        t.dims.append(16)
        onnx.save(small, os.path.join(self.dir, "s.onnx"))
        self.assertLess(os.path.getsize(os.path.join(self.dir, "s.onnx")), 16384)
        self.expect_one_error(["inspect", "s.onnx"],
                              f"s.onnx: graph '{small.graph.name}', initializer '{t.name}': raw "
                              "data has 64 bytes, its shape needs 128 (f64 [16])")


class ExternalDataTest(CliCase):
    def external_model(self):
        m = onnx.load(os.path.join(SOURCE_DIR, "models", "mlp.onnx"))
        onnx.save(m, os.path.join(self.dir, "m.onnx"), save_as_external_data=True,
                  all_tensors_to_one_file=True, location="m.data", size_threshold=1024)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "m.data")))
        first = next(t for t in onnx.load(os.path.join(self.dir, "m.onnx"),
                                          load_external_data=False).graph.initializer
                     if t.data_location == TensorProto.EXTERNAL)
        return m.graph.name, first.name

    def test_missing_file(self):
        graph, tensor = self.external_model()
        os.remove(os.path.join(self.dir, "m.data"))
        self.each_command("m.onnx", f"m.onnx: graph '{graph}', initializer '{tensor}': external "
                                    "data file 'm.data' not found")

    def test_short_file(self):
        graph, tensor = self.external_model()
        with open(os.path.join(self.dir, "m.data"), "r+b") as f:
            f.truncate(100)
        self.each_command("m.onnx", f"m.onnx: graph '{graph}', initializer '{tensor}': external "
                                    "data file 'm.data' is shorter than offset + length")

    def test_whole_file_works(self):
        self.external_model()
        r = mpc("rewrite", "m.onnx", "-o", "out.onnx", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)


class NestingTest(CliCase):
    def write(self, depth):
        with open(os.path.join(self.dir, f"d{depth}.onnx"), "wb") as f:
            f.write(nested_if_model(depth))
        return f"d{depth}.onnx"

    def test_up_to_the_limit_works_end_to_end(self):
        for depth in (MAX_GRAPH_DEPTH - 1, MAX_GRAPH_DEPTH):
            model = self.write(depth)
            r = mpc("inspect", model, cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = mpc("rewrite", model, "-o", "out.onnx", cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            # Every branch's MatMul converts, the innermost too: cast insertion went all the
            # way down (depth Ifs, depth + 1 MatMuls).
            self.assertIn(f"Converted {depth + 1}/{2 * depth + 1} nodes", r.stdout)
            runs = [mpc("run", m, "--random-inputs", cwd=self.dir) for m in (model, "out.onnx")]
            for r in runs:
                self.assertEqual(r.returncode, 0, r.stderr)
            lines = [r.stdout.splitlines()[0] for r in runs]
            self.assertTrue(lines[0].startswith("output 'out': f32 [2, 2]"), lines[0])
            r = mpc("run", model, "--random-inputs", "--compare", "out.onnx", cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            os.remove(os.path.join(self.dir, "out.onnx"))

    def test_beyond_the_limit_is_one_line(self):
        for depth in (MAX_GRAPH_DEPTH + 1, MAX_GRAPH_DEPTH + 2, 2000):
            model = self.write(depth)
            deep = depth - MAX_GRAPH_DEPTH - 1  # the graph at depth 65 is g{deep}
            self.each_command(
                model,
                f"{model}: graph 'g{deep}' is at nesting depth {MAX_GRAPH_DEPTH + 1}, beyond the "
                f"limit of {MAX_GRAPH_DEPTH} (node path: node 'top' (If) > node 'if{depth - 1}' "
                f"(If) > node 'if{depth - 2}' (If) > ... ({MAX_GRAPH_DEPTH + 1 - 6} more) ... > "
                f"node 'if{deep + 3}' (If) > node 'if{deep + 2}' (If) > node 'if{deep + 1}' (If))")


class MutationFindingsTest(CliCase):
    def save(self, nodes, inputs, outputs, name):
        g = helper.make_graph(nodes, "g", inputs, outputs)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, os.path.join(self.dir, name))
        return name

    def npy(self, name, arr):
        np.save(os.path.join(self.dir, name), arr)
        return name

    def test_loop_condition_must_be_one_bool(self):
        """The body's condition is an outer value: an f32 one is refused by the verifier
        (the Relu's result is f32, the body declares a bool); a bool of two elements,
        known only when it runs, by the Loop."""
        f = helper.make_tensor_value_info
        body = helper.make_graph(
            [helper.make_node("Identity", ["outer"], ["cond_out"]),
             helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
            [f("iter", TensorProto.INT64, []), f("cond_in", TensorProto.BOOL, []),
             f("v_in", TensorProto.FLOAT, [2])],
            [f("cond_out", TensorProto.BOOL, []), f("v_out", TensorProto.FLOAT, [2])])
        x = self.npy("x.npy", np.array([1, -2], np.float32))
        c = self.npy("c.npy", np.array(True))
        model = self.save([helper.make_node("Relu", ["x"], ["outer"], name="relu"),
                           helper.make_node("Loop", ["", "c", "x"], ["y"], name="loop",
                                            body=body)],
                          [f("x", TensorProto.FLOAT, [2]), f("c", TensorProto.BOOL, [])],
                          [f("y", TensorProto.FLOAT, [2])], "loop.onnx")
        self.expect_one_error(["run", model, "--input", f"x={x}", "--input", f"c={c}"],
                              "loop.onnx: graph 'body': node #0 (Identity) mixes f32 ('outer') "
                              "and bool ('cond_out') for type parameter V")
        model = self.save([helper.make_node("Not", ["b"], ["outer"], name="not"),
                           helper.make_node("Loop", ["", "c", "x"], ["y"], name="loop",
                                            body=body)],
                          [f("x", TensorProto.FLOAT, [2]), f("c", TensorProto.BOOL, []),
                           f("b", TensorProto.BOOL, [None])],
                          [f("y", TensorProto.FLOAT, [2])], "loop.onnx")
        b = self.npy("b.npy", np.array([False, True]))
        self.expect_one_error(["run", model, "--input", f"x={x}", "--input", f"c={c}",
                               "--input", f"b={b}"],
                              "node 'loop' (Loop): the body's condition output is bool [2]; a "
                              "bool with one element is needed")

    def test_if_condition_must_be_one_bool(self):
        f = helper.make_tensor_value_info
        then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                                 [f("t", TensorProto.FLOAT, [2])])
        other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                                  [f("e", TensorProto.FLOAT, [2])])
        model = self.save([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then,
                                            else_branch=other)],
                          [f("x", TensorProto.FLOAT, [2]), f("c", TensorProto.BOOL, [None])],
                          [f("y", TensorProto.FLOAT, [2])], "if.onnx")
        x = self.npy("x.npy", np.array([1, -2], np.float32))
        c = self.npy("c.npy", np.zeros([0], bool))
        self.expect_one_error(["run", model, "--input", f"x={x}", "--input", f"c={c}"],
                              "node 'if' (If): the condition is bool [0]; a bool with one "
                              "element is needed")

    def test_if_without_branches(self):
        """Seed 77: a Relu whose op type became If (no branches) crashed `mpc run`."""
        f = helper.make_tensor_value_info
        model = self.save([helper.make_node("If", ["x"], ["y"], name="if")],
                          [f("x", TensorProto.BOOL, [])], [f("y", TensorProto.FLOAT, [2])],
                          "nobranch.onnx")
        x = self.npy("x.npy", np.array(True))
        # The verifier now refuses it before the run (the schema's attributes, sorted).
        self.expect_one_error(["run", model, "--input", f"x={x}"],
                              "nobranch.onnx: graph 'g': node 'if' (If) lacks attribute "
                              "'else_branch', which If-16 requires")

    def test_op_type_with_a_newline_is_escaped(self):
        f = helper.make_tensor_value_info
        model = self.save([helper.make_node("Bad\nmpc: error: forged", ["x"], ["y"], name="n")],
                          [f("x", TensorProto.FLOAT, [2])], [f("y", TensorProto.FLOAT, [2])],
                          "forged.onnx")
        x = self.npy("x.npy", np.array([1, -2], np.float32))
        self.expect_one_error(["run", model, "--input", f"x={x}"],
                              "forged.onnx: unsupported op Bad\\nmpc: error: forged (domain "
                              "'ai.onnx', opset 17, input type f32) at node 'n' (Bad\\nmpc: "
                              "error: forged): the cpu backend has no kernel for it")
        r = mpc("inspect", model, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse([l for l in r.stdout.splitlines() if l.startswith("mpc:")], r.stdout)
        self.assertIn("  Bad\\nmpc: error: forged  1\n", r.stdout)

    def test_checker_message_quoting_a_name_is_one_line(self):
        f = helper.make_tensor_value_info
        node = helper.make_node("Flatten", ["x"], ["y"], name="flat")
        node.attribute.append(helper.make_attribute("cr\rx", 1))
        model = self.save([node], [f("x", TensorProto.FLOAT, [2, 3])],
                          [f("y", TensorProto.FLOAT, [2, 3])], "attr.onnx")
        r = mpc("rewrite", model, "-o", "out.onnx", cwd=self.dir)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.splitlines()  # splits at \r, \u2028 and the like too
        self.assertEqual(len(lines), 1, r.stderr)
        # mpc's verifier refuses the attribute before the ONNX checker runs.
        self.assertEqual(lines[0], "mpc: error: attr.onnx: graph 'g': node 'flat' (Flatten) has "
                                   "attribute 'cr\\rx', which Flatten-13 does not define")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out.onnx")))

    def test_softmax_output_declared_with_another_rank(self):
        """Training mutation suite, seed 3: the digits MLP's output 'probs' declared with a
        third dimension crashed `mpc train-graph --loss cross-entropy` (SIGSEGV: the class
        axis was moved with the output's rank over the Softmax input's shape)."""
        m = onnx.load(os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"))
        m.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 7
        onnx.save(m, os.path.join(self.dir, "m.onnx"))
        r = mpc("train-graph", "m.onnx", "--loss", "cross-entropy", "-o", "out.onnx",
                cwd=self.dir)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, "mpc: error: m.onnx: cross-entropy: output 'probs' is "
                                   "declared with rank 3, but its Softmax's input 'fc1/Gemm' "
                                   "has rank 2\n")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out.onnx")))

    def test_train_graph_on_a_scan_without_body(self):
        """Training mutation suite, seed 11: a Softmax whose op type became Scan (no body)
        crashed `mpc train-graph` inside libonnx's Scan shape inference; nodes that fail
        their ONNX schema now keep ONNX's inference from running. Since the verifier checks
        attributes against the schema, it refuses the node first (Scan has no 'axis')."""
        m = onnx.load(os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"))
        node = [n for n in m.graph.node if n.op_type == "Softmax"][0]
        node.op_type = "Scan"
        onnx.save(m, os.path.join(self.dir, "m.onnx"))
        self.expect_one_error(["train-graph", "m.onnx", "--loss", "cross-entropy", "-o",
                               "out.onnx"],
                              "m.onnx: graph 'digits_mlp': node 'softmax/Softmax' (Scan) has "
                              "attribute 'axis', which Scan-16 does not define")

    def test_softmax_of_logits_of_unknown_type(self):
        """Training mutation suite, seed 32: the Gemm before the MLP's Softmax renamed to an
        unknown op: the logits had no type, and `mpc train-graph --loss cross-entropy`
        crashed (SIGSEGV) building a loss of undefined type."""
        m = onnx.load(os.path.join(SOURCE_DIR, "models", "mlp.onnx"))
        softmax = [n for n in m.graph.node if n.op_type == "Softmax"][0]
        producer = [n for n in m.graph.node if softmax.input[0] in n.output][0]
        producer.op_type = "NotAnOp"
        onnx.save(m, os.path.join(self.dir, "m.onnx"))
        self.expect_one_error(["train-graph", "m.onnx", "--loss", "cross-entropy", "-o",
                               "out.onnx"],
                              f"m.onnx: cross-entropy: output '{m.graph.output[0].name}' is a "
                              f"Softmax of '{softmax.input[0]}', whose type is unknown: the "
                              "logits must be a float tensor")

    def test_evaluation_chunk_too_large_is_refused_before_the_first_step(self):
        """Training mutation suite, seed 7: an inference input declared with a fixed batch
        dimension of 2^62 made the evaluation's chunk 2^62 samples; its byte count wrapped
        to 0 and `mpc run --train` crashed (SIGSEGV) at the first evaluation, after the
        steps. Now one line before any step."""
        r = mpc("train-graph", os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"),
                "--loss", "cross-entropy", "-o", "t.onnx", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = onnx.load(os.path.join(self.dir, "t.onnx"))
        m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2 ** 62
        onnx.save(m, os.path.join(self.dir, "t.onnx"))
        with np.load(os.path.join(SOURCE_DIR, "models", "data", "digits.npz")) as d:
            np.savez(os.path.join(self.dir, "d.npz"), x=d["x"][:64], labels=d["labels"][:64])
        r = mpc("run", "t.onnx", "--train", "--data", "d.npz", "--batch", "16", "--steps", "2",
                "--log", "log.csv", cwd=self.dir)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, "mpc: error: d.npz: evaluation: inference input 'x': shape "
                                   "[4611686018427387904, 64] of f32 needs more than 2^64 "
                                   "bytes\n")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "log.csv")))

    def test_softmax_logits_of_unknown_rank_need_a_class_axis(self):
        """A Softmax over the last axis of logits whose rank is unknown: the classes' axis
        is unknown too. It was taken as axis 1, wrong for rank 3 and more; now an error
        unless --class-axis 1 says so (the ONNX checker refuses an output without a
        shape, but only on the model train-graph writes)."""
        f = helper.make_tensor_value_info
        # Reshape to a shape of unknown length, a graph input: no rank for the logits.
        nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
                 helper.make_node("Mul", ["r", "w"], ["l"]),
                 helper.make_node("Softmax", ["l"], ["probs"], axis=-1)]
        g = helper.make_graph(nodes, "g", [f("x", TensorProto.FLOAT, [2, 3]),
                                           f("s", TensorProto.INT64, [None])],
                              [f("probs", TensorProto.FLOAT, None)],
                              [helper.make_tensor("w", TensorProto.FLOAT, [3], [1, 2, 3])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, os.path.join(self.dir, "m.onnx"))
        self.expect_one_error(["train-graph", "m.onnx", "--loss", "cross-entropy", "-o",
                               "out.onnx"],
                              "m.onnx: cross-entropy: output 'probs' is a Softmax over its "
                              "last axis and its rank is unknown, so the class axis is too: "
                              "declare its shape, or give --class-axis 1 if the classes are "
                              "on axis 1")


class AttributeSchemaTest(CliCase):
    """Attributes against the op's schema. Passes read an attribute through a typed
    accessor with a default (`intAttr("axis", -1)`), which took an attribute of another
    kind as absent: a Softmax whose axis was written as the float 0.0 ran over the last
    axis (exit 0, a silent wrong answer), a Concat without its required axis ran along
    axis 0, `rewrite` wrote models that onnxruntime refuses. libonnx's checker is the
    oracle that each model here is invalid; the verifier (every command's gate) says
    what is wrong in one line."""

    def save(self, nodes, inputs, outputs, name, opset=17, extra_opsets=()):
        return save_model(os.path.join(self.dir, name), nodes, inputs, outputs, opset,
                          extra_opsets=extra_opsets)

    def run_refuses(self, model, message):
        """bad.onnx (`model`) fails ONNX's strict inference, and `mpc run` says `message`."""
        with self.assertRaises(onnx.shape_inference.InferenceError):
            onnx.shape_inference.infer_shapes(model, strict_mode=True)
        self.expect_one_error(["run", "bad.onnx", "--random-inputs"], message)

    def invalid(self, node, inputs, outputs, message, opset=17):
        f = helper.make_tensor_value_info
        m = self.save([node], [f(n, TensorProto.FLOAT, s) for n, s in inputs],
                      [f(n, TensorProto.FLOAT, s) for n, s in outputs], "bad.onnx", opset)
        with self.assertRaises((onnx.checker.ValidationError,
                                onnx.shape_inference.InferenceError, ValueError)):
            onnx.checker.check_model(m, full_check=True)
        self.each_command("bad.onnx", f"bad.onnx: graph 'g': {message}")

    def test_attribute_of_another_kind(self):
        node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=0.0)
        self.invalid(node, [("x", [2, 3])], [("y", [2, 3])],
                     "node 'sm' (Softmax) has attribute 'axis' holding a float, Softmax-13 "
                     "wants an int")
        node = helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[1.0, 0.0])
        self.invalid(node, [("x", [2, 3])], [("y", [3, 2])],
                     "node 't' (Transpose) has attribute 'perm' holding floats, Transpose-13 "
                     "wants ints")
        node = helper.make_node("Cast", ["x"], ["y"], name="c", to="float")
        self.invalid(node, [("x", [2])], [("y", [2])],
                     "node 'c' (Cast) has attribute 'to' holding a string, Cast-13 wants an "
                     "int")

    def test_missing_required_attribute(self):
        node = helper.make_node("Concat", ["a", "b"], ["y"], name="cat")
        self.invalid(node, [("a", [2, 3]), ("b", [2, 3])], [("y", [4, 3])],
                     "node 'cat' (Concat) lacks attribute 'axis', which Concat-13 requires")

    def test_attribute_the_schema_does_not_define(self):
        node = helper.make_node("Relu", ["x"], ["y"], name="r", alpha=3.0)
        self.invalid(node, [("x", [2])], [("y", [2])],
                     "node 'r' (Relu) has attribute 'alpha', which Relu-14 does not define")

    def test_element_type_attribute_out_of_range(self):
        node = helper.make_node("Cast", ["x"], ["y"], name="c", to=99)
        self.invalid(node, [("x", [2])], [("y", [2])],
                     "node 'c' (Cast) has attribute 'to' = 99, which is not an ONNX element "
                     "type")
        node = helper.make_node("Cast", ["x"], ["y"], name="c", to=0)
        self.invalid(node, [("x", [2])], [("y", [2])],
                     "node 'c' (Cast) has attribute 'to' = 0, which is not an ONNX element "
                     "type")

    def test_attribute_given_twice(self):
        node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=0)
        node.attribute.append(helper.make_attribute("axis", 1))
        self.invalid(node, [("x", [2, 3])], [("y", [2, 3])],
                     "node 'sm' (Softmax) has attribute 'axis' twice")

    def test_flags_are_zero_or_one(self):
        """keepdims = 5: mpc kept the reduced axis (any nonzero), onnxruntime and ONNX's
        shape inference drop it (only 1 keeps): a different answer, silently. Flags take
        0 or 1 now."""
        node = helper.make_node("ReduceSum", ["x"], ["y"], name="rs", keepdims=5)
        f = helper.make_tensor_value_info
        self.save([node], [f("x", TensorProto.FLOAT, [2, 3])], [f("y", TensorProto.FLOAT, None)],
                  "bad.onnx")
        self.each_command("bad.onnx", "bad.onnx: graph 'g': node 'rs' (ReduceSum) has attribute "
                                      "'keepdims' = 5; it is a flag, 0 or 1")
        node = helper.make_node("Gemm", ["a", "b"], ["y"], name="mm", transB=-1)
        self.save([node], [f("a", TensorProto.FLOAT, [2, 3]), f("b", TensorProto.FLOAT, [2, 3])],
                  [f("y", TensorProto.FLOAT, [2, 2])], "bad.onnx")
        self.each_command("bad.onnx", "bad.onnx: graph 'g': node 'mm' (Gemm) has attribute "
                                      "'transB' = -1; it is a flag, 0 or 1")
        # The binary ops' `broadcast` before opset 7 (differential suite, --graphs models,
        # seed 10: broadcast = -1 ran as broadcast = 1).
        node = helper.make_node("Add", ["a", "b"], ["y"], name="add", broadcast=-1)
        self.save([node], [f("a", TensorProto.FLOAT, [2, 3]), f("b", TensorProto.FLOAT, [3])],
                  [f("y", TensorProto.FLOAT, [2, 3])], "bad.onnx", opset=6)
        self.each_command("bad.onnx", "bad.onnx: graph 'g': node 'add' (Add) has attribute "
                                      "'broadcast' = -1; it is a flag, 0 or 1")

    def test_split_into_uneven_chunks_before_opset_18(self):
        """A Split without sizes whose axis does not divide by the outputs: invalid before
        opset 18 (onnxruntime refuses it), where mpc ran it with opset 18's chunks; from
        opset 18 on the last chunk is smaller (onnx.reference agrees)."""
        from onnx.reference import ReferenceEvaluator
        f = helper.make_tensor_value_info
        x = np.arange(9, dtype=np.float32).reshape(3, 3)
        np.save(os.path.join(self.dir, "x.npy"), x)
        outs = [f("y", TensorProto.FLOAT, None), f("z", TensorProto.FLOAT, None)]
        node = helper.make_node("Split", ["x"], ["y", "z"], name="sp", axis=0)
        self.save([node], [f("x", TensorProto.FLOAT, [3, 3])], outs, "bad.onnx")
        self.expect_one_error(["run", "bad.onnx", "--input", "x=x.npy"],
                              "node 'sp' (Split): the axis (3) does not split evenly into 2 "
                              "outputs; uneven chunks need opset 18 or a 'split' input")
        node = helper.make_node("Split", ["x"], ["y", "z"], name="sp", axis=0, num_outputs=2)
        m = self.save([node], [f("x", TensorProto.FLOAT, [3, 3])], outs, "ok.onnx", opset=18)
        r = mpc("run", "ok.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = ReferenceEvaluator(m).run(None, {"x": x})
        for name, w in zip("yz", want):
            np.testing.assert_array_equal(np.load(os.path.join(self.dir, "o", name + ".npy")), w)
        # From opset 18 the sizes or num_outputs must be given (differential suite, seed 8).
        node = helper.make_node("Split", ["x"], ["y", "z"], name="sp", axis=0)
        m = self.save([node], [f("x", TensorProto.FLOAT, [4, 3])], outs, "bad.onnx", opset=18)
        self.run_refuses(m, "node 'sp' (Split): neither a 'split' input nor a 'num_outputs' "
                            "attribute says how to split (one of them is required from opset 18)")

    def test_flags_of_ops_newer_than_libonnx(self):
        """Flags are checked by name on default-domain ops whose schema libonnx 1.12 lacks
        too: ReduceProd-18 with keepdims = -1 kept the axes (onnxruntime drops them)."""
        f = helper.make_tensor_value_info
        node = helper.make_node("ReduceProd", ["x"], ["y"], name="rp", keepdims=-1)
        self.save([node], [f("x", TensorProto.FLOAT, [2, 3])], [f("y", TensorProto.FLOAT, None)],
                  "bad.onnx", opset=18)
        self.each_command("bad.onnx", "bad.onnx: graph 'g': node 'rp' (ReduceProd) has attribute "
                                      "'keepdims' = -1; it is a flag, 0 or 1")

    def test_declared_type_the_attributes_contradict(self):
        """A Cast to f16 whose result is declared f64 ran and gave f16 (the homogeneous ops'
        type parameters caught such a declaration; attribute-typed results did not)."""
        f = helper.make_tensor_value_info
        node = helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.FLOAT16)
        m = self.save([node], [f("x", TensorProto.FLOAT, [2])], [f("y", TensorProto.DOUBLE, [2])],
                      "bad.onnx")
        with self.assertRaises(onnx.shape_inference.InferenceError):
            onnx.shape_inference.infer_shapes(m, strict_mode=True)
        self.each_command("bad.onnx", "bad.onnx: graph 'g': node 'c' (Cast): output 'y' is "
                                      "declared f64, but the node's attributes make it f16")

    def test_declared_type_the_attributes_defaults_contradict(self):
        """The same for a type an attribute gives by its default: a ConstantOfShape without
        `value` makes f32 zeros; declared i32, it ran and wrote f32 once its shape input
        could be a graph input (differential suite, seed 4). RandomNormal's dtype defaults
        to f32 too."""
        f = helper.make_tensor_value_info
        for node, inputs, declared in (
                (helper.make_node("ConstantOfShape", ["s"], ["y"], name="c"),
                 [f("s", TensorProto.INT64, [2])], (TensorProto.INT32, "i32")),
                (helper.make_node("RandomNormal", [], ["y"], name="c", shape=[2, 2]), [],
                 (TensorProto.FLOAT16, "f16"))):
            m = self.save([node], inputs, [f("y", declared[0], [2, 2])], "bad.onnx", opset=20)
            with self.assertRaises(onnx.shape_inference.InferenceError):
                onnx.shape_inference.infer_shapes(m, strict_mode=True)
            self.each_command("bad.onnx", f"bad.onnx: graph 'g': node 'c' ({node.op_type}): "
                                          f"output 'y' is declared {declared[1]}, but the node's "
                                          "attributes make it f32")

    def test_batch_norm_statistics_outputs_in_inference_mode(self):
        """training_mode = 0 with the running statistics asked for: onnxruntime refuses the
        model; mpc ran it and wrote outputs nothing computed."""
        f = helper.make_tensor_value_info
        c = [helper.make_tensor(n, TensorProto.FLOAT, [2], [1, 1]) for n in ("s", "b", "m", "v")]
        node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                                ["y", "rm", "rv"], name="bn", training_mode=0)
        g = helper.make_graph([node], "g", [f("x", TensorProto.FLOAT, [1, 2, 2])],
                              [f("y", TensorProto.FLOAT, [1, 2, 2]),
                               f("rm", TensorProto.FLOAT, [2]), f("rv", TensorProto.FLOAT, [2])],
                              c)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
        m.ir_version = 8
        onnx.save(m, os.path.join(self.dir, "bad.onnx"))
        self.run_refuses(m, "node 'bn' (BatchNormalization): output #1 'rm' is a training-mode "
                            "result (training_mode = 1, opset 14 on); in inference mode Y is "
                            "the only output")

    def test_fixed_types_of_a_fallback_schema_are_not_checked(self):
        """QLinearMatMul-21 takes f16 scales; libonnx knows QLinearMatMul-10, whose scales
        are f32, and the verifier refused the model for it (the differential suite's seed 31)
        where only the element types of type parameters were exempt for a fallback."""
        f = helper.make_tensor_value_info
        ins = [("a", TensorProto.UINT8, [2, 2]), ("a_scale", TensorProto.FLOAT16, []),
               ("a_zp", TensorProto.UINT8, []), ("b", TensorProto.UINT8, [2, 2]),
               ("b_scale", TensorProto.FLOAT16, []), ("b_zp", TensorProto.UINT8, []),
               ("y_scale", TensorProto.FLOAT16, []), ("y_zp", TensorProto.UINT8, [])]
        node = helper.make_node("QLinearMatMul", [n for n, _, _ in ins], ["y"], name="q")
        m = self.save([node], [f(n, t, s) for n, t, s in ins], [f("y", TensorProto.UINT8, [2, 2])],
                      "q.onnx", opset=21)
        onnx.checker.check_model(m, full_check=True)
        r = mpc("inspect", "q.onnx", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_valid_attributes_still_run(self):
        """What the check must not refuse: attributes of the right kind (the values match
        onnx.reference), an opset-18 op whose attributes libonnx 1.12 does not know
        (ReduceMean's noop_with_empty_axes), a newer opset than libonnx knows (its
        schemas are a fallback), and a custom domain's free attributes."""
        from onnx.reference import ReferenceEvaluator
        f = helper.make_tensor_value_info
        x = np.array([[1, -2, 3], [0.5, 4, -1]], np.float32)
        np.save(os.path.join(self.dir, "x.npy"), x)
        cases = [
            (17, [helper.make_node("Softmax", ["x"], ["s"], axis=0),
                  helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]),
            (18, [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1,
                                   noop_with_empty_axes=0)]),
            (21, [helper.make_node("Softmax", ["x"], ["y"], axis=0)]),
        ]
        for opset, nodes in cases:
            with self.subTest(opset=opset, op=nodes[0].op_type):
                inits = [helper.make_tensor("axes", TensorProto.INT64, [1], [1])]
                g = helper.make_graph(nodes, "g", [f("x", TensorProto.FLOAT, [2, 3])],
                                      [f("y", TensorProto.FLOAT, None)], inits)
                m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
                m.ir_version = 8
                onnx.save(m, os.path.join(self.dir, "ok.onnx"))
                r = mpc("run", "ok.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
                self.assertEqual(r.returncode, 0, r.stderr)
                want = ReferenceEvaluator(m).run(None, {"x": x})[0]
                got = np.load(os.path.join(self.dir, "o", "y.npy"))
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
                shutil.rmtree(os.path.join(self.dir, "o"))
        custom = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example", knob=7)
        self.save([custom], [f("x", TensorProto.FLOAT, [2])], [f("y", TensorProto.FLOAT, [2])],
                  "custom.onnx", extra_opsets=[("com.example", 1)])
        r = mpc("inspect", "custom.onnx", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)


class NewerOpsetAttributeTest(CliCase):
    """Attributes of opsets newer than libonnx 1.12 (opset 17), i.e. of most models exported
    today: the verifier checked none of them (their schema is a fallback to the opset-17
    one), so an opset-23 Concat without its axis ran along axis 0. mpc now brings the
    fallback's attributes to the node's version (OpSignature.cpp, kAttrPatches). The oracle
    is the onnx wheel's schema of each op version from 18 on: for every op mpc has a CPU
    kernel for at that version, an attribute of another kind, an attribute the version does
    not define and a missing required attribute are each refused naming the attribute;
    for every op version, an attribute the version defines, of its kind, is never refused
    as unknown or of the wrong kind."""

    # A value of each kind, and one of another kind to put in its place.
    WRONG = {"INT": 1.5, "FLOAT": "x", "STRING": 3, "INTS": [1.5, 2.5], "FLOATS": ["a"],
             "STRINGS": [1, 2]}
    RIGHT = {"INT": 1, "FLOAT": 0.5, "STRING": "x", "INTS": [1], "FLOATS": [0.5],
             "STRINGS": ["x"]}

    @classmethod
    def setUpClass(cls):
        import json
        ops = json.loads(subprocess.run([MPC, "ops", "--json"], capture_output=True, text=True,
                                        check=True).stdout)
        cls.kernels = {o["op_type"]: o["cpu_kernels"] for o in ops if o["domain"] == ""}
        cls.newest = 27  # kNewestRelease (OpSignature.cpp): newer opsets are refused
        cls.versions = []
        for s in onnx.defs.get_all_schemas_with_history():
            # Not the control-flow ops: their required bodies have tests of their own.
            if (s.domain == "" and 18 <= s.since_version <= cls.newest and not s.deprecated
                    and all(str(a.type).split(".")[-1] in cls.RIGHT
                            for a in s.attributes.values() if a.required)):
                cls.versions.append(s)
        cls.versions.sort(key=lambda s: (s.name, s.since_version))

    def has_kernel(self, schema):
        return any(k["min_opset"] <= schema.since_version <= k["max_opset"]
                   for k in self.kernels.get(schema.name, []))

    @staticmethod
    def input_type(schema, formal):
        """An element type the schema takes for `formal`: f32 where it may, else the first
        tensor type of its constraint."""
        allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
        names = allowed.get(formal.type_str, [formal.type_str])
        tensors = [t[7:-1] for t in names if t.startswith("tensor(")]
        pick = "float" if "float" in tensors or not tensors else tensors[0]
        return getattr(TensorProto, pick.upper())

    def inspect(self, schema, attrs):
        """`mpc inspect` of one node of `schema` at its own opset with `attrs`; its inputs
        (the required ones) are of shape [2, 3] and of a type the schema takes."""
        f = helper.make_tensor_value_info
        nin = schema.min_input
        node = helper.make_node(schema.name, [f"i{k}" for k in range(nin)],
                                [f"o{k}" for k in range(max(schema.min_output, 1))], name="n",
                                **attrs)
        formals = list(schema.inputs)
        types = [self.input_type(schema, formals[min(k, len(formals) - 1)]) for k in range(nin)]
        save_model(os.path.join(self.dir, "m.onnx"), [node],
                   [f(f"i{k}", types[k], [2, 3]) for k in range(nin)],
                   [f(o, TensorProto.UNDEFINED, None) for o in node.output], schema.since_version)
        return mpc("inspect", "m.onnx", cwd=self.dir)

    def required(self, schema, but=None):
        return {n: self.RIGHT[str(a.type).split(".")[-1]] for n, a in schema.attributes.items()
                if a.required and n != but}

    def test_defined_attributes_are_not_refused(self):
        checked = 0
        for s in self.versions:
            for name, a in sorted(s.attributes.items()):
                kind = str(a.type).split(".")[-1]
                if kind not in self.RIGHT:
                    continue
                with self.subTest(op=s.name, version=s.since_version, attr=name):
                    attrs = self.required(s)
                    attrs[name] = self.RIGHT[kind]
                    r = self.inspect(s, attrs)
                    self.assertNotIn("does not define", r.stderr)
                    self.assertNotIn("' holding ", r.stderr)
                    self.assertNotIn("lacks attribute", r.stderr)
                    checked += 1
        self.assertGreater(checked, 40)

    def test_attribute_errors_of_ops_mpc_runs(self):
        checked = 0
        for s in self.versions:
            if not self.has_kernel(s):
                continue
            label = f"{s.name}-{s.since_version}"
            with self.subTest(op=label, attr="an undefined one"):
                attrs = self.required(s)
                attrs["mpc_probe"] = 1
                r = self.inspect(s, attrs)
                self.assertEqual(r.returncode, 1)
                self.assertIn("has attribute 'mpc_probe', which", r.stderr)
                checked += 1
            for name, a in sorted(s.attributes.items()):
                kind = str(a.type).split(".")[-1]
                if kind in self.WRONG:
                    with self.subTest(op=label, attr=name, kind="another"):
                        attrs = self.required(s, but=name)
                        attrs[name] = self.WRONG[kind]
                        r = self.inspect(s, attrs)
                        self.assertEqual(r.returncode, 1)
                        self.assertIn(f"has attribute '{name}' holding", r.stderr)
                        checked += 1
                if a.required:
                    with self.subTest(op=label, attr=name, kind="missing"):
                        r = self.inspect(s, self.required(s, but=name))
                        self.assertEqual(r.returncode, 1)
                        self.assertIn(f"lacks attribute '{name}'", r.stderr)
                        checked += 1
        self.assertGreater(checked, 40)

    def test_ops_unchanged_since_opset_17_used_at_a_newer_opset(self):
        """What the multi-node differential suite found (seed 1): in an opset-23 model a
        Concat without its axis ran along axis 0, and a Cast to u8 feeding Slice's `ends`
        ran (onnxruntime refuses both). Slice and Concat did not change after opset 17, so
        libonnx's schemas are theirs exactly; the Cast's result has no declared type, so
        the verifier checks the type its producer gives it."""
        f = helper.make_tensor_value_info
        x = f("x", TensorProto.FLOAT, [4, 3])
        y = f("y", TensorProto.FLOAT, None)
        m = save_model(os.path.join(self.dir, "bad.onnx"),
                       [helper.make_node("Concat", ["x", "x"], ["y"], name="cat")], [x], [y], 23)
        with self.assertRaises(onnx.checker.ValidationError):
            onnx.checker.check_model(m, full_check=True)
        self.each_command("bad.onnx", "bad.onnx: graph 'g': node 'cat' (Concat) lacks attribute "
                                      "'axis', which Concat-13 requires")
        inits = [helper.make_tensor("starts", TensorProto.INT64, [1], [0]),
                 helper.make_tensor("ends", TensorProto.INT64, [1], [2])]
        nodes = [helper.make_node("Cast", ["ends"], ["ends8"], name="c", to=TensorProto.UINT8),
                 helper.make_node("Slice", ["x", "starts", "ends8"], ["y"], name="sl")]
        m = save_model(os.path.join(self.dir, "bad.onnx"), nodes, [x], [y], 23, inits=inits)
        with self.assertRaises(onnx.shape_inference.InferenceError):
            onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
        self.each_command("bad.onnx", "bad.onnx: graph 'g': node 'sl' (Slice) input 'ends8' has "
                                      "type u8 (the type its producer gives it), which Slice-13 "
                                      "does not accept for Tind")
        # The same Slice with int32 starts and ends runs.
        nodes[0] = helper.make_node("Cast", ["ends"], ["ends8"], name="c", to=TensorProto.INT32)
        inits[0] = helper.make_tensor("starts", TensorProto.INT32, [1], [0])
        m = save_model(os.path.join(self.dir, "ok.onnx"), nodes, [x], [y], 23, inits=inits)
        onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
        xv = np.arange(12, dtype=np.float32).reshape(4, 3)
        np.save(os.path.join(self.dir, "x.npy"), xv)
        r = mpc("run", "ok.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        np.testing.assert_array_equal(np.load(os.path.join(self.dir, "o", "y.npy")), xv[:2])


class BodyArityTest(CliCase):
    """Control flow's bodies take and return what the node gives and expects, by position.
    A Loop body returning fewer values than the node's loop-carried values crashed `mpc run`
    (std::length_error, SIGABRT); a Scan with num_scan_inputs beyond its inputs crashed too
    (std::bad_alloc); bodies with other counts ran with values in the wrong places, and
    num_scan_inputs = 0 ran no iteration. `mpc rewrite` was kept safe by libonnx's checker
    on models of up to 5,000 nodes only. onnxruntime refuses each model (the oracle)."""

    def model(self, nodes, inputs, outputs, opset=17):
        g = helper.make_graph(nodes, "g", inputs, outputs)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.save(m, os.path.join(self.dir, "bad.onnx"))
        with self.assertRaises((onnx.checker.ValidationError,
                                onnx.shape_inference.InferenceError)):
            onnx.checker.check_model(m, full_check=True)
        return "bad.onnx"

    def test_loop_bodies(self):
        f = helper.make_tensor_value_info
        ins = [f("x", TensorProto.FLOAT, [2]), f("n", TensorProto.INT64, [])]
        outs = [f("y", TensorProto.FLOAT, [2])]
        few_outs = helper.make_graph(
            [helper.make_node("Identity", ["cin"], ["cout"])], "body",
            [f("i", TensorProto.INT64, []), f("cin", TensorProto.BOOL, []),
             f("v", TensorProto.FLOAT, [2])], [f("cout", TensorProto.BOOL, [])])
        self.each_command(
            self.model([helper.make_node("Loop", ["n", "", "x"], ["y"], name="lp",
                                         body=few_outs)], ins, outs),
            "bad.onnx: graph 'g': node 'lp' (Loop): its 'body' returns 1 value(s); the "
            "condition and 1 loop-carried value(s) need at least 2")
        few_ins = helper.make_graph(
            [helper.make_node("Identity", ["cin"], ["cout"]),
             helper.make_node("Identity", ["x"], ["vo"])], "body",
            [f("i", TensorProto.INT64, []), f("cin", TensorProto.BOOL, [])],
            [f("cout", TensorProto.BOOL, []), f("vo", TensorProto.FLOAT, [2])])
        self.each_command(
            self.model([helper.make_node("Loop", ["n", "", "x"], ["y"], name="lp",
                                         body=few_ins)], ins, outs),
            "bad.onnx: graph 'g': node 'lp' (Loop): its 'body' takes 2 input(s); the iteration "
            "number, the condition and the node's 1 loop-carried value(s) are 3")

    def test_if_branches(self):
        f = helper.make_tensor_value_info
        two = helper.make_graph([helper.make_node("Identity", ["x"], ["a"]),
                                 helper.make_node("Neg", ["x"], ["b"])], "t", [],
                                [f("a", TensorProto.FLOAT, [2]), f("b", TensorProto.FLOAT, [2])])
        one = helper.make_graph([helper.make_node("Identity", ["x"], ["c"])], "e", [],
                                [f("c", TensorProto.FLOAT, [2])])
        self.each_command(
            self.model([helper.make_node("If", ["c0"], ["y"], name="if", then_branch=two,
                                         else_branch=one)],
                       [f("x", TensorProto.FLOAT, [2]), f("c0", TensorProto.BOOL, [])],
                       [f("y", TensorProto.FLOAT, [2])]),
            "bad.onnx: graph 'g': node 'if' (If): its 'then_branch' returns 2 value(s); the "
            "node has 1 output(s)")

    def test_scan_bodies(self):
        f = helper.make_tensor_value_info
        body = helper.make_graph(
            [helper.make_node("Add", ["s", "e"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
            "body", [f("s", TensorProto.FLOAT, [2]), f("e", TensorProto.FLOAT, [2])],
            [f("s2", TensorProto.FLOAT, [2]), f("o", TensorProto.FLOAT, [2])])
        ins = [f("init", TensorProto.FLOAT, [2]), f("xs", TensorProto.FLOAT, [3, 2])]
        outs = [f("y", TensorProto.FLOAT, [2]), f("z", TensorProto.FLOAT, [3, 2])]
        for scan_ins, inputs, message in (
                (2, ["init", "xs", "xs"], "its 'body' takes 2 input(s); the node gives it 3 "
                                          "(states and scan inputs)"),
                (5, ["init", "xs"], "has num_scan_inputs = 5; it must be 1 to the 2 input(s) "
                                    "the body takes"),
                (0, ["init", "xs"], "has num_scan_inputs = 0; it must be 1 to the 2 input(s) "
                                    "the body takes")):
            with self.subTest(num_scan_inputs=scan_ins):
                node = helper.make_node("Scan", inputs, ["y", "z"], name="sc", body=body,
                                        num_scan_inputs=scan_ins)
                model = self.model([node], ins, outs)
                sep = ":" if message.startswith("its") else ""
                self.each_command(model, f"bad.onnx: graph 'g': node 'sc' (Scan){sep} {message}")


class RunFindingsTest(CliCase):
    """What the differential suite's input mutants found in `mpc run` (seed 15): each
    model onnxruntime either refuses or runs with a broadcast mpc does not do."""

    def save(self, nodes, inputs, outputs, opset=17, inits=()):
        return save_model(os.path.join(self.dir, "m.onnx"), nodes, inputs, outputs, opset,
                          inits=inits)

    def test_layer_norm_bias_must_cover_the_normalized_axes(self):
        """A bias of one element for five normalized elements was read past its end (the
        values differed from onnxruntime's, which broadcasts it); now refused in one line."""
        f = helper.make_tensor_value_info
        self.save([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln")],
                  [f("x", TensorProto.FLOAT, [2, 5])], [f("y", TensorProto.FLOAT, [2, 5])],
                  inits=[helper.make_tensor("s", TensorProto.FLOAT, [5], [1] * 5),
                         helper.make_tensor("b", TensorProto.FLOAT, [1], [0.5])])
        self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                              "node 'ln' (LayerNormalization): bias [1] does not match the "
                              "normalized axes [5] element for element (mpc does not broadcast "
                              "it)")

    def test_layer_norm_scale_in_another_shape_of_the_same_size(self):
        """A scale of the normalized axes' element count in another shape ([5, 1] for [5],
        [5, 4] for [4, 5]) ran, read element for element as if it were theirs; it does not
        broadcast to them and onnxruntime refuses it (differential suite, seeds 60-75). A
        scale with leading 1s ([1, 5] for [5]) is the same layout and runs, as onnxruntime
        runs it, unless it has more axes than X (seed 69)."""
        import onnxruntime as ort
        f = helper.make_tensor_value_info
        for xshape, axis, sshape, ok in (([2, 3, 5], -1, [5, 1], False),
                                          ([2, 4, 5], 1, [5, 4], False),
                                          ([2, 3, 5], 1, [3, 1, 5], False),
                                          ([2, 3, 5], 1, [1, 1, 1, 3, 5], False),
                                          ([2, 3, 5], -1, [1, 5], True),
                                          ([2, 4, 5], 1, [1, 4, 5], True)):
            inner = int(np.prod(sshape))
            m = self.save([helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln",
                                            axis=axis)],
                          [f("x", TensorProto.FLOAT, xshape)], [f("y", TensorProto.FLOAT, None)],
                          inits=[helper.make_tensor("s", TensorProto.FLOAT, sshape,
                                                    list(np.linspace(0.5, 2, inner)))])
            x = np.random.default_rng(3).standard_normal(xshape).astype(np.float32)
            np.save(os.path.join(self.dir, "x.npy"), x)
            if not ok:
                normalized = xshape[axis:] if axis >= 0 else xshape[axis:]
                self.expect_one_error(["run", "m.onnx", "--input", "x=x.npy"],
                                      f"node 'ln' (LayerNormalization): scale {sshape} does not "
                                      f"match the normalized axes {normalized} element for "
                                      "element (mpc does not broadcast it)")
                continue
            r = mpc("run", "m.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            want = ort.InferenceSession(os.path.join(self.dir, "m.onnx"),
                                        providers=["CPUExecutionProvider"]).run(None, {"x": x})
            np.testing.assert_allclose(np.load(os.path.join(self.dir, "o", "y.npy")), want[0],
                                       rtol=1e-5, atol=1e-5, err_msg=str(sshape))
            shutil.rmtree(os.path.join(self.dir, "o"))

    def test_celu_follows_the_formula_where_it_is_nan(self):
        """Celu is max(0, x) + min(0, alpha * (exp(x / alpha) - 1)); with alpha = inf the
        second term is NaN (inf * 0) for every x, and onnxruntime and onnx.reference give
        NaN everywhere, where mpc gave x for x > 0 (the limit) (differential suite, seed
        38). alpha = 0 makes it NaN for x > 0 only; other alphas are unchanged."""
        from onnx.reference import ReferenceEvaluator
        f = helper.make_tensor_value_info
        x = np.array([-3.0, -0.5, 0.0, 0.25, 2.0, 90.0, -np.inf, np.inf, np.nan],
                     dtype=np.float32)
        np.save(os.path.join(self.dir, "x.npy"), x)
        for alpha in (float("inf"), 0.0, 1.0, 0.5, 3.0):
            m = self.save([helper.make_node("Celu", ["x"], ["y"], name="c", alpha=alpha)],
                          [f("x", TensorProto.FLOAT, [9])], [f("y", TensorProto.FLOAT, [9])])
            r = mpc("run", "m.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = np.load(os.path.join(self.dir, "o", "y.npy"))
            with np.errstate(all="ignore"):
                want = ReferenceEvaluator(m).run(None, {"x": x})[0]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, equal_nan=True,
                                       err_msg=f"alpha = {alpha}")

    def test_unsupported_cast_names_its_result_type(self):
        """A Cast from f32 to an 8-bit float: the kernel takes f32 inputs but not that
        result, and the message said only 'input type f32' (differential suite, seed 41)."""
        f = helper.make_tensor_value_info
        self.save([helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.FLOAT8E4M3FN)],
                  [f("x", TensorProto.FLOAT, [2])], [f("y", TensorProto.FLOAT8E4M3FN, [2])], 19)
        self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                              "m.onnx: unsupported op Cast (domain 'ai.onnx', opset 19, input "
                              "type f32, result type f8e4m3fn) at node 'c' (Cast): the cpu "
                              "backend has no kernel for it")

    def test_unsigned_arithmetic_and_comparisons(self):
        """Add/Sub/Mul/Div/Mod/Max/Min and the comparisons on uint8..uint64 were refused
        ("no kernel"; the differential suite's commonest refusal after the value-dependent
        shapes, and 56 ONNX node tests); onnxruntime runs them. Values that wrap (the type's
        maximum, a small minus a large) and a broadcast second operand, against
        onnx.reference; integer division and Mod by zero give 0 as for the signed types
        (onnx.reference raises, so those columns are left out)."""
        from onnx.reference import ReferenceEvaluator
        f = helper.make_tensor_value_info
        rng = np.random.default_rng(7)
        types = ((np.uint8, TensorProto.UINT8), (np.uint16, TensorProto.UINT16),
                 (np.uint32, TensorProto.UINT32), (np.uint64, TensorProto.UINT64))
        ops = ("Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Equal", "Less", "LessOrEqual",
               "Greater", "GreaterOrEqual")
        for dt, tp in types:
            top = np.iinfo(dt).max
            a = rng.integers(0, top, size=(3, 4), dtype=dt, endpoint=True)
            b = rng.integers(0, top, size=(4,), dtype=dt, endpoint=True)
            a[0, 0], a[1, 1], b[0], b[1], b[2] = top, 3, 0, 1, top
            np.save(os.path.join(self.dir, "a.npy"), a)
            np.save(os.path.join(self.dir, "b.npy"), b)
            for op in ops:
                out = TensorProto.BOOL if op in ops[7:] else tp
                m = self.save([helper.make_node(op, ["a", "b"], ["y"], name="n")],
                              [f("a", tp, [3, 4]), f("b", tp, [4])], [f("y", out, [3, 4])], 19)
                shutil.rmtree(os.path.join(self.dir, "o"), ignore_errors=True)
                r = mpc("run", "m.onnx", "--input", "a=a.npy", "--input", "b=b.npy",
                        "--outputs", "o", cwd=self.dir)
                self.assertEqual(r.returncode, 0, f"{op} {dt.__name__}: {r.stderr}")
                got = np.load(os.path.join(self.dir, "o", "y.npy"))
                cols = slice(1, None) if op in ("Div", "Mod") else slice(None)
                with np.errstate(all="ignore"):
                    want = ReferenceEvaluator(m).run(
                        None, {"a": a[:, cols], "b": b[cols]})[0] if cols.start else \
                        ReferenceEvaluator(m).run(None, {"a": a, "b": b})[0]
                self.assertEqual(got.dtype, want.dtype, f"{op} {dt.__name__}")
                np.testing.assert_array_equal(got[:, cols], want, f"{op} {dt.__name__}")
                if cols.start:
                    np.testing.assert_array_equal(got[:, 0], 0, f"{op} {dt.__name__} by 0")

    def test_hardmax_per_opset(self):
        """Hardmax had no kernel (the differential suite's seed 41 and 7 ONNX node tests).
        Before opset 13 it works on the input flattened to 2-d at `axis` (default 1), from
        13 along `axis` alone (default -1): against onnxruntime, which implements every
        version for f32 (onnx.reference only the newest), and at opset 13 against
        onnx.reference for f16, f64 and a NaN too. Ties pick the first maximum."""
        import onnxruntime as ort
        from onnx.reference import ReferenceEvaluator
        f = helper.make_tensor_value_info
        rng = np.random.default_rng(3)
        cases = [(1, None), (1, 0), (1, 2), (11, None), (11, 1), (11, -1), (13, None), (13, 0),
                 (13, 1)]
        types = ((np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16),
                 (np.float64, TensorProto.DOUBLE))
        for opset, axis in cases:
            for dt, tp in types if opset == 13 else types[:1]:
                x = rng.integers(0, 4, size=(2, 3, 4)).astype(dt)  # ties
                if opset == 13:
                    x[0, 0, 1] = np.nan
                attrs = {} if axis is None else {"axis": axis}
                m = self.save([helper.make_node("Hardmax", ["x"], ["y"], name="h", **attrs)],
                              [f("x", tp, [2, 3, 4])], [f("y", tp, [2, 3, 4])], opset)
                np.save(os.path.join(self.dir, "x.npy"), x)
                shutil.rmtree(os.path.join(self.dir, "o"), ignore_errors=True)
                r = mpc("run", "m.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = np.load(os.path.join(self.dir, "o", "y.npy"))
                if opset == 13:
                    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
                else:
                    want = ort.InferenceSession(os.path.join(self.dir, "m.onnx")).run(
                        None, {"x": x})[0]
                np.testing.assert_array_equal(got, want, f"opset {opset} axis {axis} {dt}")

    def test_scan_input_that_is_a_scalar(self):
        """num_scan_inputs made a scalar state a scan input: std::out_of_range, SIGABRT."""
        f = helper.make_tensor_value_info
        body = helper.make_graph(
            [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Identity", ["c"], ["d"])],
            "body", [f("a", TensorProto.FLOAT, []), f("b", TensorProto.FLOAT, [])],
            [f("c", TensorProto.FLOAT, []), f("d", TensorProto.FLOAT, [])])
        self.save([helper.make_node("Scan", ["init", "xs"], ["y", "z"], name="sc", body=body,
                                    num_scan_inputs=2)],
                  [f("init", TensorProto.FLOAT, []), f("xs", TensorProto.FLOAT, [3])],
                  [f("y", TensorProto.FLOAT, None), f("z", TensorProto.FLOAT, None)])
        self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                              "node 'sc' (Scan): scan input #0 is a scalar; a scan input needs "
                              "an axis to scan")

    def test_rms_norm_scale_message_names_the_normalized_axes(self):
        """The message said the scale did not broadcast to 'the normalized shape of X
        [2, 3, 4, 5]' for a scale of that very shape: it printed X's shape, not the
        normalized axes' (differential suite, seed 41)."""
        f = helper.make_tensor_value_info
        self.save([helper.make_node("RMSNormalization", ["x", "s"], ["y"], name="rms", axis=2)],
                  [f("x", TensorProto.FLOAT, [2, 3, 4, 5]), f("s", TensorProto.FLOAT, [2, 3, 4, 5])],
                  [f("y", TensorProto.FLOAT, None)], opset=23)
        self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                              "node 'rms' (RMSNormalization): scale [2, 3, 4, 5] does not "
                              "broadcast to the normalized axes [4, 5] of X [2, 3, 4, 5] (axis 2)")

    def test_batch_norm_statistics_one_per_channel(self):
        """BatchNormalization in inference mode did not check its scale, B, mean and var: a
        mean of 2 values for 3 channels was read past its end, one of shape [1, 3] ran as
        [3] (onnxruntime: "Invalid input mean: NumDimensions() != 1"; seeds 60-75). Training
        mode checked only the count."""
        f = helper.make_tensor_value_info
        for bad, training in (([2], 0), ([1, 3], 0), ([1, 3], 1), ([4], 1)):
            names = ["x", "s", "b", "m", "v"]
            shapes = {"x": [2, 3, 4], "s": [3], "b": [3], "m": bad, "v": [3]}
            self.save([helper.make_node("BatchNormalization", names,
                                        ["y", "rm", "rv"] if training else ["y"], name="bn",
                                        training_mode=training)],
                      [f(k, TensorProto.FLOAT, shapes[k]) for k in names],
                      [f(o, TensorProto.FLOAT, None)
                       for o in (["y", "rm", "rv"] if training else ["y"])], opset=15)
            self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                                  "node 'bn' (BatchNormalization): scale, B, input_mean and "
                                  "input_var must be [3], one value per channel of [2, 3, 4]; "
                                  f"input #3 is {bad}")

    def test_recurrent_operands_of_other_shapes(self):
        """Seed 35: an LSTM whose R had rank 2 aborted `mpc run` (std::length_error: the
        kernel sized a buffer from R's missing axis); LSTM did not check R, B, initial_h,
        initial_c or P at all, GRU and RNN not initial_h (read past its end when short).
        Seeds 60-75: B and P of the right count in another shape ([32] for [1, 32]) ran;
        onnxruntime refuses them ("Input B must have shape {1,8*4}")."""
        f = helper.make_tensor_value_info
        h = 3
        cases = [("LSTM", 4, {"R": [1, 4 * h]}, "recurrence weight [1, 12] does not match"),
                 ("LSTM", 4, {"B": [1, 7]}, "bias [1, 7] is not [1, 24]"),
                 ("LSTM", 4, {"B": [24]}, "bias [24] is not [1, 24]"),
                 ("GRU", 3, {"B": [2, 9]}, "bias [2, 9] is not [1, 18]"),
                 ("LSTM", 4, {"initial_c": [1, 1, h]}, "initial_c [1, 1, 3] is not [1, 2, 3]"),
                 ("LSTM", 4, {"P": [1, 2 * h]}, "peepholes [1, 6] are not [1, 9]"),
                 ("LSTM", 4, {"P": [3 * h]}, "peepholes [9] are not [1, 9]"),
                 ("GRU", 3, {"initial_h": [1, 2, 2]}, "initial_h [1, 2, 2] is not [1, 2, 3]"),
                 ("RNN", 1, {"initial_h": [2, 3]}, "initial_h [2, 3] is not [1, 2, 3]")]
        for op, gates, bad, message in cases:
            with self.subTest(op=op, bad=bad):
                shapes = {"X": [4, 2, 5], "W": [1, gates * h, 5], "R": [1, gates * h, h],
                          "B": [1, 2 * gates * h], "sequence_lens": None,
                          "initial_h": [1, 2, h], "initial_c": [1, 2, h], "P": [1, 3 * h]}
                shapes.update(bad)
                names = ["X", "W", "R", "B", "", "initial_h"] + (
                    ["initial_c", "P"] if op == "LSTM" else [])
                self.save([helper.make_node(op, names, ["Y"], name="n", hidden_size=h)],
                          [f(k, TensorProto.FLOAT, shapes[k]) for k in names if k],
                          [f("Y", TensorProto.FLOAT, None)])
                self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                                      f"node 'n' ({op}): {message}")

    def test_resize_sizes_must_be_one_dimensional(self):
        """sizes of shape [1, 2] ran as its two values; onnxruntime and ONNX's inference
        refuse it ("shape input must be 1D tensor")."""
        f = helper.make_tensor_value_info
        m = self.save([helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="rs")],
                      [f("x", TensorProto.FLOAT, [1, 1, 2, 2]), f("sizes", TensorProto.INT64, [1, 4])],
                      [f("y", TensorProto.FLOAT, None)], opset=18)
        with self.assertRaises(onnx.shape_inference.InferenceError):
            onnx.shape_inference.infer_shapes(m, strict_mode=True)
        np.save(os.path.join(self.dir, "x.npy"), np.ones((1, 1, 2, 2), np.float32))
        np.save(os.path.join(self.dir, "sizes.npy"), np.array([[1, 1, 3, 3]], np.int64))
        self.expect_one_error(["run", "m.onnx", "--input", "x=x.npy", "--input", "sizes=sizes.npy"],
                              "node 'rs' (Resize): sizes is [1, 4]; it must be a 1-D tensor")

class ShapeOperandInputTest(CliCase):
    """Operands that decide output shapes (Reduce's axes, TopK's K, Unsqueeze's axes,
    Slice's bounds, Split's sizes, Pad's pads, OneHot's depth, Tile's repeats, Range's
    bounds) given as graph inputs, as onnx's own node tests give them (opset 18's Reduce
    ops): `mpc run` refused them ("axes must be known before running"; the differential
    suite's commonest refusal, seeds 54-59), where onnxruntime runs them. The run now
    shapes each node with the values given (dynamic mode); every output against
    onnxruntime, twice (--repeat 2)."""

    def test_shape_operands_from_graph_inputs_run_as_onnxruntime_runs_them(self):
        n = helper.make_node
        nodes = [n("ReduceSum", ["x", "axes"], ["sum"], keepdims=1),
                 n("ReduceMax", ["x", "axes"], ["max"], keepdims=0),
                 n("ReduceMean", ["x", "axes"], ["mean"], keepdims=0),
                 n("TopK", ["x", "k"], ["top", "top_i"], axis=-1),
                 n("Unsqueeze", ["x", "axes"], ["unsq"]),
                 n("Slice", ["x", "starts", "ends"], ["sl"]),
                 n("Split", ["x", "split"], ["s0", "s1"], axis=1),
                 n("Pad", ["x", "pads"], ["pad"]),
                 n("OneHot", ["idx", "depth", "onoff"], ["oh"], axis=-1),
                 n("Tile", ["x", "reps"], ["tile"]),
                 n("Range", ["lo", "hi", "step"], ["rng"]),
                 n("Relu", ["sum"], ["relu"])]
        feeds = {"x": np.arange(-7, 17, dtype=np.float32).reshape(4, 6) / 3,
                 "axes": np.array([1], np.int64), "k": np.array([2], np.int64),
                 "starts": np.array([1], np.int64), "ends": np.array([3], np.int64),
                 "split": np.array([2, 4], np.int64),
                 "pads": np.array([0, 1, 2, 0], np.int64),
                 "idx": np.array([0, 3, 1], np.int64), "depth": np.array(5, np.int64),
                 "onoff": np.array([-1, 2], np.float32),
                 "reps": np.array([2, 1], np.int64),
                 "lo": np.array(1, np.int64), "hi": np.array(9, np.int64),
                 "step": np.array(3, np.int64)}
        outs = {o: TensorProto.INT64 if o in ("top_i", "rng") else TensorProto.FLOAT
                for o in ["sum", "max", "mean", "top", "top_i", "unsq", "sl", "s0", "s1", "pad",
                          "oh", "tile", "rng", "relu"]}

        def close(got, want, name):
            self.assertEqual(got.dtype, want.dtype, name)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)
        stdout = self.run_as_onnxruntime(nodes, feeds, outs, extra=["--repeat", "2"],
                                         compare=close)
        self.assertIn("memory: dynamic mode", stdout)

    def test_a_bad_operand_given_as_an_input_is_one_line(self):
        """The values are checked when the node is shaped: an axis out of range is the same
        one line as from an initializer, and nothing is written."""
        f = helper.make_tensor_value_info
        save_model(os.path.join(self.dir, "m.onnx"),
                   [helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="r")],
                   [f("x", TensorProto.FLOAT, [2, 3]), f("axes", TensorProto.INT64, [1])],
                   [f("y", TensorProto.FLOAT, None)], 18)
        np.save(os.path.join(self.dir, "x.npy"), np.ones((2, 3), np.float32))
        np.save(os.path.join(self.dir, "axes.npy"), np.array([2], np.int64))
        r = mpc("run", "m.onnx", "--input", "x=x.npy", "--input", "axes=axes.npy",
                "--outputs", "o", cwd=self.dir)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("mpc: error: node 'r' (ReduceSum): "), r.stderr)
        self.assertIn("axis", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "o")))


class OperandShapeTest(CliCase):
    """Operands whose shapes do not fit their data ran, reading and writing past the
    end of a buffer (the differential suite's input mutants, seeds 54-59: onnxruntime refuses
    each; the checker could not, the mutants' declared shapes being cleared): a ScatterND
    whose updates are not indices.shape[:-1] + data.shape[k:], a ScatterElements whose
    updates differ from its indices, GatherElements / ScatterElements indices longer than the
    data along an axis other than the indexed one, a OneHot whose values are not two."""

    def test_scatter_nd_updates_must_match(self):
        n = helper.make_node("ScatterND", ["data", "ind", "upd"], ["y"], name="s")
        data = np.zeros((4, 1, 4), np.float32)
        self.run_case(n, {"data": data, "ind": np.array([[0], [2]], np.int64),
                          "upd": np.ones((2, 4, 4), np.float32)},
                      "node 's' (ScatterND): updates [2, 4, 4] must be [2, 1, 4] (indices "
                      "[2, 1] into data [4, 1, 4])")
        self.run_case(n, {"data": np.zeros((4, 4, 4), np.float32),
                          "ind": np.array([1], np.int64), "upd": np.ones((2, 4, 4), np.float32)},
                      "node 's' (ScatterND): updates [2, 4, 4] must be [4, 4] (indices [1] "
                      "into data [4, 4, 4])")
        self.run_case(n, {"data": data, "ind": np.zeros((2, 4), np.int64),
                          "upd": np.ones((2,), np.float32)},
                      "node 's' (ScatterND): indices [2, 4] cannot index data [4, 1, 4] (both "
                      "need rank 1 or more, and the indices' last dimension at most the data's "
                      "rank)")

    def test_scatter_elements_updates_and_indices(self):
        n = helper.make_node("ScatterElements", ["data", "ind", "upd"], ["y"], name="s",
                             axis=1)
        self.run_case(n, {"data": np.zeros((3, 5), np.float32),
                          "ind": np.array([[1, 3], [0, 4]], np.int64),
                          "upd": np.ones((1, 2), np.float32)},
                      "node 's' (ScatterElements): updates [1, 2] must have the shape of "
                      "indices [2, 2]")
        self.run_case(n, {"data": np.zeros((1, 5), np.float32),
                          "ind": np.array([[1, 3], [0, 4]], np.int64),
                          "upd": np.ones((2, 2), np.float32)},
                      "node 's' (ScatterElements): indices [2, 2] are longer than data [1, 5] "
                      "along axis 0, which is not the indexed axis 1")

    def test_gather_elements_indices_within_the_data(self):
        n = helper.make_node("GatherElements", ["data", "ind"], ["y"], name="g", axis=0)
        self.run_case(n, {"data": np.ones((3, 1), np.float32),
                          "ind": np.array([[0, 1, 2], [2, 1, 0]], np.int64)},
                      "node 'g' (GatherElements): indices [2, 3] are longer than data [3, 1] "
                      "along axis 1, which is not the indexed axis 0")

    def test_one_hot_values_are_two(self):
        n = helper.make_node("OneHot", ["ind", "depth", "values"], ["y"], name="o")
        for values in (np.array([0, 1, 2], np.float32), np.array([[0, 1]], np.float32)):
            self.run_case(n, {"ind": np.array([1, 0], np.int64), "depth": np.array(3, np.int64),
                              "values": values},
                          f"node 'o' (OneHot): values is {list(values.shape)}; it must be [2] "
                          "(the off value, then the on value)")

    def test_list_operands_are_vectors(self):
        """Lists given as tensors (Reduce's axes, Slice's starts, TopK's K, Tile's repeats,
        Reshape's shape, Split's sizes) in another shape than 1-D, a scalar or a [1, 1]
        matrix, were read as if flattened; onnxruntime refuses them (differential suite,
        seeds 54-75: the commonest "onnxruntime refuses" mutant once such operands could be
        graph inputs). The forms onnxruntime and ONNX's shape inference take still run,
        against onnxruntime: a scalar for Unsqueeze's axes, one row for Pad's pads."""
        n = helper.make_node
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        i64 = lambda v, shape: np.array(v, np.int64).reshape(shape)  # noqa: E731
        for node, feeds, what, shape in (
                (n("ReduceSum", ["x", "a"], ["y"], name="r"), {"x": x, "a": i64(1, [])},
                 "axes", []),
                (n("ReduceMax", ["x", "a"], ["y"], name="r"), {"x": x, "a": i64(1, [1, 1])},
                 "axes", [1, 1]),
                (n("Slice", ["x", "a", "b"], ["y"], name="r"),
                 {"x": x, "a": i64(1, [1, 1]), "b": i64(3, [1])}, "starts", [1, 1]),
                (n("TopK", ["x", "a"], ["y", "yi"], name="r"), {"x": x, "a": i64(2, [1, 1])},
                 "K", [1, 1]),
                (n("Tile", ["x", "a"], ["y"], name="r"), {"x": x, "a": i64([2, 1], [2, 1])},
                 "repeats", [2, 1]),
                (n("Reshape", ["x", "a"], ["y"], name="r"), {"x": x, "a": i64(6, [])},
                 "the target shape", []),
                (n("Split", ["x", "a"], ["y", "z"], name="r", axis=1),
                 {"x": x, "a": i64([1, 2], [1, 2])}, "split", [1, 2]),
                (n("Expand", ["x", "a"], ["y"], name="r"), {"x": x, "a": i64(3, [])},
                 "the target shape", []),
                (n("ConstantOfShape", ["a"], ["y"], name="r"), {"a": i64([2, 3], [1, 2])},
                 "the shape", [1, 2])):
            self.run_case(node, feeds, f"node 'r' ({node.op_type}): {what} is {shape}; it must "
                                       "be a 1-D tensor")
        for node, feeds in ((n("Unsqueeze", ["x", "a"], ["y"]), {"x": x, "a": i64(0, [])}),
                            (n("Pad", ["x", "a"], ["y"]), {"x": x, "a": i64([0, 1, 1, 0], [1, 4])})):
            self.run_as_onnxruntime([node], feeds, {"y": TensorProto.FLOAT})

    def test_repeated_axes_of_pad_and_slice(self):
        """Pad and Slice with an axis named twice (ONNX: undefined for Pad, invalid for
        Slice) ran with the last entry's pads or bounds; ONNX's checker and onnxruntime
        refuse them (multi-node differential suite, seed 8: the expanded CenterCropPad)."""
        n = helper.make_node
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        i64 = lambda v: np.array(v, np.int64)  # noqa: E731
        self.run_case(n("Pad", ["x", "p", "", "a"], ["y"], name="r"),
                      {"x": x, "p": i64([1, 0, 0, 1]), "a": i64([1, -1])},
                      "node 'r' (Pad): axes [1, -1] name axis 1 twice")
        self.run_case(n("Slice", ["x", "s", "e", "a"], ["y"], name="r"),
                      {"x": x, "s": i64([0, 1]), "e": i64([2, 3]), "a": i64([0, 0])},
                      "node 'r' (Slice): axes [0, 0] name axis 0 twice")

    def test_gather_nd_batch_axes_match(self):
        """A GatherND whose indices have another size than the data on the batch_dims
        axes ran (differential suite, seeds 86 and 91: indices [3, 1] or [1, 1] into data
        [2, 2] with batch_dims = 1); the spec requires the same sizes and onnxruntime
        refuses it. The same node with matching batch axes runs as onnxruntime does."""
        n = helper.make_node("GatherND", ["x", "i"], ["y"], name="g", batch_dims=1)
        x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
        for ind in (np.array([[1], [0], [1]], np.int64), np.array([[1]], np.int64)):
            self.run_case(n, {"x": x, "i": ind},
                          f"node 'g' (GatherND): indices {list(ind.shape)} and data [2, 2, 2] "
                          "differ on the first 1 (batch_dims) axes")
        self.run_as_onnxruntime([n], {"x": x, "i": np.array([[1], [0]], np.int64)},
                                {"y": TensorProto.FLOAT})

    def test_recurrent_sequence_lens_one_per_batch_entry(self):
        """An LSTM (or GRU, RNN) whose sequence_lens was a scalar ran (differential suite,
        seed 89: test_lstm_with_peepholes with sequence_lens [] in place of [2]); onnxruntime
        refuses it. One length per batch entry runs as onnxruntime does."""
        rng = np.random.default_rng(5)
        seq, batch, inp, hid = 3, 2, 4, 3
        x = rng.standard_normal((seq, batch, inp)).astype(np.float32)
        for op, gates in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
            w = rng.standard_normal((1, gates * hid, inp)).astype(np.float32)
            r = rng.standard_normal((1, gates * hid, hid)).astype(np.float32)
            b = rng.standard_normal((1, 2 * gates * hid)).astype(np.float32)
            n = helper.make_node(op, ["x", "w", "r", "b", "lens"], ["", "y"], name="l",
                                 hidden_size=hid)
            for lens in (np.array(seq, np.int32), np.full((1, batch), seq, np.int32)):
                with self.subTest(op=op, lens=lens.shape):
                    self.run_case(n, {"x": x, "w": w, "r": r, "b": b, "lens": lens},
                                  f"node 'l' ({op}): sequence_lens {list(lens.shape)} is not "
                                  "[2] (one length per batch entry)")
            self.run_as_onnxruntime([n], {"x": x, "w": w, "r": r, "b": b,
                                          "lens": np.full((batch,), seq, np.int32)},
                                    {"y": TensorProto.FLOAT},
                                    compare=lambda g, w, name: np.testing.assert_allclose(
                                        g, w, rtol=1e-5, atol=1e-6, err_msg=name))

    def test_conv_bias_has_one_value_per_output_channel(self):
        """A Conv or ConvTranspose bias shorter than the output channels was read past its
        end, one of another shape read as if flattened (multi-node differential suite, seeds
        34-45, the expanded CausalConvWithState; onnxruntime refuses both)."""
        n = helper.make_node
        x = np.ones((1, 2, 5), np.float32)
        for op, w, b, m in (("Conv", np.ones((4, 2, 3), np.float32), np.ones(1, np.float32), 4),
                            ("Conv", np.ones((4, 2, 3), np.float32), np.ones((4, 1), np.float32),
                             4),
                            ("ConvTranspose", np.ones((2, 3, 3), np.float32),
                             np.ones(2, np.float32), 3)):
            self.run_case(n(op, ["x", "w", "b"], ["y"], name="c"), {"x": x, "w": w, "b": b},
                          f"node 'c' ({op}): bias B {list(b.shape)} must be [{m}], one value "
                          "per output channel")

    def test_pool_pads_smaller_than_the_kernel(self):
        """A pooling pad as long as its kernel makes windows of padding alone (an average of
        nothing without count_include_pad); onnxruntime refuses it ("Pad should be smaller
        than kernel"), mpc ran it (differential suite, seed 2, LpPool). With a dilation the
        bound is the dilated kernel's extent: a shorter pad leaves a real element in every
        window (the pooling tests' dilated cases)."""
        x = np.ones((1, 1, 4, 4), np.float32)
        for op in ("LpPool", "AveragePool", "MaxPool"):
            node = helper.make_node(op, ["x"], ["y"], name="p", kernel_shape=[3, 3],
                                    pads=[2, 2, 3, 2])
            self.run_case(node, {"x": x}, f"node 'p' ({op}): pads [2, 2, 3, 2] must be smaller "
                                          "than the dilated kernel [3, 3] along each axis")
        node = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2],
                                dilations=[2, 1], pads=[3, 0, 0, 0])
        self.run_case(node, {"x": x}, "node 'p' (MaxPool): pads [3, 0, 0, 0] must be smaller "
                                      "than the dilated kernel [3, 2] along each axis")

    def test_conv_transpose_geometry(self):
        """ConvTranspose ran with input channels its group does not divide (the groups
        overlapping), with an output_padding as large as its stride and dilation (rows no
        window reaches; ONNX says it must be less), and with an output_shape a stride or more
        past what the input reaches (onnxruntime refuses each; seeds 60-75). Less than a
        stride past it is an implicit output_padding (onnx's test_convtranspose_output_shape),
        checked against onnxruntime."""
        x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
        w = np.ones((1, 2, 3, 3), np.float32)
        n = helper.make_node
        self.run_case(n("ConvTranspose", ["x", "w"], ["y"], name="c", group=4),
                      {"x": np.ones((3, 2, 3, 3), np.float32),
                       "w": np.ones((2, 1, 3, 3), np.float32)},
                      "node 'c' (ConvTranspose): input channels 2 of [3, 2, 3, 3] are not "
                      "divisible by group 4")
        self.run_case(n("ConvTranspose", ["x", "w"], ["y"], name="c", output_padding=[1, 1]),
                      {"x": x, "w": w},
                      "node 'c' (ConvTranspose): output_padding [1, 1] must be at least 0 and "
                      "less than the stride [1, 1] or the dilation [1, 1] of its axis")
        self.run_case(n("ConvTranspose", ["x", "w"], ["y"], name="c", output_shape=[10, 8]),
                      {"x": x, "w": w},
                      "node 'c' (ConvTranspose): output_shape [10, 8] is 5 past 5 along spatial "
                      "axis 0, the most input [1, 1, 3, 3] reaches with this kernel and "
                      "output_padding: at most 0 (the stride less 1)")
        for attrs in ({"strides": [3, 2], "output_shape": [10, 8]},
                      {"strides": [2, 1], "dilations": [1, 2], "output_padding": [1, 0]}):
            self.run_as_onnxruntime([n("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                                    {"x": x, "w": w}, {"y": TensorProto.FLOAT},
                                    compare=lambda g, w_, k: np.testing.assert_allclose(
                                        g, w_, rtol=1e-6, err_msg=str(attrs)))

    def test_fitting_shapes_still_run(self):
        """The same ops with fitting operands against onnxruntime: an index tuple shorter
        than the data's rank, indices shorter than the data along the other axis."""
        n = helper.make_node
        feeds = {"data": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
                 "nd_ind": np.array([[1, 0], [0, 2]], np.int64),
                 "nd_upd": np.full((2, 4), -1, np.float32),
                 "el_ind": np.array([[[3, 0]], [[1, 2]]], np.int64),
                 "el_upd": np.array([[[7, 8]], [[9, 10]]], np.float32),
                 "oh_ind": np.array([2, 0], np.int64), "depth": np.array(4, np.int64),
                 "values": np.array([0.5, 3], np.float32)}
        nodes = [n("ScatterND", ["data", "nd_ind", "nd_upd"], ["nd"]),
                 n("ScatterElements", ["data", "el_ind", "el_upd"], ["se"], axis=2),
                 n("GatherElements", ["data", "el_ind"], ["ge"], axis=2),
                 n("OneHot", ["oh_ind", "depth", "values"], ["oh"])]
        self.run_as_onnxruntime(nodes, feeds, {o: TensorProto.FLOAT
                                               for o in ("nd", "se", "ge", "oh")})


class ValueMutantTest(CliCase):
    """What the differential suite's value mutants found (`--mutate values`, seeds 1-10:
    an input's values changed in its shape): a Dropout ratio outside [0, 1) ran (onnxruntime
    refuses it, inference mode too); a Resize roi holding NaN gave the extrapolation value
    everywhere, and an infinite scale converted an infinite size to int64 (undefined
    behaviour); SoftmaxCrossEntropyLoss lost log(sum) next to large logits; a float Range of
    a NaN bound ran. Looking at a multi-node mutant (an expanded Range's Loop) showed a
    valid Loop(M, "") refused; TopK dropped a NaN; an Attention nonpad_kv_seqlen outside the
    keys' length ran (seed 60). And what mpc keeps on purpose: a NaN in a max pooling's
    window is NaN; ReverseSequence lengths are clamped."""

    def test_dropout_ratio_in_range(self):
        n = helper.make_node("Dropout", ["x", "r"], ["y"], name="d")
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        for r, text in ((1.0, "1"), (-0.5, "-0.5"), (np.nan, "nan"), (7e4, "70000")):
            self.run_case(n, {"x": x, "r": np.array(r, np.float32)},
                          f"node 'd' (Dropout): ratio {text} is outside [0, 1)")
        self.run_as_onnxruntime([n], {"x": x, "r": np.array(0.9, np.float32)},
                                {"y": TensorProto.FLOAT})
        # The attribute of opsets 7-11 too.
        self.run_case(helper.make_node("Dropout", ["x"], ["y"], name="d", ratio=1.5),
                      {"x": x}, "node 'd' (Dropout): ratio 1.5 is outside [0, 1)", opset=10)

    def test_resize_roi_finite_and_scales_bounded(self):
        x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
        n = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], name="r",
                             coordinate_transformation_mode="tf_crop_and_resize",
                             mode="linear", axes=[3, 2])
        sizes = np.array([3, 3], np.int64)
        for bad, what in ((np.nan, "NaN"), (np.inf, "infinite")):
            roi = np.array([0.6, 0.4, bad, 0.6], np.float32)
            self.run_case(n, {"x": x, "roi": roi, "sizes": sizes},
                          f"node 'r' (Resize): roi value 2 is {what}; tf_crop_and_resize "
                          "needs finite coordinates")
        self.run_as_onnxruntime([n], {"x": x, "roi": np.array([0.6, 0.4, 0.8, 0.6], np.float32),
                                      "sizes": sizes}, {"y": TensorProto.FLOAT},
                                compare=lambda g, w, name: np.testing.assert_allclose(
                                    g, w, rtol=1e-5, err_msg=name))
        s = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="r", mode="nearest")
        for scale, text in ((np.inf, "INF"), (1e30, "1000000015047466219876688855040")):
            self.run_case(s, {"x": x, "scales": np.array([1, 1, 2, scale], np.float32)},
                          f"node 'r' (Resize): scale {text} makes axis 3 too long")

    def test_softmax_cross_entropy_of_large_logits(self):
        """SoftmaxCrossEntropyLoss took each log-probability as v - (max + log(sum)): a
        row of -1e30s (value mutant, seed 15) had loss 0 instead of log(5), and logits near
        fp16's largest value, where a float32's step is 0.004, lost most of log(sum).
        Against a float64 log-softmax, with the log-probabilities output too."""
        x = np.array([[-1e30] * 5, [60000.0, 60000.5, 59999.0, 59990.0, 60000.25],
                      [3.0, -2.0, 0.5, 1.0, 0.0]], np.float32)
        labels = np.array([1, 0, 3], np.int64)
        n = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "y"], ["loss", "logp"],
                             reduction="none")
        f = helper.make_tensor_value_info
        save_model(os.path.join(self.dir, "m.onnx"), [n],
                   [f("x", TensorProto.FLOAT, [3, 5]), f("y", TensorProto.INT64, [3])],
                   [f("loss", TensorProto.FLOAT, None), f("logp", TensorProto.FLOAT, None)], 13)
        np.save(os.path.join(self.dir, "x.npy"), x)
        np.save(os.path.join(self.dir, "y.npy"), labels)
        r = mpc("run", "m.onnx", "--input", "x=x.npy", "--input", "y=y.npy", "--outputs", "o",
                cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        x64 = x.astype(np.float64)
        shifted = x64 - x64.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        np.testing.assert_allclose(np.load(os.path.join(self.dir, "o", "logp.npy")), logp,
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.load(os.path.join(self.dir, "o", "loss.npy")),
                                   -logp[np.arange(3), labels], rtol=1e-6)

    def test_loop_with_an_empty_condition_input(self):
        """Loop(M, "") names both optional leading inputs, the condition empty; it was
        refused ("has 1 input(s), Loop-16 takes from 2"): trailing empty inputs did not
        count toward an op's minimum, where ONNX's checker counts them. Against
        onnxruntime (the body's condition output ends the loop in both)."""
        f = helper.make_tensor_value_info
        body = helper.make_graph(
            [helper.make_node("Less", ["i", "three"], ["c_out"]),
             helper.make_node("Mul", ["i", "i"], ["s"])], "body",
            [f("i", TensorProto.INT64, []), f("c_in", TensorProto.BOOL, [])],
            [f("c_out", TensorProto.BOOL, []), f("s", TensorProto.INT64, [])],
            [helper.make_tensor("three", TensorProto.INT64, [], [3])])
        loop = helper.make_node("Loop", ["trip", ""], ["y"], body=body)
        for trip in (2, 6):
            self.run_as_onnxruntime([loop], {"trip": np.array(trip, np.int64)},
                                    {"y": TensorProto.INT64})

    def test_range_of_non_finite_bounds(self):
        """A float Range with a NaN bound ran with no elements, an infinite one asked for
        2^63 (value mutants, seeds 19 and 25); onnxruntime and onnx.reference refuse both."""
        n = helper.make_node("Range", ["s", "l", "d"], ["y"], name="r")
        f32 = lambda v: np.array(v, np.float32)  # noqa: E731
        for start, limit, text in ((np.nan, 5, "start nan, limit 5"),
                                   (-np.inf, 5, "start -inf, limit 5"),
                                   (1, np.inf, "start 1, limit inf")):
            self.run_case(n, {"s": f32(start), "l": f32(limit), "d": f32(2)},
                          f"node 'r' (Range): {text} and delta 2 give no finite element count")
        self.run_as_onnxruntime([n], {"s": f32(1), "l": f32(5.5), "d": f32(1.5)},
                                {"y": TensorProto.FLOAT})

    def test_reverse_sequence_lengths_are_clamped(self):
        """Lengths outside [0, time steps] are clamped (user guide): a longer one reverses
        the whole sequence, a negative one none of it (onnxruntime refuses both; against
        numpy)."""
        x = np.arange(12, dtype=np.float32).reshape(4, 3)  # time 4, batch 3
        lens = np.array([-1, 9, 2], np.int64)
        n = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1,
                             time_axis=0)
        f = helper.make_tensor_value_info
        save_model(os.path.join(self.dir, "m.onnx"), [n],
                   [f("x", TensorProto.FLOAT, [4, 3]), f("lens", TensorProto.INT64, [3])],
                   [f("y", TensorProto.FLOAT, None)], 18)
        np.save(os.path.join(self.dir, "x.npy"), x)
        np.save(os.path.join(self.dir, "lens.npy"), lens)
        r = mpc("run", "m.onnx", "--input", "x=x.npy", "--input", "lens=lens.npy",
                "--outputs", "o", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = x.copy()
        for b, k in enumerate(np.clip(lens, 0, 4)):
            want[:k, b] = x[:k, b][::-1]
        np.testing.assert_array_equal(np.load(os.path.join(self.dir, "o", "y.npy")), want)

    def test_top_k_ranks_nan_above_every_number(self):
        """TopK compared a NaN as unordered: it fell out of a largest-k selection (value
        mutant, seed 39: test_top_k with a NaN) and the sort's comparator was not a strict
        weak order. A NaN ranks above every number now, as numpy's sort and PyTorch's
        topk order it; against onnxruntime, which agrees, both directions, f32 and f16."""
        x = np.array([[0, 1, np.nan, 3, np.nan], [5, np.nan, -1, 2, 2]], np.float32)
        for dtype in (np.float32, np.float16):
            for largest in (1, 0):
                with self.subTest(dtype=dtype.__name__, largest=largest):
                    n = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1,
                                         largest=largest)
                    self.run_as_onnxruntime(
                        [n], {"x": x.astype(dtype), "k": np.array([4], np.int64)},
                        {"v": helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                         "i": TensorProto.INT64})

    def test_attention_nonpad_lengths_within_the_keys(self):
        """Attention-24's nonpad_kv_seqlen counts each batch entry's valid key positions: a
        value of -2^63+1 (value mutant, seed 60) masked every key, as one past the keys'
        length masked none; onnxruntime refuses both. Against onnxruntime in range."""
        rng = np.random.default_rng(5)
        q = rng.standard_normal((2, 1, 2, 4)).astype(np.float32)
        k = rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
        v = rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
        n = helper.make_node("Attention", ["q", "k", "v", "", "", "", "lens"], ["y"], name="a")
        for bad in (-9223372036854775807, -1, 4):
            self.run_case(n, {"q": q, "k": k, "v": v, "lens": np.array([2, bad], np.int64)},
                          f"node 'a' (Attention): nonpad_kv_seqlen value {bad} is outside "
                          "[0, 3] (the key sequence's length)", opset=24)
        self.run_as_onnxruntime([n], {"q": q, "k": k, "v": v,
                                      "lens": np.array([3, 1], np.int64)},
                                {"y": TensorProto.FLOAT}, opset=24,
                                compare=lambda g, w, name: np.testing.assert_allclose(
                                    g, w, rtol=1e-5, atol=1e-6, err_msg=name))

    def test_an_empty_shape_whose_strides_overflow(self):
        """Seed 68: Reshape with allowzero to [3, 2^63 - 2, 0] ran (no element), and a
        Transpose of it overflowed its strides (UBSan: signed overflow in the copy plan);
        onnxruntime refuses the shape. An empty tensor with a huge dimension whose strides
        fit still runs."""
        n = helper.make_node("Reshape", ["x", "s"], ["r"], name="r", allowzero=1)
        t = helper.make_node("Transpose", ["r"], ["y"], name="t", perm=[2, 0, 1])
        x = np.zeros([0, 3, 4], np.float32)
        f = helper.make_tensor_value_info
        save_model(os.path.join(self.dir, "m.onnx"), [n, t],
                   [f("x", TensorProto.FLOAT, [0, 3, 4]), f("s", TensorProto.INT64, [3])],
                   [f("y", TensorProto.FLOAT, None)], 18)
        np.save(os.path.join(self.dir, "x.npy"), x)
        for shape, error in (([3, 2 ** 63 - 2, 0], True), ([2 ** 62, 0, 1], False)):
            with self.subTest(shape=shape):
                np.save(os.path.join(self.dir, "s.npy"), np.array(shape, np.int64))
                args = ["run", "m.onnx", "--input", "x=x.npy", "--input", "s=s.npy"]
                if error:
                    self.expect_one_error(
                        args, f"value 'r': shape [{', '.join(map(str, shape))}]: its nonzero "
                              "dimensions multiply past 2^63 (even with no element, its "
                              "strides do not fit in int64)")
                else:
                    r = mpc(*args, cwd=self.dir)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertIn("output 'y': f32 [1, 4611686018427387904, 0]", r.stdout)

    def test_pad_needs_values_to_pad_from(self):
        """Seed 72: edge, reflect and wrap padding of an axis that negative pads crop to
        nothing read the values cropped away (x [1, 3], pads [-1, 0, 2, 0], edge: two rows
        of the row that was removed); onnxruntime refuses it, even when nothing is added.
        Where a crop leaves something, wrap and reflect padded about the uncropped axis and
        read the cropped values too; they now pad what is left, as onnxruntime does. An
        empty axis that is not padded, and constant padding, still run."""
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        for mode in ("edge", "reflect", "wrap"):
            n = helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode=mode)
            for pads in ([-2, 0, 2, 0], [-1, 1, -1, 1], [0, 0, -2, 0]):
                with self.subTest(mode=mode, pads=pads):
                    self.run_case(n, {"x": x, "pads": np.array(pads, np.int64)},
                                  f"node 'p' (Pad): the negative pads crop axis 0 of [2, 3] "
                                  f"to nothing; {mode} padding needs values to pad from")
            # One side cropped, the other padded: the padding comes from what is left
            # (wrap and reflect read the cropped values before).
            x4 = np.arange(20, dtype=np.float32).reshape(4, 5)
            # (Within what reflect can take: onnxruntime refuses a pad past the axis' length.)
            for pads in ([-1, 2, 2, -2], [2, -2, -1, 2], [-1, -1, 2, 3]):
                with self.subTest(mode=mode, pads=pads):
                    self.run_as_onnxruntime([n], {"x": x4, "pads": np.array(pads, np.int64)},
                                            {"y": TensorProto.FLOAT})
            if mode != "wrap":  # onnxruntime: "Unexpected mode of 3" for an empty input
                with self.subTest(mode=mode, pads="empty axis"):
                    self.run_as_onnxruntime([n], {"x": np.zeros([0, 3], np.float32),
                                                  "pads": np.array([0, 1, 0, 1], np.int64)},
                                            {"y": TensorProto.FLOAT})
        c = helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode="constant")
        self.run_as_onnxruntime([c], {"x": x, "pads": np.array([-2, 0, 2, 0], np.int64)},
                                {"y": TensorProto.FLOAT})

    def test_arg_max_and_min_answer_a_nan(self):
        """ArgMax and ArgMin answer a NaN's position, the first (the last with
        select_last_index), against numpy's argmax / argmin (which give the first NaN);
        before, a NaN answered only where it came first (onnxruntime's rule), while
        ReduceMax, MaxPool and TopK already took NaN as the extreme."""
        x = np.array([[1, np.nan, 3, np.nan], [np.nan, 5, -2, 7], [4, 0, 4, -1]], np.float32)
        f = helper.make_tensor_value_info
        np.save(os.path.join(self.dir, "x.npy"), x)
        for op, ref in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
            for last in (0, 1):
                with self.subTest(op=op, select_last_index=last):
                    n = helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0,
                                         select_last_index=last)
                    save_model(os.path.join(self.dir, "m.onnx"), [n],
                               [f("x", TensorProto.FLOAT, [3, 4])],
                               [f("y", TensorProto.INT64, None)], 18)
                    shutil.rmtree(os.path.join(self.dir, "o"), ignore_errors=True)
                    r = mpc("run", "m.onnx", "--input", "x=x.npy", "--outputs", "o",
                            cwd=self.dir)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    want = ref(x, axis=1) if not last else \
                        x.shape[1] - 1 - ref(x[:, ::-1], axis=1)
                    np.testing.assert_array_equal(
                        np.load(os.path.join(self.dir, "o", "y.npy")), want)

    def test_max_pooling_keeps_nan(self):
        """A window holding a NaN gives NaN, against numpy's max over each window (the
        oracle: it propagates NaN, as PyTorch's max pooling does; onnxruntime skips it)."""
        x = np.random.default_rng(3).standard_normal((1, 2, 9, 7)).astype(np.float32)
        x[0, 0, 4, 3] = np.nan
        x[0, 1, 0, 0] = np.nan
        np.save(os.path.join(self.dir, "x.npy"), x)
        f = helper.make_tensor_value_info
        for node in (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 2],
                                      strides=[2, 1]),
                     helper.make_node("GlobalMaxPool", ["x"], ["y"])):
            with self.subTest(op=node.op_type):
                save_model(os.path.join(self.dir, "m.onnx"), [node],
                           [f("x", TensorProto.FLOAT, list(x.shape))],
                           [f("y", TensorProto.FLOAT, None)], 18)
                shutil.rmtree(os.path.join(self.dir, "o"), ignore_errors=True)
                r = mpc("run", "m.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
                self.assertEqual(r.returncode, 0, r.stderr)
                got = np.load(os.path.join(self.dir, "o", "y.npy"))
                if node.op_type == "GlobalMaxPool":
                    want = x.max(axis=(2, 3), keepdims=True)
                else:
                    win = np.lib.stride_tricks.sliding_window_view(x, (3, 2), axis=(2, 3))
                    want = win[:, :, ::2, :].max(axis=(-2, -1))
                self.assertEqual(got.shape, want.shape)
                self.assertTrue(np.isnan(want).any())
                np.testing.assert_array_equal(got, want)


class EmptyAndZeroTripTest(CliCase):
    """What the multi-node differential suite found (seed 8), crashes both: a Loop that ran
    no iteration gave its scan output no element type when the body did not declare one,
    and `mpc run` died writing it (SIGSEGV); a Range whose limit was an empty tensor was read
    past its end, and so were OneHot's depth and Dropout's ratio and training_mode."""

    def loop_model(self, declared):
        f = helper.make_tensor_value_info
        body = helper.make_graph(
            [helper.make_node("Identity", ["c_in"], ["c_out"]),
             helper.make_node("Relu", ["x"], ["s"])], "body",
            [f("i", TensorProto.INT64, []), f("c_in", TensorProto.BOOL, [])],
            [f("c_out", TensorProto.BOOL, []), f("s", TensorProto.UNDEFINED, None)])
        inits = [helper.make_tensor("m", TensorProto.INT64, [], [0]),
                 helper.make_tensor("c", TensorProto.BOOL, [], [True])]
        node = helper.make_node("Loop", ["m", "c"], ["y"], name="loop", body=body)
        return save_model(os.path.join(self.dir, "m.onnx"), [node],
                          [f("x", TensorProto.FLOAT, [3])],
                          [f("y", TensorProto.FLOAT if declared else TensorProto.UNDEFINED,
                             None)], 17, inits=inits)

    def test_loop_of_no_iteration(self):
        self.loop_model(declared=True)
        np.save(os.path.join(self.dir, "x.npy"), np.ones(3, np.float32))
        r = mpc("run", "m.onnx", "--input", "x=x.npy", "--outputs", "o", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        y = np.load(os.path.join(self.dir, "o", "y.npy"))
        self.assertEqual((y.dtype, y.shape), (np.float32, (0,)))
        self.loop_model(declared=False)
        self.expect_one_error(["run", "m.onnx", "--input", "x=x.npy", "--outputs", "o2"],
                              "node 'loop' (Loop): no iteration ran, and neither the body "
                              "output 's' nor the node's output declares an element type")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "o2")))

    def test_loop_trip_count_of_another_type(self):
        """Seed 14: a trip count Cast to f32 ran (read as an integer); the spec and
        onnxruntime take int64 only. Loop-21's schema was a fallback to Loop-16 whose types
        the verifier did not check, so the Loop learned to say so itself; now that schema
        is exact, and every command refuses the model before it runs (the Loop's own check
        stays behind it)."""
        f = helper.make_tensor_value_info
        body = helper.make_graph(
            [helper.make_node("Identity", ["c_in"], ["c_out"]),
             helper.make_node("Relu", ["v_in"], ["v_out"])], "body",
            [f("i", TensorProto.INT64, []), f("c_in", TensorProto.BOOL, []),
             f("v_in", TensorProto.FLOAT, [3])],
            [f("c_out", TensorProto.BOOL, []), f("v_out", TensorProto.FLOAT, [3])])
        inits = [helper.make_tensor("m", TensorProto.INT64, [], [2]),
                 helper.make_tensor("c", TensorProto.BOOL, [], [True])]
        nodes = [helper.make_node("Cast", ["m"], ["mf"], to=TensorProto.FLOAT),
                 helper.make_node("Loop", ["mf", "c", "x"], ["y"], name="loop", body=body)]
        m = save_model(os.path.join(self.dir, "m.onnx"), nodes, [f("x", TensorProto.FLOAT, [3])],
                       [f("y", TensorProto.FLOAT, [3])], 21, inits=inits)
        with self.assertRaises(onnx.shape_inference.InferenceError):
            onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
        self.each_command("m.onnx", "m.onnx: graph 'g': node 'loop' (Loop) input 'mf' has type "
                                    "f32 (the type its producer gives it), which Loop-21 does "
                                    "not accept for I")

    def test_scalar_operands_that_are_empty(self):
        f = helper.make_tensor_value_info
        empty = lambda name, t: helper.make_tensor(name, t, [0], [])
        scalar = lambda name, t, v: helper.make_tensor(name, t, [], [v])
        cases = [
            ("Range", ["s", "l", "d"], [], [scalar("s", TensorProto.FLOAT, 0.0),
                                            empty("l", TensorProto.FLOAT),
                                            scalar("d", TensorProto.FLOAT, 1.0)],
             "limit is [0]; it must be a scalar"),
            ("OneHot", ["i", "d", "v"], [f("i", TensorProto.INT64, [2])],
             [empty("d", TensorProto.INT64), helper.make_tensor("v", TensorProto.FLOAT, [2],
                                                                [0, 1])],
             "depth is [0]; it must be a scalar"),
            ("Dropout", ["x", "r"], [f("x", TensorProto.FLOAT, [2])],
             [empty("r", TensorProto.FLOAT)], "ratio is [0]; it must be a scalar"),
            ("Dropout", ["x", "r", "t"], [f("x", TensorProto.FLOAT, [2])],
             [scalar("r", TensorProto.FLOAT, 0.5), empty("t", TensorProto.BOOL)],
             "training_mode is [0]; it must be a scalar"),
        ]
        for op, ins, graph_ins, inits, message in cases:
            with self.subTest(op=op, message=message):
                save_model(os.path.join(self.dir, "m.onnx"),
                           [helper.make_node(op, ins, ["y"], name="n")], graph_ins,
                           [f("y", TensorProto.FLOAT, None)], 17, inits=inits)
                self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                                      f"node 'n' ({op}): {message}")

    def test_window_attributes_of_models_onnxruntime_refuses(self):
        """The differential suite over the wheel's exported models (seeds 2-5): a
        ConvTranspose kernel_shape that is not the weight's ran as if absent, and a Flatten
        of opset 9 ran with a negative axis (taken from opset 11)."""
        f = helper.make_tensor_value_info
        w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2, 3, 3], np.ones(54))
        for ks in ([3], [2, 2]):
            with self.subTest(kernel_shape=ks):
                save_model(os.path.join(self.dir, "m.onnx"),
                           [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="n",
                                             kernel_shape=ks)],
                           [f("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                           [f("y", TensorProto.FLOAT, None)], 17, inits=[w])
                self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                                      "node 'n' (ConvTranspose): kernel_shape does not match "
                                      "the weight")
        save_model(os.path.join(self.dir, "m.onnx"),
                   [helper.make_node("Flatten", ["x"], ["y"], name="n", axis=-1)],
                   [f("x", TensorProto.FLOAT, [2, 3, 4])], [f("y", TensorProto.FLOAT, None)], 9)
        self.expect_one_error(["run", "m.onnx", "--random-inputs"],
                              "node 'n' (Flatten): axis -1 is negative; Flatten takes a "
                              "negative axis from opset 11")

class LegacyBroadcastTest(CliCase):
    """Before opset 7 the binary ops broadcast only with `broadcast = 1`, B over a run of
    A's axes starting at `axis`, and PRelu's slope was per channel. mpc ran them with
    NumPy's broadcasting: an Add-6 with axis = 1, A [2, 3, 4, 3] and B [3] added B along
    the last axis, exit 0 (found running the onnx wheel's pytorch-converted tests, whose
    PRelu-6 models mpc refused with a misleading "do not broadcast"). Where the old rule
    and NumPy's agree the node runs (values against NumPy with the old rule); where they
    differ, one line says so; operands of two shapes without broadcast = 1 are invalid."""

    def run_legacy(self, op, attrs, a, b):
        f = helper.make_tensor_value_info
        node = helper.make_node(op, ["a", "b"], ["y"], name="n", **attrs)
        m = save_model(os.path.join(self.dir, "m.onnx"), [node],
                       [f("a", TensorProto.FLOAT, list(a.shape)),
                        f("b", TensorProto.FLOAT, list(b.shape))],
                       [f("y", TensorProto.FLOAT, None)], 6)
        np.save(os.path.join(self.dir, "a.npy"), a)
        np.save(os.path.join(self.dir, "b.npy"), b)
        shutil.rmtree(os.path.join(self.dir, "o"), ignore_errors=True)
        r = mpc("run", "m.onnx", "--input", "a=a.npy", "--input", "b=b.npy", "--outputs", "o",
                cwd=self.dir)
        return r, m

    def test_max_and_min_before_opset_8_take_one_shape(self):
        """Max-6 and Min-6 do not broadcast (that came with opset 8); mpc broadcast them and
        onnxruntime refuses them (the models differential suite, seeds 11-21). Equal shapes
        still run, against NumPy."""
        a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
        for op, fn in (("Max", np.maximum), ("Min", np.minimum)):
            r, _ = self.run_legacy(op, {}, a, np.ones((3, 1), np.float32))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stderr, f"mpc: error: node 'n' ({op}): before opset 8 the inputs "
                                       f"of {op} have one shape ([3, 4] and [3, 1])\n")
            b = np.full((3, 4), 0.5, np.float32)
            r, _ = self.run_legacy(op, {}, a, b)
            self.assertEqual(r.returncode, 0, r.stderr)
            np.testing.assert_array_equal(np.load(os.path.join(self.dir, "o", "y.npy")),
                                          fn(a, b))

    def test_old_rule_agreeing_with_numpy_runs(self):
        rng = np.random.default_rng(3)
        a = rng.standard_normal((2, 3, 4, 3)).astype(np.float32)
        cases = [("Add", {"broadcast": 1}, a, rng.standard_normal(3).astype(np.float32),
                  lambda a, b: a + b),
                 ("Mul", {"broadcast": 1, "axis": 2}, a,
                  rng.standard_normal((4, 3)).astype(np.float32), lambda a, b: a * b),
                 ("Sub", {}, a, rng.standard_normal(a.shape).astype(np.float32),
                  lambda a, b: a - b),
                 ("PRelu", {}, a[0, 0], rng.standard_normal(3).astype(np.float32),
                  lambda a, b: np.where(a > 0, a, a * b))]
        for op, attrs, x, y, want in cases:
            with self.subTest(op=op, attrs=attrs):
                r, _ = self.run_legacy(op, attrs, x, y)
                self.assertEqual(r.returncode, 0, r.stderr)
                np.testing.assert_allclose(np.load(os.path.join(self.dir, "o", "y.npy")),
                                           want(x, y), rtol=1e-6)

    def test_old_rule_differing_from_numpy_is_refused(self):
        a = np.ones((2, 3, 4, 3), np.float32)
        hint = "; convert the model to opset 7 or newer (onnx.version_converter)"
        cases = [("Add", {"broadcast": 1, "axis": 1}, a, np.ones(3, np.float32),
                  "node 'n' (Add): B [3] broadcast along axis 1 of A [2, 3, 4, 3] (before "
                  "opset 7) is not NumPy's alignment, which mpc runs" + hint),
                 ("PRelu", {}, a, np.ones(3, np.float32),
                  "node 'n' (PRelu): PRelu before opset 7 takes its slope [3] per channel "
                  "(axis 1), which mpc does not run" + hint),
                 ("Div", {}, a, np.ones(3, np.float32),
                  "node 'n' (Div): before opset 7 the operands of Div have one shape unless "
                  "broadcast = 1 ([2, 3, 4, 3] and [3])")]
        for op, attrs, x, y, message in cases:
            with self.subTest(op=op, attrs=attrs):
                r, _ = self.run_legacy(op, attrs, x, y)
                self.assertEqual(r.returncode, 1)
                self.assertEqual(r.stderr, f"mpc: error: {message}\n")
                self.assertFalse(os.path.exists(os.path.join(self.dir, "o")))


class SchemaVersionTypeTest(CliCase):
    """Types of nodes of opsets 18-27, checked against their own version's schema. An op that
    changed after opset 17 (Reshape, Pad, Cast, Loop, ...) had a "fallback" schema there, the
    opset-17 one, whose types went unchecked: a Reshape-21 with an int32 shape was accepted
    (onnxruntime refuses it). mpc's rows now carry every schema change of opsets 18-27
    (tests/tools/test_ops.py holds them to the onnx wheel), and two libonnx 1.12 schemas
    are corrected as later onnx releases corrected them."""

    def save(self, nodes, inputs, outputs, opset, inits=()):
        return save_model(os.path.join(self.dir, "m.onnx"), nodes, inputs, outputs, opset,
                          inits=inits)

    def test_fixed_input_types_of_ops_changed_after_opset_17(self):
        f = helper.make_tensor_value_info
        for opset in (21, 25):
            self.save([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
                      [f("x", TensorProto.FLOAT, [2, 3])], [f("y", TensorProto.FLOAT, None)],
                      opset, inits=[helper.make_tensor("s", TensorProto.INT32, [1], [6])])
            self.each_command("m.onnx", "m.onnx: graph 'g': node 'r' (Reshape) input 's' is i32, "
                                        "the schema wants i64")
        self.save([helper.make_node("Pad", ["x", "p"], ["y"], name="p")],
                  [f("x", TensorProto.FLOAT, [2, 3])], [f("y", TensorProto.FLOAT, None)], 23,
                  inits=[helper.make_tensor("p", TensorProto.INT32, [4], [0, 1, 0, 1])])
        self.each_command("m.onnx", "m.onnx: graph 'g': node 'p' (Pad) input 'p' is i32, the "
                                    "schema wants i64")

    def test_types_a_version_admits_and_one_it_does_not(self):
        """Cast-21 admits int4 (a result of 4-bit type is checked, not refused); IsNaN-20
        takes no integers."""
        f = helper.make_tensor_value_info
        self.save([helper.make_node("Cast", ["x"], ["y"], name="c", to=TensorProto.INT4)],
                  [f("x", TensorProto.FLOAT, [2, 4])], [f("y", TensorProto.INT4, [2, 4])], 21)
        r = mpc("inspect", "m.onnx", cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.save([helper.make_node("IsNaN", ["x"], ["y"], name="n")],
                  [f("x", TensorProto.INT32, [2])], [f("y", TensorProto.BOOL, [2])], 20)
        self.each_command("m.onnx", "m.onnx: graph 'g': node 'n' (IsNaN) input 'x' has type i32, "
                                    "which IsNaN-20 does not accept for T1")

    def test_grid_sample_16_as_onnx_corrected_it(self):
        """libonnx 1.12's GridSample-16 takes the grid in X's type and gives a float result;
        the op (and onnx since 1.13) takes X of any type, a float grid, and gives X's type.
        An f16 image with an f32 grid was refused; a u8 result was too."""
        f = helper.make_tensor_value_info
        for x_type, grid_type in ((TensorProto.FLOAT16, TensorProto.FLOAT),
                                  (TensorProto.UINT8, TensorProto.FLOAT16)):
            self.save([helper.make_node("GridSample", ["x", "g"], ["y"], name="gs")],
                      [f("x", x_type, [1, 1, 4, 4]), f("g", grid_type, [1, 2, 2, 2])],
                      [f("y", x_type, [1, 1, 2, 2])], 16)
            r = mpc("inspect", "m.onnx", cwd=self.dir)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.save([helper.make_node("GridSample", ["x", "g"], ["y"], name="gs")],
                  [f("x", TensorProto.FLOAT, [1, 1, 4, 4]), f("g", TensorProto.INT32, [1, 2, 2, 2])],
                  [f("y", TensorProto.FLOAT, [1, 1, 2, 2])], 16)
        self.each_command("m.onnx", "m.onnx: graph 'g': node 'gs' (GridSample) input 'g' has "
                                    "type i32, which GridSample-16 does not accept for T2")


def main():
    global MPC, SOURCE_DIR
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpc", required=True, help="path to the mpc binary")
    parser.add_argument("--source-dir", required=True, help="mpc's source folder")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    MPC = os.path.abspath(args.mpc)
    SOURCE_DIR = os.path.abspath(args.source_dir)
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for case in (DataTypeMismatchTest, ExternalDataTest, NestingTest, MutationFindingsTest,
                 AttributeSchemaTest, NewerOpsetAttributeTest, BodyArityTest, RunFindingsTest,
                 LegacyBroadcastTest, EmptyAndZeroTripTest, SchemaVersionTypeTest):
        suite.addTests(loader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1, stream=sys.stdout).run(suite)
    # A test with failing subtests counts once.
    failed = len({t.id() for t, _ in result.failures + result.errors})
    skipped = len(result.skipped)
    print(f"{result.testsRun - failed - skipped} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
