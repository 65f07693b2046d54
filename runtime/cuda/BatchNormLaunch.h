//===- BatchNormLaunch.h - Host entry point of BatchNormKernels.cu -*- C++ -*-===//
//
// BatchNormalization's launcher (BatchNormOps.cpp calls it): ONNX type
// numbers and device pointers; one kernel queued on `stream`, its launch
// error returned.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_BATCHNORMLAUNCH_H
#define MPC_RUNTIME_CUDA_BATCHNORMLAUNCH_H

#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// Inference BatchNormalization of x [batch, channels, spatial] of ONNX type
/// `type` with scale, bias, mean and var of `paramType` (the same, or f32
/// for 16-bit x). `g` covers every element.
cudaError_t launchBatchNorm(int32_t type, int32_t paramType, const void *x, const void *scale,
                            const void *bias, const void *mean, const void *var, void *y,
                            int64_t batch, int64_t channels, int64_t spatial, float epsilon,
                            const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_BATCHNORMLAUNCH_H
