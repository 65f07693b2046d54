//===- GradLaunch.h - Host entry point of the activation-gradient launcher -*- C++ -*-===//
//
// What GradOps.cpp (the C++ compiler) calls in GradKernels.cu (nvcc): the
// element-wise gradient ops ReluGrad, SigmoidGrad, TanhGrad, ErfGrad and
// GeluGrad as one grid-stride kernel over two same-shape inputs, with the
// MPC_HD body the CPU loop calls (activationGradValue, ActivationGrad.h).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_GRADLAUNCH_H
#define MPC_RUNTIME_CUDA_GRADLAUNCH_H

#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// dx[i] = activationGradValue(kind, dy[i], v[i]) for n elements of ONNX
/// type `type` (f32, f16, bf16; cudaErrorInvalidValue for another).
cudaError_t launchActivationGrad(kernels::ActivationGrad kind, int32_t type, const void *dy,
                                 const void *v, void *dx, int64_t n, const LaunchGeometry &g,
                                 cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_GRADLAUNCH_H
