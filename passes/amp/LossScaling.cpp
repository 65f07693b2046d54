//===- LossScaling.cpp - Loss scaling for training models ------------------===//
//
// Methodology (docs/training.md, "Loss scaling"; docs/gpu-notes.md section 4
// is the device-side version of the same state machine). With S the fp32 scalar
// initializer `mpc.loss_scale`:
//
//   seed' = Mul(seed, S)                       every gradient scales, the loss does not
//   g32   = Cast(g, to=float)                  only for 16-bit g (an AMP cast is reused)
//   u     = Mul(g32, Reciprocal(S))            the optimizer reads u
//   c     = ReduceSum(Reshape(Mul(u, 0), [-1]), keepdims=1)   NaN iff u has inf/NaN
//   grad_nonfinite = Concat(c_1..c_n)          one entry per mpc.training.gradients line
//   found_inf      = IsNaN(ReduceSum(grad_nonfinite))
//   out'  = Where(found_inf, old, out)         for every update_binding output
//   dynamic: S' = found ? max(S*backoff, min) : (T+1 < interval ? S : min(S*growth, max))
//            T' = found ? 0 : (T+1 < interval ? T+1 : 0)
//
// --fused-unscale (scaled modes) emits the middle four lines as one node:
//   found_inf, grad_nonfinite, u_1..u_n = ai.mpc.training::MultiTensorUnscale(
//                                           Reciprocal(S), g_1..g_n)
// with the same per-element float operations (runtime/kernels/.../UnscaleBody.h).
// Mode none keeps everything but S (no seed scaling, no unscale). Everything
// is standard ONNX at opset >= 9, so the algorithm runs in onnx.reference.
// Inserted nodes carry the doc string "mpc loss scaling: <role>", which the
// report counts. New names come from Model::freshName.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/LossScaling.h"
#include "mpc/Ops/OptimizerStep.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace mpc;

static const char *const kTrainingDomain = "ai.mpc.training";

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

llvm::StringRef mpc::lossScaleModeName(LossScaleMode m) {
  switch (m) {
  case LossScaleMode::Default:
    return "default";
  case LossScaleMode::Dynamic:
    return "dynamic";
  case LossScaleMode::Static:
    return "static";
  case LossScaleMode::None:
    return "none";
  case LossScaleMode::Off:
    return "off";
  }
  llvm_unreachable("bad LossScaleMode");
}

/// A finite positive number, or None.
static llvm::Optional<double> parsePositive(llvm::StringRef text) {
  double v = 0;
  if (text.empty() || text.getAsDouble(v) || !std::isfinite(v) || v <= 0)
    return llvm::None;
  return v;
}

llvm::Error mpc::parseLossScaleMode(llvm::StringRef text, llvm::StringRef what,
                                    LossScaleOptions &o) {
  text = text.trim();
  if (text == "dynamic") {
    o.mode = LossScaleMode::Dynamic;
  } else if (text == "none") {
    o.mode = LossScaleMode::None;
  } else if (text == "off") {
    o.mode = LossScaleMode::Off;
  } else if (llvm::Optional<double> v = parsePositive(text)) {
    o.mode = LossScaleMode::Static;
    o.staticScale = *v;
  } else {
    return inputError("{0}='{1}' must be dynamic, none, off or a positive finite number", what,
                      text);
  }
  return llvm::Error::success();
}

llvm::Error mpc::parseLossScaleSetting(llvm::StringRef key, llvm::StringRef text,
                                       llvm::StringRef what, LossScaleOptions &o) {
  text = text.trim();
  if (key == "interval") {
    int64_t n = 0;
    if (text.getAsInteger(10, n) || n < 1)
      return inputError("{0}='{1}' must be a whole number of steps >= 1", what, text);
    o.interval = n;
    return llvm::Error::success();
  }
  llvm::Optional<double> v = parsePositive(text);
  if (!v)
    return inputError("{0}='{1}' must be a positive finite number", what, text);
  if (key == "init")
    o.init = *v;
  else if (key == "growth") {
    if (*v < 1)
      return inputError("{0}='{1}' must be >= 1 (the scale grows by it)", what, text);
    o.growth = *v;
  } else if (key == "backoff") {
    if (*v > 1)
      return inputError("{0}='{1}' must be in (0, 1] (the scale shrinks by it)", what, text);
    o.backoff = *v;
  } else if (key == "min")
    o.min = *v;
  else if (key == "max")
    o.max = *v;
  else
    return inputError("{0}: unknown loss-scale setting '{1}'", what, key);
  return llvm::Error::success();
}

/// Round-trip text of a number: integers without a fraction, others %.9g.
static std::string fmtNumber(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return llvm::formatv("{0}", static_cast<int64_t>(v)).str();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

llvm::Error mpc::checkLossScaleOptions(const LossScaleOptions &o) {
  if (o.mode == LossScaleMode::Static && o.staticScale > 3.4028234663852886e38)
    return inputError("static loss scale {0} does not fit float32", fmtNumber(o.staticScale));
  // The dynamic settings matter only when the scale may be dynamic.
  if (o.mode != LossScaleMode::Default && o.mode != LossScaleMode::Dynamic)
    return llvm::Error::success();
  if (o.min > o.max)
    return inputError("loss-scale min {0} is above max {1}", fmtNumber(o.min), fmtNumber(o.max));
  if (o.init < o.min || o.init > o.max)
    return inputError("loss-scale init {0} is outside [min, max] = [{1}, {2}]", fmtNumber(o.init),
                      fmtNumber(o.min), fmtNumber(o.max));
  return llvm::Error::success();
}

LossScaleMode mpc::effectiveLossScaleMode(const LossScaleOptions &o, DType target) {
  if (o.mode != LossScaleMode::Default)
    return o.mode;
  return target == DType::BF16 ? LossScaleMode::None : LossScaleMode::Dynamic;
}

static std::string describeConfig(const LossScaleOptions &o, LossScaleMode mode) {
  switch (mode) {
  case LossScaleMode::Dynamic:
    return llvm::formatv("dynamic init={0} growth={1} backoff={2} interval={3} min={4} max={5}",
                         fmtNumber(o.init), fmtNumber(o.growth), fmtNumber(o.backoff), o.interval,
                         fmtNumber(o.min), fmtNumber(o.max))
        .str();
  case LossScaleMode::Static:
    return "static " + fmtNumber(o.staticScale);
  case LossScaleMode::None:
    return "none";
  case LossScaleMode::Off:
  case LossScaleMode::Default:
    return "off";
  }
  llvm_unreachable("bad LossScaleMode");
}

std::string mpc::lossScalingUnsupportedReason(const Model &m) {
  if (!m.isTraining())
    return "not a training model";
  if (!m.trainingInfo[0].algorithm)
    return "training_info[0] has no algorithm graph";
  std::vector<std::string> missing;
  for (const char *k : {trainkeys::kLoss, trainkeys::kSeed, trainkeys::kGradients})
    if (!m.findMetadata(k))
      missing.push_back(k);
  if (!missing.empty())
    return "it lacks the docs/training.md metadata " + llvm::join(missing, ", ");
  if (metadataLines(*m.findMetadata(trainkeys::kGradients)).empty())
    return trainkeys::kGradients + std::string(" lists no gradient");
  return "";
}

llvm::DenseSet<const Node *> mpc::trainingFp32Nodes(const Model &m) {
  llvm::DenseSet<const Node *> out;
  const std::string *names = m.findMetadata(trainkeys::kFp32Nodes);
  if (!names || !m.isTraining() || !m.trainingInfo[0].algorithm)
    return out;
  llvm::StringSet<> wanted;
  for (llvm::StringRef n : metadataLines(*names))
    wanted.insert(n);
  forEachGraph(*m.trainingInfo[0].algorithm, [&](Graph &g) {
    for (Node &n : g.nodes())
      if (!n.name.empty() && wanted.count(n.name))
        out.insert(&n);
  });
  return out;
}

std::string LossScalingResult::summaryLine() const {
  switch (status) {
  case Status::Off:
    return "Loss scaling: off (nothing inserted)";
  case Status::AlreadyScaled:
    return "Loss scaling: already present (" + config + "), not inserted again";
  case Status::Inserted:
    break;
  }
  std::string head = "Loss scaling: " + config;
  if (mode == LossScaleMode::None)
    head += " (no scaling; overflow check and skipped update kept)";
  std::string steps;
  if (skippedInStep)
    steps = llvm::formatv(", {0} update(s) skipped by their fused optimizer step", skippedInStep);
  if (fusedUnscale)
    return llvm::formatv("{0}: {1} gradient(s) unscaled in fp32 and checked by one "
                         "MultiTensorUnscale node ({2} cast(s) to fp32 folded in), {3} update(s) "
                         "guarded{5}, {4} node(s) inserted",
                         head, gradients, castsReused, guardedUpdates, nodesInserted, steps)
        .str();
  return llvm::formatv("{0}: {1} gradient(s) unscaled in fp32 and checked ({2} cast(s) to fp32 "
                       "inserted, {3} reused), {4} update(s) guarded{6}, {5} node(s) inserted",
                       head, gradients, castsToFp32, castsReused, guardedUpdates, nodesInserted,
                       steps)
      .str();
}

//===----------------------------------------------------------------------===//
// The rewrite
//===----------------------------------------------------------------------===//

namespace {
class LossScaler {
public:
  LossScaler(Model &m, const LossScaleOptions &opts, LossScaleMode mode, LossScalingResult &res)
      : m(m), main(*m.graph), alg(*m.trainingInfo[0].algorithm), ti(m.trainingInfo[0]),
        opts(opts), mode(mode), res(res) {}
  llvm::Error run();

private:
  Model &m;
  Graph &main;
  Graph &alg;
  TrainingInfo &ti;
  const LossScaleOptions &opts;
  LossScaleMode mode;
  LossScalingResult &res;
  llvm::StringMap<Value *> algValues;  ///< top-level values of the algorithm
  llvm::StringMap<Value *> mainInits;  ///< initializers of the inference graph
  llvm::DenseMap<const Node *, bool> ours;

  bool scaled() const { return mode == LossScaleMode::Dynamic || mode == LossScaleMode::Static; }
  Node *newNode(llvm::StringRef op, NodeList::iterator at, const Node *orderFrom,
                llvm::StringRef role);
  Value *result(Node *n, llvm::StringRef base, Type t, unsigned i = 0);
  Value *constant(Tensor t, llvm::StringRef base, NodeList::iterator at, const Node *orderFrom);
  Value *constF32(float v, llvm::StringRef base);
  Value *constI64(std::vector<int64_t> v, bool scalar, llvm::StringRef base);
  /// The algorithm's first node before the pass: new nodes that depend on no
  /// node go before it, in creation order.
  NodeList::iterator head;
  NodeList::iterator front() { return head; }
  const Node *headNode() const { return head == alg.nodes().end() ? nullptr : &*head; }
  /// Right after the producer of `v`, or before the original first node when
  /// `v` is an input or an initializer.
  NodeList::iterator after(Value *v) {
    Node *p = v->producer();
    return p && p->getParent() == &alg ? std::next(p->getIterator()) : head;
  }
  void localizeParameterCasts();
  llvm::Expected<Value *> lookupAlg(llvm::StringRef key, llvm::StringRef name);

  /// The mpc.training.gradients lines, in order.
  struct Grad {
    std::string param;
    Value *value;
  };
  std::vector<Grad> grads;
  Node *castToFp32Of(Value *gv);
  void exposeUnscaled(Value *gv, Value *g32, Value *u);
  /// Steps 2-3, primitive or fused: returns found_inf and grad_nonfinite.
  std::pair<Value *, Value *> unscaleEach(Value *invScale);
  std::pair<Value *, Value *> unscaleFused(Value *invScale);
};
} // namespace

static Tensor scalarTensor(DType t, const void *data, size_t bytes, std::vector<int64_t> dims) {
  Tensor out(t, std::move(dims));
  std::vector<uint8_t> raw(bytes);
  std::memcpy(raw.data(), data, bytes);
  out.setBytes(std::move(raw));
  return out;
}

Node *LossScaler::newNode(llvm::StringRef op, NodeList::iterator at, const Node *orderFrom,
                          llvm::StringRef role) {
  Node *n = alg.createNode(op, "", at, orderFrom);
  n->docString = ("mpc loss scaling: " + role).str();
  ours[n] = true;
  ++res.nodesInserted;
  return n;
}

Value *LossScaler::result(Node *n, llvm::StringRef base, Type t, unsigned i) {
  std::string name = m.freshName(base);
  if (i == 0)
    n->name = name;
  return n->setOutput(i, name, std::move(t));
}

Value *LossScaler::constant(Tensor t, llvm::StringRef base, NodeList::iterator at,
                            const Node *orderFrom) {
  Node *n = newNode("Constant", at, orderFrom, "constant");
  Type ty = Type::tensor(t.dtype, t.dims);
  n->setAttr(Attribute::makeTensor("value", std::move(t)));
  return result(n, base, std::move(ty));
}

Value *LossScaler::constF32(float v, llvm::StringRef base) {
  return constant(scalarTensor(DType::F32, &v, sizeof v, {}), base, front(), headNode());
}

Value *LossScaler::constI64(std::vector<int64_t> v, bool scalar, llvm::StringRef base) {
  std::vector<int64_t> dims;
  if (!scalar)
    dims.push_back(static_cast<int64_t>(v.size()));
  return constant(scalarTensor(DType::I64, v.data(), v.size() * sizeof(int64_t), dims), base,
                  front(), headNode());
}

llvm::Expected<Value *> LossScaler::lookupAlg(llvm::StringRef key, llvm::StringRef name) {
  auto it = algValues.find(name);
  if (it == algValues.end())
    return inputError("metadata {0} names '{1}', which is not a value of the algorithm graph '{2}'",
                      key, name, alg.name);
  return it->second;
}

/// The AMP rewrite shares one Cast per (initializer, type) between the
/// inference graph and the algorithm; the algorithm may read only inference
/// initializers, so it gets its own copy: one cast of each parameter per step.
void LossScaler::localizeParameterCasts() {
  llvm::DenseMap<Value *, Value *> copies;
  std::vector<Node *> mainCasts;
  const Node *first = headNode();
  forEachGraph(alg, [&](Graph &g) {
    for (Node &n : g.nodes()) {
      if (ours.count(&n))
        continue;
      for (unsigned i = 0; i < n.numInputs(); ++i) {
        Value *v = n.input(i);
        if (!v || v->graph() != &main || !v->producer())
          continue;
        Node *p = v->producer();
        if (p->opType != "Cast" || !p->domain.empty() || p->numInputs() != 1 ||
            !p->input(0) || p->input(0)->kind() != ValueKind::Initializer)
          continue;
        Value *&copy = copies[v];
        if (!copy) {
          Node *c = newNode("Cast", front(), first, "parameter cast");
          c->addInput(p->input(0));
          c->setAttr(Attribute::makeInt("to", p->intAttr("to", 1)));
          copy = result(c, v->name(), v->type);
          copy->hasValueInfo = v->hasValueInfo;
          mainCasts.push_back(p);
          ++res.castsLocalized;
          res.detailLog.push_back(
              mpc::formatQuoted("Loss scaling: the algorithm casts parameter '{0}' "
                                "itself: Cast -> '{1}' (was the inference "
                                "graph's '{2}')",
                                p->input(0)->name(), copy->name(), v->name()));
        }
        n.setInput(i, copy);
      }
    }
  });
  // A cast only the algorithm read is dead now.
  for (Node *p : mainCasts)
    if (!p->output(0)->hasUses() && !p->output(0)->isGraphOutput()) {
      p->dropAllInputs();
      main.eraseNode(p);
    }
  if (res.castsLocalized)
    res.log.push_back(llvm::formatv("Loss scaling: {0} parameter cast(s) moved into the "
                                    "algorithm graph (one 16-bit cast of each master weight "
                                    "per step)",
                                    res.castsLocalized)
                          .str());
}

/// The fused optimizer step (mpc/Ops/OptimizerStep.h) of the algorithm graph
/// `alg` that produces `out`, when its skip input is free or reads `found`
/// already; else null (the output is guarded by a Where).
static Node *skippableStep(Value *out, Value *found) {
  Node *p = out->producer();
  if (!p || p->getParent() != out->graph())
    return nullptr;
  const OptimizerStepLayout *l = findOptimizerStep(p->opType, p->domain);
  if (!l)
    return nullptr;
  unsigned skip = l->skipInput();
  return skip >= p->numInputs() || !p->input(skip) || p->input(skip) == found ? p : nullptr;
}

/// True when every node input produced in `g` comes from an earlier node.
static bool isTopological(const Graph &g) {
  llvm::DenseSet<const Node *> seen;
  for (const Node &n : g.nodes()) {
    for (const Value *v : n.inputs())
      if (v && v->producer() && v->producer()->getParent() == &g && !seen.count(v->producer()))
        return false;
    seen.insert(&n);
  }
  return true;
}

/// The algorithm's existing Cast(to=float) of `gv`, or null.
Node *LossScaler::castToFp32Of(Value *gv) {
  for (const Use &u : gv->uses()) {
    Node *user = u.user;
    const Attribute *to = user->attr("to");
    if (user->opType == "Cast" && user->domain.empty() && user->getParent() == &alg && to &&
        to->kind == AttrKind::Int && to->i == static_cast<int64_t>(DType::F32))
      return user;
  }
  return nullptr;
}

/// An exposed gradient (an algorithm output, `gv` or its fp32 form `g32`)
/// shows the true gradient: the output keeps its name and holds u; the scaled
/// value is renamed `<name>/Scaled`. mpc.training.gradients keeps naming the
/// output, which now holds the true gradient (what the trainer's
/// zero-fraction reads).
void LossScaler::exposeUnscaled(Value *gv, Value *g32, Value *u) {
  for (unsigned i = 0; i < alg.outputs().size(); ++i) {
    Value *out = alg.outputs()[i];
    if (out != gv && out != g32)
      continue;
    std::string name = out->name();
    Graph::renameValue(out, m.freshName(name + "/Scaled"));
    Graph::renameValue(u, name);
    u->hasValueInfo = true;
    alg.setOutput(i, u);
    res.detailLog.push_back(mpc::formatQuoted("Loss scaling: output '{0}' now holds the "
                                              "unscaled gradient; the scaled one is '{1}'",
                                              name, out->name()));
  }
}

/// The primitive form: per gradient Cast (16-bit), Mul by 1/S and the
/// ReduceSum(Mul(u, 0)) check; found_inf = IsNaN(ReduceSum(Concat(checks))).
/// Returns found_inf and the concatenated checks.
std::pair<Value *, Value *> LossScaler::unscaleEach(Value *invScale) {
  Value *zero = constF32(0.0f, "mpc.loss_scale/zero");
  Value *flat = constI64({-1}, false, "mpc.loss_scale/flat_shape");
  llvm::DenseMap<Value *, Value *> checked; // gradient -> its check (shared by repeated lines)
  std::vector<Value *> checks;
  Node *lastCheck = nullptr;
  for (const Grad &g : grads) {
    auto done = checked.find(g.value);
    if (done != checked.end()) {
      checks.push_back(done->second);
      continue;
    }
    Value *gv = g.value;
    const Node *orderFrom = gv->producer() ? gv->producer() : headNode();
    DType e = gv->type.tensorElemType();
    Value *g32 = gv;
    std::string how = "float32";
    if (e != DType::F32) {
      Node *cast = castToFp32Of(gv);
      if (cast) {
        g32 = cast->output(0);
        ++res.castsReused;
        how = mpc::formatQuoted("{0}, read through the existing Cast '{1}'", dtypeName(e),
                                g32->name());
      } else {
        cast = newNode("Cast", after(gv), orderFrom, "unscale");
        cast->addInput(gv);
        cast->setAttr(Attribute::makeInt("to", static_cast<int64_t>(DType::F32)));
        Type t = gv->type;
        t.setTensorElemType(DType::F32);
        g32 = result(cast, gv->name() + "/CastToFp32", std::move(t));
        ++res.castsToFp32;
        how = mpc::formatQuoted("{0}, read through the inserted Cast '{1}'", dtypeName(e),
                                g32->name());
      }
      orderFrom = cast;
    }
    NodeList::iterator at = after(g32);
    Value *u = g32;
    if (scaled()) {
      std::vector<Use> uses = g32->uses().copy();
      Node *mul = newNode("Mul", at, orderFrom, "unscale");
      mul->addInput(g32);
      mul->addInput(invScale);
      u = result(mul, gv->name() + "/Unscaled", g32->type);
      for (const Use &use : uses)
        use.user->setInput(use.operand, u);
      exposeUnscaled(gv, g32, u);
    }
    Node *z = newNode("Mul", at, orderFrom, "check");
    z->addInput(u);
    z->addInput(zero);
    Value *zv = result(z, gv->name() + "/TimesZero", u->type);
    Node *rs = newNode("Reshape", at, orderFrom, "check");
    rs->addInput(zv);
    rs->addInput(flat);
    int64_t ne = u->type.numElements();
    Value *rv = result(rs, gv->name() + "/Flat",
                       ne >= 0 ? Type::tensor(DType::F32, {ne}) : Type::tensor(DType::F32));
    Node *sum = newNode("ReduceSum", at, orderFrom, "check");
    sum->addInput(rv);
    sum->setAttr(Attribute::makeInt("keepdims", 1));
    Value *cv = result(sum, gv->name() + "/NonFinite", Type::tensor(DType::F32, {1}));
    lastCheck = sum;
    checked[gv] = cv;
    checks.push_back(cv);
    ++res.gradients;
    res.detailLog.push_back(
        mpc::formatQuoted("Loss scaling: gradient '{0}' of '{1}' ({2}){3}; check '{4}' = "
                          "ReduceSum(Mul(u, 0))",
                          gv->name(), g.param, how,
                          scaled() ? ", unscaled: Mul(., " + quoteName(invScale->name()) + ") -> " +
                                         quoteName(u->name()) + ", read by the optimizer"
                                   : std::string(),
                          cv->name()));
  }
  res.log.push_back(llvm::formatv("Loss scaling: {0} gradient(s) {1}checked in fp32 ({2} "
                                  "cast(s) of 16-bit "
                                  "gradients inserted, {3} reused){4}",
                                  res.gradients, scaled() ? "unscaled and " : "", res.castsToFp32,
                                  res.castsReused,
                                  scaled() ? "; 1/S computed once: " + quoteName(invScale->name())
                                           : std::string())
                        .str());

  // The checks, once all are computed: after the last of them in list order.
  NodeList::iterator at = alg.nodes().end();
  const Node *orderFrom = nullptr;
  {
    llvm::DenseSet<const Node *> checkNodes;
    for (Value *c : checks)
      checkNodes.insert(c->producer());
    for (Node &n : alg.nodes())
      if (checkNodes.count(&n))
        lastCheck = &n;
    at = std::next(lastCheck->getIterator());
    orderFrom = lastCheck;
  }
  Node *cat = newNode("Concat", at, orderFrom, "found_inf");
  for (Value *c : checks)
    cat->addInput(c);
  cat->setAttr(Attribute::makeInt("axis", 0));
  Value *nonfinite = result(cat, "mpc.grad_nonfinite",
                            Type::tensor(DType::F32, {static_cast<int64_t>(checks.size())}));
  Node *total = newNode("ReduceSum", at, orderFrom, "found_inf");
  total->addInput(nonfinite);
  total->setAttr(Attribute::makeInt("keepdims", 0));
  Value *totalV = result(total, "mpc.grad_nonfinite/Sum", Type::tensor(DType::F32, {}));
  Node *isnan = newNode("IsNaN", at, orderFrom, "found_inf");
  isnan->addInput(totalV);
  Value *found = result(isnan, "mpc.found_inf", Type::tensor(DType::Bool, {}));
  res.log.push_back(mpc::formatQuoted("Loss scaling: found_inf '{0}' = IsNaN(ReduceSum('{1}')), "
                                      "'{1}' = Concat of the {2} check(s)",
                                      found->name(), nonfinite->name(), checks.size()));
  return {found, nonfinite};
}

/// --fused-unscale: one ai.mpc.training MultiTensorUnscale node reads 1/S
/// and every gradient (one input per mpc.training.gradients line, in order)
/// and gives found_inf, the per-line flags (NaN where that gradient had an
/// inf or NaN, as the primitive checks) and the fp32 unscaled gradients. An
/// existing Cast(to=float) of a 16-bit gradient is folded in: its readers
/// read the unscaled gradient and the Cast goes when nothing else reads it.
std::pair<Value *, Value *> LossScaler::unscaleFused(Value *invScale) {
  if (m.opsetVersion(kTrainingDomain) < 0)
    m.opsets.push_back({kTrainingDomain, 1});
  // After the last node that makes a gradient, so every input is computed.
  llvm::DenseSet<const Node *> producers;
  for (const Grad &g : grads)
    if (Node *p = g.value->producer(); p && p->getParent() == &alg)
      producers.insert(p);
  Node *last = nullptr;
  for (Node &n : alg.nodes())
    if (producers.count(&n))
      last = &n;
  NodeList::iterator at = last ? std::next(last->getIterator()) : front();
  Node *fused = newNode("MultiTensorUnscale", at, last ? last : headNode(),
                        "multi-tensor unscale and check");
  fused->domain = kTrainingDomain;
  fused->addInput(invScale);
  Value *found = result(fused, "mpc.found_inf", Type::tensor(DType::Bool, {}), 0);
  Value *nonfinite = result(fused, "mpc.grad_nonfinite",
                            Type::tensor(DType::F32, {static_cast<int64_t>(grads.size())}), 1);
  fused->name = m.freshName("mpc.loss_scale/MultiTensorUnscale");
  llvm::DenseSet<Value *> seen;
  std::vector<Node *> folded;
  for (const Grad &g : grads) {
    Value *gv = g.value;
    Type t = gv->type;
    t.setTensorElemType(DType::F32);
    unsigned i = fused->numInputs();
    fused->addInput(gv);
    Value *u = result(fused, gv->name() + "/Unscaled", std::move(t), i + 1);
    if (!seen.insert(gv).second)
      continue; // a repeated line: its flag counts, its copy has no reader
    Value *g32 = gv;
    std::string how = "float32";
    if (gv->type.tensorElemType() != DType::F32) {
      Node *cast = castToFp32Of(gv);
      g32 = cast ? cast->output(0) : nullptr;
      if (cast) {
        folded.push_back(cast);
        ++res.castsReused;
      }
      how = dtypeName(gv->type.tensorElemType()).str() +
            (cast ? mpc::formatQuoted(", its Cast '{0}' folded in", g32->name())
                  : std::string(", widened in the node"));
    }
    if (g32) // the optimizer reads u where it read the fp32 gradient
      for (const Use &use : g32->uses().copy())
        if (use.user != fused)
          use.user->setInput(use.operand, u);
    exposeUnscaled(gv, g32 ? g32 : gv, u);
    ++res.gradients;
    res.detailLog.push_back(mpc::formatQuoted(
        "Loss scaling: gradient '{0}' of '{1}' ({2}) unscaled into '{3}' by '{4}'", gv->name(),
        g.param, how, u->name(), fused->name));
  }
  for (Node *c : folded)
    if (!c->output(0)->hasUses() && !c->output(0)->isGraphOutput()) {
      c->dropAllInputs();
      alg.eraseNode(c);
    }
  res.fusedUnscale = true;
  res.log.push_back(mpc::formatQuoted(
      "Loss scaling: {0} gradient(s) unscaled and checked in fp32 by one "
      "ai.mpc.training.MultiTensorUnscale '{1}' ({2} Cast(s) to fp32 folded in): found_inf "
      "'{3}', per-gradient flags '{4}'",
      res.gradients, fused->name, res.castsReused, found->name(), nonfinite->name()));
  return {found, nonfinite};
}

llvm::Error LossScaler::run() {
  if (m.opsetVersion("") >= 0 && m.opsetVersion("") < 9)
    return inputError("loss scaling needs opset 9 or newer for the default domain (the model "
                      "imports {0})",
                      m.opsetVersion(""));
  head = alg.nodes().begin();
  for (Value *v : alg.inputs())
    algValues[v->name()] = v;
  for (Value *v : alg.initializers())
    algValues[v->name()] = v;
  for (Node &n : alg.nodes())
    for (Value *v : n.outputs())
      if (v)
        algValues[v->name()] = v;
  for (Value *v : main.initializers())
    mainInits[v->name()] = v;

  // Resolve the metadata before changing anything.
  llvm::Expected<Value *> seedOr = lookupAlg(trainkeys::kSeed, *m.findMetadata(trainkeys::kSeed));
  if (!seedOr)
    return seedOr.takeError();
  Value *seed = *seedOr;
  for (llvm::StringRef line : metadataLines(*m.findMetadata(trainkeys::kGradients))) {
    auto [param, grad] = line.split('=');
    if (grad.empty())
      return inputError("metadata {0}: line '{1}' is not PARAM=GRAD", trainkeys::kGradients, line);
    llvm::Expected<Value *> g = lookupAlg(trainkeys::kGradients, grad.trim());
    if (!g)
      return g.takeError();
    DType e = (*g)->type.tensorElemType();
    if (e != DType::F32 && e != DType::F16 && e != DType::BF16)
      return inputError("gradient '{0}' of '{1}' has element type {2}; loss scaling handles "
                        "float32, float16 and bfloat16 gradients",
                        grad.trim(), param.trim(), dtypeName(e));
    grads.push_back({param.trim().str(), *g});
  }
  struct Update {
    Value *old;
    unsigned output;
  };
  std::vector<Update> updates;
  for (const auto &b : ti.updateBinding) {
    auto it = mainInits.find(b.first);
    if (it == mainInits.end())
      return inputError("update_binding names '{0}', which is not an initializer of the "
                        "inference graph",
                        b.first);
    unsigned idx = ~0u;
    for (unsigned i = 0; i < alg.outputs().size(); ++i)
      if (alg.outputs()[i]->name() == b.second)
        idx = i;
    if (idx == ~0u)
      return inputError("update_binding maps '{0}' to '{1}', which is not an output of the "
                        "algorithm graph",
                        b.first, b.second);
    updates.push_back({it->second, idx});
  }

  res.log.push_back(llvm::formatv("Loss scaling: mode {0}", res.config).str());
  localizeParameterCasts();

  // State: S (not for none) and, dynamic only, the growth tracker.
  Value *scale = nullptr, *tracker = nullptr;
  if (scaled()) {
    float s = static_cast<float>(mode == LossScaleMode::Static ? opts.staticScale : opts.init);
    scale = main.addInitializer(m.freshName("mpc.loss_scale"),
                                scalarTensor(DType::F32, &s, sizeof s, {}));
    if (mode == LossScaleMode::Dynamic) {
      int64_t zero = 0;
      tracker = main.addInitializer(m.freshName("mpc.loss_scale_growth"),
                                    scalarTensor(DType::I64, &zero, sizeof zero, {}));
    }
    res.log.push_back(mpc::formatQuoted(
        "Loss scaling: state initializer '{0}' (float32 scalar, {1}){2}", scale->name(),
        fmtNumber(s),
        tracker ? ", growth tracker " + quoteName(tracker->name()) + " (int64 scalar, 0)"
                : std::string()));
  }

  // 1. The seed: Mul(seed, S), read by every former reader of the seed.
  if (scaled()) {
    std::vector<Use> uses = seed->uses().copy();
    NodeList::iterator at = after(seed);
    const Node *orderFrom = seed->producer() ? seed->producer() : headNode();
    DType e = seed->type.tensorElemType();
    Value *in = seed;
    if (e != DType::F32) { // AMP converted the seed: scale in fp32, cast back
      Node *c = newNode("Cast", at, orderFrom, "seed");
      c->addInput(seed);
      c->setAttr(Attribute::makeInt("to", static_cast<int64_t>(DType::F32)));
      Type t = seed->type;
      t.setTensorElemType(DType::F32);
      in = result(c, seed->name() + "/CastToFp32", std::move(t));
    }
    Node *mul = newNode("Mul", at, orderFrom, "seed");
    mul->addInput(in);
    mul->addInput(scale);
    Type t = in->type;
    Value *scaledSeed = result(mul, seed->name() + "/LossScaled", t);
    if (e != DType::F32) {
      Node *c = newNode("Cast", at, orderFrom, "seed");
      c->addInput(scaledSeed);
      c->setAttr(Attribute::makeInt("to", static_cast<int64_t>(e)));
      scaledSeed = result(c, scaledSeed->name() + (e == DType::BF16 ? "/CastToBf16" : "/CastToFp16"),
                          seed->type);
    }
    for (const Use &u : uses)
      u.user->setInput(u.operand, scaledSeed);
    res.log.push_back(
        mpc::formatQuoted("Loss scaling: seed '{0}' scaled: Mul('{0}', '{1}') -> '{2}' "
                          "({3} reader(s)); the loss '{4}' is not scaled",
                          seed->name(), scale->name(), scaledSeed->name(), uses.size(),
                          *m.findMetadata(trainkeys::kLoss)));
  }

  // 2-3. Unscale each gradient into fp32 and check it.
  Value *invScale = nullptr;
  if (scaled()) {
    Node *r = newNode("Reciprocal", front(), headNode(), "unscale");
    r->addInput(scale);
    invScale = result(r, scale->name() + "/Reciprocal", Type::tensor(DType::F32, {}));
  }
  std::pair<Value *, Value *> flags =
      opts.fusedUnscale ? unscaleFused(invScale) : unscaleEach(invScale);
  Value *found = flags.first, *nonfinite = flags.second;

  // 4. Every update is conditional. An output of a fused optimizer step
  // (SGDStep, MomentumStep, AdamStep) is: its skip input reads found_inf.
  llvm::DenseSet<const Node *> stepsSkipping;
  for (const Update &u : updates) {
    Value *out = alg.outputs()[u.output];
    if (Node *step = skippableStep(out, found)) {
      if (stepsSkipping.insert(step).second) {
        const OptimizerStepLayout *l = findOptimizerStep(step->opType, step->domain);
        while (step->numInputs() <= l->skipInput())
          step->addInput(nullptr);
        step->setInput(l->skipInput(), found);
      }
      ++res.skippedInStep;
      res.detailLog.push_back(mpc::formatQuoted("Loss scaling: update of '{0}' skipped by its "
                                                "fused step '{1}' (skip input '{2}')",
                                                u.old->name(), step->name, found->name()));
      continue;
    }
    std::string name = out->name();
    if (out->graph() == &alg && out->kind() != ValueKind::GraphInput)
      Graph::renameValue(out, m.freshName(name + "/Unguarded"));
    else // an output that is an input or outer value: keep it, guard under a new name
      name = m.freshName(name + "/Guarded");
    Node *w = newNode("Where", alg.nodes().end(), nullptr, "guard");
    w->addInput(found);
    w->addInput(u.old);
    w->addInput(out);
    // The output keeps its name (reserved already): no freshName here.
    w->name = m.freshName(name + "/Guard");
    Value *guarded = w->setOutput(0, name, out->type);
    guarded->hasValueInfo = true;
    alg.setOutput(u.output, guarded);
    for (auto &b : ti.updateBinding)
      if (b.first == u.old->name())
        b.second = guarded->name();
    ++res.guardedUpdates;
    res.detailLog.push_back(mpc::formatQuoted("Loss scaling: update of '{0}' guarded: '{1}' = "
                                              "Where('{2}', '{0}', '{3}')",
                                              u.old->name(), guarded->name(), found->name(),
                                              out->name()));
  }
  res.log.push_back(
      mpc::formatQuoted("Loss scaling: {0} update_binding output(s) guarded by "
                        "Where('{1}', old, new): a skipped step keeps them bit for bit",
                        res.guardedUpdates, found->name()));
  if (res.skippedInStep)
    res.log.push_back(mpc::formatQuoted(
        "Loss scaling: {0} update_binding output(s) of {1} fused optimizer step(s) skipped "
        "through their skip input '{2}': a skipped step copies them bit for bit",
        res.skippedInStep, stepsSkipping.size(), found->name()));

  // 5. Dynamic scale update as graph state.
  if (mode == LossScaleMode::Dynamic) {
    auto node = [&](llvm::StringRef op, std::vector<Value *> ins, llvm::StringRef base, Type t) {
      Node *n = newNode(op, alg.nodes().end(), nullptr, "scale update");
      for (Value *v : ins)
        n->addInput(v);
      return result(n, base, std::move(t));
    };
    Type f = Type::tensor(DType::F32, {}), i = Type::tensor(DType::I64, {}),
         b = Type::tensor(DType::Bool, {});
    Value *one = constI64({1}, true, "mpc.loss_scale/one");
    Value *zeroI = constI64({0}, true, "mpc.loss_scale/zero_steps");
    Value *interval = constI64({opts.interval}, true, "mpc.loss_scale/interval");
    Value *growth = constF32(static_cast<float>(opts.growth), "mpc.loss_scale/growth");
    Value *backoff = constF32(static_cast<float>(opts.backoff), "mpc.loss_scale/backoff");
    Value *lo = constF32(static_cast<float>(opts.min), "mpc.loss_scale/min");
    Value *hi = constF32(static_cast<float>(opts.max), "mpc.loss_scale/max");
    Value *t1 = node("Add", {tracker, one}, tracker->name() + "/Incremented", i);
    Value *wait = node("Less", {t1, interval}, tracker->name() + "/BelowInterval", b);
    Value *grown = node("Mul", {scale, growth}, scale->name() + "/Grown", f);
    Value *grownC = node("Min", {grown, hi}, scale->name() + "/GrownClamped", f);
    Value *shrunk = node("Mul", {scale, backoff}, scale->name() + "/BackedOff", f);
    Value *shrunkC = node("Max", {shrunk, lo}, scale->name() + "/BackedOffClamped", f);
    Value *clean = node("Where", {wait, scale, grownC}, scale->name() + "/IfClean", f);
    Value *cleanT = node("Where", {wait, t1, zeroI}, tracker->name() + "/IfClean", i);
    Value *nextS = node("Where", {found, shrunkC, clean}, scale->name() + "/Next", f);
    Value *nextT = node("Where", {found, zeroI, cleanT}, tracker->name() + "/Next", i);
    nextS->hasValueInfo = nextT->hasValueInfo = true;
    alg.addOutput(nextS);
    alg.addOutput(nextT);
    ti.updateBinding.emplace_back(scale->name(), nextS->name());
    ti.updateBinding.emplace_back(tracker->name(), nextT->name());
    res.log.push_back(mpc::formatQuoted(
        "Loss scaling: dynamic update: '{0}' = found_inf ? max(S*{1}, {2}) : "
        "(tracker+1 < {3} ? S : min(S*{4}, {5})); '{6}' = found_inf or grown ? "
        "0 "
        ": tracker+1; both bound in update_binding",
        nextS->name(), fmtNumber(opts.backoff), fmtNumber(opts.min), opts.interval,
        fmtNumber(opts.growth), fmtNumber(opts.max), nextT->name()));
  }
  found->hasValueInfo = nonfinite->hasValueInfo = true;
  alg.addOutput(found);
  alg.addOutput(nonfinite);

  // The insertion points keep the list topological; sort only if a corner
  // case (a gradient that is a graph input) broke that.
  if (!isTopological(alg) && !alg.sortTopologically())
    return inputError("internal error: loss scaling made the algorithm graph '{0}' cyclic",
                      alg.name);

  std::string state;
  if (scale)
    state = scale->name() + (tracker ? "\n" + tracker->name() : std::string());
  m.metadataProps.emplace_back(trainkeys::kLossScale, res.config);
  m.metadataProps.emplace_back(trainkeys::kLossScaleState, state);
  m.metadataProps.emplace_back(trainkeys::kFoundInf, found->name());
  m.metadataProps.emplace_back(trainkeys::kGradNonfinite, nonfinite->name());
  return llvm::Error::success();
}

llvm::Expected<LossScalingResult> mpc::insertLossScaling(Model &m, const LossScaleOptions &opts,
                                                         DType target) {
  LossScalingResult res;
  res.mode = effectiveLossScaleMode(opts, target);
  if (opts.fusedUnscale && res.mode != LossScaleMode::Dynamic &&
      res.mode != LossScaleMode::Static)
    return inputError("--fused-unscale needs a scaled loss (--loss-scale dynamic or a number); "
                      "loss scaling {0} has no unscale to fuse",
                      lossScaleModeName(res.mode));
  if (const std::string *prev = m.findMetadata(trainkeys::kLossScale)) {
    if (opts.fusedUnscale)
      return inputError("--fused-unscale: the model carries loss scaling already ({0})", *prev);
    res.status = LossScalingResult::Status::AlreadyScaled;
    res.config = *prev;
    return res;
  }
  res.config = describeConfig(opts, res.mode);
  if (res.mode == LossScaleMode::Off) {
    res.status = LossScalingResult::Status::Off;
    return res;
  }
  std::string why = lossScalingUnsupportedReason(m);
  if (!why.empty())
    return inputError("cannot insert loss scaling: {0}", why);
  if (llvm::Error err = checkLossScaleOptions(opts))
    return std::move(err);
  LossScaler ls(m, opts, res.mode, res);
  if (llvm::Error err = ls.run())
    return std::move(err);
  res.status = LossScalingResult::Status::Inserted;
  return res;
}
