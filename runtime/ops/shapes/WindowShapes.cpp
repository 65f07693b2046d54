//===- WindowShapes.cpp - Conv and pooling window geometry -----------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h) of the windowed ops
// (Conv, ConvTranspose, pooling, ConvGrad, MaxPoolGrad/AveragePoolGrad) and
// the geometry they share with the backends' kernels (NodeGeometry.h,
// mpc/Runtime/OpGeometry.h).
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../ShapeFunctions.h"
#include "../ShapeHelpers.h"
#include "../NodeGeometry.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>

using namespace mpc;
using namespace mpc::shapes;

/// ceil(a / b) for b > 0.
static int64_t ceilDiv(int64_t a, int64_t b) { return a > 0 ? (a + b - 1) / b : -(-a / b); }

int64_t mpc::windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                              int64_t padBegin, int64_t padEnd, bool ceilMode) {
  int64_t span = in + padBegin + padEnd - ((kernel - 1) * dilation + 1);
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? ceilDiv(span, stride) : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

void mpc::resolveAutoPad(AutoPad autoPad, int64_t in, int64_t kernel, int64_t stride,
                         int64_t dilation, int64_t &padBegin, int64_t &padEnd) {
  switch (autoPad) {
  case AutoPad::NotSet:
    return;
  case AutoPad::Valid:
    padBegin = padEnd = 0;
    return;
  case AutoPad::SameUpper:
  case AutoPad::SameLower: {
    int64_t out = ceilDiv(in, stride);
    int64_t total = std::max<int64_t>(0, (out - 1) * stride +
                                             (kernel - 1) * dilation + 1 - in);
    int64_t small = total / 2;
    padBegin = autoPad == AutoPad::SameUpper ? small : total - small;
    padEnd = total - padBegin;
    return;
  }
  }
}

AutoPad shapes::autoPadOf(const WindowParams &p) {
  switch (p.autoPad) {
  case AutoPadMode::SameUpper: return AutoPad::SameUpper;
  case AutoPadMode::SameLower: return AutoPad::SameLower;
  case AutoPadMode::Valid: return AutoPad::Valid;
  case AutoPadMode::NotSet: break;
  }
  return AutoPad::NotSet;
}

/// [batch, channels, spatial...]: the NC<spatial> shape of a window op's
/// output (or of the forward output a gradient's dY must have).
static std::vector<int64_t> ncShape(int64_t batch, int64_t channels,
                                    llvm::ArrayRef<int64_t> spatial) {
  std::vector<int64_t> shape = {batch, channels};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

/// Resolves the strides, dilations, pads and output sizes of g's window
/// (g.kernel set, x of rank kernel + 2) from the attributes; with
/// `rejectEmpty` a window larger than the padded input is an error.
static llvm::Error resolveWindow(const Node &n, const WindowParams &p,
                                 llvm::ArrayRef<int64_t> x, WindowGeometry &g,
                                 bool rejectEmpty) {
  size_t nd = g.kernel.size();
  auto st = p.strides.orDefault(nd, 1);
  auto dl = p.dilations.orDefault(nd, 1);
  auto pads = p.pads.orDefault(2 * nd, 0);
  if (st.size() != nd || dl.size() != nd || pads.size() != 2 * nd)
    return nodeError(n, "strides, dilations or pads have the wrong length");
  bool ceil = p.ceilMode;
  AutoPad ap = autoPadOf(p);
  for (size_t i = 0; i < nd; ++i) {
    int64_t pb = pads[i], pe = pads[i + nd];
    if (ap != AutoPad::NotSet)
      resolveAutoPad(ap, x[i + 2], g.kernel[i], st[i], dl[i], pb, pe);
    g.strides.push_back(st[i]);
    g.dilations.push_back(dl[i]);
    g.padsBegin.push_back(pb);
    g.padsEnd.push_back(pe);
    int64_t o = windowOutputSize(x[i + 2], g.kernel[i], st[i], dl[i], pb, pe, ceil);
    if (rejectEmpty && o <= 0)
      return nodeError(n, "window larger than the padded input " + formatShape(x));
    g.outSpatial.push_back(o);
  }
  return llvm::Error::success();
}

/// Fills the window geometry of Conv/pooling from attributes and shapes.
static llvm::Error windowGeometry(const Node &n, const WindowParams &p,
                                  llvm::ArrayRef<int64_t> x, WindowGeometry &g) {
  size_t nd = g.kernel.size();
  if (x.size() != nd + 2)
    return nodeError(n, "input " + formatShape(x) + " does not match a " +
                            std::to_string(nd) + "-d window");
  return resolveWindow(n, p, x, g, /*rejectEmpty=*/true);
}

llvm::Expected<ConvGeometry> shapes::convGeometry(const Node &n, const WindowParams &p,
                                                  llvm::ArrayRef<int64_t> x,
                                                  llvm::ArrayRef<int64_t> w) {
  ConvGeometry g;
  if (w.size() < 3 || x.size() != w.size())
    return nodeError(n, "input " + formatShape(x) + " and weight " + formatShape(w) +
                            " ranks do not match");
  g.batch = x[0];
  g.inChannels = x[1];
  g.outChannels = w[0];
  g.group = p.group;
  if (g.group <= 0 || x[1] != w[1] * g.group || w[0] % g.group)
    return nodeError(n, "channels of input " + formatShape(x) + " and weight " +
                            formatShape(w) + " do not match group " +
                            std::to_string(g.group));
  g.kernel.assign(w.begin() + 2, w.end());
  const auto &ks = p.kernelShape.values;
  if (!ks.empty() && llvm::ArrayRef<int64_t>(ks) != llvm::ArrayRef<int64_t>(g.kernel))
    return nodeError(n, "kernel_shape does not match the weight");
  g.inSpatial.assign(x.begin() + 2, x.end());
  if (auto e = windowGeometry(n, p, x, g))
    return std::move(e);
  return g;
}

/// The spatial output sizes of a convolution's geometry.
static llvm::ArrayRef<int64_t> outputSpatial(const ConvGeometry &g) { return g.outSpatial; }
static llvm::ArrayRef<int64_t> outputSpatial(const DeconvGeometry &g) { return g.out; }

/// Y of Conv or ConvTranspose: [batch, out channels, spatial...] of the
/// geometry `geometryOf` resolves from the attributes and the X and W shapes.
template <typename G>
static llvm::Error shapeConvOutput(const ShapeQuery &q, std::vector<ShapedType> &out,
                                   llvm::Expected<G> (*geometryOf)(const Node &,
                                                                   const WindowParams &,
                                                                   llvm::ArrayRef<int64_t>,
                                                                   llvm::ArrayRef<int64_t>)) {
  auto wp = windowParamsOf(q.node);
  if (!wp)
    return wp.takeError();
  auto g = geometryOf(q.node, *wp, q.inputs[0].shape, q.inputs[1].shape);
  if (!g)
    return g.takeError();
  // B has one value per output channel; a shorter one was read past its end.
  if (q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined && !q.estimate &&
      q.inputs[2].shape != std::vector<int64_t>{g->outChannels})
    return nodeError(q.node, "bias B " + formatShape(q.inputs[2].shape) + " must be [" +
                                 std::to_string(g->outChannels) +
                                 "], one value per output channel");
  out.assign(1, ShapedType{q.inputs[0].dtype, ncShape(g->batch, g->outChannels, outputSpatial(*g))});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeConv)
llvm::Error shapes::shapeConv(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeConvOutput(q, out, convGeometry);
}

llvm::Expected<PoolGeometry> shapes::poolGeometry(const Node &n, const WindowParams &p,
                                                  llvm::ArrayRef<int64_t> x) {
  PoolGeometry g;
  const auto &ks = p.kernelShape.values;
  if (ks.empty())
    return nodeError(n, "missing kernel_shape");
  g.batch = x.empty() ? 0 : x[0];
  g.channels = x.size() > 1 ? x[1] : 0;
  g.kernel.assign(ks.begin(), ks.end());
  if (x.size() == ks.size() + 2)
    g.inSpatial.assign(x.begin() + 2, x.end());
  if (auto e = windowGeometry(n, p, x, g))
    return std::move(e);
  // A pad as long as the dilated kernel makes windows that sample padding
  // only (an average of nothing without count_include_pad; onnxruntime
  // refuses a pad as long as kernel_shape even where dilation would leave
  // a real element in the window).
  if (autoPadOf(p) == AutoPad::NotSet) {
    std::vector<int64_t> extent;
    for (size_t i = 0; i < g.kernel.size(); ++i)
      extent.push_back((g.kernel[i] - 1) * g.dilations[i] + 1);
    for (size_t i = 0; i < g.kernel.size(); ++i)
      if (g.padsBegin[i] >= extent[i] || g.padsEnd[i] >= extent[i])
        return nodeError(n, "pads " + formatShape(p.pads.orDefault(2 * g.kernel.size(), 0)) +
                                " must be smaller than the dilated kernel " +
                                formatShape(extent) + " along each axis");
  }
  return g;
}

MPC_DEFINED_BELOW(shapes::shapePool)
llvm::Error shapes::shapePool(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto wp = windowParamsOf(q.node);
  if (!wp)
    return wp.takeError();
  auto g = poolGeometry(q.node, *wp, q.inputs[0].shape);
  if (!g)
    return g.takeError();
  std::vector<int64_t> shape = ncShape(g->batch, g->channels, g->outSpatial);
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  if (q.node.numOutputs() > 1)
    out.push_back(ShapedType{DType::I64, shape});
  return llvm::Error::success();
}

llvm::Expected<DeconvGeometry> shapes::deconvGeometry(const Node &n, const WindowParams &p,
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
  // Each group reads C / group input channels: a count group does not
  // divide ran with the groups overlapping (onnxruntime refuses it).
  if (x[1] % g.group != 0)
    return nodeError(n, "input channels " + std::to_string(x[1]) + " of " + formatShape(x) +
                            " are not divisible by group " + std::to_string(g.group));
  g.batch = x[0];
  g.inChannels = x[1];
  g.outChannels = w[1] * g.group;
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  // As Conv's: a kernel_shape that is not W's spatial shape (a 1-d one for a
  // 2-d weight ran as if absent).
  const auto &ks = p.kernelShape.values;
  if (!ks.empty() && llvm::ArrayRef<int64_t>(ks) != llvm::ArrayRef<int64_t>(g.kernel))
    return nodeError(n, "kernel_shape does not match the weight");
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
    // output_padding adds rows that a window of the stride or dilation can
    // still reach; one as large as both reaches nothing (ONNX: "must be less
    // than the corresponding stride/dilation dimension").
    if (g.outPad[d] < 0 || g.outPad[d] >= std::max(g.strides[d], g.dilations[d]))
      return nodeError(n, "output_padding " + formatShape(g.outPad) +
                              " must be at least 0 and less than the stride " +
                              formatShape(g.strides) + " or the dilation " +
                              formatShape(g.dilations) + " of its axis");
    int64_t full = g.strides[d] * (g.in[d] - 1) + g.outPad[d] +
                   (g.kernel[d] - 1) * g.dilations[d] + 1;
    int64_t target = -1;
    if (!outShape.empty()) {
      target = outShape[d];
      // Past the windows' reach by less than a stride, the extra rows are
      // an implicit output_padding (onnx's test_convtranspose_output_shape);
      // a stride or more past it is the output of a longer input
      // (onnxruntime: "output_shape is inconsistent with input spatial
      // dimensions").
      if (target - full >= g.strides[d])
        return nodeError(n, "output_shape " + formatShape(outShape) + " is " +
                                std::to_string(target - full) + " past " +
                                std::to_string(full) + " along spatial axis " +
                                std::to_string(d) + ", the most input " + formatShape(x) +
                                " reaches with this kernel and output_padding: at most " +
                                std::to_string(g.strides[d] - 1) + " (the stride less 1)");
    }
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

MPC_DEFINED_BELOW(shapes::shapeConvTranspose)
llvm::Error shapes::shapeConvTranspose(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeConvOutput(q, out, deconvGeometry);
}

/// dY must be `want`, the forward output's shape.
static llvm::Error checkForwardOutput(const Node &n, llvm::ArrayRef<int64_t> dy,
                                      llvm::ArrayRef<int64_t> want) {
  if (want != dy)
    return nodeError(n, "dY " + formatShape(dy) + " is not the forward output shape " +
                            formatShape(want));
  return llvm::Error::success();
}

/// Strides, dilations and resolved pads of the forward window on x, and
/// checks that dy has the forward output's shape.
static llvm::Error windowOf(const Node &n, const WindowParams &p, llvm::ArrayRef<int64_t> x,
                            llvm::ArrayRef<int64_t> dy, int64_t dyChannels,
                            WindowGeometry &g) {
  size_t nd = g.kernel.size();
  if (x.size() != nd + 2 || dy.size() != nd + 2)
    return nodeError(n, "X " + formatShape(x) + " and dY " + formatShape(dy) +
                            " do not match a " + std::to_string(nd) + "-d window");
  g.inSpatial.assign(x.begin() + 2, x.end());
  if (auto e = resolveWindow(n, p, x, g, /*rejectEmpty=*/false))
    return e;
  return checkForwardOutput(n, dy, ncShape(x[0], dyChannels, g.outSpatial));
}

/// Conv's geometry of the forward (shared with Conv), and dY must have the
/// forward output's shape.
llvm::Expected<ConvGeometry> shapes::convGradGeometry(const Node &n, const WindowParams &p,
                                                      llvm::ArrayRef<int64_t> dy,
                                                      llvm::ArrayRef<int64_t> x,
                                                      llvm::ArrayRef<int64_t> w) {
  auto g = convGeometry(n, p, x, w);
  if (!g)
    return g.takeError();
  if (auto e = checkForwardOutput(n, dy, ncShape(g->batch, g->outChannels, g->outSpatial)))
    return std::move(e);
  return g;
}

MPC_DEFINED_BELOW(shapes::shapeConvGrad)
llvm::Error shapes::shapeConvGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto wp = windowParamsOf(q.node);
  if (!wp)
    return wp.takeError();
  auto g = convGradGeometry(q.node, *wp, q.inputs[0].shape,
                            q.inputs[1].shape, q.inputs[2].shape);
  if (!g)
    return g.takeError();
  DType t = q.inputs[0].dtype;
  if (q.inputs[1].dtype != t || q.inputs[2].dtype != t)
    return nodeError(q.node, "dY, X and W must have one dtype");
  out.assign(1, ShapedType{t, q.inputs[1].shape});
  out.push_back(ShapedType{t, q.inputs[2].shape});
  out.push_back(ShapedType{t, {g->outChannels}});
  return llvm::Error::success();
}

llvm::Expected<PoolGeometry> shapes::poolGradGeometry(const Node &n, const WindowParams &p,
                                                      llvm::ArrayRef<int64_t> dy,
                                                      llvm::ArrayRef<int64_t> x) {
  PoolGeometry g;
  const auto &ks = p.kernelShape.values;
  if (ks.empty())
    return nodeError(n, "missing kernel_shape");
  if (x.size() < 2)
    return nodeError(n, "X " + formatShape(x) + " has rank below 2");
  g.batch = x[0];
  g.channels = x[1];
  g.kernel.assign(ks.begin(), ks.end());
  if (auto e = windowOf(n, p, x, dy, x[1], g))
    return std::move(e);
  return g;
}

MPC_DEFINED_BELOW(shapes::shapePoolGrad)
llvm::Error shapes::shapePoolGrad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto wp = windowParamsOf(q.node);
  if (!wp)
    return wp.takeError();
  auto g = poolGradGeometry(q.node, *wp, q.inputs[0].shape,
                            q.inputs[1].shape);
  if (!g)
    return g.takeError();
  out.assign(1, ShapedType{q.inputs[0].dtype, q.inputs[1].shape});
  return llvm::Error::success();
}

