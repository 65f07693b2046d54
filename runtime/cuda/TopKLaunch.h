//===- TopKLaunch.h - Host entry point of the TopK launcher -----*- C++ -*-===//
//
// What TopKOps.cpp (the C++ compiler) calls in TopKKernels.cu (nvcc): TopK
// along one axis of X viewed as [outer, dim, inner], one thread per slice
// selecting its k elements in output order by successive minima of
// kernels::topKBefore (TopKBodies.h, the CPU's sort order): O(k * dim) per
// slice. k is the output's size along the axis (the launch's output shape,
// so the K input is never read on the host). Always sorted, as on the CPU.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_TOPKLAUNCH_H
#define MPC_RUNTIME_CUDA_TOPKLAUNCH_H

#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// values (X's type) and indices (int64, may be null) of TopK; type f32,
/// f16, bf16, i32 or i64.
cudaError_t launchTopK(int32_t type, const void *x, void *values, int64_t *indices,
                       int64_t outer, int64_t dim, int64_t inner, int64_t k, bool largest,
                       const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_TOPKLAUNCH_H
