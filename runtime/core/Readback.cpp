//===- Readback.cpp - The readback ring and the synchronous channel ----------===//
#include "mpc/Runtime/Readback.h"
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstdlib>

using namespace mpc;

ReadbackChannel::~ReadbackChannel() = default;

namespace {
/// The default channel (Backend::createReadback): the backend's own copies
/// into ordinary host memory. A marker remembers its stream; it is reached
/// once synchronize(stream) returned, which costs nothing on a backend whose
/// work is done when it is queued (the CPU) and waits on any other.
class SyncReadback final : public ReadbackChannel {
public:
  explicit SyncReadback(Backend &b) : backend(b) {}
  void *allocateHost(size_t bytes) override {
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void releaseHost(void *p) override { std::free(p); }
  void copyAsync(void *dst, const void *src, size_t bytes, Stream stream) override {
    backend.copyToHost(dst, src, bytes, stream);
  }
  void uploadAsync(void *dst, const void *src, size_t bytes, Stream stream) override {
    backend.copyToDevice(dst, src, bytes, stream);
  }
  /// The marker is the stream itself: everything queued on it so far is
  /// done once it was synchronized.
  uint64_t mark(Stream stream) override { return uint64_t(uintptr_t(stream.handle)); }
  bool reached(uint64_t marker) override {
    wait(marker);
    return true;
  }
  void wait(uint64_t marker) override {
    backend.synchronize(Stream{reinterpret_cast<void *>(uintptr_t(marker))});
  }

private:
  Backend &backend;
};
} // namespace

std::unique_ptr<ReadbackChannel> mpc::createSyncReadback(Backend &backend) {
  return std::make_unique<SyncReadback>(backend);
}

ReadbackRing::ReadbackRing(ReadbackChannel &ch, llvm::ArrayRef<size_t> fieldBytes,
                           unsigned capacity)
    : channel(ch), slots(std::max(capacity, 1u)) {
  // Fields 8-byte aligned within a record, records 64-byte aligned.
  for (size_t b : fieldBytes) {
    offsets.push_back(recordBytes);
    recordBytes += (b + 7) / 8 * 8;
  }
  offsets.push_back(recordBytes); // the end: field k has offsets[k+1] - offsets[k] bytes
  recordBytes = std::max<size_t>((recordBytes + 63) / 64 * 64, 64);
  host = static_cast<uint8_t *>(channel.allocateHost(recordBytes * slots.size()));
  sizes.assign(fieldBytes.begin(), fieldBytes.end());
}

ReadbackRing::~ReadbackRing() {
  // Copies still in flight land in this memory: wait for them first.
  for (unsigned i = 0; i < count; ++i) {
    const Slot &s = slots[(head + i) % slots.size()];
    if (s.committed)
      channel.wait(s.marker);
  }
  channel.releaseHost(host);
}

void ReadbackRing::begin(uint64_t tag) {
  assert(!full() && "take() the oldest record first");
  assert((count == 0 || slots[(head + count - 1) % slots.size()].committed) &&
         "commit() the record begun before");
  Slot &s = slots[(head + count) % slots.size()];
  s = Slot{tag, 0, false};
  ++count;
}

void ReadbackRing::copy(unsigned field, const void *src, Stream stream) {
  assert(count && field < sizes.size());
  unsigned slot = (head + count - 1) % slots.size();
  channel.copyAsync(recordData(slot) + offsets[field], src, sizes[field], stream);
}

void ReadbackRing::commit(Stream stream) {
  assert(count);
  Slot &s = slots[(head + count - 1) % slots.size()];
  s.marker = channel.mark(stream);
  s.committed = true;
}

bool ReadbackRing::ready(bool wait) {
  if (!count || !slots[head].committed)
    return false;
  if (wait) {
    channel.wait(slots[head].marker);
    return true;
  }
  return channel.reached(slots[head].marker);
}

uint64_t ReadbackRing::tag() const {
  assert(count);
  return slots[head].tag;
}

const void *ReadbackRing::field(unsigned f) const {
  assert(count && f < sizes.size());
  return recordData(head) + offsets[f];
}

void ReadbackRing::take() {
  assert(count);
  head = (head + 1) % slots.size();
  --count;
}

StagingRing::StagingRing(ReadbackChannel &ch, size_t slotBytes, unsigned capacity)
    : channel(ch), bytesPerSlot(std::max<size_t>((slotBytes + 63) / 64 * 64, 64)),
      slots(std::max(capacity, 1u)) {
  host = static_cast<uint8_t *>(channel.allocateHost(bytesPerSlot * slots.size()));
}

StagingRing::~StagingRing() {
  // Copies still in flight read this memory: wait for them first.
  for (const Slot &s : slots)
    if (s.inFlight)
      channel.wait(s.marker);
  channel.releaseHost(host);
}

uint8_t *StagingRing::acquire() {
  assert(current < 0 && "commit() the slot acquired before");
  Slot &s = slots[next];
  if (s.inFlight && !channel.reached(s.marker)) {
    ++waitCount;
    channel.wait(s.marker);
  }
  s.inFlight = false;
  current = int(next);
  next = (next + 1) % unsigned(slots.size());
  return host + size_t(current) * bytesPerSlot;
}

void StagingRing::upload(void *dst, size_t offset, size_t bytes, Stream stream) {
  assert(current >= 0 && offset + bytes <= bytesPerSlot);
  if (bytes)
    channel.uploadAsync(dst, host + size_t(current) * bytesPerSlot + offset, bytes, stream);
}

void StagingRing::commit(Stream stream) {
  assert(current >= 0);
  Slot &s = slots[size_t(current)];
  s.marker = channel.mark(stream);
  s.inFlight = true;
  current = -1;
}
