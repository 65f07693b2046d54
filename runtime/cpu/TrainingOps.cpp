//===- TrainingOps.cpp - Gradient and loss kernels for training -----------===//
//
// Loops over raw buffers for the gradient ops of docs/training.md, the
// classification losses and training-mode BatchNormalization. Sums and
// statistics are kept in AccumType<T>; each output element is rounded once.
// ConvGrad builds its own column panels and multiplies through cpu::gemm.
// LSTMGrad and GRUGrad recompute the forward one batch entry at a time (entries may have
// different lengths, so reverse directions start at different time steps).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cpu/TrainingOps.h"
#include "mpc/Runtime/Kernels/BatchNormBodies.h"
#include "mpc/Runtime/Kernels/LossBodies.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"
#include <algorithm>
#include <cmath>
#include <vector>

namespace mpc {
namespace cpu {

using kernels::AccumType;
using kernels::load;
using kernels::store;

template <typename T> static AccumType<T> ld(T v) { return AccumType<T>(load(v)); }

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

template <typename T>
void activationGrad(ActivationGrad kind, const T *dy, const T *v, T *dx, int64_t n) {
  // Relu, the common case, in a loop of its own: with the kind a constant
  // the body's test of it folds away and the body inlines (called per
  // element with the test inside, ReluGrad took 1.2% more of the digits
  // CNN's AMP step than before issue 12).
  if (kind == ActivationGrad::Relu) {
    for (int64_t i = 0; i < n; ++i)
      dx[i] = kernels::activationGradValue(ActivationGrad::Relu, dy[i], v[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    dx[i] = kernels::activationGradValue(kind, dy[i], v[i]);
}

template <typename T, typename U>
void biasGrad(const T *dy, llvm::ArrayRef<int64_t> dyShape, llvm::ArrayRef<int64_t> bShape,
              U *db) {
  using A = AccumType<U>;
  size_t rank = dyShape.size(), lead = rank - bShape.size();
  // Stride into db of each dy axis (0 where the axis is summed).
  std::vector<int64_t> strides(rank, 0);
  int64_t s = 1, total = 1;
  for (size_t j = bShape.size(); j-- > 0;) {
    if (bShape[j] != 1)
      strides[lead + j] = s;
    s *= bShape[j];
  }
  for (int64_t d : dyShape)
    total *= d;
  std::vector<A> acc(size_t(s), A(0));
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    acc[size_t(off)] += ld(dy[i]);
    for (size_t d = rank; d-- > 0;) {
      off += strides[d];
      if (++idx[d] < dyShape[d])
        break;
      off -= strides[d] * dyShape[d];
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < s; ++i)
    db[i] = store<U>(acc[size_t(i)]);
}

template <typename T>
void softmaxGrad(const T *dy, const T *y, T *dx, int64_t outer, int64_t axisDim,
                 int64_t inner, bool log) {
  using A = AccumType<T>;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * axisDim * inner + i;
      A sum = A(0);
      for (int64_t a = 0; a < axisDim; ++a) {
        int64_t k = base + a * inner;
        sum += kernels::softmaxGradTerm(ld(dy[k]), ld(y[k]), log);
      }
      for (int64_t a = 0; a < axisDim; ++a) {
        int64_t k = base + a * inner;
        dx[k] = store<T>(kernels::softmaxGradValue(ld(dy[k]), ld(y[k]), sum, log));
      }
    }
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

template <typename T>
void layerNormGrad(const T *dy, const T *x, const AccumType<T> *scale,
                   const AccumType<T> *mean, const AccumType<T> *invStdDev, T *dx,
                   AccumType<T> *dScale, AccumType<T> *dBias, int64_t outer, int64_t inner) {
  using A = AccumType<T>;
  for (int64_t r = 0; r < outer; ++r) {
    const T *xr = x + r * inner, *dyr = dy + r * inner;
    A mu = mean[r], inv = invStdDev[r];
    A sumG = A(0), sumGX = A(0);
    for (int64_t j = 0; j < inner; ++j) {
      A xhat = kernels::normalizedInput(ld(xr[j]), mu, inv), d = ld(dyr[j]), g = d * scale[j];
      sumG += g;
      sumGX += g * xhat;
      if (dScale)
        dScale[j] += d * xhat;
      if (dBias)
        dBias[j] += d;
    }
    if (!dx)
      continue;
    A m1 = sumG / A(inner), m2 = sumGX / A(inner);
    for (int64_t j = 0; j < inner; ++j) {
      A xhat = kernels::normalizedInput(ld(xr[j]), mu, inv), g = ld(dyr[j]) * scale[j];
      dx[r * inner + j] = store<T>(kernels::layerNormGradValue(g, xhat, inv, m1, m2));
    }
  }
}

/// Mean and biased variance of channel c of x [batch, channels, spatial].
template <typename T>
static void channelStats(const T *x, int64_t c, int64_t batch, int64_t channels,
                         int64_t spatial, AccumType<T> &mean, AccumType<T> &var) {
  // Sums of up to batch * spatial terms (millions for an early conv layer):
  // in double, so the statistics are as exact as the inputs allow (a float
  // running sum of 32768 values near 100 is off by ~1e-5, which x - mean
  // magnifies; a GPU's tree reduction is far better than that).
  double sum = 0;
  for (int64_t n = 0; n < batch; ++n) {
    const T *p = x + (n * channels + c) * spatial;
    for (int64_t s = 0; s < spatial; ++s)
      sum += double(ld(p[s]));
  }
  double count = double(batch * spatial), m = sum / count, sq = 0;
  for (int64_t n = 0; n < batch; ++n) {
    const T *p = x + (n * channels + c) * spatial;
    for (int64_t s = 0; s < spatial; ++s) {
      double d = double(ld(p[s])) - m;
      sq += d * d;
    }
  }
  mean = AccumType<T>(m);
  var = AccumType<T>(sq / count);
}

template <typename T>
void batchNormGrad(const T *dy, const T *x, const AccumType<T> *scale, float epsilon, T *dx,
                   AccumType<T> *dScale, AccumType<T> *dBias, int64_t batch,
                   int64_t channels, int64_t spatial) {
  using A = AccumType<T>;
  for (int64_t c = 0; c < channels; ++c) {
    A mean, var;
    channelStats(x, c, batch, channels, spatial, mean, var);
    A inv = kernels::invStdDevOf(var, A(epsilon));
    double sumD = 0, sumDX = 0; // as channelStats: long sums in double
    for (int64_t n = 0; n < batch; ++n) {
      int64_t base = (n * channels + c) * spatial;
      for (int64_t s = 0; s < spatial; ++s) {
        A d = ld(dy[base + s]);
        sumD += double(d);
        sumDX += double(kernels::batchNormGradXTerm(d, ld(x[base + s]), mean, inv));
      }
    }
    if (dScale)
      dScale[c] = A(sumDX);
    if (dBias)
      dBias[c] = A(sumD);
    if (!dx)
      continue;
    double count = double(batch * spatial);
    A m1 = A(sumD / count), m2 = A(sumDX / count);
    A k = scale[c] * inv;
    for (int64_t n = 0; n < batch; ++n) {
      int64_t base = (n * channels + c) * spatial;
      for (int64_t s = 0; s < spatial; ++s) {
        A xhat = kernels::normalizedInput(ld(x[base + s]), mean, inv);
        dx[base + s] = store<T>(kernels::batchNormGradValue(k, ld(dy[base + s]), xhat, m1, m2));
      }
    }
  }
}

template <typename T>
void batchNormTraining(const T *x, const AccumType<T> *scale, const AccumType<T> *bias,
                       const AccumType<T> *inMean, const AccumType<T> *inVar, float epsilon,
                       float momentum, T *y, AccumType<T> *runMean, AccumType<T> *runVar,
                       int64_t batch, int64_t channels, int64_t spatial) {
  using A = AccumType<T>;
  for (int64_t c = 0; c < channels; ++c) {
    A mean, var;
    channelStats(x, c, batch, channels, spatial, mean, var);
    kernels::BatchNormChannel<A> ch =
        kernels::batchNormChannel(scale[c], bias[c], mean, var, epsilon);
    for (int64_t n = 0; n < batch; ++n) {
      int64_t base = (n * channels + c) * spatial;
      for (int64_t s = 0; s < spatial; ++s)
        y[base + s] = store<T>(kernels::batchNormApply(ch, ld(x[base + s])));
    }
    if (runMean)
      runMean[c] = kernels::batchNormRunning(inMean[c], mean, momentum);
    if (runVar)
      runVar[c] = kernels::batchNormRunning(inVar[c], var, momentum);
  }
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// For every (kernel tap, output position) pair, the flat spatial index of
/// the input element it reads, or -1 for padding. Row-major over taps, then
/// positions: entry kk * outSize + oo.
static std::vector<int64_t> windowMap(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out,
                                      llvm::ArrayRef<int64_t> kernel,
                                      llvm::ArrayRef<int64_t> strides,
                                      llvm::ArrayRef<int64_t> dilations,
                                      llvm::ArrayRef<int64_t> padsBegin) {
  size_t nd = kernel.size();
  int64_t taps = 1, outSize = 1;
  for (size_t i = 0; i < nd; ++i) {
    taps *= kernel[i];
    outSize *= out[i];
  }
  std::vector<int64_t> map(size_t(taps * outSize), -1);
  std::vector<int64_t> k(nd, 0), o(nd, 0);
  for (int64_t kk = 0; kk < taps; ++kk) {
    std::fill(o.begin(), o.end(), 0);
    for (int64_t oo = 0; oo < outSize; ++oo) {
      int64_t flat = 0;
      bool inside = true;
      for (size_t i = 0; i < nd && inside; ++i) {
        int64_t p = o[i] * strides[i] - padsBegin[i] + k[i] * dilations[i];
        inside = p >= 0 && p < in[i];
        flat = flat * in[i] + p;
      }
      if (inside)
        map[size_t(kk * outSize + oo)] = flat;
      for (size_t i = nd; i-- > 0;) {
        if (++o[i] < out[i])
          break;
        o[i] = 0;
      }
    }
    for (size_t i = nd; i-- > 0;) {
      if (++k[i] < kernel[i])
        break;
      k[i] = 0;
    }
  }
  return map;
}

static int64_t product(llvm::ArrayRef<int64_t> v) {
  int64_t p = 1;
  for (int64_t d : v)
    p *= d;
  return p;
}

template <typename T>
void convGrad(const ConvGeometry &g, const T *dy, const T *x, const T *w, T *dx, T *dw,
              T *db) {
  using A = AccumType<T>;
  int64_t inSize = product(g.inSpatial), outSize = product(g.outSpatial);
  int64_t taps = product(g.kernel);
  int64_t cg = g.inChannels / g.group, mg = g.outChannels / g.group, rows = cg * taps;
  if (db) {
    for (int64_t m = 0; m < g.outChannels; ++m) {
      A sum = A(0);
      for (int64_t n = 0; n < g.batch; ++n)
        for (int64_t o = 0; o < outSize; ++o)
          sum += ld(dy[(n * g.outChannels + m) * outSize + o]);
      db[m] = store<T>(sum);
    }
  }
  if (!dx && !dw)
    return;
  std::vector<int64_t> map =
      windowMap(g.inSpatial, g.outSpatial, g.kernel, g.strides, g.dilations, g.padsBegin);
  std::vector<T> col(dw ? size_t(rows * outSize) : 0);
  std::vector<A> colGrad(dx ? size_t(rows * outSize) : 0);
  std::vector<A> dwAcc(dw ? size_t(g.outChannels * rows) : 0, A(0));
  std::vector<A> dxAcc(dx ? size_t(g.inChannels * inSize) : 0);
  const T zero = store<T>(A(0));
  for (int64_t n = 0; n < g.batch; ++n) {
    std::fill(dxAcc.begin(), dxAcc.end(), A(0));
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const T *dyG = dy + (n * g.outChannels + gi * mg) * outSize;
      const T *xG = x + (n * g.inChannels + gi * cg) * inSize;
      if (dw) {
        // col[c * taps + kk][oo] = x[c][map[kk][oo]]
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t kk = 0; kk < taps; ++kk) {
            T *dst = col.data() + (c * taps + kk) * outSize;
            const int64_t *mp = map.data() + kk * outSize;
            for (int64_t oo = 0; oo < outSize; ++oo)
              dst[oo] = mp[oo] >= 0 ? xG[c * inSize + mp[oo]] : zero;
          }
        // dW_g [mg, rows] += dY_g [mg, out] * col^T
        gemm<T, A>(false, true, mg, rows, outSize, A(1), dyG, outSize, col.data(), outSize,
                   n == 0 ? A(0) : A(1), dwAcc.data() + gi * mg * rows, rows);
      }
      if (dx) {
        // colGrad [rows, out] = W_g^T [rows, mg] * dY_g [mg, out]
        gemm<T, A>(true, false, rows, outSize, mg, A(1), w + gi * mg * rows, rows, dyG,
                   outSize, A(0), colGrad.data(), outSize);
        A *dxG = dxAcc.data() + gi * cg * inSize;
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t kk = 0; kk < taps; ++kk) {
            const A *src = colGrad.data() + (c * taps + kk) * outSize;
            const int64_t *mp = map.data() + kk * outSize;
            for (int64_t oo = 0; oo < outSize; ++oo)
              if (mp[oo] >= 0)
                dxG[c * inSize + mp[oo]] += src[oo];
          }
      }
    }
    if (dx)
      for (int64_t i = 0; i < g.inChannels * inSize; ++i)
        dx[n * g.inChannels * inSize + i] = store<T>(dxAcc[size_t(i)]);
  }
  if (dw)
    for (int64_t i = 0; i < g.outChannels * rows; ++i)
      dw[i] = store<T>(dwAcc[size_t(i)]);
}

template <typename T>
void maxPoolGrad(const PoolGeometry &g, const T *dy, const T *x, T *dx) {
  using A = AccumType<T>;
  int64_t inSize = product(g.inSpatial), outSize = product(g.outSpatial);
  int64_t taps = product(g.kernel);
  std::vector<int64_t> map =
      windowMap(g.inSpatial, g.outSpatial, g.kernel, g.strides, g.dilations, g.padsBegin);
  std::vector<A> acc(static_cast<size_t>(inSize));
  for (int64_t p = 0; p < g.batch * g.channels; ++p) {
    const T *xp = x + p * inSize;
    const T *dyp = dy + p * outSize;
    std::fill(acc.begin(), acc.end(), A(0));
    for (int64_t oo = 0; oo < outSize; ++oo) {
      int64_t best = -1;
      A bestVal = A(0);
      for (int64_t kk = 0; kk < taps; ++kk) {
        int64_t i = map[size_t(kk * outSize + oo)];
        if (i < 0)
          continue;
        A v = ld(xp[i]);
        if (best < 0 || v > bestVal) {
          best = i;
          bestVal = v;
        }
      }
      if (best >= 0)
        acc[size_t(best)] += ld(dyp[oo]);
    }
    for (int64_t i = 0; i < inSize; ++i)
      dx[p * inSize + i] = store<T>(acc[size_t(i)]);
  }
}

template <typename T>
void averagePoolGrad(const PoolGeometry &g, bool countIncludePad, const T *dy, T *dx) {
  using A = AccumType<T>;
  size_t nd = g.kernel.size();
  int64_t inSize = product(g.inSpatial), outSize = product(g.outSpatial);
  int64_t taps = product(g.kernel);
  std::vector<int64_t> map =
      windowMap(g.inSpatial, g.outSpatial, g.kernel, g.strides, g.dilations, g.padsBegin);
  // The divisor of each window: a product of per-axis tap counts.
  std::vector<A> divisor(static_cast<size_t>(outSize));
  std::vector<int64_t> o(nd, 0);
  for (int64_t oo = 0; oo < outSize; ++oo) {
    int64_t count = 1;
    for (size_t i = 0; i < nd; ++i) {
      int64_t lo = countIncludePad ? -g.padsBegin[i] : 0;
      int64_t hi = g.inSpatial[i] + (countIncludePad ? g.padsEnd[i] : 0);
      int64_t c = 0;
      for (int64_t k = 0; k < g.kernel[i]; ++k) {
        int64_t p = o[i] * g.strides[i] - g.padsBegin[i] + k * g.dilations[i];
        c += p >= lo && p < hi;
      }
      count *= c;
    }
    divisor[size_t(oo)] = A(count);
    for (size_t i = nd; i-- > 0;) {
      if (++o[i] < g.outSpatial[i])
        break;
      o[i] = 0;
    }
  }
  std::vector<A> acc(static_cast<size_t>(inSize));
  for (int64_t p = 0; p < g.batch * g.channels; ++p) {
    const T *dyp = dy + p * outSize;
    std::fill(acc.begin(), acc.end(), A(0));
    for (int64_t kk = 0; kk < taps; ++kk)
      for (int64_t oo = 0; oo < outSize; ++oo) {
        int64_t i = map[size_t(kk * outSize + oo)];
        if (i >= 0)
          acc[size_t(i)] += ld(dyp[oo]) / divisor[size_t(oo)];
      }
    for (int64_t i = 0; i < inSize; ++i)
      dx[p * inSize + i] = store<T>(acc[size_t(i)]);
  }
}

template <typename T>
void globalAveragePoolGrad(const T *dy, T *dx, int64_t planes, int64_t planeSize) {
  using A = AccumType<T>;
  for (int64_t p = 0; p < planes; ++p) {
    T v = store<T>(ld(dy[p]) / A(planeSize));
    std::fill(dx + p * planeSize, dx + (p + 1) * planeSize, v);
  }
}

//===----------------------------------------------------------------------===//
// Recurrent
//===----------------------------------------------------------------------===//

/// All elements of an optional buffer widened to A (empty when absent).
template <typename T, typename A = AccumType<T>>
static std::vector<A> widenAll(const T *p, int64_t n) {
  std::vector<A> v;
  if (!p)
    return v;
  v.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = ld(p[i]);
  return v;
}

/// One direction of one batch entry: the forward over its `len` steps, then
/// the backward in reverse processing order. Gradients of the weights are
/// accumulated into dW/dR/dB (this direction's slices) and of X into dX.
/// Per step s, the time index is s (forward) or len - 1 - s (backward).
template <typename T, typename A = AccumType<T>>
static void lstmGradSequence(const LstmShape &s, const LstmGradBuffers<T> &io, int64_t d,
                             int64_t bi, int64_t len, const std::vector<A> &x,
                             const std::vector<A> &w, const std::vector<A> &r,
                             const std::vector<A> &b, std::vector<A> &dX, std::vector<A> &dW,
                             std::vector<A> &dR, std::vector<A> &dB, std::vector<A> &dH0,
                             std::vector<A> &dC0) {
  const int64_t hid = s.hidden, in = s.input, g4 = 4 * hid;
  const bool backwards = s.reverse || d == 1;
  const A *wd = w.data() + d * g4 * in, *rd = r.data() + d * g4 * hid;
  const A *bd = b.empty() ? nullptr : b.data() + d * 2 * g4;
  const int64_t state = (d * s.batch + bi) * hid;
  auto timeOf = [&](int64_t step) { return backwards ? len - 1 - step : step; };
  auto xAt = [&](int64_t t) { return x.data() + (t * s.batch + bi) * in; };

  // Forward: activated gates [len][i, o, f, g], cell and hidden states
  // [len + 1][hid] (entry 0 the initial state).
  std::vector<A> gates(size_t(len * g4)), cs(size_t((len + 1) * hid)),
      hs(size_t((len + 1) * hid));
  for (int64_t j = 0; j < hid; ++j) {
    hs[size_t(j)] = io.h0 ? ld(io.h0[state + j]) : A(0);
    cs[size_t(j)] = io.c0 ? ld(io.c0[state + j]) : A(0);
  }
  for (int64_t step = 0; step < len; ++step) {
    const A *xt = xAt(timeOf(step)), *hp = hs.data() + step * hid;
    const A *cp = cs.data() + step * hid;
    A *g = gates.data() + step * g4, *c = cs.data() + (step + 1) * hid,
      *h = hs.data() + (step + 1) * hid;
    for (int64_t k = 0; k < g4; ++k) {
      A acc = bd ? bd[k] + bd[g4 + k] : A(0);
      for (int64_t j = 0; j < in; ++j)
        acc += wd[k * in + j] * xt[j];
      for (int64_t j = 0; j < hid; ++j)
        acc += rd[k * hid + j] * hp[j];
      g[k] = k < 3 * hid ? kernels::gradSigmoid(acc) : kernels::libmTanh(acc);
    }
    for (int64_t j = 0; j < hid; ++j)
      h[j] = kernels::lstmGradState(g[j], g[hid + j], g[2 * hid + j], g[3 * hid + j], cp[j], c[j]);
  }

  // Backward: dh and dc flow from step s to step s - 1.
  std::vector<A> dh(static_cast<size_t>(hid)), dc(static_cast<size_t>(hid)),
      dg(static_cast<size_t>(g4));
  for (int64_t j = 0; j < hid; ++j) {
    dh[size_t(j)] = io.dYh ? ld(io.dYh[state + j]) : A(0);
    dc[size_t(j)] = io.dYc ? ld(io.dYc[state + j]) : A(0);
  }
  for (int64_t step = len; step-- > 0;) {
    int64_t t = timeOf(step);
    const A *g = gates.data() + step * g4, *c = cs.data() + (step + 1) * hid;
    const A *cp = cs.data() + step * hid, *hp = hs.data() + step * hid, *xt = xAt(t);
    if (io.dY) {
      const T *dy = io.dY + ((t * s.directions + d) * s.batch + bi) * hid;
      for (int64_t j = 0; j < hid; ++j)
        dh[size_t(j)] += ld(dy[j]);
    }
    for (int64_t j = 0; j < hid; ++j)
      dc[size_t(j)] = kernels::lstmCellGrad(g[j], g[hid + j], g[2 * hid + j], g[3 * hid + j], c[j],
                                            cp[j], dh[size_t(j)], dc[size_t(j)], dg.data() + j,
                                            hid);
    std::fill(dh.begin(), dh.end(), A(0));
    A *dWd = dW.data() + d * g4 * in, *dRd = dR.data() + d * g4 * hid;
    A *dBd = dB.data() + d * 2 * g4, *dx = dX.data() + (t * s.batch + bi) * in;
    for (int64_t k = 0; k < g4; ++k) {
      A gk = dg[size_t(k)];
      dBd[k] += gk;
      dBd[g4 + k] += gk;
      for (int64_t j = 0; j < in; ++j) {
        dWd[k * in + j] += gk * xt[j];
        dx[j] += gk * wd[k * in + j];
      }
      for (int64_t j = 0; j < hid; ++j) {
        dRd[k * hid + j] += gk * hp[j];
        dh[size_t(j)] += gk * rd[k * hid + j];
      }
    }
  }
  std::copy(dh.begin(), dh.end(), dH0.begin() + state);
  std::copy(dc.begin(), dc.end(), dC0.begin() + state);
}

template <typename T> static void storeAll(const std::vector<AccumType<T>> &v, T *out) {
  if (!out)
    return;
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = store<T>(v[i]);
}

template <typename T> void lstmGrad(const LstmShape &s, const LstmGradBuffers<T> &io) {
  using A = AccumType<T>;
  const int64_t hid = s.hidden, in = s.input, g4 = 4 * hid, dirs = s.directions;
  std::vector<A> x = widenAll(io.x, s.seq * s.batch * in);
  std::vector<A> w = widenAll(io.w, dirs * g4 * in), r = widenAll(io.r, dirs * g4 * hid);
  std::vector<A> b = widenAll(io.b, dirs * 2 * g4);
  std::vector<A> dX(x.size(), A(0)), dW(w.size(), A(0)), dR(r.size(), A(0));
  std::vector<A> dB(size_t(dirs * 2 * g4), A(0));
  std::vector<A> dH0(size_t(dirs * s.batch * hid), A(0)), dC0(dH0.size(), A(0));
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t bi = 0; bi < s.batch; ++bi)
      lstmGradSequence<T>(s, io, d, bi, io.lens ? io.lens[bi] : s.seq, x, w, r, b, dX, dW, dR,
                          dB, dH0, dC0);
  storeAll<T>(dX, io.dX);
  storeAll<T>(dW, io.dW);
  storeAll<T>(dR, io.dR);
  storeAll<T>(dB, io.dB);
  storeAll<T>(dH0, io.dH0);
  storeAll<T>(dC0, io.dC0);
}

/// One direction of one batch entry of GRU, as lstmGradSequence: the forward
/// over `len` steps keeping the activated gates [len][z, r, h~] (and, with
/// linear_before_reset, the recurrent h-block pre-activation R_h H + Rb_h),
/// then the backward in reverse processing order.
template <typename T, typename A = AccumType<T>>
static void gruGradSequence(const GruShape &s, const GruGradBuffers<T> &io, int64_t d,
                            int64_t bi, int64_t len, const std::vector<A> &x,
                            const std::vector<A> &w, const std::vector<A> &r,
                            const std::vector<A> &b, std::vector<A> &dX, std::vector<A> &dW,
                            std::vector<A> &dR, std::vector<A> &dB, std::vector<A> &dH0) {
  const int64_t hid = s.hidden, in = s.input, g3 = 3 * hid, h2 = 2 * hid;
  const bool backwards = s.reverse || d == 1, lbr = s.linearBeforeReset;
  const A *wd = w.data() + d * g3 * in, *rd = r.data() + d * g3 * hid;
  const A *wb = b.empty() ? nullptr : b.data() + d * 2 * g3;
  const A *rb = wb ? wb + g3 : nullptr;
  const int64_t state = (d * s.batch + bi) * hid;
  auto timeOf = [&](int64_t step) { return backwards ? len - 1 - step : step; };
  auto xAt = [&](int64_t t) { return x.data() + (t * s.batch + bi) * in; };
  auto dot = [](const A *a, const A *v, int64_t n) {
    A acc = A(0);
    for (int64_t j = 0; j < n; ++j)
      acc += a[j] * v[j];
    return acc;
  };

  std::vector<A> gates(size_t(len * g3)), rec(size_t(len * hid)), hs(size_t((len + 1) * hid));
  for (int64_t j = 0; j < hid; ++j)
    hs[size_t(j)] = io.h0 ? ld(io.h0[state + j]) : A(0);
  std::vector<A> rh(static_cast<size_t>(hid));
  for (int64_t step = 0; step < len; ++step) {
    const A *xt = xAt(timeOf(step)), *hp = hs.data() + step * hid;
    A *g = gates.data() + step * g3, *q = rec.data() + step * hid,
      *h = hs.data() + (step + 1) * hid;
    for (int64_t k = 0; k < h2; ++k)
      g[k] = kernels::gradSigmoid((wb ? wb[k] + rb[k] : A(0)) + dot(wd + k * in, xt, in) +
                                  dot(rd + k * hid, hp, hid));
    for (int64_t j = 0; j < hid; ++j)
      rh[size_t(j)] = g[hid + j] * hp[j];
    for (int64_t j = 0; j < hid; ++j) {
      int64_t k = h2 + j;
      A pre = (wb ? wb[k] : A(0)) + dot(wd + k * in, xt, in);
      A rbk = rb ? rb[k] : A(0);
      if (lbr) {
        q[j] = rbk + dot(rd + k * hid, hp, hid);
        pre += g[hid + j] * q[j];
      } else {
        pre += rbk + dot(rd + k * hid, rh.data(), hid);
      }
      g[k] = kernels::libmTanh(pre);
      h[j] = kernels::gruBlend(g[j], g[k], hp[j]);
    }
  }

  std::vector<A> dh(static_cast<size_t>(hid)), dhPrev(static_cast<size_t>(hid)),
      dg(static_cast<size_t>(g3)), drh(static_cast<size_t>(hid));
  for (int64_t j = 0; j < hid; ++j)
    dh[size_t(j)] = io.dYh ? ld(io.dYh[state + j]) : A(0);
  A *dWd = dW.data() + d * g3 * in, *dRd = dR.data() + d * g3 * hid;
  A *dWb = dB.data() + d * 2 * g3, *dRb = dWb + g3;
  for (int64_t step = len; step-- > 0;) {
    int64_t t = timeOf(step);
    const A *g = gates.data() + step * g3, *q = rec.data() + step * hid;
    const A *hp = hs.data() + step * hid, *xt = xAt(t);
    A *dx = dX.data() + (t * s.batch + bi) * in;
    if (io.dY) {
      const T *dy = io.dY + ((t * s.directions + d) * s.batch + bi) * hid;
      for (int64_t j = 0; j < hid; ++j)
        dh[size_t(j)] += ld(dy[j]);
    }
    // H = (1 - z) h~ + z H_prev.
    for (int64_t j = 0; j < hid; ++j) {
      dhPrev[size_t(j)] = kernels::gruBlendGrad(g[j], g[h2 + j], hp[j], dh[size_t(j)],
                                                dg[size_t(j)], dg[size_t(h2 + j)]);
      drh[size_t(j)] = A(0);
    }
    // The h block: its input part, then its recurrent part and the reset gate.
    for (int64_t j = 0; j < hid; ++j) {
      int64_t k = h2 + j;
      A da = dg[size_t(k)], rj = g[hid + j];
      dWb[k] += da;
      for (int64_t i = 0; i < in; ++i) {
        dWd[k * in + i] += da * xt[i];
        dx[i] += da * wd[k * in + i];
      }
      if (lbr) {
        A dq = kernels::gruCandidateGradLbr(da, rj);
        dRb[k] += dq;
        for (int64_t i = 0; i < hid; ++i) {
          dRd[k * hid + i] += dq * hp[i];
          dhPrev[size_t(i)] += dq * rd[k * hid + i];
        }
        dg[size_t(hid + j)] = kernels::gruResetGradLbr(da, q[j], rj);
      } else {
        dRb[k] += da;
        for (int64_t i = 0; i < hid; ++i) {
          dRd[k * hid + i] += da * g[hid + i] * hp[i];
          drh[size_t(i)] += da * rd[k * hid + i];
        }
      }
    }
    if (!lbr)
      for (int64_t i = 0; i < hid; ++i) {
        A ri = g[hid + i];
        dg[size_t(hid + i)] = kernels::gruResetGrad(drh[size_t(i)], hp[i], ri);
        dhPrev[size_t(i)] += drh[size_t(i)] * ri;
      }
    // The z and r blocks.
    for (int64_t k = 0; k < h2; ++k) {
      A gk = dg[size_t(k)];
      dWb[k] += gk;
      dRb[k] += gk;
      for (int64_t i = 0; i < in; ++i) {
        dWd[k * in + i] += gk * xt[i];
        dx[i] += gk * wd[k * in + i];
      }
      for (int64_t i = 0; i < hid; ++i) {
        dRd[k * hid + i] += gk * hp[i];
        dhPrev[size_t(i)] += gk * rd[k * hid + i];
      }
    }
    std::swap(dh, dhPrev);
  }
  std::copy(dh.begin(), dh.end(), dH0.begin() + state);
}

template <typename T> void gruGrad(const GruShape &s, const GruGradBuffers<T> &io) {
  using A = AccumType<T>;
  const int64_t hid = s.hidden, in = s.input, g3 = 3 * hid, dirs = s.directions;
  std::vector<A> x = widenAll(io.x, s.seq * s.batch * in);
  std::vector<A> w = widenAll(io.w, dirs * g3 * in), r = widenAll(io.r, dirs * g3 * hid);
  std::vector<A> b = widenAll(io.b, dirs * 2 * g3);
  std::vector<A> dX(x.size(), A(0)), dW(w.size(), A(0)), dR(r.size(), A(0));
  std::vector<A> dB(size_t(dirs * 2 * g3), A(0)), dH0(size_t(dirs * s.batch * hid), A(0));
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t bi = 0; bi < s.batch; ++bi)
      gruGradSequence<T>(s, io, d, bi, io.lens ? io.lens[bi] : s.seq, x, w, r, b, dX, dW, dR,
                         dB, dH0);
  storeAll<T>(dX, io.dX);
  storeAll<T>(dW, io.dW);
  storeAll<T>(dR, io.dR);
  storeAll<T>(dB, io.dB);
  storeAll<T>(dH0, io.dH0);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

template <typename I> static kernels::LossLabelRule ruleOf(const LossLabels<I> &l,
                                                            int64_t classes) {
  kernels::LossLabelRule r;
  r.hasIgnoreIndex = l.hasIgnoreIndex;
  r.ignoreIndex = l.ignoreIndex;
  r.classes = classes;
  return r;
}

template <typename I>
int64_t findBadLabel(const LossLabels<I> &l, int64_t count, int64_t classes) {
  kernels::LossLabelRule rule = ruleOf(l, classes);
  for (int64_t i = 0; i < count; ++i)
    if (rule.bad(int64_t(l.labels[i])))
      return i;
  return -1;
}

template <typename T, typename I>
void classificationLoss(const T *scores, const LossLabels<I> &labels, const T *weights,
                        LossReduction reduction, bool fromLogProb, T *loss, T *logProb,
                        int64_t batch, int64_t classes, int64_t inner) {
  using A = AccumType<T>;
  kernels::LossLabelRule rule = ruleOf(labels, classes);
  A total = A(0), weightSum = A(0);
  std::vector<A> lp(static_cast<size_t>(classes));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = n * classes * inner + i;
      for (int64_t c = 0; c < classes; ++c)
        lp[size_t(c)] = ld(scores[base + c * inner]);
      if (!fromLogProb) {
        A mx = lp[0];
        for (A v : lp)
          mx = kernels::lossRowMax(mx, v);
        A sum = A(0);
        for (A v : lp)
          sum += kernels::lossExpTerm(v, mx);
        A logSum = kernels::lossLogSum(sum);
        for (A &v : lp)
          v = kernels::lossLogProb(v, mx, logSum);
      }
      if (logProb)
        for (int64_t c = 0; c < classes; ++c)
          logProb[base + c * inner] = store<T>(lp[size_t(c)]);
      int64_t li = n * inner + i;
      A value = A(0);
      if (!rule.ignored(int64_t(labels.labels[li]))) {
        int64_t cls = int64_t(labels.labels[li]);
        A wt = weights ? ld(weights[cls]) : A(1);
        value = kernels::lossValue(lp[size_t(cls)], wt);
        weightSum += wt;
      }
      if (reduction == LossReduction::None)
        loss[li] = store<T>(value);
      else
        total += value;
    }
  if (reduction == LossReduction::Sum)
    loss[0] = store<T>(total);
  else if (reduction == LossReduction::Mean)
    loss[0] = store<T>(kernels::lossMean(total, weightSum));
}

template <typename T, typename I>
void softmaxCrossEntropyLossGrad(const T *dLoss, const T *logProb, const LossLabels<I> &labels,
                                 LossReduction reduction, T *dScores, int64_t batch,
                                 int64_t classes, int64_t inner) {
  using A = AccumType<T>;
  kernels::LossLabelRule rule = ruleOf(labels, classes);
  A scale = A(1);
  if (reduction != LossReduction::None) {
    int64_t counted = 0;
    if (reduction == LossReduction::Mean)
      for (int64_t i = 0; i < batch * inner; ++i)
        counted += !rule.ignored(int64_t(labels.labels[i]));
    scale = kernels::softmaxCrossEntropyScale(ld(dLoss[0]), reduction == LossReduction::Mean,
                                              counted);
  }
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = n * classes * inner + i, li = n * inner + i;
      bool skip = rule.ignored(int64_t(labels.labels[li]));
      A s = reduction == LossReduction::None ? ld(dLoss[li]) : scale;
      int64_t cls = skip ? -1 : int64_t(labels.labels[li]);
      for (int64_t c = 0; c < classes; ++c) {
        int64_t k = base + c * inner;
        dScores[k] =
            store<T>(kernels::softmaxCrossEntropyGradValue(ld(logProb[k]), c == cls, skip, s));
      }
    }
}

template <typename T>
void mseLossGrad(const T *dLoss, const T *pred, const T *target, LossReduction reduction,
                 T *dPred, int64_t n) {
  using A = AccumType<T>;
  A scale = A(0);
  if (reduction != LossReduction::None)
    scale = kernels::mseGradScale(ld(dLoss[0]), reduction == LossReduction::Mean, n);
  for (int64_t i = 0; i < n; ++i) {
    A s = reduction == LossReduction::None ? kernels::mseGradScale(ld(dLoss[i]), false, n)
                                           : scale;
    dPred[i] = store<T>(kernels::mseGradValue(s, ld(pred[i]), ld(target[i])));
  }
}

#define MPC_INSTANTIATE_TRAINING(T)                                                        \
  template void activationGrad<T>(ActivationGrad, const T *, const T *, T *, int64_t);     \
  template void biasGrad<T, T>(const T *, llvm::ArrayRef<int64_t>, llvm::ArrayRef<int64_t>, \
                               T *);                                                       \
  template void softmaxGrad<T>(const T *, const T *, T *, int64_t, int64_t, int64_t, bool); \
  template void layerNormGrad<T>(const T *, const T *, const AccumType<T> *,               \
                                 const AccumType<T> *, const AccumType<T> *, T *,          \
                                 AccumType<T> *, AccumType<T> *, int64_t, int64_t);        \
  template void batchNormGrad<T>(const T *, const T *, const AccumType<T> *, float, T *,   \
                                 AccumType<T> *, AccumType<T> *, int64_t, int64_t,         \
                                 int64_t);                                                 \
  template void batchNormTraining<T>(const T *, const AccumType<T> *, const AccumType<T> *, \
                                     const AccumType<T> *, const AccumType<T> *, float,    \
                                     float, T *, AccumType<T> *, AccumType<T> *, int64_t,  \
                                     int64_t, int64_t);                                    \
  template void convGrad<T>(const ConvGeometry &, const T *, const T *, const T *, T *,    \
                            T *, T *);                                                     \
  template void maxPoolGrad<T>(const PoolGeometry &, const T *, const T *, T *);           \
  template void averagePoolGrad<T>(const PoolGeometry &, bool, const T *, T *);            \
  template void globalAveragePoolGrad<T>(const T *, T *, int64_t, int64_t);                \
  template void lstmGrad<T>(const LstmShape &, const LstmGradBuffers<T> &);               \
  template void gruGrad<T>(const GruShape &, const GruGradBuffers<T> &);                 \
  template void mseLossGrad<T>(const T *, const T *, const T *, LossReduction, T *,        \
                               int64_t);                                                   \
  template void classificationLoss<T, int32_t>(const T *, const LossLabels<int32_t> &,     \
                                               const T *, LossReduction, bool, T *, T *,   \
                                               int64_t, int64_t, int64_t);                 \
  template void classificationLoss<T, int64_t>(const T *, const LossLabels<int64_t> &,     \
                                               const T *, LossReduction, bool, T *, T *,   \
                                               int64_t, int64_t, int64_t);                 \
  template void softmaxCrossEntropyLossGrad<T, int32_t>(                                   \
      const T *, const T *, const LossLabels<int32_t> &, LossReduction, T *, int64_t,      \
      int64_t, int64_t);                                                                   \
  template void softmaxCrossEntropyLossGrad<T, int64_t>(                                   \
      const T *, const T *, const LossLabels<int64_t> &, LossReduction, T *, int64_t,      \
      int64_t, int64_t);
MPC_INSTANTIATE_TRAINING(float)
MPC_INSTANTIATE_TRAINING(double)
MPC_INSTANTIATE_TRAINING(Half)
MPC_INSTANTIATE_TRAINING(BFloat16)
#undef MPC_INSTANTIATE_TRAINING
template void biasGrad<Half, float>(const Half *, llvm::ArrayRef<int64_t>,
                                    llvm::ArrayRef<int64_t>, float *);
template void biasGrad<BFloat16, float>(const BFloat16 *, llvm::ArrayRef<int64_t>,
                                        llvm::ArrayRef<int64_t>, float *);

template int64_t findBadLabel<int32_t>(const LossLabels<int32_t> &, int64_t, int64_t);
template int64_t findBadLabel<int64_t>(const LossLabels<int64_t> &, int64_t, int64_t);

} // namespace cpu
} // namespace mpc
