//===- TestUtil.h - Shared helpers for the kernel tests ---------*- C++ -*-===//
//
// The per-dtype tolerance table (the one table for every backend: the op
// tester's comparisons, OpTester.h, use it too; docs/testing.md section 6
// states it), random inputs rounded to the storage type,
// and the comparison of a kernel's output with a double-precision reference
// computed by naive loops in each test. Nothing here uses kernel code except
// the scalar conversions of Float16.h, which Float16Test checks exhaustively.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TESTS_OPTEST_TESTUTIL_H
#define MPC_TESTS_OPTEST_TESTUTIL_H

#include "mpc/Runtime/Float16.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace mpc {
namespace test {

/// Tolerances of one storage type. A value passes when
///   |got - ref| <= rtol * |ref| + atol + accum * scale
/// where scale is the sum of the magnitudes of the terms a kernel accumulated
/// (0 for element-wise ops). rtol is one unit in the last place of the
/// storage type (results are rounded once, so at most half an ulp off, plus
/// fp32 evaluation error); accum bounds fp32 accumulation error, which is the
/// same for every storage type because all of them accumulate in fp32.
struct Tolerance {
  double rtol;
  double atol;
  double accum;
};

template <typename T> struct TypeTraits;
template <> struct TypeTraits<float> {
  static constexpr const char *kName = "f32";
  static constexpr Tolerance kTol = {1e-5, 1e-6, 2e-6};
};
template <> struct TypeTraits<Half> {
  static constexpr const char *kName = "f16";
  static constexpr Tolerance kTol = {9.77e-4, 1e-6, 2e-6}; // 2^-10
};
template <> struct TypeTraits<BFloat16> {
  static constexpr const char *kName = "bf16";
  static constexpr Tolerance kTol = {7.82e-3, 1e-6, 2e-6}; // 2^-7
};
template <> struct TypeTraits<double> {
  static constexpr const char *kName = "f64";
  static constexpr Tolerance kTol = {1e-12, 1e-14, 1e-14};
};

/// Value of a stored element as a double.
inline double toDouble(float v) { return v; }
inline double toDouble(double v) { return v; }
inline double toDouble(Half v) { return static_cast<float>(v); }
inline double toDouble(BFloat16 v) { return static_cast<float>(v); }

/// A double rounded to storage type T (via float: test inputs are chosen
/// exactly representable in float, so there is no double rounding).
template <typename T> T fromDouble(double d) {
  if constexpr (std::is_same<T, double>::value)
    return d;
  else
    return T(static_cast<float>(d));
}

/// n uniform values in [lo, hi) rounded to T.
template <typename T>
std::vector<T> randomVector(size_t n, std::mt19937 &rng, double lo = -1.0,
                            double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto &x : v)
    x = fromDouble<T>(dist(rng));
  return v;
}

/// The stored values as doubles.
template <typename T> std::vector<double> toDoubles(const std::vector<T> &v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = toDouble(v[i]);
  return out;
}

/// Whether one value is within tolerance; NaN must meet NaN and infinities
/// must match exactly.
inline bool isClose(double got, double ref, const Tolerance &tol,
                    double scale = 0.0) {
  if (std::isnan(ref) || std::isnan(got))
    return std::isnan(ref) && std::isnan(got);
  if (std::isinf(ref) || std::isinf(got))
    return got == ref;
  return std::fabs(got - ref) <=
         tol.rtol * std::fabs(ref) + tol.atol + tol.accum * scale;
}

/// Compares a kernel output with its reference and reports the first
/// mismatches with their indices. scales may be empty (all 0).
template <typename T>
::testing::AssertionResult allClose(const std::vector<T> &got,
                                    const std::vector<double> &ref,
                                    const std::vector<double> &scales = {},
                                    Tolerance tol = TypeTraits<T>::kTol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != reference size " << ref.size();
  std::ostringstream os;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = toDouble(got[i]);
    double s = scales.empty() ? 0.0 : scales[i];
    if (isClose(g, ref[i], tol, s))
      continue;
    if (++bad <= 5)
      os << "\n  [" << i << "] got " << g << ", expected " << ref[i]
         << " (diff " << std::fabs(g - ref[i]) << ", scale " << s << ")";
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << TypeTraits<T>::kName << ": " << bad << " of " << got.size()
         << " elements out of tolerance" << os.str();
}

/// v rounded to nearest even in a binary format with p significand bits,
/// minimum normal exponent emin and maximum exponent emax; overflow gives
/// infinity. long double holds every float, double and int64 exactly, so
/// this is an exact software oracle for every float conversion.
inline long double roundToFormat(long double v, int p, int emin, int emax) {
  if (std::isnan(v) || std::isinf(v) || v == 0)
    return v;
  long double a = std::fabs(v);
  int e;
  std::frexp(a, &e);
  int lead = std::max(e - 1, emin);
  long double ulp = std::ldexp(1.0L, lead - (p - 1));
  long double q = a / ulp;
  long double fl = std::floor(q);
  long double r = q - fl;
  if (r > 0.5L || (r == 0.5L && std::fmod(fl, 2.0L) == 1.0L))
    fl += 1;
  long double res = fl * ulp;
  if (res > std::ldexp(2.0L - std::ldexp(1.0L, 1 - p), emax))
    res = std::numeric_limits<long double>::infinity();
  return std::copysign(res, v);
}

/// Number of elements of a shape.
inline int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Printable shape, for SCOPED_TRACE.
inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Row-major strides of a shape.
inline std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

/// The multi-index of flat index i in shape.
inline std::vector<int64_t> unravel(int64_t i,
                                    const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
  return idx;
}

} // namespace test
} // namespace mpc

#endif // MPC_TESTS_OPTEST_TESTUTIL_H
