//===- LowerGradient.cpp - Lower ai.onnx.preview.training::Gradient ---------===//
//
// Replaces each standard Gradient node of a training algorithm by the
// reverse-mode nodes computing it, with the same gradient rules as
// train-graph: the seed is dy/dy = 1 (broadcast to y's shape, so a tensor y
// is differentiated as its sum); outputs with no path to y become zeros.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/TrainGraph.h"
#include "TrainGraphImpl.h"
#include "mpc/Ops/TypeInference.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>

using namespace mpc;
using namespace mpc::train;

/// Finds a value visible in `alg` by name (its own values, then the main graph's).
static Value *lookupValue(Graph &alg, llvm::StringRef name) {
  for (Graph *g = &alg; g; g = g->parent())
    for (const auto &v : g->values())
      if (v->name() == name && (v->kind() != ValueKind::NodeResult || v->producer()))
        return v;
  return nullptr;
}

static llvm::Error lowerOne(Model &m, Graph &alg, Node &gradNode) {
  const Attribute *xsAttr = gradNode.attr("xs");
  llvm::StringRef yName = gradNode.stringAttr("y", "");
  if (!xsAttr || yName.empty())
    return inputError("{0}: Gradient needs its xs and y attributes", describeNode(gradNode));
  Value *y = lookupValue(alg, yName);
  if (!y || !y->producer() || y->producer()->getParent() != &alg)
    return inputError("{0}: y '{1}' is not computed by the algorithm graph",
                      describeNode(gradNode), yName);
  std::vector<Value *> xs;
  for (const std::string &n : xsAttr->strings) {
    Value *x = lookupValue(alg, n);
    if (!x || !isFloatTensor(x))
      return inputError("{0}: xs entry '{1}' is not a float tensor of the model",
                        describeNode(gradNode), n);
    xs.push_back(x);
  }
  // The forward nodes: those of the algorithm graph up to y's producer.
  std::vector<Node *> forward;
  for (Node &n : alg.nodes()) {
    if (&n == &gradNode)
      continue;
    forward.push_back(&n);
    if (&n == y->producer())
      break;
  }
  std::vector<const Value *> seeds(xs.begin(), xs.end());
  llvm::DenseSet<const Value *> needs = valuesDependingOn(forward, seeds);
  Emitter e(m, alg);
  std::string base = "lowered/" + (gradNode.name.empty() ? std::string("Gradient") : gradNode.name);
  DType t = y->type.elem;
  Value *one = e.scalar(1.0, t, base + "/seed");
  Value *seed = e.op("Expand", {one, e.shapeOf(y)}, t, base + "/seed_like_y");
  llvm::DenseMap<Value *, llvm::SmallVector<Value *, 2>> contrib;
  contrib[y].push_back(seed);
  auto sumOf = [&](Value *v) -> Value * {
    auto it = contrib.find(v);
    if (it == contrib.end() || it->second.empty())
      return nullptr;
    if (it->second.size() > 1) {
      std::vector<Value *> ins(it->second.begin(), it->second.end());
      it->second.assign(1, e.op("Sum", ins, v->type.elem, base + "/sum"));
    }
    return it->second[0];
  };
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Node *n = *it;
    std::vector<Value *> dOut;
    bool anyOut = false;
    for (Value *o : n->outputs()) {
      dOut.push_back(o ? sumOf(o) : nullptr);
      anyOut |= dOut.back() != nullptr;
    }
    GradRequest req{*n, dOut, {}, base + "/" + (n->name.empty() ? n->opType : n->name)};
    req.wantIn = inputsWantingGradients(*n, needs);
    bool anyIn = std::find(req.wantIn.begin(), req.wantIn.end(), true) != req.wantIn.end();
    if (!anyOut || !anyIn)
      continue;
    std::vector<Value *> dIn;
    llvm::Expected<bool> ok = emitGradient(e, req, dIn);
    if (!ok)
      return ok.takeError();
    if (!*ok)
      return inputError("lowering {0}: {1} has no gradient rule", describeNode(gradNode),
                        describeNode(*n));
    for (unsigned i = 0; i < dIn.size(); ++i)
      if (dIn[i])
        contrib[n->input(i)].push_back(dIn[i]);
  }
  for (unsigned i = 0; i < gradNode.numOutputs() && i < xs.size(); ++i) {
    Value *out = gradNode.output(i);
    if (!out)
      continue;
    Value *g = sumOf(xs[i]);
    if (!g) {
      Value *zero = e.scalar(0.0, xs[i]->type.elem, base + "/zero");
      g = e.op("Expand", {zero, e.shapeOf(xs[i])}, xs[i]->type.elem, base + "/no_path");
    }
    // Keep the output's name: bindings and outputs refer to it.
    g = e.op("Identity", {g}, xs[i]->type.elem, base + "/out");
    std::string name = out->name();
    Graph::replaceAllUsesWith(out, g);
    for (unsigned k = 0; k < alg.outputs().size(); ++k)
      if (alg.outputs()[k] == out)
        alg.setOutput(k, g);
    Graph::renameValue(out, m.freshName(name + ".replaced"));
    Graph::renameValue(g, name);
    g->type = out->type.isKnown() ? out->type : xs[i]->type;
  }
  gradNode.dropAllInputs();
  alg.eraseNode(&gradNode);
  if (!alg.sortTopologically())
    return inputError("lowering the Gradient ops made graph '{0}' cyclic", alg.name);
  return llvm::Error::success();
}

llvm::Expected<unsigned> mpc::lowerGradientOps(Model &m) {
  unsigned count = 0;
  inferTypes(m); // the rules need element types of intermediate values
  for (TrainingInfo &ti : m.trainingInfo) {
    if (!ti.algorithm)
      continue;
    for (;;) {
      Node *grad = nullptr;
      for (Node &n : ti.algorithm->nodes())
        if (n.opType == "Gradient" && n.domain == "ai.onnx.preview.training") {
          grad = &n;
          break;
        }
      if (!grad)
        break;
      if (llvm::Error err = lowerOne(m, *ti.algorithm, *grad))
        return std::move(err);
      ++count;
    }
  }
  if (count)
    importTrainingDomains(m);
  return count;
}
