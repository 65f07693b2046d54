//===- GraphScheduleTest.cpp - When CudaBackend captures a plan -------------===//
//
// GraphSchedule's decisions (runtime/cuda/include/mpc/Runtime/Cuda/GraphSchedule.h)
// run by run, without a GPU.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/GraphSchedule.h"
#include <gtest/gtest.h>

using mpc::cuda::GraphSchedule;
using Action = GraphSchedule::Action;
using Key = GraphSchedule::Key;

namespace {
int ownerA, ownerB;

TEST(GraphSchedule, WarmUpThenCaptureThenReplay) {
  GraphSchedule g(true);
  EXPECT_EQ(g.next(&ownerA, 7, true), Action::Eager);
  EXPECT_EQ(g.next(&ownerA, 7, true), Action::Capture);
  g.captured(Key(&ownerA, 7));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(g.next(&ownerA, 7, true), Action::Replay);
  EXPECT_TRUE(g.takeEvicted().empty());
}

// A double-buffered training step alternates between two versions: each is
// warmed up and captured once, then both replay.
TEST(GraphSchedule, AlternatingVersionsEachKeepTheirCapture) {
  GraphSchedule g(true);
  EXPECT_EQ(g.next(&ownerA, 1, true), Action::Eager);
  EXPECT_EQ(g.next(&ownerA, 2, true), Action::Eager);
  EXPECT_EQ(g.next(&ownerA, 1, true), Action::Capture);
  g.captured(Key(&ownerA, 1));
  EXPECT_EQ(g.next(&ownerA, 2, true), Action::Capture);
  g.captured(Key(&ownerA, 2));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(g.next(&ownerA, 1, true), Action::Replay);
    EXPECT_EQ(g.next(&ownerA, 2, true), Action::Replay);
  }
  EXPECT_EQ(g.size(), 2u);
  EXPECT_TRUE(g.takeEvicted().empty());
}

TEST(GraphSchedule, AnOwnerKeepsItsMostRecentlyRunVersions) {
  GraphSchedule g(true);
  for (uint64_t v = 1; v <= GraphSchedule::kPerOwner; ++v) {
    g.next(&ownerA, v, true);
    g.next(&ownerA, v, true);
    g.captured(Key(&ownerA, v));
  }
  g.next(&ownerB, 1, true);
  EXPECT_EQ(g.next(&ownerA, 1, true), Action::Replay); // 1 is now the most recent
  EXPECT_TRUE(g.takeEvicted().empty());
  // A fifth version evicts the least recently run one, 2 (not B's).
  EXPECT_EQ(g.next(&ownerA, 99, true), Action::Eager);
  std::vector<Key> gone = g.takeEvicted();
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], Key(&ownerA, 2));
  EXPECT_TRUE(g.takeEvicted().empty());
  EXPECT_EQ(g.size(), GraphSchedule::kPerOwner + 1);
  // Version 2 comes back as new: warmed up and captured again.
  EXPECT_EQ(g.next(&ownerA, 2, true), Action::Eager);
  EXPECT_EQ(g.takeEvicted(), std::vector<Key>{Key(&ownerA, 3)});
  EXPECT_EQ(g.next(&ownerA, 2, true), Action::Capture);
}

TEST(GraphSchedule, FailedCaptureStaysEager) {
  GraphSchedule g(true);
  g.next(&ownerA, 3, true);
  EXPECT_EQ(g.next(&ownerA, 3, true), Action::Capture);
  g.captureFailed(Key(&ownerA, 3));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(g.next(&ownerA, 3, true), Action::Eager);
  // A capture that was never reported counts as failed.
  g.next(&ownerB, 4, true);
  EXPECT_EQ(g.next(&ownerB, 4, true), Action::Capture);
  EXPECT_EQ(g.next(&ownerB, 4, true), Action::Eager);
  g.captured(Key(&ownerB, 4)); // too late: stays failed
  EXPECT_EQ(g.next(&ownerB, 4, true), Action::Eager);
}

TEST(GraphSchedule, OwnersAreIndependent) {
  GraphSchedule g(true);
  EXPECT_EQ(g.next(&ownerA, 5, true), Action::Eager);
  EXPECT_EQ(g.next(&ownerB, 5, true), Action::Eager);
  EXPECT_EQ(g.next(&ownerA, 5, true), Action::Capture);
  g.captured(Key(&ownerA, 5));
  EXPECT_EQ(g.next(&ownerB, 5, true), Action::Capture);
  g.captureFailed(Key(&ownerB, 5));
  EXPECT_EQ(g.next(&ownerA, 5, true), Action::Replay);
  EXPECT_EQ(g.next(&ownerB, 5, true), Action::Eager);
}

TEST(GraphSchedule, OffOrSynchronousStreamIsAlwaysEager) {
  GraphSchedule off(false);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(off.next(&ownerA, 1, true), Action::Eager);
  EXPECT_EQ(off.size(), 0u);
  GraphSchedule on(true);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(on.next(&ownerA, 1, false), Action::Eager);
  // Runs on the synchronous stream do not count towards the warm-up.
  EXPECT_EQ(on.next(&ownerA, 1, true), Action::Eager);
  EXPECT_EQ(on.next(&ownerA, 1, true), Action::Capture);
}
} // namespace
