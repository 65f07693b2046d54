//===- FallbackBackend.cpp - A device backend with the CPU behind it ------===//
#include "mpc/Runtime/FallbackBackend.h"

#include "mpc/IR/Graph.h"
#include "mpc/Support/Diagnostics.h"

#include <cstdlib>
#include <cstring>

using namespace mpc;

FallbackBackend::FallbackBackend(std::unique_ptr<Backend> device, std::unique_ptr<Backend> host)
    : device(std::move(device)), host(std::move(host)) {}

FallbackBackend::~FallbackBackend() {
  for (DeviceBuffer &b : staging)
    if (b.data)
      host->release(b);
  if (hostWorkspace.data)
    host->release(hostWorkspace);
}

PreparedKernel FallbackBackend::prepare(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  llvm::SmallVector<DType, 4> dtypes;
  for (const TensorDesc &d : inputs)
    dtypes.push_back(d.dtype);
  Routed r;
  PreparedKernel k;
  if (device->hasKernel(n) && device->supportsOp(n, dtypes))
    k = device->prepare(n, inputs);
  if (!k.handle) {
    // The device has no kernel for these inputs: the host's, if it has one.
    k = host->prepare(n, inputs);
    if (!k.handle)
      return PreparedKernel();
    r.onHost = true;
    r.hostWorkspace = k.workspaceBytes;
    k.workspaceBytes = 0; // host memory, ours: the executor's is device memory
  }
  r.inner = k.handle;
  sideOf[&n] = {r.onHost, n.opType};
  Routed *slot;
  if (!freeRouted.empty()) {
    slot = freeRouted.back();
    freeRouted.pop_back();
    *slot = r;
  } else {
    routed.push_back(r);
    slot = &routed.back();
  }
  k.handle = slot;
  return k;
}

void FallbackBackend::unprepare(KernelHandle h) {
  if (!h)
    return;
  Routed *r = const_cast<Routed *>(static_cast<const Routed *>(h));
  (r->onHost ? host : device)->unprepare(r->inner);
  *r = Routed();
  freeRouted.push_back(r);
}

void FallbackBackend::launch(const KernelCall &call, Stream s) {
  const Routed &r = *static_cast<const Routed *>(call.kernel);
  if (r.onHost)
    return runOnHost(call, r, s);
  KernelCall c = call;
  c.kernel = r.inner;
  device->launch(c, s);
}

void FallbackBackend::runPlan(const LaunchPlan &plan, Stream s) {
  for (const KernelCall &c : plan.calls)
    if (static_cast<const Routed *>(c.kernel)->onHost)
      return Backend::runPlan(plan, s);
  if (plan.owner != planOwner || plan.version != planVersion ||
      devicePlan.size() != plan.calls.size()) {
    planOwner = plan.owner;
    planVersion = plan.version;
    devicePlan.assign(plan.calls.begin(), plan.calls.end());
    for (KernelCall &c : devicePlan)
      c.kernel = static_cast<const Routed *>(c.kernel)->inner;
  }
  LaunchPlan p = plan;
  p.calls = devicePlan;
  device->runPlan(p, s);
}

void *FallbackBackend::stagingBuffer(size_t i, size_t bytes) {
  if (staging.size() <= i)
    staging.resize(i + 1);
  DeviceBuffer &b = staging[i];
  if (b.data && b.size >= bytes)
    return b.data;
  if (b.data)
    host->release(b);
  b = DeviceBuffer();
  auto a = host->allocate(std::max<size_t>(bytes, 256), BufferKind::Transient);
  if (!a) {
    llvm::consumeError(a.takeError());
    return nullptr;
  }
  b = *a;
  return b.data;
}

static size_t bytesOf(const TensorRef &t) {
  return (size_t(t.numElements()) * dtypeBits(t.dtype) + 7) / 8;
}

void FallbackBackend::runOnHost(const KernelCall &call, const Routed &r, Stream s) {
  // The call as the host kernel sees it: the same tensors in host buffers.
  KernelCall hc = call;
  hc.kernel = r.inner;
  KernelErrorRecord hostRecord;
  hc.errors = &hostRecord;
  size_t slot = 0;
  bool ok = true;
  for (TensorRef &in : hc.inputs) {
    if (!in.data)
      continue;
    size_t bytes = bytesOf(in);
    void *h = stagingBuffer(slot++, bytes);
    if (!h) {
      ok = false;
      break;
    }
    if (bytes)
      device->copyToHost(h, in.data, bytes, s);
    in.data = h;
  }
  for (size_t o = 0; ok && o < hc.outputs.size(); ++o) {
    TensorRef &out = hc.outputs[o];
    if (!out.data)
      continue;
    // An output the executor placed on an input (in place) shares that
    // input's host buffer, so the kernel sees the same aliasing.
    void *h = nullptr;
    for (size_t i = 0; i < call.inputs.size(); ++i)
      if (call.inputs[i].data == call.outputs[o].data && bytesOf(call.inputs[i]) >= bytesOf(out))
        h = hc.inputs[i].data;
    if (!h)
      h = stagingBuffer(slot++, bytesOf(out));
    if (!h) {
      ok = false;
      break;
    }
    out.data = h;
  }
  hc.workspace = nullptr;
  hc.workspaceBytes = 0;
  if (ok && r.hostWorkspace) {
    if (!hostWorkspace.data || hostWorkspace.size < r.hostWorkspace) {
      if (hostWorkspace.data)
        host->release(hostWorkspace);
      hostWorkspace = DeviceBuffer();
      auto a = host->allocate(r.hostWorkspace, BufferKind::Transient);
      if (a)
        hostWorkspace = *a;
      else
        llvm::consumeError(a.takeError());
    }
    ok = hostWorkspace.data != nullptr;
    hc.workspace = hostWorkspace.data;
    hc.workspaceBytes = r.hostWorkspace;
  }
  // The inputs must have landed (and the device be done with what it queued
  // before) before the host reads them.
  device->synchronize(s);
  llvm::Error message = llvm::Error::success();
  if (ok) {
    host->launch(hc, Stream());
    for (size_t o = 0; o < hc.outputs.size(); ++o)
      if (call.outputs[o].data && bytesOf(call.outputs[o]))
        device->copyToDevice(call.outputs[o].data, hc.outputs[o].data, bytesOf(call.outputs[o]),
                             s);
    if (hostRecord.code == int32_t(KernelErrorCode::Message))
      message = host->takeMessageError(&hostRecord);
  } else {
    // Host memory ran out: reported like a kernel's own error.
    hostRecord = KernelErrorRecord();
    hostRecord.code = int32_t(KernelErrorCode::Message);
    hostRecord.call = call.index;
    message = inputError("{0}: cpu fallback: cannot allocate host buffers for its tensors",
                         describeNode(*call.node));
  }
  if (!call.errors || hostRecord.code == 0) {
    llvm::consumeError(std::move(message));
    return;
  }
  // The first error of the run wins: the device's record may hold one.
  KernelErrorRecord deviceRecord;
  device->copyToHost(&deviceRecord, call.errors, sizeof(deviceRecord), s);
  device->synchronize(s);
  if (deviceRecord.code != 0) {
    llvm::consumeError(std::move(message));
    return;
  }
  // One pending message per record, the first winning (as the device keeps
  // the first record): a trainer that reads a step's record after later
  // steps ran (deferred errors) still gets that step's message.
  if (hostRecord.code == int32_t(KernelErrorCode::Message))
    messages.put(call.errors, std::move(message), /*replace=*/false);
  else
    llvm::consumeError(std::move(message));
  device->copyToDevice(call.errors, &hostRecord, sizeof(hostRecord), s);
  device->synchronize(s);
}

llvm::Error FallbackBackend::takeMessageError(const KernelErrorRecord *record) {
  if (messages.has(record))
    return messages.take(record);
  return device->takeMessageError(record);
}

FallbackBackend::Partition FallbackBackend::partition() const {
  Partition p;
  for (const auto &[node, side] : sideOf) {
    if (side.first) {
      ++p.hostNodes;
      ++p.hostOps[side.second];
    } else {
      ++p.deviceNodes;
    }
  }
  return p;
}

std::string FallbackBackend::partitionLine() const {
  Partition p = partition();
  auto nodes = [](size_t n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); };
  std::string s = device->name().str() + ": " + nodes(p.deviceNodes) + "; " +
                  host->name().str() + " fallback: ";
  if (!p.hostNodes)
    return s + "none";
  s += nodes(p.hostNodes) + " (";
  bool first = true;
  for (const auto &[op, n] : p.hostOps) {
    s += (first ? "" : ", ") + op + " x" + std::to_string(n);
    first = false;
  }
  return s + ")";
}
