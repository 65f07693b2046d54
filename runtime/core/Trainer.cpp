//===- Trainer.cpp - The training loop of `mpc run --train` ------------------===//
//
// Setup checks everything a run can check before the first step (metadata,
// bindings, kernels of both graphs, batch dims, data arrays), so that bad
// input fails before anything is written. A step gathers the batch rows on
// the host and runs the algorithm graph, which reads the state in place from
// backend buffers and writes the updated state into the other half of each
// double buffer; applying update_binding swaps the halves (Trainer.h).
// Evaluation runs one executor of the inference graph whose state
// initializers are inputs bound to the current halves of the state buffers:
// it reads the state in place (a graph in dynamic mode, which cannot bind,
// gets a fresh executor over a synced copy of the model each time).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Trainer.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace mpc;

uint64_t mpc::splitmix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<int64_t> mpc::trainingPermutation(uint64_t seed, uint64_t epoch, int64_t n) {
  std::vector<int64_t> p(size_t(std::max<int64_t>(n, 0)));
  std::iota(p.begin(), p.end(), int64_t(0));
  // std::shuffle and std::uniform_int_distribution differ between standard
  // libraries; the engine itself is specified bit for bit.
  std::mt19937_64 rng(splitmix64(splitmix64(seed) + epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    uint64_t bound = uint64_t(i) + 1;
    uint64_t threshold = (0 - bound) % bound; // 2^64 mod bound
    uint64_t r;
    do
      r = rng();
    while (r < threshold);
    std::swap(p[size_t(i)], p[size_t(r % bound)]);
  }
  return p;
}

/// Metadata entry `key`, "" when absent.
static std::string metadataValue(const Model &m, llvm::StringRef key) {
  const std::string *v = m.findMetadata(key);
  return v ? *v : std::string();
}

/// Rows `idx` (of the first dim) of `src`, into a tensor of `rows` rows;
/// rows past idx.size() stay zero (padding for a fixed batch dim).
static HostTensor gatherRows(const HostTensor &src, llvm::ArrayRef<int64_t> idx, int64_t rows) {
  std::vector<int64_t> shape = src.shape;
  shape[0] = rows;
  HostTensor out(src.dtype, shape);
  size_t rowBytes = src.shape[0] ? src.bytes.size() / size_t(src.shape[0]) : 0;
  for (size_t i = 0; i < idx.size(); ++i)
    std::memcpy(out.bytes.data() + i * rowBytes, src.bytes.data() + size_t(idx[i]) * rowBytes,
                rowBytes);
  return out;
}

/// Samples [begin, end) of `src`.
static HostTensor sliceRows(const HostTensor &src, int64_t begin, int64_t end) {
  std::vector<int64_t> idx(size_t(end - begin));
  std::iota(idx.begin(), idx.end(), begin);
  return gatherRows(src, idx, end - begin);
}

Trainer::Trainer(Model &m, Backend &b, int64_t batch) : model(m), backend(b), batchSize(batch) {}

Trainer::~Trainer() {
  ring.reset(); // waits for copies still landing in its host memory
  staging.reset(); // waits for uploads still reading its host memory
  clearBuffers();
}

unsigned Trainer::stagingCapacity(size_t batchBytes) {
  size_t want = readbackCapacity() + 1;
  size_t fit = batchBytes ? kStagingBudget / batchBytes : want;
  return unsigned(std::max<size_t>(std::min(want, fit), 2));
}

void Trainer::clearBuffers() {
  backend.synchronize(Stream());
  for (StateBuffer &st : states) {
    if (st.next.data != st.cur.data)
      backend.release(st.next);
    backend.release(st.cur);
    st.cur = st.next = DeviceBuffer();
  }
  for (LogField &f : logFields) {
    backend.release(f.buffer);
    f.buffer = DeviceBuffer();
  }
  for (DeviceBuffer &b : batchBuffers)
    backend.release(b);
  batchBuffers.clear();
  for (DeviceBuffer &b : evalOutputs)
    backend.release(b);
  evalOutputs.clear();
}

TensorRef Trainer::StateBuffer::ref(const DeviceBuffer &b) const {
  TensorRef r;
  r.dtype = dtype;
  r.shape.assign(shape.begin(), shape.end());
  r.data = b.data;
  return r;
}

llvm::Expected<std::unique_ptr<Trainer>> Trainer::create(Model &model, Backend &backend,
                                                         int64_t batch) {
  assert(batch > 0 && "the tool checks --batch");
  std::unique_ptr<Trainer> t(new Trainer(model, backend, batch));
  if (auto err = t->init())
    return std::move(err);
  return std::move(t);
}

Trainer::StateBuffer *Trainer::findState(llvm::StringRef name) {
  auto it = stateIndex.find(name);
  return it == stateIndex.end() ? nullptr : &states[it->second];
}

llvm::Error Trainer::init() {
  if (!model.isTraining() || !model.trainingInfo[0].algorithm)
    return inputError("not a training model: it has no training_info with an algorithm "
                      "graph (see docs/training.md)");
  info = &model.trainingInfo[0];
  const Graph &alg = *info->algorithm;
  const Graph &main = *model.graph;
  if (alg.inputs().empty())
    return inputError("the training algorithm graph has no inputs");
  if (alg.outputs().empty())
    return inputError("the training algorithm graph has no outputs (the loss comes first)");
  inputs.assign(alg.inputs().begin(), alg.inputs().end());
  labels = metadataValue(model, "mpc.training.labels");
  if (labels.empty())
    labels = inputs.back()->name(); // the contract puts the labels last
  if (llvm::none_of(inputs, [&](const Value *v) { return v->name() == labels; }))
    return inputError("mpc.training.labels names '{0}', which is not an input of the "
                      "algorithm graph",
                      labels);
  for (const Value *v : inputs) {
    if (!v->type.isTensor())
      return inputError("algorithm input '{0}' is not a tensor", v->name());
    if (runtimeElementSize(v->type.elem) == 0)
      return inputError("algorithm input '{0}': element type {1} is not supported", v->name(),
                        dtypeName(v->type.elem));
    if (!v->type.hasShape)
      continue;
    if (v->type.dims.empty())
      return inputError("algorithm input '{0}' is a scalar: it has no sample dimension", v->name());
    const Dim &d = v->type.dims[0];
    if (d.isKnown() && d.value != batchSize)
      return inputError("algorithm input '{0}' has a fixed batch dimension of {1}, not "
                        "--batch {2}",
                        v->name(), d.value, batchSize);
  }

  // Inference initializers the step reads but never updates (shape constants,
  // frozen weights) are constants of the step's executor: loaded once, and
  // foldable where a kernel needs them on the host (Reshape's target shape).
  llvm::StringSet<> updated;
  for (const auto &binding : info->updateBinding)
    updated.insert(binding.first);
  auto ex = Executor::createForGraph(alg, backend, [&](const Value *v) {
    return v->graph() == &main && !updated.count(v->name());
  });
  if (!ex)
    return inputError("training step: {0}", llvm::toString(ex.takeError()));
  algorithm = std::move(*ex);

  llvm::StringMap<const Value *> mainInits;
  for (const Value *v : main.initializers())
    mainInits[v->name()] = v;
  llvm::StringMap<const Value *> algOutputs;
  for (const Value *v : alg.outputs())
    algOutputs[v->name()] = v;

  // The feeds: the batch. The state: what the algorithm reads, then what
  // update_binding writes besides, each in backend buffers from here on.
  for (const Value *v : inputs)
    feeds.push_back(NamedTensor{v->name(), HostTensor()});
  std::vector<HostTensor> initial;
  auto addState = [&](const Value *v, bool read) -> llvm::Error {
    auto h = hostTensorFromIR(*v->initializer());
    if (!h)
      return h.takeError();
    StateBuffer st;
    st.name = v->name();
    st.dtype = h->dtype;
    st.shape = h->shape;
    st.bytes = h->byteSize();
    st.read = read;
    stateIndex[st.name] = states.size();
    states.push_back(std::move(st));
    initial.push_back(std::move(*h));
    return llvm::Error::success();
  };
  for (const Value *v : algorithm->outerValues()) {
    if (!v->initializer() || v->graph() != &main)
      return inputError("the training algorithm reads '{0}', which is not an initializer "
                        "of the inference graph",
                        v->name());
    if (auto e = addState(v, true))
      return e;
  }
  for (const auto &binding : info->updateBinding) {
    const std::string &target = binding.first, &source = binding.second;
    auto it = mainInits.find(target);
    if (it == mainInits.end())
      return inputError("update_binding target '{0}' is not an initializer of the "
                        "inference graph",
                        target);
    if (!algOutputs.count(source))
      return inputError("update_binding '{0}' reads '{1}', which is not an output of the "
                        "algorithm graph",
                        target, source);
    if (!findState(target))
      if (auto e = addState(it->second, false))
        return e;
    findState(target)->source = source;
  }
  // Each output may be bound to one buffer: a source feeding two targets
  // (or a state both read and written through copies) takes the copying
  // path, as does a step in dynamic mode.
  llvm::StringSet<> sources;
  deviceState = !algorithm->isDynamic() && !std::getenv("MPC_TRAIN_HOST_STATE");
  for (const auto &binding : info->updateBinding)
    deviceState &= sources.insert(binding.second).second;
  // In place: the step writes a state's new value over its old one where
  // no node reads the old value after that write starts (the fused
  // optimizer step over param and moments, a guarded update's Where;
  // Executor::writeOverProblem). Not the loss scale, whose value before the
  // step is logged after it. MPC_TRAIN_DOUBLE_BUFFER (measurements): every
  // updated state gets its second buffer, with the same results.
  llvm::StringRef scaleName;
  std::string scaleLines = metadataValue(model, "mpc.training.loss_scale_state");
  if (std::vector<llvm::StringRef> l = metadataLines(scaleLines); !l.empty())
    scaleName = l[0];
  bool inPlaceAllowed = deviceState && !std::getenv("MPC_TRAIN_DOUBLE_BUFFER");
  for (size_t i = 0; i < states.size(); ++i) {
    StateBuffer &st = states[i];
    st.inPlace = inPlaceAllowed && !st.source.empty() && st.name != scaleName &&
                 (!st.read || algorithm->writeOverProblem(st.source, st.name).empty());
    xfer.stateTensors += 1;
    xfer.stateBytes += st.bytes;
    if (st.inPlace) {
      xfer.inPlaceTensors += 1;
      xfer.inPlaceBytes += st.bytes;
    } else if (!st.source.empty()) {
      xfer.doubleBufferedTensors += 1;
      xfer.doubleBufferedBytes += st.bytes;
    }
    for (DeviceBuffer *b : {&st.cur, &st.next}) {
      if (b == &st.next && (st.source.empty() || st.inPlace)) {
        if (st.inPlace)
          st.next = st.cur;
        continue;
      }
      auto buf = backend.allocate(std::max<size_t>(st.bytes, 1), BufferKind::Persistent);
      if (!buf)
        return buf.takeError();
      *b = *buf;
    }
    backend.copyToDevice(st.cur.data, initial[i].bytes.data(), st.bytes, Stream());
    xfer.setup += st.bytes;
  }
  backend.synchronize(Stream());
  xfer.deviceState = deviceState;
  // Without device-resident state the feeds also carry the state read.
  if (!deviceState)
    for (size_t i = 0; i < states.size(); ++i)
      if (states[i].read)
        feeds.push_back(NamedTensor{states[i].name, std::move(initial[i])});

  foundInf = metadataValue(model, "mpc.training.found_inf");
  gradNonFinite = metadataValue(model, "mpc.training.grad_nonfinite");
  for (const std::string *name : {&foundInf, &gradNonFinite})
    if (!name->empty() && !algOutputs.count(*name))
      return inputError("metadata names '{0}' as a step output, but the algorithm graph "
                        "has no such output",
                        *name);
  std::string scaleText = metadataValue(model, "mpc.training.loss_scale_state");
  std::vector<llvm::StringRef> scaleState = metadataLines(scaleText);
  if (!scaleState.empty()) {
    lossScaleState = scaleState[0].str();
    if (!findState(lossScaleState))
      return inputError("mpc.training.loss_scale_state names '{0}', which is not training "
                        "state (read by the algorithm or updated by update_binding)",
                        lossScaleState);
  }
  std::string gradText = metadataValue(model, "mpc.training.gradients");
  for (llvm::StringRef line : metadataLines(gradText)) {
    auto [param, grad] = line.split('=');
    if (param.empty() || grad.empty())
      return inputError("mpc.training.gradients: line '{0}' is not PARAM=GRAD", line);
    gradients.emplace_back(param.trim().str(), grad.trim().str());
  }
  gradientsAreOutputs = !gradients.empty() && llvm::all_of(gradients, [&](const auto &pg) {
    return algOutputs.count(pg.second) != 0;
  });
  lossKind = metadataValue(model, "mpc.training.loss_kind");

  // Evaluation feeds each inference input the held-out data of the algorithm
  // input of the same name (the contract), else of the same position among
  // the data inputs (a model whose algorithm inputs are named otherwise).
  std::vector<size_t> dataIndex;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->name() != labels)
      dataIndex.push_back(i);
  std::vector<const Value *> infInputs;
  for (const Value *v : main.inputs())
    if (!v->initializer())
      infInputs.push_back(v);
  if (infInputs.size() != dataIndex.size())
    return inputError("the inference graph has {0} inputs, the algorithm graph {1} data "
                      "inputs besides the labels '{2}'",
                      infInputs.size(), dataIndex.size(), labels);
  for (size_t k = 0; k < infInputs.size(); ++k) {
    size_t src = dataIndex[k];
    for (size_t i : dataIndex)
      if (inputs[i]->name() == infInputs[k]->name())
        src = i;
    const Type &a = infInputs[k]->type, &b = inputs[src]->type;
    if (a.elem != b.elem)
      return inputError("inference input '{0}' is {1}, the algorithm input '{2}' feeding it "
                        "in evaluation is {3}",
                        infInputs[k]->name(), dtypeName(a.elem), inputs[src]->name(),
                        dtypeName(b.elem));
    evalInputs.emplace_back(infInputs[k], src);
  }
  findClassCount();
  // The evaluated cross-entropy reads the first output as probabilities or
  // log-probabilities when a Softmax or LogSoftmax over the class axis makes
  // it, else as logits.
  if (const Node *p = main.outputs().empty() ? nullptr : main.outputs()[0]->producer()) {
    int64_t rank = int64_t(p->output(0)->type.dims.size());
    int64_t axis = p->intAttr("axis", -1);
    bool onClasses = classAxis < 0 ? axis == -1 || (p->output(0)->type.hasShape &&
                                                    axis == rank - 1)
                                   : axis == classAxis ||
                                         (p->output(0)->type.hasShape && axis + rank == classAxis);
    if (p->domain.empty() && p->opType == "Softmax" && onClasses)
      outputKind = OutputKind::Probabilities;
    if (p->domain.empty() && p->opType == "LogSoftmax" && onClasses)
      outputKind = OutputKind::LogProbabilities;
  }
  auto inf = Executor::create(model, backend);
  if (!inf)
    return inputError("inference graph: {0}", llvm::toString(inf.takeError()));
  return llvm::Error::success();
}

/// The loss ops whose labels are class indices (axis 1 of the scores counts
/// the classes) with an optional ignore_index.
static bool isClassLoss(const Node &n) {
  return n.opType == "SoftmaxCrossEntropyLoss" || n.opType == "NegativeLogLikelihoodLoss";
}

/// The entries of a constant int64 tensor (an initializer or a Constant
/// node's value); false when `v` is not one.
static bool constantShape(const Value *v, std::vector<int64_t> &out) {
  const Tensor *t = v ? v->initializer() : nullptr;
  if (!t && v && v->producer() && v->producer()->opType == "Constant")
    if (const Attribute *a = v->producer()->attr("value"))
      if (!a->tensors.empty())
        t = &a->tensors[0];
  if (!t || t->isExternal() || t->dtype != DType::I64)
    return false;
  for (int64_t i = 0; i < t->numElements(); ++i)
    out.push_back(t->getAsInt64(i));
  return true;
}

/// Follows axis `axis` of `v` back through ops that keep or permute its
/// layout (Transpose, Identity, Cast, Softmax, LogSoftmax) and through a
/// Reshape to [M, C] of a rank-`rank` value whose last dimension is C
/// (`classes`), as F.cross_entropy(logits.view(-1, C), ...) exports; stops
/// at any other producer, the root, which `root` receives. Returns the axis
/// of the root, -1 when a Transpose has no usable perm.
static int64_t traceAxis(const Value *v, int64_t axis, int64_t rank, int64_t classes,
                         const Value *&root) {
  for (unsigned guard = 0; guard < 1000; ++guard) {
    const Node *p = v->producer();
    if (!p || !(p->domain.empty() || p->domain == "ai.onnx") || !p->numInputs() || !p->input(0))
      break;
    llvm::StringRef op = p->opType;
    std::vector<int64_t> to;
    if (op == "Transpose") {
      const Attribute *perm = p->attr("perm");
      if (!perm || axis >= int64_t(perm->ints.size()))
        return -1;
      axis = perm->ints[size_t(axis)];
    } else if (op == "Reshape" && p->numInputs() > 1 && constantShape(p->input(1), to) &&
               to.size() == 2 && axis == 1 && classes > 0 && to[1] == classes && rank > 2) {
      axis = rank - 1;
    } else if (op != "Identity" && op != "Cast" && op != "Softmax" && op != "LogSoftmax") {
      break;
    }
    v = p->input(0);
  }
  root = v;
  return axis;
}

void Trainer::findClassCount() {
  const Graph &main = *model.graph;
  const Value *y = main.outputs().empty() ? nullptr : main.outputs()[0];
  int64_t yRank = y && y->type.hasShape ? int64_t(y->type.dims.size()) : -1;
  const Node *loss = nullptr;
  forEachGraph(const_cast<Graph &>(*info->algorithm), [&](Graph &g) {
    for (const Node &n : g.nodes()) {
      if (!isClassLoss(n))
        continue;
      if (const Attribute *a = n.attr("ignore_index"))
        ignoredLabels.push_back(a->i);
      if (!loss && n.numInputs() && n.input(0))
        loss = &n;
    }
  });
  // The loss reads classes on axis 1 of its scores; which axis of the first
  // output is that? Without a class loss, or for [N, C], the last.
  if (loss && yRank > 2) {
    // Both the loss's scores (algorithm graph) and the output (inference
    // graph) are followed back to their root, the same value in the forward
    // copy and in the model: the output's class axis is the one that reaches
    // the root axis the scores' axis 1 reaches.
    const Dim &last = y->type.dims.back();
    const Value *lossRoot = nullptr, *yRoot = nullptr;
    int64_t rootAxis = traceAxis(loss->input(0), 1, yRank, last.isKnown() ? last.value : 0,
                                 lossRoot);
    int64_t axis = -2;
    for (int64_t a = 0; a < yRank && rootAxis >= 0; ++a)
      if (traceAxis(y, a, yRank, 0, yRoot) == rootAxis)
        axis = a;
    const Node *lp = lossRoot ? lossRoot->producer() : nullptr;
    const Node *yp = yRoot ? yRoot->producer() : nullptr;
    bool sameRoot = lp && yp && lp->opType == yp->opType && lp->domain == yp->domain;
    if (sameRoot && axis >= 1)
      classAxis = axis == yRank - 1 ? -1 : axis;
    else
      classLayoutError = "evaluation: cannot tell which axis of the first output " +
                         quoteName(y->name()) + " holds the classes that the loss node " +
                         quoteName(loss->name) + " scores on axis 1 of " +
                         quoteName(loss->input(0)->name()) +
                         " (--holdout 0 trains without evaluation)";
  }
  if (y && yRank > 0 && classLayoutError.empty()) {
    const Dim &d = y->type.dims[size_t(classAxis < 0 ? yRank - 1 : classAxis)];
    if (d.isKnown()) {
      classCount = d.value;
      classSource = classAxis < 0 ? "the last dimension of the first output " + quoteName(y->name())
                                  : "dimension " + std::to_string(classAxis) +
                                        " of the first output " + quoteName(y->name());
    }
  }
  if (!classCount && loss) {
    const Value *scores = loss->input(0);
    if (scores->type.hasShape && scores->type.dims.size() >= 2 && scores->type.dims[1].isKnown()) {
      classCount = scores->type.dims[1].value;
      classSource = "the scores of the loss node " + quoteName(loss->name);
    }
  }
}

llvm::Error Trainer::checkEvalLayout(const HostTensor &labels, const std::string &name) const {
  if (!classLayoutError.empty())
    return inputError("{0}", classLayoutError);
  const Graph &main = *model.graph;
  const Value *y = main.outputs().empty() ? nullptr : main.outputs()[0];
  if (!y || !y->type.hasShape || y->type.dims.size() < 2)
    return llvm::Error::success();
  size_t r = y->type.dims.size(), axis = classAxis < 0 ? r - 1 : size_t(classAxis);
  // Labels: the output's shape without the class axis.
  std::vector<Dim> want(y->type.dims.begin(), y->type.dims.end());
  want.erase(want.begin() + long(axis));
  bool ok = labels.shape.size() == want.size();
  for (size_t i = 1; ok && i < want.size(); ++i)
    ok = !want[i].isKnown() || want[i].value == labels.shape[i];
  if (ok)
    return llvm::Error::success();
  Type wantType = y->type;
  wantType.dims = want;
  return inputError("data array '{0}' has shape {1}, but evaluation reads the first output {2} "
                    "{3} with the classes on axis {4}, so it needs labels {5}",
                    name, formatShape(labels.shape), quoteName(y->name()), y->type.dimsText(", "),
                    axis, wantType.dimsText());
}

/// `shape`'s multi-index of flat element `i`: "[2, 0]".
static std::string indexText(llvm::ArrayRef<int64_t> shape, int64_t i) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return formatShape(idx);
}

/// Element `i` of an integer tensor, exactly.
static int64_t integerAt(const HostTensor &t, int64_t i) {
  if (t.dtype == DType::I64 || t.dtype == DType::U64) {
    int64_t v;
    std::memcpy(&v, t.bytes.data() + size_t(i) * sizeof(v), sizeof(v));
    return v;
  }
  return int64_t(t.getAsDouble(i));
}

llvm::Error Trainer::checkValues(const HostTensor &t, const std::string &name,
                                 bool isLabels) const {
  int64_t n = t.numElements();
  if (isFloatingPoint(t.dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      double v = t.getAsDouble(i);
      if (!std::isfinite(v))
        return inputError("data array '{0}' at {1}: value {2} is not finite", name,
                          indexText(t.shape, i), std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    }
    return llvm::Error::success();
  }
  if (!isLabels || t.dtype == DType::Bool)
    return llvm::Error::success();
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = t.dtype == DType::U64 ? int64_t(std::min<uint64_t>(uint64_t(integerAt(t, i)),
                                                                   uint64_t(INT64_MAX)))
                                      : integerAt(t, i);
    if ((v >= 0 && (!classCount || v < classCount)) || llvm::is_contained(ignoredLabels, v))
      continue;
    if (classCount)
      return inputError("data array '{0}' at {1}: label {2} is not a class: the model has {3} "
                        "classes, 0 to {4} ({5})",
                        name, indexText(t.shape, i), v, classCount, classCount - 1, classSource);
    return inputError("data array '{0}' at {1}: label {2} is negative", name,
                      indexText(t.shape, i), v);
  }
  return llvm::Error::success();
}

llvm::Error Trainer::setData(std::vector<NamedTensor> arrays, double holdout) {
  llvm::StringMap<HostTensor *> byName;
  std::string available;
  for (NamedTensor &t : arrays) {
    byName[t.name] = &t.tensor;
    available += (available.empty() ? "" : ", ") + t.name;
  }
  auto check = [&](const Value *v, const std::string &name, const HostTensor &t) -> llvm::Error {
    const Type &decl = v->type;
    if (t.dtype != decl.elem)
      return inputError("data array '{0}': element type {1}, the model's input '{2}' is {3}", name,
                        dtypeName(t.dtype), v->name(), dtypeName(decl.elem));
    if (t.shape.empty())
      return inputError("data array '{0}' is a scalar: its first dimension must count samples",
                        name);
    bool ok = !decl.hasShape || decl.dims.size() == t.shape.size();
    for (size_t d = 1; ok && decl.hasShape && d < t.shape.size(); ++d)
      ok = !decl.dims[d].isKnown() || decl.dims[d].value == t.shape[d];
    if (!ok)
      return inputError("data array '{0}': shape {1} does not fit the model's input '{2}' "
                        "{3} (first dimension: samples)",
                        name, formatShape(t.shape), v->name(), decl.dimsText());
    return llvm::Error::success();
  };
  bool anyTest =
      llvm::any_of(inputs, [&](const Value *v) { return byName.count(v->name() + "_test") != 0; });
  std::vector<HostTensor *> train, test;
  for (const Value *v : inputs) {
    HostTensor *t = byName.lookup(v->name());
    if (!t)
      return inputError("data: no array '{0}' for the model's input '{0}' (the file has: {1})",
                        v->name(), available.empty() ? "nothing" : available);
    if (auto err = check(v, v->name(), *t))
      return err;
    train.push_back(t);
    if (!anyTest)
      continue;
    HostTensor *h = byName.lookup(v->name() + "_test");
    if (!h)
      return inputError("data: no array '{0}_test' (other inputs have a held-out array)",
                        v->name());
    if (auto err = check(v, v->name() + "_test", *h))
      return err;
    test.push_back(h);
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (train[i]->shape[0] != train[0]->shape[0])
      return inputError("data array '{0}' has {1} samples, but '{2}' has {3}", inputs[i]->name(),
                        train[i]->shape[0], inputs[0]->name(), train[0]->shape[0]);
    if (anyTest && test[i]->shape[0] != test[0]->shape[0])
      return inputError("data array '{0}_test' has {1} samples, but '{2}_test' has {3}",
                        inputs[i]->name(), test[i]->shape[0], inputs[0]->name(), test[0]->shape[0]);
  }
  // Every value is checked before the first step: a bad label or a NaN
  // feature must not surface at the step (or evaluation) that meets it.
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool isLabels = inputs[i]->name() == labels;
    if (auto err = checkValues(*train[i], inputs[i]->name(), isLabels))
      return err;
    if (anyTest)
      if (auto err = checkValues(*test[i], inputs[i]->name() + "_test", isLabels))
        return err;
  }
  // Evaluation must read the held-out labels as the loss does: say so now,
  // not at the first evaluation.
  bool evaluates = anyTest || int64_t(std::floor(double(train[0]->shape[0]) * holdout)) > 0;
  for (size_t i = 0; i < inputs.size() && evaluates; ++i)
    if (inputs[i]->name() == labels && !isFloatingPoint(train[i]->dtype))
      if (auto err = checkEvalLayout(anyTest ? *test[i] : *train[i],
                                     inputs[i]->name() + (anyTest ? "_test" : "")))
        return err;
  int64_t n = train[0]->shape[0];
  trainData.clear();
  testData.clear();
  if (anyTest) {
    numTrain = n;
    numTest = test[0]->shape[0];
    for (size_t i = 0; i < inputs.size(); ++i) {
      trainData.push_back(std::move(*train[i]));
      testData.push_back(std::move(*test[i]));
    }
  } else {
    numTest = int64_t(std::floor(double(n) * holdout));
    numTrain = n - numTest;
    for (size_t i = 0; i < inputs.size(); ++i) {
      testData.push_back(sliceRows(*train[i], numTrain, n));
      trainData.push_back(sliceRows(*train[i], 0, numTrain));
    }
  }
  if (numTrain < batchSize)
    return inputError("data: {0} training samples, fewer than one batch of {1}", numTrain,
                      batchSize);
  // Evaluation runs the inference graph on chunks of evalChunk() samples:
  // a chunk that cannot be allocated is refused now, not after the steps.
  if (numTest > 0) {
    int64_t chunk = evalChunk();
    if (chunk <= 0)
      return inputError("inference graph: a fixed batch dimension of {0}", chunk);
    for (const auto &[v, src] : evalInputs) {
      std::vector<int64_t> shape = testData[src].shape;
      shape[0] = chunk;
      if (auto b = checkedTensorBytes(shape, testData[src].dtype,
                                      "evaluation: inference input '" + v->name() + "'");
          !b)
        return b.takeError();
    }
  }
  return llvm::Error::success();
}

int64_t Trainer::evalChunk() const {
  // A fixed batch dim of the inference graph sets the chunk size (the last
  // chunk is padded with zero rows).
  int64_t chunk = batchSize;
  for (const auto &[v, src] : evalInputs)
    if (v->type.hasShape && !v->type.dims.empty() && v->type.dims[0].isKnown())
      chunk = v->type.dims[0].value;
  return chunk;
}

void Trainer::setPosition(uint64_t seed, uint64_t stepsDone) {
  seedValue = seed;
  done = stepsDone;
  permEpoch = ~uint64_t(0);
}

static double scalarOf(const HostTensor *t) {
  return t && t->numElements() > 0 ? t->getAsDouble(0) : NAN;
}

llvm::Expected<StepResult> Trainer::step() {
  assert(pendingResults() == 0 && "nextResult() first");
  auto k = launchStep();
  if (!k)
    return k.takeError();
  auto r = nextResult(true);
  if (!r)
    return r.takeError();
  return std::move(**r);
}

llvm::Error Trainer::failureError() const {
  return inputError("training step {0}: {1}", failedStep, failure);
}

llvm::Error Trainer::observePending() {
  while (!failed() && ring && ring->size())
    takeFromRing(true);
  return failed() ? failureError() : llvm::Error::success();
}

llvm::Expected<uint64_t> Trainer::launchStep() {
  assert(numTrain >= batchSize && "setData() first");
  if (failed())
    return failureError();
  int64_t nb = batchesPerEpoch();
  StepResult r;
  r.epoch = done / uint64_t(nb);
  uint64_t b = done % uint64_t(nb);
  if (permEpoch != r.epoch) {
    if (shuffleOn) {
      perm = trainingPermutation(seedValue, r.epoch, numTrain);
    } else {
      perm.resize(size_t(numTrain));
      std::iota(perm.begin(), perm.end(), int64_t(0));
    }
    permEpoch = r.epoch;
  }
  llvm::ArrayRef<int64_t> rows(perm.data() + b * uint64_t(batchSize), size_t(batchSize));
  for (size_t i = 0; i < inputs.size(); ++i)
    feeds[i].tensor = gatherRows(trainData[i], rows, batchSize);
  TransferStats before = algorithm->transferStats();
  llvm::Error e = deviceState ? runStepDeviceState(r) : runStepHostState(r);
  if (failed()) { // an earlier step's record, taken to free its slot
    llvm::consumeError(std::move(e));
    return failureError();
  }
  if (e)
    return inputError("training step {0}: {1}", done + 1, llvm::toString(std::move(e)));
  const TransferStats &after = algorithm->transferStats();
  xfer.stepHostToDevice += after.hostToDevice - before.hostToDevice;
  xfer.stepDeviceToHost += after.deviceToHost - before.deviceToHost;
  ++xfer.steps;
  ++launched;
  return ++done;
}

llvm::Error Trainer::planStep() {
  assert(numTrain >= batchSize && "setData() first");
  std::vector<int64_t> rows(static_cast<size_t>(batchSize));
  std::iota(rows.begin(), rows.end(), int64_t(0));
  for (size_t i = 0; i < inputs.size(); ++i)
    feeds[i].tensor = gatherRows(trainData[i], rows, batchSize);
  if (!deviceState)
    return algorithm->plan(feeds);
  if (!devicePrepared)
    if (auto e = prepareDeviceStep())
      return e;
  // Binding the logged outputs dropped that plan: the one the first step
  // runs (what memoryStats() reports).
  return algorithm->plan(staging ? llvm::ArrayRef<NamedTensor>()
                                 : llvm::ArrayRef<NamedTensor>(feeds));
}

llvm::Expected<std::optional<StepResult>> Trainer::nextResult(bool wait) {
  if (finished.empty() && !failed())
    takeFromRing(wait);
  if (finished.empty())
    return failed() ? llvm::Expected<std::optional<StepResult>>(failureError())
                    : std::optional<StepResult>();
  StepResult r = std::move(finished.front());
  finished.pop_front();
  ++delivered;
  return std::optional<StepResult>(std::move(r));
}

void Trainer::takeFromRing(bool wait) {
  if (!failed() && ring && ring->ready(wait)) {
    // The step's kernel error record, copied behind it (the last field):
    // a failed step has no result, and the trainer stops at it.
    KernelErrorRecord rec =
        ring->fieldAs<KernelErrorRecord>(unsigned(logFields.size()));
    uint64_t gen = ringGenerations.front();
    ringGenerations.pop_front();
    if (llvm::Error e = algorithm->recordError(rec, gen)) {
      failedStep = ring->tag();
      failure = llvm::toString(std::move(e));
      ring->take();
      return;
    }
    StepResult r;
    r.step = ring->tag();
    r.epoch = (r.step - 1) / uint64_t(batchesPerEpoch());
    // The fields, as host tensors of the values they copied.
    std::vector<HostTensor> values;
    llvm::StringMap<const HostTensor *> out;
    const HostTensor *loss = nullptr, *scaleBefore = nullptr, *scaleAfter = nullptr;
    values.reserve(logFields.size());
    for (size_t f = 0; f < logFields.size(); ++f) {
      const LogField &lf = logFields[f];
      values.emplace_back(lf.dtype, lf.shape);
      std::memcpy(values.back().bytes.data(), ring->field(unsigned(f)), lf.bytes);
      const HostTensor *h = &values.back();
      if (lf.output.empty())
        (lf.before ? scaleBefore : scaleAfter) = h;
      else if (f == 0)
        loss = h;
      else
        out[lf.output] = h;
    }
    decodeLogs(r, out, loss, scaleBefore, scaleAfter);
    ring->take();
    finished.push_back(std::move(r));
  }
}

void Trainer::decodeLogs(StepResult &r, const llvm::StringMap<const HostTensor *> &out,
                         const HostTensor *loss, const HostTensor *scaleBefore,
                         const HostTensor *scaleAfter) const {
  r.loss = scalarOf(loss);
  if (!lossScaleState.empty()) {
    r.hasLossScale = true;
    r.lossScaleBefore = scalarOf(scaleBefore);
    r.lossScaleAfter = scalarOf(scaleAfter);
  }
  if (!foundInf.empty())
    r.skipped = scalarOf(out.lookup(foundInf)) != 0;
  if (!gradNonFinite.empty()) {
    const HostTensor *g = out.lookup(gradNonFinite);
    for (size_t i = 0; i < gradients.size() && int64_t(i) < g->numElements(); ++i)
      if (std::isnan(g->getAsDouble(int64_t(i))))
        r.nonFiniteGradients.push_back(gradients[i].first);
  }
  if (gradientsAreOutputs) {
    int64_t zeros = 0, total = 0;
    for (const auto &pg : gradients) {
      const HostTensor *g = out.lookup(pg.second);
      total += g->numElements();
      for (int64_t e = 0; e < g->numElements(); ++e)
        zeros += g->getAsDouble(e) == 0;
    }
    r.hasGradZeroFraction = true;
    r.gradZeroFraction = total ? double(zeros) / double(total) : 0;
  }
}

/// Index of the algorithm output `name`.
static size_t outputIndex(const Graph &g, llvm::StringRef name) {
  for (size_t k = 0; k < g.outputs().size(); ++k)
    if (g.outputs()[k]->name() == name)
      return k;
  llvm_unreachable("init() checked the names");
}

llvm::Error Trainer::bindState() {
  for (StateBuffer &st : states) {
    if (st.read)
      if (auto e = algorithm->bindInput(st.name, st.ref(st.cur)))
        return e;
    if (st.source.empty())
      continue;
    // Written over the old value (the binding follows the input's).
    if (st.inPlace && st.read) {
      if (auto e = algorithm->bindOutputOver(st.source, st.name))
        return e;
    } else if (auto e = algorithm->bindOutput(st.source, st.ref(st.next))) {
      return e;
    }
  }
  return llvm::Error::success();
}

llvm::Error Trainer::prepareStaging() {
  size_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const HostTensor &t = feeds[i].tensor;
    auto buf = backend.allocate(std::max<size_t>(t.byteSize(), 1), BufferKind::Persistent);
    if (!buf)
      return buf.takeError();
    batchBuffers.push_back(*buf);
    TensorRef ref;
    ref.dtype = t.dtype;
    ref.shape.assign(t.shape.begin(), t.shape.end());
    ref.data = buf->data;
    if (auto e = algorithm->bindInput(feeds[i].name, ref))
      return e;
    batchOffsets.push_back(total);
    total += (t.byteSize() + 63) / 64 * 64;
  }
  stagingChannel = backend.createReadback();
  staging = std::make_unique<StagingRing>(*stagingChannel, total, stagingCapacity(total));
  return llvm::Error::success();
}

void Trainer::stageBatch() {
  Stream stream = algorithm->executionStream();
  uint8_t *slot = staging->acquire();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const HostTensor &t = feeds[i].tensor;
    std::memcpy(slot + batchOffsets[i], t.bytes.data(), t.byteSize());
    staging->upload(batchBuffers[i].data, batchOffsets[i], t.byteSize(), stream);
    xfer.stepHostToDevice += t.byteSize();
  }
  staging->commit(stream);
}

llvm::Error Trainer::prepareDeviceStep() {
  if (auto e = bindState())
    return e;
  // On a device the batch is bound too (staged through pinned memory, not
  // passed to run()); on the CPU it is read where it is.
  if (!backend.isHostMemory())
    if (auto e = prepareStaging())
      return e;
  if (auto e = algorithm->plan(staging ? llvm::ArrayRef<NamedTensor>()
                                       : llvm::ArrayRef<NamedTensor>(feeds)))
    return e;
  // The logged outputs: those update_binding writes are read from the
  // state's new buffer, the others are written into buffers of their own.
  const Graph &alg = *info->algorithm;
  llvm::StringMap<const StateBuffer *> bySource;
  for (const StateBuffer &st : states)
    if (!st.source.empty())
      bySource[st.source] = &st;
  auto addOutput = [&](llvm::StringRef name, bool whole) -> llvm::Error {
    for (const LogField &f : logFields)
      if (f.output == name && whole == !f.shape.empty())
        return llvm::Error::success();
    size_t k = outputIndex(alg, name);
    const ShapedType &t = algorithm->plannedOutputType(k);
    LogField f;
    f.output = name.str();
    f.dtype = t.dtype;
    int64_t n = 1;
    for (int64_t d : t.shape)
      n *= d;
    if (whole)
      f.shape = t.shape;
    else
      f.shape = {std::min<int64_t>(n, 1)};
    f.bytes = size_t(whole ? n : std::min<int64_t>(n, 1)) * runtimeElementSize(t.dtype);
    if (!bySource.count(name)) {
      size_t all = size_t(n) * runtimeElementSize(t.dtype);
      auto buf = backend.allocate(std::max<size_t>(all, 1), BufferKind::Persistent);
      if (!buf)
        return buf.takeError();
      f.buffer = *buf;
      TensorRef ref;
      ref.dtype = t.dtype;
      ref.shape.assign(t.shape.begin(), t.shape.end());
      ref.data = buf->data;
      if (auto e = algorithm->bindOutput(name, ref))
        return e;
    }
    logFields.push_back(std::move(f));
    return llvm::Error::success();
  };
  if (auto e = addOutput(alg.outputs()[0]->name(), false))
    return e;
  if (!lossScaleState.empty())
    for (bool before : {true, false}) {
      const StateBuffer &st = *findState(lossScaleState);
      LogField f;
      f.before = before;
      f.dtype = st.dtype;
      f.shape = {std::min<int64_t>(int64_t(st.bytes / runtimeElementSize(st.dtype)), 1)};
      f.bytes = size_t(f.shape[0]) * runtimeElementSize(st.dtype);
      logFields.push_back(std::move(f));
    }
  if (!foundInf.empty())
    if (auto e = addOutput(foundInf, false))
      return e;
  if (!gradNonFinite.empty())
    if (auto e = addOutput(gradNonFinite, true))
      return e;
  if (gradientsAreOutputs)
    for (const auto &pg : gradients)
      if (auto e = addOutput(pg.second, true))
        return e;
  std::vector<size_t> sizes;
  for (const LogField &f : logFields)
    sizes.push_back(f.bytes);
  sizes.push_back(sizeof(KernelErrorRecord)); // the step's error record, last
  channel = backend.createReadback();
  ring = std::make_unique<ReadbackRing>(*channel, sizes, readbackCapacity());
  // The step does not wait for itself: its error record travels in its ring
  // record and is checked when the host takes that (takeFromRing).
  // MPC_TRAIN_SYNC_STEPS (measurements): every step waits for itself at its
  // end, as a run does, with the same results.
  algorithm->setDeferredErrors(!std::getenv("MPC_TRAIN_SYNC_STEPS"));
  devicePrepared = true;
  return llvm::Error::success();
}

llvm::Error Trainer::runStepDeviceState(StepResult &) {
  if (!devicePrepared) {
    if (auto e = prepareDeviceStep())
      return e;
  } else if (auto e = bindState()) { // the halves swapped: pointers only
    return e;
  }
  if (ring->full()) {
    // The host fell readbackCapacity() steps behind: wait for the oldest
    // (the only wait of a step; it may find that step failed).
    takeFromRing(true);
    if (failed())
      return llvm::Error::success();
  }
  if (staging)
    stageBatch();
  auto outs = algorithm->run(staging ? llvm::ArrayRef<NamedTensor>()
                                     : llvm::ArrayRef<NamedTensor>(feeds));
  if (!outs)
    return outs.takeError();
  // Queued behind the step on its stream: the logged values and the error
  // record, then the swap. The step wrote `next` and left `cur` alone, so
  // `cur` still holds the values before it.
  Stream stream = algorithm->executionStream();
  ring->begin(done + 1);
  ringGenerations.push_back(algorithm->callsGeneration());
  for (size_t f = 0; f < logFields.size(); ++f) {
    const LogField &lf = logFields[f];
    const void *src = lf.buffer.data;
    if (lf.output.empty()) {
      const StateBuffer &st = *findState(lossScaleState);
      src = lf.before || st.source.empty() ? st.cur.data : st.next.data;
    } else if (!src) {
      for (const StateBuffer &st : states)
        if (st.source == lf.output)
          src = st.next.data;
    }
    ring->copy(unsigned(f), src, stream);
    xfer.readback += lf.bytes;
  }
  ring->copy(unsigned(logFields.size()), algorithm->errorRecord(), stream);
  ring->commit(stream);
  for (StateBuffer &st : states)
    if (!st.source.empty())
      std::swap(st.cur, st.next);
  return llvm::Error::success();
}

llvm::Error Trainer::runStepHostState(StepResult &r) {
  // The state the step reads, copied out of its buffers into the feeds.
  for (size_t i = inputs.size(); i < feeds.size(); ++i) {
    const StateBuffer &st = *findState(feeds[i].name);
    backend.copyToHost(feeds[i].tensor.bytes.data(), st.cur.data, st.bytes, Stream());
    xfer.stateCopied += st.bytes;
  }
  backend.synchronize(Stream());
  auto outs = algorithm->run(feeds);
  if (!outs)
    return outs.takeError();
  llvm::StringMap<const HostTensor *> out;
  for (const NamedTensor &t : *outs)
    out[t.name] = &t.tensor;
  for (const auto &[target, source] : info->updateBinding) {
    const StateBuffer &dst = *findState(target);
    const HostTensor *src = out.lookup(source);
    if (src->dtype != dst.dtype || src->shape != dst.shape)
      return inputError("update_binding '{0}' <- '{1}': the step produced {2} {3}, the "
                        "initializer is {4} {5}",
                        target, source, dtypeName(src->dtype), formatShape(src->shape),
                        dtypeName(dst.dtype), formatShape(dst.shape));
  }
  // Checked first, applied second: a failed step changes no state.
  HostTensor scaleBefore, scaleAfter;
  StateBuffer *scale = lossScaleState.empty() ? nullptr : findState(lossScaleState);
  if (scale) {
    scaleBefore = HostTensor(scale->dtype, scale->shape);
    backend.copyToHost(scaleBefore.bytes.data(), scale->cur.data, scale->bytes, Stream());
  }
  for (const auto &[target, source] : info->updateBinding) {
    StateBuffer &dst = *findState(target);
    backend.copyToDevice(dst.next.data, out.lookup(source)->bytes.data(), dst.bytes, Stream());
    xfer.stateCopied += dst.bytes;
  }
  for (StateBuffer &st : states)
    if (!st.source.empty())
      std::swap(st.cur, st.next);
  if (scale) {
    scaleAfter = HostTensor(scale->dtype, scale->shape);
    backend.copyToHost(scaleAfter.bytes.data(), scale->cur.data, scale->bytes, Stream());
  }
  backend.synchronize(Stream());
  r.step = done + 1;
  decodeLogs(r, out, &outs->front().tensor, scale ? &scaleBefore : nullptr,
             scale ? &scaleAfter : nullptr);
  finished.push_back(std::move(r));
  return llvm::Error::success();
}

llvm::Error Trainer::syncModel() {
  if (auto e = observePending())
    return e;
  backend.synchronize(Stream());
  std::vector<uint8_t> bytes;
  for (Value *v : model.graph->initializers())
    if (const StateBuffer *st = findState(v->name())) {
      bytes.resize(st->bytes);
      backend.copyToHost(bytes.data(), st->cur.data, st->bytes, Stream());
      backend.synchronize(Stream());
      v->initializer()->setBytes(bytes);
      xfer.synced += st->bytes;
    }
  return llvm::Error::success();
}

llvm::Expected<Executor *> Trainer::inferenceExecutor() {
  if (!inference || inference->isDynamic()) {
    // The state initializers become inputs bound below; in dynamic mode an
    // executor cannot bind, so it reads a synced copy of the model instead.
    if (inference)
      if (auto e = syncModel())
        return std::move(e);
    auto ex = inference ? Executor::create(model, backend)
                        : Executor::createForGraph(*model.graph, backend, nullptr,
                                                   [&](const Value *v) {
                                                     return findState(v->name()) != nullptr;
                                                   });
    if (!ex)
      return ex.takeError();
    if (!inference && !(*ex)->outerValues().empty())
      return inputError("graph reads '{0}', which no graph defines",
                        (*ex)->outerValues()[0]->name());
    bool first = !inference;
    inference = std::move(*ex);
    if (first && inference->isDynamic())
      return inferenceExecutor();
    if (inference->isDynamic())
      return inference.get();
  }
  for (const Value *v : model.graph->initializers())
    if (StateBuffer *st = findState(v->name()))
      if (auto e = inference->bindInput(st->name, st->ref(st->cur)))
        return std::move(e);
  return inference.get();
}

/// Bytes of a planned value.
static size_t plannedBytes(const ShapedType &t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  return size_t(n) * runtimeElementSize(t.dtype);
}

llvm::Error Trainer::evaluateQueued(
    Executor &ex, int64_t chunk,
    llvm::function_ref<std::vector<NamedTensor>(int64_t)> chunkInputs,
    llvm::function_ref<llvm::Error(int64_t, const NamedTensor &)> score) {
  // Every chunk has the first chunk's shapes: one plan, outputs bound to
  // device buffers of their own (made once per shape).
  if (auto e = ex.plan(chunkInputs(0)))
    return inputError("evaluation: {0}", llvm::toString(std::move(e)));
  const Graph &g = *model.graph;
  evalOutputs.resize(g.outputs().size());
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const ShapedType &t = ex.plannedOutputType(k);
    size_t bytes = plannedBytes(t);
    if (!evalOutputs[k].data || evalOutputs[k].size < std::max<size_t>(bytes, 1)) {
      if (evalOutputs[k].data) {
        backend.synchronize(Stream()); // an earlier evaluation may still write it
        backend.release(evalOutputs[k]);
        evalOutputs[k] = DeviceBuffer();
      }
      auto buf = backend.allocate(std::max<size_t>(bytes, 1), BufferKind::Persistent);
      if (!buf)
        return buf.takeError();
      evalOutputs[k] = *buf;
    }
    TensorRef ref;
    ref.dtype = t.dtype;
    ref.shape.assign(t.shape.begin(), t.shape.end());
    ref.data = evalOutputs[k].data;
    if (auto e = ex.bindOutput(g.outputs()[k]->name(), ref))
      return e;
  }
  const ShapedType yType = ex.plannedOutputType(0);
  size_t yBytes = plannedBytes(yType);
  // Each chunk is queued without waiting; its first output and its error
  // record are copied behind it into a ring of host records, which the host
  // takes oldest first (waiting only when the ring is full, and at the end).
  ex.setDeferredErrors(true);
  if (!evalChannel)
    evalChannel = backend.createReadback();
  ReadbackRing ring(*evalChannel, {yBytes, sizeof(KernelErrorRecord)}, kEvalRing);
  std::deque<uint64_t> generations;
  Stream stream = ex.executionStream();
  auto takeOldest = [&]() -> llvm::Error {
    ring.ready(true);
    KernelErrorRecord rec = ring.fieldAs<KernelErrorRecord>(1);
    uint64_t gen = generations.front();
    generations.pop_front();
    int64_t begin = int64_t(ring.tag());
    NamedTensor y{g.outputs()[0]->name(), HostTensor(yType.dtype, yType.shape)};
    std::memcpy(y.tensor.bytes.data(), ring.field(0), yBytes);
    ring.take();
    if (auto e = ex.recordError(rec, gen))
      return inputError("evaluation: {0}", llvm::toString(std::move(e)));
    return score(begin, y);
  };
  for (int64_t begin = 0; begin < numTest; begin += chunk) {
    if (ring.full())
      if (auto e = takeOldest())
        return e;
    auto outs = ex.run(chunkInputs(begin));
    if (!outs)
      return inputError("evaluation: {0}", llvm::toString(outs.takeError()));
    ring.begin(uint64_t(begin));
    generations.push_back(ex.callsGeneration());
    ring.copy(0, evalOutputs[0].data, stream);
    ring.copy(1, ex.errorRecord(), stream);
    ring.commit(stream);
  }
  while (ring.size())
    if (auto e = takeOldest())
      return e;
  return llvm::Error::success();
}

llvm::Expected<EvalResult> Trainer::evaluate() {
  EvalResult r;
  // The state evaluated is that of the last step launched: it must have run
  // (and not failed) before another stream reads it.
  if (auto e = observePending())
    return std::move(e);
  if (numTest == 0)
    return r;
  auto ex = inferenceExecutor();
  if (!ex)
    return inputError("inference graph: {0}", llvm::toString(ex.takeError()));
  int64_t chunk = evalChunk();
  const HostTensor *labelData = nullptr;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->name() == labels)
      labelData = &testData[i];
  if (chunk <= 0)
    return inputError("inference graph: a fixed batch dimension of {0}", chunk);
  assert(labelData && "init() checked the labels input");
  bool intLabels = !isFloatingPoint(labelData->dtype);
  int64_t labelsPerSample = numTest ? labelData->numElements() / numTest : 0;
  double correct = 0, lossSum = 0;
  int64_t counted = 0, lossTerms = 0;
  // Scores the chunk of samples [begin, begin + rows) with its first output.
  auto score = [&](int64_t begin, const NamedTensor &y) -> llvm::Error {
    int64_t rowsUsed = std::min(chunk, numTest - begin);
    const std::vector<int64_t> &ys = y.tensor.shape;
    int64_t perSample = y.tensor.numElements() / chunk;
    // Classes on axis `axis` of y: a label at position (o, i) of the other
    // axes (o before the class axis, i after) scores elements
    // (o * classes + c) * inner + i of its sample.
    size_t axis = ys.empty() ? 0 : classAxis < 0 ? ys.size() - 1 : size_t(classAxis);
    int64_t classes = ys.empty() ? 1 : ys[axis], inner = 1;
    for (size_t d = axis + 1; d < ys.size(); ++d)
      inner *= ys[d];
    bool fits = y.tensor.numElements() % chunk == 0 && axis < std::max<size_t>(ys.size(), 1) &&
                (intLabels ? classes > 0 && perSample == labelsPerSample * classes
                           : perSample == labelsPerSample);
    if (!fits)
      return inputError("evaluation: the first output '{0}' has shape {1}, which does not "
                        "fit labels of shape {2} per {3} samples",
                        y.name, formatShape(y.tensor.shape), formatShape(labelData->shape),
                        numTest);
    for (int64_t s = 0; s < rowsUsed; ++s) {
      for (int64_t l = 0; l < labelsPerSample; ++l) {
        double label = labelData->getAsDouble((begin + s) * labelsPerSample + l);
        if (!intLabels) {
          double d = y.tensor.getAsDouble(s * perSample + l) - label;
          lossSum += d * d;
          ++lossTerms;
          continue;
        }
        // A label the loss ignores (ignore_index) counts in neither.
        if (llvm::is_contained(ignoredLabels, int64_t(label)))
          continue;
        int64_t base = s * perSample + (l / inner) * classes * inner + l % inner, best = 0;
        auto at = [&](int64_t c) { return y.tensor.getAsDouble(base + c * inner); };
        double bestV = at(0), mx = bestV;
        for (int64_t c = 1; c < classes; ++c) {
          double v = at(c);
          if (v > bestV) {
            bestV = v;
            best = c;
          }
          mx = std::max(mx, v);
        }
        correct += double(best) == label;
        ++counted;
        if (lossKind == "cross-entropy" && label >= 0 && label < double(classes)) {
          double picked = at(int64_t(label));
          if (outputKind == OutputKind::Probabilities) {
            lossSum -= std::log(picked);
          } else if (outputKind == OutputKind::LogProbabilities) {
            lossSum -= picked;
          } else {
            double sum = 0;
            for (int64_t c = 0; c < classes; ++c)
              sum += std::exp(at(c) - mx);
            lossSum += mx + std::log(sum) - picked;
          }
          ++lossTerms;
        }
      }
    }
    return llvm::Error::success();
  };
  auto chunkInputs = [&](int64_t begin) {
    int64_t rowsUsed = std::min(chunk, numTest - begin);
    std::vector<int64_t> idx(static_cast<size_t>(rowsUsed));
    std::iota(idx.begin(), idx.end(), begin);
    std::vector<NamedTensor> in;
    for (const auto &[v, src] : evalInputs)
      in.push_back(NamedTensor{v->name(), gatherRows(testData[src], idx, chunk)});
    return in;
  };
  if (!backend.isHostMemory() && !(*ex)->isDynamic()) {
    if (auto e = evaluateQueued(**ex, chunk, chunkInputs, score))
      return std::move(e);
  } else {
    for (int64_t begin = 0; begin < numTest; begin += chunk) {
      auto outs = (*ex)->run(chunkInputs(begin));
      if (!outs)
        return inputError("evaluation: {0}", llvm::toString(outs.takeError()));
      if (auto e = score(begin, outs->front()))
        return e;
    }
  }
  r.samples = numTest;
  if (intLabels && counted) {
    r.hasAccuracy = true;
    r.accuracy = correct / double(counted);
  }
  if (lossTerms) {
    r.hasLoss = true;
    r.loss = lossSum / double(lossTerms);
  }
  return r;
}
