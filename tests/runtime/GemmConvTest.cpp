//===- GemmConvTest.cpp - GEMM, MatMul, Conv and ConvTranspose ------------===//
//
// Each kernel against naive double-precision loops written here, for f32,
// f16, bf16 and f64: transposes, leading dimensions, alpha/beta, broadcast
// biases, the blocked 16-bit GEMM path, numpy MatMul broadcasting, and
// convolutions with groups, strides, pads, dilations in 1-3 spatial dims.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Conv.h"
#include "mpc/Runtime/Cpu/Gemm.h"

#include "TestUtil.h"

#include <cmath>

using namespace mpc;
using namespace mpc::test;

namespace {

template <typename T> class GemmTest : public ::testing::Test {};
template <typename T> class ConvTest : public ::testing::Test {};
using AllFloatTypes = ::testing::Types<float, Half, BFloat16, double>;
TYPED_TEST_SUITE(GemmTest, AllFloatTypes);
TYPED_TEST_SUITE(ConvTest, AllFloatTypes);

/// Reference C = alpha * op(A) op(B) + beta * C0 with its magnitude scale.
template <typename T, typename TC>
void checkGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
               double beta, int64_t pad, std::mt19937 &rng) {
  SCOPED_TRACE(testing::Message()
               << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
               << " tb=" << tb << " alpha=" << alpha << " beta=" << beta);
  int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  std::vector<T> a = randomVector<T>(size_t((ta ? k : m) * lda), rng);
  std::vector<T> b = randomVector<T>(size_t((tb ? n : k) * ldb), rng);
  std::vector<TC> c = randomVector<TC>(size_t(m * ldc), rng);
  if (beta == 0) // BLAS semantics: C is not read, so NaN there must not leak.
    for (auto &v : c)
      v = fromDouble<TC>(std::nan(""));
  std::vector<double> expected(c.size()), scale(c.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      size_t idx = size_t(i * ldc + j);
      if (j >= n) { // Padding columns must be left alone.
        expected[idx] = toDouble(c[idx]);
        continue;
      }
      double sum = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        double av = toDouble(a[size_t(ta ? p * lda + i : i * lda + p)]);
        double bv = toDouble(b[size_t(tb ? j * ldb + p : p * ldb + j)]);
        sum += av * bv;
        mag += std::fabs(av * bv);
      }
      double c0 = beta == 0 ? 0 : toDouble(c[idx]);
      expected[idx] = alpha * sum + beta * c0;
      scale[idx] = std::fabs(alpha) * mag + std::fabs(beta * c0);
    }
  cpu::gemm<T, TC>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta,
                   c.data(), ldc);
  // Rows beyond m are absent; compare what exists.
  EXPECT_TRUE(allClose(c, expected, scale, TypeTraits<TC>::kTol));
}

TYPED_TEST(GemmTest, ShapesTransposesAndScalars) {
  using T = TypeParam;
  std::mt19937 rng(1);
  // M = 1 and N = 1 take the matrix-vector path.
  const int64_t shapes[][3] = {
      {1, 1, 1},   {7, 13, 29}, {33, 17, 65}, {64, 64, 64}, {5, 300, 7},
      {1, 37, 19}, {23, 1, 19}, {0, 5, 3},    {4, 0, 3},    {3, 4, 0}};
  for (auto &s : shapes)
    for (int t = 0; t < 4; ++t)
      checkGemm<T, T>(t & 1, t & 2, s[0], s[1], s[2], 1.0, 0.0, 0, rng);
  for (int t = 0; t < 4; ++t) {
    checkGemm<T, T>(t & 1, t & 2, 1, 37, 19, 0.5, 2.0, 3, rng);
    checkGemm<T, T>(t & 1, t & 2, 23, 1, 19, -1.0, 0.5, 2, rng);
  }
  checkGemm<T, T>(false, false, 9, 11, 13, 0.5, -1.5, 3, rng);
  checkGemm<T, T>(true, true, 9, 11, 13, -2.0, 1.0, 1, rng);
  checkGemm<T, T>(false, true, 3, 4, 0, 1.0, 0.5, 0, rng); // K = 0: C = beta C.
  checkGemm<T, T>(false, false, 3, 4, 0, 1.0, 0.0, 2,
                  rng); // K = 0, beta 0: zeros.
}

TYPED_TEST(GemmTest, BlockedPathsMatch) {
  using T = TypeParam;
  std::mt19937 rng(2);
  // Large enough that the 16-bit path blocks over M and K, then N and K.
  checkGemm<T, T>(false, false, 2100, 20, 2100, 1.0, 0.0, 0, rng);
  checkGemm<T, T>(true, true, 20, 2100, 2100, 1.0, 1.0, 0, rng);
}

TEST(GemmMixedTest, HalfInputsFloatOutput) {
  std::mt19937 rng(3);
  checkGemm<Half, float>(false, false, 17, 19, 23, 1.0, 1.0, 0, rng);
  checkGemm<BFloat16, float>(true, false, 17, 19, 23, 1.0, 0.0, 2, rng);
  checkGemm<Half, float>(false, true, 20, 2100, 2100, 1.0, 0.0, 0, rng);
}

TYPED_TEST(GemmTest, BiasBroadcasts) {
  using T = TypeParam;
  std::mt19937 rng(4);
  const int64_t m = 6, n = 10, k = 7;
  std::vector<T> a = randomVector<T>(m * k, rng),
                 b = randomVector<T>(k * n, rng);
  struct BiasCase {
    const char *name;
    int64_t rs, cs, size;
  } cases[] = {{"[M,N]", n, 1, m * n},
               {"[N]", 0, 1, n},
               {"[M,1]", 1, 0, m},
               {"[]", 0, 0, 1}};
  for (const BiasCase &bc : cases) {
    SCOPED_TRACE(bc.name);
    std::vector<T> bias = randomVector<T>(size_t(bc.size), rng);
    std::vector<T> y(m * n);
    std::vector<double> expected(y.size()), scale(y.size());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += toDouble(a[i * k + p]) * toDouble(b[p * n + j]);
          mag += std::fabs(toDouble(a[i * k + p]) * toDouble(b[p * n + j]));
        }
        double bv = toDouble(bias[size_t(i * bc.rs + j * bc.cs)]);
        expected[i * n + j] = 2.0 * sum + 0.5 * bv;
        scale[i * n + j] = 2.0 * mag + 0.5 * std::fabs(bv);
      }
    cpu::gemmWithBias<T>(false, false, m, n, k, 2.0f, a.data(), k, b.data(), n,
                         0.5f, bias.data(), bc.rs, bc.cs, y.data(), n);
    EXPECT_TRUE(allClose(y, expected, scale));
  }
}

/// Test-local numpy matmul: promotes 1-D operands, broadcasts batches.
std::vector<double>
refMatmul(const std::vector<double> &a, std::vector<int64_t> as,
          const std::vector<double> &b, std::vector<int64_t> bs,
          std::vector<int64_t> &outShape, std::vector<double> &scale) {
  bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1)
    as.insert(as.begin(), 1);
  if (b1)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  std::vector<int64_t> ab(as.begin(), as.end() - 2),
      bb(bs.begin(), bs.end() - 2);
  size_t r = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), r - ab.size(), 1);
  bb.insert(bb.begin(), r - bb.size(), 1);
  std::vector<int64_t> ob(r);
  for (size_t i = 0; i < r; ++i)
    ob[i] = ab[i] == 1 ? bb[i] : ab[i];
  int64_t batches = product(ob);
  std::vector<double> out(size_t(batches * m * n)), sc(out.size());
  for (int64_t bi = 0; bi < batches; ++bi) {
    std::vector<int64_t> idx = unravel(bi, ob);
    int64_t aOff = 0, bOff = 0;
    for (size_t d = 0; d < r; ++d) {
      aOff = aOff * ab[d] + (ab[d] == 1 ? 0 : idx[d]);
      bOff = bOff * bb[d] + (bb[d] == 1 ? 0 : idx[d]);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          double t = a[size_t((aOff * m + i) * k + p)] *
                     b[size_t((bOff * k + p) * n + j)];
          s += t;
          mag += std::fabs(t);
        }
        out[size_t((bi * m + i) * n + j)] = s;
        sc[size_t((bi * m + i) * n + j)] = mag;
      }
  }
  outShape = ob;
  if (!a1)
    outShape.push_back(m);
  if (!b1)
    outShape.push_back(n);
  scale = sc;
  return out;
}

TYPED_TEST(GemmTest, MatMulBroadcasting) {
  using T = TypeParam;
  std::mt19937 rng(5);
  const std::vector<int64_t> cases[][2] = {{{3, 4}, {4, 5}},
                                           {{4}, {4, 5}},
                                           {{3, 4}, {4}},
                                           {{4}, {4}},
                                           {{2, 3, 4}, {4, 5}},
                                           {{2, 3, 4}, {2, 4, 5}},
                                           {{2, 1, 3, 4}, {5, 4, 6}},
                                           {{1, 3, 4}, {2, 4, 5}},
                                           {{0, 3, 4}, {4, 5}},
                                           {{2, 3, 0}, {0, 5}},
                                           {{7}, {3, 7, 2}},
                                           {{2, 3, 4}, {4}},
                                           {{3, 1, 9}, {1, 9, 1}},
                                           {{2, 2, 3, 4}, {2, 1, 4, 3}}};
  for (auto &c : cases) {
    SCOPED_TRACE(shapeString(c[0]) + " x " + shapeString(c[1]));
    std::vector<T> a = randomVector<T>(size_t(product(c[0])), rng);
    std::vector<T> b = randomVector<T>(size_t(product(c[1])), rng);
    std::vector<int64_t> refShape;
    std::vector<double> scale;
    std::vector<double> expected =
        refMatmul(toDoubles(a), c[0], toDoubles(b), c[1], refShape, scale);
    llvm::SmallVector<int64_t, 4> shape;
    ASSERT_TRUE(cpu::matmulShape(c[0], c[1], shape));
    EXPECT_EQ(std::vector<int64_t>(shape.begin(), shape.end()), refShape);
    std::vector<T> out(expected.size(), fromDouble<T>(std::nan("")));
    cpu::matmul(a.data(), c[0], b.data(), c[1], out.data());
    EXPECT_TRUE(allClose(out, expected, scale));
  }
  llvm::SmallVector<int64_t, 4> shape;
  EXPECT_FALSE(cpu::matmulShape({3, 4}, {5, 6}, shape));
  EXPECT_FALSE(cpu::matmulShape({2, 3, 4}, {3, 4, 5}, shape));
  EXPECT_FALSE(cpu::matmulShape({}, {4}, shape));
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

struct ConvCase {
  const char *name;
  int64_t n, c, m, group;
  std::vector<int64_t> in, k, s, d, pb, pe;
  bool bias;
  std::vector<int64_t> outPad = {}; // ConvTranspose only.
};

cpu::ConvGeometry geometryOf(const ConvCase &cc, bool transposed) {
  cpu::ConvGeometry g;
  g.batch = cc.n;
  g.inChannels = cc.c;
  g.outChannels = cc.m;
  g.group = cc.group;
  g.inSpatial.assign(cc.in.begin(), cc.in.end());
  g.kernel.assign(cc.k.begin(), cc.k.end());
  g.strides.assign(cc.s.begin(), cc.s.end());
  g.dilations.assign(cc.d.begin(), cc.d.end());
  g.padsBegin.assign(cc.pb.begin(), cc.pb.end());
  g.padsEnd.assign(cc.pe.begin(), cc.pe.end());
  for (size_t i = 0; i < cc.in.size(); ++i)
    g.outSpatial.push_back(
        transposed ? cpu::convTransposeOutputSize(
                         cc.in[i], cc.k[i], cc.s[i], cc.d[i], cc.pb[i],
                         cc.pe[i], cc.outPad.empty() ? 0 : cc.outPad[i])
                   : cpu::windowOutputSize(cc.in[i], cc.k[i], cc.s[i], cc.d[i],
                                           cc.pb[i], cc.pe[i]));
  return g;
}

const ConvCase kConvCases[] = {
    {"basic", 2, 3, 4, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, true},
    {"stride2-asym-pads",
     1,
     3,
     5,
     1,
     {8, 9},
     {3, 3},
     {2, 2},
     {1, 1},
     {0, 1},
     {1, 0},
     false},
    {"dilation",
     1,
     2,
     3,
     1,
     {9, 9},
     {3, 3},
     {1, 1},
     {2, 2},
     {2, 2},
     {2, 2},
     true},
    {"groups",
     2,
     4,
     6,
     2,
     {6, 5},
     {3, 2},
     {1, 1},
     {1, 1},
     {1, 0},
     {1, 1},
     true},
    {"depthwise",
     1,
     5,
     5,
     5,
     {9, 9},
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1},
     {1, 1},
     true},
    {"depthwise-s1",
     2,
     3,
     3,
     3,
     {8, 11},
     {3, 3},
     {1, 1},
     {1, 1},
     {1, 1},
     {1, 1},
     true},
    {"depthwise-mult",
     1,
     2,
     6,
     2,
     {7, 6},
     {3, 2},
     {1, 2},
     {2, 1},
     {2, 0},
     {1, 1},
     false},
    {"single-channel",
     1,
     1,
     4,
     1,
     {6, 6},
     {3, 3},
     {1, 1},
     {1, 1},
     {0, 0},
     {0, 0},
     true},
    {"pointwise",
     3,
     16,
     8,
     1,
     {5, 5},
     {1, 1},
     {1, 1},
     {1, 1},
     {0, 0},
     {0, 0},
     true},
    {"1d", 2, 3, 4, 1, {17}, {5}, {3}, {1}, {2}, {2}, true},
    {"3d",
     1,
     2,
     3,
     1,
     {5, 5, 5},
     {3, 3, 3},
     {1, 1, 1},
     {1, 1, 1},
     {1, 1, 1},
     {1, 1, 1},
     true},
    {"full-window",
     1,
     3,
     2,
     1,
     {4, 4},
     {4, 4},
     {1, 1},
     {1, 1},
     {0, 0},
     {0, 0},
     true},
    {"rect-strides",
     1,
     2,
     3,
     1,
     {6, 9},
     {2, 4},
     {2, 3},
     {1, 1},
     {0, 1},
     {1, 2},
     false},
    {"chunked",
     1,
     64,
     4,
     1,
     {48, 48},
     {3, 3},
     {1, 1},
     {1, 1},
     {1, 1},
     {1, 1},
     true},
    {"empty-batch",
     0,
     3,
     4,
     1,
     {5, 5},
     {3, 3},
     {1, 1},
     {1, 1},
     {1, 1},
     {1, 1},
     true},
    {"size1", 1, 1, 1, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, true},
};

/// Visits every (spatial output index, input index) pair that a kernel tap
/// connects; conv reads input position i = o * s - pb + k * d.
template <typename F>
void forEachTap(const std::vector<int64_t> &outDims,
                const std::vector<int64_t> &inDims, const ConvCase &cc, F f) {
  int64_t outSize = product(outDims), kSize = product(cc.k);
  for (int64_t o = 0; o < outSize; ++o) {
    std::vector<int64_t> oi = unravel(o, outDims);
    for (int64_t kk = 0; kk < kSize; ++kk) {
      std::vector<int64_t> ki = unravel(kk, cc.k);
      int64_t flat = 0;
      bool inside = true;
      for (size_t d = 0; d < inDims.size(); ++d) {
        int64_t i = oi[d] * cc.s[d] - cc.pb[d] + ki[d] * cc.d[d];
        inside &= i >= 0 && i < inDims[d];
        flat = flat * inDims[d] + i;
      }
      if (inside)
        f(o, kk, flat);
    }
  }
}

TYPED_TEST(ConvTest, ConvMatchesNaiveLoops) {
  using T = TypeParam;
  std::mt19937 rng(6);
  for (const ConvCase &cc : kConvCases) {
    SCOPED_TRACE(cc.name);
    cpu::ConvGeometry g = geometryOf(cc, false);
    std::vector<int64_t> outDims(g.outSpatial.begin(), g.outSpatial.end());
    int64_t inSize = product(cc.in), outSize = product(outDims),
            kSize = product(cc.k);
    int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
    std::vector<T> x = randomVector<T>(size_t(cc.n * cc.c * inSize), rng);
    std::vector<T> w = randomVector<T>(size_t(cc.m * cg * kSize), rng);
    std::vector<T> bias = randomVector<T>(size_t(cc.m), rng);
    std::vector<double> expected(size_t(cc.n * cc.m * outSize)),
        scale(expected.size());
    for (int64_t n = 0; n < cc.n; ++n)
      for (int64_t m = 0; m < cc.m; ++m) {
        int64_t grp = m / mg;
        size_t base = size_t((n * cc.m + m) * outSize);
        for (int64_t o = 0; o < outSize; ++o) {
          expected[base + o] = cc.bias ? toDouble(bias[m]) : 0.0;
          scale[base + o] = std::fabs(expected[base + o]);
        }
        for (int64_t c = 0; c < cg; ++c)
          forEachTap(outDims, cc.in, cc, [&](int64_t o, int64_t kk, int64_t i) {
            double t =
                toDouble(x[size_t((n * cc.c + grp * cg + c) * inSize + i)]) *
                toDouble(w[size_t((m * cg + c) * kSize + kk)]);
            expected[base + o] += t;
            scale[base + o] += std::fabs(t);
          });
      }
    std::vector<T> y(expected.size());
    cpu::conv<T>(g, x.data(), w.data(), cc.bias ? bias.data() : nullptr,
                 y.data());
    EXPECT_TRUE(allClose(y, expected, scale));
  }
}

const ConvCase kConvTransposeCases[] = {
    {"basic",
     2,
     3,
     4,
     1,
     {4, 5},
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1},
     {1, 1},
     true,
     {1, 0}},
    {"groups",
     1,
     4,
     6,
     2,
     {5, 5},
     {3, 2},
     {1, 2},
     {1, 1},
     {0, 1},
     {1, 0},
     true},
    {"dilation",
     1,
     2,
     3,
     1,
     {6, 6},
     {3, 3},
     {2, 2},
     {2, 2},
     {2, 1},
     {1, 2},
     false},
    {"1d", 2, 3, 2, 1, {9}, {4}, {3}, {1}, {0}, {0}, true, {2}},
    {"3d",
     1,
     2,
     2,
     1,
     {3, 4, 3},
     {2, 2, 2},
     {2, 2, 2},
     {1, 1, 1},
     {0, 0, 0},
     {0, 0, 0},
     true},
    {"depthwise",
     1,
     3,
     3,
     3,
     {7, 7},
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1},
     {1, 1},
     true},
    {"chunked",
     1,
     8,
     4,
     1,
     {200, 200},
     {2, 2},
     {2, 2},
     {1, 1},
     {0, 0},
     {0, 0},
     true},
    {"size1", 1, 1, 1, 1, {1}, {1}, {1}, {1}, {0}, {0}, false},
};

TYPED_TEST(ConvTest, ConvTransposeMatchesNaiveLoops) {
  using T = TypeParam;
  std::mt19937 rng(7);
  for (const ConvCase &cc : kConvTransposeCases) {
    SCOPED_TRACE(cc.name);
    cpu::ConvGeometry g = geometryOf(cc, true);
    std::vector<int64_t> outDims(g.outSpatial.begin(), g.outSpatial.end());
    int64_t inSize = product(cc.in), outSize = product(outDims),
            kSize = product(cc.k);
    int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
    std::vector<T> x = randomVector<T>(size_t(cc.n * cc.c * inSize), rng);
    std::vector<T> w = randomVector<T>(size_t(cc.c * mg * kSize), rng);
    std::vector<T> bias = randomVector<T>(size_t(cc.m), rng);
    std::vector<double> expected(size_t(cc.n * cc.m * outSize)),
        scale(expected.size());
    for (int64_t n = 0; n < cc.n; ++n)
      for (int64_t m = 0; m < cc.m; ++m) {
        int64_t grp = m / mg;
        size_t base = size_t((n * cc.m + m) * outSize);
        for (int64_t o = 0; o < outSize; ++o) {
          expected[base + o] = cc.bias ? toDouble(bias[m]) : 0.0;
          scale[base + o] = std::fabs(expected[base + o]);
        }
        // Output position o = i * s - pb + k * d: the conv tap relation with
        // the roles of input and output swapped.
        for (int64_t c = 0; c < cg; ++c)
          forEachTap(cc.in, outDims, cc, [&](int64_t i, int64_t kk, int64_t o) {
            double t =
                toDouble(x[size_t((n * cc.c + grp * cg + c) * inSize + i)]) *
                toDouble(w[size_t(
                    ((grp * cg + c) * mg + (m - grp * mg)) * kSize + kk)]);
            expected[base + o] += t;
            scale[base + o] += std::fabs(t);
          });
      }
    std::vector<T> y(expected.size());
    cpu::convTranspose<T>(g, x.data(), w.data(),
                          cc.bias ? bias.data() : nullptr, y.data());
    EXPECT_TRUE(allClose(y, expected, scale));
  }
}

TEST(ConvShapeTest, OutputSizesAndAutoPad) {
  EXPECT_EQ(cpu::windowOutputSize(7, 3, 1, 1, 1, 1), 7);
  EXPECT_EQ(cpu::windowOutputSize(8, 3, 2, 1, 0, 0), 3);
  EXPECT_EQ(cpu::windowOutputSize(8, 3, 2, 1, 0, 0, /*ceilMode=*/true), 4);
  EXPECT_EQ(cpu::windowOutputSize(5, 2, 2, 1, 0, 0, true), 3);
  // ceil_mode must not create a window that starts in the end padding.
  EXPECT_EQ(cpu::windowOutputSize(4, 2, 2, 1, 1, 1, true), 3);
  EXPECT_EQ(cpu::windowOutputSize(2, 5, 1, 1, 0, 0), 0);
  int64_t pb = 9, pe = 9;
  cpu::resolveAutoPad(cpu::AutoPad::SameUpper, 7, 4, 2, 1, pb,
                      pe); // out 4, total 3.
  EXPECT_EQ(pb, 1);
  EXPECT_EQ(pe, 2);
  cpu::resolveAutoPad(cpu::AutoPad::SameLower, 7, 4, 2, 1, pb, pe);
  EXPECT_EQ(pb, 2);
  EXPECT_EQ(pe, 1);
  cpu::resolveAutoPad(cpu::AutoPad::Valid, 7, 4, 2, 1, pb, pe);
  EXPECT_EQ(pb + pe, 0);
  pb = 3;
  pe = 4;
  cpu::resolveAutoPad(cpu::AutoPad::NotSet, 7, 4, 2, 1, pb, pe);
  EXPECT_EQ(pb, 3);
  EXPECT_EQ(pe, 4);
  EXPECT_EQ(cpu::convTransposeOutputSize(4, 3, 2, 1, 1, 1, 1), 8);
  cpu::resolveConvTransposePads(cpu::AutoPad::SameUpper, 4, 3, 2, 1, 0, -1, pb,
                                pe);
  EXPECT_EQ(cpu::convTransposeOutputSize(4, 3, 2, 1, pb, pe, 0),
            8); // in * stride.
  EXPECT_EQ(pb, 0);
  EXPECT_EQ(pe, 1);
  cpu::resolveConvTransposePads(cpu::AutoPad::NotSet, 4, 3, 2, 1, 0, 6, pb, pe);
  EXPECT_EQ(cpu::convTransposeOutputSize(4, 3, 2, 1, pb, pe, 0), 6);
  EXPECT_EQ(pb, 2); // Larger half first unless SAME_UPPER.
  EXPECT_EQ(pe, 1);
}

} // namespace
