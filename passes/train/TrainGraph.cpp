//===- TrainGraph.cpp - Build an ONNX training model -----------------------===//
//
// Methodology: the algorithm graph is built in four straight-line stages.
//   1. forward: a copy of the inference graph (BatchNormalization in training
//      mode, LayerNormalization with its Mean/InvStdDev outputs);
//   2. loss: SoftmaxCrossEntropyLoss, Sub/Mul/ReduceMean, or a model output;
//   3. backward: reverse topological walk over the forward copy, visiting only
//      nodes that lie between the loss and a trainable parameter; gradients of
//      a value with several uses are summed with one Sum node;
//   4. optimizer: plain standard ops reading the inference-graph state.
// Then outputs, update_binding and metadata are written (docs/training.md).
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Passes/GemmEpilogues.h"
#include "TrainGraphImpl.h"
#include "mpc/IO/Onnx.h"
#include "mpc/IR/Limits.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Ops/ShapeEstimator.h"
#include "mpc/Ops/TypeInference.h"
#include "mpc/Support/Diagnostics.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Regex.h"
#include <algorithm>
#include <map>
#include <cmath>
#include <cstdlib>
#include <cstring>

using namespace mpc;
using namespace mpc::train;

std::string mpc::describeOptimizer(const TrainGraphOptions &o) {
  // The shortest %g text that reads back as the same float (0.001, not 0.00100000005).
  auto g = [](float v) {
    char buf[32];
    for (int prec = 1; prec <= 9; ++prec) {
      std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
      if (std::strtof(buf, nullptr) == v)
        break;
    }
    return std::string(buf);
  };
  switch (o.optimizer) {
  case OptimizerKind::Sgd:
    return "sgd lr=" + g(o.lr) + " weight_decay=" + g(o.weightDecay);
  case OptimizerKind::Momentum:
    return "momentum lr=" + g(o.lr) + " momentum=" + g(o.momentum) +
           " weight_decay=" + g(o.weightDecay);
  case OptimizerKind::Adam:
    return "adam lr=" + g(o.lr) + " beta1=" + g(o.beta1) + " beta2=" + g(o.beta2) +
           " epsilon=" + g(o.epsilon) + " weight_decay=" + g(o.weightDecay);
  }
  llvm_unreachable("unknown optimizer");
}

namespace {
/// The float initializer whose rows a `Gather` in `g` (or in a graph nested in it) reads, or
/// null: how torch.onnx.export writes nn.EmbeddingBag (a Loop over the bags whose body
/// gathers rows of the table).
const Value *gatheredTable(const Graph &g) {
  for (const Node &n : g.nodes()) {
    if (n.opType == "Gather" && n.domain.empty() && n.numInputs() > 0 && n.input(0) &&
        n.input(0)->initializer() && isFloatingPoint(n.input(0)->type.elem))
      return n.input(0);
    for (const Attribute &a : n.attrs)
      for (const auto &sub : a.graphs)
        if (const Value *v = gatheredTable(*sub))
          return v;
  }
  return nullptr;
}

/// State of one build.
class Builder {
public:
  Builder(Model &m, const TrainGraphOptions &opts, TrainGraphResult &res)
      : m(m), opts(opts), res(res) {}
  llvm::Error run();

private:
  Model &m;
  const TrainGraphOptions &opts;
  TrainGraphResult &res;
  Graph *alg = nullptr;
  std::unique_ptr<Emitter> e;
  std::string stepCounterName;

  std::vector<Value *> params; // trainable, initializer order
  llvm::DenseSet<const Value *> paramSet;
  std::vector<const Value *> floatInitializers;                 // the model's, in order
  llvm::DenseMap<const Value *, const char *> notTrainedWhy;    // docs/training.md reasons
  llvm::DenseMap<const Value *, Value *> copyOf;        // inference value -> algorithm copy
  llvm::DenseMap<const Value *, const Value *> origOf;  // algorithm copy -> inference value
  std::vector<Node *> forward;                          // the forward copy, in order
  struct BnStat {
    std::string name;        // the running statistic (an initializer)
    Value *next;             // its new value, an output of the forward BatchNormalization
    Node *bn;                // that node (algorithm graph)
    bool isVariance;
  };
  std::vector<BnStat> bnStats;
  Value *unbiasedVariance(const BnStat &s);

  Value *loss = nullptr, *seed = nullptr, *labels = nullptr;
  std::vector<Value *> predictions;
  std::vector<Node *> fp32Nodes;
  std::vector<std::pair<Value *, Value *>> grads; // param -> gradient

  llvm::DenseMap<Value *, llvm::SmallVector<Value *, 2>> contrib;
  llvm::DenseMap<const Value *, const Value *> reachedFrom; // gradient path, towards the loss

  llvm::Error checkInput();
  llvm::Error collectParameters();
  llvm::Error copyForward();
  llvm::Error buildLoss();
  llvm::Error buildBackward();
  llvm::Error buildOptimizer(std::vector<Value *> &outs,
                             std::vector<std::pair<std::string, std::string>> &binding);
  Value *sumOf(Value *v, const std::string &hint);
  std::string displayName(const Value *v) const {
    auto it = origOf.find(v);
    return it != origOf.end() ? it->second->name() : v->name();
  }
  std::string gradientPath(const Node &n) const;
  void markFp32Since(size_t first) {
    for (size_t i = first; i < e->created.size(); ++i)
      fp32Nodes.push_back(e->created[i]);
  }
};
} // namespace

// Why a float initializer is not trained (docs/training.md, "Parameters").
static const char *const kWhyRunningStat = "BatchNormalization running statistic";
static const char *const kWhyMask = "holds inf or NaN: a mask constant";
static const char *const kWhyFrozen = "--freeze";
static const char *const kWhyClipBound = "only a Clip bound";
static const char *const kWhyNoGradient = "no gradient reaches it from the loss";

static std::string shapeText(const Type &t) {
  return t.hasShape ? t.dimsText(",") : "unknown";
}

llvm::Error Builder::checkInput() {
  if (m.isTraining()) {
    for (const TrainingInfo &ti : m.trainingInfo)
      if (ti.algorithm)
        for (const Node &n : ti.algorithm->nodes())
          if (n.opType == "Gradient")
            return inputError("{0} ({1}) in the existing training algorithm: lowering the "
                              "standard Gradient op is not supported",
                              describeNode(n), n.domain.empty() ? "ai.onnx" : n.domain);
    return inputError("the model already has training_info; train-graph builds it from an "
                      "inference model");
  }
  int64_t opset = m.opsetVersion("");
  if (opset < 13)
    return inputError("train-graph needs the default ONNX opset 13 or newer (the model imports "
                      "{0})",
                      opset);
  return llvm::Error::success();
}

/// True when a float tensor in memory holds an infinite or NaN element.
static bool hasNonFinite(const Tensor &t) {
  if (t.isExternal())
    return false;
  for (int64_t i = 0, n = t.numElements(); i < n; ++i)
    if (!std::isfinite(t.getAsDouble(i)))
      return true;
  return false;
}

/// True when every use of `v` in the inference graph `g` is a Clip bound (a
/// use that takes no gradient).
static bool onlyClipBounds(const Value &v, const Graph *g) {
  bool any = false;
  for (const Use &u : v.uses()) {
    if (u.user->getParent() != g)
      continue;
    if (carriesGradient(*u.user, u.operand))
      return false;
    any = true;
  }
  return any;
}

llvm::Error Builder::collectParameters() {
  llvm::DenseSet<const Value *> runningStats;
  for (const Node &n : m.graph->nodes())
    if (n.opType == "BatchNormalization" && n.domain.empty())
      for (unsigned i = 3; i < 5 && i < n.numInputs(); ++i)
        if (n.input(i))
          runningStats.insert(n.input(i));
  llvm::Regex freeze(opts.freezeRegex);
  std::string why;
  if (!opts.freezeRegex.empty() && !freeze.isValid(why))
    return inputError("--freeze '{0}' is not a valid regular expression: {1}", opts.freezeRegex,
                      why);
  unsigned candidates = 0;
  for (Value *v : m.graph->initializers()) {
    if (!isFloatTensor(v))
      continue;
    floatInitializers.push_back(v);
    if (runningStats.count(v)) {
      notTrainedWhy[v] = kWhyRunningStat;
    } else if (hasNonFinite(*v->initializer())) {
      notTrainedWhy[v] = kWhyMask;
    } else {
      ++candidates;
      if (!opts.freezeRegex.empty() && freeze.match(v->name())) {
        notTrainedWhy[v] = kWhyFrozen;
        continue;
      }
      params.push_back(v);
      paramSet.insert(v);
    }
  }
  if (candidates == 0)
    return inputError(floatInitializers.empty()
                          ? "the model has no float initializers: nothing to train"
                          : "the model's float initializers are all masks (inf or NaN) or "
                            "BatchNormalization running statistics: nothing to train");
  if (params.empty())
    return inputError("--freeze '{0}' freezes all {1} parameters: nothing to train",
                      opts.freezeRegex, candidates);
  return llvm::Error::success();
}

llvm::Error Builder::copyForward() {
  unsigned dropouts = 0;
  std::string firstDropout;
  for (Value *in : m.graph->inputs()) {
    if (in->initializer())
      continue; // IR < 4 default: an initializer, read by name
    Value *c = alg->addInput(in->name(), in->type);
    copyOf[in] = c;
    origOf[c] = in;
  }
  for (const Node &n : m.graph->nodes()) {
    for (const Attribute &a : n.attrs) {
      if (a.graphs.empty())
        continue;
      const Value *table = gatheredTable(*a.graphs.front());
      return inputError(
          "{0}: ops with subgraphs are not supported by train-graph; {1}", describeNode(n),
          table ? "its body gathers rows of " + quoteName(table->name()) +
                      ", as nn.EmbeddingBag exports: use nn.Embedding and a sum or mean "
                      "over the bag axis (fixed-length bags, padding_idx for shorter ones)"
                : std::string("export the model without control flow"));
    }
    Node *c = alg->createNode(n.opType, n.domain);
    c->docString = n.docString;
    for (const Attribute &a : n.attrs)
      c->attrs.push_back(a.copyWithoutGraphs());
    for (Value *in : n.inputs()) {
      auto it = in ? copyOf.find(in) : copyOf.end();
      c->addInput(it != copyOf.end() ? it->second : in);
    }
    for (unsigned i = 0; i < n.numOutputs(); ++i) {
      Value *o = n.output(i);
      if (!o) {
        c->resizeOutputs(i + 1);
        continue;
      }
      Value *co = c->setOutput(i, m.freshName("fwd/" + o->name()), o->type);
      co->hasValueInfo = o->hasValueInfo;
      copyOf[o] = co;
      origOf[co] = o;
    }
    // Named after the values, so values keep the plain "fwd/<name>".
    c->name = m.freshName("fwd/" + (n.name.empty() ? n.opType : n.name));
    bool isDefault = n.domain.empty() || n.domain == "ai.onnx";
    if (isDefault && n.opType == "BatchNormalization") {
      c->setAttr(Attribute::makeInt("training_mode", 1));
      for (unsigned i = 1; i < 3; ++i) {
        Value *stat = n.numInputs() > i + 2 ? n.input(i + 2) : nullptr;
        if (c->numOutputs() > i && c->output(i))
          return inputError("{0}: BatchNormalization already in training mode (its running "
                            "statistics are outputs); export the model in eval mode "
                            "(model.eval() before torch.onnx.export): train-graph adds the "
                            "training-mode statistics itself",
                            describeNode(n));
        if (!stat)
          continue;
        // Never drop a statistic's update silently (docs/training.md).
        if (!stat->initializer())
          return inputError("{0}: its running {1} '{2}' is {3}, not an initializer, so "
                            "training could not update it",
                            describeNode(n), i == 1 ? "mean" : "variance", stat->name(),
                            stat->producer() ? "computed by " + describeNode(*stat->producer())
                                             : std::string("a graph input"));
        Value *o = c->setOutput(i, m.freshName("fwd/" + stat->name() + ".new"), stat->type);
        bnStats.push_back({stat->name(), o, c, i == 2});
      }
    }
    // The gradient rule refuses training mode; say that the step runs
    // without dropout (once, naming the first node).
    if (isDefault && n.opType == "Dropout" && ++dropouts == 1)
      firstDropout = describeNode(n);
    if (isDefault && n.opType == "LayerNormalization") {
      DType stash = static_cast<DType>(n.intAttr("stash_type", 1));
      for (unsigned i = 1; i < 3; ++i)
        if (c->numOutputs() <= i || !c->output(i))
          c->setOutput(i, m.freshName(c->name + (i == 1 ? "/Mean" : "/InvStdDev")),
                       Type::tensor(stash));
    }
    forward.push_back(c);
  }
  if (dropouts)
    res.notes.push_back(llvm::formatv("{0} Dropout node(s) ({1}{2}) in inference mode, the "
                                      "identity: the training step applies no dropout",
                                      dropouts, firstDropout, dropouts > 1 ? ", ..." : "")
                            .str());
  return llvm::Error::success();
}

llvm::Error Builder::buildLoss() {
  Graph &g = *m.graph;
  size_t first = e->created.size();
  auto outputNames = [&] {
    std::string s;
    for (Value *o : g.outputs())
      s += (s.empty() ? "" : ", ") + quoteName(o->name());
    return s;
  };
  if (g.outputs().empty())
    return inputError("the model has no outputs");

  if (opts.loss == LossKind::Output) {
    Value *out = nullptr;
    for (Value *o : g.outputs())
      if (o->name() == opts.lossOutput)
        out = o;
    if (!out)
      return inputError("--loss '{0}': the model has no output of that name (outputs: {1})",
                        opts.lossOutput, outputNames());
    if (!isFloatTensor(out))
      return inputError("--loss '{0}': the loss output must be a float tensor, not {1}",
                        opts.lossOutput, dtypeName(out->type.tensorElemType()));
    if (out->type.hasShape && !out->type.dims.empty())
      return inputError("--loss '{0}': the loss output must be a scalar, its shape is {1}",
                        opts.lossOutput, shapeText(out->type));
    auto it = copyOf.find(out);
    loss = it != copyOf.end() ? it->second : nullptr;
    if (!loss || !loss->producer())
      return inputError("--loss '{0}': the loss output is not computed by the model",
                        opts.lossOutput);
    predictions.push_back(loss);
  } else {
    Value *predOrig = g.outputs()[0];
    Value *pred = copyOf.lookup(predOrig);
    if (!pred || !isFloatTensor(pred))
      return inputError("prediction '{0}' must be a float tensor computed by the model",
                        predOrig->name());
    bool ce = opts.loss == LossKind::CrossEntropy;
    Value *scores = pred; // what the loss reads: pred with the classes on axis 1
    if (ce) {
      Node *p = pred->producer();
      int r = pred->type.hasShape ? static_cast<int>(pred->type.dims.size()) : -1;
      int classAxis = opts.classAxis;
      if (p && p->opType == "Softmax" && p->domain.empty()) {
        int64_t axis = p->intAttr("axis", -1);
        if (axis == -1 || (r >= 0 && axis == r - 1)) {
          res.notes.push_back("cross-entropy: output " + quoteName(predOrig->name()) +
                              " is a Softmax over the last axis; its input " +
                              quoteName(displayName(p->input(0))) + " is taken as the logits");
          pred = p->input(0);
          if (!pred || !isFloatTensor(pred)) {
            DType t = pred ? pred->type.tensorElemType() : DType::Undefined;
            return inputError("cross-entropy: output '{0}' is a Softmax of '{1}', whose type is "
                              "{2}: the logits must be a float tensor",
                              predOrig->name(), pred ? displayName(pred) : "",
                              t == DType::Undefined ? "unknown" : dtypeName(t));
          }
          // The logits' own rank from here on; a declared output shape that
          // disagrees with them is the model's error, not a rank to index by.
          int inRank = pred->type.hasShape ? static_cast<int>(pred->type.dims.size()) : -1;
          if (r >= 0 && inRank >= 0 && inRank != r)
            return inputError("cross-entropy: output '{0}' is declared with rank {1}, but its "
                              "Softmax's input '{2}' has rank {3}",
                              predOrig->name(), r, displayName(pred), inRank);
          if (inRank >= 0)
            r = inRank;
          if (r < 0 && opts.classAxis == 0)
            return inputError("cross-entropy: output '{0}' is a Softmax over its last axis and "
                              "its rank is unknown, so the class axis is too: declare its shape, "
                              "or give --class-axis 1 if the classes are on axis 1",
                              predOrig->name());
          if (classAxis == 1 && r > 2)
            return inputError("--class-axis 1: output '{0}' is a Softmax over its last axis, "
                              "so its classes are on the last axis",
                              predOrig->name());
          classAxis = -1;
        }
      }
      if (pred->type.hasShape && pred->type.dims.size() < 2)
        return inputError("cross-entropy: logits '{0}' must have shape [N, C, ...], not {1}",
                          displayName(pred), shapeText(pred->type));
      scores = pred;
      if (classAxis == -1 && r < 0 && opts.classAxis == -1)
        return inputError("--class-axis -1: logits '{0}' need a known rank to take the classes "
                          "from the last axis",
                          displayName(pred));
      if (classAxis == -1 && r > 2) {
        // [N, d1.., C] -> [N, C, d1..]: SoftmaxCrossEntropyLoss's layout.
        std::vector<int64_t> perm = {0, r - 1};
        for (int i = 1; i < r - 1; ++i)
          perm.push_back(i);
        scores = e->op("Transpose", {pred}, pred->type.elem, "loss/classes_to_axis1");
        scores->producer()->setAttr(Attribute::makeInts("perm", perm));
        if (pred->type.hasShape && pred->type.dims.size() == size_t(r)) {
          scores->type.hasShape = true;
          for (int64_t a : perm)
            scores->type.dims.push_back(pred->type.dims[size_t(a)]);
        }
      }
    }
    predictions.push_back(pred);
    // The labels input: new, or an existing data input of the right type.
    Type want = ce ? Type::tensor(DType::I64) : pred->type;
    if (ce && scores->type.hasShape) {
      want.hasShape = true;
      want.dims = {scores->type.dims[0]};
      for (size_t i = 2; i < scores->type.dims.size(); ++i)
        want.dims.push_back(scores->type.dims[i]);
    }
    for (Value *in : alg->inputs())
      if (in->name() == opts.labels)
        labels = in;
    if (labels) {
      DType t = labels->type.tensorElemType();
      bool ok = ce ? (t == DType::I64 || t == DType::I32) : t == pred->type.elem;
      if (!ok)
        return inputError("labels input '{0}' is {1}, but {2} needs {3} labels", opts.labels,
                          dtypeName(t), ce ? "cross-entropy" : "mse",
                          ce ? "int64 (or int32) class-index" : dtypeName(pred->type.elem));
    } else {
      if (m.isNameTaken(opts.labels))
        return inputError("labels input '{0}': the model already has a value of that name that "
                          "is not a graph input (choose another --labels)",
                          opts.labels);
      labels = alg->addInput(opts.labels, want);
    }
    DType ft = pred->type.elem;
    if (ce) {
      Node *sce = e->node("SoftmaxCrossEntropyLoss", "", {scores, labels}, {ft, ft}, "loss/sce");
      sce->setAttr(Attribute::makeString("reduction", "mean"));
      loss = sce->output(0);
    } else {
      Value *d = e->op("Sub", {pred, labels}, ft, "loss/diff");
      Value *sq = e->op("Mul", {d, d}, ft, "loss/sq");
      Node *rm = e->node("ReduceMean", "", {sq}, {ft}, "loss/mse");
      rm->setAttr(Attribute::makeInt("keepdims", 0));
      loss = rm->output(0);
    }
    loss->type.hasShape = true;
    loss->type.dims.clear();
  }
  seed = e->scalar(1.0, loss->type.elem, "loss_grad_seed");
  // --loss-weight w: the loss is w * L, and dLoss/dL = w seeds the loss gradient.
  Value *rawLoss = loss, *dRaw = seed;
  if (opts.lossWeight != 1.0) {
    Value *w = e->scalar(opts.lossWeight, loss->type.elem, "loss/weight");
    loss = e->op("Mul", {rawLoss, w}, loss->type.elem, "loss/weighted");
    loss->type.hasShape = true;
    loss->type.dims.clear();
    dRaw = e->op("Mul", {seed, w}, loss->type.elem, "loss/weighted_grad");
  }
  if (opts.loss == LossKind::CrossEntropy) {
    Node *sce = rawLoss->producer();
    Node *gn = e->node("SoftmaxCrossEntropyLossGrad", kTrainingDomain,
                       {dRaw, sce->output(1), labels}, {loss->type.elem}, "loss/sce_grad");
    gn->setAttr(Attribute::makeString("reduction", "mean"));
    Value *g = gn->output(0);
    if (Node *t = sce->input(0)->producer(); t && sce->input(0) != predictions[0]) {
      // Back from [N, C, d1..] to the logits' [N, d1.., C].
      std::vector<int64_t> perm = t->attr("perm")->ints, inv(perm.size());
      for (size_t i = 0; i < perm.size(); ++i)
        inv[size_t(perm[i])] = int64_t(i);
      g = e->op("Transpose", {g}, loss->type.elem, "loss/sce_grad_classes_back");
      g->producer()->setAttr(Attribute::makeInts("perm", inv));
    }
    contrib[predictions[0]].push_back(g);
    reachedFrom[predictions[0]] = loss;
  } else if (opts.loss == LossKind::Mse) {
    Value *gv = e->op("MSELossGrad", {dRaw, predictions[0], labels}, loss->type.elem,
                      "loss/mse_grad", kTrainingDomain);
    gv->producer()->setAttr(Attribute::makeString("reduction", "mean"));
    contrib[predictions[0]].push_back(gv);
    reachedFrom[predictions[0]] = loss;
  } else {
    contrib[rawLoss].push_back(dRaw);
  }
  markFp32Since(first);
  return llvm::Error::success();
}

Value *Builder::sumOf(Value *v, const std::string &hint) {
  auto it = contrib.find(v);
  if (it == contrib.end() || it->second.empty())
    return nullptr;
  llvm::SmallVector<Value *, 2> &parts = it->second;
  if (parts.size() == 1)
    return parts[0];
  std::vector<Value *> ins(parts.begin(), parts.end());
  Value *s = e->op("Sum", ins, v->type.tensorElemType(), hint);
  parts.assign(1, s);
  return s;
}

std::string Builder::gradientPath(const Node &n) const {
  std::string path;
  const Value *v = nullptr;
  for (Value *o : n.outputs())
    if (o && reachedFrom.count(o)) {
      v = o;
      break;
    }
  if (!v)
    for (Value *o : n.outputs())
      if (o && contrib.count(o))
        v = o;
  unsigned guard = 0;
  for (; v && guard < 10000; ++guard) {
    if (!path.empty())
      path = " <- " + path;
    path = quoteName(displayName(v)) + path;
    auto it = reachedFrom.find(v);
    v = it == reachedFrom.end() ? nullptr : it->second;
  }
  return path;
}

llvm::Error Builder::buildBackward() {
  // Values that depend on a trainable parameter (forward order).
  std::vector<const Value *> seeds(paramSet.begin(), paramSet.end());
  llvm::DenseSet<const Value *> needs = valuesDependingOn(forward, seeds);
  // GELU in the erf form exporters write before opset 20 (five nodes over
  // the activation): differentiated as one GeluGrad(dY, x), the derivative
  // of the whole chain, instead of each node's gradient in turn (some eight
  // element-wise passes over the largest tensors of a transformer's step).
  // Not where a constant of the chain is trained (its gradient is asked
  // for). Matched before any backward node reads x.
  llvm::DenseMap<const Node *, ErfGeluMatch> geluChains;
  for (Node *n : forward)
    for (Value *x : n->outputs()) {
      ErfGeluMatch m;
      if (x && !e->plain && needs.count(x) && matchErfGelu(x, m) &&
          llvm::none_of(m.constants, [&](const Value *c) { return paramSet.count(c) > 0; }))
        geluChains[m.result->producer()] = std::move(m);
    }
  unsigned geluShortcuts = 0;
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Node *n = *it;
    if (auto g = geluChains.find(n); g != geluChains.end()) {
      const ErfGeluMatch &m = g->second;
      Value *dy = sumOf(m.result, "grad/sum/" + displayName(m.result));
      if (!dy)
        continue;
      Node *grad = e->node("GeluGrad", kTrainingDomain, {dy, m.x},
                           {m.x->type.tensorElemType()}, "grad/" + displayName(m.result) + "/gelu");
      grad->setAttr(Attribute::makeString("approximate", "none"));
      contrib[m.x].push_back(grad->output(0));
      reachedFrom.try_emplace(m.x, m.result);
      ++geluShortcuts;
      continue; // the chain's other nodes get no gradient: none flows to them
    }
    std::vector<Value *> dOut;
    bool anyOut = false;
    for (unsigned i = 0; i < n->numOutputs(); ++i) {
      Value *o = n->output(i);
      Value *d = o ? sumOf(o, "grad/sum/" + displayName(o)) : nullptr;
      dOut.push_back(d);
      anyOut |= d != nullptr;
    }
    Value *named = loss;
    for (Value *o : n->outputs())
      if (o) {
        named = o;
        break;
      }
    GradRequest req{*n, dOut, {}, "grad/" + displayName(named)};
    req.wantIn = inputsWantingGradients(*n, needs);
    bool anyIn = std::find(req.wantIn.begin(), req.wantIn.end(), true) != req.wantIn.end();
    if (!anyOut || !anyIn)
      continue;
    std::vector<Value *> dIn;
    llvm::Expected<bool> ok = emitGradient(*e, req, dIn);
    std::string orig = n->name.substr(std::strlen("fwd/"));
    if (!ok) {
      // The rule names the forward copy: name the model's node, and the path.
      std::string msg = llvm::toString(ok.takeError()), copy = describeNode(*n);
      if (llvm::StringRef(msg).startswith(copy))
        msg = describeNode(orig, n->order(), n->qualifiedOpType()) + msg.substr(copy.size());
      return inputError("{0}; the gradient reaches it from the loss through {1}", msg,
                        gradientPath(*n));
    }
    if (!*ok)
      return inputError("node '{0}' ({1}) has no gradient rule; the gradient reaches it from "
                        "the loss through {2}",
                        orig, n->qualifiedOpType(), gradientPath(*n));
    Value *from = nullptr;
    for (unsigned i = 0; i < n->numOutputs() && !from; ++i)
      if (dOut[i])
        from = n->output(i);
    for (unsigned i = 0; i < dIn.size(); ++i) {
      if (!dIn[i])
        continue;
      Value *in = n->input(i);
      contrib[in].push_back(dIn[i]);
      reachedFrom.try_emplace(in, from);
    }
  }
  if (geluShortcuts)
    res.notes.push_back(llvm::formatv("GELU in erf form: {0} chain(s) (Div, Erf, Add, Mul, Mul) "
                                      "differentiated as one GeluGrad each",
                                      geluShortcuts)
                            .str());
  for (Value *p : params) {
    Value *g = sumOf(p, "grad/sum/" + p->name());
    if (!g) {
      notTrainedWhy[p] = onlyClipBounds(*p, m.graph.get()) ? kWhyClipBound : kWhyNoGradient;
      continue;
    }
    grads.emplace_back(p, g);
  }
  for (const Value *v : floatInitializers) {
    auto it = notTrainedWhy.find(v);
    if (it == notTrainedWhy.end())
      res.trained.push_back(v->name());
    else
      res.notTrained.emplace_back(v->name(), it->second);
  }
  if (grads.empty())
    return inputError("no trainable parameter receives a gradient from the loss '{0}'",
                      displayName(loss));
  return llvm::Error::success();
}

/// A zero initializer shaped like `like` for optimizer state.
static Tensor zerosLike(const Tensor &like) {
  Tensor t(like.dtype, like.dims);
  t.setBytes(std::vector<uint8_t>(t.byteSize(), 0));
  return t;
}

llvm::Error Builder::buildOptimizer(std::vector<Value *> &outs,
                                    std::vector<std::pair<std::string, std::string>> &binding) {
  if (opts.fusedOptimizer)
    for (auto &[p, grad] : grads)
      if (p->type.elem != DType::F32 && p->type.elem != DType::F64)
        return inputError("--fused-optimizer: parameter '{0}' is {1}; the fused optimizer "
                          "steps take float and double parameters",
                          p->name(), dtypeName(p->type.elem));
  size_t first = e->created.size();
  Graph &g = *m.graph;
  // The step counter: an int64 scalar, incremented by every step.
  Tensor zero(DType::I64, {});
  zero.setBytes(std::vector<uint8_t>(8, 0));
  Value *step = g.addInitializer(m.freshName("mpc.step"), std::move(zero));
  step->hasValueInfo = false;
  Value *stepNext = e->op("Add", {step, e->scalar(1, DType::I64, "opt/one")}, DType::I64,
                          "opt/step_next");
  stepNext->type.hasShape = true;

  // Constants and bias corrections, one per element type.
  struct PerType {
    DType t;
    Value *lr = nullptr, *wd = nullptr, *mu = nullptr, *b1 = nullptr, *b2 = nullptr,
          *omb1 = nullptr, *omb2 = nullptr, *eps = nullptr, *bc1 = nullptr, *bc2 = nullptr;
  };
  std::vector<PerType> perType;
  auto consts = [&](DType t) -> PerType & {
    for (PerType &p : perType)
      if (p.t == t)
        return p;
    PerType p;
    p.t = t;
    std::string s = std::string("opt/") + dtypeName(t).str() + "/";
    p.lr = e->scalar(opts.lr, t, s + "lr");
    if (opts.weightDecay != 0)
      p.wd = e->scalar(opts.weightDecay, t, s + "weight_decay");
    if (opts.optimizer == OptimizerKind::Momentum)
      p.mu = e->scalar(opts.momentum, t, s + "momentum");
    if (opts.optimizer == OptimizerKind::Adam) {
      p.b1 = e->scalar(opts.beta1, t, s + "beta1");
      p.b2 = e->scalar(opts.beta2, t, s + "beta2");
      p.omb1 = e->scalar(1.0 - static_cast<double>(opts.beta1), t, s + "one_minus_beta1");
      p.omb2 = e->scalar(1.0 - static_cast<double>(opts.beta2), t, s + "one_minus_beta2");
      p.eps = e->scalar(opts.epsilon, t, s + "epsilon");
      Value *one = e->scalar(1.0, t, s + "one");
      Value *tf = e->op("Cast", {stepNext}, t, s + "step");
      tf->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(t)));
      p.bc1 = e->op("Sub", {one, e->op("Pow", {p.b1, tf}, t, s + "beta1_pow")}, t,
                    s + "bias_correction1");
      p.bc2 = e->op("Sub", {one, e->op("Pow", {p.b2, tf}, t, s + "beta2_pow")}, t,
                    s + "bias_correction2");
    }
    perType.push_back(p);
    return perType.back();
  };

  auto addState = [&](Value *param, llvm::StringRef suffix) {
    Value *v = g.addInitializer(m.freshName(param->name() + suffix),
                                zerosLike(*param->initializer()));
    v->hasValueInfo = false;
    return v;
  };
  // --fused-optimizer: one SGDStep/MomentumStep/AdamStep node reading the
  // same scalars as the primitive update (mpc/Ops/OptimizerStep.h's order).
  auto fusedStep = [&](Value *p, Value *grad, const PerType &c) {
    const OptimizerStepLayout &l = optimizerStepLayouts()[size_t(opts.optimizer)];
    std::vector<Value *> ins{p, grad};
    std::vector<Value *> states;
    for (const char *st : l.states) { // the primitive update's state names
      std::string suffix = opts.optimizer == OptimizerKind::Momentum
                               ? std::string(".momentum")
                               : ".adam_" + std::string(st);
      states.push_back(addState(p, suffix));
    }
    ins.insert(ins.end(), states.begin(), states.end());
    if (opts.optimizer == OptimizerKind::Adam)
      ins.insert(ins.end(), {c.lr, c.b1, c.b2, c.omb1, c.omb2, c.eps, c.bc1, c.bc2});
    else if (opts.optimizer == OptimizerKind::Momentum)
      ins.insert(ins.end(), {c.lr, c.mu});
    else
      ins.push_back(c.lr);
    if (c.wd)
      ins.push_back(c.wd);
    std::vector<DType> outTypes(l.numOutputs(), p->type.elem);
    Node *n = e->node(l.opType, kOptimizerStepDomain, ins, outTypes, "update/" + p->name());
    for (unsigned i = 0; i < l.numOutputs(); ++i) {
      Value *init = i == 0 ? p : states[i - 1];
      Value *nv = n->output(i);
      if (i > 0)
        Graph::renameValue(nv, m.freshName("update/" + init->name()));
      nv->type = init->type;
      outs.push_back(nv);
      binding.emplace_back(init->name(), nv->name());
    }
  };
  for (auto &[p, grad] : grads) {
    DType t = p->type.elem;
    PerType &c = consts(t);
    std::string s = "opt/" + p->name() + "/";
    if (opts.fusedOptimizer) {
      fusedStep(p, grad, c);
      continue;
    }
    Value *gr = grad;
    if (c.wd)
      gr = e->op("Add", {gr, e->op("Mul", {c.wd, p}, t, s + "decay")}, t, s + "grad_decayed");
    Value *delta = gr;
    std::vector<std::pair<Value *, Value *>> state; // initializer -> new value
    if (opts.optimizer == OptimizerKind::Momentum) {
      Value *v = addState(p, ".momentum");
      Value *v2 = e->op("Add", {e->op("Mul", {c.mu, v}, t, s + "v_decay"), gr}, t,
                        "update/" + v->name());
      state.emplace_back(v, v2);
      delta = v2;
    } else if (opts.optimizer == OptimizerKind::Adam) {
      Value *mv = addState(p, ".adam_m");
      Value *vv = addState(p, ".adam_v");
      Value *m2 = e->op("Add",
                        {e->op("Mul", {c.b1, mv}, t, s + "m_decay"),
                         e->op("Mul", {c.omb1, gr}, t, s + "m_grad")},
                        t, "update/" + mv->name());
      Value *g2 = e->op("Mul", {gr, gr}, t, s + "grad_sq");
      Value *v2 = e->op("Add",
                        {e->op("Mul", {c.b2, vv}, t, s + "v_decay"),
                         e->op("Mul", {c.omb2, g2}, t, s + "v_grad")},
                        t, "update/" + vv->name());
      state.emplace_back(mv, m2);
      state.emplace_back(vv, v2);
      Value *mhat = e->op("Div", {m2, c.bc1}, t, s + "m_hat");
      Value *vhat = e->op("Div", {v2, c.bc2}, t, s + "v_hat");
      Value *den = e->op("Add", {e->op("Sqrt", {vhat}, t, s + "v_sqrt"), c.eps}, t, s + "denom");
      delta = e->op("Div", {mhat, den}, t, s + "direction");
    }
    Value *np = e->op("Sub", {p, e->op("Mul", {c.lr, delta}, t, s + "step")}, t,
                      "update/" + p->name());
    np->type = p->type;
    outs.push_back(np);
    binding.emplace_back(p->name(), np->name());
    for (auto &[init, nv] : state) {
      nv->type = init->type;
      outs.push_back(nv);
      binding.emplace_back(init->name(), nv->name());
    }
  }
  for (const BnStat &st : bnStats) {
    Value *v = st.isVariance && opts.bnUnbiasedVariance ? unbiasedVariance(st) : st.next;
    outs.push_back(v);
    binding.emplace_back(st.name, v->name());
  }
  outs.push_back(stepNext);
  binding.emplace_back(step->name(), stepNext->name());
  markFp32Since(first);
  res.numParameters = static_cast<unsigned>(grads.size());
  stepCounterName = step->name();
  return llvm::Error::success();
}

/// PyTorch's running variance from ONNX's: with momentum m, old value v and
/// n values per channel, ONNX gives b = m*v + (1-m)*var and PyTorch
/// u = m*v + (1-m)*var*n/(n-1), so u = b + (b - m*v)/(n-1). n is read from
/// X at run time (Size(X) / channels); n = 1 adds nothing (docs/training.md).
Value *Builder::unbiasedVariance(const BnStat &st) {
  Node &bn = *st.bn;
  Value *x = bn.input(0), *old = bn.input(4), *b = st.next;
  DType t = b->type.elem;
  std::string h = "update/" + st.name + "/unbiased/";
  Value *size = e->op("Size", {x}, DType::I64, h + "size");
  Value *channels = e->op("Gather", {e->shapeOf(x), e->ints({1}, h + "channel_axis")},
                          DType::I64, h + "channels");
  Value *n = e->op("Div", {size, channels}, DType::I64, h + "count");
  Value *nm1 = e->op("Sub", {n, e->scalar(1, DType::I64, h + "one")}, DType::I64, h + "dof");
  nm1 = e->op("Max", {nm1, e->scalar(1, DType::I64, h + "one_dof")}, DType::I64,
              h + "dof_at_least_1");
  Value *nm1f = e->op("Cast", {nm1}, t, h + "dof_f");
  nm1f->producer()->setAttr(Attribute::makeInt("to", static_cast<int64_t>(t)));
  Value *kept = e->op("Mul", {old, e->scalar(bn.floatAttr("momentum", 0.9f), t, h + "momentum")},
                      t, h + "kept");
  Value *added = e->op("Sub", {b, kept}, t, h + "added");
  Value *extra = e->op("Div", {added, nm1f}, t, h + "correction");
  Value *u = e->op("Add", {b, extra}, t, "update/" + st.name);
  u->type = b->type;
  return u;
}

static const char *lossKindName(LossKind k) {
  switch (k) {
  case LossKind::CrossEntropy:
    return "cross-entropy";
  case LossKind::Mse:
    return "mse";
  case LossKind::Output:
    return "output";
  }
  llvm_unreachable("unknown loss kind");
}

/// Fills in, from mpc's shape estimator, the ranks and dimensions that ONNX's
/// inference left unknown (libonnx 1.12 loses the rank after a Slice with
/// computed bounds or a Reshape to a Concat-built shape). The estimator runs
/// twice, each symbolic dimension standing for a different large value in
/// each run: a dimension equal in both runs is known, one equal to a
/// symbol's stand-ins is that symbol, any other (N*T, ...) stays unknown.
static void estimateShapes(Model &m) {
  std::vector<std::string> symbols = ShapeEstimator(m).assumedSymbols();
  auto standIn = [&](llvm::StringRef name, int64_t base) {
    auto it = std::lower_bound(symbols.begin(), symbols.end(), name);
    return base + 2 * static_cast<int64_t>(it - symbols.begin());
  };
  const int64_t baseA = 1000003, baseB = 3000017;
  ShapeEstimator a(m, [&](llvm::StringRef s) { return standIn(s, baseA); });
  ShapeEstimator b(m, [&](llvm::StringRef s) { return standIn(s, baseB); });
  auto symbolOf = [&](int64_t da, int64_t db) -> const std::string * {
    for (const std::string &s : symbols)
      if (da == standIn(s, baseA) && db == standIn(s, baseB))
        return &s;
    return nullptr;
  };
  for (Value *v : m.graph->values()) {
    if (!v->type.isTensor())
      continue;
    const ShapeInfo &sa = a.shape(v), &sb = b.shape(v);
    if (!sa.rankKnown || !sb.rankKnown || sa.rank() != sb.rank())
      continue;
    Type &t = v->type;
    if (t.hasShape && t.dims.size() != sa.rank())
      continue;
    if (!t.hasShape) {
      t.hasShape = true;
      t.dims.assign(sa.rank(), Dim{});
    }
    for (unsigned i = 0; i < sa.rank(); ++i) {
      if (t.dims[i].isKnown() || t.dims[i].isSymbolic())
        continue;
      if (sa.dims[i] == sb.dims[i] && sa.dims[i] >= 0)
        t.dims[i] = Dim::known(sa.dims[i]);
      else if (const std::string *s = symbolOf(sa.dims[i], sb.dims[i]))
        t.dims[i] = Dim::symbolic(*s);
    }
  }
}

/// The symbolic dimension names the model itself declares (graph inputs,
/// outputs, value_info): ONNX's inference invents others ("unk__4") for
/// dimensions it cannot name, each standing for a fresh unknown size.
static llvm::StringSet<> declaredSymbols(const Model &m) {
  llvm::StringSet<> names;
  for (const Value *v : m.graph->values())
    if (v->type.isTensor() && v->type.hasShape)
      for (const Dim &d : v->type.dims)
        if (d.isSymbolic())
          names.insert(d.param.str());
  return names;
}

/// True when every node of `g` (nested graphs included) that libonnx has a
/// schema for passes that schema's own check (inputs, outputs, required
/// attributes and their types). libonnx's inference functions assume it: a
/// Scan without its body crashes ScanInferenceFunction. `why` gets the first
/// failure.
static bool schemasAccept(const onnx::GraphProto &g,
                          const std::map<std::string, int> &opsets, std::string &why,
                          int depth = 0) {
  if (depth > kMaxGraphDepth)
    return false;
  for (const onnx::NodeProto &n : g.node()) {
    auto it = opsets.find(n.domain() == "ai.onnx" ? "" : n.domain());
    const onnx::OpSchema *schema =
        it == opsets.end()
            ? nullptr
            : onnx::OpSchemaRegistry::Schema(n.op_type(), it->second, it->first);
    if (schema) {
      try {
        schema->Verify(n);
      } catch (const std::bad_alloc &) {
        throw; // out of memory is not a verdict on the model (main reports it)
      } catch (const std::exception &ex) {
        why = ex.what();
        return false;
      }
    }
    for (const onnx::AttributeProto &a : n.attribute()) {
      if (a.has_g() && !schemasAccept(a.g(), opsets, why, depth + 1))
        return false;
      for (const onnx::GraphProto &sub : a.graphs())
        if (!schemasAccept(sub, opsets, why, depth + 1))
          return false;
    }
  }
  return true;
}

/// Fills in the types and shapes of inference-graph values the file did not
/// record with ONNX's own shape inference; with `hints`, the shapes already
/// known in memory go to ONNX as value_info (a later round, after mpc's
/// estimator filled in what ONNX lost). Values with a shape keep it. Returns
/// how many dimensions ONNX named itself; what failed goes to `details`.
static unsigned inferShapesWithOnnx(Model &m, const llvm::StringSet<> &declared, bool hints,
                                    std::vector<std::string> &details) {
  onnx::ModelProto proto;
  std::vector<Value *> hinted;
  if (hints)
    for (Value *v : m.graph->values())
      if (!v->hasValueInfo && v->type.isTensor() && v->type.hasShape && v->producer()) {
        v->hasValueInfo = true;
        hinted.push_back(v);
      }
  llvm::Error exported = exportOnnx(m, proto);
  for (Value *v : hinted)
    v->hasValueInfo = false;
  if (exported) {
    details.push_back("shape inference: ONNX's inference not run (the model does not export: " +
                      llvm::toString(std::move(exported)) + ")");
    return 0;
  }
  std::map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto &o : proto.opset_import())
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  if (std::string why; !schemasAccept(proto.graph(), opsets, why)) {
    details.push_back("shape inference: ONNX's inference not run (a node fails its schema: " +
                      oneLine(why) + "); mpc's estimator alone fills in shapes");
    return 0;
  }
  try {
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance());
  } catch (const std::bad_alloc &) {
    throw; // out of memory is not a verdict on the model (main reports it)
  } catch (const std::exception &ex) {
    // mpc's estimator still runs on the types known so far.
    details.push_back(std::string("shape inference: ONNX's inference stopped (") + ex.what() +
                      "); mpc's estimator alone fills in shapes");
    return 0;
  }
  llvm::StringMap<const onnx::TypeProto *> inferred;
  for (const auto &vi : proto.graph().value_info())
    inferred[vi.name()] = &vi.type();
  for (const auto &vi : proto.graph().output())
    inferred[vi.name()] = &vi.type();
  // A symbol ONNX invented is an unknown size: taken as a symbol it would
  // name a dimension of its own, distinct from every declared one, and the
  // estimator would find the batch axes of a Concat's inputs unequal.
  unsigned invented = 0;
  for (const auto &uv : m.graph->values()) {
    Value *v = uv;
    if (v->type.isTensor() && v->type.hasShape)
      continue;
    auto it = inferred.find(v->name());
    if (it == inferred.end() || !it->second->has_tensor_type())
      continue;
    const auto &tt = it->second->tensor_type();
    Type t = Type::tensor(tt.elem_type() ? static_cast<DType>(tt.elem_type()) : v->type.elem);
    if (tt.has_shape()) {
      t.hasShape = true;
      for (const auto &d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          t.dims.push_back(Dim::known(d.dim_value()));
        } else if (d.has_dim_param() && declared.count(d.dim_param())) {
          t.dims.push_back(Dim::symbolic(d.dim_param()));
        } else {
          invented += d.has_dim_param();
          t.dims.push_back(Dim{});
        }
      }
    }
    if (v->type.isTensor() && v->type.elem != DType::Undefined && v->type.elem != t.elem) {
      details.push_back("shape inference: ONNX infers element type " + dtypeName(t.elem).str() +
                        " for " + quoteName(v->name()) + ", declared " +
                        dtypeName(v->type.elem).str() + ": its shape is not taken");
      continue;
    }
    v->type = std::move(t);
  }
  return invented;
}

/// The floating-point values of the main graph without a rank.
static std::vector<const Value *> unrankedFloats(const Model &m) {
  std::vector<const Value *> out;
  for (const Value *v : m.graph->values())
    if (v->type.isTensor() && isFloatingPoint(v->type.elem) && !v->type.hasShape)
      out.push_back(v);
  return out;
}

/// Says which floating-point values are still without a rank (a gradient
/// rule that needs one names the value if it meets it).
static void reportUnranked(const Model &m, std::vector<std::string> &details) {
  std::vector<const Value *> left = unrankedFloats(m);
  if (left.empty()) {
    details.push_back("shape inference: every floating-point value has a rank");
    return;
  }
  std::string text =
      llvm::formatv("shape inference: {0} floating-point value(s) without a rank:", left.size())
          .str();
  const size_t shown = 8;
  for (size_t i = 0; i < left.size() && i < shown; ++i)
    text += (i ? ", " : " ") + quoteName(left[i]->name());
  if (left.size() > shown)
    text += ", ...";
  details.push_back(text);
}

/// ONNX's inference and mpc's estimator in turn, each filling in what the
/// other lost (libonnx 1.12 loses the rank at a Reshape to a computed shape,
/// the estimator at ops it cannot fold), while a round adds ranks.
static void inferShapes(Model &m, std::vector<std::string> &details) {
  inferTypes(m);
  llvm::StringSet<> declared = declaredSymbols(m);
  size_t left = unrankedFloats(m).size();
  unsigned invented = 0;
  const unsigned maxRounds = 4;
  for (unsigned round = 0; round < maxRounds; ++round) {
    std::vector<std::string> failures;
    invented += inferShapesWithOnnx(m, declared, round > 0, failures);
    estimateShapes(m);
    for (std::string &f : failures)
      if (std::find(details.begin(), details.end(), f) == details.end())
        details.push_back(std::move(f));
    size_t now = unrankedFloats(m).size();
    if (now == 0 || now == left)
      break;
    left = now;
  }
  if (invented)
    details.push_back(llvm::formatv("shape inference: {0} dimension(s) ONNX named itself "
                                    "(unk__N) taken as unknown sizes",
                                    invented)
                          .str());
  reportUnranked(m, details);
}

llvm::Error Builder::run() {
  if (llvm::Error err = checkInput())
    return err;
  std::vector<std::string> details;
  inferShapes(m, opts.details ? *opts.details : details);
  res.untied = untieMergedInitializers(m);
  if (llvm::Error err = collectParameters())
    return err;
  auto algOwner = std::make_unique<Graph>(m, m.graph.get());
  alg = algOwner.get();
  alg->name = m.freshName((m.graph->name.empty() ? std::string("model") : m.graph->name) +
                          "_training_step");
  e = std::make_unique<Emitter>(m, *alg);
  if (llvm::Error err = copyForward())
    return err;
  if (llvm::Error err = buildLoss())
    return err;
  size_t firstGrad = e->created.size();
  if (llvm::Error err = buildBackward())
    return err;
  res.numGradientNodes = static_cast<unsigned>(e->created.size() - firstGrad);
  // Readable gradient names: grad/<param> where the value is ours alone.
  llvm::DenseSet<const Value *> renamed;
  for (auto &[p, g] : grads)
    if (g != seed && g->producer() && g->producer()->getParent() == alg &&
        renamed.insert(g).second)
      Graph::renameValue(g, m.freshName("grad/" + p->name()));

  std::vector<Value *> outs{loss};
  std::vector<std::pair<std::string, std::string>> binding;
  if (llvm::Error err = buildOptimizer(outs, binding))
    return err;
  if (opts.exposeGradients) {
    llvm::DenseSet<const Value *> listed(outs.begin(), outs.end());
    for (auto &[p, g] : grads)
      if (listed.insert(g).second) {
        if (g->type.elem == p->type.elem)
          g->type = p->type; // a gradient has its parameter's shape
        outs.push_back(g);
      }
  }
  for (Value *o : outs) {
    o->hasValueInfo = true;
    alg->addOutput(o);
  }

  // Metadata (docs/training.md).
  m.setMetadata("mpc.training.loss", loss->name());
  m.setMetadata("mpc.training.loss_grad_seed", seed->name());
  std::string gradText, predText, fp32Text;
  for (auto &[p, g] : grads)
    gradText += p->name() + "=" + g->name() + "\n";
  for (Value *v : predictions)
    predText += v->name() + "\n";
  for (Node *n : fp32Nodes)
    fp32Text += n->name + "\n";
  auto trim = [](std::string s) {
    if (!s.empty() && s.back() == '\n')
      s.pop_back();
    return s;
  };
  m.setMetadata("mpc.training.gradients", trim(gradText));
  if (labels)
    m.setMetadata("mpc.training.labels", labels->name());
  m.setMetadata("mpc.training.predictions", trim(predText));
  m.setMetadata("mpc.training.loss_kind", lossKindName(opts.loss));
  if (opts.lossWeight != 1.0)
    m.setMetadata("mpc.training.loss_weight", llvm::formatv("{0}", opts.lossWeight).str());
  m.setMetadata("mpc.training.optimizer", describeOptimizer(opts));
  m.setMetadata("mpc.training.step_counter", stepCounterName);
  m.setMetadata("mpc.training.fp32_nodes", trim(fp32Text));
  if (opts.bnUnbiasedVariance && !bnStats.empty())
    m.setMetadata("mpc.training.bn_variance", "unbiased");

  TrainingInfo ti;
  ti.algorithm = std::move(algOwner);
  ti.updateBinding = std::move(binding);
  m.trainingInfo.push_back(std::move(ti));
  importTrainingDomains(m);
  return llvm::Error::success();
}

llvm::Expected<TrainGraphResult> mpc::buildTrainingGraph(Model &m,
                                                         const TrainGraphOptions &opts) {
  TrainGraphResult res;
  Builder b(m, opts, res);
  if (llvm::Error err = b.run())
    return std::move(err);
  // training_info is an IR version 7 field, and the step's new initializers
  // (the step counter, optimizer state) are not graph inputs, which IR
  // versions before 4 require of every initializer.
  m.irVersion = std::max<int64_t>(m.irVersion, 7);
  return res;
}

void mpc::train::importTrainingDomains(Model &m) {
  bool contrib = false;
  for (const TrainingInfo &ti : m.trainingInfo)
    if (ti.algorithm)
      for (const Node &n : ti.algorithm->nodes())
        contrib |= n.domain == kContribDomain;
  if (m.opsetVersion(kTrainingDomain) < 0)
    m.opsets.push_back({kTrainingDomain, 1});
  if (contrib && m.opsetVersion(kContribDomain) < 0)
    m.opsets.push_back({kContribDomain, 1});
}
