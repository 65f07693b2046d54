//===- PoolTest.cpp - MaxPool, AveragePool and global pools ---------------===//
//
// Pooling kernels against naive double-precision window loops written here,
// for f32, f16, bf16 and f64: strides, asymmetric pads, dilations, ceil_mode,
// count_include_pad, 1-3 spatial dims, MaxPool indices in both storage
// orders, NaN propagation and empty/size-1 inputs.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Pool.h"

#include "TestUtil.h"

#include <cmath>
#include <limits>

using namespace mpc;
using namespace mpc::test;

namespace {

template <typename T> class PoolTest : public ::testing::Test {};
using AllFloatTypes = ::testing::Types<float, Half, BFloat16, double>;
TYPED_TEST_SUITE(PoolTest, AllFloatTypes);

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

cpu::PoolGeometry geometryOf(const PoolCase &pc) {
  cpu::PoolGeometry g;
  g.batch = pc.n;
  g.channels = pc.c;
  g.inSpatial.assign(pc.in.begin(), pc.in.end());
  g.kernel.assign(pc.k.begin(), pc.k.end());
  g.strides.assign(pc.s.begin(), pc.s.end());
  g.dilations.assign(pc.d.begin(), pc.d.end());
  g.padsBegin.assign(pc.pb.begin(), pc.pb.end());
  g.padsEnd.assign(pc.pe.begin(), pc.pe.end());
  for (size_t i = 0; i < pc.in.size(); ++i)
    g.outSpatial.push_back(cpu::windowOutputSize(
        pc.in[i], pc.k[i], pc.s[i], pc.d[i], pc.pb[i], pc.pe[i], pc.ceil));
  return g;
}

/// Naive reference over every window tap. Writes max (with first argmax in
/// row-major plane coordinates), sum, and the two divisors.
struct WindowResult {
  double max = -std::numeric_limits<double>::infinity(), sum = 0, absSum = 0;
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
    if (r.arg < 0 || v > r.max || (std::isnan(v) && !std::isnan(r.max))) {
      r.max = v;
      r.arg = flat;
    }
  }
  return r;
}

TYPED_TEST(PoolTest, MaxAndAverageMatchNaiveLoops) {
  using T = TypeParam;
  std::mt19937 rng(8);
  for (const PoolCase &pc : kPoolCases) {
    SCOPED_TRACE(pc.name);
    cpu::PoolGeometry g = geometryOf(pc);
    std::vector<int64_t> outDims(g.outSpatial.begin(), g.outSpatial.end());
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
    std::vector<T> y(maxRef.size());
    cpu::maxPool<T>(g, x.data(), y.data());
    EXPECT_TRUE(allClose(y, maxRef, {}, {0, 0, 0}))
        << "no indices"; // Max is exact.
    std::vector<int64_t> idx(maxRef.size(), -7);
    std::fill(y.begin(), y.end(), fromDouble<T>(0.0));
    cpu::maxPool<T>(g, x.data(), y.data(), idx.data());
    EXPECT_TRUE(allClose(y, maxRef, {}, {0, 0, 0})) << "with indices";
    EXPECT_EQ(idx, argRow);
    cpu::maxPool<T>(g, x.data(), y.data(), idx.data(),
                    /*columnMajorIndices=*/true);
    EXPECT_EQ(idx, argCol);
    cpu::averagePool<T>(g, false, x.data(), y.data());
    EXPECT_TRUE(allClose(y, avgRef, scale)) << "count_include_pad = 0";
    cpu::averagePool<T>(g, true, x.data(), y.data());
    EXPECT_TRUE(allClose(y, avgPadRef, scale)) << "count_include_pad = 1";
  }
}

TYPED_TEST(PoolTest, MaxPoolPropagatesNaN) {
  using T = TypeParam;
  PoolCase pc = {"nan",  1,      1,      {4, 4}, {2, 2},
                 {2, 2}, {1, 1}, {0, 0}, {0, 0}, false};
  cpu::PoolGeometry g = geometryOf(pc);
  std::vector<T> x(16, fromDouble<T>(1.0));
  x[5] = fromDouble<T>(std::nan("")); // Window (0, 0).
  x[10] = fromDouble<T>(-std::numeric_limits<double>::infinity());
  std::vector<T> y(4);
  std::vector<int64_t> idx(4);
  cpu::maxPool<T>(g, x.data(), y.data(), idx.data());
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
  EXPECT_EQ(idx[0], 5);
  EXPECT_EQ(toDouble(y[3]), 1.0);
  cpu::maxPool<T>(g, x.data(), y.data());
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
  EXPECT_EQ(toDouble(y[3]), 1.0);
  cpu::globalMaxPool<T>(x.data(), y.data(), 1, 16);
  EXPECT_TRUE(std::isnan(toDouble(y[0])));
}

TYPED_TEST(PoolTest, GlobalPools) {
  using T = TypeParam;
  std::mt19937 rng(9);
  for (int64_t spatial : {1, 7, 1000}) {
    SCOPED_TRACE("spatial = " + std::to_string(spatial));
    int64_t planes = 6;
    std::vector<T> x = randomVector<T>(size_t(planes * spatial), rng, -4, 4);
    std::vector<double> meanRef, maxRef, scale;
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0, abs = 0, mx = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < spatial; ++i) {
        double v = toDouble(x[size_t(p * spatial + i)]);
        sum += v;
        abs += std::fabs(v);
        mx = std::max(mx, v);
      }
      meanRef.push_back(sum / double(spatial));
      maxRef.push_back(mx);
      scale.push_back(abs / double(spatial));
    }
    std::vector<T> y(static_cast<size_t>(planes));
    cpu::globalAveragePool<T>(x.data(), y.data(), planes, spatial);
    EXPECT_TRUE(allClose(y, meanRef, scale));
    cpu::globalMaxPool<T>(x.data(), y.data(), planes, spatial);
    EXPECT_TRUE(allClose(y, maxRef, {}, {0, 0, 0}));
  }
  cpu::globalAveragePool<T>(nullptr, nullptr, 0,
                            5); // No planes: nothing to do.
}

} // namespace
