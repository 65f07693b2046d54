//===- ConvLaunch.h - Host entry points of ConvKernels.cu -------*- C++ -*-===//
//
// The convolution family's kernels that are not cuDNN calls (ConvOps.cpp
// calls them). Like CudaLaunch.h: ONNX type numbers and device pointers, one
// kernel queued on `stream`, its launch error returned.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CONVLAUNCH_H
#define MPC_RUNTIME_CUDA_CONVLAUNCH_H

#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// db[c] = sum of dy[n, c, i] over n < batch and i < inner, for the
/// `channels` channels of dy [batch, channels, inner], summed in fp32 and
/// rounded once; the same on every run.
cudaError_t launchChannelSum(int32_t type, const void *dy, void *db, int64_t batch,
                             int64_t channels, int64_t inner, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CONVLAUNCH_H
