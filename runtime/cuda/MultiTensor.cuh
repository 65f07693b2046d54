//===- MultiTensor.cuh - Launches over the slices of a chunk table -*- CUDA -*-===//
//
// Private to the .cu files of runtime/cuda: the multi-tensor kernels
// (MultiTensorUnscale, MultiTensor*Step) take the chunks of one slice
// (UnscalePlan.h), the slice's first tensor and its tensors' pointers by
// value; queueSlices makes that launch for every slice, in order.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_MULTITENSOR_CUH
#define MPC_RUNTIME_CUDA_MULTITENSOR_CUH

#include "GridStride.cuh"
#include "mpc/Runtime/Cuda/UnscalePlan.h"

#include <algorithm>
#include <vector>

namespace mpc {
namespace cuda {

/// Queues, per slice, kernel<<<min(blocks, its chunks), threads>>>(chunks +
/// its first chunk, its chunk count, its first tensor, its LaunchPointers
/// (`perTensor` entries of `pointers` per tensor), args...); the first
/// launch error.
template <typename... Params, typename... Args>
cudaError_t queueSlices(void (*kernel)(Params...), const UnscaleChunk *chunks,
                        const std::vector<LaunchSlice> &slices,
                        const std::vector<void *> &pointers, int32_t perTensor, unsigned blocks,
                        unsigned threads, cudaStream_t stream, Args... args) {
  for (const LaunchSlice &slice : slices) {
    LaunchGeometry g;
    g.blocks = std::min(blocks, unsigned(slice.chunks));
    g.threads = threads;
    const LaunchPointers p = launchPointers(pointers, slice, perTensor);
    if (cudaError_t e = queue(kernel, g, stream, chunks + slice.firstChunk, slice.chunks,
                              slice.firstTensor, p, args...))
      return e;
  }
  return cudaSuccess;
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_MULTITENSOR_CUH
