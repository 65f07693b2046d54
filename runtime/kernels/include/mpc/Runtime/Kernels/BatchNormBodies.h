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

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_BATCHNORMBODIES_H
