//===- GemmEpilogues.cpp - Fold bias, activation and cast into GEMMs -------===//
//
// See mpc/Passes/GemmEpilogues.h. Each MatMul/Gemm is a root; its chain is
// followed forward through single readers (Value::uses), so every node is
// looked at a bounded number of times. The fused node takes the place (and
// order key) of the chain's last node and the name of its result.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/GemmEpilogues.h"
#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Runtime/Float16.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

using namespace mpc;

namespace {

bool isOnnxOp(const Node &n, llvm::StringRef op) {
  return n.opType == op && (n.domain.empty() || n.domain == "ai.onnx");
}

/// The one node that reads `v`, reading it once; null when `v` is a graph
/// output or has another reader (then `why` says which).
Node *soleReader(const Value *v, std::string &why) {
  if (v->isGraphOutput()) {
    why = formatQuoted("'{0}' is a graph output", v->name());
    return nullptr;
  }
  if (v->numUses() != 1) {
    why = formatQuoted("'{0}' has {1} readers", v->name(), v->numUses());
    return nullptr;
  }
  Node *r = v->uses().front().user;
  unsigned reads = 0;
  for (Value *in : r->inputs())
    reads += in == v;
  if (reads != 1) {
    why = formatQuoted("'{0}' is read twice by '{1}'", v->name(), r->name);
    return nullptr;
  }
  return r;
}

/// The static shape of `v` (initializer dims or a fully known type), or false.
bool staticShape(const Value *v, std::vector<int64_t> &out) {
  if (const Tensor *t = v->initializer()) {
    out = t->dims;
    return true;
  }
  if (!v->type.hasShape)
    return false;
  out.clear();
  for (const Dim &d : v->type.dims) {
    if (!d.isKnown())
      return false;
    out.push_back(d.value);
  }
  return true;
}

/// The rank of `v`, or -1 when unknown.
int rankOf(const Value *v) {
  if (const Tensor *t = v->initializer())
    return int(t->dims.size());
  return v->type.hasShape ? int(v->type.dims.size()) : -1;
}

/// The one value of a one-element float initializer (or Constant node), or
/// false.
bool scalarConstant(const Value *v, double &out) {
  const Tensor *t = v->initializer();
  if (!t && v->producer() && isOnnxOp(*v->producer(), "Constant")) {
    const Attribute *a = v->producer()->attr("value");
    t = a && a->tensors.size() == 1 ? &a->tensors[0] : nullptr;
  }
  if (!t || t->isExternal() || t->numElements() != 1)
    return false;
  llvm::ArrayRef<uint8_t> b = t->bytes();
  switch (t->dtype) {
  case DType::F32: {
    float f;
    if (b.size() < 4)
      return false;
    std::memcpy(&f, b.data(), 4);
    out = f;
    return true;
  }
  case DType::F64:
    if (b.size() < 8)
      return false;
    std::memcpy(&out, b.data(), 8);
    return true;
  case DType::F16:
  case DType::BF16: {
    uint16_t bits;
    if (b.size() < 2)
      return false;
    std::memcpy(&bits, b.data(), 2);
    out = t->dtype == DType::F16 ? halfToFloat(Half::fromBits(bits))
                                 : bfloat16ToFloat(BFloat16::fromBits(bits));
    return true;
  }
  default:
    return false;
  }
}

/// `v` is a constant within `rel` (relative) of `want`.
bool isConstantNear(const Value *v, double want, double rel) {
  double got;
  return v && scalarConstant(v, got) && std::fabs(got - want) <= rel * std::fabs(want);
}

/// The operand of binary node `n` other than `v` (null when `v` is not one).
Value *otherOperand(const Node &n, const Value *v) {
  if (n.numInputs() != 2)
    return nullptr;
  if (n.input(0) == v)
    return n.input(1);
  if (n.input(1) == v)
    return n.input(0);
  return nullptr;
}

/// A matched chain: the root GEMM, the nodes folded after it, in order.
struct Chain {
  Node *gemm = nullptr;
  Value *a = nullptr, *b = nullptr, *bias = nullptr;
  GemmBiasActAttrs at;
  std::vector<Node *> absorbed;
  Value *result = nullptr;
  /// Constants only the absorbed nodes read (erased with them when unused).
  std::vector<Value *> constants;
  /// A BiasGrad of the reduced operand, folded in as output bias_grad
  /// (at.biasGradOf says which operand).
  Node *biasGrad = nullptr;
};

// Tolerances for the erf pattern's constants: they may have been rounded to
// a 16-bit type (bf16 keeps 8 bits).
constexpr double kConstantTolerance = 1.0 / 256;

/// The erf pattern from `x` (mpc::matchErfGelu), its nodes appended to
/// `c.absorbed` and the constants of every absorbed node to `c.constants`;
/// the result or null.
Value *matchErfGelu(Value *x, Chain &c) {
  ErfGeluMatch m;
  if (!mpc::matchErfGelu(x, m))
    return nullptr;
  c.absorbed.insert(c.absorbed.end(), m.nodes.begin(), m.nodes.end());
  for (Node *n : c.absorbed)
    for (Value *in : n->inputs())
      if (in && (in->isConstant() || (in->producer() && isOnnxOp(*in->producer(), "Constant"))))
        c.constants.push_back(in);
  std::sort(c.constants.begin(), c.constants.end(),
            [](const Value *l, const Value *r) { return l->id() < r->id(); });
  c.constants.erase(std::unique(c.constants.begin(), c.constants.end()), c.constants.end());
  return m.result;
}

/// Y's element type may become `to` (a folded Cast) for operands of type `t`.
bool castFolds(DType t, DType to) {
  return (isHalfPrecision(t) && to == DType::F32) || (t == DType::F32 && isHalfPrecision(to));
}

bool isBiasGradNode(const Node &n) {
  return n.opType == "BiasGrad" && n.domain == "ai.mpc.training";
}

/// The static vector BiasGrad `bg` reduces to: its output's shape, the Shape
/// of a value of static shape (what train-graph writes: Shape of the bias),
/// or a constant int64 vector; false when unknown.
bool biasGradTarget(const Node &bg, std::vector<int64_t> &out) {
  if (staticShape(bg.output(0), out))
    return true;
  const Value *s = bg.numInputs() > 1 ? bg.input(1) : nullptr;
  if (!s)
    return false;
  if (const Node *p = s->producer())
    return isOnnxOp(*p, "Shape") && !p->attr("start") && !p->attr("end") && p->input(0) &&
           staticShape(p->input(0), out);
  const Tensor *t = s->initializer();
  if (!t || t->dtype != DType::I64 || t->isExternal() || t->dims.size() != 1)
    return false;
  out.resize(size_t(t->numElements()));
  llvm::ArrayRef<uint8_t> b = t->bytes();
  if (b.size() < out.size() * 8)
    return false;
  std::memcpy(out.data(), b.data(), out.size() * 8);
  return true;
}

/// A BiasGrad summing `operand` (a [K, L] GEMM operand) over its rows into
/// L elements of type `y`: one reading `operand`, or, when `operand` is a
/// Flatten over the last axis (axis -1, or rank - 1 where the rank is known),
/// one reading the tensor flattened, reduced to a vector [L] with L > 1
/// (a BiasGrad to [1] would also sum the columns). Null when none.
Node *biasGradOf(Value *operand, DType y) {
  llvm::SmallVector<Value *, 2> sources{operand};
  if (const Node *f = operand->producer(); f && isOnnxOp(*f, "Flatten") && f->input(0)) {
    int64_t axis = f->intAttr("axis", 1);
    int rank = rankOf(f->input(0));
    if (axis == -1 || (rank >= 1 && axis == rank - 1))
      sources.push_back(f->input(0));
  }
  for (Value *s : sources)
    for (const Use &u : s->uses()) {
      Node *r = u.user;
      std::vector<int64_t> target;
      if (u.operand != 0 || !isBiasGradNode(*r) || r->numOutputs() != 1 || !r->output(0) ||
          r->output(0)->type.elem != y || !biasGradTarget(*r, target) || target.size() != 1 ||
          target[0] <= 1)
        continue;
      return r;
    }
  return nullptr;
}

/// Whether `v` may depend on `target`'s outputs: a walk back from v's
/// producer through at most `budget` nodes, stopping at nodes that come
/// before `target` in `pos` (the graph's order when the walk began). True
/// (may) when the budget runs out.
bool mayDependOn(const Value *v, const Node *target,
                 const llvm::DenseMap<const Node *, size_t> &pos, unsigned budget = 256) {
  size_t floor = pos.lookup(target);
  llvm::SmallVector<const Node *, 16> work;
  llvm::SmallPtrSet<const Node *, 32> seen;
  if (v->producer())
    work.push_back(v->producer());
  while (!work.empty()) {
    const Node *n = work.pop_back_val();
    if (n == target)
      return true;
    auto it = pos.find(n);
    if ((it != pos.end() && it->second < floor) || !seen.insert(n).second)
      continue;
    if (seen.size() > budget)
      return true;
    for (const Value *in : n->inputs())
      if (in && in->producer())
        work.push_back(in->producer());
  }
  return false;
}

/// Matches the chain from GEMM `g`; on failure `why` says what stopped it.
bool matchChain(Node *g, Chain &c, std::string &why) {
  c.gemm = g;
  bool gemmOp = isOnnxOp(*g, "Gemm");
  if (g->numInputs() < 2 || !g->input(0) || !g->input(1) || !g->output(0)) {
    why = "operands missing";
    return false;
  }
  c.a = g->input(0);
  c.b = g->input(1);
  DType t = g->output(0)->type.elem;
  if (t != DType::F32 && !isHalfPrecision(t)) {
    why = "its type is " + dtypeName(t).str() + ", not float32, float16 or bfloat16";
    return false;
  }
  // B: any 2-D value (a constant weight, a weight's 16-bit copy, an
  // activation: a weight gradient's dY); N is its column count. Gemm's
  // operands are 2-D by definition; a MatMul's B needs a known rank of 2.
  if (!gemmOp && rankOf(c.b) != 2) {
    int r = rankOf(c.b);
    why = r < 0 ? formatQuoted("B '{0}' has no known rank (rank 2 is needed)", c.b->name())
                : formatQuoted("B '{0}' has rank {1}, not 2", c.b->name(), r);
    return false;
  }
  int rankA = gemmOp ? 2 : rankOf(c.a); // Gemm's A is 2-D by definition
  if (rankA == 0) {
    why = formatQuoted("'{0}' is a scalar", c.a->name());
    return false;
  }
  if (gemmOp) {
    c.at.transA = g->intAttr("transA", 0) != 0;
    c.at.transB = g->intAttr("transB", 0) != 0;
    if (g->floatAttr("alpha", 1.0f) != 1.0f) {
      why = "alpha is not 1";
      return false;
    }
  }
  int64_t n = -1; // unknown: no bias can be matched
  if (const Tensor *w = c.b->initializer())
    n = w->dims[c.at.transB ? 0 : 1];
  else if (rankOf(c.b) == 2 && c.b->type.dims[c.at.transB ? 0 : 1].isKnown())
    n = c.b->type.dims[c.at.transB ? 0 : 1].value;
  // The bias: a vector of N, or [1, ..., 1, N] no longer than Y's rank.
  auto isBias = [&](const Value *v) {
    std::vector<int64_t> s;
    if (n < 0 || !v || v->type.elem == DType::Undefined || !staticShape(v, s) || s.empty() ||
        s.back() != n)
      return false;
    for (size_t i = 0; i + 1 < s.size(); ++i)
      if (s[i] != 1)
        return false;
    int rankY = rankA < 0 ? -1 : std::max(rankA, 1);
    return s.size() == 1 || (rankY >= 0 && int(s.size()) <= rankY);
  };
  if (gemmOp && g->numInputs() > 2 && g->input(2)) {
    if (g->floatAttr("beta", 1.0f) != 1.0f || !isBias(g->input(2))) {
      why = formatQuoted("C '{0}' is not a bias of {1} with beta 1", g->input(2)->name(),
                         n < 0 ? std::string("N") : std::to_string(n));
      return false;
    }
    c.bias = g->input(2);
  }
  Value *cur = g->output(0);
  // Why nothing follows the product, when nothing does.
  std::string noChain = "nothing to fold (its bias is Gemm's C, and no activation or cast follows)";
  if (!c.bias) {
    noChain = "nothing to fold (no bias Add, activation or cast follows)";
    Node *r = soleReader(cur, noChain);
    if (r && isOnnxOp(*r, "Cast") && isHalfPrecision(t) &&
        DType(r->intAttr("to", 0)) == DType::F32) {
      // A 16-bit product read as float32 (a weight gradient into its fp32
      // unscale, or MatMul -> Cast -> Add(float bias)): the cast becomes Y's
      // type, and a bias Add may follow it.
      c.at.to = DType::F32;
      c.absorbed.push_back(r);
      cur = r->output(0);
      r = soleReader(cur, noChain);
    }
    Value *bias = r && isOnnxOp(*r, "Add") ? otherOperand(*r, cur) : nullptr;
    if (bias && bias->type.elem == cur->type.elem && isBias(bias)) {
      c.bias = bias;
      c.at.biasAfterRounding = c.at.to == DType::Undefined;
      c.absorbed.push_back(r);
      cur = r->output(0);
    } else if (r && isOnnxOp(*r, "Add")) {
      noChain = formatQuoted("'{0}' is not the Add of a bias of {1} broadcast over the last axis",
                             r->name, n < 0 ? std::string("N") : std::to_string(n));
    }
  }
  // The activation.
  std::string stop;
  if (Node *r = soleReader(cur, stop)) {
    if (isOnnxOp(*r, "Relu")) {
      c.at.act = GemmActivation::Relu;
    } else if (isOnnxOp(*r, "Gelu")) {
      llvm::StringRef approx = r->stringAttr("approximate", "none");
      c.at.act = approx == "tanh" ? GemmActivation::GeluTanh : GemmActivation::Gelu;
    }
    if (c.at.act != GemmActivation::None) {
      c.absorbed.push_back(r);
      cur = r->output(0);
    }
  } else if (Value *v = matchErfGelu(cur, c)) {
    c.at.act = GemmActivation::Gelu;
    cur = v;
  } else if (c.absorbed.empty() && cur->hasUses()) {
    noChain = stop; // the product has other readers (a backward reading it)
  }
  // The cast.
  if (c.at.to == DType::Undefined)
    if (Node *r = soleReader(cur, stop))
      if (isOnnxOp(*r, "Cast") && castFolds(t, DType(r->intAttr("to", 0)))) {
        c.at.to = DType(r->intAttr("to", 0));
        c.at.biasAfterRounding = false; // the fp32 sum is rounded once, into Y's type
        c.absorbed.push_back(r);
        cur = r->output(0);
      }
  // A weight gradient's bias gradient: a BiasGrad over the operand the
  // product sums over k (B stored [K, N], or A stored [K, M] with transA).
  if (!c.bias && c.at.act == GemmActivation::None) {
    DType y = c.at.outputType(t);
    Node *bg = !c.at.transB ? biasGradOf(c.b, y) : nullptr;
    c.at.biasGradOf = bg ? 1 : -1;
    if (!bg && c.at.transA && rankA == 2 && (bg = biasGradOf(c.a, y)))
      c.at.biasGradOf = 0;
    c.biasGrad = bg;
  }
  if (c.absorbed.empty() && !c.biasGrad) {
    why = noChain;
    return false;
  }
  c.result = cur;
  return true;
}

std::string describe(const Chain &c) {
  std::string s = formatQuoted("GEMM '{0}': fused", c.gemm->name);
  const char *sep = " with ";
  for (const Node *n : c.absorbed) {
    s += sep + quoteName(n->name);
    sep = ", ";
  }
  if (c.biasGrad)
    s += sep + quoteName(c.biasGrad->name);
  s += llvm::formatv(" (activation {0}", gemmActivationName(c.at.act)).str();
  if (c.at.to != DType::Undefined)
    s += ", output " + dtypeName(c.at.to).str();
  if (c.at.biasAfterRounding)
    s += ", bias after rounding";
  if (c.biasGrad)
    s += c.at.biasGradOf == 0 ? ", bias gradient of A" : ", bias gradient of B";
  return s + ")";
}

/// Gives `v`'s name (and graph-output places) to output `i` of `f`, renames
/// `v` out of the way and moves its uses.
Value *takeOver(Model &m, Graph &g, Node *f, unsigned i, Value *v) {
  std::string name = v->name();
  Graph::renameValue(v, m.freshName(name + "/unfused"));
  Value *y = f->setOutput(i, name, v->type);
  y->hasValueInfo = v->hasValueInfo;
  y->docString = v->docString;
  for (unsigned o = 0; o < g.outputs().size(); ++o)
    if (g.outputs()[o] == v)
      g.setOutput(o, y);
  Graph::replaceAllUsesWith(v, y);
  return y;
}

/// Replaces the chain by one GemmBiasAct node (before its last node, or,
/// with a bias gradient, before the GEMM: the caller sorts the graph then).
void rewrite(Model &m, Graph &g, const Chain &c, GemmEpilogueResult &res) {
  Node *last = c.biasGrad ? c.gemm : c.result->producer();
  Node *f = g.createNode(kGemmBiasActOp, kGemmBiasActDomain, last->getIterator(), last);
  f->name = m.freshName(c.gemm->name.str() + "/GemmBiasAct");
  f->docString = "mpc --fuse-gemm-epilogues";
  f->addInput(c.a);
  f->addInput(c.b);
  if (c.bias)
    f->addInput(c.bias);
  if (c.at.transA)
    f->setAttr(Attribute::makeInt("transA", 1));
  if (c.at.transB)
    f->setAttr(Attribute::makeInt("transB", 1));
  if (c.at.act != GemmActivation::None)
    f->setAttr(Attribute::makeString("activation", gemmActivationName(c.at.act)));
  if (c.at.to != DType::Undefined)
    f->setAttr(Attribute::makeInt("to", int64_t(c.at.to)));
  if (c.at.biasAfterRounding)
    f->setAttr(Attribute::makeInt("bias_after_rounding", 1));
  if (c.biasGrad)
    f->setAttr(Attribute::makeInt("bias_grad_of", c.at.biasGradOf));
  // The results keep their names (and graph-output places); the old values
  // are renamed out of the way.
  takeOver(m, g, f, 0, c.result);
  if (c.biasGrad) {
    takeOver(m, g, f, 1, c.biasGrad->output(0));
    Value *shape = c.biasGrad->numInputs() > 1 ? c.biasGrad->input(1) : nullptr;
    c.biasGrad->dropAllInputs();
    g.eraseNode(c.biasGrad);
    ++res.nodesRemoved;
    ++res.biasGrads;
    // Its Shape (or constant) input, when nothing else reads it.
    if (shape && !shape->hasUses() && !shape->isGraphOutput()) {
      if (Node *p = shape->producer()) {
        p->dropAllInputs();
        g.eraseNode(p);
        ++res.nodesRemoved;
      } else if (shape->isConstant() && shape->graph() == &g) {
        g.eraseInitializer(shape);
      }
    }
  }
  // Erase from the end of the chain: each node's result is unread by then
  // (the erf pattern's nodes read x and each other, so repeat until done).
  std::vector<Node *> dead(c.absorbed.rbegin(), c.absorbed.rend());
  dead.push_back(c.gemm);
  for (bool progress = true; progress && !dead.empty();) {
    progress = false;
    for (size_t i = 0; i < dead.size(); ++i) {
      bool unread = true;
      for (Value *o : dead[i]->outputs())
        unread &= !o || (!o->hasUses() && !o->isGraphOutput());
      if (!unread)
        continue;
      dead[i]->dropAllInputs();
      g.eraseNode(dead[i]);
      dead.erase(dead.begin() + long(i));
      ++res.nodesRemoved;
      progress = true;
      --i;
    }
  }
  for (Value *v : c.constants) {
    if (v->hasUses() || v->isGraphOutput())
      continue;
    if (v->isConstant() && v->graph() == &g) {
      g.eraseInitializer(v);
    } else if (Node *p = v->producer()) {
      p->dropAllInputs();
      g.eraseNode(p);
    }
  }
  ++res.fused;
  res.activations += c.at.act != GemmActivation::None;
  res.casts += c.at.to != DType::Undefined;
}

void fuseGraph(Model &m, Graph &g, GemmEpilogueResult &res) {
  std::vector<Node *> roots;
  // The graph's order before any rewrite (topological): what mayDependOn
  // stops at.
  llvm::DenseMap<const Node *, size_t> pos;
  for (Node &n : g.nodes()) {
    pos[&n] = pos.size();
    if (isOnnxOp(n, "MatMul") || isOnnxOp(n, "Gemm"))
      roots.push_back(&n);
  }
  bool resort = false;
  for (Node *root : roots) {
    ++res.gemms;
    Chain c;
    std::string why;
    if (!matchChain(root, c, why)) {
      res.decisions.push_back(formatQuoted("GEMM '{0}': not fused: ", root->name) + why);
      continue;
    }
    // The fused node computes the bias gradient with the product, so neither
    // operand may be computed from that gradient (a cycle).
    if (c.biasGrad && (mayDependOn(c.a, c.biasGrad, pos) || mayDependOn(c.b, c.biasGrad, pos))) {
      c.biasGrad = nullptr;
      c.at.biasGradOf = -1;
      if (c.absorbed.empty()) {
        res.decisions.push_back(formatQuoted("GEMM '{0}': not fused: an operand may be "
                                             "computed from its bias gradient",
                                             root->name));
        continue;
      }
    }
    res.decisions.push_back(describe(c));
    resort |= c.biasGrad != nullptr;
    rewrite(m, g, c, res);
  }
  // A node that computes a bias gradient sits before its GEMM, which may be
  // before the operands' producers: the list is put back in dependency order.
  // mayDependOn excluded a cycle; were there one, the list would keep its
  // order and the verifier after the rewrite would name it.
  if (resort) {
    bool sorted = g.sortTopologically();
    assert(sorted && "--fuse-gemm-epilogues made a cycle");
    (void)sorted;
  }
}

} // namespace

bool mpc::matchErfGelu(Value *x, ErfGeluMatch &m) {
  if (x->isGraphOutput() || x->numUses() != 2)
    return false;
  Node *scale = nullptr, *mulX = nullptr;
  for (const Use &u : x->uses()) {
    Node *r = u.user;
    Value *other = otherOperand(*r, x);
    if (!other)
      return false;
    if (isOnnxOp(*r, "Div") && r->input(0) == x && isConstantNear(other, M_SQRT2, kConstantTolerance))
      scale = r;
    else if (isOnnxOp(*r, "Mul") && isConstantNear(other, M_SQRT1_2, kConstantTolerance) && !scale)
      scale = r;
    else if (isOnnxOp(*r, "Mul"))
      mulX = r;
  }
  if (!scale || !mulX || scale == mulX)
    return false;
  std::string why;
  Node *erf = soleReader(scale->output(0), why);
  if (!erf || !isOnnxOp(*erf, "Erf"))
    return false;
  Node *plusOne = soleReader(erf->output(0), why);
  if (!plusOne || !isOnnxOp(*plusOne, "Add") ||
      !isConstantNear(otherOperand(*plusOne, erf->output(0)), 1.0, 0))
    return false;
  Value *e1 = plusOne->output(0);
  Node *next = soleReader(e1, why);
  if (!next || !isOnnxOp(*next, "Mul"))
    return false;
  std::vector<Node *> tail;
  Node *last = nullptr;
  Value *half = nullptr;
  if (next == mulX) {
    // Mul(x, e1), then Mul(., 0.5)
    last = soleReader(mulX->output(0), why);
    if (!last || !isOnnxOp(*last, "Mul"))
      return false;
    half = otherOperand(*last, mulX->output(0));
    tail = {mulX, last};
  } else {
    Value *other = otherOperand(*next, e1);
    if (other && isConstantNear(other, 0.5, 0)) {
      // Mul(e1, 0.5), then Mul(x, .)
      if (soleReader(next->output(0), why) != mulX ||
          otherOperand(*mulX, x) != next->output(0))
        return false;
      half = other;
      tail = {next, mulX};
      last = mulX;
    } else {
      // Mul(x, 0.5), then Mul(., e1)
      Value *hx = mulX->output(0);
      if (!isConstantNear(otherOperand(*mulX, x), 0.5, 0) || other != hx ||
          soleReader(hx, why) != next)
        return false;
      half = otherOperand(*mulX, x);
      tail = {mulX, next};
      last = next;
    }
  }
  if (!half || !isConstantNear(half, 0.5, 0))
    return false;
  m = ErfGeluMatch();
  m.x = x;
  m.nodes = {scale, erf, plusOne};
  m.nodes.insert(m.nodes.end(), tail.begin(), tail.end());
  for (Node *n : m.nodes)
    for (Value *in : n->inputs())
      if (in && in != x && !llvm::is_contained(m.constants, in) &&
          (in->isConstant() || (in->producer() && isOnnxOp(*in->producer(), "Constant"))))
        m.constants.push_back(in);
  m.result = last->output(0);
  return true;
}


std::string GemmEpilogueResult::summaryLine() const {
  return llvm::formatv("Fused GEMM epilogues: {0} of {1} GEMMs ({2} with an activation, {3} "
                       "with a cast, {4} with a bias gradient; {5} nodes removed)",
                       fused, gemms, activations, casts, biasGrads, nodesRemoved)
      .str();
}

GemmEpilogueResult mpc::fuseGemmEpilogues(Model &m) {
  GemmEpilogueResult res;
  fuseGraph(m, *m.graph, res);
  for (TrainingInfo &ti : m.trainingInfo)
    if (ti.algorithm)
      fuseGraph(m, *ti.algorithm, res);
  if (res.fused && m.opsetVersion(kGemmBiasActDomain) < 0)
    m.opsets.push_back({kGemmBiasActDomain, 1});
  return res;
}
