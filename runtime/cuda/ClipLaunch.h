//===- ClipLaunch.h - Host entry point of the Clip launcher -----*- C++ -*-===//
//
// What ClipOps.cpp (the C++ compiler) calls in ClipKernels.cu (nvcc): Clip
// with its bounds read on the device from the optional inputs min and max
// (one element each, of X's type), else the attribute bounds (Clip-6) or
// the infinities, through the MPC_HD kernels::Clip functor the CPU's
// runClip applies.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CLIPLAUNCH_H
#define MPC_RUNTIME_CUDA_CLIPLAUNCH_H

#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// y[i] = Clip{lo, hi}(x[i]) for n elements of ONNX type `type` (f32, f16,
/// bf16, i32, i64; cudaErrorInvalidValue for another); lo = *minValue when
/// minValue is non-null, else minDefault, and the same for hi.
cudaError_t launchClip(int32_t type, const void *x, const void *minValue, const void *maxValue,
                       double minDefault, double maxDefault, void *y, int64_t n,
                       const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CLIPLAUNCH_H
