//===- TransformerRowsTest.cpp - What the transformer rows take -------------===//
//
// The CUDA rows of RotaryEmbedding, Einsum and Attention (opset 23) decide
// placement before anything runs (cudaRuns): the dtypes their launchers are
// instantiated for, and the inputs and outputs they leave to the CPU.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

struct TransformerNode : ModelFixture {
  unsigned made = 0;
  /// A node of `op` with `inputs` graph inputs and `outputs` outputs.
  Node *node(const char *op, unsigned inputs, unsigned outputs) {
    m.opsets[0].version = 23;
    Node *n = g->createNode(op);
    n->name = std::string(op) + std::to_string(made++);
    for (unsigned i = 0; i < inputs; ++i)
      n->addInput(g->addInput(n->name + "_in" + std::to_string(i),
                              Type::tensor(DType::F16, {2, 8})));
    for (unsigned i = 0; i < outputs; ++i)
      n->setOutput(i, n->name + "_out" + std::to_string(i), Type::tensor(DType::F16, {2, 8}));
    return n;
  }
};

constexpr DType F16 = DType::F16, F32 = DType::F32, BF16 = DType::BF16, F64 = DType::F64,
                I32 = DType::I32, I64 = DType::I64, Bool = DType::Bool, None = DType::Undefined;

TEST_F(TransformerNode, RotaryEmbeddingTakesCachesOfXsTypeAndIntegerPositions) {
  Node *r = node("RotaryEmbedding", 4, 1);
  EXPECT_EQ(findCudaKernel(*r)->kind, CudaKernelKind::Rotary);
  EXPECT_TRUE(cudaRuns(*r, {F16, F16, F16}));
  EXPECT_TRUE(cudaRuns(*r, {BF16, BF16, BF16, I64}));
  EXPECT_TRUE(cudaRuns(*r, {F32, F32, F32, I32}));
  EXPECT_FALSE(cudaRuns(*r, {F16, F32, F32}));
  EXPECT_FALSE(cudaRuns(*r, {F32, F32, F32, F32}));
  EXPECT_FALSE(cudaRuns(*r, {F64, F64, F64})); // no f64 launcher
}

TEST_F(TransformerNode, EinsumTakesOneOrTwoOperandsOfOneFloatType) {
  Node *one = node("Einsum", 1, 1);
  EXPECT_EQ(findCudaKernel(*one)->kind, CudaKernelKind::Einsum);
  EXPECT_TRUE(cudaRuns(*one, {BF16}));
  Node *two = node("Einsum", 2, 1);
  EXPECT_TRUE(cudaRuns(*two, {F16, F16}));
  EXPECT_FALSE(cudaRuns(*two, {F16, F32}));
  EXPECT_FALSE(cudaRuns(*two, {I32, I32}));
  EXPECT_FALSE(cudaRuns(*two, {F64, F64}));
  Node *three = node("Einsum", 3, 1);
  EXPECT_FALSE(cudaRuns(*three, {F32, F32, F32}));
}

TEST_F(TransformerNode, AttentionLeavesTheKvCacheAndExtraOutputsToTheCpu) {
  Node *a = node("Attention", 4, 1);
  EXPECT_EQ(findCudaKernel(*a)->kind, CudaKernelKind::Attention);
  EXPECT_TRUE(cudaRuns(*a, {F16, F16, F16}));
  EXPECT_TRUE(cudaRuns(*a, {F16, F16, F16, Bool}));
  EXPECT_TRUE(cudaRuns(*a, {BF16, BF16, BF16, BF16}));
  EXPECT_FALSE(cudaRuns(*a, {F16, F16, F16, F32})); // a mask of another float type
  EXPECT_FALSE(cudaRuns(*a, {F16, F32, F16}));
  EXPECT_FALSE(cudaRuns(*a, {F64, F64, F64}));
  // past_key/past_value and nonpad_kv_seqlen.
  EXPECT_FALSE(cudaRuns(*a, {F16, F16, F16, None, F16, F16}));
  EXPECT_FALSE(cudaRuns(*a, {F16, F16, F16, None, None, None, I64}));
  // present_key (output 1) is not written by the launcher.
  Node *present = node("Attention", 3, 2);
  EXPECT_FALSE(cudaRuns(*present, {F16, F16, F16}));
}

} // namespace
