//===- Convert.h - Bulk fp16/bf16 <-> float conversion ----------*- C++ -*-===//
//
// Array conversions between the 16-bit float formats and float, used by every
// CPU loop that widens 16-bit operands into fp32 blocks. They use F16C/AVX2
// when the CPU has them and produce exactly the bits of the scalar functions
// in Float16.h (tests check both paths against each other).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_CONVERT_H
#define MPC_RUNTIME_KERNELS_CONVERT_H

#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mpc {
namespace kernels {

/// Elements per stack block when CPU loops widen 16-bit data to float.
constexpr int64_t kWidenBlock = 512;

/// Widens \p n fp16 values to float (exact).
void convertToFloat(const Half *in, float *out, int64_t n);
/// Widens \p n bf16 values to float (exact).
void convertToFloat(const BFloat16 *in, float *out, int64_t n);
/// Rounds \p n floats to fp16 (nearest even).
void convertFromFloat(const float *in, Half *out, int64_t n);
/// Rounds \p n floats to bf16 (nearest even).
void convertFromFloat(const float *in, BFloat16 *out, int64_t n);

/// True when the conversions above use F16C (activeCpuIsa() is Avx2).
bool hasHardwareHalfConversion();

/// The portable element-by-element versions (what the above do without F16C).
void convertToFloatPortable(const Half *in, float *out, int64_t n);
void convertFromFloatPortable(const float *in, Half *out, int64_t n);

/// Widens \p n values of storage type T to its compute type.
template <typename T>
inline void widenBlock(const T *in, ComputeType<T> *out, int64_t n) {
  if constexpr (kIsFloat16<T>) {
    convertToFloat(in, out, n);
  } else if constexpr (std::is_same<T, ComputeType<T>>::value) {
    std::memcpy(out, in, size_t(n) * sizeof(T));
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = load(in[i]);
  }
}

/// Narrows \p n computed values of type C to storage type T, rounding once.
template <typename T, typename C>
inline void narrowBlock(const C *in, T *out, int64_t n) {
  if constexpr (kIsFloat16<T> && std::is_same<C, float>::value) {
    convertFromFloat(in, out, n);
  } else if constexpr (std::is_same<T, C>::value) {
    std::memcpy(out, in, size_t(n) * sizeof(T));
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<T>(in[i]);
  }
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_CONVERT_H
