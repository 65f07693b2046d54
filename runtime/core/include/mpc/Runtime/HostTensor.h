//===- HostTensor.h - Dense tensors in host memory --------------*- C++ -*-===//
//
// The unit of data exchanged with the executor: model inputs and outputs,
// values folded during planning, and what the .npy/.npz/.pb readers return.
// Bytes are packed little-endian in row-major order, 16-bit floats as 16 bits.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_HOSTTENSOR_H
#define MPC_RUNTIME_HOSTTENSOR_H

#include "mpc/IR/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

class Tensor;

/// A tensor whose storage is a byte vector on the host.
struct HostTensor {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> s);
  int64_t numElements() const;
  size_t byteSize() const { return bytes.size(); }
  template <typename T> T *data() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *data() const {
    return reinterpret_cast<const T *>(bytes.data());
  }
  /// Element i converted to double (float, 16-bit float, integer, bool).
  double getAsDouble(int64_t i) const;
  /// Element i as an int64, exactly for integer tensors (see loadAsInt64):
  /// what shapes, indices, axes and trip counts are read with.
  int64_t getAsInt64(int64_t i) const { return loadAsInt64(dtype, bytes.data(), i); }
};

/// Bytes per element of the dtypes the runtime stores (0 for others).
size_t runtimeElementSize(DType t);

/// "[2, 3, 32, 32]".
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// The most bytes one tensor may take: the host's physical memory (every
/// buffer sized by a model or its inputs is checked against it before it is
/// allocated, so that a huge declared shape is an error, not a crash).
uint64_t maxTensorBytes();

/// The host memory this process may still take, read once: the kernel's
/// MemAvailable (physical memory where it cannot be read), less where the
/// process's address-space limit (ulimit -v) or its cgroup's memory.max
/// leaves less. Linux hands out memory it does not have and kills the
/// process that touches it: the CPU backend and Loop's scan outputs refuse
/// to grow past this figure with one line instead.
uint64_t availableHostBytes();

/// True when the nonzero dimensions of `shape` multiply past INT64_MAX: its
/// row-major strides would overflow even if another dimension is zero.
bool shapeStridesOverflow(llvm::ArrayRef<int64_t> shape);
/// The byte size of a tensor of `shape` and `dtype`, checked first: no
/// negative dimension, strides within int64 (shapeStridesOverflow, empty
/// tensors too), no overflow of elements times element size, at most
/// maxTensorBytes(). The error names the tensor (`what`: "input 'x'"), its
/// shape and the bytes it would need.
llvm::Expected<uint64_t> checkedTensorBytes(llvm::ArrayRef<int64_t> shape, DType dtype,
                                            const llvm::Twine &what);

/// A host copy of an initializer or Constant attribute (materializing
/// external data).
llvm::Expected<HostTensor> hostTensorFromIR(const Tensor &t);

/// Converts the elements to another dtype with the CPU Cast kernel.
llvm::Expected<HostTensor> castHostTensor(const HostTensor &t, DType to);

} // namespace mpc

#endif // MPC_RUNTIME_HOSTTENSOR_H
