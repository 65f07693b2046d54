//===- NormalizationTest.cpp - Softmax and normalization kernels ----------===//
//
// Softmax/LogSoftmax and Layer/RMS/Batch/Instance/Group normalization against
// double-precision loops written here, for f32, f16, bf16 and f64, on every
// selected device through the op tester (OpTester.h): inner and outer axes,
// blocks longer than the column tile, large offsets (the statistics must not
// cancel), -inf/NaN in softmax, the optional LayerNormalization outputs and
// fp32 parameters of 16-bit inputs. Results computed in place over the input
// and the baseline/AVX2 agreement are CPU internals (the executor chooses
// aliasing; the ISA is the CPU's): those cases call the CPU kernels directly.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Normalization.h"
#include "mpc/Runtime/Cpu/Softmax.h"
#include "mpc/Runtime/Cpu/CpuIsa.h"

#include "OpTester.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

class NormTest : public DeviceTypeTest {};
OPTEST_INSTANTIATE_FLOAT_TYPES(NormTest);
template <typename T> class CpuNormTest : public ::testing::Test {};
using AllFloatTypes = ::testing::Types<float, Half, BFloat16, double>;
TYPED_TEST_SUITE(CpuNormTest, AllFloatTypes);

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

const int64_t kSoftmaxCases[][3] = {{1, 1, 1},   {3, 10, 1}, {2, 7, 5}, {4, 1000, 1},
                                    {2, 3, 300}, {0, 5, 1},  {2, 0, 3}, {1, 5, 1},
                                    {3, 1, 7},   {2, 600, 2}, {2, 3000, 1}};

/// Runs every softmax case: `run(isLog, x, c)` gives the result for input x
/// of shape [outer, axis, inner] = c.
template <typename T, typename Run> void checkSoftmaxCases(Run run) {
  std::mt19937 rng(10);
  for (auto &c : kSoftmaxCases) {
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
      EXPECT_TRUE(allClose(run(isLog, x, c), expected, scale));
    }
  }
}

OPTEST_TYPED_P(NormTest, SoftmaxAndLogSoftmax) {
  checkSoftmaxCases<T>([&](bool isLog, const std::vector<T> &x, const int64_t *c) {
    OpTester t(isLog ? "LogSoftmax" : "Softmax", 13);
    t.attrInt("axis", 1).input({c[0], c[1], c[2]}, x);
    return runOutput<T>(t, device);
  });
}

// CPU internal: the kernels computing in place (y aliases x) give the same
// results.
TYPED_TEST(CpuNormTest, SoftmaxInPlace) {
  using T = TypeParam;
  checkSoftmaxCases<T>([](bool isLog, const std::vector<T> &x, const int64_t *c) {
    std::vector<T> z = x;
    if (isLog)
      cpu::logSoftmax(z.data(), z.data(), c[0], c[1], c[2]);
    else
      cpu::softmax(z.data(), z.data(), c[0], c[1], c[2]);
    return z;
  });
}

// CPU internal: the ISA dispatch.
TYPED_TEST(CpuNormTest, SoftmaxBaselineAndAvx2AgreeBitwise) {
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

OPTEST_TYPED_P(NormTest, SoftmaxAxisDefaultsNegativeAxesAndTheOpset11Form) {
  std::mt19937 rng(16);
  const std::vector<int64_t> shape = {2, 3, 4};
  std::vector<T> x = randomVector<T>(24, rng, -4, 4);
  struct Case {
    int64_t opset;
    bool hasAxis;
    int64_t axis;
    int64_t outer, axisDim, inner; // the reference's view
  };
  const Case cases[] = {
      {13, false, 0, 6, 4, 1},  // default -1
      {13, true, -2, 2, 3, 4},  // a negative middle axis
      {13, true, 0, 1, 2, 12},  // the first axis
      {11, true, 1, 2, 12, 1},  // opset 11: flattened to [2, 12] at axis 1
      {11, false, 0, 2, 12, 1}, // opset 11's default axis is 1
      {11, true, -1, 6, 4, 1},
  };
  for (const Case &c : cases)
    for (bool isLog : {false, true}) {
      SCOPED_TRACE(testing::Message() << (isLog ? "LogSoftmax" : "Softmax") << " opset "
                                      << c.opset << " axis "
                                      << (c.hasAxis ? std::to_string(c.axis) : "absent"));
      OpTester t(isLog ? "LogSoftmax" : "Softmax", c.opset);
      if (c.hasAxis)
        t.attrInt("axis", c.axis);
      t.input(shape, x);
      std::vector<double> expected =
          refSoftmax(toDoubles(x), c.outer, c.axisDim, c.inner, isLog);
      for (double &e : expected)
        e = toDouble(fromDouble<T>(e));
      EXPECT_TRUE(allClose(runOutput<T>(t, device), expected));
    }
}

OPTEST_TYPED_P(NormTest, SoftmaxNaNPoisonsItsSliceOnly) {
  std::vector<T> x = {fromDouble<T>(1), fromDouble<T>(std::nan("")),
                      fromDouble<T>(2), fromDouble<T>(1),
                      fromDouble<T>(2), fromDouble<T>(3)};
  OpTester t("Softmax", 13);
  t.attrInt("axis", 1).input<T>({2, 3}, x);
  std::vector<T> y = runOutput<T>(t, device);
  ASSERT_EQ(y.size(), 6u);
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
void checkLayerNorm(const std::string &device, int64_t outer, int64_t inner, double offset,
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
  using A = kernels::AccumType<T>;
  OpTester t("LayerNormalization", 17);
  // stash_type 1 keeps Mean and InvStdDev in f32; any other value in the
  // input's type, which for f64 is the accumulation type.
  t.attrInt("axis", -1).attrFloat("epsilon", eps).attrInt("stash_type", std::is_same_v<A, double> ? 11 : 1);
  t.input({outer, inner}, x).input({inner}, scale);
  if (withBias)
    t.input({inner}, bias);
  std::vector<HostTensor> out = runOrFail(t.outputs(3), device);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(allClose(valuesOf<T>(out[0]), expected, errScale));
  EXPECT_EQ(out[1].shape, (std::vector<int64_t>{outer, 1}));
  std::vector<A> mean = valuesOf<A>(out[1]), inv = valuesOf<A>(out[2]);
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

OPTEST_TYPED_P(NormTest, LayerNormalization) {
  checkLayerNorm<T, T>(device, 1, 1, 0, true);
  checkLayerNorm<T, T>(device, 3, 7, 0, true);
  checkLayerNorm<T, T>(device, 5, 1000, 0, false);
  checkLayerNorm<T, T>(device, 2, 4097, 0, true);
  checkLayerNorm<T, T>(device, 4, 64, 100, true); // Mean far from zero.
  checkLayerNorm<T, T>(device, 0, 8, 0, true);
  if constexpr (kernels::kIsFloat16<T>)
    checkLayerNorm<T, float>(device, 3, 33, 0, true); // fp32 scale and bias.
}

OPTEST_TYPED_P(NormTest, LayerAndRmsNormalizationOverSeveralAxes) {
  // X [2, 3, 5] normalized over its last two axes (axis 1 and -2): rows of 15.
  std::mt19937 rng(18);
  std::vector<T> x = randomVector<T>(30, rng, -2, 2);
  std::vector<T> scale = randomVector<T>(15, rng, 0.5, 2);
  std::vector<T> bias = randomVector<T>(15, rng);
  std::vector<double> xd = toDoubles(x);
  for (int64_t axis : {1, -2})
    for (bool rms : {false, true}) {
      SCOPED_TRACE(testing::Message() << (rms ? "RMSNormalization" : "LayerNormalization")
                                      << " axis " << axis);
      std::vector<double> expected(30), errScale(30);
      for (int64_t o = 0; o < 2; ++o) {
        const double *row = &xd[size_t(o * 15)];
        double mean = 0, inv = 0;
        if (rms) {
          double ms = 0;
          for (int64_t i = 0; i < 15; ++i)
            ms += row[i] * row[i];
          inv = 1 / std::sqrt(ms / 15 + 1e-5);
        } else {
          refStats(row, 15, 1e-5, mean, inv);
        }
        for (int64_t i = 0; i < 15; ++i) {
          size_t k = size_t(o * 15 + i);
          double s = toDouble(scale[size_t(i)]), b = rms ? 0.0 : toDouble(bias[size_t(i)]);
          expected[k] = (row[i] - mean) * inv * s + b;
          errScale[k] = std::fabs(row[i]) * inv * std::fabs(s) + std::fabs(b);
        }
      }
      OpTester t(rms ? "RMSNormalization" : "LayerNormalization", rms ? 23 : 17);
      t.attrInt("axis", axis).input({2, 3, 5}, x).input({3, 5}, scale);
      if (!rms)
        t.input({3, 5}, bias);
      EXPECT_TRUE(allClose(runOutput<T>(t, device), expected, errScale));
    }
}

/// RMSNormalization of [outer, inner] over the last axis, against the
/// reference, through `run(x, scale)`.
template <typename T, typename P, typename Run>
void checkRmsNorm(int64_t outer, int64_t inner, double offset, float eps, Run run) {
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
  EXPECT_TRUE(allClose(run(x, scale), expected, errScale));
}

/// Every RMSNormalization case, through `run(x, scale, outer, inner, eps)`;
/// with `mixed`, also fp32 scales of 16-bit inputs.
template <typename T, typename Run> void rmsNormCases(Run run, bool mixed) {
  auto with = [&](int64_t outer, int64_t inner, float eps) {
    return [=](const auto &x, const auto &scale) { return run(x, scale, outer, inner, eps); };
  };
  checkRmsNorm<T, T>(1, 1, 0, 1e-5f, with(1, 1, 1e-5f));
  checkRmsNorm<T, T>(3, 7, 0, 1e-5f, with(3, 7, 1e-5f));
  checkRmsNorm<T, T>(5, 1000, 0, 0.1f, with(5, 1000, 0.1f));
  checkRmsNorm<T, T>(2, 4097, 0, 1e-5f, with(2, 4097, 1e-5f));
  // large values: the mean of squares is ~1e4
  checkRmsNorm<T, T>(4, 64, 100, 1e-5f, with(4, 64, 1e-5f));
  checkRmsNorm<T, T>(0, 8, 0, 1e-5f, with(0, 8, 1e-5f));
  if constexpr (kernels::kIsFloat16<T>)
    if (mixed)
      checkRmsNorm<T, float>(3, 33, 0, 1e-5f, with(3, 33, 1e-5f)); // fp32 scale
}

OPTEST_TYPED_P(NormTest, RMSNormalization) {
  rmsNormCases<T>([&](const std::vector<T> &x, const auto &scale, int64_t outer, int64_t inner,
                      float eps) {
    OpTester t("RMSNormalization", 23);
    t.attrInt("axis", -1).attrFloat("epsilon", eps);
    t.input({outer, inner}, x).input({inner}, scale);
    return runOutput<T>(t, device);
  }, /*mixed=*/false);
  // The node refuses an fp32 scale of a 16-bit input in one line (the CPU
  // helper supports it: CpuNormTest.RMSNormalizationInPlace checks that).
  if constexpr (kernels::kIsFloat16<T>) {
    OpTester t("RMSNormalization", 23);
    t.input(tensorOf<T>({1, 2}, {T(1.0f), T(2.0f)}));
    t.input(tensorOf<float>({2}, {1, 1}));
    auto out = t.run(device);
    ASSERT_FALSE(bool(out));
    std::string msg = llvm::toString(out.takeError());
    if (!isNoKernelError(msg)) // a device without the kernel refuses it earlier
      EXPECT_EQ(msg, "node 'node' (RMSNormalization): X is " + dtypeName(DTypeOf<T>::value).str() +
                  " and scale f32: mixed types are not supported");
  }
}

// CPU internal: the kernel computing in place (y aliases x) gives the same
// results.
TYPED_TEST(CpuNormTest, RMSNormalizationInPlace) {
  using T = TypeParam;
  rmsNormCases<T>([](const std::vector<T> &x, const auto &scale, int64_t outer, int64_t inner,
                     float eps) {
    using P = typename std::decay_t<decltype(scale)>::value_type;
    std::vector<T> inPlace = x;
    cpu::rmsNormalization<T, P>(inPlace.data(), scale.data(), inPlace.data(), outer, inner,
                                eps);
    return inPlace;
  }, /*mixed=*/true);
}

OPTEST_TYPED_P(NormTest, BatchNormalization) {
  std::mt19937 rng(13);
  // [2, 3, 10]; a long spatial axis (2 x 5 x 1500, over a 256-thread
  // block's stride); [4, 7] with no spatial axis.
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 10}, {2, 5, 30, 50}, {4, 7}};
  for (const std::vector<int64_t> &shape : shapes) {
    SCOPED_TRACE(shapeString(shape));
    const int64_t n = shape[0], c = shape[1];
    int64_t spatial = 1;
    for (size_t i = 2; i < shape.size(); ++i)
      spatial *= shape[i];
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
    auto batchNorm = [&](const auto &s, const auto &b, const auto &m, const auto &v) {
      OpTester t("BatchNormalization", 15);
      t.attrFloat("epsilon", eps);
      t.input(shape, x).input({c}, s).input({c}, b).input({c}, m).input({c}, v);
      return runOutput<T>(t, device);
    };
    EXPECT_TRUE(allClose(batchNorm(scale, bias, mean, var), expected, errScale));
    if constexpr (kernels::kIsFloat16<T>) {
      std::vector<float> sf, bf, mf, vf;
      for (int64_t i = 0; i < c; ++i) {
        sf.push_back(float(toDouble(scale[i])));
        bf.push_back(float(toDouble(bias[i])));
        mf.push_back(float(toDouble(mean[i])));
        vf.push_back(float(toDouble(var[i])));
      }
      EXPECT_TRUE(allClose(batchNorm(sf, bf, mf, vf), expected, errScale)) << "fp32 parameters";
    }
  }
}

/// Reference group normalization; instance normalization is groups == C.
template <typename T>
void checkGroupNorm(const std::string &device, int64_t n, int64_t c, int64_t spatial, int64_t groups,
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
  // GroupNormalization-18 has one scale and bias per group, -21 per channel.
  OpTester t(instance ? "InstanceNormalization" : "GroupNormalization",
             instance ? 6 : perGroup ? 18 : 21);
  t.attrFloat("epsilon", eps);
  if (!instance)
    t.attrInt("num_groups", groups);
  t.input({n, c, spatial}, x).input({affine}, scale).input({affine}, bias);
  EXPECT_TRUE(allClose(runOutput<T>(t, device), expected, errScale));
}

OPTEST_TYPED_P(NormTest, InstanceAndGroupNormalization) {
  checkGroupNorm<T>(device, 2, 3, 1000, 3, false, true);
  checkGroupNorm<T>(device, 1, 4, 7, 4, false, true);
  checkGroupNorm<T>(device, 2, 6, 50, 3, false, false);
  checkGroupNorm<T>(device, 2, 6, 50, 3, true, false);
  checkGroupNorm<T>(device, 1, 8, 9, 1, false, false);
  checkGroupNorm<T>(device, 3, 4, 1, 2, false, false);
}

OPTEST_TYPED_P(NormTest, InstanceNormOfConstantPlaneIsBias) {
  std::vector<T> x(4, fromDouble<T>(3.0)), scale = {fromDouble<T>(2.0)},
                                           bias = {fromDouble<T>(0.25)};
  OpTester t("InstanceNormalization", 6);
  t.attrFloat("epsilon", 1e-5f).input({1, 1, 4}, x).input({1}, scale).input({1}, bias);
  std::vector<T> y = runOutput<T>(t, device);
  ASSERT_EQ(y.size(), 4u);
  for (T v : y)
    EXPECT_EQ(toDouble(v), 0.25);
}

OPTEST_TYPED_P(NormTest, InstanceAndGroupNormalizationWithFloatParameters) {
  // fp32 scale and bias with 16-bit data (AMP keeps them in fp32).
  if constexpr (kernels::kIsFloat16<T>) {
    std::mt19937 rng(15);
    const int64_t n = 2, c = 4, spatial = 1100;
    std::vector<T> x = randomVector<T>(size_t(n * c * spatial), rng, -2, 5);
    std::vector<float> scale = randomVector<float>(size_t(c), rng, 0.5, 2);
    std::vector<float> bias = randomVector<float>(size_t(c), rng);
    std::vector<double> xd = toDoubles(x), expected(x.size()), errScale(x.size());
    for (int64_t r = 0; r < n * c; ++r) {
      double mean, inv;
      refStats(&xd[size_t(r * spatial)], spatial, double(1e-5f), mean, inv);
      for (int64_t i = 0; i < spatial; ++i) {
        size_t k = size_t(r * spatial + i);
        double s = scale[size_t(r % c)], b = bias[size_t(r % c)];
        expected[k] = (xd[k] - mean) * inv * s + b;
        errScale[k] = std::fabs(xd[k]) * inv * std::fabs(s) + std::fabs(b);
      }
    }
    OpTester t("InstanceNormalization", 6);
    t.input({n, c, spatial}, x).input({c}, scale).input({c}, bias);
    EXPECT_TRUE(allClose(runOutput<T>(t, device), expected, errScale));
  }
}

OPTEST_TYPED_P(NormTest, LpNormalizationAlongAnyAxis) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis, p;
  };
  // The last axis (rows, one longer than a block), a middle and a negative
  // axis (strided slices), size-1 dimensions, both norms.
  const Case cases[] = {{{3, 1500}, -1, 2}, {{4, 5, 6}, 1, 1}, {{2, 7, 3}, -2, 2},
                        {{1, 1, 9}, 2, 1}, {{5, 1}, 1, 2}, {{6, 4}, 0, 2}};
  std::mt19937 rng(16);
  for (const Case &k : cases) {
    SCOPED_TRACE(shapeString(k.shape) + " axis " + std::to_string(k.axis) + " p " +
                 std::to_string(k.p));
    std::vector<T> x = randomVector<T>(size_t(product(k.shape)), rng, -3, 3);
    if (k.shape == std::vector<int64_t>{4, 5, 6}) // one all-zero slice: 0, not NaN
      for (int64_t j = 0; j < 5; ++j)
        x[size_t(j * 6 + 2)] = fromDouble<T>(0.0);
    int64_t axis = k.axis < 0 ? k.axis + int64_t(k.shape.size()) : k.axis;
    int64_t outer = 1, dim = k.shape[size_t(axis)], inner = 1;
    for (int64_t a = 0; a < axis; ++a)
      outer *= k.shape[size_t(a)];
    for (size_t a = size_t(axis) + 1; a < k.shape.size(); ++a)
      inner *= k.shape[a];
    std::vector<double> xd = toDoubles(x), expected(x.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double norm = 0;
        for (int64_t j = 0; j < dim; ++j) {
          double v = xd[size_t((o * dim + j) * inner + i)];
          norm += k.p == 1 ? std::fabs(v) : v * v;
        }
        norm = k.p == 2 ? std::sqrt(norm) : norm;
        for (int64_t j = 0; j < dim; ++j) {
          size_t e = size_t((o * dim + j) * inner + i);
          expected[e] = norm == 0 ? 0.0 : xd[e] / norm;
        }
      }
    OpTester t("LpNormalization", 1);
    t.attrInt("axis", k.axis).attrInt("p", k.p).input(k.shape, x);
    EXPECT_TRUE(allClose(runOutput<T>(t, device), expected));
  }
}

} // namespace
