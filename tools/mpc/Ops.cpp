//===- Ops.cpp - `mpc ops`: the op support matrix ---------------------------===//
//
// One row per op known to the AMP default lists or the CPU kernel table:
// the AMP class (f16 defaults; the bf16 class where it differs) with the
// list's reason, the dtypes the CPU kernel rows accept for input 0 with
// their opset ranges, and the same for the CUDA backend's kernel table
// (runtime/cuda/CudaKernelTable.cpp: what a CUDA build runs on the GPU; the
// table is host code, so every build lists it). Rows are sorted by op name;
// the output is deterministic.
// `--op NAME` prints one op's facts from every table with their locations.
// docs/gen_ops.py reads `mpc ops --json` to generate docs/ops.md.
//
//===----------------------------------------------------------------------===//
#include "Tool.h"
#include "mpc/IR/DType.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Passes/AmpLists.h"
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::tool;

static const char kOpsUsage[] =
    R"(usage: mpc ops [--op NAME [--opset N]] [--json]

Prints one row per op known to the AMP default lists or the CPU kernel
table: the AMP class (allow/infer/deny/clear/unlisted) of the f16 defaults
with the list's reason (for an unlisted op: why it is on no list), the CPU
kernel's input dtypes and opset range, and the same for the CUDA kernel
table (what a build with the CUDA backend runs on the GPU; listed by every
build). Sorted by op.

With --op, prints everything mpc knows about one op, each fact with the
source file (and line) that defines it: its op registry rows (opset range,
shape function, attribute parser, in-place policy, value-dependent shape,
cost class), its AMP class, whether it has a gradient rule, and its CPU and
CUDA kernels with their dtypes (a CUDA kernel with the function and file
that prepare it). With --opset, also the schema mpc checks the op's nodes
against in a model importing that opset of the op's domain: its version,
formal inputs and outputs, the element types each type parameter admits,
and its attributes; "exact" when it is the op's schema at that version,
"fallback" when the opset is newer than any schema mpc has of the op (other
domains' opsets newer than libonnx 1.12's) and nodes are checked against
an older version, types and attributes unchecked (`mpc rewrite -v` notes it).

options:
  --op NAME  one op: "Gemm", or "domain::Op" for another domain
             ("ai.mpc.training::ConvGrad")
  --opset N  with --op: the op's schema at opset N of its domain
  --json     print JSON instead of text
  --help     show this help
)";

namespace {
struct CpuRow {
  int64_t minOpset, maxOpset;
  std::vector<std::string> dtypes;
};

struct OpRow {
  std::string op;     ///< "domain::Op" for non-default domains, else "Op"
  std::string domain; ///< "" for the default domain
  std::string opType;
  AmpClass f16 = AmpClass::Unlisted, bf16 = AmpClass::Unlisted;
  std::string reason; ///< reason of the f16 entry, or why it is unlisted
  std::vector<CpuRow> cpu;
  std::vector<CpuRow> cuda; ///< the CUDA kernel table's rows (no function names)
};
} // namespace

static std::vector<std::string> dtypeNames(DTypeSet set) {
  std::vector<std::string> names;
  for (unsigned t = 0; t <= kMaxDType && t < 32; ++t)
    if (set & (DTypeSet(1) << t))
      names.push_back(dtypeName(DType(t)).str());
  return names;
}

static std::string join(const std::vector<std::string> &v, llvm::StringRef sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i)
      s += sep.str();
    s += v[i];
  }
  return s;
}

static std::string opsetRange(const CpuRow &r) {
  if (r.maxOpset >= 1000)
    return std::to_string(r.minOpset) + "+";
  if (r.minOpset == r.maxOpset)
    return std::to_string(r.minOpset);
  return std::to_string(r.minOpset) + "-" + std::to_string(r.maxOpset);
}

static std::string kernelText(const std::vector<CpuRow> &rows) {
  if (rows.empty())
    return "none";
  std::vector<std::string> parts;
  for (const CpuRow &c : rows)
    parts.push_back(join(c.dtypes, ",") + " (opset " + opsetRange(c) + ")");
  return join(parts, "; ");
}

static std::string cpuText(const OpRow &r) { return kernelText(r.cpu); }

static llvm::json::Array rowsJson(const std::vector<CpuRow> &rows) {
  llvm::json::Array out;
  for (const CpuRow &c : rows) {
    llvm::json::Array dts;
    for (const std::string &d : c.dtypes)
      dts.push_back(d);
    out.push_back(llvm::json::Object{
        {"min_opset", c.minOpset}, {"max_opset", c.maxOpset}, {"dtypes", std::move(dts)}});
  }
  return out;
}
static std::string cudaText(const OpRow &r) { return kernelText(r.cuda); }

static llvm::StringRef cudaKindName(cuda::CudaKernelKind k) {
  switch (k) {
  case cuda::CudaKernelKind::Unary:
    return "unary launcher";
  case cuda::CudaKernelKind::Predicate:
    return "predicate launcher";
  case cuda::CudaKernelKind::Binary:
    return "broadcast binary launcher";
  case cuda::CudaKernelKind::Compare:
    return "broadcast compare launcher";
  case cuda::CudaKernelKind::Cast:
    return "cast launcher";
  case cuda::CudaKernelKind::MatMul:
  case cuda::CudaKernelKind::Gemm:
  case cuda::CudaKernelKind::FusedMatMul:
    return "cuBLASLt";
  case cuda::CudaKernelKind::GemmBiasAct:
    return "cuBLASLt epilogue";
  case cuda::CudaKernelKind::Conv:
  case cuda::CudaKernelKind::ConvTranspose:
  case cuda::CudaKernelKind::ConvGrad:
    return "cuDNN";
  case cuda::CudaKernelKind::Pool:
  case cuda::CudaKernelKind::PoolGrad:
  case cuda::CudaKernelKind::GlobalPool:
  case cuda::CudaKernelKind::GlobalPoolGrad:
    return "window launcher";
  case cuda::CudaKernelKind::BatchNorm:
    return "batch-norm launcher";
  // Softmax, normalization and reductions.
  case cuda::CudaKernelKind::Softmax:
  case cuda::CudaKernelKind::SoftmaxGrad:
  case cuda::CudaKernelKind::Norm:
  case cuda::CudaKernelKind::NormGrad:
  case cuda::CudaKernelKind::Reduce:
  case cuda::CudaKernelKind::BiasGrad:
    return "slice launcher";
  case cuda::CudaKernelKind::ActivationGrad:
    return "gradient launcher";
  // Data movement.
  case cuda::CudaKernelKind::DataMove:
    return "data-movement launcher";
  // Losses.
  case cuda::CudaKernelKind::Loss:
    return "loss launcher";
  case cuda::CudaKernelKind::Clip:
    return "clip launcher";
  case cuda::CudaKernelKind::BatchNormGrad:
    return "batch-norm launcher";
  case cuda::CudaKernelKind::StatNorm:
    return "slice launcher";
  case cuda::CudaKernelKind::TopK:
    return "selection launcher";
  // Recurrent ops.
  case cuda::CudaKernelKind::Recurrent:
  case cuda::CudaKernelKind::LstmGrad:
  case cuda::CudaKernelKind::GruGrad:
    return "cuBLASLt + gate launcher";
  // Index, logic and shape ops.
  case cuda::CudaKernelKind::Logical:
  case cuda::CudaKernelKind::LogicalNot:
  case cuda::CudaKernelKind::ArgReduce:
  case cuda::CudaKernelKind::ShapeOf:
  case cuda::CudaKernelKind::Range:
  case cuda::CudaKernelKind::Trilu:
  case cuda::CudaKernelKind::Scan:
  case cuda::CudaKernelKind::GatherElements:
  case cuda::CudaKernelKind::Fill:
  case cuda::CudaKernelKind::OneHot:
    return "index launcher";
  // Data-movement index ops (MoveOps.cpp).
  case cuda::CudaKernelKind::BlockMove:
  case cuda::CudaKernelKind::GatherND:
  case cuda::CudaKernelKind::Scatter:
  case cuda::CudaKernelKind::ReverseSequence:
  case cuda::CudaKernelKind::EyeLike:
  case cuda::CudaKernelKind::Compress:
  case cuda::CudaKernelKind::NonZero:
    return "data-movement launcher";
  // Transformer ops.
  case cuda::CudaKernelKind::Rotary:
    return "rotary launcher";
  case cuda::CudaKernelKind::Einsum:
    return "cuBLASLt + gather launcher";
  case cuda::CudaKernelKind::Attention:
    return "cuBLASLt + softmax launcher";
  // Image ops (Resize, LRN).
  case cuda::CudaKernelKind::Image:
    return "image launcher";
  // Fused optimizer steps.
  case cuda::CudaKernelKind::OptimizerStep:
    return "optimizer-step launcher";
  case cuda::CudaKernelKind::MultiTensorUnscale:
    return "multi-tensor launcher";
  }
  return "?";
}

static constexpr const char *kCudaTableFile = "runtime/cuda/CudaKernelTable.cpp";

/// The function that prepares (and so launches) a CUDA row of this kind and
/// the file that defines it: the family's entry point that
/// runtime/cuda/CudaOps.cpp dispatches the kind to. A new kind adds a case
/// here; tests/tools/test_ops.py fails for a kind without one and checks
/// that the file defines the function.
struct CudaLauncher {
  const char *function = nullptr;
  const char *file = nullptr;
};
static CudaLauncher cudaLauncherOf(cuda::CudaKernelKind k) {
  using K = cuda::CudaKernelKind;
  switch (k) {
  case K::Unary:
  case K::Predicate:
  case K::Binary:
  case K::Compare:
  case K::Cast:
    return {"prepareElementwiseOp", "runtime/cuda/ElementwiseOps.cpp"};
  case K::MatMul:
  case K::Gemm:
  case K::FusedMatMul:
  case K::GemmBiasAct:
    return {"prepareGemmOp", "runtime/cuda/GemmOps.cpp"};
  case K::Conv:
  case K::ConvTranspose:
  case K::ConvGrad:
    return {"prepareConvOp", "runtime/cuda/ConvOps.cpp"};
  case K::Pool:
  case K::PoolGrad:
  case K::GlobalPool:
  case K::GlobalPoolGrad:
    return {"preparePoolOp", "runtime/cuda/PoolOps.cpp"};
  case K::BatchNorm: // training_mode = 1: prepareBatchNormTrainOp (BatchNormTrainOps.cpp)
    return {"prepareBatchNormOp", "runtime/cuda/BatchNormOps.cpp"};
  case K::Softmax:
  case K::SoftmaxGrad:
  case K::Norm:
  case K::NormGrad:
    return {"prepareNormOp", "runtime/cuda/NormOps.cpp"};
  case K::Reduce:
  case K::BiasGrad:
    return {"prepareReduceOp", "runtime/cuda/ReduceOps.cpp"};
  case K::ActivationGrad:
    return {"prepareGradOp", "runtime/cuda/GradOps.cpp"};
  case K::DataMove:
    return {"prepareDataOp", "runtime/cuda/DataOps.cpp"};
  case K::Loss:
    return {"prepareLossOp", "runtime/cuda/LossOps.cpp"};
  case K::Clip:
    return {"prepareClipOp", "runtime/cuda/ClipOps.cpp"};
  case K::BatchNormGrad:
    return {"prepareBatchNormTrainOp", "runtime/cuda/BatchNormTrainOps.cpp"};
  case K::StatNorm:
    return {"prepareStatNormOp", "runtime/cuda/StatNormOps.cpp"};
  case K::TopK:
    return {"prepareTopKOp", "runtime/cuda/TopKOps.cpp"};
  case K::Recurrent:
    return {"prepareRecurrentOp", "runtime/cuda/RnnOps.cpp"};
  case K::LstmGrad:
    return {"prepareLstmGradOp", "runtime/cuda/RnnOps.cpp"};
  case K::Logical:
  case K::LogicalNot:
  case K::ArgReduce:
  case K::ShapeOf:
  case K::Range:
  case K::Trilu:
  case K::Scan:
  case K::GatherElements:
  case K::Fill:
  case K::OneHot:
    return {"prepareIndexOp", "runtime/cuda/IndexOps.cpp"};
  case K::GruGrad:
    return {"prepareGruGradOp", "runtime/cuda/RnnOps.cpp"};
  case K::BlockMove:
  case K::GatherND:
  case K::Scatter:
  case K::ReverseSequence:
  case K::EyeLike:
  case K::Compress:
  case K::NonZero:
    return {"prepareMoveOp", "runtime/cuda/MoveOps.cpp"};
  case K::Rotary:
    return {"prepareRotaryOp", "runtime/cuda/RotaryOps.cpp"};
  case K::Einsum:
    return {"prepareEinsumOp", "runtime/cuda/EinsumOps.cpp"};
  case K::Attention:
    return {"prepareAttentionOp", "runtime/cuda/AttentionOps.cpp"};
  case K::Image: // Pad's edge/reflect/wrap modes are DataMove rows prepared here too
    return {"prepareImageOp", "runtime/cuda/ImageOps.cpp"};
  case K::OptimizerStep:
    return {"prepareOptimizerStepOp", "runtime/cuda/OptimizerOps.cpp"};
  case K::MultiTensorUnscale:
    return {"prepareUnscaleOp", "runtime/cuda/UnscaleOps.cpp"};
  }
  return {};
}

/// "file:line" of a shape function or parser, or why there is none.
static std::string definedAtText(const SourceLocation &where) {
  return where.file ? where.text() : "location unknown: missing from its list";
}

static std::vector<OpRow> collectRows() {
  std::map<std::string, OpRow> rows;
  auto rowFor = [&](llvm::StringRef domain, llvm::StringRef opType) -> OpRow & {
    std::string dom = domain == "ai.onnx" ? "" : domain.str();
    std::string key = dom.empty() ? opType.str() : dom + "::" + opType.str();
    OpRow &r = rows[key];
    if (r.op.empty()) {
      r.op = key;
      r.domain = dom;
      r.opType = opType.str();
    }
    return r;
  };

  AmpLists f16 = AmpLists::defaults(DType::F16);
  AmpLists bf16 = AmpLists::defaults(DType::BF16);
  for (AmpLists *lists : {&f16, &bf16})
    for (AmpClass c : {AmpClass::Allow, AmpClass::Infer, AmpClass::Deny, AmpClass::Clear})
      for (const std::string &q : lists->entries(c)) {
        llvm::StringRef qs(q);
        size_t sep = qs.rfind("::");
        if (sep == llvm::StringRef::npos)
          rowFor("", qs);
        else
          rowFor(qs.substr(0, sep), qs.substr(sep + 2));
      }

  for (const CpuKernel &k : cpuKernelTable())
    rowFor(k.domain ? k.domain : "", k.opType)
        .cpu.push_back({k.minOpset, k.maxOpset, dtypeNames(k.dtypes)});
  for (const cuda::CudaKernel &k : cuda::cudaKernelTable())
    rowFor(k.domain ? k.domain : "", k.opType)
        .cuda.push_back({k.minOpset, k.maxOpset, dtypeNames(k.dtypes)});
  // Ops the executor runs itself, in dynamic mode, on every backend
  // (runtime/core/ControlFlow.cpp and SequenceOps.cpp), for every stored type:
  // control flow, sequences and optionals (registry rows without a shape
  // function).
  for (const OpDef &d : opRegistry())
    if (d.runByExecutor())
      rowFor(d.domain, d.opType)
          .cpu.push_back({d.minOpset, d.maxOpset, {"executor (all types)"}});

  std::vector<OpRow> out;
  for (auto &kv : rows) {
    OpRow r = kv.second;
    r.f16 = f16.classify(r.domain, r.opType);
    r.bf16 = bf16.classify(r.domain, r.opType);
    r.reason = f16.reason(r.op).str();
    if (r.reason.empty())
      r.reason = bf16.reason(r.op).str();
    if (r.reason.empty())
      r.reason = ampUnlistedReason(r.op).str();
    std::sort(r.cpu.begin(), r.cpu.end(), [](const CpuRow &a, const CpuRow &b) {
      return a.minOpset < b.minOpset;
    });
    out.push_back(std::move(r));
  }
  return out; // std::map: sorted by op
}

//===----------------------------------------------------------------------===//
// mpc ops --op NAME --opset N: the schema nodes are checked against
//===----------------------------------------------------------------------===//

/// AttributeProto.AttributeType's name of a kind ("INT", "FLOATS").
static llvm::StringRef attrKindText(AttrKind k) {
  static const char *const kNames[] = {"UNDEFINED", "FLOAT",         "INT",           "STRING",
                                       "TENSOR",    "GRAPH",         "FLOATS",        "INTS",
                                       "STRINGS",   "TENSORS",       "GRAPHS",        "SPARSE_TENSOR",
                                       "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
  unsigned i = static_cast<unsigned>(k);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "UNKNOWN";
}

static llvm::StringRef formalOptionText(FormalOption o) {
  switch (o) {
  case FormalOption::Single:
    return "single";
  case FormalOption::Optional:
    return "optional";
  case FormalOption::Variadic:
    return "variadic";
  }
  return "single";
}

/// The types a constraint admits as ONNX writes them ("tensor(float)",
/// "seq(tensor(float))", "optional(tensor(float))" for an optional of a tensor
/// or of a sequence of that element type; "other" for maps and sparse tensors).
static std::vector<std::string> constraintTypes(const TypeConstraint &c) {
  std::vector<std::string> out;
  for (DType e : c.tensorTypes)
    out.push_back(onnxTensorTypeString(e).str());
  for (DType e : c.seqTypes)
    out.push_back("seq(" + onnxTensorTypeString(e).str() + ")");
  for (DType e : c.optionalTypes)
    out.push_back("optional(" + onnxTensorTypeString(e).str() + ")");
  if (c.allowsOther)
    out.push_back("other");
  return out;
}

static std::string formalText(const FormalParam &f) {
  std::string s = f.name + ": " + f.typeStr;
  if (f.option != FormalOption::Single)
    s += " (" + formalOptionText(f.option).str() + ")";
  return s;
}

/// The schema of `opType` in `domain` at `opset` as JSON (null when none).
static llvm::json::Value signatureJson(llvm::StringRef domain, llvm::StringRef opType,
                                       int64_t opset) {
  SignatureLookup lk = lookupSignature(domain, opType, opset);
  if (!lk.sig)
    return nullptr;
  const OpSignature &sig = *lk.sig;
  auto formals = [](const std::vector<FormalParam> &fs) {
    llvm::json::Array a;
    for (const FormalParam &f : fs)
      a.push_back(llvm::json::Object{{"name", f.name},
                                     {"type", f.typeStr},
                                     {"option", formalOptionText(f.option).str()}});
    return a;
  };
  llvm::json::Array constraints, attrs;
  for (const TypeConstraint &c : sig.constraints) {
    llvm::json::Array types;
    for (std::string &t : constraintTypes(c))
      types.push_back(std::move(t));
    constraints.push_back(llvm::json::Object{{"param", c.param}, {"types", std::move(types)}});
  }
  for (const FormalAttr &a : sig.attributes)
    attrs.push_back(llvm::json::Object{
        {"name", a.name}, {"kind", attrKindText(a.kind).str()}, {"required", a.required}});
  return llvm::json::Object{{"opset", opset},
                            {"since_version", sig.sinceVersion},
                            {"exact", !lk.fallback},
                            {"attributes_known", sig.attributesKnown},
                            {"min_inputs", sig.minInputs},
                            {"max_inputs", sig.maxInputs},
                            {"min_outputs", sig.minOutputs},
                            {"max_outputs", sig.maxOutputs},
                            {"inputs", formals(sig.inputs)},
                            {"outputs", formals(sig.outputs)},
                            {"type_constraints", std::move(constraints)},
                            {"attributes", std::move(attrs)}};
}

static void printSignature(llvm::raw_ostream &os, llvm::StringRef domain, llvm::StringRef opType,
                           int64_t opset) {
  SignatureLookup lk = lookupSignature(domain, opType, opset);
  if (!lk.sig) {
    os << "schema at opset " << opset << ": none (nodes are not checked against a schema)\n";
    return;
  }
  const OpSignature &sig = *lk.sig;
  os << "schema at opset " << opset << ": " << opType << "-" << sig.sinceVersion << ", "
     << (lk.fallback ? "fallback (the opset is newer than this schema, and the op may have changed: "
                       "types are not checked)"
                     : "exact")
     << "\n";
  auto list = [&](const char *what, const std::vector<FormalParam> &fs) {
    os << "  " << what << ":";
    if (fs.empty())
      os << " none";
    for (size_t i = 0; i < fs.size(); ++i)
      os << (i ? ", " : " ") << formalText(fs[i]);
    os << "\n";
  };
  list("inputs", sig.inputs);
  list("outputs", sig.outputs);
  for (const TypeConstraint &c : sig.constraints)
    os << "  " << c.param << ": " << join(constraintTypes(c), ", ") << "\n";
  if (!sig.attributesKnown) {
    os << "  attributes: not known at this version (not checked)\n";
    return;
  }
  os << "  attributes:";
  if (sig.attributes.empty())
    os << " none";
  for (size_t i = 0; i < sig.attributes.size(); ++i) {
    const FormalAttr &a = sig.attributes[i];
    os << (i ? ", " : " ") << a.name << " (" << attrKindText(a.kind)
       << (a.required ? ", required" : "") << ")";
  }
  os << "\n";
}

//===----------------------------------------------------------------------===//
// mpc ops --op NAME
//===----------------------------------------------------------------------===//

/// "7+", "7-12", "7" for an opset range.
static std::string opsetText(int64_t lo, int64_t hi) { return opsetRange(CpuRow{lo, hi, {}}); }

/// Prints (or, with `json`, writes as one JSON object) everything known
/// about the op named `name` ("Op" or "domain::Op").
static int describeOp(llvm::StringRef name, bool json, llvm::Optional<int64_t> opset) {
  llvm::StringRef domain, opType = name;
  size_t sep = name.rfind("::");
  if (sep != llvm::StringRef::npos) {
    domain = name.substr(0, sep);
    opType = name.substr(sep + 2);
  }
  if (domain == "ai.onnx")
    domain = "";
  std::string op = domain.empty() ? opType.str() : (domain + "::" + opType).str();
  int64_t newest = newestReleasedOpset(domain);
  if (opset && newest >= 0 && *opset > newest)
    return fail(llvm::formatv("--opset {0}: newer than any ONNX release mpc knows of (newest "
                              "opset of {1}: {2})",
                              *opset,
                              domain.empty() ? std::string("the default domain")
                                             : "domain " + quoteName(domain),
                              newest)
                    .str());

  std::vector<const OpDef *> defs;
  std::vector<std::string> elsewhere; // the same op type in other domains
  for (const OpDef &d : opRegistry()) {
    if (opType != d.opType)
      continue;
    if (domain == d.domain)
      defs.push_back(&d);
    else
      elsewhere.push_back(llvm::StringRef(d.domain).empty()
                              ? d.opType
                              : std::string(d.domain) + "::" + d.opType);
  }
  std::vector<const CpuKernel *> kernels;
  for (const CpuKernel &k : cpuKernelTable())
    if (opType == k.opType && domain == k.domain)
      kernels.push_back(&k);
  std::vector<const cuda::CudaKernel *> cudaKernels;
  for (const cuda::CudaKernel &k : cuda::cudaKernelTable())
    if (opType == k.opType && domain == k.domain)
      cudaKernels.push_back(&k);
  AmpLists f16 = AmpLists::defaults(DType::F16), bf16 = AmpLists::defaults(DType::BF16);
  AmpClass cls = f16.classify(domain, opType), clsBf16 = bf16.classify(domain, opType);
  std::string reason = f16.reason(op).str();
  if (reason.empty())
    reason = bf16.reason(op).str();
  if (reason.empty())
    reason = ampUnlistedReason(op).str();
  bool hasRule = false;
  if (domain.empty())
    for (const std::string &r : gradientRuleOps())
      hasRule |= r == opType;

  if (defs.empty() && kernels.empty() && cls == AmpClass::Unlisted &&
      clsBf16 == AmpClass::Unlisted && !hasRule && !isKnownOp(domain, opType)) {
    std::sort(elsewhere.begin(), elsewhere.end());
    elsewhere.erase(std::unique(elsewhere.begin(), elsewhere.end()), elsewhere.end());
    std::string hint;
    for (size_t i = 0; i < elsewhere.size(); ++i)
      hint += (i ? i + 1 == elsewhere.size() ? " or " : ", " : "; did you mean ") +
              quoteName(elsewhere[i]);
    return fail("unknown op " + quoteName(op) +
                ": no ONNX schema, registry row, AMP list entry, gradient rule or kernel "
                "(`mpc ops` lists every op)" +
                hint + (hint.empty() ? "" : "?"));
  }

  std::string ampFile = sourceRelativePath(ampListsSourceFile());
  std::string gradFile = sourceRelativePath(gradientRulesSourceFile());
  std::string ampText = ampClassName(cls).str();
  if (clsBf16 != cls)
    ampText += " (bf16: " + ampClassName(clsBf16).str() + ")";

  if (json) {
    llvm::json::Array rows, cpu;
    for (const OpDef *d : defs)
      rows.push_back(llvm::json::Object{
          {"min_opset", d->minOpset},
          {"max_opset", d->maxOpset},
          {"shape_function", d->shapeName ? d->shapeName : ""},
          {"shape_function_location", d->shape ? definedAtText(d->shapeWhere) : ""},
          {"run_by_executor", d->runByExecutor()},
          {"parser", d->parseName ? d->parseName : ""},
          {"parser_location", d->parse ? definedAtText(d->parseWhere) : ""},
          {"in_place", inPlaceName(d->inPlace).str()},
          {"value_dependent_shape", d->valueDependentShape},
          {"cost_class", costClassName(d->cost).str()},
          {"location", d->where.text()}});
    for (const CpuKernel *k : kernels) {
      llvm::json::Array dts;
      for (const std::string &t : dtypeNames(k->dtypes))
        dts.push_back(t);
      cpu.push_back(llvm::json::Object{{"min_opset", k->minOpset},
                                       {"max_opset", k->maxOpset},
                                       {"run_function", k->runName ? k->runName : ""},
                                       {"dtypes", std::move(dts)},
                                       {"location", k->where.text()}});
    }
    llvm::json::Array cudaJson;
    for (const cuda::CudaKernel *k : cudaKernels) {
      llvm::json::Array dts;
      for (const std::string &t : dtypeNames(k->dtypes))
        dts.push_back(t);
      CudaLauncher l = cudaLauncherOf(k->kind);
      cudaJson.push_back(llvm::json::Object{{"min_opset", k->minOpset},
                                            {"max_opset", k->maxOpset},
                                            {"launcher", cudaKindName(k->kind).str()},
                                            {"dtypes", std::move(dts)},
                                            {"location", kCudaTableFile},
                                            {"prepare_function", l.function ? l.function : ""},
                                            {"prepare_location", l.file ? l.file : ""}});
    }
    llvm::json::Object o{
        {"op", op},
        {"domain", domain.str()},
        {"op_type", opType.str()},
        {"registry", std::move(rows)},
        {"amp_class", ampClassName(cls).str()},
        {"amp_class_bf16", ampClassName(clsBf16).str()},
        {"amp_reason", reason},
        {"amp_location", ampFile},
        {"gradient_rule", hasRule},
        {"gradient_rule_location", hasRule ? gradFile : ""},
        {"cpu_kernels", std::move(cpu)},
        {"cuda_kernels", std::move(cudaJson)},
    };
    if (opset)
      o["signature"] = signatureJson(domain, opType, *opset);
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(o))) << "\n";
    return Ok;
  }

  llvm::raw_ostream &os = llvm::outs();
  os << "op " << op << " (domain " << (domain.empty() ? "ai.onnx" : domain) << ")\n";
  if (defs.empty())
    os << "registry: none\n";
  for (const OpDef *d : defs) {
    os << "registry: opsets " << opsetText(d->minOpset, d->maxOpset) << " ("
       << d->where.text() << ")\n";
    if (d->runByExecutor())
      os << "  shape function: none (run by the executor on the host, shaped while "
            "running)\n";
    else
      os << "  shape function: " << d->shapeName << " (" << definedAtText(d->shapeWhere)
         << ")\n";
    if (d->parse)
      os << "  attributes: parsed once per node by " << d->parseName << " ("
         << definedAtText(d->parseWhere) << ")\n";
    else if (d->runByExecutor())
      os << "  attributes: read by the executor\n";
    else
      os << "  attributes: no parser (none its kernels read, or read at launch: "
            "docs/op-registry.md lists those)\n";
    os << "  in-place: " << inPlaceName(d->inPlace) << "\n";
    os << "  value-dependent shape: " << (d->valueDependentShape ? "yes" : "no") << "\n";
    os << "  cost class: " << costClassName(d->cost) << "\n";
  }
  os << "amp: " << ampText;
  if (!reason.empty())
    os << ": " << reason;
  os << " (" << ampFile << ")\n";
  os << "gradient rule: " << (hasRule ? "yes (" + gradFile + ")" : std::string("none"))
     << "\n";
  if (kernels.empty())
    os << "cpu kernel: "
       << (!defs.empty() && defs[0]->runByExecutor() ? "executor (all types)" : "none")
       << "\n";
  for (const CpuKernel *k : kernels)
    os << "cpu kernel: opsets " << opsetText(k->minOpset, k->maxOpset) << ", " << k->runName
       << ", " << join(dtypeNames(k->dtypes), ",") << " (" << k->where.text() << ")\n";
  if (cudaKernels.empty())
    os << "cuda kernel: none\n";
  for (const cuda::CudaKernel *k : cudaKernels) {
    CudaLauncher l = cudaLauncherOf(k->kind);
    os << "cuda kernel: opsets " << opsetText(k->minOpset, k->maxOpset) << ", "
       << cudaKindName(k->kind) << ", " << join(dtypeNames(k->dtypes), ",") << " ("
       << kCudaTableFile << "), prepared by "
       << (l.function ? std::string(l.function) + " (" + l.file + ")"
                      : std::string("an unknown function: the kind is missing from "
                                    "cudaLauncherOf in tools/mpc/Ops.cpp"))
       << "\n";
  }
  if (opset)
    printSignature(os, domain, opType, *opset);
  return Ok;
}

int tool::runOps(llvm::ArrayRef<const char *> args, const char *const *envp) {
  (void)envp;
  bool json = false;
  llvm::Optional<std::string> one;
  llvm::Optional<int64_t> opset;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    if (a == "--help" || a == "-h") {
      llvm::outs() << kOpsUsage;
      return Ok;
    }
    if (a == "--json") {
      json = true;
      continue;
    }
    if (a == "--op" || a.startswith("--op=")) {
      if (one)
        return usageError("ops", "--op given twice");
      llvm::StringRef v;
      if (a.consume_front("--op="))
        v = a;
      else if (i + 1 < args.size())
        v = args[++i];
      else
        return usageError("ops", "--op needs an op name");
      if (v.empty())
        return usageError("ops", "--op needs an op name");
      one = v.str();
      continue;
    }
    if (a == "--opset" || a.startswith("--opset=")) {
      if (opset)
        return usageError("ops", "--opset given twice");
      llvm::StringRef v;
      if (a.consume_front("--opset="))
        v = a;
      else if (i + 1 < args.size())
        v = args[++i];
      int64_t n = 0;
      if (v.getAsInteger(10, n) || n < 1)
        return usageError("ops", "--opset needs a positive opset number, not " + quoteName(v));
      opset = n;
      continue;
    }
    return usageError("ops", "unknown argument " + quoteName(a));
  }
  if (opset && !one)
    return usageError("ops", "--opset needs --op");
  if (one)
    return describeOp(*one, json, opset);

  std::vector<OpRow> rows = collectRows();
  if (json) {
    llvm::json::Array arr;
    for (const OpRow &r : rows) {
      arr.push_back(llvm::json::Object{
          {"op", r.op},
          {"domain", r.domain},
          {"op_type", r.opType},
          {"amp_class", ampClassName(r.f16).str()},
          {"amp_class_bf16", ampClassName(r.bf16).str()},
          {"amp_reason", r.reason},
          {"cpu_kernels", rowsJson(r.cpu)},
          {"cpu", cpuText(r)},
          {"cuda_kernels", rowsJson(r.cuda)},
          {"cuda", cudaText(r)},
      });
    }
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(arr))) << "\n";
    return Ok;
  }

  size_t opW = 2, ampW = 3, cpuW = 3, cudaW = 4;
  std::vector<std::string> ampTexts;
  for (const OpRow &r : rows) {
    std::string amp = ampClassName(r.f16).str();
    if (r.bf16 != r.f16)
      amp += " (bf16: " + ampClassName(r.bf16).str() + ")";
    ampTexts.push_back(amp);
    opW = std::max(opW, r.op.size());
    ampW = std::max(ampW, amp.size());
    cpuW = std::max(cpuW, cpuText(r).size());
    cudaW = std::max(cudaW, cudaText(r).size());
  }
  auto pad = [](const std::string &s, size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
  };
  llvm::outs() << pad("op", opW) << "  " << pad("amp", ampW) << "  " << pad("cpu", cpuW)
               << "  " << pad("cuda", cudaW) << "  reason\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpRow &r = rows[i];
    llvm::outs() << pad(r.op, opW) << "  " << pad(ampTexts[i], ampW) << "  "
                 << pad(cpuText(r), cpuW) << "  " << pad(cudaText(r), cudaW) << "  " << r.reason
                 << "\n";
  }
  return Ok;
}
