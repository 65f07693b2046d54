#!/usr/bin/env python3
"""Tests of mpc's inspection outputs: rewrite dumps, the JSON report and `mpc inspect`.

    python3 tests/tools/test_tools.py --mpc build/tools/mpc --source-dir . [-v] [-k PATTERN]

Runs the real binary on models/*.onnx and on models built here with onnx.helper:
  * dumps (--dump-dir): before/after ONNX files that onnx.load reads, DOT renderings whose
    node colors match the report's decisions, an SVG when Graphviz `dot` is installed (a
    warning, not a failure, when it is not), sanitized file names, byte-identical reruns, and
    a 20,000-node chain that renders collapsed, in bounded time;
  * the report (--report): one entry per node, the summary line's N/M/K, casts, FLOP and byte
    fractions in [0, 1] (> 0.5 for the CNN), Tensor Core alignment of the GEMMs;
  * inspect: header, op histogram, painting per op type, JSON form, exit codes (1 bad input,
    2 bad usage), and that it writes nothing;
  * files (docs/user-guide.md, "Files"): every command (rewrite, train-graph, run, run --train,
    plot) refuses, with one line naming both paths and exit 1, an output (file, .data
    companion, report, log, plot, dump, checkpoint, --outputs file) that is, or aliases through
    `..`, a symbolic link or a hard link, a file it reads (model, its external data, inputs,
    data, CSV, the checkpoint it resumes from), and changes no file; `FILE.tmp-XXXXXX` files a
    killed run left beside the files a run writes are removed by the next run, unrelated files
    survive; huge declared or computed shapes (--random-inputs on [1000000, 1000000],
    --dim N=10^12, a 10^12-element TensorProto, ConstantOfShape/Expand/Tile/Range/Resize
    outputs of terabytes) fail with one line naming the tensor and the bytes.

Needs python3 with onnx and numpy. The last line printed is 'N passed, N failed[, N skipped]';
the exit status is 1 on any failure, 77 (CTest's skip code) when onnx is missing.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ElementTree

SKIP_EXIT_CODE = 77
try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(SKIP_EXIT_CODE)

MPC = None
SOURCE_DIR = None
MODELS = ("mlp", "cnn", "transformer", "lstm")
MPC_TIMEOUT_S = 300
# The 20,000-node chain must be rewritten, dumped and rendered within this many seconds
# (about 5 s on a 2-core machine; the bound leaves room for slow CI hosts).
LARGE_GRAPH_BUDGET_S = 120

# DOT fill colors by decision (tools/mpc/Dump.cpp).
GREEN, RED, YELLOW, GREY, WHITE, BLUE = (
    "#8fd19e", "#f28b82", "#fde68a", "#d1d5db", "#ffffff", "#bfdbfe")


def clean_env(**extra):
    """The environment without MPC_* variables (they would change decisions), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    env.update(extra)
    return env


def run_mpc(*args, env=None, cwd=None):
    return subprocess.run([MPC, *args], capture_output=True, text=True, env=env or clean_env(),
                          cwd=cwd, timeout=MPC_TIMEOUT_S)


def model_path(name):
    return os.path.join(SOURCE_DIR, "models", name + ".onnx")


def count_nodes(graph):
    """Nodes of a GraphProto and of every graph nested in its attributes."""
    n = 0
    for node in graph.node:
        n += 1
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                n += count_nodes(a.g)
            for g in a.graphs:
                n += count_nodes(g)
    return n


def parse_dot_nodes(text):
    """{dot id: {'label': str, 'fill': str, 'attrs': str}} for the node statements of a DOT."""
    nodes = {}
    for m in re.finditer(r'^\s*(\w+) \[(.*)\];$', text, re.M):
        ident, attrs = m.group(1), m.group(2)
        if ident in ("graph", "node", "edge"):
            continue
        label = re.search(r'(?<!x)label="((?:[^"\\]|\\.)*)"', attrs)
        fill = re.search(r'fillcolor="([^"]*)"', attrs)
        nodes[ident] = {"label": label.group(1) if label else "",
                        "fill": fill.group(1) if fill else WHITE, "attrs": attrs}
    return nodes


def expected_fill(decision):
    if decision["color"] == "allow":
        return GREEN
    if decision["color"] == "deny":
        return RED
    return {"infer": YELLOW, "clear": GREY}.get(decision["class"], WHITE)


def save_model(nodes, inputs, outputs, initializers, path, graph_name="g", opset=17):
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=8, producer_name="test_tools")
    onnx.save(model, path)
    return model


def chain_model(path, n_nodes, name_of, width=16):
    """x -> MatMul -> Add -> MatMul -> Add ... (n_nodes nodes) -> y, weights shared."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((width, width)) * 0.1).astype(np.float32),
                                "W")
    b = numpy_helper.from_array(np.zeros(width, np.float32), "B")
    nodes, prev = [], "x"
    for i in range(n_nodes):
        op = "MatMul" if i % 2 == 0 else "Add"
        out = "y" if i == n_nodes - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [prev, "W" if op == "MatMul" else "B"], [out],
                                      name=name_of(i, op)))
        prev = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, width])
    return save_model(nodes, [x], [y], [w, b], path, graph_name="chain")


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mpc-tools-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def rewrite(self, model, *extra, dump=True, report=None, env=None):
        """Rewrites `model` into self.tmp; returns the CompletedProcess."""
        stem = os.path.splitext(os.path.basename(model))[0]
        args = ["rewrite", model, "-o", os.path.join(self.tmp, stem + ".amp.onnx")]
        if dump:
            args += ["--dump-dir", self.tmp]
        if report:
            args += ["--report", report]
        r = run_mpc(*args, *extra, env=env)
        self.assertEqual(r.returncode, 0, f"mpc {' '.join(args)} failed: {r.stderr}")
        return r

    def read(self, name):
        with open(os.path.join(self.tmp, name), encoding="utf-8") as f:
            return f.read()


class DumpTest(TempDirCase):
    def test_files_named_and_loadable(self):
        for name in MODELS:
            with self.subTest(model=name):
                src = onnx.load(model_path(name))
                self.rewrite(model_path(name))
                graph = src.graph.name
                for phase in ("before", "after"):
                    for ext in ("onnx", "dot"):
                        path = os.path.join(self.tmp, f"{name}_{graph}_{phase}.{ext}")
                        self.assertTrue(os.path.isfile(path), path)
                before = onnx.load(os.path.join(self.tmp, f"{name}_{graph}_before.onnx"))
                after = onnx.load(os.path.join(self.tmp, f"{name}_{graph}_after.onnx"))
                self.assertEqual(len(before.graph.node), len(src.graph.node))
                onnx.checker.check_model(after)
                self.assertTrue(any(n.op_type == "Cast" for n in after.graph.node))
                lists = self.read(f"{name}_{graph}_lists.txt")
                self.assertIn("target: f16", lists)
                self.assertIn("level: DEFAULT", lists)
                self.assertIn("keep-io-types: true", lists)
                self.assertIn("deny-nodes: (none)", lists)
                self.assertRegex(lists, r"\[allow\] \d+ ops\n(.*\n)*MatMul\n")
                self.assertFalse([f for f in os.listdir(self.tmp) if ".tmp" in f])

    def test_lists_file_shows_edits(self):
        env = clean_env(MPC_AMP_ALLOWLIST_REMOVE="Gemm", MPC_AMP_DENYLIST_ADD="Gemm")
        self.rewrite(model_path("mlp"), "--deny-nodes", "fc1/.*", "--target", "bf16", env=env)
        lists = self.read("mlp_mlp_lists.txt")
        self.assertIn("target: bf16", lists)
        self.assertIn("deny-nodes: fc1/.*", lists)
        self.assertIn("allow removals: Gemm", lists)
        sections = {}
        for block in lists.split("\n[")[1:]:
            header, *entries = block.strip().split("\n")
            sections[header.split("]")[0]] = entries
        self.assertEqual(sorted(sections), ["allow", "clear", "deny", "infer"])
        for entries in sections.values():
            self.assertEqual(entries, sorted(entries))
        self.assertIn("Gemm", sections["deny"])
        self.assertNotIn("Gemm", sections["allow"])

    def test_dot_colors_mlp(self):
        self.rewrite(model_path("mlp"))
        for phase in ("before", "after"):
            nodes = parse_dot_nodes(self.read(f"mlp_mlp_{phase}.dot"))
            by_op = {}
            for n in nodes.values():
                by_op.setdefault(n["label"].split("\\n")[0], []).append(n)
            self.assertEqual(len(by_op["Gemm"]), 3)
            for n in by_op["Gemm"]:
                self.assertEqual(n["fill"], GREEN, n)
            self.assertEqual(by_op["Softmax"][0]["fill"], YELLOW)
            inserted = [n for n in nodes.values() if "inserted" in n["label"]]
            if phase == "before":
                self.assertEqual(inserted, [])
            else:
                self.assertEqual(len(inserted), 2)
                for n in inserted:
                    self.assertIn("shape=diamond", n["attrs"])
                    self.assertEqual(n["fill"], BLUE)

    def test_dot_colors_match_report(self):
        for name in MODELS:
            with self.subTest(model=name):
                report_path = os.path.join(self.tmp, name + ".json")
                self.rewrite(model_path(name), report=report_path)
                with open(report_path) as f:
                    report = json.load(f)
                for phase in ("before", "after"):
                    nodes = parse_dot_nodes(self.read(f"{name}_{report['graph']}_{phase}.dot"))
                    by_label = {n["label"]: n for n in nodes.values()}
                    for d in report["nodes"]:
                        label = d["op"] + "\\n" + d["name"]
                        if d["partial"]:
                            label += "\\npartial: some slots stay fp32"
                        self.assertIn(label, by_label, f"{phase}: no DOT node for {d}")
                        self.assertEqual(by_label[label]["fill"], expected_fill(d), (phase, d))
                        self.assertEqual("peripheries=2" in by_label[label]["attrs"],
                                         d["partial"])

    def test_half_edges_bold_blue(self):
        self.rewrite(model_path("mlp"))
        after = self.read("mlp_mlp_after.dot")
        before = self.read("mlp_mlp_before.dot")
        half_edges = re.findall(r'-> \w+ \[label="f16"([^\]]*)\]', after)
        self.assertGreater(len(half_edges), 0)
        for attrs in half_edges:
            self.assertIn('color="#1d4ed8"', attrs)
            self.assertIn("bold", attrs)
        self.assertNotIn('label="f16"', before)
        self.assertIn('label="f32"', before)

    def test_nested_graph_is_a_cluster(self):
        # y = If(c) then {Relu(MatMul(x, W))} else {x}: the branches are clusters.
        w = numpy_helper.from_array(np.eye(8, dtype=np.float32), "W")
        then_g = helper.make_graph(
            [helper.make_node("MatMul", ["x", "W"], ["mm"], name="then/MatMul"),
             helper.make_node("Relu", ["mm"], ["r"], name="then/Relu")],
            "then_body", [], [helper.make_tensor_value_info("r", TensorProto.FLOAT, [4, 8])])
        else_g = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["e"], name="else/Identity")],
            "else_body", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4, 8])])
        node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                                else_branch=else_g)
        path = os.path.join(self.tmp, "iff.onnx")
        save_model([node], [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w], path,
                   graph_name="iff")
        self.rewrite(path)
        dot = self.read("iff_iff_before.dot")
        self.assertEqual(len(re.findall(r"subgraph cluster_\d+ \{", dot)), 2)
        nodes = parse_dot_nodes(dot)
        matmul = [n for n in nodes.values() if n["label"].startswith("MatMul")]
        self.assertEqual(len(matmul), 1)
        self.assertEqual(matmul[0]["fill"], GREEN)
        self.assertRegex(dot, r"g0_in1 -> g\d+_n0 \[label=\"f32\", style=dashed\]")

    @unittest.skipUnless(shutil.which("dot"), "graphviz dot is not installed")
    def test_svg_rendered(self):
        r = self.rewrite(model_path("cnn"))
        self.assertNotIn("dot", r.stderr)
        for phase in ("before", "after"):
            root = ElementTree.parse(os.path.join(self.tmp, f"cnn_cnn_{phase}.svg")).getroot()
            self.assertTrue(root.tag.endswith("svg"), root.tag)
            self.assertIn("conv0/Conv", ElementTree.tostring(root, encoding="unicode"))

    def test_missing_dot_is_a_warning(self):
        empty_bin = os.path.join(self.tmp, "empty-bin")
        os.mkdir(empty_bin)
        r = self.rewrite(model_path("mlp"), env=clean_env(PATH=empty_bin))
        self.assertIn("graphviz 'dot' not found", r.stderr)
        self.assertTrue(os.path.isfile(os.path.join(self.tmp, "mlp_mlp_after.dot")))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "mlp_mlp_after.svg")))

    def test_graph_name_sanitized(self):
        path = os.path.join(self.tmp, "odd.onnx")
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
        save_model([helper.make_node("MatMul", ["x", "x"], ["y"], name="mm")], [x], [y], [],
                   path, graph_name="../enc/layer 1:main")
        self.rewrite(path)
        names = sorted(os.listdir(self.tmp))
        self.assertIn("odd____enc_layer_1_main_before.onnx", names)
        for f in names:
            self.assertTrue(os.path.isfile(os.path.join(self.tmp, f)), f)
        onnx.load(os.path.join(self.tmp, "odd____enc_layer_1_main_after.onnx"))

    def test_deterministic(self):
        outputs = []
        for run in range(2):
            out_dir = os.path.join(self.tmp, f"run{run}")
            os.mkdir(out_dir)
            r = run_mpc("rewrite", model_path("transformer"), "-o",
                        os.path.join(out_dir, "t.amp.onnx"), "--dump-dir", out_dir, "--report",
                        os.path.join(out_dir, "t.json"))
            self.assertEqual(r.returncode, 0, r.stderr)
            files = {}
            for f in sorted(os.listdir(out_dir)):
                with open(os.path.join(out_dir, f), "rb") as fh:
                    files[f] = fh.read()
            outputs.append(files)
        self.assertEqual(sorted(outputs[0]), sorted(outputs[1]))
        for f in outputs[0]:
            self.assertEqual(outputs[0][f], outputs[1][f], f"{f} differs between runs")

    def test_large_chain_collapsed(self):
        path = os.path.join(self.tmp, "chain.onnx")
        chain_model(path, 20000, lambda i, op: f"{op.lower()}_{i}")
        start = time.monotonic()
        r = self.rewrite(path, report=os.path.join(self.tmp, "chain.json"))
        elapsed = time.monotonic() - start
        self.assertLess(elapsed, LARGE_GRAPH_BUDGET_S)
        self.assertNotIn("could not render", r.stderr)
        for phase in ("before", "after"):
            dot = self.read(f"chain_chain_{phase}.dot")
            self.assertIn("collapsed into", dot)
            boxes = [k for k in parse_dot_nodes(dot) if re.fullmatch(r"b\d+", k)]
            self.assertGreater(len(boxes), 10)
            self.assertLessEqual(len(boxes), 300)
            self.assertRegex(dot, r'b\d+ \[label="(?:[^"]*\\n)?nodes \d+-\d+ \(\d+\)\\nallow \d+')
            if shutil.which("dot"):
                self.assertTrue(os.path.isfile(os.path.join(self.tmp,
                                                            f"chain_chain_{phase}.svg")))
        with open(os.path.join(self.tmp, "chain.json")) as f:
            self.assertEqual(len(json.load(f)["nodes"]), 20000)

    def test_large_graph_boxes_follow_name_scopes(self):
        # 60 layers of 20 nodes named like an exporter's: /enc/layer.3/fc7/MatMul.
        path = os.path.join(self.tmp, "scoped.onnx")
        chain_model(path, 1200, lambda i, op: f"/enc/layer.{i // 20}/fc{i % 20 // 2}/{op}")
        self.rewrite(path)
        dot = self.read("scoped_chain_after.dot")
        self.assertIn("by node-name prefix (depth 2", dot)
        self.assertIn('label="enc/layer.7/*\\n', dot)


class BackendCapsTest(TempDirCase):
    """`mpc rewrite --backend`: whose kernels the painting asks (docs/user-guide.md)."""

    def det_model(self):
        # MatMul (allow) -> Det (added to clear; the CPU has no Det kernel) and
        # Where (clear; its CPU row is keyed by the bool condition, its
        # branches run in any float type) -> MatMul.
        path = os.path.join(self.tmp, "det.onnx")
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                 helper.make_node("Det", ["y"], ["d"], name="det"),
                 helper.make_node("Where", ["c", "y", "y"], ["z"], name="wh"),
                 helper.make_node("MatMul", ["z", "w"], ["o"], name="mm2")]
        save_model(nodes,
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2]),
                    helper.make_tensor_value_info("c", TensorProto.BOOL, [2, 2])],
                   [helper.make_tensor_value_info("d", TensorProto.FLOAT, []),
                    helper.make_tensor_value_info("o", TensorProto.FLOAT, [2, 2])],
                   [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4])], path)
        return path

    def decisions(self, path, backend):
        report = os.path.join(self.tmp, backend + ".json")
        args = ["rewrite", path, "--clear", "Det", "-o", os.path.join(self.tmp, backend + ".onnx"),
                "--report", report]
        if backend != "default":
            args += ["--backend", backend]
        r = run_mpc(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(report) as f:
            nodes = json.load(f)["nodes"]
        with open(os.path.join(self.tmp, backend + ".onnx"), "rb") as f:
            data = f.read()
        return {n["name"]: (n["color"], n["reason"]) for n in nodes}, data, r.stdout

    def test_cpu_keeps_what_it_cannot_run_in_fp16(self):
        path = self.det_model()
        any_nodes, _, any_line = self.decisions(path, "any")
        cpu_nodes, _, cpu_line = self.decisions(path, "cpu")
        self.assertEqual(any_nodes["det"][0], "allow")
        self.assertEqual(cpu_nodes["det"], ("keep", "backend has no low-precision kernel"))
        for name in ("mm", "wh", "mm2"):
            self.assertEqual(cpu_nodes[name], any_nodes[name], name)
            self.assertEqual(cpu_nodes[name][0], "allow", name)
        self.assertIn("Converted 4/4 nodes", any_line)
        self.assertIn("Converted 3/4 nodes", cpu_line)
        out = onnx.load(os.path.join(self.tmp, "cpu.onnx"))
        det = next(n for n in out.graph.node if n.name == "det")
        casts = {n.output[0]: n for n in out.graph.node if n.op_type == "Cast"}
        self.assertIn(det.input[0], casts)  # fed by a cast back to fp32
        self.assertEqual(casts[det.input[0]].attribute[0].i, TensorProto.FLOAT)

    def test_any_is_the_default_and_byte_identical(self):
        path = self.det_model()
        _, default, _ = self.decisions(path, "default")
        _, explicit, _ = self.decisions(path, "any")
        self.assertEqual(default, explicit)
        for name in ("mlp", "cnn"):
            a = os.path.join(self.tmp, name + ".a.onnx")
            b = os.path.join(self.tmp, name + ".b.onnx")
            self.assertEqual(run_mpc("rewrite", model_path(name), "-o", a).returncode, 0)
            self.assertEqual(run_mpc("rewrite", model_path(name), "-o", b,
                                     "--backend", "any").returncode, 0)
            with open(a, "rb") as fa, open(b, "rb") as fb:
                self.assertEqual(fa.read(), fb.read(), name)

    def test_cuda_and_unknown_backends_are_refused(self):
        path = self.det_model()
        out = os.path.join(self.tmp, "cuda.onnx")
        r = run_mpc("rewrite", path, "--backend", "cuda", "-o", out)
        # A build without the CUDA backend says so; one with it but without a
        # usable GPU names why (tests/cuda_host/test_cuda_cli.py checks which);
        # with a GPU the rewrite runs.
        if r.returncode != 0:
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stderr,
                             r"^mpc: error: --backend cuda: (this build has no CUDA backend to "
                             r"say which ops run in 16 bits there; rewrite with --backend any "
                             r"\(the ONNX schemas only\) or --backend cpu|no CUDA device found "
                             r"\(cudaGetDeviceCount: [^\n]+\))\n$")
            self.assertFalse(os.path.exists(out))
        r = run_mpc("rewrite", path, "--backend", "tpu", "-o", out)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--backend must be any, cpu or cuda, not 'tpu'", r.stderr)
        self.assertFalse(os.path.exists(out))


class ReportTest(TempDirCase):
    def report(self, name, *extra):
        path = os.path.join(self.tmp, name + ".json")
        r = self.rewrite(model_path(name), *extra, dump=False, report=path)
        with open(path) as f:
            return json.load(f), r

    def test_structure(self):
        for name in MODELS:
            with self.subTest(model=name):
                report, r = self.report(name)
                src = onnx.load(model_path(name))
                self.assertEqual(len(report["nodes"]), count_nodes(src.graph))
                for entry in report["nodes"]:
                    self.assertEqual(sorted(entry), ["class", "color", "detail", "graph", "name",
                                                     "op", "partial", "reason"])
                    self.assertIn(entry["color"], ("allow", "deny", "keep"))
                self.assertEqual([n["name"] for n in report["nodes"]],
                                 [n.name for n in src.graph.node])
                summary = report["summary"]
                self.assertEqual(summary["line"], r.stdout.strip().splitlines()[-1])
                n, m, k = map(int, re.match(r"Converted (\d+)/(\d+) nodes .* using (\d+) cast",
                                            summary["line"]).groups())
                self.assertEqual((n, m, k), (summary["slots_converted"], summary["nodes_before"],
                                             summary["casts_to_target"]))
                self.assertEqual(summary["target"], "f16")
                self.assertEqual(summary["level"], "DEFAULT")
                for c in report["casts"]:
                    self.assertEqual(sorted(c), ["from", "of_constant", "to", "type"])
                    self.assertIn(c["type"], ("f16", "f32"))
                self.assertEqual(sum(1 for c in report["casts"]
                                     if c["type"] == "f16" and not c["of_constant"]), k)
                for key in ("fp16_flops_fraction", "fp16_bytes_fraction"):
                    self.assertGreaterEqual(report[key], 0.0)
                    self.assertLessEqual(report[key], 1.0)
                self.assertEqual(report["flops"]["unestimated_nodes"], 0)
                self.assertEqual(report["bytes"]["unknown_values"], 0)
                self.assertIsInstance(report["notes"], list)
                self.assertFalse([f for f in os.listdir(self.tmp) if ".tmp" in f])

    def test_report_and_dumps_do_not_change_the_output(self):
        # Without --report or --dump-dir the rewrite skips the decision summary;
        # the model and the summary line must not depend on that.
        for name in MODELS:
            with self.subTest(model=name):
                out = os.path.join(self.tmp, name + ".amp.onnx")
                plain = self.rewrite(model_path(name), dump=False)
                with open(out, "rb") as f:
                    plain_bytes = f.read()
                full = self.rewrite(model_path(name), dump=True,
                                    report=os.path.join(self.tmp, name + ".json"))
                with open(out, "rb") as f:
                    self.assertEqual(f.read(), plain_bytes)
                self.assertEqual(plain.stdout, full.stdout)

    def test_fractions(self):
        cnn, _ = self.report("cnn")
        self.assertGreater(cnn["fp16_flops_fraction"], 0.5)
        self.assertGreater(cnn["fp16_bytes_fraction"], 0.5)
        # Conv FLOPs: 2*N*H*W*Cout*Cin*k*k (+bias) for both convolutions.
        conv = [o for o in cnn["flops"]["by_op"] if o["op"] == "Conv"][0]
        expected = 2 * 2 * 32 * 32 * 16 * 3 * 9 + 2 * 16 * 32 * 32 \
            + 2 * 2 * 16 * 16 * 32 * 16 * 9 + 2 * 32 * 16 * 16
        self.assertEqual(conv["flops"], expected)
        mlp, _ = self.report("mlp")
        gemm = [o for o in mlp["flops"]["by_op"] if o["op"] == "Gemm"][0]
        self.assertEqual(gemm["flops"], 2 * 8 * (64 * 128 + 128 * 64 + 64 * 10) + 8 * (128 + 64 + 10))
        softmax = [o for o in mlp["flops"]["by_op"] if o["op"] == "Softmax"][0]
        self.assertEqual(softmax["half_flops"], 0)
        # TENSOR_CORES_ONLY keeps more fp32 work than the default painting.
        tco, _ = self.report("transformer", "--level", "TENSOR_CORES_ONLY")
        default, _ = self.report("transformer")
        self.assertLess(tco["fp16_bytes_fraction"], default["fp16_bytes_fraction"])

    def test_flop_formulas(self):
        rng = np.random.default_rng(1)

        def weight(name, shape):
            return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32),
                                           name)
        inits = [weight("Wt", (8, 4, 3, 3)), weight("E", (1, 25, 8)), weight("B", (5, 6)),
                 numpy_helper.from_array(np.array([1, 4, 25], np.int64), "shape"),
                 numpy_helper.from_array(np.array([2], np.int64), "axes")]
        nodes = [
            helper.make_node("ConvTranspose", ["x", "Wt"], ["ct"], name="up", strides=[2, 2],
                             pads=[1, 1, 1, 1], output_padding=[1, 1]),
            helper.make_node("MaxPool", ["ct"], ["mp"], name="pool", kernel_shape=[2, 2],
                             strides=[2, 2]),
            helper.make_node("Reshape", ["mp", "shape"], ["r"], name="flat"),
            helper.make_node("Einsum", ["r", "E"], ["ein"], name="ein", equation="bij,bjk->bik"),
            helper.make_node("ReduceSum", ["ein", "axes"], ["y1"], name="sum", keepdims=0),
            helper.make_node("MatMul", ["q", "B"], ["mm"], name="bmm"),
            helper.make_node("Softmax", ["mm"], ["y2"], name="sm"),
            helper.make_node("Transpose", ["mp"], ["y3"], name="tr", perm=[0, 1, 3, 2]),
        ]
        f32 = TensorProto.FLOAT
        path = os.path.join(self.tmp, "ops.onnx")
        save_model(nodes, [helper.make_tensor_value_info("x", f32, [1, 8, 5, 5]),
                           helper.make_tensor_value_info("q", f32, [2, 3, 4, 5])],
                   [helper.make_tensor_value_info("y1", f32, [1, 4]),
                    helper.make_tensor_value_info("y2", f32, [2, 3, 4, 6]),
                    helper.make_tensor_value_info("y3", f32, [1, 4, 5, 5])], inits, path)
        report_path = os.path.join(self.tmp, "ops.json")
        self.rewrite(path, dump=False, report=report_path)
        with open(report_path) as f:
            report = json.load(f)
        flops = {o["op"]: o["flops"] for o in report["flops"]["by_op"]}
        self.assertEqual(flops, {
            "ConvTranspose": 2 * 25 * 8 * 4 * 9,  # every input pixel meets every weight
            "MaxPool": 4 * 5 * 5 * 4,            # output elements * window
            "Einsum": 2 * 1 * 4 * 25 * 8,        # 2 * product of index sizes
            "MatMul": 2 * 6 * 4 * 6 * 5,         # batch 2*3, M 4, N 6, K 5
            "ReduceSum": 1 * 4 * 8,              # input elements
            "Softmax": 2 * 3 * 4 * 6})           # output elements; data movement not listed
        self.assertEqual(report["flops"]["unestimated_nodes"], 0)
        rows = {n["name"]: n for n in report["tensor_cores"]["nodes"]}
        self.assertEqual((rows["up"]["c_in"], rows["up"]["c_out"]), (8, 4))
        self.assertEqual(rows["up"]["misaligned"], ["c_out"])
        self.assertFalse(rows["ein"]["shape_known"])  # no GEMM view of an Einsum
        self.assertEqual((rows["bmm"]["m"], rows["bmm"]["n"], rows["bmm"]["k"],
                          rows["bmm"]["batch"]), (4, 6, 5, 6))
        lstm, _ = self.report("lstm")
        flops = {o["op"]: o["flops"] for o in lstm["flops"]["by_op"]}
        # Per step and sequence: 2 * 4 gates * H * (I + H) + 4 * 4 gates * H.
        self.assertEqual(flops["LSTM"], 10 * 4 * (2 * 4 * 48 * (32 + 48) + 4 * 4 * 48))

    def test_fused_matmul_counts_its_transposed_operands(self):
        # com.microsoft::FusedMatMul multiplies op(A) and op(B): A [2, 5, 3] with
        # transA is [2, 3, 5]; B [7, 2, 5] with transBatchB moves axis 0 behind the
        # batch axes ([2, 7, 5]) and transB swaps the last two ([2, 5, 7]).
        f32 = TensorProto.FLOAT
        node = helper.make_node("FusedMatMul", ["a", "b"], ["y"], name="fmm",
                                domain="com.microsoft", transA=1, transB=1, transBatchB=1,
                                alpha=0.5)
        graph = helper.make_graph([node], "g",
                                  [helper.make_tensor_value_info("a", f32, [2, 5, 3]),
                                   helper.make_tensor_value_info("b", f32, [7, 2, 5])],
                                  [helper.make_tensor_value_info("y", f32, [2, 3, 7])])
        model = helper.make_model(graph, ir_version=8, opset_imports=[
            helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
        path = os.path.join(self.tmp, "fused.onnx")
        onnx.save(model, path)
        report_path = os.path.join(self.tmp, "fused.json")
        self.rewrite(path, dump=False, report=report_path)
        with open(report_path) as f:
            report = json.load(f)
        flops = {o["op"]: o["flops"] for o in report["flops"]["by_op"]}
        self.assertEqual(flops["com.microsoft::FusedMatMul"], 2 * 2 * 3 * 7 * 5)
        row = {n["name"]: n for n in report["tensor_cores"]["nodes"]}["fmm"]
        self.assertEqual((row["m"], row["n"], row["k"], row["batch"]), (3, 7, 5, 2))

    def test_rms_normalization_is_a_typed_fp32_barrier(self):
        # RMSNormalization (opset 23) is newer than libonnx: mpc's signature for it
        # lets types flow through, so the MatMul after it converts too, while the
        # unlisted op itself stays fp32. mpc runs both models; the original agrees
        # with onnx.reference.
        rng = np.random.default_rng(3)
        f32 = TensorProto.FLOAT
        inits = [numpy_helper.from_array((rng.standard_normal((16, 32)) * 0.2).astype(np.float32),
                                         "W"),
                 numpy_helper.from_array(rng.uniform(0.5, 1.5, (32,)).astype(np.float32), "S"),
                 numpy_helper.from_array((rng.standard_normal((32, 8)) * 0.2).astype(np.float32),
                                         "W2")]
        nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm1"),
                 helper.make_node("RMSNormalization", ["h", "S"], ["n"], name="rms",
                                  epsilon=1e-6),
                 helper.make_node("MatMul", ["n", "W2"], ["y"], name="mm2")]
        path = os.path.join(self.tmp, "rms.onnx")
        save_model(nodes, [helper.make_tensor_value_info("x", f32, [4, 16])],
                   [helper.make_tensor_value_info("y", f32, [4, 8])], inits, path, opset=23)
        report_path = os.path.join(self.tmp, "rms.json")
        self.rewrite(path, dump=False, report=report_path)
        with open(report_path) as f:
            colors = {n["name"]: n["color"] for n in json.load(f)["nodes"]}
        self.assertEqual(colors, {"mm1": "allow", "rms": "keep", "mm2": "allow"})
        x = rng.standard_normal((4, 16)).astype(np.float32)
        np.save(os.path.join(self.tmp, "x.npy"), x)
        out = os.path.join(self.tmp, "out")
        os.mkdir(out)
        r = run_mpc("run", path, "--input", "x=" + os.path.join(self.tmp, "x.npy"),
                    "--outputs", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(onnx.load(path)).run(None, {"x": x})[0]
        np.testing.assert_allclose(np.load(os.path.join(out, "y.npy")), want, rtol=1e-5,
                                   atol=1e-6)
        r = run_mpc("run", os.path.join(self.tmp, "rms.amp.onnx"), "--random-inputs",
                    "--compare", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"compare 'y': .*: ok")

    def test_tensor_cores(self):
        mlp, _ = self.report("mlp")
        tc = mlp["tensor_cores"]
        rows = {n["name"]: n for n in tc["nodes"]}
        self.assertEqual((rows["fc0/Gemm"]["m"], rows["fc0/Gemm"]["n"], rows["fc0/Gemm"]["k"]),
                         (8, 128, 64))
        self.assertTrue(rows["fc0/Gemm"]["multiples_of_8"])
        self.assertFalse(rows["fc2/Gemm"]["multiples_of_8"])
        self.assertEqual(rows["fc2/Gemm"]["misaligned"], ["n"])
        self.assertEqual((tc["gemm_nodes"], tc["aligned"]), (3, 2))
        # Casts: x f32[8,64] -> f16 moves 8*64*(4+2) bytes; logits f16[8,10] -> f32 8*10*(2+4).
        self.assertEqual(tc["cast_bytes"]["to_target"], 8 * 64 * 6)
        self.assertEqual(tc["cast_bytes"]["to_fp32"], 8 * 10 * 6)
        cnn, _ = self.report("cnn")
        rows = {n["name"]: n for n in cnn["tensor_cores"]["nodes"]}
        self.assertEqual((rows["conv0/Conv"]["c_in"], rows["conv0/Conv"]["c_out"]), (3, 16))
        self.assertEqual(rows["conv0/Conv"]["misaligned"], ["c_in"])
        self.assertTrue(rows["conv1/Conv"]["multiples_of_8"])
        lstm, _ = self.report("lstm")
        rows = {n["name"]: n for n in lstm["tensor_cores"]["nodes"]}
        self.assertEqual((rows["lstm/LSTM"]["c_in"], rows["lstm/LSTM"]["c_out"]), (32, 48))

    def test_unknown_shapes_counted(self):
        # A symbolic batch is taken as 1; a custom op's output shape is unknown, so the MatMul
        # after it cannot be estimated and is counted as such.
        path = os.path.join(self.tmp, "sym.onnx")
        w = numpy_helper.from_array(np.ones((8, 8), np.float32), "W")
        nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="mm0"),
                 helper.make_node("Mystery", ["a"], ["b"], name="custom", domain="test.custom"),
                 helper.make_node("MatMul", ["b", "W"], ["y"], name="mm1")]
        graph = helper.make_graph(
            nodes, "sym", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 8])], [w])
        model = helper.make_model(graph, ir_version=8, opset_imports=[
            helper.make_opsetid("", 17), helper.make_opsetid("test.custom", 1)])
        onnx.save(model, path)
        report_path = os.path.join(self.tmp, "sym.json")
        self.rewrite(path, dump=False, report=report_path)
        with open(report_path) as f:
            report = json.load(f)
        self.assertEqual(report["symbolic_dims_taken_as_1"], ["batch"])
        self.assertGreaterEqual(report["flops"]["unestimated_nodes"], 1)
        self.assertGreater(report["flops"]["unestimated_node_fraction"], 0)
        self.assertLessEqual(report["fp16_flops_fraction"], 1.0)
        rows = {n["name"]: n for n in report["tensor_cores"]["nodes"]}
        self.assertTrue(rows["mm0"]["shape_known"])
        self.assertTrue(rows["mm0"]["symbolic_dims_taken_as_1"])
        # M = batch = 1 here; a symbolic M is not judged, N = K = 8 are aligned.
        self.assertEqual((rows["mm0"]["m"], rows["mm0"]["misaligned"]), (1, []))
        self.assertFalse(rows["mm1"]["shape_known"])

    def test_report_folder_missing(self):
        r = run_mpc("rewrite", model_path("mlp"), "-o", os.path.join(self.tmp, "o.onnx"),
                    "--report", os.path.join(self.tmp, "no", "such", "r.json"))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


class InspectTest(TempDirCase):
    def inspect(self, *args, env=None, code=0):
        r = run_mpc("inspect", *args, env=env)
        self.assertEqual(r.returncode, code, r.stderr)
        return r

    def test_text(self):
        out = self.inspect(model_path("mlp")).stdout
        self.assertIn("ir version: 8", out)
        self.assertIn("producer:   mpc models/make_models.py 1", out)
        self.assertIn("opsets:     ai.onnx 17", out)
        self.assertRegex(out, r"inputs \(1\):\n  x\s+f32\[8,64\]\n")
        self.assertRegex(out, r"outputs \(1\):\n  probs\s+f32\[8,10\]\n")
        self.assertIn("nodes:      6\n", out)
        hist = out.split("op histogram:\n")[1].split("parameters:")[0]
        self.assertEqual([line.split() for line in hist.strip().splitlines()],
                         [["Gemm", "3"], ["Relu", "2"], ["Softmax", "1"]])
        self.assertRegex(out, r"parameters: 17226 in 6 initializers, 68904 bytes")
        self.assertRegex(out, r"\n  f32\s+17226 elements\s+68904 bytes\s+6 initializers\n")
        self.assertRegex(out, r"\n  Gemm\s+3  allow 3\n")
        self.assertRegex(out, r"\n  Softmax\s+1  keep 1 \(infer op not between allow ops\)\n")
        self.assertIn("would convert 5 of 6 nodes", out)

    def test_import_errors_escape_names(self):
        # The importer's "graph 'G', initializer 'NAME'" prefixes printed names raw: a newline
        # or a carriage return in a name split the error into two lines.
        for name in ("a\nmpc: error: forged", "cr\rx"):
            with self.subTest(name=name):
                m = onnx.load(model_path("mlp"))
                t = m.graph.initializer[0]
                old = t.name
                for n in m.graph.node:
                    n.input[:] = [name if i == old else i for i in n.input]
                t.name = name
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                t.external_data.add(key="location", value="/etc/passwd")
                p = os.path.join(self.tmp, "m.onnx")
                onnx.save(m, p)
                r = subprocess.run([MPC, "inspect", p], capture_output=True, env=clean_env(),
                                   timeout=MPC_TIMEOUT_S)
                self.assertEqual(r.returncode, 1, r.stderr)
                escaped = name.replace("\n", "\\n").replace("\r", "\\r").encode()
                self.assertEqual(r.stderr.count(b"\n"), 1, r.stderr)
                self.assertRegex(r.stderr, b"^mpc: error: .*: graph 'mlp', initializer '" +
                                 re.escape(escaped) + b"': external data location '/etc/passwd' "
                                 b"must be a relative path")

    def test_histogram_sorted(self):
        out = self.inspect(model_path("transformer")).stdout
        hist = out.split("op histogram:\n")[1].split("parameters:")[0]
        rows = [(line.split()[0], int(line.split()[1])) for line in hist.strip().splitlines()]
        self.assertEqual(rows, sorted(rows, key=lambda r: (-r[1], r[0])))
        self.assertEqual(dict(rows)["MatMul"], 8)
        src = onnx.load(model_path("transformer"))
        self.assertEqual(sum(c for _, c in rows), len(src.graph.node))

    def test_json_matches_model(self):
        for name in MODELS:
            with self.subTest(model=name):
                data = json.loads(self.inspect(model_path(name), "--json").stdout)
                src = onnx.load(model_path(name))
                self.assertEqual(data["nodes"], len(src.graph.node))
                self.assertEqual(data["ir_version"], src.ir_version)
                elements = sum(int(np.prod(t.dims)) for t in src.graph.initializer)
                self.assertEqual(data["parameters"]["elements"], elements)
                hist = {h["op"]: h["count"] for h in data["op_histogram"]}
                for op in set(n.op_type for n in src.graph.node):
                    self.assertEqual(hist[op], sum(1 for n in src.graph.node if n.op_type == op))
                for row in data["painting"]["ops"]:
                    self.assertEqual(sum(g["count"] for g in row["decisions"]), row["count"])

    def test_painting_agrees_with_rewrite(self):
        for name in MODELS:
            with self.subTest(model=name):
                data = json.loads(self.inspect(model_path(name), "--json").stdout)
                path = os.path.join(self.tmp, name + ".json")
                self.rewrite(model_path(name), dump=False, report=path)
                with open(path) as f:
                    report = json.load(f)
                self.assertEqual(data["painting"]["allow_slots"],
                                 report["summary"]["slots_converted"])
                self.assertEqual(data["painting"]["allow_nodes"],
                                 report["summary"]["nodes_by_color"]["allow"])

    def test_target_and_environment(self):
        out = self.inspect(model_path("mlp"), "--target", "bf16").stdout
        self.assertIn("target bf16", out)
        self.assertIn("to bfloat16", out)
        env = clean_env(MPC_AMP_ALLOWLIST_REMOVE="Gemm", MPC_AMP_DENYLIST_ADD="Gemm")
        out = self.inspect(model_path("mlp"), env=env).stdout
        gemm = re.search(r"\n  Gemm\s+3  (.*)\n", out).group(1)
        self.assertNotIn("allow", gemm)
        self.assertEqual(sum(int(n) for n in re.findall(r"deny (\d+)", gemm)), 3)
        self.assertIn("(op on deny list)", gemm)
        r = self.inspect(model_path("mlp"), env=clean_env(MPC_AMP_BOGUS="1"), code=1)
        self.assertIn("MPC_AMP_BOGUS", r.stderr)

    def test_deterministic(self):
        a = self.inspect(model_path("transformer")).stdout
        b = self.inspect(model_path("transformer")).stdout
        self.assertEqual(a, b)

    def test_exit_codes(self):
        r = self.inspect(os.path.join(self.tmp, "missing.onnx"), code=1)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertTrue(r.stderr.startswith("mpc: error: "), r.stderr)
        bad = os.path.join(self.tmp, "bad.onnx")
        with open(bad, "wb") as f:
            f.write(b"\x08\x07garbage that is not a model")
        r = self.inspect(bad, code=1)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.inspect(model_path("mlp"), "--frobnicate", code=2)
        self.inspect(model_path("mlp"), "--target", "fp8", code=2)
        self.inspect(model_path("mlp"), "--target", code=2)
        self.inspect(code=2)
        self.inspect(model_path("mlp"), model_path("cnn"), code=2)
        self.assertIn("usage: mpc inspect", self.inspect("--help").stdout)

    def test_writes_nothing(self):
        work = os.path.join(self.tmp, "work")
        logs = os.path.join(self.tmp, "logs")
        os.mkdir(work)
        os.mkdir(logs)
        model = os.path.join(work, "mlp.onnx")
        shutil.copy(model_path("mlp"), model)
        before = os.stat(model)
        for extra in ([], ["--json"]):
            r = run_mpc("inspect", model, *extra, env=clean_env(MPC_AMP_LOG_PATH=logs), cwd=work)
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.listdir(work), ["mlp.onnx"])
        self.assertEqual(os.listdir(logs), [])
        after = os.stat(model)
        self.assertEqual((before.st_size, before.st_mtime_ns), (after.st_size, after.st_mtime_ns))


class OnnxCheckBlameTest(TempDirCase):
    """libonnx's checker runs on what rewrite and train-graph write; a failure the
    input model already has is bad input (exit 1, one line naming the input), not
    an internal error, and nothing is written."""

    def invalid_model(self, opset=8):
        # IR version 3 wants every initializer listed as a graph input; mpc's
        # importer accepts it, libonnx's checker does not.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
        w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
        g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y],
                              [w])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 3
        path = os.path.join(self.tmp, "ir3.onnx")
        onnx.save(m, path)
        with self.assertRaises(onnx.checker.ValidationError):
            onnx.checker.check_model(m)
        return path

    def test_rewrite_blames_the_input(self):
        model = self.invalid_model()
        out = os.path.join(self.tmp, "out.onnx")
        r = run_mpc("rewrite", model, "-o", out)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(f"{model}: the input model fails the ONNX checker", lines[0])
        self.assertIn("w in initializer but not in graph input", lines[0])
        self.assertNotIn("internal error", lines[0])
        self.assertFalse(os.path.exists(out))

    def test_train_graph_blames_the_input(self):
        model = self.invalid_model(opset=13)  # train-graph wants opset 13+
        out = os.path.join(self.tmp, "train.onnx")
        r = run_mpc("train-graph", model, "--loss", "mse", "-o", out)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("the input model fails the ONNX checker", lines[0])
        self.assertFalse(os.path.exists(out))

    def test_an_empty_list_attribute_is_not_blamed(self):
        """`axes = []` is valid ONNX (the onnx wheel's checker accepts it); libonnx 1.12's
        checker, which mpc links, wants a field in every list attribute and refused the
        rewrite of such a model as a bad input (differential suite, --rewrite, models seed
        3). Such models are left to mpc's own verifier: rewritten and trained, each output
        valid for the wheel's full check, the empty list kept."""
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])
        w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
        mean = helper.make_node("ReduceMean", ["h"], ["y"], keepdims=1)
        mean.attribute.append(helper.make_attribute("axes", [], attr_type=onnx.AttributeProto.INTS))
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), mean]
        g = helper.make_graph(nodes, "g", [x], [y], [w])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8  # libonnx 1.12 checks IR versions up to 8 (PyTorch's exports)
        self.assertEqual(m.graph.node[1].attribute[1].type, onnx.AttributeProto.INTS)
        onnx.checker.check_model(m, full_check=True)
        model = os.path.join(self.tmp, "empty_axes.onnx")
        onnx.save(m, model)
        for cmd in (("rewrite",), ("train-graph", "--loss", "mse")):
            out = os.path.join(self.tmp, cmd[0] + ".onnx")
            r = run_mpc(cmd[0], model, *cmd[1:], "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            written = onnx.load(out)
            onnx.checker.check_model(written, full_check=True)
            means = [n for n in written.graph.node if n.op_type == "ReduceMean"]
            self.assertTrue(means)
            axes = [a for a in means[0].attribute if a.name == "axes"]
            self.assertEqual((len(axes), list(axes[0].ints)), (1, []))
        self.assertIn("Cast", [n.op_type for n in onnx.load(
            os.path.join(self.tmp, "rewrite.onnx")).graph.node])


# ---------------------------------------------------------------------------------------
# Files: mpc never writes a file it reads (tools/mpc/FilePlan.h), cleans up its own stale
# temporaries, and refuses tensors larger than memory with one line.
# ---------------------------------------------------------------------------------------

def run_files_mpc(*args, env=None):
    """run_mpc with every argument as a string and `env` added to the clean environment."""
    return run_mpc(*map(str, args), env=clean_env(**(env or {})))


def snapshot(folder):
    """Every file under `folder` (links as links) with a hash of its bytes."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                out[rel] = "-> " + os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[rel] = "dir"
    return out


def tiny_model(path, external=None):
    """y = MatMul(x, W) + b with W 64x64; `external`: save W and b in that data file."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    if external:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=external, size_threshold=0)
    else:
        onnx.save(m, path)


class FilesCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def p(self, *parts):
        return os.path.join(self.dir, *parts)

    def training_files(self):
        """A training model of models/digits_mlp.onnx and 40 samples of data."""
        shutil.copy(os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"), self.p("mlp.onnx"))
        r = run_files_mpc("train-graph", self.p("mlp.onnx"), "--loss", "cross-entropy", "-o",
                    self.p("train.onnx"))
        self.assertEqual(r.returncode, 0, r.stderr)
        rng = np.random.default_rng(1)
        np.savez(self.p("data.npz"), x=rng.standard_normal((40, 64)).astype(np.float32),
                 labels=rng.integers(0, 10, 40).astype(np.int64))
        return self.p("train.onnx"), self.p("data.npz")


class LostFilesTest(FilesCase):
    def refused(self, args, paths, env=None):
        """`mpc args` exits 1 with one line naming `paths`, and changes no file."""
        before = snapshot(self.dir)
        r = run_files_mpc(*args, env=env)
        self.assertEqual(r.returncode, 1, f"{args}\n{r.stdout}\n{r.stderr}")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("mpc: error: "), lines[0])
        self.assertTrue("never overwrites a file it reads" in lines[0] or
                        "are the same file" in lines[0], lines[0])
        for p in paths:
            self.assertIn(f"'{p}'", lines[0])
        self.assertEqual(r.stdout, "")
        self.assertEqual(snapshot(self.dir), before, "a file was written or changed")
        return lines[0]

    def test_rewrite(self):
        m, out = self.p("m.onnx"), self.p("out.onnx")
        tiny_model(m)
        self.refused(["rewrite", m, "-o", out, "--report", m], [m])
        self.refused(["rewrite", m, "-o", m], [m])
        self.refused(["rewrite", m, "-o", self.p("sub", "..", "m.onnx")], [m])
        os.symlink("m.onnx", self.p("link.onnx"))
        self.refused(["rewrite", m, "-o", self.p("link.onnx")], [self.p("link.onnx"), m])
        os.link(m, self.p("hard.onnx"))
        self.refused(["rewrite", m, "-o", self.p("hard.onnx")], [self.p("hard.onnx"), m])
        os.symlink(self.dir, self.p("alias"))
        self.refused(["rewrite", m, "-o", self.p("alias", "m.onnx")], [m])
        self.refused(["rewrite", m, "-o", out, "--report", out], [out])
        # The dump folder (also from MPC_AMP_LOG_PATH) and the model are one file.
        self.refused(["rewrite", m, "-o", out, "--dump-dir", m], [m])
        self.refused(["rewrite", m, "-o", out], [m], env={"MPC_AMP_LOG_PATH": m})
        # Sanity: the same command with distinct files works.
        r = run_files_mpc("rewrite", m, "-o", out, "--report", self.p("r.json"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_folders_and_files_swapped(self):
        """A file output given as an existing folder, or a folder output as an existing file,
        is one line before any work. Training mutation suite, seed 51: `rewrite --report
        FOLDER` wrote the model, then failed on the report's rename (the model stayed), and
        `run --outputs FILE` printed its results before failing."""
        m, out = self.p("m.onnx"), self.p("out.onnx")
        tiny_model(m)
        os.mkdir(self.p("folder"))
        with open(self.p("file"), "w") as f:
            f.write("x")
        model, data = self.training_files()
        log = run_files_mpc("run", model, "--train", "--data", data, "--batch", "8", "--steps",
                            "2", "--log", self.p("log.csv"))
        self.assertEqual(log.returncode, 0, log.stderr)
        folder, file = self.p("folder"), self.p("file")
        train = ["run", model, "--train", "--data", data, "--batch", "8", "--steps", "2"]
        cases = [
            (["rewrite", m, "-o", out, "--report", folder], f"the report '{folder}' is a folder"),
            (["rewrite", m, "-o", folder], f"the output '{folder}' is a folder"),
            (["rewrite", m, "-o", out, "--dump-dir", file], f"the dump folder '{file}' is a "
                                                            "file, not a folder"),
            (["train-graph", m, "--loss", "mse", "-o", folder], f"the output '{folder}' is a "
                                                                "folder"),
            (["run", m, "--random-inputs", "--outputs", file], f"the --outputs folder '{file}' "
                                                               "is a file, not a folder"),
            (train + ["--log", folder], f"the --log file '{folder}' is a folder"),
            (train + ["--plot", folder], f"the --plot file '{folder}' is a folder"),
            (train + ["--checkpoint", file], f"the --checkpoint folder '{file}' is a file"),
            (["plot", self.p("log.csv"), "-o", folder], f"the output '{folder}' is a folder"),
        ]
        for args, message in cases:
            with self.subTest(args=args[:1] + args[2:]):
                before = snapshot(self.dir)
                r = run_files_mpc(*args)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stdout, "")
                self.assertTrue(r.stderr.startswith("mpc: error: " + message), r.stderr)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertEqual(snapshot(self.dir), before, "a file was written or changed")
        r = run_files_mpc("rewrite", m, "-o", out, "--emit", "text")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--emit text prints the model instead of writing it: not with -o",
                      r.stderr)

    def test_rewrite_external_data(self):
        a, b = self.p("a.onnx"), self.p("b.onnx")
        tiny_model(a, external="b.onnx.data")
        line = self.refused(["rewrite", a, "-o", b], [self.p("b.onnx.data")])
        self.assertIn("external data of", line)
        self.refused(["rewrite", a, "-o", self.p("c.onnx"), "--report", self.p("b.onnx.data")],
                     [self.p("b.onnx.data")])
        self.refused(["train-graph", a, "--loss", "mse", "-o", self.p("b.onnx.data")],
                     [self.p("b.onnx.data")])
        # Another output name keeps the weights: it works, and a.onnx still loads.
        r = run_files_mpc("rewrite", a, "-o", self.p("c.onnx"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run_files_mpc("run", a, "--random-inputs").returncode, 0)

    def test_train(self):
        model, data = self.training_files()
        self.refused(["run", model, "--train", "--data", data, "--batch", 8, "--log", model],
                     [model])
        self.refused(["run", model, "--train", "--data", data, "--batch", 8, "--plot", data],
                     [data])
        os.mkdir(self.p("ck"))
        shutil.copy(model, self.p("ck", "checkpoint.onnx"))
        ckm = self.p("ck", "checkpoint.onnx")
        self.refused(["run", ckm, "--train", "--data", data, "--batch", 8, "--checkpoint",
                      self.p("ck")], [ckm])
        self.refused(["run", model, "--train", "--data", data, "--batch", 8, "--log",
                      self.p("l.csv"), "--plot", self.p("l.csv")], [self.p("l.csv")])
        os.link(data, self.p("data2.npz"))
        self.refused(["run", model, "--train", "--data", data, "--batch", 8, "--log",
                      self.p("data2.npz")], [self.p("data2.npz"), data])
        # Resuming from a checkpoint and writing checkpoints over it.
        r = run_files_mpc("run", model, "--train", "--data", data, "--batch", 8, "--steps", 2,
                    "--checkpoint", self.p("ck2"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.refused(["run", model, "--train", "--data", data, "--batch", 8, "--steps", 4,
                      "--resume", self.p("ck2"), "--checkpoint", self.p("ck2")],
                     [self.p("ck2", "checkpoint.onnx")])

    def test_run(self):
        m = self.p("m.onnx")
        tiny_model(m)
        os.mkdir(self.p("o"))
        np.save(self.p("o", "y.npy"), np.ones((2, 64), np.float32))
        self.refused(["run", m, "--input", "x=" + self.p("o", "y.npy"), "--outputs",
                      self.p("o")], [self.p("o", "y.npy")])
        # Through a link: the output file is a symbolic link to the input elsewhere.
        np.save(self.p("x.npy"), np.ones((2, 64), np.float32))
        os.mkdir(self.p("o2"))
        os.symlink(self.p("x.npy"), self.p("o2", "y.npy"))
        self.refused(["run", m, "--input", "x=" + self.p("x.npy"), "--outputs", self.p("o2")],
                     [self.p("o2", "y.npy"), self.p("x.npy")])
        self.refused(["run", m, "--random-inputs", "--outputs", m], [m])
        self.refused(["run", m, "--random-inputs", "--compare", self.p("o", "y.npy"),
                      "--outputs", self.p("o")], [self.p("o", "y.npy")])
        # Other outputs in the folder are fine.
        r = run_files_mpc("run", m, "--input", "x=" + self.p("x.npy"), "--outputs", self.p("o3"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_plot(self):
        a = self.p("a.csv")
        with open(a, "w") as f:
            f.write("step,loss\n1,2\n2,1\n")
        self.refused(["plot", a, "-o", a], [a])
        os.link(a, self.p("b.svg"))
        self.refused(["plot", a, "-o", self.p("b.svg")], [self.p("b.svg"), a])

    def test_train_graph(self):
        m = self.p("m.onnx")
        tiny_model(m)
        self.refused(["train-graph", m, "--loss", "mse", "-o", m], [m])


class StaleTemporariesTest(FilesCase):
    def plant(self, *names):
        for n in names:
            os.makedirs(os.path.dirname(self.p(n)), exist_ok=True)
            open(self.p(n), "wb").close()

    def assertGone(self, *names):
        for n in names:
            self.assertFalse(os.path.exists(self.p(n)), n)

    def assertKept(self, *names):
        for n in names:
            self.assertTrue(os.path.exists(self.p(n)), n)

    def test_checkpoint(self):
        model, data = self.training_files()
        stale = ["ck/checkpoint.onnx.tmp-0a9f3c", "log.csv.tmp-123456", "p.svg.tmp-abcdef"]
        kept = ["ck/checkpoint.onnx.tmp-0A9F3C", "ck/checkpoint.onnx.tmp-12345",
                "ck/checkpoint.onnx.tmp-1234567", "ck/other.onnx.tmp-123456", "ck/notes.txt",
                "ck/checkpoint.onnx.bak"]
        self.plant(*stale, *kept)
        r = run_files_mpc("run", model, "--train", "--data", data, "--batch", 8, "--steps", 2,
                    "--checkpoint", self.p("ck"), "--log", self.p("log.csv"), "--plot",
                    self.p("p.svg"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGone(*stale)
        self.assertKept(*kept, "ck/checkpoint.onnx")

    def test_refused_run_removes_nothing(self):
        model, data = self.training_files()
        self.plant("ck/checkpoint.onnx.tmp-0a9f3c")
        r = run_files_mpc("run", model, "--train", "--data", data, "--batch", 8, "--steps", 2,
                    "--checkpoint", self.p("ck"), "--log", data)
        self.assertEqual(r.returncode, 1)
        self.assertKept("ck/checkpoint.onnx.tmp-0a9f3c")

    def test_rewrite_run_plot(self):
        m = self.p("m.onnx")
        tiny_model(m, external="m.data")
        stale = ["out.onnx.tmp-aaaaaa", "out.onnx.data.tmp-bbbbbb", "r.json.tmp-cccccc",
                 "o/y.npy.tmp-dddddd", "a.svg.tmp-eeeeee"]
        self.plant(*stale, "m.onnx.tmp-ffffff")
        r = run_files_mpc("rewrite", m, "-o", self.p("out.onnx"), "--report", self.p("r.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_files_mpc("run", m, "--random-inputs", "--outputs", self.p("o"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.p("a.csv"), "w") as f:
            f.write("step,loss\n1,2\n")
        r = run_files_mpc("plot", self.p("a.csv"), "-o", self.p("a.svg"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGone(*stale)
        # The input's own name is not written: its look-alike stays.
        self.assertKept("m.onnx.tmp-ffffff", "out.onnx", "out.onnx.data", "o/y.npy")

    def test_temporary_that_is_read_survives(self):
        m = self.p("m.onnx")
        tiny_model(m)
        os.mkdir(self.p("o"))
        x = self.p("o", "y.npy.tmp-abc123")
        np.save(self.p("x.npy"), np.ones((2, 64), np.float32))
        os.rename(self.p("x.npy"), x)
        r = run_files_mpc("run", m, "--input", "x=" + x, "--outputs", self.p("o"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(x))


class HugeShapeTest(FilesCase):
    def fails(self, args, *needles):
        r = run_files_mpc(*args)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("mpc: error: "), lines[0])
        for n in needles:
            self.assertIn(n, lines[0])
        self.assertNotIn("bad_alloc", r.stderr)

    def save(self, name, nodes, inputs, out_type, inits):
        g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", out_type,
                                                                                 None)],
                              [numpy_helper.from_array(np.array(v), k) for k, v in inits.items()])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, self.p(name))
        return self.p(name)

    def test_random_inputs(self):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000000, 1000000])
        m = self.save("big.onnx", [helper.make_node("Relu", ["x"], ["y"])], [x],
                      TensorProto.FLOAT, {})
        self.fails(["run", m, "--random-inputs"], "input 'x'", "[1000000, 1000000]",
                   "4000000000000 bytes")
        mlp = os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx")
        self.fails(["run", mlp, "--random-inputs", "--dim", "N=1000000000000"], "input 'x'",
                   "256000000000000 bytes")
        self.fails(["run", mlp, "--random-inputs", "--dim", "N=100000000000000000"],
                   "input 'x'", "more than 2^64 bytes")
        # 2^62 x 4 floats is 2^66 bytes, which wraps to exactly 0 in 64 bits: it ran
        # (exit 0) as an empty tensor.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2 ** 62, 4])
        m = self.save("wrap.onnx", [helper.make_node("Relu", ["x"], ["y"])], [x],
                      TensorProto.FLOAT, {})
        self.fails(["run", m, "--random-inputs"], "input 'x'", "[4611686018427387904, 4]",
                   "more than 2^64 bytes")
        mlp = os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx")
        self.fails(["run", mlp, "--random-inputs", "--dim", f"N={2 ** 58}"], "input 'x'",
                   "more than 2^64 bytes")

    def test_shape_products_do_not_wrap(self):
        """Tile of [4] by 2^62 is 2^64 elements: the product wrapped to 0 and the run
        printed an empty output, exit 0 (training mutation suite, seed 74, under UBSan)."""
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
        m = self.save("tile.onnx", [helper.make_node("Tile", ["x", "r"], ["y"])], [x],
                      TensorProto.FLOAT, {"r": np.array([2 ** 62], np.int64)})
        self.fails(["run", m, "--random-inputs"], "(Tile)", "more than 2^64 bytes")

    def test_a_failed_allocation_is_one_line(self):
        """Under an address-space limit (ulimit -v) a large import fails to allocate: LLVM's
        containers and mpc's arenas aborted ("LLVM ERROR: out of memory", exit 134) and
        std::bad_alloc terminated. Now one line, exit 1, nothing written, at every limit from
        just above what mpc needs to start to well past it. tcmalloc prints its own lines
        ("tcmalloc: allocation failed") before some of these; they are allowed before it."""
        import resource
        nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"n{i}")
                 for i in range(200000)]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("v0", TensorProto.FLOAT,
                                                                         [4])],
                              [helper.make_tensor_value_info("v200000", TensorProto.FLOAT, [4])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(m, self.p("chain.onnx"))

        def under(limit, *args, timeout=300):
            return subprocess.run([MPC, *args], capture_output=True, text=True,
                                  timeout=timeout, env=clean_env(),
                                  preexec_fn=lambda: resource.setrlimit(
                                      resource.RLIMIT_AS, (limit, limit)))

        # The least address space `mpc --version` starts in, by 32 MiB steps from 256 MiB
        # (OpenBLAS maps a 128 MiB buffer before main and, below about 230 MiB, retries
        # forever: a limit that low is not tested).
        start = 256 << 20
        while True:
            try:
                if under(start, "--version", timeout=10).returncode == 0:
                    break
            except subprocess.TimeoutExpired:
                pass
            start += 32 << 20
            self.assertLess(start, 2 << 30)
        failed = 0
        for extra in (16, 48, 96):
            out = self.p(f"out{extra}.onnx")
            r = under(start + (extra << 20), "rewrite", self.p("chain.onnx"), "-o", out)
            if r.returncode == 0:
                continue
            failed += 1
            self.assertEqual(r.returncode, 1, (extra, r.stderr[-500:]))
            lines = r.stderr.splitlines()
            self.assertEqual(lines[-1], "mpc: error: out of memory: a request for host memory "
                                        "failed (a smaller input, or --max-memory to stop "
                                        "earlier)", (extra, r.stderr[-500:]))
            for line in lines[:-1]:
                self.assertIn("tcmalloc: allocation failed", line)
            self.assertEqual(sorted(os.listdir(self.dir)), ["chain.onnx"])
        self.assertGreaterEqual(failed, 2)  # the limits are below what the rewrite needs

    def test_tensor_proto_input(self):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
        m = self.save("relu.onnx", [helper.make_node("Relu", ["x"], ["y"])], [x],
                      TensorProto.FLOAT, {})
        t = TensorProto(name="x", data_type=TensorProto.FLOAT, dims=[1000000, 1000000])
        with open(self.p("x.pb"), "wb") as f:
            f.write(t.SerializeToString())
        self.fails(["run", m, "--input", "x=" + self.p("x.pb")], "input 'x'",
                   "needs 1000000000000")

    def test_shapes_computed_at_run_time(self):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])
        big = np.array([1000000, 1000000], np.int64)
        n = helper.make_node
        cases = {
            "ConstantOfShape": ([n("ConstantOfShape", ["s"], ["y"])], [], TensorProto.FLOAT,
                                {"s": big}, "4000000000000 bytes"),
            "Expand": ([n("Expand", ["x", "s"], ["y"])], [x], TensorProto.FLOAT, {"s": big},
                       "4000000000000 bytes"),
            "Tile": ([n("Tile", ["x", "s"], ["y"])], [x], TensorProto.FLOAT, {"s": big},
                     "4000000000000 bytes"),
            "Range": ([n("Range", ["a", "b", "c"], ["y"])], [], TensorProto.INT64,
                      {"a": np.array(0, np.int64), "b": np.array(10**12, np.int64),
                       "c": np.array(1, np.int64)}, "8000000000000 bytes"),
            "Resize": ([n("Resize", ["x", "", "sc"], ["y"])], [x], TensorProto.FLOAT,
                       {"sc": np.array([1e6, 1e6], np.float32)}, "4000000000000 bytes"),
        }
        for op, (nodes, inputs, out_type, inits, needle) in cases.items():
            with self.subTest(op=op):
                m = self.save(op + ".onnx", nodes, inputs, out_type, inits)
                self.fails(["run", m, "--random-inputs"], "'y'", needle)


def main():
    global MPC, SOURCE_DIR
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpc", required=True, help="path to the mpc binary")
    parser.add_argument("--source-dir", required=True, help="mpc's source folder")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("-k", dest="pattern", help="run only tests whose id contains this")
    args = parser.parse_args()
    MPC = os.path.abspath(args.mpc)
    SOURCE_DIR = os.path.abspath(args.source_dir)

    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for case in (DumpTest, ReportTest, BackendCapsTest, InspectTest, OnnxCheckBlameTest, LostFilesTest,
                 StaleTemporariesTest, HugeShapeTest):
        for test in loader.loadTestsFromTestCase(case):
            if not args.pattern or args.pattern in test.id():
                suite.addTest(test)
    result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1,
                                     stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
