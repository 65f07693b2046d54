//===- LargeAlloc.cpp - Memory for the IR's big arrays and arenas ---------===//
#include "mpc/Support/LargeAlloc.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MemAlloc.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

using namespace mpc;

namespace {

/// Mapped blocks that were freed, kept for the next large requests. On the
/// machines measured in docs/perf.md the first write to a fresh page costs
/// about as much as the work done in it (the kernel clears it), while a
/// block already written is reused for free. A rewrite frees big blocks
/// early (the importer's views, each outgrown name table) and asks for big
/// blocks late (arena slabs for new nodes, the export's output blocks).
/// A request the caller will fill (a table, a view, an output block; not
/// an arena slab, most of which may stay untouched, so a fresh mapping of it
/// costs nothing until used) takes the smallest cached block that holds it,
/// and the rest of that block stays cached; pieces too small for any large request are
/// returned to the kernel, and so is the oldest block past kMaxBlocks.
class BlockCache {
public:
  void *take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    size_t best = blocks.size();
    for (size_t i = 0; i < blocks.size(); ++i)
      if (blocks[i].bytes >= bytes && (best == blocks.size() || blocks[i].bytes < blocks[best].bytes))
        best = i;
    if (best == blocks.size())
      return nullptr;
    Block b = blocks[best];
    blocks.erase(blocks.begin() + best);
    if (b.bytes - bytes >= kHugePageThreshold)
      blocks.push_back({b.p + bytes, b.bytes - bytes});
    else if (b.bytes > bytes)
      munmap(b.p + bytes, b.bytes - bytes);
    return b.p;
  }
  void put(char *p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    if (blocks.size() == kMaxBlocks) {
      munmap(blocks.front().p, blocks.front().bytes);
      blocks.erase(blocks.begin());
    }
    blocks.push_back({p, bytes});
  }

private:
  static constexpr size_t kMaxBlocks = 64;
  struct Block {
    char *p;
    size_t bytes;
  };
  std::mutex mu;
  std::vector<Block> blocks;
};

BlockCache &blockCache() {
  // Never destroyed: blocks freed during static destruction still find it.
  static BlockCache *cache = new BlockCache;
  return *cache;
}

/// Mapped blocks are whole pages, so any piece of one can be unmapped alone.
size_t mappedSize(size_t bytes) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

} // namespace

void *mpc::allocateLarge(size_t bytes, bool zeroed, bool filled) {
  if (bytes >= kHugePageThreshold) {
    bytes = mappedSize(bytes);
    void *p = filled ? blockCache().take(bytes) : nullptr;
    if (p) {
      if (zeroed)
        std::memset(p, 0, bytes);
      return p;
    }
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      llvm::report_bad_alloc_error("mpc: cannot map memory");
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
  }
  return zeroed ? llvm::safe_calloc(bytes ? bytes : 1, 1) : llvm::safe_malloc(bytes ? bytes : 1);
}

void mpc::deallocateLarge(void *p, size_t bytes) {
  if (!p)
    return;
  if (bytes >= kHugePageThreshold)
    blockCache().put(static_cast<char *>(p), mappedSize(bytes));
  else
    std::free(p);
}
