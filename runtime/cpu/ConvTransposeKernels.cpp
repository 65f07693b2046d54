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
