//===- Scratch.cpp - Per-thread scratch buffers for CPU kernels -----------===//
//
// One growable aligned allocation per (thread, slot); it grows
// geometrically and is released when the thread exits.
//
//===----------------------------------------------------------------------===//

#include "Scratch.h"

#include <cstdlib>
#include <memory>

namespace mpc {
namespace cpu {

namespace {
struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};
struct Buffer {
  std::unique_ptr<void, FreeDeleter> data;
  size_t capacity = 0;
};
} // namespace

void *scratchBytes(ScratchSlot slot, size_t bytes) {
  thread_local Buffer buffers[unsigned(ScratchSlot::Count)];
  Buffer &b = buffers[unsigned(slot)];
  if (bytes > b.capacity) {
    size_t capacity = bytes + bytes / 2;
    capacity = (capacity + 63) / 64 * 64;
    b.data.reset();
    void *p = std::aligned_alloc(64, capacity);
    if (!p)
      std::abort();
    b.data.reset(p);
    b.capacity = capacity;
  }
  return b.data.get();
}

} // namespace cpu
} // namespace mpc
