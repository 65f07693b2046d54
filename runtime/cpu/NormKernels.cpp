//===- NormKernels.cpp - CPU glue for instance, group and Lp normalization --===//
//
// InstanceNormalization, GroupNormalization and LpNormalization accumulate
// their statistics in double whatever the storage type (float32 data gives
// sums of up to millions of elements); RMSNormalization runs
// cpu::rmsNormalization (fp32 accumulation, like LayerNormalization). Each
// output is rounded once.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Normalization.h"
#include "mpc/Runtime/Kernels/StatNormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cmath>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

/// Reads element i of a float tensor as double.
static double loadAt(const TensorRef &t, int64_t i) {
  double v = 0;
  dispatchFloat(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    v = double(k::load(t.as<T>()[i]));
  });
  return v;
}

/// Normalizes `groups` contiguous runs of `len` elements per batch item of
/// x; channel c of a run gets scale[c]/bias[c] (per-channel parameters over
/// `chanLen` elements each).
static void normalizeRuns(const KernelCall &c, int64_t runs, int64_t len, int64_t chanLen,
                          bool perGroupParams, double eps) {
  const TensorRef &x = c.inputs[0], &scale = c.inputs[1], &bias = c.inputs[2];
  int64_t channels = scale.numElements();
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    const T *p = x.as<T>();
    T *y = c.outputs[0].as<T>();
    for (int64_t r = 0; r < runs; ++r) {
      const T *row = p + r * len;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < len; ++i)
        sum += double(k::load(row[i]));
      double mean = sum / double(len);
      for (int64_t i = 0; i < len; ++i) {
        double d = double(k::load(row[i])) - mean;
        sq += d * d;
      }
      double inv = k::runInvStdDev(sq, len, eps);
      for (int64_t i = 0; i < len; ++i) {
        int64_t ch = k::runChannel(r, i, len, chanLen, channels, perGroupParams);
        double v = k::runNormValue(double(k::load(row[i])), mean, inv, loadAt(scale, ch),
                                   loadAt(bias, ch));
        y[r * len + i] = k::store<T>(C(v));
      }
    }
  });
}

llvm::Error cpuk::runInstanceNorm(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t runs = x.shape[0] * x.shape[1];
  int64_t len = x.numElements() / std::max<int64_t>(runs, 1);
  normalizeRuns(c, runs, len, len, true, paramsOf<NormParams>(c).epsilon);
  return llvm::Error::success();
}

llvm::Error cpuk::runGroupNorm(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  const NormParams &params = paramsOf<NormParams>(c);
  int64_t g = params.numGroups;
  int64_t runs = x.shape[0] * g, len = x.numElements() / std::max<int64_t>(runs, 1);
  int64_t chanLen = x.numElements() / std::max<int64_t>(x.shape[0] * x.shape[1], 1);
  bool perGroup = c.node->opsetVersion() < 21;
  normalizeRuns(c, runs, len, chanLen, perGroup, params.epsilon);
  return llvm::Error::success();
}

llvm::Error cpuk::runLpNorm(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t axis = paramsOf<NormParams>(c).axis, p = paramsOf<NormParams>(c).p;
  normalizeAxis(axis, x.shape.size());
  int64_t outer = 1, dim = x.shape[axis], inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[i];
  for (size_t i = axis + 1; i < x.shape.size(); ++i)
    inner *= x.shape[i];
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    const T *in = x.as<T>();
    T *y = c.outputs[0].as<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double norm = 0;
        for (int64_t j = 0; j < dim; ++j)
          norm += k::lpNormTerm(double(k::load(in[(o * dim + j) * inner + i])), p);
        norm = k::lpNormFinish(norm, p);
        for (int64_t j = 0; j < dim; ++j) {
          int64_t off = (o * dim + j) * inner + i;
          y[off] = k::store<T>(C(k::lpNormValue(double(k::load(in[off])), norm)));
        }
      }
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// RMSNormalization (opset 23)
//===----------------------------------------------------------------------===//

/// The normalized axes of an RMSNormalization: X's dims from `axis` on.
static llvm::Expected<int64_t> rmsAxisOf(const Node &n, int64_t axis,
                                        llvm::ArrayRef<int64_t> x) {
  if (!normalizeAxis(axis, static_cast<int64_t>(x.size())))
    return nodeError(n, "axis out of range for " + formatShape(x.vec()));
  return axis;
}

llvm::Error cpuk::runRMSNorm(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &scale = c.inputs[1];
  const NormParams &params = paramsOf<NormParams>(c);
  int64_t axis = *rmsAxisOf(*c.node, params.axis, x.shape);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[i];
  int64_t inner = x.numElements() / std::max<int64_t>(outer, 1);
  float eps = params.epsilon;
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *sc = scale.as<T>();
    // A scale smaller than the normalized shape is expanded once.
    std::vector<T> expanded;
    if (scale.numElements() != inner) {
      std::vector<int64_t> norm(x.shape.begin() + axis, x.shape.end());
      size_t off = norm.size() - scale.shape.size();
      expanded.resize(static_cast<size_t>(inner));
      for (int64_t i = 0; i < inner; ++i) {
        int64_t rem = i, src = 0, stride = 1;
        for (size_t d = norm.size(); d-- > 0;) {
          int64_t idx = rem % norm[d];
          rem /= norm[d];
          if (d >= off) {
            int64_t sd = scale.shape[d - off];
            src += (sd == 1 ? 0 : idx) * stride;
            stride *= sd;
          }
        }
        expanded[i] = sc[src];
      }
      sc = expanded.data();
    }
    cpu::rmsNormalization<T, T>(x.as<T>(), sc, c.outputs[0].as<T>(), outer, inner, eps);
  });
  return llvm::Error::success();
}
