#!/usr/bin/env python3
"""No kernel reads a node attribute while launching (docs/op-registry.md).

    python3 tests/runtime_exec/test_launch_attrs.py --mpc build/tools/mpc --source-dir . [-v]

Every kernel reads its attributes from the parameter struct its registry row parsed when the
node was prepared. With MPC_CHECK_LAUNCH_ATTRS=1 the executor reports each attribute a kernel
reads inside a launch ("mpc: check: OP reads attribute 'NAME' at launch (node ...)"). This
test runs, with the check on:
  * `mpc run --random-inputs` on every shipped model (models/*.onnx) and its fp16 rewrite;
  * every ONNX backend node test model with its recorded inputs (shape operands given as
    graph inputs run in dynamic mode, whose launches are checked too);
  * a few training steps of the digits MLP and CNN training graphs, plain and after the AMP
    rewrite (gradient, optimizer and loss-scaling ops);
and compares the (op, attribute) pairs reported with the table of the ops that still read
attributes at launch in docs/op-registry.md (between the markers "<!-- launch-reads -->" and
"<!-- /launch-reads -->", one "| Op | attr, attr | reason |" row per op). It fails when an
op reads an attribute the table does not list (a kernel that regressed, or a new op without
a parser) and when a listed pair is never read (the table is stale). A sanity case checks the
check itself: with the hook on, the table's ops are seen, and with it off nothing is printed.

Prints "N passed, N failed"; exit 1 on failure, 77 when onnx or numpy is missing.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

try:
    import onnx  # noqa: F401
    import numpy  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required: {e}", file=sys.stderr)
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(77)

import test_node_conformance as conf  # noqa: E402

READ_RE = re.compile(r"^mpc: check: (\S+) reads attribute '([^']*)' at launch", re.M)
DIM_RE = re.compile(r"dimension '([^']+)' needs a value")
ENV = dict(os.environ, MPC_CHECK_LAUNCH_ATTRS="1")


def reads_of(stderr):
    return {(m.group(1), m.group(2)) for m in READ_RE.finditer(stderr)}


def run(args, env=ENV, timeout=300):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          timeout=timeout, text=True)


def documented_reads(source_dir):
    """The (op, attribute) pairs docs/op-registry.md lists as read at launch."""
    text = open(os.path.join(source_dir, "docs", "op-registry.md"), encoding="utf-8").read()
    m = re.search(r"<!-- launch-reads -->(.*?)<!-- /launch-reads -->", text, re.S)
    if not m:
        raise SystemExit("docs/op-registry.md has no <!-- launch-reads --> table")
    pairs = set()
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("Op", "") or set(cells[0]) <= set("-: "):
            continue
        for a in cells[1].split(","):
            pairs.add((cells[0].strip("`"), a.strip().strip("`")))
    return pairs


def node_test_reads(mpc, test_dir):
    model_path = os.path.join(test_dir, "model.onnx")
    try:
        model = onnx.load(model_path)
    except Exception:  # pragma: no cover
        return set()
    data_dir = os.path.join(test_dir, "test_data_set_0")
    init_names = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in init_names]
    with tempfile.TemporaryDirectory(prefix="mpc-lar-") as out_dir:
        args = [mpc, "run", model_path]
        for name in inputs:
            p = os.path.join(data_dir, f"input_{inputs.index(name)}.pb")
            if os.path.exists(p):
                args += ["--input", f"{name}={p}"]
        try:
            proc = run(args + ["--outputs", out_dir], timeout=120)
            seen = reads_of(proc.stderr)
        except subprocess.TimeoutExpired:
            return set()
    return seen


def training_reads(mpc, source_dir, work, name, model, extra):
    models = os.path.join(source_dir, "models")
    graph = os.path.join(work, f"{name}.train.onnx")
    amp = os.path.join(work, f"{name}.amp.onnx")
    for args in ([mpc, "train-graph", os.path.join(models, model)] + extra + ["-o", graph],
                 [mpc, "rewrite", graph, "-o", amp]):
        proc = run(args, env=os.environ)
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {proc.stderr.strip()}")
    seen = set()
    for g in (graph, amp):
        proc = run([mpc, "run", g, "--train", "--data", os.path.join(models, "data", "digits.npz"),
                    "--batch", "8", "--steps", "3", "--eval-every", "3"])
        if proc.returncode != 0:
            raise AssertionError(f"training {g}: {proc.stderr.strip()}")
        seen |= reads_of(proc.stderr)
    return seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    mpc, src = os.path.abspath(args.mpc), os.path.abspath(args.source_dir)
    passed = failed = 0

    def check(ok, what):
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL: {what}")

    expected = documented_reads(src)
    seen = {}

    def note(pairs, where):
        for p in pairs:
            seen.setdefault(p, where)

    with tempfile.TemporaryDirectory(prefix="mpc-lar-") as work:
        # The shipped models and their fp16 rewrites.
        mdir = os.path.join(src, "models")
        for f in sorted(os.listdir(mdir)):
            if not f.endswith(".onnx"):
                continue
            path = os.path.join(mdir, f)
            half = os.path.join(work, f + ".fp16.onnx")
            rw = run([mpc, "rewrite", path, "-o", half, "--target", "fp16"], env=os.environ)
            for m in [path] + ([half] if rw.returncode == 0 else []):
                dims = []
                while True:  # symbolic dimensions get a small value
                    proc = run([mpc, "run", m, "--random-inputs"] + dims)
                    d = DIM_RE.search(proc.stderr)
                    if proc.returncode == 0 or not d or len(dims) > 8:
                        break
                    dims += ["--dim", f"{d.group(1)}=2"]
                check(proc.returncode == 0, f"mpc run {m}: {proc.stderr.strip()}")
                note(reads_of(proc.stderr), os.path.basename(m))
        # Sanity: the check is off without the environment variable.
        quiet = run([mpc, "run", os.path.join(mdir, "cnn.onnx"), "--random-inputs"],
                    env={k: v for k, v in os.environ.items()
                         if k != "MPC_CHECK_LAUNCH_ATTRS"})
        check(quiet.returncode == 0 and "mpc: check:" not in quiet.stderr,
              "without MPC_CHECK_LAUNCH_ATTRS nothing is reported")
        # Training graphs (gradient, optimizer and loss-scaling ops).
        for name, model, extra in (
                ("mlp", "digits_mlp.onnx", ["--loss", "cross-entropy", "--optimizer", "adam"]),
                ("cnn", "digits_cnn.onnx", ["--loss", "cross-entropy", "--optimizer", "adam"])):
            try:
                note(training_reads(mpc, src, work, name, model, extra), f"training {name}")
                check(True, name)
            except AssertionError as e:
                check(False, str(e))
        # Every ONNX backend node test model.
        root = conf.node_test_root()
        tests = sorted(d for d in os.listdir(root)
                       if os.path.exists(os.path.join(root, d, "model.onnx")))
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for name, pairs in zip(tests, pool.map(
                    lambda d: node_test_reads(mpc, os.path.join(root, d)), tests)):
                note(pairs, name)

    for (op, attr), where in sorted(seen.items()):
        check((op, attr) in expected,
              f"{op} reads attribute '{attr}' at launch ({where}) and docs/op-registry.md "
              f"does not list it")
    for op, attr in sorted(expected - set(seen)):
        check(False, f"docs/op-registry.md lists {op} '{attr}' as read at launch, but no "
                     f"run read it (remove the row)")
    if args.verbose:
        for (op, attr), where in sorted(seen.items()):
            print(f"read at launch: {op} {attr} ({where})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
