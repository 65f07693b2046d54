//===- NameTable.cpp - A model's names and what they are bound to ----------===//
#include "mpc/IR/NameTable.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/xxhash.h"
#include <algorithm>
#include <cstring>

using namespace mpc;

llvm::CachedHashStringRef NameTable::key(llvm::StringRef name) {
  return llvm::CachedHashStringRef(name, static_cast<uint32_t>(llvm::xxHash64(name)));
}

Value **NameTable::find(llvm::CachedHashStringRef k) const {
  if (!slots)
    return nullptr;
  for (uint32_t i = k.hash() & mask;; i = (i + 1) & mask) {
    Slot &s = slots[i];
    if (!s.chars)
      return nullptr;
    if (matches(s, k))
      return &s.value;
  }
}

Value *&NameTable::insert(llvm::CachedHashStringRef k, bool &inserted) {
  // At most three quarters full, so every probe ends at an empty slot.
  if ((count + 1) * 4 > capacity() * 3)
    grow((count + 1) * 2);
  uint32_t i = k.hash() & mask;
  for (;; i = (i + 1) & mask) {
    Slot &s = slots[i];
    if (!s.chars)
      break;
    if (matches(s, k)) {
      inserted = false;
      return s.value;
    }
  }
  // The table must not point into the caller's string: it keeps a copy (a
  // non-null pointer even for the empty name, which marks the slot used).
  char *copy = chars.Allocate<char>(k.size() + 1);
  if (k.size())
    std::memcpy(copy, k.val().data(), k.size());
  copy[k.size()] = '\0';
  Slot &s = slots[i];
  s.chars = copy;
  s.size = k.size();
  s.hash = k.hash();
  s.value = nullptr;
  ++count;
  inserted = true;
  return s.value;
}

void NameTable::reserve(size_t n) {
  size_t want = count + n;
  if (want * 4 > capacity() * 3)
    grow(want * 4 / 3 + 1);
}

void NameTable::grow(size_t minCapacity) {
  size_t cap = llvm::PowerOf2Ceil(std::max<size_t>(minCapacity, 64));
  size_t oldCap = capacity();
  auto old = std::move(slots);
  // Every probe of a large table lands on a random page: with 4 KiB pages
  // nearly each one (and each prefetch) also missed the TLB, so large tables
  // go on huge pages (allocateLarge). Zeroed slots are an empty table.
  size_t bytes = cap * sizeof(Slot);
  slots = decltype(slots)(static_cast<Slot *>(allocateLarge(bytes, /*zeroed=*/true)),
                          LargeBlockDeleter{bytes});
  mask = static_cast<uint32_t>(cap - 1);
  for (size_t j = 0; j < oldCap; ++j) {
    const Slot &s = old[j];
    if (!s.chars)
      continue;
    uint32_t i = s.hash & mask;
    while (slots[i].chars)
      i = (i + 1) & mask;
    slots[i] = s;
  }
}
