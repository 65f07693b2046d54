//===- WeightCopy.cpp - The optimizer writes the 16-bit weight copy --------===//
//
// See mpc/Passes/WeightCopy.h and docs/training.md ("The 16-bit weight
// copy"). Without the option every step casts each master weight to the
// 16-bit type (read 4 bytes, write 2) and the forward reads the cast (2);
// with it the fused optimizer step, which reads and writes the master
// weight anyway, writes the rounded copy too (2), and the forward reads
// the copy (2): 6 bytes per parameter and step become 2, and one launch per
// parameter goes.
//
// The copy is state like the optimizer's moments: an initializer of the
// inference graph, bound in update_binding, saved in checkpoints. It always
// equals the master weight rounded: initialized here as Cast rounds, and
// after every step the step's rounding of the new (or, skipped, the
// unchanged) master weight.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/WeightCopy.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include <cstring>

using namespace mpc;

std::string WeightCopyResult::summaryLine() const {
  return llvm::formatv("Weight copies: {0} parameter(s) read through a persistent {1} copy "
                       "written by their fused optimizer step ({2} parameter cast(s) removed{3})",
                       copies, target == DType::BF16 ? "bfloat16" : "float16", castsRemoved,
                       notCast ? llvm::formatv(", {0} fused-step parameter(s) not cast", notCast)
                                     .str()
                               : std::string())
      .str();
}

namespace {
/// One parameter to convert: its step, and the Cast outputs the algorithm
/// reads (in the algorithm or, shared, in the inference graph).
struct Planned {
  Node *step;
  Value *param;
  std::vector<Value *> casts;
};
} // namespace

/// True when `v` is Cast(param, to=target) (default domain, one input).
static bool isCastOf(const Value *v, const Value *param, DType target) {
  const Node *p = v->producer();
  return p && p->opType == "Cast" && p->domain.empty() && p->numInputs() == 1 &&
         p->input(0) == param && p->intAttr("to", 0) == int64_t(target);
}

/// The copy's initial value: every element of `param` rounded to `target`
/// with the Cast kernels' castValue.
static llvm::Expected<Tensor> roundedCopy(const Value &param, DType target) {
  const Tensor &src = *param.initializer();
  if (src.isExternal())
    return inputError("--optimizer-weight-copy: parameter '{0}' has its data outside the "
                      "model, which the rewrite did not load",
                      param.name());
  llvm::ArrayRef<uint8_t> bytes = src.bytes();
  size_t n = bytes.size() / sizeof(float);
  std::vector<uint8_t> out(n * 2);
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + i * sizeof(float), sizeof f);
    uint16_t bits = target == DType::BF16 ? kernels::castValue<BFloat16>(f).bits
                                          : kernels::castValue<Half>(f).bits;
    std::memcpy(out.data() + i * 2, &bits, 2);
  }
  Tensor t(target, src.dims);
  t.setBytes(std::move(out));
  return t;
}

llvm::Expected<WeightCopyResult> mpc::insertOptimizerWeightCopies(Model &m, DType target) {
  WeightCopyResult res;
  res.target = target;
  if (!m.isTraining() || !m.trainingInfo[0].algorithm)
    return inputError("--optimizer-weight-copy: not a training model");
  if (m.findMetadata(trainkeys::kWeightCopies))
    return inputError("--optimizer-weight-copy: the model carries weight copies already ({0})",
                      trainkeys::kWeightCopies);
  if (target != DType::F16 && target != DType::BF16)
    return inputError("--optimizer-weight-copy: the target must be float16 or bfloat16");
  Graph &main = *m.graph;
  Graph &alg = *m.trainingInfo[0].algorithm;
  TrainingInfo &ti = m.trainingInfo[0];
  llvm::StringMap<std::string> boundTo;
  for (const auto &b : ti.updateBinding)
    boundTo[b.first] = b.second;

  // Plan first: an error leaves the model as it was.
  std::vector<Planned> plan;
  llvm::DenseMap<const Value *, unsigned> planOf; // param -> index in plan
  unsigned steps = 0;
  for (Node &n : alg.nodes()) {
    const OptimizerStepLayout *l = findOptimizerStep(n.opType, n.domain);
    if (!l)
      continue;
    ++steps;
    Value *p = n.numInputs() ? n.input(0) : nullptr;
    // An initializer, or one an exporter also lists among the graph's inputs
    // (IR 3 style, torch.onnx.export's keep_initializers_as_inputs): the
    // trainer's state either way.
    bool mainParam = p && p->graph() == &main && p->initializer() &&
                     (p->kind() == ValueKind::Initializer ||
                      p->kind() == ValueKind::GraphInput) &&
                     p->type.tensorElemType() == DType::F32;
    bool hasCopy = n.numOutputs() > l->copyOutput() && n.output(l->copyOutput());
    auto bound = p ? boundTo.find(p->name()) : boundTo.end();
    if (!mainParam || hasCopy || planOf.count(p) || bound == boundTo.end() ||
        !n.output(0) || bound->second != n.output(0)->name().str()) {
      ++res.notCast;
      continue;
    }
    planOf[p] = unsigned(plan.size());
    plan.push_back({&n, p, {}});
  }
  if (!steps)
    return inputError("--optimizer-weight-copy: the training step has no fused optimizer step "
                      "(SGDStep, MomentumStep, AdamStep) to write the copies; build it with "
                      "`mpc train-graph --fused-optimizer`");
  // The casts of those parameters that algorithm nodes read.
  llvm::DenseSet<const Value *> seen;
  forEachGraph(alg, [&](Graph &g) {
    for (Node &n : g.nodes())
      for (Value *v : n.inputs()) {
        if (!v || !v->producer() || !seen.insert(v).second)
          continue;
        Node *c = v->producer();
        if (c->opType != "Cast" || c->numInputs() != 1 || !c->input(0))
          continue;
        auto it = planOf.find(c->input(0));
        if (it != planOf.end() && isCastOf(v, c->input(0), target))
          plan[it->second].casts.push_back(v);
      }
  });
  std::vector<Planned> todo;
  for (Planned &p : plan)
    if (p.casts.empty())
      ++res.notCast;
    else
      todo.push_back(std::move(p));
  if (todo.empty())
    return inputError("--optimizer-weight-copy: no parameter of the {0} fused optimizer "
                      "step(s) is cast to {1} by the rewrite, so no step reads a copy",
                      steps, target == DType::BF16 ? "bfloat16" : "float16");
  std::vector<Tensor> initial;
  for (const Planned &p : todo) {
    llvm::Expected<Tensor> t = roundedCopy(*p.param, target);
    if (!t)
      return t.takeError();
    initial.push_back(std::move(*t));
  }

  // Apply.
  const char *suffix = target == DType::BF16 ? "/Bf16Copy" : "/Fp16Copy";
  std::string listed;
  llvm::DenseSet<Node *> castNodes;
  llvm::DenseSet<const Graph *> algGraphs;
  forEachGraph(alg, [&](Graph &g) { algGraphs.insert(&g); });
  for (size_t i = 0; i < todo.size(); ++i) {
    Planned &p = todo[i];
    const OptimizerStepLayout *l = findOptimizerStep(p.step->opType, p.step->domain);
    Value *copy = main.addInitializer(m.freshName(p.param->name().str() + suffix), std::move(initial[i]));
    for (Value *c : p.casts) {
      for (const Use &u : c->uses().copy())
        if (algGraphs.count(u.user->getParent()))
          u.user->setInput(u.operand, copy);
      castNodes.insert(c->producer());
    }
    Type t = p.param->type;
    t.setTensorElemType(target);
    Value *next = p.step->setOutput(l->copyOutput(), m.freshName(copy->name().str() + "/Next"), t);
    next->hasValueInfo = true;
    p.step->setAttr(Attribute::makeInt(kOptimizerCopyToAttr, int64_t(target)));
    alg.addOutput(next);
    ti.updateBinding.emplace_back(copy->name(), next->name());
    listed += (listed.empty() ? "" : "\n") + p.param->name().str() + "=" + copy->name().str();
    ++res.copies;
    res.log.push_back(mpc::formatQuoted(
        "Weight copy: parameter '{0}' read through '{1}' ({2} cast(s) replaced); '{3}' writes "
        "it as output '{4}'",
        p.param->name(), copy->name(), p.casts.size(), p.step->name, next->name()));
  }
  // Casts nothing reads any more, in node order (deterministic).
  for (Graph *g : {&alg, &main}) {
    std::vector<Node *> dead;
    for (Node &n : g->nodes())
      if (castNodes.count(&n) && !n.output(0)->hasUses() && !n.output(0)->isGraphOutput())
        dead.push_back(&n);
    for (Node *n : dead) {
      n->dropAllInputs();
      g->eraseNode(n);
      ++res.castsRemoved;
    }
  }
  m.setMetadata(trainkeys::kWeightCopies, listed);
  return res;
}
