//===- IndexBodies.h - Index and selection op bodies, host and device -*- C++ -*-===//
//
// The per-slice and per-element math of ArgMax/ArgMin, CumSum/CumProd,
// Range, Trilu and GatherElements/ScatterElements' index arithmetic, MPC_HD
// so that the CPU kernels (runtime/cpu/IndexKernels.cpp, TensorKernels.cpp)
// and the CUDA launchers (runtime/cuda/IndexKernels.cu) run the same
// comparisons and the same arithmetic: one slice of an ArgMax is walked in
// index order by one thread on the device, as by one loop on the CPU, so
// ties and NaNs resolve identically.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_INDEXBODIES_H
#define MPC_RUNTIME_KERNELS_INDEXBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <cstdint>

namespace mpc {
namespace kernels {

/// An axis split as [outer, dim, inner] (row-major): element (o, j, i) is at
/// (o * dim + j) * inner + i.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};

/// The position along the axis of the largest (isMax) or smallest element
/// of slice `s` (s = o * inner + i) of `x`, compared in the compute type.
/// Ties keep the first position, or the last with `last`
/// (select_last_index). A NaN is the answer of both ArgMax and ArgMin, its
/// first position (the last with `last`), as numpy's and PyTorch's argmax
/// and argmin give it and as ReduceMax / ReduceMin give NaN (before, a NaN
/// was never better than what was kept: a NaN answered only where it came
/// first). `dim` is at least 1.
template <typename T>
MPC_HD inline int64_t argReduceSlice(const T *x, const AxisSplit &a, int64_t s, bool isMax,
                                     bool last) {
  int64_t o = s / a.inner, i = s % a.inner;
  const T *row = x + o * a.dim * a.inner + i;
  auto best = load(row[0]);
  bool bestNaN = best != best; // always false for integers
  int64_t at = 0;
  for (int64_t j = 1; j < a.dim; ++j) {
    auto v = load(row[j * a.inner]);
    bool vNaN = v != v;
    bool better = bestNaN ? last && vNaN
                  : vNaN  ? true
                          : isMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
    if (better) {
      best = v;
      bestNaN = vNaN;
      at = j;
    }
  }
  return at;
}

/// Element i of Range(start, limit, delta): start + i * delta in the
/// compute type, stored once.
template <typename T> MPC_HD inline T rangeValue(T start, T delta, int64_t i) {
  using C = ComputeType<T>;
  return store<T>(C(load(start) + C(i) * load(delta)));
}

/// Trilu: whether element (i, j) of a matrix is kept (upper: on or above
/// diagonal k; lower: on or below it); the others are zero.
MPC_HD inline bool triluKeeps(int64_t i, int64_t j, int64_t k, bool upper) {
  return upper ? j - i >= k : j - i <= k;
}

/// CumSum/CumProd of slice `s` of `x` into `y` with Op (Add or Mul of
/// BinaryOps.h, integers wrapping), from `identity`, in the compute type and
/// stored once per element; `exclusive` stores the value before each step,
/// `reverse` runs from the end. One slice is walked in order (the CPU loop
/// and one device thread alike), so the result is the same bits on both.
template <typename Op, typename T>
MPC_HD inline void scanSlice(const T *x, T *y, const AxisSplit &a, int64_t s, int identity,
                             bool exclusive, bool reverse) {
  using C = ComputeType<T>;
  const Op op{};
  int64_t o = s / a.inner, i = s % a.inner;
  C acc = C(identity);
  for (int64_t step = 0; step < a.dim; ++step) {
    int64_t j = reverse ? a.dim - 1 - step : step;
    int64_t off = (o * a.dim + j) * a.inner + i;
    C v = load(x[off]);
    if (exclusive) {
      y[off] = store<T>(acc);
      acc = op(acc, v);
    } else {
      acc = op(acc, v);
      y[off] = store<T>(acc);
    }
  }
}

/// OneHot: the position an index selects along the depth axis: the value
/// truncated toward zero (through double, as every index type converts),
/// a negative one counting from the end. Positions outside [0, depth)
/// select nothing (the row is all off values).
template <typename T> MPC_HD inline int64_t oneHotPosition(T index, int64_t depth) {
  int64_t v = int64_t(double(load(index)));
  return v < 0 ? v + depth : v;
}

/// The largest rank of GatherElements/ScatterElements' plan.
constexpr int kMaxElementIndexRank = 12;

/// GatherElements/ScatterElements: element e of the index tensor (shape
/// `dims`, row-major) addresses data at its own multi-index with the
/// coordinate on `axis` replaced by the index value (data strides
/// `dataStrides`, `dim` = data's size on the axis).
struct ElementIndexPlan {
  int rank = 0, axis = 0;
  int64_t dims[kMaxElementIndexRank] = {};
  int64_t dataStrides[kMaxElementIndexRank] = {};
  int64_t dim = 0;
  int64_t count = 0; ///< elements of the index tensor
};

/// The data offset of index element `e` whose (normalized) value is `v`.
MPC_HD inline int64_t elementIndexOffset(const ElementIndexPlan &p, int64_t e, int64_t v) {
  int64_t off = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    int64_t c = e % p.dims[d];
    e /= p.dims[d];
    off += (d == p.axis ? v : c) * p.dataStrides[d];
  }
  return off;
}

/// Fills `p` for data and index tensors of rank `rank` (host code); false
/// when the rank exceeds kMaxElementIndexRank.
inline bool makeElementIndexPlan(const int64_t *dataShape, const int64_t *indexShape, int rank,
                                 int axis, ElementIndexPlan &p) {
  if (rank < 0 || rank > kMaxElementIndexRank || axis < 0 || axis >= rank)
    return false;
  p = ElementIndexPlan();
  p.rank = rank;
  p.axis = axis;
  p.dim = dataShape[axis];
  p.count = 1;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    p.dims[d] = indexShape[d];
    p.dataStrides[d] = stride;
    stride *= dataShape[d];
    p.count *= indexShape[d];
  }
  return true;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_INDEXBODIES_H
