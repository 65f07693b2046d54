//===- UnaryOps.h - Element-wise unary op bodies ----------------*- C++ -*-===//
//
// One functor per ONNX unary op, with the op's attributes as fields (ONNX
// defaults). Bodies compute in the compute type T (float for float/fp16/bf16
// storage, double for double) and are MPC_HD, so the CPU loops and the CUDA
// kernels share them. Integer-capable ops (Relu, Neg, Abs, Sign, Clip,
// Shrink) also accept integer T with wrap-around instead of signed-overflow
// UB; BitwiseNot takes integer T only.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_UNARYOPS_H
#define MPC_RUNTIME_KERNELS_UNARYOPS_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <type_traits>

namespace mpc {
namespace kernels {

namespace detail {
/// -x, wrapping for signed integers (-INT_MIN == INT_MIN, as on the GPU).
template <typename T> MPC_HD constexpr T negate(T x) {
  if constexpr (std::is_integral<T>::value) {
    using U = std::make_unsigned_t<T>;
    return T(U(0) - U(x));
  } else {
    return -x;
  }
}

/// True when x < 0, without a tautological comparison for unsigned types.
template <typename T> MPC_HD constexpr bool isNegative(T x) {
  if constexpr (std::is_unsigned<T>::value)
    return false;
  else
    return x < T(0);
}

/// Clamps to [0, 1]; a NaN stays NaN.
template <typename T> MPC_HD constexpr T clampUnit(T v) {
  return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
}

/// log(1 + exp(x)) without overflow for large x.
template <typename T> MPC_HD T softplus(T x) {
  return x > T(0) ? x + math::log1p(math::exp(-x)) : math::log1p(math::exp(x));
}
} // namespace detail

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// max(0, x); NaN propagates.
struct Relu {
  template <typename T> MPC_HD T operator()(T x) const {
    return detail::isNegative(x) ? T(0) : x;
  }
};

/// x for x >= 0, alpha * x otherwise.
struct LeakyRelu {
  float alpha = 0.01f;
  template <typename T> MPC_HD T operator()(T x) const {
    return x < T(0) ? T(alpha) * x : x;
  }
};

/// x for x > alpha, 0 otherwise (NaN gives 0, as numpy's where does).
struct ThresholdedRelu {
  float alpha = 1.0f;
  template <typename T> MPC_HD T operator()(T x) const {
    return x > T(alpha) ? x : T(0);
  }
};

/// 1 / (1 + exp(-x)), evaluated without overflow on either side and
/// without branches: with e = exp(-|x|), 1 / (1 + e) or e / (1 + e).
struct Sigmoid {
  template <typename T> MPC_HD T operator()(T x) const {
    T e = math::exp(-math::abs(x));
    T r = T(1) / (T(1) + e);
    return x >= T(0) ? r : e * r;
  }
};

/// max(0, min(1, alpha * x + beta)).
struct HardSigmoid {
  float alpha = 0.2f;
  float beta = 0.5f;
  template <typename T> MPC_HD T operator()(T x) const {
    return detail::clampUnit(T(alpha) * x + T(beta));
  }
};

/// x * HardSigmoid(x) with alpha = 1/6, beta = 0.5.
struct HardSwish {
  template <typename T> MPC_HD T operator()(T x) const {
    return x * detail::clampUnit(x * (T(1) / T(6)) + T(0.5));
  }
};

/// x * sigmoid(alpha * x) (ONNX Swish; SiLU for alpha = 1).
struct Swish {
  float alpha = 1.0f;
  template <typename T> MPC_HD T operator()(T x) const {
    return x * Sigmoid()(T(alpha) * x);
  }
};

/// x + bias for x < -lambd, x - bias for x > lambd, 0 otherwise (NaN gives 0).
/// Integer T compares and shifts in double, as numpy's promotion to float
/// does, and converts back with Cast semantics (exact for |x| < 2^53).
struct Shrink {
  float lambd = 0.5f;
  float bias = 0.0f;
  template <typename T> MPC_HD T operator()(T x) const {
    if constexpr (std::is_integral<T>::value) {
      double v = double(x), l = double(lambd), b = double(bias);
      if (v < -l)
        return castValue<T>(v + b);
      return v > l ? castValue<T>(v - b) : T(0);
    } else {
      return x < -T(lambd) ? x + T(bias) : (x > T(lambd) ? x - T(bias) : T(0));
    }
  }
};

/// Hyperbolic tangent.
struct Tanh {
  template <typename T> MPC_HD T operator()(T x) const { return math::tanh(x); }
};

/// x for x >= 0, alpha * (exp(x) - 1) otherwise (expm1 keeps small x exact).
struct Elu {
  float alpha = 1.0f;
  template <typename T> MPC_HD T operator()(T x) const {
    return x >= T(0) ? x : T(alpha) * math::expm1(x);
  }
};

/// gamma * x for x > 0, gamma * alpha * (exp(x) - 1) otherwise.
struct Selu {
  float alpha = 1.67326319217681884765625f;
  float gamma = 1.05070102214813232421875f;
  template <typename T> MPC_HD T operator()(T x) const {
    return x > T(0) ? T(gamma) * x : T(gamma) * (T(alpha) * math::expm1(x));
  }
};

/// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), as the spec writes it:
/// where alpha * (...) is NaN (alpha = inf, or alpha = 0 at x > 0) the sum is
/// NaN too, as onnxruntime and onnx.reference compute it, not the limit x.
struct Celu {
  float alpha = 1.0f;
  template <typename T> MPC_HD T operator()(T x) const {
    T scaled = T(alpha) * math::expm1(x / T(alpha));
    T low = scaled < T(0) || math::isNaN(scaled) ? scaled : T(0);
    return (x > T(0) ? x : T(0)) + low;
  }
};

/// log(1 + exp(x)).
struct Softplus {
  template <typename T> MPC_HD T operator()(T x) const {
    return detail::softplus(x);
  }
};

/// x / (1 + |x|).
struct Softsign {
  template <typename T> MPC_HD T operator()(T x) const {
    return x / (T(1) + math::abs(x));
  }
};

/// x * tanh(softplus(x)).
struct Mish {
  template <typename T> MPC_HD T operator()(T x) const {
    return x * math::tanh(detail::softplus(x));
  }
};

/// Gelu with approximate = "none": 0.5 x (1 + erf(x / sqrt 2)).
struct GeluErf {
  template <typename T> MPC_HD T operator()(T x) const {
    return T(0.5) * x * (T(1) + math::erf(x * T(0.7071067811865476)));
  }
};

/// Gelu with approximate = "tanh":
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
struct GeluTanh {
  template <typename T> MPC_HD T operator()(T x) const {
    T inner = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + math::tanh(inner));
  }
};

/// ONNX Gelu; the approximate attribute picks one of the bodies above.
/// resolve() lets a loop make that choice once rather than per element (a
/// per-element branch would keep the loop from vectorizing).
struct Gelu {
  bool tanhApproximation = false;
  template <typename T> MPC_HD T operator()(T x) const {
    return tanhApproximation ? GeluTanh()(x) : GeluErf()(x);
  }
  /// Calls f with the attribute-free body this Gelu computes.
  template <typename F> void resolve(F &&f) const {
    if (tanhApproximation)
      f(GeluTanh());
    else
      f(GeluErf());
  }
};

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

/// e^x.
struct Exp {
  template <typename T> MPC_HD T operator()(T x) const { return math::exp(x); }
};

/// Natural logarithm.
struct Log {
  template <typename T> MPC_HD T operator()(T x) const { return math::log(x); }
};

/// Square root (NaN for negative x).
struct Sqrt {
  template <typename T> MPC_HD T operator()(T x) const { return math::sqrt(x); }
};

/// 1 / x.
struct Reciprocal {
  template <typename T> MPC_HD T operator()(T x) const { return T(1) / x; }
};

/// -x (wraps for integers).
struct Neg {
  template <typename T> MPC_HD T operator()(T x) const {
    return detail::negate(x);
  }
};

/// |x| (wraps for the most negative integer).
struct Abs {
  template <typename T> MPC_HD T operator()(T x) const {
    if constexpr (std::is_integral<T>::value)
      return detail::isNegative(x) ? detail::negate(x) : x;
    else
      return math::abs(x);
  }
};

/// Error function.
struct Erf {
  template <typename T> MPC_HD T operator()(T x) const { return math::erf(x); }
};

/// -1, 0 or 1; zeros keep their sign and NaN propagates.
struct Sign {
  template <typename T> MPC_HD T operator()(T x) const {
    if (x > T(0))
      return T(1);
    if (detail::isNegative(x))
      return detail::negate(T(1));
    return x;
  }
};

/// Smallest integer not less than x.
struct Ceil {
  template <typename T> MPC_HD T operator()(T x) const { return math::ceil(x); }
};

/// Largest integer not greater than x.
struct Floor {
  template <typename T> MPC_HD T operator()(T x) const {
    return math::floor(x);
  }
};

/// Nearest integer, halves to even (ONNX Round).
struct Round {
  template <typename T> MPC_HD T operator()(T x) const { return math::rint(x); }
};

/// Sine.
struct Sin {
  template <typename T> MPC_HD T operator()(T x) const { return math::sin(x); }
};

/// Cosine.
struct Cos {
  template <typename T> MPC_HD T operator()(T x) const { return math::cos(x); }
};

/// Tangent.
struct Tan {
  template <typename T> MPC_HD T operator()(T x) const { return math::tan(x); }
};

/// Arcsine (NaN outside [-1, 1]).
struct Asin {
  template <typename T> MPC_HD T operator()(T x) const { return math::asin(x); }
};

/// Arccosine (NaN outside [-1, 1]).
struct Acos {
  template <typename T> MPC_HD T operator()(T x) const { return math::acos(x); }
};

/// Arctangent.
struct Atan {
  template <typename T> MPC_HD T operator()(T x) const { return math::atan(x); }
};

/// Hyperbolic sine.
struct Sinh {
  template <typename T> MPC_HD T operator()(T x) const { return math::sinh(x); }
};

/// Hyperbolic cosine.
struct Cosh {
  template <typename T> MPC_HD T operator()(T x) const { return math::cosh(x); }
};

/// Inverse hyperbolic sine.
struct Asinh {
  template <typename T> MPC_HD T operator()(T x) const {
    return math::asinh(x);
  }
};

/// Inverse hyperbolic cosine (NaN below 1).
struct Acosh {
  template <typename T> MPC_HD T operator()(T x) const {
    return math::acosh(x);
  }
};

/// Inverse hyperbolic tangent (NaN outside [-1, 1], infinite at +-1).
struct Atanh {
  template <typename T> MPC_HD T operator()(T x) const {
    return math::atanh(x);
  }
};

/// ~x, for integer T only.
struct BitwiseNot {
  template <typename T> MPC_HD T operator()(T x) const {
    static_assert(std::is_integral<T>::value, "BitwiseNot takes integers");
    return T(~x);
  }
};

/// !x as a truth value (ONNX Not: bool in, bool out).
struct Not {
  template <typename T> MPC_HD bool operator()(T x) const { return !bool(x); }
};

/// min(max(x, minValue), maxValue), so maxValue wins when the bounds cross
/// (ONNX Clip); NaN propagates. The bounds are doubles so that every int32 and
/// float bound is exact; integer T saturates them first.
struct Clip {
  double minValue = -math::infinity<double>();
  double maxValue = math::infinity<double>();
  template <typename T> MPC_HD T operator()(T x) const {
    T lo = castValue<T>(minValue);
    T hi = castValue<T>(maxValue);
    T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};

//===----------------------------------------------------------------------===//
// Predicates (bool results)
//===----------------------------------------------------------------------===//

/// True for NaN.
struct IsNaN {
  template <typename T> MPC_HD bool operator()(T x) const {
    return math::isNaN(x);
  }
};

/// True for the infinities selected by the attributes.
struct IsInf {
  bool detectNegative = true;
  bool detectPositive = true;
  template <typename T> MPC_HD bool operator()(T x) const {
    return (detectPositive && x == math::infinity<T>()) ||
           (detectNegative && x == -math::infinity<T>());
  }
};

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_UNARYOPS_H
