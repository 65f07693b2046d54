#!/usr/bin/env python3
"""Attribute mutants of ONNX's node tests, `mpc run` against onnxruntime and ONNX's checker.

    python3 tests/fuzz/test_differential.py --mpc build/tools/mpc --source-dir . \
        [--seed S] [--count N] [--keep DIR] [-v]

The mutation suites (test_mutations.py, test_train_mutations.py) hold mpc to its error contract
(no crash, one line, no output left); they cannot see a wrong answer. This one can: it takes the
single-node tests shipped with the onnx wheel (onnx/backend/test/data/node), changes one
attribute of the node (an int or float nudged, negated, zeroed or set to 0/1/2; a list element
changed, the list shuffled, shortened or lengthened; a string changed in case or replaced; the
attribute dropped, so the opset's default applies) or, in three mutants of ten, the shape of
one input (a size nudged or set to 1, an axis of 1 added, an axis dropped; new values of its
type), runs the mutant on the test's recorded inputs through `mpc run --input NAME=FILE
--outputs DIR`, and judges the outcome:

  * mpc exits with anything but 0 or 1, or fails with other than one line: failed (a crash);
  * both mpc and onnxruntime run it: every output must match onnxruntime's or, where
    onnxruntime disagrees with the ONNX reference implementation (onnx.reference), that
    one's (shapes equal; floats to rtol 1e-3, atol 1e-4, NaN where NaN; others exactly);
    where onnxruntime disagrees and onnx.reference cannot run the model, no verdict
    ("unjudged");
  * onnxruntime refuses it and ONNX's strict shape inference refuses it too (an invalid
    model): mpc must refuse it (exit 1); running it is a silent wrong answer;
  * onnxruntime refuses a model the checker accepts: mpc must refuse it too, unless
    onnxruntime's message is one of its own limits (ORT_ONLY_LIMITS, each with the reason
    mpc may run it); then mpc's outputs must match onnx.reference's where it runs (counted
    when it cannot);
  * mpc refuses one onnxruntime runs (an op or case mpc does not support, said in one
    line): counted, not failed.

The input mutants of seeds 54-78 (single) and 34-47 (multi), while onnxruntime's refusals
were only counted: ScatterND / ScatterElements / GatherElements operands of other shapes, a
OneHot with three values, ConvTranspose groups, output_padding and output_shape, Conv biases,
LayerNormalization scales and BatchNormalization statistics of the right count in another
shape, recurrent biases of another rank, and list operands (axes, starts, K, repeats, a
target shape) given as scalars or matrices: each ran, most reading past a buffer; now one
line each (OperandShapeTest and RunFindingsTest in test_import_errors.py).

What it found when written (2026-11-27), each fixed with a test in test_import_errors.py:
BatchNormalization with training_mode 0 and its running statistics asked for ran; Scan with
num_scan_inputs 0 ran no iteration; a Cast whose `to` changed under a declared output type
ran with the declared type ignored; keepdims / exclusive / is_causal = -1 on ops newer than
libonnx 1.12 were taken as true (onnxruntime: false for keepdims).

`--graphs multi` takes the tests of two nodes or more instead (mostly the `_expanded` function
bodies, opsets 18-23) and mutates one attribute of a random node, or an input's shape. Its first
run (seed 1) found that nodes of opsets newer than libonnx 1.12 went unchecked: an opset-23
Concat without its axis ran, and so did a Cast to u8 feeding Slice's ends (fixed with tests in
test_import_errors.py, NewerOpsetAttributeTest).

`--mutate values` keeps shapes and attributes and changes one input's values: an element
(or every element) of an integer input set to -1, 0, a size plus or minus one or a type's
extreme, of a float input NaN, an infinity or a huge value. What it found first (seeds
1-10): a Dropout ratio outside [0, 1) ran, a Resize roi of NaN gave the extrapolation
value, an infinite Resize scale became an undefined int64 size (ValueMutantTest).

`--rewrite` also rewrites (`mpc rewrite`, fp16) every mutant that mpc and onnxruntime ran
with outputs judged right and inputs and outputs inside fp16's range, every other one with
`--level UNSAFE_FORCE_ALL` (every op whose schema admits fp16 converted, not only those
the lists choose), and judges the rewritten model: `mpc rewrite` keeps the error contract
(a refusal of a model mpc runs fails); the result passes ONNX's strict shape inference when
the mutant did, and onnxruntime runs it; onnxruntime's and mpc's outputs of it are each
within a relative L2 of 1e-2 of what the same runtime gave for the mutant, in the same
types and shapes, NaN and infinities in the same places. (Each runtime against itself:
onnxruntime computes some float16 ops in float32, so where the mutant itself casts to
float16 the two runtimes differ.) A rewrite of every op changes results as float16 does
(a Softmax of 10000..10003 is uniform once they round to 10000): there mpc's outputs are
judged against onnx.reference's run of the rewritten model, and onnxruntime only has to run
it. The mutants' graph inputs and outputs get a rank for the
checker `mpc rewrite` applies, which wants a shape field on each.

Tests EXCLUDED by the conformance suite (random outputs, documented gaps) are skipped, and so
are tests whose inputs or outputs are not plain tensors. onnxruntime runs in a child process
(its wheels abort on a failed assertion on some mutants; that counts as a refusal), and so
does ONNX's shape inference. The last line printed is 'N passed, N failed';
exit 1 on any failure, 77 when onnx, numpy or onnxruntime is missing.
"""

import argparse
import copy
import glob
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, TimeoutError
from concurrent.futures.process import BrokenProcessPool

SKIP_EXIT_CODE = 77
try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import AttributeProto, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover
    print(f"numpy, onnx and onnxruntime are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(SKIP_EXIT_CODE)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))
from test_node_conformance import exclusion_reason  # noqa: E402

RUN_TIMEOUT_S = 60


def node_tests(graphs):
    """{test name: its folder}: the node tests, or with graphs == "models" the wheel's small
    exported models with recorded data."""
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    subs = ("pytorch-converted", "pytorch-operator", "simple") if graphs == "models" else \
        ("node",)
    tests = {}
    for sub in subs:
        root = os.path.join(data, sub)
        for d in sorted(os.listdir(root)):
            if os.path.exists(os.path.join(root, d, "model.onnx")) and not exclusion_reason(d):
                tests.setdefault(d, os.path.join(root, d))
    return tests


def mutate(rng, node):
    """Changes one attribute of `node` in place; returns what changed, or None."""
    if node.attribute and rng.random() < 0.15:
        i = rng.randrange(len(node.attribute))
        name = node.attribute[i].name
        del node.attribute[i]
        return f"dropped {name}"
    kinds = (AttributeProto.INT, AttributeProto.INTS, AttributeProto.FLOAT,
             AttributeProto.STRING)
    attrs = [a for a in node.attribute if a.type in kinds]
    if not attrs:
        return None
    a = rng.choice(attrs)
    if a.type == AttributeProto.INT:
        old = a.i
        a.i = rng.choice([old + 1, old - 1, -old, 0, 1, -1, 2, rng.randint(-4, 4)])
        return f"{a.name}: {old} -> {a.i}"
    if a.type == AttributeProto.INTS:
        old = list(a.ints)
        new = list(old)
        k = rng.random()
        if new and k < 0.4:
            i = rng.randrange(len(new))
            new[i] = rng.choice([new[i] + 1, new[i] - 1, -new[i], 0, rng.randint(-3, 3)])
        elif new and k < 0.6:
            rng.shuffle(new)
        elif new and k < 0.8:
            new = new[:-1]
        else:
            new = new + [rng.randint(-2, 3)]
        del a.ints[:]
        a.ints.extend(new)
        return f"{a.name}: {old} -> {new}"
    if a.type == AttributeProto.FLOAT:
        old = a.f
        a.f = rng.choice([old * 2, -old, 0.0, 1.0, old + 0.5, float("inf"), 1e-9])
        return f"{a.name}: {old} -> {a.f}"
    old = a.s
    a.s = rng.choice([b"", old.upper(), old.lower(), b"bogus", old + b"x"])
    return f"{a.name}: {old!r} -> {a.s!r}"


def ort_run(path, arrays):
    """onnxruntime's outputs, or its error message (a str)."""
    ort.set_default_logger_severity(4)
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return sess.run(None, arrays)
    except Exception as e:
        return " ".join(str(e).split()) or type(e).__name__


# What onnxruntime refuses where mpc's run is right: its own limits, each with why mpc may
# run the model (matched against onnxruntime's message). A model onnxruntime refuses for
# any other reason, which ONNX's checker cannot judge (the mutants' shapes are cleared) and
# mpc runs, fails the suite: until 2026-11-27 such runs were only counted, and they hid
# ScatterND/ScatterElements/GatherElements operands of other shapes read past their end,
# and list operands of the wrong rank (seeds 54-78).
ORT_ONLY_LIMITS = [
    (r"Integer (modulo|division) by zero",
     "integer Div and Mod by zero, undefined in ONNX: mpc gives 0 (user guide)"),
    (r"exclude_outside can be set to 1 when",
     "exclude_outside with a mode it does not change (ONNX weighs cubic samples with it)"),
    (r"Numpy_type 256 can't be converted|No corresponding Numpy type for Tensor Type",
     "onnxruntime's Python binding takes no bfloat16 arrays"),
    (r"Unable to handle object of type <class 'numpy.bool'>",
     "onnxruntime's Python binding takes no 0-d bool array"),
    (r"Attribute saturate is only used for cast to float 8 types",
     "ONNX ignores saturate for casts to other types"),
    (r"size_ % 2 == 1", "LRN of an even size, which ONNX allows"),
    (r"lrn\.cc:\d+ .*Compute", "LRN of an input of rank other than 4, which ONNX allows"),
    (r'GetAttr\("hidden_size"', "hidden_size is optional in ONNX (W gives it)"),
    (r"attn_mask", "an Attention mask that broadcasts as ONNX says, which onnxruntime "
                   "does not take"),
    (r"scale must be greater than 0", "an Attention scale of 0 or below, which ONNX allows"),
    (r"Batchwise recurrent operations \(layout == 1\) are not supported",
     "onnxruntime runs no recurrent op with layout 1"),
    (r"Split sizes would produce a negative final split",
     "Split-18's num_outputs chunks (the last smaller, or empty), as onnx.reference splits"),
    (r"outermost 2 scale values being 1in the Resize operator|"
     r"outermost and innermost scale values being 1 .* in the Resize operator",
     "onnxruntime resizes only the inner axes of 4-D and 5-D inputs"),
    (r"ScalesValidation Scale value should be greater than 0",
     "a Resize size of 0 (an empty axis, as onnx.reference gives it; mpc refuses a scale "
     "of 0 or below)"),
    (r"when anti-aliasing is set, Resize only supports",
     "antialias with mode nearest: ONNX applies it to linear and cubic only"),
    (r"Invalid sequence length: .* Value must be in range",
     "ReverseSequence lengths outside [0, time steps], clamped (onnx.reference clamps long "
     "ones; negative ones it takes from the end: no verdict, reference_unfit)"),
    (r"Pad reflect requires axis length >= 2|Pad reflect: (pre|post)-pad \(\d+\) exceeds",
     "reflect padding of a 1-long axis or past the axis' length, as numpy pads"),
    (r"min_ <= max_ was false", "Clip with min above max: max everywhere, as numpy clips"),
    (r"Could not find an implementation for", "onnxruntime has no kernel for the type"),
    (r"Subgraph must have the shape set for all outputs",
     "onnxruntime runs no Scan body without output shapes"),
    (r"onnxruntime aborted", "onnxruntime's own crash (no verdict)"),
]


def ort_only_limit(message):
    """The reason onnxruntime's refusal `message` is a limit of its own, or None."""
    for pattern, why in ORT_ONLY_LIMITS:
        if re.search(pattern, message):
            return why
    return None


def quiet_stderr():
    """The worker's stderr (an aborting assertion's message) goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)


class OrtWorker:
    """onnxruntime in a child process: its wheels abort (a failed assertion) on some
    mutants, which would end this suite. An aborted run counts as a refusal."""

    def __init__(self):
        self.pool = None

    def run(self, path, arrays):
        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=1, initializer=quiet_stderr)
        try:
            return self.pool.submit(ort_run, path, arrays).result(timeout=RUN_TIMEOUT_S)
        except (BrokenProcessPool, TimeoutError):
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
            return "onnxruntime aborted"

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()


ORT = OrtWorker()


def mutate_input(rng, model, feeds, work):
    """Gives one graph input another shape (a size nudged or set to 1, an axis of 1 added,
    an axis dropped) and new values of its type, written to an .npy file; the input's
    declared shape is cleared. Returns what changed, or None."""
    if not feeds:
        return None
    name = rng.choice(sorted(feeds))
    _, old = feeds[name]
    shape = list(old.shape)
    k = rng.random()
    if shape and k < 0.35:
        i = rng.randrange(len(shape))
        shape[i] = max(1, shape[i] + rng.choice([-1, 1]))
    elif k < 0.6:
        shape.insert(rng.randrange(len(shape) + 1), 1)
    elif shape and k < 0.8:
        shape.pop(rng.randrange(len(shape)))
    elif shape:
        shape[rng.randrange(len(shape))] = 1
    else:
        return None
    if shape == list(old.shape):
        return None
    gen = np.random.default_rng(rng.randrange(1 << 30))
    if old.dtype == np.bool_:
        new = gen.random(shape) < 0.5
    elif old.dtype.kind in "iu":
        lo, hi = (int(old.min()), int(old.max())) if old.size else (0, 3)
        new = gen.integers(lo, hi + 1, size=shape).astype(old.dtype)
    else:
        new = gen.standard_normal(shape).astype(old.dtype)
    path = os.path.join(work, f"input-{len(os.listdir(work))}.npy")
    np.save(path, new)
    feeds[name] = (path, new)
    for i in model.graph.input:
        if i.name == name and i.type.HasField("tensor_type"):
            i.type.tensor_type.ClearField("shape")
    return f"input {name}: {list(old.shape)} -> {shape}"


def mutate_values(rng, feeds, work):
    """Gives one graph input new values in its shape (`--mutate values`): an element of an
    integer input (an index, an axis, a bound, a count, a length) set to -1, 0, one past
    or before a size, a random small value, or a type's extreme; or an element of a float
    input set to NaN, an infinity, 0, -0 or a huge or tiny value; or, one time in five,
    every element of the input. Returns what changed, or None."""
    names = sorted(n for n, (_, a) in feeds.items() if a.size and a.dtype.kind in "iuf")
    if not names:
        return None
    name = rng.choice(names)
    _, old = feeds[name]
    new = np.array(old, copy=True)
    flat = new.reshape(-1)
    if old.dtype.kind in "iu":
        info = np.iinfo(old.dtype)
        sizes = [int(d) for d in old.shape] + [abs(int(v)) for v in flat[:8]]
        choices = [-1, 0, 1, rng.randint(-10, 10), info.max, info.min, info.max - 1,
                   info.min + 1] + [d + k for d in sizes for k in (-1, 0, 1)]
        value = rng.choice(choices)
        value = int(min(max(value, int(info.min)), int(info.max)))
    else:
        value = rng.choice([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e30,
                            -1e30, 1e-30, 65504.0, 70000.0])
    with np.errstate(over="ignore"):  # 70000 in float16 is its infinity
        if rng.random() < 0.2:
            flat[:] = value
            where = "every element"
        else:
            i = rng.randrange(flat.size)
            flat[i] = value
            where = f"element {i}"
    if np.array_equal(new, old, equal_nan=old.dtype.kind == "f"):
        return None
    path = os.path.join(work, f"input-{len(os.listdir(work))}.npy")
    np.save(path, new)
    feeds[name] = (path, new)
    return f"input {name}: {where} -> {value!r}"


def recorded_inputs(folder, model):
    """{graph input name: (input_N.pb path, array)} or None when an input is not a tensor."""
    files = sorted(glob.glob(os.path.join(folder, "test_data_set_0", "input_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    if len(files) != len(names):
        return None
    feeds = {}
    for name, path in zip(names, files):
        t = onnx.TensorProto()
        try:
            with open(path, "rb") as f:
                t.ParseFromString(f.read())
            arr = numpy_helper.to_array(t)
        except Exception:
            return None
        if arr.dtype == object:
            return None
        feeds[name] = (path, arr)
    return feeds


def outputs_match(got, want):
    want = np.asarray(want)
    if want.dtype.kind == "V" and want.dtype.name == "bfloat16":
        # onnx.reference's bfloat16 (ml_dtypes); mpc writes bfloat16 results as float32.
        want = want.astype(np.float32)
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, the oracle's {list(want.shape)}"
    if want.dtype.kind in "fc":
        # float16 results of a chain of ops differ by a few units in the last place
        # (2^-10 relative) between two correct implementations: seed 30 of --graphs multi
        # (an fp16 Attention body, V of width 9) had mpc 1.3e-3 and onnxruntime 7e-4 from
        # the float64 result, onnx.reference 1.7e-3, so 4 ulps there.
        rtol, atol = (4e-3, 1e-3) if want.dtype == np.float16 else (1e-3, 1e-4)
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                         equal_nan=True)
    else:
        ok = np.array_equal(got, want)
    return None if ok else "values differ"


def checker_refuses(path):
    """ONNX's strict shape inference (the checker's full check less its demand for output
    shapes, which the mutants drop) on the file, in a child process: libonnx's inference
    itself aborts on some mutants."""
    code = ("import sys, onnx; onnx.shape_inference.infer_shapes(onnx.load(sys.argv[1]), "
            "check_type=True, strict_mode=True)")
    r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, timeout=120)
    return r.returncode != 0


# Ops where mpc keeps a NaN that onnxruntime and onnx.reference drop, on purpose: a max
# over a window holding NaN is NaN in mpc, as in PyTorch and numpy's max; onnxruntime and
# onnx.reference compare with `>` and skip it. Under mixed precision a NaN hidden by a max
# pooling is an overflow nobody sees (user guide, "NaN").
NAN_KEEPING_OPS = {"MaxPool", "GlobalMaxPool"}


def nan_kept(model, arrays, got, want):
    """True when `got` differs from `want` only by NaNs mpc keeps (NAN_KEEPING_OPS), in a
    model of such ops whose inputs hold a NaN (or, for MaxPool's Indices, by indices of
    those NaNs)."""
    if not {n.op_type for n in model.graph.node} <= NAN_KEEPING_OPS:
        return False
    if not any(np.asarray(a).dtype.kind == "f" and np.isnan(a).any() for a in arrays.values()):
        return False
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if got.dtype.kind in "iu":
        # MaxPool's Indices: where they differ, mpc's point at a NaN of the input (the
        # flat index into it; with storage_order 1 the spatial axes are counted column
        # first), the element its maximum took.
        x = np.asarray(arrays[model.graph.node[0].input[0]])
        order = [a.i for a in model.graph.node[0].attribute if a.name == "storage_order"]
        if order and order[0] == 1 and x.ndim > 2:
            x = x.transpose([0, 1] + list(range(x.ndim - 1, 1, -1)))
        x = x.reshape(-1)
        differ = got != want
        at = got[differ]
        return bool(differ.any()) and bool(((at >= 0) & (at < x.size)).all()) and \
            bool(np.isnan(x[at]).all())
    got, want = got.astype(np.float64), want.astype(np.float64)
    differ = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    return bool(differ.any()) and bool(np.isnan(got[differ]).all())


def nan_order_unjudged(model, arrays):
    """True for NonMaxSuppression with a NaN score: onnxruntime's and onnx.reference's
    heaps compare NaN as they meet it, so their order (even their choice: a box of score
    0.8 before one of 0.9) depends on where the NaN lies, and they differ from each other;
    mpc takes NaN-scored boxes last (user guide, "NaN")."""
    for n in model.graph.node:
        if n.op_type == "NonMaxSuppression" and len(n.input) > 1 and n.input[1] in arrays \
                and np.isnan(np.asarray(arrays[n.input[1]], np.float64)).any():
            return True
    return False


def reference_unfit(model, arrays):
    """True where onnx.reference's answer is an accident of Python: ReverseSequence with a
    negative length slices from the end (mpc clamps lengths into [0, time steps], so a
    negative one reverses nothing; user guide)."""
    for n in model.graph.node:
        if n.op_type == "ReverseSequence" and len(n.input) > 1 and n.input[1] in arrays \
                and (np.asarray(arrays[n.input[1]]) < 0).any():
            return True
    return False


def has_extreme_floats(arrays):
    """True when a float input holds NaN, an infinity or a magnitude of 65504 (float16's
    largest) or more."""
    for a in arrays.values():
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.size and \
                not (np.isfinite(a).all() and np.abs(a.astype(np.float64)).max() < 65504):
            return True
    return False


def finite_elements_match(got, want, reference):
    """For inputs with NaN, infinities or magnitudes of 65504 and more, where what is right
    is a matter of convention (a cubic tap of weight 0 on an infinity, a variance that
    overflows float32 in the oracles and not in mpc's double accumulation) or of float32's
    conditioning (softmax over scores of 1e5, where a float32's step is 0.008, moves its
    weights by about 1%: onnxruntime and onnx.reference differ by that much too): `got`
    must have the oracles' shape and, on every element that onnxruntime (`want`) and
    onnx.reference (when it ran) both give finitely and within 1% of each other, be within
    1% of one of them; the others are not judged."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or want.dtype.kind not in "fc":
        return False
    g, w = got.astype(np.float64), want.astype(np.float64)
    judged = np.isfinite(w)
    near = np.isclose(g, w, rtol=1e-2, atol=1e-3)
    if reference is not None:
        r = np.asarray(reference)
        if r.shape != want.shape:
            return False
        r = r.astype(np.float64)
        with np.errstate(invalid="ignore"):
            judged &= np.isfinite(r) & np.isclose(r, w, rtol=1e-2, atol=1e-3)
        near |= np.isclose(g, r, rtol=1e-2, atol=1e-3)
    return bool(near[judged].all())


def float64_agrees(model, arrays, index, got):
    """A third opinion where mpc disagrees with both: onnx.reference on the float32 inputs
    widened to float64. mpc accumulates some ops in double (LpNormalization's norm of
    1e30 is 1e30 in mpc, infinite in float32 and so the result 0 for both oracles)."""
    wide = {k: (a.astype(np.float64) if a.dtype == np.float32 else a)
            for k, a in arrays.items()}
    if all(wide[k] is arrays[k] for k in arrays):
        return False
    try:
        with np.errstate(all="ignore"):
            want = ReferenceEvaluator(model).run(None, wide)[index]
    except Exception:
        return False
    want = np.asarray(want)
    if want.dtype != np.float64:
        return False
    return outputs_match(np.asarray(got, np.float64), want.astype(np.float32)) is None


def breach(r):
    """How an mpc process broke its error contract (exit 0, or 1 with one 'mpc: error:'
    line), or None."""
    if r.returncode not in (0, 1):
        return f"exit status {r.returncode}: {r.stderr[-300:]}"
    if r.returncode == 1 and (len(r.stderr.splitlines()) != 1 or
                              not r.stderr.startswith("mpc: error: ")):
        return f"not one error line: {r.stderr[-300:]!r}"
    return None


def mpc_run(mpc, path, feeds, out):
    """`mpc run` of the model at `path` on `feeds` into the fresh folder `out`; None when it
    runs past RUN_TIMEOUT_S."""
    shutil.rmtree(out, ignore_errors=True)
    args = [mpc, "run", path, "--outputs", out]
    for name, (pb, _) in feeds.items():
        args += ["--input", f"{name}={pb}"]
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None


def judge(mpc, folder, model, feeds, work, extreme_values=False, rewrite=None):
    """None when the outcome is acceptable, else why not; and the outcome's class.
    `extreme_values`: the mutant may hold NaN, infinities or floats of 1e30 (value
    mutants); where both run, only the elements both oracles give finitely and alike are
    compared (see finite_elements_match). `rewrite`: None, or the flags of a rewrite to judge
    where mpc and onnxruntime run the mutant alike (judge_rewrite)."""
    path = os.path.join(work, "m.onnx")
    onnx.save(model, path)
    arrays = {n: a for n, (_, a) in feeds.items()}
    expected = ORT.run(path, arrays)
    ort_ok = not isinstance(expected, str)
    out = os.path.join(work, "out")
    r = mpc_run(mpc, path, feeds, out)
    if r is None:
        return f"mpc ran past {RUN_TIMEOUT_S} s", "crash"
    if breach(r):
        return breach(r), "crash"
    if r.returncode == 1:
        return None, ("both refuse: " if not ort_ok else "mpc refuses: ") + r.stderr.strip()[12:]
    if not ort_ok:
        if checker_refuses(path):
            return "mpc ran a model onnxruntime and ONNX's checker refuse", "invalid ran"
        if ort_only_limit(expected) is None:
            return f"mpc ran a model onnxruntime refuses: {expected[-240:]}", "invalid ran"
        # A limit of onnxruntime's: onnx.reference judges mpc's outputs where it runs.
        if reference_unfit(model, arrays):
            return None, "onnxruntime refuses, unjudged"
        try:
            with np.errstate(all="ignore"):
                reference = ReferenceEvaluator(model).run(None, arrays)
        except Exception:
            return None, "onnxruntime refuses"
        for o, want in zip(model.graph.output, reference):
            p = os.path.join(out, o.name + ".npy")
            why = outputs_match(np.load(p), np.asarray(want)) if os.path.exists(p) else \
                "not written"
            if why is not None:
                return (f"output '{o.name}': {why} (onnx.reference; onnxruntime refuses: "
                        f"{expected[-160:]})"), "wrong"
        return None, "onnxruntime refuses, onnx.reference agrees"
    names = [o.name for o in model.graph.output]
    reference = None
    for name, want in zip(names, expected):
        p = os.path.join(out, name + ".npy")
        if not os.path.exists(p):
            return f"no output '{name}' written", "wrong"
        got = np.load(p)
        why = outputs_match(got, want)
        if why is None:
            continue
        # onnxruntime is not always right: a second opinion from ONNX's reference.
        if reference is None:
            try:
                reference = dict(zip(names, ReferenceEvaluator(model).run(None, arrays)))
            except Exception:
                reference = {}
        if name in reference and outputs_match(got, reference[name]) is None:
            continue
        if nan_kept(model, arrays, got, want):
            continue
        if extreme_values and has_extreme_floats(arrays) and \
                finite_elements_match(got, want, reference.get(name)):
            continue
        if float64_agrees(model, arrays, names.index(name), got):
            continue
        if nan_order_unjudged(model, arrays):
            return None, "unjudged"
        if not reference:
            # onnxruntime disagrees and onnx.reference cannot run it: no verdict (Resize
            # with negative axes, which onnxruntime misreads and onnx.reference refuses).
            return None, "unjudged"
        return f"output '{name}': {why}", "wrong"
    mine = [np.load(os.path.join(out, name + ".npy")) for name in names]
    if rewrite is not None and fp16_safe(model, arrays) and all(
            fp16_safe(model, {"": np.asarray(w)}) for w in expected + mine):
        return judge_rewrite(mpc, path, model, feeds, arrays, expected, mine, work, rewrite)
    return None, "both run"


# What the fp16 rewrite may change in an output (relative L2 norm of the difference), as
# tests/python/test_rewrite_properties.py allows on the unmutated node tests.
REWRITE_TOL = 1e-2


def rewrite_outputs_match(got, want):
    """None when `got` (a rewritten model's output) is `want` (the mutant's) within
    REWRITE_TOL, NaN and infinities in the same places, else why not."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, the oracle's {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"type {got.dtype}, the oracle's {want.dtype}"
    if want.dtype.kind not in "fc":
        return None if np.array_equal(got, want) else "values differ"
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.array_equal(np.isfinite(g), np.isfinite(w)) or \
            not np.array_equal(g[~np.isfinite(g)], w[~np.isfinite(w)], equal_nan=True):
        return "NaN or infinity where the oracle has none (or the reverse)"
    g, w = g[np.isfinite(g)], w[np.isfinite(w)]
    err = float(np.linalg.norm(g - w)) / max(float(np.linalg.norm(w)), 1e-30)
    return None if err <= REWRITE_TOL or not w.size else f"relative L2 {err:.3g}"


def fp16_safe(model, arrays):
    """False when the inputs already leave fp16's range (past 65504, or nonzero below its
    smallest subnormal): the rewrite's casts change such values on purpose."""
    for a in arrays.values():
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.size:
            mag = np.abs(a[np.isfinite(a)].astype(np.float64))
            if mag.size and (mag.max() > 65504 or ((mag > 0) & (mag < 2 ** -24)).any()):
                return False
    return True


def judge_rewrite(mpc, path, model, feeds, arrays, want, mine, work, level=()):
    """`mpc rewrite` of a mutant both mpc and onnxruntime ran, with outputs judged right
    (`want`: onnxruntime's, `mine`: mpc's): it exits 0 or refuses with one line, and its
    model is valid for ONNX's strict shape inference (when the mutant was), runs in
    onnxruntime (unless it lacks a 16-bit kernel) and in mpc, each output within
    REWRITE_TOL of what the same runtime gave for the mutant (onnxruntime computes some
    float16 ops in float32, so the two may differ where the mutant itself casts to
    float16). `level`: extra flags of the rewrite; with --level UNSAFE_FORCE_ALL (every op
    whose schema admits float16 converted, not only those the lists choose) mpc's outputs
    are judged against onnx.reference's run of the rewritten model instead. None or why
    not, and the outcome's class."""
    # ONNX's checker, which mpc rewrite applies, wants a shape field on every graph input
    # and output; the mutants' outputs (left to inference) and the inputs of another shape
    # have none: give each its rank.
    model = copy.deepcopy(model)
    ranked = [(o, w) for o, w in zip(model.graph.output, want)] + \
        [(i, arrays[i.name]) for i in model.graph.input if i.name in arrays]
    for v, a in ranked:
        if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape"):
            v.type.tensor_type.shape.SetInParent()
            for _ in range(np.ndim(a)):
                v.type.tensor_type.shape.dim.add()
    path = os.path.join(work, "ranked.onnx")
    onnx.save(model, path)
    rpath = os.path.join(work, "r.onnx")
    if os.path.exists(rpath):
        os.unlink(rpath)
    try:
        r = subprocess.run([mpc, "rewrite", path, "-o", rpath, *level], capture_output=True,
                           text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"mpc rewrite ran past {RUN_TIMEOUT_S} s", "crash"
    if breach(r):
        return "mpc rewrite: " + breach(r), "crash"
    if r.returncode == 1:
        return f"mpc rewrite refuses a model mpc runs: {r.stderr.strip()}", "rewrite refused"
    # A mutant that fails ONNX's strict inference is invalid, however onnxruntime ran it (a
    # Loop condition of shape [1] where the body declares a scalar): once the rewrite types
    # the body's results, onnxruntime infers them and refuses. Its rewrite must still run.
    valid = not checker_refuses(path)
    if valid and checker_refuses(rpath):
        return "the rewritten model fails ONNX's strict shape inference", "rewrite invalid"
    names = [o.name for o in model.graph.output]
    force = "UNSAFE_FORCE_ALL" in level
    got = ORT.run(rpath, arrays)
    if isinstance(got, str):
        if not valid:
            ort_verdict = "rewritten, invalid mutant"
        elif not re.search(r"Could not find an implementation|"
                           r"(MLFloat16|BFloat16) data type is not supported", got):
            return f"onnxruntime refuses the rewritten model: {got[-240:]}", "rewrite invalid"
        else:
            ort_verdict = "rewritten, onnxruntime lacks a 16-bit kernel"
    elif force:
        ort_verdict = "rewritten (all ops), both run"
    else:
        for name, g, w in zip(names, got, want):
            why = rewrite_outputs_match(g, w)
            if why is not None:
                return f"rewritten, onnxruntime's output '{name}': {why}", "rewrite wrong"
        ort_verdict = "rewritten, both run"
    if force and not valid:
        return None, "rewritten (all ops), invalid mutant"
    if force:
        # Every op in float16 changes the results as float16 arithmetic does (a Softmax of
        # 10000..10003 is uniform once they round to 10000): mpc's run of the rewrite is
        # judged against onnx.reference's run of it, which computes float16 ops in float16.
        # onnxruntime computes some of them in float32, so its outputs are not judged.
        # Only where onnx.reference gives mpc's outputs for the mutant itself (it reads a
        # negative axis of an opset-6 LogSoftmax otherwise).
        try:
            with np.errstate(all="ignore"):
                if any(outputs_match(m, r) is not None for m, r in
                       zip(mine, ReferenceEvaluator(path).run(None, arrays))):
                    return None, "rewritten (all ops), unjudged"
                # In the mutant's output types: onnx.reference gives LayerNormalization's
                # Mean and InvStdDev in X's type, not in stash_type's.
                mine = [np.asarray(r).astype(np.asarray(m).dtype) for r, m in
                        zip(ReferenceEvaluator(rpath).run(None, arrays), mine)]
        except Exception:
            return None, "rewritten (all ops), unjudged"
    out = os.path.join(work, "rout")
    r = mpc_run(mpc, rpath, feeds, out)
    if r is None:
        return f"mpc ran the rewritten model past {RUN_TIMEOUT_S} s", "crash"
    if r.returncode != 0:
        return f"mpc refuses its own rewrite (exit {r.returncode}): {r.stderr[-300:]}", \
            "rewrite refused"
    for name, w in zip(names, mine):
        p = os.path.join(out, name + ".npy")
        why = rewrite_outputs_match(np.load(p), w) if os.path.exists(p) else "not written"
        if why is not None:
            return f"rewritten, mpc's output '{name}': {why}", "rewrite wrong"
    return None, ort_verdict


# Address space for this suite, its onnxruntime worker, onnx.reference and mpc (inherited):
# a value mutant can ask a window op for 2^31 elements, which onnxruntime then builds in
# 24 GB; past the machine's memory the kernel kills whatever process touches a page next,
# a test running beside this one included. With the limit an allocation fails instead.
ADDRESS_SPACE_LIMIT = 8 << 30


def limit_address_space():
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = ADDRESS_SPACE_LIMIT if hard == resource.RLIM_INFINITY else \
            min(ADDRESS_SPACE_LIMIT, hard)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--source-dir", help="unused (passed by ctest)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=300, help="mutants to run")
    parser.add_argument("--graphs", choices=("single", "multi", "models"), default="single",
                        help="mutate the single-node tests, the tests of two nodes or more "
                             "(the '_expanded' function bodies; one node's attribute), or the "
                             "small exported models (pytorch-converted, pytorch-operator, "
                             "simple)")
    parser.add_argument("--mutate", choices=("attributes", "values"), default="attributes",
                        help="what a mutant changes: an attribute or, three times in ten, an "
                             "input's shape (the default); or an input's values in its "
                             "shape (indices, axes, bounds and counts at and past their "
                             "limits; NaN and infinities)")
    parser.add_argument("--rewrite", action="store_true",
                        help="also rewrite each mutant mpc and onnxruntime run alike (fp16; "
                             "every other one with --level UNSAFE_FORCE_ALL) and judge the "
                             "rewritten model: valid, run by onnxruntime and mpc, outputs "
                             "within a relative L2 of 1e-2 of the mutant's")
    parser.add_argument("--keep", help="copy each failing mutant into this folder")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    limit_address_space()
    mpc = os.path.abspath(args.mpc)
    tests = node_tests(args.graphs)
    names = sorted(tests)
    rng = random.Random(args.seed)
    classes, failures, done, tries = {}, [], 0, 0
    work = tempfile.mkdtemp(prefix="mpc-differential-")
    try:
        while done < args.count and tries < args.count * 20:
            tries += 1
            name = rng.choice(names)
            folder = tests[name]
            model = onnx.load(os.path.join(folder, "model.onnx"))
            if (args.graphs != "models" and (len(model.graph.node) != 1) !=
                    (args.graphs == "multi")) or model.functions or \
                    any(not o.type.HasField("tensor_type") for o in model.graph.output):
                continue
            feeds = recorded_inputs(folder, model)
            if feeds is None:
                continue
            if args.mutate == "values":
                what = mutate_values(rng, feeds, work)
            elif rng.random() < 0.3:
                what = mutate_input(rng, model, feeds, work)
            else:
                nodes = [n for n in model.graph.node if n.attribute]
                if not nodes:
                    continue
                node = rng.choice(nodes)
                what = mutate(rng, node)
                if what is not None and args.graphs != "single":
                    what = f"node {list(model.graph.node).index(node)} {node.op_type}: {what}"
            if what is None:
                continue
            # The mutant may change the outputs' shapes and types: leave them to inference.
            for o in model.graph.output:
                if o.type.HasField("tensor_type"):
                    o.type.tensor_type.ClearField("shape")
            done += 1
            # Every other mutant's rewrite converts every op it can (--level UNSAFE_FORCE_ALL).
            level = None if not args.rewrite else \
                ("--level", "UNSAFE_FORCE_ALL") if done % 2 else ()
            why, cls = judge(mpc, folder, model, feeds, work, args.mutate == "values", level)
            cls, detail = cls.split(": ", 1) if ": " in cls else (cls, "")
            classes[cls] = classes.get(cls, 0) + 1
            if why:
                failures.append(f"{name} ({what}): {why}")
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    onnx.save(model, os.path.join(args.keep, f"{len(failures)}-{name}.onnx"))
            if args.verbose:
                print(f"{name} ({what}): {cls}{': ' + why if why else ''}"
                      f"{' (' + detail + ')' if detail else ''}")
    finally:
        ORT.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{done} mutants (seed {args.seed}): " +
          ", ".join(f"{k} {v}" for k, v in sorted(classes.items())))
    for f in failures:
        print(f"FAILED {f}")
    print(f"{done - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
