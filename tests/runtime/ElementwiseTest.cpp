//===- ElementwiseTest.cpp - Element-wise op bodies and loops -------------===//
//
// Every unary and binary element-wise node for f32, f16, bf16 and f64 against
// double-precision formulas written here (rounded to the storage type), on
// every selected device through the op tester (OpTester.h), over sizes
// around the block length and with edge values; numpy broadcasting against
// an independent index computation; integer and double storage computed
// natively; bitwise ops bit for bit on every integer type, And/Or/Xor/Not
// over bool. CPU internals stay
// CPU-only and call the loops directly: in-place loops (y aliasing x), the
// broadcast plan's dimension collapsing and the baseline/AVX2 agreement.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Elementwise.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

#include "OpTester.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

using namespace mpc;
using namespace mpc::optest;
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

class UnaryTest : public DeviceTypeTest {};
class BinaryTest : public DeviceTypeTest {};
class NativeTest : public DeviceTest {};
#define INSTANTIATE_STORAGE_TYPES(Suite)                                                \
  INSTANTIATE_TEST_SUITE_P(                                                            \
      Devices, Suite,                                                                  \
      ::testing::ValuesIn(deviceTypeParams({DType::F32, DType::F16, DType::BF16, DType::F64})), \
      DeviceName())
INSTANTIATE_STORAGE_TYPES(UnaryTest);
INSTANTIATE_STORAGE_TYPES(BinaryTest);
OPTEST_INSTANTIATE_DEVICES(NativeTest);
template <typename T> class CpuUnaryTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, Half, BFloat16>;
TYPED_TEST_SUITE(CpuUnaryTest, StorageTypes);

/// An element-wise node: op type, opset and what it takes besides its data
/// inputs (attributes, constant bound inputs).
struct NodeSpec {
  const char *op;
  int64_t opset;
  std::function<void(OpTester &)> extra = nullptr;
};

/// The node of `spec` over `inputs`.
OpTester nodeOf(const NodeSpec &spec, std::vector<HostTensor> inputs) {
  OpTester t(spec.op, spec.opset);
  for (HostTensor &x : inputs)
    t.input(std::move(x));
  if (spec.extra)
    spec.extra(t);
  return t;
}

/// Runs the node of `spec` over 1-D inputs and returns its output as Out.
template <typename Out, typename In>
std::vector<Out> runUnary(const std::string &device, const NodeSpec &spec,
                          const std::vector<In> &in) {
  return runOutput<Out>(nodeOf(spec, {tensorOf<In>({int64_t(in.size())}, in)}), device);
}
template <typename Out, typename In>
std::vector<Out> runBinary(const std::string &device, const NodeSpec &spec,
                           const std::vector<In> &a, const std::vector<In> &b) {
  return runOutput<Out>(nodeOf(spec, {tensorOf<In>({int64_t(a.size())}, a),
                                      tensorOf<In>({int64_t(b.size())}, b)}),
                        device);
}

/// Random inputs in [lo, hi) of each size of kSizes, with the edge values on
/// the sizes above 100.
template <typename T>
std::vector<std::vector<T>> unaryInputs(double lo, double hi, bool withEdges) {
  std::mt19937 rng(7);
  std::vector<std::vector<T>> out;
  for (int64_t n : kSizes) {
    std::vector<T> in = randomVector<T>(size_t(n), rng, lo, hi);
    if (withEdges && n > 100) {
      std::vector<double> edges = edgeInputs();
      size_t step = in.size() / edges.size();
      for (size_t i = 0; i < edges.size(); ++i)
        in[i * step] = fromDouble<T>(edges[i]);
    }
    out.push_back(std::move(in));
  }
  return out;
}

/// Runs the node over random inputs in [lo, hi) plus the edge values and
/// compares with ref.
template <typename T>
void checkUnary(const std::string &device, const NodeSpec &spec,
                const std::function<double(double)> &ref, double lo, double hi,
                bool withEdges = true) {
  SCOPED_TRACE(spec.op);
  for (const std::vector<T> &in : unaryInputs<T>(lo, hi, withEdges)) {
    SCOPED_TRACE("n = " + std::to_string(in.size()));
    std::vector<double> expected(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      expected[i] = roundTo<T>(ref(toDouble(in[i])));
    EXPECT_TRUE(allClose(runUnary<T>(device, spec, in), expected));
  }
}

/// CPU internal: the unary loop computing in place (out == in) gives the
/// bits of the separate-buffer loop, on the largest size with edge values.
template <typename T, typename Fn> void checkInPlace(const char *name, const Fn &fn) {
  SCOPED_TRACE(name);
  std::vector<T> in = unaryInputs<T>(-5, 5, true).back(), out(in.size());
  k::applyUnary(fn, in.data(), out.data(), int64_t(in.size()));
  k::applyUnary(fn, in.data(), in.data(), int64_t(in.size()));
  EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size() * sizeof(T)), 0);
}

TYPED_TEST(CpuUnaryTest, InPlaceMatchesSeparateBuffers) {
  using T = TypeParam;
  checkInPlace<T>("Relu", k::Relu());
  checkInPlace<T>("LeakyRelu", k::LeakyRelu{0.1f});
  checkInPlace<T>("ThresholdedRelu", k::ThresholdedRelu{0.75f});
  checkInPlace<T>("Sigmoid", k::Sigmoid());
  checkInPlace<T>("HardSigmoid", k::HardSigmoid{0.3f, 0.4f});
  checkInPlace<T>("HardSwish", k::HardSwish());
  checkInPlace<T>("Tanh", k::Tanh());
  checkInPlace<T>("Elu", k::Elu{0.7f});
  checkInPlace<T>("Selu", k::Selu());
  checkInPlace<T>("Celu", k::Celu{1.5f});
  checkInPlace<T>("Softplus", k::Softplus());
  checkInPlace<T>("Softsign", k::Softsign());
  checkInPlace<T>("Mish", k::Mish());
  checkInPlace<T>("Gelu", k::Gelu());
  checkInPlace<T>("GeluTanh", k::Gelu{true});
  checkInPlace<T>("Exp", k::Exp());
  checkInPlace<T>("Log", k::Log());
  checkInPlace<T>("Sqrt", k::Sqrt());
  checkInPlace<T>("Reciprocal", k::Reciprocal());
  checkInPlace<T>("Neg", k::Neg());
  checkInPlace<T>("Abs", k::Abs());
  checkInPlace<T>("Erf", k::Erf());
  checkInPlace<T>("Sign", k::Sign());
  checkInPlace<T>("Ceil", k::Ceil());
  checkInPlace<T>("Floor", k::Floor());
  checkInPlace<T>("Sin", k::Sin());
  checkInPlace<T>("Cos", k::Cos());
  checkInPlace<T>("Clip", k::Clip{-0.5, 0.25});
  checkInPlace<T>("Tan", k::Tan());
  checkInPlace<T>("Asin", k::Asin());
  checkInPlace<T>("Acos", k::Acos());
  checkInPlace<T>("Atan", k::Atan());
  checkInPlace<T>("Sinh", k::Sinh());
  checkInPlace<T>("Cosh", k::Cosh());
  checkInPlace<T>("Asinh", k::Asinh());
  checkInPlace<T>("Acosh", k::Acosh());
  checkInPlace<T>("Atanh", k::Atanh());
  checkInPlace<T>("Swish", k::Swish{0.5f});
  checkInPlace<T>("Shrink", k::Shrink{1.5f, 1.5f});
  checkInPlace<T>("Round", k::Round());
}

/// Clip-13 with constant bounds of type T.
template <typename T> NodeSpec clipNode(double lo, double hi) {
  return {"Clip", 13, [lo, hi](OpTester &t) {
            t.constantInput(tensorOf<T>({}, {fromDouble<T>(lo)}));
            t.constantInput(tensorOf<T>({}, {fromDouble<T>(hi)}));
          }};
}

OPTEST_TYPED_P(UnaryTest, Activations) {
  checkUnary<T>(
      device, {"Relu", 14}, [](double x) { return x < 0 ? 0.0 : x; }, -5, 5);
  checkUnary<T>(
      device, {"LeakyRelu", 16, [](OpTester &t) { t.attrFloat("alpha", 0.1f); }},
      [](double x) { return x < 0 ? double(0.1f) * x : x; }, -5, 5);
  checkUnary<T>(
      device, {"ThresholdedRelu", 10, [](OpTester &t) { t.attrFloat("alpha", 0.75f); }},
      [](double x) { return x > 0.75 ? x : 0.0; }, -5, 5);
  checkUnary<T>(
      device, {"Sigmoid", 13}, [](double x) { return 1 / (1 + std::exp(-x)); },
      -12, 12);
  checkUnary<T>(
      device, {"HardSigmoid", 6, [](OpTester &t) { t.attrFloat("alpha", 0.3f).attrFloat("beta", 0.4f); }},
      [](double x) {
        double v = double(0.3f) * x + double(0.4f);
        return std::isnan(v) ? v : std::min(1.0, std::max(0.0, v));
      },
      -5, 5);
  checkUnary<T>(
      device, {"HardSwish", 14},
      [](double x) {
        double v = x / 6 + 0.5;
        return x * (std::isnan(v) ? v : std::min(1.0, std::max(0.0, v)));
      },
      -6, 6);
  checkUnary<T>(
      device, {"Tanh", 13}, [](double x) { return std::tanh(x); }, -6, 6);
  checkUnary<T>(
      device, {"Elu", 6, [](OpTester &t) { t.attrFloat("alpha", 0.7f); }},
      [](double x) { return x >= 0 ? x : double(0.7f) * (std::exp(x) - 1); },
      -6, 4);
  checkUnary<T>(
      device, {"Selu", 6},
      [](double x) {
        double a = double(1.67326319217681884765625f);
        double g = double(1.05070102214813232421875f);
        return x > 0 ? g * x : g * (a * std::exp(x) - a);
      },
      -6, 4);
  checkUnary<T>(
      device, {"Celu", 12, [](OpTester &t) { t.attrFloat("alpha", 1.5f); }},
      [](double x) {
        return std::max(0.0, x) + std::min(0.0, 1.5 * (std::exp(x / 1.5) - 1));
      },
      -6, 4, /*withEdges=*/false);
  checkUnary<T>(
      device, {"Softplus", 1},
      [](double x) { // exp overflows double beyond 709.
        return x > 700 ? x : std::log1p(std::exp(x));
      },
      -15, 15);
  checkUnary<T>(
      device, {"Softsign", 1},
      [](double x) { return x / (1 + std::fabs(x)); }, -8, 8);
  checkUnary<T>(
      device, {"Mish", 18},
      [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, -8, 8);
  checkUnary<T>(
      device, {"Gelu", 20},
      [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -5,
      5);
  checkUnary<T>(
      device, {"Gelu", 20, [](OpTester &t) { t.attrString("approximate", "tanh"); }},
      [](double x) {
        const double c = std::sqrt(2.0 / M_PI);
        return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
      },
      -5, 5);
}

OPTEST_TYPED_P(UnaryTest, Arithmetic) {
  checkUnary<T>(
      device, {"Exp", 13}, [](double x) { return std::exp(x); }, -10, 10);
  checkUnary<T>(
      device, {"Log", 13}, [](double x) { return std::log(x); }, 0, 100);
  checkUnary<T>(
      device, {"Sqrt", 13}, [](double x) { return std::sqrt(x); }, 0, 100);
  checkUnary<T>(
      device, {"Reciprocal", 13}, [](double x) { return 1 / x; }, 0.01, 50);
  checkUnary<T>(
      device, {"Neg", 13}, [](double x) { return -x; }, -5, 5);
  checkUnary<T>(
      device, {"Abs", 13}, [](double x) { return std::fabs(x); }, -5, 5);
  checkUnary<T>(
      device, {"Erf", 13}, [](double x) { return std::erf(x); }, -4, 4);
  checkUnary<T>(
      device, {"Sign", 13},
      [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }, -3, 3);
  checkUnary<T>(
      device, {"Ceil", 13}, [](double x) { return std::ceil(x); }, -50, 50);
  checkUnary<T>(
      device, {"Floor", 13}, [](double x) { return std::floor(x); }, -50, 50);
  checkUnary<T>(
      device, {"Sin", 7}, [](double x) { return std::sin(x); }, -10, 10,
      /*withEdges=*/false);
  checkUnary<T>(
      device, {"Cos", 7}, [](double x) { return std::cos(x); }, -10, 10,
      /*withEdges=*/false);
  checkUnary<T>(
      device, clipNode<T>(-0.5, 0.25),
      [](double x) {
        return std::isnan(x) ? x : std::min(0.25, std::max(-0.5, x));
      },
      -2, 2);
  checkUnary<T>(
      device, {"Clip", 13}, [](double x) { return x; }, -2, 2);
  // Bounds as graph inputs (device values on a GPU, read by the kernel), one
  // of them absent, crossing bounds (max wins), and Clip-6's attributes.
  auto bound = [](OpTester &t, double v) { t.input<T>({}, {fromDouble<T>(v)}); };
  checkUnary<T>(
      device, {"Clip", 13, [&](OpTester &t) { bound(t, -0.5), bound(t, 0.25); }},
      [](double x) { return std::isnan(x) ? x : std::min(0.25, std::max(-0.5, x)); }, -2, 2);
  checkUnary<T>(
      device, {"Clip", 13, [&](OpTester &t) { t.absentInput(), bound(t, 0.75); }},
      [](double x) { return std::isnan(x) ? x : std::min(0.75, x); }, -2, 2);
  checkUnary<T>(
      device, {"Clip", 12, [&](OpTester &t) { bound(t, -1.25); }},
      [](double x) { return std::isnan(x) ? x : std::max(-1.25, x); }, -2, 2);
  checkUnary<T>(
      device, {"Clip", 13, [&](OpTester &t) { bound(t, 1.0), bound(t, -1.0); }},
      [](double x) { return std::isnan(x) ? x : -1.0; }, -2, 2);
  checkUnary<T>(
      device, {"Clip", 6, [](OpTester &t) { t.attrFloat("min", -0.5f).attrFloat("max", 0.25f); }},
      [](double x) { return std::isnan(x) ? x : std::min(0.25, std::max(-0.5, x)); }, -2, 2);
}

OPTEST_TYPED_P(UnaryTest, TrigonometricAndHyperbolic) {
  checkUnary<T>(
      device, {"Tan", 7}, [](double x) { return std::tan(x); }, -1.4, 1.4,
      /*withEdges=*/false);
  checkUnary<T>(
      device, {"Asin", 7}, [](double x) { return std::asin(x); }, -1, 1);
  checkUnary<T>(
      device, {"Acos", 7}, [](double x) { return std::acos(x); }, -1, 1);
  checkUnary<T>(
      device, {"Atan", 7}, [](double x) { return std::atan(x); }, -20, 20);
  checkUnary<T>(
      device, {"Sinh", 9}, [](double x) { return std::sinh(x); }, -10, 10);
  checkUnary<T>(
      device, {"Cosh", 9}, [](double x) { return std::cosh(x); }, -10, 10);
  checkUnary<T>(
      device, {"Asinh", 9}, [](double x) { return std::asinh(x); }, -100, 100);
  checkUnary<T>(
      device, {"Acosh", 9}, [](double x) { return std::acosh(x); }, 1, 100);
  checkUnary<T>(
      device, {"Atanh", 9}, [](double x) { return std::atanh(x); }, -0.99, 0.99);
}

OPTEST_TYPED_P(UnaryTest, SwishAndShrink) {
  checkUnary<T>(
      device, {"Swish", 24}, [](double x) { return x / (1 + std::exp(-x)); }, -12,
      12);
  checkUnary<T>(
      device, {"Swish", 24, [](OpTester &t) { t.attrFloat("alpha", 0.5f); }},
      [](double x) { return x / (1 + std::exp(-0.5 * x)); }, -12, 12);
  checkUnary<T>(
      device, {"Shrink", 9},
      [](double x) { return x < -0.5 ? x : (x > 0.5 ? x : 0.0); }, -3, 3);
  checkUnary<T>(
      device, {"Shrink", 9, [](OpTester &t) { t.attrFloat("lambd", 1.5f).attrFloat("bias", 1.5f); }},
      [](double x) { return x < -1.5 ? x + 1.5 : (x > 1.5 ? x - 1.5 : 0.0); },
      -5, 5);
}

OPTEST_TYPED_P(UnaryTest, RoundHalvesToEven) {
  // Multiples of 0.25 in [-8, 8) hit every tie; nearbyint rounds ties to even.
  std::vector<T> in;
  for (int i = -32; i < 32; ++i)
    in.push_back(fromDouble<T>(i * 0.25));
  std::vector<double> expected;
  for (T v : in)
    expected.push_back(std::nearbyint(toDouble(v)));
  std::vector<T> out = runUnary<T>(device, {"Round", 11}, in);
  ASSERT_EQ(out.size(), in.size());
  EXPECT_TRUE(allClose(out, expected, {}, {0, 0, 0}));
  EXPECT_EQ(toDouble(out[32 + 10]), 2.0);  // 2.5
  EXPECT_EQ(toDouble(out[32 + 14]), 4.0);  // 3.5
  EXPECT_EQ(toDouble(out[32 - 10]), -2.0); // -2.5
}

OPTEST_TYPED_P(UnaryTest, Predicates) {
  std::vector<double> values = {0.0, -1.0, kInf, -kInf, kNaN, 3.0, -kNaN, 1e-3};
  for (int i = 0; i < 600; ++i) // Longer than one block.
    values.push_back(i % 3 == 0 ? kInf : (i % 3 == 1 ? kNaN : i));
  std::vector<T> in;
  for (double v : values)
    in.push_back(fromDouble<T>(v));
  auto check = [&](const char *name, const NodeSpec &spec, std::function<bool(double)> ref) {
    std::vector<bool> out = runUnary<bool>(device, spec, in);
    ASSERT_EQ(out.size(), in.size()) << name;
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], ref(values[i])) << name << " at " << i;
  };
  auto isInf = [](int negative, int positive) {
    return NodeSpec{"IsInf", 10, [=](OpTester &t) {
                      t.attrInt("detect_negative", negative).attrInt("detect_positive", positive);
                    }};
  };
  check("IsNaN", {"IsNaN", 13}, [](double x) { return std::isnan(x); });
  check("IsInf", {"IsInf", 10}, [](double x) { return std::isinf(x); });
  check("IsInf+", isInf(0, 1), [](double x) { return x == kInf; });
  check("IsInf-", isInf(1, 0), [](double x) { return x == -kInf; });
}

TEST_P(NativeTest, DoubleComputesInDouble) {
  std::mt19937 rng(3);
  std::vector<double> in = randomVector<double>(777, rng, -3, 3);
  std::vector<double> out = runUnary<double>(device(), {"Exp", 13}, in), expected(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    expected[i] = std::exp(in[i]);
  EXPECT_TRUE(allClose(out, expected));
  out = runUnary<double>(device(), {"Gelu", 20}, in);
  for (size_t i = 0; i < in.size(); ++i)
    expected[i] = 0.5 * in[i] * (1 + std::erf(in[i] / std::sqrt(2.0)));
  EXPECT_TRUE(allClose(out, expected));
}

TEST_P(NativeTest, IntegersWrap) {
  std::vector<int32_t> in = {0, 5, -7, std::numeric_limits<int32_t>::min(),
                             std::numeric_limits<int32_t>::max()};
  std::vector<int32_t> out = runUnary<int32_t>(device(), {"Abs", 13}, in);
  EXPECT_EQ(out,
            (std::vector<int32_t>{0, 5, 7, std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max()}));
  out = runUnary<int32_t>(device(), {"Neg", 13}, in);
  ASSERT_EQ(out.size(), in.size());
  EXPECT_EQ(out[2], 7);
  EXPECT_EQ(out[3], std::numeric_limits<int32_t>::min());
  out = runUnary<int32_t>(device(), {"Sign", 13}, in);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1, -1, -1, 1}));
  out = runUnary<int32_t>(device(), {"Relu", 14}, in);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 5, 0, 0,
                                       std::numeric_limits<int32_t>::max()}));
  std::vector<int64_t> in64 = {-10, 0, 10, int64_t(1) << 40};
  NodeSpec clip64 = {"Clip", 13, [](OpTester &t) {
                       t.constantInput(tensorOf<int64_t>({}, {-5}));
                       t.constantInput(tensorOf<int64_t>({}, {int64_t(1e12)}));
                     }};
  std::vector<int64_t> out64 = runUnary<int64_t>(device(), clip64, in64);
  EXPECT_EQ(out64, (std::vector<int64_t>{-5, 0, 10, int64_t(1e12)}));
  // Integer bounds as graph inputs (read on the device by a GPU's kernel).
  NodeSpec clip32 = {"Clip", 13, [](OpTester &t) {
                       t.input<int32_t>({}, {-3});
                       t.input<int32_t>({}, {6});
                     }};
  out = runUnary<int32_t>(device(), clip32, in);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 5, -3, -3, 6}));
}

// CPU internal: the loops over unsigned types the CPU rows of Clip and Mul
// do not register (their nodes are refused as unsupported for u8/u16).
TEST(CpuLoopTest, UnsignedTypesWithoutANode) {
  std::vector<uint8_t> u8 = {0, 200};
  std::vector<uint8_t> u8out(2);
  k::applyUnary(k::Clip(), u8.data(), u8out.data(),
                2); // Infinite bounds saturate.
  EXPECT_EQ(u8out, u8);
  std::vector<uint16_t> u = {65535};
  std::vector<uint16_t> uout(1);
  std::vector<int64_t> s1 = {1};
  k::applyBinary(k::Mul(), u.data(), s1, u.data(), s1, uout.data());
  EXPECT_EQ(uout[0], 1); // 65535^2 mod 2^16, no int overflow.
}

TEST_P(NativeTest, IntegerShrinkAndBitwiseNot) {
  // Integers compare with the float lambd and shift by the float bias.
  NodeSpec shrink = {"Shrink", 9, [](OpTester &t) {
                       t.attrFloat("lambd", 1.5f).attrFloat("bias", 1.0f);
                     }};
  std::vector<int8_t> i8 = {-128, -5, -2, -1, 0, 1, 2, 5, 127};
  EXPECT_EQ(runUnary<int8_t>(device(), shrink, i8), (std::vector<int8_t>{-127, -4, -1, 0, 0, 0, 1, 4, 126}));
  std::vector<uint8_t> u8 = {0, 1, 2, 200, 255};
  EXPECT_EQ(runUnary<uint8_t>(device(), shrink, u8), (std::vector<uint8_t>{0, 0, 1, 199, 254}));

  EXPECT_EQ(runUnary<int8_t>(device(), {"BitwiseNot", 18}, i8), (std::vector<int8_t>{127, 4, 1, 0, -1, -2, -3, -6, -128}));
  std::vector<uint16_t> u16 = {0, 0xffff, 0x00f0};
  EXPECT_EQ(runUnary<uint16_t>(device(), {"BitwiseNot", 18}, u16), (std::vector<uint16_t>{0xffff, 0, 0xff0f}));
  std::vector<uint64_t> u64 = {0, 0x0123456789abcdefull};
  EXPECT_EQ(runUnary<uint64_t>(device(), {"BitwiseNot", 18}, u64),
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

template <typename In, typename Out>
void checkBinary(const std::string &device, const NodeSpec &spec,
                 const std::function<double(double, double)> &ref, double lo,
                 double hi, double blo, double bhi, bool exact = false) {
  SCOPED_TRACE(spec.op);
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
    std::vector<HostTensor> out =
        runOrFail(nodeOf(spec, {tensorOf<In>(c.a, a), tensorOf<In>(c.b, b)}), device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, outShape);
    std::vector<Out> got = valuesOf<Out>(out[0]);
    ASSERT_EQ(int64_t(got.size()), n);
    if constexpr (std::is_same<Out, bool>::value) {
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(double(got[size_t(i)]), expected[size_t(i)]) << "at " << i;
    } else {
      EXPECT_TRUE(allClose(got, expected, {},
                           exact ? Tolerance{0, 0, 0} : TypeTraits<In>::kTol));
    }
  }
}

OPTEST_TYPED_P(BinaryTest, Arithmetic) {
  checkBinary<T, T>(
      device, {"Add", 14}, std::plus<double>(), -10, 10, -10, 10);
  checkBinary<T, T>(
      device, {"Sub", 14}, std::minus<double>(), -10, 10, -10, 10);
  checkBinary<T, T>(
      device, {"Mul", 14}, std::multiplies<double>(), -10, 10, -10,
                    10);
  checkBinary<T, T>(
      device, {"Div", 14}, std::divides<double>(), -10, 10, 0.1, 10);
  checkBinary<T, T>(
      device, {"Pow", 15}, [](double a, double b) { return std::pow(a, b); }, 0.1,
      4, -3, 3);
  checkBinary<T, T>(
      device, {"Max", 13}, [](double a, double b) { return std::max(a, b); }, -10,
      10, -10, 10, true);
  checkBinary<T, T>(
      device, {"Min", 13}, [](double a, double b) { return std::min(a, b); }, -10,
      10, -10, 10, true);
  checkBinary<T, T>(
      device, {"PRelu", 16}, [](double x, double s) { return x < 0 ? s * x : x; },
      -10, 10, 0, 1);
  checkBinary<T, T>(
      device, {"Mod", 13, [](OpTester &t) { t.attrInt("fmod", 1); }}, [](double a, double b) { return std::fmod(a, b); },
      -10, 10, 0.5, 3);
  // fmod = 0 (the remainder takes the divisor's sign) is for integers (its
  // values are tested in NativeTest.IntegerSemantics); floating-point operands need
  // fmod = 1 (the ONNX spec; onnxruntime refuses them too).
  std::vector<T> two = {T(1.5f), T(-2.5f)};
  OpTester pyMod("Mod", 13);
  pyMod.input(tensorOf<T>({2}, two)).input(tensorOf<T>({2}, two));
  auto r = pyMod.run(device);
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_NE(msg.find(" operands needs fmod = 1 (fmod = 0 is for integers)"), std::string::npos)
      << msg;
}

OPTEST_TYPED_P(BinaryTest, Comparisons) {
  checkBinary<T, bool>(
      device, {"Less", 13}, [](double a, double b) { return a < b ? 1.0 : 0.0; },
      -2, 2, -2, 2);
  checkBinary<T, bool>(
      device, {"Greater", 13},
      [](double a, double b) { return a > b ? 1.0 : 0.0; }, -2, 2, -2, 2);
  checkBinary<T, bool>(
      device, {"LessOrEqual", 16},
      [](double a, double b) { return a <= b ? 1.0 : 0.0; }, -2, 2, -2, 2);
  checkBinary<T, bool>(
      device, {"GreaterOrEqual", 16},
      [](double a, double b) { return a >= b ? 1.0 : 0.0; }, -2, 2, -2, 2);
  // Equality on integral values.
  std::vector<T> a, b;
  for (int i = 0; i < 700; ++i) {
    a.push_back(fromDouble<T>(i % 5));
    b.push_back(fromDouble<T>(i % 3));
  }
  a.push_back(fromDouble<T>(kNaN));
  b.push_back(fromDouble<T>(kNaN));
  std::vector<bool> out = runBinary<bool>(device, {"Equal", 13}, a, b);
  ASSERT_EQ(out.size(), a.size());
  for (size_t i = 0; i + 1 < a.size(); ++i)
    ASSERT_EQ(out[i], i % 5 == i % 3) << i;
  EXPECT_FALSE(out[a.size() - 1]) << "NaN == NaN";
}

OPTEST_TYPED_P(BinaryTest, NaNPropagatesThroughMaxMin) {
  std::vector<T> a = {fromDouble<T>(kNaN), fromDouble<T>(1.0),
                      fromDouble<T>(2.0)};
  std::vector<T> b = {fromDouble<T>(1.0), fromDouble<T>(kNaN),
                      fromDouble<T>(-kInf)};
  std::vector<T> out = runBinary<T>(device, {"Max", 13}, a, b);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(std::isnan(toDouble(out[0])));
  EXPECT_TRUE(std::isnan(toDouble(out[1])));
  EXPECT_EQ(toDouble(out[2]), 2.0);
  out = runBinary<T>(device, {"Min", 13}, a, b);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(std::isnan(toDouble(out[0])));
  EXPECT_TRUE(std::isnan(toDouble(out[1])));
  EXPECT_EQ(toDouble(out[2]), -kInf);
}

// Max and Min of one, three and eight operands (a variadic kernel on CUDA,
// a fold of binary steps on the CPU): numpy broadcasting of all of them,
// against a float64 fold of std::max / std::min, exact.
OPTEST_TYPED_P(BinaryTest, VariadicMaxMin) {
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{4, 3}},
      {{2, 3, 4}, {4}, {3, 1}},
      {{1}, {2, 1, 5}, {5}, {3, 1}, {1, 1, 1}, {2, 3, 5}, {1, 3, 1}, {}},
      {{600, 1}, {1, 3}, {600, 3}},
  };
  std::mt19937 rng(17);
  for (const char *op : {"Max", "Min"})
    for (const auto &shapes : cases) {
      SCOPED_TRACE(std::string(op) + " of " + std::to_string(shapes.size()) + " operands");
      std::vector<int64_t> outShape;
      std::vector<std::vector<T>> data;
      std::vector<HostTensor> ins;
      for (const auto &s : shapes) {
        outShape = refBroadcastShape(outShape, s);
        data.push_back(randomVector<T>(size_t(product(s)), rng, -10, 10));
        ins.push_back(tensorOf<T>(s, data.back()));
      }
      int64_t n = product(outShape);
      std::vector<double> expected(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        std::vector<int64_t> idx = unravel(i, outShape);
        double r = toDouble(data[0][size_t(operandIndex(idx, shapes[0]))]);
        for (size_t k = 1; k < shapes.size(); ++k) {
          double v = toDouble(data[k][size_t(operandIndex(idx, shapes[k]))]);
          r = std::string(op) == "Max" ? std::max(r, v) : std::min(r, v);
        }
        expected[size_t(i)] = r;
      }
      std::vector<HostTensor> out = runOrFail(nodeOf({op, 13}, ins), device);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].shape, outShape);
      EXPECT_TRUE(allClose(valuesOf<T>(out[0]), expected, {}, Tolerance{0, 0, 0}));
    }
}

TEST_P(NativeTest, IntegerSemantics) {
  std::vector<int32_t> a = {
      7, -7, 7, -7, 5, std::numeric_limits<int32_t>::min(), 3};
  std::vector<int32_t> b = {2, 2, -2, -2, 0, -1, 4};
  std::vector<int32_t> out = runBinary<int32_t>(device(), {"Div", 14}, a, b);
  EXPECT_EQ(out, (std::vector<int32_t>{
                     3, -3, -3, 3, 0, std::numeric_limits<int32_t>::min(), 0}));
  out = runBinary<int32_t>(device(), {"Mod", 13}, a, b);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, -1, -1, 0, 0, 3})); // Python %.
  out = runBinary<int32_t>(
      device(), {"Mod", 13, [](OpTester &t) { t.attrInt("fmod", 1); }}, a, b);
  EXPECT_EQ(out, (std::vector<int32_t>{1, -1, 1, -1, 0, 0, 3})); // C fmod.
  out = runBinary<int32_t>(device(), {"Pow", 15}, a, b);
  ASSERT_EQ(out.size(), a.size());
  EXPECT_EQ(out[0], 49);
  EXPECT_EQ(out[1], 49);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[4], 1);
  EXPECT_EQ(out[6], 81);
  std::vector<int32_t> big = {std::numeric_limits<int32_t>::max()};
  std::vector<int32_t> one = {1};
  EXPECT_EQ(runBinary<int32_t>(device(), {"Add", 14}, big, one),
            std::vector<int32_t>{std::numeric_limits<int32_t>::min()}); // Wraps.
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
template <typename T> void checkBitwise(const std::string &device) {
  SCOPED_TRACE(sizeof(T) * 8);
  std::mt19937_64 rng(17);
  for (const ShapePair &c : kBroadcastCases) {
    SCOPED_TRACE(shapeString(c.a) + " op " + shapeString(c.b));
    std::vector<T> a = randomBits<T>(size_t(product(c.a)), rng);
    std::vector<T> b = randomBits<T>(size_t(product(c.b)), rng);
    std::vector<int64_t> outShape = refBroadcastShape(c.a, c.b);
    size_t n = size_t(product(outShape));
    auto run = [&](const char *op) {
      std::vector<T> out =
          runOutput<T>(nodeOf({op, 18}, {tensorOf<T>(c.a, a), tensorOf<T>(c.b, b)}), device);
      EXPECT_EQ(out.size(), n) << op;
      out.resize(n);
      return out;
    };
    std::vector<T> andOut = run("BitwiseAnd"), orOut = run("BitwiseOr"),
                   xorOut = run("BitwiseXor");
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

TEST_P(NativeTest, BitwiseIsExact) {
  checkBitwise<int8_t>(device());
  checkBitwise<int16_t>(device());
  checkBitwise<int32_t>(device());
  checkBitwise<int64_t>(device());
  checkBitwise<uint8_t>(device());
  checkBitwise<uint16_t>(device());
  checkBitwise<uint32_t>(device());
  checkBitwise<uint64_t>(device());
}

/// And, Or, Xor (opset 7) over bool with numpy broadcasting, and Not, against
/// C++'s operators on the multi-index: every broadcast case, empty and
/// rows over 512 elements included.
TEST_P(NativeTest, LogicalOpsBroadcastOverBool) {
  std::mt19937_64 rng(23);
  auto bits = [&](size_t n) {
    std::vector<bool> v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = (rng() & 1) != 0;
    return v;
  };
  for (const ShapePair &c : kBroadcastCases) {
    SCOPED_TRACE(shapeString(c.a) + " op " + shapeString(c.b));
    std::vector<bool> a = bits(size_t(product(c.a))), b = bits(size_t(product(c.b)));
    std::vector<int64_t> outShape = refBroadcastShape(c.a, c.b);
    size_t n = size_t(product(outShape));
    auto run = [&](const char *op) {
      std::vector<bool> out = runOutput<bool>(
          nodeOf({op, 7}, {tensorOf<bool>(c.a, a), tensorOf<bool>(c.b, b)}), device());
      EXPECT_EQ(out.size(), n) << op;
      out.resize(n);
      return out;
    };
    std::vector<bool> andOut = run("And"), orOut = run("Or"), xorOut = run("Xor");
    for (size_t i = 0; i < n; ++i) {
      std::vector<int64_t> idx = unravel(int64_t(i), outShape);
      bool x = a[size_t(operandIndex(idx, c.a))], y = b[size_t(operandIndex(idx, c.b))];
      ASSERT_EQ(andOut[i], x && y) << "And at " << i;
      ASSERT_EQ(orOut[i], x || y) << "Or at " << i;
      ASSERT_EQ(xorOut[i], x != y) << "Xor at " << i;
    }
    std::vector<bool> notOut = runOutput<bool>(nodeOf({"Not", 1}, {tensorOf<bool>(c.a, a)}),
                                               device());
    ASSERT_EQ(notOut.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(notOut[i], !a[i]) << "Not at " << i;
  }
}

TEST_P(NativeTest, BitShift) {
  /// BitShift of `x` [shape xs] by `by` [shape bs].
  auto shift = [&](bool left, const auto &x, std::vector<int64_t> xs, const auto &by,
                   std::vector<int64_t> bs) {
    using T = typename std::decay_t<decltype(x)>::value_type;
    NodeSpec spec = {"BitShift", 11, [left](OpTester &t) {
                       t.attrString("direction", left ? "LEFT" : "RIGHT");
                     }};
    return runOutput<T>(nodeOf(spec, {tensorOf<T>(xs, x), tensorOf<T>(bs, by)}), device());
  };
  std::vector<uint8_t> a = {1, 0x80, 0xff, 3, 0xff};
  std::vector<uint8_t> s = {1, 1, 8, 9, 4};
  std::vector<int64_t> shape = {int64_t(a.size())};
  EXPECT_EQ(shift(true, a, shape, s, shape),
            (std::vector<uint8_t>{2, 0, 0, 0, 0xf0})); // Bits drop off.
  EXPECT_EQ(shift(false, a, shape, s, shape), (std::vector<uint8_t>{0, 0x40, 0, 0, 0x0f}));
  // A broadcast shift amount; shifts of the width or more give 0.
  std::vector<uint64_t> w = {1, 0x8000000000000000ull, 12345};
  std::vector<uint64_t> n63 = {63}, n64 = {64};
  std::vector<int64_t> ws = {3}, s1 = {1};
  EXPECT_EQ(shift(true, w, ws, n63, s1),
            (std::vector<uint64_t>{0x8000000000000000ull, 0, 0x8000000000000000ull}));
  EXPECT_EQ(shift(false, w, ws, n63, s1), (std::vector<uint64_t>{0, 1, 0}));
  EXPECT_EQ(shift(false, w, ws, n64, s1), (std::vector<uint64_t>{0, 0, 0}));
  std::vector<uint32_t> v = {16, 0xffffffffu}, sh = {2, 31};
  std::vector<int64_t> vs = {2};
  EXPECT_EQ(shift(false, v, vs, sh, vs), (std::vector<uint32_t>{4, 1}));
}

TEST_P(NativeTest, DoubleBroadcast) {
  std::mt19937 rng(5);
  std::vector<int64_t> as = {3, 1, 4}, bs = {5, 1};
  std::vector<double> a = randomVector<double>(12, rng),
                      b = randomVector<double>(5, rng);
  std::vector<double> expected(60);
  std::vector<double> out = runOutput<double>(
      nodeOf({"Sub", 14}, {tensorOf<double>(as, a), tensorOf<double>(bs, b)}), device());
  for (int64_t i = 0; i < 60; ++i) {
    std::vector<int64_t> idx = unravel(i, {3, 5, 4});
    expected[size_t(i)] =
        a[size_t(operandIndex(idx, as))] - b[size_t(operandIndex(idx, bs))];
  }
  EXPECT_TRUE(allClose(out, expected, {}, {0, 0, 0}));
}

// CPU internal: how the loops collapse broadcast dimensions.
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

// CPU internal: the ISA dispatch of the loops.
TYPED_TEST(CpuUnaryTest, BaselineAndAvx2AgreeBitwise) {
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
