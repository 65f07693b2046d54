//===- LargeAlloc.h - Memory for the IR's big arrays and arenas -*- C++ -*-===//
//
// A 300k-node model touches a few hundred MB of fresh memory, and with 4 KiB
// pages a quarter of the rewrite's time went to page faults, and random
// probes of big tables missed the TLB. Blocks of kHugePageThreshold bytes or
// more are therefore anonymous mappings that the kernel is asked to back
// with 2 MiB pages (madvise(MADV_HUGEPAGE); a no-op where transparent huge
// pages are off). Smaller blocks come from the heap, so small models and
// small nested graphs stay small.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_SUPPORT_LARGEALLOC_H
#define MPC_SUPPORT_LARGEALLOC_H

#include "llvm/Support/Allocator.h"

#include <cstddef>
#include <vector>

namespace mpc {

constexpr size_t kHugePageThreshold = size_t(4) << 20;

/// `bytes` bytes aligned for any type, zero-filled when `zeroed` (a mapping
/// is zero-filled anyway). Never null: running out of memory is fatal.
void *allocateLarge(size_t bytes, bool zeroed);
/// Frees a block of allocateLarge, given the same size.
void deallocateLarge(void *p, size_t bytes);

/// Frees a block of allocateLarge, for std::unique_ptr.
struct LargeBlockDeleter {
  size_t bytes = 0;
  void operator()(void *p) const { deallocateLarge(p, bytes); }
};

/// Slab source for bump allocators (see IRArena).
class LargeBlockAllocator : public llvm::AllocatorBase<LargeBlockAllocator> {
public:
  void *Allocate(size_t size, size_t /*alignment*/) { return allocateLarge(size, false); }
  void Deallocate(const void *p, size_t size, size_t /*alignment*/) {
    deallocateLarge(const_cast<void *>(p), size);
  }
  using AllocatorBase<LargeBlockAllocator>::Allocate;
  using AllocatorBase<LargeBlockAllocator>::Deallocate;
};

/// A std allocator over allocateLarge, for vectors that can grow to many MB
/// (the importer's views of a graph): std::vector<T, LargeStlAllocator<T>>.
template <typename T> struct LargeStlAllocator {
  using value_type = T;
  LargeStlAllocator() = default;
  template <typename U> LargeStlAllocator(const LargeStlAllocator<U> &) {}
  T *allocate(size_t n) { return static_cast<T *>(allocateLarge(n * sizeof(T), false)); }
  void deallocate(T *p, size_t n) { deallocateLarge(p, n * sizeof(T)); }
  template <typename U> bool operator==(const LargeStlAllocator<U> &) const { return true; }
  template <typename U> bool operator!=(const LargeStlAllocator<U> &) const { return false; }
};
template <typename T> using LargeVector = std::vector<T, LargeStlAllocator<T>>;

/// The bump allocator of nodes, values and names: each slab is twice the
/// previous one (4 KiB, 8 KiB, ...), so a graph of ten nodes takes a page and
/// one of a million a few dozen slabs, the large ones on huge pages.
using IRArena = llvm::BumpPtrAllocatorImpl<LargeBlockAllocator, 4096, 4096, 1>;

} // namespace mpc

#endif // MPC_SUPPORT_LARGEALLOC_H
