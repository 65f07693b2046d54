//===- PoolKernels.cu - Launchers of the pooling window bodies -------------===//
//
// MaxPool, AveragePool, LpPool and the gradients as grid-stride kernels over
// the window bodies the CPU backend runs (Kernels/WindowBodies.h); the global
// pools (GlobalLpPool with the same lpTerm and lpRoot) as one block per plane
// with a fixed shared-memory reduction tree (no atomics: the same result on
// every run).
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "PoolLaunch.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/WindowBodies.h"

namespace mpc {
namespace cuda {
namespace {

using kernels::AccumType;
using kernels::WindowShape;

template <typename T, bool Max>
__global__ void windowPoolKernel(WindowShape w, bool includePad, bool columnMajor, const T *x,
                                 T *y, int64_t *indices, int64_t planes) {
  int64_t inSize = kernels::windowInSize(w), outSize = kernels::windowOutSize(w);
  int64_t n = planes * outSize;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t p = i / outSize, o = i % outSize;
    const T *plane = x + p * inSize;
    if (Max) {
      int64_t arg;
      y[i] = kernels::store<T>(kernels::windowMax(w, plane, o, arg));
      if (indices)
        indices[i] = p * inSize + kernels::windowIndex(w, arg, columnMajor);
    } else {
      y[i] = kernels::store<T>(kernels::windowAverage(w, plane, o, includePad));
    }
  }
}

template <typename T>
__global__ void windowLpPoolKernel(WindowShape w, float p, const T *x, T *y, int64_t planes) {
  using A = AccumType<T>;
  int64_t inSize = kernels::windowInSize(w), outSize = kernels::windowOutSize(w);
  int64_t n = planes * outSize;
  for (int64_t i = gridStart(); i < n; i += gridStride())
    y[i] = kernels::store<T>(
        kernels::windowLpPool(w, x + (i / outSize) * inSize, i % outSize, A(p)));
}

template <typename T, bool Max>
__global__ void windowPoolGradKernel(WindowShape w, bool includePad, const T *dy, const T *x,
                                     T *dx, int64_t planes) {
  int64_t inSize = kernels::windowInSize(w), outSize = kernels::windowOutSize(w);
  int64_t n = planes * inSize;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t p = i / inSize, pos = i % inSize;
    const T *dyp = dy + p * outSize;
    if (Max)
      dx[i] = kernels::store<T>(kernels::maxPoolGradAt(w, x + p * inSize, dyp, pos));
    else
      dx[i] = kernels::store<T>(kernels::averagePoolGradAt(w, dyp, pos, includePad));
  }
}

constexpr unsigned kPlaneThreads = 256;

/// What a global pool computes over its plane.
enum GlobalMath { kGlobalAverage, kGlobalMax, kGlobalLp };

template <typename T, int Math>
__global__ void globalPoolKernel(const T *x, T *y, int64_t planeSize, float p) {
  using A = AccumType<T>;
  constexpr bool Max = Math == kGlobalMax;
  __shared__ A part[kPlaneThreads];
  __shared__ bool nan[kPlaneThreads];
  const T *plane = x + int64_t(blockIdx.x) * planeSize;
  A acc = Max ? -math::infinity<A>() : A(0);
  bool sawNaN = false;
  for (int64_t i = threadIdx.x; i < planeSize; i += kPlaneThreads) {
    A v = A(kernels::load(plane[i]));
    if (Max) {
      acc = v > acc ? v : acc;
      sawNaN |= v != v;
    } else {
      acc += Math == kGlobalLp ? kernels::lpTerm(v, A(p)) : v;
    }
  }
  part[threadIdx.x] = acc;
  nan[threadIdx.x] = sawNaN;
  __syncthreads();
  for (unsigned half = kPlaneThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      A other = part[threadIdx.x + half];
      if (Max) {
        part[threadIdx.x] = other > part[threadIdx.x] ? other : part[threadIdx.x];
        nan[threadIdx.x] = nan[threadIdx.x] || nan[threadIdx.x + half];
      } else {
        part[threadIdx.x] += other;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    // The CPU's NaN (__builtin_nan): the positive quiet NaN. A is float
    // for every type the launcher dispatches.
    A r = Max                    ? (nan[0] ? A(__int_as_float(0x7fc00000)) : part[0])
          : Math == kGlobalLp ? kernels::lpRoot(part[0], A(p))
                              : part[0] / A(planeSize);
    y[blockIdx.x] = kernels::store<T>(r);
  }
}

template <typename T>
__global__ void globalAverageGradKernel(const T *dy, T *dx, int64_t planes, int64_t planeSize) {
  using A = AccumType<T>;
  int64_t n = planes * planeSize;
  for (int64_t i = gridStart(); i < n; i += gridStride())
    dx[i] = kernels::store<T>(A(kernels::load(dy[i / planeSize])) / A(planeSize));
}

} // namespace

cudaError_t launchWindowPool(int32_t type, bool max, const WindowShape &w, bool countIncludePad,
                             bool columnMajorIndices, const void *x, void *y, int64_t *indices,
                             int64_t planes, const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    auto kernel = max ? windowPoolKernel<T, true> : windowPoolKernel<T, false>;
    return queue(kernel, g, stream, w, countIncludePad, columnMajorIndices,
                 static_cast<const T *>(x), static_cast<T *>(y), indices, planes);
  });
}

cudaError_t launchWindowLpPool(int32_t type, const WindowShape &w, float p, const void *x,
                               void *y, int64_t planes, const LaunchGeometry &g,
                               cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(windowLpPoolKernel<T>, g, stream, w, p, static_cast<const T *>(x),
                 static_cast<T *>(y), planes);
  });
}

cudaError_t launchWindowPoolGrad(int32_t type, bool max, const WindowShape &w,
                                 bool countIncludePad, const void *dy, const void *x, void *dx,
                                 int64_t planes, const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    auto kernel = max ? windowPoolGradKernel<T, true> : windowPoolGradKernel<T, false>;
    return queue(kernel, g, stream, w, countIncludePad, static_cast<const T *>(dy),
                 static_cast<const T *>(x), static_cast<T *>(dx), planes);
  });
}

/// One block per plane of globalPoolKernel<T, Math>.
template <int Math>
static cudaError_t queueGlobalPool(int32_t type, const void *x, void *y, int64_t planes,
                                   int64_t planeSize, float p, cudaStream_t stream) {
  if (planes <= 0)
    return cudaSuccess;
  if (planes > int64_t(0x7fffffff))
    return cudaErrorInvalidValue;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    globalPoolKernel<T, Math><<<unsigned(planes), kPlaneThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<T *>(y), planeSize, p);
    return cudaGetLastError();
  });
}

cudaError_t launchGlobalPool(int32_t type, bool max, const void *x, void *y, int64_t planes,
                             int64_t planeSize, cudaStream_t stream) {
  return max ? queueGlobalPool<kGlobalMax>(type, x, y, planes, planeSize, 0.0f, stream)
             : queueGlobalPool<kGlobalAverage>(type, x, y, planes, planeSize, 0.0f, stream);
}

cudaError_t launchGlobalLpPool(int32_t type, float p, const void *x, void *y, int64_t planes,
                               int64_t planeSize, cudaStream_t stream) {
  return queueGlobalPool<kGlobalLp>(type, x, y, planes, planeSize, p, stream);
}

cudaError_t launchGlobalAveragePoolGrad(int32_t type, const void *dy, void *dx, int64_t planes,
                                        int64_t planeSize, const LaunchGeometry &g,
                                        cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(globalAverageGradKernel<T>, g, stream, static_cast<const T *>(dy),
                 static_cast<T *>(dx), planes, planeSize);
  });
}

} // namespace cuda
} // namespace mpc
