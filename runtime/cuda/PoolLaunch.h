//===- PoolLaunch.h - Host entry points of PoolKernels.cu -------*- C++ -*-===//
//
// The pooling family's launchers (PoolOps.cpp calls them): ONNX type numbers,
// the shared window geometry (Kernels/WindowBodies.h) and device pointers;
// each queues one kernel on `stream` and returns the launch's error. No
// allocation, synchronization or host read of device memory.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_POOLLAUNCH_H
#define MPC_RUNTIME_CUDA_POOLLAUNCH_H

#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/WindowBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// MaxPool (`max`, with Indices into `indices` when not null) or
/// AveragePool over `planes` planes of x: one thread per output element,
/// the window body windowMax / windowAverage. `g` covers planes x outputs.
cudaError_t launchWindowPool(int32_t type, bool max, const kernels::WindowShape &w,
                             bool countIncludePad, bool columnMajorIndices, const void *x,
                             void *y, int64_t *indices, int64_t planes, const LaunchGeometry &g,
                             cudaStream_t stream);

/// LpPool of order p over `planes` planes of x: one thread per output
/// element, the window body windowLpPool. `g` covers planes x outputs.
cudaError_t launchWindowLpPool(int32_t type, const kernels::WindowShape &w, float p,
                               const void *x, void *y, int64_t planes, const LaunchGeometry &g,
                               cudaStream_t stream);

/// MaxPoolGrad (`max`: dy, x) or AveragePoolGrad (dy) into dx: one thread
/// per input element gathering what the CPU scatters (maxPoolGradAt /
/// averagePoolGradAt, the same order, so the same sums). `g` covers planes x
/// inputs.
cudaError_t launchWindowPoolGrad(int32_t type, bool max, const kernels::WindowShape &w,
                                 bool countIncludePad, const void *dy, const void *x, void *dx,
                                 int64_t planes, const LaunchGeometry &g, cudaStream_t stream);

/// GlobalMaxPool (`max`; NaN when any element is NaN) or GlobalAveragePool:
/// one block per plane of planeSize elements, a fixed reduction tree in fp32.
cudaError_t launchGlobalPool(int32_t type, bool max, const void *x, void *y, int64_t planes,
                             int64_t planeSize, cudaStream_t stream);

/// GlobalLpPool of order p: as launchGlobalPool, summing lpTerm and taking
/// lpRoot of the sum (WindowBodies.h).
cudaError_t launchGlobalLpPool(int32_t type, float p, const void *x, void *y, int64_t planes,
                               int64_t planeSize, cudaStream_t stream);

/// GlobalAveragePoolGrad: dx[p, i] = dy[p] / planeSize. `g` covers
/// planes x planeSize.
cudaError_t launchGlobalAveragePoolGrad(int32_t type, const void *dy, void *dx, int64_t planes,
                                        int64_t planeSize, const LaunchGeometry &g,
                                        cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_POOLLAUNCH_H
