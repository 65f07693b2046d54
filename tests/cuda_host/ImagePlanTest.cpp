//===- ImagePlanTest.cpp - Pad gathers and Resize passes --------*- C++ -*-===//
//
// The image launchers' host plans (ImagePlan.h): a Pad gather's source of
// every output element against a brute-force reading of the ONNX modes
// written here (reflect by folding, wrap by whole periods, edge by
// clamping), its refusals, and the passes and workspace of a Resize.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/ImagePlan.h"

#include "gtest/gtest.h"
#include <algorithm>
#include <utility>

using namespace mpc;
using namespace mpc::cuda;
using namespace mpc::kernels;

namespace {

/// Where coordinate i (shifted by the begin pad) of an axis of `dim`
/// reads from, by the definition of each mode.
int64_t naiveSource(int64_t i, int64_t dim, int32_t mode) {
  if (mode == kPadEdge)
    return std::min(std::max<int64_t>(i, 0), dim - 1);
  if (mode == kPadWrap) {
    while (i < 0)
      i += dim;
    while (i >= dim)
      i -= dim;
    return i;
  }
  // reflect: mirror about the first and last element until inside
  while (dim > 1 && (i < 0 || i >= dim))
    i = i < 0 ? -i : 2 * (dim - 1) - i;
  return dim == 1 ? 0 : i;
}

/// Every output element's source against naiveSource, axis by axis.
void expectGather(const std::vector<int64_t> &in, const std::vector<int64_t> &begin,
                  const std::vector<int64_t> &end, int32_t mode) {
  PadMap m;
  ASSERT_TRUE(planPadMap(in, begin, end, mode, m));
  size_t rank = in.size();
  std::vector<int64_t> out(rank), idx(rank, 0);
  int64_t total = 1;
  for (size_t d = 0; d < rank; ++d) {
    out[d] = in[d] + begin[d] + end[d];
    EXPECT_EQ(m.outDims[d], out[d]);
    total *= out[d];
  }
  for (int64_t o = 0; o < total; ++o) {
    int64_t want = 0, stride = 1;
    for (size_t d = rank; d-- > 0;) {
      // Negative pads crop first; the rest pads what is left.
      int64_t lo = std::max<int64_t>(-begin[d], 0);
      int64_t kept = in[d] - lo - std::max<int64_t>(-end[d], 0);
      int64_t at = idx[d] - std::max<int64_t>(begin[d], 0);
      want += (lo + naiveSource(at, kept, mode)) * stride;
      stride *= in[d];
    }
    ASSERT_EQ(padMapSource(m, o), want) << "output element " << o << " mode " << mode;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out[d])
        break;
      idx[d] = 0;
    }
  }
}

TEST(PadMap, ReflectsAsTheOnnxExample) {
  // ONNX's reflect example along one axis: [0 1 2 3] padded (2, 1).
  PadMap m;
  ASSERT_TRUE(planPadMap({4}, {2}, {1}, kPadReflect, m));
  std::vector<int64_t> got;
  for (int64_t o = 0; o < 7; ++o)
    got.push_back(padMapSource(m, o));
  EXPECT_EQ(got, (std::vector<int64_t>{2, 1, 0, 1, 2, 3, 2}));
}

TEST(PadMap, EveryModeMatchesItsDefinition) {
  for (int32_t mode : {kPadEdge, kPadReflect, kPadWrap}) {
    SCOPED_TRACE(mode);
    // Pads wider than the axis (several periods), crops, size-1 axes.
    expectGather({3, 4}, {5, 1}, {7, -2}, mode);
    expectGather({1, 5, 2}, {2, 0, 3}, {1, 9, 0}, mode);
    expectGather({2, 1, 3, 1}, {0, 3, -1, 2}, {1, 2, 0, 0}, mode);
    expectGather({6}, {0}, {0}, mode);
  }
}

TEST(PadMap, CropsBeforeItPads) {
  // [0 1 2 3] cropped by 1 at the front and padded by 3 at the back: the
  // padding repeats, mirrors or wraps [1 2 3], never the 0 the crop removed
  // (onnx.reference and onnxruntime; the map read it before).
  const std::pair<int32_t, std::vector<int64_t>> cases[] = {
      {kPadEdge, {1, 2, 3, 3, 3, 3}},
      {kPadReflect, {1, 2, 3, 2, 1, 2}},
      {kPadWrap, {1, 2, 3, 1, 2, 3}}};
  for (const auto &c : cases) {
    PadMap m;
    ASSERT_TRUE(planPadMap({4}, {-1}, {3}, c.first, m));
    std::vector<int64_t> got;
    for (int64_t o = 0; o < 6; ++o)
      got.push_back(padMapSource(m, o));
    EXPECT_EQ(got, c.second) << "mode " << c.first;
  }
  // The back cropped, the front padded: [0 1 2] of [0 1 2 3], two in front.
  PadMap m;
  ASSERT_TRUE(planPadMap({4}, {2}, {-1}, kPadReflect, m));
  std::vector<int64_t> got;
  for (int64_t o = 0; o < 5; ++o)
    got.push_back(padMapSource(m, o));
  EXPECT_EQ(got, (std::vector<int64_t>{2, 1, 0, 1, 2}));
}

TEST(PadMap, RefusesWhatTheLauncherCannotTake) {
  PadMap m;
  EXPECT_FALSE(planPadMap({4}, {1}, {1}, kPadConstant, m)); // the strided copies' mode
  std::vector<int64_t> nine(9, 1), zero(9, 0);
  EXPECT_FALSE(planPadMap(nine, zero, zero, kPadEdge, m)); // rank above kMaxPadRank
  EXPECT_FALSE(planPadMap({0, 3}, {1, 0}, {0, 0}, kPadReflect, m)); // nothing to copy from
  EXPECT_FALSE(planPadMap({2, 3}, {-2, 0}, {1, 0}, kPadEdge, m));   // cropped to nothing
  EXPECT_TRUE(planPadMap({0, 3}, {0, 1}, {0, 1}, kPadReflect, m)); // empty in, empty out
  EXPECT_FALSE(planPadMap({4}, {1}, {}, kPadEdge, m));
}

ResizeAxis axisOf(int64_t in, int64_t out) {
  return makeResizeAxis(kResizeLinear, kCoordHalfPixel, kNearestRoundPreferFloor, false, false,
                        -0.75, double(out) / double(in), 0, 1, in, out);
}

TEST(ResizePasses, OnePassPerResizedAxisInAxisOrder) {
  // [2, 3, 4, 5]: axes 2 (4 -> 9) and 3 (5 -> 2) resized, 0 and 1 not.
  std::vector<ResizeAxis> axes = {axisOf(2, 2), axisOf(3, 3), axisOf(4, 9), axisOf(5, 2)};
  ResizePasses r = planResizePasses({2, 3, 4, 5}, axes);
  ASSERT_EQ(r.passes.size(), 2u);
  EXPECT_EQ(r.passes[0].outer, 6);
  EXPECT_EQ(r.passes[0].inner, 5);
  EXPECT_EQ(r.passes[0].axis.outLen, 9);
  EXPECT_EQ(r.passes[0].outElements(), 2 * 3 * 9 * 5);
  // The second pass sees the first's result: [6 * 9, 5 -> 2, 1].
  EXPECT_EQ(r.passes[1].outer, 54);
  EXPECT_EQ(r.passes[1].inner, 1);
  EXPECT_EQ(r.passes[1].outElements(), 108);
  // Only the first pass's result lives in the workspace.
  EXPECT_EQ(r.bufferElements, 270);
}

TEST(ResizePasses, IdentityAxesAndSinglePasses) {
  ResizePasses none = planResizePasses({3, 4}, {axisOf(3, 3), axisOf(4, 4)});
  EXPECT_TRUE(none.passes.empty());
  EXPECT_EQ(none.bufferElements, 0);
  ResizePasses one = planResizePasses({3, 4}, {axisOf(3, 1), axisOf(4, 4)});
  ASSERT_EQ(one.passes.size(), 1u);
  EXPECT_EQ(one.passes[0].outer, 1);
  EXPECT_EQ(one.passes[0].inner, 4);
  EXPECT_EQ(one.bufferElements, 0); // the pass writes the output
  // A crop box that is not the whole axis is a pass even at scale 1.
  ResizeAxis crop = makeResizeAxis(kResizeLinear, kCoordTfCropAndResize,
                                   kNearestRoundPreferFloor, false, false, -0.75, 1.0, 0.25,
                                   0.75, 4, 4);
  EXPECT_EQ(planResizePasses({4}, {crop}).passes.size(), 1u);
  // Three passes: the workspace holds the largest of the first two results.
  ResizePasses three =
      planResizePasses({2, 2, 2}, {axisOf(2, 5), axisOf(2, 7), axisOf(2, 3)});
  ASSERT_EQ(three.passes.size(), 3u);
  EXPECT_EQ(three.bufferElements, 5 * 7 * 2);
}

TEST(ResizeTaps, LinearHalfPixelWeightsAndClamping) {
  // 4 -> 8, half_pixel: output 0 sits at -0.25 (clamped to input 0), output
  // 3 at 1.25 (0.75 of input 1, 0.25 of input 2).
  ResizeAxis a = axisOf(4, 8);
  std::vector<std::pair<int64_t, double>> taps;
  auto collect = [&](int64_t o) {
    taps.clear();
    EXPECT_TRUE(resizeTaps(a, o, [&](int64_t i, double w) { taps.push_back({i, w}); }));
  };
  collect(3);
  ASSERT_EQ(taps.size(), 2u);
  EXPECT_EQ(taps[0], (std::pair<int64_t, double>{1, 0.75}));
  EXPECT_EQ(taps[1], (std::pair<int64_t, double>{2, 0.25}));
  collect(0);
  double total = 0;
  for (auto &t : taps) {
    EXPECT_EQ(t.first, 0);
    total += t.second;
  }
  EXPECT_EQ(total, 1.0);
  // tf_crop_and_resize outside the input: no taps, the extrapolation value.
  ResizeAxis crop = makeResizeAxis(kResizeLinear, kCoordTfCropAndResize,
                                   kNearestRoundPreferFloor, false, false, -0.75, 2.0, -0.5,
                                   0.5, 4, 8);
  EXPECT_FALSE(resizeTaps(crop, 0, [](int64_t, double) { FAIL(); }));
}

} // namespace
