//===- DataKernels.cu - Launchers of the data-movement ops ----------------===//
//
// The strided copy of CopyPlan.h (the CPU's Transpose, Slice, Expand,
// Concat, Split, Tile, SliceGrad and constant Pad walk the same plans) and a
// fill, Where over SelectPlan and Gather over GatherPlan (the CPU's Where and
// Gather call the same bodies), over raw 1-, 2-, 4- and 8-byte elements: data
// movement does no arithmetic, so one instantiation per element size serves
// every dtype. Gather writes an out-of-range index to the run's error record.
// GatherGrad's deterministic scatter-add (a stable sort of the indices, then
// one sum per run of equal indices) is the one arithmetic launcher here.
//
//===----------------------------------------------------------------------===//
#include "DataLaunch.h"
#include "GridStride.cuh"
#include "IndexError.cuh"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void copyPlanKernel(const T *src, T *dst, kernels::CopyPlan plan) {
  for (int64_t i = gridStart(); i < plan.numElements; i += gridStride()) {
    int64_t s, d;
    kernels::copyOffsets(plan, i, s, d);
    dst[d] = src[s];
  }
}

template <typename T> __global__ void fillKernel(const T *value, T *dst, int64_t n) {
  const T v = value ? *value : T(0);
  for (int64_t i = gridStart(); i < n; i += gridStride())
    dst[i] = v;
}

template <typename T>
__global__ void selectKernel(const bool *cond, const T *x, const T *y, T *out,
                             kernels::SelectPlan plan) {
  for (int64_t i = gridStart(); i < plan.numElements; i += gridStride()) {
    int64_t off[3];
    kernels::selectOffsets(plan, i, off);
    out[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

template <typename T, typename I>
__global__ void gatherKernel(const T *data, const I *indices, T *out, kernels::GatherPlan plan,
                             IndexErrorRecord *record, int32_t call) {
  for (int64_t e = gridStart(), n = plan.numElements(); e < n; e += gridStride()) {
    int64_t given = int64_t(indices[kernels::gatherIndexPosition(plan, e)]), index = given;
    if (!kernels::normalizeIndex(index, plan.dim)) {
      recordIndexError(record, call, 0, given);
      continue;
    }
    out[e] = data[kernels::gatherSource(plan, e, index)];
  }
}

/// Index j of a GatherGrad made non-negative (0 where out of range: the
/// error is recorded once by its own thread, and the sort stays in bounds).
template <typename I> __device__ int64_t sortKey(const I *indices, int64_t j, int64_t dim) {
  int64_t v = int64_t(indices[j]);
  return kernels::normalizeIndex(v, dim) ? v : 0;
}

/// Stable counting sort by index value: index j goes to the number of
/// indices smaller than its own plus the equal ones before it.
template <typename I>
__global__ void sortIndicesKernel(const I *indices, int64_t count, int64_t dim,
                                  int64_t *sortedPos, int64_t *sortedKey,
                                  IndexErrorRecord *record, int32_t call) {
  for (int64_t j = gridStart(); j < count; j += gridStride()) {
    int64_t given = int64_t(indices[j]), key = given;
    if (!kernels::normalizeIndex(key, dim)) {
      recordIndexError(record, call, -1, given); // output 0's shape, as the CPU
      key = 0;
    }
    int64_t pos = 0;
    for (int64_t q = 0; q < count; ++q) {
      int64_t k = sortKey(indices, q, dim);
      pos += k < key || (k == key && q < j);
    }
    sortedPos[pos] = j;
    sortedKey[pos] = key;
  }
}

/// One thread per (outer, sorted position, inner); the first position of a
/// run of equal indices sums the run in index order.
template <typename T, typename A>
__global__ void segmentSumKernel(const T *dy, T *dx, const int64_t *sortedPos,
                                 const int64_t *sortedKey, kernels::GatherPlan plan) {
  for (int64_t e = gridStart(), n = plan.numElements(); e < n; e += gridStride()) {
    int64_t p = kernels::gatherIndexPosition(plan, e);
    if (p > 0 && sortedKey[p - 1] == sortedKey[p])
      continue;
    int64_t o = e / (plan.inner * plan.count), k = e % plan.inner;
    A acc = A(0);
    for (int64_t q = p; q < plan.count && sortedKey[q] == sortedKey[p]; ++q)
      acc += kernels::castValue<A>(dy[(o * plan.count + sortedPos[q]) * plan.inner + k]);
    dx[kernels::gatherSource(plan, e, sortedKey[p])] = kernels::castValue<T>(acc);
  }
}

/// One run of a Sum or Mean (kernels::naryContinue): `before` the sum of the
/// operands before it (null: the first run); the sum goes to `acc` (C) when
/// `out` is null, else to `out`, divided by `count` for a mean.
template <typename T>
__global__ void naryKernel(NaryInputs in, const kernels::ComputeType<T> *before,
                           kernels::ComputeType<T> *acc, T *out, kernels::NaryPlan plan,
                           bool mean, int64_t count) {
  using C = kernels::ComputeType<T>;
  const T *ptr[kernels::kMaxNaryInputs];
  for (int k = 0; k < plan.inputs; ++k)
    ptr[k] = static_cast<const T *>(in.data[k]);
  for (int64_t i = gridStart(); i < plan.numElements; i += gridStride()) {
    C sum = kernels::naryContinue(plan, ptr, i, before);
    if (out)
      out[i] = kernels::store<T>(mean ? C(sum / C(count)) : sum);
    else
      acc[i] = sum;
  }
}

} // namespace

cudaError_t launchCopyPlan(unsigned elementBytes, const void *src, void *dst,
                           const kernels::CopyPlan &plan, const LaunchGeometry &g,
                           cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return queue(copyPlanKernel<T>, g, stream, static_cast<const T *>(src),
                 static_cast<T *>(dst), plan);
  });
}

cudaError_t launchFill(unsigned elementBytes, const void *value, void *dst, int64_t n,
                       const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return queue(fillKernel<T>, g, stream, static_cast<const T *>(value),
                 static_cast<T *>(dst), n);
  });
}

cudaError_t launchSelect(unsigned elementBytes, const bool *cond, const void *x, const void *y,
                         void *out, const kernels::SelectPlan &plan, const LaunchGeometry &g,
                         cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    return queue(selectKernel<T>, g, stream, cond, static_cast<const T *>(x),
                 static_cast<const T *>(y), static_cast<T *>(out), plan);
  });
}

cudaError_t launchGather(unsigned elementBytes, int32_t indexType, const void *data,
                         const void *indices, void *out, const kernels::GatherPlan &plan,
                         IndexErrorRecord *record, int32_t call, const LaunchGeometry &g,
                         cudaStream_t stream) {
  return dispatchBytes(elementBytes, [&](auto tag) {
    using T = decltype(tag);
    if (indexType == kOnnxI32)
      return queue(gatherKernel<T, int32_t>, g, stream, static_cast<const T *>(data),
                   static_cast<const int32_t *>(indices), static_cast<T *>(out), plan, record,
                   call);
    if (indexType == kOnnxI64)
      return queue(gatherKernel<T, int64_t>, g, stream, static_cast<const T *>(data),
                   static_cast<const int64_t *>(indices), static_cast<T *>(out), plan, record,
                   call);
    return cudaErrorInvalidValue;
  });
}

cudaError_t launchNary(int32_t type, bool mean, int64_t count, const NaryInputs &in,
                       const void *before, void *acc, void *out, const kernels::NaryPlan &plan,
                       const LaunchGeometry &g, cudaStream_t stream) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using C = kernels::ComputeType<T>;
    return queue(naryKernel<T>, g, stream, in, static_cast<const C *>(before),
                 static_cast<C *>(acc), static_cast<T *>(out), plan, mean, count);
  };
  if (type == kOnnxF64)
    return run(double());
  return dispatchFloat(type, run);
}

cudaError_t launchGatherGrad(int32_t type, int32_t indexType, const void *dy,
                             const void *indices, void *dx, const kernels::GatherPlan &plan,
                             void *workspace, IndexErrorRecord *record, int32_t call,
                             const LaunchGeometry &sortGeometry,
                             const LaunchGeometry &sumGeometry, cudaStream_t stream) {
  int64_t *sortedPos = static_cast<int64_t *>(workspace), *sortedKey = sortedPos + plan.count;
  auto sortThen = [&](auto indexTag) {
    using I = decltype(indexTag);
    if (cudaError_t e = queue(sortIndicesKernel<I>, sortGeometry, stream,
                              static_cast<const I *>(indices), plan.count, plan.dim, sortedPos,
                              sortedKey, record, call))
      return e;
    auto sum = [&](auto valueTag, auto accTag) {
      using T = decltype(valueTag);
      using A = decltype(accTag);
      return queue(segmentSumKernel<T, A>, sumGeometry, stream, static_cast<const T *>(dy),
                   static_cast<T *>(dx), static_cast<const int64_t *>(sortedPos),
                   static_cast<const int64_t *>(sortedKey), plan);
    };
    if (type == kOnnxF64)
      return sum(double(), double());
    return dispatchFloat(type, [&](auto valueTag) { return sum(valueTag, float()); });
  };
  if (indexType == kOnnxI32)
    return sortThen(int32_t());
  if (indexType == kOnnxI64)
    return sortThen(int64_t());
  return cudaErrorInvalidValue;
}

} // namespace cuda
} // namespace mpc
