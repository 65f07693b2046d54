//===- BatchNormKernels.cu - Inference batch normalization ----------------===//
//
// BatchNormalization with running statistics: one grid-stride thread per
// element calling the body the CPU runs (Kernels/BatchNormBodies.h), with
// the channel's factor computed from its parameters (fp32 for 16-bit x).
//
//===----------------------------------------------------------------------===//
#include "BatchNormLaunch.h"
#include "GridStride.cuh"
#include "mpc/Runtime/Kernels/BatchNormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <type_traits>

namespace mpc {
namespace cuda {
namespace {

template <typename T, typename P>
__global__ void batchNormKernel(const T *x, const P *scale, const P *bias, const P *mean,
                                const P *var, T *y, int64_t n, int64_t channels,
                                int64_t spatial, float epsilon) {
  using S = kernels::AccumType<T>;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t c = (i / spatial) % channels;
    kernels::BatchNormChannel<S> ch = kernels::batchNormChannel(
        S(kernels::load(scale[c])), S(kernels::load(bias[c])), S(kernels::load(mean[c])),
        S(kernels::load(var[c])), epsilon);
    y[i] = kernels::store<T>(kernels::batchNormApply(ch, S(kernels::load(x[i]))));
  }
}

} // namespace

cudaError_t launchBatchNorm(int32_t type, int32_t paramType, const void *x, const void *scale,
                            const void *bias, const void *mean, const void *var, void *y,
                            int64_t batch, int64_t channels, int64_t spatial, float epsilon,
                            const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto ptag) {
      using P = decltype(ptag);
      return queue(batchNormKernel<T, P>, g, stream, static_cast<const T *>(x),
                   static_cast<const P *>(scale), static_cast<const P *>(bias),
                   static_cast<const P *>(mean), static_cast<const P *>(var),
                   static_cast<T *>(y), batch * channels * spatial, channels, spatial,
                   epsilon);
    };
    // fp32 parameters with 16-bit data, else parameters of the data's type.
    if (!std::is_same<T, float>::value && paramType == kOnnxF32)
      return run(float());
    return run(T());
  });
}

} // namespace cuda
} // namespace mpc
