//===- UnscalePlanTest.cpp - The multi-tensor unscale's host decisions ----===//
//
// UnscalePlan.h (the chunk table MultiTensorUnscale's one launch walks:
// chunking, order, alignment, the launch's blocks) and its row of the CUDA
// kernel table, without a GPU. The table is also replayed on the host with
// the kernel's per-element body to check that it covers every element of
// every gradient exactly once.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Cuda/UnscalePlan.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

UnscalePlan plan(std::vector<int64_t> sizes, std::vector<int32_t> types, unsigned sms = 4,
                 int64_t chunk = kUnscaleChunkElements) {
  UnscalePlan p;
  EXPECT_TRUE(planUnscale(sizes, types, sms, p, chunk));
  return p;
}

TEST(UnscalePlan, ChunksFollowTheGradientsAndTheirElementsInOrder) {
  // 10 elements in chunks of 8: [0, 8) and [8, 10); 8 exactly: one; 1: one.
  UnscalePlan p = plan({10, 8, 1}, {kOnnxF16, kOnnxF32, kOnnxBF16}, 4, 8);
  ASSERT_EQ(p.chunks.size(), 4u);
  struct Want {
    int64_t begin;
    int32_t length, tensor, type;
  };
  Want want[] = {{0, 8, 0, kOnnxF16}, {8, 2, 0, kOnnxF16}, {0, 8, 1, kOnnxF32},
                 {0, 1, 2, kOnnxBF16}};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(p.chunks[i].begin, want[i].begin);
    EXPECT_EQ(p.chunks[i].length, want[i].length);
    EXPECT_EQ(p.chunks[i].tensor, want[i].tensor);
    EXPECT_EQ(p.chunks[i].type, want[i].type);
  }
  EXPECT_EQ(p.blocks, 4u);
  EXPECT_EQ(p.threads, 256u);
}

TEST(UnscalePlan, ChunkStartsAreAlignedAndEmptyGradientsHaveNone) {
  UnscalePlan p = plan({0, 100000, 0, 4097}, {kOnnxF32, kOnnxF16, kOnnxBF16, kOnnxF32});
  ASSERT_EQ(p.chunks.size(), 25u + 2u); // ceil(100000 / 4096) = 25, ceil(4097 / 4096) = 2
  for (const UnscaleChunk &c : p.chunks) {
    EXPECT_EQ(c.begin % kUnscaleChunkElements, 0);
    EXPECT_EQ(c.begin % kUnscaleAlign, 0);
    EXPECT_TRUE(c.tensor == 1 || c.tensor == 3);
    EXPECT_GT(c.length, 0);
  }
  EXPECT_EQ(p.chunks[24].begin, 24 * 4096);
  EXPECT_EQ(p.chunks[24].length, 100000 - 24 * 4096);
  EXPECT_EQ(p.chunks[26].length, 1);
  // Nothing but empty gradients: no chunk and no launch (the flags are still zeroed).
  UnscalePlan none = plan({0, 0}, {kOnnxF32, kOnnxF16});
  EXPECT_TRUE(none.chunks.empty());
  EXPECT_EQ(none.blocks, 0u);
}

TEST(UnscalePlan, BlocksAreCappedBySmCount) {
  std::vector<int64_t> sizes(1000, 3);
  std::vector<int32_t> types(1000, kOnnxF16);
  UnscalePlan p = plan(sizes, types, 2);
  EXPECT_EQ(p.chunks.size(), 1000u); // many small tensors: one chunk each, one launch
  EXPECT_EQ(p.blocks, 2u * kBlocksPerSM);
  EXPECT_EQ(plan({5}, {kOnnxF32}, 132).blocks, 1u);
}

TEST(UnscalePlan, RefusesWhatTheKernelCannotTake) {
  UnscalePlan p;
  EXPECT_FALSE(planUnscale({4}, {kOnnxF64}, 4, p));
  EXPECT_FALSE(planUnscale({4}, {kOnnxI32}, 4, p));
  EXPECT_FALSE(planUnscale({-1}, {kOnnxF32}, 4, p));
  EXPECT_FALSE(planUnscale({4, 4}, {kOnnxF32}, 4, p));
  EXPECT_FALSE(planUnscale({4}, {kOnnxF32}, 4, p, 12)); // not a multiple of 8
  EXPECT_FALSE(planUnscale({4}, {kOnnxF32}, 4, p, 0));
  EXPECT_TRUE(p.chunks.empty());
}

TEST(UnscalePlan, ReplayedOnTheHostCoversEveryElementOnce) {
  std::vector<int64_t> sizes = {17, 0, 4096, 4103, 1, 9000};
  std::vector<int32_t> types(sizes.size(), kOnnxF32);
  UnscalePlan p = plan(sizes, types, 3, 64);
  std::vector<std::vector<int>> seen;
  for (int64_t n : sizes)
    seen.emplace_back(size_t(n), 0);
  int32_t lastTensor = 0;
  int64_t next = 0;
  for (const UnscaleChunk &c : p.chunks) {
    // In order: within a tensor the chunks are contiguous and increasing.
    if (c.tensor != lastTensor) {
      EXPECT_GT(c.tensor, lastTensor);
      next = 0;
      lastTensor = c.tensor;
    }
    EXPECT_EQ(c.begin, next);
    next = c.begin + c.length;
    for (int64_t i = c.begin; i < c.begin + c.length; ++i)
      ++seen[size_t(c.tensor)][size_t(i)];
  }
  for (size_t t = 0; t < sizes.size(); ++t)
    for (int64_t i = 0; i < sizes[t]; ++i)
      ASSERT_EQ(seen[t][size_t(i)], 1) << "tensor " << t << " element " << i;
}

TEST(UnscalePlan, LaunchSlicesCoverEveryChunkOnceInOrder) {
  // 7 tensors, 2 pointers each, at most 6 pointers a launch: tensors
  // [0, 3), [3, 6), [6, 7); tensors 3-5 are empty, so that run is left out.
  std::vector<int64_t> sizes = {10, 0, 17, 0, 0, 0, 9};
  UnscalePlan p = plan(sizes, std::vector<int32_t>(sizes.size(), kOnnxF32), 4, 8);
  std::vector<LaunchSlice> slices = sliceLaunches(p, 7, kUnscaleSlots, 6);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].firstTensor, 0);
  EXPECT_EQ(slices[0].tensors, 3);
  EXPECT_EQ(slices[0].firstChunk, 0);
  EXPECT_EQ(slices[0].chunks, 2 + 3); // 10 in chunks of 8, then 17
  EXPECT_EQ(slices[1].firstTensor, 6);
  EXPECT_EQ(slices[1].tensors, 1);
  EXPECT_EQ(slices[1].firstChunk, 5);
  EXPECT_EQ(slices[1].chunks, 2);
  // The default fits 1536 gradients to a launch: one slice for 1536, two for 1537.
  UnscalePlan many = plan(std::vector<int64_t>(1537, 3), std::vector<int32_t>(1537, kOnnxF16));
  std::vector<LaunchSlice> two = sliceLaunches(many, 1537, kUnscaleSlots);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].tensors, 1536);
  EXPECT_EQ(two[1].firstTensor, 1536);
  EXPECT_EQ(two[1].firstChunk, 1536);
  // What no launch can take.
  EXPECT_TRUE(sliceLaunches(p, 7, 0).empty());
  EXPECT_TRUE(sliceLaunches(p, 7, 7, 6).empty());
  EXPECT_TRUE(sliceLaunches(p, 3, kUnscaleSlots).empty()); // chunks of tensor 6
  EXPECT_TRUE(sliceLaunches(UnscalePlan(), 0, kUnscaleSlots).empty());
}

TEST(UnscalePlan, LaunchPointersAreTheSlicesTensorsInOrder) {
  auto fake = [](uintptr_t i) { return reinterpret_cast<void *>(i * 16); };
  std::vector<void *> table;
  for (uintptr_t i = 1; i <= 10; ++i)
    table.push_back(fake(i));
  LaunchSlice s;
  s.firstTensor = 2;
  s.tensors = 2;
  LaunchPointers p = launchPointers(table, s, kUnscaleSlots);
  EXPECT_EQ(p.p[0], fake(5));
  EXPECT_EQ(p.p[3], fake(8));
  EXPECT_EQ(p.p[4], nullptr);
  UnscaleChunk c;
  c.tensor = 3;
  EXPECT_EQ(chunkPointers(p, c, s.firstTensor, kUnscaleSlots)[0], fake(7));
  EXPECT_EQ(chunkPointers(p, c, s.firstTensor, kUnscaleSlots)[1], fake(8));
}

struct UnscaleRow : ModelFixture {
  Node *node(std::vector<DType> ins) {
    m.opsets.push_back({"ai.mpc.training", 1});
    Node *n = g->createNode("MultiTensorUnscale");
    n->name = "unscale";
    n->domain = "ai.mpc.training";
    int i = 0;
    for (DType t : ins)
      n->addInput(g->addInput("in" + std::to_string(i++), Type::tensor(t, {2, 8})));
    n->setOutput(0, "found", Type::tensor(DType::Bool, {}));
    return n;
  }
};

TEST_F(UnscaleRow, TakesFloatGradientsOfEveryLauncherType) {
  const DType f = DType::F32, h = DType::F16, b = DType::BF16;
  Node *n = node({f, h, b, f});
  const CudaKernel *k = findCudaKernel(*n);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->kind, CudaKernelKind::MultiTensorUnscale);
  EXPECT_TRUE(cudaRuns(*n, {f, h, b, f}));
  EXPECT_TRUE(cudaRuns(*n, {f, b}));
  EXPECT_FALSE(cudaRuns(*n, {f}));                 // no gradient
  EXPECT_FALSE(cudaRuns(*n, {f, h, DType::F64}));  // no f64 launcher
  EXPECT_FALSE(cudaRuns(*n, {h, h}));              // inv_scale is f32
}

} // namespace
