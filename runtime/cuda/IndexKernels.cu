//===- IndexKernels.cu - Launchers of the index and shape ops -------------===//
//
// ArgMax/ArgMin: one thread per slice walking it in index order with the
// CPU's body (IndexBodies.h), so ties and NaNs resolve as on the CPU.
// Shape/Size: a one-block kernel writing values known at prepare. Range:
// start + i * delta per element, start and delta read on the device.
// Trilu and GatherElements per element over raw 1/2/4/8-byte elements (an
// out-of-range index goes to the run's error record); CumSum/CumProd one
// thread per slice with the CPU's scanSlice, so both give the same bits.
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "IndexError.cuh"
#include "IndexLaunch.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/CopyPlan.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void argReduceKernel(const T *x, int64_t *y, kernels::AxisSplit split, bool isMax,
                                bool last) {
  for (int64_t s = gridStart(), n = split.outer * split.inner; s < n; s += gridStride())
    y[s] = kernels::argReduceSlice(x, split, s, isMax, last);
}

__global__ void smallIntsKernel(SmallInts values, int64_t *out) {
  int i = int(threadIdx.x);
  if (i < values.count)
    out[i] = values.v[i];
}

template <typename T>
__global__ void rangeKernel(const T *start, const T *delta, T *out, int64_t n) {
  const T s = *start, d = *delta;
  for (int64_t i = gridStart(); i < n; i += gridStride())
    out[i] = kernels::rangeValue(s, d, i);
}

template <typename T>
__global__ void triluKernel(const T *x, T *y, int64_t n, int64_t rows, int64_t cols, int64_t k,
                            bool upper) {
  for (int64_t e = gridStart(); e < n; e += gridStride()) {
    int64_t j = e % cols, i = (e / cols) % rows;
    y[e] = kernels::triluKeeps(i, j, k, upper) ? x[e] : T(0);
  }
}

template <typename Op, typename T>
__global__ void scanKernel(const T *x, T *y, kernels::AxisSplit split, int identity,
                           bool exclusive, bool reverse) {
  for (int64_t s = gridStart(), n = split.outer * split.inner; s < n; s += gridStride())
    kernels::scanSlice<Op>(x, y, split, s, identity, exclusive, reverse);
}

template <typename T, typename I>
__global__ void gatherElementsKernel(const T *data, const I *indices, T *out,
                                     kernels::ElementIndexPlan plan, IndexErrorRecord *record,
                                     int32_t call) {
  for (int64_t e = gridStart(); e < plan.count; e += gridStride()) {
    int64_t given = int64_t(indices[e]), index = given;
    if (!kernels::normalizeIndex(index, plan.dim)) {
      recordIndexError(record, call, 0, given);
      continue;
    }
    out[e] = data[kernels::elementIndexOffset(plan, e, index)];
  }
}

template <typename I, typename T>
__global__ void oneHotKernel(const I *indices, const T *values, T *y, kernels::AxisSplit split) {
  const T off = values[0], on = values[1];
  for (int64_t e = gridStart(), n = split.outer * split.dim * split.inner; e < n;
       e += gridStride()) {
    int64_t i = e % split.inner, d = (e / split.inner) % split.dim,
            o = e / (split.inner * split.dim);
    y[e] = kernels::oneHotPosition(indices[o * split.inner + i], split.dim) == d ? on : off;
  }
}

template <typename T> __global__ void fillBitsKernel(T value, T *dst, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    dst[i] = value;
}

} // namespace

cudaError_t launchArgReduce(int32_t type, const void *x, int64_t *y,
                            const kernels::AxisSplit &split, bool isMax, bool last,
                            const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBinary(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(argReduceKernel<T>, g, stream, static_cast<const T *>(x), y, split, isMax,
                 last);
  });
}

cudaError_t launchSmallInts(const SmallInts &values, int64_t *out, cudaStream_t stream) {
  if (values.count <= 0)
    return cudaSuccess;
  smallIntsKernel<<<1, kMaxSmallInts, 0, stream>>>(values, out);
  return cudaGetLastError();
}

cudaError_t launchRange(int32_t type, const void *start, const void *delta, void *out,
                        int64_t n, const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBinary(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(rangeKernel<T>, g, stream, static_cast<const T *>(start),
                 static_cast<const T *>(delta), static_cast<T *>(out), n);
  });
}

cudaError_t launchOneHot(int32_t indexType, unsigned valueBytes, const void *indices,
                         const void *values, void *y, const kernels::AxisSplit &split,
                         const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBinary(indexType, [&](auto itag) {
    using I = decltype(itag);
    return dispatchBytes(valueBytes, [&](auto tag) {
      using T = decltype(tag);
      return queue(oneHotKernel<I, T>, g, stream, static_cast<const I *>(indices),
                   static_cast<const T *>(values), static_cast<T *>(y), split);
    });
  });
}

cudaError_t launchFillBits(unsigned elementBytes, uint64_t bits, void *dst, int64_t n,
                           const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    T value;
    memcpy(&value, &bits, sizeof(T)); // the low bytes (little-endian)
    return queue(fillBitsKernel<T>, g, stream, value, static_cast<T *>(dst), n);
  });
}

cudaError_t launchTrilu(unsigned elementBytes, const void *x, void *y, int64_t n, int64_t rows,
                        int64_t cols, int64_t k, bool upper, const LaunchGeometry &g,
                        cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return queue(triluKernel<T>, g, stream, static_cast<const T *>(x), static_cast<T *>(y), n,
                 rows, cols, k, upper);
  });
}

cudaError_t launchScan(bool sum, int32_t type, const void *x, void *y,
                       const kernels::AxisSplit &split, bool exclusive, bool reverse,
                       const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBinary(type, [&](auto tag) {
    using T = decltype(tag);
    if (sum)
      return queue(scanKernel<kernels::Add, T>, g, stream, static_cast<const T *>(x),
                   static_cast<T *>(y), split, 0, exclusive, reverse);
    return queue(scanKernel<kernels::Mul, T>, g, stream, static_cast<const T *>(x),
                 static_cast<T *>(y), split, 1, exclusive, reverse);
  });
}

cudaError_t launchGatherElements(unsigned elementBytes, int32_t indexType, const void *data,
                                 const void *indices, void *out,
                                 const kernels::ElementIndexPlan &plan,
                                 IndexErrorRecord *record, int32_t call,
                                 const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto itag) {
      using I = decltype(itag);
      return queue(gatherElementsKernel<T, I>, g, stream, static_cast<const T *>(data),
                   static_cast<const I *>(indices), static_cast<T *>(out), plan, record, call);
    };
    if (indexType == kOnnxI32)
      return run(int32_t());
    if (indexType == kOnnxI64)
      return run(int64_t());
    return cudaErrorInvalidValue;
  });
}

} // namespace cuda
} // namespace mpc
