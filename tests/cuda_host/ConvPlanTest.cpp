//===- ConvPlanTest.cpp - Convolutions as cuDNN descriptor numbers --------===//
//
// The CUDA backend's cuDNN plans (ConvPlan.h), checked without a GPU: for a
// table of Conv / ConvTranspose nodes, the geometry the shape rule resolves
// (runtime/ops, what the CPU kernels run) becomes the dimensions, pads,
// strides, dilations and group count handed to cuDNN, and cuDNN's own
// output-size rule on those numbers must give the ONNX output shape, whose
// sizes are written here from the operator spec. Configurations cuDNN's
// symmetric pads cannot express are refused with a message.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/ConvPlan.h"
#include "mpc/Runtime/OpParams.h"
#include "../../runtime/ops/NodeGeometry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

struct ConvPlanTest : ModelFixture {
  /// A Conv or ConvTranspose node with these attributes (empty: absent).
  Node *node(const char *op, std::vector<int64_t> strides, std::vector<int64_t> pads,
             std::vector<int64_t> dilations = {}, int64_t group = 1, const char *autoPad = "",
             std::vector<int64_t> outputPadding = {}) {
    Node *n = g->createNode(op);
    n->name = "conv";
    if (!strides.empty())
      n->setAttr(Attribute::makeInts("strides", strides));
    if (!pads.empty())
      n->setAttr(Attribute::makeInts("pads", pads));
    if (!dilations.empty())
      n->setAttr(Attribute::makeInts("dilations", dilations));
    if (!outputPadding.empty())
      n->setAttr(Attribute::makeInts("output_padding", outputPadding));
    if (*autoPad)
      n->setAttr(Attribute::makeString("auto_pad", autoPad));
    n->setAttr(Attribute::makeInt("group", group));
    return n;
  }
  /// The node's window attributes (they parse in every case here).
  WindowParams params(const Node &n) {
    auto p = windowParamsOf(n);
    EXPECT_TRUE(bool(p)) << (p ? "" : llvm::toString(p.takeError()));
    return p ? *p : WindowParams();
  }
  /// The shape rule's geometry of a Conv node on X and W.
  ConvGeometry conv(const Node &n, std::vector<int64_t> x, std::vector<int64_t> w) {
    auto geo = shapes::convGeometry(n, params(n), x, w);
    EXPECT_TRUE(bool(geo)) << (geo ? "" : llvm::toString(geo.takeError()));
    return geo ? *geo : ConvGeometry();
  }
  ConvGeometry transpose(const Node &n, std::vector<int64_t> x, std::vector<int64_t> w) {
    auto geo = shapes::deconvGeometry(n, params(n), x, w);
    EXPECT_TRUE(bool(geo)) << (geo ? "" : llvm::toString(geo.takeError()));
    return geo ? forwardOfTranspose(*geo) : ConvGeometry();
  }
};

std::vector<int> dims(const int *d, int n) { return std::vector<int>(d, d + n); }

/// The plan, and that cuDNN's output-size rule on its numbers gives its Y.
DnnConvPlan planOf(const ConvGeometry &geo) {
  auto p = planDnnConv(geo);
  EXPECT_TRUE(bool(p)) << (p ? "" : llvm::toString(p.takeError()));
  if (!p)
    return DnnConvPlan();
  for (int a = 0; a < p->spatialDims(); ++a)
    EXPECT_EQ(dnnConvOutputSize(p->x[2 + a], p->w[2 + a], p->strides[a], p->dilations[a],
                                p->pads[a]),
              p->y[2 + a])
        << "spatial axis " << a;
  return *p;
}

/// The refusal's text.
std::string refusal(const ConvGeometry &geo) {
  auto p = planDnnConv(geo);
  if (p)
    return "(planned)";
  return llvm::toString(p.takeError());
}

TEST(DnnConvOutputSize, CudnnRule) {
  EXPECT_EQ(dnnConvOutputSize(7, 3, 1, 1, 1), 7);
  EXPECT_EQ(dnnConvOutputSize(8, 3, 2, 1, 0), 3);
  EXPECT_EQ(dnnConvOutputSize(8, 3, 2, 1, 1), 4);
  EXPECT_EQ(dnnConvOutputSize(9, 3, 1, 2, 2), 9);
  EXPECT_EQ(dnnConvOutputSize(2, 5, 1, 1, 0), 0);
}

TEST_F(ConvPlanTest, TwoDimensional) {
  Node *n = node("Conv", {1, 1}, {1, 1, 1, 1});
  DnnConvPlan p = planOf(conv(*n, {2, 3, 7, 7}, {4, 3, 3, 3}));
  EXPECT_EQ(p.nbDims, 4);
  EXPECT_EQ(dims(p.x, 4), (std::vector<int>{2, 3, 7, 7}));
  EXPECT_EQ(dims(p.w, 4), (std::vector<int>{4, 3, 3, 3}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{2, 4, 7, 7}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(dims(p.strides, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(dims(p.dilations, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(p.group, 1);
}

TEST_F(ConvPlanTest, GroupsDilationsRectangularStrides) {
  // [1, 4, 9, 10] * [6, 2, 3, 2], group 2, dilations 2x1, strides 1x3, pads
  // 2/2 and 1/1: out = (9 + 4 - 5) / 1 + 1 = 9, (10 + 2 - 2) / 3 + 1 = 4.
  Node *n = node("Conv", {1, 3}, {2, 1, 2, 1}, {2, 1}, 2);
  DnnConvPlan p = planOf(conv(*n, {1, 4, 9, 10}, {6, 2, 3, 2}));
  EXPECT_EQ(dims(p.w, 4), (std::vector<int>{6, 2, 3, 2}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 6, 9, 4}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{2, 1}));
  EXPECT_EQ(dims(p.strides, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(dims(p.dilations, 2), (std::vector<int>{2, 1}));
  EXPECT_EQ(p.group, 2);
  // Depthwise: group = channels, one input channel per filter.
  Node *dw = node("Conv", {2, 2}, {1, 1, 1, 1}, {}, 5);
  DnnConvPlan q = planOf(conv(*dw, {1, 5, 9, 9}, {5, 1, 3, 3}));
  EXPECT_EQ(dims(q.w, 4), (std::vector<int>{5, 1, 3, 3}));
  EXPECT_EQ(dims(q.y, 4), (std::vector<int>{1, 5, 5, 5}));
  EXPECT_EQ(q.group, 5);
}

TEST_F(ConvPlanTest, OneDimensionalAsTwo) {
  // [2, 3, 17] * [4, 3, 5], stride 3, pads 2/2: out (17 + 4 - 5) / 3 + 1 = 6.
  Node *n = node("Conv", {3}, {2, 2});
  DnnConvPlan p = planOf(conv(*n, {2, 3, 17}, {4, 3, 5}));
  EXPECT_EQ(p.nbDims, 4);
  EXPECT_EQ(dims(p.x, 4), (std::vector<int>{2, 3, 1, 17}));
  EXPECT_EQ(dims(p.w, 4), (std::vector<int>{4, 3, 1, 5}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{2, 4, 1, 6}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(dims(p.strides, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(dims(p.dilations, 2), (std::vector<int>{1, 1}));
}

TEST_F(ConvPlanTest, ThreeDimensional) {
  Node *n = node("Conv", {1, 2, 1}, {1, 0, 1, 1, 0, 1});
  // out: (5 + 2 - 3) + 1 = 5, (6 - 3) / 2 + 1 = 2, (4 + 2 - 3) + 1 = 4.
  DnnConvPlan p = planOf(conv(*n, {1, 2, 5, 6, 4}, {3, 2, 3, 3, 3}));
  EXPECT_EQ(p.nbDims, 5);
  EXPECT_EQ(dims(p.y, 5), (std::vector<int>{1, 3, 5, 2, 4}));
  EXPECT_EQ(dims(p.pads, 3), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(dims(p.strides, 3), (std::vector<int>{1, 2, 1}));
}

TEST_F(ConvPlanTest, AutoPad) {
  // SAME_UPPER, stride 1, kernel 3: pads 1/1, output = input.
  DnnConvPlan p = planOf(conv(*node("Conv", {1, 1}, {}, {}, 1, "SAME_UPPER"), {1, 2, 6, 5},
                              {2, 2, 3, 3}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 2, 6, 5}));
  // SAME_UPPER, stride 2, input 7: total pad (4 - 1) 2 + 3 - 7 = 2, 1/1.
  p = planOf(conv(*node("Conv", {2, 2}, {}, {}, 1, "SAME_UPPER"), {1, 2, 7, 7}, {2, 2, 3, 3}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 2, 4, 4}));
  // SAME_LOWER, stride 2, input 8: total pad 1, all at the beginning; the
  // symmetric pad 1 gives the same 4 outputs (the end pad is never read).
  p = planOf(conv(*node("Conv", {2, 2}, {}, {}, 1, "SAME_LOWER"), {1, 2, 8, 8}, {2, 2, 3, 3}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 2, 4, 4}));
  // VALID: no padding.
  p = planOf(conv(*node("Conv", {1, 1}, {}, {}, 1, "VALID"), {1, 2, 6, 6}, {2, 2, 3, 3}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 2, 4, 4}));
}

TEST_F(ConvPlanTest, AsymmetricPads) {
  // Pads 1/0 on 8 with kernel 3, stride 2: 4 outputs either way.
  DnnConvPlan p = planOf(conv(*node("Conv", {2, 2}, {1, 1, 0, 0}), {1, 1, 8, 8}, {1, 1, 3, 3}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 1, 4, 4}));
  // SAME_UPPER, stride 2, input 8: pads 0/1 give 4 outputs, cuDNN's pad 0
  // only 3: refused.
  ConvGeometry upper =
      conv(*node("Conv", {2, 2}, {}, {}, 1, "SAME_UPPER"), {1, 2, 8, 8}, {2, 2, 3, 3});
  EXPECT_EQ(refusal(upper),
            "pads 0 and 1 on spatial axis 0 give 4 outputs; cuDNN's symmetric pad 0 gives 3");
  // Pads 0/2 on the second axis with stride 1: 2 more outputs than pad 0.
  ConvGeometry end = conv(*node("Conv", {1, 1}, {1, 0, 1, 2}), {1, 1, 5, 5}, {1, 1, 3, 3});
  EXPECT_EQ(refusal(end),
            "pads 0 and 2 on spatial axis 1 give 5 outputs; cuDNN's symmetric pad 0 gives 3");
}

/// out[o] = sum_k x[o * stride - pad + k * dilation] w[k] over positions in
/// [0, x.size()): one spatial axis of a convolution by its definition.
std::vector<double> conv1d(const std::vector<double> &x, const std::vector<double> &w,
                           int64_t stride, int64_t dilation, int64_t pad, int64_t outLen) {
  std::vector<double> out;
  for (int64_t o = 0; o < outLen; ++o) {
    double sum = 0;
    for (int64_t k = 0; k < int64_t(w.size()); ++k) {
      int64_t i = o * stride - pad + k * dilation;
      if (i >= 0 && i < int64_t(x.size()))
        sum += x[size_t(i)] * w[size_t(k)];
    }
    out.push_back(sum);
  }
  return out;
}

TEST_F(ConvPlanTest, AsymmetricPadsPadExplicitly) {
  // What cuDNN's symmetric pad refuses: X padded explicitly (begin and end
  // pads of every axis), pads 0, the ONNX output.
  ConvGeometry upper =
      conv(*node("Conv", {2, 2}, {}, {}, 1, "SAME_UPPER"), {1, 2, 8, 7}, {2, 2, 3, 3});
  ASSERT_TRUE(dnnNeedsExplicitPad(upper));
  ConvGeometry padded = explicitlyPadded(upper);
  DnnConvPlan p = planOf(padded);
  EXPECT_EQ(dims(p.x, 4), (std::vector<int>{1, 2, 9, 9})); // 8 + 0 + 1, 7 + 1 + 1
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 2, 4, 4}));
  // 1-D with dilation, pads 0/3.
  ConvGeometry one = conv(*node("Conv", {1}, {0, 3}, {2}), {1, 1, 6}, {1, 1, 2});
  ASSERT_TRUE(dnnNeedsExplicitPad(one));
  DnnConvPlan q = planOf(explicitlyPadded(one));
  EXPECT_EQ(dims(q.x, 4), (std::vector<int>{1, 1, 1, 9}));
  EXPECT_EQ(dims(q.y, 4), (std::vector<int>{1, 1, 1, 7}));
  // Symmetric and begin-heavy pads need no copy.
  EXPECT_FALSE(dnnNeedsExplicitPad(
      conv(*node("Conv", {2, 2}, {1, 1, 0, 0}), {1, 1, 8, 8}, {1, 1, 3, 3})));
  EXPECT_FALSE(
      dnnNeedsExplicitPad(conv(*node("Conv", {1, 1}, {1, 1, 1, 1}), {1, 1, 5, 5}, {1, 1, 3, 3})));

  // The windows read the same values: each axis of the geometries above
  // (and a few more), by the definition with the ONNX pads against pad 0 over
  // the explicitly padded X (zeros, then X at the begin pad).
  struct Axis {
    int64_t in, kernel, stride, dilation, begin, end;
  };
  for (Axis a : {Axis{8, 3, 2, 1, 0, 1}, Axis{7, 3, 2, 1, 1, 1}, Axis{6, 2, 1, 2, 0, 3},
                 Axis{5, 3, 1, 1, 0, 2}, Axis{9, 4, 3, 1, 2, 0}, Axis{4, 3, 2, 2, 3, 1}}) {
    ConvGeometry g;
    g.batch = g.inChannels = g.outChannels = g.group = 1;
    g.inSpatial = {a.in};
    g.kernel = {a.kernel};
    g.strides = {a.stride};
    g.dilations = {a.dilation};
    g.padsBegin = {a.begin};
    g.padsEnd = {a.end};
    int64_t span = (a.kernel - 1) * a.dilation + 1;
    g.outSpatial = {(a.in + a.begin + a.end - span) / a.stride + 1};
    DnnConvPlan pp = planOf(explicitlyPadded(g));
    EXPECT_EQ(pp.y[3], g.outSpatial[0]);
    std::vector<double> x, w, xp(size_t(a.begin), 0.0);
    for (int64_t i = 0; i < a.in; ++i)
      x.push_back(double(i * 7 % 5) - 1.5);
    for (int64_t k = 0; k < a.kernel; ++k)
      w.push_back(double(k) + 0.25);
    xp.insert(xp.end(), x.begin(), x.end());
    xp.resize(size_t(a.in + a.begin + a.end), 0.0);
    ASSERT_EQ(int64_t(xp.size()), int64_t(pp.x[3]));
    EXPECT_EQ(conv1d(xp, w, pp.strides[1], pp.dilations[1], pp.pads[1], pp.y[3]),
              conv1d(x, w, a.stride, a.dilation, a.begin, g.outSpatial[0]));
  }
}

TEST_F(ConvPlanTest, RefusesWhatCudnnCannotTake) {
  // An empty batch: cuDNN takes no zero dimension (the CPU runs it).
  ConvGeometry empty = conv(*node("Conv", {1, 1}, {1, 1, 1, 1}), {0, 3, 5, 5}, {4, 3, 3, 3});
  EXPECT_EQ(refusal(empty), "cuDNN takes no empty tensor (input [0, 3, 5, 5], output [0, 4, 5, 5])");
  // Four spatial axes.
  ConvGeometry four;
  four.inSpatial = four.outSpatial = four.kernel = four.strides = four.dilations = {1, 1, 1, 1};
  four.padsBegin = four.padsEnd = {0, 0, 0, 0};
  EXPECT_EQ(refusal(four), "cuDNN convolutions take 1 to 3 spatial axes, not 4");
  // Beyond cuDNN's int element counts.
  ConvGeometry huge = conv(*node("Conv", {1, 1}, {}), {64, 64, 1024, 1024}, {1, 64, 1, 1});
  EXPECT_EQ(refusal(huge), "a tensor of 4294967296, 64 or 67108864 elements is beyond cuDNN's "
                           "32-bit sizes");
}

TEST_F(ConvPlanTest, ConvTransposeIsBackwardData) {
  // ConvTranspose X [1, 2, 4, 4], W [2, 3, 3, 3] (C_in 2, C_out 3), stride
  // 2, pads 1/1, output_padding 1: out 2 (4 - 1) + 1 + 3 - 2 = 8. cuDNN's
  // forward convolution runs from [1, 3, 8, 8] to [1, 2, 4, 4] with W as
  // its [K = 2, C = 3] filter.
  Node *n = node("ConvTranspose", {2, 2}, {1, 1, 1, 1}, {}, 1, "", {1, 1});
  DnnConvPlan p = planOf(transpose(*n, {1, 2, 4, 4}, {2, 3, 3, 3}));
  EXPECT_EQ(dims(p.x, 4), (std::vector<int>{1, 3, 8, 8}));
  EXPECT_EQ(dims(p.w, 4), (std::vector<int>{2, 3, 3, 3}));
  EXPECT_EQ(dims(p.y, 4), (std::vector<int>{1, 2, 4, 4}));
  EXPECT_EQ(dims(p.pads, 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(dims(p.strides, 2), (std::vector<int>{2, 2}));
  // Groups: W [4, 1, 3] with group 2 gives 2 output channels; 1-D as 2-D.
  Node *gr = node("ConvTranspose", {1}, {0, 0}, {}, 2);
  DnnConvPlan q = planOf(transpose(*gr, {1, 4, 5}, {4, 1, 3}));
  EXPECT_EQ(dims(q.x, 4), (std::vector<int>{1, 2, 1, 7}));
  EXPECT_EQ(dims(q.w, 4), (std::vector<int>{4, 1, 1, 3}));
  EXPECT_EQ(dims(q.y, 4), (std::vector<int>{1, 4, 1, 5}));
  EXPECT_EQ(q.group, 2);
  // SAME_UPPER, stride 2, input 4: output 8, total pad 2 * 3 + 3 - 8 = 1,
  // 0 at the beginning; cuDNN's pad 0 maps 8 back to 3 inputs, not 4.
  Node *same = node("ConvTranspose", {2, 2}, {}, {}, 1, "SAME_UPPER");
  EXPECT_EQ(refusal(transpose(*same, {1, 2, 4, 4}, {2, 3, 3, 3})),
            "pads 0 and 1 on spatial axis 0 give 4 outputs; cuDNN's symmetric pad 0 gives 3");
}

TEST(DnnMath, StrictFp32UnlessTf32) {
  EXPECT_EQ(dnnRequestedMath(DType::F32, false), DnnMath::Fma);
  EXPECT_EQ(dnnRequestedMath(DType::F32, true), DnnMath::TensorOp);
  EXPECT_EQ(dnnRequestedMath(DType::F16, false), DnnMath::TensorOp);
  EXPECT_EQ(dnnRequestedMath(DType::BF16, false), DnnMath::TensorOp);
  EXPECT_TRUE(dnnMathAccepted(DType::F32, false, DnnMath::Fma));
  EXPECT_TRUE(dnnMathAccepted(DType::F32, false, DnnMath::Default));
  EXPECT_FALSE(dnnMathAccepted(DType::F32, false, DnnMath::TensorOp));
  EXPECT_TRUE(dnnMathAccepted(DType::F32, true, DnnMath::TensorOp));
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (bool tf32 : {false, true})
      EXPECT_FALSE(dnnMathAccepted(t, tf32, DnnMath::TensorOpAllowConversion));
  EXPECT_TRUE(dnnMathAccepted(DType::F16, false, DnnMath::TensorOp));
  EXPECT_TRUE(dnnMathAccepted(DType::BF16, false, DnnMath::Fma));
}

} // namespace
