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
#include "llvm/Support/Error.h"
#include <cuda_runtime_api.h>
#include <cstddef>
#include <cstdint>

namespace mpc {
class Node;
namespace cuda {

/// The device tables of a multi-tensor launch (MultiTensorUnscale here, the
/// MultiTensor*Step nodes in OptimizerOps.cpp): allocates `chunks` and
/// uploads `plan`'s chunk table to it, allocates `pointers` of
/// `pointerCount` entries; an error names the node. Defined in
/// UnscaleOps.cpp.
llvm::Error allocateChunkTables(const Node &n, const UnscalePlan &plan, UnscaleChunk *&chunks,
                                size_t pointerCount, void **&pointers);

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
