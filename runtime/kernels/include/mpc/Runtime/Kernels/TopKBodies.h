//===- TopKBodies.h - The order of TopK's outputs ----------------*- C++ -*-===//
//
// TopK's output order, once for the CPU kernel (runtime/cpu/IndexKernels.cpp,
// a partial sort with it) and the CUDA launcher (runtime/cuda/TopKKernels.cu,
// a selection by successive minima): the larger (largest = 1) or smaller
// value first, and among equal values the lower index first, as
// onnx.reference and onnxruntime order them. Values are compared in the
// storage type's compute type. A NaN is not ordered against other values,
// so where it lands is unspecified.
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
  if (va != vb)
    return largest ? va > vb : va < vb;
  return a < b;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_TOPKBODIES_H
