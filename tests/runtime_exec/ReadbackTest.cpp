//===- ReadbackTest.cpp - The readback ring over a fake asynchronous channel -===//
//
// The fake channel queues copies and completes them only when the test says
// so (as a device would, later): records come out oldest first, not before
// their copies landed, with the bytes of their own step across wrap-around.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Readback.h"
#include "mpc/Runtime/Trainer.h"
#include "gtest/gtest.h"
#include <cstring>
#include <deque>

using namespace mpc;

namespace {
class FakeChannel final : public ReadbackChannel {
public:
  struct Copy {
    void *dst;
    std::vector<uint8_t> bytes; // the source's bytes when the copy was queued
    uint64_t marker;
  };
  void *allocateHost(size_t bytes) override {
    allocated = bytes;
    // 64-byte aligned, as the channel promises, and zeroed.
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = std::aligned_alloc(64, rounded);
    std::memset(p, 0, rounded);
    return p;
  }
  void releaseHost(void *p) override {
    std::free(p);
    released = true;
  }
  void copyAsync(void *dst, const void *src, size_t bytes, Stream) override {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    queue.push_back(Copy{dst, std::vector<uint8_t>(s, s + bytes), nextMarker});
  }
  /// Reads `src` only when the device gets to it (completeUpTo), as a copy
  /// from pinned memory does.
  void uploadAsync(void *dst, const void *src, size_t bytes, Stream) override {
    uploads.push_back(Upload{dst, src, bytes, nextMarker});
  }
  uint64_t mark(Stream) override { return nextMarker++; }
  bool reached(uint64_t marker) override { return marker < completed; }
  void wait(uint64_t marker) override {
    ++waits;
    completeUpTo(marker + 1);
  }
  /// The device finishes the work before marker `m`.
  void completeUpTo(uint64_t m) {
    while (!queue.empty() && queue.front().marker < m) {
      std::memcpy(queue.front().dst, queue.front().bytes.data(), queue.front().bytes.size());
      queue.pop_front();
    }
    while (!uploads.empty() && uploads.front().marker < m) {
      std::memcpy(uploads.front().dst, uploads.front().src, uploads.front().bytes);
      uploads.pop_front();
    }
    completed = std::max(completed, m);
  }
  std::deque<Copy> queue;
  struct Upload {
    void *dst;
    const void *src;
    size_t bytes;
    uint64_t marker;
  };
  std::deque<Upload> uploads;
  uint64_t nextMarker = 0, completed = 0;
  size_t allocated = 0;
  int waits = 0;
  bool released = false;
};

/// Queues record `step`: field 0 a float, field 1 three int32.
void push(ReadbackRing &ring, uint64_t step) {
  float loss = float(step) + 0.5f;
  int32_t v[3] = {int32_t(step), int32_t(step * 2), int32_t(step * 3)};
  ring.begin(step);
  ring.copy(0, &loss, Stream());
  ring.copy(1, v, Stream());
  ring.commit(Stream());
}

void expectRecord(ReadbackRing &ring, uint64_t step) {
  EXPECT_EQ(ring.tag(), step);
  EXPECT_EQ(ring.fieldAs<float>(0), float(step) + 0.5f);
  int32_t v[3];
  std::memcpy(v, ring.field(1), sizeof(v));
  EXPECT_EQ(v[0], int32_t(step));
  EXPECT_EQ(v[2], int32_t(step * 3));
}
} // namespace

TEST(ReadbackRing, RecordsArriveInOrderOnlyAfterTheirCopies) {
  FakeChannel ch;
  ReadbackRing ring(ch, {sizeof(float), 3 * sizeof(int32_t)}, 3);
  EXPECT_EQ(ring.capacity(), 3u);
  EXPECT_FALSE(ring.ready(false)); // empty
  push(ring, 1);
  push(ring, 2);
  EXPECT_EQ(ring.size(), 2u);
  EXPECT_FALSE(ring.ready(false)); // nothing landed yet
  ch.completeUpTo(1);              // step 1's copies only
  ASSERT_TRUE(ring.ready(false));
  expectRecord(ring, 1);
  ring.take();
  EXPECT_FALSE(ring.ready(false)); // step 2 still in flight
  EXPECT_EQ(ch.waits, 0);
  ASSERT_TRUE(ring.ready(true)); // waiting completes it
  EXPECT_EQ(ch.waits, 1);
  expectRecord(ring, 2);
  ring.take();
  EXPECT_EQ(ring.size(), 0u);
}

TEST(ReadbackRing, WrapsAroundWithoutMixingSteps) {
  FakeChannel ch;
  ReadbackRing ring(ch, {sizeof(float), 3 * sizeof(int32_t)}, 3);
  uint64_t next = 1, taken = 1;
  // Ten rounds: fill the ring, let part of it land, take what landed.
  for (int round = 0; round < 10; ++round) {
    while (!ring.full())
      push(ring, next++);
    EXPECT_EQ(ring.size(), 3u);
    ch.completeUpTo(ch.completed + 2);
    while (ring.ready(false)) {
      expectRecord(ring, taken++);
      ring.take();
    }
    EXPECT_EQ(ring.size(), 1u); // the third is still in flight
  }
  ASSERT_TRUE(ring.ready(true));
  expectRecord(ring, taken++);
  ring.take();
  EXPECT_EQ(taken, next);
}

TEST(ReadbackRing, DestructorWaitsForCopiesInFlight) {
  FakeChannel ch;
  {
    ReadbackRing ring(ch, {sizeof(float), 3 * sizeof(int32_t)}, 2);
    push(ring, 7);
  }
  EXPECT_TRUE(ch.queue.empty()); // landed before the memory was released
  EXPECT_TRUE(ch.released);
}

TEST(ReadbackRing, CpuChannelReadsAtOnce) {
  CpuBackend cpu;
  auto ch = createSyncReadback(cpu);
  ReadbackRing ring(*ch, {sizeof(float), 3 * sizeof(int32_t)}, 2);
  for (uint64_t s = 1; s <= 5; ++s) {
    push(ring, s);
    ASSERT_TRUE(ring.ready(false));
    expectRecord(ring, s);
    ring.take();
  }
}

// The batch staging ring: a slot is handed out again only after the uploads
// queued from it have run, so every step's bytes reach the device intact even
// though the device reads them late; the host waits only when it comes back
// to a slot whose upload is still queued.
TEST(StagingRing, ASlotIsReusedOnlyAfterItsUploadRan) {
  FakeChannel ch;
  std::vector<std::vector<int64_t>> device(7, std::vector<int64_t>(4, -1));
  {
    StagingRing ring(ch, 4 * sizeof(int64_t), 3);
    EXPECT_EQ(ring.capacity(), 3u);
    EXPECT_EQ(ring.slotBytes(), 64u);
    EXPECT_EQ(ch.allocated, 3u * 64);
    for (int64_t step = 0; step < 7; ++step) {
      uint8_t *slot = ring.acquire();
      EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % 64, 0u);
      int64_t v[4] = {step, step * 10, step * 100, -step};
      std::memcpy(slot, v, sizeof(v));
      // Two uploads from one slot: the halves, to the step's device buffer.
      ring.upload(device[size_t(step)].data(), 0, 2 * sizeof(int64_t), Stream());
      ring.upload(device[size_t(step)].data() + 2, 2 * sizeof(int64_t), 2 * sizeof(int64_t),
                  Stream());
      ring.commit(Stream());
      // Steps 0..2 take fresh slots; each later one comes back to the slot
      // of step - 3, whose upload the device has not run: one wait each.
      EXPECT_EQ(ring.waits(), uint64_t(std::max<int64_t>(step - 2, 0))) << step;
    }
    // The device ran what the waits needed, no more: step 6's is still queued.
    EXPECT_EQ(device[6][0], -1);
    // The device catches up before step 7: its slot is free, no wait.
    ch.completeUpTo(ch.nextMarker);
    ring.acquire();
    ring.commit(Stream());
    EXPECT_EQ(ring.waits(), 4u);
  }
  for (int64_t step = 0; step < 7; ++step)
    EXPECT_EQ(device[size_t(step)],
              (std::vector<int64_t>{step, step * 10, step * 100, -step})) << step;
  EXPECT_TRUE(ch.released);
}

TEST(StagingRing, DestroyingItWaitsForUploadsInFlight) {
  FakeChannel ch;
  int64_t dst = 0;
  {
    StagingRing ring(ch, sizeof(int64_t), 2);
    int64_t v = 42;
    std::memcpy(ring.acquire(), &v, sizeof(v));
    ring.upload(&dst, 0, sizeof(v), Stream());
    ring.commit(Stream());
    EXPECT_EQ(dst, 0); // queued, not run
  }
  // Its memory was released only after the upload read it.
  EXPECT_EQ(dst, 42);
  EXPECT_EQ(ch.waits, 1);
  EXPECT_TRUE(ch.released);
}

// Slots of the trainer's staging ring: one more than the readback ring,
// fewer (at least two) when the batches are large.
TEST(StagingRing, TrainerCapacityFollowsTheReadbackRingWithinABudget) {
  unsigned ring = Trainer::readbackCapacity();
  EXPECT_EQ(Trainer::stagingCapacity(64 * 64 * 4), ring + 1);
  EXPECT_EQ(Trainer::stagingCapacity(0), ring + 1);
  EXPECT_EQ(Trainer::stagingCapacity(Trainer::kStagingBudget / 4), 4u);
  EXPECT_EQ(Trainer::stagingCapacity(Trainer::kStagingBudget), 2u);
  EXPECT_EQ(Trainer::stagingCapacity(Trainer::kStagingBudget * 3), 2u);
}
