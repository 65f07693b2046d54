//===- StatNormLaunch.h - Instance, group and Lp normalization launchers -*- C++ -*-===//
//
// What StatNormOps.cpp (the C++ compiler) calls in StatNormKernels.cu
// (nvcc): InstanceNormalization and GroupNormalization as runs of `len`
// contiguous elements, one block per run (mean and squared deviations in
// double, the fixed block tree of SliceKernels.cuh); LpNormalization as the
// [outer, dim, inner] slices of SlicePlan.h (a block per contiguous row, a
// thread per strided slice), its norm in double. The formulas are
// StatNormBodies.h's, which the CPU's NormKernels.cpp calls. Data f32, f16,
// bf16; instance/group parameters of the data's type or f32.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_STATNORMLAUNCH_H
#define MPC_RUNTIME_CUDA_STATNORMLAUNCH_H

#include "mpc/Runtime/Cuda/SlicePlan.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// `runs` runs of `len` elements (StatNormBodies.h's runChannel picks the
/// parameters of an element); `threads` per run's block.
struct RunNormGeometry {
  int64_t runs = 0, len = 1, chanLen = 1, channels = 1;
  bool perRunParams = true;
  unsigned threads = 32;
};

/// InstanceNormalization / GroupNormalization.
cudaError_t launchRunNorm(int32_t type, int32_t paramType, const void *x, const void *scale,
                          const void *bias, void *y, double epsilon, const RunNormGeometry &g,
                          cudaStream_t stream);

/// LpNormalization along the plan's axis (p = 1 or 2).
cudaError_t launchLpNorm(int32_t type, const void *x, void *y, int64_t p, const SlicePlan &plan,
                         cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_STATNORMLAUNCH_H
