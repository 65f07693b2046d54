//===- ResizeKernel.cpp - ONNX Resize on the CPU ----------------------------===//
//
// Resize (opset 10 to 19) as one separable pass per resized axis: each output
// coordinate maps to a source coordinate (coordinate_transformation_mode),
// then to a few weighted input taps (nearest: one; linear and cubic: the
// kernel's support, stretched by 1 / scale when antialiasing a downscale).
// Passes run in the compute type (fp32 for 16-bit storage) and the result is
// rounded once.
//
// The output shape depends on the scales/sizes values, which are often graph
// inputs, so the row is dynamic-shape: the executor shapes it while running,
// with every input on the host.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cmath>

using namespace mpc;
using namespace mpc::cpuk;
using namespace mpc::shapes::resizing;
namespace k = mpc::kernels;

//===----------------------------------------------------------------------===//
// Taps
//===----------------------------------------------------------------------===//

namespace {
/// For each output coordinate of one axis: taps [first[o], first[o+1]) of
/// (index, weight), or `outside` (the extrapolation value).
struct AxisTaps {
  std::vector<int64_t> first, index;
  std::vector<double> weight;
  std::vector<char> outside;
};
} // namespace

/// The source coordinate of output coordinate `o`.
static double sourceCoord(const ResizeParams &a, double o, double scale, int64_t inLen,
                          int64_t outLen, double roiStart, double roiEnd) {
  // The fractional output length (scale * inLen) is what align_corners,
  // half_pixel_symmetric and tf_crop_and_resize divide by.
  double outWidth = scale * double(inLen);
  switch (a.coord) {
  case Coord::HalfPixel:
    return (o + 0.5) / scale - 0.5;
  case Coord::HalfPixelSymmetric: {
    double adjustment = double(outLen) / outWidth, center = double(inLen) / 2;
    return center * (1 - adjustment) + (o + 0.5) / scale - 0.5;
  }
  case Coord::PytorchHalfPixel:
    return outWidth == 1 ? 0.0 : (o + 0.5) / scale - 0.5;
  case Coord::AlignCorners:
    return outWidth == 1 ? 0.0 : o * double(inLen - 1) / (outWidth - 1);
  case Coord::Asymmetric:
    return o / scale;
  case Coord::TfHalfPixelForNn:
    return (o + 0.5) / scale;
  case Coord::TfCropAndResize:
    if (outWidth == 1)
      return (roiStart + roiEnd) / 2 * double(inLen - 1);
    // roi is float data: its start offset is formed in float, as ONNX's
    // reference does (0.1f * 5 is exactly 0.5, a nearest-mode tie).
    return double(float(roiStart) * float(inLen - 1)) +
           o * (roiEnd - roiStart) * double(inLen - 1) / (outWidth - 1);
  }
  return o;
}

static int64_t nearestIndex(Nearest m, double x, double scale) {
  double f = std::floor(x), r = x - f;
  switch (m) {
  case Nearest::RoundPreferFloor: return int64_t(r <= 0.5 ? f : f + 1);
  case Nearest::RoundPreferCeil: return int64_t(r < 0.5 ? f : f + 1);
  case Nearest::Floor: return int64_t(f);
  case Nearest::Ceil: return int64_t(std::ceil(x));
  case Nearest::Simple: return int64_t(scale < 1 ? std::ceil(x) : f);
  }
  return int64_t(f);
}

/// The interpolation kernel at distance t (support 1 for linear, 2 for cubic).
static double kernelAt(const ResizeParams &a, double t) {
  t = std::fabs(t);
  if (a.mode == Mode::Linear)
    return std::max(0.0, 1 - t);
  double A = a.cubicA;
  if (t <= 1)
    return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2)
    return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0;
}

static AxisTaps axisTaps(const ResizeParams &a, int64_t inLen, int64_t outLen, double scale,
                         double roiStart, double roiEnd) {
  AxisTaps t;
  t.first.push_back(0);
  t.outside.assign(outLen, 0);
  // Antialiasing stretches the kernel by 1 / scale when downscaling.
  double stretch = a.antialias && scale < 1 ? scale : 1.0;
  double support = (a.mode == Mode::Cubic ? 2.0 : 1.0) / stretch;
  for (int64_t o = 0; o < outLen; ++o) {
    double x = sourceCoord(a, double(o), scale, inLen, outLen, roiStart, roiEnd);
    if (a.coord == Coord::TfCropAndResize && (x < 0 || x > double(inLen - 1))) {
      t.outside[o] = 1;
      t.first.push_back(t.index.size());
      continue;
    }
    if (a.mode == Mode::Nearest) {
      // exclude_outside drops a tap outside the input, leaving 0.
      int64_t i = nearestIndex(a.nearest, x, scale);
      if (!a.excludeOutside || (i >= 0 && i < inLen)) {
        t.index.push_back(std::min(std::max<int64_t>(i, 0), inLen - 1));
        t.weight.push_back(1.0);
      }
      t.first.push_back(t.index.size());
      continue;
    }
    size_t begin = t.index.size();
    double sum = 0;
    int64_t lo = int64_t(std::floor(x - support)), hi = int64_t(std::ceil(x + support));
    for (int64_t i = lo; i <= hi; ++i) {
      double w = kernelAt(a, (double(i) - x) * stretch);
      if (w == 0 || (a.excludeOutside && (i < 0 || i >= inLen)))
        continue;
      t.index.push_back(std::min(std::max<int64_t>(i, 0), inLen - 1));
      t.weight.push_back(w);
      sum += w;
    }
    // Antialiased and exclude_outside weights are renormalized to sum to 1.
    if ((a.excludeOutside || stretch != 1.0) && sum != 0)
      for (size_t j = begin; j < t.weight.size(); ++j)
        t.weight[j] /= sum;
    t.first.push_back(t.index.size());
  }
  return t;
}

/// Resizes `axis` of `in` (shape `shape`) to `outLen` with the given taps.
template <typename C>
static std::vector<C> resizeAxis(const std::vector<C> &in, llvm::ArrayRef<int64_t> shape,
                                 size_t axis, int64_t outLen, const AxisTaps &t,
                                 C extrapolation) {
  int64_t outer = 1, inner = 1, inLen = shape[axis];
  for (size_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  std::vector<C> out(outer * outLen * inner, C(0));
  for (int64_t ou = 0; ou < outer; ++ou)
    for (int64_t o = 0; o < outLen; ++o) {
      C *dst = out.data() + (ou * outLen + o) * inner;
      if (t.outside[o]) {
        std::fill_n(dst, inner, extrapolation);
        continue;
      }
      for (int64_t j = t.first[o]; j < t.first[o + 1]; ++j) {
        const C *src = in.data() + (ou * inLen + t.index[j]) * inner;
        C w = C(t.weight[j]);
        for (int64_t e = 0; e < inner; ++e)
          dst[e] += w * src[e];
      }
    }
  return out;
}

/// Floating-point values of a run-time operand (empty when absent).
static std::vector<double> readDoubles(const KernelCall &c, int i) {
  std::vector<double> v;
  if (i < 0 || !c.hasInput(i))
    return v;
  const TensorRef &t = c.inputs[i];
  v.resize(t.numElements());
  if (t.dtype == DType::I32 || t.dtype == DType::I64) {
    std::vector<int64_t> ints = readInts(t);
    std::copy(ints.begin(), ints.end(), v.begin());
    return v;
  }
  dispatchFloat(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t e = 0; e < v.size(); ++e)
      v[e] = double(k::load(t.as<T>()[e]));
  });
  return v;
}

llvm::Error cpuk::runResize(const KernelCall &c) {
  const Node &n = *c.node;
  const ResizeParams *a = &paramsOf<ResizeParams>(c);
  int roiIdx, scalesIdx, sizesIdx;
  operandIndices(n, roiIdx, scalesIdx, sizesIdx);
  ResizeOperands ops;
  if (a->coord == Coord::TfCropAndResize)
    ops.roi = readDoubles(c, roiIdx);
  ops.scales = readDoubles(c, scalesIdx);
  if (sizesIdx >= 0 && c.hasInput(sizesIdx))
    ops.sizes = readInts(c.inputs[sizesIdx]);
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  auto p = planResize(n, *a, x.shape, ops);
  if (!p)
    return p.takeError();
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    std::vector<int64_t> shape(x.shape.begin(), x.shape.end());
    std::vector<C> cur(x.numElements());
    for (size_t e = 0; e < cur.size(); ++e)
      cur[e] = k::load(x.as<T>()[e]);
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t outLen = p->outShape[d];
      bool identity = p->scales[d] == 1.0 && outLen == shape[d] &&
                      (a->coord != Coord::TfCropAndResize ||
                       (p->roiStart[d] == 0.0 && p->roiEnd[d] == 1.0));
      if (identity)
        continue;
      AxisTaps taps =
          axisTaps(*a, shape[d], outLen, p->scales[d], p->roiStart[d], p->roiEnd[d]);
      cur = resizeAxis<C>(cur, shape, d, outLen, taps, C(a->extrapolation));
      shape[d] = outLen;
    }
    T *out = y.as<T>();
    for (size_t e = 0; e < cur.size(); ++e)
      out[e] = k::store<T>(cur[e]);
  });
  return llvm::Error::success();
}
