//===- BatchNormTrainKernels.cu - Training batch normalization --------------===//
//
// One block per channel: the channel's mean and biased variance in double
// (two passes, as the CPU's channelStats), then the element formulas of
// BatchNormBodies.h. See BatchNormTrainLaunch.h.
//
//===----------------------------------------------------------------------===//
#include "BatchNormTrainLaunch.h"
#include "DataParam.cuh"
#include "SliceKernels.cuh"
#include "mpc/Runtime/Kernels/BatchNormBodies.h"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

using kernels::load;
using kernels::store;

/// Element e (< batch * spatial) of channel c.
__device__ inline int64_t channelAt(const ChannelGeometry &g, int64_t c, int64_t e) {
  int64_t n = e / g.spatial, s = e - n * g.spatial;
  return (n * g.channels + c) * g.spatial + s;
}

/// The block's sum of f(e) over the channel's elements, in double.
template <typename F>
__device__ double channelSum(const ChannelGeometry &g, F f, double *shared) {
  double sum = 0;
  for (int64_t e = threadIdx.x, count = g.batch * g.spatial; e < count; e += blockDim.x)
    sum += f(e);
  return blockCombine(sum, SumOp(), 0.0, shared);
}

/// Mean and biased variance of channel c (every thread gets them).
template <typename T>
__device__ void channelStats(const T *x, const ChannelGeometry &g, int64_t c, double *shared,
                             float &mean, float &var) {
  double count = double(g.batch * g.spatial);
  double m = channelSum(g, [&](int64_t e) { return double(float(load(x[channelAt(g, c, e)]))); },
                        shared) /
             count;
  double sq = channelSum(
      g,
      [&](int64_t e) {
        double d = double(float(load(x[channelAt(g, c, e)]))) - m;
        return d * d;
      },
      shared);
  mean = float(m);
  var = float(sq / count);
}

template <typename T, typename P>
__global__ void batchNormTrainingKernel(const T *x, const P *scale, const P *bias,
                                        const P *inMean, const P *inVar, float epsilon,
                                        float momentum, T *y, P *runMean, P *runVar,
                                        ChannelGeometry g) {
  __shared__ double shared[32];
  for (int64_t c = blockIdx.x; c < g.channels; c += gridDim.x) {
    float mean, var;
    channelStats(x, g, c, shared, mean, var);
    kernels::BatchNormChannel<float> ch = kernels::batchNormChannel(
        float(load(scale[c])), float(load(bias[c])), mean, var, epsilon);
    for (int64_t e = threadIdx.x, count = g.batch * g.spatial; e < count; e += blockDim.x) {
      int64_t k = channelAt(g, c, e);
      y[k] = store<T>(kernels::batchNormApply(ch, float(load(x[k]))));
    }
    if (threadIdx.x == 0) {
      if (runMean)
        runMean[c] = store<P>(kernels::batchNormRunning(float(load(inMean[c])), mean, momentum));
      if (runVar)
        runVar[c] = store<P>(kernels::batchNormRunning(float(load(inVar[c])), var, momentum));
    }
  }
}

template <typename T, typename P>
__global__ void batchNormGradKernel(const T *dy, const T *x, const P *scale, float epsilon,
                                    T *dx, P *dScale, P *dBias, ChannelGeometry g) {
  __shared__ double shared[32];
  for (int64_t c = blockIdx.x; c < g.channels; c += gridDim.x) {
    float mean, var;
    channelStats(x, g, c, shared, mean, var);
    float inv = kernels::invStdDevOf(var, epsilon);
    double sumD = channelSum(
        g, [&](int64_t e) { return double(float(load(dy[channelAt(g, c, e)]))); }, shared);
    double sumDX = channelSum(
        g,
        [&](int64_t e) {
          int64_t k = channelAt(g, c, e);
          return double(kernels::batchNormGradXTerm(float(load(dy[k])), float(load(x[k])), mean,
                                                    inv));
        },
        shared);
    if (threadIdx.x == 0) {
      if (dScale)
        dScale[c] = store<P>(float(sumDX));
      if (dBias)
        dBias[c] = store<P>(float(sumD));
    }
    if (!dx)
      continue;
    double count = double(g.batch * g.spatial);
    float m1 = float(sumD / count), m2 = float(sumDX / count);
    float k = float(load(scale[c])) * inv;
    for (int64_t e = threadIdx.x, n = g.batch * g.spatial; e < n; e += blockDim.x) {
      int64_t i = channelAt(g, c, e);
      float xhat = kernels::normalizedInput(float(load(x[i])), mean, inv);
      dx[i] = store<T>(kernels::batchNormGradValue(k, float(load(dy[i])), xhat, m1, m2));
    }
  }
}

LaunchGeometry channelBlocks(const ChannelGeometry &g) {
  LaunchGeometry l;
  l.blocks = unsigned(g.channels < kMaxGridBlocks ? g.channels : kMaxGridBlocks);
  l.threads = g.threads;
  return l;
}

} // namespace

cudaError_t launchBatchNormTraining(int32_t type, int32_t paramType, const void *x,
                                    const void *scale, const void *bias, const void *inMean,
                                    const void *inVar, float epsilon, float momentum, void *y,
                                    void *runMean, void *runVar, const ChannelGeometry &g,
                                    cudaStream_t stream) {
  return dispatchDataParam(type, paramType, [&](auto tag, auto ptag) {
    using T = decltype(tag);
    using P = decltype(ptag);
    return queue(batchNormTrainingKernel<T, P>, channelBlocks(g), stream,
                 static_cast<const T *>(x), static_cast<const P *>(scale),
                 static_cast<const P *>(bias), static_cast<const P *>(inMean),
                 static_cast<const P *>(inVar), epsilon, momentum, static_cast<T *>(y),
                 static_cast<P *>(runMean), static_cast<P *>(runVar), g);
  });
}

cudaError_t launchBatchNormGrad(int32_t type, int32_t paramType, const void *dy, const void *x,
                                const void *scale, float epsilon, void *dx, void *dScale,
                                void *dBias, const ChannelGeometry &g, cudaStream_t stream) {
  return dispatchDataParam(type, paramType, [&](auto tag, auto ptag) {
    using T = decltype(tag);
    using P = decltype(ptag);
    return queue(batchNormGradKernel<T, P>, channelBlocks(g), stream, static_cast<const T *>(dy),
                 static_cast<const T *>(x), static_cast<const P *>(scale), epsilon,
                 static_cast<T *>(dx), static_cast<P *>(dScale), static_cast<P *>(dBias), g);
  });
}

} // namespace cuda
} // namespace mpc
