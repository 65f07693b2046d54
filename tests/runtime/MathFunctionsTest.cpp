//===- MathFunctionsTest.cpp - Accuracy of the vectorizable math ----------===//
//
// The float exp, tanh and erf the host loops use (MathFunctions.h) against
// the double-precision libm, in units in the last place, over a sweep of
// about a million float bit patterns each, plus their special values; the
// same for the libm-backed trigonometric and hyperbolic overloads.
// Host-side only: these are scalar functions, not nodes (the element-wise
// nodes that use them run on every device in ElementwiseTest).
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Kernels/MathFunctions.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

using namespace mpc;

namespace {

const float kInf = std::numeric_limits<float>::infinity();

/// Error of got in units of the float spacing at the exact result (the
/// spacing of the smallest subnormal below 2^-126).
double ulpError(float got, double exact) {
  if (std::isnan(exact))
    return std::isnan(got) ? 0 : 1e30;
  float rounded = float(exact);
  if (std::isinf(rounded) || std::isinf(got))
    return got == rounded ? 0 : 1e30;
  int e;
  std::frexp(exact, &e);
  double ulp = std::ldexp(1.0, std::max(e, -125) - 24);
  return std::fabs(double(got) - exact) / ulp;
}

/// Largest ulp error over floats in [lo, hi]: every 1000th bit pattern of
/// each sign, which samples every binade evenly.
double maxError(const std::function<float(float)> &f,
                const std::function<double(double)> &ref, float lo, float hi,
                float &worstAt) {
  double worst = 0;
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 1000) {
    float x;
    std::memcpy(&x, &bits, 4);
    for (float v : {x, -x}) {
      if (v < lo || v > hi)
        continue;
      double err = ulpError(f(v), ref(double(v)));
      if (err > worst) {
        worst = err;
        worstAt = v;
      }
    }
  }
  return worst;
}

TEST(MathFunctionsTest, ExpWithinOneUlp) {
  float at = 0;
  double err =
      maxError([](float x) { return math::exp(x); },
               [](double x) { return std::exp(x); }, -110.0f, 100.0f, at);
  EXPECT_LE(err, 1.0) << "at " << at;
  EXPECT_EQ(math::exp(0.0f), 1.0f);
  EXPECT_EQ(math::exp(-kInf), 0.0f);
  EXPECT_EQ(math::exp(kInf), kInf);
  EXPECT_EQ(math::exp(89.0f), kInf);
  EXPECT_EQ(math::exp(-104.0f), 0.0f);
  EXPECT_GT(math::exp(-100.0f), 0.0f); // Subnormal result.
  EXPECT_TRUE(std::isnan(math::exp(std::nanf(""))));
}

TEST(MathFunctionsTest, TanhWithinTwoUlp) {
  float at = 0;
  double err =
      maxError([](float x) { return math::tanh(x); },
               [](double x) { return std::tanh(x); }, -30.0f, 30.0f, at);
  EXPECT_LE(err, 2.0) << "at " << at;
  EXPECT_EQ(math::tanh(kInf), 1.0f);
  EXPECT_EQ(math::tanh(-kInf), -1.0f);
  EXPECT_EQ(math::tanh(20.0f), 1.0f);
  EXPECT_TRUE(std::signbit(math::tanh(-0.0f)));
  EXPECT_TRUE(std::isnan(math::tanh(std::nanf(""))));
}

TEST(MathFunctionsTest, ErfWithinThreeUlp) {
  float at = 0;
  double err =
      maxError([](float x) { return math::erf(x); },
               [](double x) { return std::erf(x); }, -10.0f, 10.0f, at);
  EXPECT_LE(err, 3.0) << "at " << at;
  EXPECT_EQ(math::erf(kInf), 1.0f);
  EXPECT_EQ(math::erf(-kInf), -1.0f);
  EXPECT_TRUE(std::signbit(math::erf(-0.0f)));
  EXPECT_TRUE(std::isnan(math::erf(std::nanf(""))));
}

TEST(MathFunctionsTest, DoubleOverloadsAreLibm) {
  EXPECT_EQ(math::exp(1.5), std::exp(1.5));
  EXPECT_EQ(math::tanh(0.3), std::tanh(0.3));
  EXPECT_EQ(math::erf(-0.7), std::erf(-0.7));
  EXPECT_EQ(math::tan(0.3), std::tan(0.3));
  EXPECT_EQ(math::asinh(-2.5), std::asinh(-2.5));
  EXPECT_EQ(math::atanh(0.5), std::atanh(0.5));
}

/// The trigonometric and hyperbolic float overloads (libm's float
/// functions) over their domains against the double-precision result: within
/// one ulp for the trigonometric ones, two for the hyperbolic ones (glibc's
/// float sinh, cosh and their inverses reach 1.75 ulp); NaN outside.
TEST(MathFunctionsTest, TrigonometricAndHyperbolicWithinLibmBounds) {
  struct Case {
    const char *name;
    float (*f)(float);
    double (*ref)(double);
    float lo, hi;
    double maxUlp;
  };
  const Case cases[] = {
      {"tan", math::tan, ::tan, -1e4f, 1e4f, 1.0},
      {"asin", math::asin, ::asin, -1.0f, 1.0f, 1.0},
      {"acos", math::acos, ::acos, -1.0f, 1.0f, 1.0},
      {"atan", math::atan, ::atan, -1e30f, 1e30f, 1.0},
      {"sinh", math::sinh, ::sinh, -100.0f, 100.0f, 2.0},
      {"cosh", math::cosh, ::cosh, -100.0f, 100.0f, 2.0},
      {"asinh", math::asinh, ::asinh, -1e30f, 1e30f, 2.0},
      {"acosh", math::acosh, ::acosh, 1.0f, 1e30f, 2.0},
      {"atanh", math::atanh, ::atanh, -1.0f, 1.0f, 2.0},
  };
  for (const Case &c : cases) {
    float at = 0;
    double err = maxError(c.f, c.ref, c.lo, c.hi, at);
    EXPECT_LE(err, c.maxUlp) << c.name << " at " << at;
  }
  EXPECT_TRUE(std::isnan(math::asin(1.5f)));
  EXPECT_TRUE(std::isnan(math::acos(-1.5f)));
  EXPECT_TRUE(std::isnan(math::acosh(0.5f)));
  EXPECT_TRUE(std::isnan(math::atanh(2.0f)));
  EXPECT_EQ(math::atanh(1.0f), kInf);
  EXPECT_EQ(math::atanh(-1.0f), -kInf);
  EXPECT_EQ(math::sinh(100.0f), kInf);
  EXPECT_EQ(math::cosh(-100.0f), kInf);
  EXPECT_TRUE(std::signbit(math::tan(-0.0f)));
  EXPECT_TRUE(std::signbit(math::asinh(-0.0f)));
}

} // namespace
