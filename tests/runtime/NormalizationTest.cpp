//===- NormalizationTest.cpp - Softmax and normalization kernels ----------===//
//
// Softmax/LogSoftmax and Layer/RMS/Batch/Instance/Group normalization against
// double-precision loops written here, for f32, f16, bf16 and f64: inner and
// outer axes, blocks longer than the column tile, large offsets (the
// statistics must not cancel), -inf/NaN in softmax and the optional
// LayerNormalization outputs.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Normalization.h"
#include "mpc/Runtime/Cpu/Softmax.h"
#include "mpc/Runtime/Cpu/CpuIsa.h"

#include "TestUtil.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mpc;
using namespace mpc::test;

namespace {

template <typename T> class NormTest : public ::testing::Test {};
using AllFloatTypes = ::testing::Types<float, Half, BFloat16, double>;
TYPED_TEST_SUITE(NormTest, AllFloatTypes);

const double kInf = std::numeric_limits<double>::infinity();

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

/// Double reference of (log-)softmax over the middle dimension.
std::vector<double> refSoftmax(const std::vector<double> &x, int64_t outer,
                               int64_t axis, int64_t inner, bool isLog) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t a) { return size_t((o * axis + a) * inner + j); };
      double m = -kInf;
      bool nan = false;
      for (int64_t a = 0; a < axis; ++a) {
        m = std::max(m, x[at(a)]);
        nan |= std::isnan(x[at(a)]);
      }
      double sum = 0;
      for (int64_t a = 0; a < axis; ++a)
        sum += std::exp(x[at(a)] - m);
      for (int64_t a = 0; a < axis; ++a)
        y[at(a)] = nan     ? std::nan("")
                   : isLog ? x[at(a)] - m - std::log(sum)
                           : std::exp(x[at(a)] - m) / sum;
    }
  return y;
}

TYPED_TEST(NormTest, SoftmaxAndLogSoftmax) {
  using T = TypeParam;
  std::mt19937 rng(10);
  const int64_t cases[][3] = {{1, 1, 1},   {3, 10, 1}, {2, 7, 5}, {4, 1000, 1},
                              {2, 3, 300}, {0, 5, 1},  {2, 0, 3}, {1, 5, 1},
                              {3, 1, 7},   {2, 600, 2}};
  for (auto &c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "outer " << c[0] << " axis " << c[1] << " inner " << c[2]);
    std::vector<T> x = randomVector<T>(size_t(c[0] * c[1] * c[2]), rng, -8, 8);
    if (c[0] == 1 && c[1] == 5) { // Large values need the max subtraction.
      x[0] = fromDouble<T>(30000);
      x[1] = fromDouble<T>(29990);
      x[2] = fromDouble<T>(-kInf);
    }
    for (bool isLog : {false, true}) {
      SCOPED_TRACE(isLog ? "LogSoftmax" : "Softmax");
      std::vector<double> expected =
          refSoftmax(toDoubles(x), c[0], c[1], c[2], isLog);
      std::vector<double> scale;
      for (double &e : expected)
        e = toDouble(fromDouble<T>(e));
      std::vector<T> y(x.size());
      if (isLog)
        cpu::logSoftmax(x.data(), y.data(), c[0], c[1], c[2]);
      else
        cpu::softmax(x.data(), y.data(), c[0], c[1], c[2]);
      EXPECT_TRUE(allClose(y, expected, scale));
      // In place gives the same result.
      std::vector<T> z = x;
      if (isLog)
        cpu::logSoftmax(z.data(), z.data(), c[0], c[1], c[2]);
      else
        cpu::softmax(z.data(), z.data(), c[0], c[1], c[2]);
      EXPECT_TRUE(allClose(z, expected, scale)) << "in place";
    }
  }
}

TYPED_TEST(NormTest, SoftmaxBaselineAndAvx2AgreeBitwise) {
  using T = TypeParam;
  if (kernels::detectCpuIsa() != kernels::CpuIsa::Avx2)
    GTEST_SKIP() << "the CPU has no AVX2";
  std::mt19937 rng(22);
  std::vector<T> x = randomVector<T>(3 * 333 * 7, rng, -20, 20);
  for (int64_t inner : {1, 7})
    for (bool isLog : {false, true}) {
      std::vector<T> y[2];
      for (int i = 0; i < 2; ++i) {
        kernels::setCpuIsa(i ? kernels::CpuIsa::Avx2
                             : kernels::CpuIsa::Baseline);
        y[i].resize(x.size());
        int64_t axis = 333 * 7 / inner;
        if (isLog)
          cpu::logSoftmax(x.data(), y[i].data(), 3, axis, inner);
        else
          cpu::softmax(x.data(), y[i].data(), 3, axis, inner);
      }
      EXPECT_EQ(std::memcmp(y[0].data(), y[1].data(), x.size() * sizeof(T)), 0)
          << "inner " << inner << (isLog ? " log" : "");
    }
  kernels::setCpuIsa(kernels::detectCpuIsa());
}

TYPED_TEST(NormTest, SoftmaxNaNPoisonsItsSliceOnly) {
  using T = TypeParam;
  std::vector<T> x = {fromDouble<T>(1), fromDouble<T>(std::nan("")),
                      fromDouble<T>(2), fromDouble<T>(1),
                      fromDouble<T>(2), fromDouble<T>(3)};
  std::vector<T> y(6);
  cpu::softmax(x.data(), y.data(), 2, 3, 1);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(std::isnan(toDouble(y[i])));
  for (int i = 3; i < 6; ++i)
    EXPECT_FALSE(std::isnan(toDouble(y[i])));
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// Double mean and 1/sqrt(var + eps) of a block.
void refStats(const double *v, int64_t n, double eps, double &mean,
              double &inv) {
  mean = 0;
  for (int64_t i = 0; i < n; ++i)
    mean += v[i];
  mean /= double(n);
  double var = 0;
  for (int64_t i = 0; i < n; ++i)
    var += (v[i] - mean) * (v[i] - mean);
  inv = 1 / std::sqrt(var / double(n) + eps);
}

template <typename T, typename P>
void checkLayerNorm(int64_t outer, int64_t inner, double offset,
                    bool withBias) {
  SCOPED_TRACE(testing::Message()
               << "outer " << outer << " inner " << inner << " offset "
               << offset << (withBias ? " bias" : ""));
  std::mt19937 rng(12);
  std::vector<T> x =
      randomVector<T>(size_t(outer * inner), rng, offset - 1, offset + 1);
  std::vector<P> scale = randomVector<P>(size_t(inner), rng, 0.5, 2);
  std::vector<P> bias = randomVector<P>(size_t(inner), rng);
  std::vector<double> xd = toDoubles(x), expected(x.size()), errScale(x.size());
  std::vector<double> meanRef(static_cast<size_t>(outer)),
      invRef(static_cast<size_t>(outer));
  const float eps = 1e-5f;
  for (int64_t o = 0; o < outer; ++o) {
    refStats(&xd[size_t(o * inner)], inner, double(eps), meanRef[o], invRef[o]);
    for (int64_t i = 0; i < inner; ++i) {
      size_t k = size_t(o * inner + i);
      double s = toDouble(scale[i]), b = withBias ? toDouble(bias[i]) : 0.0;
      expected[k] = (xd[k] - meanRef[o]) * invRef[o] * s + b;
      // x - mean is formed in fp32; its error is relative to |x|.
      errScale[k] = std::fabs(xd[k]) * invRef[o] * std::fabs(s) + std::fabs(b);
    }
  }
  std::vector<T> y(x.size());
  using A = kernels::AccumType<T>;
  std::vector<A> mean(static_cast<size_t>(outer)),
      inv(static_cast<size_t>(outer));
  cpu::layerNormalization<T, P>(x.data(), scale.data(),
                                withBias ? bias.data() : nullptr, y.data(),
                                outer, inner, eps, mean.data(), inv.data());
  EXPECT_TRUE(allClose(y, expected, errScale));
  std::vector<double> meanScale(meanRef.size()), invScale(invRef.size());
  for (size_t o = 0; o < meanRef.size(); ++o) {
    meanScale[o] = std::fabs(offset) + 1;
    invScale[o] = std::fabs(invRef[o]) * (std::fabs(offset) + 1);
  }
  EXPECT_TRUE(allClose(mean, meanRef, meanScale, TypeTraits<A>::kTol))
      << "Mean";
  EXPECT_TRUE(allClose(inv, invRef, invScale, TypeTraits<A>::kTol))
      << "InvStdDev";
}

TYPED_TEST(NormTest, LayerNormalization) {
  using T = TypeParam;
  checkLayerNorm<T, T>(1, 1, 0, true);
  checkLayerNorm<T, T>(3, 7, 0, true);
  checkLayerNorm<T, T>(5, 1000, 0, false);
  checkLayerNorm<T, T>(2, 4097, 0, true);
  checkLayerNorm<T, T>(4, 64, 100, true); // Mean far from zero.
  checkLayerNorm<T, T>(0, 8, 0, true);
  if constexpr (kernels::kIsFloat16<T>)
    checkLayerNorm<T, float>(3, 33, 0, true); // fp32 scale and bias.
}

template <typename T, typename P>
void checkRmsNorm(int64_t outer, int64_t inner, double offset, float eps) {
  SCOPED_TRACE(testing::Message() << "outer " << outer << " inner " << inner << " offset "
                                  << offset << " eps " << eps);
  std::mt19937 rng(14);
  std::vector<T> x = randomVector<T>(size_t(outer * inner), rng, offset - 1, offset + 1);
  std::vector<P> scale = randomVector<P>(size_t(inner), rng, -2, 2);
  std::vector<double> xd = toDoubles(x), expected(x.size()), errScale(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    double ms = 0;
    for (int64_t i = 0; i < inner; ++i)
      ms += xd[size_t(o * inner + i)] * xd[size_t(o * inner + i)];
    double inv = 1.0 / std::sqrt(ms / double(inner) + double(eps));
    for (int64_t i = 0; i < inner; ++i) {
      size_t k = size_t(o * inner + i);
      expected[k] = xd[k] * inv * toDouble(scale[i]);
      errScale[k] = std::fabs(xd[k]) * inv * std::fabs(toDouble(scale[i]));
    }
  }
  std::vector<T> y(x.size());
  cpu::rmsNormalization<T, P>(x.data(), scale.data(), y.data(), outer, inner, eps);
  EXPECT_TRUE(allClose(y, expected, errScale));
  // In place (y aliases x) gives the same result.
  std::vector<T> inPlace = x;
  cpu::rmsNormalization<T, P>(inPlace.data(), scale.data(), inPlace.data(), outer, inner, eps);
  // (memcmp of empty vectors would pass null pointers, which it does not allow.)
  EXPECT_TRUE(y.empty() || std::memcmp(inPlace.data(), y.data(), y.size() * sizeof(T)) == 0);
}

TYPED_TEST(NormTest, RMSNormalization) {
  using T = TypeParam;
  checkRmsNorm<T, T>(1, 1, 0, 1e-5f);
  checkRmsNorm<T, T>(3, 7, 0, 1e-5f);
  checkRmsNorm<T, T>(5, 1000, 0, 0.1f);
  checkRmsNorm<T, T>(2, 4097, 0, 1e-5f);
  checkRmsNorm<T, T>(4, 64, 100, 1e-5f); // large values: the mean of squares is ~1e4
  checkRmsNorm<T, T>(0, 8, 0, 1e-5f);
  if constexpr (kernels::kIsFloat16<T>)
    checkRmsNorm<T, float>(3, 33, 0, 1e-5f); // fp32 scale
}

TYPED_TEST(NormTest, BatchNormalization) {
  using T = TypeParam;
  std::mt19937 rng(13);
  const int64_t n = 2, c = 3, spatial = 10;
  std::vector<T> x = randomVector<T>(size_t(n * c * spatial), rng, -3, 3);
  std::vector<T> scale = randomVector<T>(c, rng),
                 bias = randomVector<T>(c, rng);
  std::vector<T> mean = randomVector<T>(c, rng),
                 var = randomVector<T>(c, rng, 0.1, 2);
  const float eps = 1e-3f;
  std::vector<double> expected(x.size()), errScale(x.size());
  for (int64_t i = 0; i < n * c * spatial; ++i) {
    int64_t ch = (i / spatial) % c;
    double a = toDouble(scale[ch]) / std::sqrt(toDouble(var[ch]) + double(eps));
    expected[i] =
        (toDouble(x[i]) - toDouble(mean[ch])) * a + toDouble(bias[ch]);
    errScale[i] = (std::fabs(toDouble(x[i])) + std::fabs(toDouble(mean[ch]))) *
                      std::fabs(a) +
                  std::fabs(toDouble(bias[ch]));
  }
  std::vector<T> y(x.size());
  cpu::batchNormalization<T, T>(x.data(), scale.data(), bias.data(),
                                mean.data(), var.data(), y.data(), n, c,
                                spatial, eps);
  EXPECT_TRUE(allClose(y, expected, errScale));
  if constexpr (kernels::kIsFloat16<T>) {
    std::vector<float> sf, bf, mf, vf;
    for (int64_t i = 0; i < c; ++i) {
      sf.push_back(float(toDouble(scale[i])));
      bf.push_back(float(toDouble(bias[i])));
      mf.push_back(float(toDouble(mean[i])));
      vf.push_back(float(toDouble(var[i])));
    }
    cpu::batchNormalization<T, float>(x.data(), sf.data(), bf.data(), mf.data(),
                                      vf.data(), y.data(), n, c, spatial, eps);
    EXPECT_TRUE(allClose(y, expected, errScale)) << "fp32 parameters";
  }
}

/// Reference group normalization; instance normalization is groups == C.
template <typename T>
void checkGroupNorm(int64_t n, int64_t c, int64_t spatial, int64_t groups,
                    bool perGroup, bool instance) {
  SCOPED_TRACE(testing::Message()
               << "n " << n << " c " << c << " spatial " << spatial
               << " groups " << groups << (perGroup ? " per-group" : "")
               << (instance ? " instance" : ""));
  std::mt19937 rng(14);
  std::vector<T> x = randomVector<T>(size_t(n * c * spatial), rng, -2, 5);
  int64_t affine = perGroup ? groups : c;
  std::vector<T> scale = randomVector<T>(size_t(affine), rng, 0.5, 2);
  std::vector<T> bias = randomVector<T>(size_t(affine), rng);
  std::vector<double> xd = toDoubles(x), expected(x.size()), errScale(x.size());
  int64_t block = (c / groups) * spatial;
  const float eps = 1e-5f;
  for (int64_t b = 0; b < n * groups; ++b) {
    double mean, inv;
    refStats(&xd[size_t(b * block)], block, double(eps), mean, inv);
    for (int64_t i = 0; i < block; ++i) {
      size_t k = size_t(b * block + i);
      int64_t ch = (b % groups) * (c / groups) + i / spatial;
      int64_t p = perGroup ? b % groups : ch;
      double s = toDouble(scale[p]), bb = toDouble(bias[p]);
      expected[k] = (xd[k] - mean) * inv * s + bb;
      errScale[k] = std::fabs(xd[k]) * inv * std::fabs(s) + std::fabs(bb);
    }
  }
  std::vector<T> y(x.size());
  if (instance)
    cpu::instanceNormalization<T>(x.data(), scale.data(), bias.data(), y.data(),
                                  n, c, spatial, eps);
  else
    cpu::groupNormalization<T>(x.data(), scale.data(), bias.data(), y.data(), n,
                               c, spatial, groups, eps, perGroup);
  EXPECT_TRUE(allClose(y, expected, errScale));
}

TYPED_TEST(NormTest, InstanceAndGroupNormalization) {
  using T = TypeParam;
  checkGroupNorm<T>(2, 3, 1000, 3, false, true);
  checkGroupNorm<T>(1, 4, 7, 4, false, true);
  checkGroupNorm<T>(2, 6, 50, 3, false, false);
  checkGroupNorm<T>(2, 6, 50, 3, true, false);
  checkGroupNorm<T>(1, 8, 9, 1, false, false);
  checkGroupNorm<T>(3, 4, 1, 2, false, false);
}

TYPED_TEST(NormTest, InstanceNormOfConstantPlaneIsBias) {
  using T = TypeParam;
  std::vector<T> x(4, fromDouble<T>(3.0)), scale = {fromDouble<T>(2.0)},
                                           bias = {fromDouble<T>(0.25)}, y(4);
  cpu::instanceNormalization<T>(x.data(), scale.data(), bias.data(), y.data(),
                                1, 1, 4, 1e-5f);
  for (T v : y)
    EXPECT_EQ(toDouble(v), 0.25);
}

} // namespace
