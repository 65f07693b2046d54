//===- Softmax.cpp - Softmax and LogSoftmax along an axis -----------------===//
//
// inner == 1 (the common last-axis case) works row by row on contiguous
// data; otherwise columns of the [axis, inner] slab are processed in blocks
// so the loops over inner stay contiguous and vectorizable.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Softmax.h"
#include "mpc/Runtime/Cpu/Convert.h"
#include "mpc/Runtime/Cpu/CpuIsa.h"
#include "mpc/Runtime/Kernels/NormBodies.h"

#include "Accumulate.h"
#include "Scratch.h"

#include <algorithm>
#include <type_traits>

using namespace mpc::kernels;

namespace mpc {
namespace cpu {

/// One contiguous row in the compute type; out may alias in. Every pass is
/// a plain loop, which both GCC's and clang's loop vectorizers handle.
template <typename S>
static MPC_ALWAYS_INLINE void softmaxRowBody(const S *in, S *out, int64_t n,
                                             bool isLog) {
  S m = maxOf(in, n);
  if (isLog) {
    // The exponentials go through a stack block: out may alias in, and in
    // is still needed (logSoftmaxValue, NormBodies.h).
    constexpr int64_t kBlock = 256;
    S block[kBlock];
    S sum = S(0);
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
      int64_t len = std::min(kBlock, n - i0);
      for (int64_t j = 0; j < len; ++j)
        block[j] = softmaxExp(in[i0 + j], m);
      sum += sumOf<S>(block, len);
    }
    S logSum = math::log(sum);
    for (int64_t i = 0; i < n; ++i)
      out[i] = logSoftmaxValue(in[i], m, logSum);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    out[i] = softmaxExp(in[i], m);
  S sum = sumOf<S>(out, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = out[i] / sum;
}

/// A block of cb columns of an [axisDim, ld] slab (column j at in + j).
template <typename S>
static MPC_ALWAYS_INLINE void
softmaxColumnsBody(const S *in, int64_t ldIn, S *out, int64_t ldOut,
                   int64_t axisDim, int64_t cb, bool isLog, S *maxv, S *sumv) {
  std::fill_n(maxv, cb, -math::infinity<S>());
  std::fill_n(sumv, cb, S(0));
  for (int64_t a = 0; a < axisDim; ++a) {
    const S *row = in + a * ldIn;
    for (int64_t j = 0; j < cb; ++j)
      maxv[j] = maxKeepNaN(maxv[j], row[j]);
  }
  if (isLog) {
    for (int64_t a = 0; a < axisDim; ++a)
      for (int64_t j = 0; j < cb; ++j)
        sumv[j] += softmaxExp(in[a * ldIn + j], maxv[j]);
    for (int64_t j = 0; j < cb; ++j)
      sumv[j] = math::log(sumv[j]);
    for (int64_t a = 0; a < axisDim; ++a)
      for (int64_t j = 0; j < cb; ++j)
        out[a * ldOut + j] = logSoftmaxValue(in[a * ldIn + j], maxv[j], sumv[j]);
    return;
  }
  for (int64_t a = 0; a < axisDim; ++a)
    for (int64_t j = 0; j < cb; ++j) {
      S e = softmaxExp(in[a * ldIn + j], maxv[j]);
      sumv[j] += e;
      out[a * ldOut + j] = e;
    }
  for (int64_t a = 0; a < axisDim; ++a)
    for (int64_t j = 0; j < cb; ++j)
      out[a * ldOut + j] = out[a * ldOut + j] / sumv[j];
}

// Baseline and AVX2 builds of the bodies (CpuIsa.h).
template <typename S>
static void softmaxRowBaseline(const S *in, S *out, int64_t n, bool isLog) {
  softmaxRowBody(in, out, n, isLog);
}
template <typename S>
static void softmaxColumnsBaseline(const S *in, int64_t ldIn, S *out,
                                   int64_t ldOut, int64_t axisDim, int64_t cb,
                                   bool isLog, S *maxv, S *sumv) {
  softmaxColumnsBody(in, ldIn, out, ldOut, axisDim, cb, isLog, maxv, sumv);
}
#if MPC_HAVE_AVX2_CLONES
template <typename S>
MPC_TARGET_AVX2 static void softmaxRowAvx2(const S *in, S *out, int64_t n,
                                           bool isLog) {
  softmaxRowBody(in, out, n, isLog);
}
template <typename S>
MPC_TARGET_AVX2 static void
softmaxColumnsAvx2(const S *in, int64_t ldIn, S *out, int64_t ldOut,
                   int64_t axisDim, int64_t cb, bool isLog, S *maxv, S *sumv) {
  softmaxColumnsBody(in, ldIn, out, ldOut, axisDim, cb, isLog, maxv, sumv);
}
#endif

template <typename S>
static void softmaxRow(CpuIsa isa, const S *in, S *out, int64_t n, bool isLog) {
#if MPC_HAVE_AVX2_CLONES
  if (isa == CpuIsa::Avx2)
    return softmaxRowAvx2(in, out, n, isLog);
#endif
  softmaxRowBaseline(in, out, n, isLog);
}

template <typename S>
static void softmaxColumns(CpuIsa isa, const S *in, int64_t ldIn, S *out,
                           int64_t ldOut, int64_t axisDim, int64_t cb,
                           bool isLog, S *maxv, S *sumv) {
#if MPC_HAVE_AVX2_CLONES
  if (isa == CpuIsa::Avx2)
    return softmaxColumnsAvx2(in, ldIn, out, ldOut, axisDim, cb, isLog, maxv,
                              sumv);
#endif
  softmaxColumnsBaseline(in, ldIn, out, ldOut, axisDim, cb, isLog, maxv, sumv);
}

template <typename T>
static void softmaxImpl(const T *x, T *y, int64_t outer, int64_t axisDim,
                        int64_t inner, bool isLog) {
  using S = AccumType<T>;
  constexpr bool kNative = std::is_same<T, S>::value;
  if (outer == 0 || axisDim == 0 || inner == 0)
    return;
  CpuIsa isa = activeCpuIsa();
  if (inner == 1) {
    S *buf =
        kNative ? nullptr : scratch<S>(ScratchSlot::Input, size_t(axisDim));
    for (int64_t o = 0; o < outer; ++o) {
      if constexpr (kNative) {
        softmaxRow(isa, x + o * axisDim, y + o * axisDim, axisDim, isLog);
      } else {
        widenBlock(x + o * axisDim, buf, axisDim);
        softmaxRow(isa, buf, buf, axisDim, isLog);
        narrowBlock(buf, y + o * axisDim, axisDim);
      }
    }
    return;
  }
  constexpr int64_t kBlock = 256;
  int64_t cbMax = std::min(inner, kBlock);
  S *maxv = scratch<S>(ScratchSlot::Extra, size_t(2 * cbMax));
  S *sumv = maxv + cbMax;
  S *buf = kNative ? nullptr
                   : scratch<S>(ScratchSlot::Input, size_t(axisDim * cbMax));
  for (int64_t o = 0; o < outer; ++o) {
    const T *xs = x + o * axisDim * inner;
    T *ys = y + o * axisDim * inner;
    for (int64_t j0 = 0; j0 < inner; j0 += kBlock) {
      int64_t cb = std::min(kBlock, inner - j0);
      if constexpr (kNative) {
        softmaxColumns(isa, xs + j0, inner, ys + j0, inner, axisDim, cb, isLog,
                       maxv, sumv);
      } else {
        for (int64_t a = 0; a < axisDim; ++a)
          widenBlock(xs + a * inner + j0, buf + a * cb, cb);
        softmaxColumns(isa, buf, cb, buf, cb, axisDim, cb, isLog, maxv, sumv);
        for (int64_t a = 0; a < axisDim; ++a)
          narrowBlock(buf + a * cb, ys + a * inner + j0, cb);
      }
    }
  }
}

template <typename T>
void softmax(const T *x, T *y, int64_t outer, int64_t axisDim, int64_t inner) {
  softmaxImpl(x, y, outer, axisDim, inner, /*isLog=*/false);
}

template <typename T>
void logSoftmax(const T *x, T *y, int64_t outer, int64_t axisDim,
                int64_t inner) {
  softmaxImpl(x, y, outer, axisDim, inner, /*isLog=*/true);
}

#define MPC_INSTANTIATE_SOFTMAX(T)                                             \
  template void softmax<T>(const T *, T *, int64_t, int64_t, int64_t);         \
  template void logSoftmax<T>(const T *, T *, int64_t, int64_t, int64_t);
MPC_INSTANTIATE_SOFTMAX(float)
MPC_INSTANTIATE_SOFTMAX(double)
MPC_INSTANTIATE_SOFTMAX(Half)
MPC_INSTANTIATE_SOFTMAX(BFloat16)
#undef MPC_INSTANTIATE_SOFTMAX

} // namespace cpu
} // namespace mpc
