//===- BatchNormBodies.h - Inference batch normalization --------*- C++ -*-===//
//
// BatchNormalization with running statistics, written once for the CPU
// backend (runtime/cpu/Normalization.cpp) and the CUDA launcher
// (runtime/cuda/BatchNormKernels.cu): per channel the factor a = scale /
// sqrt(var + epsilon), then y = (x - mean) a + bias, in T's accumulation type
// (subtracting the mean first avoids the cancellation of the folded
// x a + (bias - mean a) when |mean| is large against the spread).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_BATCHNORMBODIES_H
#define MPC_RUNTIME_KERNELS_BATCHNORMBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

namespace mpc {
namespace kernels {

/// One channel's running statistics and affine parameters as
/// (x - mean) * factor + bias.
template <typename S> struct BatchNormChannel {
  S mean, factor, bias;
};

/// The channel's terms from its scale, bias, running mean and variance.
template <typename S>
MPC_HD inline BatchNormChannel<S> batchNormChannel(S scale, S bias, S mean, S var,
                                                   float epsilon) {
  return BatchNormChannel<S>{mean, scale / math::sqrt(var + S(epsilon)), bias};
}

/// One normalized element.
template <typename S> MPC_HD inline S batchNormApply(const BatchNormChannel<S> &c, S x) {
  return (x - c.mean) * c.factor + c.bias;
}

// Training mode (the CPU's TrainingOps.cpp and CUDA's BatchNormTrainKernels.cu):
// the batch statistics of a channel (its mean and biased variance, summed
// in double: a channel has batch * spatial terms) replace the running ones
// in batchNormChannel, and the running statistics are updated below.

/// A running statistic updated with the batch's: running * momentum +
/// batch * (1 - momentum).
template <typename S> MPC_HD inline S batchNormRunning(S running, S batch, float momentum) {
  S mom = S(momentum);
  return running * mom + batch * (S(1) - mom);
}

/// The term of BatchNormalizationGrad's dScale sum: dy * (x - mean) * inv.
template <typename S> MPC_HD inline S batchNormGradXTerm(S dy, S x, S mean, S inv) {
  return dy * (x - mean) * inv;
}

/// dX of BatchNormalizationGrad: k * (dy - m1 - xhat * m2), with k = scale *
/// inv, xhat = (x - mean) * inv, m1 and m2 the channel means of dy and of
/// batchNormGradXTerm.
template <typename S> MPC_HD inline S batchNormGradValue(S k, S dy, S xhat, S m1, S m2) {
  return k * (dy - m1 - xhat * m2);
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_BATCHNORMBODIES_H
