//===- Readback.h - Non-blocking device-to-host copies for logs --*- C++ -*-===//
//
// A training step's loss, loss scale and skip flag are read by the host for
// logs, never to decide the next step, so the host must not wait for them.
// A ReadbackChannel is the backend-specific half: host memory to copy into
// (pinned on a GPU), an asynchronous copy ordered on a stream, and markers
// the host can poll. A CUDA backend implements exactly that
// (cudaHostAlloc, cudaMemcpyAsync, cudaEventRecord/Query/Synchronize); the
// CPU's copies are plain reads, done when they return (createSyncReadback,
// Backend::createReadback's default). Besides the logged values, a record
// carries the step's kernel error record (Executor::errorRecord), so a
// data-dependent error is found when the host takes the step's record
// (docs/backends.md, "Deferred errors").
//
// ReadbackRing is the backend-neutral half: `capacity` records of fixed
// fields; the step that made a record queues its copies and commits it,
// and the host takes records oldest first once their copies have landed.
// A slot is reused only after the host took its record, so a late reader
// never sees a newer step's bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_READBACK_H
#define MPC_RUNTIME_READBACK_H

#include "mpc/Runtime/Backend.h"
#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace mpc {

/// The copies a backend makes for a ReadbackRing.
class ReadbackChannel {
public:
  virtual ~ReadbackChannel();
  /// Host memory the copies land in (page-locked on a GPU); 64-byte aligned.
  virtual void *allocateHost(size_t bytes) = 0;
  virtual void releaseHost(void *p) = 0;
  /// Queues a copy of `bytes` from device memory `src` to host memory `dst`,
  /// ordered on `stream` after the work queued on it before.
  virtual void copyAsync(void *dst, const void *src, size_t bytes, Stream stream) = 0;
  /// The other direction, for StagingRing: queues a copy of `bytes` from
  /// host memory `src` (allocateHost's) to device memory `dst`, ordered on
  /// `stream`. `src` is read when the copy runs: it must stay unchanged until
  /// a marker made after the copy is reached.
  virtual void uploadAsync(void *dst, const void *src, size_t bytes, Stream stream) = 0;
  /// A marker for the point after everything queued on `stream` so far.
  virtual uint64_t mark(Stream stream) = 0;
  /// Whether the work before `marker` has finished; never blocks.
  virtual bool reached(uint64_t marker) = 0;
  /// Blocks until the work before `marker` has finished.
  virtual void wait(uint64_t marker) = 0;
};

/// The channel of a backend without one of its own: copyAsync is
/// copyToHost into ordinary memory and a marker is reached once its stream
/// was synchronized (at once on the CPU, whose copies are done when they
/// return).
std::unique_ptr<ReadbackChannel> createSyncReadback(Backend &backend);

/// A ring of host records, each a fixed list of fields, filled by a channel.
class ReadbackRing {
public:
  ReadbackRing(ReadbackChannel &channel, llvm::ArrayRef<size_t> fieldBytes, unsigned capacity);
  ~ReadbackRing();
  ReadbackRing(const ReadbackRing &) = delete;
  ReadbackRing &operator=(const ReadbackRing &) = delete;

  unsigned capacity() const { return unsigned(slots.size()); }
  /// Records begun and not yet taken.
  unsigned size() const { return count; }
  bool full() const { return count == slots.size(); }

  /// Starts the record `tag` (a step number) in the next free slot; the ring
  /// must not be full (take() the oldest first).
  void begin(uint64_t tag);
  /// Queues the copy of field `field` of the record begun last from device
  /// memory `src` (the field's size).
  void copy(unsigned field, const void *src, Stream stream);
  /// Closes the record begun last: it is ready once the work queued on
  /// `stream` so far has finished.
  void commit(Stream stream);

  /// The oldest record, or false when there is none or (unless `wait`) its
  /// copies have not landed yet.
  bool ready(bool wait);
  /// The oldest record's tag and fields (after ready() said true).
  uint64_t tag() const;
  const void *field(unsigned field) const;
  template <typename T> T fieldAs(unsigned f) const {
    T v;
    std::memcpy(&v, field(f), sizeof(T));
    return v;
  }
  /// Frees the oldest record's slot.
  void take();

private:
  struct Slot {
    uint64_t tag = 0, marker = 0;
    bool committed = false;
  };
  ReadbackChannel &channel;
  /// Per field: its offset in a record and its size.
  std::vector<size_t> offsets, sizes;
  size_t recordBytes = 0;
  uint8_t *host = nullptr;
  std::vector<Slot> slots;
  unsigned head = 0, count = 0;
  uint8_t *recordData(unsigned slot) const { return host + size_t(slot) * recordBytes; }
};

/// Host memory for the host-to-device copies made every step (the trainer's
/// batch on a device backend): `capacity` slots of `slotBytes` of the
/// channel's host memory (page-locked on a GPU, so that the copy is a true
/// asynchronous transfer instead of one the driver stages synchronously
/// from pageable memory). The host fills the slot acquire() hands out,
/// queues copies from it (upload) and commits it; a slot is handed out
/// again only once the copies queued from it have finished (its marker is
/// reached), so the host never overwrites bytes a queued copy still reads.
/// That is the only place the host may wait.
class StagingRing {
public:
  StagingRing(ReadbackChannel &channel, size_t slotBytes, unsigned capacity);
  ~StagingRing();
  StagingRing(const StagingRing &) = delete;
  StagingRing &operator=(const StagingRing &) = delete;
  unsigned capacity() const { return unsigned(slots.size()); }
  size_t slotBytes() const { return bytesPerSlot; }
  /// The next slot's memory (64-byte aligned), after the copies queued from
  /// it before have finished; waits for them when they have not (counted by
  /// waits()). The slot acquired before must have been committed.
  uint8_t *acquire();
  /// Queues a copy of `bytes` at `offset` of the slot acquired last to
  /// device memory `dst`, on `stream`.
  void upload(void *dst, size_t offset, size_t bytes, Stream stream);
  /// Closes the slot acquired last: free again once the work queued on
  /// `stream` so far has finished.
  void commit(Stream stream);
  /// How many acquire() calls had to wait for a copy still in flight.
  uint64_t waits() const { return waitCount; }

private:
  struct Slot {
    uint64_t marker = 0;
    bool inFlight = false;
  };
  ReadbackChannel &channel;
  size_t bytesPerSlot = 0;
  uint8_t *host = nullptr;
  std::vector<Slot> slots;
  unsigned next = 0;
  int current = -1; ///< the slot acquired and not yet committed
  uint64_t waitCount = 0;
};

} // namespace mpc

#endif // MPC_RUNTIME_READBACK_H
