//===- Run.cpp - `mpc run`: execute a model on a runtime backend -----------===//
//
// Loads and verifies a model, binds inputs (.npy, .npz, ONNX TensorProto .pb
// or seeded random data; sequence inputs from SequenceProto .pb or .npz,
// optional inputs from OptionalProto .pb), plans and runs it with the
// executor, prints a summary per output plus timing and memory, optionally
// writes the outputs (.npy; sequences as SequenceProto .pb, optionals as
// OptionalProto .pb) and compares against a second model run on the same
// inputs. All input problems are found before anything is run or written.
//
//===----------------------------------------------------------------------===//
#include "MemoryBudget.h"
#include "Plot.h"
#include "Profile.h"
#include "Tool.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/CudaBackend.h"
#include "mpc/Runtime/Cuda/HostPlacement.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/FallbackBackend.h"
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Runtime/ProtoIO.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Verify/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

using namespace mpc;
using namespace mpc::tool;

static const char kRunUsage[] =
    R"(usage: mpc run MODEL.onnx [options]

Runs MODEL on a runtime backend: checks that every node has a kernel, infers
all shapes, plans memory statically, runs the nodes in order and prints, per
output, its shape, dtype and a summary (min/max/mean, first values), then the
run time and memory.

options:
  --input NAME=FILE     bind input NAME to FILE: .npy, .npz member-per-input
                        (stored, not compressed) or an ONNX TensorProto .pb;
                        `--input FILE.npz` binds every member by name and
                        `--input FILE` binds the model's only input; a
                        sequence input takes an ONNX SequenceProto .pb or a
                        .npz of its elements (arr_0, arr_1, ...), an optional
                        input an ONNX OptionalProto .pb
  --random-inputs       draw seeded random data for tensor inputs not given
                        (floats uniform in [-1, 1), integers in [0, 10),
                        bools); sequence and optional inputs need --input
  --dim NAME=VALUE      value of a symbolic dimension for --random-inputs
  --seed S              random seed (default 0)
  --device cpu|cuda     backend (default cpu)
  --repeat N            run N times and report the median time (default 1)
  --profile             time every node (waiting for each one: on a GPU the
                        kernel's own time plus a synchronization) and print
                        the ten slowest, per run, after the time (with
                        --repeat N > 1, of the last N-1 runs: the first is
                        a warm-up)
  --threads N           threads for the CPU backend's matrix products
  --tf32                with --device cuda: fp32 matrix products and
                        convolutions on Tensor Cores in TF32 (10-bit
                        mantissa); default strict fp32
  --cuda-graph on|off   with --device cuda: from the second run of a plan on,
                        replay it as one captured CUDA graph (default on;
                        a plan with a CPU fallback node runs eagerly)
  --no-fallback         with --device cuda: refuse a node the CUDA backend
                        has no kernel for, instead of running it on the CPU
                        with copies around it (the default; a line
                        'cuda: N nodes; cpu fallback: M nodes (...)' says
                        what ran where)
  --max-memory SIZE     the backend holds at most SIZE bytes at once (a number
                        with an optional unit B, KiB, MiB, GiB or TiB: 12GiB,
                        1.5MiB, 4096): a plan that does not fit stops before
                        the run with one line giving its bytes (persistent +
                        plan peak + workspace) against SIZE
  --stats               print the planned bytes exactly ('memory bytes:
                        ...'), and with --device cuda the device memory in
                        use (cudaMemGetInfo) before the model and after the
                        first run
  --placement-only      with --device cuda: print that line and nothing
                        else, decided by the CUDA kernel table on this
                        machine (no GPU needed, nothing runs): the model is
                        planned for the inputs given or drawn
  --outputs DIR         write each output as DIR/NAME.npy (atomically;
                        bfloat16 outputs are written as float32), a
                        sequence output as DIR/NAME.pb (ONNX SequenceProto),
                        an optional one as DIR/NAME.pb (ONNX OptionalProto)
  --compare OTHER.onnx  also run OTHER on the same inputs (cast to its input
                        dtypes) and print per output the max abs error, the
                        relative L2 error and whether it is within tolerance
                        for OTHER's lowest float precision (fp16 1e-2, bf16
                        5e-2, f32 1e-5); sequences must have the same
                        length and are compared over all their elements,
                        optionals must both be empty or both hold a value
  --compare-device cpu|cuda
                        run OTHER (MODEL itself when --compare is not given)
                        on this backend instead of --device's: `--device cuda
                        --compare-device cpu` checks the GPU against the CPU
                        reference (with --tf32, fp32 is held to 1e-3)

--train (with --data, --batch, ...) trains a training model instead; see
'mpc run --train --help'.

exit status: 0 success, 1 bad input (one line on stderr, nothing written) or
a --compare output out of tolerance (its FAIL line on stdout; the run itself
succeeded, so --outputs are written), 2 bad usage.
)";

namespace {
struct RunArgs {
  std::string model, compare, outputs, compareDevice;
  std::vector<std::pair<std::string, std::string>> inputs; // name (may be empty), file
  llvm::StringMap<int64_t> dims;
  bool randomInputs = false;
  uint64_t seed = 0;
  unsigned repeat = 1;
  BackendChoice backend;
  bool profile = false;
  bool placementOnly = false;
  bool stats = false;
};
} // namespace

static std::string parseArgs(llvm::ArrayRef<const char *> argv, RunArgs &a) {
  ArgScanner s(argv);
  while (!s.done()) {
    std::string v;
    bool missing = false;
    llvm::StringRef cur = s.peek();
    if (s.value("--input", v, missing)) {
      if (!missing) {
        auto [name, file] = llvm::StringRef(v).split('=');
        if (file.empty())
          a.inputs.push_back({"", v});
        else
          a.inputs.push_back({name.str(), file.str()});
      }
    } else if (s.value("--dim", v, missing)) {
      auto [name, val] = llvm::StringRef(v).split('=');
      int64_t d;
      if (!missing && (name.empty() || val.getAsInteger(10, d) || d < 0))
        return "--dim takes NAME=VALUE with a non-negative VALUE, not " + quoteName(v);
      if (!missing)
        a.dims[name] = d;
    } else if (scanBackendOption(s, a.backend, v, missing)) {
      if (!v.empty())
        return v;
    } else if (s.flag("--profile")) {
      a.profile = true;
    } else if (s.flag("--placement-only")) {
      a.placementOnly = true;
    } else if (s.flag("--stats")) {
      a.stats = true;
    } else if (s.flag("--random-inputs")) {
      a.randomInputs = true;
    } else if (s.value("--seed", v, missing)) {
      if (!missing && llvm::StringRef(v).getAsInteger(10, a.seed))
        return "--seed takes an unsigned integer";
    } else if (s.value("--repeat", v, missing)) {
      if (!missing && (llvm::StringRef(v).getAsInteger(10, a.repeat) || a.repeat == 0))
        return "--repeat takes a positive integer";
    } else if (s.value("--outputs", v, missing)) {
      a.outputs = v;
    } else if (s.value("--compare-device", v, missing)) {
      if (!missing && v != "cpu" && v != "cuda")
        return "--compare-device must be cpu or cuda, not " + quoteName(v);
      a.compareDevice = v;
    } else if (s.value("--compare", v, missing)) {
      a.compare = v;
    } else {
      std::string err = s.positional(a.model, "model");
      if (!err.empty())
        return err;
      continue;
    }
    if (missing)
      return "option " + quoteName(cur.str()) + " needs a value";
  }
  if (a.model.empty())
    return "no model given";
  if (std::string err = checkBackendChoice(a.backend); !err.empty())
    return err;
  if (a.placementOnly) {
    if (std::string err = checkPlacementOnly(a.backend); !err.empty())
      return err;
    if (!a.compare.empty() || !a.compareDevice.empty() || !a.outputs.empty() || a.profile ||
        a.repeat != 1)
      return "--placement-only runs nothing: not with --compare, --compare-device, "
             "--outputs, --profile or --repeat";
    if (a.stats || a.backend.maxMemory)
      return "--placement-only runs nothing: not with --stats or --max-memory";
  }
  if (!a.compareDevice.empty() && a.compare.empty())
    a.compare = a.model; // the same model on the other backend
  return "";
}

/// The declared kind of a graph input, for messages ("an optional").
static const char *kindName(TypeKind k) {
  switch (k) {
  case TypeKind::Tensor: return "a tensor";
  case TypeKind::SparseTensor: return "a sparse tensor";
  case TypeKind::Sequence: return "a sequence";
  case TypeKind::Optional: return "an optional";
  case TypeKind::Map: return "a map";
  case TypeKind::Unknown: break;
  }
  return "of unknown type";
}

/// The graph input named `name`, or null.
static const Value *graphInput(const Graph &g, llvm::StringRef name) {
  for (const Value *v : g.inputs())
    if (v->name() == name)
      return v;
  return nullptr;
}

/// Reads the value of a sequence-typed input: a SequenceProto .pb, or a .npz
/// holding its elements as arr_0, arr_1, ...
static llvm::Expected<NamedSequence> loadSequence(const Value &v, llvm::StringRef file) {
  llvm::StringRef ext = llvm::sys::path::extension(file);
  const Type *inner = v.type.inner.get();
  if (!inner || inner->kind != TypeKind::Tensor)
    return inputError("input '{0}' is a sequence of non-tensor values; only sequences of "
                      "tensors are supported",
                      v.name());
  if (ext != ".pb" && ext != ".npz")
    return inputError("input '{0}' is a sequence: give an ONNX SequenceProto .pb or a .npz "
                      "of its elements (arr_0, arr_1, ...), not '{1}'",
                      v.name(), file);
  auto s = ext == ".pb" ? readSequencePb(file) : readSequenceNpz(file);
  if (!s)
    return llvm::make_error<InputError>("input " + quoteName(v.name()) + ": " +
                                        llvm::toString(s.takeError()));
  s->name = v.name();
  if (s->elem == DType::Undefined)
    s->elem = inner->elem; // empty: the declared element type
  return s;
}

/// Reads the value of an optional-typed input: an OptionalProto .pb holding
/// a tensor or a sequence of tensors, or nothing.
static llvm::Expected<NamedSequence> loadOptional(const Value &v, llvm::StringRef file) {
  const Type *inner = v.type.inner.get();
  bool ofSeq = inner && inner->kind == TypeKind::Sequence;
  const Type *elem = ofSeq ? inner->inner.get() : inner;
  if (!elem || elem->kind != TypeKind::Tensor)
    return inputError("input '{0}' is an optional of non-tensor values; only optional "
                      "tensors and sequences of tensors are supported",
                      v.name());
  if (llvm::sys::path::extension(file) != ".pb")
    return inputError("input '{0}' is an optional: give an ONNX OptionalProto .pb, not '{1}'",
                      v.name(), file);
  auto s = readOptionalPb(file);
  if (!s)
    return llvm::make_error<InputError>("input " + quoteName(v.name()) + ": " +
                                        llvm::toString(s.takeError()));
  s->name = v.name();
  if (!s->hasValue)
    s->ofSequence = ofSeq; // empty: the declared kind and element type
  if (s->elem == DType::Undefined)
    s->elem = elem->elem;
  return s;
}

/// Loads every --input file; names come from NAME=, the .npz member, the
/// .pb tensor name, or the model's only input. Sequence- and optional-typed
/// inputs (by their declared type) go to `seqs`.
static llvm::Error loadInputs(const RunArgs &a, const Graph &g, std::vector<NamedTensor> &out,
                              std::vector<NamedSequence> &seqs) {
  for (auto &[name, file] : a.inputs) {
    llvm::StringRef ext = llvm::sys::path::extension(file);
    if (!llvm::sys::fs::exists(file))
      return inputError("input '{0}': file '{1}' does not exist",
                        name.empty() ? file : name, file);
    std::string bind = name;
    if (bind.empty() && g.inputs().size() == 1)
      bind = g.inputs()[0]->name();
    const Value *target = bind.empty() ? nullptr : graphInput(g, bind);
    if (target &&
        (target->type.kind == TypeKind::Sequence || target->type.kind == TypeKind::Optional)) {
      auto s = target->type.kind == TypeKind::Sequence ? loadSequence(*target, file)
                                                       : loadOptional(*target, file);
      if (!s)
        return s.takeError();
      seqs.push_back(std::move(*s));
      continue;
    }
    if (target && target->type.kind != TypeKind::Tensor && target->type.isKnown())
      return inputError("input '{0}' is {1}; mpc run takes tensor, sequence and optional "
                        "inputs only",
                        bind, kindName(target->type.kind));
    if (ext == ".npz") {
      auto members = readNpzFile(file);
      if (!members)
        return members.takeError();
      for (NamedTensor &t : *members)
        if (name.empty() || t.name == name)
          out.push_back(std::move(t));
      continue;
    }
    if (ext == ".pb") {
      auto t = readTensorPb(file);
      if (!t)
        return llvm::make_error<InputError>("input " + quoteName(bind.empty() ? file : bind) +
                                            ": " + llvm::toString(t.takeError()));
      // NAME=, else the model's only input, else the TensorProto's name.
      if (!bind.empty())
        t->name = bind;
      out.push_back(std::move(*t));
      continue;
    }
    if (bind.empty())
      return inputError("--input {0}: say which input it binds (NAME=FILE)", file);
    auto t = readNpyFile(file);
    if (!t)
      return llvm::make_error<InputError>("input " + quoteName(bind) + ": " +
                                          llvm::toString(t.takeError()));
    out.push_back(NamedTensor{bind, std::move(*t)});
  }
  return llvm::Error::success();
}

/// Seeded random data for each declared input not bound yet.
static llvm::Error randomInputs(const RunArgs &a, const Graph &g,
                                std::vector<NamedTensor> &out,
                                llvm::ArrayRef<NamedSequence> seqs) {
  std::mt19937_64 rng(a.seed);
  for (const Value *v : g.inputs()) {
    if (std::any_of(out.begin(), out.end(), [&](const NamedTensor &t) { return t.name == v->name(); }))
      continue;
    if (std::any_of(seqs.begin(), seqs.end(),
                    [&](const NamedSequence &s) { return s.name == v->name(); }))
      continue;
    if (v->initializer())
      continue;
    const Type &t = v->type;
    // A sequence's length and element shapes are not declared: no default.
    if (t.kind == TypeKind::Sequence)
      return inputError("input '{0}' is a sequence, which --random-inputs cannot draw: give "
                        "it with --input {0}=FILE.pb (an ONNX SequenceProto) or FILE.npz",
                        v->name());
    if (t.kind == TypeKind::Optional)
      return inputError("input '{0}' is an optional, which --random-inputs cannot draw: give "
                        "it with --input {0}=FILE.pb (an ONNX OptionalProto)",
                        v->name());
    if (t.kind != TypeKind::Tensor && t.isKnown())
      return inputError("input '{0}' is {1}; mpc run takes tensor, sequence and optional "
                        "inputs only",
                        v->name(), kindName(t.kind));
    if (!t.isTensor() || !t.hasShape)
      return inputError("input '{0}': no declared shape to draw random data for", v->name());
    std::vector<int64_t> shape;
    for (const Dim &d : t.dims) {
      if (d.isKnown()) {
        shape.push_back(d.value);
      } else if (d.isSymbolic() && a.dims.count(d.param.ref())) {
        shape.push_back(a.dims.lookup(d.param.ref()));
      } else {
        return inputError("input '{0}': dimension '{1}' needs a value (--dim {1}=N)",
                          v->name(), d.isSymbolic() ? d.param : "?");
      }
    }
    if (runtimeElementSize(t.elem) == 0)
      return inputError("input '{0}': element type {1} is not supported", v->name(),
                        dtypeName(t.elem));
    // Drawn as doubles, then cast: both buffers must fit.
    for (DType dt : {t.elem, DType::F64})
      if (auto bytes = checkedTensorBytes(shape, dt, "input " + quoteName(v->name())); !bytes)
        return bytes.takeError();
    HostTensor f(DType::F64, shape);
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    std::uniform_int_distribution<int> small(0, 9);
    bool isInt = !isFloatingPoint(t.elem);
    for (int64_t i = 0; i < f.numElements(); ++i)
      f.data<double>()[i] = t.elem == DType::Bool ? small(rng) % 2 : isInt ? small(rng) : uni(rng);
    auto c = castHostTensor(f, t.elem);
    if (!c)
      return c.takeError();
    out.push_back(NamedTensor{v->name(), std::move(*c)});
  }
  return llvm::Error::success();
}

namespace {
/// The folders create() made (those of `path` that did not exist), removed
/// again, deepest first and only while empty, unless keep() was called.
class NewFolders {
public:
  std::error_code create(llvm::StringRef path) {
    llvm::SmallString<256> p(path);
    while (!p.empty() && !llvm::sys::fs::exists(p)) {
      made.push_back(std::string(p));
      llvm::StringRef parent = llvm::sys::path::parent_path(p);
      if (parent == p)
        break;
      p = parent;
    }
    return llvm::sys::fs::create_directories(path);
  }
  void keep() { made.clear(); }
  ~NewFolders() {
    for (const std::string &d : made)
      llvm::sys::fs::remove(d); // fails, harmlessly, on a folder that is not empty
  }

private:
  std::vector<std::string> made; ///< deepest first
};
} // namespace

std::string tool::formatBytes(uint64_t b) {
  if (b >= (uint64_t(1) << 20))
    return llvm::formatv("{0:f2} MiB", double(b) / (1 << 20)).str();
  if (b >= 1024)
    return llvm::formatv("{0:f1} KiB", double(b) / 1024).str();
  return std::to_string(b) + " B";
}

/// True for the integer element types (bool included): outputs of these are
/// printed and compared exactly, never through a double (2^63 - 1 and
/// 2^63 - 2 are the same double).
static bool isIntegerOutput(DType t) {
  return !isFloatingPoint(t) && runtimeElementSize(t) != 0;
}

namespace {
/// Element i of an integer tensor, exactly: uint64 values keep their full
/// range, every other integer type fits an int64.
struct ExactInt {
  bool isUnsigned;
  uint64_t bits; // the value (isUnsigned) or the int64's two's complement
};
} // namespace

static ExactInt exactInt(const HostTensor &h, int64_t i) {
  if (h.dtype == DType::U64)
    return {true, h.data<uint64_t>()[i]};
  return {false, static_cast<uint64_t>(h.getAsInt64(i))};
}

static bool exactLess(ExactInt a, ExactInt b) {
  bool aNeg = !a.isUnsigned && int64_t(a.bits) < 0, bNeg = !b.isUnsigned && int64_t(b.bits) < 0;
  if (aNeg != bNeg)
    return aNeg;
  return aNeg ? int64_t(a.bits) < int64_t(b.bits) : a.bits < b.bits;
}

/// |a - b|, exact (it fits a uint64 for any two int64 or uint64 values).
static uint64_t exactAbsDiff(ExactInt a, ExactInt b) {
  return exactLess(a, b) ? b.bits - a.bits : a.bits - b.bits;
}

static std::string formatExact(ExactInt v) {
  return v.isUnsigned ? std::to_string(v.bits) : std::to_string(int64_t(v.bits));
}

/// One line: `label`, dtype, shape, min/max/mean and the first values
/// (integers exactly, the mean as a double).
static void printSummary(llvm::raw_ostream &os, const llvm::Twine &label, const HostTensor &h) {
  int64_t n = h.numElements();
  bool exact = isIntegerOutput(h.dtype);
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t argMin = 0, argMax = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = h.getAsDouble(i);
    if (exact ? exactLess(exactInt(h, i), exactInt(h, argMin)) : v < mn)
      argMin = i;
    if (exact ? exactLess(exactInt(h, argMax), exactInt(h, i)) : v > mx)
      argMax = i;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
  }
  os << llvm::formatv("{0}: {1} {2}", label.str(), dtypeName(h.dtype), formatShape(h.shape));
  if (n && exact)
    os << "  min " << formatExact(exactInt(h, argMin)) << " max "
       << formatExact(exactInt(h, argMax)) << llvm::format(" mean %.6g", sum / n);
  else if (n)
    os << llvm::format("  min %.6g max %.6g mean %.6g", mn, mx, sum / n);
  os << "  first [";
  for (int64_t i = 0; i < std::min<int64_t>(n, 5); ++i) {
    os << (i ? ", " : "");
    if (exact)
      os << formatExact(exactInt(h, i));
    else
      os << llvm::format("%.6g", h.getAsDouble(i));
  }
  os << (n > 5 ? ", ...]\n" : "]\n");
}

/// Most elements of a sequence output summarized one per line.
static constexpr size_t kSummaryItems = 8;

static void printSequenceSummary(llvm::raw_ostream &os, const NamedSequence &s) {
  if (s.optional && !s.hasValue) {
    os << mpc::formatQuoted("output '{0}': optional {1}, empty\n", s.name,
                            s.ofSequence ? "sequence" : "tensor");
    return;
  }
  if (s.optional && !s.ofSequence) {
    printSummary(os, "output " + quoteName(s.name) + ": optional holding", s.items.at(0));
    return;
  }
  if (s.optional)
    os << mpc::formatQuoted("output '{0}': optional holding a ", s.name);
  else
    os << mpc::formatQuoted("output '{0}': ", s.name);
  os << llvm::formatv("sequence of {0} {1} tensor{2}\n", s.items.size(), dtypeName(s.elem),
                      s.items.size() == 1 ? "" : "s");
  for (size_t i = 0; i < s.items.size() && i < kSummaryItems; ++i)
    printSummary(os, "  element " + llvm::Twine(i), s.items[i]);
  if (s.items.size() > kSummaryItems)
    os << llvm::formatv("  ... {0} more\n", s.items.size() - kSummaryItems);
}

namespace {
/// Error sums of one compared output (over every element of a sequence).
/// Integer elements are compared exactly: `exact` is set when both sides are
/// integers, and `mismatches` counts the elements that differ.
struct ErrorSums {
  double maxAbs = 0, diff2 = 0, ref2 = 0;
  bool exact = false;
  uint64_t mismatches = 0;
};
} // namespace

static void addErrors(const HostTensor &ref, const HostTensor &got, ErrorSums &e) {
  if (isIntegerOutput(ref.dtype) && isIntegerOutput(got.dtype)) {
    e.exact = true;
    for (int64_t i = 0; i < ref.numElements(); ++i) {
      ExactInt r = exactInt(ref, i);
      uint64_t d = exactAbsDiff(r, exactInt(got, i));
      double rd = ref.getAsDouble(i);
      e.mismatches += d != 0;
      e.maxAbs = std::max(e.maxAbs, double(d));
      e.diff2 += double(d) * double(d);
      e.ref2 += rd * rd;
    }
    return;
  }
  for (int64_t i = 0; i < ref.numElements(); ++i) {
    double r = ref.getAsDouble(i), v = got.getAsDouble(i);
    // The same non-finite value on both sides (NaN and NaN, or an infinity
    // of the same sign) is a match and adds nothing to either sum: an
    // infinite reference would make every relative error 0. A non-finite
    // value on one side only is an infinite error.
    if (!std::isfinite(r) || !std::isfinite(v)) {
      bool same = (std::isnan(r) && std::isnan(v)) || r == v;
      if (!same) {
        e.maxAbs = INFINITY;
        e.diff2 = INFINITY;
      }
      continue;
    }
    double d = std::fabs(r - v);
    e.maxAbs = std::max(e.maxAbs, d);
    e.diff2 += d * d;
    e.ref2 += r * r;
  }
}

/// Lowest float precision among the values of the compared models (a rewrite
/// keeps fp32 outputs but computes in 16 bits): the --compare tolerance.
static std::pair<const char *, double> toleranceOf(const Graph &a, const Graph &b) {
  bool f16 = false, bf16 = false;
  for (const Graph *g : {&a, &b})
    forEachGraph(const_cast<Graph &>(*g), [&](Graph &sub) {
      for (const auto &v : sub.values()) {
        f16 |= v->type.tensorElemType() == DType::F16;
        bf16 |= v->type.tensorElemType() == DType::BF16;
      }
    });
  if (bf16)
    return {"bf16", 5e-2};
  if (f16)
    return {"fp16", 1e-2};
  return {"f32", 1e-5};
}

/// `--profile`: the nodes' mean time per run, slowest first (ten of them).
/// `runs` is the number of runs timed; `warmup` holds the first run's node
/// times (library and module loading, algorithm searches) to leave out, or
/// is empty.
static void printProfile(llvm::raw_ostream &os, const Executor &ex, unsigned runs,
                         llvm::ArrayRef<double> warmup) {
  std::vector<double> secs(ex.nodeSeconds().begin(), ex.nodeSeconds().end());
  for (size_t i = 0; i < secs.size() && i < warmup.size(); ++i)
    secs[i] = std::max(0.0, secs[i] - warmup[i]);
  if (secs.empty()) {
    os << "profile: none (dynamic mode runs node by node without the static schedule)\n";
    return;
  }
  double total = 0;
  std::vector<size_t> order;
  for (size_t i = 0; i < secs.size(); ++i) {
    total += secs[i];
    order.push_back(i);
  }
  // Slowest first; ties in schedule order, so the output is deterministic in form.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return secs[x] > secs[y]; });
  os << llvm::formatv("profile: {0} node(s), {1:f3} ms of node time per run", secs.size(),
                      1e3 * total / runs);
  if (!warmup.empty())
    os << llvm::formatv(" (the last {0} run{1}; the first, a warm-up, is left out)", runs,
                        runs == 1 ? "" : "s");
  os << "\n";
  for (size_t k = 0; k < order.size() && k < 10; ++k) {
    size_t i = order[k];
    os << llvm::formatv("  {0,10:f4} ms {1,6:f2}%  ", 1e3 * secs[i] / runs,
                        total > 0 ? 100.0 * secs[i] / total : 0.0)
       << describeNode(*ex.scheduledNodes()[i]) << "\n";
  }
  printTimeByOpType(os, ex.scheduledNodes(), secs, runs, "run",
                    warmup.empty() ? "every run" : "the warm-up left out");
}

namespace {
/// One loaded model ready to run.
struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Executor> exec;
};
} // namespace

static llvm::Expected<Loaded> loadForRun(llvm::StringRef path, Backend &backend) {
  Loaded l;
  auto m = loadModel(path);
  if (!m)
    return m.takeError();
  l.model = std::move(*m);
  if (llvm::Error err = verifyModel(*l.model))
    return inputError("{0}: {1}", path, llvm::toString(std::move(err)));
  auto ex = Executor::create(*l.model, backend);
  if (!ex)
    return inputError("{0}: {1}", path, llvm::toString(ex.takeError()));
  l.exec = std::move(*ex);
  return std::move(l);
}

/// Inputs for the compared model: matched by name (else by position) and
/// cast to its declared dtypes.
static llvm::Expected<std::vector<NamedTensor>>
inputsFor(const Graph &g, const Graph &ref, const std::vector<NamedTensor> &inputs) {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *v = g.inputs()[i];
    const NamedTensor *src = nullptr;
    for (const NamedTensor &t : inputs)
      if (t.name == v->name())
        src = &t;
    if (!src && i < ref.inputs().size())
      for (const NamedTensor &t : inputs)
        if (t.name == ref.inputs()[i]->name())
          src = &t;
    if (!src)
      continue; // reported as missing by the executor (or has a default)
    DType want = v->type.elem == DType::Undefined ? src->tensor.dtype : v->type.elem;
    auto c = castHostTensor(src->tensor, want);
    if (!c)
      return c.takeError();
    out.push_back(NamedTensor{v->name(), std::move(*c)});
  }
  return out;
}

/// The same for sequence and optional inputs: elements cast to the declared
/// element type.
static llvm::Expected<std::vector<NamedSequence>>
sequencesFor(const Graph &g, const Graph &ref, const std::vector<NamedSequence> &seqs) {
  std::vector<NamedSequence> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *v = g.inputs()[i];
    const NamedSequence *src = nullptr;
    for (const NamedSequence &s : seqs)
      if (s.name == v->name())
        src = &s;
    if (!src && i < ref.inputs().size())
      for (const NamedSequence &s : seqs)
        if (s.name == ref.inputs()[i]->name())
          src = &s;
    if (!src)
      continue;
    DType want = v->type.tensorElemType();
    if (want == DType::Undefined)
      want = src->elem;
    NamedSequence c = *src;
    c.name = v->name();
    c.elem = want;
    c.items.clear();
    for (const HostTensor &t : src->items) {
      auto e = castHostTensor(t, want);
      if (!e)
        return e.takeError();
      c.items.push_back(std::move(*e));
    }
    out.push_back(std::move(c));
  }
  return out;
}

/// Where --outputs DIR puts output `name`: DIR/NAME.npy, or DIR/NAME.pb for
/// a sequence (ONNX SequenceProto) or an optional (OptionalProto). Characters
/// other than letters, digits and `_-.` become `_`.
static std::string outputFile(llvm::StringRef dir, llvm::StringRef name, bool sequence) {
  std::string file = name.str();
  for (char &c : file)
    if (!llvm::isAlnum(c) && c != '_' && c != '-' && c != '.')
      c = '_';
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file + (sequence ? ".pb" : ".npy"));
  return std::string(path);
}

bool tool::scanBackendOption(ArgScanner &s, BackendChoice &c, std::string &err,
                             bool &missing) {
  std::string v;
  if (s.value("--device", v, missing)) {
    if (!missing && v != "cpu" && v != "cuda")
      err = "--device must be cpu or cuda, not " + quoteName(v);
    c.device = v;
  } else if (s.value("--threads", v, missing)) {
    if (!missing && (llvm::StringRef(v).getAsInteger(10, c.threads) || c.threads <= 0))
      err = "--threads takes a positive integer";
  } else if (s.value("--cuda-graph", v, missing)) {
    if (!missing && v != "on" && v != "off")
      err = "--cuda-graph must be on or off, not " + quoteName(v);
    c.cudaGraph = v != "off";
  } else if (s.flag("--tf32")) {
    c.tf32 = true;
  } else if (s.flag("--no-fallback")) {
    c.fallback = false;
  } else if (s.value("--max-memory", v, missing)) {
    if (!missing)
      err = parseByteSize(v, c.maxMemory);
  } else {
    return false;
  }
  return true;
}

std::string tool::checkBackendChoice(const BackendChoice &c) {
  if (c.device == "cuda")
    return "";
  if (c.tf32)
    return "--tf32 applies to --device cuda only";
  if (!c.fallback)
    return "--no-fallback applies to --device cuda only";
  if (!c.cudaGraph)
    return "--cuda-graph applies to --device cuda only";
  return "";
}

std::string tool::checkPlacementOnly(const BackendChoice &c) {
  if (c.device != "cuda")
    return "--placement-only applies to --device cuda only";
  if (!c.fallback)
    return "--placement-only prints the CPU fallback's placement: not with --no-fallback";
  return "";
}

std::unique_ptr<Backend> tool::createPlacementBackend() {
  return std::make_unique<FallbackBackend>(cuda::createHostPlacementBackend(),
                                           std::make_unique<CpuBackend>());
}

llvm::Expected<std::unique_ptr<Backend>> tool::createRunBackend(const BackendChoice &c,
                                                               bool placementOnly) {
  if (placementOnly) // the CUDA table's decisions on the host: no plugin, no GPU
    return createPlacementBackend();
  return createBackend(c);
}

llvm::Expected<std::unique_ptr<Backend>> tool::createBackend(const BackendChoice &c,
                                                            llvm::StringRef option) {
  llvm::StringRef device = c.device;
  std::unique_ptr<Backend> backend;
  if (device == "cuda") {
    CudaBackendOptions options;
    options.tf32 = c.tf32;
    options.cudaGraph = c.cudaGraph;
    auto b = loadCudaBackend(options, option);
    if (!b)
      return b.takeError();
    backend = std::move(*b);
  } else {
    backend = std::make_unique<CpuBackend>(c.threads);
  }
  if (llvm::Error err = backend->checkAvailable())
    return inputError("{0} {1}: {2}", option, device, llvm::toString(std::move(err)));
  if (c.fallback && device != "cpu")
    backend = std::make_unique<FallbackBackend>(std::move(backend),
                                                std::make_unique<CpuBackend>(c.threads));
  return std::move(backend);
}

int tool::runRun(llvm::ArrayRef<const char *> args, const char *const *envp) {
  // Training is its own command line (Train.cpp).
  for (const char *a : args)
    if (llvm::StringRef(a) == "--train")
      return runTrain(args, envp);
  if (wantsHelp(args)) {
    llvm::outs() << kRunUsage;
    return Ok;
  }
  RunArgs a;
  std::string usage = parseArgs(args, a);
  if (!usage.empty())
    return usageError("run", usage);

  std::unique_ptr<Backend> backend;
  if (llvm::Error err = createRunBackend(a.backend, a.placementOnly).moveInto(backend))
    return fail(std::move(err));
  // --stats on a GPU: the device memory in use before anything of the model.
  DeviceMemorySample memBefore, memAfter;
  if (a.stats)
    memBefore = sampleDeviceMemory(*backend);

  FilePlan files;
  files.read(a.model, "model");
  files.read(a.compare, "compared model");
  for (auto &[name, file] : a.inputs)
    files.read(file, "--input file");
  files.writeFolder(a.outputs, "--outputs folder");
  if (llvm::Error err = files.check())
    return fail(std::move(err));

  auto main = loadForRun(a.model, *backend);
  if (!main)
    return fail(main.takeError());
  const Graph &g = *main->model->graph;
  files.readExternalData(*main->model, a.model);
  if (!a.outputs.empty())
    for (const Value *v : g.outputs()) {
      // The declared kind says .npy or .pb; an unknown one may be either.
      TypeKind k = v->type.kind;
      if (k != TypeKind::Sequence && k != TypeKind::Optional)
        files.write(outputFile(a.outputs, v->name(), false), "--outputs file");
      if (k != TypeKind::Tensor)
        files.write(outputFile(a.outputs, v->name(), true), "--outputs file");
    }
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  std::vector<NamedTensor> inputs;
  std::vector<NamedSequence> seqInputs;
  if (llvm::Error err = loadInputs(a, g, inputs, seqInputs))
    return fail(std::move(err));
  if (a.randomInputs)
    if (llvm::Error err = randomInputs(a, g, inputs, seqInputs))
      return fail(std::move(err));
  if (llvm::Error err = main->exec->plan(inputs, seqInputs))
    return fail(std::move(err));
  if (a.placementOnly) {
    // A dynamic plan prepares while it runs: there is no placement to print.
    if (main->exec->isDynamic())
      return fail(inputError("--placement-only: {0} runs in dynamic mode (control flow or "
                             "data-dependent shapes), which places nodes as it runs them",
                             quoteName(a.model)));
    llvm::outs() << backend->placementLine() << "\n";
    return Ok;
  }

  // The compared model gets its own backend so that the memory figures
  // printed are those of MODEL alone.
  std::unique_ptr<Backend> otherBackend; // outlives `other`, which uses it
  Loaded other;
  std::vector<NamedTensor> otherInputs;
  std::vector<NamedSequence> otherSeqInputs;
  if (!a.compare.empty()) {
    BackendChoice otherChoice = a.backend;
    if (!a.compareDevice.empty())
      otherChoice.device = a.compareDevice;
    otherChoice.tf32 = a.backend.tf32 && otherChoice.device == "cuda";
    auto ob = createBackend(otherChoice,
                            a.compareDevice.empty() ? "--device" : "--compare-device");
    if (!ob)
      return fail(ob.takeError());
    otherBackend = std::move(*ob);
    auto o = loadForRun(a.compare, *otherBackend);
    if (!o)
      return fail(o.takeError());
    other = std::move(*o);
    files.readExternalData(*other.model, a.compare);
    if (llvm::Error err = files.check())
      return fail(std::move(err));
    auto in = inputsFor(*other.model->graph, g, inputs);
    if (!in)
      return fail(in.takeError());
    otherInputs = std::move(*in);
    auto seqIn = sequencesFor(*other.model->graph, g, seqInputs);
    if (!seqIn)
      return fail(seqIn.takeError());
    otherSeqInputs = std::move(*seqIn);
    if (llvm::Error err = other.exec->plan(otherInputs, otherSeqInputs))
      return fail(llvm::Twine(a.compare) + ": " + llvm::toString(std::move(err)));
  }
  // Both plans fit --max-memory, or nothing runs.
  PlannedMemory need = plannedMemory(*backend, *main->exec);
  if (llvm::Error err = applyMemoryBudget(*backend, need, a.backend.maxMemory,
                                          "the run of", a.model, "plan peak"))
    return fail(std::move(err));
  if (otherBackend)
    if (llvm::Error err = applyMemoryBudget(
            *otherBackend, plannedMemory(*otherBackend, *other.exec), a.backend.maxMemory,
            "the run of", a.compare, "plan peak"))
      return fail(std::move(err));
  // Made before the run, so that a folder that cannot be made is said before
  // any work; removed again (the folders this run made, while still empty)
  // when the run fails, so that a failed run leaves nothing behind.
  NewFolders outputFolders;
  if (!a.outputs.empty()) {
    if (auto ec = outputFolders.create(a.outputs))
      return fail("cannot create " + quoteName(a.outputs) + ": " + ec.message());
  }
  files.removeStaleTemporaries();

  if (a.profile)
    main->exec->setProfiling(true);
  std::vector<double> times, warmupSeconds;
  std::vector<NamedTensor> outputs;
  // Per output: set when it is a sequence (its entry in `outputs` is empty).
  std::vector<std::optional<NamedSequence>> seqOutputs;
  for (unsigned r = 0; r < a.repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto outs = main->exec->run(inputs, seqInputs, seqOutputs);
    auto t1 = std::chrono::steady_clock::now();
    if (!outs)
      return fail(outs.takeError());
    times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    outputs = std::move(*outs);
    if (a.stats && r == 0)
      memAfter = sampleDeviceMemory(*backend);
    // The first run pays one-time costs (a GPU's module loads and library
    // initialisation): with more runs to come, --profile leaves it out.
    if (a.profile && r == 0 && a.repeat > 1)
      warmupSeconds.assign(main->exec->nodeSeconds().begin(), main->exec->nodeSeconds().end());
  }
  std::sort(times.begin(), times.end());
  llvm::raw_ostream &os = llvm::outs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (seqOutputs[i])
      printSequenceSummary(os, *seqOutputs[i]);
    else
      printSummary(os, "output " + quoteName(outputs[i].name), outputs[i].tensor);
  }
  std::string placement = backend->placementLine();
  if (!placement.empty())
    os << placement << "\n";
  const MemoryStats &ms = main->exec->memoryStats();
  os << llvm::formatv("time: median {0:f3} ms over {1} run{2}\n", times[times.size() / 2],
                      a.repeat, a.repeat == 1 ? "" : "s");
  if (a.profile)
    printProfile(os, *main->exec, a.repeat > 1 ? a.repeat - 1 : 1, warmupSeconds);
  if (main->exec->isDynamic())
    os << llvm::formatv("memory: dynamic mode (control flow or data-dependent shapes): "
                        "one allocation per value, no static plan; persistent {0}, "
                        "actual peak {1}\n",
                        formatBytes(ms.persistent), formatBytes(backend->peakAllocatedBytes()));
  else
    os << llvm::formatv("memory: planned peak {0}, no-reuse sum {1}, lower bound {2}, "
                      "persistent {3}, actual peak {4}\n",
                      formatBytes(ms.plannedPeak), formatBytes(ms.noReuseSum),
                      formatBytes(ms.lowerBound), formatBytes(ms.persistent),
                        formatBytes(backend->peakAllocatedBytes()));
  if (a.stats) {
    os << plannedMemoryLine(*backend, need, "plan peak") << "\n";
    std::string device = deviceMemoryLine(*backend, memBefore, memAfter, need, "the first run");
    if (!device.empty())
      os << device << "\n";
  }

  int status = Ok;
  if (!a.compare.empty()) {
    std::vector<std::optional<NamedSequence>> otherSeqs;
    auto outs = other.exec->run(otherInputs, otherSeqInputs, otherSeqs);
    if (!outs)
      return fail(llvm::Twine(a.compare) + ": " + llvm::toString(outs.takeError()));
    auto [tolName, tol] = toleranceOf(g, *other.model->graph);
    // TF32 products carry a 10-bit mantissa: fp32 is held to 1e-3 then.
    if (a.backend.tf32 && tol < 1e-3) {
      tolName = "tf32";
      tol = 1e-3;
    }
    if (!a.compareDevice.empty())
      os << mpc::formatQuoted("compare: '{0}' on {1} against '{2}' on {3}\n", a.model, a.backend.device,
                              a.compare, a.compareDevice);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const NamedTensor &ref = outputs[i];
      size_t k = outs->size();
      for (size_t j = 0; j < outs->size(); ++j)
        if ((*outs)[j].name == ref.name)
          k = j;
      if (k == outs->size() && i < outs->size())
        k = i;
      const NamedTensor *got = k < outs->size() ? &(*outs)[k] : nullptr;
      const std::optional<NamedSequence> &refSeq = seqOutputs[i];
      const std::optional<NamedSequence> *gotSeq = got ? &otherSeqs[k] : nullptr;
      ErrorSums e;
      std::string what;
      if (refSeq || (gotSeq && *gotSeq)) {
        // Sequences: the same length, then element by element; optionals:
        // both empty, or their values compared the same way.
        std::string bad;
        if (!got || !refSeq || !*gotSeq)
          bad = llvm::formatv("a sequence in one model, {0} in the other",
                              got ? "a tensor" : "missing")
                    .str();
        else if (refSeq->optional != (*gotSeq)->optional ||
                 refSeq->ofSequence != (*gotSeq)->ofSequence)
          bad = "an optional in one model, not in the other";
        else if (refSeq->hasValue != (*gotSeq)->hasValue)
          bad = "an empty optional in one model, a value in the other";
        else if (refSeq->items.size() != (*gotSeq)->items.size())
          bad = llvm::formatv("sequence length differs ({0} vs {1})", refSeq->items.size(),
                              (*gotSeq)->items.size())
                    .str();
        for (size_t j = 0; bad.empty() && j < refSeq->items.size(); ++j) {
          const HostTensor &r = refSeq->items[j], &v = (*gotSeq)->items[j];
          if (r.shape != v.shape)
            bad = llvm::formatv("element {0}: shape differs ({1} vs {2})", j,
                                formatShape(r.shape), formatShape(v.shape))
                      .str();
          else
            addErrors(r, v, e);
        }
        if (!bad.empty()) {
          os << mpc::formatQuoted("compare '{0}': {1}: FAIL\n", ref.name, bad);
          status = InputFailure;
          continue;
        }
        what = refSeq->optional && !refSeq->hasValue ? " (empty optional)"
               : refSeq->optional && !refSeq->ofSequence
                   ? " (optional)"
                   : llvm::formatv(" ({0}sequence of {1})", refSeq->optional ? "optional " : "",
                                   refSeq->items.size())
                         .str();
      } else {
        if (!got || got->tensor.shape != ref.tensor.shape) {
          os << mpc::formatQuoted("compare '{0}': shape differs ({1} vs {2}): FAIL\n", ref.name,
                                  formatShape(ref.tensor.shape),
                                  got ? formatShape(got->tensor.shape) : "missing");
          status = InputFailure;
          continue;
        }
        addErrors(ref.tensor, got->tensor, e);
      }
      double rel = std::isinf(e.diff2) ? INFINITY
                   : e.ref2 > 0        ? std::sqrt(e.diff2 / e.ref2)
                                       : std::sqrt(e.diff2);
      // Integer outputs must be equal: a relative error rounds a difference
      // of 1 between values near 2^63 to 0.
      bool ok = e.exact ? e.mismatches == 0 : rel <= tol;
      if (e.exact)
        os << mpc::formatQuoted("compare '{0}'{1}: max abs error {2:e}, relative L2 error {3:e}, "
                                "{4} element(s) differ, tolerance 0 (integers): {5}\n",
                                ref.name, what, e.maxAbs, rel, e.mismatches, ok ? "ok" : "FAIL");
      else
        os << mpc::formatQuoted("compare '{0}'{1}: max abs error {2:e}, relative L2 error {3:e}, "
                                "tolerance {4} ({5}): {6}\n",
                                ref.name, what, e.maxAbs, rel, llvm::format("%g", tol), tolName,
                                ok ? "ok" : "FAIL");
      if (!ok)
        status = InputFailure;
    }
  }

  if (!a.outputs.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const NamedTensor &t = outputs[i];
      std::string path = outputFile(a.outputs, t.name, bool(seqOutputs[i]));
      llvm::Error err = !seqOutputs[i] ? writeNpyFile(path, t.tensor)
                        : seqOutputs[i]->optional
                            ? writeFileAtomically(path, serializeOptionalPb(*seqOutputs[i]))
                            : writeFileAtomically(path, serializeSequencePb(*seqOutputs[i]));
      if (err)
        return fail(std::move(err));
    }
    outputFolders.keep();
  }
  return status;
}
