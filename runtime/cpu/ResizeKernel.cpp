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
