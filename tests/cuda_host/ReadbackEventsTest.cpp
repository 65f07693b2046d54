//===- ReadbackEventsTest.cpp - The CUDA readback channel's event slots -----===//
//
// ReadbackEvents (runtime/cuda/include/mpc/Runtime/Cuda/ReadbackEvents.h)
// against an emulated stream: markers complete in order, an event slot
// reports the marker it was last recorded for, and a wait runs the stream
// up to that marker. Checked: a poll never calls a marker done before it is,
// a wait always leaves it done, a marker known done costs no event call, and
// the slot of a marker still within the pool is its own (no over-waiting).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/ReadbackEvents.h"
#include <gtest/gtest.h>
#include <random>
#include <vector>

using mpc::cuda::ReadbackEvents;

namespace {

/// One stream and its event slots, as the CUDA runtime would keep them.
struct EmulatedStream {
  explicit EmulatedStream(unsigned n) : recorded(n, 0) {}
  std::vector<uint64_t> recorded; ///< per slot: the marker last recorded
  uint64_t executed = 0;          ///< markers the device has passed
  unsigned calls = 0;             ///< event queries and synchronizations
  bool query(unsigned slot) {
    ++calls;
    return recorded[slot] <= executed;
  }
  void synchronize(unsigned slot) {
    ++calls;
    executed = std::max(executed, recorded[slot]);
  }
};

/// What the CUDA channel does on a poll (reached) and a wait.
bool poll(ReadbackEvents &ev, EmulatedStream &s, uint64_t m) {
  ReadbackEvents::Probe p = ev.probe(m);
  if (p.done)
    return true;
  if (!s.query(p.slot))
    return false;
  ev.completed(p);
  return true;
}

void wait(ReadbackEvents &ev, EmulatedStream &s, uint64_t m) {
  ReadbackEvents::Probe p = ev.probe(m);
  if (p.done)
    return;
  s.synchronize(p.slot);
  ev.completed(p);
}

uint64_t mark(ReadbackEvents &ev, EmulatedStream &s) {
  uint64_t m = ev.next();
  s.recorded[ev.slotOf(m)] = m;
  return m;
}

TEST(ReadbackEvents, MarkersTakeTheSlotsInTurn) {
  ReadbackEvents ev(3);
  std::vector<unsigned> slots;
  for (int i = 0; i < 7; ++i)
    slots.push_back(ev.slotOf(ev.next()));
  EXPECT_EQ(slots, (std::vector<unsigned>{0, 1, 2, 0, 1, 2, 0}));
  // Marker 1's slot was recorded again for 4 and then 7.
  EXPECT_EQ(ev.holder(1), 7u);
  EXPECT_EQ(ev.holder(5), 5u);
  EXPECT_EQ(ev.holder(6), 6u);
  EXPECT_EQ(ev.holder(4), 7u);
}

TEST(ReadbackEvents, AMarkerWithinThePoolWaitsForItselfOnly) {
  EmulatedStream s(4);
  ReadbackEvents ev(4);
  uint64_t a = mark(ev, s), b = mark(ev, s), c = mark(ev, s);
  EXPECT_FALSE(poll(ev, s, a));
  wait(ev, s, b);
  EXPECT_EQ(s.executed, b) << "the wait ran past its marker";
  EXPECT_TRUE(poll(ev, s, a));
  EXPECT_FALSE(poll(ev, s, c));
  // Known done: no event call at all.
  unsigned calls = s.calls;
  EXPECT_TRUE(poll(ev, s, a));
  wait(ev, s, b);
  EXPECT_TRUE(poll(ev, s, 0));
  EXPECT_EQ(s.calls, calls);
  EXPECT_EQ(ev.knownDone(), b);
}

TEST(ReadbackEvents, AnOverwrittenSlotIsConservative) {
  EmulatedStream s(2);
  ReadbackEvents ev(2);
  uint64_t a = mark(ev, s);
  mark(ev, s);
  uint64_t c = mark(ev, s); // slot of `a` now holds `c`
  s.executed = a;           // the device passed `a` only
  // The slot says "not yet" for `a` (its newer marker is not done): late,
  // never wrong; a wait over-waits up to `c`.
  EXPECT_FALSE(poll(ev, s, a));
  wait(ev, s, a);
  EXPECT_EQ(s.executed, c);
  EXPECT_EQ(ev.knownDone(), c);
}

// Random marks, polls, waits and device progress: a poll's "done" is
// always true of the device, a wait always leaves its marker done.
TEST(ReadbackEvents, RandomSchedulesAreNeverWrong) {
  std::mt19937 rng(7);
  for (unsigned n : {1u, 2u, 3u, 8u}) {
    EmulatedStream s(n);
    ReadbackEvents ev(n);
    std::vector<uint64_t> made;
    for (int i = 0; i < 4000; ++i) {
      unsigned op = rng() % 4;
      if (op == 0 || made.empty()) {
        made.push_back(mark(ev, s));
      } else if (op == 1) {
        s.executed = std::min<uint64_t>(made.back(), s.executed + rng() % 3);
      } else {
        uint64_t m = made[rng() % made.size()];
        if (op == 2) {
          bool done = poll(ev, s, m);
          EXPECT_TRUE(!done || s.executed >= m) << "marker " << m << " of " << n;
          // Within the pool, a poll is exact.
          if (ev.holder(m) == m)
            EXPECT_EQ(done, s.executed >= m);
        } else {
          wait(ev, s, m);
          EXPECT_GE(s.executed, m);
        }
      }
      EXPECT_LE(ev.knownDone(), s.executed);
    }
  }
}

} // namespace
