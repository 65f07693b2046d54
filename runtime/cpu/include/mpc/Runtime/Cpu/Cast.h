//===- Cast.h - Bulk casts between storage types ----------------*- C++ -*-===//
//
// ONNX Cast over arrays of any pair of float, double, Half, BFloat16, bool and
// 8- to 64-bit integers, with the per-element semantics of castValue
// (Kernels/Storage.h); float <-> fp16/bf16 go through the vectorized
// converters.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_CAST_H
#define MPC_RUNTIME_CPU_CAST_H

#include "mpc/Runtime/Cpu/Convert.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mpc {
namespace cpu {

/// out[i] = Cast<To>(in[i]) for i < n. Semantics (see castValue): float
/// types round to nearest even with IEEE overflow/NaN handling and one
/// rounding (double -> fp16 included); float -> integer truncates toward zero,
/// maps NaN to 0 and saturates out-of-range values (ONNX leaves this
/// undefined; this is what CUDA's conversions do); integer -> integer wraps;
/// -> bool tests for nonzero. out may alias in only when From == To.
template <typename From, typename To>
void castArray(const From *in, To *out, int64_t n) {
  using namespace kernels;
  if constexpr (std::is_same<From, To>::value) {
    if (in != out && n > 0)
      std::memcpy(out, in, size_t(n) * sizeof(To));
  } else if constexpr (std::is_same<From, float>::value && kIsFloat16<To>) {
    convertFromFloat(in, out, n);
  } else if constexpr (kIsFloat16<From> && std::is_same<To, float>::value) {
    convertToFloat(in, out, n);
  } else if constexpr (kIsFloat16<From>) {
    // Widening to float is exact, so this is still a single rounding.
    float block[kWidenBlock];
    for (int64_t i0 = 0; i0 < n; i0 += kWidenBlock) {
      int64_t len = std::min(kWidenBlock, n - i0);
      convertToFloat(in + i0, block, len);
      for (int64_t j = 0; j < len; ++j)
        out[i0 + j] = castValue<To>(block[j]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = castValue<To>(in[i]);
  }
}

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_CAST_H
