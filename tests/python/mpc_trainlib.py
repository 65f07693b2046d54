"""Helpers for tests of training models (docs/training.md).

algorithm_as_model() turns the training step of a training model into a
standalone ONNX model that `mpc run` and onnx.reference can run: its graph is
the algorithm graph, and the inference-graph initializers it reads become
its initializers (or, with state_as_inputs, extra graph inputs).
"""
import copy

import onnx
from onnx import helper


def metadata(model):
    """The model's metadata_props as a dict."""
    return {p.key: p.value for p in model.metadata_props}


def gradient_pairs(model):
    """[(param, grad)] from mpc.training.gradients."""
    text = metadata(model).get("mpc.training.gradients", "")
    return [tuple(line.split("=", 1)) for line in text.splitlines() if line]


def _names_read(graph):
    """Names a graph (and its subgraphs) reads."""
    names = set()
    for n in graph.node:
        names.update(i for i in n.input if i)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names |= _names_read(a.g)
            for g in a.graphs:
                names |= _names_read(g)
    names.update(o.name for o in graph.output)
    return names


def algorithm_as_model(model, state_as_inputs=False, index=0):
    """A standalone model running training_info[index].algorithm."""
    alg = copy.deepcopy(model.training_info[index].algorithm)
    defined = {i.name for i in alg.input} | {i.name for i in alg.initializer}
    defined |= {o for n in alg.node for o in n.output}
    read = _names_read(alg)
    for init in model.graph.initializer:
        if init.name in read and init.name not in defined:
            if state_as_inputs:
                alg.input.append(helper.make_tensor_value_info(
                    init.name, init.data_type, list(init.dims)))
            alg.initializer.append(init)
    out = helper.make_model(alg, opset_imports=list(model.opset_import))
    out.ir_version = model.ir_version
    return out


def reference_evaluator(model):
    """onnx.reference.ReferenceEvaluator with mpc's ai.mpc.training ops."""
    from onnx.reference import ReferenceEvaluator
    try:
        import mpc_training_ref
        new_ops = list(mpc_training_ref.OPS)
    except ImportError:
        new_ops = []
    return ReferenceEvaluator(model, new_ops=new_ops)


def test_main(classes, set_args):
    """The main() of a training test suite: --mpc, --source-dir, -k, -v; runs `classes`'
    tests (in order) after set_args(parsed args); returns the exit status."""
    import argparse
    import unittest
    import mpc_testlib as lib
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("-k", default=None, help="run only tests whose id contains this")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    set_args(args)
    suite = unittest.TestSuite()
    for cls in classes:
        for t in unittest.TestLoader().loadTestsFromTestCase(cls):
            if args.k is None or args.k in t.id():
                suite.addTest(t)
    return lib.run_suite(suite, verbosity=2 if args.v else 1, show_skips=True)


def pop_device_arg(default="cpu"):
    """Removes `--device DEV` from sys.argv (a suite's own option, before test_main parses
    the rest) and returns DEV, or `default` when absent."""
    import sys
    if "--device" not in sys.argv:
        return default
    i = sys.argv.index("--device")
    device = sys.argv[i + 1]
    del sys.argv[i:i + 2]
    return device


def without_placement(test, stdout):
    """`mpc run --train` stdout less its placement line, for comparing the runs of two
    graphs that differ by some nodes (a fold, a fused optimizer): on a GPU that line counts
    the step's nodes ("cuda: N nodes; cpu fallback: ..."), so the runs differ there by
    design. Asserts that every node of each ran on the device."""
    lines = stdout.splitlines(keepends=True)
    for line in lines:
        if line.startswith("cuda: "):
            test.assertTrue(line.rstrip().endswith("cpu fallback: none"), line)
    return "".join(line for line in lines if not line.startswith("cuda: "))


def check_all_on_cuda(test, mpc, path, data):
    """`mpc run PATH --train --device cuda --placement-only` (the CUDA kernel table, no GPU
    needed) places every launched node of the training step on the GPU: its last line is
    exactly "cuda: N nodes; cpu fallback: none". Skips `test` where the build has no CUDA
    backend."""
    import subprocess
    r = subprocess.run([mpc, "run", path, "--train", "--device", "cuda", "--placement-only",
                        "--data", data, "--batch", "32"], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0 and "CUDA backend" in r.stderr:
        test.skipTest("this build has no CUDA backend")
    test.assertEqual(r.returncode, 0, r.stderr)
    launched = [n for n in onnx.load(path).training_info[0].algorithm.node
                if n.op_type not in ("Constant", "Shape", "Size")]
    test.assertEqual(r.stdout.strip().splitlines()[-1],
                     f"cuda: {len(launched)} nodes; cpu fallback: none")


def cross_entropy(z, labels):
    """float64 mean softmax cross-entropy of logits z [N, C] against int labels [N]."""
    import numpy as np
    z = z - z.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(labels)), labels]))


def fd_gradients(loss, p, step=1e-6):
    """Central finite differences of loss(p) (float64) for every entry of the arrays in the
    dict p (changed in place and restored)."""
    import numpy as np
    grads = {}
    for k, v in p.items():
        g = np.zeros_like(v)
        for i in range(v.size):
            saved = v.flat[i]
            v.flat[i] = saved + step
            lp = loss(p)
            v.flat[i] = saved - step
            lm = loss(p)
            v.flat[i] = saved
            g.flat[i] = (lp - lm) / (2 * step)
        grads[k] = g
    return grads
