//===- Normalization.cpp - Layer, batch, instance and group norm ----------===//
//
// Each normalized block is widened once (16-bit storage), its mean and
// variance computed in two passes in the compute type, and normalized and
// scaled in the same precision before the single rounding on store.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Normalization.h"
#include "mpc/Runtime/Cpu/Convert.h"
#include "mpc/Runtime/Kernels/BatchNormBodies.h"
#include "mpc/Runtime/Kernels/NormBodies.h"

#include "Accumulate.h"
#include "Scratch.h"

#include <cassert>
#include <type_traits>

using namespace mpc::kernels;

namespace mpc {
namespace cpu {

/// Mean and 1 / sqrt(variance + epsilon) of n values (population variance,
/// computed from the deviations, which does not cancel like E[x^2] - E[x]^2).
template <typename S>
static void statistics(const S *v, int64_t n, S epsilon, S &mean, S &invStd) {
  mean = n ? sumOf<S>(v, n) / S(n) : S(0);
  S m = mean;
  S var =
      n ? sumOf<S>(v, n, [m](S x) { return squaredDeviation(x, m); }) / S(n) : S(0);
  invStd = invStdDevOf(var, epsilon);
}

/// Parameters of storage type P in the compute type S (widened into scratch
/// for 16-bit P).
template <typename P, typename S>
static const S *paramsOf(const P *p, int64_t n, ScratchSlot slot) {
  if (!p)
    return nullptr;
  if constexpr (std::is_same<P, S>::value) {
    return p;
  } else {
    S *buf = scratch<S>(slot, size_t(n));
    for (int64_t i = 0; i < n; ++i)
      buf[i] = static_cast<S>(load(p[i]));
    return buf;
  }
}

/// Runs body(in, out, n) on each block [offset, offset + n) of x/y in the
/// compute type: directly for fp32/fp64, through a widened buffer otherwise.
template <typename T, typename S, typename Body>
static void withBlock(const T *x, T *y, int64_t n, Body body) {
  if constexpr (std::is_same<T, S>::value) {
    body(x, y);
  } else {
    S *buf = scratch<S>(ScratchSlot::Input, size_t(n));
    widenBlock(x, buf, n);
    body(static_cast<const S *>(buf), buf);
    narrowBlock(buf, y, n);
  }
}

template <typename T, typename P>
void layerNormalization(const T *x, const P *scale, const P *bias, T *y,
                        int64_t outer, int64_t inner, float epsilon,
                        AccumType<T> *mean, AccumType<T> *invStdDev) {
  using S = AccumType<T>;
  const S *sc = paramsOf<P, S>(scale, inner, ScratchSlot::Weights);
  const S *bs = paramsOf<P, S>(bias, inner, ScratchSlot::Extra);
  for (int64_t o = 0; o < outer; ++o) {
    withBlock<T, S>(x + o * inner, y + o * inner, inner,
                    [&](const S *in, S *out) {
                      S mu, inv;
                      statistics(in, inner, S(epsilon), mu, inv);
                      if (mean)
                        mean[o] = mu;
                      if (invStdDev)
                        invStdDev[o] = inv;
                      for (int64_t i = 0; i < inner; ++i) {
                        S v = layerNormValue(in[i], mu, inv, sc[i]);
                        out[i] = bs ? v + bs[i] : v;
                      }
                    });
  }
}

template <typename T, typename P>
void rmsNormalization(const T *x, const P *scale, T *y, int64_t outer, int64_t inner,
                      float epsilon) {
  using S = AccumType<T>;
  const S *sc = paramsOf<P, S>(scale, inner, ScratchSlot::Weights);
  for (int64_t o = 0; o < outer; ++o)
    withBlock<T, S>(x + o * inner, y + o * inner, inner, [&](const S *in, S *out) {
      S ms = inner ? sumOf<S>(in, inner, [](S v) { return v * v; }) / S(inner) : S(0);
      S inv = invStdDevOf(ms, S(epsilon));
      for (int64_t i = 0; i < inner; ++i)
        out[i] = rmsNormValue(in[i], inv, sc[i]);
    });
}

template <typename T, typename P>
void batchNormalization(const T *x, const P *scale, const P *bias,
                        const P *mean, const P *var, T *y, int64_t batch,
                        int64_t channels, int64_t spatial, float epsilon) {
  using S = AccumType<T>;
  // Per channel the shared body (Kernels/BatchNormBodies.h, which the CUDA
  // launcher runs too): y = (x - mean) * a + bias, a = scale / sqrt(var + eps).
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      int64_t off = (n * channels + c) * spatial;
      BatchNormChannel<S> ch = batchNormChannel(S(load(scale[c])), S(load(bias[c])),
                                                S(load(mean[c])), S(load(var[c])), epsilon);
      withBlock<T, S>(x + off, y + off, spatial, [&](const S *in, S *out) {
        for (int64_t i = 0; i < spatial; ++i)
          out[i] = batchNormApply(ch, in[i]);
      });
    }
}

template <typename T>
void instanceNormalization(const T *x, const T *scale, const T *bias, T *y,
                           int64_t batch, int64_t channels, int64_t spatial,
                           float epsilon) {
  groupNormalization(x, scale, bias, y, batch, channels, spatial, channels,
                     epsilon);
}

template <typename T>
void groupNormalization(const T *x, const T *scale, const T *bias, T *y,
                        int64_t batch, int64_t channels, int64_t spatial,
                        int64_t numGroups, float epsilon, bool perGroupAffine) {
  using S = AccumType<T>;
  assert(numGroups > 0 && channels % numGroups == 0 &&
         "channels must be a multiple of num_groups");
  int64_t perGroup = channels / numGroups;
  int64_t affineCount = perGroupAffine ? numGroups : channels;
  const S *sc = paramsOf<T, S>(scale, affineCount, ScratchSlot::Weights);
  const S *bs = paramsOf<T, S>(bias, affineCount, ScratchSlot::Extra);
  int64_t blockSize = perGroup * spatial;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t grp = 0; grp < numGroups; ++grp) {
      int64_t off = (n * numGroups + grp) * blockSize;
      withBlock<T, S>(x + off, y + off, blockSize, [&](const S *in, S *out) {
        S mu, inv;
        statistics(in, blockSize, S(epsilon), mu, inv);
        for (int64_t c = 0; c < perGroup; ++c) {
          int64_t p = perGroupAffine ? grp : grp * perGroup + c;
          S a = sc ? inv * sc[p] : inv;
          S b = bs ? bs[p] : S(0);
          const S *src = in + c * spatial;
          S *dst = out + c * spatial;
          for (int64_t i = 0; i < spatial; ++i)
            dst[i] = (src[i] - mu) * a + b;
        }
      });
    }
}

#define MPC_INSTANTIATE_NORM_PARAMS(T, P)                                      \
  template void layerNormalization<T, P>(const T *, const P *, const P *, T *, \
                                         int64_t, int64_t, float,              \
                                         AccumType<T> *, AccumType<T> *);      \
  template void rmsNormalization<T, P>(const T *, const P *, T *, int64_t,     \
                                       int64_t, float);                        \
  template void batchNormalization<T, P>(const T *, const P *, const P *,      \
                                         const P *, const P *, T *, int64_t,   \
                                         int64_t, int64_t, float);
#define MPC_INSTANTIATE_NORM(T)                                                \
  MPC_INSTANTIATE_NORM_PARAMS(T, T)                                            \
  template void instanceNormalization<T>(const T *, const T *, const T *, T *, \
                                         int64_t, int64_t, int64_t, float);    \
  template void groupNormalization<T>(const T *, const T *, const T *, T *,    \
                                      int64_t, int64_t, int64_t, int64_t,      \
                                      float, bool);
MPC_INSTANTIATE_NORM(float)
MPC_INSTANTIATE_NORM(double)
MPC_INSTANTIATE_NORM(Half)
MPC_INSTANTIATE_NORM(BFloat16)
MPC_INSTANTIATE_NORM_PARAMS(Half, float)
MPC_INSTANTIATE_NORM_PARAMS(BFloat16, float)
#undef MPC_INSTANTIATE_NORM
#undef MPC_INSTANTIATE_NORM_PARAMS

} // namespace cpu
} // namespace mpc
