//===- NormKernels.cu - Layer and RMS normalization and LayerNormGrad -----===//
//
// Slice bodies (SliceKernels.cuh) over the element math of NormBodies.h, the
// formulas the CPU's Normalization.cpp and TrainingOps.cpp call: statistics
// in fp32 (mean, then the mean squared deviation, as the CPU), each output
// rounded once. Scale and bias are of the data's type or f32.
//
//===----------------------------------------------------------------------===//
#include "NormLaunch.h"
#include "SliceKernels.cuh"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

template <typename V> __device__ float ld(V v) { return float(kernels::load(v)); }

__device__ void storeStat(void *out, bool f64, int64_t i, float v) {
  if (!out)
    return;
  if (f64)
    static_cast<double *>(out)[i] = double(v);
  else
    static_cast<float *>(out)[i] = v;
}

/// LayerNormalization (Rms false) or RMSNormalization of one row.
template <typename T, typename P, bool Rms> struct NormBody {
  NormArgs a;
  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    const T *x = static_cast<const T *>(a.x);
    const P *scale = static_cast<const P *>(a.scale), *bias = static_cast<const P *>(a.bias);
    T *y = static_cast<T *>(a.y);
    float n = float(s.n), mean = 0.0f, acc = 0.0f;
    if (!Rms) {
      for (int64_t j = c.first(); j < s.n; j += c.step())
        acc += ld(x[s.at(j)]);
      mean = c.combine(acc, SumOp(), 0.0f) / n;
      acc = 0.0f;
      for (int64_t j = c.first(); j < s.n; j += c.step())
        acc += kernels::squaredDeviation(ld(x[s.at(j)]), mean);
    } else {
      for (int64_t j = c.first(); j < s.n; j += c.step()) {
        float v = ld(x[s.at(j)]);
        acc += v * v;
      }
    }
    float inv = kernels::invStdDevOf(c.combine(acc, SumOp(), 0.0f) / n, a.epsilon);
    if (c.leader()) {
      storeStat(a.mean, a.meanF64, s.index, mean);
      storeStat(a.invStdDev, a.invStdDevF64, s.index, inv);
    }
    for (int64_t j = c.first(); j < s.n; j += c.step()) {
      float v = ld(x[s.at(j)]), sc = ld(scale[j]);
      float r = Rms ? kernels::rmsNormValue(v, inv, sc) : kernels::layerNormValue(v, mean, inv, sc);
      y[s.at(j)] = kernels::store<T>(bias ? r + ld(bias[j]) : r);
    }
  }
};

/// dX of LayerNormalizationGrad for one row.
template <typename T, typename P> struct NormGradRowBody {
  NormGradArgs a;
  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    const T *dy = static_cast<const T *>(a.dy), *x = static_cast<const T *>(a.x);
    const P *scale = static_cast<const P *>(a.scale);
    float mu = a.mean[s.index], inv = a.invStdDev[s.index];
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t j = c.first(); j < s.n; j += c.step()) {
      float g = ld(dy[s.at(j)]) * ld(scale[j]);
      sumG += g;
      sumGX += g * kernels::normalizedInput(ld(x[s.at(j)]), mu, inv);
    }
    float m1 = c.combine(sumG, SumOp(), 0.0f) / float(s.n);
    float m2 = c.combine(sumGX, SumOp(), 0.0f) / float(s.n);
    T *dx = static_cast<T *>(a.dx);
    for (int64_t j = c.first(); j < s.n; j += c.step()) {
      float g = ld(dy[s.at(j)]) * ld(scale[j]);
      float xhat = kernels::normalizedInput(ld(x[s.at(j)]), mu, inv);
      dx[s.at(j)] = kernels::store<T>(kernels::layerNormGradValue(g, xhat, inv, m1, m2));
    }
  }
};

/// dScale and dBias of LayerNormalizationGrad for one column: sums over
/// the rows (the slice's elements), in row order.
template <typename T, typename P> struct NormGradColumnBody {
  NormGradArgs a;
  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    const T *dy = static_cast<const T *>(a.dy), *x = static_cast<const T *>(a.x);
    float dScale = 0.0f, dBias = 0.0f;
    for (int64_t r = c.first(); r < s.n; r += c.step()) {
      float d = ld(dy[s.at(r)]);
      dScale += d * kernels::normalizedInput(ld(x[s.at(r)]), a.mean[r], a.invStdDev[r]);
      dBias += d;
    }
    dScale = c.combine(dScale, SumOp(), 0.0f);
    dBias = c.combine(dBias, SumOp(), 0.0f);
    if (!c.leader())
      return;
    if (a.dScale)
      static_cast<P *>(a.dScale)[s.index] = kernels::store<P>(dScale);
    if (a.dBias)
      static_cast<P *>(a.dBias)[s.index] = kernels::store<P>(dBias);
  }
};

/// Calls fn(T(), P()) for the data type and the parameter type (the same
/// type, or f32 for 16-bit data).
template <typename Fn> cudaError_t dispatchNormTypes(int32_t type, int32_t paramType, Fn &&fn) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    if (paramType == type)
      return fn(T(), T());
    if (paramType == kOnnxF32)
      return fn(T(), float());
    return cudaErrorInvalidValue;
  });
}

} // namespace

cudaError_t launchNorm(const NormArgs &a, const SlicePlan &rows, cudaStream_t stream) {
  if (!rows.cooperative)
    return cudaErrorInvalidValue;
  return dispatchNormTypes(a.type, a.paramType, [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    return a.rms ? queueSlices(NormBody<T, P, true>{a}, rows, stream)
                 : queueSlices(NormBody<T, P, false>{a}, rows, stream);
  });
}

cudaError_t launchNormGrad(const NormGradArgs &a, const SlicePlan &rows,
                           const SlicePlan &columns, cudaStream_t stream) {
  if (!rows.cooperative)
    return cudaErrorInvalidValue;
  return dispatchNormTypes(a.type, a.paramType, [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    cudaError_t e = cudaSuccess;
    if (a.dx)
      e = queueSlices(NormGradRowBody<T, P>{a}, rows, stream);
    if (e == cudaSuccess && (a.dScale || a.dBias))
      e = queueSlices(NormGradColumnBody<T, P>{a}, columns, stream);
    return e;
  });
}

} // namespace cuda
} // namespace mpc
