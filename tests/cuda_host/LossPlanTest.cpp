//===- LossPlanTest.cpp - The loss launchers' host decisions ----------------===//
//
// LossPlan.h (how SoftmaxCrossEntropyLoss and its kin are split into rows
// and a finishing block, and the scratch they ask for) and the rows of this
// family in the CUDA kernel table (which operand types the losses, Clip and
// BatchNormalizationGrad take), without a GPU.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/LossPlan.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

LossPlan plan(std::vector<int64_t> dims, LossLaunch what = LossLaunch::Loss, bool reduced = true,
              bool *ok = nullptr) {
  LossPlan p;
  bool r = planLoss(dims.data(), dims.size(), what, reduced, 4, p);
  if (ok)
    *ok = r;
  else
    EXPECT_TRUE(r);
  return p;
}

TEST(LossPlan, ScoresAreBatchClassesInner) {
  LossPlan p = plan({8, 5});
  EXPECT_EQ(p.shape.outer, 8);
  EXPECT_EQ(p.shape.axisDim, 5);
  EXPECT_EQ(p.shape.inner, 1);
  // [N, C, d1, d2]: a position per (n, d1, d2), classes at stride d1 * d2.
  p = plan({2, 3, 4, 5});
  EXPECT_EQ(p.shape.outer, 2);
  EXPECT_EQ(p.shape.axisDim, 3);
  EXPECT_EQ(p.shape.inner, 20);
  EXPECT_EQ(p.shape.slices(), 40);
}

TEST(LossPlan, RowsAreBlocksForContiguousClassesAndThreadsOtherwise) {
  LossPlan p = plan({6, 3000});
  EXPECT_TRUE(p.rows.cooperative);
  EXPECT_EQ(p.rows.blocks, 6u);
  EXPECT_EQ(p.rows.threads, 1024u); // C > 1024: each thread folds several classes
  p = plan({6, 33});
  EXPECT_EQ(p.rows.threads, 64u);
  p = plan({2, 3, 7});
  EXPECT_FALSE(p.rows.cooperative);
  EXPECT_EQ(int64_t(p.rows.blocks) * p.rows.threads >= 1, true);
}

TEST(LossPlan, FinishingBlockCoversThePositions) {
  EXPECT_EQ(plan({1, 4}).finishThreads, 32u);
  EXPECT_EQ(plan({100, 4}).finishThreads, 128u);
  EXPECT_EQ(plan({5000, 4}).finishThreads, 1024u);
  EXPECT_EQ(plan({0, 4}).finishThreads, 32u); // an empty batch still writes Sum/Mean
  EXPECT_EQ(plan({0, 4}).rows.blocks, 0u);
}

TEST(LossPlan, WorkspaceHoldsLossesAndWeightsOnlyWhenReduced) {
  EXPECT_EQ(plan({8, 5}, LossLaunch::Loss, false).workspaceBytes, 0u);
  EXPECT_EQ(lossWeightOffset(8), 64);
  EXPECT_EQ(lossWeightOffset(64), 64);
  EXPECT_EQ(lossWeightOffset(65), 128);
  EXPECT_EQ(lossWeightOffset(0), 0);
  // 8 losses padded to 64 floats (256 bytes), then 8 weights.
  EXPECT_EQ(plan({8, 5}).workspaceBytes, (64 + 8) * sizeof(float));
  EXPECT_EQ(plan({2, 5, 40}).workspaceBytes, (128 + 80) * sizeof(float));
  // The gradient's scale.
  EXPECT_EQ(plan({8, 5}, LossLaunch::LossGrad, true).workspaceBytes, sizeof(float));
  EXPECT_EQ(plan({8, 5}, LossLaunch::LossGrad, false).workspaceBytes, 0u);
}

TEST(LossPlan, RefusesWhatTheLaunchersCannotTake) {
  bool ok = true;
  plan({8}, LossLaunch::Loss, true, &ok);
  EXPECT_FALSE(ok); // rank 1
  plan({8, 0}, LossLaunch::Loss, true, &ok);
  EXPECT_FALSE(ok); // no class
  plan({int64_t(1) << 16, 2, int64_t(1) << 16}, LossLaunch::Loss, true, &ok);
  EXPECT_FALSE(ok); // 2^32 labels: the error record's index is 32 bits
  plan({int64_t(1) << 15, 2, int64_t(1) << 15}, LossLaunch::Loss, true, &ok);
  EXPECT_TRUE(ok);
}

/// One node with typed inputs in an opset-21 model with the training domain.
struct LossRows : ModelFixture {
  Node *node(const char *op, const char *domain, std::vector<DType> ins) {
    if (*domain && m.opsets.size() == 1)
      m.opsets.push_back({domain, 1});
    Node *n = g->createNode(op);
    n->name = op;
    n->domain = domain;
    int i = 0;
    for (DType t : ins)
      n->addInput(g->addInput(std::string(op) + std::to_string(i++), Type::tensor(t, {2, 8})));
    n->setOutput(0, std::string(op) + "_out", Type::tensor(ins[0], {}));
    return n;
  }
};

TEST_F(LossRows, TakeFloatScoresAndIntegerLabels) {
  for (const char *op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    SCOPED_TRACE(op);
    Node *n = node(op, "", {DType::F16, DType::I64, DType::F16});
    ASSERT_NE(findCudaKernel(*n), nullptr);
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      EXPECT_TRUE(cudaRuns(*n, {t, DType::I64, t}));
      EXPECT_TRUE(cudaRuns(*n, {t, DType::I32}));
      EXPECT_TRUE(cudaRuns(*n, {t, DType::I32, DType::Undefined}));
    }
    EXPECT_FALSE(cudaRuns(*n, {DType::F64, DType::I64}));         // no f64 launcher
    EXPECT_FALSE(cudaRuns(*n, {DType::F32, DType::F32}));         // labels
    EXPECT_FALSE(cudaRuns(*n, {DType::F16, DType::I64, DType::F32})); // weights' type
  }
  Node *g = node("SoftmaxCrossEntropyLossGrad", "ai.mpc.training",
                 {DType::BF16, DType::BF16, DType::I32});
  ASSERT_NE(findCudaKernel(*g), nullptr);
  EXPECT_TRUE(cudaRuns(*g, {DType::BF16, DType::BF16, DType::I32}));
  EXPECT_TRUE(cudaRuns(*g, {DType::F32, DType::F32, DType::I64}));
  EXPECT_FALSE(cudaRuns(*g, {DType::F32, DType::F16, DType::I64}));
  EXPECT_FALSE(cudaRuns(*g, {DType::F32, DType::F32, DType::F32}));
  Node *mse = node("MSELossGrad", "ai.mpc.training", {DType::F16, DType::F16, DType::F16});
  ASSERT_NE(findCudaKernel(*mse), nullptr);
  EXPECT_TRUE(cudaRuns(*mse, {DType::F16, DType::F16, DType::F16}));
  EXPECT_FALSE(cudaRuns(*mse, {DType::F16, DType::F16, DType::F32}));
  EXPECT_FALSE(cudaRuns(*mse, {DType::F64, DType::F64, DType::F64}));
}

TEST_F(LossRows, ClipTakesBoundsOfItsInputsType) {
  Node *c = node("Clip", "", {DType::F16, DType::F16, DType::F16});
  ASSERT_NE(findCudaKernel(*c), nullptr);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    EXPECT_TRUE(cudaRuns(*c, {t, t, t}));
    EXPECT_TRUE(cudaRuns(*c, {t}));
    EXPECT_TRUE(cudaRuns(*c, {t, DType::Undefined, t})); // no min
  }
  EXPECT_FALSE(cudaRuns(*c, {DType::F16, DType::F32, DType::F32}));
  EXPECT_FALSE(cudaRuns(*c, {DType::F64}));
  EXPECT_FALSE(cudaRuns(*c, {DType::U8}));
}

TEST_F(LossRows, BatchNormalizationGradTakesItsParameterTypes) {
  const DType h = DType::F16, f = DType::F32, b = DType::BF16;
  Node *g = node("BatchNormalizationGrad", "ai.mpc.training", {h, h, h});
  ASSERT_NE(findCudaKernel(*g), nullptr);
  EXPECT_TRUE(cudaRuns(*g, {h, h, h}));
  EXPECT_TRUE(cudaRuns(*g, {h, h, f}));
  EXPECT_TRUE(cudaRuns(*g, {b, b, f}));
  EXPECT_TRUE(cudaRuns(*g, {f, f, f}));
  EXPECT_FALSE(cudaRuns(*g, {f, f, h}));
  EXPECT_FALSE(cudaRuns(*g, {h, b, h}));
  EXPECT_FALSE(cudaRuns(*g, {DType::F64, DType::F64, DType::F64}));
}

TEST_F(LossRows, InstanceGroupAndLpNormalizationTakeTheirParameterTypes) {
  const DType h = DType::F16, f = DType::F32, b = DType::BF16;
  for (const char *op : {"InstanceNormalization", "GroupNormalization"}) {
    SCOPED_TRACE(op);
    Node *n = node(op, "", {h, h, h});
    ASSERT_NE(findCudaKernel(*n), nullptr);
    EXPECT_TRUE(cudaRuns(*n, {h, h, h}));
    EXPECT_TRUE(cudaRuns(*n, {b, f, f}));
    EXPECT_TRUE(cudaRuns(*n, {f, f, f}));
    EXPECT_FALSE(cudaRuns(*n, {h, f, h})); // scale and bias of one type
    EXPECT_FALSE(cudaRuns(*n, {f, h, h}));
    EXPECT_FALSE(cudaRuns(*n, {DType::F64, DType::F64, DType::F64}));
  }
  Node *lp = node("LpNormalization", "", {b});
  ASSERT_NE(findCudaKernel(*lp), nullptr);
  EXPECT_TRUE(cudaRuns(*lp, {b}));
  EXPECT_FALSE(cudaRuns(*lp, {DType::F64}));
}

// The fused optimizer steps: f32 operands, the skip flag (last input) bool or
// f32, absent weight decay and skip allowed; f64 parameters stay on the CPU.
TEST_F(LossRows, FusedOptimizerStepsTakeF32AndABoolOrFloatSkipFlag) {
  const DType f = DType::F32, u = DType::Undefined;
  Node *adam = node("AdamStep", "ai.mpc.training", std::vector<DType>(12, f));
  ASSERT_NE(findCudaKernel(*adam), nullptr);
  std::vector<DType> ins(12, f);
  EXPECT_TRUE(cudaRuns(*adam, ins));
  ins.push_back(u); // no weight decay
  ins.push_back(DType::Bool);
  EXPECT_TRUE(cudaRuns(*adam, ins));
  ins.back() = f;
  EXPECT_TRUE(cudaRuns(*adam, ins));
  ins.back() = DType::I64;
  EXPECT_FALSE(cudaRuns(*adam, ins));
  ins.back() = DType::Bool;
  ins[3] = DType::Bool; // only the skip flag may be bool
  EXPECT_FALSE(cudaRuns(*adam, ins));
  Node *sgd = node("SGDStep", "ai.mpc.training", {f, f, f});
  ASSERT_NE(findCudaKernel(*sgd), nullptr);
  EXPECT_TRUE(cudaRuns(*sgd, {f, f, f, f, DType::Bool}));
  EXPECT_FALSE(cudaRuns(*sgd, {DType::F64, DType::F64, DType::F64}));
  EXPECT_FALSE(cudaRuns(*sgd, {DType::F16, DType::F16, DType::F16}));
  EXPECT_FALSE(cudaRuns(*sgd, {f, f, f, DType::F16}));
  Node *momentum = node("MomentumStep", "ai.mpc.training", {f, f, f, f, f});
  ASSERT_NE(findCudaKernel(*momentum), nullptr);
  EXPECT_TRUE(cudaRuns(*momentum, {f, f, f, f, f, f, DType::Bool}));
}

} // namespace
