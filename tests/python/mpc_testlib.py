"""Shared helpers for mpc's Python oracle suites.

The oracle is the ONNX reference evaluator (`onnx.reference.ReferenceEvaluator`, onnx >= 1.13):
it shares no code with mpc, so it can judge mpc's output. This module knows how to

  * find the test corpus (the shipped models, the ONNX backend node and light tests),
  * run `mpc rewrite` and report its failures in one line,
  * build inputs for a model (its recorded test data, or seeded random data),
  * evaluate a model and compare two sets of outputs (relative L2 for floats, exact otherwise);
    Conv and MatMul on fp16/bf16 are evaluated in float32 and rounded once (see
    _accumulate_in_float32: faster, and it avoids an onnx 1.22 bf16 MatMul bug),
  * run a unittest suite and print the `N passed, N failed[, N skipped]` summary line.

It imports only the standard library, numpy and onnx, so it runs wherever the suites run.
"""

import glob
import os
import subprocess
import sys
import time
import unittest

try:  # onnx.reference appeared in onnx 1.13; the suites need it as their oracle.
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as e:  # pragma: no cover - reported by require_onnx_reference()
    onnx = None
    IMPORT_ERROR = str(e)

try:  # ml_dtypes gives numpy bfloat16 and float8 types; onnx >= 1.16 depends on it.
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

# Exit status that tells CTest "skipped" (SKIP_RETURN_CODE in tests/python/CMakeLists.txt).
SKIP_EXIT_CODE = 77

# Seed for random inputs; one fixed value keeps every run comparable.
INPUT_SEED = 20240607

# Size used for a symbolic or unknown dimension when random inputs are generated.
SYMBOLIC_DIM = 2


def require_onnx_reference():
    """Exits with SKIP_EXIT_CODE, naming the problem, when onnx.reference is unavailable."""
    if onnx is None:
        print(f"numpy and onnx >= 1.13 (onnx.reference) are required; {sys.executable}: "
              f"{IMPORT_ERROR}", file=sys.stderr)
        print("0 passed, 0 failed, 1 skipped")
        sys.exit(SKIP_EXIT_CODE)


# --------------------------------------------------------------------------------------------
# Corpus discovery
# --------------------------------------------------------------------------------------------

def onnx_backend_data_dir():
    """Directory of the backend test data shipped inside the onnx wheel."""
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def default_opset(model):
    """Version of the default ONNX domain the model imports, 0 when it imports none."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return max(versions, default=0)


def graph_inputs(model):
    """The graph inputs that are real inputs (IR < 4 also lists initializers as inputs)."""
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def _tensor_elem_types(type_proto):
    """Element types of the tensors inside a TypeProto (through sequences and optionals)."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return {type_proto.tensor_type.elem_type}
    if kind == "sequence_type":
        return _tensor_elem_types(type_proto.sequence_type.elem_type)
    if kind == "optional_type":
        return _tensor_elem_types(type_proto.optional_type.elem_type)
    return set()


def has_float32_input(model):
    """True when some real graph input is (or contains) a float32 tensor."""
    return any(onnx.TensorProto.FLOAT in _tensor_elem_types(i.type) for i in graph_inputs(model))


def list_node_tests(max_opset):
    """Names and directories of backend node tests with a float32 input and opset <= max_opset."""
    root = os.path.join(onnx_backend_data_dir(), "node")
    tests = []
    for name in sorted(os.listdir(root)):
        model_path = os.path.join(root, name, "model.onnx")
        if not os.path.isfile(model_path):
            continue
        model = onnx.load(model_path, load_external_data=False)
        if default_opset(model) <= max_opset and has_float32_input(model):
            tests.append((name, os.path.join(root, name)))
    return tests


def quick_subset(items, count):
    """A deterministic, evenly spread subset of at most `count` items of a sorted list."""
    if len(items) <= count:
        return list(items)
    return [items[(i * len(items)) // count] for i in range(count)]


def list_light_models():
    """Paths of the backend 'light' models (real architectures with constant-filled weights)."""
    return sorted(glob.glob(os.path.join(onnx_backend_data_dir(), "light", "*.onnx")))


# --------------------------------------------------------------------------------------------
# Running mpc
# --------------------------------------------------------------------------------------------

class MpcError(Exception):
    """mpc did not exit 0 or did not write its output; the message is one line."""


def run_mpc_rewrite(mpc, input_path, output_path, target, timeout):
    """Runs `mpc rewrite IN -o OUT --target T`; returns the wall time in seconds."""
    cmd = [mpc, "rewrite", input_path, "-o", output_path, "--target", target]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise MpcError(f"mpc rewrite timed out after {timeout}s: {' '.join(cmd)}") from None
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = stderr[-1] if stderr else "(no stderr)"
        raise MpcError(f"mpc rewrite exited {proc.returncode}: {detail}")
    if not os.path.isfile(output_path):
        raise MpcError(f"mpc rewrite exited 0 but wrote no {output_path}")
    return elapsed


def run_mpc_outputs(mpc, model, feeds, out_names, tmp, timeout=120, extra_args=()):
    """`mpc run` on `model` (saved in `tmp`) with the arrays `feeds` as .npy inputs (and
    `extra_args`, such as a device); returns (returncode, [the outputs named out_names] or
    stderr)."""
    path = os.path.join(tmp, "model.onnx")
    onnx.save(model, path)
    args = [mpc, "run", path]
    for name, arr in feeds.items():
        f = os.path.join(tmp, name + ".npy")
        np.save(f, arr)
        args += ["--input", f"{name}={f}"]
    out = os.path.join(tmp, "out")
    r = subprocess.run(args + list(extra_args) + ["--outputs", out], capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        return r.returncode, r.stderr
    return 0, [np.load(os.path.join(out, n + ".npy")) for n in out_names]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def first_difference(a, b):
    """Human-readable position of the first differing byte of two byte strings."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at byte {i} of {len(a)} vs {len(b)}"
    return f"one is a prefix of the other ({len(a)} vs {len(b)} bytes)"


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

def _load_value(path, type_proto):
    """Loads one input_N.pb according to the graph input's type (as the ONNX runner does)."""
    data = read_bytes(path)
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if kind == "optional_type":
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    if kind == "map_type":
        proto = onnx.MapProto()
        proto.ParseFromString(data)
        return numpy_helper.to_dict(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return numpy_helper.to_array(proto)


def load_test_data_inputs(model, test_dir):
    """Feeds from `<test_dir>/test_data_set_0/input_N.pb`, or None when there are none."""
    data_dir = os.path.join(test_dir, "test_data_set_0")
    count = len(glob.glob(os.path.join(data_dir, "input_*.pb")))
    if count == 0:
        return None
    # input_N.pb belongs to the N-th declared input; the list may be shorter when trailing
    # optional inputs are omitted.
    inputs = list(model.graph.input)
    return {inputs[n].name: _load_value(os.path.join(data_dir, f"input_{n}.pb"), inputs[n].type)
            for n in range(count)}


def _random_tensor(rng, tensor_type):
    """Seeded random data for a declared tensor type: normal floats, zero integers, False."""
    shape = [d.dim_value if d.HasField("dim_value") else SYMBOLIC_DIM
             for d in tensor_type.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
    if _is_float_dtype(dtype):
        return rng.standard_normal(shape).astype(np.float32).astype(dtype)
    if dtype == np.bool_:
        return np.zeros(shape, dtype=np.bool_)
    if dtype.kind in "OUS":
        return np.full(shape, "", dtype=object)
    # Zeros are the one integer value that is a valid index, count or axis for any op.
    return np.zeros(shape, dtype=dtype)


def random_inputs(model, seed=INPUT_SEED):
    """Seeded random feeds for every real tensor input of the model."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in graph_inputs(model):
        if value.type.WhichOneof("value") != "tensor_type":
            raise ValueError(f"cannot make random data for non-tensor input '{value.name}'")
        feeds[value.name] = _random_tensor(rng, value.type.tensor_type)
    return feeds


def model_inputs(model, test_dir=None):
    """Recorded test inputs where the test directory has them, else seeded random inputs."""
    if test_dir is not None:
        feeds = load_test_data_inputs(model, test_dir)
        if feeds is not None:
            return feeds
    return random_inputs(model)


# --------------------------------------------------------------------------------------------
# Evaluation and comparison
# --------------------------------------------------------------------------------------------

def _low_float_types():
    """Low-precision float types whose products the kernels below compute in float32."""
    types = [np.dtype(np.float16)]
    if ml_dtypes is not None:
        types.append(np.dtype(ml_dtypes.bfloat16))
    return types


def _accumulate_in_float32(base):
    """`base` (an onnx.reference kernel class) computing fp16/bf16 inputs in float32.

    numpy already multiplies float16 matrices with float32 accumulation and one final rounding,
    but through a loop that is ~20x slower than float32 BLAS (a light VGG-19 in fp16 took
    minutes); for rank > 2 bfloat16, onnx 1.22's MatMul returns float32 and then fails its own
    output type check. Casting the low-precision inputs to float32, running the kernel and
    rounding the result once has the same semantics (a GEMM with fp32 accumulation, what fp16
    and bf16 GPU kernels do) and fixes both.
    """
    low_types = _low_float_types()

    def _run(self, *inputs, **attributes):
        low = next((x.dtype for x in inputs
                    if isinstance(x, np.ndarray) and x.dtype in low_types), None)
        if low is None:
            return base._run(self, *inputs, **attributes)
        wide = [x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype == low else x
                for x in inputs]
        outputs = base._run(self, *wide, **attributes)
        # np.dot of two vectors returns a numpy scalar, not an array: wrap it again.
        return tuple(np.asarray(y).astype(low) if isinstance(y, (np.ndarray, np.generic))
                     and y.dtype == np.float32 else y for y in outputs)

    # ReferenceEvaluator(new_ops=...) keys a replacement kernel by its class name (the op type).
    return type(base.__name__, (base,), {"_run": _run, "__doc__": _accumulate_in_float32.__doc__})


def _reference_overrides():
    """Replacement kernels passed to ReferenceEvaluator(new_ops=...): Conv and MatMul."""
    from onnx.reference.ops.op_matmul import MatMul
    from onnx.reference.ops_optimized.op_conv_optimized import Conv
    return [_accumulate_in_float32(Conv), _accumulate_in_float32(MatMul)]


def evaluate(model, feeds):
    """All graph outputs of `model` on `feeds`, computed by the ONNX reference evaluator."""
    with np.errstate(all="ignore"):
        evaluator = ReferenceEvaluator(model, new_ops=_reference_overrides())
        return evaluator.run(None, dict(feeds))


def _is_float_dtype(dtype):
    """True for numpy floats and for ml_dtypes' bfloat16 and float8 types."""
    if np.issubdtype(dtype, np.floating):
        return True
    if ml_dtypes is None:
        return False
    try:
        ml_dtypes.finfo(dtype)
        return True
    except (TypeError, ValueError):
        return False


def relative_l2(ref, got):
    """||ref - got|| / max(||ref||, tiny), in float64, over the finite entries of `ref`."""
    a = np.asarray(ref).astype(np.float64)
    b = np.asarray(got).astype(np.float64)
    finite = np.isfinite(a)
    a, b = a[finite], b[finite]
    return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(a)), np.finfo(np.float64).tiny))


def compare_values(ref, got, tol, where="output"):
    """Problems (a list of strings, empty when equal) between a reference and a candidate value.

    Float tensors must have the same dtype and shape, NaN/inf in the same places, and a
    relative L2 error of at most `tol` on the finite entries; every other value must be equal.
    """
    if isinstance(ref, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(ref):
            return [f"{where}: sequence of {len(ref)} vs {type(got).__name__} "
                    f"{len(got) if isinstance(got, (list, tuple)) else ''}".rstrip()]
        problems = []
        for i, (r, g) in enumerate(zip(ref, got)):
            problems += compare_values(r, g, tol, f"{where}[{i}]")
        return problems
    if ref is None or got is None:
        return [] if ref is None and got is None else [f"{where}: None vs a value"]
    if isinstance(ref, dict):
        return [] if ref == got else [f"{where}: maps differ"]
    ref, got = np.asarray(ref), np.asarray(got)
    if ref.dtype != got.dtype:
        return [f"{where}: dtype {got.dtype}, expected {ref.dtype}"]
    if ref.shape != got.shape:
        return [f"{where}: shape {got.shape}, expected {ref.shape}"]
    if not _is_float_dtype(ref.dtype):
        if np.array_equal(ref, got):
            return []
        mismatched = int(np.sum(ref != got)) if ref.dtype != object else "some"
        return [f"{where}: {mismatched} of {ref.size} {ref.dtype} elements differ"]
    a, b = ref.astype(np.float64), got.astype(np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return [f"{where}: NaN in different places ({int(np.isnan(a).sum())} expected, "
                f"{int(np.isnan(b).sum())} got)"]
    inf_a, inf_b = np.isinf(a), np.isinf(b)
    if not np.array_equal(inf_a, inf_b) or not np.array_equal(a[inf_a], b[inf_b]):
        return [f"{where}: inf in different places ({int(inf_a.sum())} expected, "
                f"{int(inf_b.sum())} got)"]
    err = relative_l2(a, b)
    if not err <= tol:  # also catches NaN errors
        return [f"{where}: relative L2 error {err:.3g} > {tol:g}"]
    return []


def declared_types(values):
    """(name, TypeProto bytes) of graph inputs or outputs, for interface comparisons."""
    return [(v.name, v.type.SerializeToString(deterministic=True)) for v in values]


def describe_values(values):
    """'name: type' of graph inputs or outputs, for failure messages."""
    return ", ".join(f"{v.name}: {onnx.helper.printable_type(v.type)}" for v in values)


# --------------------------------------------------------------------------------------------
# Running the suite
# --------------------------------------------------------------------------------------------

class CountingResult(unittest.TextTestResult):
    """A TextTestResult that gives each test (not subtest) one outcome and records its time.

    A test fails when it or any of its subtests fails or errs; otherwise it is skipped when it
    or any subtest was skipped; otherwise it passed.
    """

    def __init__(self, stream, descriptions, verbosity):
        super().__init__(stream, descriptions, verbosity)
        self.outcome = {}    # test id -> "passed" | "failed" | "skipped"
        self.durations = {}  # test id -> seconds
        self._started = {}

    def _record(self, test, outcome):
        test_id = getattr(test, "test_case", test).id()  # a subtest reports for its test
        rank = {"passed": 0, "skipped": 1, "failed": 2}
        if rank[outcome] >= rank[self.outcome.get(test_id, "passed")]:
            self.outcome[test_id] = outcome

    def startTest(self, test):
        self._started[test.id()] = time.perf_counter()
        super().startTest(test)

    def stopTest(self, test):
        self.durations[test.id()] = time.perf_counter() - self._started.pop(test.id())
        self._record(test, "passed")  # keeps any worse outcome recorded earlier
        super().stopTest(test)

    def addFailure(self, test, err):
        self._record(test, "failed")
        super().addFailure(test, err)

    def addError(self, test, err):
        self._record(test, "failed")
        super().addError(test, err)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._record(test, "failed")
        super().addSubTest(test, subtest, err)

    def addSkip(self, test, reason):
        self._record(test, "skipped")
        super().addSkip(test, reason)

    def count(self, outcome):
        return sum(o == outcome for o in self.outcome.values())


def summary_line(result):
    """The final line the test drivers grep: 'N passed, N failed[, N skipped]'."""
    line = f"{result.count('passed')} passed, {result.count('failed')} failed"
    if result.count("skipped"):
        line += f", {result.count('skipped')} skipped"
    return line


def print_timing(result, group_of, stream=sys.stdout, slowest=5):
    """Total and mean wall time per group of tests (group_of maps a test id to a label)."""
    groups = {}
    for test_id, seconds in result.durations.items():
        groups.setdefault(group_of(test_id), []).append(seconds)
    stream.write("timing (wall seconds):\n")
    for label in sorted(groups):
        times = groups[label]
        stream.write(f"  {label:<14} {len(times):5d} cases  total {sum(times):8.1f}"
                     f"  mean {sum(times) / len(times):6.2f}  max {max(times):6.2f}\n")
    ranked = sorted(result.durations.items(), key=lambda kv: -kv[1])[:slowest]
    for test_id, seconds in ranked:
        stream.write(f"  slow: {seconds:6.2f}s {test_id.rsplit('.', 1)[-1]}\n")


def print_skips(result, stream=sys.stdout):
    """One line per skipped test with its reason, so exclusions stay visible."""
    for test, reason in result.skipped:
        stream.write(f"skipped {test.id().rsplit('.', 1)[-1]}: {reason}\n")


def run_suite(suite, verbosity=1, group_of=None, show_skips=False):
    """Runs `suite`, prints errors, timing and the summary line; returns the exit status."""
    stream = unittest.runner._WritelnDecorator(sys.stdout)
    result = CountingResult(stream, descriptions=False, verbosity=verbosity)
    start = time.perf_counter()
    suite.run(result)
    stream.write("\n")
    result.printErrors()
    if show_skips:
        print_skips(result, stream)
    if group_of is not None:
        print_timing(result, group_of, stream)
    stream.write(f"total wall time {time.perf_counter() - start:.1f}s\n")
    stream.write(summary_line(result) + "\n")
    stream.flush()
    return 1 if result.count("failed") or result.errors or result.failures else 0

