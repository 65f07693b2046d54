//===- NormLaunch.h - Host entry points of the softmax/norm launchers -*- C++ -*-===//
//
// What NormOps.cpp (the C++ compiler) calls in SoftmaxKernels.cu and
// NormKernels.cu (nvcc): plain functions over ONNX type numbers, device
// pointers and a SlicePlan, each queueing its kernels on `stream` and
// returning the launch's cudaError_t (cudaErrorInvalidValue for a type the
// launchers were not instantiated for). No launcher allocates, synchronizes
// or reads device memory on the host. Sums and statistics are kept in fp32;
// every output element is rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_NORMLAUNCH_H
#define MPC_RUNTIME_CUDA_NORMLAUNCH_H

#include "mpc/Runtime/Cuda/SlicePlan.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// Softmax (or LogSoftmax) of x of ONNX type `type` (f32, f16, bf16) along
/// the plan's axis into y (which may be x).
cudaError_t launchSoftmax(int32_t type, bool log, const void *x, void *y, const SlicePlan &p,
                          cudaStream_t stream);

/// SoftmaxGrad (LogSoftmaxGrad with `log`): dx from dy and the forward
/// output y along the plan's axis.
cudaError_t launchSoftmaxGrad(int32_t type, bool log, const void *dy, const void *y, void *dx,
                              const SlicePlan &p, cudaStream_t stream);

/// LayerNormalization (or RMSNormalization with `rms`) of rows of x: the
/// plan's axisDim elements per row (inner == 1).
struct NormArgs {
  int32_t type = 0;      ///< X and Y
  int32_t paramType = 0; ///< scale and bias: `type` or f32
  bool rms = false;
  float epsilon = 1e-5f;
  const void *x = nullptr, *scale = nullptr;
  const void *bias = nullptr; ///< optional
  void *y = nullptr;
  /// LayerNormalization's optional Mean and InvStdDev, one per row, f32 or
  /// f64 (statsF64).
  void *mean = nullptr, *invStdDev = nullptr;
  bool meanF64 = false, invStdDevF64 = false;
};
cudaError_t launchNorm(const NormArgs &a, const SlicePlan &rows, cudaStream_t stream);

/// LayerNormalizationGrad over rows of `rows.axisDim` elements: dx per row
/// (one block per row), dScale and dBias per column, summed over the rows
/// in order (one thread per column). Any output may be null.
struct NormGradArgs {
  int32_t type = 0;      ///< dY, X and dX
  int32_t paramType = 0; ///< scale, dScale and dBias: `type` or f32
  const void *dy = nullptr, *x = nullptr, *scale = nullptr;
  const float *mean = nullptr, *invStdDev = nullptr;
  void *dx = nullptr, *dScale = nullptr, *dBias = nullptr;
};
cudaError_t launchNormGrad(const NormGradArgs &a, const SlicePlan &rows,
                           const SlicePlan &columns, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_NORMLAUNCH_H
