//===- GradRules.cpp - Per-op gradient rules for train-graph ---------------===//
//
// One static function per forward op: given dY (the gradients of the node's
// outputs) it emits the nodes computing dX for each input that needs one.
// Standard ONNX where natural (MatMul/Gemm/Transpose/Reshape/element-wise),
// ai.mpc.training ops otherwise (docs/training.md). Broadcast reductions
// always go through BiasGrad, never ReduceSum.
//
//===----------------------------------------------------------------------===//
#include "TrainGraphImpl.h"
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/StringRef.h"
#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mpc;
using namespace mpc::train;

//===----------------------------------------------------------------------===//
// Emitter
//===----------------------------------------------------------------------===//

Node *Emitter::node(llvm::StringRef opType, llvm::StringRef domain, llvm::ArrayRef<Value *> ins,
                    llvm::ArrayRef<DType> outTypes, llvm::StringRef hint) {
  Node *n = graph.createNode(opType, domain);
  // Values take the hint itself ("grad/fc0/Gemm/dA"); nodes add their op.
  std::string valueBase = model.freshName(hint);
  n->name = model.freshName(valueBase + "." + opType.str());
  for (Value *v : ins)
    n->addInput(v);
  for (unsigned i = 0; i < outTypes.size(); ++i) {
    if (outTypes[i] == DType::Undefined) {
      n->resizeOutputs(i + 1);
      continue;
    }
    std::string name = i == 0 ? valueBase : model.freshName(valueBase + "_" + std::to_string(i));
    n->setOutput(i, name, Type::tensor(outTypes[i]));
  }
  created.push_back(n);
  return n;
}

Value *Emitter::op(llvm::StringRef opType, llvm::ArrayRef<Value *> ins, DType t,
                   llvm::StringRef hint, llvm::StringRef domain) {
  return node(opType, domain, ins, {t}, hint)->output(0);
}

static Tensor scalarTensor(double v, DType t) {
  Tensor data(t, {});
  std::vector<uint8_t> bytes;
  auto put = [&](const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    bytes.assign(b, b + n);
  };
  switch (t) {
  case DType::F64: {
    double d = v;
    put(&d, sizeof d);
    break;
  }
  case DType::I64: {
    int64_t i = static_cast<int64_t>(v);
    put(&i, sizeof i);
    break;
  }
  default: {
    assert(t == DType::F32 && "scalar constants are f32, f64 or i64");
    float f = static_cast<float>(v);
    put(&f, sizeof f);
    break;
  }
  }
  data.setBytes(std::move(bytes));
  return data;
}

Value *Emitter::scalar(double v, DType t, llvm::StringRef hint) {
  DType st = (t == DType::F64 || t == DType::I64) ? t : DType::F32;
  Node *n = node("Constant", "", {}, {st}, hint);
  n->setAttr(Attribute::makeTensor("value", scalarTensor(v, st)));
  n->output(0)->type.hasShape = true;
  if (st == t)
    return n->output(0);
  // Other float types (f16, bf16): a Cast keeps the constant exact enough.
  Value *c = op("Cast", {n->output(0)}, t, (hint + "_cast").str());
  c->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(t)));
  return c;
}

Value *Emitter::ints(llvm::ArrayRef<int64_t> v, llvm::StringRef hint) {
  Tensor data(DType::I64, {static_cast<int64_t>(v.size())});
  std::vector<uint8_t> bytes(v.size() * sizeof(int64_t));
  if (!v.empty())
    std::memcpy(bytes.data(), v.data(), bytes.size());
  data.setBytes(std::move(bytes));
  Node *n = node("Constant", "", {}, {DType::I64}, hint);
  n->setAttr(Attribute::makeTensor("value", std::move(data)));
  return n->output(0);
}

Value *Emitter::shapeOf(Value *v) {
  for (auto &[from, shape] : shapeCache)
    if (from == v)
      return shape;
  Value *s = op("Shape", {v}, DType::I64, "grad/shape/" + v->name());
  shapeCache.emplace_back(v, s);
  return s;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static int rankOf(const Value *v) {
  if (!v || !v->type.isTensor() || !v->type.hasShape)
    return -1;
  return static_cast<int>(v->type.dims.size());
}

/// True when two dimensions are statically the same: the same known size,
/// or the same named symbol (ONNX: one dim_param names one size throughout
/// a model; a batch axis "N" of a residual Add's operands and its output).
/// `plain` (Emitter::plain): known sizes only.
static bool sameDim(const Dim &a, const Dim &b, bool plain) {
  if (a.isKnown() || b.isKnown())
    return a.isKnown() && b.isKnown() && a.value == b.value;
  return !plain && a.isSymbolic() && b.isSymbolic() && a.param == b.param;
}

/// True when both shapes are statically known and equal (sameDim).
static bool sameStaticShape(const Value *a, const Value *b, bool plain) {
  if (rankOf(a) < 0 || rankOf(a) != rankOf(b))
    return false;
  for (size_t i = 0; i < a->type.dims.size(); ++i)
    if (!sameDim(a->type.dims[i], b->type.dims[i], plain))
      return false;
  return true;
}

bool Emitter::plainGradientsRequested() { return std::getenv("MPC_TRAIN_GRAPH_PLAIN") != nullptr; }

static DType elemOf(const Value *v) { return v->type.tensorElemType(); }

/// dX of the forward operand `x` of a broadcasting op producing `y`: sums
/// `g` over the broadcast axes (BiasGrad) unless the shapes match statically.
static Value *unbroadcast(Emitter &e, Value *g, Value *x, const Value *y,
                          const std::string &hint) {
  if (sameStaticShape(x, y, e.plain))
    return g;
  return e.op("BiasGrad", {g, e.shapeOf(x)}, elemOf(x), hint, kTrainingDomain);
}

static llvm::Error unsupported(const Node &n, llvm::StringRef why) {
  return inputError("{0}: gradient not supported: {1}", describeNode(n), why);
}

/// The data of an initializer (or Constant node) input held in memory, or null.
static const Tensor *constantTensorOf(const Value *v) {
  const Tensor *t = v ? v->initializer() : nullptr;
  if (!t && v && v->producer() && v->producer()->opType == "Constant")
    if (const Attribute *a = v->producer()->attr("value"))
      if (!a->tensors.empty())
        t = &a->tensors[0];
  return t && !t->isExternal() ? t : nullptr;
}

/// Reads constant int64 axes from an initializer (or Constant node) input.
static bool constantInts(const Value *v, std::vector<int64_t> &out) {
  const Tensor *t = constantTensorOf(v);
  if (!t)
    return false;
  for (int64_t i = 0; i < t->numElements(); ++i)
    out.push_back(t->getAsInt64(i));
  return true;
}

/// Copies the plain (non-graph) attributes named in `names` from `from`.
static void copyAttrs(const Node &from, Node &to, llvm::ArrayRef<llvm::StringRef> names) {
  for (const Attribute &a : from.attrs) {
    if (std::find(names.begin(), names.end(), llvm::StringRef(a.name)) == names.end())
      continue;
    to.setAttr(a.copyWithoutGraphs());
  }
}

/// Transpose swapping the last two axes of a rank-`r` value.
static Value *swapLast2(Emitter &e, Value *v, int r, const std::string &hint) {
  std::vector<int64_t> perm;
  for (int i = 0; i < r; ++i)
    perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  Value *t = e.op("Transpose", {v}, elemOf(v), hint);
  t->producer()->setAttr(Attribute::makeInts("perm", perm));
  return t;
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

namespace {
using Outs = std::vector<Value *>;
struct Ctx {
  Emitter &e;
  const GradRequest &r;
  Outs &dIn;
  Node &n() const { return r.fwd; }
  Value *in(unsigned i) const { return r.fwd.input(i); }
  Value *out(unsigned i) const { return r.fwd.output(i); }
  Value *dY(unsigned i = 0) const { return i < r.dOut.size() ? r.dOut[i] : nullptr; }
  bool want(unsigned i) const { return i < r.wantIn.size() && r.wantIn[i]; }
  std::string h(llvm::StringRef s) const { return r.hint + "/" + s.str(); }
};
using RuleFn = llvm::Error (*)(Ctx &);
} // namespace

static llvm::Error gradElementwise(Ctx &c) {
  llvm::StringRef op = c.n().opType;
  Value *a = c.in(0), *b = c.in(1), *y = c.out(0), *dy = c.dY();
  Emitter &e = c.e;
  if (c.want(0)) {
    Value *g = dy;
    if (op == "Mul")
      g = e.op("Mul", {dy, b}, elemOf(a), c.h("dA_mul"));
    else if (op == "Div")
      g = e.op("Div", {dy, b}, elemOf(a), c.h("dA_div"));
    c.dIn[0] = unbroadcast(e, g, a, y, c.h("dA"));
  }
  if (c.want(1)) {
    Value *g = dy;
    if (op == "Sub") {
      g = e.op("Neg", {dy}, elemOf(b), c.h("dB_neg"));
    } else if (op == "Mul") {
      g = e.op("Mul", {dy, a}, elemOf(b), c.h("dB_mul"));
    } else if (op == "Div") {
      // d(A/B)/dB = -Y/B
      Value *t = e.op("Mul", {dy, y}, elemOf(b), c.h("dB_mul"));
      t = e.op("Div", {t, b}, elemOf(b), c.h("dB_div"));
      g = e.op("Neg", {t}, elemOf(b), c.h("dB_neg"));
    }
    c.dIn[1] = unbroadcast(e, g, b, y, c.h("dB"));
  }
  return llvm::Error::success();
}

static llvm::Error gradNeg(Ctx &c) {
  c.dIn[0] = c.e.op("Neg", {c.dY()}, elemOf(c.in(0)), c.h("dX"));
  return llvm::Error::success();
}

static llvm::Error gradIdentity(Ctx &c) {
  c.dIn[0] = c.dY();
  return llvm::Error::success();
}

/// Dropout in inference mode is the identity, and so is its gradient. In
/// training mode it is random; train-graph refuses it rather than train
/// through a mask it does not model (docs/training.md). The mode: opsets 1-6
/// read `is_test` (default 0, training); 7-11 have no training mode; from 12
/// the optional `training_mode` input, absent or a constant false in
/// inference (a constant true with a constant ratio of 0 is the identity too).
static llvm::Error gradDropout(Ctx &c) {
  const Node &n = c.n();
  int64_t opset = n.opsetVersion();
  llvm::StringRef why;
  if (opset >= 1 && opset < 7) {
    if (n.intAttr("is_test", 0) == 0)
      why = "is_test = 0";
  } else if (opset >= 12 && n.numInputs() > 2 && n.input(2)) {
    std::vector<int64_t> mode;
    const Tensor *rt = constantTensorOf(n.numInputs() > 1 ? n.input(1) : nullptr);
    bool zeroRatio = rt && rt->numElements() == 1 && rt->getAsDouble(0) == 0;
    if (!constantInts(n.input(2), mode) || mode.size() != 1)
      why = "its training_mode input is not a constant";
    else if (mode[0] != 0 && !zeroRatio)
      why = "training_mode = true";
  }
  if (!why.empty())
    return unsupported(n, (llvm::Twine("Dropout in training mode (") + why +
                           ") is random; train-graph differentiates Dropout in inference "
                           "mode only (the identity): export the model in eval mode")
                              .str());
  c.dIn[0] = c.dY();
  return llvm::Error::success();
}

/// Reshape, Flatten, Squeeze, Unsqueeze: dX = Reshape(dY, Shape(X)).
static llvm::Error gradReshapeLike(Ctx &c) {
  if (c.want(0))
    c.dIn[0] = c.e.op("Reshape", {c.dY(), c.e.shapeOf(c.in(0))}, elemOf(c.in(0)), c.h("dX"));
  return llvm::Error::success();
}

static llvm::Error gradTranspose(Ctx &c) {
  std::vector<int64_t> perm;
  if (const Attribute *p = c.n().attr("perm")) {
    perm = p->ints;
  } else {
    int r = rankOf(c.in(0));
    if (r < 0)
      return unsupported(c.n(), "Transpose without perm needs a known rank");
    for (int i = r - 1; i >= 0; --i)
      perm.push_back(i);
  }
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = static_cast<int64_t>(i);
  Value *t = c.e.op("Transpose", {c.dY()}, elemOf(c.in(0)), c.h("dX"));
  t->producer()->setAttr(Attribute::makeInts("perm", inv));
  c.dIn[0] = t;
  return llvm::Error::success();
}

/// Unary ops whose gradient op reads (dY, X) or (dY, Y).
static llvm::Error gradUnary(Ctx &c) {
  llvm::StringRef op = c.n().opType;
  bool readsOutput = op == "Sigmoid" || op == "Tanh" || op == "Softmax" || op == "LogSoftmax";
  Value *saved = readsOutput ? c.out(0) : c.in(0);
  Node *g = c.e.node((op + "Grad").str(), kTrainingDomain, {c.dY(), saved}, {elemOf(c.in(0))},
                     c.h("dX"));
  if (op == "Softmax" || op == "LogSoftmax")
    g->setAttr(Attribute::makeInt("axis", c.n().intAttr("axis", -1)));
  if (op == "Gelu")
    g->setAttr(Attribute::makeString("approximate", c.n().stringAttr("approximate", "none").str()));
  c.dIn[0] = g->output(0);
  return llvm::Error::success();
}

/// True when `x` has the rank of `y` and the same (known) batch axes, so no
/// broadcast reduction is needed for a MatMul operand.
static bool batchMatches(const Value *x, const Value *y, bool plain) {
  int r = rankOf(x);
  if (r < 0 || r != rankOf(y))
    return false;
  for (int i = 0; i < r - 2; ++i)
    if (!sameDim(x->type.dims[i], y->type.dims[i], plain))
      return false;
  return true;
}

static llvm::Error gradMatMul(Ctx &c) {
  Value *a = c.in(0), *b = c.in(1), *dy = c.dY(), *y = c.out(0);
  int ra = rankOf(a), rb = rankOf(b);
  if (ra < 2 || rb < 2)
    return unsupported(c.n(), "MatMul operands need a known rank of at least 2");
  Emitter &e = c.e;
  // A batched operand (an activation: attention's probabilities, keys,
  // values) is read transposed by FusedMatMul instead of transposed into a
  // copy first ([N, H, T, T] at T = 1024 is 200 MB in fp16); a 2-D weight's
  // transpose is small and stays a Transpose.
  auto transposedProduct = [&](Value *l, Value *r, bool transL, DType t,
                               const std::string &hint) {
    Node *p = e.node("FusedMatMul", kContribDomain, {l, r}, {t}, hint);
    p->setAttr(Attribute::makeInt(transL ? "transA" : "transB", 1));
    return p->output(0);
  };
  if (c.want(0)) {
    Value *g = rb >= 3 && !e.plain ? transposedProduct(dy, b, false, elemOf(a), c.h("dA_mm"))
                       : e.op("MatMul", {dy, swapLast2(e, b, rb, c.h("Bt"))}, elemOf(a),
                              c.h("dA_mm"));
    c.dIn[0] = batchMatches(a, y, e.plain)
                   ? g
                   : e.op("BiasGrad", {g, e.shapeOf(a)}, elemOf(a), c.h("dA"), kTrainingDomain);
  }
  if (c.want(1) && rb == 2 && ra >= 3 && !e.plain) {
    // A 2-D weight applied to every row of a batched operand (a Linear layer
    // on [N, T, K] activations): dB = A2^T dY2 with the batch axes folded
    // into the rows, A2 = Flatten(A) [N*T, K], dY2 = Flatten(dY) [N*T, M]:
    // one GEMM reading A transposed, where a Transpose of A, a batch of N
    // [K, M] products and their sum over the batch moved the largest tensors
    // of a transformer's step several times.
    // The axis is written as -1 (the last; opset 11 on) so that a later
    // pass, with no shapes, still sees that dY2's columns are dY's last axis
    // (what BiasGrad keeps: mpc rewrite --fuse-gemm-epilogues folds it in).
    int64_t axis = c.n().opsetVersion() >= 11 ? -1 : ra - 1;
    Value *a2 = e.op("Flatten", {a}, elemOf(a), c.h("A2"));
    a2->producer()->setAttr(Attribute::makeInt("axis", axis));
    Value *dy2 = e.op("Flatten", {dy}, elemOf(dy), c.h("dY2"));
    dy2->producer()->setAttr(Attribute::makeInt("axis", axis));
    Value *g = e.op("Gemm", {a2, dy2}, elemOf(b), c.h("dB_gemm"));
    g->producer()->setAttr(Attribute::makeInt("transA", 1));
    c.dIn[1] = g;
  } else if (c.want(1)) {
    Value *g = ra >= 3 && !e.plain ? transposedProduct(a, dy, true, elemOf(b), c.h("dB_mm"))
                       : e.op("MatMul", {swapLast2(e, a, ra, c.h("At")), dy}, elemOf(b),
                              c.h("dB_mm"));
    c.dIn[1] = batchMatches(b, y, e.plain)
                   ? g
                   : e.op("BiasGrad", {g, e.shapeOf(b)}, elemOf(b), c.h("dB"), kTrainingDomain);
  }
  return llvm::Error::success();
}

static llvm::Error gradGemm(Ctx &c) {
  Value *a = c.in(0), *b = c.in(1), *dy = c.dY();
  float alpha = c.n().floatAttr("alpha", 1.0f), beta = c.n().floatAttr("beta", 1.0f);
  int64_t ta = c.n().intAttr("transA", 0), tb = c.n().intAttr("transB", 0);
  Emitter &e = c.e;
  auto gemm = [&](Value *x, Value *y, int64_t tx, int64_t ty, DType t, const std::string &h) {
    Node *g = e.node("Gemm", "", {x, y}, {t}, h);
    if (alpha != 1.0f)
      g->setAttr(Attribute::makeFloat("alpha", alpha));
    if (tx)
      g->setAttr(Attribute::makeInt("transA", 1));
    if (ty)
      g->setAttr(Attribute::makeInt("transB", 1));
    return g->output(0);
  };
  if (c.want(0))
    c.dIn[0] = ta == 0 ? gemm(dy, b, 0, tb ? 0 : 1, elemOf(a), c.h("dA"))
                       : gemm(b, dy, tb, 1, elemOf(a), c.h("dA"));
  if (c.want(1))
    c.dIn[1] = tb == 0 ? gemm(a, dy, ta ? 0 : 1, 0, elemOf(b), c.h("dB"))
                       : gemm(dy, a, 1, ta, elemOf(b), c.h("dB"));
  if (c.n().numInputs() > 2 && c.in(2) && c.want(2)) {
    Value *cv = c.in(2), *g = dy;
    if (beta != 1.0f)
      g = e.op("Mul", {dy, e.scalar(beta, elemOf(cv), c.h("beta"))}, elemOf(cv), c.h("dC_beta"));
    c.dIn[2] = unbroadcast(e, g, cv, c.out(0), c.h("dC"));
  }
  return llvm::Error::success();
}

/// Ops whose ai.mpc.training gradient takes (dY, X[, W]) plus the forward
/// attributes and gives one gradient per forward input.
static llvm::Error gradWithAttrs(Ctx &c) {
  llvm::StringRef op = c.n().opType;
  Emitter &e = c.e;
  if (op == "Conv") {
    std::vector<DType> outs(3, DType::Undefined);
    for (unsigned i = 0; i < 3 && i < c.n().numInputs(); ++i)
      if (c.in(i) && c.want(i))
        outs[i] = elemOf(c.in(i));
    Node *g = e.node("ConvGrad", kTrainingDomain, {c.dY(), c.in(0), c.in(1)}, outs, c.h("d"));
    copyAttrs(c.n(), *g, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    for (unsigned i = 0; i < 3; ++i)
      if (outs[i] != DType::Undefined)
        c.dIn[i] = g->output(i);
    return llvm::Error::success();
  }
  if (op == "MaxPool" && c.n().numOutputs() > 1 && c.out(1) && c.out(1)->hasUses())
    return unsupported(c.n(), "MaxPool with an Indices output");
  Node *g = e.node((op + "Grad").str(), kTrainingDomain, {c.dY(), c.in(0)}, {elemOf(c.in(0))},
                   c.h("dX"));
  copyAttrs(c.n(), *g,
            {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads",
             "storage_order", "strides"});
  c.dIn[0] = g->output(0);
  return llvm::Error::success();
}

static llvm::Error gradBatchNorm(Ctx &c) {
  Node &n = c.n();
  std::vector<DType> outs(3, DType::Undefined);
  for (unsigned i = 0; i < 3; ++i)
    if (c.want(i))
      outs[i] = elemOf(n.input(i));
  Node *g = c.e.node("BatchNormalizationGrad", kTrainingDomain, {c.dY(), n.input(0), n.input(1)},
                     outs, c.h("d"));
  g->setAttr(Attribute::makeFloat("epsilon", n.floatAttr("epsilon", 1e-5f)));
  for (unsigned i = 0; i < 3; ++i)
    if (outs[i] != DType::Undefined)
      c.dIn[i] = g->output(i);
  return llvm::Error::success();
}

static llvm::Error gradLayerNorm(Ctx &c) {
  Node &n = c.n();
  if (n.numOutputs() < 3 || !n.output(1) || !n.output(2))
    return unsupported(n, "LayerNormalization without its Mean/InvStdDev outputs");
  std::vector<DType> outs(3, DType::Undefined);
  for (unsigned i = 0; i < 3 && i < n.numInputs(); ++i)
    if (n.input(i) && c.want(i))
      outs[i] = elemOf(n.input(i));
  Node *g = c.e.node("LayerNormalizationGrad", kTrainingDomain,
                     {c.dY(), n.input(0), n.input(1), n.output(1), n.output(2)}, outs, c.h("d"));
  g->setAttr(Attribute::makeInt("axis", n.intAttr("axis", -1)));
  for (unsigned i = 0; i < 3; ++i)
    if (outs[i] != DType::Undefined)
      c.dIn[i] = g->output(i);
  return llvm::Error::success();
}

static llvm::Error gradConcat(Ctx &c) {
  Node &n = c.n();
  int r = rankOf(c.out(0));
  int64_t axis = n.intAttr("axis", 0);
  if (axis < 0) {
    if (r < 0)
      return unsupported(n, "Concat with a negative axis needs a known rank");
    axis += r;
  }
  Emitter &e = c.e;
  std::vector<Value *> sizes;
  Value *starts = e.ints({axis}, c.h("axis_start"));
  Value *ends = e.ints({axis + 1}, c.h("axis_end"));
  for (unsigned i = 0; i < n.numInputs(); ++i)
    sizes.push_back(
        e.op("Slice", {e.shapeOf(n.input(i)), starts, ends}, DType::I64, c.h("size")));
  Value *split = e.op("Concat", sizes, DType::I64, c.h("sizes"));
  split->producer()->setAttr(Attribute::makeInt("axis", 0));
  std::vector<DType> outs;
  for (unsigned i = 0; i < n.numInputs(); ++i)
    outs.push_back(elemOf(n.input(i)));
  Node *s = e.node("Split", "", {c.dY(), split}, outs, c.h("dX"));
  s->setAttr(Attribute::makeInt("axis", axis));
  for (unsigned i = 0; i < n.numInputs(); ++i)
    if (c.want(i))
      c.dIn[i] = s->output(i);
  return llvm::Error::success();
}

/// The forward input i of a recurrent node, or null.
static Value *optionalInput(const Node &n, unsigned i) {
  return i < n.numInputs() ? n.input(i) : nullptr;
}

/// Emits `op` (LSTMGrad/GRUGrad) on `ins` (trailing absent ones dropped):
/// its output k is the gradient of forward input fwdInput[k], requested
/// only where that input is present and wanted.
static void emitRecurrentGrad(Ctx &c, llvm::StringRef op, std::vector<Value *> ins,
                              llvm::ArrayRef<unsigned> fwdInput,
                              llvm::ArrayRef<llvm::StringRef> attrs) {
  Node &n = c.n();
  std::vector<DType> outs(fwdInput.size(), DType::Undefined);
  for (unsigned k = 0; k < fwdInput.size(); ++k)
    if (Value *x = optionalInput(n, fwdInput[k]); x && c.want(fwdInput[k]))
      outs[k] = elemOf(x);
  while (!ins.empty() && !ins.back())
    ins.pop_back();
  while (!outs.empty() && outs.back() == DType::Undefined)
    outs.pop_back();
  Node *g = c.e.node(op, kTrainingDomain, ins, outs, c.h("d"));
  copyAttrs(n, *g, attrs);
  for (unsigned k = 0; k < outs.size(); ++k)
    if (outs[k] != DType::Undefined)
      c.dIn[fwdInput[k]] = g->output(k);
}

/// LSTMGrad recomputes the forward from X, W, R, B and the initial states.
static llvm::Error gradLstm(Ctx &c) {
  Node &n = c.n();
  if (n.attr("activations") || n.attr("clip") || n.intAttr("input_forget", 0) ||
      n.intAttr("layout", 0))
    return unsupported(n, "LSTM activations, clip, input_forget and layout must keep their "
                          "defaults");
  if (n.numInputs() > 7 && n.input(7))
    return unsupported(n, "LSTM peepholes (input P)");
  std::vector<Value *> ins = {c.dY(0), c.dY(1), c.dY(2)};
  for (unsigned i = 0; i < 7; ++i)
    ins.push_back(optionalInput(n, i));
  // LSTMGrad outputs: dX, dW, dR, dB, dinitial_h, dinitial_c.
  emitRecurrentGrad(c, "LSTMGrad", ins, {0, 1, 2, 3, 5, 6}, {"direction", "hidden_size"});
  return llvm::Error::success();
}

/// GRUGrad recomputes the forward from X, W, R, B and the initial state; it
/// implements GRU's default activations, no clip and layout 0.
static llvm::Error gradGru(Ctx &c) {
  Node &n = c.n();
  if (n.intAttr("layout", 0))
    return unsupported(n, "GRU attribute 'layout' = 1 (batch-major); export with layout 0");
  if (n.attr("clip"))
    return unsupported(n, "GRU attribute 'clip'");
  if (const Attribute *a = n.attr("activations"))
    for (size_t i = 0; i < a->strings.size(); ++i)
      if (a->strings[i] != (i % 2 == 0 ? "Sigmoid" : "Tanh"))
        return unsupported(n, "GRU attribute 'activations' other than Sigmoid, Tanh");
  std::vector<Value *> ins = {c.dY(0), c.dY(1)};
  for (unsigned i = 0; i < 6; ++i)
    ins.push_back(optionalInput(n, i));
  // GRUGrad outputs: dX, dW, dR, dB, dinitial_h.
  emitRecurrentGrad(c, "GRUGrad", ins, {0, 1, 2, 3, 5},
                    {"direction", "hidden_size", "linear_before_reset"});
  return llvm::Error::success();
}

static llvm::Error gradReduce(Ctx &c) {
  Node &n = c.n();
  bool isMean = n.opType == "ReduceMean";
  std::vector<int64_t> axes;
  if (const Attribute *a = n.attr("axes"))
    axes = a->ints;
  else if (n.numInputs() > 1 && n.input(1) && !constantInts(n.input(1), axes))
    return unsupported(n, "axes must be a constant");
  if (axes.empty() && n.intAttr("noop_with_empty_axes", 0))
    return unsupported(n, "noop_with_empty_axes");
  Emitter &e = c.e;
  Value *x = c.in(0), *g = c.dY();
  DType t = elemOf(x);
  if (!n.intAttr("keepdims", 1) && !axes.empty())
    g = e.op("Unsqueeze", {g, e.ints(axes, c.h("axes"))}, t, c.h("unsqueeze"));
  g = e.op("Expand", {g, e.shapeOf(x)}, t, isMean ? c.h("expand") : c.h("dX"));
  if (isMean) {
    Value *nx = e.op("Size", {x}, DType::I64, c.h("size_x"));
    Value *ny = e.op("Size", {c.out(0)}, DType::I64, c.h("size_y"));
    Value *cnt = e.op("Div", {nx, ny}, DType::I64, c.h("count"));
    Value *cf = e.op("Cast", {cnt}, t, c.h("count_f"));
    cf->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(t)));
    g = e.op("Div", {g, cf}, t, c.h("dX"));
  }
  c.dIn[0] = g;
  return llvm::Error::success();
}

/// Gather: the ai.mpc.training GatherGrad scatter-adds dY into zeros shaped
/// like the data (repeated indices sum, negative indices count from the end).
static llvm::Error gradGather(Ctx &c) {
  Node *g = c.e.node("GatherGrad", kTrainingDomain, {c.dY(), c.e.shapeOf(c.in(0)), c.in(1)},
                     {elemOf(c.in(0))}, c.h("dX"));
  g->setAttr(Attribute::makeInt("axis", c.n().intAttr("axis", 0)));
  c.dIn[0] = g->output(0);
  return llvm::Error::success();
}

/// Slice: SliceGrad places dY where the forward Slice read X (zeros elsewhere).
static llvm::Error gradSlice(Ctx &c) {
  Node &n = c.n();
  std::vector<Value *> ins = {c.dY(), c.e.shapeOf(c.in(0))};
  for (unsigned i = 1; i < n.numInputs(); ++i)
    ins.push_back(n.input(i));
  while (!ins.back())
    ins.pop_back();
  c.dIn[0] = c.e.op("SliceGrad", ins, elemOf(c.in(0)), c.h("dX"), kTrainingDomain);
  return llvm::Error::success();
}

/// Split: the output gradients concatenated along the axis; an output that
/// receives no gradient contributes zeros of its shape.
static llvm::Error gradSplit(Ctx &c) {
  Node &n = c.n();
  Emitter &e = c.e;
  DType t = elemOf(c.in(0));
  std::vector<Value *> parts;
  Value *zero = nullptr;
  for (unsigned i = 0; i < n.numOutputs(); ++i) {
    if (!n.output(i))
      return unsupported(n, "an omitted output (its size is unknown)");
    Value *d = c.dY(i);
    if (!d) {
      if (!zero)
        zero = e.scalar(0.0, t, c.h("zero"));
      d = e.op("Expand", {zero, e.shapeOf(n.output(i))}, t, c.h("no_grad"));
    }
    parts.push_back(d);
  }
  Value *cat = e.op("Concat", parts, t, c.h("dX"));
  cat->producer()->setAttr(Attribute::makeInt("axis", n.intAttr("axis", 0)));
  c.dIn[0] = cat;
  return llvm::Error::success();
}

/// Where(cond, A, B): dY to A where cond holds, to B elsewhere; none to cond.
static llvm::Error gradWhere(Ctx &c) {
  Emitter &e = c.e;
  Value *cond = c.in(0), *dy = c.dY();
  for (unsigned i = 1; i < 3; ++i) {
    if (!c.want(i))
      continue;
    Value *x = c.in(i);
    Value *zero = e.scalar(0.0, elemOf(x), c.h("zero"));
    Value *g = i == 1 ? e.op("Where", {cond, dy, zero}, elemOf(x), c.h("dA_sel"))
                      : e.op("Where", {cond, zero, dy}, elemOf(x), c.h("dB_sel"));
    c.dIn[i] = unbroadcast(e, g, x, c.out(0), c.h(i == 1 ? "dA" : "dB"));
  }
  return llvm::Error::success();
}

/// Clip(X, lo, hi) = min(max(X, lo), hi). X gets dY where lo < X < hi
/// strictly (PyTorch's hardtanh/ReLU6 convention: nothing at the bounds);
/// the bounds take no gradient (carriesGradient).
static llvm::Error gradClip(Ctx &c) {
  Node &n = c.n();
  Emitter &e = c.e;
  Value *x = c.in(0), *dy = c.dY();
  Value *lo = n.numInputs() > 1 ? n.input(1) : nullptr;
  Value *hi = n.numInputs() > 2 ? n.input(2) : nullptr;
  Value *above = lo ? e.op("Greater", {x, lo}, DType::Bool, c.h("above_min")) : nullptr;
  Value *below = hi ? e.op("Less", {x, hi}, DType::Bool, c.h("below_max")) : nullptr;
  Value *inside =
      !above ? below : !below ? above : e.op("And", {above, below}, DType::Bool, c.h("inside"));
  if (!inside) {
    c.dIn[0] = dy;
    return llvm::Error::success();
  }
  Value *zero = e.scalar(0.0, elemOf(x), c.h("zero"));
  c.dIn[0] = e.op("Where", {inside, dy, zero}, elemOf(x), c.h("dX"));
  return llvm::Error::success();
}

/// Element-wise ops whose gradient is dY times a factor made of X, Y and
/// constants (existing ops only, so every backend runs it):
///   Sqrt dY/(2Y), Reciprocal -dY*Y*Y, Exp dY*Y, Log dY/X, Abs dY*Sign(X)
///   (0 at 0, as PyTorch), Softplus dY*Sigmoid(X), Cast dY cast back.
static llvm::Error gradPointwise(Ctx &c) {
  llvm::StringRef op = c.n().opType;
  Emitter &e = c.e;
  Value *x = c.in(0), *y = c.out(0), *dy = c.dY();
  DType t = elemOf(x);
  Value *g = nullptr;
  if (op == "Sqrt") {
    Value *twoY = e.op("Add", {y, y}, t, c.h("two_y"));
    g = e.op("Div", {dy, twoY}, t, c.h("dX"));
  } else if (op == "Reciprocal") {
    Value *yy = e.op("Mul", {y, y}, t, c.h("y_sq"));
    g = e.op("Neg", {e.op("Mul", {dy, yy}, t, c.h("dy_y_sq"))}, t, c.h("dX"));
  } else if (op == "Exp") {
    g = e.op("Mul", {dy, y}, t, c.h("dX"));
  } else if (op == "Log") {
    g = e.op("Div", {dy, x}, t, c.h("dX"));
  } else if (op == "Abs") {
    g = e.op("Mul", {dy, e.op("Sign", {x}, t, c.h("sign"))}, t, c.h("dX"));
  } else if (op == "Softplus") {
    g = e.op("Mul", {dy, e.op("Sigmoid", {x}, t, c.h("sigmoid"))}, t, c.h("dX"));
  } else {
    assert(op == "Cast" && "a pointwise rule per op");
    g = e.op("Cast", {dy}, t, c.h("dX"));
    g->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(t)));
  }
  c.dIn[0] = g;
  return llvm::Error::success();
}

/// Pow(A, B), as PyTorch differentiates it: dA = dY*B*A^(B-1), 0 where
/// B == 0; dB = dY*Y*ln(A), 0 where A == 0 and B >= 0. An exponent of
/// another type (an integer constant) is cast to A's type for dA.
static llvm::Error gradPow(Ctx &c) {
  Emitter &e = c.e;
  Value *a = c.in(0), *b = c.in(1), *y = c.out(0), *dy = c.dY();
  DType ta = elemOf(a);
  if (c.want(0)) {
    Value *bf = b;
    if (elemOf(b) != ta) {
      bf = e.op("Cast", {b}, ta, c.h("b_cast"));
      bf->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(ta)));
    }
    Value *zero = e.scalar(0.0, ta, c.h("zero"));
    Value *bm1 = e.op("Sub", {bf, e.scalar(1.0, ta, c.h("one"))}, ta, c.h("b_minus_1"));
    Value *pw = e.op("Pow", {a, bm1}, ta, c.h("a_pow"));
    Value *g = e.op("Mul", {dy, e.op("Mul", {bf, pw}, ta, c.h("b_a_pow"))}, ta, c.h("dA_mul"));
    Value *b0 = e.op("Equal", {bf, zero}, DType::Bool, c.h("b_is_0"));
    g = e.op("Where", {b0, zero, g}, ta, c.h("dA_sel"));
    c.dIn[0] = unbroadcast(e, g, a, y, c.h("dA"));
  }
  if (c.want(1)) {
    DType tb = elemOf(b);
    Value *zero = e.scalar(0.0, tb, c.h("zero_b"));
    Value *af = a, *yf = y;
    if (ta != tb) {
      af = e.op("Cast", {a}, tb, c.h("a_cast"));
      af->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(tb)));
      yf = e.op("Cast", {y}, tb, c.h("y_cast"));
      yf->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(tb)));
    }
    Value *g = e.op("Mul", {dy, e.op("Mul", {yf, e.op("Log", {af}, tb, c.h("log_a"))}, tb,
                                     c.h("y_log_a"))},
                    tb, c.h("dB_mul"));
    Value *a0 = e.op("Equal", {af, zero}, DType::Bool, c.h("a_is_0"));
    Value *bNonNeg = e.op("GreaterOrEqual", {b, zero}, DType::Bool, c.h("b_non_negative"));
    Value *none = e.op("And", {a0, bNonNeg}, DType::Bool, c.h("no_grad"));
    g = e.op("Where", {none, zero, g}, tb, c.h("dB_sel"));
    c.dIn[1] = unbroadcast(e, g, b, y, c.h("dB"));
  }
  return llvm::Error::success();
}

/// Sum, Mean (variadic, broadcasting) and Expand: each input takes dY (over
/// the count for Mean) summed back to its shape (BiasGrad).
static llvm::Error gradBroadcastSum(Ctx &c) {
  Node &n = c.n();
  Emitter &e = c.e;
  bool expand = n.opType == "Expand";
  unsigned num = expand ? 1 : n.numInputs();
  for (unsigned i = 0; i < num; ++i) {
    if (!c.want(i))
      continue;
    Value *x = c.in(i), *g = c.dY();
    if (n.opType == "Mean" && num > 1)
      g = e.op("Div", {g, e.scalar(num, elemOf(x), c.h("count"))}, elemOf(x), c.h("mean"));
    c.dIn[i] = unbroadcast(e, g, x, c.out(0), c.h("dX" + std::to_string(i)));
  }
  return llvm::Error::success();
}

/// Max/Min: dY goes to the inputs equal to Y, split evenly among ties
/// (PyTorch's maximum/minimum give each of two tied inputs dY/2).
static llvm::Error gradMaxMin(Ctx &c) {
  Node &n = c.n();
  Emitter &e = c.e;
  Value *y = c.out(0), *dy = c.dY();
  DType t = elemOf(y);
  std::vector<Value *> hits;
  Value *count = nullptr;
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    Value *hit = e.op("Equal", {n.input(i), y}, DType::Bool, c.h("is_" + std::to_string(i)));
    hits.push_back(hit);
    Value *hf = e.op("Cast", {hit}, t, c.h("hit_" + std::to_string(i)));
    hf->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(t)));
    count = count ? e.op("Add", {count, hf}, t, c.h("ties")) : hf;
  }
  Value *share = n.numInputs() > 1 ? e.op("Div", {dy, count}, t, c.h("share")) : dy;
  Value *zero = e.scalar(0.0, t, c.h("zero"));
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    if (!c.want(i))
      continue;
    Value *g = e.op("Where", {hits[i], share, zero}, t, c.h("sel_" + std::to_string(i)));
    c.dIn[i] = unbroadcast(e, g, n.input(i), y, c.h("dX" + std::to_string(i)));
  }
  return llvm::Error::success();
}

/// Activations whose gradient is dY times a piecewise factor of X, with
/// PyTorch's choice at the kinks:
///   LeakyRelu   dY where X > 0, alpha*dY elsewhere;
///   HardSigmoid alpha*dY where 0 < alpha*X+beta < 1 strictly, else 0;
///   HardSwish   0 where X < -3, dY*(X/3 + 1/2) where X <= 3, dY above.
static llvm::Error gradPiecewise(Ctx &c) {
  llvm::StringRef op = c.n().opType;
  Emitter &e = c.e;
  Value *x = c.in(0), *dy = c.dY();
  DType t = elemOf(x);
  auto k = [&](double v, const char *name) { return e.scalar(v, t, c.h(name)); };
  if (op == "LeakyRelu") {
    Value *pos = e.op("Greater", {x, k(0.0, "zero")}, DType::Bool, c.h("positive"));
    Value *neg =
        e.op("Mul", {dy, k(c.n().floatAttr("alpha", 0.01f), "alpha")}, t, c.h("dy_alpha"));
    c.dIn[0] = e.op("Where", {pos, dy, neg}, t, c.h("dX"));
  } else if (op == "HardSigmoid") {
    Value *alpha = k(c.n().floatAttr("alpha", 0.2f), "alpha");
    Value *lin = e.op("Add", {e.op("Mul", {x, alpha}, t, c.h("ax")),
                              k(c.n().floatAttr("beta", 0.5f), "beta")},
                      t, c.h("ax_b"));
    Value *inside = e.op("And", {e.op("Greater", {lin, k(0.0, "zero")}, DType::Bool, c.h("above")),
                                 e.op("Less", {lin, k(1.0, "one")}, DType::Bool, c.h("below"))},
                         DType::Bool, c.h("inside"));
    c.dIn[0] = e.op("Where", {inside, e.op("Mul", {dy, alpha}, t, c.h("dy_alpha")),
                              k(0.0, "zero_out")},
                    t, c.h("dX"));
  } else {
    assert(op == "HardSwish" && "a piecewise rule per op");
    Value *slope = e.op("Add", {e.op("Div", {x, k(3.0, "three")}, t, c.h("x_3")), k(0.5, "half")},
                        t, c.h("slope"));
    Value *mid = e.op("Where", {e.op("LessOrEqual", {x, k(3.0, "hi")}, DType::Bool, c.h("le_3")),
                                e.op("Mul", {dy, slope}, t, c.h("dy_slope")), dy},
                      t, c.h("upper"));
    c.dIn[0] = e.op("Where", {e.op("Less", {x, k(-3.0, "lo")}, DType::Bool, c.h("lt_minus_3")),
                              k(0.0, "zero"), mid},
                    t, c.h("dX"));
  }
  return llvm::Error::success();
}

/// Tile: dY viewed as [r0, d0, r1, d1, ...] and summed over the repeat axes
/// (BiasGrad to [1, d0, 1, d1, ...]), then shaped like X.
static llvm::Error gradTile(Ctx &c) {
  Emitter &e = c.e;
  Value *x = c.in(0), *reps = c.in(1);
  DType t = elemOf(x);
  auto column = [&](Value *v, const char *name) {
    return e.op("Unsqueeze", {v, e.ints({1}, c.h("axis1"))}, DType::I64, c.h(name));
  };
  auto interleave = [&](Value *first, const char *name) {
    Value *pairs = e.op("Concat", {column(first, "outer"), column(e.shapeOf(x), "inner")},
                        DType::I64, c.h("pairs"));
    pairs->producer()->setAttr(Attribute::makeInt("axis", 1));
    return e.op("Reshape", {pairs, e.ints({-1}, c.h("flat"))}, DType::I64, c.h(name));
  };
  Value *ones = e.op("Expand", {e.scalar(1, DType::I64, c.h("one")),
                                e.op("Shape", {reps}, DType::I64, c.h("rank"))},
                     DType::I64, c.h("ones"));
  Value *view = e.op("Reshape", {c.dY(), interleave(reps, "split_shape")}, t, c.h("split"));
  Value *sum = e.op("BiasGrad", {view, interleave(ones, "kept_shape")}, t, c.h("summed"),
                    kTrainingDomain);
  c.dIn[0] = e.op("Reshape", {sum, e.shapeOf(x)}, t, c.h("dX"));
  return llvm::Error::success();
}

/// Pad (constant mode, constant amounts): dX is dY with the padding sliced
/// off.
static llvm::Error gradPad(Ctx &c) {
  Node &n = c.n();
  llvm::StringRef mode = n.stringAttr("mode", "constant");
  if (mode != "constant")
    return unsupported(n, "Pad mode " + quoteName(mode) + " (only constant)");
  std::vector<int64_t> pads, axes;
  if (n.numInputs() < 2 || !n.input(1) || !constantInts(n.input(1), pads))
    return unsupported(n, "Pad amounts must be a constant input");
  size_t r = pads.size() / 2;
  if (n.numInputs() > 3 && n.input(3)) {
    if (!constantInts(n.input(3), axes))
      return unsupported(n, "Pad axes must be a constant");
  } else {
    for (size_t i = 0; i < r; ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.size() != r)
    return unsupported(n, "Pad amounts do not match its axes");
  std::vector<int64_t> starts, ends, sliced;
  for (size_t i = 0; i < r; ++i) {
    int64_t lo = pads[i], hi = pads[r + i];
    if (lo < 0 || hi < 0)
      return unsupported(n, "Pad with negative amounts (cropping)");
    if (lo > 0 || hi > 0) {
      starts.push_back(lo);
      ends.push_back(hi > 0 ? -hi : std::numeric_limits<int64_t>::max());
      sliced.push_back(axes[i]);
    }
  }
  Emitter &e = c.e;
  c.dIn[0] = sliced.empty() ? c.dY()
                            : e.op("Slice",
                                   {c.dY(), e.ints(starts, c.h("starts")),
                                    e.ints(ends, c.h("ends")), e.ints(sliced, c.h("axes"))},
                                   elemOf(c.in(0)), c.h("dX"));
  return llvm::Error::success();
}

namespace {
struct RuleRow {
  const char *op;
  RuleFn fn;
};
} // namespace

// Sorted by op name.
static const RuleRow kRules[] = {
    {"Abs", gradPointwise},
    {"Add", gradElementwise},
    {"AveragePool", gradWithAttrs},
    {"BatchNormalization", gradBatchNorm},
    {"Cast", gradPointwise},
    {"Clip", gradClip},
    {"Concat", gradConcat},
    {"Conv", gradWithAttrs},
    {"Div", gradElementwise},
    {"Dropout", gradDropout},
    {"Erf", gradUnary},
    {"Exp", gradPointwise},
    {"Expand", gradBroadcastSum},
    {"Flatten", gradReshapeLike},
    {"Gather", gradGather},
    {"Gelu", gradUnary},
    {"Gemm", gradGemm},
    {"GRU", gradGru},
    {"GlobalAveragePool", gradWithAttrs},
    {"HardSigmoid", gradPiecewise},
    {"HardSwish", gradPiecewise},
    {"Identity", gradIdentity},
    {"LayerNormalization", gradLayerNorm},
    {"LeakyRelu", gradPiecewise},
    {"Log", gradPointwise},
    {"LSTM", gradLstm},
    {"LogSoftmax", gradUnary},
    {"MatMul", gradMatMul},
    {"Max", gradMaxMin},
    {"MaxPool", gradWithAttrs},
    {"Mean", gradBroadcastSum},
    {"Min", gradMaxMin},
    {"Mul", gradElementwise},
    {"Neg", gradNeg},
    {"Pad", gradPad},
    {"Pow", gradPow},
    {"Reciprocal", gradPointwise},
    {"ReduceMean", gradReduce},
    {"ReduceSum", gradReduce},
    {"Relu", gradUnary},
    {"Reshape", gradReshapeLike},
    {"Sigmoid", gradUnary},
    {"Slice", gradSlice},
    {"Softmax", gradUnary},
    {"Softplus", gradPointwise},
    {"Split", gradSplit},
    {"Sqrt", gradPointwise},
    {"Squeeze", gradReshapeLike},
    {"Sub", gradElementwise},
    {"Sum", gradBroadcastSum},
    {"Tanh", gradUnary},
    {"Tile", gradTile},
    {"Transpose", gradTranspose},
    {"Unsqueeze", gradReshapeLike},
    {"Where", gradWhere},
};

static RuleFn findRule(const Node &n) {
  if (!n.domain.empty() && n.domain != "ai.onnx")
    return nullptr;
  for (const RuleRow &r : kRules)
    if (n.opType == r.op)
      return r.fn;
  return nullptr;
}

bool train::hasGradientRule(const Node &n) { return findRule(n) != nullptr; }

bool train::carriesGradient(const Node &n, unsigned input) {
  bool standard = n.domain.empty() || n.domain == "ai.onnx";
  // Clip's bounds, Pad's amounts and fill value: PyTorch's are numbers;
  // Dropout's ratio.
  return !(standard && (n.opType == "Clip" || n.opType == "Pad" || n.opType == "Dropout") &&
           input > 0);
}

std::vector<std::string> mpc::gradientRuleOps() {
  std::vector<std::string> ops;
  for (const RuleRow &r : kRules)
    ops.push_back(r.op);
  return ops;
}

const char *mpc::gradientRulesSourceFile() { return __FILE__; }

llvm::Expected<bool> train::emitGradient(Emitter &e, const GradRequest &req,
                                         std::vector<Value *> &dIn) {
  RuleFn fn = findRule(req.fwd);
  if (!fn)
    return false;
  dIn.assign(req.fwd.numInputs(), nullptr);
  // LSTM, GRU and Split take the gradient of any output; other rules need dY of output 0.
  bool anyOutput =
      req.fwd.opType == "LSTM" || req.fwd.opType == "GRU" || req.fwd.opType == "Split";
  if (!req.dOut.empty() && !req.dOut[0] && !anyOutput)
    return unsupported(req.fwd, "only its first output may carry a gradient");
  Ctx c{e, req, dIn};
  if (llvm::Error err = fn(c))
    return std::move(err);
  for (unsigned i = 0; i < dIn.size(); ++i)
    if (!c.want(i))
      dIn[i] = nullptr;
  return true;
}

std::vector<bool> train::inputsWantingGradients(const Node &n,
                                                const llvm::DenseSet<const Value *> &needs) {
  std::vector<bool> want;
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    const Value *in = n.input(i);
    want.push_back(in && needs.count(in) && isFloatTensor(in) && carriesGradient(n, i));
  }
  return want;
}

bool train::isFloatTensor(const Value *v) {
  return v && v->type.isTensor() && isFloatingPoint(v->type.elem);
}

llvm::DenseSet<const Value *> train::valuesDependingOn(llvm::ArrayRef<Node *> forward,
                                                       llvm::ArrayRef<const Value *> seeds) {
  llvm::DenseSet<const Value *> needs(seeds.begin(), seeds.end());
  for (Node *n : forward) {
    bool any = false;
    for (unsigned i = 0; i < n->numInputs(); ++i)
      any |= n->input(i) && needs.count(n->input(i)) && carriesGradient(*n, i);
    if (any)
      for (Value *o : n->outputs())
        if (isFloatTensor(o))
          needs.insert(o);
  }
  return needs;
}
