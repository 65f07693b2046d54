#!/usr/bin/env python3
"""`mpc ops --op NAME`: one op's facts from every table, each with its source location.

The expected text is built from the source files themselves (the line of the op's
registry row and CPU kernel row, of its shape function's and parser's definitions, its AMP
list entry, its gradient rule, the CUDA family's prepare function), so a fact or a location
the tool gets wrong, or a row or function moved without the tool following, fails here.
DocsAmpLists checks that docs/amp-lists.md names, per list, exactly the ops `mpc ops --json`
puts on it (f16 and the bf16 differences). OpsSchemaTest holds `mpc ops --op NAME --opset N`,
the schema mpc checks an op's nodes against, to the onnx wheel's schema of every version of
every default-domain op.

usage:
    python3 tests/tools/test_ops.py --mpc build/tools/mpc --source-dir . [-v]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import unittest

MPC = None
SOURCE_DIR = None


def run(*args):
    return subprocess.run([MPC, "ops", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)


def line_of(path, pattern):
    """1-based line of the only line of `path` (relative to the source tree) matching."""
    with open(os.path.join(SOURCE_DIR, path)) as f:
        hits = [i + 1 for i, l in enumerate(f) if re.search(pattern, l)]
    assert len(hits) == 1, f"{path}: {len(hits)} lines match {pattern!r}"
    return hits[0]


def source(path):
    with open(os.path.join(SOURCE_DIR, path)) as f:
        return f.read()


ONNX_OPS = "runtime/ops/OnnxOps.cpp"
CPU_TABLE = "runtime/cpu/CpuKernelTable.cpp"
AMP = "passes/amp/AmpLists.cpp"
GRAD = "passes/train/GradRules.cpp"


def defines(path, line, function):
    """Whether line `line` of `path` (relative to the source tree) starts the definition of
    `function` (a qualified name ending in it, followed by its parameter list)."""
    full = os.path.join(SOURCE_DIR, path)
    if not os.path.isfile(full):
        return False
    with open(full) as f:
        lines = f.read().splitlines()
    return 0 < line <= len(lines) and re.match(
        r"^\w[\w:<> ]*[ :]" + re.escape(function) + r"\(", lines[line - 1]) is not None


def defined_in(path, function):
    """1-based lines of `path` that start a definition of `function`."""
    with open(os.path.join(SOURCE_DIR, path)) as f:
        n = len(f.read().splitlines())
    return [i for i in range(1, n + 1) if defines(path, i, function)]


SHAPES = "runtime/ops/shapes/LinalgShapes.cpp"
PARAMS = "runtime/ops/OpParams.cpp"


class OpsOneOpTest(unittest.TestCase):
    def test_gemm_golden_from_the_sources(self):
        reg = line_of(ONNX_OPS, r'MPC_OP\("Gemm", "", 7, shapeGemm, Gemm\), parseGemm')
        cpu = line_of(CPU_TABLE, r'MPC_CPU_KERNEL\("Gemm", "", 7, kFloatTypes, runGemm\)')
        shape = line_of(SHAPES, r"^llvm::Error shapes::shapeGemm\(")
        parse = line_of(PARAMS, r"^ParsedParams mpc::parseGemm\(")
        prep = line_of("runtime/cuda/GemmOps.cpp", r"^CudaOpOrError cuda::prepareGemmOp\(")
        self.assertEqual(defined_in("runtime/cuda/GemmOps.cpp", "prepareGemmOp"), [prep])
        reason = re.search(r'\{"Gemm", AmpClass::Allow, "([^"]+)"\}', source(AMP)).group(1)
        self.assertIn('{"Gemm", gradGemm}', source(GRAD))
        expected = (
            "op Gemm (domain ai.onnx)\n"
            f"registry: opsets 7+ ({ONNX_OPS}:{reg})\n"
            f"  shape function: shapeGemm ({SHAPES}:{shape})\n"
            f"  attributes: parsed once per node by parseGemm ({PARAMS}:{parse})\n"
            "  in-place: none\n"
            "  value-dependent shape: no\n"
            "  cost class: gemm\n"
            f"amp: allow: {reason} ({AMP})\n"
            f"gradient rule: yes ({GRAD})\n"
            f"cpu kernel: opsets 7+, runGemm, f32,f16,f64,bf16 ({CPU_TABLE}:{cpu})\n"
            "cuda kernel: opsets 7+, cuBLASLt, f32,f16,bf16 (runtime/cuda/CudaKernelTable.cpp), "
            "prepared by prepareGemmOp (runtime/cuda/GemmOps.cpp)\n")
        p = run("--op", "Gemm")
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(p.stdout, expected)
        # The domain may be spelled out.
        self.assertEqual(run("--op=ai.onnx::Gemm").stdout, expected)

    def test_reshape_in_place_and_value_dependent_shapes(self):
        out = run("--op", "Reshape").stdout
        self.assertIn("  in-place: data\n", out)
        self.assertIn("  value-dependent shape: no\n", out)
        self.assertIn("  cost class: data\n", out)
        self.assertIn("  attributes: no parser (none its kernels read, or read at launch: "
                      "docs/op-registry.md lists those)\n", out)
        out = run("--op", "NonZero").stdout
        self.assertIn("  value-dependent shape: yes\n", out)
        reg = line_of(ONNX_OPS, r'MPC_OP\("NonZero"')
        self.assertIn(f"registry: opsets 9+ ({ONNX_OPS}:{reg})\n", out)
        self.assertIn("  in-place: where-branches\n", run("--op", "Where").stdout)
        self.assertIn("  cost class: window\n", run("--op", "MaxPool").stdout)

    def test_executor_op_has_a_row_and_no_kernel(self):
        reg = line_of(ONNX_OPS, r'MPC_OP\("Loop", "", 1, nullptr, Data\)')
        reason = re.search(r'\{"Loop", "([^"]+)"\}', source(AMP)).group(1)
        expected = (
            "op Loop (domain ai.onnx)\n"
            f"registry: opsets 1+ ({ONNX_OPS}:{reg})\n"
            "  shape function: none (run by the executor on the host, shaped while running)\n"
            "  attributes: read by the executor\n"
            "  in-place: none\n"
            "  value-dependent shape: yes\n"
            "  cost class: data\n"
            f"amp: unlisted: {reason} ({AMP})\n"
            "gradient rule: none\n"
            "cpu kernel: executor (all types)\n"
            "cuda kernel: none\n")
        self.assertEqual(run("--op", "Loop").stdout, expected)

    def test_training_domain_op(self):
        reg = line_of("runtime/ops/TrainingOps.cpp", r'MPC_OP\("ConvGrad"')
        cpu = line_of("runtime/cpu/TrainingKernels.cpp", r'MPC_CPU_KERNEL\("ConvGrad"')
        out = run("--op", "ai.mpc.training::ConvGrad").stdout
        self.assertTrue(out.startswith("op ai.mpc.training::ConvGrad (domain ai.mpc.training)\n"
                                       f"registry: opsets 1+ (runtime/ops/TrainingOps.cpp:{reg})\n"),
                        out)
        self.assertIn("  cost class: gemm\n", out)
        self.assertIn("amp: allow: gradient of Conv: convolutions", out)
        self.assertIn("gradient rule: none\n", out)
        self.assertIn(f"cpu kernel: opsets 1+, runConvGrad, f32,f16,f64,bf16 "
                      f"(runtime/cpu/TrainingKernels.cpp:{cpu})\n", out)

    def test_json_matches_text(self):
        p = run("--op", "Softmax", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        o = json.loads(p.stdout)
        self.assertEqual(o["op"], "Softmax")
        self.assertEqual([r["parser"] for r in o["registry"]], ["parseSoftmax"])
        self.assertEqual(o["registry"][0]["cost_class"], "elementwise")
        self.assertEqual(o["amp_class"], "infer")
        self.assertTrue(o["gradient_rule"])
        self.assertEqual(o["gradient_rule_location"], GRAD)
        self.assertEqual(o["cpu_kernels"][0]["run_function"], "runSoftmax")
        self.assertEqual(o["cuda_kernels"][0]["prepare_function"], "prepareNormOp")
        self.assertEqual(o["cuda_kernels"][0]["prepare_location"], "runtime/cuda/NormOps.cpp")
        text = run("--op", "Softmax").stdout
        self.assertIn(f"({o['registry'][0]['location']})", text)
        self.assertIn(f"({o['cpu_kernels'][0]['location']})", text)
        reg = o["registry"][0]
        self.assertIn(f"  shape function: shapeSameAsInput0 ({reg['shape_function_location']})\n",
                      text)
        self.assertIn(f"  attributes: parsed once per node by parseSoftmax "
                      f"({reg['parser_location']})\n", text)
        self.assertIn("prepared by prepareNormOp (runtime/cuda/NormOps.cpp)\n", text)
        # No function, no location.
        loop = json.loads(run("--op", "Loop", "--json").stdout)["registry"][0]
        self.assertEqual((loop["shape_function_location"], loop["parser_location"]), ("", ""))

    def test_every_function_location_names_its_definition(self):
        """For every op: each shape function, parser and CUDA prepare function printed is
        defined at the file (and line) printed. A function that moves without its marker
        (MPC_DEFINED_BELOW) or its list entry, or a CUDA kernel kind missing from
        cudaLauncherOf (tools/mpc/Ops.cpp), fails here; every failure is listed."""
        failures, seen = [], {"shape": set(), "parser": set(), "cuda": set()}
        for row in json.loads(run("--json").stdout):
            o = json.loads(run("--op", row["op"], "--json").stdout)
            for r in o["registry"]:
                for kind, name, where in (("shape", r["shape_function"],
                                           r["shape_function_location"]),
                                          ("parser", r["parser"], r["parser_location"])):
                    if not name:
                        self.assertEqual(where, "", (row["op"], kind))
                        continue
                    seen[kind].add(name)
                    path, _, line = where.rpartition(":")
                    if not (line.isdigit() and defines(path, int(line), name)):
                        failures.append(f"{row['op']}: {kind} {name} is not defined at {where!r}")
            for k in o["cuda_kernels"]:
                fn, path = k["prepare_function"], k["prepare_location"]
                seen["cuda"].add(fn)
                if not fn:
                    failures.append(f"{row['op']}: CUDA kernel kind {k['launcher']!r} has no "
                                    "prepare function and file in cudaLauncherOf")
                elif not (os.path.isfile(os.path.join(SOURCE_DIR, path)) and
                          defined_in(path, fn)):
                    failures.append(f"{row['op']}: {fn} is not defined in {path!r}")
        self.assertEqual(failures, [])
        # The check saw the families: many shape functions, parsers and CUDA families.
        self.assertGreater(len(seen["shape"]), 60)
        self.assertGreater(len(seen["parser"]), 35)
        self.assertGreater(len(seen["cuda"]), 15)

    def test_every_listed_op_is_described_consistently(self):
        table = json.loads(run("--json").stdout)
        self.assertGreater(len(table), 150)
        for row in table:
            p = run("--op", row["op"], "--json")
            self.assertEqual(p.returncode, 0, row["op"] + ": " + p.stderr)
            o = json.loads(p.stdout)
            self.assertEqual(o["amp_class"], row["amp_class"], row["op"])
            self.assertEqual(o["amp_reason"], row["amp_reason"], row["op"])
            kernels = [(k["min_opset"], k["max_opset"], k["dtypes"]) for k in o["cpu_kernels"]]
            listed = [(k["min_opset"], k["max_opset"], k["dtypes"]) for k in row["cpu_kernels"]]
            if listed and listed[0][2] == ["executor (all types)"]:
                self.assertEqual(kernels, [], row["op"])
                self.assertTrue(o["registry"][0]["run_by_executor"], row["op"])
            else:
                self.assertEqual(sorted(kernels), sorted(listed), row["op"])
            # Every op with a kernel has a registry row; every registry row and CPU
            # kernel row has a real location (a file of the tree, the op's line).
            self.assertTrue(o["registry"], row["op"])
            for r in o["registry"] + o["cpu_kernels"]:
                path, line = r["location"].rsplit(":", 1)
                self.assertTrue(os.path.isfile(os.path.join(SOURCE_DIR, path)), r["location"])
                with open(os.path.join(SOURCE_DIR, path)) as f:
                    text = f.read().splitlines()[int(line) - 1]
                self.assertIn(row["op_type"], text, r["location"])
            if o["gradient_rule"]:
                self.assertTrue(os.path.isfile(os.path.join(SOURCE_DIR,
                                                            o["gradient_rule_location"])))
            # The CUDA column: the same rows in both forms, each within the CPU row's
            # opsets and dtypes (the CPU backend is the reference a CUDA row never exceeds).
            cuda = [(k["min_opset"], k["max_opset"], k["dtypes"]) for k in o["cuda_kernels"]]
            self.assertEqual(sorted(cuda), sorted((k["min_opset"], k["max_opset"], k["dtypes"])
                                                  for k in row["cuda_kernels"]), row["op"])
            self.assertEqual(row["cuda"] == "none", not cuda, row["op"])
            for lo, hi, dts in cuda:
                self.assertTrue(any(c[0] == lo and c[1] == hi and set(dts) <= set(c[2])
                                    for c in kernels), (row["op"], lo, hi, dts, kernels))

    def test_cuda_column_is_the_launchers_table(self):
        """Ops with a CUDA row: the element-wise bodies the launchers instantiate (the unary,
        predicate, signed-binary and compare rows of ElementwiseOps.def; Clip has a row of its
        own), Cast, CastLike, MatMul, Gemm and FusedMatMul, the convolutions, pools and batch
        normalization, the slice launchers' softmax, normalization and reduction ops, the
        activation gradients, the data-movement family (DataOps.cpp), the losses, training
        batch normalization, instance/group/Lp normalization and TopK, the recurrent ops
        with LSTMGrad (RnnOps.cpp), the index/logic/shape family (IndexOps.cpp, with the
        bitwise rows of ElementwiseOps.def), and RotaryEmbedding, Einsum and Attention."""
        defs = source("runtime/kernels/include/mpc/Runtime/Kernels/ElementwiseOps.def")
        launched = set(re.findall(r"^MPC_(?:UNARY_(?:FLOAT|SIGNED|ARITHMETIC|PREDICATE|INTEGER)|"
                                  r"BINARY_(?:SIGNED|COMPARE|INTEGER))\((\w+)\)", defs, re.M))
        self.assertIn("BitwiseNot", launched)
        self.assertIn("Add", launched)
        expected = launched | {"Cast", "CastLike", "MatMul", "Gemm"}
        training = "ai.mpc.training::"
        expected |= {"Softmax", "LogSoftmax", "LayerNormalization", "RMSNormalization",
                     training + "SoftmaxGrad", training + "LogSoftmaxGrad",
                     training + "LayerNormalizationGrad", training + "BiasGrad"}
        expected |= {training + g + "Grad" for g in ("Relu", "Sigmoid", "Tanh", "Erf", "Gelu")}
        expected |= {"Reduce" + k for k in ("Sum", "Mean", "Max", "Min", "Prod", "SumSquare",
                                            "L1", "L2", "LogSum", "LogSumExp")}
        # cuBLASLt's FusedMatMul; convolutions (cuDNN), pooling and batch normalization.
        expected |= {"com.microsoft::FusedMatMul", "Conv", "ConvTranspose",
                     training + "ConvGrad", "com.microsoft::ConvGrad", "MaxPool", "AveragePool",
                     "GlobalMaxPool", "GlobalAveragePool", training + "MaxPoolGrad",
                     training + "AveragePoolGrad", training + "GlobalAveragePoolGrad",
                     "BatchNormalization"}
        expected |= {"LpPool", "GlobalLpPool"}  # the pooling launchers' Lp bodies
        # Losses, training batch norm, instance/group/Lp normalization, TopK (Clip is in
        # `launched`).
        expected |= {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss",
                     training + "SoftmaxCrossEntropyLossGrad", training + "MSELossGrad",
                     training + "BatchNormalizationGrad", "InstanceNormalization",
                     "GroupNormalization", "LpNormalization", "TopK"}
        # Data movement.
        expected |= {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout",
                     "Transpose", "Expand", "Concat", "Split", "Slice", "Tile", "Pad", "Where",
                     "Gather", "Sum", "Mean", "ai.mpc.training::SliceGrad",
                     "ai.mpc.training::GatherGrad"}
        # Loss scaling: one launch over every gradient (UnscaleOps.cpp).
        expected |= {training + "MultiTensorUnscale"}
        # GEMM epilogues: cuBLASLt with a bias/ReLU/GELU epilogue (GemmOps.cpp).
        expected |= {training + "GemmBiasAct"}
        # Recurrent ops (cuBLASLt products and gate kernels).
        expected |= {"LSTM", "GRU", "RNN", training + "LSTMGrad", training + "GRUGrad"}
        # Index, logic and shape ops.
        expected |= {"And", "Or", "Xor", "Not", "ArgMax", "ArgMin", "CumSum", "CumProd",
                     "Trilu", "GatherElements", "Shape", "Size", "Range", "ConstantOfShape",
                     "OneHot"}
        # Data-movement index ops (MoveOps.cpp).
        expected |= {"DepthToSpace", "SpaceToDepth", "GatherND", "ScatterElements", "ScatterND",
                     "ReverseSequence", "EyeLike", "Compress", "NonZero"}
        # Transformer ops (RotaryOps.cpp, EinsumOps.cpp, AttentionOps.cpp).
        expected |= {"RotaryEmbedding", "Einsum", "Attention"}
        # Image ops (ImageOps.cpp; Pad's other modes are the Pad row's).
        expected |= {"Resize", "LRN"}
        # Fused optimizer steps (OptimizerOps.cpp).
        expected |= {training + "SGDStep", training + "MomentumStep", training + "AdamStep"}
        # Their multi-tensor forms, one launch over every parameter (OptimizerOps.cpp).
        expected |= {training + "MultiTensorSGDStep", training + "MultiTensorMomentumStep",
                     training + "MultiTensorAdamStep"}
        table = json.loads(run("--json").stdout)
        self.assertEqual({r["op"] for r in table if r["cuda"] != "none"}, expected)
        rows = {r["op"]: r for r in table}
        self.assertEqual(rows["MatMul"]["cuda"], "f32,f16,bf16 (opset 1+)")
        self.assertEqual(rows["Softmax"]["cuda"], "f32,f16,bf16 (opset 1+)")
        self.assertEqual(rows["Transpose"]["cuda"], rows["Transpose"]["cpu"])
        self.assertEqual(rows["Where"]["cuda"], "bool (opset 9+)")
        self.assertEqual(rows["Conv"]["cuda"], "f32,f16,bf16 (opset 1+)")
        self.assertEqual(rows["Clip"]["cuda"], "f32,i32,i64,f16,bf16 (opset 1+)")
        self.assertEqual(rows["SoftmaxCrossEntropyLoss"]["cuda"], "f32,f16,bf16 (opset 12+)")
        self.assertEqual(rows["LSTM"]["cuda"], "f32,f16,bf16 (opset 7+)")
        self.assertEqual(rows[training + "GRUGrad"]["cuda"], "f32,f16,bf16 (opset 1+)")
        self.assertEqual(rows["Not"]["cuda"], "bool (opset 1+)")
        self.assertEqual(rows["BitShift"]["cuda"], rows["BitShift"]["cpu"])
        self.assertEqual(rows["ArgMax"]["cuda"], "f32,i32,i64,f16,bf16 (opset 1+)")
        self.assertEqual(rows["GatherND"]["cuda"], rows["GatherND"]["cpu"])
        self.assertEqual(rows["NonZero"]["cuda"], "f32,i8,i32,i64,bool,f16,f64,bf16 (opset 9+)")

    def test_errors(self):
        p = run("--op", "Dett")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "")
        self.assertEqual(p.stderr, "mpc: error: unknown op 'Dett': no ONNX schema, registry row, "
                                   "AMP list entry, gradient rule or kernel (`mpc ops` lists "
                                   "every op)\n")
        p = run("--op", "ConvGrad")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "")
        self.assertTrue(p.stderr.endswith("; did you mean 'ai.mpc.training::ConvGrad' or "
                                          "'com.microsoft::ConvGrad'?\n"), p.stderr)
        for args in (["--op"], ["--op="], ["--op", "Gemm", "--op", "Relu"]):
            p = run(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(p.stdout, "", args)
            self.assertEqual(len(p.stderr.splitlines()), 1, args)
            self.assertIn("--op", p.stderr, args)
        for args in (["--opset", "13"], ["--op", "Gemm", "--opset", "0"],
                     ["--op", "Gemm", "--opset"], ["--op", "Gemm", "--opset=x"],
                     ["--op", "Gemm", "--opset", "13", "--opset", "14"]):
            p = run(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertEqual(p.stdout, "", args)
            self.assertEqual(len(p.stderr.splitlines()), 1, args)
            self.assertIn("--op", p.stderr, args)
        p = run("--op", "Gemm", "--opset", "28")
        self.assertEqual((p.returncode, p.stdout), (1, ""))
        self.assertEqual(p.stderr, "mpc: error: --opset 28: newer than any ONNX release mpc "
                                   "knows of (newest opset of the default domain: 27)\n")


class OpsSchemaTest(unittest.TestCase):
    """`mpc ops --op NAME --opset N`: the schema mpc checks the op's nodes against. libonnx
    1.12 knows opsets up to 17; mpc brings its schemas to opset 27 with rows of its own
    (OpSignature.cpp: kPatches for formals and types, kAttrPatches for attributes). Until
    they covered types, a node of a newer opset was checked against an older version's
    schema and its types not at all (a "fallback"). The oracle is the onnx wheel's schema of
    every version of every default-domain op: mpc's must be exact and equal to it (formals,
    the types of each type parameter, attributes), or absent for the ops listed below."""

    NEWEST = 27  # kNewestRelease (OpSignature.cpp)
    # Ops added after libonnx 1.12 that mpc has no schema (nor kernel) for: a node of one is
    # an op mpc does not check or run (it is refused by `mpc run`).
    WITHOUT_SCHEMA = ["AffineGrid", "BitCast", "CausalConvWithState", "CenterCropPad",
                      "Col2Im", "DeformConv", "ImageDecoder", "LinearAttention",
                      "RegexFullMatch", "StringConcat", "StringSplit", "TensorScatter"]

    @staticmethod
    def types(strs):
        """A constraint's types as mpc prints them: an optional of a sequence as an optional
        of its element type (mpc keeps one list for both), maps and sparse tensors as
        "other"."""
        out = set()
        for t in strs:
            m = re.fullmatch(r"optional\(seq\((tensor\(\w+\))\)\)", t)
            if m:
                t = f"optional({m.group(1)})"
            elif t.startswith(("map(", "sparse_tensor(")):
                t = "other"
            out.add(t)
        return out

    @classmethod
    def wheel(cls, s):
        option = lambda f: str(f.option).split(".")[-1].lower()
        formals = lambda fs: [(f.name, f.type_str, option(f)) for f in fs]
        return {
            "since_version": s.since_version,
            "exact": True,
            "attributes_known": True,
            "inputs": formals(s.inputs),
            "outputs": formals(s.outputs),
            "min_inputs": s.min_input, "max_inputs": s.max_input,
            "min_outputs": s.min_output, "max_outputs": s.max_output,
            "types": {c.type_param_str: cls.types(c.allowed_type_strs)
                      for c in s.type_constraints},
            "attributes": {n: (str(a.type).split(".")[-1], a.required)
                           for n, a in s.attributes.items()},
        }

    @staticmethod
    def mpc(sig):
        formals = lambda fs: [(f["name"], f["type"], f["option"]) for f in fs]
        return {
            "since_version": sig["since_version"],
            "exact": sig["exact"],
            "attributes_known": sig["attributes_known"],
            "inputs": formals(sig["inputs"]),
            "outputs": formals(sig["outputs"]),
            "min_inputs": sig["min_inputs"], "max_inputs": sig["max_inputs"],
            "min_outputs": sig["min_outputs"], "max_outputs": sig["max_outputs"],
            "types": {c["param"]: set(c["types"]) for c in sig["type_constraints"]},
            "attributes": {a["name"]: (a["kind"], a["required"]) for a in sig["attributes"]},
        }

    def signature(self, op, opset):
        p = run("--op", op, "--opset", str(opset), "--json")
        self.assertEqual(p.returncode, 0, f"{op} at opset {opset}: {p.stderr}")
        return json.loads(p.stdout)["signature"]

    def test_every_version_of_every_default_domain_op(self):
        import onnx.defs
        versions = {}
        for s in onnx.defs.get_all_schemas_with_history():
            if s.domain == "" and s.since_version <= self.NEWEST:
                versions.setdefault(s.name, []).append(s)
        without = []
        checked = 0
        for op in sorted(versions):
            history = sorted(versions[op], key=lambda s: s.since_version)
            # Each version at its own opset, and the newest at the newest opset.
            probes = [(s.since_version, s) for s in history]
            if history[-1].since_version < self.NEWEST:
                probes.append((self.NEWEST, history[-1]))
            for opset, s in probes:
                sig = self.signature(op, opset)
                if sig is None:
                    self.assertGreater(history[0].since_version, 17,
                                       f"{op}: no schema at opset {opset}")
                    if op not in without:
                        without.append(op)
                    continue
                with self.subTest(op=op, opset=opset):
                    self.assertEqual(self.mpc(sig), self.wheel(s))
                    checked += 1
        self.assertEqual(without, self.WITHOUT_SCHEMA)
        self.assertGreater(checked, 600)

    def test_text(self):
        p = run("--op", "Cast", "--opset", "23")
        self.assertEqual(p.returncode, 0, p.stderr)
        f8 = ("tensor(float8e4m3fn), tensor(float8e4m3fnuz), tensor(float8e5m2), "
              "tensor(float8e5m2fnuz)")
        schema = p.stdout[p.stdout.index("schema at opset"):]
        first = schema.splitlines()[:4]
        self.assertEqual(first[:3], ["schema at opset 23: Cast-23, exact",
                                     "  inputs: input: T1", "  outputs: output: T2"])
        self.assertTrue(first[3].startswith("  T1: tensor(float16), tensor(float), tensor(double)"), first[3])
        self.assertTrue(first[3].endswith(f"{f8}, tensor(uint4), tensor(int4), "
                                          "tensor(float4e2m1)"), first[3])
        self.assertTrue(schema.endswith("  attributes: saturate (INT), to (INT, required)\n")
                        or schema.endswith("  attributes: to (INT, required), saturate (INT)\n"),
                        schema)
        # A domain whose newer versions mpc has no rows for: a fallback, attributes unknown.
        p = run("--op", "ai.onnx.ml::LabelEncoder", "--opset", "5")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("schema at opset 5: LabelEncoder-2, fallback (the opset is newer than "
                      "this schema, and the op may have changed: types are not checked)\n", p.stdout)
        self.assertTrue(p.stdout.endswith("  attributes: not known at this version (not "
                                          "checked)\n"), p.stdout)


class DocsAmpLists(unittest.TestCase):
    """docs/amp-lists.md names exactly the ops of each default list (`mpc ops --json`)."""

    SECTIONS = {"Allow": "allow", "Infer": "infer", "Deny": "deny", "Clear": "clear",
                "Unlisted": "unlisted"}

    @staticmethod
    def doc_tables():
        """{section title: [(family, [ops], why)]} from the tables of docs/amp-lists.md."""
        tables, title = {}, None
        for line in source("docs/amp-lists.md").splitlines():
            if line.startswith("## "):
                title = line[3:].strip()
            elif title and line.startswith("|") and not line.startswith("|---"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if cells[:2] == ["Family", "Ops"]:
                    continue
                ops = re.findall(r"`([\w.:]+)`", cells[1])
                tables.setdefault(title, []).append((cells[0], ops, cells[2]))
        return tables

    def test_each_table_names_exactly_its_class(self):
        table = json.loads(run("--json").stdout)
        tables = self.doc_tables()
        seen = []
        for title, cls in self.SECTIONS.items():
            self.assertIn(title, tables, "docs/amp-lists.md lacks the section ## " + title)
            documented = [op for _, ops, _ in tables[title] for op in ops]
            seen += documented
            listed = sorted(r["op"] for r in table if r["amp_class"] == cls and
                            (cls != "unlisted" or r["amp_reason"]))
            self.assertEqual(sorted(documented), listed,
                             f"docs/amp-lists.md, {title}: the ops differ from passes/amp/AmpLists.cpp")
            for family, ops, why in tables[title]:
                self.assertTrue(ops and family and why, f"{title}: row {family!r} is incomplete")
        dups = sorted({op for op in seen if seen.count(op) > 1})
        self.assertEqual(dups, [], "ops named in two sections of docs/amp-lists.md")

    def test_bf16_table_names_exactly_the_moved_ops(self):
        table = json.loads(run("--json").stdout)
        moved = sorted(r["op"] for r in table if r["amp_class"] != r["amp_class_bf16"])
        self.assertEqual(moved, ["ReduceMean", "ReduceSum", "ReduceSumSquare"])
        documented = [op for _, ops, _ in self.doc_tables()["bfloat16 target"] for op in ops]
        self.assertEqual(sorted(documented), moved)
        for r in table:
            if r["op"] in moved:
                self.assertEqual((r["amp_class"], r["amp_class_bf16"]), ("deny", "infer"))


def main():
    global MPC, SOURCE_DIR
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    MPC = os.path.abspath(args.mpc)
    SOURCE_DIR = os.path.abspath(args.source_dir)
    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(OpsOneOpTest),
                                loader.loadTestsFromTestCase(OpsSchemaTest),
                                loader.loadTestsFromTestCase(DocsAmpLists)])
    result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1,
                                     stream=sys.stdout).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
