//===- NormBodies.h - Per-element math of softmax and normalization -*- C++ -*-===//
//
// The element formulas of Softmax/LogSoftmax, their gradients,
// LayerNormalization (and its gradient) and RMSNormalization, once for the
// CPU loops (runtime/cpu) and the CUDA launchers (runtime/cuda). S is the
// accumulation type (float for f32/f16/bf16 data, double for f64). How the
// row statistics (maximum, sums) are accumulated is each backend's own: the
// CPU sums with eight vector lanes, CUDA with a fixed block tree; what is
// done with the statistics is written here.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_NORMBODIES_H
#define MPC_RUNTIME_KERNELS_NORMBODIES_H

#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

namespace mpc {
namespace kernels {

/// The running maximum of a softmax row with `v` folded in: NaN once any
/// element is NaN (a NaN poisons its slice), else the larger.
template <typename S> MPC_HD inline S maxKeepNaN(S acc, S v) {
  return (v > acc || v != v) ? v : acc;
}

/// e^(x - max): the numerator of softmax and the term of its sum.
template <typename S> MPC_HD inline S softmaxExp(S x, S max) { return math::exp(x - max); }

/// LogSoftmax of x given the row's maximum and log of the sum of
/// softmaxExp: (x - max) - logSum, since x - max is exact near the maximum
/// where x - (max + logSum) would round it away.
template <typename S> MPC_HD inline S logSoftmaxValue(S x, S max, S logSum) {
  return (x - max) - logSum;
}

/// The per-element term of the softmax gradient's row sum: dy * y for
/// Softmax, dy for LogSoftmax.
template <typename S> MPC_HD inline S softmaxGradTerm(S dy, S y, bool log) {
  return log ? dy : dy * y;
}

/// dx of SoftmaxGrad (y * (dy - sum)) or LogSoftmaxGrad (dy - e^y * sum),
/// `sum` the row sum of softmaxGradTerm. e^y is the C library's (CUDA's
/// device version under nvcc).
template <typename S> MPC_HD inline S softmaxGradValue(S dy, S y, S sum, bool log) {
  return log ? dy - detail::libmExp(y) * sum : y * (dy - sum);
}

/// 1 / sqrt(variance + epsilon) of a normalized block.
template <typename S> MPC_HD inline S invStdDevOf(S variance, S epsilon) {
  return S(1) / math::sqrt(variance + epsilon);
}

/// The squared deviation summed for the variance.
template <typename S> MPC_HD inline S squaredDeviation(S x, S mean) {
  return (x - mean) * (x - mean);
}

/// LayerNormalization of x without its bias: (x - mean) * inv * scale.
template <typename S> MPC_HD inline S layerNormValue(S x, S mean, S inv, S scale) {
  return (x - mean) * inv * scale;
}

/// RMSNormalization of x: x * inv * scale.
template <typename S> MPC_HD inline S rmsNormValue(S x, S inv, S scale) {
  return x * inv * scale;
}

/// The normalized input of LayerNormalizationGrad: (x - mean) * inv.
template <typename S> MPC_HD inline S normalizedInput(S x, S mean, S inv) {
  return (x - mean) * inv;
}

/// dx of LayerNormalizationGrad from g = dy * scale, the normalized input
/// and the row means m1 = mean(g), m2 = mean(g * xhat).
template <typename S> MPC_HD inline S layerNormGradValue(S g, S xhat, S inv, S m1, S m2) {
  return inv * (g - m1 - xhat * m2);
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_NORMBODIES_H
