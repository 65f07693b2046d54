//===- ControlFlow.cpp - Dynamic mode and If/Loop/Scan -----------------------===//
//
// Graphs with control flow or data-dependent shapes run node by node: shapes
// are inferred just before each node runs (small integer inputs and the
// inputs of data-dependent ops are copied to the host for the shape
// function), every value is its own backend allocation, released after its
// last use. If/Loop/Scan bodies run on sub-executors with host copies of
// their inputs and captured values.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Executor.h"
#include "ExecutorSlot.h"
#include "mpc/Runtime/Kernels/Broadcast.h"
#include <cstring>

using namespace mpc;

static constexpr int64_t kSmallIntLimit = 1 << 16;


llvm::Expected<HostTensor> Executor::hostValue(unsigned, const TensorRef &ref) const {
  HostTensor h(ref.dtype, {ref.shape.begin(), ref.shape.end()});
  backend.copyToHost(h.bytes.data(), ref.data, h.byteSize(), Stream());
  backend.synchronize(Stream());
  return h;
}

/// The sub-executor of a node's graph attribute.
static Executor *bodyOf(const Node &n, llvm::StringRef attrName,
                        const std::vector<std::unique_ptr<Executor>> &bodies) {
  unsigned idx = 0;
  for (const Attribute &a : n.attrs)
    for (size_t g = 0; g < a.graphs.size(); ++g, ++idx)
      if (a.name == attrName && idx < bodies.size())
        return bodies[idx].get();
  return nullptr;
}

/// Runs a body with formal inputs (in order) plus the captured values it reads.
static llvm::Expected<std::vector<NamedTensor>>
runBody(Executor &body, const Graph &g, std::vector<HostTensor> formalsIn,
        const std::vector<NamedTensor> &captured) {
  std::vector<NamedTensor> in;
  for (size_t i = 0; i < formalsIn.size() && i < g.inputs().size(); ++i)
    in.push_back(NamedTensor{g.inputs()[i]->name(), std::move(formalsIn[i])});
  for (const Value *v : body.outerValues())
    for (const NamedTensor &c : captured)
      if (c.name == v->name())
        in.push_back(c);
  return body.run(in);
}

/// Stacks per-iteration tensors along a new axis 0.
static HostTensor stack(const std::vector<HostTensor> &parts, const Value *bodyOut) {
  if (parts.empty()) {
    std::vector<int64_t> shape = {0};
    for (const Dim &d : bodyOut->type.dims)
      shape.push_back(d.isKnown() ? d.value : 0);
    return HostTensor(bodyOut->type.elem, shape);
  }
  std::vector<int64_t> shape = {int64_t(parts.size())};
  shape.insert(shape.end(), parts[0].shape.begin(), parts[0].shape.end());
  HostTensor out(parts[0].dtype, shape);
  size_t off = 0;
  for (const HostTensor &p : parts) {
    std::memcpy(out.bytes.data() + off, p.bytes.data(),
                std::min(p.byteSize(), out.byteSize() - off));
    off += p.byteSize();
  }
  return out;
}

llvm::Expected<std::vector<HostTensor>>
Executor::runControlFlow(const Node &n, llvm::ArrayRef<const HostTensor *> ins) {
  const auto &subs = bodies[&n];
  std::vector<NamedTensor> captured;
  // Captured values arrive after the node's own inputs (see runDynamic).
  const std::vector<const Value *> &cap = captures[&n];
  for (size_t i = 0; i < cap.size(); ++i)
    captured.push_back(NamedTensor{cap[i]->name(), *ins[n.numInputs() + i]});
  std::vector<HostTensor> results;
  auto take = [&](std::vector<NamedTensor> &outs, size_t from, size_t count) {
    for (size_t i = from; i < from + count && i < outs.size(); ++i)
      results.push_back(std::move(outs[i].tensor));
  };
  if (n.opType == "If") {
    bool cond = ins[0]->getAsDouble(0) != 0;
    Executor *body = bodyOf(n, cond ? "then_branch" : "else_branch", subs);
    const Attribute *a = n.attr(cond ? "then_branch" : "else_branch");
    if (!body || !a)
      return cpuk::nodeError(n, "missing branch");
    auto outs = runBody(*body, *a->graphs[0], {}, captured);
    if (!outs)
      return outs.takeError();
    take(*outs, 0, outs->size());
    return results;
  }
  if (n.opType == "Loop") {
    Executor *body = bodyOf(n, "body", subs);
    const Graph &g = *n.attr("body")->graphs[0];
    int64_t maxTrips = ins[0] ? int64_t(ins[0]->getAsDouble(0)) : INT64_MAX;
    bool cond = ins[1] ? ins[1]->getAsDouble(0) != 0 : true;
    size_t numState = n.numInputs() - 2;
    size_t numScan = g.outputs().size() - 1 - numState;
    std::vector<HostTensor> state;
    for (size_t i = 0; i < numState; ++i)
      state.push_back(*ins[2 + i]);
    std::vector<std::vector<HostTensor>> scans(numScan);
    for (int64_t it = 0; it < maxTrips && cond; ++it) {
      std::vector<HostTensor> f;
      f.emplace_back(DType::I64, std::vector<int64_t>{});
      *f.back().data<int64_t>() = it;
      f.emplace_back(DType::Bool, std::vector<int64_t>{});
      *f.back().data<bool>() = cond;
      for (HostTensor &s : state)
        f.push_back(s);
      auto outs = runBody(*body, g, std::move(f), captured);
      if (!outs)
        return outs.takeError();
      cond = (*outs)[0].tensor.getAsDouble(0) != 0;
      for (size_t i = 0; i < numState; ++i)
        state[i] = std::move((*outs)[1 + i].tensor);
      for (size_t k = 0; k < numScan; ++k)
        scans[k].push_back(std::move((*outs)[1 + numState + k].tensor));
    }
    results = std::move(state);
    for (size_t k = 0; k < numScan; ++k)
      results.push_back(stack(scans[k], g.outputs()[1 + numState + k]));
    return results;
  }
  // Scan (opset 9+), axis 0 and forward directions.
  Executor *body = bodyOf(n, "body", subs);
  const Graph &g = *n.attr("body")->graphs[0];
  size_t numScanIn = n.intAttr("num_scan_inputs", 0);
  for (const char *attr : {"scan_input_axes", "scan_input_directions",
                           "scan_output_axes", "scan_output_directions"})
    for (int64_t v : cpuk::intsAttr(n, attr, {}))
      if (v != 0)
        return cpuk::nodeError(n, llvm::Twine(attr) + " other than 0 is not supported");
  if (n.opsetVersion() < 9)
    return cpuk::nodeError(n, "Scan before opset 9 is not supported");
  size_t numState = n.numInputs() - numScanIn;
  size_t numScanOut = g.outputs().size() - numState;
  std::vector<HostTensor> state;
  for (size_t i = 0; i < numState; ++i)
    state.push_back(*ins[i]);
  int64_t len = numScanIn ? ins[numState]->shape.at(0) : 0;
  std::vector<std::vector<HostTensor>> scans(numScanOut);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<HostTensor> f = state;
    for (size_t j = 0; j < numScanIn; ++j) {
      const HostTensor &x = *ins[numState + j];
      if (x.shape.empty() || x.shape[0] != len)
        return cpuk::nodeError(n, "scan inputs have different lengths");
      HostTensor slice(x.dtype, {x.shape.begin() + 1, x.shape.end()});
      std::memcpy(slice.bytes.data(), x.bytes.data() + t * slice.byteSize(),
                  slice.byteSize());
      f.push_back(std::move(slice));
    }
    auto outs = runBody(*body, g, std::move(f), captured);
    if (!outs)
      return outs.takeError();
    for (size_t i = 0; i < numState; ++i)
      state[i] = std::move((*outs)[i].tensor);
    for (size_t k = 0; k < numScanOut; ++k)
      scans[k].push_back(std::move((*outs)[numState + k].tensor));
  }
  results = std::move(state);
  for (size_t k = 0; k < numScanOut; ++k)
    results.push_back(stack(scans[k], g.outputs()[numState + k]));
  return results;
}

llvm::Expected<std::vector<NamedTensor>>
Executor::runDynamic(const std::vector<const HostTensor *> &bound) {
  std::vector<DeviceBuffer> bufs(slots.size());
  std::vector<int64_t> uses(slots.size(), 0);
  for (const Node &n : graph.nodes()) {
    for (const Value *v : n.inputs())
      if (v)
        ++uses[slotOf[v]];
    for (const Value *v : captures.lookup(&n))
      ++uses[slotOf[v]];
  }
  for (const Value *v : graph.outputs())
    uses[slotOf[v]] = INT64_MAX / 2;
  struct Releaser {
    Backend &b;
    std::vector<DeviceBuffer> &bufs;
    ~Releaser() {
      for (DeviceBuffer &d : bufs)
        b.release(d);
    }
  } releaser{backend, bufs};
  auto ref = [&](unsigned s) {
    TensorRef r;
    r.dtype = slots[s].type.dtype;
    r.shape.assign(slots[s].type.shape.begin(), slots[s].type.shape.end());
    r.data = slots[s].kind == SlotKind::Initializer ? slots[s].persistent : bufs[s].data;
    return r;
  };
  auto define = [&](unsigned s, const HostTensor *h, const ShapedType &t) -> llvm::Error {
    slots[s].type = t;
    uint64_t bytes = uint64_t(kernels::numElements(t.shape)) * runtimeElementSize(t.dtype);
    auto buf = backend.allocate(bytes, BufferKind::Transient);
    if (!buf)
      return buf.takeError();
    bufs[s] = *buf;
    if (h)
      backend.copyToDevice(buf->data, h->bytes.data(), h->byteSize(), Stream());
    return llvm::Error::success();
  };
  for (size_t i = 0; i < formals.size(); ++i) {
    std::unique_ptr<HostTensor> dflt;
    const HostTensor *t = bound[i];
    if (!t) {
      auto d = hostTensorFromIR(*formals[i]->initializer());
      if (!d)
        return d.takeError();
      dflt = std::make_unique<HostTensor>(std::move(*d));
      t = dflt.get();
    }
    if (auto e = define(slotOf[formals[i]], t, ShapedType{t->dtype, t->shape}))
      return std::move(e);
  }
  for (const Node &n : graph.nodes()) {
    std::vector<unsigned> inSlots;
    for (const Value *v : n.inputs())
      inSlots.push_back(v ? slotOf[v] : ~0u);
    std::vector<std::unique_ptr<HostTensor>> hostCopies;
    auto hostOf = [&](unsigned s) -> llvm::Expected<const HostTensor *> {
      if (slots[s].kind == SlotKind::Initializer && slots[s].host)
        return slots[s].host.get();
      auto h = hostValue(s, ref(s));
      if (!h)
        return h.takeError();
      hostCopies.push_back(std::make_unique<HostTensor>(std::move(*h)));
      return hostCopies.back().get();
    };
    if (bodies.count(&n)) {
      std::vector<const HostTensor *> ins;
      std::vector<unsigned> all = inSlots;
      for (const Value *v : captures.lookup(&n))
        all.push_back(slotOf[v]);
      for (unsigned s : all) {
        if (s == ~0u) {
          ins.push_back(nullptr);
          continue;
        }
        auto h = hostOf(s);
        if (!h)
          return h.takeError();
        ins.push_back(*h);
      }
      auto outs = runControlFlow(n, ins);
      if (!outs)
        return outs.takeError();
      for (unsigned o = 0; o < n.numOutputs() && o < outs->size(); ++o)
        if (n.output(o))
          if (auto e = define(slotOf[n.output(o)], &(*outs)[o],
                              ShapedType{(*outs)[o].dtype, (*outs)[o].shape}))
            return std::move(e);
    } else {
      const CpuKernel *row = findCpuKernel(n);
      std::vector<ShapedType> inTypes;
      std::vector<const HostTensor *> values;
      for (unsigned s : inSlots) {
        if (s == ~0u) {
          inTypes.emplace_back();
          values.push_back(nullptr);
          continue;
        }
        inTypes.push_back(slots[s].type);
        DType dt = slots[s].type.dtype;
        bool smallInt = (dt == DType::I64 || dt == DType::I32) &&
                        kernels::numElements(slots[s].type.shape) <= kSmallIntLimit;
        if (smallInt || row->dynamicShape || slots[s].host) {
          auto h = hostOf(s);
          if (!h)
            return h.takeError();
          values.push_back(*h);
        } else {
          values.push_back(nullptr);
        }
      }
      std::vector<ShapedType> outTypes;
      if (auto e = row->shape(ShapeQuery{n, inTypes, values}, outTypes))
        return std::move(e);
      outTypes.resize(n.numOutputs());
      llvm::SmallVector<DType, 4> dts;
      for (const ShapedType &t : inTypes)
        dts.push_back(t.dtype);
      if (!backend.supportsOp(n, dts))
        return inputError("unsupported op {0} at {1} for input type {2}", n.opType,
                          describeNode(n), dts.empty() ? "none" : dtypeName(dts[0]));
      KernelCall call;
      call.node = &n;
      for (unsigned s : inSlots)
        call.inputs.push_back(s == ~0u ? TensorRef() : ref(s));
      for (unsigned o = 0; o < n.numOutputs(); ++o) {
        if (!n.output(o)) {
          call.outputs.emplace_back();
          continue;
        }
        unsigned s = slotOf[n.output(o)];
        if (auto e = define(s, nullptr, outTypes[o]))
          return std::move(e);
        call.outputs.push_back(ref(s));
      }
      if (auto e = backend.launch(call, Stream()))
        return std::move(e);
    }
    // Release values whose last use this was.
    auto drop = [&](unsigned s) {
      if (s != ~0u && --uses[s] == 0 && slots[s].kind != SlotKind::Initializer) {
        backend.release(bufs[s]);
        bufs[s] = DeviceBuffer();
      }
    };
    for (unsigned s : inSlots)
      drop(s);
    for (const Value *v : captures.lookup(&n))
      drop(slotOf[v]);
  }
  backend.synchronize(Stream());
  std::vector<NamedTensor> outs;
  for (const Value *v : graph.outputs()) {
    auto h = hostValue(slotOf[v], ref(slotOf[v]));
    if (!h)
      return h.takeError();
    outs.push_back(NamedTensor{v->name(), std::move(*h)});
  }
  return outs;
}
