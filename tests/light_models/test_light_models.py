#!/usr/bin/env python3
"""Numerics of the ONNX backend 'light' models through `mpc run` on the CPU backend.

The light models (onnx/backend/test/data/light/*.onnx in the onnx wheel) are real
architectures (AlexNet, DenseNet-121, Inception v1/v2, ResNet-50, ShuffleNet, SqueezeNet,
VGG-19, ZFNet-512) whose weights are ConstantOfShape nodes filled with 0.02. Per model, on one
seeded standard-normal input of batch 1 (mpc_testlib.random_inputs):

  fp32       mpc's CPU result vs onnxruntime (onnx.reference when onnxruntime is missing):
             relative L2 <= 1e-4.
  fp16,      `mpc rewrite --target T`, then
  bf16_op22  (a) mpc's CPU result of the rewritten model vs mpc's fp32 result: relative L2
                 <= 1e-2 (fp16) / 5e-2 (bf16), NaN/inf in the same places;
             (b) mpc's CPU result of the rewritten model vs onnx.reference on the rewritten
                 model, where every op in FP32_COMPUTE_OPS (and Conv, MatMul) computes 16-bit
                 operands in fp32 and rounds once, mpc's kernel contract: relative L2 <=
                 AGREE_TOL[T].
  bf16       the models are opset 9, whose Conv/Gemm/Relu/... schemas admit no bfloat16, so
             the bf16 rewrite is a no-op: asserted (no bf16 Cast), then skipped. bf16_op22
             checks a copy converted by onnx.version_converter to opset 22 (same math).

Every model's runnable copy also outputs the logits (the last Softmax's input). Where the
logits are so large that fp32 rounding alone moves them by more than 1 (see
softmax_well_conditioned), the probabilities are rounding noise amplified by the Softmax and
only the logits are compared (a line says so).

Six models' fp32 activations grow past fp16's largest finite value (65504) by construction:
five have no normalization, and ResNet-50's constant BN parameters do not renormalize; the
constant 0.02 weights multiply activations by ~0.02 * fan-in per layer up to 1e9..1e31. Their
fp16 rewrites give inf and then NaN; no list, pass or kernel can fix that without changing the
model. They are listed in FP16_OVERFLOW and are *checked* skips: the test computes every fp32
intermediate (onnxruntime, or onnx.reference) and asserts that the largest |x| exceeds 65504,
naming the first node past it. A listed model that stops overflowing fails.

Oracle fixes (onnx 1.22's reference kernels, overridden here, found by this suite):
BatchNormalization-9 switches to batch statistics when the node has a momentum attribute,
and LRN sums squares over the batch axis instead of channels (see inference_batch_norm,
channel_lrn); onnxruntime and mpc agree with the operator spec on both.

Options: --mpc BIN, --source-dir DIR (unused, passed by ctest), --filter SUBSTRING (model
names), --quick (only QUICK_MODELS: one normalized model checked in fp16 and bf16, one listed
in FP16_OVERFLOW; the default ctest run uses it, `ctest -C full` runs every model, see
docs/testing.md section 1), --keep DIR (keep inputs, rewrites and outputs there), --verbose
(print every relative L2 error). The last line is 'N passed, N failed[, N skipped]'; exit status 1 on any failure,
77 when numpy/onnx (with onnx.reference) are missing.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import mpc_testlib as lib  # noqa: E402

try:
    import numpy as np
    import onnx
    import onnx.version_converter
except ImportError:  # pragma: no cover - reported by lib.require_onnx_reference()
    np = onnx = None

try:
    import onnxruntime
except ImportError:  # pragma: no cover - onnx.reference is the fallback oracle
    onnxruntime = None

FP16_MAX = 65504.0

# mpc's fp32 result vs the fp32 oracle (different summation orders only).
FP32_TOL = 1e-4
# The bounds for the rewritten model vs fp32.
REWRITE_TOL = {"fp16": 1e-2, "bf16": 5e-2}
# mpc vs onnx.reference on the same rewritten model: both compute every op in fp32 from the
# same 16-bit operands and round once, so they differ only by summation order and the odd
# rounding tie; the bound is a few 16-bit ulps (fp16 2^-11, bf16 2^-8).
AGREE_TOL = {"fp16": 2e-3, "bf16": 1.6e-2}

# Models whose fp32 activations exceed fp16's range by construction (no normalization layer,
# constant 0.02 weights). The test asserts the overflow before it skips.
# ResNet-50 has BatchNormalization but its constant BN parameters (scale 0.02, variance 0.02)
# do not renormalize, and its residual Sums keep growing: its fp32 logits reach ~1e19.
FP16_OVERFLOW = {"light_bvlc_alexnet", "light_inception_v1", "light_resnet50",
                 "light_squeezenet", "light_vgg19", "light_zfnet512"}

# Ops that onnx.reference evaluates in numpy's 16-bit arithmetic (rounding every step) but
# that mpc, like GPU kernels, computes in fp32 from 16-bit operands and rounds once; the
# oracle runs them the same way (mpc_testlib._accumulate_in_float32, as it does for Conv and
# MatMul).
FP32_COMPUTE_OPS = ("AveragePool", "BatchNormalization", "Gemm", "GlobalAveragePool", "LRN",
                    "Mean", "Softmax", "Sum")

# The light models are opset 9, where no compute op admits bfloat16, so their bf16 rewrite
# is a no-op. Each is also converted (onnx.version_converter: same math, newer schemas) to the
# first opset whose Conv admits bfloat16, and that copy is rewritten to bf16 and checked.
BF16_OPSET = 22

# --quick: ShuffleNet (BatchNormalization, grouped convolutions, channel shuffle; its fp16 and
# bf16 rewrites are compared) and SqueezeNet (the smallest FP16_OVERFLOW model, so the checked
# skip runs too). About 10 s of the ~140 s of the whole set on two cores.
QUICK_MODELS = ("light_shufflenet", "light_squeezenet")

TIMEOUT = 300
ARGS = None


class Workspace:
    """Per-model files and results shared by the fp32, fp16 and bf16 tests (computed once)."""

    def __init__(self, root):
        self.root = root
        self.cache = {}

    def model_dir(self, name):
        path = os.path.join(self.root, name)
        os.makedirs(path, exist_ok=True)
        return path

    def memo(self, key, fn):
        if key not in self.cache:
            self.cache[key] = fn()
        return self.cache[key]


WORK = None


def light_models():
    models = {os.path.splitext(os.path.basename(p))[0]: p for p in lib.list_light_models()}
    if ARGS and ARGS.filter:
        models = {n: p for n, p in models.items() if ARGS.filter in n}
    if ARGS and ARGS.quick:
        models = {n: p for n, p in models.items() if n in QUICK_MODELS}
    return models


def write_inputs(name, model):
    """Seeded inputs of the model, written as .npy; returns (feeds, --input arguments)."""
    feeds = lib.random_inputs(model)
    args = []
    for i, (input_name, value) in enumerate(feeds.items()):
        path = os.path.join(WORK.model_dir(name), f"input_{i}.npy")
        np.save(path, value)
        args += ["--input", f"{input_name}={path}"]
    return feeds, args


def run_mpc(model_path, input_args, out_dir, output_names):
    """Runs `mpc run`; returns the outputs in graph order (bf16 outputs come back as f32)."""
    os.makedirs(out_dir, exist_ok=True)
    cmd = [ARGS.mpc, "run", model_path, *input_args, "--outputs", out_dir]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT,
                          check=False)
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise lib.MpcError(f"mpc run exited {proc.returncode}: {lines[-1] if lines else ''}")
    results = []
    for output in output_names:
        path = os.path.join(out_dir, output.replace("/", "_") + ".npy")
        if not os.path.isfile(path):
            raise lib.MpcError(f"mpc run wrote no {path}")
        results.append(np.load(path))
    return results


def fp32_oracle(model_path, feeds, output_names=None):
    """fp32 outputs (or the named intermediates) by onnxruntime, else onnx.reference."""
    model = onnx.load(model_path)
    if onnxruntime is not None:
        if output_names is not None:
            model = with_outputs(model, output_names)
        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 2
        session = onnxruntime.InferenceSession(model.SerializeToString(), opts,
                                               providers=["CPUExecutionProvider"])
        return session.run(output_names, feeds)
    return evaluate_fp32_compute(model, feeds, output_names)


def with_outputs(model, names):
    """A copy of the model whose graph outputs are `names` (types from shape inference)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    infos = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.output[:]
    copy.graph.output.extend(infos[n] for n in names)
    return copy


def float_intermediates(model):
    """Names of the float32 node outputs of the model, in node order."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type
             for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    names = []
    for node in model.graph.node:
        for out in node.output:
            if out and types.get(out) == onnx.TensorProto.FLOAT:
                names.append(out)
    return names


def fp32_activation_range(name, path, feeds):
    """(max |x| over every fp32 intermediate, first node output above FP16_MAX or None)."""
    def compute():
        model = onnx.load(path)
        names = float_intermediates(model)
        values = fp32_oracle(path, feeds, names)
        peak, first = 0.0, None
        for out, value in zip(names, values):
            finite = np.abs(np.asarray(value, dtype=np.float64))
            top = float(finite.max()) if finite.size else 0.0
            if first is None and top > FP16_MAX:
                first = (out, top)
            peak = max(peak, top)
        return peak, first
    return WORK.memo((name, "range"), compute)


def runnable_copy(model):
    """The model with initializers no longer listed as graph inputs and the logits (the input
    of the last Softmax) added as an extra graph output; no value changes.

    The light models are IR version 3, which lists every initializer as a graph input (an
    overridable default). mpc's executor plans shapes before running and treats such inputs
    as runtime data, so the ConstantOfShape shapes (the weights' shapes) would be unknown at
    plan time; IR >= 4 lets the list drop them.
    """
    inits = {t.name for t in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.ir_version = max(model.ir_version, 4)
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"]
    if softmax:
        logits = softmax[-1].input[0]
        inferred = onnx.shape_inference.infer_shapes(model)
        infos = {v.name: v for v in inferred.graph.value_info}
        if logits in infos and logits not in [o.name for o in model.graph.output]:
            model.graph.output.append(infos[logits])
    return model


def model_copy(name, original):
    """runnable_copy of the original model, written once; returns its path."""
    def compute():
        path = os.path.join(WORK.model_dir(name), f"{name}.onnx")
        onnx.save(runnable_copy(onnx.load(original)), path)
        return path
    return WORK.memo((name, "model"), compute)


def evaluate_fp32_compute(model, feeds, output_names=None):
    """onnx.reference on the model, with FP32_COMPUTE_OPS (and Conv, MatMul) computing 16-bit
    operands in fp32 and rounding once."""
    from onnx.reference.ops import load_op
    opset = lib.default_opset(model)
    ops = {n.op_type for n in model.graph.node}
    new_ops = lib._reference_overrides()
    for op in FP32_COMPUTE_OPS:
        if op in ops:
            # ReferenceEvaluator(new_ops=...) matches a class by its name, so a versioned
            # kernel (Gemm_13, Softmax_13, ...) is renamed to the op type.
            # It then passes the attributes of the latest schema (AveragePool's dilations
            # to AveragePool_7), so the renamed kernel drops those its version lacks.
            base = renamed(load_op("", op, opset), op)
            if op == "BatchNormalization" and opset < 14:
                base = inference_batch_norm(base)
            if op == "LRN":
                base = channel_lrn(base)
            new_ops.append(lib._accumulate_in_float32(base))
    with np.errstate(all="ignore"):
        return onnx.reference.ReferenceEvaluator(model, new_ops=new_ops).run(
            output_names, dict(feeds))


def renamed(base, name):
    """`base` (an onnx.reference kernel class) named `name`, ignoring unknown attributes."""
    import inspect
    accepted = set(inspect.signature(base._run).parameters)

    def _run(self, *inputs, **attributes):
        return base._run(self, *inputs, **{k: v for k, v in attributes.items() if k in accepted})
    return type(name, (base,), {"_run": _run})


def inference_batch_norm(base):
    """onnx.reference's BatchNormalization-9 with the inference formula only.

    onnx 1.22's BatchNormalization_9._run switches to batch statistics whenever the node
    carries a `momentum` attribute, although opset 9 BatchNormalization is inference-only
    (momentum matters to training). The light models' BN nodes carry momentum, so the stock
    kernel gives a 40% error at ShuffleNet's first BN where onnxruntime and mpc agree.
    """
    from onnx.reference.ops.op_batch_normalization import _batchnorm_test_mode

    def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, **unused):
        eps = 1e-5 if epsilon is None else epsilon
        return (_batchnorm_test_mode(x, scale, bias, mean, var, epsilon=eps).astype(x.dtype),)
    return type("BatchNormalization", (base,), {"_run": _run})


def channel_lrn(base):
    """onnx.reference's LRN with the window over channels.

    onnx 1.22's LRN._run loops `for c in range(x.shape[0])` (the batch size), so with batch 1
    only channel 0 gets its sum of squares and every other channel is divided by bias^beta;
    the operator spec (and onnxruntime, which mpc matches to 1e-5) sums x^2 over channels
    [c - floor((size-1)/2), c + ceil((size-1)/2)]. Computed here in float64.
    """
    def _run(self, x, alpha=None, beta=None, bias=None, size=None):
        wide = x.astype(np.float64)
        squares = wide * wide
        channels, lo = x.shape[1], (size - 1) // 2
        hi = size - 1 - lo
        sums = np.zeros_like(squares)
        for c in range(channels):
            sums[:, c] = squares[:, max(0, c - lo):min(channels, c + hi + 1)].sum(axis=1)
        return ((wide / (bias + alpha / size * sums) ** beta).astype(x.dtype),)
    return type("LRN", (base,), {"_run": _run})


def softmax_well_conditioned(logits):
    """False when fp32 rounding of the logits alone (2^-23 relative) can move a logit by more
    than 1, i.e. change probability ratios by more than e: then the probabilities are noise
    amplified by the model's huge activations and only the logits are compared."""
    top = float(np.max(np.abs(np.asarray(logits, dtype=np.float64)))) if np.size(logits) else 0
    return top * 2.0 ** -23 <= 1.0


def fp32_results(name, path):
    """(model, feeds, --input args, mpc's fp32 outputs, oracle fp32 outputs), once per model."""
    def compute():
        model = onnx.load(path)
        feeds, input_args = write_inputs(name, model)
        names = [o.name for o in model.graph.output]
        ours = run_mpc(path, input_args, os.path.join(WORK.model_dir(name), "out_fp32"), names)
        ref = fp32_oracle(path, feeds)
        return model, feeds, input_args, ours, ref
    return WORK.memo((name, "fp32"), compute)


class LightModelTest(unittest.TestCase):
    """Test methods are generated per model and precision below."""

    def compare_outputs(self, names, ref, got, tol, what):
        """Compares every output; a probability output after an ill-conditioned Softmax (see
        softmax_well_conditioned) is left out, its logits (the last output) are compared."""
        logits_ok = softmax_well_conditioned(ref[-1])
        for i, (out, r, g) in enumerate(zip(names, ref, got)):
            if i < len(names) - 1 and not logits_ok:
                print(f"  {what}: '{out}' not compared: the logits reach "
                      f"{np.max(np.abs(ref[-1])):.2g}, so the Softmax amplifies rounding")
                continue
            r = np.asarray(r).astype(np.float32)
            g = np.asarray(g).astype(np.float32)
            if i == len(names) - 1 and r.shape != g.shape and r.size == g.size:
                g = g.reshape(r.shape)  # logits flattened for Softmax-13 by the converter
            if ARGS.verbose:
                print(f"  {what}: '{out}' relative L2 {lib.relative_l2(r, g):.2e} (<= {tol:g})")
            problems = lib.compare_values(r, g, tol, f"output '{out}'")
            self.assertFalse(problems, f"{what}: " + "; ".join(problems))

    def check_fp32(self, name, path):
        model, _, _, ours, ref = fp32_results(name, path)
        oracle = "onnxruntime" if onnxruntime else "onnx.reference"
        self.compare_outputs([o.name for o in model.graph.output], ref, ours, FP32_TOL,
                             f"{name} fp32 vs {oracle}")

    def check_rewrite(self, name, path, target, opset=None):
        model, feeds, input_args, ours32, _ = fp32_results(name, path)
        if target == "fp16" and name in FP16_OVERFLOW:
            peak, first = fp32_activation_range(name, path, feeds)
            self.assertGreater(peak, FP16_MAX,
                               f"{name} is listed in FP16_OVERFLOW but its fp32 activations "
                               f"peak at {peak:.3g} <= 65504: remove it from the list")
            self.skipTest(f"fp16 overflow is intrinsic: no normalization and constant 0.02 "
                          f"weights grow fp32 activations to {peak:.2g} (first past 65504: "
                          f"'{first[0]}' at {first[1]:.2g}); fp16 gives inf, then NaN")
        work = WORK.model_dir(name)
        tag = f"{target}_op{opset}" if opset else target
        source = light_models()[name]
        if opset:
            source = os.path.join(work, f"{name}.op{opset}.onnx")
            onnx.save(onnx.version_converter.convert_version(onnx.load(light_models()[name]),
                                                             opset), source)
        rewritten = os.path.join(work, f"{name}.{tag}.onnx")
        lib.run_mpc_rewrite(ARGS.mpc, source, rewritten, target, TIMEOUT)
        if target == "bf16" and not opset:
            casts = [n for n in onnx.load(rewritten).graph.node if n.op_type == "Cast" and
                     any(a.name == "to" and a.i == onnx.TensorProto.BFLOAT16 for a in n.attribute)]
            self.assertFalse(casts, f"{name}: expected a no-op bf16 rewrite at opset 9")
            self.skipTest("opset 9 schemas (Conv, Gemm, Relu, MaxPool, BatchNormalization, ...) "
                          "admit no bfloat16, so the bf16 rewrite is a no-op (asserted: no "
                          f"bf16 Cast); test_{name}_bf16_op{BF16_OPSET} checks bf16")
        runnable = os.path.join(work, f"{name}.{tag}.run.onnx")
        rmodel = runnable_copy(onnx.load(rewritten))
        onnx.save(rmodel, runnable)
        names = [o.name for o in rmodel.graph.output]
        ours = run_mpc(runnable, input_args, os.path.join(work, f"out_{tag}"), names)
        self.compare_outputs(names, ours32, ours, REWRITE_TOL[target],
                             f"{name} {target} rewrite vs fp32 (both mpc)")
        ref = evaluate_fp32_compute(rmodel, feeds)
        self.compare_outputs(names, ref, ours, AGREE_TOL[target],
                             f"{name} {target} rewrite, mpc vs onnx.reference")


def _add_tests():
    if onnx is None:
        return
    for name, original in light_models().items():
        def fp32(self, name=name, original=original):
            self.check_fp32(name, model_copy(name, original))

        def make(target, opset=None, name=name, original=original):
            return lambda self: self.check_rewrite(name, model_copy(name, original), target,
                                                   opset)

        setattr(LightModelTest, f"test_{name}_fp32", fp32)
        setattr(LightModelTest, f"test_{name}_fp16", make("fp16"))
        setattr(LightModelTest, f"test_{name}_bf16", make("bf16"))
        setattr(LightModelTest, f"test_{name}_bf16_op{BF16_OPSET}", make("bf16", BF16_OPSET))


def main():
    global ARGS, WORK
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpc", required=True)
    parser.add_argument("--source-dir", default=None)
    parser.add_argument("--filter", default=None)
    parser.add_argument("--quick", action="store_true",
                        help="only " + ", ".join(QUICK_MODELS))
    parser.add_argument("--keep", default=None)
    parser.add_argument("--verbose", action="store_true")
    ARGS = parser.parse_args()
    lib.require_onnx_reference()
    root = ARGS.keep or tempfile.mkdtemp(prefix="mpc_light_")
    os.makedirs(root, exist_ok=True)
    WORK = Workspace(root)
    try:
        shipped = {os.path.splitext(os.path.basename(p))[0] for p in lib.list_light_models()}
        missing = sorted(set(QUICK_MODELS) - shipped)
        if ARGS.quick and shipped and missing:
            print(f"--quick: the onnx wheel has no {', '.join(missing)}; update QUICK_MODELS",
                  file=sys.stderr)
            print("0 passed, 1 failed")
            return 1
        _add_tests()
        # Tests of one model run together, so its fp32 results are computed once.
        suite = unittest.TestLoader().loadTestsFromTestCase(LightModelTest)
        if not suite.countTestCases():
            print("no light models found in the onnx wheel", file=sys.stderr)
            print("0 passed, 0 failed, 1 skipped")
            return lib.SKIP_EXIT_CODE
        print(f"fp32 oracle: {'onnxruntime ' + onnxruntime.__version__ if onnxruntime else 'onnx.reference'}")
        return lib.run_suite(suite, verbosity=2 if ARGS.verbose else 1,
                             group_of=lambda tid: tid.rsplit("_", 1)[-1], show_skips=True)
    finally:
        if not ARGS.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
