//===- Storage.h - Storage types, compute types, scalar casts ---*- C++ -*-===//
//
// Which type a kernel computes in for each storage type (float for the 16-bit
// formats, the type itself otherwise) and the scalar cast with ONNX Cast
// semantics that every load, store and bulk cast goes through.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_STORAGE_H
#define MPC_RUNTIME_KERNELS_STORAGE_H

#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/HostDevice.h"

#include <cstdint>
#include <type_traits>

namespace mpc {
namespace kernels {

/// True for the 16-bit float storage structs.
template <typename T>
constexpr bool kIsFloat16 =
    std::is_same<T, Half>::value || std::is_same<T, BFloat16>::value;

/// True for every floating-point storage type mpc computes with.
template <typename T>
constexpr bool kIsFloatLike = std::is_floating_point<T>::value || kIsFloat16<T>;

/// The type arithmetic is done in for storage type T: float for fp16/bf16
/// (what the GPU does), T itself for float, double, integers and bool.
template <typename T> struct ComputeTypeOf { using type = T; };
template <> struct ComputeTypeOf<Half> { using type = float; };
template <> struct ComputeTypeOf<BFloat16> { using type = float; };
template <typename T> using ComputeType = typename ComputeTypeOf<T>::type;

/// The accumulator type of sums and statistics over T: float for the float
/// types, double for double, int64_t for integers.
template <typename T> struct AccumTypeOf {
  using type = std::conditional_t<std::is_integral<T>::value, int64_t, float>;
};
template <> struct AccumTypeOf<double> { using type = double; };
template <typename T> using AccumType = typename AccumTypeOf<T>::type;

namespace detail {

/// Float -> integer with truncation toward zero. NaN gives 0 and values out of
/// range saturate to the type's limits: the behaviour of CUDA's cvt.rzi (ONNX
/// leaves both undefined; C++ makes them undefined behaviour).
template <typename To> MPC_HD constexpr To floatToInteger(double d) {
  constexpr int kBits = int(sizeof(To) * 8);
  constexpr bool kSigned = std::is_signed<To>::value;
  // Exact powers of two: the first value above the range and the lowest one.
  constexpr double kTop =
      double(uint64_t(1) << (kBits - 1)) * (kSigned ? 1.0 : 2.0);
  constexpr double kLow = kSigned ? -kTop : 0.0;
  if (!(d == d))
    return To(0);
  if (d <= kLow)
    return kSigned ? To(uint64_t(1) << (kBits - 1)) : To(0);
  if (d >= kTop)
    return kSigned ? To(~To(0) ^ To(uint64_t(1) << (kBits - 1))) : To(~To(0));
  return To(d);
}

/// An unsigned integer magnitude rounded to float with round-to-odd, so that
/// a following float -> bf16 rounding rounds the integer correctly once.
MPC_HD inline float integerToFloatRoundToOdd(uint64_t mag) {
  if (mag < (uint64_t(1) << 24))
    return float(mag);
  float scale = 1.0f;
  uint64_t sticky = 0;
  while (mag >= (uint64_t(1) << 24)) {
    sticky |= mag & 1;
    mag >>= 1;
    scale *= 2.0f;
  }
  return float(mag | sticky) * scale;
}

} // namespace detail

/// Converts one value with ONNX Cast semantics, rounding once:
/// - between float types: round to nearest even, IEEE overflow to infinity,
///   NaN stays NaN (double -> fp16/bf16 is rounded once, not via float);
/// - float -> integer: truncation toward zero, NaN -> 0, saturation when out
///   of range (see detail::floatToInteger);
/// - integer -> float: nearest even; integer -> integer: two's-complement
///   wrap-around (as numpy); anything -> bool: nonzero (NaN is true).
template <typename To, typename From> MPC_HD inline To castValue(From v) {
  if constexpr (std::is_same<To, From>::value) {
    return v;
  } else if constexpr (std::is_same<From, bool>::value) {
    if constexpr (kIsFloat16<To>)
      return To(v ? 1.0f : 0.0f);
    else
      return To(v ? 1 : 0);
  } else if constexpr (std::is_same<To, bool>::value) {
    if constexpr (kIsFloat16<From>)
      return static_cast<float>(v) != 0.0f;
    else
      return v != From(0);
  } else if constexpr (std::is_same<From, double>::value) {
    if constexpr (std::is_same<To, Half>::value)
      return doubleToHalf(v);
    else if constexpr (std::is_same<To, BFloat16>::value)
      return doubleToBFloat16(v);
    else if constexpr (std::is_floating_point<To>::value)
      return static_cast<To>(v);
    else
      return detail::floatToInteger<To>(v);
  } else if constexpr (kIsFloatLike<From>) {
    // float, Half, BFloat16: widening to float is exact.
    float f = static_cast<float>(v);
    if constexpr (std::is_same<To, Half>::value)
      return floatToHalf(f);
    else if constexpr (std::is_same<To, BFloat16>::value)
      return floatToBFloat16(f);
    else if constexpr (std::is_floating_point<To>::value)
      return static_cast<To>(f);
    else
      return detail::floatToInteger<To>(static_cast<double>(f));
  } else {
    static_assert(std::is_integral<From>::value, "unsupported source type");
    if constexpr (std::is_same<To, Half>::value) {
      // Exact in float up to 2^24; larger magnitudes overflow fp16 either way.
      return floatToHalf(static_cast<float>(v));
    } else if constexpr (std::is_same<To, BFloat16>::value) {
      bool negative = std::is_signed<From>::value && v < From(0);
      uint64_t mag = negative ? uint64_t(0) - uint64_t(v) : uint64_t(v);
      float f = detail::integerToFloatRoundToOdd(mag);
      return floatToBFloat16(negative ? -f : f);
    } else {
      return static_cast<To>(v);
    }
  }
}

/// Widens a stored value to its compute type.
template <typename T> MPC_HD inline ComputeType<T> load(T v) {
  return castValue<ComputeType<T>>(v);
}

/// Narrows a computed value to storage type T, rounding once.
template <typename T, typename C> MPC_HD inline T store(C v) {
  return castValue<T>(v);
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_STORAGE_H
