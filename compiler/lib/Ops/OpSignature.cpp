//===- OpSignature.cpp - Operator signatures from the ONNX schemas ---------===//
//
// Converts libonnx OpSchemas into OpSignatures (cached), and patches the
// registry's view for default-domain opsets newer than libonnx 1.12 knows.
// The patches are facts of the ONNX operator specification, one row each.
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/OpSignature.h"
#include "mpc/IR/Graph.h"
#include "mpc/Support/Diagnostics.h"
#include "onnx/defs/schema.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include <cstring>
#include <memory>
#include <mutex>
#include <tuple>

using namespace mpc;

bool mpc::parseTypeString(llvm::StringRef s, Type &out) {
  s = s.trim();
  auto unwrap = [&](llvm::StringRef prefix, TypeKind k) -> llvm::Optional<bool> {
    if (!s.consume_front(prefix))
      return llvm::None;
    if (!s.consume_back(")"))
      return false;
    Type in;
    if (!parseTypeString(s, in))
      return false;
    out = Type::wrap(k, std::move(in));
    return true;
  };
  if (s.startswith("seq("))
    return *unwrap("seq(", TypeKind::Sequence);
  if (s.startswith("optional("))
    return *unwrap("optional(", TypeKind::Optional);
  if (s.startswith("sparse_tensor(")) {
    llvm::StringRef inner = s.drop_front(14).drop_back(1);
    auto e = dtypeFromOnnxTensorTypeString(("tensor(" + inner + ")").str());
    out = Type();
    out.kind = TypeKind::SparseTensor;
    out.elem = e ? *e : DType::Undefined;
    return e.hasValue();
  }
  if (s.startswith("map(")) {
    out = Type();
    out.kind = TypeKind::Map;
    return true;
  }
  auto e = dtypeFromOnnxTensorTypeString(s);
  if (!e)
    return false;
  out = Type::tensor(*e);
  return true;
}

bool TypeConstraint::admitsTensor(DType e) const { return llvm::is_contained(tensorTypes, e); }

bool TypeConstraint::admits(const Type &t, DType e) const {
  switch (t.kind) {
  case TypeKind::Tensor:
    return llvm::is_contained(tensorTypes, e);
  case TypeKind::Sequence:
    return llvm::is_contained(seqTypes, e);
  case TypeKind::Optional:
    return llvm::is_contained(optionalTypes, e);
  default:
    return allowsOther;
  }
}

const TypeConstraint *OpSignature::constraint(llvm::StringRef param) const {
  for (const TypeConstraint &c : constraints)
    if (c.param == param)
      return &c;
  return nullptr;
}

static const FormalParam *formalFor(const std::vector<FormalParam> &formals, unsigned port) {
  if (formals.empty())
    return nullptr;
  if (port < formals.size())
    return &formals[port];
  if (formals.back().option == FormalOption::Variadic)
    return &formals.back();
  return nullptr;
}

const FormalParam *OpSignature::inputFormal(unsigned port) const {
  return formalFor(inputs, port);
}
const FormalParam *OpSignature::outputFormal(unsigned port) const {
  return formalFor(outputs, port);
}

static void addAllowedType(TypeConstraint &c, llvm::StringRef s) {
  Type t;
  if (!parseTypeString(s, t)) {
    c.allowsOther = true;
    return;
  }
  switch (t.kind) {
  case TypeKind::Tensor:
    c.tensorTypes.push_back(t.elem);
    return;
  case TypeKind::Sequence:
    c.seqTypes.push_back(t.tensorElemType());
    return;
  case TypeKind::Optional:
    c.optionalTypes.push_back(t.tensorElemType());
    return;
  default:
    c.allowsOther = true;
    return;
  }
}

/// Resolves each formal's constraint and parses fixed tensor types once, so
/// passes need not. Runs again after every change to a signature.
static void setFixedTypes(OpSignature &sig) {
  for (auto *formals : {&sig.inputs, &sig.outputs})
    for (FormalParam &f : *formals) {
      const TypeConstraint *c = sig.constraint(f.typeStr);
      f.constraintIndex = c ? static_cast<int>(c - sig.constraints.data()) : -1;
      f.fixedElem = DType::Undefined;
      Type t;
      if (!c && parseTypeString(f.typeStr, t) && t.isTensor())
        f.fixedElem = t.elem;
    }
}

static FormalOption convertOption(onnx::OpSchema::FormalParameterOption o) {
  switch (o) {
  case onnx::OpSchema::Single:
    return FormalOption::Single;
  case onnx::OpSchema::Optional:
    return FormalOption::Optional;
  case onnx::OpSchema::Variadic:
    return FormalOption::Variadic;
  }
  return FormalOption::Single;
}

static std::unique_ptr<OpSignature> fromSchema(const onnx::OpSchema &s) {
  auto sig = std::make_unique<OpSignature>();
  sig->domain = s.domain();
  sig->opType = s.Name();
  sig->sinceVersion = s.SinceVersion();
  sig->minInputs = s.min_input();
  sig->maxInputs = s.max_input();
  sig->minOutputs = s.min_output();
  sig->maxOutputs = s.max_output();
  auto convert = [](const onnx::OpSchema::FormalParameter &f) {
    FormalParam p;
    p.name = f.GetName();
    p.typeStr = f.GetTypeStr();
    p.option = convertOption(f.GetOption());
    p.homogeneous = f.GetIsHomogeneous();
    p.minArity = f.GetMinArity();
    return p;
  };
  for (const auto &f : s.inputs())
    sig->inputs.push_back(convert(f));
  for (const auto &f : s.outputs())
    sig->outputs.push_back(convert(f));
  for (const auto &c : s.typeConstraintParams()) {
    TypeConstraint tc;
    tc.param = c.type_param_str;
    for (const std::string &t : c.allowed_type_strs)
      addAllowedType(tc, t);
    sig->constraints.push_back(std::move(tc));
  }
  // AttrKind numbers its kinds as AttributeProto::AttributeType does.
  static_assert(static_cast<int>(AttrKind::Ints) == onnx::AttributeProto::INTS &&
                    static_cast<int>(AttrKind::Graphs) == onnx::AttributeProto::GRAPHS &&
                    static_cast<int>(AttrKind::TypeProtos) == onnx::AttributeProto::TYPE_PROTOS,
                "AttrKind mirrors AttributeProto::AttributeType");
  for (const auto &[name, a] : s.attributes())
    sig->attributes.push_back({name, static_cast<AttrKind>(a.type), a.required});
  sig->attributesKnown = true;
  sig->closedAttributes = sig->domain.empty() || sig->domain == "ai.onnx";
  setFixedTypes(*sig);
  return sig;
}

const FormalAttr *OpSignature::attribute(llvm::StringRef name) const {
  for (const FormalAttr &a : attributes)
    if (a.name == name)
      return &a;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Patches for default-domain opsets newer than libonnx 1.12 (opset 17)
//===----------------------------------------------------------------------===//

namespace {
enum class PatchKind { NewOp, AppendOptionalInput, AddBf16 };

struct PatchRow {
  PatchKind kind;
  const char *opType;
  int since;
  /// NewOp: "in:T in:T -> out:T" (a '?' suffix marks an optional input);
  /// AppendOptionalInput: "name:typeStr"; AddBf16: the type parameter.
  const char *spec;
  /// NewOp: "T=f16,f32,f64,bf16"; AppendOptionalInput: a constraint for a new
  /// parameter, or "".
  const char *types;
};
} // namespace

static const PatchRow kPatches[] = {
    // New ops of the default domain that are on the AMP lists.
    {PatchKind::NewOp, "GroupNormalization", 18, "X:T scale:T bias:T -> Y:T", "T=f16,f32,f64,bf16"},
    {PatchKind::NewOp, "Mish", 18, "X:T -> Y:T", "T=f16,f32,f64"},
    {PatchKind::NewOp, "Gelu", 20, "X:T -> Y:T", "T=f16,f32,f64,bf16"},
    {PatchKind::NewOp, "Mish", 22, "X:T -> Y:T", "T=f16,f32,f64,bf16"},
    // Ops newer than libonnx that mpc runs, so that types flow through them.
    {PatchKind::NewOp, "RMSNormalization", 23, "X:T scale:V -> Y:V",
     "T=f16,f32,f64,bf16;V=f16,f32,f64,bf16"},
    {PatchKind::NewOp, "Attention", 23,
     "Q:T1 K:T1 V:T2 attn_mask?:U past_key?:T1 past_value?:T2 -> Y:T1 present_key?:T1 "
     "present_value?:T2 qk_matmul_output?:T1",
     "T1=f16,f32,f64,bf16;T2=f16,f32,f64,bf16;U=bool,f16,f32,f64,bf16"},
    {PatchKind::NewOp, "Attention", 24,
     "Q:T1 K:T1 V:T2 attn_mask?:U past_key?:T1 past_value?:T2 nonpad_kv_seqlen?:tensor(int64) "
     "-> Y:T1 present_key?:T1 present_value?:T2 qk_matmul_output?:T1",
     "T1=f16,f32,f64,bf16;T2=f16,f32,f64,bf16;U=bool,f16,f32,f64,bf16"},
    {PatchKind::NewOp, "RotaryEmbedding", 23,
     "X:T cos_cache:T sin_cache:T position_ids?:M -> Y:T", "T=f16,f32,f64,bf16;M=i64"},
    // Opset 18 made OptionalHasElement's input optional (absent: false) and let
    // it be a tensor or a sequence (true).
    {PatchKind::NewOp, "OptionalHasElement", 18, "input?:O -> output:tensor(bool)", ""},
    // Opset 18 turned the reduction axes attribute into an optional input.
    {PatchKind::AppendOptionalInput, "ReduceL1", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceL2", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceLogSum", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceLogSumExp", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceMax", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceMean", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceMin", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceProd", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "ReduceSumSquare", 18, "axes:tensor(int64)", ""},
    {PatchKind::AppendOptionalInput, "Pad", 18, "axes:Tind", "Tind=i32,i64"},
    {PatchKind::AppendOptionalInput, "DFT", 20, "axis:tensor(int64)", ""},
    // Opset 22 admitted bfloat16 to these ops.
    {PatchKind::AddBf16, "AveragePool", 22, "T", ""},
    {PatchKind::AddBf16, "Conv", 22, "T", ""},
    {PatchKind::AddBf16, "ConvTranspose", 22, "T", ""},
    {PatchKind::AddBf16, "Dropout", 22, "T1", ""},
    {PatchKind::AddBf16, "Elu", 22, "T", ""},
    {PatchKind::AddBf16, "GRU", 22, "T", ""},
    {PatchKind::AddBf16, "GlobalAveragePool", 22, "T", ""},
    {PatchKind::AddBf16, "GlobalMaxPool", 22, "T", ""},
    {PatchKind::AddBf16, "HardSigmoid", 22, "T", ""},
    {PatchKind::AddBf16, "HardSwish", 22, "T", ""},
    {PatchKind::AddBf16, "InstanceNormalization", 22, "T", ""},
    {PatchKind::AddBf16, "LSTM", 22, "T", ""},
    {PatchKind::AddBf16, "LpNormalization", 22, "T", ""},
    {PatchKind::AddBf16, "MaxPool", 22, "T", ""},
    {PatchKind::AddBf16, "NegativeLogLikelihoodLoss", 22, "T", ""},
    {PatchKind::AddBf16, "RNN", 22, "T", ""},
    {PatchKind::AddBf16, "Round", 22, "T", ""},
    {PatchKind::AddBf16, "Selu", 22, "T", ""},
    {PatchKind::AddBf16, "Softplus", 22, "T", ""},
    {PatchKind::AddBf16, "Softsign", 22, "T", ""},
    {PatchKind::AddBf16, "ThresholdedRelu", 22, "T", ""},
};

static void parseConstraints(llvm::StringRef spec, OpSignature &sig) {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  spec.split(parts, ';', -1, false);
  for (llvm::StringRef part : parts) {
    auto [param, types] = part.split('=');
    TypeConstraint tc;
    tc.param = param.trim().str();
    llvm::SmallVector<llvm::StringRef, 8> names;
    types.split(names, ',', -1, false);
    for (llvm::StringRef n : names)
      if (auto d = parseDType(n.trim()))
        tc.tensorTypes.push_back(*d);
    sig.constraints.push_back(std::move(tc));
  }
}

static std::unique_ptr<OpSignature> buildNewOp(const PatchRow &row) {
  auto sig = std::make_unique<OpSignature>();
  sig->opType = row.opType;
  sig->sinceVersion = row.since;
  auto [ins, outs] = llvm::StringRef(row.spec).split("->");
  auto parseFormals = [](llvm::StringRef list, std::vector<FormalParam> &out) {
    llvm::SmallVector<llvm::StringRef, 4> items;
    list.split(items, ' ', -1, false);
    for (llvm::StringRef item : items) {
      auto [name, type] = item.split(':');
      FormalParam p;
      p.option = name.consume_back("?") ? FormalOption::Optional : FormalOption::Single;
      p.name = name.str();
      p.typeStr = type.str();
      out.push_back(std::move(p));
    }
  };
  parseFormals(ins, sig->inputs);
  parseFormals(outs, sig->outputs);
  auto countReq = [](const std::vector<FormalParam> &f) {
    return static_cast<int>(llvm::count_if(
        f, [](const FormalParam &p) { return p.option == FormalOption::Single; }));
  };
  sig->minInputs = countReq(sig->inputs);
  sig->maxInputs = static_cast<int>(sig->inputs.size());
  sig->minOutputs = countReq(sig->outputs);
  sig->maxOutputs = static_cast<int>(sig->outputs.size());
  parseConstraints(row.types, *sig);
  setFixedTypes(*sig);
  return sig;
}

int64_t mpc::newestKnownOpset(llvm::StringRef domain) {
  registerTrainingSchemas();
  const auto &map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find(domain == "ai.onnx" ? "" : domain.str());
  return it == map.end() ? -1 : it->second.second;
}

namespace {
/// The domains of the newest ONNX release mpc knows of, with their newest
/// opset (onnx 1.22's OpSchemaRegistry::DomainToVersionRange).
struct ReleasedDomain {
  const char *domain;
  int64_t newest;
};
constexpr ReleasedDomain kNewestRelease[] = {
    {"", 27},
    {"ai.onnx.ml", 5},
    {"ai.onnx.training", 1},
    {"ai.onnx.preview.training", 1},
};
} // namespace

int64_t mpc::newestReleasedOpset(llvm::StringRef domain) {
  if (domain == "ai.onnx")
    domain = "";
  for (const ReleasedDomain &d : kNewestRelease)
    if (domain == d.domain)
      return std::max(d.newest, newestKnownOpset(domain));
  return -1;
}

/// Ops the default domain gained in ONNX releases after libonnx 1.12 (opset
/// 17), up to kNewestRelease (onnx 1.22's schemas with since_version > 17).
static const char *const kOpsAfterLibonnx[] = {
    "BitwiseAnd",
    "BitwiseNot",
    "BitwiseOr",
    "BitwiseXor",
    "CenterCropPad",
    "Col2Im",
    "GroupNormalization",
    "Mish",
    "DeformConv",
    "AffineGrid",
    "Gelu",
    "ImageDecoder",
    "RegexFullMatch",
    "StringConcat",
    "StringSplit",
    "Attention",
    "RMSNormalization",
    "RotaryEmbedding",
    "Swish",
    "TensorScatter",
    "BitCast",
    "CumProd",
    "CausalConvWithState",
    "LinearAttention",
};

bool mpc::isKnownOp(llvm::StringRef domain, llvm::StringRef opType) {
  if (domain == "ai.onnx")
    domain = "";
  if (domain.empty() && llvm::is_contained(kOpsAfterLibonnx, opType))
    return true;
  return lookupSignature(domain, opType, INT64_MAX).sig != nullptr;
}

llvm::Error mpc::checkOpsetImports(const Model &m) {
  for (const OpsetId &o : m.opsets) {
    int64_t newest = newestReleasedOpset(o.domain);
    if (newest >= 0 && o.version > newest)
      return inputError("opset_import: opset {0} of {1} is newer than any ONNX release mpc "
                        "knows of (newest: {2})",
                        o.version,
                        o.domain.empty() || o.domain == "ai.onnx"
                            ? std::string("the default domain")
                            : "domain " + quoteName(o.domain),
                        newest);
  }
  return llvm::Error::success();
}

/// The signature at `version` from the registry plus the patch rows.
static std::unique_ptr<OpSignature> resolve(llvm::StringRef domain, llvm::StringRef opType,
                                            int64_t version, bool &fallback) {
  std::string d = domain == "ai.onnx" ? "" : domain.str();
  int64_t known = newestKnownOpset(d);
  fallback = known >= 0 && version > known;
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      opType.str(), static_cast<int>(std::min<int64_t>(version, INT32_MAX)), d);
  if (!schema && version <= 0)
    return nullptr;
  std::unique_ptr<OpSignature> sig = schema ? fromSchema(*schema) : nullptr;
  if (!d.empty())
    return sig;
  // Apply the patch rows up to `version`, in order.
  for (const PatchRow &row : kPatches) {
    if (opType != row.opType || row.since > version || (known >= row.since))
      continue;
    switch (row.kind) {
    case PatchKind::NewOp:
      sig = buildNewOp(row);
      break;
    case PatchKind::AppendOptionalInput: {
      if (!sig)
        break;
      auto [name, type] = llvm::StringRef(row.spec).split(':');
      FormalParam p;
      p.name = name.str();
      p.typeStr = type.str();
      p.option = FormalOption::Optional;
      sig->inputs.push_back(std::move(p));
      sig->maxInputs = static_cast<int>(sig->inputs.size());
      sig->attributesKnown = false; // the version's attributes changed too
      if (row.types[0])
        parseConstraints(row.types, *sig);
      setFixedTypes(*sig);
      sig->sinceVersion = row.since;
      break;
    }
    case PatchKind::AddBf16:
      if (!sig)
        break;
      for (TypeConstraint &c : sig->constraints)
        if (c.param == row.spec && !c.admitsTensor(DType::BF16))
          c.tensorTypes.push_back(DType::BF16);
      sig->sinceVersion = row.since;
      sig->attributesKnown = false;
      break;
    }
  }
  return sig;
}

SignatureLookup mpc::lookupSignature(llvm::StringRef domain, llvm::StringRef opType,
                                     int64_t opsetVersion) {
  registerTrainingSchemas();
  // One hash of "domain\0op\0version" per lookup: passes call this per node.
  static std::mutex mu;
  static llvm::StringMap<std::pair<std::unique_ptr<OpSignature>, bool>> cache;
  llvm::SmallString<64> key(domain);
  key.push_back('\0');
  key.append(opType);
  key.push_back('\0');
  char ver[8];
  std::memcpy(ver, &opsetVersion, 8);
  key.append(ver, ver + 8);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    bool fallback = false;
    auto sig = resolve(domain, opType, opsetVersion, fallback);
    it = cache.try_emplace(key, std::make_pair(std::move(sig), fallback)).first;
  }
  return {it->second.first.get(), it->second.second && it->second.first != nullptr};
}

unsigned OpIndex::mapIndexOf(const Node &n) {
  llvm::StringMap<unsigned> &byType = n.domain.empty() ? defaultOps : otherDomains[n.domain];
  auto inserted = byType.try_emplace(n.opType, size());
  if (inserted.second)
    sigs.push_back(lookupSignature(n));
  return inserted.first->second;
}

unsigned OpIndex::indexOf(const Node &n) {
  llvm::StringRef type = n.opType;
  if (!n.domain.empty() || type.size() > 16)
    return mapIndexOf(n);
  uint64_t w[2] = {0, 0};
  std::memcpy(w, type.data(), type.size());
  size_t h = ((w[0] * 0x9E3779B97F4A7C15ull) ^ (w[1] * 0xC2B2AE3D27D4EB4Full)) >> 58;
  // An op type may sit in its slot or the next: common pairs share a slot
  // (Cast and MatMul, Exp and Identity), and with one slot each a graph
  // alternating between them would miss on every node.
  CacheEntry &first = cache[h], &second = cache[(h + 1) % cache.size()];
  for (CacheEntry *e : {&first, &second})
    if (e->len == type.size() && e->lo == w[0] && e->hi == w[1])
      return e->index;
  CacheEntry &e = first.len == ~size_t(0) || second.len != ~size_t(0) ? first : second;
  e.lo = w[0];
  e.hi = w[1];
  e.len = type.size();
  e.index = mapIndexOf(n);
  return e.index;
}

SignatureLookup mpc::lookupSignature(const Node &n) {
  int64_t v = n.opsetVersion();
  if (v < 0)
    return {};
  return lookupSignature(n.domain, n.opType, v);
}
