//===- ImageTest.cpp - Resize, LRN and Pad's edge/reflect/wrap modes ------===//
//
// Image ops against references written here from the ONNX definitions, in
// double, for f32, f16, bf16 and f64 on every selected device through the op
// tester (OpTester.h):
//   * Resize: every mode (nearest with each rounding, linear, cubic with its
//     coefficient and exclude_outside, antialiased downscales) and every
//     coordinate transformation, by scales and by sizes, up- and downscaling,
//     size-1 and long (> 1024) axes, tf_crop_and_resize's extrapolation,
//     opset 10's rules and opset 18's axes. The reference evaluates each
//     output as the full tensor product of its per-axis taps (linear: the two
//     neighbours, cubic: the four, by the spec's formulas), not pass by pass.
//   * LRN: odd and even windows, windows wider than the channels, a single
//     channel, long planes.
//   * Pad with mode edge, reflect and wrap: crops, pads wider than the axis
//     (wrap, edge), size-1 axes, negative axes, opset 2's attribute.
//
//===----------------------------------------------------------------------===//

#include "OpTester.h"

#include <cmath>
#include <functional>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

class ImageTest : public DeviceTypeTest {};
OPTEST_INSTANTIATE_FLOAT_TYPES(ImageTest);

/// An int64 vector operand (sizes, pads, axes).
HostTensor ints(const std::vector<int64_t> &v) { return tensorOf<int64_t>({int64_t(v.size())}, v); }

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

struct ResizeCase {
  const char *name;
  std::vector<int64_t> in;
  /// Exactly one of scales and sizes (over every axis, or over `axes`).
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  const char *mode, *coord, *nearest;
  float cubicA = -0.75f;
  bool excludeOutside = false, antialias = false;
  std::vector<float> roi = {};
  float extrapolation = 0;
  int64_t opset = 19;
  std::vector<int64_t> axes = {};
};

const ResizeCase kResizeCases[] = {
    {"linear-up-half-pixel", {2, 3, 4, 5}, {1, 1, 2, 1.5f}, {}, "linear", "half_pixel", ""},
    {"linear-down-align-corners", {1, 2, 9, 7}, {}, {1, 2, 4, 3}, "linear", "align_corners",
     ""},
    {"linear-asymmetric-odd", {1, 1, 7, 5}, {1, 1, 1.75f, 0.6f}, {}, "linear", "asymmetric",
     ""},
    {"linear-symmetric", {1, 2, 5, 6}, {}, {1, 2, 8, 4}, "linear", "half_pixel_symmetric", ""},
    {"linear-pytorch", {1, 1, 4, 6}, {}, {1, 1, 1, 9}, "linear", "pytorch_half_pixel", ""},
    {"linear-long-row", {1, 1, 1, 1500}, {}, {1, 1, 1, 2101}, "linear", "half_pixel", ""},
    {"cubic-up", {1, 2, 4, 5}, {1, 1, 2, 2}, {}, "cubic", "half_pixel", ""},
    {"cubic-down-a", {1, 1, 9, 8}, {}, {1, 1, 4, 5}, "cubic", "asymmetric", "", -0.5f},
    {"cubic-exclude-outside", {1, 1, 5, 5}, {1, 1, 1.6f, 1.6f}, {}, "cubic", "half_pixel", "",
     -0.75f, true},
    {"linear-antialias", {1, 2, 12, 10}, {}, {1, 2, 5, 3}, "linear", "half_pixel", "", -0.75f,
     false, true},
    {"cubic-antialias", {1, 1, 11, 9}, {}, {1, 1, 4, 9}, "cubic", "pytorch_half_pixel", "",
     -0.75f, false, true},
    {"nearest-floor-pref", {1, 2, 5, 7}, {1, 1, 2.5f, 0.5f}, {}, "nearest", "half_pixel",
     "round_prefer_floor"},
    {"nearest-ceil-pref", {1, 2, 5, 7}, {1, 1, 2.5f, 0.5f}, {}, "nearest", "half_pixel",
     "round_prefer_ceil"},
    {"nearest-floor", {2, 1, 3, 4}, {}, {2, 1, 7, 3}, "nearest", "asymmetric", "floor"},
    {"nearest-ceil", {2, 1, 3, 4}, {}, {2, 1, 7, 3}, "nearest", "tf_half_pixel_for_nn", "ceil"},
    {"nearest-align-corners", {1, 1, 4, 4}, {1, 1, 3, 3}, {}, "nearest", "align_corners",
     "round_prefer_ceil"},
    {"crop-and-resize", {1, 1, 6, 5}, {}, {1, 1, 4, 7}, "linear", "tf_crop_and_resize", "",
     -0.75f, false, false, {0, 0, -0.2f, 0.1f, 1, 1, 0.8f, 1.3f}, 7.5f},
    {"crop-nearest", {1, 1, 6, 5}, {}, {1, 1, 3, 6}, "nearest", "tf_crop_and_resize",
     "round_prefer_floor", -0.75f, false, false, {0, 0, 0.1f, 0, 1, 1, 0.9f, 1.2f}, -1.0f},
    {"size-one-axes", {1, 1, 1, 6}, {}, {3, 1, 1, 1}, "linear", "half_pixel", ""},
    {"opset10-nearest", {1, 1, 3, 5}, {1, 1, 2, 0.6f}, {}, "nearest", "asymmetric", "floor",
     -0.75f, false, false, {}, 0, 10},
    {"opset10-linear", {1, 1, 3, 5}, {1, 1, 1.5f, 2}, {}, "linear", "asymmetric", "", -0.75f,
     false, false, {}, 0, 10},
    {"axes", {2, 3, 5}, {}, {4, 2}, "linear", "half_pixel", "", -0.75f, false, false, {}, 0,
     19, {-1, 1}},
};

/// The source coordinate of output o by the ONNX definition of each
/// coordinate_transformation_mode.
double sourceOf(const std::string &coord, double o, double scale, double in, double out,
                double roiStart, double roiEnd) {
  if (coord == "half_pixel")
    return (o + 0.5) / scale - 0.5;
  if (coord == "half_pixel_symmetric") {
    double adjustment = out / (scale * in), center = in / 2;
    return center * (1 - adjustment) + (o + 0.5) / scale - 0.5;
  }
  if (coord == "pytorch_half_pixel")
    return out > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
  if (coord == "align_corners")
    return out == 1 ? 0.0 : o * (in - 1) / (out - 1);
  if (coord == "asymmetric")
    return o / scale;
  if (coord == "tf_half_pixel_for_nn")
    return (o + 0.5) / scale;
  // tf_crop_and_resize (roi as float data)
  if (out == 1)
    return 0.5 * (roiStart + roiEnd) * (in - 1);
  return double(float(roiStart) * float(in - 1)) + o * (roiEnd - roiStart) * (in - 1) / (out - 1);
}

/// The cubic convolution coefficient at distance d (0 <= d < 2).
double cubicWeight(double d, double A) {
  if (d < 1)
    return ((A + 2) * d - (A + 3)) * d * d + 1;
  return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
}

using Taps = std::vector<std::pair<int64_t, double>>;

/// The taps of output o on one axis; false for the extrapolation value.
bool tapsOf(const ResizeCase &rc, double scale, int64_t in, int64_t out, int64_t o,
            double roiStart, double roiEnd, Taps &taps) {
  std::string mode = rc.mode, coord = rc.coord;
  taps.clear();
  double x = sourceOf(coord, double(o), scale, double(in), double(out), roiStart, roiEnd);
  if (coord == "tf_crop_and_resize" && (x < 0 || x > double(in - 1)))
    return false;
  auto clampIndex = [&](int64_t i) { return std::min(std::max<int64_t>(i, 0), in - 1); };
  if (mode == "nearest") {
    std::string rule = rc.nearest;
    double f = std::floor(x);
    int64_t i;
    if (rc.opset == 10)
      i = int64_t(scale < 1 ? std::ceil(x) : f);
    else if (rule == "floor")
      i = int64_t(f);
    else if (rule == "ceil")
      i = int64_t(std::ceil(x));
    else if (x - f == 0.5)
      i = int64_t(rule == "round_prefer_ceil" ? f + 1 : f);
    else
      i = int64_t(std::round(x));
    taps.push_back({clampIndex(i), 1.0});
    return true;
  }
  bool cubic = mode == "cubic";
  if (rc.antialias && scale < 1) {
    // The filter stretched by 1 / scale, normalized.
    double support = (cubic ? 2.0 : 1.0) / scale, sum = 0;
    for (int64_t i = int64_t(std::floor(x - support)); i <= int64_t(std::ceil(x + support));
         ++i) {
      double d = std::fabs((double(i) - x) * scale);
      double w = cubic ? (d < 2 ? cubicWeight(d, rc.cubicA) : 0.0) : std::max(0.0, 1 - d);
      if (w != 0)
        taps.push_back({i, w}), sum += w;
    }
    for (auto &t : taps)
      t = {clampIndex(t.first), t.second / sum};
    return true;
  }
  int64_t i0 = int64_t(std::floor(x));
  double t = x - double(i0);
  if (!cubic) {
    taps = {{clampIndex(i0), 1 - t}, {clampIndex(i0 + 1), t}};
    return true;
  }
  double sum = 0;
  for (int64_t k = -1; k <= 2; ++k) {
    double w = cubicWeight(std::fabs(double(k) - t), rc.cubicA);
    int64_t i = i0 + k;
    if (rc.excludeOutside && (i < 0 || i >= in))
      w = 0;
    sum += w;
    taps.push_back({i, w});
  }
  for (auto &tp : taps)
    tp = {clampIndex(tp.first), rc.excludeOutside ? tp.second / sum : tp.second};
  return true;
}

/// The node of a case with its scales or sizes as constants.
OpTester resizeNode(const ResizeCase &rc, const HostTensor &x) {
  OpTester t("Resize", rc.opset);
  t.attrString("mode", rc.mode).input(x);
  if (rc.opset == 10)
    return std::move(t.constantInput(tensorOf<float>({int64_t(rc.scales.size())}, rc.scales)));
  t.attrString("coordinate_transformation_mode", rc.coord);
  if (*rc.nearest)
    t.attrString("nearest_mode", rc.nearest);
  t.attrFloat("cubic_coeff_a", rc.cubicA).attrInt("exclude_outside", rc.excludeOutside);
  t.attrInt("antialias", rc.antialias).attrFloat("extrapolation_value", rc.extrapolation);
  if (!rc.axes.empty())
    t.attrInts("axes", rc.axes);
  if (rc.roi.empty())
    t.absentInput();
  else
    t.constantInput(tensorOf<float>({int64_t(rc.roi.size())}, rc.roi));
  if (!rc.scales.empty())
    return std::move(t.constantInput(tensorOf<float>({int64_t(rc.scales.size())}, rc.scales)));
  return std::move(t.absentInput().constantInput(ints(rc.sizes)));
}

OPTEST_TYPED_P(ImageTest, ResizeMatchesTheDefinition) {
  std::mt19937 rng(14);
  for (const ResizeCase &rc : kResizeCases) {
    SCOPED_TRACE(rc.name);
    size_t rank = rc.in.size();
    std::vector<int64_t> axes = rc.axes;
    if (axes.empty())
      for (size_t d = 0; d < rank; ++d)
        axes.push_back(int64_t(d));
    std::vector<int64_t> out = rc.in;
    std::vector<double> scale(rank, 1.0), roiStart(rank, 0.0), roiEnd(rank, 1.0);
    for (size_t k = 0; k < axes.size(); ++k) {
      size_t d = size_t(axes[k] < 0 ? axes[k] + int64_t(rank) : axes[k]);
      if (!rc.scales.empty()) {
        scale[d] = rc.scales[k];
        out[d] = int64_t(std::floor(double(rc.scales[k]) * double(rc.in[d])));
      } else {
        out[d] = rc.sizes[k];
        scale[d] = double(out[d]) / double(rc.in[d]);
      }
      if (!rc.roi.empty()) {
        roiStart[d] = rc.roi[k];
        roiEnd[d] = rc.roi[axes.size() + k];
      }
    }
    std::vector<T> x = randomVector<T>(size_t(product(rc.in)), rng);
    std::vector<double> xd = toDoubles(x), ref, scales;
    std::vector<int64_t> inStrides = stridesOf(rc.in);
    for (int64_t e = 0; e < product(out); ++e) {
      std::vector<int64_t> o = unravel(e, out);
      std::vector<Taps> taps(rank);
      bool outside = false;
      for (size_t d = 0; d < rank; ++d) {
        if (scale[d] == 1.0 && out[d] == rc.in[d] && roiStart[d] == 0 && roiEnd[d] == 1)
          taps[d] = {{o[d], 1.0}}; // an axis left as it is
        else if (!tapsOf(rc, scale[d], rc.in[d], out[d], o[d], roiStart[d], roiEnd[d], taps[d]))
          outside = true;
      }
      if (outside) {
        ref.push_back(rc.extrapolation);
        scales.push_back(std::fabs(rc.extrapolation));
        continue;
      }
      // The tensor product of the axes' taps.
      double sum = 0, abs = 0;
      std::function<void(size_t, int64_t, double)> walk = [&](size_t d, int64_t off, double w) {
        if (d == rank) {
          sum += w * xd[size_t(off)];
          abs += std::fabs(w * xd[size_t(off)]);
          return;
        }
        for (auto &t : taps[d])
          walk(d + 1, off + t.first * inStrides[d], w * t.second);
      };
      walk(0, 0, 1.0);
      ref.push_back(sum);
      scales.push_back(abs);
    }
    std::vector<T> got = runOutput<T>(resizeNode(rc, tensorOf(rc.in, x)), device);
    EXPECT_TRUE(allClose(got, ref, scales));
  }
}

//===----------------------------------------------------------------------===//
// LRN
//===----------------------------------------------------------------------===//

OPTEST_TYPED_P(ImageTest, LrnMatchesTheDefinition) {
  struct LrnCase {
    std::vector<int64_t> shape;
    int64_t size;
    float alpha, beta, bias;
  };
  const LrnCase cases[] = {
      {{2, 5, 3, 3}, 3, 1e-4f, 0.75f, 1.0f}, {{1, 6, 2, 2}, 4, 0.5f, 0.6f, 2.0f},
      {{2, 3, 4}, 7, 0.3f, 0.5f, 1.5f},      {{1, 1, 2, 2}, 1, 0.2f, 0.75f, 1.0f},
      {{1, 4, 1100}, 3, 0.1f, 0.9f, 1.0f},   {{3, 2, 1}, 2, 1.0f, 1.0f, 1.0f},
  };
  std::mt19937 rng(15);
  for (const LrnCase &lc : cases) {
    SCOPED_TRACE(shapeString(lc.shape) + " size " + std::to_string(lc.size));
    std::vector<T> x = randomVector<T>(size_t(product(lc.shape)), rng, -2.0, 2.0);
    std::vector<double> xd = toDoubles(x), ref, scales;
    int64_t ch = lc.shape[1], inner = product(lc.shape) / (lc.shape[0] * ch);
    for (int64_t e = 0; e < int64_t(xd.size()); ++e) {
      int64_t c = (e / inner) % ch, base = e - c * inner;
      // Channels from c - floor((size - 1) / 2) to c + ceil((size - 1) / 2).
      double squares = 0;
      for (int64_t k = c - (lc.size - 1) / 2; k <= c + lc.size / 2; ++k)
        if (k >= 0 && k < ch)
          squares += xd[size_t(base + k * inner)] * xd[size_t(base + k * inner)];
      double y = xd[size_t(e)] /
                 std::pow(double(lc.bias) + double(lc.alpha) / double(lc.size) * squares,
                          double(lc.beta));
      ref.push_back(y);
      scales.push_back(std::fabs(y));
    }
    OpTester t("LRN", 13);
    t.attrInt("size", lc.size).attrFloat("alpha", lc.alpha).attrFloat("beta", lc.beta);
    t.attrFloat("bias", lc.bias).input(tensorOf(lc.shape, x));
    EXPECT_TRUE(allClose(runOutput<T>(t, device), ref, scales));
  }
}

//===----------------------------------------------------------------------===//
// Pad: edge, reflect, wrap
//===----------------------------------------------------------------------===//

/// Where coordinate i (less the begin pad) of an axis of `dim` reads from.
int64_t padFrom(const std::string &mode, int64_t i, int64_t dim) {
  if (mode == "edge")
    return std::min(std::max<int64_t>(i, 0), dim - 1);
  if (mode == "wrap") {
    while (i < 0)
      i += dim;
    return i % dim;
  }
  while (dim > 1 && (i < 0 || i >= dim)) // reflect about the end elements
    i = i < 0 ? -i : 2 * (dim - 1) - i;
  return dim > 1 ? i : 0;
}

OPTEST_TYPED_P(ImageTest, PadModesMatchTheDefinition) {
  struct PadCase {
    std::vector<int64_t> shape, pads, axes;
    bool wide; // a pad wider than its axis (not for reflect)
  };
  const PadCase cases[] = {
      {{3, 4}, {2, 1, 1, 3}, {}, false},
      {{2, 3, 5}, {0, -1, 2, 1, 2, -1}, {}, false},
      {{4, 6}, {-1, 2, 2, -3}, {}, false}, // one side cropped, the other padded
      {{1, 5, 1}, {0, 3, 2, 1, 0, 3}, {}, false},
      {{3, 1100}, {1, 2, 2, 0}, {-1, 0}, false},
      {{2, 3}, {5, 7, 4, 8}, {}, true},
  };
  std::mt19937 rng(16);
  for (const char *mode : {"edge", "reflect", "wrap"}) {
    for (const PadCase &pc : cases) {
      if (pc.wide && std::string(mode) == "reflect")
        continue;
      SCOPED_TRACE(std::string(mode) + " " + shapeString(pc.shape));
      size_t rank = pc.shape.size(), given = pc.pads.size() / 2;
      std::vector<int64_t> begin(rank, 0), end(rank, 0);
      for (size_t k = 0; k < given; ++k) {
        int64_t ax = pc.axes.empty() ? int64_t(k) : pc.axes[k];
        size_t d = size_t(ax < 0 ? ax + int64_t(rank) : ax);
        begin[d] = pc.pads[k];
        end[d] = pc.pads[given + k];
      }
      std::vector<int64_t> out(rank);
      for (size_t d = 0; d < rank; ++d)
        out[d] = pc.shape[d] + begin[d] + end[d];
      std::vector<T> x = randomVector<T>(size_t(product(pc.shape)), rng);
      std::vector<double> xd = toDoubles(x), ref;
      std::vector<int64_t> strides = stridesOf(pc.shape);
      for (int64_t e = 0; e < product(out); ++e) {
        std::vector<int64_t> o = unravel(e, out);
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) {
          // Negative pads crop first; the rest pads what is left.
          int64_t lo = std::max<int64_t>(-begin[d], 0);
          int64_t kept = pc.shape[d] - lo - std::max<int64_t>(-end[d], 0);
          int64_t at = o[d] - std::max<int64_t>(begin[d], 0);
          off += (lo + padFrom(mode, at, kept)) * strides[d];
        }
        ref.push_back(xd[size_t(off)]);
      }
      OpTester t("Pad", 19);
      t.attrString("mode", mode).input(tensorOf(pc.shape, x)).constantInput(ints(pc.pads));
      if (!pc.axes.empty())
        t.absentInput().constantInput(ints(pc.axes));
      EXPECT_TRUE(allClose(runOutput<T>(t, device), ref, {}, {0, 0, 0}));
    }
  }
  // Opset 2: the pads and mode as attributes.
  std::vector<T> x = randomVector<T>(6, rng);
  std::vector<double> xd = toDoubles(x), ref;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      ref.push_back(xd[size_t(padFrom("edge", i - 1, 2) * 3 + padFrom("edge", j - 1, 3))]);
  OpTester t("Pad", 2);
  t.attrString("mode", "edge").attrInts("pads", {1, 1, 0, 1}).input(tensorOf<T>({2, 3}, x));
  EXPECT_TRUE(allClose(runOutput<T>(t, device), ref, {}, {0, 0, 0}));
}

} // namespace
