//===- MoveBodies.h - Index plans of the data-movement ops, host and device -*- C++ -*-===//
//
// The per-element index arithmetic of DepthToSpace/SpaceToDepth, GatherND,
// ScatterND, ScatterElements' update order and combine, ReverseSequence,
// EyeLike, Compress and NonZero, MPC_HD so that the CPU kernels
// (runtime/cpu) and the CUDA launchers (runtime/cuda/MoveKernels.cu) compute
// the same offsets and combine updates in the same order. The plans are
// plain structs of fixed size, made on the host once per shape, passed by
// value to a kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_MOVEBODIES_H
#define MPC_RUNTIME_KERNELS_MOVEBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/IndexBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <cstdint>
#include <type_traits>

namespace mpc {
namespace kernels {

//===----------------------------------------------------------------------===//
// DepthToSpace, SpaceToDepth
//===----------------------------------------------------------------------===//

/// The space-side tensor [n, channels, height, width] (height and width
/// multiples of `block`) against the depth-side one
/// [n, channels * block * block, height / block, width / block]. DCR (the
/// default, and every SpaceToDepth) orders the depth channels as
/// (row in block, column in block, channel); CRD as (channel, row, column).
struct BlockMovePlan {
  int64_t channels = 0, height = 0, width = 0, block = 1;
  bool crd = false;
  int64_t count = 0; ///< elements of either side
};

/// Fills `p` from the space-side shape (host code); false unless it has
/// rank 4 with height and width multiples of a positive block.
inline bool makeBlockMovePlan(const int64_t *spaceShape, int rank, int64_t block, bool crd,
                              BlockMovePlan &p) {
  if (rank != 4 || block <= 0 || spaceShape[2] % block || spaceShape[3] % block)
    return false;
  p = BlockMovePlan();
  p.channels = spaceShape[1];
  p.height = spaceShape[2];
  p.width = spaceShape[3];
  p.block = block;
  p.crd = crd;
  p.count = spaceShape[0] * p.channels * p.height * p.width;
  return true;
}

/// The depth-side offset of space-side element `e` (row-major offsets).
MPC_HD inline int64_t blockDepthOffset(const BlockMovePlan &p, int64_t e) {
  const int64_t b = p.block;
  int64_t w = e % p.width, h = (e / p.width) % p.height;
  int64_t c = (e / (p.width * p.height)) % p.channels;
  int64_t n = e / (p.width * p.height * p.channels);
  int64_t i = h % b, j = w % b;
  int64_t dc = p.crd ? (c * b + i) * b + j : (i * b + j) * p.channels + c;
  return ((n * p.channels * b * b + dc) * (p.height / b) + h / b) * (p.width / b) + w / b;
}

//===----------------------------------------------------------------------===//
// GatherND, ScatterND
//===----------------------------------------------------------------------===//

/// The longest index tuple of a GatherND/ScatterND plan.
constexpr int kMaxTupleLength = 12;

/// Indices [..., depth] address data [batch..., d0, ..., d(depth-1), slice...]:
/// tuple t (the row-major position among the indices' leading dims) selects
/// the `slice` elements at batch t / perBatch (GatherND's batch_dims; one
/// batch otherwise) and the tuple's coordinates.
struct TupleIndexPlan {
  int depth = 0;
  int64_t dims[kMaxTupleLength] = {};
  int64_t strides[kMaxTupleLength] = {};
  int64_t slice = 1, tuples = 0, perBatch = 1, batchStride = 0;
};

/// Fills `p` (host code); false when the tuple is longer than
/// kMaxTupleLength or does not fit the data after `batchDims` dims.
inline bool makeTupleIndexPlan(const int64_t *dataShape, int dataRank, const int64_t *indexShape,
                               int indexRank, int64_t batchDims, TupleIndexPlan &p) {
  if (indexRank < 1 || batchDims < 0)
    return false;
  int64_t depth = indexShape[indexRank - 1];
  if (depth < 0 || depth > kMaxTupleLength || batchDims + depth > dataRank)
    return false;
  p = TupleIndexPlan();
  p.depth = int(depth);
  int64_t stride = 1, batch = 1;
  for (int d = dataRank - 1; d >= 0; --d) {
    if (d >= batchDims + depth)
      p.slice *= dataShape[d];
    else if (d >= batchDims) {
      p.dims[d - batchDims] = dataShape[d];
      p.strides[d - batchDims] = stride;
    } else
      batch *= dataShape[d];
    if (batchDims > 0 && d == batchDims - 1)
      p.batchStride = stride;
    stride *= dataShape[d];
  }
  p.tuples = 1;
  for (int d = 0; d + 1 < indexRank; ++d)
    p.tuples *= indexShape[d];
  p.perBatch = p.tuples / (batch > 1 ? batch : 1);
  if (p.perBatch < 1)
    p.perBatch = 1;
  return true;
}

/// The data offset of tuple `t` of `index` (depth values per tuple), or
/// false with the first value outside [-dim, dim) in `bad`.
template <typename I>
MPC_HD inline bool tupleOffset(const TupleIndexPlan &p, const I *index, int64_t t, int64_t &off,
                               int64_t &bad) {
  off = (t / p.perBatch) * p.batchStride;
  for (int j = 0; j < p.depth; ++j) {
    int64_t v = int64_t(index[t * p.depth + j]), dim = p.dims[j];
    if (v < -dim || v >= dim) {
      bad = v;
      return false;
    }
    off += (v < 0 ? v + dim : v) * p.strides[j];
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Scatter updates
//===----------------------------------------------------------------------===//

/// How ScatterElements/ScatterND combine an update with the stored value
/// (the order of mpc::ScatterReduction).
enum class ScatterCombine : uint8_t { None, Add, Mul, Max, Min };

/// The stored value after an update: Add/Mul in the compute type, stored
/// once; Max/Min keep the stored value on a tie and take the update when
/// a comparison with a NaN fails; bool: or/and.
template <typename T> MPC_HD inline T scatterCombine(T old, T upd, ScatterCombine r) {
  if constexpr (std::is_same<T, bool>::value) {
    switch (r) {
    case ScatterCombine::None: return upd;
    case ScatterCombine::Add: case ScatterCombine::Max: return old || upd;
    case ScatterCombine::Mul: case ScatterCombine::Min: return old && upd;
    }
    return upd;
  } else {
    using C = ComputeType<T>;
    C a = load(old), b = load(upd);
    switch (r) {
    case ScatterCombine::None: return upd;
    case ScatterCombine::Add: return store<T>(C(a + b));
    case ScatterCombine::Mul: return store<T>(C(a * b));
    case ScatterCombine::Max: return a >= b ? old : upd;
    case ScatterCombine::Min: return a <= b ? old : upd;
    }
    return upd;
  }
}

/// ScatterElements' index tensor as lines along the axis: two index
/// elements can address the same data element only when they lie on one
/// line (they share every other coordinate), so walking each line in order
/// applies colliding updates in the order of the whole tensor.
struct ElementLines {
  int64_t lines = 0, length = 0, inner = 1;
};

MPC_HD inline ElementLines elementLines(const ElementIndexPlan &p) {
  ElementLines l;
  l.length = p.dims[p.axis];
  for (int d = p.axis + 1; d < p.rank; ++d)
    l.inner *= p.dims[d];
  l.lines = l.length ? p.count / l.length : 0;
  return l;
}

/// Index element j of line `line`.
MPC_HD inline int64_t lineElement(const ElementLines &l, int64_t line, int64_t j) {
  return (line / l.inner * l.length + j) * l.inner + line % l.inner;
}

//===----------------------------------------------------------------------===//
// ReverseSequence, EyeLike, Compress, NonZero
//===----------------------------------------------------------------------===//

/// ReverseSequence of x [d0, d1, inner...]: rows (i, j) of `inner` elements;
/// the batch axis and time axis are 0 and 1 in either order.
struct ReverseSequencePlan {
  int64_t d0 = 0, d1 = 0, inner = 1;
  bool batchFirst = false; ///< batch_axis 0, time_axis 1
};

/// The batch of row r = i * d1 + j (whose sequence length applies).
MPC_HD inline int64_t reverseSequenceBatch(const ReverseSequencePlan &p, int64_t r) {
  return p.batchFirst ? r / p.d1 : r % p.d1;
}

/// The source row of row r, whose batch's length is `len` (clamped to
/// [0, time steps]): the first len time steps reversed, the rest in place.
MPC_HD inline int64_t reverseSequenceSource(const ReverseSequencePlan &p, int64_t r,
                                            int64_t len) {
  int64_t i = r / p.d1, j = r % p.d1;
  int64_t steps = p.batchFirst ? p.d1 : p.d0;
  len = len < 0 ? 0 : len > steps ? steps : len;
  int64_t t = p.batchFirst ? j : i;
  int64_t src = t < len ? len - 1 - t : t;
  return p.batchFirst ? i * p.d1 + src : src * p.d1 + j;
}

/// EyeLike: whether element (i, j) is on diagonal k (one; else zero).
MPC_HD inline bool eyeLikeOne(int64_t i, int64_t j, int64_t k) { return j - i == k; }

/// Compress: the source offset of output element e of [outer, kept, inner]
/// whose position k along the axis came from source position list[k] of
/// [outer, dim, inner].
MPC_HD inline int64_t compressSource(const AxisSplit &src, int64_t kept, const int64_t *list,
                                     int64_t e) {
  int64_t i = e % src.inner, k = (e / src.inner) % kept, o = e / (src.inner * kept);
  return (o * src.dim + list[k]) * src.inner + i;
}

/// NonZero: whether an element counts (NaN does).
template <typename T> MPC_HD inline bool isNonZero(T v) {
  return !(castValue<double>(v) == 0);
}

/// NonZero: writes the coordinates of element e of a tensor of `dims`
/// (rank values) as column k of out [rank, count].
MPC_HD inline void writeCoordinates(const int64_t *dims, int rank, int64_t e, int64_t *out,
                                    int64_t count, int64_t k) {
  for (int d = rank - 1; d >= 0; --d) {
    out[d * count + k] = e % dims[d];
    e /= dims[d];
  }
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_MOVEBODIES_H
