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
#include "llvm/Support/ErrorHandling.h"
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
enum class PatchKind { FixLibonnx, NewOp, AppendOptionalInput, AddTypes, SameSignature };

struct PatchRow {
  PatchKind kind;
  const char *opType;
  int since;
  /// FixLibonnx, NewOp: "in:T in:T -> out:T" (a '?' suffix marks an optional
  /// input); AppendOptionalInput: "name:typeStr"; AddTypes: the type
  /// parameters ("T1,T2"); SameSignature: "".
  const char *spec;
  /// FixLibonnx, NewOp: "T=f16,f32;V=..."; AppendOptionalInput: a constraint for a new
  /// parameter, or ""; AddTypes: the element types each parameter gains.
  /// A type list is short dtype names (DType.h), after an optional "tso|"
  /// saying which forms each name stands for: t a tensor, s a sequence of
  /// tensors, o an optional (of a tensor or a sequence); tensors alone
  /// without it.
  const char *types;
};
} // namespace

// The element types ONNX releases after libonnx 1.12 admitted, in the groups
// they came in: 8-bit floats (opsets 19-21), 4-bit integers (21), the 4-bit
// float (23), the scale-only 8-bit float (24), 2-bit integers (25).
#define MPC_F8 "f8e4m3fn,f8e4m3fnuz,f8e5m2,f8e5m2fnuz"
#define MPC_I4 "u4,i4"
#define MPC_F4 "f4e2m1"
#define MPC_E8 "f8e8m0"
#define MPC_I2 "u2,i2"
// The element types of opset 15's optional/sequence ops.
#define MPC_OPTIONAL_ELEMS "u8,u16,u32,u64,i8,i16,i32,i64,f16,f32,f64,str,bool,c64,c128"
// The rows of one op whose type parameters gained each group in turn, as the
// data-movement ops did at opsets 19 (or 21 with the 4-bit integers), 23, 24
// and 25.
#define MPC_LOW_PRECISION_ROWS(op, params, forms)                                            \
  {PatchKind::AddTypes, op, 23, params, forms MPC_F4},                                       \
      {PatchKind::AddTypes, op, 24, params, forms MPC_E8},                                   \
      {PatchKind::AddTypes, op, 25, params, forms MPC_I2}
#define MPC_LOW_PRECISION_FROM_19(op, params, forms)                                         \
  {PatchKind::AddTypes, op, 19, params, forms MPC_F8},                                       \
      {PatchKind::AddTypes, op, 21, params, forms MPC_I4}, MPC_LOW_PRECISION_ROWS(op, params, forms)
#define MPC_LOW_PRECISION_FROM_21(op, params)                                                \
  {PatchKind::AddTypes, op, 21, params, MPC_F8 "," MPC_I4}, MPC_LOW_PRECISION_ROWS(op, params, "")

/// Every signature change of the default domain from opset 18 to
/// kNewestRelease (onnx 1.22's schemas against the previous version of each
/// op): formals, type parameters and their types. With kAttrPatches (the
/// attributes) a signature built from these rows is the op's at its version,
/// and checked as exactly as libonnx's; `mpc ops --op NAME --opset N` prints
/// it, and tests/tools/test_ops.py holds it to the onnx wheel's schemas.
static const PatchRow kPatches[] = {
    // Versions libonnx 1.12 has wrong, as later onnx releases corrected them:
    // GridSample-16's grid is of the float type T2 and its result of X's type
    // (libonnx: grid of X's type, a float result); Erf-13 takes floats only.
    {PatchKind::FixLibonnx, "GridSample", 16, "X:T1 grid:T2 -> Y:T1",
     "T1=u8,u16,u32,u64,i8,i16,i32,i64,f16,f32,f64,str,bool,c64,c128;T2=f16,f32,f64"},
    {PatchKind::FixLibonnx, "Erf", 13, "input:T -> output:T", "T=f16,f32,f64,bf16"},
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
     "T1=f16,f32,f64,bf16;T2=f16,f32,f64,bf16;U=u8,u16,u32,u64,i8,i16,i32,i64,f16,f32,f64,bf16,bool"},
    {PatchKind::NewOp, "Attention", 24,
     "Q:T1 K:T1 V:T2 attn_mask?:U past_key?:T1 past_value?:T2 nonpad_kv_seqlen?:tensor(int64) "
     "-> Y:T1 present_key?:T1 present_value?:T2 qk_matmul_output?:T1",
     "T1=f16,f32,f64,bf16;T2=f16,f32,f64,bf16;U=u8,u16,u32,u64,i8,i16,i32,i64,f16,f32,f64,bf16,bool"},
    {PatchKind::NewOp, "RotaryEmbedding", 23,
     "X:T cos_cache:T sin_cache:T position_ids?:M -> Y:T", "T=f16,f32,bf16;M=i64"},
    // New ops mpc has kernels for.
    {PatchKind::NewOp, "BitwiseAnd", 18, "A:T B:T -> C:T", "T=u8,u16,u32,u64,i8,i16,i32,i64"},
    {PatchKind::NewOp, "BitwiseOr", 18, "A:T B:T -> C:T", "T=u8,u16,u32,u64,i8,i16,i32,i64"},
    {PatchKind::NewOp, "BitwiseXor", 18, "A:T B:T -> C:T", "T=u8,u16,u32,u64,i8,i16,i32,i64"},
    {PatchKind::NewOp, "BitwiseNot", 18, "X:T -> Y:T", "T=u8,u16,u32,u64,i8,i16,i32,i64"},
    {PatchKind::NewOp, "Swish", 24, "X:T -> Y:T", "T=f16,f32,f64,bf16"},
    {PatchKind::NewOp, "CumProd", 26, "x:T axis:T2 -> y:T",
     "T=u32,u64,i32,i64,f16,f32,f64,bf16;T2=i32,i64"},
    // Opset 18 made OptionalHasElement's input optional (absent: false) and let
    // it be a tensor or a sequence (true); OptionalGetElement takes them too.
    {PatchKind::NewOp, "OptionalHasElement", 18, "input?:O -> output:B",
     "O=tso|" MPC_OPTIONAL_ELEMS ";B=bool"},
    {PatchKind::AddTypes, "OptionalGetElement", 18, "O", "ts|" MPC_OPTIONAL_ELEMS},
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
    // Versions that changed only what an attribute's values mean (new modes
    // and reductions): the signature is the previous version's.
    {PatchKind::SameSignature, "ScatterElements", 18, "", ""},
    {PatchKind::SameSignature, "ScatterND", 18, "", ""},
    {PatchKind::SameSignature, "Pad", 19, "", ""},
    {PatchKind::SameSignature, "Resize", 19, "", ""},
    {PatchKind::SameSignature, "GridSample", 20, "", ""},
    // Opsets 19-21 gave the quantizers scales of any float type, 8-bit
    // float and then 16- and 4-bit integer data; 23 split their types.
    {PatchKind::NewOp, "QuantizeLinear", 19, "x:T1 y_scale:T1 y_zero_point?:T2 -> y:T2",
     "T1=f32,f16,bf16,i32;T2=i8,u8," MPC_F8},
    {PatchKind::AddTypes, "QuantizeLinear", 21, "T2", "i16,u16," MPC_I4},
    {PatchKind::NewOp, "QuantizeLinear", 23, "x:T1 y_scale:T2 y_zero_point?:T3 -> y:T3",
     "T1=f32,f16,bf16,i32;T2=f32,f16,bf16,i32;T3=i8,u8,i16,u16," MPC_F8 "," MPC_I4 "," MPC_F4},
    {PatchKind::AddTypes, "QuantizeLinear", 24, "T2", MPC_E8},
    {PatchKind::AddTypes, "QuantizeLinear", 25, "T3", MPC_I2},
    {PatchKind::NewOp, "DequantizeLinear", 19, "x:T1 x_scale:T2 x_zero_point?:T1 -> y:T2",
     "T1=i8,u8,i32," MPC_F8 ";T2=f32,f16,bf16"},
    {PatchKind::AddTypes, "DequantizeLinear", 21, "T1", "i16,u16," MPC_I4},
    {PatchKind::NewOp, "DequantizeLinear", 23, "x:T1 x_scale:T2 x_zero_point?:T1 -> y:T3",
     "T1=i8,u8,i16,u16,i32," MPC_F8 "," MPC_I4 "," MPC_F4 ";T2=f32,f16,bf16;T3=f32,f16,bf16"},
    {PatchKind::AddTypes, "DequantizeLinear", 24, "T2", MPC_E8},
    {PatchKind::AddTypes, "DequantizeLinear", 25, "T1", MPC_I2},
    {PatchKind::NewOp, "QLinearMatMul", 21,
     "a:T1 a_scale:TS a_zero_point:T1 b:T2 b_scale:TS b_zero_point:T2 y_scale:TS "
     "y_zero_point:T3 -> y:T3",
     "TS=f32,f16,bf16;T1=i8,u8," MPC_F8 ";T2=i8,u8," MPC_F8 ";T3=i8,u8," MPC_F8},
    // Opsets 19-25 admitted the low-precision types to the ops that move data
    // without computing on it.
    MPC_LOW_PRECISION_FROM_19("Cast", "T1,T2", ""),
    MPC_LOW_PRECISION_FROM_19("CastLike", "T1,T2", ""),
    MPC_LOW_PRECISION_FROM_19("Constant", "T", ""),
    MPC_LOW_PRECISION_FROM_19("Identity", "V", ""),
    MPC_LOW_PRECISION_FROM_19("If", "V", "tso|"),
    MPC_LOW_PRECISION_FROM_19("Loop", "V", "tso|"),
    MPC_LOW_PRECISION_FROM_19("Reshape", "T", ""),
    MPC_LOW_PRECISION_FROM_19("Scan", "V", ""),
    MPC_LOW_PRECISION_FROM_19("Shape", "T", ""),
    MPC_LOW_PRECISION_FROM_19("Size", "T", ""),
    MPC_LOW_PRECISION_FROM_21("Flatten", "T"),
    MPC_LOW_PRECISION_FROM_21("Pad", "T"),
    MPC_LOW_PRECISION_FROM_21("Squeeze", "T"),
    MPC_LOW_PRECISION_FROM_21("Transpose", "T"),
    MPC_LOW_PRECISION_FROM_21("Unsqueeze", "T"),
    {PatchKind::AddTypes, "ConstantOfShape", 20, "T2", "bf16," MPC_F8},
    {PatchKind::AddTypes, "ConstantOfShape", 21, "T2", MPC_I4},
    MPC_LOW_PRECISION_ROWS("ConstantOfShape", "T2", ""),
    {PatchKind::AddTypes, "Equal", 19, "T", "str"},
    {PatchKind::AddTypes, "IsInf", 20, "T1", "f16,bf16," MPC_F8},
    {PatchKind::AddTypes, "IsNaN", 20, "T1", MPC_F8},
    {PatchKind::AddTypes, "ReduceMax", 20, "T", "bool"},
    {PatchKind::AddTypes, "ReduceMin", 20, "T", "bool"},
    // Opset 22 admitted bfloat16 to these ops (Dropout 8-bit floats too).
    {PatchKind::AddTypes, "Acos", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Acosh", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Asin", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Asinh", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Atan", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Atanh", 22, "T", "bf16"},
    {PatchKind::AddTypes, "AveragePool", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Bernoulli", 22, "T1", "bf16"},
    {PatchKind::AddTypes, "Conv", 22, "T", "bf16"},
    {PatchKind::AddTypes, "ConvTranspose", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Cos", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Cosh", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Det", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Dropout", 22, "T", MPC_F8},
    {PatchKind::AddTypes, "Dropout", 22, "T1", "bf16," MPC_F8},
    {PatchKind::AddTypes, "Elu", 22, "T", "bf16"},
    {PatchKind::AddTypes, "EyeLike", 22, "T1,T2", "bf16"},
    {PatchKind::AddTypes, "GRU", 22, "T", "bf16"},
    {PatchKind::AddTypes, "GlobalAveragePool", 22, "T", "bf16"},
    {PatchKind::AddTypes, "GlobalLpPool", 22, "T", "bf16"},
    {PatchKind::AddTypes, "GlobalMaxPool", 22, "T", "bf16"},
    {PatchKind::AddTypes, "GridSample", 22, "T1,T2", "bf16"},
    {PatchKind::AddTypes, "HardSigmoid", 22, "T", "bf16"},
    {PatchKind::AddTypes, "HardSwish", 22, "T", "bf16"},
    {PatchKind::AddTypes, "InstanceNormalization", 22, "T", "bf16"},
    {PatchKind::AddTypes, "LSTM", 22, "T", "bf16"},
    {PatchKind::AddTypes, "LpNormalization", 22, "T", "bf16"},
    {PatchKind::AddTypes, "LpPool", 22, "T", "bf16"},
    {PatchKind::AddTypes, "MaxPool", 22, "T", "bf16"},
    {PatchKind::AddTypes, "MaxRoiPool", 22, "T", "bf16"},
    {PatchKind::AddTypes, "MaxUnpool", 22, "T1", "bf16"},
    {PatchKind::AddTypes, "Multinomial", 22, "T1", "bf16"},
    {PatchKind::AddTypes, "NegativeLogLikelihoodLoss", 22, "T", "bf16"},
    {PatchKind::AddTypes, "RNN", 22, "T", "bf16"},
    {PatchKind::AddTypes, "RandomNormal", 22, "T", "bf16"},
    {PatchKind::AddTypes, "RandomNormalLike", 22, "T1,T2", "bf16"},
    {PatchKind::AddTypes, "RandomUniform", 22, "T", "bf16"},
    {PatchKind::AddTypes, "RandomUniformLike", 22, "T1,T2", "bf16"},
    {PatchKind::AddTypes, "RoiAlign", 22, "T1", "bf16"},
    {PatchKind::AddTypes, "Round", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Selu", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Sin", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Sinh", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Softplus", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Softsign", 22, "T", "bf16"},
    {PatchKind::AddTypes, "Tan", 22, "T", "bf16"},
    {PatchKind::AddTypes, "ThresholdedRelu", 22, "T", "bf16"},
    {PatchKind::AddTypes, "SplitToSequence", 24, "T", "bf16"},
    {PatchKind::AddTypes, "SplitToSequence", 24, "S", "s|bf16"},
    {PatchKind::AddTypes, "TopK", 24, "T", "bf16"},
    {PatchKind::AddTypes, "Range", 27, "T", "f16,bf16"},
};

#undef MPC_LOW_PRECISION_FROM_21
#undef MPC_LOW_PRECISION_FROM_19
#undef MPC_LOW_PRECISION_ROWS
#undef MPC_OPTIONAL_ELEMS
#undef MPC_I2
#undef MPC_E8
#undef MPC_F4
#undef MPC_I4
#undef MPC_F8

namespace {
/// An attribute an op gained (or lost) in a release after libonnx 1.12: the
/// difference between onnx 1.22's schemas and the opset-17 ones, so that
/// nodes of newer opsets are checked against the attributes of their own
/// version. No attribute changed kind or became required in that span.
struct AttrPatchRow {
  const char *opType;
  int since;
  const char *name;
  /// AttrKind::Undefined: the version dropped the attribute.
  AttrKind kind;
  bool required;
};
} // namespace

static const AttrPatchRow kAttrPatches[] = {
    {"GroupNormalization", 18, "num_groups", AttrKind::Int, true},
    {"GroupNormalization", 18, "epsilon", AttrKind::Float, false},
    {"LpPool", 18, "ceil_mode", AttrKind::Int, false},
    {"LpPool", 18, "dilations", AttrKind::Ints, false},
    {"Resize", 18, "antialias", AttrKind::Int, false},
    {"Resize", 18, "axes", AttrKind::Ints, false},
    {"Resize", 18, "keep_aspect_ratio_policy", AttrKind::String, false},
    {"Split", 18, "num_outputs", AttrKind::Int, false},
    // Opset 18 moved the reductions' axes into an input.
    {"ReduceL1", 18, "axes", AttrKind::Undefined, false},
    {"ReduceL1", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceL2", 18, "axes", AttrKind::Undefined, false},
    {"ReduceL2", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceLogSum", 18, "axes", AttrKind::Undefined, false},
    {"ReduceLogSum", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceLogSumExp", 18, "axes", AttrKind::Undefined, false},
    {"ReduceLogSumExp", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceMax", 18, "axes", AttrKind::Undefined, false},
    {"ReduceMax", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceMean", 18, "axes", AttrKind::Undefined, false},
    {"ReduceMean", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceMin", 18, "axes", AttrKind::Undefined, false},
    {"ReduceMin", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceProd", 18, "axes", AttrKind::Undefined, false},
    {"ReduceProd", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"ReduceSumSquare", 18, "axes", AttrKind::Undefined, false},
    {"ReduceSumSquare", 18, "noop_with_empty_axes", AttrKind::Int, false},
    {"AveragePool", 19, "dilations", AttrKind::Ints, false},
    {"Cast", 19, "saturate", AttrKind::Int, false},
    {"CastLike", 19, "saturate", AttrKind::Int, false},
    {"QuantizeLinear", 19, "saturate", AttrKind::Int, false},
    // Opset 20 moved DFT's axis into an input.
    {"DFT", 20, "axis", AttrKind::Undefined, false},
    {"Gelu", 20, "approximate", AttrKind::String, false},
    {"DequantizeLinear", 21, "block_size", AttrKind::Int, false},
    {"GroupNormalization", 21, "stash_type", AttrKind::Int, false},
    {"QuantizeLinear", 21, "block_size", AttrKind::Int, false},
    {"QuantizeLinear", 21, "output_dtype", AttrKind::Int, false},
    {"Attention", 23, "is_causal", AttrKind::Int, false},
    {"Attention", 23, "kv_num_heads", AttrKind::Int, false},
    {"Attention", 23, "q_num_heads", AttrKind::Int, false},
    {"Attention", 23, "qk_matmul_output_mode", AttrKind::Int, false},
    {"Attention", 23, "scale", AttrKind::Float, false},
    {"Attention", 23, "softcap", AttrKind::Float, false},
    {"Attention", 23, "softmax_precision", AttrKind::Int, false},
    {"DequantizeLinear", 23, "output_dtype", AttrKind::Int, false},
    {"QuantizeLinear", 23, "precision", AttrKind::Int, false},
    {"RMSNormalization", 23, "axis", AttrKind::Int, false},
    {"RMSNormalization", 23, "epsilon", AttrKind::Float, false},
    {"RMSNormalization", 23, "stash_type", AttrKind::Int, false},
    {"RotaryEmbedding", 23, "interleaved", AttrKind::Int, false},
    {"RotaryEmbedding", 23, "num_heads", AttrKind::Int, false},
    {"RotaryEmbedding", 23, "rotary_embedding_dim", AttrKind::Int, false},
    {"Cast", 24, "round_mode", AttrKind::String, false},
    {"CastLike", 24, "round_mode", AttrKind::String, false},
    {"Swish", 24, "alpha", AttrKind::Float, false},
    {"CumProd", 26, "exclusive", AttrKind::Int, false},
    {"CumProd", 26, "reverse", AttrKind::Int, false},
    {"Range", 27, "stash_type", AttrKind::Int, false},
};

/// Brings a signature's attributes from libonnx's version to `version`'s.
static void patchAttributes(OpSignature &sig, int64_t known, int64_t version) {
  for (const AttrPatchRow &row : kAttrPatches) {
    if (sig.opType != row.opType || row.since <= known || row.since > version)
      continue;
    llvm::erase_if(sig.attributes, [&](const FormalAttr &a) { return a.name == row.name; });
    if (row.kind != AttrKind::Undefined)
      sig.attributes.push_back({row.name, row.kind, row.required});
    sig.sinceVersion = std::max(sig.sinceVersion, row.since);
  }
  sig.attributesKnown = true;
  sig.closedAttributes = true;
}

/// Adds a row's type list ("f16,bf16", or "tso|u8,..." for other forms than
/// tensors: see PatchRow::types) to `c`, skipping types it admits already.
static void appendTypes(TypeConstraint &c, llvm::StringRef list) {
  llvm::StringRef forms = "t";
  if (list.contains('|'))
    std::tie(forms, list) = list.split('|');
  llvm::SmallVector<llvm::StringRef, 16> names;
  list.split(names, ',', -1, false);
  for (llvm::StringRef n : names) {
    llvm::Optional<DType> d = parseDType(n.trim());
    if (!d)
      llvm::report_fatal_error(llvm::Twine("OpSignature.cpp: unknown element type '") + n +
                               "' in a patch row");
    for (char f : forms) {
      auto &dst = f == 't' ? c.tensorTypes : f == 's' ? c.seqTypes : c.optionalTypes;
      if (!llvm::is_contained(dst, *d))
        dst.push_back(*d);
    }
  }
}

static void parseConstraints(llvm::StringRef spec, OpSignature &sig) {
  llvm::SmallVector<llvm::StringRef, 4> parts;
  spec.split(parts, ';', -1, false);
  for (llvm::StringRef part : parts) {
    auto [param, types] = part.split('=');
    TypeConstraint tc;
    tc.param = param.trim().str();
    appendTypes(tc, types);
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

namespace {
/// The versions each default-domain op gained in ONNX releases after libonnx
/// 1.12 (opset 17), up to kNewestRelease: onnx 1.22's schemas with
/// since_version > 17. New ops are the rows libonnx has no schema for.
struct VersionsAfterLibonnx {
  const char *opType;
  int versions[6]; // ascending, 0 after the last
};
} // namespace

static const VersionsAfterLibonnx kVersionsAfterLibonnx[] = {
    {"Acos", {22}}, {"Acosh", {22}}, {"AffineGrid", {20}}, {"Asin", {22}}, {"Asinh", {22}},
    {"Atan", {22}}, {"Atanh", {22}}, {"Attention", {23, 24}}, {"AveragePool", {19, 22}},
    {"Bernoulli", {22}}, {"BitCast", {26}}, {"BitwiseAnd", {18}}, {"BitwiseNot", {18}},
    {"BitwiseOr", {18}}, {"BitwiseXor", {18}}, {"Cast", {19, 21, 23, 24, 25}},
    {"CastLike", {19, 21, 23, 24, 25}}, {"CausalConvWithState", {27}}, {"CenterCropPad", {18}},
    {"Col2Im", {18}}, {"Constant", {19, 21, 23, 24, 25}},
    {"ConstantOfShape", {20, 21, 23, 24, 25}}, {"Conv", {22}}, {"ConvTranspose", {22}},
    {"Cos", {22}}, {"Cosh", {22}}, {"CumProd", {26}}, {"DFT", {20}}, {"DeformConv", {19, 22}},
    {"DequantizeLinear", {19, 21, 23, 24, 25}}, {"Det", {22}}, {"Dropout", {22}}, {"Elu", {22}},
    {"Equal", {19}}, {"EyeLike", {22}}, {"Flatten", {21, 23, 24, 25}}, {"GRU", {22}},
    {"Gelu", {20}}, {"GlobalAveragePool", {22}}, {"GlobalLpPool", {22}},
    {"GlobalMaxPool", {22}}, {"GridSample", {20, 22}}, {"GroupNormalization", {18, 21}},
    {"HardSigmoid", {22}}, {"HardSwish", {22}}, {"Identity", {19, 21, 23, 24, 25}},
    {"If", {19, 21, 23, 24, 25}}, {"ImageDecoder", {20}}, {"InstanceNormalization", {22}},
    {"IsInf", {20}}, {"IsNaN", {20}}, {"LSTM", {22}}, {"LinearAttention", {27}},
    {"Loop", {19, 21, 23, 24, 25}}, {"LpNormalization", {22}}, {"LpPool", {18, 22}},
    {"MaxPool", {22}}, {"MaxRoiPool", {22}}, {"MaxUnpool", {22}}, {"Mish", {18, 22}},
    {"Multinomial", {22}}, {"NegativeLogLikelihoodLoss", {22}}, {"OptionalGetElement", {18}},
    {"OptionalHasElement", {18}}, {"Pad", {18, 19, 21, 23, 24, 25}}, {"QLinearMatMul", {21}},
    {"QuantizeLinear", {19, 21, 23, 24, 25}}, {"RMSNormalization", {23}}, {"RNN", {22}},
    {"RandomNormal", {22}}, {"RandomNormalLike", {22}}, {"RandomUniform", {22}},
    {"RandomUniformLike", {22}}, {"Range", {27}}, {"ReduceL1", {18}}, {"ReduceL2", {18}},
    {"ReduceLogSum", {18}}, {"ReduceLogSumExp", {18}}, {"ReduceMax", {18, 20}},
    {"ReduceMean", {18}}, {"ReduceMin", {18, 20}}, {"ReduceProd", {18}},
    {"ReduceSumSquare", {18}}, {"RegexFullMatch", {20}}, {"Reshape", {19, 21, 23, 24, 25}},
    {"Resize", {18, 19}}, {"RoiAlign", {22}}, {"RotaryEmbedding", {23}}, {"Round", {22}},
    {"Scan", {19, 21, 23, 24, 25}}, {"ScatterElements", {18}}, {"ScatterND", {18}},
    {"Selu", {22}}, {"Shape", {19, 21, 23, 24, 25}}, {"Sin", {22}}, {"Sinh", {22}},
    {"Size", {19, 21, 23, 24, 25}}, {"Softplus", {22}}, {"Softsign", {22}}, {"Split", {18}},
    {"SplitToSequence", {24}}, {"Squeeze", {21, 23, 24, 25}}, {"StringConcat", {20}},
    {"StringSplit", {20}}, {"Swish", {24}}, {"Tan", {22}}, {"TensorScatter", {24}},
    {"ThresholdedRelu", {22}}, {"TopK", {24}}, {"Transpose", {21, 23, 24, 25}},
    {"Unsqueeze", {21, 23, 24, 25}},
};

/// The newest version of default-domain `opType` newer than libonnx's and at
/// most `version`; 0 when the op has none.
static int newestVersionAfterLibonnx(llvm::StringRef opType, int64_t version) {
  for (const VersionsAfterLibonnx &row : kVersionsAfterLibonnx) {
    if (opType != row.opType)
      continue;
    int newest = 0;
    for (int v : row.versions)
      if (v != 0 && v <= version)
        newest = v;
    return newest;
  }
  return 0;
}

bool mpc::isKnownOp(llvm::StringRef domain, llvm::StringRef opType) {
  if (domain == "ai.onnx")
    domain = "";
  if (domain.empty() && newestVersionAfterLibonnx(opType, INT64_MAX) != 0)
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
  if (!d.empty()) {
    // Another domain's versions past libonnx's may have other attributes.
    if (sig && fallback)
      sig->attributesKnown = false;
    return sig;
  }
  // Apply the patch rows up to `version`, in order.
  for (const PatchRow &row : kPatches) {
    if (opType != row.opType || row.since > version)
      continue;
    if (row.kind == PatchKind::FixLibonnx) {
      // Only the version the row corrects (a later one has its own schema).
      if (sig && sig->sinceVersion == row.since) {
        std::vector<FormalAttr> attrs = std::move(sig->attributes);
        bool attributesKnown = sig->attributesKnown, closed = sig->closedAttributes;
        sig = buildNewOp(row);
        sig->attributes = std::move(attrs);
        sig->attributesKnown = attributesKnown;
        sig->closedAttributes = closed;
      }
      continue;
    }
    if (known >= row.since)
      continue;
    switch (row.kind) {
    case PatchKind::FixLibonnx:
      break;
    case PatchKind::NewOp: {
      // An op libonnx knows keeps its attributes (kAttrPatches brings them
      // to the node's version below).
      std::vector<FormalAttr> attrs = sig ? std::move(sig->attributes) : std::vector<FormalAttr>();
      sig = buildNewOp(row);
      sig->attributes = std::move(attrs);
      break;
    }
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
      if (row.types[0])
        parseConstraints(row.types, *sig);
      setFixedTypes(*sig);
      sig->sinceVersion = row.since;
      break;
    }
    case PatchKind::AddTypes: {
      if (!sig)
        break;
      llvm::SmallVector<llvm::StringRef, 2> params;
      llvm::StringRef(row.spec).split(params, ',', -1, false);
      for (llvm::StringRef param : params) {
        TypeConstraint *c = nullptr;
        for (TypeConstraint &k : sig->constraints)
          if (k.param == param)
            c = &k;
        if (!c)
          llvm::report_fatal_error(llvm::Twine("OpSignature.cpp: ") + row.opType +
                                   " has no type parameter " + param);
        appendTypes(*c, row.types);
      }
      sig->sinceVersion = std::max(sig->sinceVersion, row.since);
      break;
    }
    case PatchKind::SameSignature:
      if (sig)
        sig->sinceVersion = std::max(sig->sinceVersion, row.since);
      break;
    }
  }
  if (sig && fallback) {
    // kAttrPatches lists every attribute change up to kNewestRelease, and
    // checkOpsetImports refuses newer opsets.
    patchAttributes(*sig, known, version);
    // A signature is a fallback only where the op has a version newer than
    // the one it was built from (libonnx's, or a row's): Slice at opset 23 is
    // Slice-13, which libonnx knows exactly, types and all; Cast at opset 23
    // is libonnx's Cast-13 with kPatches' rows of opsets 19, 21 and 23.
    fallback = newestVersionAfterLibonnx(opType, version) > sig->sinceVersion;
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
