//===- StatNormKernels.cu - Instance, group and Lp normalization ------------===//
//
// See StatNormLaunch.h: double sums in a fixed block tree, each output
// rounded once from the double formula of StatNormBodies.h.
//
//===----------------------------------------------------------------------===//
#include "DataParam.cuh"
#include "SliceKernels.cuh"
#include "StatNormLaunch.h"
#include "mpc/Runtime/Kernels/StatNormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

using kernels::load;
using kernels::store;

template <typename T> __device__ inline double loadDouble(const T *p, int64_t i) {
  return double(load(p[i]));
}

template <typename T, typename P>
__global__ void runNormKernel(const T *x, const P *scale, const P *bias, T *y, double epsilon,
                              RunNormGeometry g) {
  using C = kernels::ComputeType<T>;
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < g.runs; r += gridDim.x) {
    const T *row = x + r * g.len;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < g.len; i += blockDim.x)
      sum += loadDouble(row, i);
    double mean = blockCombine(sum, SumOp(), 0.0, shared) / double(g.len);
    double sq = 0;
    for (int64_t i = threadIdx.x; i < g.len; i += blockDim.x) {
      double d = loadDouble(row, i) - mean;
      sq += d * d;
    }
    double inv = kernels::runInvStdDev(blockCombine(sq, SumOp(), 0.0, shared), g.len, epsilon);
    for (int64_t i = threadIdx.x; i < g.len; i += blockDim.x) {
      int64_t ch = kernels::runChannel(r, i, g.len, g.chanLen, g.channels, g.perRunParams);
      double v = kernels::runNormValue(loadDouble(row, i), mean, inv, loadDouble(scale, ch),
                                       loadDouble(bias, ch));
      y[r * g.len + i] = store<T>(C(v));
    }
  }
}

/// A slice's norm: thread-strided terms, then the block tree (cooperative)
/// or the thread's own sum (one thread per slice).
template <typename T>
__device__ void lpNormSlice(const T *x, T *y, int64_t p, int64_t base, int64_t stride,
                            int64_t n, int64_t first, int64_t step, bool block, double *shared) {
  using C = kernels::ComputeType<T>;
  double sum = 0;
  for (int64_t a = first; a < n; a += step)
    sum += kernels::lpNormTerm(loadDouble(x, base + a * stride), p);
  if (block)
    sum = blockCombine(sum, SumOp(), 0.0, shared);
  double norm = kernels::lpNormFinish(sum, p);
  for (int64_t a = first; a < n; a += step) {
    int64_t k = base + a * stride;
    y[k] = store<T>(C(kernels::lpNormValue(loadDouble(x, k), norm)));
  }
}

template <typename T>
__global__ void lpNormRowsKernel(const T *x, T *y, int64_t p, int64_t rows, int64_t n) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    lpNormSlice(x, y, p, r * n, 1, n, threadIdx.x, blockDim.x, true, shared);
}

template <typename T>
__global__ void lpNormSlicesKernel(const T *x, T *y, int64_t p, int64_t outer, int64_t n,
                                   int64_t inner) {
  for (int64_t s = gridStart(), count = outer * inner; s < count; s += gridStride())
    lpNormSlice(x, y, p, sliceBase(s, n, inner), inner, n, 0, 1, false, nullptr);
}

} // namespace

cudaError_t launchRunNorm(int32_t type, int32_t paramType, const void *x, const void *scale,
                          const void *bias, void *y, double epsilon, const RunNormGeometry &g,
                          cudaStream_t stream) {
  return dispatchDataParam(type, paramType, [&](auto tag, auto ptag) {
    using T = decltype(tag);
    using P = decltype(ptag);
    LaunchGeometry l;
    l.blocks = unsigned(g.runs < kMaxGridBlocks ? g.runs : kMaxGridBlocks);
    l.threads = g.threads;
    return queue(runNormKernel<T, P>, l, stream, static_cast<const T *>(x),
                 static_cast<const P *>(scale), static_cast<const P *>(bias), static_cast<T *>(y),
                 epsilon, g);
  });
}

cudaError_t launchLpNorm(int32_t type, const void *x, void *y, int64_t p, const SlicePlan &plan,
                         cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    LaunchGeometry l;
    l.blocks = plan.blocks;
    l.threads = plan.threads;
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    if (plan.cooperative)
      return queue(lpNormRowsKernel<T>, l, stream, in, out, p, plan.shape.outer,
                   plan.shape.axisDim);
    return queue(lpNormSlicesKernel<T>, l, stream, in, out, p, plan.shape.outer,
                 plan.shape.axisDim, plan.shape.inner);
  });
}

} // namespace cuda
} // namespace mpc
