//===- ClipKernels.cu - Clip with bounds read on the device -----------------===//
//
// One grid-stride kernel per type: each thread reads the bounds (device
// values, so nothing is read on the host at launch) into the
// kernels::Clip functor, as the CPU's runClip does on the host, and applies
// it in the compute type (float for f16/bf16), as the CPU's loop does.
//
//===----------------------------------------------------------------------===//
#include "ClipLaunch.h"
#include "GridStride.cuh"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void clipKernel(const T *x, const T *minValue, const T *maxValue, double minDefault,
                           double maxDefault, T *y, int64_t n) {
  kernels::Clip op;
  op.minValue = minValue ? kernels::castValue<double>(*minValue) : minDefault;
  op.maxValue = maxValue ? kernels::castValue<double>(*maxValue) : maxDefault;
  for (int64_t i = gridStart(); i < n; i += gridStride())
    y[i] = kernels::store<T>(op(kernels::load(x[i])));
}

} // namespace

cudaError_t launchClip(int32_t type, const void *x, const void *minValue, const void *maxValue,
                       double minDefault, double maxDefault, void *y, int64_t n,
                       const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBinary(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(clipKernel<T>, g, stream, static_cast<const T *>(x),
                 static_cast<const T *>(minValue), static_cast<const T *>(maxValue), minDefault,
                 maxDefault, static_cast<T *>(y), n);
  });
}

} // namespace cuda
} // namespace mpc
