//===- Float16Test.cpp - fp16/bf16 conversion tests -----------------------===//
//
// fp16: all 65,536 bit patterns, and float -> fp16 rounding over millions of
// random and edge floats against GCC's _Float16 (libgcc soft-fp) or F16C, and
// against an exact software oracle.
// bf16: hand-computed ties, overflow and NaN cases, plus a nearest-candidate
// oracle in double. Also checks the bulk (F16C) converters bit for bit.
// Host-side only: the scalar conversions every backend shares and the CPU's
// bulk converters (no node runs here, so no device parameter; the Cast node
// is checked on every device in CastTest).
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Cpu/Convert.h"
#include "mpc/Runtime/Cpu/CpuIsa.h"

#include "TestUtil.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace mpc;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

//===----------------------------------------------------------------------===//
// Oracles
//===----------------------------------------------------------------------===//
//
// With GCC 12 the oracle is _Float16, converted by libgcc's IEEE soft-float
// routines. Compilers without _Float16 on x86 (clang 14) use the CPU's F16C
// instructions instead (the scalar code under test never does). Tests that
// need this oracle skip when neither exists. exactHalf() below is a second,
// software oracle that every build has.

#if defined(__FLT16_MAX__)
const char *kOracle = "_Float16";
bool haveOracle() { return true; }
uint16_t oracleFloatToHalf(float f) {
  volatile float vf = f; // Keep the conversion at run time.
  _Float16 h = static_cast<_Float16>(vf);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint32_t oracleHalfToFloat(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  volatile _Float16 vh = h;
  return bitsOf(static_cast<float>(vh));
}
#elif (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
const char *kOracle = "F16C";
bool haveOracle() { return kernels::detectCpuIsa() == kernels::CpuIsa::Avx2; }
__attribute__((target("f16c"))) uint16_t oracleFloatToHalf(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) uint32_t oracleHalfToFloat(uint16_t b) {
  return bitsOf(_cvtsh_ss(b));
}
#else
const char *kOracle = "none";
bool haveOracle() { return false; }
uint16_t oracleFloatToHalf(float) { return 0; }
uint32_t oracleHalfToFloat(uint16_t) { return 0; }
#endif

/// fp16 bits of a value exactly representable in fp16 (or infinite).
uint16_t encodeHalf(long double r) {
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  long double a = std::fabs(r);
  if (std::isinf(a))
    return sign | 0x7c00;
  if (a < std::ldexp(1.0L, -14)) // Subnormal or zero: a multiple of 2^-24.
    return sign | uint16_t(std::ldexp(a, 24));
  int e;
  std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1).
  uint16_t mant = uint16_t((std::ldexp(a, 1 - e) - 1) * 1024);
  return sign | uint16_t((e - 1 + 15) << 10) | mant;
}

/// The software oracle: exact round to nearest even onto the fp16 grid.
uint16_t exactHalf(long double v) {
  return encodeHalf(test::roundToFormat(v, 11, -14, 15));
}

bool isHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

// Compile-time checks of the constexpr bit-level functions.
static_assert(halfBitsToFloatBits(0x3c00) == 0x3f800000, "1.0");
static_assert(halfBitsToFloatBits(0x0001) == 0x33800000, "min subnormal");
static_assert(halfBitsToFloatBits(0x7bff) == 0x477fe000, "65504");
static_assert(floatBitsToHalfBits(0x477ff000) == 0x7c00, "65520 -> inf");
static_assert(floatBitsToHalfBits(0x477fefff) == 0x7bff, "below 65520");
static_assert(floatBitsToBFloat16Bits(0x3f808000) == 0x3f80, "tie to even");
#if defined(MPC_HAS_BUILTIN_BIT_CAST)
static_assert(Half(1.0f).bits == 0x3c00, "constexpr Half(float)");
static_assert(static_cast<float>(BFloat16::fromBits(0x4040)) == 3.0f,
              "constexpr bf16 widening");
#endif

//===----------------------------------------------------------------------===//
// fp16
//===----------------------------------------------------------------------===//

TEST(Float16Test, AllHalfPatternsWidenLikeOracleAndRoundTrip) {
  unsigned checked = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t b = uint16_t(h);
    uint32_t f = halfBitsToFloatBits(b);
    if (haveOracle()) {
      ASSERT_EQ(f, oracleHalfToFloat(b))
          << std::hex << "half 0x" << h << " vs " << kOracle;
    }
    ASSERT_EQ(bitsOf(halfToFloat(Half::fromBits(b))), f);
    uint16_t back = floatToHalf(floatOf(f)).bits;
    if (isHalfNaN(b)) {
      // Widening quiets a signaling NaN; sign and payload survive.
      ASSERT_EQ(back, b | 0x0200) << std::hex << "half 0x" << h;
    } else {
      ASSERT_EQ(back, b) << std::hex << "half 0x" << h;
      // The value itself is exact: compare with an independent decoding.
      int exp = (b >> 10) & 0x1f, mant = b & 0x3ff;
      double mag = exp == 0    ? std::ldexp(mant, -24)
                   : exp == 31 ? std::numeric_limits<double>::infinity()
                               : std::ldexp(1024 + mant, exp - 25);
      ASSERT_EQ(double(floatOf(f)), (b & 0x8000) ? -mag : mag);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 65536u);
}

TEST(Float16Test, BulkWideningMatchesScalarForAllPatterns) {
  std::vector<Half> in(65536 + 5); // Odd length exercises the vector tail.
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = Half::fromBits(uint16_t(i * 40503u)); // A permutation of 0..65535.
  std::vector<float> out(in.size()), portable(in.size());
  kernels::convertToFloat(in.data(), out.data(), int64_t(in.size()));
  kernels::convertToFloatPortable(in.data(), portable.data(),
                                  int64_t(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(bitsOf(out[i]), halfBitsToFloatBits(in[i].bits)) << i;
    ASSERT_EQ(bitsOf(portable[i]), bitsOf(out[i])) << i;
  }
}

/// Floats that probe every rounding decision: for each finite fp16 value the
/// midpoint to its successor (a tie), one float ulp either side of it, the
/// value itself and its float neighbours, with both signs.
std::vector<float> edgeFloats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    double lo = double(floatOf(halfBitsToFloatBits(uint16_t(h))));
    double hi = h + 1 == 0x7c00
                    ? 65536.0
                    : double(floatOf(halfBitsToFloatBits(uint16_t(h + 1))));
    float mid = float((lo + hi) / 2); // Exact: fp16 midpoints fit in a float.
    float value = float(lo);
    for (float f :
         {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), value,
          std::nextafter(value, 0.0f), std::nextafter(value, 1e30f)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f :
       {0.0f, 65504.0f, 65519.99609375f, 65520.0f, 65520.0078125f, 65536.0f,
        1e30f, std::numeric_limits<float>::max(), inf, std::ldexp(1.0f, -25),
        std::nextafter(std::ldexp(1.0f, -25), 1.0f),
        std::nextafter(std::ldexp(1.0f, -25), 0.0f), std::ldexp(1.0f, -24),
        std::ldexp(1.5f, -24), std::ldexp(1.0f, -14),
        std::nextafter(std::ldexp(1.0f, -14), 0.0f), std::ldexp(1.0f, -126),
        std::numeric_limits<float>::denorm_min(), 1e-40f}) {
    v.push_back(f);
    v.push_back(-f);
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f801fffu, 0x7fa00000u,
                       0x7fffe000u, 0xffc00001u, 0xff812345u})
    v.push_back(floatOf(nan));
  return v;
}

/// Checks the scalar and bulk conversions of every input against the exact
/// software oracle (non-NaN inputs) and the compiler/hardware oracle.
void checkAgainstOracle(const std::vector<float> &in, const char *what) {
  std::vector<Half> bulk(in.size());
  kernels::convertFromFloat(in.data(), bulk.data(), int64_t(in.size()));
  bool oracle = haveOracle();
  size_t bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t got = floatBitsToHalfBits(bitsOf(in[i]));
    uint16_t exact = std::isnan(in[i]) ? got : exactHalf(in[i]);
    uint16_t other = oracle ? oracleFloatToHalf(in[i]) : exact;
    if (got == exact && got == other && bulk[i].bits == got)
      continue;
    if (++bad <= 10)
      ADD_FAILURE() << what << ": float 0x" << std::hex << bitsOf(in[i]) << " ("
                    << in[i] << ") -> scalar 0x" << got << ", bulk 0x"
                    << bulk[i].bits << ", exact 0x" << exact << ", " << kOracle
                    << " 0x" << other;
  }
  EXPECT_EQ(bad, 0u) << what;
}

TEST(Float16Test, RoundingMatchesOracleOnEdgeFloats) {
  std::vector<float> in = edgeFloats();
  EXPECT_GT(in.size(), 380000u);
  checkAgainstOracle(in, "edge floats");
}

TEST(Float16Test, RoundingMatchesOracleOnRandomBitPatterns) {
  std::mt19937 rng(12345);
  std::vector<float> in(8u << 20);
  for (float &f : in)
    f = floatOf(uint32_t(rng()));
  checkAgainstOracle(in, "random bit patterns");
}

TEST(Float16Test, RoundingMatchesOracleInHalfRange) {
  // Log-uniform magnitudes from 2^-28 to 2^17 concentrate the tests where
  // fp16 has values, subnormals and the overflow boundary included.
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> expDist(-28.0f, 17.0f);
  std::uniform_int_distribution<int> signDist(0, 1);
  std::vector<float> in(4u << 20);
  for (float &f : in) {
    f = std::exp2(expDist(rng));
    if (signDist(rng))
      f = -f;
  }
  checkAgainstOracle(in, "fp16-range floats");
}

TEST(Float16Test, DoubleRoundsOnceToHalf) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> expDist(-27.0, 17.0);
  size_t bad = 0;
  for (int i = 0; i < 1000000; ++i) {
    double d = std::exp2(expDist(rng)) * (i & 1 ? -1 : 1);
    if (doubleToHalf(d).bits != exactHalf(d) && ++bad <= 5)
      ADD_FAILURE() << "double " << d;
  }
  // Ties of fp16 nudged by less than a float ulp: double -> float -> fp16
  // would round them as ties (to even); a single rounding must not.
  for (uint32_t h = 0x0400; h < 0x7bff; h += 7) {
    double lo = floatOf(halfBitsToFloatBits(uint16_t(h)));
    double hi = floatOf(halfBitsToFloatBits(uint16_t(h + 1)));
    double mid = (lo + hi) / 2;
    for (double d : {mid + mid * 1e-12, mid - mid * 1e-12, mid}) {
      uint16_t expected = exactHalf(d);
      if (doubleToHalf(d).bits != expected && ++bad <= 5)
        ADD_FAILURE() << "near-tie double " << d;
    }
    EXPECT_EQ(doubleToHalf(mid + mid * 1e-12).bits, h + 1);
  }
  EXPECT_EQ(bad, 0u);
}

TEST(Float16Test, Limits) {
  EXPECT_EQ(kHalfMax, halfToFloat(Half::fromBits(0x7bff)));
  EXPECT_EQ(kHalfMinNormal, halfToFloat(Half::fromBits(0x0400)));
  EXPECT_EQ(kHalfMinSubnormal, halfToFloat(Half::fromBits(0x0001)));
  EXPECT_EQ(kHalfEpsilon, halfToFloat(Half::fromBits(0x3c01)) - 1.0f);
  EXPECT_EQ(floatToHalf(kHalfOverflowThreshold).bits, 0x7c00);
  EXPECT_EQ(floatToHalf(std::nextafter(kHalfOverflowThreshold, 0.0f)).bits,
            0x7bff);
  EXPECT_EQ(kBFloat16Max, bfloat16ToFloat(BFloat16::fromBits(0x7f7f)));
  EXPECT_EQ(kBFloat16MinNormal, bfloat16ToFloat(BFloat16::fromBits(0x0080)));
  EXPECT_EQ(kBFloat16MinSubnormal, bfloat16ToFloat(BFloat16::fromBits(0x0001)));
  EXPECT_EQ(kBFloat16Epsilon,
            bfloat16ToFloat(BFloat16::fromBits(0x3f81)) - 1.0f);
}

//===----------------------------------------------------------------------===//
// bf16
//===----------------------------------------------------------------------===//

TEST(BFloat16Test, HandComputedRounding) {
  struct Case {
    uint32_t in;
    uint16_t out;
    const char *why;
  } cases[] = {
      {0x3f800000, 0x3f80, "1.0 exact"},
      {0x3f808000, 0x3f80, "tie, even below"},
      {0x3f818000, 0x3f82, "tie, odd below rounds up"},
      {0x3f808001, 0x3f81, "just above tie"},
      {0x3f807fff, 0x3f80, "just below tie"},
      {0xbf808000, 0xbf80, "negative tie to even"},
      {0xbf818000, 0xbf82, "negative tie away to even"},
      {0x3fffffff, 0x4000, "carry into the exponent"},
      {0x7f7f0000, 0x7f7f, "largest finite"},
      {0x7f7f7fff, 0x7f7f, "below the overflow tie"},
      {0x7f7f8000, 0x7f80, "overflow tie rounds to inf (0x7f7f is odd)"},
      {0x7f7fffff, 0x7f80, "FLT_MAX overflows"},
      {0xff7fffff, 0xff80, "-FLT_MAX overflows"},
      {0x7f800000, 0x7f80, "+inf"},
      {0xff800000, 0xff80, "-inf"},
      {0x00000000, 0x0000, "+0"},
      {0x80000000, 0x8000, "-0"},
      {0x00008000, 0x0000, "subnormal tie to even zero"},
      {0x00018000, 0x0002, "subnormal tie up to even"},
      {0x00010000, 0x0001, "smallest subnormal"},
      {0x007fffff, 0x0080, "rounds up to the smallest normal"},
      {0x80008001, 0x8001, "negative subnormal above tie"},
      {0x7fc00000, 0x7fc0, "quiet NaN"},
      {0x7f800001, 0x7fc0, "signaling NaN, payload below bf16: quieted"},
      {0x7f810000, 0x7fc1, "signaling NaN keeps its top payload"},
      {0xffa00000, 0xffe0, "negative signaling NaN"},
      {0x7fffffff, 0x7fff, "all-ones NaN does not carry into the sign"},
  };
  for (const Case &c : cases) {
    EXPECT_EQ(floatBitsToBFloat16Bits(c.in), c.out) << c.why;
    EXPECT_EQ(floatToBFloat16(floatOf(c.in)).bits, c.out) << c.why;
    BFloat16 bulk;
    float f = floatOf(c.in);
    kernels::convertFromFloat(&f, &bulk, 1);
    EXPECT_EQ(bulk.bits, c.out) << c.why << " (bulk)";
  }
}

TEST(BFloat16Test, AllPatternsWidenExactlyAndRoundTrip) {
  std::vector<BFloat16> in(65536);
  for (uint32_t b = 0; b <= 0xffff; ++b)
    in[b] = BFloat16::fromBits(uint16_t(b));
  std::vector<float> bulk(in.size());
  kernels::convertToFloat(in.data(), bulk.data(), int64_t(in.size()));
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    bool nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
    uint32_t expected = (b << 16) | (nan ? 0x00400000u : 0u);
    ASSERT_EQ(bitsOf(bfloat16ToFloat(in[b])), expected) << std::hex << b;
    ASSERT_EQ(bitsOf(bulk[b]), expected) << std::hex << b;
    ASSERT_EQ(floatToBFloat16(bulk[b]).bits, nan ? (b | 0x40) : b)
        << std::hex << b;
  }
}

/// Independent oracle: the nearer of the two bf16 values around f, computed
/// with exact double differences; ties go to the even pattern.
uint16_t nearestBFloat16(float f) {
  uint32_t u = bitsOf(f);
  uint16_t lo = uint16_t(u >> 16); // Truncation toward zero.
  uint16_t hi = uint16_t(lo + 1);  // Next magnitude (may be inf).
  double dl = std::fabs(double(f) - double(floatOf(uint32_t(lo) << 16)));
  double up = (hi & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128)
                                      : double(floatOf(uint32_t(hi) << 16));
  double dh = std::fabs(std::fabs(double(f)) - std::fabs(up));
  if (dl < dh)
    return lo;
  if (dh < dl)
    return hi;
  return (lo & 1) ? hi : lo;
}

TEST(BFloat16Test, RoundingMatchesNearestCandidateOracle) {
  std::mt19937 rng(4242);
  std::vector<float> in(4u << 20);
  for (float &f : in) {
    uint32_t u = uint32_t(rng());
    if ((u & 0x7f800000) == 0x7f800000)
      u &= 0xbfffffff; // Finite inputs only; NaN/inf are checked by hand.
    f = floatOf(u);
  }
  std::vector<BFloat16> bulk(in.size());
  kernels::convertFromFloat(in.data(), bulk.data(), int64_t(in.size()));
  size_t bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t expected = nearestBFloat16(in[i]);
    if ((floatToBFloat16(in[i]).bits != expected || bulk[i].bits != expected) &&
        ++bad <= 5)
      ADD_FAILURE() << std::hex << "float 0x" << bitsOf(in[i]) << " -> 0x"
                    << floatToBFloat16(in[i]).bits << ", oracle 0x" << expected;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(BFloat16Test, DoubleRoundsOnce) {
  // 1 + 2^-8 is a bf16 tie; a double slightly above it must round up even
  // though it rounds to the tie itself in float.
  double above = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(floatToBFloat16(float(above)).bits, 0x3f80); // Double rounding.
  EXPECT_EQ(doubleToBFloat16(above).bits, 0x3f81);
  double below = 1.0 + std::ldexp(1.0, -8) - std::ldexp(1.0, -40);
  EXPECT_EQ(doubleToBFloat16(below).bits, 0x3f80);
  EXPECT_EQ(doubleToBFloat16(1.0 + std::ldexp(1.0, -8)).bits, 0x3f80);
  EXPECT_EQ(doubleToBFloat16(1e300).bits, 0x7f80);
  EXPECT_EQ(doubleToBFloat16(-1e300).bits, 0xff80);
  EXPECT_EQ(doubleToBFloat16(1e-300).bits, 0x0000);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(doubleToBFloat16(std::nan("")))));
}

} // namespace
