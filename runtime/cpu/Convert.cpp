//===- Convert.cpp - Bulk fp16/bf16 <-> float conversion ------------------===//
//
// F16C (vcvtph2ps/vcvtps2ph) for fp16 and AVX2-vectorized integer rounding
// for bf16 when activeCpuIsa() allows; portable loops otherwise. F16C rounds
// to nearest even and quiets NaNs exactly as floatBitsToHalfBits does.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Convert.h"
#include "mpc/Runtime/Cpu/CpuIsa.h"

#if MPC_HAVE_AVX2_CLONES
#include <immintrin.h>
#endif

namespace mpc {
namespace kernels {

//===----------------------------------------------------------------------===//
// Portable versions
//===----------------------------------------------------------------------===//

void convertToFloatPortable(const Half *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = halfToFloat(in[i]);
}

void convertFromFloatPortable(const float *in, Half *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = floatToHalf(in[i]);
}

// bf16 is a shift plus a branch-free rounding, which the compiler vectorizes
// for either instruction set.
static MPC_ALWAYS_INLINE void bfloat16ToFloatBody(const uint16_t *in,
                                                  float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t f = uint32_t(in[i]) << 16;
    // Quiet NaNs. Compare as int32 (the sign is masked off) so SSE2 can.
    int32_t mag = int32_t(f & 0x7fffffffu);
    f |= mag > 0x7f800000 ? 0x00400000u : 0u;
    std::memcpy(&out[i], &f, sizeof(f));
  }
}

static MPC_ALWAYS_INLINE void floatToBFloat16Body(const float *in,
                                                  uint16_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t f;
    std::memcpy(&f, &in[i], sizeof(f));
    int32_t mag = int32_t(f & 0x7fffffffu);
    uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
    uint32_t nan = (f >> 16) | 0x0040u;
    out[i] = uint16_t(mag > 0x7f800000 ? nan : rounded);
  }
}

static void bfloat16ToFloatBaseline(const uint16_t *in, float *out, int64_t n) {
  bfloat16ToFloatBody(in, out, n);
}
static void floatToBFloat16Baseline(const float *in, uint16_t *out, int64_t n) {
  floatToBFloat16Body(in, out, n);
}
#if MPC_HAVE_AVX2_CLONES
MPC_TARGET_AVX2 static void bfloat16ToFloatAvx2(const uint16_t *in, float *out,
                                                int64_t n) {
  bfloat16ToFloatBody(in, out, n);
}
MPC_TARGET_AVX2 static void floatToBFloat16Avx2(const float *in, uint16_t *out,
                                                int64_t n) {
  floatToBFloat16Body(in, out, n);
}
#endif

//===----------------------------------------------------------------------===//
// F16C versions
//===----------------------------------------------------------------------===//

#if MPC_HAVE_AVX2_CLONES
MPC_TARGET_AVX2 static void halfToFloatF16c(const Half *in, float *out,
                                            int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  if (i < n) {
    alignas(16) uint16_t tmp[8] = {};
    std::memcpy(tmp, in + i, size_t(n - i) * sizeof(uint16_t));
    alignas(32) float res[8];
    _mm256_store_ps(res, _mm256_cvtph_ps(_mm_load_si128(
                             reinterpret_cast<const __m128i *>(tmp))));
    std::memcpy(out + i, res, size_t(n - i) * sizeof(float));
  }
}

MPC_TARGET_AVX2 static void floatToHalfF16c(const float *in, Half *out,
                                            int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), h);
  }
  if (i < n) {
    alignas(32) float tmp[8] = {};
    std::memcpy(tmp, in + i, size_t(n - i) * sizeof(float));
    alignas(16) uint16_t res[8];
    _mm_store_si128(
        reinterpret_cast<__m128i *>(res),
        _mm256_cvtps_ph(_mm256_load_ps(tmp), _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(out + i, res, size_t(n - i) * sizeof(uint16_t));
  }
}

#endif

bool hasHardwareHalfConversion() { return activeCpuIsa() == CpuIsa::Avx2; }

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

void convertToFloat(const Half *in, float *out, int64_t n) {
#if MPC_HAVE_AVX2_CLONES
  if (hasHardwareHalfConversion())
    return halfToFloatF16c(in, out, n);
#endif
  convertToFloatPortable(in, out, n);
}

void convertFromFloat(const float *in, Half *out, int64_t n) {
#if MPC_HAVE_AVX2_CLONES
  if (hasHardwareHalfConversion())
    return floatToHalfF16c(in, out, n);
#endif
  convertFromFloatPortable(in, out, n);
}

void convertToFloat(const BFloat16 *in, float *out, int64_t n) {
  static_assert(sizeof(BFloat16) == sizeof(uint16_t), "bf16 is 16 bits");
  const uint16_t *bits = reinterpret_cast<const uint16_t *>(in);
#if MPC_HAVE_AVX2_CLONES
  if (activeCpuIsa() == CpuIsa::Avx2)
    return bfloat16ToFloatAvx2(bits, out, n);
#endif
  bfloat16ToFloatBaseline(bits, out, n);
}

void convertFromFloat(const float *in, BFloat16 *out, int64_t n) {
  uint16_t *bits = reinterpret_cast<uint16_t *>(out);
#if MPC_HAVE_AVX2_CLONES
  if (activeCpuIsa() == CpuIsa::Avx2)
    return floatToBFloat16Avx2(in, bits, n);
#endif
  floatToBFloat16Baseline(in, bits, n);
}

} // namespace kernels
} // namespace mpc
