//===- PoolTest.cpp - MaxPool, AveragePool, LpPool and global pools -------===//
//
// Pooling nodes against naive double-precision window loops written here,
// for f32, f16, bf16 and f64, on every selected device through the op tester
// (OpTester.h): strides, asymmetric pads, dilations, ceil_mode,
// count_include_pad, 1-3 spatial dims, MaxPool indices in both storage
// orders, LpPool and GlobalLpPool of orders 1, 2 and 3, NaN propagation and
// empty/size-1 inputs.
//
//===----------------------------------------------------------------------===//

#include "OpTester.h"

#include <cmath>
#include <limits>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

class PoolTest : public DeviceTypeTest {};
OPTEST_INSTANTIATE_FLOAT_TYPES(PoolTest);

struct PoolCase {
  const char *name;
  int64_t n, c;
  std::vector<int64_t> in, k, s, d, pb, pe;
  bool ceil;
};

const PoolCase kPoolCases[] = {
    {"resnet-stem",
     1,
     3,
     {9, 9},
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1},
     {1, 1},
     false},
    {"2x2-odd", 2, 2, {7, 5}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, false},
    {"ceil", 1, 2, {5, 6}, {2, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, true},
    {"ceil-pads", 1, 2, {6, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true},
    {"dilation", 1, 2, {9, 8}, {3, 2}, {1, 2}, {2, 3}, {2, 1}, {1, 2}, false},
    {"asym-pads", 1, 1, {6, 7}, {3, 3}, {1, 2}, {1, 1}, {0, 2}, {2, 0}, false},
    {"1d", 2, 3, {11}, {3}, {2}, {1}, {1}, {1}, true},
    {"3d",
     1,
     2,
     {4, 5, 6},
     {2, 3, 2},
     {2, 1, 2},
     {1, 1, 1},
     {0, 1, 1},
     {1, 1, 0},
     false},
    {"identity", 1, 2, {3, 4}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, false},
    {"whole", 2, 2, {4, 4}, {4, 4}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, false},
    {"empty-batch",
     0,
     2,
     {4, 4},
     {2, 2},
     {2, 2},
     {1, 1},
     {0, 0},
     {0, 0},
     false},
    {"size1", 1, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, false},
};

/// Output spatial sizes from the ONNX definition (written here): floor or
/// ceil of (in + pads - span) / s, plus one; with ceil_mode, a last window
/// that would start in the end padding is dropped.
std::vector<int64_t> outDimsOf(const PoolCase &pc) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < pc.in.size(); ++i) {
    int64_t span = pc.d[i] * (pc.k[i] - 1) + 1;
    int64_t room = pc.in[i] + pc.pb[i] + pc.pe[i] - span;
    int64_t o = (pc.ceil ? (room + pc.s[i] - 1) / pc.s[i] : room / pc.s[i]) + 1;
    if (pc.ceil && (o - 1) * pc.s[i] >= pc.in[i] + pc.pb[i])
      --o;
    out.push_back(o);
  }
  return out;
}

/// The MaxPool (opset 12) or AveragePool (opset 19: dilations) node of a case.
OpTester poolNode(const PoolCase &pc, bool max, const HostTensor &x) {
  OpTester t(max ? "MaxPool" : "AveragePool", max ? 12 : 19);
  std::vector<int64_t> pads = pc.pb;
  pads.insert(pads.end(), pc.pe.begin(), pc.pe.end());
  t.attrInts("kernel_shape", pc.k).attrInts("strides", pc.s).attrInts("dilations", pc.d);
  t.attrInts("pads", pads).attrInt("ceil_mode", pc.ceil);
  t.input(x);
  return t;
}

/// Naive reference over every window tap. Writes max (with first argmax in
/// row-major plane coordinates), sum, and the two divisors.
struct WindowResult {
  double max = -std::numeric_limits<double>::infinity(), sum = 0, absSum = 0;
  /// The sums of |v|^q for q = 1, 2, 3 (LpPool).
  double powSum[4] = {0, 0, 0, 0};
  int64_t arg = -1, inside = 0, padded = 0;
};

WindowResult window(const std::vector<double> &plane, const PoolCase &pc,
                    const std::vector<int64_t> &o) {
  WindowResult r;
  int64_t kSize = product(pc.k);
  for (int64_t t = 0; t < kSize; ++t) {
    std::vector<int64_t> ti = unravel(t, pc.k);
    bool in = true, inPadded = true;
    int64_t flat = 0;
    for (size_t d = 0; d < pc.in.size(); ++d) {
      int64_t p = o[d] * pc.s[d] - pc.pb[d] + ti[d] * pc.d[d];
      in &= p >= 0 && p < pc.in[d];
      inPadded &= p >= -pc.pb[d] && p < pc.in[d] + pc.pe[d];
      flat = flat * pc.in[d] + p;
    }
    r.padded += inPadded;
    if (!in)
      continue;
    ++r.inside;
    double v = plane[size_t(flat)];
    r.sum += v;
    r.absSum += std::fabs(v);
    for (int q = 1; q <= 3; ++q)
      r.powSum[q] += std::pow(std::fabs(v), double(q));
    if (r.arg < 0 || v > r.max || (std::isnan(v) && !std::isnan(r.max))) {
      r.max = v;
      r.arg = flat;
    }
  }
  return r;
}

OPTEST_TYPED_P(PoolTest, MaxAndAverageMatchNaiveLoops) {
  std::mt19937 rng(8);
  for (const PoolCase &pc : kPoolCases) {
    SCOPED_TRACE(pc.name);
    std::vector<int64_t> outDims = outDimsOf(pc);
    int64_t inSize = product(pc.in), outSize = product(outDims),
            planes = pc.n * pc.c;
    std::vector<T> x = randomVector<T>(size_t(planes * inSize), rng);
    std::vector<double> xd = toDoubles(x);
    std::vector<double> maxRef, avgRef, avgPadRef, scale;
    std::vector<int64_t> argRow, argCol;
    for (int64_t p = 0; p < planes; ++p) {
      std::vector<double> plane(xd.begin() + p * inSize,
                                xd.begin() + (p + 1) * inSize);
      for (int64_t o = 0; o < outSize; ++o) {
        WindowResult r = window(plane, pc, unravel(o, outDims));
        maxRef.push_back(r.max);
        avgRef.push_back(r.sum / double(r.inside));
        avgPadRef.push_back(r.sum / double(r.padded));
        scale.push_back(r.absSum / double(std::max<int64_t>(r.inside, 1)));
        std::vector<int64_t> ai = unravel(r.arg, pc.in);
        int64_t col = 0, stride = 1;
        for (size_t d = 0; d < ai.size(); ++d, stride *= pc.in[d - 1])
          col += ai[d] * stride;
        argRow.push_back(p * inSize + r.arg);
        argCol.push_back(p * inSize + col);
      }
    }
    std::vector<int64_t> shape{pc.n, pc.c};
    shape.insert(shape.end(), pc.in.begin(), pc.in.end());
    HostTensor xt = tensorOf(shape, x);
    EXPECT_TRUE(allClose(runOutput<T>(poolNode(pc, true, xt), device), maxRef, {}, {0, 0, 0}))
        << "no indices"; // Max is exact.
    std::vector<HostTensor> out = runOrFail(poolNode(pc, true, xt).outputs(2), device);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), maxRef, {}, {0, 0, 0})) << "with indices";
    EXPECT_EQ(valuesOf<int64_t>(out[1]), argRow);
    out = runOrFail(poolNode(pc, true, xt).attrInt("storage_order", 1).outputs(2), device);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(valuesOf<int64_t>(out[1]), argCol);
    EXPECT_TRUE(allClose(runOutput<T>(poolNode(pc, false, xt), device), avgRef, scale))
        << "count_include_pad = 0";
    EXPECT_TRUE(allClose(
        runOutput<T>(poolNode(pc, false, xt).attrInt("count_include_pad", 1), device),
        avgPadRef, scale))
        << "count_include_pad = 1";
  }
}

/// The LpPool (opset 18: dilations, ceil_mode) node of a case.
OpTester lpPoolNode(const PoolCase &pc, int64_t p, const HostTensor &x) {
  OpTester t("LpPool", 18);
  std::vector<int64_t> pads = pc.pb;
  pads.insert(pads.end(), pc.pe.begin(), pc.pe.end());
  t.attrInts("kernel_shape", pc.k).attrInts("strides", pc.s).attrInts("dilations", pc.d);
  t.attrInts("pads", pads).attrInt("ceil_mode", pc.ceil).attrInt("p", p);
  t.input(x);
  return t;
}

OPTEST_TYPED_P(PoolTest, LpPoolMatchesNaiveLoops) {
  std::mt19937 rng(10);
  for (const PoolCase &pc : kPoolCases) {
    SCOPED_TRACE(pc.name);
    std::vector<int64_t> outDims = outDimsOf(pc);
    int64_t inSize = product(pc.in), outSize = product(outDims), planes = pc.n * pc.c;
    std::vector<T> x = randomVector<T>(size_t(planes * inSize), rng);
    std::vector<double> xd = toDoubles(x);
    std::vector<double> ref[4];
    for (int64_t p = 0; p < planes; ++p) {
      std::vector<double> plane(xd.begin() + p * inSize, xd.begin() + (p + 1) * inSize);
      for (int64_t o = 0; o < outSize; ++o) {
        WindowResult r = window(plane, pc, unravel(o, outDims));
        for (int q = 1; q <= 3; ++q)
          ref[q].push_back(std::pow(r.powSum[q], 1.0 / double(q)));
      }
    }
    std::vector<int64_t> shape{pc.n, pc.c};
    shape.insert(shape.end(), pc.in.begin(), pc.in.end());
    HostTensor xt = tensorOf(shape, x);
    for (int q = 1; q <= 3; ++q)
      EXPECT_TRUE(allClose(runOutput<T>(lpPoolNode(pc, q, xt), device), ref[q], ref[q]))
          << "p = " << q;
  }
}

// p defaults to 2, and LpPool-1's p is a float: 2.5 raises to that power.
OPTEST_TYPED_P(PoolTest, LpPoolOrderAttribute) {
  std::vector<T> x = {fromDouble<T>(1.0), fromDouble<T>(-2.0), fromDouble<T>(0.5),
                      fromDouble<T>(3.0)};
  OpTester byDefault("LpPool", 11);
  byDefault.attrInts("kernel_shape", {2}).attrInts("strides", {2}).input<T>({1, 1, 4}, x);
  std::vector<double> l2 = {std::sqrt(5.0), std::sqrt(9.25)};
  EXPECT_TRUE(allClose(runOutput<T>(byDefault, device), l2, l2));
  OpTester real("LpPool", 1);
  real.attrInts("kernel_shape", {4}).attrFloat("p", 2.5f).input<T>({1, 1, 4}, x);
  double s = 0;
  for (T v : x)
    s += std::pow(std::fabs(toDouble(v)), 2.5);
  std::vector<double> ref = {std::pow(s, 1 / 2.5)};
  EXPECT_TRUE(allClose(runOutput<T>(real, device), ref, ref));
  OpTester global("GlobalLpPool", 1);
  global.attrFloat("p", 2.5f).input<T>({1, 1, 4}, x);
  EXPECT_TRUE(allClose(runOutput<T>(global, device), ref, ref));
}

OPTEST_TYPED_P(PoolTest, MaxPoolPropagatesNaN) {
  PoolCase pc = {"nan",  1,      1,      {4, 4}, {2, 2},
                 {2, 2}, {1, 1}, {0, 0}, {0, 0}, false};
  std::vector<T> x(16, fromDouble<T>(1.0));
  x[5] = fromDouble<T>(std::nan("")); // Window (0, 0).
  x[10] = fromDouble<T>(-std::numeric_limits<double>::infinity());
  HostTensor xt = tensorOf<T>({1, 1, 4, 4}, x);
  std::vector<HostTensor> out = runOrFail(poolNode(pc, true, xt).outputs(2), device);
  ASSERT_EQ(out.size(), 2u);
  std::vector<T> y = valuesOf<T>(out[0]);
  std::vector<int64_t> idx = valuesOf<int64_t>(out[1]);
  ASSERT_EQ(y.size(), 4u);
  ASSERT_EQ(idx.size(), 4u);
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
  EXPECT_EQ(idx[0], 5);
  EXPECT_EQ(toDouble(y[3]), 1.0);
  y = runOutput<T>(poolNode(pc, true, xt), device);
  ASSERT_EQ(y.size(), 4u);
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
  EXPECT_EQ(toDouble(y[3]), 1.0);
  OpTester global("GlobalMaxPool", 1);
  global.input<T>({1, 1, 16}, x);
  y = runOutput<T>(global, device);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
}

OPTEST_TYPED_P(PoolTest, GlobalPools) {
  std::mt19937 rng(9);
  for (int64_t spatial : {1, 7, 1000}) {
    SCOPED_TRACE("spatial = " + std::to_string(spatial));
    int64_t planes = 6;
    std::vector<T> x = randomVector<T>(size_t(planes * spatial), rng, -4, 4);
    std::vector<double> meanRef, maxRef, scale, l2Ref, l3Ref;
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0, abs = 0, sq = 0, cube = 0, mx = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < spatial; ++i) {
        double v = toDouble(x[size_t(p * spatial + i)]);
        sum += v;
        abs += std::fabs(v);
        sq += v * v;
        cube += std::fabs(v * v * v);
        mx = std::max(mx, v);
      }
      meanRef.push_back(sum / double(spatial));
      maxRef.push_back(mx);
      scale.push_back(abs / double(spatial));
      l2Ref.push_back(std::sqrt(sq));
      l3Ref.push_back(std::cbrt(cube));
    }
    OpTester avg("GlobalAveragePool", 1), max("GlobalMaxPool", 1);
    avg.input<T>({1, planes, spatial}, x);
    max.input<T>({1, planes, spatial}, x);
    EXPECT_TRUE(allClose(runOutput<T>(avg, device), meanRef, scale));
    EXPECT_TRUE(allClose(runOutput<T>(max, device), maxRef, {}, {0, 0, 0}));
    OpTester l2("GlobalLpPool", 2), l3("GlobalLpPool", 22);
    l2.input<T>({1, planes, spatial}, x); // p defaults to 2
    l3.attrInt("p", 3).input<T>({1, planes, spatial}, x);
    EXPECT_TRUE(allClose(runOutput<T>(l2, device), l2Ref, l2Ref));
    EXPECT_TRUE(allClose(runOutput<T>(l3, device), l3Ref, l3Ref));
  }
  // No planes: nothing to do, an empty [0, 1, 1] result.
  OpTester empty("GlobalAveragePool", 1);
  empty.input<T>({0, 1, 5}, {});
  std::vector<HostTensor> out = runOrFail(empty, device);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{0, 1, 1}));
}

} // namespace
