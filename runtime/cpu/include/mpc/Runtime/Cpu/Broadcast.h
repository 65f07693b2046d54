//===- Broadcast.h - numpy-style broadcasting plans -------------*- C++ -*-===//
//
// Computes, once per call, the broadcast output shape of two operands and a
// collapsed iteration space: size-1 output dimensions dropped and adjacent
// dimensions merged wherever both operands stay linear, so most cases become
// one or two loops with unit or zero inner strides.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_BROADCAST_H
#define MPC_RUNTIME_KERNELS_BROADCAST_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {
namespace kernels {

/// The largest rank a collapsed plan can have. Collapsing merges every run of
/// dimensions with the same broadcast pattern, so only shapes that alternate
/// the broadcast operand more than this many times are rejected.
constexpr int kMaxBroadcastRank = 12;

/// A plain-data iteration plan (usable on a device as a kernel argument).
/// Element i of the output, with multi-index (i_0 .. i_{rank-1}) over dims,
/// reads a[sum i_k * aStrides[k]] and b[sum i_k * bStrides[k]].
struct BroadcastPlan {
  /// Number of collapsed dimensions; 0 only when numElements is 0.
  int rank = 0;
  /// Collapsed output dimensions, outermost first.
  int64_t dims[kMaxBroadcastRank] = {};
  /// Element strides of the first operand (0 where it is broadcast).
  int64_t aStrides[kMaxBroadcastRank] = {};
  /// Element strides of the second operand (0 where it is broadcast).
  int64_t bStrides[kMaxBroadcastRank] = {};
  /// Number of output elements.
  int64_t numElements = 0;
};

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
