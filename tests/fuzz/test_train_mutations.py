#!/usr/bin/env python3
"""Seeded mutation suite for the training path and the data files mpc reads, through the CLI.

    python3 tests/fuzz/test_train_mutations.py --mpc build/tools/mpc --source-dir . \\
        [--seed S] [--count N] [-v] [--keep DIR]

test_mutations.py mutates models and runs `inspect`, `rewrite` and `run --random-inputs`.
Training has inputs of its own, and each gets a class of mutants here:

  * graph:   `mpc train-graph` on a mutant of a shipped inference model (test_mutations'
             model mutations: dims, data types, attributes, nested graphs, opsets, external
             data, bytes), with a seeded loss, optimizer and --fused-optimizer;
  * model:   `mpc run --train` on a mutant of a training model built here (the digits MLP
             with Adam, its fp16 rewrite with dynamic loss scaling, the digits CNN with
             --fused-optimizer) and good data, or its CUDA placement (--placement-only: the
             CUDA kernel table's decisions, made on the host, no GPU needed);
  * data:    `mpc run --train` on a good training model and a mutant of the data file: labels
             out of range, wrong data types and shapes, NaN and infinity, missing, extra and
             mismatched arrays, no samples, npy headers with huge shapes, Fortran order, big
             endian, pickled objects, compressed members, truncated and flipped bytes;
  * resume:  `mpc run --train --resume` from a mutant of a checkpoint an earlier run wrote;
  * flags:   odd values of --batch, --steps, --epochs, --holdout, --eval-every, --max-memory,
             --shuffle, --seed, --threads;
  * plot:    `mpc plot` on mutants of a `--log` CSV (cells, headers, rows, bytes, CRLF, BOM);
  * env:     `mpc rewrite` of a training model under odd MPC_AMP_* values, then two steps;
  * rewrite: `mpc rewrite` of a training or inference model with one to four options at odd
             values (lists, regexes, levels, loss scaling, reports and dumps onto the input);
  * text:    `mpc inspect`, `rewrite` and `run` on mutants of the golden tests' models in
             mpc's text form (.mpc): lines deleted, repeated, swapped, cut, odd tokens;
  * inputs:  `mpc run --input` with mutated .npy, .npz and TensorProto .pb files (types,
             shapes, non-finite values, huge header shapes, truncation, external data),
             `--outputs`, and `--compare` against the model itself (which must say ok).

Every run must end by itself and not by a signal, print no sanitizer report, and leave the
files it read as they were. A failing run exits non-zero, its last stderr line is its only
`mpc: error:` line, and it leaves no file it was asked to write (log, plot, checkpoint
folder, output model). A run that succeeds writes what it was asked for and ends with the
`final:` line. The mutants depend on the seed alone (--keep keeps a failing mutant's folder).
Exit status 1 on any failure, 77 (CTest's skip code) when onnx or numpy is missing.
"""

import io
import os
import random
import struct
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_mutations as tm  # noqa: E402  (exits 77 itself when onnx is missing)

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"numpy is required ({e})", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(tm.SKIP_EXIT_CODE)

# A training run may take this long before it counts as a hang (three steps of a digits model).
TRAIN_TIMEOUT_S = 60
# Shares of the mutant classes (the rest are data mutants).
CLASS_WEIGHTS = [("graph", 0.15), ("model", 0.15), ("data", 0.2), ("resume", 0.1),
                 ("flags", 0.1), ("plot", 0.1), ("env", 0.1), ("inputs", 0.1),
                 ("rewrite", 0.1), ("text", 0.1)]
# Odd tokens a mutated text model may hold.
TEXT_TOKENS = ["-1", "0", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
               "1e999", "nan", "-inf", "0x10", "f16", "f64", "bf16", "i4", "bool", "%", "%\"",
               "@", "{", "}", "(", ")", "[", "]", ",", ":", "=", '"', "\\", "\x00", "\u2028",
               "a" * 5000, "[" * 3000, "{" * 3000, "(" * 3000, "%x", "If", "Loop", "graph",
               "return", "init", "name=", "domain=", "{to = f16}", "{axis = [1, 2]}"]
# `mpc rewrite` options and odd values for them (a value of None: a flag without one).
REWRITE_OPTIONS = {
    "--target": ["fp16", "bf16", "fp8", ""], "--keep-io-types": [None],
    "--no-keep-io-types": [None], "--allow": ["Softmax", "NotAnOp", "", "a::b::c", "::X"],
    "--infer": ["Gemm,Relu", ",", "com.microsoft::FusedMatMul"], "--deny": ["Gemm", "Cast"],
    "--clear": ["Softmax", "If"], "--deny-nodes": ["(", ".*", "fc.*", "(a*)*b", "[[:alpha:]"],
    "--level": ["UNSAFE_FORCE_ALL", "TENSOR_CORES_ONLY", "x"], "--backend": ["cuda", "cpu", "x"],
    "-v": ["0", "1", "2", "9", "-1"], "--emit": ["text", "json"], "--verify-each": [None],
    "--strict-check": [None], "--loss-scale": ["dynamic", "none", "7", "0", "-inf"],
    "--loss-scale-init": ["1", "0", "1e40"], "--loss-scale-interval": ["1", "0", "2e9"],
    "--fused-unscale": [None], "--optimizer-weight-copy": [None],
    "--multi-tensor-optimizer": [None], "--fuse-gemm-epilogues": [None],
    "--report": ["out/r.json", "t.onnx", "out"], "--dump-dir": ["out/dump", "t.onnx"],
}
# Inference models whose `mpc run --input` files are mutated: {model: (input, shape)}.
INPUT_MODELS = {"mlp": ("x", [8, 64]), "cnn": ("image", [2, 3, 32, 32]),
                "transformer": ("x", [2, 16, 64]), "lstm": ("x", [10, 4, 32]),
                "digits_mlp": ("x", [5, 64])}
# Inference models train-graph is tried on (the digits models have a 10-class output).
GRAPH_BASES = ["digits_mlp", "digits_cnn", "digits_tanh_mlp", "mlp", "cnn"]
LOSSES = [["--loss", "cross-entropy"], ["--loss", "mse"]]
OPTIMIZERS = [["--optimizer", "adam"], ["--optimizer", "sgd"], ["--optimizer", "momentum"]]
# Samples in the small data set the runs train on.
TRAIN_SAMPLES, TEST_SAMPLES = 96, 32


# --------------------------------------------------------------------------------------------
# Data files
# --------------------------------------------------------------------------------------------

def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


def raw_npy(descr, shape, fortran=False, payload=b""):
    """An .npy member with a header we write ourselves (numpy refuses some of these)."""
    header = "{'descr': %r, 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", repr(tuple(shape)))
    header = header.encode("latin1")
    pad = 64 - (10 + len(header) + 1) % 64
    header += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + payload


def zip_members(members, compress=False):
    """An .npz: {member name (without .npy): bytes}."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, body in members.items():
            z.writestr(name + ".npy", body)
    return buf.getvalue()


def mutate_arrays(rng, arrays):
    """One change to {name: array}; returns a description."""
    names = sorted(arrays)
    name = rng.choice(names)
    a = arrays[name]
    label = name.startswith("labels")
    choice = rng.randrange(12)
    if choice == 0 and label and a.size:
        i = rng.randrange(a.size)
        a.flat[i] = rng.choice([-1, 10, 11, 2 ** 31, 2 ** 40, -2 ** 63, 2 ** 63 - 1])
        return f"{name}[{i}] = {a.flat[i]}"
    if choice == 1:
        dt = rng.choice(["float32", "float64", "float16", "int32", "int8", "uint8", "bool",
                         "int64", "complex64"])
        arrays[name] = a.astype(dt)
        return f"{name} as {dt}"
    if choice == 2:
        shape = rng.choice([(a.shape[0], 1), (a.shape[0], 63), (a.shape[0], 65), (a.shape[0], 8, 8),
                            (a.shape[0],), (), (0,) + a.shape[1:], (1,) + a.shape[1:]])
        arrays[name] = np.resize(a, shape).astype(a.dtype)
        return f"{name} reshaped to {shape}"
    if choice == 3 and a.dtype.kind == "f" and a.size:
        i = rng.randrange(a.size)
        a.flat[i] = rng.choice([np.nan, np.inf, -np.inf, 1e38, -1e38])
        return f"{name}[{i}] = {a.flat[i]}"
    if choice == 4 and a.ndim:
        n = rng.choice([0, 1, a.shape[0] - 1, a.shape[0] + 1])
        arrays[name] = np.resize(a, (n,) + a.shape[1:]).astype(a.dtype)
        return f"{name} with {n} samples"
    if choice == 5:
        del arrays[name]
        return f"{name} missing"
    if choice == 6:
        arrays[rng.choice(["bogus", "x_test_test", "labels_extra", "a\nmpc: error: forged"])] = a
        return "an extra array"
    if choice == 7:
        arrays[name] = np.asfortranarray(a)  # the flag only matters for ndim > 1
        return f"{name} in Fortran order"
    if choice == 8:
        arrays[name] = a.astype(a.dtype.newbyteorder(">"))
        return f"{name} big-endian"
    if choice == 9:
        arrays[name] = np.array([object()] * max(1, min(a.shape[0] if a.ndim else 1, 4)),
                                dtype=object)
        return f"{name} of Python objects"
    if choice == 10 and label:
        arrays[name] = np.zeros_like(a) + rng.choice([0, 9])
        return f"{name} all one class"
    for k in names:  # every array with no samples
        arrays[k] = arrays[k][:0] if arrays[k].ndim else arrays[k]
    return "no samples"


def make_data(rng, base):
    """(bytes of a data file, description) from the arrays `base`."""
    arrays = {k: v.copy() for k, v in base.items()}
    choice = rng.random()
    if choice < 0.12:  # header-level: what np.save does not write
        name = rng.choice(sorted(arrays))
        a = arrays[name]
        kind = rng.randrange(6)
        if kind == 5:
            return zip_members({k: npy_bytes(v) for k, v in arrays.items()}, compress=True), \
                "compressed members"
        if kind == 0:
            shape = rng.choice([(10 ** 12, 64), (2 ** 62,), (2 ** 31, 2 ** 31), (-1, 64)])
            body = raw_npy(a.dtype.str, shape, payload=a.tobytes())
            desc = f"{name} declared {shape}"
        elif kind == 1:
            body = raw_npy(rng.choice(["<f3", "|V8", "<U4", "x", "<M8[s]"]), a.shape,
                           payload=a.tobytes())
            desc = f"{name} with an odd dtype"
        elif kind == 2:
            body = npy_bytes(a)[:rng.randrange(1, 200)]
            desc = f"{name} truncated"
        elif kind == 3:
            body = b"\x93NUMPY\x03\x00" + npy_bytes(a)[8:]
            desc = f"{name} npy version 3"
        else:
            body = raw_npy(a.dtype.str, a.shape, payload=a.tobytes()[:-4])
            desc = f"{name} 4 bytes short"
        members = {k: npy_bytes(v) for k, v in arrays.items()}
        members[name] = body
        return zip_members(members), desc
    descs = []
    for _ in range(rng.choice([1, 1, 1, 2])):
        saved = dict(arrays)
        try:
            descs.append(mutate_arrays(rng, arrays))
        except (ValueError, TypeError, OverflowError):  # numpy refuses this combination
            arrays.clear()
            arrays.update(saved)
            descs.append("a change numpy refused")
    members = {k: npy_bytes(v) for k, v in arrays.items()}
    data = zip_members(members)
    if rng.random() < 0.1:
        data, how = tm.byte_mutation(rng, data)
        descs.append(how)
    return data, "; ".join(descs)


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------

verbose = False


def check(mpc, args, folder, outputs, timeout, extra_env=None):
    """Runs mpc in `folder` (with `extra_env` set) and checks the contract; `outputs` are
    the paths (relative to the folder) the run was asked to write. Returns problems."""
    before = tm.snapshot(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    env.update(extra_env or {})
    what = f"`mpc {' '.join(map(repr, args))}`" + (f" with {extra_env!r}" if extra_env else "")
    try:
        r = subprocess.run([mpc] + args, cwd=folder, capture_output=True, text=True,
                           errors="replace", timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return [f"{what} ran longer than {timeout} s"]
    problems = []
    if r.returncode < 0 or r.returncode >= 128:
        problems.append(f"{what} died (exit status {r.returncode}); stderr: {r.stderr[-2000:]}")
    if any(mark in r.stderr for mark in tm.SANITIZER_MARKS):
        problems.append(f"{what}: sanitizer report: {r.stderr[-4000:]}")
    after = tm.snapshot(folder)
    changed = sorted(k for k, v in before.items() if after.get(k) != v)
    written = sorted(k for k in after if k not in before)
    if changed:
        problems.append(f"{what} changed files it read: {changed}")
    exists = [o for o in outputs if os.path.exists(os.path.join(folder, o))]
    if r.returncode != 0:
        lines = r.stderr.splitlines()
        # Bad usage (exit status 2) is one line naming the command: "mpc run --train: ...".
        mark = "mpc " if r.returncode == 2 else "mpc: error: "
        errors = [ln for ln in lines if ln.startswith(mark)]
        if not lines or not lines[-1].startswith(mark) or len(errors) != 1:
            problems.append(f"{what} failed without one error line last: {r.stderr[-2000:]!r}")
        if exists or written:
            problems.append(f"{what} failed but left {sorted(set(exists) | set(written))}")
    elif r.returncode == 0:
        missing = [o for o in outputs if o not in exists]
        if missing:
            problems.append(f"{what} succeeded but wrote no {missing}")
        last = (r.stdout.strip().splitlines() or [""])[-1]
        trains = "--train" in args and "--placement-only" not in args
        if trains and not last.startswith("final: "):
            problems.append(f"{what} succeeded without a final line: {r.stdout[-500:]!r}")
    if verbose:
        print(f"     exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1][:150]!r}")
    return problems


def train_args(model, data="d.npz", steps=3, extra=()):
    """`mpc run --train` of `model` on `data` for `steps` steps, with a log, a plot and a
    checkpoint folder under out/."""
    return (["run", model, "--train", "--data", data, "--batch", "16", "--steps", str(steps),
             "--eval-every", "2", "--log", "out/log.csv", "--plot", "out/plot.svg",
             "--checkpoint", "out/ck"] + list(extra),
            ["out/log.csv", "out/plot.svg", "out/ck"])


FLAG_VALUES = {
    "--batch": ["0", "-1", "1", "97", "1000000000000", "2x", "", "1e3", "16 "],
    "--steps": ["0", "-3", "1", "99999999999999999999", "x"],
    "--epochs": ["0", "-1", "1", "1e9"],
    "--holdout": ["0", "1", "0.99", "-0.1", "1.5", "nan", "inf", "1e-9"],
    "--eval-every": ["0", "-1", "1", "1000000"],
    "--max-memory": ["0", "1", "1B", "1KiB", "-1MiB", "1.5ZiB", "99999999999999999999", "GiB"],
    "--shuffle": ["none", "seeded", "random", ""],
    "--seed": ["-1", "18446744073709551615", "18446744073709551616", "x"],
    "--threads": ["0", "-1", "1", "100000"],
}


AMP_VARIABLES = {
    "MPC_AMP_ALLOWLIST_ADD": ["NotAnOp", "Softmax,Relu", "", ",,,", "com.x.Custom", "Gemm;Relu",
                              "a\nmpc: error: forged", "Relu," * 2000],
    "MPC_AMP_DENYLIST_REMOVE": ["Gemm", "x" * 10000, "Softmax,Softmax"],
    "MPC_AMP_CLEARLIST_ADD": ["Gemm", "Cast", "SoftmaxCrossEntropyLoss"],
    "MPC_AMP_DENY_NODES": ["(", "fc0/.*", ".*", "[z-a]", "a{99999}", "(a*)*b", ""],
    "MPC_AMP_LEVEL": ["UNSAFE_FORCE_ALL", "TREAT_INFER_AS_DENY", "bogus", ""],
    "MPC_AMP_TARGET": ["bf16", "fp16", "fp8", "FP16", ""],
    "MPC_AMP_KEEP_IO_TYPES": ["1", "0", "yes", "2"],
    "MPC_AMP_VERBOSE": ["0", "1", "2", "3", "-1", "x"],
    "MPC_AMP_LOSS_SCALE": ["dynamic", "none", "off", "0", "-1", "nan", "inf", "1e39", "128"],
    "MPC_AMP_LOSS_SCALE_INIT": ["0", "-1", "nan", "inf", "1e-45", "3e38", "x"],
    "MPC_AMP_LOSS_SCALE_GROWTH": ["1", "0.5", "0", "inf", "nan"],
    "MPC_AMP_LOSS_SCALE_BACKOFF": ["1", "2", "0", "-0.5", "nan"],
    "MPC_AMP_LOSS_SCALE_INTERVAL": ["0", "-1", "1", "99999999999999999999"],
    "MPC_AMP_LOSS_SCALE_MIN": ["0", "1e30", "-1", "nan"],
    "MPC_AMP_LOSS_SCALE_MAX": ["0", "1", "1e39", "nan"],
    "MPC_AMP_LOSS_SCALE_BOGUS": ["1"],
    "MPC_AMP_BOGUS": ["1"],
}


def mutate_csv(rng, text):
    """One change to the text of a `--log` CSV; returns (bytes, description)."""
    lines = text.splitlines()
    choice = rng.randrange(12)
    if choice == 0:
        return b"", "empty"
    if choice == 1:
        return (lines[0] + "\n").encode(), "header only"
    if choice == 2:
        i = rng.randrange(1, len(lines))
        cells = lines[i].split(",")
        cells[rng.randrange(len(cells))] = rng.choice(["nan", "inf", "-inf", "x", "", "1e999",
                                                       "-0", "0x10", "1,2", '"3"'])
        lines[i] = ",".join(cells)
        return ("\n".join(lines) + "\n").encode(), f"row {i} cell changed"
    if choice == 3:
        lines[0] = lines[0].replace("step", rng.choice(["", "step", "Step", "loss"]))
        return ("\n".join(lines) + "\n").encode(), "header renamed"
    if choice == 4:
        return ("\r\n".join(lines) + "\r\n").encode(), "CRLF"
    if choice == 5:
        return ("\ufeff" + "\n".join(lines) + "\n").encode(), "BOM"
    if choice == 6:
        i = rng.randrange(1, len(lines))
        lines[i] += ",1,2,3"
        return ("\n".join(lines) + "\n").encode(), f"row {i} too long"
    if choice == 7:
        i = rng.randrange(1, len(lines))
        lines[i] = lines[i].split(",")[0]
        return ("\n".join(lines) + "\n").encode(), f"row {i} too short"
    if choice == 8:
        data = ("\n".join(lines) + "\n").encode()
        at = rng.randrange(len(data))
        return data[:at] + rng.choice([b"\x00", b"\xff\xfe", b"\n\n", b'"']) + data[at:], \
            f"byte inserted at {at}"
    if choice == 9:
        return ("\n".join([lines[0]] + lines[1:] * 2000) + "\n").encode(), "many rows"
    if choice == 10:
        return ("\n".join(lines[:1] + [",".join(["1e300"] * len(lines[0].split(",")))]) +
                "\n").encode(), "huge values"
    data = ("\n".join(lines) + "\n").encode()
    return data[:rng.randrange(len(data))], "truncated"


def input_file(rng, name, shape):
    """(file name, bytes, description) of a possibly mutated input for `name` [shape] f32."""
    a = np.random.default_rng(rng.randrange(1 << 30)).uniform(-1, 1, shape).astype(np.float32)
    form = rng.choice(["npy", "npz", "pb"])
    choice = rng.randrange(10)
    desc = form
    if choice == 0:
        a = a.astype(rng.choice(["float64", "float16", "int64", "int32", "bool", "uint8"]))
        desc += f" as {a.dtype}"
    elif choice == 1:
        a = np.resize(a, rng.choice([[], [0], shape[:-1], shape + [1], [1] + shape[1:],
                                     [shape[0] + 1] + shape[1:]]))
        desc += f" shaped {list(a.shape)}"
    elif choice == 2 and a.size:
        a.flat[rng.randrange(a.size)] = rng.choice([np.nan, np.inf, -np.inf, 3e38])
        desc += " with a non-finite value"
    if form == "npy":
        body = npy_bytes(a)
        if choice == 3:
            body = raw_npy("<f4", rng.choice([[2 ** 62, 4], [10 ** 12] + shape[1:], [-1] + shape[1:]]),
                           payload=a.tobytes())
            desc += " with a huge header shape"
        elif choice == 4:
            body = body[:rng.randrange(len(body))]
            desc += " truncated"
        return name + ".npy", body, desc
    if form == "npz":
        members = {rng.choice([name, name, "other", "a\nb"]): npy_bytes(a)}
        if choice == 5:
            members["extra"] = npy_bytes(a)
            desc += " with an extra member"
        body = zip_members(members, compress=choice == 6)
        if choice == 4:
            body = body[:rng.randrange(len(body))]
            desc += " truncated"
        return "inputs.npz", body, desc + f" members {sorted(members)!r}"
    from onnx import numpy_helper, TensorProto
    t = numpy_helper.from_array(a, name)
    if choice == 3:
        del t.dims[:]
        t.dims.extend(rng.choice([[2 ** 62, 4], [-3] + shape[1:], [2 ** 40] * 3]))
        desc += f" dims {list(t.dims)}"
    elif choice == 4:
        t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data) + 1)]
        desc += " raw data cut"
    elif choice == 5:
        t.data_type = rng.choice([0, 8, 16, 23, 99, -1])
        desc += f" data_type {t.data_type}"
    elif choice == 6:
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", rng.choice(["missing.bin", "../x", "/etc/passwd"])
        desc += " external"
    elif choice == 7:
        t.ClearField("raw_data")
        t.float_data.extend([1.0] * rng.choice([0, 1, a.size + 1]))
        desc += " float_data"
    body = t.SerializeToString()
    if choice == 8:
        body, how = tm.byte_mutation(rng, body)
        desc += ", " + how
    return name + ".pb", body, desc


def mutate_text(rng, text):
    """One to three changes to the text form of a model (tests/golden/*.mpc)."""
    lines = text.split("\n")
    for _ in range(rng.choice([1, 1, 2, 3])):
        choice = rng.randrange(7)
        i = rng.randrange(len(lines))
        if choice == 0:
            del lines[i]
        elif choice == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif choice == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif choice == 3 and lines[i]:
            at = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:at] + rng.choice(TEXT_TOKENS) + lines[i][at:]
        elif choice == 4 and lines[i]:
            at = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:at] + lines[i][at + rng.randrange(1, 8):]
        elif choice == 5:
            words = lines[i].split(" ")
            k = rng.randrange(len(words))
            words[k] = rng.choice(TEXT_TOKENS)
            lines[i] = " ".join(words)
        else:
            return "\n".join(lines)[:rng.randrange(len(text) + 1)]
    return "\n".join(lines)


def run_one(mpc, folder, rng, kind, env):
    """Builds mutant files in `folder` and runs its command; returns (problems, desc)."""
    os.makedirs(os.path.join(folder, "out"))
    put = lambda rel, body: open(os.path.join(folder, rel), "wb").write(body)  # noqa: E731
    put("d.npz", env["data"])
    if kind == "graph":
        name = rng.choice(GRAPH_BASES)
        data, files, desc = tm.make_mutant(rng.randrange(1 << 30), 0, {name: env["models"][name]})
        for rel, body in files.items():
            os.makedirs(os.path.dirname(os.path.join(folder, rel)) or folder, exist_ok=True)
            put(rel, body)
        put("m.onnx", data)
        flags = rng.choice(LOSSES) + rng.choice(OPTIMIZERS)
        if rng.random() < 0.5:
            flags.append("--fused-optimizer")
        args = ["train-graph", "m.onnx", *flags, "-o", "out/t.onnx"]
        return check(mpc, args, folder, ["out/t.onnx"], tm.RUN_TIMEOUT_S), \
            f"{desc} [train-graph {' '.join(flags)}]"
    if kind == "model":
        name = rng.choice(sorted(env["training"]))
        data, files, desc = tm.make_mutant(rng.randrange(1 << 30), 0,
                                           {name: env["training"][name]})
        for rel, body in files.items():
            os.makedirs(os.path.dirname(os.path.join(folder, rel)) or folder, exist_ok=True)
            put(rel, body)
        put("t.onnx", data)
        if rng.random() < 0.3:  # the CUDA kernel table's placement, decided on the host
            args = ["run", "t.onnx", "--train", "--data", "d.npz", "--batch", "16", "--device",
                    "cuda", "--placement-only"]
            return check(mpc, args, folder, [], TRAIN_TIMEOUT_S), desc + " [--placement-only]"
        args, outs = train_args("t.onnx")
        return check(mpc, args, folder, outs, TRAIN_TIMEOUT_S), desc
    if kind == "inputs":
        model = rng.choice(sorted(INPUT_MODELS))
        name, shape = INPUT_MODELS[model]
        put("m.onnx", env["model_bytes"][model])
        fname, body, desc = input_file(rng, name, shape)
        put(fname, body)
        binding = fname if fname.endswith(".npz") else rng.choice(
            [f"{name}={fname}", fname, f"bogus={fname}", f"{name}={fname}"])
        args = ["run", "m.onnx", "--input", binding, "--outputs", "out/r"]
        if rng.random() < 0.2:
            args = ["run", "m.onnx", "--input", binding, "--device", "cuda", "--placement-only"]
        if rng.random() < 0.3:
            args += ["--input", binding]
        if rng.random() < 0.5:
            args += ["--compare", "m.onnx"]
        if model == "digits_mlp" and rng.random() < 0.5:
            args += ["--dim", rng.choice(["N=5", "N=0", "N=-1", "M=3", "N=x"])]
        return check(mpc, args, folder, ["out/r"] if "--outputs" in args else [],
                     tm.RUN_TIMEOUT_S), \
            f"{model}: {desc} [{' '.join(args[3:])}]"
    if kind == "text":
        name = rng.choice(sorted(env["texts"]))
        body = mutate_text(rng, env["texts"][name])
        put("m.mpc", body.encode("utf-8", "surrogatepass"))
        problems = check(mpc, ["inspect", "m.mpc"], folder, [], tm.RUN_TIMEOUT_S)
        problems += check(mpc, ["rewrite", "m.mpc", "--emit", "text"], folder, [],
                          tm.RUN_TIMEOUT_S)
        problems += check(mpc, ["rewrite", "m.mpc", "-o", "out/a.onnx"], folder, ["out/a.onnx"],
                          tm.RUN_TIMEOUT_S)
        if rng.random() < 0.3:
            problems += check(mpc, ["run", "m.mpc", "--random-inputs"] + rng.choice(
                [[], ["--device", "cuda", "--placement-only"]]), folder, [], tm.RUN_TIMEOUT_S)
        return problems, f"{name} mutated"
    if kind == "plot":
        files = []
        for i in range(rng.choice([1, 1, 2])):
            body, desc = mutate_csv(rng, env["log"])
            files.append((f"l{i}.csv", body, desc))
            put(f"l{i}.csv", body)
        args = ["plot", *(f for f, _, _ in files), "-o", "out/p.svg"]
        args += rng.choice([[], ["--column", "loss"], ["--column", "eval_accuracy"],
                            ["--column", "nope"], ["--log-y"], ["--column", "step", "--log-y"],
                            ["--title", "a\nb"], ["--label", ""]])
        return check(mpc, args, folder, ["out/p.svg"], tm.RUN_TIMEOUT_S), \
            "; ".join(d for _, _, d in files) + f" [{' '.join(args[1:])}]"
    name = rng.choice(sorted(env["training_bytes"]))
    put("t.onnx", env["training_bytes"][name])
    if kind == "rewrite":
        if rng.random() < 0.5:  # an inference model instead of the training one
            name = rng.choice(sorted(INPUT_MODELS))
            put("t.onnx", env["model_bytes"][name])
        args = ["rewrite", "t.onnx", "-o", "out/a.onnx"]
        outs = ["out/a.onnx"]
        for opt in rng.sample(sorted(REWRITE_OPTIONS), rng.choice([1, 2, 3, 4])):
            value = rng.choice(REWRITE_OPTIONS[opt])
            args += [opt] if value is None else [opt, value]
            if opt in ("--report", "--dump-dir") and value.startswith("out/"):
                outs.append(value)
        return check(mpc, args, folder, outs, tm.RUN_TIMEOUT_S), f"{name}: {args[4:]!r}"
    if kind == "env":
        variables = {v: rng.choice(AMP_VARIABLES[v])
                     for v in rng.sample(sorted(AMP_VARIABLES), rng.choice([1, 1, 2, 3]))}
        args = ["rewrite", "t.onnx", "-o", "out/a.onnx"]
        problems = check(mpc, args, folder, ["out/a.onnx"], tm.RUN_TIMEOUT_S, variables)
        if not problems and os.path.exists(os.path.join(folder, "out", "a.onnx")):
            targs, outs = train_args("out/a.onnx", steps=2)
            problems = check(mpc, targs, folder, outs, TRAIN_TIMEOUT_S)
        return problems, f"{name}: {variables!r}"
    if kind == "data":
        data, desc = make_data(rng, env["arrays"])
        put("d.npz", data)
        args, outs = train_args("t.onnx")
        return check(mpc, args, folder, outs, TRAIN_TIMEOUT_S), f"{name}: data {desc}"
    if kind == "resume":
        ck = env["checkpoints"][name]
        extra = []
        choice = rng.random()
        if choice < 0.2:  # a good checkpoint, resumed with other options
            body, desc = ck, "as written"
            flag = rng.choice(["--batch", "--steps", "--epochs", "--shuffle", "--seed",
                               "--holdout"])
            extra = [flag, rng.choice(FLAG_VALUES[flag])]
            desc += f", resumed with {flag} {extra[1]!r}"
        elif choice < 0.6:
            body, desc = tm.byte_mutation(rng, ck)
        else:
            import onnx
            m = onnx.ModelProto.FromString(ck)
            desc = "; ".join(rng.choice(tm.MODEL_MUTATIONS)(rng, m, {})
                             for _ in range(rng.choice([1, 2])))
            body = m.SerializeToString()
        os.makedirs(os.path.join(folder, "ck"))
        put(os.path.join("ck", "checkpoint.onnx"), body)
        args, outs = train_args("t.onnx", steps=8, extra=["--resume", "ck"])
        for flag, value in zip(extra[::2], extra[1::2]):
            if flag in args:
                args[args.index(flag) + 1] = value
            else:
                args += [flag, value]
            if flag == "--epochs":  # not with --steps
                del args[args.index("--steps"):args.index("--steps") + 2]
        return check(mpc, args, folder, outs, TRAIN_TIMEOUT_S), f"{name}: checkpoint {desc}"
    flag = rng.choice(sorted(FLAG_VALUES))
    value = rng.choice(FLAG_VALUES[flag])
    args, outs = train_args("t.onnx")
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    if flag == "--epochs":  # not with --steps
        i = args.index("--steps")
        del args[i:i + 2]
    return check(mpc, args, folder, outs, TRAIN_TIMEOUT_S), f"{name}: {flag} {value!r}"


def build_env(mpc, models_dir, tmp):
    """The models, data, training models and checkpoints the mutants start from."""
    import onnx
    env = {"models": {n: onnx.load(os.path.join(models_dir, n + ".onnx"), load_external_data=False)
                      for n in GRAPH_BASES}, "model_bytes": {}}
    for n in INPUT_MODELS:
        with open(os.path.join(models_dir, n + ".onnx"), "rb") as f:
            env["model_bytes"][n] = f.read()
    with np.load(os.path.join(models_dir, "data", "digits.npz")) as d:
        env["arrays"] = {"x": d["x"][:TRAIN_SAMPLES], "labels": d["labels"][:TRAIN_SAMPLES],
                         "x_test": d["x_test"][:TEST_SAMPLES],
                         "labels_test": d["labels_test"][:TEST_SAMPLES]}
    golden = os.path.join(os.path.dirname(models_dir), "tests", "golden")
    env["texts"] = {}
    for root, _, names in sorted(os.walk(golden)):
        for n in sorted(names):
            if n.endswith(".mpc"):
                with open(os.path.join(root, n)) as f:
                    text = f.read()
                body = "\n".join(ln for ln in text.split("\n") if not ln.startswith("//"))
                if "graph @" in body:  # a model in the text form, not only RUN lines
                    env["texts"][os.path.relpath(os.path.join(root, n), golden)] = body
    env["data"] = zip_members({k: npy_bytes(v) for k, v in env["arrays"].items()})
    data = os.path.join(tmp, "d.npz")
    with open(data, "wb") as f:
        f.write(env["data"])
    run = lambda *a: subprocess.run([mpc, *a], check=True, capture_output=True,  # noqa: E731
                                    timeout=TRAIN_TIMEOUT_S)
    paths = {}
    for name, base, flags in [("mlp.adam", "digits_mlp", []),
                              ("cnn.fused", "digits_cnn", ["--fused-optimizer"])]:
        paths[name] = os.path.join(tmp, name + ".onnx")
        run("train-graph", os.path.join(models_dir, base + ".onnx"), "--loss", "cross-entropy",
            "--optimizer", "adam", *flags, "-o", paths[name])
    paths["mlp.adam.fp16"] = os.path.join(tmp, "mlp.adam.fp16.onnx")
    run("rewrite", paths["mlp.adam"], "-o", paths["mlp.adam.fp16"])
    env["training"], env["training_bytes"], env["checkpoints"] = {}, {}, {}
    for name, path in paths.items():
        env["training"][name] = onnx.load(path)
        with open(path, "rb") as f:
            env["training_bytes"][name] = f.read()
        ck = os.path.join(tmp, "ck-" + name)
        run("run", path, "--train", "--data", data, "--batch", "16", "--steps", "6",
            "--eval-every", "2", "--checkpoint", ck, "--log", ck + ".csv")
        with open(ck + ".csv") as f:
            env["log"] = f.read()
        with open(os.path.join(ck, "checkpoint.onnx"), "rb") as f:
            env["checkpoints"][name] = f.read()
    return env


def main():
    args = tm.parse_args(__doc__, 200)
    global verbose
    verbose = args.verbose
    mpc = os.path.abspath(args.mpc)
    models_dir = os.path.join(os.path.abspath(args.source_dir), "models")
    with tempfile.TemporaryDirectory() as tmp:
        env = build_env(mpc, models_dir, tmp)
        kinds, weights = zip(*CLASS_WEIGHTS)

        def one(index, folder):
            rng = random.Random(f"train:{args.seed}:{index}")
            kind = rng.choices(kinds, weights)[0]
            problems, desc = run_one(mpc, folder, rng, kind, env)
            return problems, f"({kind}) {desc!r}"

        return tm.run_suite(args, one, prefix="mpc-train-mutant-")


if __name__ == "__main__":
    sys.exit(main())
