//===- Cleanup.cpp - Cast folding and dead-cast elimination ----------------===//
//
// foldCasts: a Cast whose input already has the wanted type forwards its
// input; Cast(Cast(x, B), C) reads x directly when B represents every value of
// x's type exactly (low -> high -> low). high -> low -> high is never folded:
// it rounds. A BiasGrad reading a float16/bfloat16 -> float32 Cast reads the
// 16-bit value itself, with `to` = float32: its sums are float32 either way,
// so the result has the same bits, and the widened copy of a gradient as
// large as the activations is neither written nor read. A 16-bit BiasGrad
// whose only reader widens its result to float32 gets the same `to`: its sum
// is no longer rounded to 16 bits on the way (it then has the bits of the
// BiasGrad over dY widened first, as above). eliminateDeadCode removes unused
// Cast/Constant nodes and unused initializers, the debris of those folds;
// other dead nodes of the user's model are left alone.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/Amp.h"
#include "llvm/ADT/SetVector.h"

using namespace mpc;

/// Can `wide` represent every value of `narrow` exactly?
static bool widens(DType narrow, DType wide) {
  if (narrow == wide)
    return true;
  switch (narrow) {
  case DType::F16:
  case DType::BF16:
    return wide == DType::F32 || wide == DType::F64;
  case DType::F32:
    return wide == DType::F64;
  default:
    return false;
  }
}

static bool isCast(const Node &n) {
  llvm::StringRef op = n.opType, domain = n.domain;
  return op == "Cast" && (domain.empty() || domain == "ai.onnx") &&
         n.numInputs() == 1 && n.numOutputs() == 1 && n.input(0) && n.output(0);
}

static bool isConstantNode(const Node &n) {
  return llvm::StringRef(n.opType) == "Constant" && n.domain.empty();
}

/// The Cast and Constant nodes of every graph of `m`, outer graphs first and
/// each graph in node order: the only nodes the cleanups change or remove, so
/// one walk over the model serves both.
static std::vector<Node *> collectCandidates(Model &m) {
  std::vector<Node *> out;
  auto add = [&](Graph &g) {
    forEachGraph(g, [&](Graph &sub) {
      for (Node &n : sub.nodes())
        if (isCast(n) || isConstantNode(n))
          out.push_back(&n);
    });
  };
  add(*m.graph);
  for (TrainingInfo &ti : m.trainingInfo) {
    if (ti.initialization)
      add(*ti.initialization);
    if (ti.algorithm)
      add(*ti.algorithm);
  }
  return out;
}

/// Removes the unused nodes among `candidates` (see collectCandidates).
static unsigned eliminateDead(const std::vector<Node *> &candidates) {
  unsigned removed = 0;
  // Reverse order: users before producers, so chains die in one sweep.
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    Node *n = *it;
    bool used = false;
    for (Value *v : n->outputs())
      used |= v && (v->hasUses() || v->isGraphOutput());
    if (used)
      continue;
    n->getParent()->eraseNode(n);
    ++removed;
  }
  return removed;
}

static bool isBiasGrad(const Node &n) {
  return llvm::StringRef(n.opType) == "BiasGrad" &&
         llvm::StringRef(n.domain) == "ai.mpc.training" && n.numInputs() >= 1 &&
         n.numOutputs() == 1 && n.output(0);
}

/// The BiasGrad readers (operand 0, same graph, float32 result) of `cast`, a
/// Cast widening float16/bfloat16 to float32, read its input with `to` =
/// float32 instead. Returns how many.
static unsigned foldIntoBiasGrad(Node &cast) {
  Value *x = cast.input(0), *wide = cast.output(0);
  DType from = x->type.tensorElemType();
  if ((from != DType::F16 && from != DType::BF16) ||
      wide->type.tensorElemType() != DType::F32 || x->type.kind != wide->type.kind)
    return 0;
  llvm::SmallVector<Node *, 4> readers;
  for (const Use &u : wide->uses())
    if (u.operand == 0 && isBiasGrad(*u.user) && u.user->getParent() == cast.getParent() &&
        u.user->output(0)->type.tensorElemType() == DType::F32)
      readers.push_back(u.user);
  for (Node *bg : readers) {
    bg->setInput(0, x);
    bg->setAttr(Attribute::makeInt("to", int64_t(DType::F32)));
  }
  return unsigned(readers.size());
}

/// `cast`, a Cast to float32 that is the only reader of a BiasGrad's 16-bit
/// result, becomes that BiasGrad's `to` = float32: the fp32 sum is rounded
/// once into float32 instead of into 16 bits and widened (the result of
/// BiasGrad over dY widened first, bit for bit). Returns 1 when folded.
static unsigned foldBiasGradResult(Node &cast) {
  Value *r = cast.input(0), *wide = cast.output(0);
  Node *bg = r->producer();
  if (!bg || !isBiasGrad(*bg) || bg->getParent() != cast.getParent() || bg->attr("to") ||
      r->numUses() != 1 || r->isGraphOutput() || wide->isGraphOutput() ||
      wide->type.tensorElemType() != DType::F32 || r->type.kind != wide->type.kind)
    return 0;
  DType t = r->type.tensorElemType();
  Value *dy = bg->input(0);
  if ((t != DType::F16 && t != DType::BF16) || !dy || dy->type.tensorElemType() != t)
    return 0;
  bg->setAttr(Attribute::makeInt("to", int64_t(DType::F32)));
  r->type.setTensorElemType(DType::F32);
  Graph::replaceAllUsesWith(wide, r);
  return 1;
}

unsigned mpc::foldCasts(Model &m) {
  std::vector<Node *> candidates = collectCandidates(m);
  unsigned folded = 0;
  for (Node *n : candidates) {
    if (!isCast(*n))
      continue;
    Value *in = n->input(0), *out = n->output(0);
    DType from = in->type.tensorElemType(), to = out->type.tensorElemType();
    if (from == DType::Undefined || to == DType::Undefined)
      continue;
    // Cast(Cast(x, B), C) -> Cast(x, C) when B widens x's type.
    Node *p = in->producer();
    if (p && isCast(*p) && p->getParent() == n->getParent()) {
      Value *x = p->input(0);
      DType a = x->type.tensorElemType();
      if (a != DType::Undefined && widens(a, from)) {
        n->setInput(0, x);
        in = x;
        from = a;
        ++folded;
      }
    }
    if (from != to || in->type.kind != out->type.kind)
      continue;
    // A no-op cast forwards its input. When it names a graph output, its input
    // takes over the name if it is a plain result of the same graph.
    if (out->isGraphOutput()) {
      Graph &g = *n->getParent();
      if (in->kind() != ValueKind::NodeResult || in->graph() != &g || in->isGraphOutput() ||
          out->numGraphOutputRefs() != 1)
        continue;
      std::string name = out->name();
      Graph::renameValue(out, m.freshName(name + "/folded"));
      Graph::renameValue(in, name);
      for (unsigned i = 0; i < g.outputs().size(); ++i)
        if (g.outputs()[i] == out)
          g.setOutput(i, in);
      in->hasValueInfo = true;
    }
    Graph::replaceAllUsesWith(out, in);
    ++folded;
  }
  // After the chains above: a Cast(Cast(x16, f32)...) now reads x16 itself.
  for (Node *n : candidates)
    if (isCast(*n))
      folded += foldIntoBiasGrad(*n) + foldBiasGradResult(*n);
  // Folding rewires inputs but neither adds nor removes nodes, so the
  // candidates are still every Cast and Constant of the model.
  eliminateDead(candidates);
  return folded;
}

unsigned mpc::eliminateDeadCode(Model &m) { return eliminateDead(collectCandidates(m)); }
