//===- MultiTensorOptimizer.cpp - Merge fused steps into one node ---------===//
//
// See mpc/Passes/MultiTensorOptimizer.h. The merged node is placed where the
// last step of its set was: every operand of the set is defined before it,
// and a set is only merged when no node before that place reads one of its
// outputs, so the graph stays in topological order.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/MultiTensorOptimizer.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"
#include <map>

using namespace mpc;

std::string MultiTensorOptimizerResult::summaryLine() const {
  return llvm::formatv("Multi-tensor optimizer: {0} fused step(s) merged into {1} node(s) "
                       "({2} left per-parameter)",
                       merged, nodes, kept)
      .str();
}

namespace {
/// What steps must share to be merged: the kind and every input after the
/// states (scalars, weight decay, skip; null where absent).
struct SetKey {
  const OptimizerStepLayout *layout;
  std::vector<const Value *> shared;
  bool operator<(const SetKey &o) const {
    if (layout != o.layout)
      return layout < o.layout;
    if (shared.size() != o.shared.size())
      return shared.size() < o.shared.size();
    for (size_t i = 0; i < shared.size(); ++i) {
      const Value *a = shared[i], *b = o.shared[i];
      if (a == b)
        continue;
      if (!a || !b) // an absent input sorts first
        return !a;
      return a->id() < b->id();
    }
    return false;
  }
};
} // namespace

static Value *inputOrNull(const Node &n, unsigned i) {
  return i < n.numInputs() ? n.input(i) : nullptr;
}

llvm::Error mpc::checkHasFusedOptimizerSteps(const Model &m) {
  if (m.trainingInfo.empty() || !m.trainingInfo[0].algorithm)
    return inputError("--multi-tensor-optimizer: not a training model");
  for (const Node &n : m.trainingInfo[0].algorithm->nodes())
    if (findOptimizerStep(n.opType, n.domain))
      return llvm::Error::success();
  return inputError("--multi-tensor-optimizer: the training step has no fused optimizer step "
                    "(SGDStep, MomentumStep, AdamStep) to merge; build it with "
                    "`mpc train-graph --fused-optimizer`");
}

llvm::Expected<MultiTensorOptimizerResult> mpc::mergeOptimizerSteps(Model &m) {
  MultiTensorOptimizerResult res;
  if (llvm::Error err = checkHasFusedOptimizerSteps(m))
    return std::move(err);
  Graph &alg = *m.trainingInfo[0].algorithm;

  // Plan: the sets, in the order of their first step, and node positions.
  llvm::DenseMap<const Node *, unsigned> position;
  std::map<SetKey, unsigned> setOf;
  std::vector<std::vector<Node *>> sets;
  unsigned steps = 0, pos = 0;
  for (Node &n : alg.nodes()) {
    position[&n] = pos++;
    const OptimizerStepLayout *l = findOptimizerStep(n.opType, n.domain);
    if (!l)
      continue;
    ++steps;
    bool hasCopy = n.numOutputs() > l->copyOutput() && n.output(l->copyOutput());
    bool whole = n.numInputs() >= l->minInputs() && n.numOutputs() >= l->numOutputs();
    for (unsigned i = 0; whole && i < l->firstScalar(); ++i)
      whole = n.input(i) != nullptr;
    for (unsigned o = 0; whole && o < l->numOutputs(); ++o)
      whole = n.output(o) != nullptr;
    if (hasCopy || !whole) {
      ++res.kept;
      continue;
    }
    SetKey key{l, {}};
    for (unsigned i = l->firstScalar(); i < l->maxInputs(); ++i)
      key.shared.push_back(inputOrNull(n, i));
    auto it = setOf.emplace(std::move(key), unsigned(sets.size())).first;
    if (it->second == sets.size())
      sets.emplace_back();
    sets[it->second].push_back(&n);
  }
  std::vector<std::vector<Node *>> todo;
  for (std::vector<Node *> &set : sets) {
    unsigned last = position[set.back()];
    bool readEarly = set.size() < 2;
    for (Node *n : set)
      for (Value *v : n->outputs()) {
        if (!v)
          continue;
        for (const Use &u : v->uses())
          readEarly |= u.user->getParent() == &alg && position[u.user] <= last;
      }
    if (readEarly)
      res.kept += unsigned(set.size());
    else
      todo.push_back(std::move(set));
  }
  if (todo.empty())
    return inputError("--multi-tensor-optimizer: no two of the {0} fused optimizer step(s) "
                      "share their kind, scalars, weight decay and skip flag without a weight "
                      "copy output",
                      steps);

  // Apply.
  for (std::vector<Node *> &set : todo) {
    const OptimizerStepLayout *l = findOptimizerStep(set[0]->opType, set[0]->domain);
    Node *last = set.back();
    Node *multi = alg.createNode(l->multiOpType, kOptimizerStepDomain, last->getIterator(), last);
    multi->name = m.freshName(std::string("update/") + l->multiOpType);
    multi->docString = "mpc --multi-tensor-optimizer";
    for (unsigned i = l->firstScalar(); i < l->maxInputs(); ++i)
      multi->addInput(inputOrNull(*set[0], i));
    std::string names;
    for (Node *n : set) {
      for (unsigned i = 0; i < l->firstScalar(); ++i)
        multi->addInput(n->input(i));
      for (unsigned o = 0; o < l->numOutputs(); ++o) {
        Value *old = n->output(o);
        std::string name = old->name().str();
        Graph::renameValue(old, m.freshName(name + "/PerParameter"));
        Value *now = multi->setOutput(multi->numOutputs(), name, old->type);
        now->hasValueInfo = old->hasValueInfo;
        Graph::replaceAllUsesWith(old, now);
        for (unsigned k = 0; k < alg.outputs().size(); ++k)
          if (alg.outputs()[k] == old)
            alg.setOutput(k, now);
      }
      names += (names.empty() ? "'" : ", '") + n->name.str() + "'";
    }
    res.log.push_back(llvm::formatv("Multi-tensor optimizer: '{0}' updates {1} parameter(s) "
                                    "({2})",
                                    multi->name, set.size(), names)
                          .str());
    for (Node *n : set)
      alg.eraseNode(n);
    res.merged += unsigned(set.size());
    ++res.nodes;
  }
  return res;
}
