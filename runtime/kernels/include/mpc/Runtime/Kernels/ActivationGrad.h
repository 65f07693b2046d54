//===- ActivationGrad.h - Slopes of the element-wise gradient ops -*- C++ -*-===//
//
// The per-element math of ReluGrad, SigmoidGrad, TanhGrad, ErfGrad and
// GeluGrad (docs/training.md): dx = dy * f'(v), with v the forward input X
// (Relu, Erf, Gelu) or output Y (Sigmoid, Tanh). C is the compute type
// (float, or double for double tensors). exp, erf and tanh are the C
// library's (CUDA's device versions under nvcc), not the polynomials of
// MathFunctions.h, so the CPU gives the results it always gave.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_ACTIVATIONGRAD_H
#define MPC_RUNTIME_KERNELS_ACTIVATIONGRAD_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <math.h>

namespace mpc {
namespace kernels {

enum class ActivationGrad { Relu, Sigmoid, Tanh, Erf, Gelu, GeluTanh };

namespace detail {
MPC_HD inline float libmExp(float x) { return ::expf(x); }
MPC_HD inline double libmExp(double x) { return ::exp(x); }
MPC_HD inline float libmErf(float x) { return ::erff(x); }
MPC_HD inline double libmErf(double x) { return ::erf(x); }
MPC_HD inline float libmTanh(float x) { return ::tanhf(x); }
MPC_HD inline double libmTanh(double x) { return ::tanh(x); }
} // namespace detail

/// f'(v) of the activation `kind` (GeluTanh: Gelu with approximate=tanh).
template <typename C> MPC_HD C activationSlope(ActivationGrad kind, C v) {
  const C invSqrtPi2 = C(1.1283791670955126);   // 2 / sqrt(pi)
  const C invSqrt2 = C(0.70710678118654752);    // 1 / sqrt(2)
  const C invSqrt2Pi = C(0.39894228040143268);  // 1 / sqrt(2 pi)
  const C sqrt2OverPi = C(0.79788456080286536); // sqrt(2 / pi)
  switch (kind) {
  case ActivationGrad::Relu:
    return v > C(0) ? C(1) : C(0);
  case ActivationGrad::Sigmoid:
    return v * (C(1) - v);
  case ActivationGrad::Tanh:
    return C(1) - v * v;
  case ActivationGrad::Erf:
    return invSqrtPi2 * detail::libmExp(-v * v);
  case ActivationGrad::Gelu:
    return C(0.5) * (C(1) + detail::libmErf(v * invSqrt2)) +
           v * invSqrt2Pi * detail::libmExp(C(-0.5) * v * v);
  case ActivationGrad::GeluTanh: {
    C t = detail::libmTanh(sqrt2OverPi * (v + C(0.044715) * v * v * v));
    return C(0.5) * (C(1) + t) +
           C(0.5) * v * (C(1) - t * t) * sqrt2OverPi * (C(1) + C(3 * 0.044715) * v * v);
  }
  }
  return C(0);
}

/// dx of one element: dy * f'(v), or for Relu a select (0 * inf would be
/// NaN), rounded once to the storage type T.
template <typename T> MPC_HD T activationGradValue(ActivationGrad kind, T dy, T v) {
  using C = ComputeType<T>;
  if (kind == ActivationGrad::Relu)
    return load(v) > C(0) ? dy : store<T>(C(0));
  return store<T>(load(dy) * activationSlope<C>(kind, load(v)));
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_ACTIVATIONGRAD_H
