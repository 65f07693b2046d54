//===- GemmPlanTest.cpp - cuBLASLt layouts of row-major matrix products ---===//
//
// The CUDA backend's GEMM plans, checked without a GPU: each plan is executed
// by an emulator of what cublasLtMatmul computes (column-major layouts with
// leading dimensions, optional transposes, strided batches, one call per
// offset triple), and the result is compared with a direct row-major
// numpy-style broadcast matrix product computed from the shapes alone. Both
// sum over k in the same order in double, so they must agree exactly. The
// emulator also checks what cuBLASLt requires of a layout (ld >= rows, every
// access inside the buffer) and that each result element is written once.
//
//===----------------------------------------------------------------------===//
#include "LtEmulator.h"
#include "mpc/Runtime/Cuda/GemmPlan.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

int64_t product(const std::vector<int64_t> &s, size_t from = 0, size_t to = ~size_t(0)) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i)
    p *= s[i];
  return p;
}

/// numpy.matmul of row-major tensors (with ONNX Gemm's transposes), computed
/// element by element from the shapes. Returns the result shape in `shape`.
std::vector<double> referenceMatmul(const std::vector<double> &a, std::vector<int64_t> as,
                                    bool ta, const std::vector<double> &b,
                                    std::vector<int64_t> bs, bool tb,
                                    std::vector<int64_t> &shape) {
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  size_t ar = as.size(), br = bs.size();
  int64_t m = ta ? as[ar - 1] : as[ar - 2], k = ta ? as[ar - 2] : as[ar - 1];
  int64_t n = tb ? bs[br - 2] : bs[br - 1];
  size_t rank = std::max(ar, br) - 2;
  std::vector<int64_t> batch(rank);
  auto dimOf = [&](const std::vector<int64_t> &s, size_t i) {
    size_t lead = rank - (s.size() - 2);
    return i < lead ? int64_t(1) : s[i - lead];
  };
  for (size_t i = 0; i < rank; ++i)
    batch[i] = std::max(dimOf(as, i), dimOf(bs, i));
  shape = batch;
  if (!aVec)
    shape.push_back(m);
  if (!bVec)
    shape.push_back(n);
  std::vector<double> out(product(batch) * m * n);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t flat = 0; flat < product(batch); ++flat) {
    int64_t rem = flat;
    for (size_t i = rank; i-- > 0;) {
      idx[i] = rem % batch[i];
      rem /= batch[i];
    }
    // The operand's own matrix index: its axes, broadcast ones at index 0.
    auto matrixOf = [&](const std::vector<int64_t> &s) {
      int64_t mi = 0;
      size_t lead = rank - (s.size() - 2);
      for (size_t i = lead; i < rank; ++i)
        mi = mi * s[i - lead] + (s[i - lead] == 1 ? 0 : idx[i]);
      return mi;
    };
    const double *am = a.data() + matrixOf(as) * m * k;
    const double *bm = b.data() + matrixOf(bs) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += (ta ? am[p * m + i] : am[i * k + p]) * (tb ? bm[j * k + p] : bm[p * n + j]);
        out[(flat * m + i) * n + j] = sum;
      }
  }
  return out;
}

std::vector<double> randomData(int64_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> v(-8, 8);
  std::vector<double> x(n);
  for (double &e : x)
    e = v(rng) / 4.0;
  return x;
}

/// Plans, emulates and compares one product; returns the plan.
MatmulPlan check(const std::vector<int64_t> &as, bool ta, const std::vector<int64_t> &bs,
                 bool tb, std::mt19937 &rng) {
  std::string what = "A " + std::to_string(as.size()) + "-D, B " +
                     std::to_string(bs.size()) + "-D";
  SCOPED_TRACE(what);
  llvm::Expected<MatmulPlan> plan = planMatmul({as, bs, ta, tb, 2});
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return {};
  }
  std::vector<double> a = randomData(product(as), rng), b = randomData(product(bs), rng);
  std::vector<int64_t> shape;
  std::vector<double> want = referenceMatmul(a, as, ta, b, bs, tb, shape);
  EXPECT_EQ(plan->outShape, shape);
  std::vector<double> got = emulate(plan->gemm, a, b, want.size());
  EXPECT_EQ(got, want);
  return std::move(*plan);
}

TEST(GemmPlan, DenseTwoDimensionalProductsAllTransposes) {
  std::mt19937 rng(1);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      MatmulPlan p = check(ta ? std::vector<int64_t>{5, 3} : std::vector<int64_t>{3, 5}, ta,
                           tb ? std::vector<int64_t>{4, 5} : std::vector<int64_t>{5, 4}, tb, rng);
      // Operands swapped: cuBLASLt's m is the user's N.
      EXPECT_EQ(p.gemm.m, 4);
      EXPECT_EQ(p.gemm.n, 3);
      EXPECT_EQ(p.gemm.k, 5);
      EXPECT_EQ(p.gemm.a.trans, tb);
      EXPECT_EQ(p.gemm.b.trans, ta);
      EXPECT_EQ(p.gemm.offsets.size(), 1u);
    }
}

TEST(GemmPlan, SharedWeightsFoldTheBatchIntoOneGemm) {
  std::mt19937 rng(2);
  // [2, 3, 4, 5] x [5, 6]: a Linear layer over a [batch, seq] input.
  MatmulPlan p = check({2, 3, 4, 5}, false, {5, 6}, false, rng);
  EXPECT_EQ(p.gemm.n, 24);
  EXPECT_EQ(p.gemm.batchCount, 1);
  EXPECT_EQ(p.gemm.offsets.size(), 1u);
  // Size-1 batch axes of B count as shared.
  p = check({2, 3, 4, 5}, false, {1, 1, 5, 6}, false, rng);
  EXPECT_EQ(p.gemm.n, 24);
  // A transposed cannot fold: one strided batch instead.
  p = check({6, 5, 4}, true, {5, 3}, false, rng);
  EXPECT_EQ(p.gemm.batchCount, 6);
  EXPECT_EQ(p.gemm.a.batchStride, 0);
  EXPECT_EQ(p.gemm.b.batchStride, 20);
}

TEST(GemmPlan, BatchedAndBroadcastBatches) {
  std::mt19937 rng(3);
  MatmulPlan p = check({3, 2, 4, 5}, false, {3, 2, 5, 6}, false, rng);
  EXPECT_EQ(p.gemm.batchCount, 6); // both axes chain into one strided batch
  EXPECT_EQ(p.gemm.offsets.size(), 1u);
  EXPECT_EQ(p.gemm.a.batchStride, 30);
  EXPECT_EQ(p.gemm.b.batchStride, 20);
  EXPECT_EQ(p.gemm.d.batchStride, 24);
  // A shared, B batched: attention's K^T-like operand broadcast the other way.
  p = check({4, 5}, false, {7, 5, 2}, false, rng);
  EXPECT_EQ(p.gemm.batchCount, 7);
  EXPECT_EQ(p.gemm.b.batchStride, 0);
  // [2, 1] against [1, 5] batches: no single stride walks both axes, so the
  // outer axis becomes separate calls.
  p = check({2, 1, 3, 4}, false, {1, 5, 4, 2}, false, rng);
  EXPECT_EQ(p.gemm.batchCount, 5);
  EXPECT_EQ(p.gemm.offsets.size(), 2u);
  // Ranks differ and a middle axis broadcasts.
  check({2, 3, 1, 4, 5}, true, {3, 7, 4, 5}, false, rng);
  check({5}, false, {2, 3, 5, 4}, false, rng);
  check({2, 3, 4, 5}, false, {5}, false, rng);
  check({5}, false, {5}, false, rng);
}

TEST(GemmPlan, RandomShapesMatchTheReference) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> rankDist(1, 4), dimDist(1, 4), coin(0, 3);
  for (int trial = 0; trial < 400; ++trial) {
    int ra = rankDist(rng), rb = rankDist(rng);
    int64_t m = dimDist(rng), n = dimDist(rng), k = dimDist(rng);
    int batchRank = std::max(ra, rb) - 2;
    std::vector<int64_t> batch;
    for (int i = 0; i < batchRank; ++i)
      batch.push_back(dimDist(rng));
    auto operand = [&](int rank, int64_t rows, int64_t cols, bool trans) {
      std::vector<int64_t> s;
      for (int i = batchRank - (rank - 2); i < batchRank; ++i)
        s.push_back(coin(rng) == 0 ? 1 : batch[i]); // sometimes broadcast
      if (trans)
        std::swap(rows, cols);
      s.push_back(rows);
      s.push_back(cols);
      return s;
    };
    bool ta = ra > 1 && coin(rng) == 0, tb = rb > 1 && coin(rng) == 0;
    std::vector<int64_t> as = ra == 1 ? std::vector<int64_t>{k} : operand(ra, m, k, ta);
    std::vector<int64_t> bs = rb == 1 ? std::vector<int64_t>{k} : operand(rb, k, n, tb);
    SCOPED_TRACE("trial " + std::to_string(trial));
    check(as, ta, bs, tb, rng);
  }
}

TEST(GemmPlan, EmptyResultsPlanNoCall) {
  llvm::Expected<MatmulPlan> p = planMatmul({{0, 3, 4}, {4, 5}, false, false, 2});
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->outShape, (std::vector<int64_t>{0, 3, 5}));
  EXPECT_TRUE(p->gemm.offsets.empty());
  p = planMatmul({{3, 0}, {0, 5}, false, false, 2}); // K = 0: the caller fills zeros
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->gemm.k, 0);
  EXPECT_EQ(p->outShape, (std::vector<int64_t>{3, 5}));
}

TEST(GemmPlan, AlignmentPreferencesFollowTheBatchStrides) {
  // fp16 [3, 5, 7] x [3, 7, 2]: matrices 70, 28 and 20 bytes apart.
  llvm::Expected<MatmulPlan> p = planMatmul({{3, 5, 7}, {3, 7, 2}, false, false, 2});
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->gemm.b.alignment, 2u);
  EXPECT_EQ(p->gemm.a.alignment, 4u);
  EXPECT_EQ(p->gemm.d.alignment, 4u);
  // Multiples of 8 elements keep full alignment; a single matrix is aligned.
  p = planMatmul({{4, 64, 64}, {4, 64, 64}, false, false, 2});
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->gemm.a.alignment, 256u);
  EXPECT_EQ(p->gemm.b.alignment, 256u);
  p = planMatmul({{3, 5}, {5, 3}, false, false, 4});
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->gemm.a.alignment, 256u);
  // Outer calls start at offsets too: [2, 1, 3, 4] x [1, 5, 4, 2] in fp32
  // makes its second call 48 bytes into A.
  p = planMatmul({{2, 1, 3, 4}, {1, 5, 4, 2}, false, false, 4});
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->gemm.b.alignment, 16u);
}

TEST(GemmPlan, BadShapesAreOneClearError) {
  auto message = [](MatmulProblem p) {
    llvm::Expected<MatmulPlan> plan = planMatmul(p);
    return plan ? std::string("ok") : llvm::toString(plan.takeError());
  };
  EXPECT_EQ(message({{3, 4}, {5, 6}, false, false, 2}),
            "matrix product of [3, 4] and [5, 6]: inner sizes differ (4 and 5)");
  EXPECT_EQ(message({{2, 3, 4}, {3, 4, 5}, false, false, 2}),
            "matrix product of [2, 3, 4] and [3, 4, 5]: batch axes do not broadcast (2 and 3)");
  EXPECT_EQ(message({{}, {3}, false, false, 2}),
            "matrix product of [] and [3]: an operand is a scalar (rank 0)");
  EXPECT_EQ(message({{4}, {4, 2}, true, false, 2}),
            "matrix product of [4] (transposed) and [4, 2]: a 1-D operand cannot be transposed");
  EXPECT_EQ(message({{3, -1}, {4, 2}, false, false, 2}),
            "matrix product of [3, -1] and [4, 2]: a dimension is negative");
}

TEST(GemmPlan, GemmBiasChoices) {
  auto bias = [](int64_t m, int64_t n, bool hasC, std::vector<int64_t> c, float beta) {
    llvm::Expected<GemmBias> b = planGemmBias(m, n, hasC, c, beta);
    if (!b)
      return std::string(llvm::toString(b.takeError()));
    switch (*b) {
    case GemmBias::None: return std::string("none");
    case GemmBias::Epilogue: return std::string("epilogue");
    case GemmBias::Matrix: return std::string("matrix");
    case GemmBias::ExpandToD: return std::string("expand");
    }
    return std::string("?");
  };
  EXPECT_EQ(bias(3, 4, false, {}, 1.0f), "none");
  EXPECT_EQ(bias(3, 4, true, {4}, 0.0f), "none");
  EXPECT_EQ(bias(3, 4, true, {4}, 1.0f), "epilogue");
  EXPECT_EQ(bias(3, 4, true, {1, 4}, 1.0f), "epilogue");
  EXPECT_EQ(bias(3, 4, true, {4}, 0.5f), "expand"); // the epilogue cannot scale
  EXPECT_EQ(bias(3, 4, true, {3, 4}, 0.5f), "matrix");
  EXPECT_EQ(bias(1, 4, true, {4}, 0.5f), "matrix"); // [4] is the whole 1 x 4 result
  EXPECT_EQ(bias(3, 4, true, {3, 1}, 1.0f), "expand");
  EXPECT_EQ(bias(3, 4, true, {}, 1.0f), "expand");
  EXPECT_EQ(bias(3, 4, true, {1}, 1.0f), "expand");
  EXPECT_EQ(bias(3, 4, true, {2, 4}, 1.0f), "Gemm bias of shape [2, 4] does not broadcast to [3, 4]");
  EXPECT_EQ(bias(3, 4, true, {1, 3, 4}, 1.0f), "Gemm bias of shape [1, 3, 4] has more than 2 axes");
}

} // namespace

//===----------------------------------------------------------------------===//
// FusedMatMul's transBatchA/transBatchB (planFusedMatmul)
//===----------------------------------------------------------------------===//

namespace {

/// Stored X [R, b..., C] rearranged, element by element, into the dense
/// [b..., R, C] tensor whose batch entry i is the matrix transBatch reads:
/// entry (i, r, c) is stored at r * (numel(b) * C) + i * C + c.
std::vector<double> denseFromTransBatch(const std::vector<double> &x,
                                        const std::vector<int64_t> &stored,
                                        std::vector<int64_t> &dense) {
  int64_t rows = stored.front(), cols = stored.back();
  int64_t batch = product(stored, 1, stored.size() - 1);
  dense.assign(stored.begin() + 1, stored.end() - 1);
  dense.push_back(rows);
  dense.push_back(cols);
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[(i * rows + r) * cols + c] = x[r * batch * cols + i * cols + c];
  return out;
}

/// Plans, emulates and compares one FusedMatMul product with the reference
/// of its operands rearranged by denseFromTransBatch.
MatmulPlan checkFused(const std::vector<int64_t> &as, bool ta, bool tba,
                      const std::vector<int64_t> &bs, bool tb, bool tbb, unsigned bytes,
                      std::mt19937 &rng) {
  llvm::Expected<MatmulPlan> plan = planFusedMatmul({as, bs, ta, tb, tba, tbb, bytes});
  if (!plan) {
    ADD_FAILURE() << llvm::toString(plan.takeError());
    return {};
  }
  std::vector<double> a = randomData(product(as), rng), b = randomData(product(bs), rng);
  std::vector<int64_t> da = as, db = bs, shape;
  std::vector<double> ad = tba ? denseFromTransBatch(a, as, da) : a;
  std::vector<double> bd = tbb ? denseFromTransBatch(b, bs, db) : b;
  std::vector<double> want = referenceMatmul(ad, da, ta, bd, db, tb, shape);
  EXPECT_EQ(plan->outShape, shape);
  EXPECT_EQ(emulate(plan->gemm, a, b, want.size()), want);
  return std::move(*plan);
}

} // namespace

TEST(GemmPlan, TransBatchIsAStridedBatchWithoutACopy) {
  std::mt19937 rng(11);
  // A [M=3, b=4, K=5] with transBatchA: matrix i starts i * K elements in,
  // its rows b * K apart; B [4, 5, 2] dense.
  MatmulPlan p = checkFused({3, 4, 5}, false, true, {4, 5, 2}, false, false, 4, rng);
  EXPECT_EQ(p.gemm.batchCount, 4);
  ASSERT_EQ(p.gemm.offsets.size(), 1u);
  EXPECT_EQ(p.gemm.b.ld, 20);
  EXPECT_EQ(p.gemm.b.batchStride, 5);
  EXPECT_FALSE(p.gemm.b.trans);
  EXPECT_EQ(p.gemm.b.alignment, 4u); // 20 bytes apart in fp32
  // B [N=6, b=4, K=5] with transBatchB and transB: matrix i is [6, 5]
  // transposed; A [4, 3, 5].
  p = checkFused({4, 3, 5}, false, false, {6, 4, 5}, true, true, 2, rng);
  EXPECT_EQ(p.gemm.a.ld, 20);
  EXPECT_EQ(p.gemm.a.batchStride, 5);
  EXPECT_TRUE(p.gemm.a.trans);
  // A shared by the batch (b = 1 ... broadcast against B's) with transBatchA:
  // never folded into the rows of one GEMM.
  p = checkFused({3, 1, 5}, false, true, {4, 5, 2}, false, false, 2, rng);
  EXPECT_EQ(p.gemm.b.batchStride, 0);
  checkFused({3, 2, 5}, false, true, {1, 5, 2}, false, false, 2, rng);
}

TEST(GemmPlan, TransBatchRandomShapesMatchTheIndexMapping) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> rankDist(3, 5), dimDist(1, 4), coin(0, 3);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int rank = rankDist(rng);
    int64_t m = dimDist(rng), n = dimDist(rng), k = dimDist(rng);
    std::vector<int64_t> batch;
    for (int i = 0; i < rank - 2; ++i)
      batch.push_back(dimDist(rng));
    bool ta = coin(rng) < 2, tb = coin(rng) < 2, tba = coin(rng) < 2, tbb = coin(rng) < 2;
    if (!tba && !tbb)
      (coin(rng) < 2 ? tba : tbb) = true;
    // op(X) is rows x cols after the transpose; stored before it, with the
    // rows axis first under transBatch.
    auto operand = [&](int64_t rows, int64_t cols, bool trans, bool transBatch) {
      if (trans)
        std::swap(rows, cols);
      std::vector<int64_t> s;
      for (int64_t d : batch)
        s.push_back(coin(rng) == 0 ? 1 : d); // sometimes broadcast
      if (transBatch)
        s.insert(s.begin(), rows);
      else
        s.push_back(rows);
      s.push_back(cols);
      return s;
    };
    std::vector<int64_t> as = operand(m, k, ta, tba), bs = operand(k, n, tb, tbb);
    SCOPED_TRACE("trial " + std::to_string(trial));
    checkFused(as, ta, tba, bs, tb, tbb, 2, rng);
    ++checked;
  }
  EXPECT_EQ(checked, 400);
}

TEST(GemmPlan, TransBatchNeedsOneRankOfThreeOrMore) {
  llvm::Expected<MatmulPlan> p = planFusedMatmul({{3, 4}, {4, 2}, false, false, true, false, 2});
  ASSERT_FALSE(bool(p));
  EXPECT_EQ(llvm::toString(p.takeError()),
            "FusedMatMul of [3, 4] and [4, 2] (transA 0, transB 0, transBatchA 1, "
            "transBatchB 0): transBatchA/transBatchB need A and B of one rank, 3 or more");
  p = planFusedMatmul({{3, 2, 4}, {2, 5, 2}, false, false, true, false, 2});
  ASSERT_FALSE(bool(p));
  EXPECT_EQ(llvm::toString(p.takeError()),
            "FusedMatMul of [3, 2, 4] and [2, 5, 2] (transA 0, transB 0, transBatchA 1, "
            "transBatchB 0): inner sizes differ (4 and 5)");
}
namespace {

/// A GemmBiasAct plan in words: the epilogue, D's type, the extra passes and
/// the workspace regions, or the planner's error. A bias type of 0: no bias;
/// biasGradOf: the bias_grad output's operand (-1 none, 0 A, 1 B).
std::string epilogue(int32_t a, int32_t y, int32_t bias, EpilogueAct act, int64_t m, int64_t n,
                     int64_t biasElements, int8_t biasGradOf = -1) {
  EpilogueProblem p;
  p.biasGradOf = biasGradOf;
  p.aType = a;
  p.yType = y;
  p.hasBias = bias != 0;
  p.biasType = bias;
  p.act = act;
  p.m = m;
  p.n = n;
  p.biasElements = biasElements;
  llvm::Expected<EpiloguePlan> plan = planGemmEpilogue(p);
  if (!plan)
    return llvm::toString(plan.takeError());
  const char *names[] = {"BIAS", "RELU_BIAS", "GELU_BIAS", "DEFAULT", "RELU", "GELU",
                         "BGRADA", "BGRADB"};
  std::string s = std::string(names[int(plan->epilogue)]) + " D=" + std::to_string(plan->dType);
  if (plan->separateGelu)
    s += " +gelu";
  if (plan->castBias)
    s += " castBias@" + std::to_string(plan->biasOffset);
  if (plan->stageD)
    s += " stageD@" + std::to_string(plan->dOffset);
  return s + " extra=" + std::to_string(plan->extraBytes);
}

TEST(GemmPlan, EpilogueChoices) {
  const int32_t F32 = 1, F16 = 10, BF16 = 16;
  // Same types: the epilogue alone; ReLU and GELU's tanh form are cuBLASLt's.
  EXPECT_EQ(epilogue(F16, F16, F16, EpilogueAct::None, 8, 64, 64), "BIAS D=10 extra=0");
  EXPECT_EQ(epilogue(F16, F16, F16, EpilogueAct::Relu, 8, 64, 64), "RELU_BIAS D=10 extra=0");
  EXPECT_EQ(epilogue(BF16, BF16, BF16, EpilogueAct::GeluTanh, 8, 64, 64),
            "GELU_BIAS D=16 extra=0");
  // The erf form: the bias epilogue, then the element-wise Gelu over D.
  EXPECT_EQ(epilogue(F16, F16, F16, EpilogueAct::Gelu, 8, 64, 64), "BIAS D=10 +gelu extra=0");
  EXPECT_EQ(epilogue(F32, F32, F32, EpilogueAct::Relu, 8, 64, 64), "RELU_BIAS D=1 extra=0");
  // A folded Cast to float32: D is float32 (the free output conversion); a
  // bias of the operands' type is cast once to D's type (64 floats: 256 B).
  EXPECT_EQ(epilogue(F16, F32, F32, EpilogueAct::None, 8, 64, 64), "BIAS D=1 extra=0");
  EXPECT_EQ(epilogue(F16, F32, F16, EpilogueAct::Relu, 8, 64, 64),
            "RELU_BIAS D=1 castBias@0 extra=256");
  EXPECT_EQ(epilogue(BF16, F32, BF16, EpilogueAct::None, 3, 65, 65),
            "BIAS D=1 castBias@0 extra=512");
  // float32 operands with a 16-bit Y: D staged in float32, one cast pass;
  // a float32 bias is D's type, a 16-bit one is cast first.
  EXPECT_EQ(epilogue(F32, F16, F32, EpilogueAct::None, 8, 64, 64), "BIAS D=1 stageD@0 extra=2048");
  EXPECT_EQ(epilogue(F32, BF16, BF16, EpilogueAct::Gelu, 3, 10, 10),
            "BIAS D=1 +gelu castBias@0 stageD@256 extra=512");
  // No bias (a weight gradient's GEMM into float32): the epilogues without
  // one; the bias type and length are not read.
  EXPECT_EQ(epilogue(F16, F32, 0, EpilogueAct::None, 768, 3072, 0), "DEFAULT D=1 extra=0");
  EXPECT_EQ(epilogue(BF16, F32, 0, EpilogueAct::None, 8, 64, 5), "DEFAULT D=1 extra=0");
  EXPECT_EQ(epilogue(F16, F16, 0, EpilogueAct::Relu, 8, 64, 0), "RELU D=10 extra=0");
  EXPECT_EQ(epilogue(BF16, BF16, 0, EpilogueAct::GeluTanh, 8, 64, 0), "GELU D=16 extra=0");
  EXPECT_EQ(epilogue(F16, F16, 0, EpilogueAct::Gelu, 8, 64, 0), "DEFAULT D=10 +gelu extra=0");
  EXPECT_EQ(epilogue(F32, F16, 0, EpilogueAct::Relu, 8, 64, 0),
            "RELU D=1 stageD@0 extra=2048");
  EXPECT_EQ(epilogue(F16, BF16, 0, EpilogueAct::None, 8, 64, 0),
            "GemmBiasAct output of bfloat16 for float16 operands");
  // A bias gradient with the product: the node's B is cuBLASLt's A (the
  // row-major product is planned transposed), so B's sum over k is BGRADA and
  // A's is BGRADB; D is Y's type (float32 for a folded Cast).
  EXPECT_EQ(epilogue(F16, F32, 0, EpilogueAct::None, 768, 3072, 0, 1), "BGRADA D=1 extra=0");
  EXPECT_EQ(epilogue(BF16, F32, 0, EpilogueAct::None, 768, 768, 0, 0), "BGRADB D=1 extra=0");
  EXPECT_EQ(epilogue(F32, F32, 0, EpilogueAct::None, 8, 64, 0, 1), "BGRADA D=1 extra=0");
  EXPECT_EQ(epilogue(F16, F16, 0, EpilogueAct::None, 8, 64, 0, 0), "BGRADB D=10 extra=0");
  EXPECT_EQ(epilogue(F16, F32, F16, EpilogueAct::None, 8, 64, 64, 1),
            "GemmBiasAct bias_grad with a bias or an activation");
  EXPECT_EQ(epilogue(F16, F16, 0, EpilogueAct::Relu, 8, 64, 0, 1),
            "GemmBiasAct bias_grad with a bias or an activation");
  EXPECT_EQ(epilogue(F32, F16, 0, EpilogueAct::None, 8, 64, 0, 1),
            "GemmBiasAct bias_grad of float16 for float32 operands (D would be staged)");
  // Refusals name what is wrong.
  EXPECT_EQ(epilogue(F16, BF16, F16, EpilogueAct::None, 8, 64, 64),
            "GemmBiasAct output of bfloat16 for float16 operands");
  EXPECT_EQ(epilogue(F16, F16, BF16, EpilogueAct::None, 8, 64, 64),
            "GemmBiasAct bias of bfloat16 for float16 operands and a float16 output");
  EXPECT_EQ(epilogue(11, 11, 11, EpilogueAct::None, 8, 64, 64),
            "GemmBiasAct operands of an unsupported type");
  EXPECT_EQ(epilogue(F16, F16, F16, EpilogueAct::None, 8, 64, 63),
            "GemmBiasAct bias of 63 elements for N = 64");
}

} // namespace
