//===- ConvTransposeKernels.cpp - CPU glue for ConvTranspose ----------------===//
//
// N-d ConvTranspose by scattering every input element through the kernel
// into an accumulator in the compute type (float for fp16/bf16), rounded
// once into the output. Geometry follows the operator spec: pads, or
// output_shape / auto_pad deriving them, output_padding, dilations, group.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Kernels/Storage.h"

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

namespace {
struct DeconvGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  std::vector<int64_t> in, kernel, strides, dilations, padsBegin, outPad, out;
};
} // namespace

static llvm::Expected<DeconvGeometry> deconvGeometry(const Node &n, const WindowParams &p,
                                                     llvm::ArrayRef<int64_t> x,
                                                     llvm::ArrayRef<int64_t> w) {
  DeconvGeometry g;
  if (x.size() < 3 || w.size() != x.size())
    return nodeError(n, "input " + formatShape(x) + " and weight " + formatShape(w) +
                            " ranks do not match");
  size_t nd = x.size() - 2;
  g.group = p.group;
  if (g.group <= 0 || w[0] != x[1])
    return nodeError(n, "weight " + formatShape(w) + " does not match input channels of " +
                            formatShape(x));
  g.batch = x[0];
  g.inChannels = x[1];
  g.outChannels = w[1] * g.group;
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  g.strides = p.strides.orDefault(nd, 1);
  g.dilations = p.dilations.orDefault(nd, 1);
  g.outPad = p.outputPadding.orDefault(nd, 0);
  std::vector<int64_t> pads = p.pads.orDefault(2 * nd, 0);
  std::vector<int64_t> outShape = p.outputShape.values;
  if (g.strides.size() != nd || g.dilations.size() != nd || g.outPad.size() != nd ||
      pads.size() != 2 * nd || (!outShape.empty() && outShape.size() != nd))
    return nodeError(n, "strides, dilations, output_padding, pads or output_shape have "
                        "the wrong length");
  bool same = p.autoPad == AutoPadMode::SameUpper || p.autoPad == AutoPadMode::SameLower;
  for (size_t d = 0; d < nd; ++d) {
    int64_t full = g.strides[d] * (g.in[d] - 1) + g.outPad[d] +
                   (g.kernel[d] - 1) * g.dilations[d] + 1;
    int64_t target = -1;
    if (!outShape.empty())
      target = outShape[d];
    else if (same)
      target = g.in[d] * g.strides[d];
    if (target >= 0) {
      int64_t total = full - target;
      bool upper = p.autoPad != AutoPadMode::SameLower;
      g.padsBegin.push_back(upper ? total / 2 : total - total / 2);
      g.out.push_back(target);
    } else {
      bool valid = p.autoPad == AutoPadMode::Valid;
      int64_t pb = valid ? 0 : pads[d];
      int64_t pe = valid ? 0 : pads[d + nd];
      g.padsBegin.push_back(pb);
      g.out.push_back(full - pb - pe);
    }
    if (g.out.back() <= 0)
      return nodeError(n, "empty output for input " + formatShape(x));
  }
  return g;
}

static llvm::Expected<DeconvGeometry> deconvGeometry(const Node &n,
                                                     llvm::ArrayRef<int64_t> x,
                                                     llvm::ArrayRef<int64_t> w) {
  return deconvGeometry(n, windowParamsOf(n), x, w);
}

llvm::Error shapes::shapeConvTranspose(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto g = deconvGeometry(q.node, q.inputs[0].shape, q.inputs[1].shape);
  if (!g)
    return g.takeError();
  std::vector<int64_t> shape = {g->batch, g->outChannels};
  shape.insert(shape.end(), g->out.begin(), g->out.end());
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

llvm::Error cpuk::runConvTranspose(const KernelCall &c) {
  auto geo = deconvGeometry(*c.node, paramsOf<WindowParams>(c), c.inputs[0].shape,
                            c.inputs[1].shape);
  if (!geo)
    return geo.takeError();
  const DeconvGeometry &g = *geo;
  size_t nd = g.in.size();
  int64_t inSize = 1, outSize = 1, kSize = 1;
  for (size_t d = 0; d < nd; ++d) {
    inSize *= g.in[d];
    outSize *= g.out[d];
    kSize *= g.kernel[d];
  }
  int64_t icPerGroup = g.inChannels / g.group, ocPerGroup = g.outChannels / g.group;
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same<T, double>::value, double, float>;
    const T *x = c.inputs[0].as<T>(), *w = c.inputs[1].as<T>();
    const T *bias = c.hasInput(2) ? c.inputs[2].as<T>() : nullptr;
    std::vector<A> acc(outSize);
    std::vector<int64_t> ii(nd), kk(nd);
    for (int64_t b = 0; b < g.batch; ++b)
      for (int64_t oc = 0; oc < g.outChannels; ++oc) {
        int64_t grp = oc / ocPerGroup, ocg = oc % ocPerGroup;
        std::fill(acc.begin(), acc.end(), bias ? A(k::load(bias[oc])) : A(0));
        for (int64_t icg = 0; icg < icPerGroup; ++icg) {
          int64_t ic = grp * icPerGroup + icg;
          const T *xp = x + (b * g.inChannels + ic) * inSize;
          const T *wp = w + (ic * ocPerGroup + ocg) * kSize;
          std::fill(ii.begin(), ii.end(), 0);
          for (int64_t i = 0; i < inSize; ++i) {
            A xv = A(k::load(xp[i]));
            std::fill(kk.begin(), kk.end(), 0);
            for (int64_t t = 0; t < kSize; ++t) {
              int64_t off = 0;
              bool inside = true;
              for (size_t d = 0; d < nd && inside; ++d) {
                int64_t o = ii[d] * g.strides[d] + kk[d] * g.dilations[d] - g.padsBegin[d];
                inside = o >= 0 && o < g.out[d];
                off = off * g.out[d] + o;
              }
              if (inside)
                acc[off] += xv * A(k::load(wp[t]));
              for (size_t d = nd; d-- > 0;)
                if (++kk[d] < g.kernel[d])
                  break;
                else
                  kk[d] = 0;
            }
            for (size_t d = nd; d-- > 0;)
              if (++ii[d] < g.in[d])
                break;
              else
                ii[d] = 0;
          }
        }
        T *yp = c.outputs[0].as<T>() + (b * g.outChannels + oc) * outSize;
        for (int64_t o = 0; o < outSize; ++o)
          yp[o] = k::store<T>(acc[o]);
      }
  });
  return llvm::Error::success();
}
