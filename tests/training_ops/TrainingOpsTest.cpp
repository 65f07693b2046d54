//===- TrainingOpsTest.cpp - Gradient kernels against naive loops ---------===//
//
// The ai.mpc.training nodes ConvGrad, BiasGrad and MaxPoolGrad for every
// storage type against direct double-precision loops over the definitions
// (no im2col, no GEMM), with the accumulation tolerance of TestUtil.h, and
// LSTMGrad and GRUGrad against central finite differences of direct double
// LSTM and GRU loops; each on every selected device through the op tester
// (OpTester.h).
//
//===----------------------------------------------------------------------===//
#include "OpTester.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

const char *const kTraining = "ai.mpc.training";

class TrainingOpsTest : public DeviceTypeTest {};
OPTEST_INSTANTIATE_FLOAT_TYPES(TrainingOpsTest);

/// A window's output size: floor((in + pads - dilation (k - 1) - 1) / s) + 1.
int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  return (in + pb + pe - d * (k - 1) - 1) / s + 1;
}

/// One 2-D Conv configuration.
struct ConvCase {
  int64_t n, c, h, w, m, group, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

OPTEST_TYPED_P(TrainingOpsTest, ConvGradMatchesDirectLoops) {
  const ConvCase cases[] = {
      {2, 3, 5, 5, 4, 1, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 4, 7, 6, 6, 2, 3, 2, 2, 1, 1, 2, 1, 0, 1, 1},
      {2, 3, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0},
      // Shapes cuDNN takes (symmetric pads; see ConvPlan.h) with groups,
      // strides and dilations, and one whose dB sums 2 x 1600 values.
      {2, 4, 9, 8, 6, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {2, 8, 40, 40, 16, 1, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
  };
  std::mt19937 rng(7);
  for (const ConvCase &k : cases) {
    int64_t oh = outSize(k.h, k.kh, k.sh, k.dh, k.pt, k.pb);
    int64_t ow = outSize(k.w, k.kw, k.sw, k.dw, k.pl, k.pr);
    int64_t cg = k.c / k.group, mg = k.m / k.group;
    auto x = randomVector<T>(size_t(k.n * k.c * k.h * k.w), rng);
    auto w = randomVector<T>(size_t(k.m * cg * k.kh * k.kw), rng);
    auto dy = randomVector<T>(size_t(k.n * k.m * oh * ow), rng);
    std::vector<double> dxRef(x.size()), dxScale(x.size()), dwRef(w.size()),
        dwScale(w.size()), dbRef(size_t(k.m)), dbScale(size_t(k.m));
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t m = 0; m < k.m; ++m)
        for (int64_t yo = 0; yo < oh; ++yo)
          for (int64_t xo = 0; xo < ow; ++xo) {
            double d = toDouble(dy[size_t(((n * k.m + m) * oh + yo) * ow + xo)]);
            dbRef[size_t(m)] += d;
            dbScale[size_t(m)] += std::fabs(d);
            int64_t gi = m / mg;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t a = 0; a < k.kh; ++a)
                for (int64_t b = 0; b < k.kw; ++b) {
                  int64_t yi = yo * k.sh - k.pt + a * k.dh, xi = xo * k.sw - k.pl + b * k.dw;
                  if (yi < 0 || yi >= k.h || xi < 0 || xi >= k.w)
                    continue;
                  size_t xIdx = size_t(((n * k.c + gi * cg + c) * k.h + yi) * k.w + xi);
                  size_t wIdx = size_t(((m * cg + c) * k.kh + a) * k.kw + b);
                  dwRef[wIdx] += d * toDouble(x[xIdx]);
                  dwScale[wIdx] += std::fabs(d * toDouble(x[xIdx]));
                  dxRef[xIdx] += d * toDouble(w[wIdx]);
                  dxScale[xIdx] += std::fabs(d * toDouble(w[wIdx]));
                }
          }
    auto node = [&](std::vector<bool> outputs) {
      OpTester t("ConvGrad", 1, kTraining);
      t.attrInt("group", k.group).attrInts("kernel_shape", {k.kh, k.kw});
      t.attrInts("strides", {k.sh, k.sw}).attrInts("dilations", {k.dh, k.dw});
      t.attrInts("pads", {k.pt, k.pl, k.pb, k.pr});
      t.input({k.n, k.m, oh, ow}, dy).input({k.n, k.c, k.h, k.w}, x);
      t.input({k.m, cg, k.kh, k.kw}, w);
      t.outputMask(std::move(outputs));
      return t;
    };
    std::vector<HostTensor> out = runOrFail(node({true, true, true}), device);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), dxRef, dxScale)) << "dX, group " << k.group;
    EXPECT_TRUE(allClose(valuesOf<T>(out[1]), dwRef, dwScale)) << "dW, group " << k.group;
    EXPECT_TRUE(allClose(valuesOf<T>(out[2]), dbRef, dbScale)) << "dB, group " << k.group;
    // Outputs that are not requested are skipped.
    out = runOrFail(node({false, true, false}), device);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(allClose(valuesOf<T>(out[1]), dwRef, dwScale)) << "dW alone";
    out = runOrFail(node({false, false, true}), device);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(allClose(valuesOf<T>(out[2]), dbRef, dbScale)) << "dB alone";
  }
}

OPTEST_TYPED_P(TrainingOpsTest, BiasGradSumsBroadcastAxes) {
  std::mt19937 rng(11);
  const std::vector<int64_t> dyShape = {2, 3, 4, 5};
  const std::vector<std::vector<int64_t>> bShapes = {{5}, {3, 1, 1}, {1, 4, 1}, {2, 3, 4, 5},
                                                     {1}};
  auto dy = randomVector<T>(size_t(product(dyShape)), rng);
  for (const auto &bShape : bShapes) {
    std::vector<double> ref(size_t(product(bShape))), scale(ref.size());
    size_t lead = dyShape.size() - bShape.size();
    for (int64_t i = 0; i < product(dyShape); ++i) {
      std::vector<int64_t> idx = unravel(i, dyShape);
      int64_t off = 0;
      for (size_t j = 0; j < bShape.size(); ++j)
        off = off * bShape[j] + (bShape[j] == 1 ? 0 : idx[lead + j]);
      ref[size_t(off)] += toDouble(dy[size_t(i)]);
      scale[size_t(off)] += std::fabs(toDouble(dy[size_t(i)]));
    }
    OpTester t("BiasGrad", 1, kTraining);
    t.input(dyShape, dy).constantInput(tensorOf<int64_t>({int64_t(bShape.size())}, bShape));
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, bShape);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), ref, scale)) << shapeString(bShape);
  }
}

/// One SoftmaxGrad case: the shape, the axis attribute (none: the default -1).
struct SoftmaxGradCase {
  std::vector<int64_t> shape;
  int64_t axis;
  bool hasAxis;
};

OPTEST_TYPED_P(TrainingOpsTest, SoftmaxGradAndLogSoftmaxGradAlongTheAxis) {
  // Middle and last axes, negative axes, a size-1 axis, rows longer than a
  // 1024-thread block, an odd row length and no rows.
  const SoftmaxGradCase cases[] = {{{2, 7, 5}, 1, true},   {{3, 1000}, -1, true},
                                   {{2, 3000}, 1, true},   {{3, 1, 7}, 1, true},
                                   {{4, 3, 6}, -2, true},  {{5, 33}, 0, false},
                                   {{0, 5}, -1, true}};
  std::mt19937 rng(21);
  for (const SoftmaxGradCase &k : cases) {
    int64_t axis = k.hasAxis ? k.axis : -1;
    if (axis < 0)
      axis += int64_t(k.shape.size());
    int64_t outer = product(std::vector<int64_t>(k.shape.begin(), k.shape.begin() + axis));
    int64_t n = k.shape[size_t(axis)];
    int64_t inner = product(std::vector<int64_t>(k.shape.begin() + axis + 1, k.shape.end()));
    size_t total = size_t(product(k.shape));
    auto dy = randomVector<T>(total, rng);
    for (bool log : {false, true}) {
      SCOPED_TRACE(testing::Message() << (log ? "LogSoftmaxGrad " : "SoftmaxGrad ")
                                      << shapeString(k.shape) << " axis " << axis);
      // y: a softmax (or log-softmax) output, rounded to T, as the forward gives it.
      auto z = randomVector<double>(total, rng, -3, 3);
      std::vector<T> y(total);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          auto at = [&](int64_t a) { return size_t((o * n + a) * inner + i); };
          double sum = 0;
          for (int64_t a = 0; a < n; ++a)
            sum += std::exp(z[at(a)]);
          for (int64_t a = 0; a < n; ++a)
            y[at(a)] = fromDouble<T>(log ? z[at(a)] - std::log(sum) : std::exp(z[at(a)]) / sum);
        }
      std::vector<double> ref(total), scale(total);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          auto at = [&](int64_t a) { return size_t((o * n + a) * inner + i); };
          double sum = 0, sumAbs = 0;
          for (int64_t a = 0; a < n; ++a) {
            double d = toDouble(dy[at(a)]), v = toDouble(y[at(a)]);
            sum += log ? d : d * v;
            sumAbs += std::fabs(log ? d : d * v);
          }
          for (int64_t a = 0; a < n; ++a) {
            double d = toDouble(dy[at(a)]), v = toDouble(y[at(a)]);
            ref[at(a)] = log ? d - std::exp(v) * sum : v * (d - sum);
            scale[at(a)] = log ? std::fabs(d) + std::exp(v) * sumAbs
                               : std::fabs(v) * (std::fabs(d) + sumAbs);
          }
        }
      OpTester t(log ? "LogSoftmaxGrad" : "SoftmaxGrad", 1, kTraining);
      if (k.hasAxis)
        t.attrInt("axis", k.axis);
      t.input(k.shape, dy).input(k.shape, y);
      std::vector<HostTensor> out = runOrFail(t, device);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].shape, k.shape);
      EXPECT_TRUE(allClose(valuesOf<T>(out[0]), ref, scale));
    }
  }
}

/// One LayerNormalizationGrad case: X's shape and the first normalized axis.
struct LayerNormGradCase {
  std::vector<int64_t> shape;
  int64_t axis;
};

OPTEST_TYPED_P(TrainingOpsTest, LayerNormalizationGradAgainstTheDefinition) {
  // Rows longer than a block, several normalized axes (axis 1 of rank 3), a
  // negative axis, one column (dScale/dBias summed by a block), one row, and
  // no rows (dScale and dBias are zeros).
  const LayerNormGradCase cases[] = {{{3, 7}, -1},   {{2, 4097}, 1}, {{4, 3, 5}, 1},
                                     {{4, 3, 5}, -1}, {{5, 1}, -1},  {{1, 8}, 1},
                                     {{0, 8}, -1}};
  std::mt19937 rng(23);
  for (const LayerNormGradCase &k : cases) {
    int64_t axis = k.axis < 0 ? k.axis + int64_t(k.shape.size()) : k.axis;
    int64_t rows = product(std::vector<int64_t>(k.shape.begin(), k.shape.begin() + axis));
    int64_t cols = product(std::vector<int64_t>(k.shape.begin() + axis, k.shape.end()));
    std::vector<int64_t> paramShape(k.shape.begin() + axis, k.shape.end());
    std::vector<int64_t> statShape = k.shape;
    for (size_t d = size_t(axis); d < statShape.size(); ++d)
      statShape[d] = 1;
    SCOPED_TRACE(testing::Message() << shapeString(k.shape) << " axis " << k.axis);
    auto x = randomVector<T>(size_t(rows * cols), rng, -2, 2);
    auto dy = randomVector<T>(size_t(rows * cols), rng);
    auto scale = randomVector<T>(size_t(cols), rng, 0.5, 2);
    // The forward's statistics, in f32 (stash_type 1).
    const size_t nr = static_cast<size_t>(rows), nc = static_cast<size_t>(cols);
    std::vector<float> mean(nr), inv(nr);
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < cols; ++j)
        m += toDouble(x[size_t(r * cols + j)]);
      m /= double(cols);
      for (int64_t j = 0; j < cols; ++j)
        v += std::pow(toDouble(x[size_t(r * cols + j)]) - m, 2);
      mean[size_t(r)] = float(m);
      inv[size_t(r)] = float(1 / std::sqrt(v / double(cols) + 1e-5));
    }
    std::vector<double> dx(x.size()), dxScale(x.size()), dScale(nc), dScaleAbs(nc), dBias(nc),
        dBiasAbs(nc);
    for (int64_t r = 0; r < rows; ++r) {
      double mu = mean[size_t(r)], iv = inv[size_t(r)], m1 = 0, m2 = 0, a1 = 0, a2 = 0;
      auto xhat = [&](int64_t j) { return (toDouble(x[size_t(r * cols + j)]) - mu) * iv; };
      auto g = [&](int64_t j) {
        return toDouble(dy[size_t(r * cols + j)]) * toDouble(scale[size_t(j)]);
      };
      for (int64_t j = 0; j < cols; ++j) {
        double d = toDouble(dy[size_t(r * cols + j)]);
        m1 += g(j);
        m2 += g(j) * xhat(j);
        a1 += std::fabs(g(j));
        a2 += std::fabs(g(j) * xhat(j));
        dScale[size_t(j)] += d * xhat(j);
        dScaleAbs[size_t(j)] += std::fabs(d * xhat(j));
        dBias[size_t(j)] += d;
        dBiasAbs[size_t(j)] += std::fabs(d);
      }
      m1 /= double(cols);
      m2 /= double(cols);
      for (int64_t j = 0; j < cols; ++j) {
        size_t e = size_t(r * cols + j);
        dx[e] = iv * (g(j) - m1 - xhat(j) * m2);
        dxScale[e] = iv * (std::fabs(g(j)) + a1 / double(cols) +
                           std::fabs(xhat(j)) * a2 / double(cols));
      }
    }
    OpTester t("LayerNormalizationGrad", 1, kTraining);
    if (k.axis != -1)
      t.attrInt("axis", k.axis);
    t.input(k.shape, dy).input(k.shape, x).input(paramShape, scale);
    t.input(statShape, mean).input(statShape, inv);
    t.outputs(3);
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), dx, dxScale)) << "dX";
    EXPECT_TRUE(allClose(valuesOf<T>(out[1]), dScale, dScaleAbs)) << "dScale";
    EXPECT_TRUE(allClose(valuesOf<T>(out[2]), dBias, dBiasAbs)) << "dBias";
  }
}

OPTEST_TYPED_P(TrainingOpsTest, BiasGradOverLongAxes) {
  // More rows than a block has threads (a bias of a [tokens, features]
  // product), long summed rows, and a broadcast 1 inside a run of summed axes.
  struct Case {
    std::vector<int64_t> dy, b;
  };
  const Case cases[] = {{{1100, 8}, {8}}, {{3, 2000}, {3, 1}}, {{2, 1030, 3}, {1, 1, 3}}};
  std::mt19937 rng(19);
  for (const Case &k : cases) {
    SCOPED_TRACE(shapeString(k.dy) + " -> " + shapeString(k.b));
    auto dy = randomVector<T>(size_t(product(k.dy)), rng);
    std::vector<double> ref(size_t(product(k.b))), scale(ref.size());
    size_t lead = k.dy.size() - k.b.size();
    for (int64_t i = 0; i < product(k.dy); ++i) {
      std::vector<int64_t> idx = unravel(i, k.dy);
      int64_t off = 0;
      for (size_t j = 0; j < k.b.size(); ++j)
        off = off * k.b[j] + (k.b[j] == 1 ? 0 : idx[lead + j]);
      ref[size_t(off)] += toDouble(dy[size_t(i)]);
      scale[size_t(off)] += std::fabs(toDouble(dy[size_t(i)]));
    }
    OpTester t("BiasGrad", 1, kTraining);
    t.input(k.dy, dy).constantInput(tensorOf<int64_t>({int64_t(k.b.size())}, k.b));
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, k.b);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), ref, scale));
  }
}

OPTEST_TYPED_P(TrainingOpsTest, ActivationGradsAgainstTheDerivatives) {
  // dX = dY * f'(v), v the forward's input (Relu, Erf, Gelu) or output
  // (Sigmoid, Tanh), derivatives written here in double.
  const double pi = 3.14159265358979323846;
  auto gelu = [&](double v) {
    return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
           v * std::exp(-0.5 * v * v) / std::sqrt(2 * pi);
  };
  auto geluTanh = [&](double v) {
    double k = std::sqrt(2 / pi), u = k * (v + 0.044715 * v * v * v), t = std::tanh(u);
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
  };
  struct Case {
    const char *op, *approximate;
    double lo, hi; // the range of v
    std::function<double(double)> slope;
  };
  const Case cases[] = {
      {"ReluGrad", nullptr, -2, 2, [](double v) { return v > 0 ? 1.0 : 0.0; }},
      {"SigmoidGrad", nullptr, 0.01, 0.99, [](double y) { return y * (1 - y); }},
      {"TanhGrad", nullptr, -0.99, 0.99, [](double y) { return 1 - y * y; }},
      {"ErfGrad", nullptr, -2, 2,
       [&](double v) { return 2 / std::sqrt(pi) * std::exp(-v * v); }},
      {"GeluGrad", nullptr, -3, 3, gelu},
      {"GeluGrad", "tanh", -3, 3, geluTanh},
  };
  std::mt19937 rng(29);
  for (const Case &k : cases)
    for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 1000}, {7}, {0, 4}}) {
      SCOPED_TRACE(testing::Message() << k.op << (k.approximate ? " tanh " : " ")
                                      << shapeString(shape));
      size_t n = size_t(product(shape));
      auto dy = randomVector<T>(n, rng), v = randomVector<T>(n, rng, k.lo, k.hi);
      std::vector<double> ref(n), scale(n);
      for (size_t i = 0; i < n; ++i) {
        double s = k.slope(toDouble(v[i]));
        ref[i] = toDouble(dy[i]) * s;
        scale[i] = std::fabs(ref[i]);
      }
      OpTester t(k.op, 1, kTraining);
      if (k.approximate)
        t.attrString("approximate", k.approximate);
      t.input(shape, dy).input(shape, v);
      std::vector<HostTensor> out = runOrFail(t, device);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].shape, shape);
      EXPECT_TRUE(allClose(valuesOf<T>(out[0]), ref, scale));
    }
}

OPTEST_TYPED_P(TrainingOpsTest, MaxPoolGradRoutesToFirstMaximum) {
  // x [1, 1, 3, 3] all equal except one smaller value; 2x2 windows, stride 1,
  // one row/column of padding in front: padding never wins, ties go to the
  // first element of the window in row-major order.
  std::vector<T> x(9, fromDouble<T>(-2.0));
  x[4] = fromDouble<T>(-3.0);
  std::vector<T> dy(9);
  for (int i = 0; i < 9; ++i)
    dy[size_t(i)] = fromDouble<T>(0.25 * (i + 1));
  std::vector<double> ref(9, 0.0);
  for (int64_t oy = 0; oy < 3; ++oy)
    for (int64_t ox = 0; ox < 3; ++ox) {
      int64_t best = -1;
      for (int64_t a = 0; a < 2 && best < 0; ++a)
        for (int64_t b = 0; b < 2 && best < 0; ++b) {
          int64_t yi = oy - 1 + a, xi = ox - 1 + b;
          if (yi >= 0 && xi >= 0 && yi * 3 + xi != 4)
            best = yi * 3 + xi;
        }
      ref[size_t(best)] += 0.25 * double(oy * 3 + ox + 1);
    }
  OpTester t("MaxPoolGrad", 1, kTraining);
  t.attrInts("kernel_shape", {2, 2}).attrInts("strides", {1, 1}).attrInts("pads", {1, 1, 0, 0});
  t.input({1, 1, 3, 3}, dy).input({1, 1, 3, 3}, x);
  EXPECT_TRUE(allClose(runOutput<T>(t, device), ref));
}

/// An LSTM's sizes and direction.
struct LstmShape {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  bool reverse = false;
};

/// Inputs of one LSTM in double (absent ones empty), layout 0, gates i, o, f, c.
struct LstmInputs {
  LstmShape s;
  std::vector<int64_t> lens;
  std::vector<double> x, w, r, b, h0, c0, dy, dyh, dyc;
};

/// sum(dY*Y) + sum(dY_h*Y_h) + sum(dY_c*Y_c) of a direct double LSTM loop.
double lstmLoss(const LstmInputs &in) {
  const LstmShape &s = in.s;
  int64_t hid = s.hidden, ni = s.input;
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  double loss = 0.0;
  for (int64_t d = 0; d < s.directions; ++d)
    for (int64_t n = 0; n < s.batch; ++n) {
      int64_t len = in.lens.empty() ? s.seq : in.lens[size_t(n)];
      int64_t st = (d * s.batch + n) * hid;
      std::vector<double> h(static_cast<size_t>(hid)), c(static_cast<size_t>(hid)),
          z(static_cast<size_t>(4 * hid));
      for (int64_t j = 0; j < hid; ++j) {
        h[size_t(j)] = in.h0.empty() ? 0.0 : in.h0[size_t(st + j)];
        c[size_t(j)] = in.c0.empty() ? 0.0 : in.c0[size_t(st + j)];
      }
      for (int64_t k = 0; k < len; ++k) {
        int64_t t = (s.reverse || d == 1) ? len - 1 - k : k;
        for (int64_t q = 0; q < 4 * hid; ++q) {
          int64_t row = d * 4 * hid + q;
          double v = in.b.empty() ? 0.0 : in.b[size_t(d * 8 * hid + q)] +
                                               in.b[size_t(d * 8 * hid + 4 * hid + q)];
          for (int64_t j = 0; j < ni; ++j)
            v += in.w[size_t(row * ni + j)] * in.x[size_t((t * s.batch + n) * ni + j)];
          for (int64_t j = 0; j < hid; ++j)
            v += in.r[size_t(row * hid + j)] * h[size_t(j)];
          z[size_t(q)] = v;
        }
        for (int64_t j = 0; j < hid; ++j) {
          c[size_t(j)] = sig(z[size_t(2 * hid + j)]) * c[size_t(j)] +
                         sig(z[size_t(j)]) * std::tanh(z[size_t(3 * hid + j)]);
          h[size_t(j)] = sig(z[size_t(hid + j)]) * std::tanh(c[size_t(j)]);
          if (!in.dy.empty())
            loss += in.dy[size_t(((t * s.directions + d) * s.batch + n) * hid + j)] *
                    h[size_t(j)];
        }
      }
      for (int64_t j = 0; j < hid; ++j) {
        loss += in.dyh.empty() ? 0.0 : in.dyh[size_t(st + j)] * h[size_t(j)];
        loss += in.dyc.empty() ? 0.0 : in.dyc[size_t(st + j)] * c[size_t(j)];
      }
    }
  return loss;
}

/// Central finite differences of `loss` (lstmLoss, gruLoss) with respect to
/// one input vector.
template <typename In>
std::vector<double> finiteDiff(In in, std::vector<double> In::*wrt, double (*loss)(const In &)) {
  std::vector<double> g((in.*wrt).size());
  const double eps = 1e-6;
  for (size_t i = 0; i < g.size(); ++i) {
    double v = (in.*wrt)[i];
    (in.*wrt)[i] = v + eps;
    double up = loss(in);
    (in.*wrt)[i] = v - eps;
    g[i] = (up - loss(in)) / (2 * eps);
    (in.*wrt)[i] = v;
  }
  return g;
}
std::vector<double> lstmFiniteDiff(const LstmInputs &in, std::vector<double> LstmInputs::*wrt) {
  return finiteDiff(in, wrt, lstmLoss);
}

/// One input of a recurrent gradient node: absent when `values` is empty.
template <typename T> struct GradInput {
  std::vector<int64_t> shape;
  const std::vector<T> &values;
};

/// An LSTMGrad or GRUGrad node of the sizes `sh`: `before` (the inputs up
/// to B), sequence_lens as a graph constant (the CUDA rows take it only so;
/// absent when empty), `after` (the initial states), the outputs `wanted`.
template <typename T>
OpTester recurrentGradNode(const char *op, const LstmShape &sh,
                           const std::vector<GradInput<T>> &before,
                           const std::vector<int64_t> &lens, const std::vector<GradInput<T>> &after,
                           std::vector<bool> wanted) {
  OpTester t(op, 1, kTraining);
  t.attrInt("hidden_size", sh.hidden);
  t.attrString("direction", sh.directions == 2 ? "bidirectional"
                            : sh.reverse       ? "reverse"
                                               : "forward");
  auto add = [&](const std::vector<GradInput<T>> &inputs) {
    for (const GradInput<T> &in : inputs)
      if (in.values.empty())
        t.absentInput();
      else
        t.input(in.shape, in.values);
  };
  add(before);
  if (lens.empty())
    t.absentInput();
  else
    t.constantInput(tensorOf<int32_t>({sh.batch}, std::vector<int32_t>(lens.begin(), lens.end())));
  add(after);
  t.outputMask(std::move(wanted));
  return t;
}

OPTEST_TYPED_P(TrainingOpsTest, LstmGradMatchesFiniteDifferences) {
  std::mt19937 rng(23);
  struct Case {
    int64_t dirs;
    bool reverse, lens, full;
  };
  for (Case k : {Case{2, false, true, true}, Case{1, true, false, true},
                 Case{1, false, false, false}}) {
    LstmInputs in;
    in.s.seq = 3;
    in.s.batch = 2;
    in.s.input = 3;
    in.s.hidden = 2;
    in.s.directions = k.dirs;
    in.s.reverse = k.reverse;
    int64_t hid = in.s.hidden, state = k.dirs * in.s.batch * hid;
    if (k.lens)
      in.lens = {3, 1};
    // Inputs rounded to T, then held in double for the loop and T for the kernel.
    auto make = [&](std::vector<double> &v, int64_t n, std::vector<T> &t) {
      t = randomVector<T>(size_t(n), rng);
      v = toDoubles(t);
    };
    std::vector<T> x, w, r, b, h0, c0, dy, dyh, dyc;
    make(in.x, in.s.seq * in.s.batch * in.s.input, x);
    make(in.w, k.dirs * 4 * hid * in.s.input, w);
    make(in.r, k.dirs * 4 * hid * hid, r);
    make(in.dyh, state, dyh);
    if (k.full) {
      make(in.b, k.dirs * 8 * hid, b);
      make(in.h0, state, h0);
      make(in.c0, state, c0);
      make(in.dy, in.s.seq * state, dy);
      make(in.dyc, state, dyc);
    }
    const LstmShape &sh = in.s;
    int64_t dirs = sh.directions;
    // LSTMGrad's inputs: dY, dY_h, dY_c, X, W, R, B, sequence_lens, initial_h,
    // initial_c; outputs dX, dW, dR, dB, dinitial_h, dinitial_c.
    auto node = [&](std::vector<bool> outputs) {
      std::vector<int64_t> state = {dirs, sh.batch, hid};
      return recurrentGradNode<T>("LSTMGrad", sh,
                                  {{{sh.seq, dirs, sh.batch, hid}, dy},
                                   {state, dyh},
                                   {state, dyc},
                                   {{sh.seq, sh.batch, sh.input}, x},
                                   {{dirs, 4 * hid, sh.input}, w},
                                   {{dirs, 4 * hid, hid}, r},
                                   {{dirs, 8 * hid}, b}},
                                  in.lens, {{state, h0}, {state, c0}}, std::move(outputs));
    };
    std::vector<HostTensor> out = runOrFail(node(std::vector<bool>(6, true)), device);
    ASSERT_EQ(out.size(), 6u);
    std::vector<T> dx = valuesOf<T>(out[0]), dw = valuesOf<T>(out[1]), dr = valuesOf<T>(out[2]),
                   db = valuesOf<T>(out[3]), dh0 = valuesOf<T>(out[4]),
                   dc0 = valuesOf<T>(out[5]);
    ASSERT_EQ(db.size(), size_t(k.dirs * 8 * hid)) << "dB is [dirs, 8H] even without B";
    // One rounding of the output plus fp32 evaluation; finite differences in
    // double are good to about 1e-8.
    Tolerance tol{std::max(TypeTraits<T>::kTol.rtol, 1e-6), 2e-6, 0.0};
    if (in.b.empty())
      in.b.assign(db.size(), 0.0);
    if (in.h0.empty())
      in.h0.assign(size_t(state), 0.0);
    if (in.c0.empty())
      in.c0.assign(size_t(state), 0.0);
    EXPECT_TRUE(allClose(dx, lstmFiniteDiff(in, &LstmInputs::x), {}, tol)) << "dX";
    EXPECT_TRUE(allClose(dw, lstmFiniteDiff(in, &LstmInputs::w), {}, tol)) << "dW";
    EXPECT_TRUE(allClose(dr, lstmFiniteDiff(in, &LstmInputs::r), {}, tol)) << "dR";
    EXPECT_TRUE(allClose(db, lstmFiniteDiff(in, &LstmInputs::b), {}, tol)) << "dB";
    EXPECT_TRUE(allClose(dh0, lstmFiniteDiff(in, &LstmInputs::h0), {}, tol)) << "dH0";
    EXPECT_TRUE(allClose(dc0, lstmFiniteDiff(in, &LstmInputs::c0), {}, tol)) << "dC0";
    // Outputs that are not requested are skipped.
    out = runOrFail(node({false, false, true, false, false, false}), device);
    ASSERT_EQ(out.size(), 6u);
    EXPECT_TRUE(allClose(valuesOf<T>(out[2]), toDoubles(dr), {}, Tolerance{0, 0, 0}))
        << "dR alone";
  }
}

/// One GRU (layout 0, gates z, r, h) in double: sizes, linear_before_reset
/// and inputs (absent ones empty).
struct GruInputs {
  LstmShape s;
  bool lbr = false;
  std::vector<int64_t> lens;
  std::vector<double> x, w, r, b, h0, dy, dyh;
};

/// sum(dY*Y) + sum(dY_h*Y_h) of a direct double GRU loop (ONNX's GRU).
double gruLoss(const GruInputs &in) {
  const LstmShape &s = in.s;
  const int64_t hid = s.hidden, ni = s.input, g3 = 3 * hid;
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  double loss = 0.0;
  for (int64_t d = 0; d < s.directions; ++d)
    for (int64_t n = 0; n < s.batch; ++n) {
      int64_t len = in.lens.empty() ? s.seq : in.lens[size_t(n)];
      int64_t st = (d * s.batch + n) * hid;
      std::vector<double> h(static_cast<size_t>(hid), 0.0), wx(static_cast<size_t>(g3)),
          rh(static_cast<size_t>(g3)), next(static_cast<size_t>(hid));
      for (int64_t j = 0; j < hid; ++j)
        h[size_t(j)] = in.h0.empty() ? 0.0 : in.h0[size_t(st + j)];
      auto bias = [&](int64_t k) { return in.b.empty() ? 0.0 : in.b[size_t(d * 2 * g3 + k)]; };
      for (int64_t k = 0; k < len; ++k) {
        int64_t t = (s.reverse || d == 1) ? len - 1 - k : k;
        // W x + Wb and R h + Rb per gate row.
        for (int64_t q = 0; q < g3; ++q) {
          double a = bias(q), c = bias(g3 + q);
          for (int64_t j = 0; j < ni; ++j)
            a += in.w[size_t((d * g3 + q) * ni + j)] * in.x[size_t((t * s.batch + n) * ni + j)];
          for (int64_t j = 0; j < hid; ++j)
            c += in.r[size_t((d * g3 + q) * hid + j)] * h[size_t(j)];
          wx[size_t(q)] = a;
          rh[size_t(q)] = c;
        }
        for (int64_t j = 0; j < hid; ++j) {
          double z = sig(wx[size_t(j)] + rh[size_t(j)]);
          double cand;
          if (in.lbr) {
            double r = sig(wx[size_t(hid + j)] + rh[size_t(hid + j)]);
            cand = std::tanh(wx[size_t(2 * hid + j)] + r * rh[size_t(2 * hid + j)]);
          } else {
            // (r . h) R_h^T + Rb_h, with every r of the step.
            double v = bias(g3 + 2 * hid + j);
            for (int64_t i = 0; i < hid; ++i) {
              double ri = sig(wx[size_t(hid + i)] + rh[size_t(hid + i)]);
              v += in.r[size_t((d * g3 + 2 * hid + j) * hid + i)] * ri * h[size_t(i)];
            }
            cand = std::tanh(wx[size_t(2 * hid + j)] + v);
          }
          next[size_t(j)] = (1 - z) * cand + z * h[size_t(j)];
        }
        h = next;
        for (int64_t j = 0; j < hid; ++j)
          if (!in.dy.empty())
            loss += in.dy[size_t(((t * s.directions + d) * s.batch + n) * hid + j)] * h[size_t(j)];
      }
      for (int64_t j = 0; j < hid; ++j)
        loss += in.dyh.empty() ? 0.0 : in.dyh[size_t(st + j)] * h[size_t(j)];
    }
  return loss;
}

std::vector<double> gruFiniteDiff(const GruInputs &in, std::vector<double> GruInputs::*wrt) {
  return finiteDiff(in, wrt, gruLoss);
}

// GRUGrad in both reset modes, every direction, batch 1, odd hidden sizes,
// sequence_lens and absent inputs: the cases the CUDA row is checked with.
OPTEST_TYPED_P(TrainingOpsTest, GruGradMatchesFiniteDifferences) {
  std::mt19937 rng(29);
  struct Case {
    int64_t seq, batch, input, hidden, dirs;
    bool reverse, lbr, lens, full;
  };
  for (Case k :
       {Case{3, 2, 3, 3, 2, false, false, true, true}, Case{3, 2, 3, 3, 2, false, true, true, true},
        Case{4, 1, 2, 5, 1, true, false, false, true}, Case{4, 1, 2, 5, 1, true, true, false, true},
        Case{2, 3, 1, 1, 1, false, false, false, false},
        Case{3, 2, 2, 2, 1, false, true, true, false}}) {
    SCOPED_TRACE("seq " + std::to_string(k.seq) + " batch " + std::to_string(k.batch) + " hidden " +
                 std::to_string(k.hidden) + " dirs " + std::to_string(k.dirs) +
                 (k.reverse ? " reverse" : "") + (k.lbr ? " lbr 1" : " lbr 0"));
    GruInputs in;
    in.s.seq = k.seq;
    in.s.batch = k.batch;
    in.s.input = k.input;
    in.s.hidden = k.hidden;
    in.s.directions = k.dirs;
    in.s.reverse = k.reverse;
    in.lbr = k.lbr;
    const LstmShape &sh = in.s;
    int64_t hid = sh.hidden, dirs = sh.directions, state = dirs * sh.batch * hid;
    if (k.lens)
      for (int64_t n = 0; n < sh.batch; ++n)
        in.lens.push_back(n == 0 ? sh.seq : 1 + n % sh.seq);
    auto make = [&](std::vector<double> &v, int64_t n, std::vector<T> &t) {
      t = randomVector<T>(size_t(n), rng);
      v = toDoubles(t);
    };
    std::vector<T> x, w, r, b, h0, dy, dyh;
    make(in.x, sh.seq * sh.batch * sh.input, x);
    make(in.w, dirs * 3 * hid * sh.input, w);
    make(in.r, dirs * 3 * hid * hid, r);
    make(in.dy, sh.seq * state, dy);
    if (k.full) {
      make(in.b, dirs * 6 * hid, b);
      make(in.h0, state, h0);
      make(in.dyh, state, dyh);
    }
    // GRUGrad's inputs: dY, dY_h, X, W, R, B, sequence_lens, initial_h;
    // outputs dX, dW, dR, dB, dinitial_h.
    auto node = [&](std::vector<bool> outputs) {
      std::vector<int64_t> state = {dirs, sh.batch, hid};
      OpTester t = recurrentGradNode<T>("GRUGrad", sh,
                                        {{{sh.seq, dirs, sh.batch, hid}, dy},
                                         {state, dyh},
                                         {{sh.seq, sh.batch, sh.input}, x},
                                         {{dirs, 3 * hid, sh.input}, w},
                                         {{dirs, 3 * hid, hid}, r},
                                         {{dirs, 6 * hid}, b}},
                                        in.lens, {{state, h0}}, std::move(outputs));
      t.attrInt("linear_before_reset", k.lbr ? 1 : 0);
      return t;
    };
    std::vector<HostTensor> out = runOrFail(node(std::vector<bool>(5, true)), device);
    ASSERT_EQ(out.size(), 5u);
    std::vector<T> dx = valuesOf<T>(out[0]), dw = valuesOf<T>(out[1]), dr = valuesOf<T>(out[2]),
                   db = valuesOf<T>(out[3]), dh0 = valuesOf<T>(out[4]);
    ASSERT_EQ(db.size(), size_t(dirs * 6 * hid)) << "dB is [dirs, 6H] even without B";
    Tolerance tol{std::max(TypeTraits<T>::kTol.rtol, 1e-6), 2e-6, 0.0};
    if (in.b.empty())
      in.b.assign(db.size(), 0.0);
    if (in.h0.empty())
      in.h0.assign(size_t(state), 0.0);
    EXPECT_TRUE(allClose(dx, gruFiniteDiff(in, &GruInputs::x), {}, tol)) << "dX";
    EXPECT_TRUE(allClose(dw, gruFiniteDiff(in, &GruInputs::w), {}, tol)) << "dW";
    EXPECT_TRUE(allClose(dr, gruFiniteDiff(in, &GruInputs::r), {}, tol)) << "dR";
    EXPECT_TRUE(allClose(db, gruFiniteDiff(in, &GruInputs::b), {}, tol)) << "dB";
    EXPECT_TRUE(allClose(dh0, gruFiniteDiff(in, &GruInputs::h0), {}, tol)) << "dH0";
    // Outputs that are not requested are skipped; the others do not change.
    out = runOrFail(node({false, false, true, false, true}), device);
    ASSERT_EQ(out.size(), 5u);
    EXPECT_TRUE(allClose(valuesOf<T>(out[2]), toDoubles(dr), {}, Tolerance{0, 0, 0})) << "dR alone";
    EXPECT_TRUE(allClose(valuesOf<T>(out[4]), toDoubles(dh0), {}, Tolerance{0, 0, 0}))
        << "dH0 alone";
  }
}

//===----------------------------------------------------------------------===//
// Losses: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and the
// gradients SoftmaxCrossEntropyLossGrad, MSELossGrad against float64 loops
//===----------------------------------------------------------------------===//

/// One classification-loss case: scores [N, C, d...] (labels [N, d...]).
struct LossCase {
  std::vector<int64_t> shape;
  const char *reduction;
  bool weights;
  bool hasIgnore;
  int64_t ignoreIndex;
};

/// Cases over odd sizes, C > 1024 (several classes per thread), size-1
/// dimensions, higher ranks, every reduction, weights and ignore_index hits
/// (negative and in range).
const LossCase kLossCases[] = {
    {{5, 7}, "mean", false, false, 0},
    {{5, 7}, "sum", true, false, 0},
    {{5, 7}, "none", true, true, 3},
    {{1, 1}, "mean", false, false, 0},
    {{3, 1500}, "mean", true, true, -100},
    {{2, 3, 4, 5}, "mean", true, true, 1},
    {{2, 4, 1, 3}, "none", false, false, 0},
    {{1100, 3}, "sum", false, true, 2},
    {{2, 5, 3}, "mean", false, true, 0},
};

/// Labels of a case: class indices, with every fourth one the ignored value
/// when the case has one.
std::vector<int64_t> lossLabels(const LossCase &k, std::mt19937 &rng) {
  std::vector<int64_t> labelShape(k.shape);
  labelShape.erase(labelShape.begin() + 1);
  std::uniform_int_distribution<int64_t> cls(0, k.shape[1] - 1);
  std::vector<int64_t> labels(size_t(product(labelShape)));
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = k.hasIgnore && i % 4 == 1 ? k.ignoreIndex : cls(rng);
  return labels;
}

/// The float64 reference of a classification loss: log-probabilities,
/// per-position losses and weights, the reduced value and its scale.
struct LossRef {
  std::vector<double> logProb, lpScale, loss, lossScale;
  double total = 0, weightSum = 0, absTotal = 0;
};

LossRef lossReference(const LossCase &k, const std::vector<double> &scores,
                      const std::vector<int64_t> &labels, const std::vector<double> &w,
                      bool fromLogProb) {
  int64_t n = k.shape[0], c = k.shape[1], inner = product(k.shape) / (n * c);
  LossRef r;
  r.logProb.resize(scores.size());
  r.lpScale.resize(scores.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return size_t((b * c + j) * inner + i); };
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < c; ++j)
        mx = std::max(mx, scores[at(j)]);
      for (int64_t j = 0; j < c; ++j)
        sum += std::exp(scores[at(j)] - mx);
      double lse = fromLogProb ? 0 : mx + std::log(sum);
      for (int64_t j = 0; j < c; ++j) {
        r.logProb[at(j)] = scores[at(j)] - lse;
        r.lpScale[at(j)] = std::fabs(scores[at(j)]) + std::fabs(lse);
      }
      int64_t li = b * inner + i, label = labels[size_t(li)];
      double value = 0, wt = 0;
      if (!(k.hasIgnore && label == k.ignoreIndex)) {
        wt = w.empty() ? 1.0 : w[size_t(label)];
        value = -r.logProb[at(label)] * wt;
      }
      double scale = wt == 0 ? 0 : std::fabs(value) + r.lpScale[at(label)] * std::fabs(wt);
      r.loss.push_back(value);
      r.lossScale.push_back(scale);
      r.total += value;
      r.weightSum += wt;
      r.absTotal += scale;
    }
  return r;
}

OPTEST_TYPED_P(TrainingOpsTest, ClassificationLossesAgainstTheDefinition) {
  std::mt19937 rng(29);
  for (const LossCase &k : kLossCases)
    for (bool nll : {false, true}) {
      SCOPED_TRACE(std::string(nll ? "NegativeLogLikelihoodLoss " : "SoftmaxCrossEntropyLoss ") +
                   shapeString(k.shape) + " " + k.reduction);
      auto scores = randomVector<T>(size_t(product(k.shape)), rng, -3.0, 3.0);
      std::vector<int64_t> labels = lossLabels(k, rng);
      std::vector<int64_t> labelShape(k.shape);
      labelShape.erase(labelShape.begin() + 1);
      std::vector<T> w;
      if (k.weights)
        w = randomVector<T>(size_t(k.shape[1]), rng, 0.25, 2.0);
      LossRef ref = lossReference(k, toDoubles(scores), labels, toDoubles(w), nll);
      OpTester t(nll ? "NegativeLogLikelihoodLoss" : "SoftmaxCrossEntropyLoss", 13);
      t.attrString("reduction", k.reduction);
      if (k.hasIgnore)
        t.attrInt("ignore_index", k.ignoreIndex);
      t.input(k.shape, scores);
      t.input<int64_t>(labelShape, labels);
      if (k.weights)
        t.input({k.shape[1]}, w);
      if (!nll)
        t.outputs(2);
      std::vector<HostTensor> out = runOrFail(t, device);
      ASSERT_EQ(out.size(), nll ? 1u : 2u);
      std::string red = k.reduction;
      if (red == "none") {
        EXPECT_EQ(out[0].shape, labelShape);
        EXPECT_TRUE(allClose(valuesOf<T>(out[0]), ref.loss, ref.lossScale));
      } else {
        EXPECT_TRUE(out[0].shape.empty());
        double v = red == "sum" ? ref.total : ref.total / ref.weightSum;
        double scale = red == "sum" ? ref.absTotal : ref.absTotal / ref.weightSum;
        EXPECT_TRUE(allClose(valuesOf<T>(out[0]), {v}, {scale}));
      }
      if (!nll) {
        EXPECT_EQ(out[1].shape, k.shape);
        EXPECT_TRUE(allClose(valuesOf<T>(out[1]), ref.logProb, ref.lpScale));
      }
    }
}

OPTEST_TYPED_P(TrainingOpsTest, SoftmaxCrossEntropyLossGradAgainstTheDefinition) {
  std::mt19937 rng(31);
  for (const LossCase &k : kLossCases) {
    SCOPED_TRACE(shapeString(k.shape) + " " + k.reduction);
    // log_prob: a log-softmax of random scores, rounded to T.
    auto raw = randomVector<double>(size_t(product(k.shape)), rng, -3.0, 3.0);
    std::vector<int64_t> labels = lossLabels(k, rng);
    std::vector<int64_t> labelShape(k.shape);
    labelShape.erase(labelShape.begin() + 1);
    LossRef fwd = lossReference(k, raw, labels, {}, false);
    std::vector<T> logProb(raw.size());
    for (size_t i = 0; i < raw.size(); ++i)
      logProb[i] = fromDouble<T>(fwd.logProb[i]);
    std::string red = k.reduction;
    std::vector<int64_t> dShape = red == "none" ? labelShape : std::vector<int64_t>{};
    auto dLoss = randomVector<T>(size_t(product(dShape)), rng, 0.5, 2.0);
    int64_t counted = 0;
    for (int64_t l : labels)
      counted += !(k.hasIgnore && l == k.ignoreIndex);
    int64_t n = k.shape[0], c = k.shape[1], inner = product(k.shape) / (n * c);
    std::vector<double> ref(raw.size()), scale(raw.size());
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          size_t e = size_t((b * c + j) * inner + i), li = size_t(b * inner + i);
          if (k.hasIgnore && labels[li] == k.ignoreIndex)
            continue;
          double s = red == "none" ? toDouble(dLoss[li]) : toDouble(dLoss[0]);
          if (red == "mean")
            s /= double(counted);
          double p = std::exp(toDouble(logProb[e]));
          ref[e] = (p - (labels[li] == j ? 1.0 : 0.0)) * s;
          scale[e] = (p + 1.0) * std::fabs(s);
        }
    OpTester t("SoftmaxCrossEntropyLossGrad", 1, kTraining);
    t.attrString("reduction", k.reduction);
    if (k.hasIgnore)
      t.attrInt("ignore_index", k.ignoreIndex);
    t.input(dShape, dLoss).input(k.shape, logProb);
    t.input<int64_t>(labelShape, labels);
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, k.shape);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), ref, scale));
  }
}

OPTEST_TYPED_P(TrainingOpsTest, MSELossGradAgainstTheDefinition) {
  std::mt19937 rng(37);
  const std::vector<std::vector<int64_t>> shapes = {{7}, {1}, {3, 1, 5}, {1030, 3}};
  for (const auto &shape : shapes)
    for (const char *red : {"none", "mean", "sum"}) {
      SCOPED_TRACE(shapeString(shape) + " " + red);
      auto pred = randomVector<T>(size_t(product(shape)), rng);
      auto target = randomVector<T>(pred.size(), rng);
      std::string r = red;
      std::vector<int64_t> dShape = r == "none" ? shape : std::vector<int64_t>{};
      auto dLoss = randomVector<T>(size_t(product(dShape)), rng, 0.5, 2.0);
      std::vector<double> ref(pred.size()), scale(pred.size());
      for (size_t i = 0; i < pred.size(); ++i) {
        double s = 2.0 * toDouble(r == "none" ? dLoss[i] : dLoss[0]);
        if (r == "mean")
          s /= double(pred.size());
        double d = toDouble(pred[i]) - toDouble(target[i]);
        ref[i] = s * d;
        scale[i] = std::fabs(s) * (std::fabs(toDouble(pred[i])) + std::fabs(toDouble(target[i])));
      }
      OpTester t("MSELossGrad", 1, kTraining);
      t.attrString("reduction", red);
      t.input(dShape, dLoss).input(shape, pred).input(shape, target);
      std::vector<HostTensor> out = runOrFail(t, device);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].shape, shape);
      EXPECT_TRUE(allClose(valuesOf<T>(out[0]), ref, scale));
    }
}

OPTEST_TYPED_P(TrainingOpsTest, BadLabelsNameTheFirstOneOnEveryDevice) {
  // Labels 9 (index 2) and -5 (index 4) are bad; 7 is ignore_index. The
  // message names the lowest bad index, as the CPU's scan finds it.
  std::mt19937 rng(41);
  auto scores = randomVector<T>(6 * 4, rng);
  std::vector<int64_t> labels = {0, 7, 9, 1, -5, 3};
  for (bool grad : {false, true}) {
    OpTester t(grad ? "SoftmaxCrossEntropyLossGrad" : "SoftmaxCrossEntropyLoss", grad ? 1 : 13,
               grad ? kTraining : "");
    t.attrInt("ignore_index", 7);
    if (grad)
      t.input<T>({}, {fromDouble<T>(1.0)});
    t.input({6, 4}, scores);
    t.input<int64_t>({6}, labels);
    std::string msg = runExpectingError(t, device);
    EXPECT_NE(msg.find("label 9 at index 2 is not a class index below 4"), std::string::npos)
        << msg;
  }
}

// SGDStep, MomentumStep, AdamStep (f32 parameters only): on every device the
// same bits as the CPU (the body is shared, -fmad=false on CUDA), within
// float64's reach of the definition; a true skip flag copies param and states.
OPTEST_TYPED_P(TrainingOpsTest, FusedOptimizerStepsMatchTheCpuBitForBit) {
  if (!std::is_same<T, float>::value)
    GTEST_SKIP() << "f32 only here (CUDA's type); f64 on the CPU: test_fused_optimizer.py";
  std::mt19937 rng(43);
  const std::vector<int64_t> shape = {1030, 3};
  size_t n = size_t(product(shape));
  auto param = randomVector<float>(n, rng), grad = randomVector<float>(n, rng);
  auto s1 = randomVector<float>(n, rng, -0.5, 0.5), s2 = randomVector<float>(n, rng, 0.01, 0.5);
  const float lr = 0.01f, mu = 0.9f, b1 = 0.9f, b2 = 0.999f, wd = 0.05f;
  const float bc1 = 1 - 0.9f * 0.9f, bc2 = 1 - 0.999f * 0.999f, eps = 1e-8f;
  struct Case {
    const char *op;
    unsigned states;
    std::vector<float> scalars;
  };
  const Case cases[] = {{"SGDStep", 0, {lr}},
                        {"MomentumStep", 1, {lr, mu}},
                        {"AdamStep", 2, {lr, b1, b2, 1 - b1, 1 - b2, eps, bc1, bc2}}};
  for (const Case &c : cases)
    for (int skip : {-1, 0, 1}) { // absent, false, true
      SCOPED_TRACE(std::string(c.op) + " skip " + std::to_string(skip));
      OpTester t(c.op, 1, kTraining);
      t.input(shape, param).input(shape, grad);
      if (c.states > 0)
        t.input(shape, s1);
      if (c.states > 1)
        t.input(shape, s2);
      for (float v : c.scalars)
        t.input<float>({}, {v});
      t.input<float>({}, {wd});
      if (skip >= 0)
        t.input<bool>({}, {skip == 1});
      t.outputs(1 + c.states);
      std::vector<HostTensor> got = runOrFail(t, device), cpu = runOrFail(t, "cpu");
      ASSERT_EQ(got.size(), 1u + c.states);
      const std::vector<float> *ins[] = {&param, &s1, &s2};
      for (unsigned o = 0; o <= c.states; ++o) {
        std::vector<float> g = valuesOf<float>(got[o]), want = valuesOf<float>(cpu[o]);
        EXPECT_EQ(0, std::memcmp(g.data(), want.data(), n * sizeof(float))) << "output " << o;
        if (skip == 1)
          EXPECT_EQ(0, std::memcmp(g.data(), ins[o]->data(), n * sizeof(float)));
      }
      if (skip == 1)
        continue;
      // The parameter against float64 (Adam's direction is O(1): the step is ~lr).
      std::vector<double> ref(n), scale(n, 1.0);
      for (size_t i = 0; i < n; ++i) {
        double p = param[i], gg = double(grad[i]) + double(wd) * p, d = gg;
        if (c.states == 1)
          d = double(mu) * s1[i] + gg;
        if (c.states == 2) {
          double m = double(b1) * s1[i] + double(1 - b1) * gg;
          double v = double(b2) * s2[i] + double(1 - b2) * gg * gg;
          d = (m / double(bc1)) / (std::sqrt(v / double(bc2)) + double(eps));
        }
        ref[i] = p - double(lr) * d;
        scale[i] = std::fabs(p) + std::fabs(double(lr) * d);
      }
      EXPECT_TRUE(allClose(valuesOf<float>(got[0]), ref, scale));
    }
}

} // namespace
