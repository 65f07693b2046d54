//===- Cleanup.cpp - Cast folding and dead-cast elimination ----------------===//
//
// foldCasts: a Cast whose input already has the wanted type forwards its
// input; Cast(Cast(x, B), C) reads x directly when B represents every value of
// x's type exactly (low -> high -> low). high -> low -> high is never folded:
// it rounds. eliminateDeadCode removes unused Cast/Constant nodes and unused
// initializers, the debris of those folds; other dead nodes of the user's
// model are left alone.
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
  // Folding rewires inputs but neither adds nor removes nodes, so the
  // candidates are still every Cast and Constant of the model.
  eliminateDead(candidates);
  return folded;
}

unsigned mpc::eliminateDeadCode(Model &m) { return eliminateDead(collectCandidates(m)); }
