//===- ReadbackEvents.h - Which CUDA event a readback marker uses -*- C++ -*-===//
//
// The CUDA backend's ReadbackChannel (Readback.h) marks points of a stream
// with CUDA events: marker m (1, 2, ... in the order mark() made them) is
// recorded on event slot (m - 1) % n of a fixed pool of n events, made once,
// so that marking a step costs no allocation. A slot is recorded again n
// markers later; from then on it stands for the newer marker. Because the
// markers of one channel are recorded on one stream, in order, a newer
// marker being done implies that every older one is: polling or waiting on
// the slot of an overwritten marker is still correct, only conservative (a
// wait may wait longer, a poll may answer "not yet" a little longer). The
// channel remembers the newest marker seen done, so that a marker already
// known done costs no CUDA call at all.
//
// Pure host logic, tested without a GPU in tests/cuda_host
// (ReadbackEventsTest.cpp); CudaBackend.cpp only hands its answers to
// cudaEventRecord, cudaEventQuery and cudaEventSynchronize.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_READBACKEVENTS_H
#define MPC_RUNTIME_CUDA_READBACKEVENTS_H

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace mpc {
namespace cuda {

class ReadbackEvents {
public:
  /// What to do for a marker the host polls or waits for.
  struct Probe {
    /// Known done already: no CUDA call.
    bool done = false;
    /// Otherwise: the event slot to query or synchronize, and the marker
    /// that slot was last recorded for (the marker itself, or a newer one
    /// when the slot was recorded again).
    unsigned slot = 0;
    uint64_t covers = 0;
  };

  explicit ReadbackEvents(unsigned slots) : n(std::max(slots, 1u)) {}

  unsigned slots() const { return n; }
  /// Makes the next marker; record its event on slot slotOf(marker).
  uint64_t next() { return ++last; }
  unsigned slotOf(uint64_t marker) const {
    assert(marker > 0);
    return unsigned((marker - 1) % n);
  }
  /// The marker slotOf(marker) holds now: `marker` while fewer than n
  /// markers were made after it, else the newest one recorded on that slot.
  uint64_t holder(uint64_t marker) const {
    assert(marker > 0 && marker <= last);
    return marker + (last - marker) / n * n;
  }
  /// How to learn whether `marker` (0: the empty marker) is done.
  Probe probe(uint64_t marker) const {
    Probe p;
    if (marker == 0 || marker <= doneUpTo) {
      p.done = true;
      return p;
    }
    p.slot = slotOf(marker);
    p.covers = holder(marker);
    return p;
  }
  /// The event of slot `probe.slot` was found complete (a query or a wait):
  /// every marker up to `probe.covers` is done.
  void completed(const Probe &probe) { doneUpTo = std::max(doneUpTo, probe.covers); }
  /// The newest marker known done (0: none yet).
  uint64_t knownDone() const { return doneUpTo; }

private:
  unsigned n;
  uint64_t last = 0, doneUpTo = 0;
};

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_READBACKEVENTS_H
