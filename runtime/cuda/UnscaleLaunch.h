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
#include <vector>

namespace mpc {
class Node;
namespace cuda {

/// The device chunk table of a multi-tensor launch (MultiTensorUnscale
/// here, the MultiTensor*Step nodes in OptimizerOps.cpp): allocates
/// `chunks` and uploads `plan`'s chunk table to it; an error names the
/// node. Defined in UnscaleOps.cpp.
llvm::Error allocateChunkTable(const Node &n, const UnscalePlan &plan, UnscaleChunk *&chunks);

/// Zeroes `found` and the `tensors` flags, then queues one launch per slice
/// (UnscalePlan.h) of min(`blocks`, its chunks) x `threads`, the slice's
/// pointers by value: for chunk c, with P its tensor's kUnscaleSlots
/// entries of `pointers` (gradient, fp32 output; a pair per tensor),
/// u = P[1] (float) and g = P[0] (of type c.type), u[i] = float(g[i]) *
/// *invScale; a block that meets an inf or NaN u stores NaN into
/// flags[c.tensor] and true into *found (every writer stores the same
/// value: no atomics).
cudaError_t launchMultiTensorUnscale(const UnscaleChunk *chunks,
                                     const std::vector<LaunchSlice> &slices,
                                     const std::vector<void *> &pointers, int32_t tensors,
                                     const float *invScale, bool *found, float *flags,
                                     unsigned blocks, unsigned threads, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_UNSCALELAUNCH_H
