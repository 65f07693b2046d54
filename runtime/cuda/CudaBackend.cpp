//===- CudaBackend.cpp - The CUDA backend ----------------------------------===//
//
// Backend over the CUDA runtime and cuBLASLt. Host code only: the device,
// memory, copies, streams, the prepare cache and the error record. What a
// node needs is made by its family's prepare function (CudaOp.h: element-wise
// kernels through the launchers of the .cu files, matrix products through
// cuBLASLt), once per node and shape signature. Every
// decision that does not need a device (kernel table, capabilities, launch
// geometry, broadcast plans, GEMM layouts) is a pure host function tested in
// tests/cuda_host; this file only hands their results to CUDA.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/CudaBackend.h"
#include "CudaLaunch.h"
#include "CudaOp.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/GraphSchedule.h"
#include "mpc/Runtime/Cuda/ReadbackEvents.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/Readback.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cassert>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

// CastKernels.cu writes the error record through its own mirror of the
// first fields; keep the layout that it relies on.
static_assert(offsetof(KernelErrorRecord, code) == 0 &&
                  offsetof(KernelErrorRecord, call) == 4 &&
                  offsetof(KernelErrorRecord, value) == 16 && sizeof(KernelErrorRecord) == 24,
              "the device error record layout of CastKernels.cu");

namespace {

std::string bytesText(size_t n) { return std::to_string(n) + " bytes"; }


/// A CUDA failure outside any node (a copy, a stream, a synchronization)
/// leaves nothing to return it through and the device's state unknown: say
/// so in one line and stop (no partial output is written).
[[noreturn]] void fatal(const std::string &what) {
  llvm::errs() << "mpc: error: CUDA: " << what << "\n";
  llvm::errs().flush();
  std::exit(1);
}

cudaStream_t streamOf(Stream s) { return static_cast<cudaStream_t>(s.handle); }

/// What prepare() made for a node and signature (the KernelHandle).
struct Prepared {
  std::unique_ptr<CudaOp> op;
  PreparedKernel result;
  unsigned refs = 0;
};

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const CudaBackendOptions &o) : options(o), schedule(o.cudaGraph) {
    // A test hook of the GPU bundle: the named node's launch fails, so the
    // error path (the device-written record, the message naming the node)
    // runs where no real failure can be provoked.
    if (const char *name = std::getenv("MPC_CUDA_FAIL_NODE"))
      failNode = name;
  }
  ~CudaBackend() override;
  llvm::StringRef name() const override { return "cuda"; }
  llvm::Error checkAvailable() const override;
  llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) override;
  void release(DeviceBuffer buffer) override;
  void copyToDevice(void *dst, const void *src, size_t bytes, Stream stream) override;
  void copyToHost(void *dst, const void *src, size_t bytes, Stream stream) override;
  Stream createStream() override;
  void destroyStream(Stream s) override;
  bool hasKernel(const Node &node) const override { return findCudaKernel(node) != nullptr; }
  bool supportsOp(const Node &node, llvm::ArrayRef<DType> dts) const override {
    return cudaRunsIfKnown(node, dts);
  }
  PreparedKernel prepare(const Node &node, llvm::ArrayRef<TensorDesc> inputs) override;
  void unprepare(KernelHandle h) override;
  HostKernelFn hostKernel(const Node &node) const override { return cpuHostKernel(node); }
  void launch(const KernelCall &call, Stream stream) override;
  void runPlan(const LaunchPlan &plan, Stream stream) override;
  void synchronize(Stream stream) override;
  llvm::Error takeMessageError(const KernelErrorRecord *record) override;
  /// Pinned host memory, cudaMemcpyAsync and a pool of events
  /// (CudaReadback below).
  std::unique_ptr<ReadbackChannel> createReadback() override;
  const BackendCaps &caps() const override { return cudaCaps; }
  size_t peakAllocatedBytes() const override { return peakBytes; }
  size_t allocatedBytes() const override { return currentBytes; }
  /// cudaMemGetInfo of device 0 (the context made first).
  bool deviceMemoryInfo(uint64_t &used, uint64_t &total) override;

private:
  /// Selects the device and makes the cuBLASLt handle, once.
  void ensureReady();
  /// Records a failed launch of `call`: a Message record written on the
  /// device, the text kept for takeMessageError.
  void failed(const KernelCall &call, const std::string &what, cudaStream_t s);

  CudaBackendOptions options;
  CudaCaps cudaCaps;
  bool ready = false;
  /// The device's facts and the handles (made by ensureReady).
  CudaContext ctx;
  std::map<PrepareKey, std::unique_ptr<Prepared>> cache;
  KernelMessages messages;
  size_t currentBytes = 0, peakBytes = 0;
  /// The last node queued, named when a later synchronization fails.
  std::string lastNode;
  /// Launches that failed (failed()); a capture during which one did is
  /// dropped.
  uint64_t launchFailures = 0;
  /// Inside captureAndLaunch's capture.
  bool capturing = false;
  /// Why the last capture failed, for the note that says its plan runs
  /// eagerly (a slower step nobody would otherwise notice).
  std::string captureFailure;
  /// MPC_CUDA_FAIL_NODE: the node whose launch is made to fail.
  std::string failNode;
  /// Captured plans, by (owner, version) (GraphSchedule).
  GraphSchedule schedule;
  std::map<GraphSchedule::Key, cudaGraphExec_t> graphs;
  /// Captures the plan into a graph and launches it; false (nothing ran)
  /// when the capture failed.
  bool captureAndLaunch(const LaunchPlan &plan, Stream stream);
  void dropGraph(GraphSchedule::Key key);
};

CudaBackend::~CudaBackend() {
  for (auto &g : graphs)
    cudaGraphExecDestroy(g.second);
  cache.clear();
  releaseDnn(ctx);
  if (ctx.lt)
    cublasLtDestroy(ctx.lt);
}

llvm::Error CudaBackend::checkAvailable() const {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return inputError("no CUDA device found (cudaGetDeviceCount: {0})",
                      cudaText(e));
  if (count == 0)
    return inputError("no CUDA device found (cudaGetDeviceCount: 0 devices)");
  cudaDeviceProp prop;
  e = cudaGetDeviceProperties(&prop, 0);
  if (e != cudaSuccess)
    return inputError("cannot query CUDA device 0 (cudaGetDeviceProperties: "
                      "{0})",
                      cudaText(e));
  if (prop.major < 8)
    return inputError("CUDA device 0 '{0}' has compute capability {1}.{2}; "
                      "mpc's CUDA backend needs 8.0 or newer",
                      prop.name, prop.major, prop.minor);
  return llvm::Error::success();
}

void CudaBackend::ensureReady() {
  if (ready)
    return;
  if (llvm::Error e = checkAvailable()) {
    std::string text = llvm::toString(std::move(e));
    fatal(text);
  }
  if (cudaError_t e = cudaSetDevice(0))
    fatal("cudaSetDevice: " + cudaText(e));
  int sms = 0, major = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  ctx.smCount = sms > 0 ? unsigned(sms) : 1;
  ctx.computeMajor = major;
  ctx.tf32 = options.tf32;
  // cuBLAS's advice: 32 MiB of workspace on sm_90 and newer, 4 MiB before.
  ctx.gemmWorkspaceCap = size_t(major >= 9 ? 32 : 4) << 20;
  if (cublasStatus_t s = cublasLtCreate(&ctx.lt))
    fatal(std::string("cublasLtCreate: ") + cublasLtGetStatusString(s));
  ready = true;
}

llvm::Expected<DeviceBuffer> CudaBackend::allocate(size_t bytes, BufferKind kind) {
  ensureReady();
  // cudaMalloc returns 256-byte aligned memory; sizes are rounded to match
  // so that every buffer may be addressed in 256-byte steps.
  size_t size = allocationSize(bytes);
  if (llvm::Error e = checkBudget(bytes))
    return std::move(e);
  void *p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, size)) {
    cudaGetLastError(); // an allocation failure is not sticky
    size_t freeBytes = 0, total = 0;
    cudaMemGetInfo(&freeBytes, &total);
    return inputError("cannot allocate {0} of CUDA device memory ({1} free of {2}): {3}",
                      bytesText(size), bytesText(freeBytes), bytesText(total),
                      cudaText(e));
  }
  currentBytes += size;
  peakBytes = std::max(peakBytes, currentBytes);
  return DeviceBuffer{p, size, kind};
}

bool CudaBackend::deviceMemoryInfo(uint64_t &used, uint64_t &total) {
  ensureReady();
  size_t freeBytes = 0, all = 0;
  if (cudaMemGetInfo(&freeBytes, &all) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  used = all - freeBytes;
  total = all;
  return true;
}

void CudaBackend::release(DeviceBuffer b) {
  if (!b.data)
    return;
  currentBytes -= b.size;
  if (cudaError_t e = cudaFree(b.data))
    fatal("cudaFree: " + cudaText(e));
}

void CudaBackend::copyToDevice(void *dst, const void *src, size_t bytes, Stream s) {
  // From pageable memory the call returns once `src` has been staged, so
  // the caller may reuse it at once.
  if (!bytes)
    return;
  if (!s.handle)
    synchronize(s); // the synchronous stream starts after every stream's work
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, streamOf(s)))
    fatal("copy of " + bytesText(bytes) + " to the device: " + cudaText(e));
  if (!s.handle)
    synchronize(s);
}

void CudaBackend::copyToHost(void *dst, const void *src, size_t bytes, Stream s) {
  // Into pageable memory the call returns once the bytes have landed.
  if (!bytes)
    return;
  if (!s.handle)
    synchronize(s);
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, streamOf(s)))
    fatal("copy of " + bytesText(bytes) + " to the host" +
          (lastNode.empty() ? "" : " after " + lastNode) + ": " + cudaText(e));
}

Stream CudaBackend::createStream() {
  ensureReady();
  cudaStream_t s = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))
    fatal("cudaStreamCreate: " + cudaText(e));
  return Stream{s};
}

void CudaBackend::destroyStream(Stream s) {
  if (s.handle)
    cudaStreamDestroy(streamOf(s));
}

void CudaBackend::synchronize(Stream s) {
  // Stream(): the synchronous stream, which waits for every stream (the
  // executors' are non-blocking, so the legacy default stream would not).
  if (cudaError_t e = s.handle ? cudaStreamSynchronize(streamOf(s)) : cudaDeviceSynchronize())
    fatal((lastNode.empty() ? std::string("cudaStreamSynchronize")
                            : "cudaStreamSynchronize after " + lastNode) +
          ": " + cudaText(e));
}

PreparedKernel CudaBackend::prepare(const Node &n, llvm::ArrayRef<TensorDesc> inputs) {
  PrepareKey key = prepareKey(n, inputs);
  auto it = cache.find(key);
  if (it != cache.end()) {
    ++it->second->refs;
    return it->second->result;
  }
  const CudaKernel *row = findCudaKernel(n);
  if (!row || !cudaRunsShaped(n, inputs) || inputs.empty())
    return PreparedKernel();
  ensureReady();
  auto p = std::make_unique<Prepared>();
  auto op = prepareCudaOp(n, *row, inputs, ctx);
  if (!op) {
    // The executor names the node as unsupported; say what the library refused.
    llvm::errs() << "mpc: note: " << llvm::toString(op.takeError()) << "\n";
    return PreparedKernel();
  }
  if (!*op)
    return PreparedKernel();
  p->op = std::move(*op);
  p->result.workspaceBytes = p->op->workspaceBytes();
  p->result.handle = p.get();
  p->refs = 1;
  PreparedKernel result = p->result;
  cache.emplace(std::move(key), std::move(p));
  return result;
}

void CudaBackend::unprepare(KernelHandle h) {
  for (auto it = cache.begin(); it != cache.end(); ++it)
    if (it->second.get() == h) {
      if (--it->second->refs == 0)
        cache.erase(it);
      return;
    }
}

void CudaBackend::launch(const KernelCall &call, Stream stream) {
  cudaStream_t s = streamOf(stream);
  const Prepared *p = static_cast<const Prepared *>(call.kernel);
  if (!p)
    return failed(call, "launched without a prepared CUDA kernel", s);
  lastNode = describeNode(*call.node);
  if (!failNode.empty() && call.node->name == failNode)
    return failed(call, "launch failed on purpose (MPC_CUDA_FAIL_NODE)", s);
  std::string what = p->op->launch(call, s, ctx);
  if (!what.empty())
    failed(call, what, s);
}

void CudaBackend::runPlan(const LaunchPlan &plan, Stream stream) {
  GraphSchedule::Key key(plan.owner, plan.version);
  GraphSchedule::Action action = schedule.next(plan.owner, plan.version, stream.handle);
  for (const GraphSchedule::Key &old : schedule.takeEvicted())
    dropGraph(old);
  switch (action) {
  case GraphSchedule::Action::Eager:
    return Backend::runPlan(plan, stream);
  case GraphSchedule::Action::Replay: {
    auto it = graphs.find(key);
    if (it == graphs.end())
      return Backend::runPlan(plan, stream);
    if (!plan.calls.empty())
      lastNode = describeNode(*plan.calls.back().node);
    if (cudaError_t e = cudaGraphLaunch(it->second, streamOf(stream)))
      fatal("cudaGraphLaunch of a captured plan: " + cudaText(e));
    return;
  }
  case GraphSchedule::Action::Capture:
    if (captureAndLaunch(plan, stream)) {
      schedule.captured(key);
      return;
    }
    schedule.captureFailed(key);
    llvm::errs() << "mpc: note: a plan of " << plan.calls.size()
                 << " launches runs eagerly from now on: capturing it as a CUDA graph failed ("
                 << captureFailure << ")\n";
    return Backend::runPlan(plan, stream);
  }
}

bool CudaBackend::captureAndLaunch(const LaunchPlan &plan, Stream stream) {
  GraphSchedule::Key key(plan.owner, plan.version);
  dropGraph(key);
  cudaStream_t s = streamOf(stream);
  uint64_t failuresBefore = launchFailures;
  captureFailure.clear();
  // Thread-local mode: another thread's CUDA calls (a CPU fallback's copies
  // on the synchronous stream) neither join nor break this capture.
  if (cudaError_t be = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal)) {
    captureFailure = "cudaStreamBeginCapture: " + cudaText(be);
    cudaGetLastError();
    return false;
  }
  capturing = true;
  for (const KernelCall &call : plan.calls)
    launch(call, stream);
  capturing = false;
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(s, &graph);
  cudaGraphExec_t exec = nullptr;
  // A launch that failed while capturing (failed() recorded nothing): run
  // eagerly instead, where the failure is recorded and reported.
  if (e != cudaSuccess && captureFailure.empty())
    captureFailure = "cudaStreamEndCapture: " + cudaText(e);
  if (e == cudaSuccess && launchFailures == failuresBefore) {
    e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess)
      captureFailure = "cudaGraphInstantiate: " + cudaText(e);
  }
  if (graph)
    cudaGraphDestroy(graph);
  if (e != cudaSuccess || !exec) {
    cudaGetLastError(); // a failed capture is not sticky
    return false;
  }
  graphs[key] = exec;
  if (cudaError_t le = cudaGraphLaunch(exec, s))
    fatal("cudaGraphLaunch of a captured plan: " + cudaText(le));
  return true;
}

void CudaBackend::dropGraph(GraphSchedule::Key key) {
  auto it = graphs.find(key);
  if (it == graphs.end())
    return;
  cudaGraphExecDestroy(it->second);
  graphs.erase(it);
}

void CudaBackend::failed(const KernelCall &call, const std::string &what, cudaStream_t s) {
  ++launchFailures;
  // While capturing, nothing runs: the capture is dropped and the plan runs
  // eagerly, where this failure is recorded and reported.
  if (capturing) {
    if (captureFailure.empty())
      captureFailure = describeNode(*call.node) + ": " + what;
    return;
  }
  llvm::Error err = inputError("{0}: {1}", describeNode(*call.node), what);
  if (!call.errors) {
    fatal(llvm::toString(std::move(err)));
  }
  if (cudaError_t e = launchRecordError(call.errors, int32_t(KernelErrorCode::Message),
                                        call.index, s))
    fatal(llvm::toString(std::move(err)) + "; then recording it failed: " + cudaText(e));
  // As on the CPU: one pending message per record, the first error winning
  // (the device keeps the first record; a later message would not be read).
  messages.put(call.errors, std::move(err), /*replace=*/false);
}

llvm::Error CudaBackend::takeMessageError(const KernelErrorRecord *record) {
  return messages.take(record);
}

/// The trainer's readback channel on a GPU: records land in page-locked
/// host memory (cudaHostAlloc), so cudaMemcpyAsync into them is truly
/// asynchronous, and each record's marker is a CUDA event recorded behind
/// its copies. Which event a marker uses, and what polling or waiting on an
/// old one means, is ReadbackEvents' (pure host logic, tested in
/// tests/cuda_host). One channel serves one stream (the step executor's).
class CudaReadback final : public ReadbackChannel {
public:
  /// Twice the trainer's ring, so that a record's own event is still the one
  /// polled when the host takes it.
  static constexpr unsigned kEvents = 32;
  CudaReadback() : slots(kEvents) {
    events.resize(slots.slots());
    for (cudaEvent_t &e : events)
      if (cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming))
        fatal("cudaEventCreate: " + cudaText(err));
  }
  ~CudaReadback() override {
    for (cudaEvent_t e : events)
      cudaEventDestroy(e);
  }
  void *allocateHost(size_t bytes) override {
    void *p = nullptr;
    if (cudaError_t e = cudaHostAlloc(&p, std::max<size_t>(bytes, 64), cudaHostAllocDefault))
      fatal("cudaHostAlloc of " + bytesText(bytes) + " for the readback ring: " + cudaText(e));
    return p;
  }
  void releaseHost(void *p) override {
    if (p)
      cudaFreeHost(p);
  }
  void copyAsync(void *dst, const void *src, size_t bytes, Stream s) override {
    if (!bytes)
      return;
    if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, streamOf(s)))
      fatal("readback copy of " + bytesText(bytes) + ": " + cudaText(e));
  }
  /// From pinned staging memory (StagingRing: the trainer's batch), so the
  /// copy is asynchronous; the ring's markers keep the source unchanged
  /// until it has run.
  void uploadAsync(void *dst, const void *src, size_t bytes, Stream s) override {
    if (!bytes)
      return;
    if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, streamOf(s)))
      fatal("staged upload of " + bytesText(bytes) + ": " + cudaText(e));
  }
  uint64_t mark(Stream s) override {
    assert((!stream || stream == streamOf(s)) && "one stream per readback channel");
    stream = streamOf(s);
    uint64_t m = slots.next();
    if (cudaError_t e = cudaEventRecord(events[slots.slotOf(m)], stream))
      fatal("cudaEventRecord: " + cudaText(e));
    return m;
  }
  bool reached(uint64_t marker) override {
    ReadbackEvents::Probe p = slots.probe(marker);
    if (p.done)
      return true;
    cudaError_t e = cudaEventQuery(events[p.slot]);
    if (e == cudaErrorNotReady)
      return false;
    if (e != cudaSuccess)
      fatal("cudaEventQuery: " + cudaText(e));
    slots.completed(p);
    return true;
  }
  void wait(uint64_t marker) override {
    ReadbackEvents::Probe p = slots.probe(marker);
    if (p.done)
      return;
    if (cudaError_t e = cudaEventSynchronize(events[p.slot]))
      fatal("cudaEventSynchronize: " + cudaText(e));
    slots.completed(p);
  }

private:
  ReadbackEvents slots;
  std::vector<cudaEvent_t> events;
  cudaStream_t stream = nullptr;
};

std::unique_ptr<ReadbackChannel> CudaBackend::createReadback() {
  ensureReady();
  return std::make_unique<CudaReadback>();
}

} // namespace

llvm::Expected<std::unique_ptr<Backend>>
mpc::createCudaBackend(const CudaBackendOptions &options) {
  return std::unique_ptr<Backend>(new CudaBackend(options));
}

llvm::Expected<std::unique_ptr<Backend>> mpc::createCudaBackend() {
  return createCudaBackend(CudaBackendOptions());
}
