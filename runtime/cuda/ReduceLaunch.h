//===- ReduceLaunch.h - Host entry point of the reduction launcher -*- C++ -*-===//
//
// What ReduceOps.cpp (the C++ compiler) calls in ReduceKernels.cu (nvcc):
// one reduction of x (ONNX type f32, f16 or bf16) over the slices of a
// SlicePlan into y (the same type, one element per slice), accumulated in
// fp32 with the steps of ReduceBodies.h and rounded once. Queues its kernel
// on `stream`; no allocation, no synchronization, no host read of device
// memory. cudaErrorInvalidValue for a type it was not instantiated for.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_REDUCELAUNCH_H
#define MPC_RUNTIME_CUDA_REDUCELAUNCH_H

#include "mpc/Runtime/Cuda/SlicePlan.h"
#include "mpc/Runtime/Kernels/ReduceBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

cudaError_t launchReduce(kernels::ReduceKind kind, int32_t type, const void *x, void *y,
                         const SlicePlan &p, cudaStream_t stream);

/// Whether launchSplitReduce takes `kind` (not LogSumExp, which is shifted
/// by each slice's maximum first).
bool splitReducible(kernels::ReduceKind kind);

/// The reduction over the middle axis of p.shape in planColumnSplit's two
/// passes (SlicePlan.h): partials of p.workspaceFloats() floats in
/// `workspace`, then one thread per result. y is x's type, or float for a
/// Sum with `toF32` (f16/bf16 x). cudaErrorInvalidValue for what it was not
/// instantiated for.
cudaError_t launchSplitReduce(kernels::ReduceKind kind, int32_t type, const void *x, void *y,
                              void *workspace, const ColumnSplit &p, unsigned smCount,
                              bool toF32, cudaStream_t stream);

/// The sum of x (f16 or bf16) over the slices into float y, accumulated as
/// launchReduce's Sum and stored without rounding to x's type: BiasGrad with
/// `to` = float32, the bits of a Sum over x widened first.
cudaError_t launchSumToF32(int32_t type, const void *x, float *y, const SlicePlan &p,
                           cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_REDUCELAUNCH_H
