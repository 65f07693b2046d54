//===- IRString.cpp - A name the IR refers to, in one pointer -------------===//
#include "mpc/IR/IRString.h"
#include "llvm/Support/ErrorHandling.h"
#include <cstdlib>
#include <ostream>

using namespace mpc;

// An owned copy is one heap block: 4 unused bytes, the length, the
// characters and a NUL. The characters start 8 bytes in, so they are 8-byte
// aligned (malloc aligns to 16) and the pointer's low bit is free for kOwned.
uintptr_t IRString::copyOf(llvm::StringRef s) {
  if (s.empty())
    return 0;
  if (s.size() > UINT32_MAX)
    llvm::report_fatal_error("mpc: a name of 4 GiB or more");
  char *block = static_cast<char *>(std::malloc(8 + s.size() + 1));
  if (!block)
    llvm::report_bad_alloc_error("out of memory copying a name");
  uint32_t n = static_cast<uint32_t>(s.size());
  std::memcpy(block + 4, &n, sizeof n);
  std::memcpy(block + 8, s.data(), s.size());
  block[8 + s.size()] = '\0';
  return reinterpret_cast<uintptr_t>(block + 8) | kOwned;
}

void IRString::freeOwned() { std::free(const_cast<char *>(chars()) - 8); }

std::ostream &mpc::operator<<(std::ostream &os, const IRString &s) {
  return os.write(s.data(), static_cast<std::streamsize>(s.size()));
}
