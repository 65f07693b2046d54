//===- UnscaleLaunch.h - Host entry point of the unscale launcher -*- C++ -*-===//
//
// What UnscaleOps.cpp (the C++ compiler) calls in UnscaleKernels.cu (nvcc):
// ai.mpc.training MultiTensorUnscale as one kernel over the chunk table of
// UnscalePlan.h, through the MPC_HD kernels::unscaleElement the CPU's loop
// applies.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_UNSCALELAUNCH_H
#define MPC_RUNTIME_CUDA_UNSCALELAUNCH_H

#include "mpc/Runtime/Cuda/UnscalePlan.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// Zeroes `found` and the `tensors` flags, then queues one launch of
/// `blocks` x `threads` over the `numChunks` chunks of the device table
/// `chunks`: for chunk c, u = pointers[tensors + c.tensor] (float) and
/// g = pointers[c.tensor] (of type c.type), u[i] = float(g[i]) * *invScale;
/// a block that meets an inf or NaN u stores NaN into flags[c.tensor] and
/// true into *found (every writer stores the same value: no atomics).
cudaError_t launchMultiTensorUnscale(const UnscaleChunk *chunks, int32_t numChunks,
                                     void *const *pointers, int32_t tensors,
                                     const float *invScale, bool *found, float *flags,
                                     unsigned blocks, unsigned threads, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_UNSCALELAUNCH_H
