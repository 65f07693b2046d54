//===- Broadcast.h - numpy-style broadcasting plans -------------*- C++ -*-===//
//
// Computes, once per call, the broadcast output shape of two operands and a
// collapsed iteration space: size-1 output dimensions dropped and adjacent
// dimensions merged wherever both operands stay linear, so most cases become
// one or two loops with unit or zero inner strides. The plan itself and its
// index math are device-safe (mpc/Runtime/Kernels/BroadcastPlan.h).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_BROADCAST_H
#define MPC_RUNTIME_KERNELS_BROADCAST_H

#include "mpc/Runtime/Kernels/BroadcastPlan.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {
namespace kernels {

/// The numpy broadcast of two shapes, or false when a pair of dimensions is
/// neither equal nor 1. A 0-sized dimension broadcasts with 1 to 0.
bool broadcastShapes(llvm::ArrayRef<int64_t> aShape,
                     llvm::ArrayRef<int64_t> bShape,
                     llvm::SmallVectorImpl<int64_t> &outShape);

/// Builds the plan for two shapes that broadcast (asserted).
BroadcastPlan makeBroadcastPlan(llvm::ArrayRef<int64_t> aShape,
                                llvm::ArrayRef<int64_t> bShape);

/// Number of elements of a shape (1 for a scalar).
inline int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_BROADCAST_H
