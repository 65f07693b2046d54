#!/usr/bin/env python3
"""Seeded mutation suite: whole-model mutants of models/*.onnx through the real CLI.

    python3 tests/fuzz/test_mutations.py --mpc build/tools/mpc --source-dir . \\
        [--seed S] [--count N] [-v] [--keep DIR]

Each mutant is a shipped model with one or a few changes a user's file may have: dims
(negative, zero, huge), element and data types (unknown, mismatched with the data), attribute
types, nested graphs (If bodies, nested up to and past the nesting limit, bodies that use
undefined names), opsets and ir_version, external data (records and files: missing, short,
out of the folder, bad offsets and lengths), truncation and flipped bytes. It is written into
a fresh folder and `mpc inspect` and `mpc rewrite -o` run on it (on a seeded half of the
mutants with the opt-in `--fuse-gemm-epilogues`, whose pass walks the graph's GEMM chains), and
on a seeded quarter of the mutants `mpc run --random-inputs --outputs` (with --dim P=2 for
symbolic input dimensions). Besides the shipped models, two training models built here with
`mpc train-graph` (the digits MLP with Adam, the digits CNN with --fused-optimizer) are mutated
too, and rewritten with a seeded subset of the training passes' opt-in flags
(`--fused-unscale`, `--optimizer-weight-copy`, `--multi-tensor-optimizer`,
`--fuse-gemm-epilogues`).
Names hold newlines, quotes and other control characters. Every run must

  * end by itself (a time limit) and not by a signal (exit status < 128),
  * print no sanitizer report,
  * on failure: exit non-zero with exactly one line on stderr, and leave no output file (nor a
    .data companion or a temporary) behind; on success `rewrite` writes its output,
  * leave the mutant's own files as they were.

The mutants depend on the seed alone, so a failure is reproduced with the same --seed and
--count (the failing mutant's number and description are printed; --keep keeps its folder).
The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 (CTest's
skip code) when onnx is missing.
"""

import argparse
import copy
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP_EXIT_CODE = 77
try:
    import onnx
    from onnx import AttributeProto, TensorProto, helper
except ImportError as e:  # pragma: no cover
    print(f"onnx is required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(SKIP_EXIT_CODE)

# One mpc run may take this long before it counts as a hang.
RUN_TIMEOUT_S = 60
# Graph nesting limit (kMaxGraphDepth, compiler/include/mpc/IR/Limits.h).
MAX_GRAPH_DEPTH = 64
# `mpc run --random-inputs` runs on this fraction of the mutants (it is the slowest command),
# each for at most RUN_RUN_TIMEOUT_S.
RUN_FRACTION = 0.25
RUN_RUN_TIMEOUT_S = 20
# `mpc rewrite` adds --fuse-gemm-epilogues on this fraction of the mutants.
FUSE_FRACTION = 0.5
# The training models' opt-in rewrite flags: each mutant of one takes each with probability 1/2.
TRAIN_FLAGS = ["--fused-unscale", "--optimizer-weight-copy", "--multi-tensor-optimizer",
               "--fuse-gemm-epilogues"]
# Training models built at the start: (name, shipped model, extra train-graph flags).
TRAINING_BASES = [("digits_mlp.train", "digits_mlp", []),
                  ("digits_cnn.train_fused", "digits_cnn", ["--fused-optimizer"])]
# Names a user's model may hold that must not forge or split a message: a newline followed by
# what looks like a second error, quotes, a backslash, other control characters, Unicode line
# and bidi controls, a path.
ODD_NAMES = ["a\nmpc: error: forged", "q'uote", 'd"q', "back\\slash", "tab\there", "cr\rx",
             "\x01\x1b[31m", "\u2028ls", "\u202erev", "caf\u00e9", "../up", "x\n"]
SANITIZER_MARKS = ("Sanitizer", "runtime error:", "AddressSanitizer", "LeakSanitizer")


# --------------------------------------------------------------------------------------------
# Raw protobuf bytes (the Python protobuf runtime refuses messages nested ~100 deep).
# --------------------------------------------------------------------------------------------

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited field."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def nested_if_model(depth, leaf_op="MatMul"):
    """A model whose main graph nests `depth` If levels (the innermost body at `depth`);
    the innermost body computes leaf_op(x, x) on x: float [2, 2]. Returns bytes."""
    def vi(name, dims=(2, 2)):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims)).SerializeToString()

    def leaf(name):
        return helper.make_graph([helper.make_node(leaf_op, ["x", "x"], [name + "_o"])], name, [],
                                 [helper.make_tensor_value_info(name + "_o", TensorProto.FLOAT,
                                                                [2, 2])]).SerializeToString()

    def if_node(out, then_graph, else_graph, name):
        def attr(aname, g):
            return field(1, aname) + field(6, g) + varint(20 << 3) + varint(AttributeProto.GRAPH)
        return (field(1, "c") + field(2, out) + field(3, name) + field(4, "If") +
                field(5, attr("then_branch", then_graph)) + field(5, attr("else_branch", else_graph)))

    body = leaf("g0")
    for i in range(1, depth):
        body = (field(1, if_node(f"y{i}", body, leaf(f"e{i}"), f"if{i}")) + field(2, f"g{i}") +
                field(12, vi(f"y{i}")))
    main = helper.make_graph([], "main", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                          helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                        [2, 2])],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 2])])
    main = field(1, if_node("out", body, leaf("etop"), "top")) + main.SerializeToString()
    m = helper.make_model(helper.make_graph([], "x", [], []),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    m.ClearField("graph")
    return m.SerializeToString() + field(7, main)


# --------------------------------------------------------------------------------------------
# Mutations. Each takes (rng, model, files) where `files` maps extra file names to bytes, and
# returns a description; the model is changed in place. Raw-byte mutations return bytes.
# --------------------------------------------------------------------------------------------

def all_graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.HasField("g"):
                yield from all_graphs(a.g)
            for sub in a.graphs:
                yield from all_graphs(sub)


def pick_initializer(rng, m):
    inits = [t for g in all_graphs(m.graph) for t in g.initializer]
    return rng.choice(inits) if inits else None


def pick_node(rng, m):
    nodes = [n for g in all_graphs(m.graph) for n in g.node]
    return rng.choice(nodes) if nodes else None


INTERESTING_DIMS = [0, 1, 3, -1, -7, 2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63 - 1, -2 ** 63]
DATA_TYPES = list(range(0, 27)) + [40, 99, -1]


def mut_init_dims(rng, m, files):
    t = pick_initializer(rng, m)
    if t is None:
        return "no initializer"
    if t.dims and rng.random() < 0.7:
        i = rng.randrange(len(t.dims))
        t.dims[i] = rng.choice(INTERESTING_DIMS)
        return f"initializer {t.name!r} dim {i} = {t.dims[i]}"
    t.dims.append(rng.choice(INTERESTING_DIMS))
    return f"initializer {t.name!r} one more dim"


def mut_value_dims(rng, m, files):
    vis = [v for g in all_graphs(m.graph) for v in list(g.input) + list(g.output) + list(g.value_info)
           if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")]
    if not vis:
        return "no shaped value"
    v = rng.choice(vis)
    dims = v.type.tensor_type.shape.dim
    if dims and rng.random() < 0.6:
        d = dims[rng.randrange(len(dims))]
        choice = rng.random()
        if choice < 0.6:
            d.dim_value = rng.choice(INTERESTING_DIMS)
        elif choice < 0.8:
            d.dim_param = rng.choice(["", "N", "'q'"] + ODD_NAMES)
        else:
            d.Clear()
        return f"value {v.name!r} dim changed"
    if rng.random() < 0.2:
        old, v.name = v.name, rng.choice(ODD_NAMES)
        rename_uses(m, old, v.name)
        return f"value {old!r} renamed {v.name!r}"
    if rng.random() < 0.5:
        v.type.tensor_type.ClearField("shape")
        return f"value {v.name!r} shape dropped"
    dims.add().dim_value = rng.choice(INTERESTING_DIMS)
    return f"value {v.name!r} one more dim"


def rename_uses(m, old, new):
    """Renames value `old` to `new` wherever a graph declares, produces or uses it."""
    for g in all_graphs(m.graph):
        for n in g.node:
            for names in (n.input, n.output):
                for i, name in enumerate(names):
                    if name == old:
                        names[i] = new
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if v.name == old:
                v.name = new
        for t in g.initializer:
            if t.name == old:
                t.name = new


def mut_init_dtype(rng, m, files):
    t = pick_initializer(rng, m)
    if t is None:
        return "no initializer"
    t.data_type = rng.choice(DATA_TYPES)
    return f"initializer {t.name!r} data_type {t.data_type}"


def mut_elem_type(rng, m, files):
    vis = [v for g in all_graphs(m.graph) for v in list(g.input) + list(g.output) + list(g.value_info)
           if v.type.HasField("tensor_type")]
    if not vis:
        return "no typed value"
    v = rng.choice(vis)
    v.type.tensor_type.elem_type = rng.choice(DATA_TYPES)
    return f"value {v.name!r} elem_type {v.type.tensor_type.elem_type}"


def mut_typed_data(rng, m, files):
    """Moves an initializer's raw data into a typed field, with a wrong count or type."""
    t = pick_initializer(rng, m)
    if t is None:
        return "no initializer"
    t.ClearField("raw_data")
    kind = rng.choice(["float_data", "int64_data", "int32_data", "double_data", "string_data"])
    count = rng.choice([0, 1, 3, 17])
    values = {"float_data": 1.5, "int64_data": 2 ** 62, "int32_data": -5, "double_data": 1e300,
              "string_data": b"s"}[kind]
    getattr(t, kind).extend([values] * count)
    return f"initializer {t.name!r} {count} values in {kind}"


def mut_attr_type(rng, m, files):
    n = pick_node(rng, m)
    if n is None or not n.attribute:
        return "no attribute"
    a = rng.choice(n.attribute)
    choice = rng.random()
    if choice < 0.5:
        # (protobuf refuses to set an AttributeType it does not know, such as 15 or 99;
        # unknown_attr_type writes those into the bytes)
        a.type = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
        return f"node {n.name!r} attribute {a.name!r} type {a.type}"
    if choice < 0.7:
        a.ClearField("ints")
        a.ClearField("floats")
        a.ClearField("i")
        a.ClearField("f")
        return f"node {n.name!r} attribute {a.name!r} emptied"
    if choice < 0.85:
        a.ints.extend([2 ** 63 - 1, -2 ** 63, 0])
        return f"node {n.name!r} attribute {a.name!r} extreme ints"
    a.name = rng.choice(["", "nope", a.name + "_"] + ODD_NAMES)
    return f"node {n.name!r} attribute renamed"


def mut_node(rng, m, files):
    n = pick_node(rng, m)
    if n is None:
        return "no node"
    choice = rng.random()
    if choice < 0.1:
        n.name = rng.choice(ODD_NAMES)
        return f"node renamed {n.name!r}"
    if choice < 0.3 and n.input:
        n.input[rng.randrange(len(n.input))] = rng.choice(["", "undefined_value", n.output[0] if n.output else "x"] + ODD_NAMES)
        return f"node {n.name!r} input renamed"
    if choice < 0.47:
        n.op_type = rng.choice(["", "NotAnOp", "If", "Loop", "Scan", "Cast", "Reshape"] + ODD_NAMES[:4])
        return f"node {n.name!r} op_type {n.op_type!r}"
    if choice < 0.6:
        n.domain = rng.choice(["com.example", "ai.onnx.ml", "ai.onnx.preview.training", "a\nb.c"])
        return f"node {n.name!r} domain {n.domain!r}"
    if choice < 0.8 and n.output:
        n.output.append(n.output[0])
        return f"node {n.name!r} output repeated"
    del n.input[:]
    return f"node {n.name!r} inputs dropped"


def make_body(rng, outer_names, depth):
    """A branch body using outer names (sometimes undefined ones), nested `depth` more levels."""
    name = f"b{depth}_{rng.randrange(10 ** 6)}"
    src = rng.choice(outer_names + ["undefined_outer"]) if outer_names else "undefined_outer"
    out = name + "_o"
    if depth > 0:
        inner_then, inner_else = make_body(rng, outer_names, depth - 1), make_body(rng, outer_names, 0)
        node = helper.make_node("If", [rng.choice(outer_names) if outer_names else "c"], [out],
                                then_branch=inner_then, else_branch=inner_else)
    else:
        node = helper.make_node(rng.choice(["Identity", "Relu", "Neg", "Cast"]), [src], [out],
                                **({"to": rng.choice([1, 10, 7, 99])} if rng.random() < 0.3 else {}))
    return helper.make_graph([node], name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])


def mut_nested_if(rng, m, files):
    """Wraps uses of a value in If branches (nested a few levels), or a Loop body."""
    g = m.graph
    names = [i.name for i in g.input] + [t.name for t in g.initializer] + [o for n in g.node for o in n.output]
    cond = "mut_cond"
    g.input.append(helper.make_tensor_value_info(cond, TensorProto.BOOL, []))
    depth = rng.choice([0, 1, 3, 10])
    out = "mut_if_out"
    if rng.random() < 0.7:
        node = helper.make_node("If", [cond], [out], name="mut_if",
                                then_branch=make_body(rng, names, depth),
                                else_branch=make_body(rng, names, rng.choice([0, depth])))
    else:
        body = helper.make_graph(
            [helper.make_node("Identity", [rng.choice(names + ["cond_in"])], ["cond_out"]),
             helper.make_node("Identity", ["v_in"], ["v_out"])], "loop_body",
            [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
             helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None)])
        trip = rng.choice(["", "mut_trip"])
        if trip:
            g.initializer.append(helper.make_tensor(trip, TensorProto.INT64, [],
                                                    [rng.choice([0, 3, 2 ** 63 - 1, -1])]))
        node = helper.make_node("Loop", [trip, cond, rng.choice(names)], [out], name="mut_loop",
                                body=body)
    g.node.append(node)
    g.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
    return f"{node.op_type} with bodies {depth} deep"


def mut_opset(rng, m, files):
    choice = rng.random()
    if choice < 0.5 and m.opset_import:
        o = rng.choice(m.opset_import)
        o.version = rng.choice([0, 1, 5, 7, 11, 13, 21, 22, 23, 999, -1, 2 ** 62])
        return f"opset '{o.domain}' version {o.version}"
    if choice < 0.7:
        m.opset_import.add(domain="", version=rng.choice([1, 17]))
        return "default domain imported twice"
    if choice < 0.85:
        del m.opset_import[:]
        return "no opset_import"
    m.opset_import.add(domain=rng.choice(["com.microsoft", "ai.onnx.ml", "x"]), version=1)
    return "another domain"


def mut_ir_version(rng, m, files):
    m.ir_version = rng.choice([0, 1, 2, 3, 4, 7, 10, 11, 13, 14, 99, -1])
    return f"ir_version {m.ir_version}"


def mut_external(rng, m, files):
    """Stores an initializer as external data, with a record or file that may be wrong."""
    inits = [t for t in m.graph.initializer if t.HasField("raw_data") and len(t.raw_data) > 0]
    if not inits:
        return "no raw initializer"
    t = rng.choice(inits)
    data = t.raw_data
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    location = rng.choice(["w.bin", "w.bin", "sub/w.bin", "missing.bin", "../w.bin", "/etc/passwd",
                           "", "sub", "sub/../w.bin", "w\nmpc: error: x.bin", "w'q\t.bin"])
    offset = rng.choice([None, 0, 0, 4096, 3, -1, 2 ** 62, "x"])
    length = rng.choice([None, None, len(data), len(data) + 1, len(data) - 1, 0, -5, "12a"])
    body = data
    how = rng.choice(["whole", "whole", "short", "empty", "none", "padded"])
    pad = offset if isinstance(offset, int) and 0 <= offset < 1 << 20 else 0
    if how == "whole":
        body = b"\0" * pad + data
    elif how == "short":
        body = (b"\0" * pad + data)[: max(0, pad + len(data) // 2)]
    elif how == "empty":
        body = b""
    elif how == "padded":
        body = b"\0" * pad + data + b"\0" * 100
    if how != "none" and location in ("w.bin", "sub/w.bin", "sub/../w.bin", "missing.bin",
                                      "w\nmpc: error: x.bin", "w'q\t.bin"):
        files["missing.bin" if location == "missing.bin" and rng.random() < 0.2 else
              location.replace("sub/../", "")] = body
    if location == "sub":
        files["sub/keep"] = b""
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            e = t.external_data.add()
            e.key, e.value = key, str(value)
    if rng.random() < 0.1:
        e = t.external_data.add()
        e.key, e.value = "location", "w2.bin"
    if rng.random() < 0.2:
        old, t.name = t.name, rng.choice(ODD_NAMES)
        rename_uses(m, old, t.name)
    return f"initializer {t.name!r} external at {location!r} offset {offset} length {length} ({how})"


MODEL_MUTATIONS = [mut_init_dims, mut_value_dims, mut_init_dtype, mut_elem_type, mut_typed_data,
                   mut_attr_type, mut_node, mut_nested_if, mut_opset, mut_ir_version, mut_external]


def byte_mutation(rng, data):
    data = bytearray(data)
    choice = rng.random()
    if choice < 0.4:
        cut = rng.randrange(len(data))
        return bytes(data[:cut]), f"truncated to {cut} bytes"
    if choice < 0.8:
        k = rng.choice([1, 2, 8])
        for _ in range(k):
            data[rng.randrange(len(data))] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        return bytes(data), f"{k} bytes flipped"
    at = rng.randrange(len(data))
    return bytes(data[:at] + data[at:at + rng.randrange(1, 64)] * 2 + data[at:]), "bytes repeated"


def unknown_attr_type(rng, data):
    """An AttributeProto.type no ONNX release defines, patched into the bytes (protobuf's
    Python API refuses to set one): tag 20 as a varint (0xA0 0x01), then a known type."""
    spots = [m.start() for m in re.finditer(rb"\xa0\x01[\x01-\x0e]", data)]
    if not spots:
        return data, "no attribute type to patch"
    at = rng.choice(spots) + 2
    value = rng.choice([15, 63, 99, 127])
    return data[:at] + bytes([value]) + data[at + 1:], f"attribute type {value} at byte {at}"


def make_mutant(seed, index, models):
    """(bytes, files, description) of mutant `index`; depends on (seed, index) alone."""
    rng = random.Random(f"{seed}:{index}")
    name = rng.choice(sorted(models))
    files = {}
    choice = rng.random()
    if choice < 0.08:
        depth = rng.choice([MAX_GRAPH_DEPTH - 1, MAX_GRAPH_DEPTH, MAX_GRAPH_DEPTH + 1,
                            MAX_GRAPH_DEPTH + 2, 100, 300, 2000])
        data = nested_if_model(depth, rng.choice(["MatMul", "Add"]))
        desc = f"If chain {depth} deep"
        if rng.random() < 0.3:
            data, how = byte_mutation(rng, data)
            desc += ", " + how
        return data, files, desc
    m = copy.deepcopy(models[name])
    if choice < 0.25:
        data, how = byte_mutation(rng, m.SerializeToString())
        return data, files, f"{name}: {how}"
    descs = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        mutation = rng.choice(MODEL_MUTATIONS)
        descs.append(mutation(rng, m, files))
    data = m.SerializeToString()
    if rng.random() < 0.1:
        data, how = unknown_attr_type(rng, data)
        descs.append(how)
    return data, files, f"{name}: " + "; ".join(descs)


# --------------------------------------------------------------------------------------------
# Running the CLI
# --------------------------------------------------------------------------------------------

def snapshot(folder):
    """{relative path: sha1} of the files under `folder`."""
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = hashlib.sha1(f.read()).hexdigest()
    return out


def check_run(mpc, args, cwd, expect_output=None, timeout=RUN_TIMEOUT_S):
    """Runs mpc; returns (problems, exit status): no problems when the run behaved."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    what = f"`mpc {' '.join(map(repr, args))}`"
    try:
        r = subprocess.run([mpc] + args, cwd=cwd, capture_output=True, text=True, errors="replace",
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return [f"{what} ran longer than {timeout} s"], None
    problems = []
    if r.returncode < 0 or r.returncode >= 128:
        problems.append(f"{what} died (exit status {r.returncode}); stderr: {r.stderr[-2000:]}")
    if any(mark in r.stderr for mark in SANITIZER_MARKS):
        problems.append(f"{what}: sanitizer report: {r.stderr[-4000:]}")
    if r.returncode != 0:
        lines = r.stderr.splitlines()
        if len(lines) != 1:
            problems.append(f"{what} failed with {len(lines)} lines on stderr: {r.stderr[-2000:]!r}")
        elif not lines[0].startswith("mpc: error: "):
            problems.append(f"{what}: stderr is not one error line: {lines[0]!r}")
    if expect_output:
        exists = os.path.exists(os.path.join(cwd, expect_output))
        if r.returncode == 0 and not exists:
            problems.append(f"{what} succeeded but wrote no '{expect_output}'")
    return problems, r.returncode


def run_args(data):
    """`mpc run` on m.onnx with random inputs, --dim P=2 for every symbolic input dimension."""
    args = ["run", "m.onnx", "--random-inputs", "--outputs", os.path.join("out", "r")]
    try:
        m = onnx.ModelProto.FromString(data)
        params = sorted({d.dim_param for v in m.graph.input
                         if v.type.HasField("tensor_type")
                         for d in v.type.tensor_type.shape.dim if d.dim_param})
    except Exception:  # a mutant onnx cannot parse: mpc must say why
        params = []
    for p in params:
        args += ["--dim", f"{p}=2"]
    return args


def run_mutant(mpc, folder, data, files, run=False, rewrite_flags=()):
    """Writes the mutant into `folder`, runs inspect and rewrite (with `rewrite_flags`; and
    `run` when asked); returns problems."""
    for rel, body in files.items():
        p = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(body)
    with open(os.path.join(folder, "m.onnx"), "wb") as f:
        f.write(data)
    before = snapshot(folder)
    problems = []
    p, _ = check_run(mpc, ["inspect", "m.onnx"], folder)
    problems += p
    if snapshot(folder) != before:
        problems.append("`mpc inspect` changed the folder")
    os.makedirs(os.path.join(folder, "out"))
    p, rc = check_run(mpc, ["rewrite", "m.onnx", "-o", "out/o.onnx", *rewrite_flags], folder,
                      "out/o.onnx")
    problems += p
    after = snapshot(folder)
    written = {k for k in after if k.startswith("out" + os.sep)}
    if {k: v for k, v in after.items() if k not in written} != before:
        problems.append("`mpc rewrite` changed its input files")
    if rc != 0 and written:
        problems.append(f"`mpc rewrite` failed but left {sorted(written)}")
    if rc == 0 and not written <= {os.path.join("out", "o.onnx"), os.path.join("out", "o.onnx.data")}:
        problems.append(f"`mpc rewrite` left temporaries: {sorted(written)}")
    if not run:
        return problems
    before = snapshot(folder)
    p, rc = check_run(mpc, run_args(data), folder, timeout=RUN_RUN_TIMEOUT_S)
    problems += p
    after = snapshot(folder)
    written = {k for k in after if k.startswith(os.path.join("out", "r") + os.sep)}
    if {k: v for k, v in after.items() if k not in written} != before:
        problems.append("`mpc run` changed its input files")
    if rc != 0 and written:
        problems.append(f"`mpc run` failed but left {sorted(written)}")
    if rc == 0 and any(not k.endswith((".npy", ".pb")) for k in written):
        problems.append(f"`mpc run` left temporaries: {sorted(written)}")
    return problems


def parse_args(doc, count):
    """The suites' common options (--mpc, --source-dir, --seed, --count, --first, --keep, -v)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--mpc", required=True, help="path to the mpc binary")
    parser.add_argument("--source-dir", required=True, help="mpc's source folder")
    parser.add_argument("--seed", type=int, default=11, help="mutation seed (default 11)")
    parser.add_argument("--count", type=int, default=count,
                        help=f"mutants to run (default {count})")
    parser.add_argument("--first", type=int, default=0, help="number of the first mutant")
    parser.add_argument("--keep", help="copy the folders of failing mutants here")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args()


def main():
    args = parse_args(__doc__, 400)
    mpc = os.path.abspath(args.mpc)
    models_dir = os.path.join(os.path.abspath(args.source_dir), "models")
    models = {n[:-5]: onnx.load(os.path.join(models_dir, n), load_external_data=False)
              for n in sorted(os.listdir(models_dir)) if n.endswith(".onnx")}
    with tempfile.TemporaryDirectory() as tmp:
        for name, base, flags in TRAINING_BASES:
            out = os.path.join(tmp, name + ".onnx")
            subprocess.run([mpc, "train-graph", os.path.join(models_dir, base + ".onnx"),
                            "--loss", "cross-entropy", "--labels", "labels", "--optimizer",
                            "adam", *flags, "-o", out], check=True, capture_output=True,
                           timeout=RUN_TIMEOUT_S)
            models[name] = onnx.load(out)

    def one(index, folder):
        data, files, desc = make_mutant(args.seed, index, models)
        run = random.Random(f"{args.seed}:{index}:run").random() < RUN_FRACTION
        frng = random.Random(f"{args.seed}:{index}:fuse")
        base = random.Random(f"{args.seed}:{index}").choice(sorted(models))  # make_mutant's
        if base in dict((t[0], t) for t in TRAINING_BASES):
            flags = [f for f in TRAIN_FLAGS if frng.random() < 0.5]
        else:
            flags = ["--fuse-gemm-epilogues"] if frng.random() < FUSE_FRACTION else []
        return (run_mutant(mpc, folder, data, files, run, flags),
                desc + (f" [rewrite {' '.join(flags)}]" if flags else ""))

    return run_suite(args, one)


def run_suite(args, one, prefix="mpc-mutant-"):
    """Runs `one(index, folder)` -> (problems, description) for each mutant of --first /
    --count in a fresh folder, prints the failures (and with -v the passes), keeps failing
    folders under --keep; returns the exit status."""
    passed = failed = 0
    start = time.monotonic()
    for index in range(args.first, args.first + args.count):
        folder = tempfile.mkdtemp(prefix=prefix)
        try:
            problems, desc = one(index, folder)
            if problems:
                failed += 1
                print(f"FAIL mutant {index} (seed {args.seed}): {desc}")
                for p in problems:
                    print("    " + p)
                if args.keep:
                    shutil.copytree(folder, os.path.join(args.keep, f"mutant-{index}"),
                                    dirs_exist_ok=True)
            else:
                passed += 1
                if args.verbose:
                    print(f"ok   mutant {index}: {desc}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{args.count} mutants (seed {args.seed}) in {time.monotonic() - start:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
