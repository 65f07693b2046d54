//===- LargeAlloc.cpp - Memory for the IR's big arrays and arenas ---------===//
#include "mpc/Support/LargeAlloc.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MemAlloc.h"

#include <cstdlib>
#include <sys/mman.h>

using namespace mpc;

void *mpc::allocateLarge(size_t bytes, bool zeroed) {
  if (bytes >= kHugePageThreshold) {
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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
    munmap(p, bytes);
  else
    std::free(p);
}
