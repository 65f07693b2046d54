//===- IndexPlanTest.cpp - The index/logic family's host-side decisions ----===//
//
// Without a GPU: GatherElements/ScatterElements' index plan
// (Kernels/IndexBodies.h, walked by the CPU kernel and the CUDA launcher)
// against a multi-index computed here; which index, logic and shape nodes
// the CUDA table takes (a Trilu k or CumSum axis known before running,
// i32/i64 GatherElements indices, BitShift on unsigned types only).
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Kernels/IndexBodies.h"
#include <gtest/gtest.h>
#include <cstring>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

TEST(ElementIndexPlan, ReplacesTheAxisCoordinateWithTheIndex) {
  // data [3, 4, 5], indices [2, 4, 3] (smaller on every axis but the
  // indexed one may be larger), for each axis.
  std::vector<int64_t> data = {3, 4, 5}, ind = {2, 4, 3};
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE(axis);
    kernels::ElementIndexPlan p;
    ASSERT_TRUE(kernels::makeElementIndexPlan(data.data(), ind.data(), 3, axis, p));
    EXPECT_EQ(p.count, 24);
    EXPECT_EQ(p.dim, data[size_t(axis)]);
    for (int64_t e = 0; e < p.count; ++e) {
      int64_t c[3] = {e / 12, (e / 3) % 4, e % 3};
      int64_t v = (e * 5) % data[size_t(axis)];
      c[axis] = v;
      EXPECT_EQ(kernels::elementIndexOffset(p, e, v), (c[0] * 4 + c[1]) * 5 + c[2]) << e;
    }
  }
  // Rank 0 has no axis; more than kMaxElementIndexRank dimensions are refused.
  kernels::ElementIndexPlan p;
  EXPECT_FALSE(kernels::makeElementIndexPlan(data.data(), ind.data(), 3, 3, p));
  std::vector<int64_t> big(size_t(kernels::kMaxElementIndexRank) + 1, 1);
  EXPECT_FALSE(kernels::makeElementIndexPlan(big.data(), big.data(), int(big.size()), 0, p));
  // An empty index tensor: nothing to visit.
  std::vector<int64_t> empty = {0, 4, 3};
  ASSERT_TRUE(kernels::makeElementIndexPlan(data.data(), empty.data(), 3, 1, p));
  EXPECT_EQ(p.count, 0);
}

TEST(IndexBodies, TriluKeepsOnTheDiagonalSide) {
  EXPECT_TRUE(kernels::triluKeeps(2, 2, 0, true));
  EXPECT_TRUE(kernels::triluKeeps(2, 2, 0, false));
  EXPECT_FALSE(kernels::triluKeeps(2, 3, 2, true)); // j - i = 1 < 2
  EXPECT_TRUE(kernels::triluKeeps(2, 4, 2, true));
  EXPECT_TRUE(kernels::triluKeeps(5, 1, -3, false)); // j - i = -4 <= -3
  EXPECT_FALSE(kernels::triluKeeps(5, 3, -3, false));
}

/// A model with one node, for the table's per-node decisions.
struct IndexNode : ModelFixture {
  Node *node(const char *op, std::vector<DType> ins, DType out, const char *name) {
    return oneNode(op, ins, out, name);
  }
  /// An int64 scalar initializer.
  Value *scalar(const char *name, int64_t v) {
    Tensor t(DType::I64, {});
    std::vector<uint8_t> bytes(8);
    std::memcpy(bytes.data(), &v, 8);
    t.setBytes(bytes);
    return g->addInitializer(name, t);
  }
};

TEST_F(IndexNode, LogicAndBitwiseRows) {
  Node *a = node("And", {DType::Bool, DType::Bool}, DType::Bool, "and");
  EXPECT_TRUE(cudaRuns(*a, {DType::Bool, DType::Bool}));
  EXPECT_EQ(findCudaKernel(*a)->kind, CudaKernelKind::Logical);
  Node *x = node("Xor", {DType::Bool, DType::Bool}, DType::Bool, "xor");
  EXPECT_EQ(findCudaKernel(*x)->op, int32_t(LogicalOpId::Xor));
  Node *nt = node("Not", {DType::Bool}, DType::Bool, "not");
  EXPECT_TRUE(cudaRuns(*nt, {DType::Bool}));
  EXPECT_FALSE(cudaRuns(*nt, {DType::F32}));
  m.opsets[0].version = 18;
  Node *band = node("BitwiseAnd", {DType::U16, DType::U16}, DType::U16, "band");
  for (DType t : {DType::I8, DType::I16, DType::I32, DType::I64, DType::U8, DType::U16,
                  DType::U32, DType::U64})
    EXPECT_TRUE(cudaRuns(*band, {t, t})) << dtypeName(t).str();
  EXPECT_FALSE(cudaRuns(*band, {DType::F32, DType::F32}));
  Node *bnot = node("BitwiseNot", {DType::I8}, DType::I8, "bnot");
  EXPECT_TRUE(cudaRuns(*bnot, {DType::I8}));
  // BitShift: the unsigned types only, as the CPU row.
  Node *sh = node("BitShift", {DType::U32, DType::U32}, DType::U32, "sh");
  EXPECT_TRUE(cudaRuns(*sh, {DType::U32, DType::U32}));
  EXPECT_FALSE(cudaRuns(*sh, {DType::I32, DType::I32}));
}

TEST_F(IndexNode, InputsKnownBeforeRunningDecideTriluAndCumSum) {
  // Trilu: no k, or a constant k; a k computed by the graph stays on the CPU.
  Node *tri = node("Trilu", {DType::F16}, DType::F16, "tri");
  EXPECT_TRUE(cudaRuns(*tri, {DType::F16}));
  tri->addInput(scalar("k", 1));
  EXPECT_TRUE(cudaRuns(*tri, {DType::F16, DType::I64}));
  Node *triIn = node("Trilu", {DType::Bool, DType::I64}, DType::Bool, "tri_in");
  EXPECT_FALSE(cudaRuns(*triIn, {DType::Bool, DType::I64}));
  // CumSum: the axis input must be a constant.
  Node *cs = node("CumSum", {DType::BF16}, DType::BF16, "cs");
  cs->addInput(scalar("axis", -1));
  EXPECT_TRUE(cudaRuns(*cs, {DType::BF16, DType::I64}));
  EXPECT_FALSE(cudaRuns(*cs, {DType::F64, DType::I64})); // no f64 launcher
  Node *csIn = node("CumSum", {DType::F32, DType::I64}, DType::F32, "cs_in");
  EXPECT_FALSE(cudaRuns(*csIn, {DType::F32, DType::I64}));
}

TEST_F(IndexNode, SelectionAndShapeRows) {
  Node *ge = node("GatherElements", {DType::F16, DType::I64}, DType::F16, "ge");
  EXPECT_TRUE(cudaRuns(*ge, {DType::F16, DType::I64}));
  EXPECT_TRUE(cudaRuns(*ge, {DType::Bool, DType::I32}));
  EXPECT_FALSE(cudaRuns(*ge, {DType::F16, DType::I16}));
  EXPECT_FALSE(cudaRuns(*ge, {DType::String, DType::I64}));
  Node *am = node("ArgMax", {DType::BF16}, DType::I64, "am");
  EXPECT_TRUE(cudaRuns(*am, {DType::BF16}));
  EXPECT_TRUE(cudaRuns(*am, {DType::I32}));
  EXPECT_FALSE(cudaRuns(*am, {DType::U8}));
  Node *shape = node("Shape", {DType::Bool}, DType::I64, "shape");
  EXPECT_TRUE(cudaRuns(*shape, {DType::Bool}));
  EXPECT_FALSE(cudaRuns(*shape, {DType::String}));
  // ConstantOfShape is keyed by its int64 shape input.
  Node *cos = node("ConstantOfShape", {DType::I64}, DType::F16, "cos");
  EXPECT_TRUE(cudaRuns(*cos, {DType::I64}));
  // OneHot: keyed by its indices; values of a raw element size.
  Node *oh = node("OneHot", {DType::I64, DType::I64, DType::F16}, DType::F16, "oh");
  EXPECT_TRUE(cudaRuns(*oh, {DType::I64, DType::I64, DType::F16}));
  EXPECT_TRUE(cudaRuns(*oh, {DType::F32, DType::I64, DType::Bool}));
  EXPECT_FALSE(cudaRuns(*oh, {DType::I64, DType::I64, DType::String}));
  Node *range = node("Range", {DType::I64, DType::I64, DType::I64}, DType::I64, "range");
  EXPECT_TRUE(cudaRuns(*range, {DType::I64, DType::I64, DType::I64}));
  EXPECT_FALSE(cudaRuns(*range, {DType::I16, DType::I16, DType::I16}));
}

} // namespace
