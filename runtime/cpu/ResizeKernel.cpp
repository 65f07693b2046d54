//===- ResizeKernel.cpp - ONNX Resize on the CPU ----------------------------===//
//
// Resize (opset 10 to 19) as one separable pass per resized axis: each output
// coordinate maps to a source coordinate (coordinate_transformation_mode),
// then to a few weighted input taps (nearest: one; linear and cubic: the
// kernel's support, stretched by 1 / scale when antialiasing a downscale),
// with the bodies of ImageBodies.h that the CUDA launcher calls too.
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
#include "mpc/Runtime/Kernels/ImageBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cmath>
#include <cstdio>
#include <limits>

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

/// The taps of every output coordinate of one axis (ImageBodies.h).
static AxisTaps axisTaps(const k::ResizeAxis &a) {
  AxisTaps t;
  t.first.push_back(0);
  t.outside.assign(a.outLen, 0);
  for (int64_t o = 0; o < a.outLen; ++o) {
    t.outside[o] = !k::resizeTaps(a, o, [&](int64_t i, double w) {
      t.index.push_back(i);
      t.weight.push_back(w);
    });
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
  ops.scales = scalesIdx >= 0 ? readDoubles(c, scalesIdx) : attributeScales(n);
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
      k::ResizeAxis axis = resizeAxisOf(*a, *p, shape, d);
      if (k::resizeIdentity(axis))
        continue;
      cur = resizeAxis<C>(cur, shape, d, outLen, axisTaps(axis), C(a->extrapolation));
      shape[d] = outLen;
    }
    T *out = y.as<T>();
    for (size_t e = 0; e < cur.size(); ++e)
      out[e] = k::store<T>(cur[e]);
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// RoiAlign
//===----------------------------------------------------------------------===//

namespace {
/// One bilinear sample of a roi: the four pixels' offsets in a plane and
/// their weights (all zero where the sample falls outside the image).
template <typename C> struct RoiSample {
  int64_t at[4] = {0, 0, 0, 0};
  C w[4] = {0, 0, 0, 0};
};

/// The sample at (y, x) of an H x W plane: outside [-1, H] x [-1, W] it
/// weighs nothing; else the coordinates are clamped to the image and the
/// last row or column repeats.
template <typename C> RoiSample<C> roiSample(C y, C x, int64_t h, int64_t w) {
  RoiSample<C> s;
  if (y < C(-1) || y > C(h) || x < C(-1) || x > C(w))
    return s;
  y = std::max(y, C(0));
  x = std::max(x, C(0));
  int64_t y0 = int64_t(y), x0 = int64_t(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = C(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = C(x0);
  } else {
    x1 = x0 + 1;
  }
  C ly = y - C(y0), lx = x - C(x0), hy = C(1) - ly, hx = C(1) - lx;
  s.at[0] = y0 * w + x0;
  s.at[1] = y0 * w + x1;
  s.at[2] = y1 * w + x0;
  s.at[3] = y1 * w + x1;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}
} // namespace

/// The most samples a RoiAlign bin takes (1024 x 1024): an adaptive grid
/// covers its region pixel by pixel, and a region of 1e30 pixels would
/// never end.
constexpr int64_t kMaxRoiSamplesPerBin = int64_t(1) << 20;

/// Each roi's output bin averages (or takes the largest of) a grid of
/// bilinear samples, in X's compute type and in the order onnxruntime and
/// onnx.reference use: the max mode takes, per sample, the largest of its
/// four weighted pixels (not the interpolated value), as they do.
llvm::Error cpuk::runRoiAlign(const KernelCall &c) {
  const RoiAlignParams &p = paramsOf<RoiAlignParams>(c);
  const TensorRef &x = c.inputs[0], &rois = c.inputs[1], &idx = c.inputs[2], &y = c.outputs[0];
  int64_t n = x.shape[0], ch = x.shape[1], h = x.shape[2], w = x.shape[3];
  int64_t count = rois.shape[0];
  const int64_t *batch = idx.as<int64_t>();
  for (int64_t r = 0; r < count; ++r)
    if (batch[r] < 0 || batch[r] >= n)
      return nodeError(*c.node, "batch_indices[" + llvm::Twine(r) + "] is " +
                                    llvm::Twine(batch[r]) + "; X has " + llvm::Twine(n) +
                                    " images");
  llvm::Error err = llvm::Error::success();
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    const T *xs = x.as<T>(), *rs = rois.as<T>();
    T *out = y.as<T>();
    C offset = p.halfPixel ? C(0.5) : C(0), scale = C(p.spatialScale);
    std::vector<RoiSample<C>> samples;
    for (int64_t r = 0; r < count && !err; ++r) {
      C x1 = k::load(rs[r * 4 + 0]) * scale - offset, y1 = k::load(rs[r * 4 + 1]) * scale - offset;
      C x2 = k::load(rs[r * 4 + 2]) * scale - offset, y2 = k::load(rs[r * 4 + 3]) * scale - offset;
      if (!std::isfinite(double(x1)) || !std::isfinite(double(y1)) ||
          !std::isfinite(double(x2)) || !std::isfinite(double(y2))) {
        err = nodeError(*c.node, "rois[" + llvm::Twine(r) +
                                     "] holds a coordinate that is NaN or infinite (after the "
                                     "spatial scale)");
        return;
      }
      C roiW = x2 - x1, roiH = y2 - y1;
      if (!p.halfPixel) {
        roiW = std::max(roiW, C(1));
        roiH = std::max(roiH, C(1));
      }
      C binH = roiH / C(p.outH), binW = roiW / C(p.outW);
      // The adaptive grid covers the region: one sample per pixel, each way.
      double gh = p.samplingRatio > 0 ? double(p.samplingRatio) : std::ceil(double(roiH / C(p.outH)));
      double gw = p.samplingRatio > 0 ? double(p.samplingRatio) : std::ceil(double(roiW / C(p.outW)));
      gh = std::max(gh, 0.0);
      gw = std::max(gw, 0.0);
      if (gh * gw > double(kMaxRoiSamplesPerBin)) {
        auto g = [](double v) {
          char text[32];
          std::snprintf(text, sizeof text, "%g", v);
          return std::string(text);
        };
        err = nodeError(*c.node, "rois[" + llvm::Twine(r) + "] spans " + g(double(roiH)) +
                                     " x " + g(double(roiW)) + " pixels: a grid of " + g(gh) +
                                     " x " + g(gw) + " samples per bin is past the " +
                                     llvm::Twine(kMaxRoiSamplesPerBin) +
                                     " mpc takes (set sampling_ratio)");
        return;
      }
      int64_t gridH = int64_t(gh), gridW = int64_t(gw), perBin = gridH * gridW;
      C countC = C(std::max<int64_t>(perBin, 1));
      for (int64_t ph = 0; ph < p.outH; ++ph)
        for (int64_t pw = 0; pw < p.outW; ++pw) {
          // The bin's samples, shared by the channels.
          samples.clear();
          for (int64_t iy = 0; iy < gridH; ++iy) {
            C sy = y1 + C(ph) * binH + (C(iy) + C(0.5)) * binH / C(gridH);
            for (int64_t ix = 0; ix < gridW; ++ix) {
              C sx = x1 + C(pw) * binW + (C(ix) + C(0.5)) * binW / C(gridW);
              samples.push_back(roiSample<C>(sy, sx, h, w));
            }
          }
          for (int64_t cc = 0; cc < ch; ++cc) {
            const T *plane = xs + (batch[r] * ch + cc) * h * w;
            C acc = 0;
            for (int64_t k2 = 0; k2 < perBin; ++k2) {
              const RoiSample<C> &s = samples[size_t(k2)];
              C v[4];
              for (int q = 0; q < 4; ++q)
                v[q] = s.w[q] * k::load(plane[s.at[q]]);
              if (p.max) {
                C m = std::max(std::max(std::max(v[0], v[1]), v[2]), v[3]);
                acc = k2 == 0 ? m : std::max(acc, m);
              } else {
                acc += v[0] + v[1] + v[2] + v[3];
              }
            }
            out[((r * ch + cc) * p.outH + ph) * p.outW + pw] =
                k::store<T>(p.max ? acc : acc / countC);
          }
        }
    }
  });
  return err;
}

//===----------------------------------------------------------------------===//
// QuantizeLinear, DequantizeLinear
//===----------------------------------------------------------------------===//

namespace {
/// Element e's index into a per-axis scale (0 for one of a single element):
/// x seen as [outer, len, inner] around the axis.
/// Blocked (block > 0): the scale is x's shape with the axis divided by the
/// block, and element e's scale keeps its other coordinates.
struct QuantAxis {
  int64_t len = 1, inner = 1, block = 0, scaleLen = 1;
  bool perAxis = false;
  int64_t at(int64_t e) const {
    if (!perAxis)
      return 0;
    int64_t i = (e / inner) % len;
    if (!block)
      return i;
    return ((e / (len * inner)) * scaleLen + i / block) * inner + e % inner;
  }
};

QuantAxis quantAxisOf(const KernelCall &c) {
  QuantAxis a;
  const TensorRef &x = c.inputs[0], &s = c.inputs[1];
  const QuantParams &p = paramsOf<QuantParams>(c);
  a.block = p.blockSize;
  if (s.numElements() == 1 && a.block == 0)
    return a;
  int64_t axis = p.axis;
  int64_t rank = int64_t(x.shape.size());
  if (axis < 0)
    axis += rank;
  a.perAxis = true;
  a.len = x.shape[size_t(axis)];
  for (int64_t d = axis + 1; d < rank; ++d)
    a.inner *= x.shape[size_t(d)];
  if (a.block)
    a.scaleLen = s.shape[size_t(axis)];
  return a;
}

/// The zero point of scale slot i (0 without one), widened.
int64_t zeroPointAt(const KernelCall &c, int64_t i) {
  if (!c.hasInput(2))
    return 0;
  int64_t z = 0;
  dispatchInteger(c.inputs[2].dtype, [&](auto tag) {
    using Z = decltype(tag);
    z = int64_t(c.inputs[2].as<Z>()[i]);
  });
  return z;
}
} // namespace

/// y = saturate(round-half-even(x / scale) + zero point), in float as
/// onnxruntime computes it.
llvm::Error cpuk::runQuantizeLinear(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &s = c.inputs[1], &y = c.outputs[0];
  QuantAxis a = quantAxisOf(c);
  int64_t n = x.numElements(), slots = s.numElements();
  std::vector<float> scale(static_cast<size_t>(slots));
  std::vector<float> zero(static_cast<size_t>(slots));
  dispatchFloat(s.dtype, [&](auto tag) {
    using S = decltype(tag);
    for (int64_t i = 0; i < slots; ++i)
      scale[size_t(i)] = float(k::load(s.as<S>()[i]));
  });
  for (int64_t i = 0; i < slots; ++i)
    zero[size_t(i)] = float(zeroPointAt(c, i));
  dispatchFloat(x.dtype, [&](auto xtag) {
    using X = decltype(xtag);
    dispatchInteger(y.dtype, [&](auto ytag) {
      using Y = decltype(ytag);
      const float lo = float(std::numeric_limits<Y>::min()), hi = float(std::numeric_limits<Y>::max());
      for (int64_t e = 0; e < n; ++e) {
        int64_t i = a.at(e);
        float v = std::nearbyint(float(k::load(x.as<X>()[e])) / scale[size_t(i)]) + zero[size_t(i)];
        // NaN (a NaN x or scale) quantizes to the type's lowest value, as
        // onnxruntime and onnx.reference give it.
        v = v != v ? lo : std::min(std::max(v, lo), hi);
        y.as<Y>()[e] = Y(v);
      }
    });
  });
  return llvm::Error::success();
}

/// y = (x - zero point) * scale, the difference exact, the product in float
/// (rounded once to a 16-bit scale's type).
llvm::Error cpuk::runDequantizeLinear(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &s = c.inputs[1], &y = c.outputs[0];
  QuantAxis a = quantAxisOf(c);
  int64_t n = x.numElements(), slots = s.numElements();
  std::vector<int64_t> zero(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i)
    zero[size_t(i)] = zeroPointAt(c, i);
  dispatchInteger(x.dtype, [&](auto xtag) {
    using X = decltype(xtag);
    dispatchFloat(s.dtype, [&](auto stag) {
      using S = decltype(stag);
      for (int64_t e = 0; e < n; ++e) {
        int64_t i = a.at(e);
        float v = float(int64_t(x.as<X>()[e]) - zero[size_t(i)]) * float(k::load(s.as<S>()[i]));
        y.as<S>()[e] = k::store<S>(v);
      }
    });
  });
  return llvm::Error::success();
}
