//===- Verifier.cpp - Structural and type invariants of the IR -------------===//
//
// One walk over each graph in list order with the set of values defined so
// far; linear in nodes plus edges. Signatures are looked up once per
// (domain, op) per verification, and a node whose (signature, port types)
// combination already passed the type check is not checked again: the check
// depends on nothing else, and errors are always reported by the full check.
//
//===----------------------------------------------------------------------===//
#include "mpc/Verify/Verifier.h"
#include "mpc/IR/Limits.h"
#include "mpc/IR/NameTable.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Ops/TypeInference.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/CachedHashString.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Allocator.h"
#include <cstring>

using namespace mpc;

/// Ops whose result type an attribute gives even when it is absent (its
/// default): ConstantOfShape's f32 `value`, the random ops' `dtype`, the
/// *Like ops' input type. Sorted by length first: most nodes of a graph
/// have no attributes, and this runs for each of them twice per rewrite.
static bool typedByAttributeDefault(llvm::StringRef op) {
  switch (op.size()) {
  case 7:
    return op == "EyeLike";
  case 9:
    return op == "Bernoulli";
  case 11:
    return op == "Multinomial";
  case 12:
    return op == "RandomNormal";
  case 13:
    return op == "RandomUniform" || op == "SequenceEmpty";
  case 15:
    return op == "ConstantOfShape";
  case 16:
    return op == "RandomNormalLike";
  case 17:
    return op == "RandomUniformLike";
  default:
    return false;
  }
}

/// The tensor type of element type `e` with nothing else set, one per type.
static const Type &bareTensorType(DType e) {
  static const std::vector<Type> types = [] {
    std::vector<Type> ts;
    for (unsigned d = 0; d <= kMaxDType; ++d)
      ts.push_back(Type::tensor(static_cast<DType>(d)));
    return ts;
  }();
  return types[static_cast<unsigned>(e)];
}

namespace {
class GraphVerifier {
public:
  GraphVerifier(const Model &m, const VerifyOptions &opts)
      : opts(opts), model(m), defined(m.valueIdBound()) {}
  llvm::Error verify(const Graph &g);
  /// Verifies a nested graph; its definitions are invisible afterwards.
  llvm::Error verifyScoped(const Graph &g);
  /// Makes every value of the graphs enclosing `g` visible (verifying a body
  /// on its own).
  void defineEnclosing(const Graph &g);

private:
  const VerifyOptions &opts;
  const Model &model;
  /// Values visible at this point, by value id (ids are per model: a value
  /// of another model is never defined here).
  llvm::BitVector defined;
  /// Values the nested scopes being verified defined, innermost last; each
  /// scope's are undone when it ends (see verifyScoped). One list for all
  /// scopes: a model of many small bodies would allocate one per body.
  std::vector<const Value *> scopeLog;
  /// Nesting of verifyScoped (0: definitions are not logged).
  unsigned scopeDepth = 0;
  /// Signatures by (domain, op) (the model's opsets are fixed for a run).
  OpIndex ops;
  /// Keys (signature, fallback, port kinds and element types) whose type
  /// check passed.
  llvm::DenseSet<llvm::CachedHashStringRef> typesOk;
  llvm::BumpPtrAllocator keyArena;

  /// Types of values the model leaves untyped, inferred from their producers
  /// as the walk defines them (by value id): a type check reads those too, so
  /// that a Cast to u8 feeding Slice's ends is found without a value_info.
  /// Nearly all are a bare tensor element type (inference gives no shapes):
  /// those are one byte per value id, read back as the shared Type of that
  /// element type; any other (sequences, optionals, a body's typed output) is
  /// kept whole in `inferredOther`. A model of many small bodies leaves
  /// hundreds of thousands of values untyped, and a map of whole Types cost
  /// 6% of a rewrite's time there.
  std::vector<DType> inferredElem;
  llvm::DenseMap<unsigned, Type> inferredOther;
  const Type &typeOf(const Value *v) const {
    if (v->type.isKnown())
      return v->type;
    unsigned id = v->id();
    if (id < inferredElem.size() && inferredElem[id] != DType::Undefined)
      return bareTensorType(inferredElem[id]);
    if (inferredOther.empty())
      return v->type;
    auto it = inferredOther.find(id);
    return it == inferredOther.end() ? v->type : it->second;
  }
  void setInferred(const Value *v, Type t);

  llvm::Error verifyNode(const Graph &g, const Node &n);
  llvm::Error checkTypes(const Graph &g, const Node &n, const SignatureLookup &lk);
  llvm::Error checkAttributes(const Graph &g, const Node &n, const OpSignature *sig,
                              bool defaultDomain);
  llvm::Error checkBodyArity(const Graph &g, const Node &n);
  bool isDefined(const Value *v) const {
    return v->id() < defined.size() && defined[v->id()] && &v->graph()->model() == &model;
  }
  void define(const Value *v) {
    if (v->id() >= defined.size())
      defined.resize(v->id() + 1);
    if (!defined[v->id()]) {
      defined.set(v->id());
      if (scopeDepth)
        scopeLog.push_back(v);
    }
  }
};
} // namespace

static std::string graphLabel(const Graph &g) { return "graph " + quoteName(g.name); }

void GraphVerifier::setInferred(const Value *v, Type t) {
  unsigned id = v->id();
  if (t.kind == TypeKind::Tensor && t.elem != DType::Undefined && t == bareTensorType(t.elem)) {
    if (!inferredOther.empty() && inferredOther.count(id))
      return; // the first inference stands
    if (id >= inferredElem.size())
      inferredElem.resize(std::max<size_t>(id + 1, defined.size()), DType::Undefined);
    if (inferredElem[id] == DType::Undefined)
      inferredElem[id] = t.elem;
    return;
  }
  if (id < inferredElem.size() && inferredElem[id] != DType::Undefined)
    return; // the first inference stands
  inferredOther.try_emplace(id, std::move(t));
}


/// Appends a port's type to a memo key: absent, kind and element type.
static void appendPortKey(llvm::SmallVectorImpl<char> &key, const Type *t) {
  if (!t) {
    key.push_back(char(0xff));
    return;
  }
  key.push_back(static_cast<char>(t->kind));
  key.push_back(static_cast<char>(t->tensorElemType()));
}

llvm::Error GraphVerifier::checkTypes(const Graph &g, const Node &n, const SignatureLookup &lk) {
  const OpSignature *sig = lk.sig;
  // The check reads the signature, the fallback flag, the op (linked type
  // parameters; fixed by the signature) and each port's presence, type kind
  // and element type: a combination that passed once passes again.
  llvm::SmallString<64> key;
  key.append(reinterpret_cast<const char *>(&sig), reinterpret_cast<const char *>(&sig) + sizeof(sig));
  key.push_back(lk.fallback ? 1 : 0);
  for (const Value *v : n.inputs())
    appendPortKey(key, v ? &typeOf(v) : nullptr);
  key.push_back(char(0xfe));
  for (const Value *v : n.outputs())
    appendPortKey(key, v ? &typeOf(v) : nullptr);
  // The name table's hash: a key is a dozen bytes, which it mixes in one step.
  llvm::CachedHashStringRef probe = NameTable::key(key);
  if (typesOk.count(probe))
    return llvm::Error::success();
  // Ports sharing a type parameter carry one element type, and an allowed one.
  // (type parameter, element type, first value): few entries, no hashing.
  llvm::SmallVector<std::tuple<llvm::StringRef, DType, const Value *>, 4> seen;
  auto check = [&](const Value *v, bool isInput, unsigned port) -> llvm::Error {
    if (!v)
      return llvm::Error::success();
    const Type &vt = typeOf(v);
    if (!vt.isKnown())
      return llvm::Error::success();
    const FormalParam *f = isInput ? sig->inputFormal(port) : sig->outputFormal(port);
    if (!f)
      return llvm::Error::success();
    DType e = vt.tensorElemType();
    const TypeConstraint *c = sig->constraintOf(*f);
    if (!c) {
      // A fallback's fixed types may have been widened since (QLinearMatMul-21
      // takes f16 scales where libonnx's QLinearMatMul-10 wants f32).
      if (f->fixedElem != DType::Undefined && vt.isTensor() && e != DType::Undefined &&
          f->fixedElem != e && !lk.fallback)
        return inputError("{0}: {1} {2} '{3}' is {4}, the schema wants {5}", graphLabel(g),
                          describeNode(n), isInput ? "input" : "output", v->name(),
                          dtypeName(e), dtypeName(f->fixedElem));
      return llvm::Error::success();
    }
    // A fallback signature (opset newer than the registry) may predate
    // types the real one admits: only homogeneity is checked then.
    if (e != DType::Undefined && !lk.fallback && !c->admits(vt, e) && !c->allowsOther)
      return inputError("{0}: {1} {2} '{3}' has type {4}{5}, which {6}-{7} does not accept "
                        "for {8}",
                        graphLabel(g), describeNode(n), isInput ? "input" : "output",
                        v->name(), dtypeName(e),
                        &vt == &v->type ? "" : " (the type its producer gives it)", n.opType,
                        sig->sinceVersion, f->typeStr);
    if (!f->homogeneous)
      return llvm::Error::success();
    llvm::StringRef param = typeParamRef(n, sig, isInput, port);
    for (const auto &[p, pe, pv] : seen) {
      if (p != param)
        continue;
      if (pe != e && e != DType::Undefined && pe != DType::Undefined)
        return inputError("{0}: {1} mixes {2} ('{3}') and {4} ('{5}') for type parameter "
                          "{6}",
                          graphLabel(g), describeNode(n), dtypeName(pe), pv->name(),
                          dtypeName(e), v->name(), f->typeStr);
      return llvm::Error::success();
    }
    seen.emplace_back(param, e, v);
    return llvm::Error::success();
  };
  for (unsigned i = 0; i < n.numInputs(); ++i)
    if (auto err = check(n.input(i), true, i))
      return err;
  for (unsigned i = 0; i < n.numOutputs(); ++i)
    if (auto err = check(n.output(i), false, i))
      return err;
  char *saved = keyArena.Allocate<char>(key.size());
  std::memcpy(saved, key.data(), key.size());
  typesOk.insert(llvm::CachedHashStringRef(llvm::StringRef(saved, key.size()), probe.hash()));
  return llvm::Error::success();
}

/// An attribute kind as the messages name it (AttributeProto's type names).
static llvm::StringRef attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Undefined:
    return "no value";
  case AttrKind::Float:
    return "a float";
  case AttrKind::Int:
    return "an int";
  case AttrKind::String:
    return "a string";
  case AttrKind::Tensor:
    return "a tensor";
  case AttrKind::Graph:
    return "a graph";
  case AttrKind::Floats:
    return "floats";
  case AttrKind::Ints:
    return "ints";
  case AttrKind::Strings:
    return "strings";
  case AttrKind::Tensors:
    return "tensors";
  case AttrKind::Graphs:
    return "graphs";
  case AttrKind::SparseTensor:
    return "a sparse tensor";
  case AttrKind::SparseTensors:
    return "sparse tensors";
  case AttrKind::TypeProto:
    return "a type";
  case AttrKind::TypeProtos:
    return "types";
  }
  return "an unknown kind";
}

/// Default-domain int attributes that are yes/no flags.
static bool isFlagAttribute(llvm::StringRef name) {
  // (MaxPool's storage_order and the recurrent ops' layout take 0 or 1 too;
  // their kernels say what each means.)
  static const char *const kFlags[] = {
      "align_corners",   "allowzero",        "antialias",           "broadcast",
      "ceil_mode",       "center_point_box", "count_include_pad",   "detect_negative",
      "detect_positive", "exclude_outside",  "exclusive",           "fmod",
      "input_forget",    "interleaved",      "inverse",             "is_causal",
      "is_test",         "keepdims",         "largest",             "linear_before_reset",
      "new_axis",        "noop_with_empty_axes", "onesided",        "periodic",
      "reverse",         "saturate",         "select_last_index",   "sorted",
      "spatial",         "training_mode",    "transA",              "transB",
      "upper"};
  for (const char *f : kFlags)
    if (name == f)
      return true;
  return false;
}

/// Attributes against the schema: each one the schema defines has the kind it
/// defines (a pass's `intAttr("axis", -1)` reads a float axis as absent: a
/// silent default), required ones are present, a default-domain node has no
/// attribute its schema lacks. `byName`: the checks that need no schema (a
/// default-domain node whose version libonnx does not know): no attribute
/// twice, element-type attributes name one, flags are 0 or 1.
llvm::Error GraphVerifier::checkAttributes(const Graph &g, const Node &n, const OpSignature *sig,
                                           bool defaultDomain) {
  unsigned requiredSeen = 0;
  for (const Attribute &a : n.attrs) {
    for (const Attribute &b : n.attrs) {
      if (&b == &a)
        break;
      if (b.name == a.name)
        return inputError("{0}: {1} has attribute {2} twice", graphLabel(g), describeNode(n),
                          quoteName(a.name));
    }
    if (!a.refAttrName.empty())
      continue; // a reference to an enclosing function's attribute
    if (defaultDomain && a.kind == AttrKind::Int) {
      // Element types: Cast's `to`, the random generators' and EyeLike's
      // `dtype`, LayerNormalization's `stash_type`.
      if (a.name == "to" || a.name == "dtype" || a.name == "stash_type") {
        if (a.i <= 0 || !isKnownDType(a.i))
          return inputError("{0}: {1} has attribute {2} = {3}, which is not an ONNX element "
                            "type",
                            graphLabel(g), describeNode(n), quoteName(a.name), a.i);
      } else if (a.i != 0 && a.i != 1 && isFlagAttribute(a.name)) {
        // Yes/no flags: kernels differ on what 2 means (onnxruntime keeps the
        // reduced axes for keepdims == 1 only, but transposes for any nonzero
        // transB), so only 0 and 1 are taken.
        return inputError("{0}: {1} has attribute {2} = {3}; it is a flag, 0 or 1",
                          graphLabel(g), describeNode(n), quoteName(a.name), a.i);
      }
    }
    if (!sig)
      continue;
    const FormalAttr *f = sig->attribute(a.name);
    if (!f) {
      if (sig->closedAttributes)
        return inputError("{0}: {1} has attribute {2}, which {3}-{4} does not define",
                          graphLabel(g), describeNode(n), quoteName(a.name), n.opType,
                          sig->sinceVersion);
      continue;
    }
    if (a.kind != f->kind)
      return inputError("{0}: {1} has attribute {2} holding {3}, {4}-{5} wants {6}",
                        graphLabel(g), describeNode(n), quoteName(a.name), attrKindName(a.kind),
                        n.opType, sig->sinceVersion, attrKindName(f->kind));
    requiredSeen += f->required;
  }
  if (!sig)
    return llvm::Error::success();
  unsigned required = 0;
  for (const FormalAttr &f : sig->attributes)
    required += f.required;
  if (requiredSeen < required)
    for (const FormalAttr &f : sig->attributes)
      if (f.required && !n.attr(f.name))
        return inputError("{0}: {1} lacks attribute {2}, which {3}-{4} requires", graphLabel(g),
                          describeNode(n), quoteName(f.name), n.opType, sig->sinceVersion);
  return llvm::Error::success();
}

/// The body's (or branch's) graph, null when the attribute holds none.
static const Graph *bodyGraph(const Node &n, llvm::StringRef name) {
  const Attribute *a = n.attr(name);
  return a && a->kind == AttrKind::Graph && !a->graphs.empty() ? a->graphs[0].get() : nullptr;
}

/// Control flow's bodies against the node: how many values they take and
/// return. Executors, painting and cast insertion map the node's inputs and
/// outputs to the body's by position; a body with fewer outputs than the
/// node's loop-carried values crashed `mpc run`, one with other counts ran with
/// values matched to the wrong places.
llvm::Error GraphVerifier::checkBodyArity(const Graph &g, const Node &n) {
  llvm::StringRef op = n.opType;
  // "its 'body' takes 2 input(s); ..." / "... returns 1 value(s); ...".
  auto mismatch = [&](llvm::StringRef attr, llvm::StringRef verb, size_t has,
                      const std::string &wants) {
    return inputError("{0}: {1}: its {2} {3} {4} {5}; {6}", graphLabel(g), describeNode(n),
                      quoteName(attr), verb, has, verb == "takes" ? "input(s)" : "value(s)",
                      wants);
  };
  size_t ins = n.numInputs(), outs = n.numOutputs();
  if (op == "If") {
    for (llvm::StringRef branch : {"then_branch", "else_branch"}) {
      const Graph *b = bodyGraph(n, branch);
      if (!b)
        continue;
      if (!b->inputs().empty())
        return mismatch(branch, "takes", b->inputs().size(), "a branch takes none");
      if (b->outputs().size() != outs)
        return mismatch(branch, "returns", b->outputs().size(),
                        "the node has " + std::to_string(outs) + " output(s)");
    }
    return llvm::Error::success();
  }
  const Graph *b = bodyGraph(n, "body");
  if (!b)
    return llvm::Error::success();
  size_t bodyIns = b->inputs().size(), bodyOuts = b->outputs().size();
  if (op == "Loop") {
    size_t carried = ins >= 2 ? ins - 2 : 0;
    if (bodyIns != 2 + carried)
      return mismatch("body", "takes", bodyIns,
                      "the iteration number, the condition and the node's " +
                          std::to_string(carried) + " loop-carried value(s) are " +
                          std::to_string(2 + carried));
    if (bodyOuts < 1 + carried)
      return mismatch("body", "returns", bodyOuts,
                      "the condition and " + std::to_string(carried) +
                          " loop-carried value(s) need at least " + std::to_string(1 + carried));
    if (outs != bodyOuts - 1)
      return mismatch("body", "returns", bodyOuts,
                      "the node's " + std::to_string(outs) + " output(s) need " +
                          std::to_string(outs + 1) + " (the condition first)");
    return llvm::Error::success();
  }
  if (op == "Scan") {
    int64_t scanIns = n.intAttr("num_scan_inputs", 0);
    // Scan-8's first input is the optional sequence_lens, outside the body.
    size_t lead = n.opsetVersion() >= 0 && n.opsetVersion() < 9 ? 1 : 0;
    size_t carried = ins - std::min(ins, lead);
    if (scanIns < 1 || static_cast<uint64_t>(scanIns) > carried)
      return inputError("{0}: {1} has num_scan_inputs = {2}; it must be 1 to the {3} input(s) "
                        "the body takes",
                        graphLabel(g), describeNode(n), scanIns, carried);
    if (bodyIns != carried)
      return mismatch("body", "takes", bodyIns,
                      "the node gives it " + std::to_string(carried) +
                          " (states and scan inputs)");
    if (bodyOuts != outs || bodyOuts < carried - scanIns)
      return mismatch("body", "returns", bodyOuts,
                      "the node has " + std::to_string(outs) + " output(s) and " +
                          std::to_string(carried - scanIns) + " state(s)");
    return llvm::Error::success();
  }
  if (op == "SequenceMap") {
    if (bodyIns != ins)
      return mismatch("body", "takes", bodyIns,
                      "the node gives it " + std::to_string(ins));
    if (bodyOuts != outs)
      return mismatch("body", "returns", bodyOuts,
                      "the node has " + std::to_string(outs) + " output(s)");
  }
  return llvm::Error::success();
}

llvm::Error GraphVerifier::verifyNode(const Graph &g, const Node &n) {
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    const Value *v = n.input(i);
    if (v && !isDefined(v))
      return inputError("{0}: {1} uses '{2}' before it is defined", graphLabel(g),
                        describeNode(n), v->name());
  }
  SignatureLookup lk = ops.signatureOf(n);
  if (const OpSignature *sig = lk.sig) {
    // Trailing omitted optional inputs do not count against the maximum; they
    // do count toward the minimum, as ONNX's checker counts them: Loop(M, "")
    // names both of Loop's optional leading inputs and was refused.
    unsigned nin = n.numInputs();
    while (nin > 0 && !n.input(nin - 1))
      --nin;
    if (static_cast<int>(n.numInputs()) < sig->minInputs ||
        static_cast<int>(nin) > sig->maxInputs)
      return inputError("{0}: {1} has {2} input(s), {3}-{4} takes {5}{6}", graphLabel(g),
                        describeNode(n),
                        static_cast<int>(n.numInputs()) < sig->minInputs ? n.numInputs() : nin,
                        n.opType, sig->sinceVersion,
                        sig->minInputs == sig->maxInputs ? "" : "from ",
                        sig->minInputs == sig->maxInputs
                            ? std::to_string(sig->minInputs)
                            : std::to_string(sig->minInputs) + " to " +
                                  (sig->maxInputs == INT32_MAX ? std::string("any number")
                                                               : std::to_string(sig->maxInputs)));
    if (static_cast<int>(n.numOutputs()) > sig->maxOutputs ||
        static_cast<int>(n.numOutputs()) < sig->minOutputs)
      return inputError("{0}: {1} has {2} output(s), {3}-{4} gives {5} to {6}", graphLabel(g),
                        describeNode(n), n.numOutputs(), n.opType, sig->sinceVersion,
                        sig->minOutputs, sig->maxOutputs);
    for (unsigned i = 0; i < n.numInputs(); ++i)
      if (!n.input(i)) {
        const FormalParam *f = sig->inputFormal(i);
        if (f && f->option == FormalOption::Single)
          return inputError("{0}: {1} omits its required input '{2}'", graphLabel(g),
                            describeNode(n), f->name);
      }
    if (opts.checkTypes)
      if (auto err = checkTypes(g, n, lk))
        return err;
  }
  bool defaultDomain = n.domain.empty() || llvm::StringRef(n.domain) == "ai.onnx";
  const OpSignature *schemaSig =
      lk.sig && lk.sig->attributesKnown ? lk.sig : nullptr;
  if (schemaSig || (defaultDomain && !n.attrs.empty()))
    if (auto err = checkAttributes(g, n, schemaSig, defaultDomain))
      return err;
  if (defaultDomain && !n.attrs.empty())
    if (auto err = checkBodyArity(g, n))
      return err;
  // A declared type the node's attributes contradict (a Cast to f16 whose
  // result is declared f64): the executor computes the attributes' type.
  // Their defaults too: a ConstantOfShape without `value` makes f32 zeros
  // (declared i32, it ran and wrote f32).
  if (opts.checkTypes &&
      (!n.attrs.empty() || (defaultDomain && typedByAttributeDefault(n.opType))))
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      const Value *v = n.output(i);
      if (!v || !v->type.isTensor() || v->type.elem == DType::Undefined)
        continue;
      Type t = attributeOutputType(n, i);
      if (t.isTensor() && t.elem != DType::Undefined && t.elem != v->type.elem)
        return inputError("{0}: {1}: output {2} is declared {3}, but the node's attributes "
                          "make it {4}",
                          graphLabel(g), describeNode(n), quoteName(v->name()),
                          dtypeName(v->type.elem), dtypeName(t.elem));
    }
  for (const Attribute &a : n.attrs)
    for (const auto &body : a.graphs) {
      // Walks over nested graphs recurse once per level (mpc/IR/Limits.h).
      if (auto err = checkGraphDepth(*body))
        return err;
      if (auto err = verifyScoped(*body))
        return err;
    }
  if (opts.checkTypes)
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      const Value *v = n.output(i);
      if (!v || v->type.isKnown())
        continue;
      Type t = inferOutputType(n, i, lk.sig, [&](const Value *u) -> const Type & {
        return typeOf(u);
      });
      if (t.isKnown())
        setInferred(v, std::move(t));
    }
  for (const Value *v : n.outputs())
    if (v)
      define(v);
  return llvm::Error::success();
}

llvm::Error GraphVerifier::verify(const Graph &g) {
  for (const Value *v : g.inputs())
    define(v);
  for (const Value *v : g.initializers())
    define(v);
  for (const Node &n : g.nodes()) {
    if (n.getParent() != &g)
      return inputError("{0}: {1} has a wrong parent graph", graphLabel(g), describeNode(n));
    if (auto err = verifyNode(g, n))
      return err;
  }
  for (const Value *v : g.outputs())
    if (!isDefined(v))
      return inputError("{0}: output '{1}' is not defined", graphLabel(g), v->name());
  return llvm::Error::success();
}

llvm::Error GraphVerifier::verifyScoped(const Graph &g) {
  // The values this scope adds are erased afterwards (an undo log instead of
  // a copy of the outer set per nested graph).
  size_t start = scopeLog.size();
  ++scopeDepth;
  llvm::Error err = verify(g);
  --scopeDepth;
  for (size_t i = start; i < scopeLog.size(); ++i)
    defined.reset(scopeLog[i]->id());
  scopeLog.resize(start);
  return err;
}

void GraphVerifier::defineEnclosing(const Graph &g) {
  for (const Graph *p = g.parent(); p; p = p->parent()) {
    for (const Value *v : p->inputs())
      define(v);
    for (const Value *v : p->initializers())
      define(v);
    for (const Node &n : p->nodes())
      for (const Value *v : n.outputs())
        if (v)
          define(v);
  }
}

llvm::Error mpc::verifyGraph(const Graph &g, const VerifyOptions &opts) {
  GraphVerifier v(g.model(), opts);
  v.defineEnclosing(g);
  return v.verify(g);
}

llvm::Error mpc::verifyModel(const Model &m, const VerifyOptions &opts) {
  if (auto err = checkOpsetImports(m))
    return err;
  GraphVerifier v(m, opts);
  if (auto err = v.verify(*m.graph))
    return err;
  for (const TrainingInfo &ti : m.trainingInfo) {
    if (ti.initialization)
      if (auto err = v.verifyScoped(*ti.initialization))
        return err;
    if (ti.algorithm)
      if (auto err = v.verifyScoped(*ti.algorithm))
        return err;
  }
  return llvm::Error::success();
}
