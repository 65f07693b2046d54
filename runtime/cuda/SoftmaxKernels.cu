//===- SoftmaxKernels.cu - Softmax, LogSoftmax and their gradients --------===//
//
// Slice bodies (SliceKernels.cuh) over the element math of NormBodies.h, the
// formulas the CPU's Softmax.cpp and TrainingOps.cpp call: the row maximum
// and sums in fp32, each output rounded once.
//
//===----------------------------------------------------------------------===//
#include "NormLaunch.h"
#include "SliceKernels.cuh"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T, bool Log> struct SoftmaxBody {
  const T *x;
  T *y;
  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    float m = -math::infinity<float>();
    for (int64_t a = c.first(); a < s.n; a += c.step())
      m = kernels::maxKeepNaN(m, float(kernels::load(x[s.at(a)])));
    m = c.combine(m, MaxKeepNaNOp(), -math::infinity<float>());
    float sum = 0.0f;
    for (int64_t a = c.first(); a < s.n; a += c.step())
      sum += kernels::softmaxExp(float(kernels::load(x[s.at(a)])), m);
    sum = c.combine(sum, SumOp(), 0.0f);
    if (Log) {
      float logSum = math::log(sum);
      for (int64_t a = c.first(); a < s.n; a += c.step())
        y[s.at(a)] = kernels::store<T>(
            kernels::logSoftmaxValue(float(kernels::load(x[s.at(a)])), m, logSum));
    } else {
      for (int64_t a = c.first(); a < s.n; a += c.step())
        y[s.at(a)] =
            kernels::store<T>(kernels::softmaxExp(float(kernels::load(x[s.at(a)])), m) / sum);
    }
  }
};

template <typename T, bool Log> struct SoftmaxGradBody {
  const T *dy, *y;
  T *dx;
  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    float sum = 0.0f;
    for (int64_t a = c.first(); a < s.n; a += c.step())
      sum += kernels::softmaxGradTerm(float(kernels::load(dy[s.at(a)])),
                                      float(kernels::load(y[s.at(a)])), Log);
    sum = c.combine(sum, SumOp(), 0.0f);
    for (int64_t a = c.first(); a < s.n; a += c.step()) {
      int64_t k = s.at(a);
      dx[k] = kernels::store<T>(kernels::softmaxGradValue(
          float(kernels::load(dy[k])), float(kernels::load(y[k])), sum, Log));
    }
  }
};

} // namespace

cudaError_t launchSoftmax(int32_t type, bool log, const void *x, void *y, const SlicePlan &p,
                          cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x);
    T *out = static_cast<T *>(y);
    return log ? queueSlices(SoftmaxBody<T, true>{in, out}, p, stream)
               : queueSlices(SoftmaxBody<T, false>{in, out}, p, stream);
  });
}

cudaError_t launchSoftmaxGrad(int32_t type, bool log, const void *dy, const void *y, void *dx,
                              const SlicePlan &p, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    const T *g = static_cast<const T *>(dy), *out = static_cast<const T *>(y);
    T *d = static_cast<T *>(dx);
    return log ? queueSlices(SoftmaxGradBody<T, true>{g, out, d}, p, stream)
               : queueSlices(SoftmaxGradBody<T, false>{g, out, d}, p, stream);
  });
}

} // namespace cuda
} // namespace mpc
