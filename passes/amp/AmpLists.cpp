//===- AmpLists.cpp - Default AMP lists and their user edits ---------------===//
//
// The default lists, one row per op with the reason it is on its list; this
// table is the source of truth, docs/amp-lists.md explains it by op family
// (tests/tools/test_ops.py checks that the doc names exactly these ops). bf16
// moves the three sum-like reductions to infer (bf16 has fp32's exponent
// range).
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/AmpLists.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include <algorithm>
#include <cstring>

using namespace mpc;

namespace {
struct DefaultRow {
  const char *op;
  AmpClass cls;
  const char *reason;
};
} // namespace

// clang-format off
static const DefaultRow kDefaultLists[] = {
  // Allow: Tensor Core ops, numerically safe in fp16 with fp32 accumulation.
  {"MatMul", AmpClass::Allow, "GEMM on Tensor Cores, fp32 accumulation"},
  {"Gemm", AmpClass::Allow, "GEMM on Tensor Cores, fp32 accumulation"},
  {"Conv", AmpClass::Allow, "convolution on Tensor Cores"},
  {"ConvTranspose", AmpClass::Allow, "convolution on Tensor Cores"},
  {"Einsum", AmpClass::Allow, "contraction on Tensor Cores"},
  {"LSTM", AmpClass::Allow, "cuDNN RNN on Tensor Cores"},
  {"GRU", AmpClass::Allow, "cuDNN RNN on Tensor Cores"},
  {"RNN", AmpClass::Allow, "cuDNN RNN on Tensor Cores"},
  {"com.microsoft::FusedMatMul", AmpClass::Allow, "onnxruntime fused GEMM"},
  {"com.microsoft::ConvGrad", AmpClass::Allow, "gradient of Conv (onnxruntime training)"},
  {"ai.mpc.training::ConvGrad", AmpClass::Allow, "gradient of Conv: convolutions"},
  {"ai.mpc.training::LSTMGrad", AmpClass::Allow, "gradient of LSTM: recurrent GEMMs"},
  {"ai.mpc.training::GRUGrad", AmpClass::Allow, "gradient of GRU: recurrent GEMMs"},

  // Infer: safe either way; fp16 only between allow ops.
  {"Add", AmpClass::Infer, "element-wise, exact rounding"},
  {"Sub", AmpClass::Infer, "element-wise, exact rounding"},
  {"Mul", AmpClass::Infer, "element-wise, exact rounding"},
  {"Div", AmpClass::Infer, "element-wise, exact rounding"},
  {"Sum", AmpClass::Infer, "element-wise N-ary add"},
  {"Mean", AmpClass::Infer, "element-wise N-ary mean"},
  {"Reciprocal", AmpClass::Infer, "element-wise"},
  {"Sqrt", AmpClass::Infer, "element-wise, compresses range"},
  {"Log", AmpClass::Infer, "element-wise, compresses range"},
  {"Erf", AmpClass::Infer, "bounded output"},
  {"Sigmoid", AmpClass::Infer, "bounded output"},
  {"Tanh", AmpClass::Infer, "bounded output"},
  {"Softplus", AmpClass::Infer, "activation"},
  {"Softsign", AmpClass::Infer, "bounded output"},
  {"Elu", AmpClass::Infer, "activation"},
  {"Selu", AmpClass::Infer, "activation"},
  {"Celu", AmpClass::Infer, "activation"},
  {"LeakyRelu", AmpClass::Infer, "activation"},
  {"PRelu", AmpClass::Infer, "activation"},
  {"HardSigmoid", AmpClass::Infer, "bounded output"},
  {"HardSwish", AmpClass::Infer, "activation"},
  {"Gelu", AmpClass::Infer, "activation"},
  {"Mish", AmpClass::Infer, "activation"},
  {"ThresholdedRelu", AmpClass::Infer, "activation"},
  {"Softmax", AmpClass::Infer, "kernel accumulates in fp32"},
  {"LogSoftmax", AmpClass::Infer, "kernel accumulates in fp32"},
  {"BatchNormalization", AmpClass::Infer, "statistics stay fp32 (T1/T2 slots)"},
  {"LayerNormalization", AmpClass::Infer, "statistics in fp32 (stash_type 1, U slot)"},
  {"InstanceNormalization", AmpClass::Infer, "kernel computes statistics in fp32"},
  {"GroupNormalization", AmpClass::Infer, "kernel computes statistics in fp32"},
  {"AveragePool", AmpClass::Infer, "window mean, fp32 accumulation"},
  {"GlobalAveragePool", AmpClass::Infer, "mean, fp32 accumulation"},
  {"ai.mpc.training::BiasGrad", AmpClass::Infer, "bias-gradient reduction accumulates in fp32"},
  {"ai.mpc.training::SigmoidGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::TanhGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::SoftmaxGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::LogSoftmaxGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::ErfGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::GeluGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::BatchNormalizationGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::LayerNormalizationGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::AveragePoolGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::GlobalAveragePoolGrad", AmpClass::Infer, "gradient of an infer op"},
  {"ai.mpc.training::GatherGrad", AmpClass::Infer, "scatter-add accumulates in fp32"},

  // Deny: need fp32 range or precision.
  {"Exp", AmpClass::Deny, "overflows fp16 above 11.1"},
  {"Pow", AmpClass::Deny, "overflows fp16; decomposed norms go finite-but-wrong"},
  {"ReduceSum", AmpClass::Deny, "large sums overflow fp16"},
  {"ReduceMean", AmpClass::Deny, "intermediate sum overflows fp16"},
  {"ReduceSumSquare", AmpClass::Deny, "squares overflow fp16"},
  {"ReduceL1", AmpClass::Deny, "large sums overflow fp16"},
  {"ReduceL2", AmpClass::Deny, "squares overflow fp16"},
  {"ReduceLogSum", AmpClass::Deny, "sum overflows fp16"},
  {"ReduceLogSumExp", AmpClass::Deny, "exp overflows fp16"},
  {"ReduceProd", AmpClass::Deny, "products overflow or underflow fp16"},
  {"CumSum", AmpClass::Deny, "running sums overflow fp16"},
  {"LpNormalization", AmpClass::Deny, "norm overflows fp16"},
  {"LpPool", AmpClass::Deny, "p-th power sums overflow fp16"},
  {"GlobalLpPool", AmpClass::Deny, "p-th power sums overflow fp16"},
  {"SoftmaxCrossEntropyLoss", AmpClass::Deny, "loss needs fp32"},
  {"NegativeLogLikelihoodLoss", AmpClass::Deny, "loss needs fp32"},
  {"ai.mpc.training::SoftmaxCrossEntropyLossGrad", AmpClass::Deny, "gradient of a loss"},
  {"ai.mpc.training::MSELossGrad", AmpClass::Deny, "gradient of a loss"},
  {"ai.mpc.training::SGDStep", AmpClass::Deny, "fp32 master weights and state"},
  {"ai.mpc.training::MomentumStep", AmpClass::Deny, "fp32 master weights and state"},
  {"ai.mpc.training::AdamStep", AmpClass::Deny, "fp32 master weights and state"},

  // Clear: value-preserving layout, indexing, selection and comparison.
  {"Reshape", AmpClass::Clear, "layout"},
  {"Transpose", AmpClass::Clear, "layout"},
  {"Flatten", AmpClass::Clear, "layout"},
  {"Squeeze", AmpClass::Clear, "layout"},
  {"Unsqueeze", AmpClass::Clear, "layout"},
  {"Expand", AmpClass::Clear, "layout"},
  {"Tile", AmpClass::Clear, "layout"},
  {"Concat", AmpClass::Clear, "layout"},
  {"Split", AmpClass::Clear, "layout"},
  {"Slice", AmpClass::Clear, "layout"},
  {"Pad", AmpClass::Clear, "layout (data slot)"},
  {"DepthToSpace", AmpClass::Clear, "layout"},
  {"SpaceToDepth", AmpClass::Clear, "layout"},
  {"Identity", AmpClass::Clear, "copy"},
  {"Shape", AmpClass::Clear, "metadata only"},
  {"Size", AmpClass::Clear, "metadata only"},
  {"ReverseSequence", AmpClass::Clear, "layout"},
  {"Compress", AmpClass::Clear, "selection"},
  {"Trilu", AmpClass::Clear, "selection"},
  {"Gather", AmpClass::Clear, "indexing"},
  {"GatherElements", AmpClass::Clear, "indexing"},
  {"GatherND", AmpClass::Clear, "indexing"},
  {"ScatterND", AmpClass::Clear, "indexing"},
  {"ScatterElements", AmpClass::Clear, "indexing"},
  {"Scatter", AmpClass::Clear, "indexing (ScatterElements before opset 11)"},
  {"OneHot", AmpClass::Clear, "indexing (values slot)"},
  {"TopK", AmpClass::Clear, "selection"},
  {"ArgMax", AmpClass::Clear, "selection"},
  {"ArgMin", AmpClass::Clear, "selection"},
  {"Hardmax", AmpClass::Clear, "selection"},
  {"NonZero", AmpClass::Clear, "selection"},
  {"Relu", AmpClass::Clear, "selection (max with 0)"},
  {"Clip", AmpClass::Clear, "selection"},
  {"Max", AmpClass::Clear, "selection"},
  {"Min", AmpClass::Clear, "selection"},
  {"ReduceMax", AmpClass::Clear, "selection"},
  {"ReduceMin", AmpClass::Clear, "selection"},
  {"MaxPool", AmpClass::Clear, "selection"},
  {"GlobalMaxPool", AmpClass::Clear, "selection"},
  {"Where", AmpClass::Clear, "selection"},
  {"Equal", AmpClass::Clear, "comparison"},
  {"Less", AmpClass::Clear, "comparison"},
  {"LessOrEqual", AmpClass::Clear, "comparison"},
  {"Greater", AmpClass::Clear, "comparison"},
  {"GreaterOrEqual", AmpClass::Clear, "comparison"},
  {"IsNaN", AmpClass::Clear, "comparison"},
  {"IsInf", AmpClass::Clear, "comparison"},
  {"Abs", AmpClass::Clear, "sign change only"},
  {"Neg", AmpClass::Clear, "sign change only"},
  {"Sign", AmpClass::Clear, "sign only"},
  {"Ceil", AmpClass::Clear, "rounding"},
  {"Floor", AmpClass::Clear, "rounding"},
  {"Round", AmpClass::Clear, "rounding"},
  {"Dropout", AmpClass::Clear, "masking (data slot; ratio stays fp32)"},
  {"Resize", AmpClass::Clear, "interpolation (data slot; roi/scales stay fp32)"},
  {"Upsample", AmpClass::Clear, "interpolation (Resize before opset 10; scales stay fp32)"},
  {"ConstantOfShape", AmpClass::Clear, "fill value retyped with its slot"},
  {"SequenceConstruct", AmpClass::Clear, "sequence cluster"},
  {"SequenceInsert", AmpClass::Clear, "sequence cluster"},
  {"SequenceAt", AmpClass::Clear, "sequence cluster"},
  {"SequenceErase", AmpClass::Clear, "sequence cluster"},
  {"SequenceLength", AmpClass::Clear, "sequence cluster"},
  {"SplitToSequence", AmpClass::Clear, "sequence cluster"},
  {"ConcatFromSequence", AmpClass::Clear, "sequence cluster"},
  {"ai.mpc.training::ReluGrad", AmpClass::Clear, "gradient of a clear op"},
  {"ai.mpc.training::MaxPoolGrad", AmpClass::Clear, "gradient of a clear op"},
  {"ai.mpc.training::SliceGrad", AmpClass::Clear, "gradient of a clear op"},
};
// clang-format on

// Ops deliberately on no default list: an unlisted op is an fp32 barrier
// (kept in the precision it is declared in). Every op with a registry row
// (runtime/ops) is on exactly one list or here (tests/ops checks).
// clang-format off
static const AmpUnlistedOp kUnlisted[] = {
  {"Acos", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Acosh", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Asin", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Asinh", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Atan", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Atanh", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Cos", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Sin", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Tan", "trigonometric: no Tensor Core work and no measured fp16 error bound; stays an fp32 barrier"},
  {"Cosh", "hyperbolic: overflows fp16 like Exp; stays an fp32 barrier"},
  {"Sinh", "hyperbolic: overflows fp16 like Exp; stays an fp32 barrier"},
  {"And", "bool only: AMP paints floating-point values"},
  {"Or", "bool only: AMP paints floating-point values"},
  {"Xor", "bool only: AMP paints floating-point values"},
  {"Not", "bool only: AMP paints floating-point values"},
  {"BitShift", "integers only: AMP paints floating-point values"},
  {"BitwiseAnd", "integers only: AMP paints floating-point values"},
  {"BitwiseNot", "integers only: AMP paints floating-point values"},
  {"BitwiseOr", "integers only: AMP paints floating-point values"},
  {"BitwiseXor", "integers only: AMP paints floating-point values"},
  {"Mod", "remainder: mostly integer; float fmod needs the operands' full precision"},
  {"Cast", "the conversion AMP itself inserts and folds: its target type is the model's"},
  {"CastLike", "the conversion AMP itself inserts and folds: its target type is the model's"},
  {"Constant", "no arithmetic: its value is retyped by the casts of the ops that read it"},
  {"EyeLike", "fill with 0 and 1: no arithmetic, precision comes from its consumers"},
  {"Range", "index and position generation: feeds shapes and indices, stays as declared"},
  {"QuantizeLinear", "integer quantization: its scale sets the integer grid; it stays as declared"},
  {"DequantizeLinear", "integer quantization: its result is the scale's type, as declared"},
  {"RoiAlign", "region pooling: its rois share X's type, and box coordinates in fp16 lose their sub-pixel part past 1024"},
  {"NonMaxSuppression", "box selection: ONNX types boxes and scores f32 only, and overlaps at the IoU threshold must fall as in fp32"},
  {"CumProd", "running products overflow or underflow fp16"},
  {"LRN", "sum of squares over a window overflows fp16"},
  {"Shrink", "activation not yet measured in fp16; stays an fp32 barrier"},
  {"Swish", "opset 24 activation, not yet measured in fp16; stays an fp32 barrier"},
  {"Attention", "opset 23 fused attention: its softmax and scaling are not yet measured in fp16"},
  {"RMSNormalization", "opset 23 normalization: statistics precision not yet measured in fp16"},
  {"RotaryEmbedding", "opset 23 position rotation: not yet measured in fp16"},
  {"If", "control flow: its bodies are painted as graphs of their own"},
  {"Loop", "control flow: its bodies are painted as graphs of their own"},
  {"Scan", "control flow: its bodies are painted as graphs of their own"},
  {"SequenceMap", "control flow: its body is painted as a graph of its own"},
  {"SequenceEmpty", "makes an empty sequence: no values to paint"},
  {"Optional", "optional container: outside the sequence cluster, holds what it is given"},
  {"OptionalGetElement", "optional container: outside the sequence cluster, holds what it is given"},
  {"OptionalHasElement", "returns a bool: no floating-point output"},
  {"ai.mpc.training::GemmBiasAct", "--fuse-gemm-epilogues writes it after AMP: its output type is its `to` attribute, which the painting does not change"},
  {"ai.mpc.training::MultiTensorUnscale", "loss scaling inserts it after AMP: reads each gradient in its own type, writes fp32"},
  {"ai.mpc.training::MultiTensorSGDStep", "--multi-tensor-optimizer writes it after AMP from fp32 SGDStep nodes"},
  {"ai.mpc.training::MultiTensorMomentumStep", "--multi-tensor-optimizer writes it after AMP from fp32 MomentumStep nodes"},
  {"ai.mpc.training::MultiTensorAdamStep", "--multi-tensor-optimizer writes it after AMP from fp32 AdamStep nodes"},
};
// clang-format on

llvm::ArrayRef<AmpUnlistedOp> mpc::ampUnlistedOps() { return kUnlisted; }

llvm::StringRef mpc::ampUnlistedReason(llvm::StringRef qualifiedOp) {
  for (const AmpUnlistedOp &u : kUnlisted)
    if (qualifiedOp == u.op)
      return u.reason;
  return "";
}

const char *mpc::ampListsSourceFile() { return __FILE__; }

llvm::StringRef mpc::ampClassName(AmpClass c) {
  switch (c) {
  case AmpClass::Allow:
    return "allow";
  case AmpClass::Infer:
    return "infer";
  case AmpClass::Deny:
    return "deny";
  case AmpClass::Clear:
    return "clear";
  case AmpClass::Unlisted:
    return "unlisted";
  }
  llvm_unreachable("bad AmpClass");
}

llvm::StringRef mpc::ampLevelName(AmpLevel l) {
  switch (l) {
  case AmpLevel::Default:
    return "DEFAULT";
  case AmpLevel::TensorCoresOnly:
    return "TENSOR_CORES_ONLY";
  case AmpLevel::TreatInferAsDeny:
    return "TREAT_INFER_AS_DENY";
  case AmpLevel::UnsafeForceAll:
    return "UNSAFE_FORCE_ALL";
  }
  llvm_unreachable("bad AmpLevel");
}

/// "ai.onnx::Add" and "::Add" name the default-domain op "Add".
static std::string normalizeOpName(llvm::StringRef s) {
  s = s.trim();
  if (s.consume_front("ai.onnx::") || s.consume_front("::"))
    return s.str();
  return s.str();
}

AmpLists AmpLists::defaults(DType target) {
  AmpLists l;
  for (const DefaultRow &row : kDefaultLists)
    l.table[row.op] = Entry{row.cls, row.reason};
  if (target == DType::BF16) {
    // bf16 keeps fp32's exponent range: sums no longer overflow.
    for (const char *op : {"ReduceSum", "ReduceMean", "ReduceSumSquare"})
      l.table[op] = Entry{AmpClass::Infer, "bf16 has fp32's range: sums do not overflow"};
  }
  return l;
}

llvm::Error AmpLists::apply(const AmpListEdits &edits, AmpLevel level) {
  static const char *kListVar[] = {"ALLOWLIST", "INFERLIST", "DENYLIST", "CLEARLIST"};
  // Additions may put an op on a second list; that is reported, not resolved.
  llvm::StringMap<std::vector<AmpClass>> added;
  for (unsigned c = 0; c < kNumAmpLists; ++c)
    for (const std::string &raw : edits.add[c]) {
      std::string op = normalizeOpName(raw);
      added[op].push_back(static_cast<AmpClass>(c));
    }
  for (auto &kv : added) {
    auto &classes = kv.second;
    std::sort(classes.begin(), classes.end());
    classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
    if (classes.size() > 1)
      return inputError("op '{0}' is added to both the {1} and the {2} list", kv.first(),
                        ampClassName(classes[0]), ampClassName(classes[1]));
    auto it = table.find(kv.first());
    bool removedFromOld = false;
    if (it != table.end() && it->second.cls != classes[0]) {
      // Still on its default list unless the same edit removes it from there.
      for (const std::string &r : edits.remove[static_cast<unsigned>(it->second.cls)])
        if (normalizeOpName(r) == kv.first())
          removedFromOld = true;
      if (!removedFromOld)
        return inputError("op '{0}' would be on both the {1} and the {2} list (remove it "
                          "with MPC_AMP_{3}_REMOVE)",
                          kv.first(), ampClassName(it->second.cls), ampClassName(classes[0]),
                          kListVar[static_cast<unsigned>(it->second.cls)]);
    }
  }
  for (auto &kv : added)
    table[kv.first()] = Entry{kv.second[0], ""};
  for (unsigned c = 0; c < kNumAmpLists; ++c)
    for (const std::string &raw : edits.remove[c]) {
      std::string op = normalizeOpName(raw);
      auto it = table.find(op);
      if (it == table.end() || it->second.cls != static_cast<AmpClass>(c)) {
        // Removing what an ADD just put on another list is that move's first half.
        if (added.count(op))
          continue;
        return inputError("cannot remove '{0}' from the {1} list: it is not on it", op,
                          ampClassName(static_cast<AmpClass>(c)));
      }
      table.erase(it);
    }

  switch (level) {
  case AmpLevel::Default:
  case AmpLevel::UnsafeForceAll:
    break;
  case AmpLevel::TensorCoresOnly:
    for (auto it = table.begin(); it != table.end();) {
      auto cur = it++;
      if (cur->second.cls != AmpClass::Allow)
        table.erase(cur);
    }
    break;
  case AmpLevel::TreatInferAsDeny:
    for (auto &kv : table)
      if (kv.second.cls == AmpClass::Infer)
        kv.second = Entry{AmpClass::Deny, "TREAT_INFER_AS_DENY"};
    break;
  }
  return llvm::Error::success();
}

AmpClass AmpLists::classify(llvm::StringRef domain, llvm::StringRef opType) const {
  bool isDefault = domain.empty() || domain == "ai.onnx";
  auto it = isDefault ? table.find(opType) : table.find((domain + "::" + opType).str());
  return it == table.end() ? AmpClass::Unlisted : it->second.cls;
}

AmpClass AmpLists::classify(const Node &n) const { return classify(n.domain, n.opType); }

llvm::StringRef AmpLists::reason(llvm::StringRef qualifiedOp) const {
  auto it = table.find(qualifiedOp);
  return it == table.end() ? llvm::StringRef() : llvm::StringRef(it->second.reason);
}

std::vector<std::string> AmpLists::entries(AmpClass c) const {
  std::vector<std::string> out;
  for (const auto &kv : table)
    if (kv.second.cls == c)
      out.push_back(kv.first().str());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> mpc::splitOpList(llvm::StringRef s) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  s.split(parts, ',');
  std::vector<std::string> out;
  for (llvm::StringRef p : parts) {
    p = p.trim();
    if (!p.empty())
      out.push_back(p.str());
  }
  return out;
}

/// Splits "domain::Op" (domain empty for the default domain).
static std::pair<llvm::StringRef, llvm::StringRef> splitQualified(llvm::StringRef op) {
  size_t sep = op.rfind("::");
  if (sep == llvm::StringRef::npos)
    return {"", op};
  return {op.substr(0, sep), op.substr(sep + 2)};
}

llvm::Error mpc::checkListedOp(llvm::StringRef source, llvm::StringRef raw) {
  std::string op = normalizeOpName(raw);
  auto [domain, type] = splitQualified(op);
  if (!domain.empty() && !type.empty())
    return llvm::Error::success(); // a custom op: noted in verbose mode
  if (!type.empty() && isKnownOp("", type))
    return llvm::Error::success();
  return inputError("{0}: '{1}' is not an op mpc knows (no ONNX schema, signature or kernel "
                    "has it); write a custom op with its domain, as in com.example::MyOp",
                    source, raw.trim());
}

std::vector<std::string> mpc::customOpNotes(const AmpListEdits &edits) {
  std::vector<std::string> notes;
  for (unsigned c = 0; c < kNumAmpLists; ++c)
    for (const std::string &raw : edits.add[c]) {
      std::string op = normalizeOpName(raw);
      auto [domain, type] = splitQualified(op);
      if (!domain.empty() && !isKnownOp(domain, type))
        notes.push_back(llvm::formatv("note: the {0} list names custom op {1}: no schema mpc "
                                      "knows defines it",
                                      ampClassName(static_cast<AmpClass>(c)), quoteName(op))
                            .str());
    }
  llvm::sort(notes);
  notes.erase(std::unique(notes.begin(), notes.end()), notes.end());
  return notes;
}

llvm::Error mpc::applyEnvironment(AmpOptions &opts, const char *const *envp) {
  static const char *kLists[] = {"ALLOWLIST", "INFERLIST", "DENYLIST", "CLEARLIST"};
  for (const char *const *e = envp; e && *e; ++e) {
    llvm::StringRef entry(*e);
    if (!entry.startswith("MPC_"))
      continue;
    auto [name, value] = entry.split('=');
    bool known = false;
    for (unsigned c = 0; c < kNumAmpLists; ++c) {
      std::string base = std::string("MPC_AMP_") + kLists[c];
      if (name == base + "_ADD") {
        auto ops = splitOpList(value);
        for (const std::string &op : ops)
          if (llvm::Error err = checkListedOp(name, op))
            return err;
        opts.edits.add[c].insert(opts.edits.add[c].end(), ops.begin(), ops.end());
        known = true;
      } else if (name == base + "_REMOVE") {
        auto ops = splitOpList(value);
        opts.edits.remove[c].insert(opts.edits.remove[c].end(), ops.begin(), ops.end());
        known = true;
      }
    }
    if (known)
      continue;
    if (name == "MPC_AMP_LEVEL") {
      llvm::StringRef v = value.trim();
      auto level = llvm::StringSwitch<llvm::Optional<AmpLevel>>(v)
                       .Case("", AmpLevel::Default)
                       .Case("DEFAULT", AmpLevel::Default)
                       .Case("TENSOR_CORES_ONLY", AmpLevel::TensorCoresOnly)
                       .Case("TREAT_INFER_AS_DENY", AmpLevel::TreatInferAsDeny)
                       .Case("UNSAFE_FORCE_ALL", AmpLevel::UnsafeForceAll)
                       .Default(llvm::None);
      if (!level)
        return inputError("MPC_AMP_LEVEL='{0}' is not one of TENSOR_CORES_ONLY, "
                          "TREAT_INFER_AS_DENY, UNSAFE_FORCE_ALL",
                          v);
      opts.level = *level;
    } else if (name == "MPC_AMP_LOG_PATH") {
      opts.logPath = value.str();
    } else if (name == "MPC_AMP_VERBOSE") {
      llvm::StringRef v = value.trim();
      if (v != "0" && v != "1" && v != "2" && !v.empty())
        return inputError("MPC_AMP_VERBOSE='{0}' must be 0, 1 or 2", v);
      opts.verbose = v.empty() ? 0 : static_cast<unsigned>(v[0] - '0');
    } else if (name == "MPC_AMP_TARGET" || name == "MPC_AMP_KEEP_IO_TYPES" ||
               name == "MPC_AMP_DENY_NODES") {
      if (name == "MPC_AMP_TARGET") {
        llvm::StringRef v = value.trim();
        if (v == "fp16" || v == "f16" || v == "float16")
          opts.target = DType::F16;
        else if (v == "bf16" || v == "bfloat16")
          opts.target = DType::BF16;
        else
          return inputError("MPC_AMP_TARGET='{0}' must be fp16 or bf16", v);
      } else if (name == "MPC_AMP_KEEP_IO_TYPES") {
        llvm::StringRef v = value.trim();
        if (v != "0" && v != "1")
          return inputError("MPC_AMP_KEEP_IO_TYPES='{0}' must be 0 or 1", v);
        opts.keepIoTypes = v == "1";
      } else if (name == "MPC_AMP_DENY_NODES") {
        opts.denyNodesRegex = value.str();
      }
    } else if (name == "MPC_AMP_LOSS_SCALE") {
      if (llvm::Error err = parseLossScaleMode(value.trim(), name, opts.lossScale))
        return err;
    } else if (name.startswith("MPC_AMP_LOSS_SCALE_") &&
               llvm::is_contained(llvm::ArrayRef<llvm::StringRef>{"INIT", "GROWTH", "BACKOFF",
                                                                  "INTERVAL", "MIN", "MAX"},
                                  name.drop_front(strlen("MPC_AMP_LOSS_SCALE_")))) {
      std::string key = name.drop_front(strlen("MPC_AMP_LOSS_SCALE_")).lower();
      if (llvm::Error err = parseLossScaleSetting(key, value.trim(), name, opts.lossScale))
        return err;
    } else {
      return inputError("unknown environment variable {0} (mpc reads MPC_AMP_ALLOWLIST_ADD, "
                        "..._REMOVE, MPC_AMP_LEVEL, MPC_AMP_LOG_PATH, MPC_AMP_VERBOSE, "
                        "MPC_AMP_TARGET, MPC_AMP_KEEP_IO_TYPES, MPC_AMP_DENY_NODES, "
                        "MPC_AMP_LOSS_SCALE, MPC_AMP_LOSS_SCALE_{{INIT,GROWTH,BACKOFF,"
                        "INTERVAL,MIN,MAX})",
                        name);
    }
  }
  return llvm::Error::success();
}
