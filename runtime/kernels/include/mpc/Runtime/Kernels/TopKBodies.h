//===- TopKBodies.h - The order of TopK's outputs ----------------*- C++ -*-===//
//
// TopK's output order, once for the CPU kernel (runtime/cpu/IndexKernels.cpp,
// a partial sort with it) and the CUDA launcher (runtime/cuda/TopKKernels.cu,
// a selection by successive minima): the larger (largest = 1) or smaller
// value first, and among equal values the lower index first, as
// onnx.reference and onnxruntime order them. Values are compared in the
// storage type's compute type. A NaN ranks above every number (numpy's sort
// and PyTorch's topk): first with largest = 1, last with largest = 0, NaNs
// among themselves by index. (Compared as unordered, a NaN fell out of a
// largest-k selection, and the sort's order was not a strict weak order.)
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_TOPKBODIES_H
#define MPC_RUNTIME_KERNELS_TOPKBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"

#include <stdint.h>

namespace mpc {
namespace kernels {

/// True when element a (value va) comes before element b (value vb).
template <typename C>
MPC_HD inline bool topKBefore(C va, int64_t a, C vb, int64_t b, bool largest) {
  bool nanA = va != va, nanB = vb != vb; // always false for integers
  if (nanA || nanB)
    return nanA && nanB ? a < b : largest ? nanA : nanB;
  if (va != vb)
    return largest ? va > vb : va < vb;
  return a < b;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_TOPKBODIES_H
