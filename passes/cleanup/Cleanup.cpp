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
  // StringRef compares: this runs on every node, twice.
  llvm::StringRef op = n.opType, domain = n.domain;
  return op == "Cast" && (domain.empty() || domain == "ai.onnx") &&
         n.numInputs() == 1 && n.numOutputs() == 1 && n.input(0) && n.output(0);
}

static void collectNodes(Model &m, std::vector<Node *> &out) {
  auto add = [&](Graph &g) {
    forEachGraph(g, [&](Graph &sub) {
      for (Node &n : sub.nodes())
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
}

unsigned mpc::foldCasts(Model &m) {
  std::vector<Node *> nodes;
  collectNodes(m, nodes);
  unsigned folded = 0;
  for (Node *n : nodes) {
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
  eliminateDeadCode(m);
  return folded;
}

unsigned mpc::eliminateDeadCode(Model &m) {
  std::vector<Node *> nodes;
  collectNodes(m, nodes);
  unsigned removed = 0;
  // Reverse order: users before producers, so chains die in one sweep.
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node *n = *it;
    if (!isCast(*n) && !(llvm::StringRef(n->opType) == "Constant" && n->domain.empty()))
      continue;
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
