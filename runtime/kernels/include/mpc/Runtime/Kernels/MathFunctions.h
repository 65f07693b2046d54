//===- MathFunctions.h - Host/device math overloads -------------*- C++ -*-===//
//
// float and double overloads of the math functions the element-wise bodies
// use, callable on the host and in CUDA device code; exp, tanh and erf have
// vectorizable float versions for the host. There are no integer overloads:
// a transcendental op instantiated on an integer type does not compile.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_MATHFUNCTIONS_H
#define MPC_RUNTIME_KERNELS_MATHFUNCTIONS_H

#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/HostDevice.h"

#include <math.h>
#include <stdint.h>

namespace mpc {
namespace math {

namespace detail {

/// |x| with the sign of s, by bit manipulation (vectorizes).
MPC_HD inline float copySign(float mag, float s) {
  return bitsToFloat((floatToBits(mag) & 0x7fffffffu) |
                     (floatToBits(s) & 0x80000000u));
}

// Branch-free float versions of exp, tanh and erf for host loops: libm calls
// stop the compiler from vectorizing a loop, and these vectorize (with
// -fno-trapping-math, which mpc_runtime_cpu is built with). Every
// condition is computed up front so the selects have no trapping operands.

/// e^x, at most 1 ulp from the exact result (Cephes expf polynomial with a
/// Cody-Waite reduction). The clamp bounds are chosen so that the scaling
/// itself overflows to inf (x > 88.72) or rounds to 0 (x < -103.97); a NaN
/// flows through the polynomial.
MPC_HD inline float expPoly(float x) {
  const float hi = 89.0f, lo = -104.0f;
  float xc = x < lo ? lo : x;
  xc = x > hi ? hi : xc;
  // n = round(x / ln 2) by the 1.5 * 2^23 trick (ties to even).
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n in two factors keeps both normal for n in [-150, 128]; the second
  // multiplication rounds once into the subnormals (or overflows).
  int32_t ni = int32_t(n != n ? 0.0f : n);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  return p * bitsToFloat(uint32_t(n1 + 127) << 23) *
         bitsToFloat(uint32_t(n2 + 127) << 23);
}

/// tanh, at most 1.5 ulp off: an odd polynomial below 0.625 (Cephes tanhf),
/// 1 - 2 / (e^2|x| + 1) above, saturated at |x| = 10 (tanh rounds to 1).
MPC_HD inline float tanhPoly(float x) {
  float ax = bitsToFloat(floatToBits(x) & 0x7fffffffu);
  bool small = ax < 0.625f;
  float s = x * x;
  float poly = -5.70498872745e-3f;
  poly = poly * s + 2.06390887954e-2f;
  poly = poly * s - 5.37397155531e-2f;
  poly = poly * s + 1.33314422036e-1f;
  poly = poly * s - 3.33332819422e-1f;
  poly = poly * s * x + x;
  float axc = ax > 10.0f ? 10.0f : ax;
  float e = expPoly(2.0f * axc);
  float big = 1.0f - 2.0f / (e + 1.0f);
  // The sign is applied last so that tanh(-0) is -0.
  return copySign(small ? poly : big, x);
}

/// erf, at most 2.5 ulp off: erf(x) / x as a polynomial in x^2 below 0.9,
/// 1 - exp(-x^2) P(t) with t = 1 / (1 + 0.3275911 |x|) above. Both are
/// least-squares fits (relative error 1.3e-9 and 1.5e-9 in exact arithmetic).
MPC_HD inline float erfPoly(float x) {
  float ax = bitsToFloat(floatToBits(x) & 0x7fffffffu);
  bool small = ax < 0.9f;
  float z = x * x;
  float poly = 8.4894312345193401e-05f;
  poly = poly * z - 8.1712190601431617e-4f;
  poly = poly * z + 5.2035738763772654e-3f;
  poly = poly * z - 2.6860435882090652e-2f;
  poly = poly * z + 1.1283714500892958e-1f;
  poly = poly * z - 3.7612634997227379e-1f;
  poly = x * (poly * z + 1.1283791667717409f);
  float t = 1.0f / (1.0f + 0.3275911f * ax);
  float q = 0.244665828508353f;
  q = q * t + 0.1312774634863566f;
  q = q * t - 0.03961466853454196f;
  q = q * t + 0.3483070061822847f;
  q = q * t + 0.12233118192374715f;
  q = q * t + 0.1932327273689349f;
  q = q * t;
  float big = copySign(1.0f - q * expPoly(-ax * ax), x);
  return small ? poly : big;
}

} // namespace detail

// On the device the CUDA math library is as accurate and faster than the
// polynomials; on the host the polynomials vectorize.
#if defined(__CUDA_ARCH__)
#define MPC_HOST_OR_DEVICE(HOST, DEVICE) DEVICE
#else
#define MPC_HOST_OR_DEVICE(HOST, DEVICE) HOST
#endif

/// e^x (float: detail::expPoly on the host).
MPC_HD inline float exp(float x) {
  return MPC_HOST_OR_DEVICE(detail::expPoly(x), ::expf(x));
}
MPC_HD inline double exp(double x) { return ::exp(x); }
/// tanh (float: detail::tanhPoly on the host).
MPC_HD inline float tanh(float x) {
  return MPC_HOST_OR_DEVICE(detail::tanhPoly(x), ::tanhf(x));
}
MPC_HD inline double tanh(double x) { return ::tanh(x); }
/// erf (float: detail::erfPoly on the host).
MPC_HD inline float erf(float x) {
  return MPC_HOST_OR_DEVICE(detail::erfPoly(x), ::erff(x));
}
MPC_HD inline double erf(double x) { return ::erf(x); }

#undef MPC_HOST_OR_DEVICE

#define MPC_MATH_UNARY(NAME, FLOAT_FN, DOUBLE_FN)                              \
  MPC_HD inline float NAME(float x) { return ::FLOAT_FN(x); }                  \
  MPC_HD inline double NAME(double x) { return ::DOUBLE_FN(x); }

MPC_MATH_UNARY(expm1, expm1f, expm1)
MPC_MATH_UNARY(log, logf, log)
MPC_MATH_UNARY(log1p, log1pf, log1p)
MPC_MATH_UNARY(sqrt, sqrtf, sqrt)
MPC_MATH_UNARY(sin, sinf, sin)
MPC_MATH_UNARY(cos, cosf, cos)
MPC_MATH_UNARY(tan, tanf, tan)
MPC_MATH_UNARY(asin, asinf, asin)
MPC_MATH_UNARY(acos, acosf, acos)
MPC_MATH_UNARY(atan, atanf, atan)
MPC_MATH_UNARY(sinh, sinhf, sinh)
MPC_MATH_UNARY(cosh, coshf, cosh)
MPC_MATH_UNARY(asinh, asinhf, asinh)
MPC_MATH_UNARY(acosh, acoshf, acosh)
MPC_MATH_UNARY(atanh, atanhf, atanh)
MPC_MATH_UNARY(abs, fabsf, fabs)
MPC_MATH_UNARY(floor, floorf, floor)
MPC_MATH_UNARY(ceil, ceilf, ceil)
/// Round to nearest integer, ties to even (the default rounding mode).
MPC_MATH_UNARY(rint, rintf, rint)

#undef MPC_MATH_UNARY

MPC_HD inline float pow(float x, float y) { return ::powf(x, y); }
MPC_HD inline double pow(double x, double y) { return ::pow(x, y); }
/// Remainder with the sign of the dividend (C fmod).
MPC_HD inline float fmod(float x, float y) { return ::fmodf(x, y); }
MPC_HD inline double fmod(double x, double y) { return ::fmod(x, y); }

/// Positive infinity of float type T.
template <typename T> MPC_HD constexpr T infinity() {
  return T(__builtin_huge_val());
}

/// True for NaNs (mpc is never built with -ffast-math, which would break it).
template <typename T> MPC_HD constexpr bool isNaN(T x) { return x != x; }

/// True for +inf and -inf.
template <typename T> MPC_HD constexpr bool isInf(T x) {
  return x == infinity<T>() || x == -infinity<T>();
}

} // namespace math
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_MATHFUNCTIONS_H
