//===- MemoryPlannerTest.cpp - Arena planning invariants ---------------------===//
//
// Random interval sets: no two buffers with intersecting lifetimes overlap,
// offsets are aligned, reuse happens, lower bound <= peak <= sum. The checker
// itself is tested on hand-made bad plans.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/MemoryPlanner.h"
#include "gtest/gtest.h"
#include <chrono>
#include <random>

using namespace mpc;

static std::vector<BufferRequest> randomRequests(std::mt19937_64 &rng, size_t n,
                                                 int64_t steps) {
  std::uniform_int_distribution<int64_t> step(0, steps - 1), len(0, 8);
  std::uniform_int_distribution<uint64_t> size(0, 1 << 16);
  std::vector<BufferRequest> r(n);
  for (BufferRequest &b : r) {
    b.firstStep = step(rng);
    b.lastStep = b.firstStep + len(rng);
    b.size = size(rng);
  }
  return r;
}

TEST(MemoryPlanner, RandomIntervalsNeverOverlapWhileLive) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 200; ++iter) {
    auto reqs = randomRequests(rng, 1 + iter * 3, 50);
    MemoryPlan plan = planMemory(reqs);
    EXPECT_EQ(checkMemoryPlan(reqs, plan), "") << "iteration " << iter;
    EXPECT_LE(plan.maxLiveBytes, plan.peak);
    EXPECT_LE(plan.peak, plan.sumOfSizes);
    for (uint64_t off : plan.offsets)
      EXPECT_EQ(off % kArenaAlignment, 0u);
  }
}

TEST(MemoryPlanner, ReusesMemoryOfDeadBuffers) {
  // A chain: each buffer dies when the next is born + 1 step.
  std::vector<BufferRequest> reqs;
  for (int i = 0; i < 10; ++i)
    reqs.push_back({1000, i, i + 1});
  MemoryPlan plan = planMemory(reqs);
  EXPECT_EQ(checkMemoryPlan(reqs, plan), "");
  EXPECT_EQ(plan.sumOfSizes, 10u * 1024);
  EXPECT_EQ(plan.peak, 2u * 1024);
  EXPECT_EQ(plan.maxLiveBytes, 2u * 1024);
}

TEST(MemoryPlanner, AlignsAndRoundsSizes) {
  EXPECT_EQ(alignArenaSize(0), kArenaAlignment);
  EXPECT_EQ(alignArenaSize(1), kArenaAlignment);
  EXPECT_EQ(alignArenaSize(256), 256u);
  EXPECT_EQ(alignArenaSize(257), 512u);
  std::vector<BufferRequest> reqs = {{3, 0, 5}, {5, 0, 5}, {7, 1, 2}};
  MemoryPlan plan = planMemory(reqs);
  EXPECT_EQ(checkMemoryPlan(reqs, plan), "");
  EXPECT_EQ(plan.peak, 3 * kArenaAlignment);
}

TEST(MemoryPlanner, BestFitPicksTheSmallestGap) {
  // At step 2 the free gaps are [0, 4096) (a's) and [4352, 5376) (b's),
  // separated by the long-lived p1; e fits b's gap exactly.
  std::vector<BufferRequest> reqs = {
      {4096, 0, 1}, // a: offset 0
      {256, 0, 9},  // p1: offset 4096
      {1024, 1, 1}, // b: offset 4352
      {256, 1, 9},  // p2: offset 5376
      {1024, 2, 3}, // e
  };
  MemoryPlan plan = planMemory(reqs);
  EXPECT_EQ(checkMemoryPlan(reqs, plan), "");
  EXPECT_EQ(plan.offsets[2], 4352u);
  EXPECT_EQ(plan.offsets[4], plan.offsets[2]);
}

TEST(MemoryPlanner, CheckerFindsOverlaps) {
  std::vector<BufferRequest> reqs = {{1024, 0, 3}, {1024, 2, 4}, {1024, 4, 5}};
  MemoryPlan bad;
  bad.offsets = {0, 512, 1024};
  bad.peak = 4096;
  EXPECT_NE(checkMemoryPlan(reqs, bad), "");
  bad.offsets = {0, 1024, 0}; // third reuses the first after it died: valid
  EXPECT_EQ(checkMemoryPlan(reqs, bad), "");
  bad.offsets = {0, 1024, 1024}; // second and third live together at step 4
  EXPECT_NE(checkMemoryPlan(reqs, bad), "");
  bad.offsets = {0, 100 * 256 + 3, 0};
  EXPECT_NE(checkMemoryPlan(reqs, bad), "");
}

TEST(MemoryPlanner, HundredThousandBuffersWithinBudget) {
  std::mt19937_64 rng(7);
  auto reqs = randomRequests(rng, 100000, 100000);
  auto t0 = std::chrono::steady_clock::now();
  MemoryPlan plan = planMemory(reqs);
  std::string check = checkMemoryPlan(reqs, plan);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(check, "");
  EXPECT_LT(s, 10.0);
}
