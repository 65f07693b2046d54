//===- GradKernels.cu - The activation gradient ops ------------------------===//
//
// ReluGrad, SigmoidGrad, TanhGrad, ErfGrad and GeluGrad: one grid-stride
// kernel per storage type calling the CPU loop's body (ActivationGrad.h).
//
//===----------------------------------------------------------------------===//
#include "GradLaunch.h"
#include "GridStride.cuh"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void activationGradKernel(kernels::ActivationGrad kind, const T *dy, const T *v,
                                     T *dx, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    dx[i] = kernels::activationGradValue(kind, dy[i], v[i]);
}

} // namespace

cudaError_t launchActivationGrad(kernels::ActivationGrad kind, int32_t type, const void *dy,
                                 const void *v, void *dx, int64_t n, const LaunchGeometry &g,
                                 cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(activationGradKernel<T>, g, stream, kind, static_cast<const T *>(dy),
                 static_cast<const T *>(v), static_cast<T *>(dx), n);
  });
}

} // namespace cuda
} // namespace mpc
