//===- BroadcastPlan.h - A collapsed numpy broadcast, host and device -*- C++ -*-===//
//
// The plain-data iteration plan of a two-operand numpy broadcast and the
// index math that walks it. The plan is built on the host once per shape
// signature (kernels::makeBroadcastPlan, runtime/cpu/Broadcast.cpp); the
// CPU loops walk it with nested loops, a CUDA launcher passes it by value as
// a kernel argument and maps each output element to its operand offsets with
// broadcastOffsets below, so both backends read the same elements.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_BROADCASTPLAN_H
#define MPC_RUNTIME_KERNELS_BROADCASTPLAN_H

#include "mpc/Runtime/Kernels/HostDevice.h"

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

/// The offsets into the two operands of output element `i` (row-major
/// position in the output) of `plan`: the innermost collapsed dimension
/// varies fastest.
MPC_HD inline void broadcastOffsets(const BroadcastPlan &plan, int64_t i,
                                    int64_t &aOffset, int64_t &bOffset) {
  int64_t a = 0, b = 0;
  for (int d = plan.rank - 1; d >= 0; --d) {
    int64_t dim = plan.dims[d];
    int64_t idx = i % dim;
    i /= dim;
    a += idx * plan.aStrides[d];
    b += idx * plan.bStrides[d];
  }
  aOffset = a;
  bOffset = b;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_BROADCASTPLAN_H
