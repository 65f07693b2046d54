//===- ReadbackTest.cpp - The readback ring over a fake asynchronous channel -===//
//
// The fake channel queues copies and completes them only when the test says
// so (as a device would, later): records come out oldest first, not before
// their copies landed, with the bytes of their own step across wrap-around.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Readback.h"
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
    return std::calloc(bytes, 1);
  }
  void releaseHost(void *p) override {
    std::free(p);
    released = true;
  }
  void copyAsync(void *dst, const void *src, size_t bytes, Stream) override {
    const uint8_t *s = static_cast<const uint8_t *>(src);
    queue.push_back(Copy{dst, std::vector<uint8_t>(s, s + bytes), nextMarker});
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
    completed = std::max(completed, m);
  }
  std::deque<Copy> queue;
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
