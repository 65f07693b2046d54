//===- UnscaleBody.h - Per-element math of MultiTensorUnscale ----*- C++ -*-===//
//
// ai.mpc.training MultiTensorUnscale (docs/training.md, "Loss scaling"), once
// for the CPU loop (runtime/cpu/TrainingKernels.cpp) and the CUDA launcher
// (runtime/cuda/UnscaleKernels.cu): the same float operations as the
// primitive nodes the rewrite emits without --fused-unscale, so the results
// are bit-identical: Cast(g, to=float) is castValue<float> (exact for f16 and
// bf16), Mul(g32, inv_scale) is one float multiply, and ReduceSum(Mul(u, 0))
// is NaN exactly when u is not finite.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_UNSCALEBODY_H
#define MPC_RUNTIME_KERNELS_UNSCALEBODY_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace kernels {

/// u = float(g) * invScale; returns true when u is an inf or NaN (the
/// primitive check tests the unscaled value, so a finite g that overflows
/// when the scale is below 1 counts too). u - u is 0 for every finite u and
/// NaN for an inf or NaN.
template <typename T> MPC_HD inline bool unscaleElement(T g, float invScale, float &u) {
  u = castValue<float>(g) * invScale;
  return !(u - u == 0.0f);
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_UNSCALEBODY_H
