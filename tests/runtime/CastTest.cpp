//===- CastTest.cpp - ONNX Cast between all storage types -----------------===//
//
// Every (From, To) pair of float, double, Half, BFloat16, bool and the eight
// integer types, the Cast node on every selected device (OpTester.h) and the
// shared scalar body, against a reference written here: exact
// round-to-nearest-even in long double for float targets, truncation with
// NaN -> 0 and saturation for integer targets, wrap-around between integers.
// The CPU bulk loop in place is a CPU internal, checked directly.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include "OpTester.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace mpc;
using mpc::kernels::castValue;
using mpc::test::roundToFormat;

namespace {

template <typename... Ts> struct TypeList {};
using AllTypes =
    TypeList<float, double, Half, BFloat16, bool, int8_t, uint8_t, int16_t,
             uint16_t, int32_t, uint32_t, int64_t, uint64_t>;

template <typename T> std::string typeName() {
  if constexpr (std::is_same<T, float>::value)
    return "float";
  else if constexpr (std::is_same<T, double>::value)
    return "double";
  else if constexpr (std::is_same<T, Half>::value)
    return "f16";
  else if constexpr (std::is_same<T, BFloat16>::value)
    return "bf16";
  else if constexpr (std::is_same<T, bool>::value)
    return "bool";
  else
    return (std::is_signed<T>::value ? "int" : "uint") +
           std::to_string(sizeof(T) * 8);
}

template <typename T>
constexpr bool kFloatLike =
    std::is_floating_point<T>::value || std::is_same<T, Half>::value ||
    std::is_same<T, BFloat16>::value;

/// The exact value of a stored element.
template <typename T> long double exactValue(T v) {
  if constexpr (std::is_same<T, Half>::value ||
                std::is_same<T, BFloat16>::value)
    return static_cast<float>(v);
  else
    return static_cast<long double>(v);
}

/// Reference cast, returned as the exact value of the expected result.
template <typename To, typename From> long double referenceCast(From v) {
  long double x = exactValue(v);
  if constexpr (std::is_same<To, bool>::value) {
    return (std::isnan(x) || x != 0) ? 1 : 0;
  } else if constexpr (std::is_same<To, float>::value) {
    return roundToFormat(x, 24, -126, 127);
  } else if constexpr (std::is_same<To, double>::value) {
    return roundToFormat(x, 53, -1022, 1023);
  } else if constexpr (std::is_same<To, Half>::value) {
    return roundToFormat(x, 11, -14, 15);
  } else if constexpr (std::is_same<To, BFloat16>::value) {
    return roundToFormat(x, 8, -126, 127);
  } else if constexpr (kFloatLike<From>) {
    if (std::isnan(x))
      return 0;
    long double t = std::trunc(x);
    long double lo = std::numeric_limits<To>::lowest();
    long double hi = std::numeric_limits<To>::max();
    return t < lo ? lo : (t > hi ? hi : t);
  } else {
    // Integer (or bool) to integer: two's-complement wrap-around.
    uint64_t bits = uint64_t(v);
    if (std::is_signed<From>::value && !std::is_same<From, bool>::value &&
        static_cast<long double>(v) < 0)
      bits = uint64_t(int64_t(v));
    unsigned width = sizeof(To) * 8;
    uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
    bits &= mask;
    if (std::is_signed<To>::value && width < 64 && (bits >> (width - 1)))
      return static_cast<long double>(int64_t(bits | ~mask));
    if (std::is_signed<To>::value)
      return static_cast<long double>(int64_t(bits));
    return static_cast<long double>(bits);
  }
}

/// Input values for a source type: edges and random values.
template <typename T> std::vector<T> inputsFor(std::mt19937_64 &rng) {
  std::vector<T> v;
  if constexpr (std::is_same<T, bool>::value) {
    v = {false, true};
  } else if constexpr (kFloatLike<T>) {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> d = {0.0,
                             -0.0,
                             0.5,
                             -0.5,
                             0.99,
                             -0.99,
                             1.5,
                             -1.5,
                             2.5,
                             127.5,
                             128.0,
                             -128.5,
                             -129.0,
                             255.9,
                             256.0,
                             -1.0,
                             32767.9,
                             32768.0,
                             -32769.0,
                             65504.0,
                             65519.9,
                             65520.0,
                             65535.9,
                             65536.0,
                             2147483520.0,
                             2147483648.0,
                             -2147483648.0,
                             -2147483904.0,
                             4294967295.0,
                             4294967296.0,
                             9.2233720368547748e18,
                             9.2233720368547758e18,
                             -9.2233720368547758e18,
                             1.8446744073709550e19,
                             1.8446744073709552e19,
                             1e30,
                             -1e30,
                             3.4e38,
                             1e300,
                             inf,
                             -inf,
                             std::nan(""),
                             -std::nan(""),
                             1e-8,
                             6e-8,
                             3e-8,
                             1e-40,
                             1e-310,
                             1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)};
    std::uniform_real_distribution<double> expDist(-30.0, 70.0);
    for (int i = 0; i < 3000; ++i)
      d.push_back(std::exp2(expDist(rng)) * ((i & 1) ? -1 : 1));
    for (double x : d)
      v.push_back(castValue<T>(x));
  } else {
    std::vector<uint64_t> bits = {0,
                                  1,
                                  ~uint64_t(0),
                                  2049,
                                  2051,
                                  65504,
                                  65519,
                                  65520,
                                  65535,
                                  65536,
                                  (1u << 24) + 1,
                                  (uint64_t(1) << 40) + (uint64_t(1) << 32) + 1,
                                  (uint64_t(1) << 53) + 1,
                                  uint64_t(1) << 63,
                                  (uint64_t(1) << 63) - 1,
                                  uint64_t(0x7f) << 56};
    for (int i = 0; i < 3000; ++i) {
      uint64_t r = rng();
      bits.push_back(r >> (r & 63)); // Spread the magnitudes.
      bits.push_back(0 - bits.back());
    }
    for (uint64_t b : bits)
      v.push_back(static_cast<T>(b));
  }
  return v;
}

/// The Cast node from From to To over every input of inputsFor<From> on
/// `device`: each element against the reference and, bit for bit, against
/// the shared scalar body castValue.
template <typename From, typename To>
void checkPair(const std::string &device, std::mt19937_64 &rng) {
  SCOPED_TRACE(typeName<From>() + " -> " + typeName<To>());
  std::vector<From> values = inputsFor<From>(rng);
  size_t n = values.size();
  optest::OpTester t("Cast", 21);
  t.attrInt("to", int64_t(optest::DTypeOf<To>::value)).input({int64_t(n)}, values);
  std::vector<HostTensor> out = optest::runOrFail(t, device);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dtype, optest::DTypeOf<To>::value);
  ASSERT_EQ(out[0].bytes.size(), n * sizeof(To));
  unsigned bad = 0;
  for (size_t i = 0; i < n; ++i) {
    From in = values[i];
    To bulk; // (std::vector<bool> has no data(): read the bytes)
    std::memcpy(&bulk, out[0].bytes.data() + i * sizeof(To), sizeof(To));
    To scalar = castValue<To>(in);
    long double expected = referenceCast<To>(in);
    long double got = exactValue(bulk);
    bool same = std::memcmp(&scalar, &bulk, sizeof(To)) == 0;
    bool ok = std::isnan(expected) ? std::isnan(got) : got == expected;
    if ((!same || !ok) && ++bad <= 5)
      ADD_FAILURE() << "input " << (double)exactValue(in) << ": got "
                    << (double)got << ", expected " << (double)expected
                    << (same ? "" : " (bulk and scalar differ)");
  }
}

template <typename From, typename... Tos>
void checkFrom(const std::string &device, TypeList<Tos...>, std::mt19937_64 &rng) {
  (checkPair<From, Tos>(device, rng), ...);
}

template <typename... Froms>
void checkAll(const std::string &device, TypeList<Froms...> list) {
  std::mt19937_64 rng(2024);
  (checkFrom<Froms>(device, list, rng), ...);
}

class CastNodeTest : public optest::DeviceTest {};
OPTEST_INSTANTIATE_DEVICES(CastNodeTest);

TEST_P(CastNodeTest, AllPairsMatchReference) { checkAll(device(), AllTypes()); }

TEST_P(CastNodeTest, Empty) {
  optest::OpTester t("Cast", 21);
  t.attrInt("to", int64_t(DType::F16)).input<float>({0, 3}, {});
  std::vector<HostTensor> out = optest::runOrFail(t, device());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype, DType::F16);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{0, 3}));
}

// The scalar conversions below are the op body every backend shares
// (kernels/Storage.h), checked on the host.

TEST(CastTest, FloatToIntegerEdgeCases) {
  EXPECT_EQ(castValue<int32_t>(-0.99f), 0);
  EXPECT_EQ(castValue<int32_t>(-1.5f), -1);
  EXPECT_EQ(castValue<int32_t>(2147483520.0f), 2147483520);
  EXPECT_EQ(castValue<int32_t>(2147483648.0f),
            std::numeric_limits<int32_t>::max());
  EXPECT_EQ(castValue<int32_t>(-2147483648.0f),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(castValue<int32_t>(std::nanf("")), 0);
  EXPECT_EQ(castValue<uint8_t>(-1.0f), 0);
  EXPECT_EQ(castValue<uint8_t>(255.9f), 255);
  EXPECT_EQ(castValue<uint8_t>(300.0f), 255);
  EXPECT_EQ(castValue<int64_t>(9.2233720368547758e18),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(castValue<uint64_t>(1.8446744073709550e19),
            18446744073709549568ull);
  EXPECT_EQ(castValue<int8_t>(Half(-128.9f)), -128);
  EXPECT_EQ(castValue<int8_t>(BFloat16(-130.0f)), -128);
}

TEST(CastTest, IntegersRoundOnceTo16Bit) {
  EXPECT_EQ(castValue<Half>(int32_t(2049)).bits,
            Half(2048.0f).bits); // Tie to even.
  EXPECT_EQ(castValue<Half>(int32_t(2051)).bits, Half(2052.0f).bits);
  EXPECT_EQ(castValue<Half>(int32_t(65519)).bits, 0x7bff);
  EXPECT_EQ(castValue<Half>(int32_t(65520)).bits, 0x7c00);
  EXPECT_EQ(castValue<Half>(int64_t(-70000)).bits, 0xfc00);
  // 2^40 + 2^32 is a bf16 tie; +1 must round up. Via float it would not.
  int64_t v = (int64_t(1) << 40) + (int64_t(1) << 32) + 1;
  EXPECT_EQ(static_cast<float>(castValue<BFloat16>(v)),
            std::ldexp(1.0f, 40) + std::ldexp(1.0f, 33));
  EXPECT_EQ(static_cast<float>(castValue<BFloat16>(v - 1)),
            std::ldexp(1.0f, 40));
  EXPECT_EQ(static_cast<float>(castValue<BFloat16>(-v)),
            -(std::ldexp(1.0f, 40) + std::ldexp(1.0f, 33)));
}

TEST(CastTest, BoolAndNaN) {
  EXPECT_TRUE(castValue<bool>(std::nanf("")));
  EXPECT_TRUE(castValue<bool>(Half::fromBits(0x7e00)));
  EXPECT_FALSE(castValue<bool>(-0.0));
  EXPECT_FALSE(castValue<bool>(BFloat16::fromBits(0x8000)));
  EXPECT_EQ(castValue<Half>(true).bits, 0x3c00);
  EXPECT_EQ(castValue<int64_t>(true), 1);
  EXPECT_TRUE(std::isnan(static_cast<float>(castValue<Half>(std::nan("")))));
  EXPECT_TRUE(std::isnan(
      static_cast<float>(castValue<BFloat16>(Half::fromBits(0xfe00)))));
}

// CPU internal: the CPU's bulk loop in place and on null empty arrays.
TEST(CastTest, EmptyAndInPlace) {
  std::vector<float> f = {1.5f, -2.0f};
  cpu::castArray(f.data(), f.data(), 2); // Same type: in place is a no-op.
  EXPECT_EQ(f[0], 1.5f);
  cpu::castArray<float, Half>(nullptr, nullptr, 0);
  cpu::castArray<Half, int32_t>(nullptr, nullptr, 0);
}

} // namespace
