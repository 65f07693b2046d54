//===- Executor.cpp - Static planning and in-order execution -----------------===//
//
// plan(): one pass over the nodes in topological order computing output
// types with the op registry's shape functions; a node whose inputs are all known
// on the host (or that reads only shapes: Shape, Size) and whose outputs are
// small is evaluated right there and becomes a persistent value. Every other
// value gets a live interval over the remaining steps and an arena offset.
// An If/Loop/Scan body whose shapes depend on values unknown while planning
// (its inputs, captured values) falls back to dynamic mode (ControlFlow.cpp).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/LossErrors.h"
#include "mpc/Runtime/Readback.h"
#include "ExecutorSlot.h"
#include "LaunchAttrCheck.h"
#include "mpc/IR/Limits.h"
#include "../ops/ShapeHelpers.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>

using namespace mpc;

/// Values up to this many elements keep a host copy and may be folded.
static constexpr int64_t kHostValueLimit = 1 << 16;


Executor::Executor(const Graph &g, Backend &b)
    : graph(g), backend(b), stream(b.createStream()) {}

Executor::~Executor() {
  backend.synchronize(stream);
  inputStaging.reset();
  if (clearRecord)
    channel->releaseHost(clearRecord);
  releaseFolded();
  for (DeviceBuffer &buf : persistentBuffers)
    backend.release(buf);
  backend.release(arena);
  backend.release(workspace);
  backend.release(errorBuffer);
  for (auto &[node, p] : prepared)
    if (p.isPrepared && p.kernel.handle)
      backend.unprepare(p.kernel.handle);
  backend.destroyStream(stream);
}

void Executor::releaseFolded() {
  for (DeviceBuffer &buf : foldedBuffers)
    backend.release(buf);
  foldedBuffers.clear();
}

llvm::Expected<std::unique_ptr<Executor>> Executor::create(const Model &model,
                                                           Backend &backend) {
  if (!model.graph)
    return inputError("model has no graph");
  auto ex = createForGraph(*model.graph, backend);
  if (ex && !(*ex)->outer.empty())
    return inputError("graph reads '{0}', which no graph defines", (*ex)->outer[0]->name());
  return ex;
}

/// Control-flow ops run by the executor itself on sub-executors.
static bool isControlFlow(const Node &n) {
  return n.domain.empty() && (n.opType == "If" || n.opType == "Loop" || n.opType == "Scan" ||
                              n.opType == "SequenceMap");
}

llvm::Expected<std::unique_ptr<Executor>>
Executor::createForGraph(const Graph &graph, Backend &backend,
                         llvm::function_ref<bool(const Value *)> constantOuter,
                         llvm::function_ref<bool(const Value *)> variable) {
  // Bodies get sub-executors, created and run recursively: one level each.
  if (auto e = checkGraphDepth(graph))
    return std::move(e);
  std::unique_ptr<Executor> ex(new Executor(graph, backend));
  if (auto e = ex->checkKernels())
    return std::move(e);
  if (auto e = ex->loadInitializers(constantOuter, variable))
    return std::move(e);
  auto rec = backend.allocate(sizeof(KernelErrorRecord), BufferKind::Persistent);
  if (!rec)
    return rec.takeError();
  ex->errorBuffer = *rec;
  return std::move(ex);
}

llvm::Error Executor::checkKernels() {
  const Node *first = nullptr;
  std::string firstDTypes;
  unsigned count = 0;
  // Sequence and optional values live on the host in dynamic mode only (a
  // body whose formals or results are sequences).
  for (const Value *v : graph.inputs())
    dynamicMode |= isContainerType(v->type);
  for (const Value *v : graph.outputs())
    dynamicMode |= isContainerType(v->type);
  for (const Node &n : graph.nodes()) {
    if (isControlFlow(n)) {
      dynamicMode = true;
      // Its graphs are what runs: a node without them is the model's error
      // (an If whose branches were never written).
      for (const char *name : n.opType == "If" ? std::vector<const char *>{"then_branch",
                                                                          "else_branch"}
                                               : std::vector<const char *>{"body"}) {
        const Attribute *a = n.attr(name);
        if (!a || a->graphs.size() != 1 || !a->graphs[0])
          return inputError("{0}: attribute '{1}' (one graph) is missing", describeNode(n),
                            name);
      }
      for (const Attribute &a : n.attrs)
        for (const auto &body : a.graphs) {
          auto sub = createForGraph(*body, backend);
          if (!sub)
            return sub.takeError();
          bodies[&n].push_back(std::move(*sub));
        }
      continue;
    }
    if (isSequenceOp(n)) {
      // Run by the executor on host sequences (SequenceOps.cpp).
      dynamicMode = true;
      continue;
    }
    // The registry row and the parsed attributes serve every plan and run
    // of this executor; the backend prepares the node per shape signature
    // (prepareFor) once shapes are known.
    const OpDef *op = findOp(n);
    if (op)
      dynamicMode |= op->valueDependentShape;
    llvm::SmallVector<DType, 4> dtypes;
    for (const Value *v : n.inputs())
      dtypes.push_back(v ? v->type.elem : DType::Undefined);
    bool known = !dtypes.empty() ? dtypes[0] != DType::Undefined
                                 : (n.numOutputs() && n.output(0) &&
                                    n.output(0)->type.elem != DType::Undefined);
    bool ok = op && backend.hasKernel(n) && (!known || backend.supportsOp(n, dtypes));
    if (ok) {
      PreparedNode &p = prepared[&n];
      p.op = op;
      if (op->parse) {
        // A bad attribute value: one line naming the node, op and attribute.
        auto parsed = op->parse(n);
        if (!parsed)
          return parsed.takeError();
        p.params = std::move(*parsed);
      }
      p.hostKernel = backend.hostKernel(n);
      continue;
    }
    if (!count++) {
      first = &n;
      // An input whose type is only known once shapes are inferred is not named
      // ("input type undef" told the user nothing).
      firstDTypes = dtypes.empty() || dtypes[0] == DType::Undefined
                        ? ""
                        : ", input type " + dtypeName(dtypes[0]).str();
      // A result of another type may be what no kernel takes (a Cast to an
      // 8-bit float): name it too.
      DType result = n.numOutputs() && n.output(0) ? n.output(0)->type.elem : DType::Undefined;
      if (!firstDTypes.empty() && result != DType::Undefined && result != dtypes[0])
        firstDTypes += ", result type " + dtypeName(result).str();
    }
  }
  if (!count)
    return llvm::Error::success();
  std::string more =
      count > 1 ? " (and " + std::to_string(count - 1) + " more unsupported nodes)" : "";
  std::string domain = first->domain.empty() ? "ai.onnx" : first->domain;
  return inputError("unsupported op {0} (domain '{1}', opset {2}{3}) at {4}: the "
                    "{5} backend has no kernel for it{6}",
                    escapeName(first->opType), domain, first->opsetVersion(), firstDTypes,
                    describeNode(*first), backend.name(), more);
}

KernelCall Executor::preparedCall(const Node &n) const {
  const PreparedNode &p = prepared.find(&n)->second;
  KernelCall call;
  call.node = &n;
  call.kernel = p.kernel.handle;
  call.params = p.params.get();
  if (p.kernel.workspaceBytes) {
    call.workspace = workspace.data;
    call.workspaceBytes = p.kernel.workspaceBytes;
  }
  call.errors = static_cast<KernelErrorRecord *>(errorBuffer.data);
  return call;
}

/// The unsupported-op error of a node whose input dtypes the backend has no
/// kernel for (found while planning or running).
static llvm::Error unsupportedAt(const Node &n, llvm::ArrayRef<TensorDesc> inputs,
                                 llvm::StringRef backendName) {
  return inputError("unsupported op {0} (domain '{1}', opset {2}, input type {3}) at "
                    "{4}: the {5} backend has no kernel for it",
                    escapeName(n.opType), n.domain.empty() ? "ai.onnx" : n.domain, n.opsetVersion(),
                    inputs.empty() ? "none" : dtypeName(inputs[0].dtype), describeNode(n),
                    backendName);
}

llvm::Error Executor::prepareFor(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  PreparedNode &p = prepared.find(&n)->second;
  if (p.isPrepared && llvm::ArrayRef<TensorDesc>(p.signature) == inputs)
    return llvm::Error::success();
  if (p.isPrepared && p.kernel.handle)
    backend.unprepare(p.kernel.handle);
  p.signature.assign(inputs.begin(), inputs.end());
  p.kernel = backend.prepare(n, inputs);
  p.isPrepared = true;
  callsValid = false;
  if (!p.kernel.handle) {
    p.isPrepared = false;
    return unsupportedAt(n, inputs, backend.name());
  }
  return llvm::Error::success();
}

llvm::Error Executor::reserveWorkspace(size_t bytes) {
  if (bytes <= workspace.size)
    return llvm::Error::success();
  backend.synchronize(stream); // a queued launch may still use the old one
  backend.release(workspace);
  workspace = DeviceBuffer();
  auto buf = backend.allocate(bytes, BufferKind::Transient);
  if (!buf)
    return buf.takeError();
  workspace = *buf;
  return llvm::Error::success();
}

ReadbackChannel &Executor::hostChannel() {
  if (!channel)
    channel = backend.createReadback();
  return *channel;
}

void Executor::clearErrors() {
  static const KernelErrorRecord kClear;
  if (backend.isHostMemory()) {
    backend.copyToDevice(errorBuffer.data, &kClear, sizeof(kClear), stream);
    return;
  }
  if (!clearRecord) {
    clearRecord = hostChannel().allocateHost(sizeof(kClear));
    std::memcpy(clearRecord, &kClear, sizeof(kClear));
  }
  hostChannel().uploadAsync(errorBuffer.data, clearRecord, sizeof(kClear), stream);
}

unsigned Executor::inputStagingCapacity(size_t bytes) {
  size_t fit = bytes ? kInputStagingBudget / bytes : kInputStagingSlots;
  return unsigned(std::max<size_t>(std::min<size_t>(kInputStagingSlots, fit), 2));
}

void Executor::copyInputs(llvm::ArrayRef<InputCopy> copies) {
  auto padded = [](size_t n) { return (n + 63) / 64 * 64; };
  size_t total = 0;
  for (const InputCopy &c : copies)
    total += padded(c.src->byteSize());
  if (backend.isHostMemory() || total == 0) {
    for (const InputCopy &c : copies)
      backend.copyToDevice(c.dst, c.src->bytes.data(), c.src->byteSize(), stream);
    return;
  }
  // A larger set of inputs gets a larger ring; the old one waits for the
  // copies still reading it before its memory goes.
  if (!inputStaging || inputStaging->slotBytes() < total)
    inputStaging =
        std::make_unique<StagingRing>(hostChannel(), total, inputStagingCapacity(total));
  uint8_t *slot = inputStaging->acquire();
  size_t offset = 0;
  for (const InputCopy &c : copies) {
    std::memcpy(slot + offset, c.src->bytes.data(), c.src->byteSize());
    inputStaging->upload(c.dst, offset, c.src->byteSize(), stream);
    offset += padded(c.src->byteSize());
  }
  inputStaging->commit(stream);
}

llvm::Error Executor::readErrors(llvm::function_ref<const KernelCall *(int32_t)> callOf) {
  KernelErrorRecord rec;
  backend.copyToHost(&rec, errorBuffer.data, sizeof(rec), stream);
  backend.synchronize(stream);
  return errorOfRecord(rec, callOf);
}

llvm::Error Executor::errorOfRecord(const KernelErrorRecord &rec,
                                    llvm::function_ref<const KernelCall *(int32_t)> callOf) {
  if (rec.code == 0)
    return llvm::Error::success();
  const KernelCall *call = callOf(rec.call);
  assert(call && "an error record names a launch of this run");
  return kernelError(rec, *call);
}

llvm::Error Executor::kernelError(const KernelErrorRecord &rec, const KernelCall &call) {
  const Node &n = *call.node;
  // A loss's bad label (LossErrors.h), written by a device kernel.
  static_assert(kBadLabelError > int32_t(KernelErrorCode::Message), "a code of its own");
  if (rec.code == kBadLabelError && rec.operand >= 0 && size_t(rec.operand) < call.inputs.size() &&
      call.inputs[rec.operand].shape.size() >= 2)
    return inputError("{0}: {1}", describeNode(n),
                      badLabelText(rec.value, rec.reserved, call.inputs[rec.operand].shape[1]));
  switch (KernelErrorCode(rec.code)) {
  case KernelErrorCode::Message:
    if (llvm::Error e = backend.takeMessageError(call.errors))
      return e;
    break;
  case KernelErrorCode::IndexOutOfRange: {
    std::string text = "index " + std::to_string(rec.value) + " out of range";
    const TensorRef *t = nullptr;
    if (rec.operand >= 0 && size_t(rec.operand) < call.inputs.size())
      t = &call.inputs[rec.operand];
    else if (rec.operand < 0 && rec.operand != KernelErrorRecord::kNoOperand &&
             size_t(-1 - rec.operand) < call.outputs.size())
      t = &call.outputs[-1 - rec.operand];
    if (t)
      text += " for " + formatShape(t->shape);
    return inputError("{0}: {1}", describeNode(n), text);
  }
  case KernelErrorCode::None:
    break;
  }
  return inputError("{0}: the kernel failed (error code {1})", describeNode(n), rec.code);
}

llvm::Error Executor::runOnHost(HostKernelFn run, KernelCall &call) {
  KernelErrorRecord rec;
  call.errors = &rec;
  call.index = 0;
  if (llvm::Error e = run(call))
    return e;
  return rec.code ? kernelError(rec, call) : llvm::Error::success();
}

llvm::Error Executor::loadInitializers(llvm::function_ref<bool(const Value *)> constantOuter,
                                       llvm::function_ref<bool(const Value *)> variable) {
  auto addSlot = [&](const Value *v) {
    slotOf[v] = slots.size();
    slots.emplace_back();
    slots.back().value = v;
    return unsigned(slots.size() - 1);
  };
  for (const Value *v : graph.inputs()) {
    unsigned s = addSlot(v);
    slots[s].kind = SlotKind::Input;
  }
  // Variable initializers: formals with a default, after the graph inputs.
  std::vector<const Value *> variables;
  if (variable)
    for (const Value *v : graph.initializers())
      if (!slotOf.count(v) && variable(v)) {
        unsigned s = addSlot(v);
        slots[s].kind = SlotKind::Input;
        variables.push_back(v);
      }
  // Initializers of this graph, then constant ones of enclosing graphs.
  std::vector<const Value *> inits(graph.initializers().begin(), graph.initializers().end());
  if (constantOuter) {
    llvm::DenseSet<const Value *> seen(inits.begin(), inits.end());
    for (const Node &n : graph.nodes())
      for (const Value *v : n.inputs())
        if (v && v->graph() != &graph && v->initializer() && constantOuter(v) &&
            seen.insert(v).second)
          inits.push_back(v);
  }
  for (const Value *v : inits) {
    if (slotOf.count(v))
      continue; // an input with a default: bound per run
    unsigned s = addSlot(v);
    Slot &slot = slots[s];
    slot.kind = SlotKind::Initializer;
    auto h = hostTensorFromIR(*v->initializer());
    if (!h)
      return h.takeError();
    slot.type = ShapedType{h->dtype, h->shape};
    auto buf = backend.allocate(h->byteSize(), BufferKind::Persistent);
    if (!buf)
      return buf.takeError();
    backend.copyToDevice(buf->data, h->bytes.data(), h->byteSize(), stream);
    persistentBuffers.push_back(*buf);
    slot.persistent = buf->data;
    stats.persistent += buf->size;
    if (h->numElements() <= kHostValueLimit)
      slot.host = std::make_unique<HostTensor>(std::move(*h));
  }
  for (const Node &n : graph.nodes())
    for (const Value *v : n.outputs())
      if (v)
        addSlot(v);
  // Values read here but defined in an enclosing graph, directly or by a
  // nested body, become named inputs of this executor.
  auto noteOuter = [&](const Value *v) {
    if (v && !slotOf.count(v)) {
      unsigned s = addSlot(v);
      slots[s].kind = SlotKind::Input;
      outer.push_back(v);
      dynamicMode |= isContainerType(v->type);
    }
  };
  for (const Node &n : graph.nodes()) {
    for (const Value *v : n.inputs())
      noteOuter(v);
    auto it = bodies.find(&n);
    if (it == bodies.end())
      continue;
    std::vector<const Value *> &cap = captures[&n];
    for (const auto &body : it->second)
      for (const Value *v : body->outer) {
        noteOuter(v);
        if (std::find(cap.begin(), cap.end(), v) == cap.end())
          cap.push_back(v);
      }
  }
  formals.assign(graph.inputs().begin(), graph.inputs().end());
  formals.insert(formals.end(), variables.begin(), variables.end());
  formals.insert(formals.end(), outer.begin(), outer.end());
  backend.synchronize(stream);
  return llvm::Error::success();
}

llvm::Error Executor::checkInputs(llvm::ArrayRef<NamedTensor> inputs,
                                  std::vector<const HostTensor *> &bound) const {
  llvm::StringMap<unsigned> index;
  for (unsigned i = 0; i < formals.size(); ++i)
    index[formals[i]->name()] = i;
  bound.assign(formals.size(), nullptr);
  for (const NamedTensor &t : inputs) {
    auto it = index.find(t.name);
    if (it == index.end())
      return inputError("input '{0}' is not an input of the model", t.name);
    bound[it->second] = &t.tensor;
  }
  llvm::StringMap<std::pair<int64_t, std::string>> symbols;
  for (unsigned i = 0; i < bound.size(); ++i) {
    const Value *v = formals[i];
    const Type &decl = v->type;
    bool inBackend = i < boundInputs.size() && boundInputs[i].data;
    if (bound[i] && inBackend)
      return inputError("input '{0}' is bound to backend memory: it is not passed to run()",
                        v->name());
    if (!bound[i]) {
      if (v->initializer() || inBackend || (i < boundSequences.size() && boundSequences[i]))
        continue;
      return inputError("missing input '{0}' ({1} {2})", v->name(), dtypeName(decl.elem),
                        decl.dimsText());
    }
    const HostTensor &t = *bound[i];
    if (decl.elem != DType::Undefined && t.dtype != decl.elem)
      return inputError("input '{0}': element type {1}, the model expects {2}", v->name(),
                        dtypeName(t.dtype), dtypeName(decl.elem));
    if (runtimeElementSize(t.dtype) == 0)
      return inputError("input '{0}': element type {1} is not supported", v->name(),
                        dtypeName(t.dtype));
    if (!decl.hasShape)
      continue;
    bool ok = decl.dims.size() == t.shape.size();
    for (size_t d = 0; ok && d < t.shape.size(); ++d) {
      const Dim &dim = decl.dims[d];
      if (dim.isKnown() && dim.value != t.shape[d])
        ok = false;
      if (dim.isSymbolic()) {
        auto ins = symbols.try_emplace(dim.param.ref(), t.shape[d], v->name());
        if (!ins.second && ins.first->second.first != t.shape[d])
          return inputError("input '{0}': dimension '{1}' is {2} but {3} in input '{4}'",
                            v->name(), dim.param, t.shape[d], ins.first->second.first,
                            ins.first->second.second);
      }
    }
    if (!ok)
      return inputError("input '{0}': shape {1}, the model expects {2}", v->name(),
                        formatShape(t.shape), decl.dimsText());
  }
  return llvm::Error::success();
}

/// True for a graph attribute of If, Loop or Scan.
static bool isControlFlowBody(const Graph &g) {
  return g.owningNode() && isControlFlow(*g.owningNode());
}

/// The dtype planned for a node's first output.
static DType outTypesDType(const Node &n, const std::vector<Executor::Slot> &slots,
                           const llvm::DenseMap<const Value *, unsigned> &slotOf) {
  return slots[slotOf.lookup(n.output(0))].type.dtype;
}

/// A host KernelCall over host tensors (for folding during planning).
static void addHostRef(llvm::SmallVectorImpl<TensorRef> &refs, const ShapedType &t,
                       const HostTensor *h) {
  TensorRef r;
  r.dtype = t.dtype;
  r.shape.assign(t.shape.begin(), t.shape.end());
  r.data = h ? const_cast<uint8_t *>(h->bytes.data()) : nullptr;
  refs.push_back(r);
}

/// A static plan's known integer operand (an initializer's or a folded
/// value) carried in the signature, so that a device backend takes it as a
/// constant of the node (TensorDesc::values).
static void addKnownInts(TensorDesc &d, const HostTensor *h) {
  if (!h || (h->dtype != DType::I64 && h->dtype != DType::I32) ||
      h->numElements() > TensorDesc::kMaxKnownInts)
    return;
  d.hasValues = true;
  for (int64_t k = 0; k < h->numElements(); ++k)
    d.values.push_back(h->getAsInt64(k));
}

/// The bytes of a value a device backend holds in its own memory: that
/// memory, not the host's, bounds it (the backend's allocation says what it
/// has), so only a negative dimension or a size past 2^64 is refused here,
/// with checkedTensorBytes's line.
static llvm::Expected<uint64_t> deviceTensorBytes(llvm::ArrayRef<int64_t> shape, DType dtype,
                                                  const llvm::Twine &what) {
  uint64_t bytes = runtimeElementSize(dtype);
  bool bad = false;
  for (int64_t d : shape) {
    bad |= d < 0;
    if (!bad)
      bad |= __builtin_mul_overflow(bytes, uint64_t(d), &bytes);
  }
  bad |= shapeStridesOverflow(shape);
  return bad ? checkedTensorBytes(shape, dtype, what) : llvm::Expected<uint64_t>(bytes);
}

llvm::Error Executor::plan(llvm::ArrayRef<NamedTensor> inputs) {
  std::vector<const HostTensor *> bound;
  if (auto e = checkInputs(inputs, bound))
    return e;
  if (dynamicMode)
    return llvm::Error::success(); // shaped and allocated while running
  planned = false;
  callsValid = false;
  plannedWorkspace = 0;
  backend.synchronize(stream); // folded buffers may still be read
  releaseFolded();
  steps.clear();
  requests.clear();
  requestSlot.clear();
  numFolded = 0;
  uint64_t persistentBase = stats.persistent;
  for (Slot &s : slots) {
    s.firstStep = s.lastStep = -1;
    s.external = nullptr;
    if (s.kind == SlotKind::Folded) {
      s.kind = SlotKind::Activation;
      s.host.reset();
      s.persistent = nullptr;
    }
  }
  plannedShapes.assign(formals.size(), {});
  plannedDefault.assign(formals.size(), false);
  for (unsigned i = 0; i < bound.size(); ++i) {
    Slot &s = slots[slotOf[formals[i]]];
    s.kind = SlotKind::Input;
    if (i < boundInputs.size() && boundInputs[i].data) {
      // Read in place from the caller's buffer: no arena space, no copy.
      const TensorRef &b = boundInputs[i];
      s.type = ShapedType{b.dtype, std::vector<int64_t>(b.shape.begin(), b.shape.end())};
      s.external = b.data;
      plannedShapes[i] = s.type.shape;
      continue;
    }
    const HostTensor *t = bound[i];
    if (t) {
      s.type = ShapedType{t->dtype, t->shape};
      s.firstStep = s.lastStep = 0;
      plannedShapes[i] = t->shape;
      continue;
    }
    // An unbound input with a default (IR 3 lists initializers among the
    // inputs) is a constant of this plan, like an initializer: persistent
    // and foldable (a Reshape target, a ConstantOfShape shape).
    auto d = hostTensorFromIR(*formals[i]->initializer());
    if (!d)
      return d.takeError();
    auto buf = backend.allocate(d->byteSize(), BufferKind::Persistent);
    if (!buf)
      return buf.takeError();
    backend.copyToDevice(buf->data, d->bytes.data(), d->byteSize(), stream);
    foldedBuffers.push_back(*buf);
    stats.persistent += buf->size;
    s.kind = SlotKind::Folded;
    s.persistent = buf->data;
    s.type = ShapedType{d->dtype, d->shape};
    if (d->numElements() <= kHostValueLimit)
      s.host = std::make_unique<HostTensor>(std::move(*d));
    plannedShapes[i] = s.type.shape;
    plannedDefault[i] = true;
  }

  // Uses still ahead of each value (graph outputs never run out), and the
  // slot whose buffer each value shares (itself unless computed in place).
  std::vector<int64_t> remaining(slots.size(), 0);
  for (const Node &n : graph.nodes())
    for (const Value *v : n.inputs())
      if (v && slotOf.count(v))
        ++remaining[slotOf[v]];
  for (const Value *v : graph.outputs())
    ++remaining[slotOf[v]];
  // A device backend's graph outputs: the values it copies back to the host.
  llvm::DenseSet<const Value *> deviceOutputs;
  if (!backend.isHostMemory())
    deviceOutputs.insert(graph.outputs().begin(), graph.outputs().end());
  std::vector<unsigned> root(slots.size());
  std::iota(root.begin(), root.end(), 0u);
  // Outputs written straight into caller buffers (bindOutput).
  llvm::DenseMap<const Value *, void *> outputBuffer;
  for (size_t k = 0; k < boundOutputs.size(); ++k)
    if (boundOutputs[k].data)
      outputBuffer[graph.outputs()[k]] = boundOutputs[k].data;
  // Outputs written over bound inputs (bindOutputOver; run() checks that
  // the input's dtype and shape, its buffer's, are the output's).
  llvm::DenseSet<const Value *> writtenOver;
  for (size_t k = 0; k < outputOver.size(); ++k)
    if (outputOver[k] >= 0)
      writtenOver.insert(graph.outputs()[k]);

  for (const Node &n : graph.nodes()) {
    auto prep = prepared.find(&n);
    assert(prep != prepared.end() && "checked by create()");
    const OpDef *row = prep->second.op;
    HostKernelFn hostKernel = prep->second.hostKernel;
    for (const Value *v : n.inputs())
      if (v && slotOf.count(v))
        --remaining[slotOf[v]];
    std::vector<ShapedType> inTypes;
    std::vector<const HostTensor *> values;
    bool allKnown = true;
    for (const Value *v : n.inputs()) {
      if (!v) {
        inTypes.emplace_back();
        values.push_back(nullptr);
        continue;
      }
      auto it = slotOf.find(v);
      if (it == slotOf.end())
        return inputError("{0}: input '{1}' comes from an enclosing graph, which the "
                          "executor does not support",
                          describeNode(n), v->name());
      const Slot &s = slots[it->second];
      inTypes.push_back(s.type);
      values.push_back(s.host.get());
      allKnown &= s.host != nullptr;
    }
    std::vector<ShapedType> outTypes;
    ShapeQuery q{n, inTypes, values};
    if (auto e = row->shape(q, outTypes)) {
      // A body whose shapes depend on values that change from call to call
      // (a Slice bounded by the iteration number, a Reshape to a loop-carried
      // shape) has no plan valid for every call: it runs in dynamic mode,
      // which shapes each node with its operands' values. Only an operand
      // unknown here can be the cause; with all of them known the error is
      // the model's. The main graph falls back the same way when the shape
      // function says which operand it lacked (a ReduceSum's axes or a
      // TopK's K given as a graph input, as onnx's own tests give them),
      // unless the caller bound buffers, which dynamic mode cannot use: then
      // the error stands.
      if (allKnown)
        return e;
      if (!isControlFlowBody(graph) &&
          (!e.isA<UnknownOperandError>() || hasBoundBuffers()))
        return e;
      llvm::consumeError(std::move(e));
      releaseFolded();
      for (Slot &s : slots)
        if (s.kind == SlotKind::Folded) {
          s.kind = SlotKind::Activation;
          s.host.reset();
          s.persistent = nullptr;
        }
      for (const Value *v : formals)
        slots[slotOf[v]].kind = SlotKind::Input;
      steps.clear();
      dynamicMode = true;
      return llvm::Error::success();
    }
    outTypes.resize(n.numOutputs());
    int64_t outElems = 0;
    for (unsigned o = 0; o < n.numOutputs(); ++o) {
      if (!n.output(o))
        continue;
      // The host's memory bounds what the host holds: every value of a host
      // backend, and a device's graph outputs, which are copied back.
      bool onHost = backend.isHostMemory() || deviceOutputs.contains(n.output(o));
      auto what = describeNode(n) + ": output " + quoteName(n.output(o)->name());
      if (auto bytes = onHost ? checkedTensorBytes(outTypes[o].shape, outTypes[o].dtype, what)
                              : deviceTensorBytes(outTypes[o].shape, outTypes[o].dtype, what);
          !bytes)
        return bytes.takeError();
      Slot &s = slots[slotOf[n.output(o)]];
      s.type = outTypes[o];
      outElems += shapes::numel(outTypes[o].shape);
    }
    bool readsShapesOnly = n.opType == "Shape" || n.opType == "Size";
    if ((allKnown || readsShapesOnly) && outElems <= kHostValueLimit && n.numOutputs() &&
        hostKernel) {
      // Evaluate on the host now; the result is a persistent value.
      KernelCall call = preparedCall(n);
      call.kernel = nullptr; // the backend's handle is not the host kernel's
      for (size_t i = 0; i < inTypes.size(); ++i)
        addHostRef(call.inputs, inTypes[i], values[i]);
      std::vector<std::unique_ptr<HostTensor>> outs;
      for (unsigned o = 0; o < n.numOutputs(); ++o) {
        outs.push_back(std::make_unique<HostTensor>(outTypes[o].dtype, outTypes[o].shape));
        addHostRef(call.outputs, outTypes[o], n.output(o) ? outs.back().get() : nullptr);
      }
      if (auto e = runOnHost(hostKernel, call))
        return e;
      for (unsigned o = 0; o < n.numOutputs(); ++o) {
        if (!n.output(o))
          continue;
        Slot &s = slots[slotOf[n.output(o)]];
        auto buf = backend.allocate(outs[o]->byteSize(), BufferKind::Persistent);
        if (!buf)
          return buf.takeError();
        backend.copyToDevice(buf->data, outs[o]->bytes.data(), outs[o]->byteSize(),
                             stream);
        foldedBuffers.push_back(*buf);
        stats.persistent += buf->size;
        s.kind = SlotKind::Folded;
        s.persistent = buf->data;
        s.host = std::move(outs[o]);
      }
      ++numFolded;
      continue;
    }
    llvm::SmallVector<DType, 4> dts;
    llvm::SmallVector<TensorDesc, 4> signature;
    for (size_t i = 0; i < inTypes.size(); ++i) {
      const ShapedType &t = inTypes[i];
      dts.push_back(t.dtype);
      signature.push_back(TensorDesc{t.dtype, {t.shape.begin(), t.shape.end()}, false, {}});
      addKnownInts(signature.back(), values[i]);
    }
    if (!backend.supportsOp(n, dts))
      return unsupportedAt(n, signature, backend.name());
    if (auto e = prepareFor(n, signature))
      return e;
    plannedWorkspace = std::max(plannedWorkspace, prep->second.kernel.workspaceBytes);
    int64_t step = steps.size();
    steps.push_back(&n);
    // In place: an element-wise op writes over an operand of the output's
    // dtype and shape whose last use this is (the loops allow the alias).
    int64_t inPlaceRoot = -1;
    // The registry row says which operands are candidates (OpRegistry.h, InPlace).
    static const unsigned kBinary[] = {0, 1}, kWhere[] = {2, 1}, kData[] = {0};
    bool reshapeLike = row->inPlace == InPlace::Data;
    llvm::ArrayRef<unsigned> cand = row->inPlace == InPlace::WhereBranches
                                        ? llvm::ArrayRef<unsigned>(kWhere)
                                    : reshapeLike ? llvm::ArrayRef<unsigned>(kData)
                                                  : llvm::ArrayRef<unsigned>(kBinary);
    bool writesBound = llvm::any_of(n.outputs(), [&](const Value *v) {
      return v && outputBuffer.count(v);
    });
    // Writing over a bound input (bindOutputOver): the node writes that
    // buffer itself, reading the input's elements as it goes; an operand's
    // chain computed there earlier would overwrite the input before its
    // last reads.
    bool writesOver = llvm::any_of(n.outputs(), [&](const Value *v) {
      return v && writtenOver.count(v);
    });
    // A node writing a bound output may still run in place over an operand
    // made in this step: that operand's whole in-place chain then lives in
    // the bound buffer (a guarded update's "else" value is computed there).
    if (row->inPlace != InPlace::None && n.numOutputs() == 1 && n.output(0) && !writesOver)
      for (unsigned k : cand) {
        if (inPlaceRoot >= 0)
          break;
        const Value *v = k < n.numInputs() ? n.input(k) : nullptr;
        if (!v)
          continue;
        unsigned sv = slotOf[v];
        const Slot &s = slots[sv];
        const Slot &r = slots[root[sv]];
        if ((s.kind == SlotKind::Input || s.kind == SlotKind::Activation) && !s.external &&
            !r.external && (!writesBound || r.kind == SlotKind::Activation) &&
            remaining[sv] == 0 && s.type.dtype == outTypesDType(n, slots, slotOf) &&
            (reshapeLike ? shapes::numel(s.type.shape) ==
                               shapes::numel(slots[slotOf[n.output(0)]].type.shape)
                         : s.type.shape == slots[slotOf[n.output(0)]].type.shape))
          inPlaceRoot = root[sv];
      }
    for (const Value *v : n.inputs())
      if (v) {
        Slot &s = slots[root[slotOf[v]]];
        if (s.kind == SlotKind::Input || s.kind == SlotKind::Activation)
          s.lastStep = std::max(s.lastStep, step);
      }
    for (const Value *v : n.outputs())
      if (v) {
        unsigned so = slotOf[v];
        Slot &s = slots[so];
        s.kind = SlotKind::Activation;
        if (void *buf = outputBuffer.lookup(v)) {
          s.external = buf; // no arena space, for its in-place chain either
          if (inPlaceRoot >= 0) {
            root[so] = unsigned(inPlaceRoot);
            slots[unsigned(inPlaceRoot)].external = buf;
          }
          continue;
        }
        if (inPlaceRoot >= 0) {
          root[so] = unsigned(inPlaceRoot);
          continue;
        }
        s.firstStep = s.lastStep = step;
      }
  }
  for (const Value *v : graph.outputs()) {
    Slot &s = slots[root[slotOf[v]]];
    if (s.kind == SlotKind::Input || s.kind == SlotKind::Activation)
      s.lastStep = int64_t(steps.size());
  }
  uint64_t allSizes = 0;
  for (unsigned i = 0; i < slots.size(); ++i) {
    const Slot &s = slots[i];
    if ((s.kind != SlotKind::Input && s.kind != SlotKind::Activation) ||
        slots[root[i]].firstStep < 0 || slots[root[i]].external)
      continue;
    allSizes += alignArenaSize(uint64_t(shapes::numel(s.type.shape)) *
                               runtimeElementSize(s.type.dtype));
    if (root[i] != i)
      continue;
    requests.push_back(BufferRequest{
        uint64_t(shapes::numel(s.type.shape)) * runtimeElementSize(s.type.dtype),
        s.firstStep, s.lastStep});
    requestSlot.push_back(i);
  }
  arenaPlan = planMemory(requests);
  for (size_t r = 0; r < requests.size(); ++r)
    slots[requestSlot[r]].offset = arenaPlan.offsets[r];
  for (unsigned i = 0; i < slots.size(); ++i)
    if (root[i] != i) {
      slots[i].offset = slots[root[i]].offset;
      if (slots[root[i]].external)
        slots[i].external = slots[root[i]].external;
    }
  // Per bound output made by a node: the slots living in its buffer.
  boundAliases.assign(boundOutputs.size(), {});
  for (size_t k = 0; k < boundOutputs.size(); ++k) {
    unsigned so = slotOf[graph.outputs()[k]];
    if (!boundOutputs[k].data || slots[so].kind != SlotKind::Activation)
      continue;
    for (unsigned i = 0; i < slots.size(); ++i)
      if (i == so || (root[so] != so && root[i] == root[so]))
        boundAliases[k].push_back(i);
  }
  stats.plannedPeak = arenaPlan.peak;
  stats.workspace = plannedWorkspace;
  stats.noReuseSum = allSizes;
  stats.numInPlace = 0;
  for (unsigned i = 0; i < slots.size(); ++i)
    stats.numInPlace += root[i] != i;
  stats.lowerBound = arenaPlan.maxLiveBytes;
  stats.numBuffers = requests.size();
  (void)persistentBase;
  planned = true;
  return llvm::Error::success();
}

void Executor::setProfiling(bool on) {
  profiling = on;
  if (!on || clockCost > 0)
    return;
  // The median cost of an empty timed region, subtracted from every node.
  std::vector<double> t(1001);
  for (double &x : t) {
    auto a = std::chrono::steady_clock::now();
    auto b = std::chrono::steady_clock::now();
    x = std::chrono::duration<double>(b - a).count();
  }
  std::nth_element(t.begin(), t.begin() + 500, t.end());
  clockCost = t[500];
}

TensorRef Executor::tensorRef(unsigned i) const {
  const Slot &s = slots[i];
  TensorRef r;
  r.dtype = s.type.dtype;
  r.shape.assign(s.type.shape.begin(), s.type.shape.end());
  if (s.external)
    r.data = s.external;
  else if (s.kind == SlotKind::Initializer || s.kind == SlotKind::Folded)
    r.data = s.persistent;
  else
    r.data = static_cast<char *>(arena.data) + s.offset;
  return r;
}

llvm::Expected<std::vector<NamedTensor>> Executor::run(llvm::ArrayRef<NamedTensor> inputs) {
  std::vector<const HostTensor *> bound;
  if (auto e = checkInputs(inputs, bound))
    return std::move(e);
  if (dynamicMode)
    return runDynamic(bound);
  bool replan = !planned;
  for (unsigned i = 0; !replan && i < bound.size(); ++i)
    replan = (bound[i] == nullptr && !(i < boundInputs.size() && boundInputs[i].data)) !=
                 plannedDefault[i] ||
             (bound[i] && bound[i]->shape != plannedShapes[i]);
  if (replan)
    if (auto e = plan(inputs))
      return std::move(e);
  if (dynamicMode) // plan() fell back: a body with value-dependent shapes
    return runDynamic(bound);
  if (!arena.data || arena.size < arenaPlan.peak) {
    // A device backend's allocation checks the plan against its own memory.
    if (backend.isHostMemory() && arenaPlan.peak > maxTensorBytes())
      return inputError("the memory plan needs {0} bytes, more than this machine's memory "
                        "({1} bytes)",
                        arenaPlan.peak, maxTensorBytes());
    backend.release(arena);
    arena = DeviceBuffer();
    auto buf = backend.allocate(arenaPlan.peak, BufferKind::Transient);
    if (!buf)
      return buf.takeError();
    arena = *buf;
  }
  if (auto e = reserveWorkspace(plannedWorkspace))
    return std::move(e);
  std::vector<InputCopy> copies;
  std::vector<std::unique_ptr<HostTensor>> defaults; // read by the copies below
  for (unsigned i = 0; i < bound.size(); ++i) {
    const Slot &s = slots[slotOf[formals[i]]];
    if (s.firstStep < 0)
      continue;
    const HostTensor *t = bound[i];
    if (!t) {
      auto d = hostTensorFromIR(*formals[i]->initializer());
      if (!d)
        return d.takeError();
      defaults.push_back(std::make_unique<HostTensor>(std::move(*d)));
      t = defaults.back().get();
    }
    copies.push_back(InputCopy{static_cast<char *>(arena.data) + s.offset, t});
    transfers.hostToDevice += t->byteSize();
  }
  copyInputs(copies);
  ++transfers.runs;
  for (size_t k = 0; k < boundOutputs.size(); ++k) {
    const TensorRef &b = boundOutputs[k];
    const ShapedType &t = slots[slotOf[graph.outputs()[k]]].type;
    if (b.data && (b.dtype != t.dtype || !llvm::equal(b.shape, t.shape)))
      return inputError("output '{0}' is {1} {2}, but the buffer bound to it is {3} {4}",
                        graph.outputs()[k]->name(), dtypeName(t.dtype), formatShape(t.shape),
                        dtypeName(b.dtype), formatShape(b.shape));
  }
  // A bound buffer that changed (the other half of a double buffer) is
  // patched into the kernel calls that use it.
  bool moved = !refreshBound();
  if (moved && callsValid) {
    for (const auto &[slot, ref] : externalRefs)
      ref->data = slots[slot].external;
    // A plan a backend captured (runPlan) holds the old addresses: another
    // version tells it so (the version these addresses had before, if any).
    callsVersion = versionOfBound();
  }
  // The calls depend only on the plan and the arena's address: built once,
  // reused by every run (a training step runs the same plan thousands of times).
  if (!callsValid || callsArena != arena.data || callsWorkspace != workspace.data) {
    calls.clear();
    calls.reserve(steps.size());
    for (const Node *n : steps) {
      KernelCall call = preparedCall(*n);
      call.index = int32_t(calls.size());
      for (const Value *v : n->inputs())
        call.inputs.push_back(v ? tensorRef(slotOf[v]) : TensorRef());
      for (const Value *v : n->outputs())
        call.outputs.push_back(v ? tensorRef(slotOf[v]) : TensorRef());
      calls.push_back(std::move(call));
    }
    externalRefs.clear();
    for (size_t c = 0; c < calls.size(); ++c) {
      const Node *n = steps[c];
      for (unsigned i = 0; i < n->numInputs(); ++i)
        if (n->input(i) && slots[slotOf[n->input(i)]].external)
          externalRefs.emplace_back(slotOf[n->input(i)], &calls[c].inputs[i]);
      for (unsigned o = 0; o < n->numOutputs(); ++o)
        if (n->output(o) && slots[slotOf[n->output(o)]].external)
          externalRefs.emplace_back(slotOf[n->output(o)], &calls[c].outputs[o]);
    }
    callsArena = arena.data;
    callsWorkspace = workspace.data;
    callsValid = true;
    ++generation;
    boundVersions.clear();
    callsVersion = versionOfBound();
  }
  clearErrors();
  auto callOf = [&](int32_t i) {
    return i >= 0 && size_t(i) < calls.size() ? &calls[i] : nullptr;
  };
  if (profiling) {
    nodeTime.resize(calls.size(), 0.0);
    // What is queued before the first node (the inputs' uploads, the cleared
    // error record) finishes first: otherwise the first node's time holds
    // the copies (on a GPU, a 256 MiB upload).
    backend.synchronize(stream);
    for (size_t i = 0; i < calls.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      {
        LaunchAttrScope check;
        backend.launch(calls[i], stream);
      }
      backend.synchronize(stream);
      double t =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      nodeTime[i] += std::max(0.0, t - clockCost);
      if (auto e = readErrors(callOf))
        return std::move(e);
    }
  } else {
    LaunchPlan lp;
    lp.owner = this;
    lp.version = callsVersion;
    lp.calls = calls;
    lp.errors = static_cast<KernelErrorRecord *>(errorBuffer.data);
    LaunchAttrScope check;
    backend.runPlan(lp, stream);
  }
  if (auto e = copyBoundOutputs(stream))
    return std::move(e);
  bool hostOutputs = false;
  for (size_t k = 0; k < graph.outputs().size(); ++k)
    hostOutputs |= !(k < boundOutputs.size() && boundOutputs[k].data);
  std::vector<NamedTensor> outs;
  outs.reserve(graph.outputs().size());
  if (deferredErrors && !hostOutputs) {
    // Nothing to hand over now: the run stays queued, and its caller reads
    // the error record behind it (recordError).
    for (const Value *v : graph.outputs())
      outs.push_back(NamedTensor{v->name(), HostTensor()});
    return outs;
  }
  // The error record and the outputs are copied behind the run, and the run
  // waits once for all of them; the record is checked before any output is
  // handed over.
  KernelErrorRecord rec;
  backend.copyToHost(&rec, errorBuffer.data, sizeof(rec), stream);
  for (size_t k = 0; k < graph.outputs().size(); ++k) {
    const Value *v = graph.outputs()[k];
    if (k < boundOutputs.size() && boundOutputs[k].data) {
      outs.push_back(NamedTensor{v->name(), HostTensor()}); // already in its buffer
      continue;
    }
    unsigned i = slotOf[v];
    const Slot &s = slots[i];
    NamedTensor nt{v->name(), HostTensor(s.type.dtype, s.type.shape)};
    if (s.host) {
      nt.tensor.bytes = s.host->bytes;
    } else {
      backend.copyToHost(nt.tensor.bytes.data(), tensorRef(i).data, nt.tensor.byteSize(),
                         stream);
      transfers.deviceToHost += nt.tensor.byteSize();
    }
    outs.push_back(std::move(nt));
  }
  backend.synchronize(stream);
  // The first data-dependent error of any launch, by node.
  if (auto e = errorOfRecord(rec, callOf))
    return std::move(e);
  return outs;
}

llvm::Error Executor::recordError(const KernelErrorRecord &rec, uint64_t callsGen) {
  if (rec.code == 0)
    return llvm::Error::success();
  if (callsGen != generation || !callsValid)
    return inputError("a kernel of an earlier plan failed (error code {0})", rec.code);
  return errorOfRecord(rec, [&](int32_t i) {
    return i >= 0 && size_t(i) < calls.size() ? &calls[size_t(i)] : nullptr;
  });
}

/// The formal or graph output named `name` among `values`; its index, or -1.
static int64_t indexOfName(llvm::ArrayRef<const Value *> values, llvm::StringRef name) {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i]->name() == name)
      return int64_t(i);
  return -1;
}

/// Records `buffer` as binding `k` of `bindings` (sized `n`); a new dtype
/// or shape (or a first binding) invalidates the plan.
static bool storeBinding(std::vector<TensorRef> &bindings, size_t n, size_t k,
                         const TensorRef &buffer) {
  bindings.resize(n);
  TensorRef &old = bindings[k];
  bool sameType = old.data && buffer.data && old.dtype == buffer.dtype &&
                  llvm::equal(old.shape, buffer.shape);
  old = buffer;
  return sameType;
}

bool Executor::hasBoundBuffers() const {
  auto bound = [](const TensorRef &t) { return t.data != nullptr; };
  return llvm::any_of(boundInputs, bound) || llvm::any_of(boundOutputs, bound) ||
         llvm::any_of(outputOver, [](int32_t f) { return f >= 0; });
}

llvm::Error Executor::bindInput(llvm::StringRef name, const TensorRef &buffer) {
  int64_t k = indexOfName(formals, name);
  if (k < 0)
    return inputError("cannot bind '{0}': it is not an input of the graph", name);
  if (dynamicMode)
    return inputError("cannot bind input '{0}' to backend memory: the graph runs in dynamic "
                      "mode",
                      name);
  const Type &decl = formals[size_t(k)]->type;
  bool fits = decl.elem == DType::Undefined || decl.elem == buffer.dtype;
  if (fits && decl.hasShape) {
    fits = decl.dims.size() == buffer.shape.size();
    for (size_t d = 0; fits && d < decl.dims.size(); ++d)
      fits = !decl.dims[d].isKnown() || decl.dims[d].value == buffer.shape[d];
  }
  if (!fits)
    return inputError("cannot bind input '{0}' ({1} {2}) to a buffer of {3} {4}", name,
                      dtypeName(decl.elem), decl.dimsText(), dtypeName(buffer.dtype),
                      formatShape(buffer.shape));
  if (!storeBinding(boundInputs, formals.size(), size_t(k), buffer))
    planned = false;
  if (auto it = overOfFormal.find(unsigned(k)); it != overOfFormal.end())
    storeBinding(boundOutputs, graph.outputs().size(), it->second, buffer);
  return llvm::Error::success();
}

llvm::Error Executor::bindOutput(llvm::StringRef name, const TensorRef &buffer) {
  int64_t k = indexOfName(graph.outputs(), name);
  if (k < 0)
    return inputError("cannot bind '{0}': it is not an output of the graph", name);
  if (dynamicMode)
    return inputError("cannot bind output '{0}' to backend memory: the graph runs in dynamic "
                      "mode",
                      name);
  // Whether the output's producer may compute in place depends on the
  // binding: a first binding (or an unbinding) plans again.
  bool wasBound = size_t(k) < boundOutputs.size() && boundOutputs[size_t(k)].data;
  storeBinding(boundOutputs, graph.outputs().size(), size_t(k), buffer);
  if (wasBound != (buffer.data != nullptr))
    planned = false;
  if (size_t(k) < outputOver.size() && outputOver[size_t(k)] >= 0) {
    overOfFormal.erase(unsigned(outputOver[size_t(k)]));
    outputOver[size_t(k)] = -1;
    planned = false;
  }
  return llvm::Error::success();
}

std::string Executor::writeOverProblem(llvm::StringRef output, llvm::StringRef input) const {
  int64_t k = indexOfName(graph.outputs(), output);
  int64_t i = indexOfName(formals, input);
  if (k < 0)
    return "it is not an output of the graph";
  if (i < 0)
    return "the input is not an input of the graph";
  if (dynamicMode)
    return "the graph runs in dynamic mode";
  const Value *x = formals[size_t(i)], *y = graph.outputs()[size_t(k)];
  const Node *n = y->producer();
  if (!n || n->getParent() != &graph)
    return "no node of the graph makes it";
  if (llvm::is_contained(graph.outputs(), x))
    return "the input is also an output of the graph";
  unsigned o = y->producerResult();
  llvm::SmallVector<unsigned, 2> over = inPlaceOperands(*n, o);
  llvm::DenseSet<const Node *> readers;
  for (const Use &u : x->uses()) {
    if (u.user->getParent() != &graph) {
      // An outer value (the trainer's state) is read by other graphs too:
      // only reads inside this one count, and one in a body is refused.
      for (const Graph *g = u.user->getParent(); g; g = g->parent())
        if (g == &graph)
          return "a subgraph reads the input";
      continue;
    }
    if (u.user == n) {
      if (!llvm::is_contained(over, u.operand))
        return describeNode(*n) + ", which makes it, reads the input as operand " +
               std::to_string(u.operand) + ", which it cannot write over";
      continue;
    }
    readers.insert(u.user);
  }
  // The schedule is the graph's order: the first reader after the writer.
  bool written = false;
  for (const Node &m : graph.nodes()) {
    if (&m == n)
      written = true;
    else if (written && readers.contains(&m))
      return describeNode(m) + " reads the input after " + describeNode(*n) + " writes it";
  }
  return std::string();
}

llvm::Error Executor::bindOutputOver(llvm::StringRef output, llvm::StringRef input) {
  int64_t ko = indexOfName(graph.outputs(), output), io = indexOfName(formals, input);
  // Every step binds its state again: a binding already made costs nothing.
  if (ko >= 0 && io >= 0 && size_t(ko) < outputOver.size() &&
      outputOver[size_t(ko)] == int32_t(io))
    return llvm::Error::success();
  std::string problem = writeOverProblem(output, input);
  if (!problem.empty())
    return inputError("cannot write output {0} over input {1}: {2}", quoteName(output),
                      quoteName(input), problem);
  size_t k = size_t(ko);
  unsigned i = unsigned(io);
  if (!(i < boundInputs.size() && boundInputs[i].data))
    return inputError("cannot write output {0} over input {1}: the input is not bound",
                      quoteName(output), quoteName(input));
  outputOver.resize(graph.outputs().size(), -1);
  if (auto it = overOfFormal.find(i); it != overOfFormal.end() && it->second != k)
    return inputError("cannot write output {0} over input {1}: output {2} already is",
                      quoteName(output), quoteName(input),
                      quoteName(graph.outputs()[it->second]->name()));
  if (outputOver[k] >= 0)
    overOfFormal.erase(unsigned(outputOver[k]));
  outputOver[k] = int32_t(i);
  overOfFormal[i] = unsigned(k);
  storeBinding(boundOutputs, graph.outputs().size(), k, boundInputs[i]);
  planned = false; // the node writing it may no longer run in place over another operand
  return llvm::Error::success();
}

const ShapedType &Executor::plannedOutputType(size_t k) const {
  return slots[slotOf.lookup(graph.outputs()[k])].type;
}

/// Plan versions are unique across executors, so a capture is never
/// mistaken for another's.
static std::atomic<uint64_t> planVersions{0};

uint64_t Executor::versionOfBound() {
  std::vector<const void *> key;
  key.reserve(externalRefs.size());
  for (const auto &ref : externalRefs)
    key.push_back(slots[ref.first].external);
  for (const auto &[addresses, version] : boundVersions)
    if (addresses == key)
      return version;
  if (boundVersions.size() == kMaxBoundVersions)
    boundVersions.erase(boundVersions.begin());
  boundVersions.emplace_back(std::move(key), ++planVersions);
  return boundVersions.back().second;
}

bool Executor::refreshBound() {
  bool same = true;
  for (size_t i = 0; i < boundInputs.size(); ++i)
    if (boundInputs[i].data) {
      Slot &s = slots[slotOf[formals[i]]];
      same &= s.external == boundInputs[i].data;
      s.external = boundInputs[i].data;
    }
  for (size_t k = 0; k < boundAliases.size(); ++k)
    for (unsigned i : boundAliases[k]) {
      same &= slots[i].external == boundOutputs[k].data;
      slots[i].external = boundOutputs[k].data;
    }
  return same;
}

llvm::Error Executor::copyBoundOutputs(Stream stream) {
  for (size_t k = 0; k < boundOutputs.size(); ++k) {
    const TensorRef &b = boundOutputs[k];
    unsigned i = slotOf[graph.outputs()[k]];
    const Slot &s = slots[i];
    if (!b.data || s.kind == SlotKind::Activation)
      continue; // written by its node
    // A graph input or a constant passed through: copied, through the host
    // when no host copy exists (backends copy host <-> device only).
    size_t bytes = size_t(shapes::numel(s.type.shape)) * runtimeElementSize(s.type.dtype);
    if (s.host) {
      backend.copyToDevice(b.data, s.host->bytes.data(), bytes, stream);
      transfers.hostToDevice += bytes;
      continue;
    }
    std::vector<uint8_t> staged(bytes);
    backend.copyToHost(staged.data(), tensorRef(i).data, bytes, stream);
    backend.synchronize(stream);
    backend.copyToDevice(b.data, staged.data(), bytes, stream);
    transfers.deviceToHost += bytes;
    transfers.hostToDevice += bytes;
  }
  return llvm::Error::success();
}

/// What a declared container type is called in messages.
static std::string containerName(const Type &t) {
  if (t.kind == TypeKind::Sequence)
    return "a sequence of " + dtypeName(t.tensorElemType()).str() + " tensors";
  if (t.inner && t.inner->kind == TypeKind::Sequence)
    return "an optional sequence of " + dtypeName(t.tensorElemType()).str() + " tensors";
  return "an optional " + dtypeName(t.tensorElemType()).str() + " tensor";
}

/// The value of a caller's sequence or optional input declared as `decl`.
static llvm::Expected<std::shared_ptr<SequenceValue>> containerValue(const NamedSequence &s,
                                                                     const Type &decl) {
  bool wantOptional = decl.kind == TypeKind::Optional;
  // An optional's declared element kind; unknown when it has no inner type.
  bool declOfSeq = wantOptional && decl.inner && decl.inner->kind == TypeKind::Sequence;
  bool declOfTensor = wantOptional && decl.inner && decl.inner->kind == TypeKind::Tensor;
  if (s.optional != wantOptional || (s.optional && s.ofSequence && declOfTensor) ||
      (s.optional && !s.ofSequence && declOfSeq))
    return inputError("input '{0}' is {1}, not {2}", s.name, containerName(decl),
                      !s.optional    ? "a sequence"
                      : s.ofSequence ? "an optional sequence"
                                     : "an optional tensor");
  DType want = decl.tensorElemType();
  auto seq = std::make_shared<SequenceValue>();
  seq->elem = s.elem != DType::Undefined ? s.elem
              : want != DType::Undefined ? want
              : s.items.empty()          ? DType::Undefined
                                         : s.items[0].dtype;
  if (want != DType::Undefined && seq->elem != want)
    return inputError("input '{0}': {1} values, the model expects {2}", s.name,
                      dtypeName(seq->elem), containerName(decl));
  if (s.optional && !s.ofSequence && s.hasValue && s.items.size() != 1)
    return inputError("input '{0}': an optional tensor holds one tensor, not {1}", s.name,
                      s.items.size());
  for (size_t i = 0; i < s.items.size(); ++i) {
    DType dt = s.items[i].dtype;
    if (dt != seq->elem)
      return inputError("input '{0}': element {1} is {2}, the model expects {3}", s.name, i,
                        dtypeName(dt), containerName(decl));
    if (runtimeElementSize(dt) == 0)
      return inputError("input '{0}': element type {1} is not supported", s.name, dtypeName(dt));
  }
  if (!s.optional) {
    seq->items = s.items;
    return std::move(seq);
  }
  seq->optional = true;
  seq->ofSequence = s.ofSequence;
  if (!s.hasValue)
    return std::move(seq);
  if (!s.ofSequence) {
    seq->items = s.items;
    return std::move(seq);
  }
  seq->inner = std::make_shared<SequenceValue>();
  seq->inner->elem = seq->elem;
  seq->inner->items = s.items;
  return std::move(seq);
}

llvm::Error Executor::bindSequences(llvm::ArrayRef<NamedTensor> inputs,
                                    llvm::ArrayRef<NamedSequence> sequences) {
  boundSequences.assign(formals.size(), nullptr);
  llvm::StringMap<unsigned> index;
  for (unsigned i = 0; i < formals.size(); ++i)
    index[formals[i]->name()] = i;
  for (const NamedTensor &t : inputs) {
    auto it = index.find(t.name);
    if (it != index.end() && isContainerType(formals[it->second]->type))
      return inputError("input '{0}' is {1}, not a tensor", t.name,
                        containerName(formals[it->second]->type));
  }
  for (const NamedSequence &s : sequences) {
    auto it = index.find(s.name);
    if (it == index.end())
      return inputError("input '{0}' is not an input of the model", s.name);
    const Type &decl = formals[it->second]->type;
    if (!isContainerType(decl))
      return inputError("input '{0}' is a tensor, not {1}", s.name,
                        s.optional ? "an optional" : "a sequence");
    auto seq = containerValue(s, decl);
    if (!seq)
      return seq.takeError();
    boundSequences[it->second] = std::move(*seq);
  }
  for (unsigned i = 0; i < formals.size(); ++i)
    if (isContainerType(formals[i]->type) && !boundSequences[i] && !formals[i]->initializer())
      return inputError("missing input '{0}' ({1})", formals[i]->name(),
                        containerName(formals[i]->type));
  return llvm::Error::success();
}

llvm::Error Executor::plan(llvm::ArrayRef<NamedTensor> inputs,
                           llvm::ArrayRef<NamedSequence> sequences) {
  llvm::Error e = bindSequences(inputs, sequences);
  if (!e)
    e = plan(inputs);
  boundSequences.clear();
  return e;
}

llvm::Expected<std::vector<NamedTensor>>
Executor::run(llvm::ArrayRef<NamedTensor> inputs, llvm::ArrayRef<NamedSequence> sequences,
              std::vector<std::optional<NamedSequence>> &seqOutputs) {
  seqOutputs.clear();
  if (llvm::Error e = bindSequences(inputs, sequences)) {
    boundSequences.clear();
    return std::move(e);
  }
  // As for a body: runDynamic hands sequence outputs over instead of refusing.
  bodyCall = true;
  auto outs = run(inputs);
  bodyCall = false;
  boundSequences.clear();
  std::vector<std::shared_ptr<SequenceValue>> seqs = std::move(sequenceOutputs);
  sequenceOutputs.clear();
  if (!outs)
    return outs.takeError();
  seqOutputs.resize(outs->size());
  for (size_t k = 0; k < outs->size() && k < seqs.size(); ++k) {
    if (!seqs[k])
      continue;
    const SequenceValue &v = *seqs[k];
    NamedSequence &out = seqOutputs[k].emplace();
    out.name = (*outs)[k].name;
    out.elem = v.elem;
    out.optional = v.optional;
    out.items = v.inner ? v.inner->items : v.items;
    // An empty optional knows its element kind from the declaration at least.
    const Type &decl = graph.outputs()[k]->type;
    out.ofSequence = v.optional && (v.ofSequence || v.inner ||
                                    (decl.inner && decl.inner->kind == TypeKind::Sequence));
    out.hasValue = !v.isNone();
    if (out.elem == DType::Undefined)
      out.elem = decl.tensorElemType();
  }
  return outs;
}
