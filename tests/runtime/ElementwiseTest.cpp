//===- ElementwiseTest.cpp - Element-wise op bodies and loops -------------===//
//
// Every unary and binary functor through applyUnary/applyBinary for f32, f16
// and bf16 against double-precision formulas written here (rounded to the
// storage type), over sizes around the block length and with edge values;
// numpy broadcasting against an independent index computation; integer and
// double storage computed natively; bitwise ops bit for bit on every integer
// type.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Elementwise.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

#include "TestUtil.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

using namespace mpc;
using namespace mpc::test;
namespace k = mpc::kernels;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The exact result rounded to the storage type, as the kernel must round.
template <typename T> double roundTo(double v) {
  if constexpr (std::is_same<T, double>::value)
    return v;
  else
    return toDouble(T(static_cast<float>(v)));
}

/// Edge inputs appended to every unary test (filtered by the op's domain).
std::vector<double> edgeInputs() {
  return {0.0, -0.0, kInf, -kInf, kNaN,  1.0,     -1.0,     0.5,  -0.5,
          2.5, -2.5, 3.5,  1e-3,  -1e-3, 60000.0, -60000.0, 20.0, -20.0};
}

const int64_t kSizes[] = {0, 1, 7, 513, 1100};

template <typename T> class UnaryTest : public ::testing::Test {};
template <typename T> class BinaryTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, Half, BFloat16>;
TYPED_TEST_SUITE(UnaryTest, StorageTypes);
TYPED_TEST_SUITE(BinaryTest, StorageTypes);

/// Runs fn over random inputs in [lo, hi) plus the edge values and compares
/// with ref. Also checks the in-place form on the largest size.
template <typename T, typename Fn>
void checkUnary(const char *name, const Fn &fn,
                const std::function<double(double)> &ref, double lo, double hi,
                bool withEdges = true) {
  SCOPED_TRACE(name);
  std::mt19937 rng(7);
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<T> in = randomVector<T>(size_t(n), rng, lo, hi);
    if (withEdges && n > 100) {
      std::vector<double> edges = edgeInputs();
      size_t step = in.size() / edges.size();
      for (size_t i = 0; i < edges.size(); ++i)
        in[i * step] = fromDouble<T>(edges[i]);
    }
    std::vector<double> expected(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      expected[i] = roundTo<T>(ref(toDouble(in[i])));
    std::vector<T> out(in.size());
    k::applyUnary(fn, in.data(), out.data(), n);
    EXPECT_TRUE(allClose(out, expected));
    if (n == kSizes[4]) {
      k::applyUnary(fn, in.data(), in.data(), n);
      EXPECT_TRUE(allClose(in, expected)) << "in place";
    }
  }
}

TYPED_TEST(UnaryTest, Activations) {
  using T = TypeParam;
  checkUnary<T>(
      "Relu", k::Relu(), [](double x) { return x < 0 ? 0.0 : x; }, -5, 5);
  checkUnary<T>(
      "LeakyRelu", k::LeakyRelu{0.1f},
      [](double x) { return x < 0 ? double(0.1f) * x : x; }, -5, 5);
  checkUnary<T>(
      "ThresholdedRelu", k::ThresholdedRelu{0.75f},
      [](double x) { return x > 0.75 ? x : 0.0; }, -5, 5);
  checkUnary<T>(
      "Sigmoid", k::Sigmoid(), [](double x) { return 1 / (1 + std::exp(-x)); },
      -12, 12);
  checkUnary<T>(
      "HardSigmoid", k::HardSigmoid{0.3f, 0.4f},
      [](double x) {
        double v = double(0.3f) * x + double(0.4f);
        return std::isnan(v) ? v : std::min(1.0, std::max(0.0, v));
      },
      -5, 5);
  checkUnary<T>(
      "HardSwish", k::HardSwish(),
      [](double x) {
        double v = x / 6 + 0.5;
        return x * (std::isnan(v) ? v : std::min(1.0, std::max(0.0, v)));
      },
      -6, 6);
  checkUnary<T>(
      "Tanh", k::Tanh(), [](double x) { return std::tanh(x); }, -6, 6);
  checkUnary<T>(
      "Elu", k::Elu{0.7f},
      [](double x) { return x >= 0 ? x : double(0.7f) * (std::exp(x) - 1); },
      -6, 4);
  checkUnary<T>(
      "Selu", k::Selu(),
      [](double x) {
        double a = double(1.67326319217681884765625f);
        double g = double(1.05070102214813232421875f);
        return x > 0 ? g * x : g * (a * std::exp(x) - a);
      },
      -6, 4);
  checkUnary<T>(
      "Celu", k::Celu{1.5f},
      [](double x) {
        return std::max(0.0, x) + std::min(0.0, 1.5 * (std::exp(x / 1.5) - 1));
      },
      -6, 4, /*withEdges=*/false);
  checkUnary<T>(
      "Softplus", k::Softplus(),
      [](double x) { // exp overflows double beyond 709.
        return x > 700 ? x : std::log1p(std::exp(x));
      },
      -15, 15);
  checkUnary<T>(
      "Softsign", k::Softsign(),
      [](double x) { return x / (1 + std::fabs(x)); }, -8, 8);
  checkUnary<T>(
      "Mish", k::Mish(),
      [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, -8, 8);
  checkUnary<T>(
      "Gelu", k::Gelu(),
      [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -5,
      5);
  checkUnary<T>(
      "GeluTanh", k::Gelu{true},
      [](double x) {
        const double c = std::sqrt(2.0 / M_PI);
        return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
      },
      -5, 5);
}

TYPED_TEST(UnaryTest, Arithmetic) {
  using T = TypeParam;
  checkUnary<T>(
      "Exp", k::Exp(), [](double x) { return std::exp(x); }, -10, 10);
  checkUnary<T>(
      "Log", k::Log(), [](double x) { return std::log(x); }, 0, 100);
  checkUnary<T>(
      "Sqrt", k::Sqrt(), [](double x) { return std::sqrt(x); }, 0, 100);
  checkUnary<T>(
      "Reciprocal", k::Reciprocal(), [](double x) { return 1 / x; }, 0.01, 50);
  checkUnary<T>(
      "Neg", k::Neg(), [](double x) { return -x; }, -5, 5);
  checkUnary<T>(
      "Abs", k::Abs(), [](double x) { return std::fabs(x); }, -5, 5);
  checkUnary<T>(
      "Erf", k::Erf(), [](double x) { return std::erf(x); }, -4, 4);
  checkUnary<T>(
      "Sign", k::Sign(),
      [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }, -3, 3);
  checkUnary<T>(
      "Ceil", k::Ceil(), [](double x) { return std::ceil(x); }, -50, 50);
  checkUnary<T>(
      "Floor", k::Floor(), [](double x) { return std::floor(x); }, -50, 50);
  checkUnary<T>(
      "Sin", k::Sin(), [](double x) { return std::sin(x); }, -10, 10,
      /*withEdges=*/false);
  checkUnary<T>(
      "Cos", k::Cos(), [](double x) { return std::cos(x); }, -10, 10,
      /*withEdges=*/false);
  checkUnary<T>(
      "Clip", k::Clip{-0.5, 0.25},
      [](double x) {
        return std::isnan(x) ? x : std::min(0.25, std::max(-0.5, x));
      },
      -2, 2);
  checkUnary<T>(
      "ClipDefault", k::Clip(), [](double x) { return x; }, -2, 2);
}

TYPED_TEST(UnaryTest, TrigonometricAndHyperbolic) {
  using T = TypeParam;
  checkUnary<T>(
      "Tan", k::Tan(), [](double x) { return std::tan(x); }, -1.4, 1.4,
      /*withEdges=*/false);
  checkUnary<T>(
      "Asin", k::Asin(), [](double x) { return std::asin(x); }, -1, 1);
  checkUnary<T>(
      "Acos", k::Acos(), [](double x) { return std::acos(x); }, -1, 1);
  checkUnary<T>(
      "Atan", k::Atan(), [](double x) { return std::atan(x); }, -20, 20);
  checkUnary<T>(
      "Sinh", k::Sinh(), [](double x) { return std::sinh(x); }, -10, 10);
  checkUnary<T>(
      "Cosh", k::Cosh(), [](double x) { return std::cosh(x); }, -10, 10);
  checkUnary<T>(
      "Asinh", k::Asinh(), [](double x) { return std::asinh(x); }, -100, 100);
  checkUnary<T>(
      "Acosh", k::Acosh(), [](double x) { return std::acosh(x); }, 1, 100);
  checkUnary<T>(
      "Atanh", k::Atanh(), [](double x) { return std::atanh(x); }, -0.99, 0.99);
}

TYPED_TEST(UnaryTest, SwishAndShrink) {
  using T = TypeParam;
  checkUnary<T>(
      "Swish", k::Swish(), [](double x) { return x / (1 + std::exp(-x)); }, -12,
      12);
  checkUnary<T>(
      "SwishAlpha", k::Swish{0.5f},
      [](double x) { return x / (1 + std::exp(-0.5 * x)); }, -12, 12);
  checkUnary<T>(
      "Shrink", k::Shrink(),
      [](double x) { return x < -0.5 ? x : (x > 0.5 ? x : 0.0); }, -3, 3);
  checkUnary<T>(
      "ShrinkSoft", k::Shrink{1.5f, 1.5f},
      [](double x) { return x < -1.5 ? x + 1.5 : (x > 1.5 ? x - 1.5 : 0.0); },
      -5, 5);
}

TYPED_TEST(UnaryTest, RoundHalvesToEven) {
  using T = TypeParam;
  // Multiples of 0.25 in [-8, 8) hit every tie; nearbyint rounds ties to even.
  std::vector<T> in;
  for (int i = -32; i < 32; ++i)
    in.push_back(fromDouble<T>(i * 0.25));
  std::vector<double> expected;
  for (T v : in)
    expected.push_back(std::nearbyint(toDouble(v)));
  std::vector<T> out(in.size());
  k::applyUnary(k::Round(), in.data(), out.data(), int64_t(in.size()));
  EXPECT_TRUE(allClose(out, expected, {}, {0, 0, 0}));
  EXPECT_EQ(toDouble(out[32 + 10]), 2.0);  // 2.5
  EXPECT_EQ(toDouble(out[32 + 14]), 4.0);  // 3.5
  EXPECT_EQ(toDouble(out[32 - 10]), -2.0); // -2.5
}

TYPED_TEST(UnaryTest, Predicates) {
  using T = TypeParam;
  std::vector<double> values = {0.0, -1.0, kInf, -kInf, kNaN, 3.0, -kNaN, 1e-3};
  for (int i = 0; i < 600; ++i) // Longer than one block.
    values.push_back(i % 3 == 0 ? kInf : (i % 3 == 1 ? kNaN : i));
  std::vector<T> in;
  for (double v : values)
    in.push_back(fromDouble<T>(v));
  std::unique_ptr<bool[]> out(new bool[in.size()]);
  auto check = [&](const char *name, auto fn, std::function<bool(double)> ref) {
    k::applyUnary(fn, in.data(), out.get(), int64_t(in.size()));
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], ref(values[i])) << name << " at " << i;
  };
  check("IsNaN", k::IsNaN(), [](double x) { return std::isnan(x); });
  check("IsInf", k::IsInf(), [](double x) { return std::isinf(x); });
  check("IsInf+", k::IsInf{false, true}, [](double x) { return x == kInf; });
  check("IsInf-", k::IsInf{true, false}, [](double x) { return x == -kInf; });
}

TEST(UnaryNativeTest, DoubleComputesInDouble) {
  std::mt19937 rng(3);
  std::vector<double> in = randomVector<double>(777, rng, -3, 3);
  std::vector<double> out(in.size()), expected(in.size());
  k::applyUnary(k::Exp(), in.data(), out.data(), int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i)
    expected[i] = std::exp(in[i]);
  EXPECT_TRUE(allClose(out, expected));
  k::applyUnary(k::Gelu(), in.data(), out.data(), int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i)
    expected[i] = 0.5 * in[i] * (1 + std::erf(in[i] / std::sqrt(2.0)));
  EXPECT_TRUE(allClose(out, expected));
}

TEST(UnaryNativeTest, IntegersWrap) {
  std::vector<int32_t> in = {0, 5, -7, std::numeric_limits<int32_t>::min(),
                             std::numeric_limits<int32_t>::max()};
  std::vector<int32_t> out(in.size());
  k::applyUnary(k::Abs(), in.data(), out.data(), int64_t(in.size()));
  EXPECT_EQ(out,
            (std::vector<int32_t>{0, 5, 7, std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max()}));
  k::applyUnary(k::Neg(), in.data(), out.data(), int64_t(in.size()));
  EXPECT_EQ(out[2], 7);
  EXPECT_EQ(out[3], std::numeric_limits<int32_t>::min());
  k::applyUnary(k::Sign(), in.data(), out.data(), int64_t(in.size()));
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, -1, -1, 1}));
  k::applyUnary(k::Relu(), in.data(), out.data(), int64_t(in.size()));
  EXPECT_EQ(out, (std::vector<int32_t>{0, 5, 0, 0,
                                       std::numeric_limits<int32_t>::max()}));
  std::vector<int64_t> in64 = {-10, 0, 10, int64_t(1) << 40};
  std::vector<int64_t> out64(in64.size());
  k::applyUnary(k::Clip{-5.0, 1e12}, in64.data(), out64.data(),
                int64_t(in64.size()));
  EXPECT_EQ(out64, (std::vector<int64_t>{-5, 0, 10, int64_t(1e12)}));
  std::vector<uint8_t> u8 = {0, 200};
  std::vector<uint8_t> u8out(2);
  k::applyUnary(k::Clip(), u8.data(), u8out.data(),
                2); // Infinite bounds saturate.
  EXPECT_EQ(u8out, u8);
}

TEST(UnaryNativeTest, IntegerShrinkAndBitwiseNot) {
  // Integers compare with the float lambd and shift by the float bias.
  std::vector<int8_t> i8 = {-128, -5, -2, -1, 0, 1, 2, 5, 127};
  std::vector<int8_t> i8out(i8.size());
  k::applyUnary(k::Shrink{1.5f, 1.0f}, i8.data(), i8out.data(),
                int64_t(i8.size()));
  EXPECT_EQ(i8out, (std::vector<int8_t>{-127, -4, -1, 0, 0, 0, 1, 4, 126}));
  std::vector<uint8_t> u8 = {0, 1, 2, 200, 255};
  std::vector<uint8_t> u8out(u8.size());
  k::applyUnary(k::Shrink{1.5f, 1.0f}, u8.data(), u8out.data(),
                int64_t(u8.size()));
  EXPECT_EQ(u8out, (std::vector<uint8_t>{0, 0, 1, 199, 254}));

  k::applyUnary(k::BitwiseNot(), i8.data(), i8out.data(), int64_t(i8.size()));
  EXPECT_EQ(i8out, (std::vector<int8_t>{127, 4, 1, 0, -1, -2, -3, -6, -128}));
  std::vector<uint16_t> u16 = {0, 0xffff, 0x00f0};
  std::vector<uint16_t> u16out(u16.size());
  k::applyUnary(k::BitwiseNot(), u16.data(), u16out.data(), 3);
  EXPECT_EQ(u16out, (std::vector<uint16_t>{0xffff, 0, 0xff0f}));
  std::vector<uint64_t> u64 = {0, 0x0123456789abcdefull};
  std::vector<uint64_t> u64out(u64.size());
  k::applyUnary(k::BitwiseNot(), u64.data(), u64out.data(), 2);
  EXPECT_EQ(u64out,
            (std::vector<uint64_t>{~uint64_t(0), 0xfedcba9876543210ull}));
}

//===----------------------------------------------------------------------===//
// Binary ops and broadcasting
//===----------------------------------------------------------------------===//

/// Test-local numpy broadcasting: the output shape, and for an output index
/// the flat index into an operand (dimension 1 repeats).
std::vector<int64_t> refBroadcastShape(const std::vector<int64_t> &a,
                                       const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t operandIndex(const std::vector<int64_t> &outIdx,
                     const std::vector<int64_t> &shape) {
  int64_t flat = 0;
  size_t off = outIdx.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    flat = flat * shape[i] + (shape[i] == 1 ? 0 : outIdx[off + i]);
  return flat;
}

struct ShapePair {
  std::vector<int64_t> a, b;
};
const ShapePair kBroadcastCases[] = {
    {{}, {}},
    {{5}, {}},
    {{}, {5}},
    {{2, 3, 4}, {4}},
    {{2, 3, 4}, {3, 1}},
    {{2, 1, 4}, {1, 3, 1}},
    {{1}, {7, 1, 9}},
    {{4, 5}, {4, 5}},
    {{0, 3}, {3}},
    {{0}, {1}},
    {{3, 1, 5}, {1, 0, 5}},
    {{2, 3, 4, 5}, {1, 3, 1, 5}},
    {{1, 1, 1}, {1}},
    {{513}, {513}},
    {{2, 600}, {600}},
    {{600, 1}, {1, 3}},
    {{3, 1}, {1, 700}},
    {{2, 1, 3, 1, 2}, {1, 4, 1, 5, 1}},
};

template <typename In, typename Out, typename Fn>
void checkBinary(const char *name, const Fn &fn,
                 const std::function<double(double, double)> &ref, double lo,
                 double hi, double blo, double bhi, bool exact = false) {
  SCOPED_TRACE(name);
  std::mt19937 rng(11);
  for (const ShapePair &c : kBroadcastCases) {
    SCOPED_TRACE(shapeString(c.a) + " op " + shapeString(c.b));
    std::vector<In> a = randomVector<In>(size_t(product(c.a)), rng, lo, hi);
    std::vector<In> b = randomVector<In>(size_t(product(c.b)), rng, blo, bhi);
    std::vector<int64_t> outShape = refBroadcastShape(c.a, c.b);
    int64_t n = product(outShape);
    std::vector<double> expected(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> idx = unravel(i, outShape);
      double r = ref(toDouble(a[size_t(operandIndex(idx, c.a))]),
                     toDouble(b[size_t(operandIndex(idx, c.b))]));
      expected[size_t(i)] = std::is_same<Out, bool>::value ? r : roundTo<In>(r);
    }
    std::unique_ptr<Out[]> out(new Out[size_t(n) + 1]);
    k::applyBinary(fn, a.data(), c.a, b.data(), c.b, out.get());
    if constexpr (std::is_same<Out, bool>::value) {
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(double(out[i]), expected[size_t(i)]) << "at " << i;
    } else {
      std::vector<Out> got(out.get(), out.get() + n);
      EXPECT_TRUE(allClose(got, expected, {},
                           exact ? Tolerance{0, 0, 0} : TypeTraits<In>::kTol));
    }
  }
}

TYPED_TEST(BinaryTest, Arithmetic) {
  using T = TypeParam;
  checkBinary<T, T>("Add", k::Add(), std::plus<double>(), -10, 10, -10, 10);
  checkBinary<T, T>("Sub", k::Sub(), std::minus<double>(), -10, 10, -10, 10);
  checkBinary<T, T>("Mul", k::Mul(), std::multiplies<double>(), -10, 10, -10,
                    10);
  checkBinary<T, T>("Div", k::Div(), std::divides<double>(), -10, 10, 0.1, 10);
  checkBinary<T, T>(
      "Pow", k::Pow(), [](double a, double b) { return std::pow(a, b); }, 0.1,
      4, -3, 3);
  checkBinary<T, T>(
      "Max", k::Max(), [](double a, double b) { return std::max(a, b); }, -10,
      10, -10, 10, true);
  checkBinary<T, T>(
      "Min", k::Min(), [](double a, double b) { return std::min(a, b); }, -10,
      10, -10, 10, true);
  checkBinary<T, T>(
      "PRelu", k::PRelu(), [](double x, double s) { return x < 0 ? s * x : x; },
      -10, 10, 0, 1);
  checkBinary<T, T>(
      "Fmod", k::Mod{true}, [](double a, double b) { return std::fmod(a, b); },
      -10, 10, 0.5, 3);
  checkBinary<T, T>(
      "Mod", k::Mod{false},
      [](double a, double b) {
        double r = std::fmod(a, b);
        return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
      },
      -10, 10, -3, 3);
}

TYPED_TEST(BinaryTest, Comparisons) {
  using T = TypeParam;
  checkBinary<T, bool>(
      "Less", k::Less(), [](double a, double b) { return a < b ? 1.0 : 0.0; },
      -2, 2, -2, 2);
  checkBinary<T, bool>(
      "Greater", k::Greater(),
      [](double a, double b) { return a > b ? 1.0 : 0.0; }, -2, 2, -2, 2);
  checkBinary<T, bool>(
      "LessOrEqual", k::LessOrEqual(),
      [](double a, double b) { return a <= b ? 1.0 : 0.0; }, -2, 2, -2, 2);
  checkBinary<T, bool>(
      "GreaterOrEqual", k::GreaterOrEqual(),
      [](double a, double b) { return a >= b ? 1.0 : 0.0; }, -2, 2, -2, 2);
  // Equality on integral values.
  std::vector<T> a, b;
  for (int i = 0; i < 700; ++i) {
    a.push_back(fromDouble<T>(i % 5));
    b.push_back(fromDouble<T>(i % 3));
  }
  a.push_back(fromDouble<T>(kNaN));
  b.push_back(fromDouble<T>(kNaN));
  std::unique_ptr<bool[]> out(new bool[a.size()]);
  std::vector<int64_t> shape = {int64_t(a.size())};
  k::applyBinary(k::Equal(), a.data(), shape, b.data(), shape, out.get());
  for (size_t i = 0; i + 1 < a.size(); ++i)
    ASSERT_EQ(out[i], i % 5 == i % 3) << i;
  EXPECT_FALSE(out[a.size() - 1]) << "NaN == NaN";
}

TYPED_TEST(BinaryTest, NaNPropagatesThroughMaxMin) {
  using T = TypeParam;
  std::vector<T> a = {fromDouble<T>(kNaN), fromDouble<T>(1.0),
                      fromDouble<T>(2.0)};
  std::vector<T> b = {fromDouble<T>(1.0), fromDouble<T>(kNaN),
                      fromDouble<T>(-kInf)};
  std::vector<T> out(3);
  std::vector<int64_t> shape = {3};
  k::applyBinary(k::Max(), a.data(), shape, b.data(), shape, out.data());
  EXPECT_TRUE(std::isnan(toDouble(out[0])));
  EXPECT_TRUE(std::isnan(toDouble(out[1])));
  EXPECT_EQ(toDouble(out[2]), 2.0);
  k::applyBinary(k::Min(), a.data(), shape, b.data(), shape, out.data());
  EXPECT_TRUE(std::isnan(toDouble(out[0])));
  EXPECT_TRUE(std::isnan(toDouble(out[1])));
  EXPECT_EQ(toDouble(out[2]), -kInf);
}

TEST(BinaryNativeTest, IntegerSemantics) {
  std::vector<int32_t> a = {
      7, -7, 7, -7, 5, std::numeric_limits<int32_t>::min(), 3};
  std::vector<int32_t> b = {2, 2, -2, -2, 0, -1, 4};
  std::vector<int32_t> out(a.size());
  std::vector<int64_t> shape = {int64_t(a.size())};
  k::applyBinary(k::Div(), a.data(), shape, b.data(), shape, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{
                     3, -3, -3, 3, 0, std::numeric_limits<int32_t>::min(), 0}));
  k::applyBinary(k::Mod(), a.data(), shape, b.data(), shape, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, -1, -1, 0, 0, 3})); // Python %.
  k::applyBinary(k::Mod{true}, a.data(), shape, b.data(), shape, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, -1, 1, -1, 0, 0, 3})); // C fmod.
  k::applyBinary(k::Pow(), a.data(), shape, b.data(), shape, out.data());
  EXPECT_EQ(out[0], 49);
  EXPECT_EQ(out[1], 49);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[4], 1);
  EXPECT_EQ(out[6], 81);
  std::vector<int32_t> big = {std::numeric_limits<int32_t>::max()};
  std::vector<int32_t> one = {1};
  std::vector<int64_t> s1 = {1};
  k::applyBinary(k::Add(), big.data(), s1, one.data(), s1, out.data());
  EXPECT_EQ(out[0], std::numeric_limits<int32_t>::min()); // Wraps.
  std::vector<uint16_t> u = {65535};
  std::vector<uint16_t> uout(1);
  k::applyBinary(k::Mul(), u.data(), s1, u.data(), s1, uout.data());
  EXPECT_EQ(uout[0], 1); // 65535^2 mod 2^16, no int overflow.
}

/// Random bit patterns of T (every bit equally likely).
template <typename T>
std::vector<T> randomBits(size_t n, std::mt19937_64 &rng) {
  std::vector<T> v(n);
  for (T &x : v)
    x = T(rng());
  return v;
}

/// And, Or and Xor of every integer type, broadcast, bit for bit against the
/// built-in operators.
template <typename T> void checkBitwise() {
  SCOPED_TRACE(sizeof(T) * 8);
  std::mt19937_64 rng(17);
  for (const ShapePair &c : kBroadcastCases) {
    SCOPED_TRACE(shapeString(c.a) + " op " + shapeString(c.b));
    std::vector<T> a = randomBits<T>(size_t(product(c.a)), rng);
    std::vector<T> b = randomBits<T>(size_t(product(c.b)), rng);
    std::vector<int64_t> outShape = refBroadcastShape(c.a, c.b);
    size_t n = size_t(product(outShape));
    std::vector<T> andOut(n), orOut(n), xorOut(n);
    k::applyBinary(k::BitwiseAnd(), a.data(), c.a, b.data(), c.b,
                   andOut.data());
    k::applyBinary(k::BitwiseOr(), a.data(), c.a, b.data(), c.b, orOut.data());
    k::applyBinary(k::BitwiseXor(), a.data(), c.a, b.data(), c.b,
                   xorOut.data());
    for (size_t i = 0; i < n; ++i) {
      std::vector<int64_t> idx = unravel(int64_t(i), outShape);
      T x = a[size_t(operandIndex(idx, c.a))];
      T y = b[size_t(operandIndex(idx, c.b))];
      ASSERT_EQ(andOut[i], T(x & y)) << "And at " << i;
      ASSERT_EQ(orOut[i], T(x | y)) << "Or at " << i;
      ASSERT_EQ(xorOut[i], T(x ^ y)) << "Xor at " << i;
    }
  }
}

TEST(BinaryNativeTest, BitwiseIsExact) {
  checkBitwise<int8_t>();
  checkBitwise<int16_t>();
  checkBitwise<int32_t>();
  checkBitwise<int64_t>();
  checkBitwise<uint8_t>();
  checkBitwise<uint16_t>();
  checkBitwise<uint32_t>();
  checkBitwise<uint64_t>();
}

TEST(BinaryNativeTest, BitShift) {
  std::vector<uint8_t> a = {1, 0x80, 0xff, 3, 0xff};
  std::vector<uint8_t> s = {1, 1, 8, 9, 4};
  std::vector<uint8_t> out(a.size());
  std::vector<int64_t> shape = {int64_t(a.size())};
  k::applyBinary(k::BitShift{true}, a.data(), shape, s.data(), shape,
                 out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{2, 0, 0, 0, 0xf0})); // Bits drop off.
  k::applyBinary(k::BitShift{false}, a.data(), shape, s.data(), shape,
                 out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{0, 0x40, 0, 0, 0x0f}));
  // A broadcast shift amount; shifts of the width or more give 0.
  std::vector<uint64_t> w = {1, 0x8000000000000000ull, 12345};
  std::vector<uint64_t> n63 = {63}, n64 = {64};
  std::vector<uint64_t> wout(3);
  std::vector<int64_t> ws = {3}, s1 = {1};
  k::applyBinary(k::BitShift{true}, w.data(), ws, n63.data(), s1, wout.data());
  EXPECT_EQ(wout, (std::vector<uint64_t>{0x8000000000000000ull, 0,
                                         0x8000000000000000ull}));
  k::applyBinary(k::BitShift{false}, w.data(), ws, n63.data(), s1, wout.data());
  EXPECT_EQ(wout, (std::vector<uint64_t>{0, 1, 0}));
  k::applyBinary(k::BitShift{false}, w.data(), ws, n64.data(), s1, wout.data());
  EXPECT_EQ(wout, (std::vector<uint64_t>{0, 0, 0}));
  std::vector<uint32_t> v = {16, 0xffffffffu}, sh = {2, 31};
  std::vector<uint32_t> vout(2);
  std::vector<int64_t> vs = {2};
  k::applyBinary(k::BitShift{false}, v.data(), vs, sh.data(), vs, vout.data());
  EXPECT_EQ(vout, (std::vector<uint32_t>{4, 1}));
}

TEST(BinaryNativeTest, DoubleBroadcast) {
  std::mt19937 rng(5);
  std::vector<int64_t> as = {3, 1, 4}, bs = {5, 1};
  std::vector<double> a = randomVector<double>(12, rng),
                      b = randomVector<double>(5, rng);
  std::vector<double> out(60), expected(60);
  k::applyBinary(k::Sub(), a.data(), as, b.data(), bs, out.data());
  for (int64_t i = 0; i < 60; ++i) {
    std::vector<int64_t> idx = unravel(i, {3, 5, 4});
    expected[size_t(i)] =
        a[size_t(operandIndex(idx, as))] - b[size_t(operandIndex(idx, bs))];
  }
  EXPECT_TRUE(allClose(out, expected, {}, {0, 0, 0}));
}

TEST(BroadcastPlanTest, CollapsesDimensions) {
  k::BroadcastPlan p = k::makeBroadcastPlan({2, 3, 4, 5}, {2, 3, 4, 5});
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.dims[0], 120);
  p = k::makeBroadcastPlan({8, 16, 7, 7}, {1, 16, 1, 1});
  ASSERT_EQ(p.rank, 3);
  EXPECT_EQ(p.dims[0], 8);
  EXPECT_EQ(p.dims[1], 16);
  EXPECT_EQ(p.dims[2], 49);
  EXPECT_EQ(p.bStrides[1], 1);
  EXPECT_EQ(p.bStrides[2], 0);
  p = k::makeBroadcastPlan({}, {});
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.numElements, 1);
  llvm::SmallVector<int64_t, 4> out;
  EXPECT_FALSE(k::broadcastShapes({2, 3}, {4}, out));
  EXPECT_TRUE(k::broadcastShapes({0, 1}, {1, 5}, out));
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.end()),
            (std::vector<int64_t>{0, 5}));
}

//===----------------------------------------------------------------------===//
// Baseline vs AVX2 builds of the loops
//===----------------------------------------------------------------------===//

/// Runs body once per CPU ISA and checks that the outputs it returns are
/// bit-identical (no FMA contraction, same math in both builds).
template <typename T, typename Body>
void checkIsaParity(const char *name, Body body) {
  SCOPED_TRACE(name);
  k::setCpuIsa(k::CpuIsa::Baseline);
  std::vector<T> baseline = body();
  k::setCpuIsa(k::CpuIsa::Avx2);
  std::vector<T> avx2 = body();
  ASSERT_EQ(baseline.size(), avx2.size());
  EXPECT_EQ(
      std::memcmp(baseline.data(), avx2.data(), baseline.size() * sizeof(T)),
      0);
}

TYPED_TEST(UnaryTest, BaselineAndAvx2AgreeBitwise) {
  using T = TypeParam;
  if (k::detectCpuIsa() != k::CpuIsa::Avx2)
    GTEST_SKIP() << "the CPU has no AVX2";
  std::mt19937 rng(21);
  std::vector<T> a = randomVector<T>(3001, rng, -12, 12);
  std::vector<T> b = randomVector<T>(3001, rng, 0.5, 3);
  std::vector<double> edges = edgeInputs();
  for (size_t i = 0; i < edges.size(); ++i)
    a[i * 100] = fromDouble<T>(edges[i]);
  auto unary = [&](auto fn) {
    return [&a, fn] {
      std::vector<T> out(a.size());
      k::applyUnary(fn, a.data(), out.data(), int64_t(a.size()));
      return out;
    };
  };
  checkIsaParity<T>("Exp", unary(k::Exp()));
  checkIsaParity<T>("Tanh", unary(k::Tanh()));
  checkIsaParity<T>("Erf", unary(k::Erf()));
  checkIsaParity<T>("Gelu", unary(k::Gelu()));
  checkIsaParity<T>("GeluTanh", unary(k::Gelu{true}));
  checkIsaParity<T>("Sigmoid", unary(k::Sigmoid()));
  checkIsaParity<T>("Mish", unary(k::Mish()));
  checkIsaParity<T>("HardSwish", unary(k::HardSwish()));
  checkIsaParity<T>("Relu", unary(k::Relu()));
  std::vector<int64_t> as = {3, 1, 3001}, bs = {3001};
  std::vector<T> a3(3 * 3001);
  for (size_t i = 0; i < a3.size(); ++i)
    a3[i] = a[i % a.size()];
  checkIsaParity<T>("Div broadcast", [&] {
    std::vector<T> out(a3.size());
    k::applyBinary(k::Div(), a3.data(), as, b.data(), bs, out.data());
    return out;
  });
  checkIsaParity<T>("Pow broadcast", [&] {
    std::vector<T> out(a3.size());
    k::applyBinary(k::Pow(), b.data(), bs, a3.data(), as, out.data());
    return out;
  });
  k::setCpuIsa(k::detectCpuIsa());
}

TEST(ToleranceTest, ComparatorRejectsOneUlpTooMany) {
  // The comparator must be able to fail: two fp16 ulps off is rejected.
  std::vector<Half> got = {Half::fromBits(0x3c02)}; // 1 + 2^-9
  EXPECT_FALSE(allClose(got, {1.0}));
  got[0] = Half::fromBits(0x3c01);
  EXPECT_TRUE(allClose(got, {1.0}));
  std::vector<float> f = {1.0f + 3e-5f};
  EXPECT_FALSE(allClose(f, {1.0}));
}

} // namespace
