//===- MoveKernels.cu - Launchers of the data-movement index ops ----------===//
//
// DepthToSpace/SpaceToDepth, GatherND, ReverseSequence and EyeLike: one
// thread per element over raw 1/2/4/8-byte elements, through the bodies of
// MoveBodies.h. ScatterND: one thread per slice element, walking the tuples
// in order; ScatterElements: one thread per line of the indices along the
// axis, walking it in order: duplicate indices combine in the CPU's order,
// so the bits are the CPU's. Index errors go to the run's error record.
// Compress and NonZero number their kept elements in order in one block
// (a prefix count per tile of kCompactThreads elements: warp ballots, then
// the warps' totals), so their output is the CPU's.
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "IndexError.cuh"
#include "MoveLaunch.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void blockMoveKernel(const T *x, T *y, kernels::BlockMovePlan plan, bool toSpace) {
  for (int64_t e = gridStart(); e < plan.count; e += gridStride()) {
    int64_t d = kernels::blockDepthOffset(plan, e);
    if (toSpace)
      y[e] = x[d];
    else
      y[d] = x[e];
  }
}

template <typename T, typename I>
__global__ void gatherNDKernel(const T *data, const I *indices, T *out,
                               kernels::TupleIndexPlan plan, IndexErrorRecord *record,
                               int32_t call) {
  for (int64_t e = gridStart(), n = plan.tuples * plan.slice; e < n; e += gridStride()) {
    int64_t off = 0, bad = 0;
    if (!kernels::tupleOffset(plan, indices, e / plan.slice, off, bad)) {
      recordIndexError(record, call, kNoIndexOperand, bad);
      continue;
    }
    out[e] = data[off + e % plan.slice];
  }
}

template <typename T, typename I>
__global__ void scatterNDKernel(const I *indices, const T *updates, T *out,
                                kernels::TupleIndexPlan plan, kernels::ScatterCombine combine,
                                IndexErrorRecord *record, int32_t call) {
  int64_t threads = plan.slice > 0 ? plan.slice : 1;
  for (int64_t s = gridStart(); s < threads; s += gridStride())
    for (int64_t t = 0; t < plan.tuples; ++t) {
      int64_t off = 0, bad = 0;
      if (!kernels::tupleOffset(plan, indices, t, off, bad)) {
        recordIndexError(record, call, kNoIndexOperand, bad);
        return; // the CPU stops at the first bad tuple too
      }
      if (s < plan.slice)
        out[off + s] = kernels::scatterCombine(out[off + s], updates[t * plan.slice + s], combine);
    }
}

template <typename T, typename I>
__global__ void scatterElementsKernel(const I *indices, const T *updates, T *out,
                                      kernels::ElementIndexPlan plan,
                                      kernels::ScatterCombine combine,
                                      IndexErrorRecord *record, int32_t call) {
  const kernels::ElementLines lines = kernels::elementLines(plan);
  for (int64_t l = gridStart(); l < lines.lines; l += gridStride())
    for (int64_t j = 0; j < lines.length; ++j) {
      int64_t e = kernels::lineElement(lines, l, j);
      int64_t given = int64_t(indices[e]), v = given;
      if (!kernels::normalizeIndex(v, plan.dim)) {
        recordIndexError(record, call, 0, given);
        break;
      }
      int64_t off = kernels::elementIndexOffset(plan, e, v);
      out[off] = kernels::scatterCombine(out[off], updates[e], combine);
    }
}

template <typename T, typename I>
__global__ void reverseSequenceKernel(const T *x, const I *lens, T *y,
                                      kernels::ReverseSequencePlan plan, int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    int64_t r = e / plan.inner;
    int64_t len = int64_t(lens[kernels::reverseSequenceBatch(plan, r)]);
    y[e] = x[kernels::reverseSequenceSource(plan, r, len) * plan.inner + e % plan.inner];
  }
}

template <typename T>
__global__ void eyeLikeKernel(T one, T *y, int64_t rows, int64_t cols, int64_t k) {
  for (int64_t e = gridStart(), n = rows * cols; e < n; e += gridStride())
    y[e] = kernels::eyeLikeOne(e / cols, e % cols, k) ? one : T(0);
}

/// Calls emit(e, position) for every e < n with flag(e), positions counted
/// in order of e from 0. Run by every thread of one block of a multiple of
/// 32 threads (at most 1024).
template <typename Flag, typename Emit>
__device__ void compactInOrder(int64_t n, Flag flag, Emit emit) {
  __shared__ int warpTotals[32];
  __shared__ int64_t base;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int warps = int(blockDim.x) >> 5;
  if (threadIdx.x == 0)
    base = 0;
  __syncthreads();
  for (int64_t start = 0; start < n; start += blockDim.x) {
    int64_t e = start + threadIdx.x;
    bool kept = e < n && flag(e);
    unsigned ballot = __ballot_sync(0xffffffffu, kept);
    if (lane == 0)
      warpTotals[warp] = __popc(ballot);
    __syncthreads();
    int64_t before = base + __popc(ballot & ((1u << lane) - 1u));
    int total = 0;
    for (int w = 0; w < warps; ++w) {
      if (w < warp)
        before += warpTotals[w];
      total += warpTotals[w];
    }
    if (kept)
      emit(e, before);
    __syncthreads();
    if (threadIdx.x == 0)
      base += total;
    __syncthreads();
  }
}

template <typename T>
__global__ void nonZeroKernel(const T *x, int64_t n, NonZeroShape shape, int64_t *out,
                              int64_t count) {
  compactInOrder(
      n, [&](int64_t e) { return kernels::isNonZero(x[e]); },
      [&](int64_t e, int64_t k) {
        if (k < count)
          kernels::writeCoordinates(shape.dims, shape.rank, e, out, count, k);
      });
}

__global__ void listKeptKernel(const bool *cond, int64_t n, int64_t *list, int64_t kept) {
  compactInOrder(
      n, [&](int64_t j) { return cond[j]; },
      [&](int64_t j, int64_t k) {
        if (k < kept)
          list[k] = j;
      });
}

template <typename T>
__global__ void compressKernel(const T *x, T *y, kernels::AxisSplit split, int64_t kept,
                               const int64_t *list, int64_t n) {
  for (int64_t e = gridStart(); e < n; e += gridStride())
    y[e] = x[kernels::compressSource(split, kept, list, e)];
}

/// fn(I()) for an index type of i32 or i64.
template <typename Fn> cudaError_t dispatchIndex(int32_t type, Fn &&fn) {
  if (type == kOnnxI32)
    return fn(int32_t());
  if (type == kOnnxI64)
    return fn(int64_t());
  return cudaErrorInvalidValue;
}

/// fn(T()) for the scatter's element type: raw bytes for None (a plain
/// store), the arithmetic type for a reduction.
template <typename Fn>
cudaError_t dispatchScatter(int32_t type, unsigned bytes, kernels::ScatterCombine c, Fn &&fn) {
  if (c == kernels::ScatterCombine::None)
    return dispatchBytes(bytes, fn);
  return dispatchBinary(type, fn);
}

} // namespace

cudaError_t launchBlockMove(unsigned elementBytes, bool toSpace, const void *x, void *y,
                            const kernels::BlockMovePlan &plan, const LaunchGeometry &g,
                            cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return queue(blockMoveKernel<T>, g, stream, static_cast<const T *>(x), static_cast<T *>(y),
                 plan, toSpace);
  });
}

cudaError_t launchGatherND(unsigned elementBytes, int32_t indexType, const void *data,
                           const void *indices, void *out, const kernels::TupleIndexPlan &plan,
                           IndexErrorRecord *record, int32_t call, const LaunchGeometry &g,
                           cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return dispatchIndex(indexType, [&](auto itag) {
      using I = decltype(itag);
      return queue(gatherNDKernel<T, I>, g, stream, static_cast<const T *>(data),
                   static_cast<const I *>(indices), static_cast<T *>(out), plan, record, call);
    });
  });
}

cudaError_t launchScatterND(int32_t type, unsigned elementBytes, kernels::ScatterCombine combine,
                            int32_t indexType, const void *indices, const void *updates,
                            void *out, const kernels::TupleIndexPlan &plan,
                            IndexErrorRecord *record, int32_t call, const LaunchGeometry &g,
                            cudaStream_t stream) {
  return dispatchScatter(type, elementBytes, combine, [&](auto tag) {
    using T = decltype(tag);
    return dispatchIndex(indexType, [&](auto itag) {
      using I = decltype(itag);
      return queue(scatterNDKernel<T, I>, g, stream, static_cast<const I *>(indices),
                   static_cast<const T *>(updates), static_cast<T *>(out), plan, combine,
                   record, call);
    });
  });
}

cudaError_t launchScatterElements(int32_t type, unsigned elementBytes,
                                  kernels::ScatterCombine combine, int32_t indexType,
                                  const void *indices, const void *updates, void *out,
                                  const kernels::ElementIndexPlan &plan,
                                  IndexErrorRecord *record, int32_t call,
                                  const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchScatter(type, elementBytes, combine, [&](auto tag) {
    using T = decltype(tag);
    return dispatchIndex(indexType, [&](auto itag) {
      using I = decltype(itag);
      return queue(scatterElementsKernel<T, I>, g, stream, static_cast<const I *>(indices),
                   static_cast<const T *>(updates), static_cast<T *>(out), plan, combine,
                   record, call);
    });
  });
}

cudaError_t launchReverseSequence(unsigned elementBytes, int32_t lensType, const void *x,
                                  const void *lens, void *y,
                                  const kernels::ReverseSequencePlan &plan, int64_t n,
                                  const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return dispatchIndex(lensType, [&](auto itag) {
      using I = decltype(itag);
      return queue(reverseSequenceKernel<T, I>, g, stream, static_cast<const T *>(x),
                   static_cast<const I *>(lens), static_cast<T *>(y), plan, n);
    });
  });
}

cudaError_t launchEyeLike(unsigned elementBytes, uint64_t oneBits, void *y, int64_t rows,
                          int64_t cols, int64_t k, const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    T one;
    memcpy(&one, &oneBits, sizeof(T)); // the low bytes (little-endian)
    return queue(eyeLikeKernel<T>, g, stream, one, static_cast<T *>(y), rows, cols, k);
  });
}

cudaError_t launchNonZero(int32_t type, const void *x, int64_t n, const NonZeroShape &shape,
                          int64_t *out, int64_t count, cudaStream_t stream) {
  if (n == 0 || count == 0)
    return cudaSuccess;
  return dispatchCast(type, [&](auto tag) {
    using T = decltype(tag);
    nonZeroKernel<T><<<1, kCompactThreads, 0, stream>>>(static_cast<const T *>(x), n, shape,
                                                         out, count);
    return cudaGetLastError();
  });
}

cudaError_t launchCompress(unsigned elementBytes, const bool *cond, int64_t n, const void *x,
                           void *y, const kernels::AxisSplit &split, int64_t kept, int64_t *list,
                           const LaunchGeometry &g, cudaStream_t stream) {
  int64_t count = split.outer * kept * split.inner;
  if (count == 0)
    return cudaSuccess;
  listKeptKernel<<<1, kCompactThreads, 0, stream>>>(cond, n, list, kept);
  if (cudaError_t e = cudaGetLastError())
    return e;
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return queue(compressKernel<T>, g, stream, static_cast<const T *>(x), static_cast<T *>(y),
                 split, kept, static_cast<const int64_t *>(list), count);
  });
}

} // namespace cuda
} // namespace mpc
