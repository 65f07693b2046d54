//===- GemmConvTest.cpp - GEMM, MatMul, Conv and ConvTranspose ------------===//
//
// Each op against naive double-precision loops written here, for f32, f16,
// bf16 and f64, on every selected device through the op tester (OpTester.h):
// Gemm transposes, alpha/beta and broadcast biases, the blocked 16-bit GEMM
// path, numpy MatMul broadcasting, and convolutions with groups, strides,
// pads, dilations in 1-3 spatial dims. The CPU GEMM helper's leading
// dimensions and mixed 16-bit/fp32 form, and the CPU window-size helpers,
// are CPU internals with no node of their own: those cases call them
// directly and run on the CPU only.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Conv.h"
#include "mpc/Runtime/Cpu/Gemm.h"

#include "OpTester.h"

#include <cmath>

using namespace mpc;
using namespace mpc::optest;
using namespace mpc::test;

namespace {

class GemmTest : public DeviceTypeTest {};
class ConvTest : public DeviceTypeTest {};
OPTEST_INSTANTIATE_FLOAT_TYPES(GemmTest);
OPTEST_INSTANTIATE_FLOAT_TYPES(ConvTest);

/// Reference alpha * op(A) op(B) + beta * C0 over row-major operands with
/// leading dimensions, with its magnitude scale; columns j >= n of C keep C0.
template <typename T, typename TC>
void gemmReference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                   double beta, const std::vector<T> &a, int64_t lda, const std::vector<T> &b,
                   int64_t ldb, const std::vector<TC> &c, int64_t ldc,
                   std::vector<double> &expected, std::vector<double> &scale) {
  expected.assign(c.size(), 0.0);
  scale.assign(c.size(), 0.0);
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
}

/// The CPU GEMM helper (cpu::gemm) with leading dimensions `pad` wider than
/// the operands: a CPU internal (no node has leading dimensions), checked
/// on the CPU only. With beta 0, C is not read (NaN there must not leak).
template <typename T, typename TC>
void checkCpuGemmHelper(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                        double beta, int64_t pad, std::mt19937 &rng) {
  SCOPED_TRACE(testing::Message() << "cpu::gemm m=" << m << " n=" << n << " k=" << k
                                  << " ta=" << ta << " tb=" << tb << " alpha=" << alpha
                                  << " beta=" << beta << " pad=" << pad);
  int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  std::vector<T> a = randomVector<T>(size_t((ta ? k : m) * lda), rng);
  std::vector<T> b = randomVector<T>(size_t((tb ? n : k) * ldb), rng);
  std::vector<TC> c = randomVector<TC>(size_t(m * ldc), rng);
  if (beta == 0)
    for (auto &v : c)
      v = fromDouble<TC>(std::nan(""));
  std::vector<double> expected, scale;
  gemmReference(ta, tb, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc, expected, scale);
  cpu::gemm<T, TC>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  EXPECT_TRUE(allClose(c, expected, scale, TypeTraits<TC>::kTol));
}

/// The Gemm node Y = alpha * op(A) op(B) + beta * C on `device` against the
/// reference; C [M,N] is given only when beta is not 0.
template <typename T>
void checkGemm(const std::string &device, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
               double alpha, double beta, std::mt19937 &rng) {
  SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta
                                  << " tb=" << tb << " alpha=" << alpha << " beta=" << beta);
  std::vector<int64_t> aShape = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
  std::vector<int64_t> bShape = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  std::vector<T> a = randomVector<T>(size_t(m * k), rng);
  std::vector<T> b = randomVector<T>(size_t(k * n), rng);
  std::vector<T> c = randomVector<T>(size_t(m * n), rng);
  std::vector<double> expected, scale;
  gemmReference(ta, tb, m, n, k, alpha, beta, a, aShape[1], b, bShape[1], c, n, expected,
                scale);
  OpTester t("Gemm", 13);
  t.attrInt("transA", ta).attrInt("transB", tb);
  t.attrFloat("alpha", float(alpha)).attrFloat("beta", float(beta));
  t.input(aShape, a).input(bShape, b);
  if (beta != 0)
    t.input({m, n}, c);
  std::vector<HostTensor> out = runOrFail(t, device);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{m, n}));
  EXPECT_TRUE(allClose(valuesOf<T>(out[0]), expected, scale));
}

// M = 1 and N = 1 take the matrix-vector path.
const int64_t kGemmShapes[][3] = {
    {1, 1, 1},   {7, 13, 29}, {33, 17, 65}, {64, 64, 64}, {5, 300, 7},
    {1, 37, 19}, {23, 1, 19}, {0, 5, 3},    {4, 0, 3},    {3, 4, 0}};

OPTEST_TYPED_P(GemmTest, ShapesTransposesAndScalars) {
  std::mt19937 rng(1);
  for (auto &s : kGemmShapes)
    for (int t = 0; t < 4; ++t)
      checkGemm<T>(device, t & 1, t & 2, s[0], s[1], s[2], 1.0, 0.0, rng);
  for (int t = 0; t < 4; ++t) {
    checkGemm<T>(device, t & 1, t & 2, 1, 37, 19, 0.5, 2.0, rng);
    checkGemm<T>(device, t & 1, t & 2, 23, 1, 19, -1.0, 0.5, rng);
  }
  checkGemm<T>(device, false, false, 9, 11, 13, 0.5, -1.5, rng);
  checkGemm<T>(device, true, true, 9, 11, 13, -2.0, 1.0, rng);
  checkGemm<T>(device, false, true, 3, 4, 0, 1.0, 0.5, rng);  // K = 0: C = beta C.
  checkGemm<T>(device, false, false, 3, 4, 0, 1.0, 0.0, rng); // K = 0, beta 0: zeros.
}

/// CPU internal: the same scalar and shape cases through the GEMM helper with
/// padded leading dimensions (what the node cases cannot express).
template <typename T> void cpuGemmHelperCases() {
  std::mt19937 rng(1);
  for (auto &s : kGemmShapes) // beta 0: a NaN in C must not leak
    for (int t = 0; t < 4; ++t)
      checkCpuGemmHelper<T, T>(t & 1, t & 2, s[0], s[1], s[2], 1.0, 0.0, 0, rng);
  for (int t = 0; t < 4; ++t) {
    checkCpuGemmHelper<T, T>(t & 1, t & 2, 1, 37, 19, 0.5, 2.0, 3, rng);
    checkCpuGemmHelper<T, T>(t & 1, t & 2, 23, 1, 19, -1.0, 0.5, 2, rng);
  }
  checkCpuGemmHelper<T, T>(false, false, 9, 11, 13, 0.5, -1.5, 3, rng);
  checkCpuGemmHelper<T, T>(true, true, 9, 11, 13, -2.0, 1.0, 1, rng);
  checkCpuGemmHelper<T, T>(false, false, 3, 4, 0, 1.0, 0.0, 2, rng); // K = 0, beta 0: zeros.
}

TEST(CpuGemmHelperTest, LeadingDimensionsLeavePaddingAlone) {
  cpuGemmHelperCases<float>();
  cpuGemmHelperCases<Half>();
  cpuGemmHelperCases<BFloat16>();
  cpuGemmHelperCases<double>();
}

OPTEST_TYPED_P(GemmTest, BlockedPathsMatch) {
  std::mt19937 rng(2);
  // Large enough that the 16-bit path blocks over M and K, then N and K.
  checkGemm<T>(device, false, false, 2100, 20, 2100, 1.0, 0.0, rng);
  checkGemm<T>(device, true, true, 20, 2100, 2100, 1.0, 1.0, rng);
}

// CPU internal: 16-bit operands accumulated into an fp32 C (the helper the
// CPU's mixed-precision kernels call; no ONNX node has this signature).
TEST(CpuGemmHelperTest, HalfInputsFloatOutput) {
  std::mt19937 rng(3);
  checkCpuGemmHelper<Half, float>(false, false, 17, 19, 23, 1.0, 1.0, 0, rng);
  checkCpuGemmHelper<BFloat16, float>(true, false, 17, 19, 23, 1.0, 0.0, 2, rng);
  checkCpuGemmHelper<Half, float>(false, true, 20, 2100, 2100, 1.0, 0.0, 0, rng);
}

OPTEST_TYPED_P(GemmTest, BiasBroadcasts) {
  std::mt19937 rng(4);
  const int64_t m = 6, n = 10, k = 7;
  std::vector<T> a = randomVector<T>(m * k, rng),
                 b = randomVector<T>(k * n, rng);
  struct BiasCase {
    const char *name;
    int64_t rs, cs, size;
    std::vector<int64_t> shape;
  } cases[] = {{"[M,N]", n, 1, m * n, {m, n}},
               {"[N]", 0, 1, n, {n}},
               {"[M,1]", 1, 0, m, {m, 1}},
               {"[]", 0, 0, 1, {}}};
  for (const BiasCase &bc : cases) {
    SCOPED_TRACE(bc.name);
    std::vector<T> bias = randomVector<T>(size_t(bc.size), rng);
    std::vector<double> expected(size_t(m * n)), scale(size_t(m * n));
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
    OpTester t("Gemm", 13);
    t.attrFloat("alpha", 2.0f).attrFloat("beta", 0.5f);
    t.input({m, k}, a).input({k, n}, b).input(bc.shape, bias);
    EXPECT_TRUE(allClose(runOutput<T>(t, device), expected, scale));
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

OPTEST_TYPED_P(GemmTest, MatMulBroadcasting) {
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
    OpTester t("MatMul", 13);
    t.input(c[0], a).input(c[1], b);
    std::vector<HostTensor> out = runOrFail(t, device);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, refShape);
    EXPECT_TRUE(allClose(valuesOf<T>(out[0]), expected, scale));
  }
  // Mismatched inner dimensions, unbroadcastable batches, a scalar operand.
  const std::vector<int64_t> bad[][2] = {{{3, 4}, {5, 6}}, {{2, 3, 4}, {3, 4, 5}}, {{}, {4}}};
  for (auto &c : bad) {
    SCOPED_TRACE(shapeString(c[0]) + " x " + shapeString(c[1]));
    OpTester t("MatMul", 13);
    t.input(c[0], randomVector<T>(size_t(product(c[0])), rng))
        .input(c[1], randomVector<T>(size_t(product(c[1])), rng));
    auto out = t.run(device);
    ASSERT_FALSE(bool(out)) << "the shapes must be refused";
    std::string msg = llvm::toString(out.takeError());
    EXPECT_NE(msg.find("node 'node' (MatMul)"), std::string::npos) << msg;
  }
}

// The CPU shape helper behind MatMul's shape rule refuses the same shapes.
TEST(CpuMatMulShapeTest, RefusesBadShapes) {
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

/// Output spatial sizes from the ONNX definitions (written here, not the
/// CPU helpers): conv floor((in + pads - d (k - 1) - 1) / s) + 1, transposed
/// s (in - 1) + output_padding + d (k - 1) + 1 - pads.
std::vector<int64_t> outDimsOf(const ConvCase &cc, bool transposed) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < cc.in.size(); ++i) {
    int64_t span = cc.d[i] * (cc.k[i] - 1) + 1;
    if (transposed)
      out.push_back(cc.s[i] * (cc.in[i] - 1) + (cc.outPad.empty() ? 0 : cc.outPad[i]) + span -
                    cc.pb[i] - cc.pe[i]);
    else
      out.push_back((cc.in[i] + cc.pb[i] + cc.pe[i] - span) / cc.s[i] + 1);
  }
  return out;
}

/// The Conv or ConvTranspose node of a case, with its inputs.
template <typename T>
OpTester convNode(const ConvCase &cc, bool transposed, const std::vector<T> &x,
                  const std::vector<T> &w, const std::vector<T> &bias) {
  OpTester t(transposed ? "ConvTranspose" : "Conv", 11);
  std::vector<int64_t> pads = cc.pb;
  pads.insert(pads.end(), cc.pe.begin(), cc.pe.end());
  t.attrInt("group", cc.group).attrInts("kernel_shape", cc.k).attrInts("strides", cc.s);
  t.attrInts("dilations", cc.d).attrInts("pads", pads);
  if (transposed && !cc.outPad.empty())
    t.attrInts("output_padding", cc.outPad);
  std::vector<int64_t> xShape{cc.n, cc.c}, wShape{transposed ? cc.c : cc.m,
                                                  transposed ? cc.m / cc.group : cc.c / cc.group};
  xShape.insert(xShape.end(), cc.in.begin(), cc.in.end());
  wShape.insert(wShape.end(), cc.k.begin(), cc.k.end());
  t.input(xShape, x).input(wShape, w);
  if (cc.bias)
    t.input({cc.m}, bias);
  return t;
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
    // The end pad is never read: SAME_LOWER's pads, which cuDNN's symmetric
    // pad 1 runs (ConvPlan.h).
    {"begin-pad-only", 2, 3, 4, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, true},
    // End pads cuDNN's symmetric pad cannot express: the CUDA backend pads X
    // explicitly (ConvPlan.h: explicitlyPadded).
    {"end-pads-only", 1, 2, 3, 1, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {2, 1}, true},
    {"1d-asym-dilated", 2, 2, 3, 1, {11}, {3}, {2}, {2}, {0}, {3}, true},
    // A long 1-D row (over 1024 outputs per channel) and a grouped 3-D case.
    {"long-1d", 1, 3, 5, 1, {2000}, {7}, {1}, {1}, {3}, {3}, true},
    {"3d-groups-strided",
     2,
     4,
     6,
     2,
     {6, 7, 5},
     {3, 3, 2},
     {2, 1, 2},
     {1, 2, 1},
     {1, 2, 0},
     {1, 2, 0},
     true},
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

/// The tolerance scale of a Conv or ConvTranspose output (the sum of |terms|
/// and |bias| per element). On a device, cuDNN writes the convolution to Y
/// in Y's type and then adds the bias (cudnnAddTensor, ConvOps.cpp), so a
/// 16-bit output is rounded twice: the unbiased sum first, an error of up to
/// u * |sum| (u the unit roundoff, 2^-11 for f16 and 2^-8 for bf16, half of
/// the type's rtol), then the final rounding that rtol covers. The CPU adds
/// the bias before its one rounding. Seen on an H200 (docs/gpu-report.md,
/// 2026-11-26, fifteenth session): only the cases with a bias failed.
template <typename T>
std::vector<double> convScale(std::vector<double> scale, const ConvCase &cc, int64_t outSize,
                              const std::vector<T> &bias, llvm::StringRef device) {
  if (device == "cpu" || !cc.bias || sizeof(T) != 2)
    return scale;
  const test::Tolerance tol = TypeTraits<T>::kTol;
  for (size_t i = 0; i < scale.size(); ++i) {
    double b = std::fabs(toDouble(bias[size_t((int64_t(i) / outSize) % cc.m)]));
    scale[i] += (scale[i] - b) * (tol.rtol / 2) / tol.accum;
  }
  return scale;
}

OPTEST_TYPED_P(ConvTest, ConvMatchesNaiveLoops) {
  std::mt19937 rng(6);
  for (const ConvCase &cc : kConvCases) {
    SCOPED_TRACE(cc.name);
    std::vector<int64_t> outDims = outDimsOf(cc, false);
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
    EXPECT_TRUE(allClose(runOutput<T>(convNode(cc, false, x, w, bias), device), expected,
                         convScale(scale, cc, outSize, bias, device)));
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
    // Pads and a 3-D group case with output_padding.
    {"3d-groups-outpad",
     1,
     4,
     6,
     2,
     {3, 4, 2},
     {3, 2, 3},
     {2, 2, 1},
     {1, 1, 2},
     {1, 0, 1},
     {1, 0, 1},
     true,
     {1, 1, 0}},
};

OPTEST_TYPED_P(ConvTest, ConvTransposeMatchesNaiveLoops) {
  std::mt19937 rng(7);
  for (const ConvCase &cc : kConvTransposeCases) {
    SCOPED_TRACE(cc.name);
    std::vector<int64_t> outDims = outDimsOf(cc, true);
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
    EXPECT_TRUE(allClose(runOutput<T>(convNode(cc, true, x, w, bias), device), expected,
                         convScale(scale, cc, outSize, bias, device)));
  }
}

// CPU internal: the window-size and auto_pad helpers of the CPU shape rules
// (pure functions of sizes; the node cases above check sizes end to end).
TEST(CpuConvShapeTest, OutputSizesAndAutoPad) {
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
