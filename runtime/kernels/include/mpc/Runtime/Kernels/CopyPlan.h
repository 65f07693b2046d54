//===- CopyPlan.h - Strided element copies, host and device ------*- C++ -*-===//
//
// The data-movement ops that only move elements (Transpose, Slice, Expand,
// Concat, Split, Tile, SliceGrad and the interior of a constant Pad) are one
// strided copy each, or one per operand: element i of an iteration space,
// with multi-index (i_0 .. i_{rank-1}) over `dims`, is read at
// srcBase + sum i_k * srcStrides[k] and written at
// dstBase + sum i_k * dstStrides[k] (offsets in elements). The plan is plain
// data, built on the host once per shape (runtime/cpu/CopyPlan.cpp); the CPU
// kernels walk it row by row and a CUDA launcher passes it by value and maps
// each element with copyOffsets below, so both backends read and write the
// same elements. Where's three-operand broadcast (SelectPlan), Sum's and
// Mean's n-operand one (NaryPlan) and Gather's index math (GatherPlan) are
// the same kind of shared body.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_COPYPLAN_H
#define MPC_RUNTIME_KERNELS_COPYPLAN_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <cstdint>

namespace mpc {
namespace kernels {

/// The most dimensions a plan has after collapsing. Tile doubles the rank of
/// its input (a repeat and a position per axis), so 8-dimensional tensors
/// fit every builder.
constexpr int kMaxCopyRank = 16;

/// A plain-data strided copy (a kernel argument on a device).
struct CopyPlan {
  /// Number of dimensions; 0 with numElements 1 is a single element.
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t srcStrides[kMaxCopyRank] = {};
  int64_t dstStrides[kMaxCopyRank] = {};
  int64_t srcBase = 0, dstBase = 0;
  /// The product of dims: the elements copied.
  int64_t numElements = 0;
};

/// The source and destination offsets (in elements) of element `i` of the
/// plan's iteration space; the innermost dimension varies fastest.
MPC_HD inline void copyOffsets(const CopyPlan &p, int64_t i, int64_t &src, int64_t &dst) {
  int64_t s = p.srcBase, d = p.dstBase;
  for (int k = p.rank - 1; k >= 0; --k) {
    int64_t dim = p.dims[k];
    int64_t idx = i % dim;
    i /= dim;
    s += idx * p.srcStrides[k];
    d += idx * p.dstStrides[k];
  }
  src = s;
  dst = d;
}

/// Where: the condition and both values broadcast to the output (numpy
/// rules), collapsed like a CopyPlan. Output element i reads operand k at
/// sum i_d * strides[k][d] (0 along its broadcast axes).
struct SelectPlan {
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  /// Condition, then X, then Y.
  int64_t strides[3][kMaxCopyRank] = {};
  int64_t numElements = 0;
};

/// The three operand offsets of output element `i`.
MPC_HD inline void selectOffsets(const SelectPlan &p, int64_t i, int64_t off[3]) {
  int64_t c = 0, x = 0, y = 0;
  for (int k = p.rank - 1; k >= 0; --k) {
    int64_t dim = p.dims[k];
    int64_t idx = i % dim;
    i /= dim;
    c += idx * p.strides[0][k];
    x += idx * p.strides[1][k];
    y += idx * p.strides[2][k];
  }
  off[0] = c;
  off[1] = x;
  off[2] = y;
}

/// The most inputs a variadic plan (Sum, Mean, Max, Min) carries.
constexpr int kMaxNaryInputs = 8;

/// Sum and Mean: up to kMaxNaryInputs operands broadcast to the output,
/// collapsed like a CopyPlan; operand k of output element i is at
/// sum i_d * strides[k][d].
struct NaryPlan {
  int rank = 0, inputs = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t strides[kMaxNaryInputs][kMaxCopyRank] = {};
  int64_t numElements = 0;
};

/// The operand offsets of output element `i`.
MPC_HD inline void naryOffsets(const NaryPlan &p, int64_t i, int64_t off[kMaxNaryInputs]) {
  for (int k = 0; k < p.inputs; ++k)
    off[k] = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    int64_t dim = p.dims[d];
    int64_t idx = i % dim;
    i /= dim;
    for (int k = 0; k < p.inputs; ++k)
      off[k] += idx * p.strides[k][d];
  }
}

/// Output element `i` of Sum (or Mean): the operands added left to right in
/// C (float for 16-bit types), divided by their count for a mean, rounded
/// to T once (numpy's order).
template <typename T>
MPC_HD inline ComputeType<T> naryAccumulate(const NaryPlan &p, const T *const *in, int64_t i,
                                            bool mean);

/// Output element `i` of one run of a Sum or Mean with more operands than a
/// plan carries (naryRuns: runs of at most kMaxNaryInputs operands, one
/// plan each): `acc[i]`, the sum in C of the operands before the run (null:
/// the run is the first), plus the run's operands, left to right; the
/// unrounded C, kept for the next run. The last run's result, divided by the
/// operand count for a mean, rounded to T once, is naryAccumulate's over all
/// operands.
template <typename T>
MPC_HD inline ComputeType<T> naryContinue(const NaryPlan &p, const T *const *in, int64_t i,
                                          const ComputeType<T> *acc) {
  using C = ComputeType<T>;
  int64_t off[kMaxNaryInputs];
  naryOffsets(p, i, off);
  C sum = acc ? acc[i] : C(load(in[0][off[0]]));
  for (int k = acc ? 0 : 1; k < p.inputs; ++k)
    sum = C(sum + load(in[k][off[k]]));
  return sum;
}

template <typename T>
MPC_HD inline ComputeType<T> naryAccumulate(const NaryPlan &p, const T *const *in, int64_t i,
                                            bool mean) {
  using C = ComputeType<T>;
  C acc = naryContinue<T>(p, in, i, nullptr);
  return mean ? C(acc / C(p.inputs)) : acc;
}

/// Output element `i` of variadic Max or Min: the binary body `op` folded
/// over the operands left to right, the running result stored as T after
/// each step, as the CPU's pairwise fold over broadcast temporaries stores
/// it (same values, same NaN and signed-zero choices). One operand is a
/// copy of its element.
template <typename T, typename Op>
MPC_HD inline T naryFold(const NaryPlan &p, const T *const *in, int64_t i, const Op &op) {
  int64_t off[kMaxNaryInputs];
  naryOffsets(p, i, off);
  T acc = in[0][off[0]];
  for (int k = 1; k < p.inputs; ++k)
    acc = store<T>(op(load(acc), load(in[k][off[k]])));
  return acc;
}

/// Gather along one axis: data viewed as [outer, dim, inner], `count`
/// indices, the output [outer, count, inner].
struct GatherPlan {
  int64_t outer = 0, dim = 0, inner = 0, count = 0;
  MPC_HD int64_t numElements() const { return outer * count * inner; }
};

/// An ONNX index in [-dim, dim) made non-negative; false when it is outside
/// (the kernel then records IndexOutOfRange with the index as given).
MPC_HD inline bool normalizeIndex(int64_t &i, int64_t dim) {
  if (i < -dim || i >= dim)
    return false;
  if (i < 0)
    i += dim;
  return true;
}

/// Which index output element `e` of a Gather uses.
MPC_HD inline int64_t gatherIndexPosition(const GatherPlan &p, int64_t e) {
  return (e / p.inner) % p.count;
}

/// The data offset output element `e` reads, given its (normalized) index.
MPC_HD inline int64_t gatherSource(const GatherPlan &p, int64_t e, int64_t index) {
  int64_t o = e / (p.inner * p.count);
  return (o * p.dim + index) * p.inner + e % p.inner;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_COPYPLAN_H
