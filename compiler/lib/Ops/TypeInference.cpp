//===- TypeInference.cpp - Element types from the schemas ------------------===//
//
// Output element types from type parameters, fixed types and the handful of
// attributes that carry a dtype. Container ops (sequences, optionals) relate
// their tensor and container parameters, which one table states.
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/TypeInference.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mpc;

namespace {
/// Ops whose two type parameters describe one element type: a container
/// parameter and the tensor parameter of its elements.
struct LinkedParams {
  llvm::StringLiteral opType; ///< StringLiterals: compares need no strlen
  llvm::StringLiteral container;
  llvm::StringLiteral element;
};
} // namespace

static const LinkedParams kLinked[] = {
    {"SequenceConstruct", "S", "T"}, {"SequenceInsert", "S", "T"},
    {"SequenceAt", "S", "T"},        {"SplitToSequence", "S", "T"},
    {"ConcatFromSequence", "S", "T"}, {"Optional", "O", "V"},
    {"OptionalGetElement", "O", "V"},
};

/// "" and "ai.onnx" (StringRef compares: no strlen per call).
static bool isDefaultDomain(const Node &n) {
  llvm::StringRef d = n.domain;
  return d.empty() || d == "ai.onnx";
}

static const LinkedParams *linkedParams(const Node &n) {
  // Called per port on every node: reject the common ops by first letter.
  llvm::StringRef op = n.opType;
  char c = op.empty() ? 0 : op[0];
  if (c != 'S' && c != 'C' && c != 'O')
    return nullptr;
  if (!isDefaultDomain(n))
    return nullptr;
  for (const LinkedParams &l : kLinked)
    if (op == l.opType)
      return &l;
  return nullptr;
}

llvm::StringRef mpc::typeParamRef(const Node &n, const OpSignature *sig, bool isInput,
                                  unsigned port) {
  const FormalParam *f = nullptr;
  if (sig)
    f = isInput ? sig->inputFormal(port) : sig->outputFormal(port);
  if (!f || f->fixedElem != DType::Undefined || !sig->constraintOf(*f))
    return "";
  if (const LinkedParams *l = linkedParams(n))
    if (f->typeStr == l->element)
      return l->container;
  return f->typeStr;
}

std::string mpc::typeParamOfPort(const Node &n, const OpSignature *sig, bool isInput,
                                 unsigned port) {
  llvm::StringRef p = typeParamRef(n, sig, isInput, port);
  if (p.empty())
    return (isInput ? "#in" : "#out") + std::to_string(port);
  return p.str();
}

/// The element type named by a dtype-valued attribute, or Undefined.
static DType dtypeAttr(const Node &n, llvm::StringRef name, DType dflt) {
  const Attribute *a = n.attr(name);
  if (!a || a->kind != AttrKind::Int || !isKnownDType(a->i))
    return dflt;
  return static_cast<DType>(a->i);
}

/// Types of outputs defined by attributes rather than inputs.
static Type attributeTypedOutput(const Node &n, unsigned out) {
  if (!isDefaultDomain(n)) {
    // ai.mpc.training's ops with a folded Cast: output 0 typed by `to`, else
    // like input 0 (BiasGrad's dB, GemmBiasAct's Y and its bias_grad).
    llvm::StringRef op = n.opType;
    if ((out == 0 || (out == 1 && op == "GemmBiasAct")) &&
        (op == "BiasGrad" || op == "GemmBiasAct") &&
        llvm::StringRef(n.domain) == "ai.mpc.training") {
      DType in = n.numInputs() && n.input(0) ? n.input(0)->type.tensorElemType()
                                             : DType::Undefined;
      return Type::tensor(dtypeAttr(n, "to", in));
    }
    return Type();
  }
  llvm::StringRef op = n.opType;
  if (op == "Cast")
    return Type::tensor(dtypeAttr(n, "to", DType::Undefined));
  if (op == "ConstantOfShape") {
    const Attribute *a = n.attr("value");
    return Type::tensor(a && !a->tensors.empty() ? a->tensors[0].dtype : DType::F32);
  }
  if (op == "Constant") {
    for (const Attribute &a : n.attrs) {
      if (a.name == "value" && !a.tensors.empty())
        return Type::tensor(a.tensors[0].dtype, a.tensors[0].dims);
      if (a.name == "value_float")
        return Type::tensor(DType::F32, {});
      if (a.name == "value_floats")
        return Type::tensor(DType::F32, {static_cast<int64_t>(a.floats.size())});
      if (a.name == "value_int")
        return Type::tensor(DType::I64, {});
      if (a.name == "value_ints")
        return Type::tensor(DType::I64, {static_cast<int64_t>(a.ints.size())});
      if (a.name == "value_string")
        return Type::tensor(DType::String, {});
      if (a.name == "value_strings")
        return Type::tensor(DType::String, {static_cast<int64_t>(a.strings.size())});
    }
    return Type();
  }
  if (op == "RandomNormal" || op == "RandomUniform")
    return Type::tensor(dtypeAttr(n, "dtype", DType::F32));
  if (op == "RandomNormalLike" || op == "RandomUniformLike" || op == "EyeLike" ||
      op == "Bernoulli") {
    DType in = n.numInputs() && n.input(0) ? n.input(0)->type.tensorElemType() : DType::F32;
    return Type::tensor(dtypeAttr(n, "dtype", in));
  }
  if (op == "Multinomial")
    return Type::tensor(dtypeAttr(n, "dtype", DType::I32));
  if (op == "SequenceEmpty")
    return Type::wrap(TypeKind::Sequence, Type::tensor(dtypeAttr(n, "dtype", DType::F32)));
  (void)out;
  return Type();
}

Type mpc::attributeOutputType(const Node &n, unsigned out) {
  return attributeTypedOutput(n, out);
}

/// Output types of control-flow nodes come from their bodies.
static Type bodyTypedOutput(const Node &n, unsigned out,
                            llvm::function_ref<const Type &(const Value *)> typeOf) {
  auto body = [&](llvm::StringRef name) -> const Graph * {
    const Attribute *a = n.attr(name);
    return a && !a->graphs.empty() ? a->graphs[0].get() : nullptr;
  };
  llvm::StringRef op = n.opType;
  if (op == "If") {
    if (const Graph *g = body("then_branch"))
      if (out < g->outputs().size())
        return typeOf(g->outputs()[out]);
    return Type();
  }
  if (op == "Loop" || op == "Scan") {
    const Graph *g = body("body");
    if (!g)
      return Type();
    // Loop body outputs: cond, carried..., scan...; Scan body: carried..., scan...
    unsigned skip = op == "Loop" ? 1 : 0;
    if (out + skip >= g->outputs().size())
      return Type();
    // Scan outputs gain a dimension: shapes are left to shape inference.
    const Type &t = typeOf(g->outputs()[out + skip]);
    if (t.kind == TypeKind::Tensor)
      return Type::tensor(t.elem);
    Type copy = t;
    copy.hasShape = false;
    copy.dims.clear();
    return copy;
  }
  return Type();
}

Type mpc::inferOutputType(const Node &n, unsigned out, const OpSignature *sig) {
  return inferOutputType(n, out, sig, [](const Value *v) -> const Type & { return v->type; });
}

Type mpc::inferOutputType(const Node &n, unsigned out, const OpSignature *sig,
                          llvm::function_ref<const Type &(const Value *)> typeOf) {
  llvm::StringRef op = n.opType;
  if (op == "If" || op == "Loop" || op == "Scan")
    return bodyTypedOutput(n, out, typeOf);
  Type byAttr = attributeTypedOutput(n, out);
  if (byAttr.isKnown() && byAttr.tensorElemType() != DType::Undefined)
    return byAttr;
  if (!sig)
    return Type();
  const FormalParam *f = sig->outputFormal(out);
  if (!f)
    return Type();
  if (!sig->constraintOf(*f)) {
    Type t;
    if (parseTypeString(f->typeStr, t))
      return t;
    return Type();
  }
  // Find an input typed by the same parameter (or by its linked partner).
  llvm::StringRef param = typeParamRef(n, sig, /*isInput=*/false, out);
  const LinkedParams *link = linkedParams(n);
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    Value *in = n.input(i);
    if (!in)
      continue;
    const Type &vt = typeOf(in);
    if (!vt.isKnown())
      continue;
    const FormalParam *fi = sig->inputFormal(i);
    if (!fi)
      continue;
    if (fi->typeStr == f->typeStr)
      return vt.kind == TypeKind::Tensor ? Type::tensor(vt.elem) : vt;
    if (!link || typeParamRef(n, sig, true, i) != param)
      continue;
    // Linked container/element parameters: wrap or unwrap one level.
    bool outIsContainer = f->typeStr == link->container;
    TypeKind ck = n.opType.rfind("Optional", 0) == 0 ? TypeKind::Optional : TypeKind::Sequence;
    if (outIsContainer && vt.kind == TypeKind::Tensor)
      return Type::wrap(ck, Type::tensor(vt.elem));
    if (!outIsContainer && vt.inner)
      return *vt.inner;
  }
  // A parameter that admits one tensor type only (Shape's T1, comparisons'
  // T1) fixes the output type without any input.
  const TypeConstraint *c = sig->constraintOf(*f);
  if (c && c->tensorTypes.size() == 1 && c->seqTypes.empty() && c->optionalTypes.empty())
    return Type::tensor(c->tensorTypes[0]);
  return Type();
}

static void inferTypesIn(Graph &g, OpIndex &sigs) {
  for (Node &n : g.nodes()) {
    // Bodies first: If/Loop/Scan outputs are typed by their bodies.
    for (Attribute &a : n.attrs)
      for (auto &body : a.graphs)
        inferTypesIn(*body, sigs);
    bool anyUnknown = false;
    for (const Value *v : n.outputs())
      anyUnknown |= v && !v->type.isKnown();
    if (!anyUnknown)
      continue;
    SignatureLookup lk = sigs.signatureOf(n);
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      Value *v = n.output(i);
      if (!v || v->type.isKnown())
        continue;
      v->type = inferOutputType(n, i, lk.sig);
    }
  }
}

void mpc::inferTypes(Graph &g) {
  OpIndex sigs;
  inferTypesIn(g, sigs);
}

void mpc::inferTypes(Model &m) {
  OpIndex sigs;
  inferTypesIn(*m.graph, sigs);
  for (TrainingInfo &ti : m.trainingInfo) {
    if (ti.initialization)
      inferTypesIn(*ti.initialization, sigs);
    if (ti.algorithm)
      inferTypesIn(*ti.algorithm, sigs);
  }
}
