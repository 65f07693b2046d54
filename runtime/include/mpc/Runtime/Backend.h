//===- Backend.h - The small interface every device backend implements -*- C++ -*-===//
//
// After ggml's backend interface: a backend allocates buffers, copies between
// host and device, says which nodes it can run and runs them on a stream.
// Shapes are inferred on the host by the executor (the op registry's shape
// functions, OpRegistry.h), so a backend only sees fully shaped tensors.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_BACKEND_H
#define MPC_RUNTIME_BACKEND_H

#include "mpc/IR/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstddef>
#include <cstdint>
#include <memory>

namespace mpc {

class BackendCaps;
class Node;
struct OpParams;

/// A backend's state for one node, made once by Backend::prepare() and
/// handed back with every launch of the node: the CPU backend's kernel row;
/// a device backend's descriptors, algorithm choice and workspace needs.
/// Null: the backend has no kernel for the node.
using KernelHandle = const void *;

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
  /// The node's prepared state: the backend's handle and the attributes its
  /// registry row parsed (null for an op without a parameter struct).
  KernelHandle kernel = nullptr;
  const OpParams *params = nullptr;
  llvm::SmallVector<TensorRef, 4> inputs;
  llvm::SmallVector<TensorRef, 2> outputs;
  bool hasInput(unsigned i) const {
    return i < inputs.size() && inputs[i].dtype != DType::Undefined;
  }
};

/// Where buffers live: weights and state that survive across runs, or the
/// per-run activation arena.
enum class BufferKind { Persistent, Transient };

/// A block of backend memory.
struct DeviceBuffer {
  void *data = nullptr;
  size_t size = 0;
  BufferKind kind = BufferKind::Transient;
};

/// An execution queue. The CPU backend runs synchronously and ignores it; a
/// CUDA backend stores a cudaStream_t in `handle`.
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
  /// True when a kernel runs `node` with these input dtypes.
  virtual bool supportsOp(const Node &node, llvm::ArrayRef<DType> inputDTypes) const = 0;
  /// Once per node, before it runs: chooses the kernel and keeps whatever
  /// the backend needs to launch it (returned with every KernelCall).
  virtual KernelHandle prepare(const Node &node) = 0;
  /// Runs one node on `stream` (the CPU backend runs synchronously). Errors
  /// are data-dependent input problems (an index out of range).
  virtual llvm::Error launch(const KernelCall &call, Stream stream) = 0;
  /// Waits until all work queued on `stream` has finished.
  virtual void synchronize(Stream stream) = 0;
  /// The capability object the AMP rewrite paints with for this backend.
  virtual const BackendCaps &caps() const = 0;
  /// Most bytes allocated at once so far (persistent + transient + dynamic).
  virtual size_t peakAllocatedBytes() const = 0;
};

/// A CUDA backend when this build has one; otherwise an error that says why.
llvm::Expected<std::unique_ptr<Backend>> createCudaBackend();

} // namespace mpc

#endif // MPC_RUNTIME_BACKEND_H
