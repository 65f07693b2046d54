//===- Backend.h - The small interface every device backend implements -*- C++ -*-===//
//
// A backend allocates buffers, copies between host and device, says which
// nodes it can run, prepares a node once per shape signature and launches it
// on a stream the executor owns; it may run a whole static plan at once
// (capture and replay). Shapes are inferred on the host by the executor (the
// op registry's shape functions, OpRegistry.h), so a backend only sees fully
// shaped tensors. Data-dependent kernel errors are written to a per-run
// error record in backend memory and read by the executor after the run.
// docs/backends.md describes the contract.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_BACKEND_H
#define MPC_RUNTIME_BACKEND_H

#include "mpc/IR/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

class BackendCaps;
class Node;
class ReadbackChannel;
struct OpParams;

/// A backend's state for one node and shape signature, made by
/// Backend::prepare() and handed back with every launch of the node: the CPU
/// backend's kernel row; a device backend's descriptors and algorithm
/// choice. Null: the backend has no kernel for the node.
using KernelHandle = const void *;

/// An operand's dtype and dense shape: one entry of a shape signature.
struct TensorDesc {
  /// Most elements of an integer operand whose value a signature carries.
  static constexpr int64_t kMaxKnownInts = 64;
  DType dtype = DType::Undefined;
  llvm::SmallVector<int64_t, 6> shape;
  /// The operand's values, when a static plan knows them on the host before
  /// anything runs (an initializer, or a value folded while planning, such
  /// as a Slice bound computed from Shape, Gather and Concat): only for i32
  /// and i64 operands of at most kMaxKnownInts elements, widened exactly to
  /// int64. A device backend takes such operands as constants of the node
  /// (its kernel then needs no host read); since they are part of the
  /// signature, a new value means a new prepare. Dynamic mode never sets it.
  bool hasValues = false;
  llvm::SmallVector<int64_t, 4> values;
  bool operator==(const TensorDesc &o) const {
    return dtype == o.dtype && shape == o.shape && hasValues == o.hasValues &&
           values == o.values;
  }
  bool operator!=(const TensorDesc &o) const { return !(*this == o); }
};

/// What Backend::prepare() made for a node and its input shapes.
struct PreparedKernel {
  KernelHandle handle = nullptr;
  /// Scratch bytes a launch needs (256-byte aligned by the executor, which
  /// owns the memory and passes it in KernelCall::workspace).
  size_t workspaceBytes = 0;
};

/// Data-dependent kernel errors (KernelErrorRecord::code).
enum class KernelErrorCode : int32_t {
  None = 0,
  /// An index outside [-dim, dim): value = the index; operand = the tensor
  /// whose shape the message names (KernelErrorRecord::kNoOperand: none).
  IndexOutOfRange = 1,
  /// A host kernel's own error, kept by the backend
  /// (Backend::takeMessageError): the CPU backend's kernels that return one.
  Message = 2,
};

/// The per-run error record: a few bytes of backend memory that every
/// launch of a run may write, the first error winning; the executor clears
/// it before the run and reads it after, and reports the failing node.
struct KernelErrorRecord {
  static constexpr int32_t kNoOperand = -1000;
  int32_t code = 0; ///< KernelErrorCode; 0 while no launch failed
  /// The failing launch: KernelCall::index.
  int32_t call = -1;
  /// IndexOutOfRange: input i (>= 0) or output o (-1 - o) whose shape the
  /// message names, or kNoOperand.
  int32_t operand = kNoOperand;
  int32_t reserved = 0;
  int64_t value = 0;
};

/// A tensor in a backend's memory: element type, dense row-major shape and
/// a device pointer (a host pointer on the CPU).
struct TensorRef {
  DType dtype = DType::Undefined;
  llvm::SmallVector<int64_t, 6> shape;
  void *data = nullptr;
  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Everything a kernel needs to run one node. Optional inputs that are
/// absent have dtype Undefined and a null pointer.
struct KernelCall {
  const Node *node = nullptr;
  /// The node's prepared state: the backend's handle for these shapes and
  /// the attributes its registry row parsed (null for an op without a
  /// parameter struct).
  KernelHandle kernel = nullptr;
  const OpParams *params = nullptr;
  llvm::SmallVector<TensorRef, 4> inputs;
  llvm::SmallVector<TensorRef, 2> outputs;
  /// Executor-owned scratch of PreparedKernel::workspaceBytes (null: none).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// The run's error record (backend memory) and this launch's number in it.
  KernelErrorRecord *errors = nullptr;
  int32_t index = 0;
  bool hasInput(unsigned i) const {
    return i < inputs.size() && inputs[i].dtype != DType::Undefined;
  }
};

/// A kernel that runs a node on host memory, synchronously: what the
/// executor evaluates small host-computable values with while planning
/// (Backend::hostKernel). A data-dependent error is recorded in
/// `call.errors` (recordKernelError) or returned.
using HostKernelFn = llvm::Error (*)(const KernelCall &call);

/// Records a data-dependent error of `call` in its run's error record unless
/// an earlier one is there (the first error wins). The kernel then returns
/// without finishing its outputs. Host code here; a device kernel does the
/// same with an atomic compare-and-swap on `code`.
inline void recordKernelError(const KernelCall &call, KernelErrorCode code,
                              int32_t operand = KernelErrorRecord::kNoOperand,
                              int64_t value = 0) {
  KernelErrorRecord *r = call.errors;
  if (!r)
    return;
  int32_t expected = 0;
  if (!__atomic_compare_exchange_n(&r->code, &expected, int32_t(code), false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  r->call = call.index;
  r->operand = operand;
  r->value = value;
}

/// The errors behind a backend's KernelErrorCode::Message records, kept by
/// record address until Backend::takeMessageError hands them over.
class KernelMessages {
public:
  KernelMessages() = default;
  KernelMessages(const KernelMessages &) = delete;
  KernelMessages &operator=(const KernelMessages &) = delete;
  ~KernelMessages() {
    for (auto &m : list)
      llvm::consumeError(std::move(m.second));
  }
  /// Keeps `e` for `record`. When one is kept for it already, `e` replaces it
  /// if `replace`, else `e` is dropped (the first one stays).
  void put(const KernelErrorRecord *record, llvm::Error e, bool replace) {
    for (auto &m : list)
      if (m.first == record) {
        if (replace)
          std::swap(m.second, e);
        llvm::consumeError(std::move(e));
        return;
      }
    list.emplace_back(record, std::move(e));
  }
  /// The error kept for `record`, once; success when there is none.
  llvm::Error take(const KernelErrorRecord *record) {
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].first == record) {
        llvm::Error e = std::move(list[i].second);
        list.erase(list.begin() + long(i));
        return e;
      }
    return llvm::Error::success();
  }
  bool has(const KernelErrorRecord *record) const {
    for (auto &m : list)
      if (m.first == record)
        return true;
    return false;
  }

private:
  std::vector<std::pair<const KernelErrorRecord *, llvm::Error>> list;
};

/// A static plan's launches, in order, for Backend::runPlan. `version`
/// changes whenever the calls (handles, addresses, shapes) change, so a
/// backend that captured the plan (a CUDA graph) knows when to capture again.
struct LaunchPlan {
  const void *owner = nullptr; ///< the executor: one captured plan each
  uint64_t version = 0;
  llvm::ArrayRef<KernelCall> calls;
  /// The run's error record (every call's `errors`).
  KernelErrorRecord *errors = nullptr;
};

/// Where buffers live: weights and state that survive across runs, or the
/// per-run activation arena.
enum class BufferKind { Persistent, Transient };

/// What the CPU and CUDA backends allocate for a request of `bytes`: a
/// multiple of 256 bytes, at least 256 (what the memory budget counts).
inline size_t allocationSize(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
}

/// A block of backend memory.
struct DeviceBuffer {
  void *data = nullptr;
  size_t size = 0;
  BufferKind kind = BufferKind::Transient;
};

/// An execution queue, made and destroyed by the executor that uses it
/// (Backend::createStream). The CPU backend's stream is synchronous (work is
/// done when the call returns); a CUDA backend stores a cudaStream_t in
/// `handle`. `Stream()` (no handle) is the synchronous stream every backend
/// has: a copy on it starts after all work queued on any stream and is done
/// when it returns, and synchronize(Stream()) waits for every stream (what
/// the trainer's uploads, checkpoints and host-state steps rely on).
struct Stream {
  void *handle = nullptr;
};

/// The backend interface.
class Backend {
public:
  virtual ~Backend();
  /// Short name: "cpu", "cuda".
  virtual llvm::StringRef name() const = 0;
  /// Success when the backend can run here; otherwise why not ("no CUDA
  /// device", "built without CUDA").
  virtual llvm::Error checkAvailable() const = 0;
  /// Allocates `bytes` (256-byte aligned) of the given kind.
  virtual llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) = 0;
  /// Frees a buffer returned by allocate.
  virtual void release(DeviceBuffer buffer) = 0;
  /// Copies host memory to device memory (ordered on `stream`).
  virtual void copyToDevice(void *dst, const void *src, size_t bytes, Stream stream) = 0;
  /// Copies device memory to host memory (ordered on `stream`).
  virtual void copyToHost(void *dst, const void *src, size_t bytes, Stream stream) = 0;
  /// A new stream for one executor (destroyStream when it is done).
  virtual Stream createStream() { return Stream(); }
  virtual void destroyStream(Stream) {}
  /// True when the backend has a kernel for `node`'s op at its opset (for
  /// some dtypes): what Executor::create checks before any shape is known.
  virtual bool hasKernel(const Node &node) const = 0;
  /// True when a kernel runs `node` with these input dtypes.
  virtual bool supportsOp(const Node &node, llvm::ArrayRef<DType> inputDTypes) const = 0;
  /// Once per node and shape signature (the dtypes and shapes of its inputs,
  /// absent optional ones Undefined), before the node runs with them:
  /// chooses the kernel and keeps whatever the backend needs to launch it
  /// (descriptors, algorithm), and says how much workspace a launch needs.
  /// The executor caches the result and asks again only when the signature
  /// changes. A null handle: no kernel for the node.
  virtual PreparedKernel prepare(const Node &node, llvm::ArrayRef<TensorDesc> inputs) = 0;
  /// Frees what prepare() made for a handle the executor no longer uses.
  virtual void unprepare(KernelHandle) {}
  /// The host kernel the executor folds `node` with while planning, when
  /// all its operands are known on the host and its outputs are small (a
  /// Reshape's target computed from Shape, Gather and Concat); null: the
  /// node is never folded and runs on this backend. Every backend says which
  /// host kernels fold for it: the CPU backend its own rows, a device
  /// backend the CPU backend's (cpuHostKernel, CpuBackend.h), so folded
  /// values are the same whichever backend runs the model.
  virtual HostKernelFn hostKernel(const Node &node) const = 0;
  /// Queues one node on `stream`. A data-dependent error (an index out of
  /// range) is written to `call.errors` (recordKernelError), never returned:
  /// the executor reads the record after the run.
  virtual void launch(const KernelCall &call, Stream stream) = 0;
  /// Queues a whole static plan: by default one launch per call. A backend
  /// may capture the plan the first time it sees (owner, version) and replay
  /// the capture afterwards; only the tensors' contents change between runs.
  virtual void runPlan(const LaunchPlan &plan, Stream stream);
  /// Waits until all work queued on `stream` has finished.
  virtual void synchronize(Stream stream) = 0;
  /// The error a KernelErrorCode::Message record (at this address in
  /// backend memory) stands for, handed over once; success when none.
  virtual llvm::Error takeMessageError(const KernelErrorRecord *) {
    return llvm::Error::success();
  }
  /// The channel the trainer reads a step's logged values and error record
  /// through without blocking the step (Readback.h): host memory, copies
  /// queued on a stream, markers the host polls. A device backend gives
  /// pinned memory and events (the CUDA backend); by default the copies are
  /// copyToHost and a marker is reached after synchronize(stream), which is
  /// free on a backend whose work is done when it returns (the CPU).
  virtual std::unique_ptr<ReadbackChannel> createReadback();
  /// The capability object the AMP rewrite paints with for this backend.
  virtual const BackendCaps &caps() const = 0;
  /// Most bytes allocated at once so far (persistent + transient + dynamic).
  virtual size_t peakAllocatedBytes() const = 0;
  /// Bytes allocated now: what allocate() gave and release() has not taken
  /// back (what the memory budget counts).
  virtual size_t allocatedBytes() const { return 0; }
  /// Caps the bytes allocated at once (`mpc run --max-memory`; 0: no cap):
  /// an allocate() that would go past it allocates nothing and fails with
  /// one line naming the request, the bytes held and the cap. A backend
  /// that lends another's memory (FallbackBackend) passes the cap on.
  virtual void setMemoryBudget(uint64_t bytes) { budget = bytes; }
  virtual uint64_t memoryBudget() const { return budget; }
  /// The device memory in use (by every process) and its size, as the
  /// device's driver reports them (cudaMemGetInfo), for a backend whose
  /// memory is its own device's; false where there is none (the CPU).
  virtual bool deviceMemoryInfo(uint64_t &used, uint64_t &total) {
    (void)used;
    (void)total;
    return false;
  }
  /// True when backend memory is ordinary host memory the CPU reads and
  /// writes directly, copies being plain memcpy done when they return (the
  /// CPU backend): the trainer then hands each batch to the step as it is,
  /// without staging it in a StagingRing (Readback.h).
  virtual bool isHostMemory() const { return false; }
  /// One line saying which nodes ran where, for a backend that splits a model
  /// between devices (FallbackBackend); empty for one that runs it all.
  virtual std::string placementLine() const { return ""; }

protected:
  /// Success when a request of `bytes` (allocationSize) fits the memory
  /// budget beside allocatedBytes(); else the error allocate() returns.
  llvm::Error checkBudget(size_t bytes) const;

private:
  uint64_t budget = 0;
};

/// A CUDA backend when this build has one; otherwise an error that says why.
llvm::Expected<std::unique_ptr<Backend>> createCudaBackend();

} // namespace mpc

#endif // MPC_RUNTIME_BACKEND_H
