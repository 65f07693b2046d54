//===- ConvPlan.cpp - Convolutions as cuDNN descriptor numbers --------------===//
//
// ConvPlan.h: pure functions of the shape rule's geometry, no CUDA header.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/ConvPlan.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Support/Diagnostics.h"

#include <algorithm>
#include <climits>
#include <string>

using namespace mpc;
using namespace mpc::cuda;

int64_t cuda::dnnConvOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                                int64_t pad) {
  int64_t span = (kernel - 1) * dilation + 1;
  if (stride <= 0 || in + 2 * pad < span)
    return 0;
  return (in + 2 * pad - span) / stride + 1;
}

llvm::Expected<DnnConvPlan> cuda::planDnnConv(const ConvGeometry &g) {
  size_t nd = g.inSpatial.size();
  if (nd < 1 || nd > 3)
    return inputError("cuDNN convolutions take 1 to 3 spatial axes, not {0}", nd);
  DnnConvPlan p;
  p.nbDims = nd == 3 ? 5 : 4;
  // A 1-D convolution is a 2-D one over [1, L].
  size_t lead = size_t(p.spatialDims()) - nd;
  int64_t x[5] = {g.batch, g.inChannels, 1, 1, 1}, y[5] = {g.batch, g.outChannels, 1, 1, 1};
  int64_t w[5] = {g.outChannels, g.group > 0 ? g.inChannels / g.group : 0, 1, 1, 1};
  int64_t pads[3] = {0, 0, 0}, strides[3] = {1, 1, 1}, dilations[3] = {1, 1, 1};
  for (size_t i = 0; i < nd; ++i) {
    size_t a = lead + i;
    x[2 + a] = g.inSpatial[i];
    y[2 + a] = g.outSpatial[i];
    w[2 + a] = g.kernel[i];
    pads[a] = g.padsBegin[i];
    strides[a] = g.strides[i];
    dilations[a] = g.dilations[i];
    int64_t dnnOut =
        dnnConvOutputSize(g.inSpatial[i], g.kernel[i], g.strides[i], g.dilations[i], pads[a]);
    if (dnnOut != g.outSpatial[i])
      return inputError("pads {0} and {1} on spatial axis {2} give {3} outputs; cuDNN's "
                        "symmetric pad {0} gives {4}",
                        g.padsBegin[i], g.padsEnd[i], i, g.outSpatial[i], dnnOut);
  }
  if (g.group < 1 || g.inChannels % g.group || g.outChannels % g.group)
    return inputError("group {0} does not divide {1} input and {2} output channels", g.group,
                      g.inChannels, g.outChannels);
  int64_t xElems = 1, yElems = 1, wElems = 1;
  for (int d = 0; d < p.nbDims; ++d) {
    if (x[d] <= 0 || y[d] <= 0 || w[d] <= 0)
      return inputError("cuDNN takes no empty tensor (input {0}, output {1})",
                        formatShape(llvm::ArrayRef<int64_t>(x, size_t(p.nbDims))),
                        formatShape(llvm::ArrayRef<int64_t>(y, size_t(p.nbDims))));
    xElems *= x[d];
    yElems *= y[d];
    wElems *= w[d];
  }
  if (xElems > INT_MAX || yElems > INT_MAX || wElems > INT_MAX)
    return inputError("a tensor of {0}, {1} or {2} elements is beyond cuDNN's 32-bit sizes",
                      xElems, wElems, yElems);
  for (int d = 0; d < p.nbDims; ++d) {
    p.x[d] = int(x[d]);
    p.y[d] = int(y[d]);
    p.w[d] = int(w[d]);
  }
  for (int a = 0; a < p.spatialDims(); ++a) {
    if (pads[a] < 0 || pads[a] > INT_MAX || strides[a] > INT_MAX || dilations[a] > INT_MAX)
      return inputError("pad {0}, stride {1} or dilation {2} is outside cuDNN's range", pads[a],
                        strides[a], dilations[a]);
    p.pads[a] = int(pads[a]);
    p.strides[a] = int(strides[a]);
    p.dilations[a] = int(dilations[a]);
  }
  p.group = int(g.group);
  return p;
}

bool cuda::dnnNeedsExplicitPad(const ConvGeometry &g) {
  for (size_t i = 0; i < g.inSpatial.size() && i < g.padsBegin.size(); ++i)
    if (dnnConvOutputSize(g.inSpatial[i], g.kernel[i], g.strides[i], g.dilations[i],
                          g.padsBegin[i]) != g.outSpatial[i])
      return true;
  return false;
}

ConvGeometry cuda::explicitlyPadded(const ConvGeometry &g) {
  ConvGeometry p = g;
  for (size_t i = 0; i < p.inSpatial.size(); ++i) {
    p.inSpatial[i] += g.padsBegin[i] + g.padsEnd[i];
    p.padsBegin[i] = p.padsEnd[i] = 0;
  }
  return p;
}

llvm::Expected<DnnRepad> cuda::repadForDnn(const ConvGeometry &g) {
  DnnRepad r;
  r.dnn = g;
  r.grown = {g.batch, g.inChannels};
  r.offset = {0, 0};
  for (size_t i = 0; i < g.inSpatial.size(); ++i) {
    int64_t b = g.padsBegin[i], e = g.padsEnd[i];
    if (b < 0 || e < 0)
      return inputError("pads {0} and {1} on spatial axis {2}: cuDNN takes no negative pad", b,
                        e, i);
    int64_t p = std::min(b, e);
    r.dnn.inSpatial[i] = g.inSpatial[i] + (b - p) + (e - p);
    r.dnn.padsBegin[i] = r.dnn.padsEnd[i] = p;
    r.grown.push_back(r.dnn.inSpatial[i]);
    r.offset.push_back(b - p);
  }
  auto plan = planDnnConv(r.dnn);
  if (!plan)
    return plan.takeError();
  return r;
}

DnnMath cuda::dnnRequestedMath(DType t, bool tf32) {
  return t == DType::F32 && !tf32 ? DnnMath::Fma : DnnMath::TensorOp;
}

bool cuda::dnnMathAccepted(DType t, bool tf32, DnnMath m) {
  if (m == DnnMath::TensorOpAllowConversion)
    return false;
  if (t == DType::F32 && !tf32)
    return m == DnnMath::Fma || m == DnnMath::Default;
  return true;
}
