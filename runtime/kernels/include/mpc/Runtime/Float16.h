//===- Float16.h - IEEE binary16 and bfloat16 storage types ------*- C++ -*-===//
//
// Bit-exact conversions between float/double and the two 16-bit float formats
// (round to nearest even, quiet NaNs, IEEE overflow, exact fp16 subnormals),
// written once for the host and for CUDA device code (MPC_HD). The kernels
// of every backend and the compiler's passes (constant casts) share them.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_FLOAT16_H
#define MPC_RUNTIME_FLOAT16_H

#include "mpc/Runtime/Kernels/HostDevice.h"

#include <cstdint>
#include <cstring>

// `constexpr` on the float <-> bits helpers needs __builtin_bit_cast (GCC 11,
// clang 9); device code uses the CUDA intrinsics instead.
#if defined(__CUDA_ARCH__)
#define MPC_BIT_CAST_CONSTEXPR
#elif defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define MPC_BIT_CAST_CONSTEXPR constexpr
#define MPC_HAS_BUILTIN_BIT_CAST 1
#endif
#endif
#ifndef MPC_BIT_CAST_CONSTEXPR
#define MPC_BIT_CAST_CONSTEXPR
#endif

namespace mpc {

//===----------------------------------------------------------------------===//
// Raw bit access
//===----------------------------------------------------------------------===//

/// The IEEE bits of \p f.
MPC_HD inline MPC_BIT_CAST_CONSTEXPR uint32_t floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#elif defined(MPC_HAS_BUILTIN_BIT_CAST)
  return __builtin_bit_cast(uint32_t, f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

/// The float whose IEEE bits are \p u.
MPC_HD inline MPC_BIT_CAST_CONSTEXPR float bitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#elif defined(MPC_HAS_BUILTIN_BIT_CAST)
  return __builtin_bit_cast(float, u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

//===----------------------------------------------------------------------===//
// binary16 (fp16)
//===----------------------------------------------------------------------===//

/// Widens fp16 bits to float bits. Exact for every finite value (subnormals
/// become normal floats); infinities stay infinities; a NaN keeps its sign and
/// payload and is quieted (the quiet bit is set), as IEEE 754 requires of a
/// conversion and as F16C's vcvtph2ps and CUDA do.
MPC_HD constexpr uint32_t halfBitsToFloatBits(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    if (mant == 0)
      return sign | 0x7f800000u;
    return sign | 0x7fc00000u | (mant << 13);
  }
  if (exp != 0)
    return sign | ((exp + 112) << 23) | (mant << 13);
  if (mant == 0)
    return sign;
  // Subnormal: value = mant * 2^-24. Shift the leading one into the implicit
  // position; each shift lowers the exponent by one.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return sign | (e << 23) | ((mant & 0x3ffu) << 13);
}

/// Narrows float bits to fp16 bits, rounding to nearest even. Magnitudes at or
/// above 65520 (the midpoint between 65504 and 2^16) become infinity; results
/// below 2^-14 are rounded to the subnormal grid (multiples of 2^-24), and
/// 2^-25 and below round to a signed zero. NaNs keep sign and the top 9 payload
/// bits and come out quiet.
MPC_HD constexpr uint16_t floatBitsToHalfBits(uint32_t f) {
  uint16_t sign = uint16_t((f >> 16) & 0x8000u);
  uint32_t abs = f & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u)
    return uint16_t(sign | 0x7c00u);
  if (abs >= 0x38800000u) {
    // Normal result: rebias the exponent, then round the 13 dropped bits.
    uint32_t r = (abs >> 13) - (112u << 10);
    uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
      ++r; // A carry into the exponent is the correct next binade.
    return uint16_t(sign | r);
  }
  if (abs <= 0x33000000u) // <= 2^-25: ties to the even zero.
    return sign;
  // Subnormal result: value / 2^-24 = m * 2^(e - 126), with shift in [14, 24].
  uint32_t e = abs >> 23;
  uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - e;
  uint32_t r = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (r & 1u)))
    ++r; // 0x3ff + 1 becomes 0x400, the smallest normal: still correct.
  return uint16_t(sign | r);
}

//===----------------------------------------------------------------------===//
// bfloat16
//===----------------------------------------------------------------------===//

/// Widens bf16 bits to float bits: exact; NaNs are quieted.
MPC_HD constexpr uint32_t bfloat16BitsToFloatBits(uint16_t b) {
  uint32_t f = uint32_t(b) << 16;
  if ((f & 0x7fffffffu) > 0x7f800000u)
    f |= 0x00400000u;
  return f;
}

/// Narrows float bits to bf16 bits with round to nearest even. Finite values
/// that round past the largest bf16 (3.3895e38) become infinity through the
/// carry into the exponent; NaNs keep sign and the top 7 payload bits and come
/// out quiet.
MPC_HD constexpr uint16_t floatBitsToBFloat16Bits(uint32_t f) {
  if ((f & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((f >> 16) | 0x0040u);
  uint32_t bias = 0x7fffu + ((f >> 16) & 1u);
  return uint16_t((f + bias) >> 16);
}

//===----------------------------------------------------------------------===//
// Storage structs
//===----------------------------------------------------------------------===//

/// An IEEE binary16 value kept as its 16 bits. Arithmetic is never done in
/// this type: kernels widen to float, compute, and narrow once on store.
struct Half {
  uint16_t bits;

  Half() = default;
  /// Rounds \p f to nearest even.
  MPC_HD explicit MPC_BIT_CAST_CONSTEXPR Half(float f)
      : bits(floatBitsToHalfBits(floatToBits(f))) {}
  /// The value with the given bit pattern.
  MPC_HD static constexpr Half fromBits(uint16_t b) {
    Half h{};
    h.bits = b;
    return h;
  }
  /// Exact widening.
  MPC_HD explicit MPC_BIT_CAST_CONSTEXPR operator float() const {
    return bitsToFloat(halfBitsToFloatBits(bits));
  }
};

/// A bfloat16 value kept as its 16 bits (the top half of a float).
struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  /// Rounds \p f to nearest even.
  MPC_HD explicit MPC_BIT_CAST_CONSTEXPR BFloat16(float f)
      : bits(floatBitsToBFloat16Bits(floatToBits(f))) {}
  /// The value with the given bit pattern.
  MPC_HD static constexpr BFloat16 fromBits(uint16_t b) {
    BFloat16 v{};
    v.bits = b;
    return v;
  }
  /// Exact widening.
  MPC_HD explicit MPC_BIT_CAST_CONSTEXPR operator float() const {
    return bitsToFloat(bfloat16BitsToFloatBits(bits));
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2,
              "16-bit storage types must be 2 bytes");

/// Exact widening of fp16 to float.
MPC_HD inline MPC_BIT_CAST_CONSTEXPR float halfToFloat(Half h) {
  return bitsToFloat(halfBitsToFloatBits(h.bits));
}
/// Rounds a float to fp16 (nearest even).
MPC_HD inline MPC_BIT_CAST_CONSTEXPR Half floatToHalf(float f) {
  return Half::fromBits(floatBitsToHalfBits(floatToBits(f)));
}
/// Exact widening of bf16 to float.
MPC_HD inline MPC_BIT_CAST_CONSTEXPR float bfloat16ToFloat(BFloat16 b) {
  return bitsToFloat(bfloat16BitsToFloatBits(b.bits));
}
/// Rounds a float to bf16 (nearest even).
MPC_HD inline MPC_BIT_CAST_CONSTEXPR BFloat16 floatToBFloat16(float f) {
  return BFloat16::fromBits(floatBitsToBFloat16Bits(floatToBits(f)));
}

/// Rounds a double to float with round-to-odd: the truncated result with its
/// last bit forced to one when inexact. Rounding that float again to a format
/// with at most 22 significand bits gives the correctly rounded result of the
/// double, which a plain double -> float -> 16-bit chain (two nearest-even
/// roundings) does not.
MPC_HD inline MPC_BIT_CAST_CONSTEXPR float doubleToFloatRoundToOdd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || f != f)
    return f;
  uint32_t b = floatToBits(f);
  double fa = f < 0 ? -static_cast<double>(f) : static_cast<double>(f);
  double da = d < 0 ? -d : d;
  if (fa > da)
    --b; // One step toward zero; an infinity becomes the largest finite.
  return bitsToFloat(b | 1u);
}

/// Rounds a double to fp16 with a single nearest-even rounding.
MPC_HD inline MPC_BIT_CAST_CONSTEXPR Half doubleToHalf(double d) {
  return floatToHalf(doubleToFloatRoundToOdd(d));
}
/// Rounds a double to bf16 with a single nearest-even rounding.
MPC_HD inline MPC_BIT_CAST_CONSTEXPR BFloat16 doubleToBFloat16(double d) {
  return floatToBFloat16(doubleToFloatRoundToOdd(d));
}

//===----------------------------------------------------------------------===//
// Limits
//===----------------------------------------------------------------------===//

/// Largest finite fp16, 65504 (0x7bff).
constexpr float kHalfMax = 65504.0f;
/// Smallest positive normal fp16, 2^-14 (0x0400).
constexpr float kHalfMinNormal = 6.103515625e-05f;
/// Smallest positive subnormal fp16, 2^-24 (0x0001).
constexpr float kHalfMinSubnormal = 5.9604644775390625e-08f;
/// Distance from 1 to the next fp16, 2^-10.
constexpr float kHalfEpsilon = 0.0009765625f;
/// Smallest float magnitude that rounds to an fp16 infinity (65520).
constexpr float kHalfOverflowThreshold = 65520.0f;

/// Largest finite bf16, (2 - 2^-7) * 2^127 (0x7f7f).
constexpr float kBFloat16Max = 3.38953138925153547590470800371487866880e38f;
/// Smallest positive normal bf16, 2^-126 (0x0080), the same as float's.
constexpr float kBFloat16MinNormal = 1.17549435082228750796873653722224568e-38f;
/// Smallest positive subnormal bf16, 2^-133 (0x0001).
constexpr float kBFloat16MinSubnormal = 9.18354961579912115600575419704879436e-41f;
/// Distance from 1 to the next bf16, 2^-7.
constexpr float kBFloat16Epsilon = 0.0078125f;

} // namespace mpc

#endif // MPC_RUNTIME_FLOAT16_H
