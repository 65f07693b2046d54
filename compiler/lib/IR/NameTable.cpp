//===- NameTable.cpp - A model's names and what they are bound to ----------===//
#include "mpc/IR/NameTable.h"
#include "llvm/Support/ErrorHandling.h"
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
  Slot tag = tagOf(k.hash());
  for (uint32_t i = k.hash() & mask;; i = (i + 1) & mask) {
    Slot s = slots[i];
    if (!s)
      return nullptr;
    if (matches(s, tag, k))
      return &entryOf(s)->value;
  }
}

Value *&NameTable::insert(llvm::CachedHashStringRef k, bool &inserted) {
  // At most three quarters full, so every probe ends at an empty slot.
  if ((count + 1) * 4 > capacity() * 3)
    grow((count + 1) * 2);
  Slot tag = tagOf(k.hash());
  uint32_t i = k.hash() & mask;
  for (;; i = (i + 1) & mask) {
    Slot s = slots[i];
    if (!s)
      break;
    if (matches(s, tag, k)) {
      inserted = false;
      return entryOf(s)->value;
    }
  }
  Entry *e = addEntry(k);
  slots[i] = tag | reinterpret_cast<uintptr_t>(e);
  ++count;
  inserted = true;
  return e->value;
}

NameTable::Entry *NameTable::addEntry(llvm::CachedHashStringRef k) {
  // The table must not point into the caller's string: it keeps a copy.
  size_t bytes = entryBytes(k.size());
  if (chunks.empty() || chunks.back().capacity - chunks.back().used < bytes) {
    size_t cap = size_t(4096) << std::min<size_t>(chunks.size(), 16);
    cap = std::max(cap, bytes);
    chunks.push_back({std::unique_ptr<char[], LargeBlockDeleter>(
                          static_cast<char *>(allocateLarge(cap, false)), LargeBlockDeleter{cap}),
                      0, cap});
  }
  Chunk &c = chunks.back();
  auto *e = reinterpret_cast<Entry *>(c.data.get() + c.used);
  c.used += bytes;
  if (reinterpret_cast<uintptr_t>(e) & ~kAddressMask)
    llvm::report_fatal_error("mpc: a name table entry above 2^48");
  e->value = nullptr;
  e->hash = k.hash();
  e->size = k.size();
  char *chars = reinterpret_cast<char *>(e + 1);
  if (k.size())
    std::memcpy(chars, k.val().data(), k.size());
  chars[k.size()] = '\0';
  return e;
}

void NameTable::place(Entry *e) {
  uint32_t i = e->hash & mask;
  while (slots[i])
    i = (i + 1) & mask;
  slots[i] = tagOf(e->hash) | reinterpret_cast<uintptr_t>(e);
}

void NameTable::reserve(size_t n) {
  size_t want = count + n;
  if (want * 4 > capacity() * 3)
    grow(want * 4 / 3 + 1);
}

void NameTable::grow(size_t minCapacity) {
  size_t cap = llvm::PowerOf2Ceil(std::max<size_t>(minCapacity, 64));
  // Every probe of a large table lands on a random page: with 4 KiB pages
  // nearly each one (and each prefetch) also missed the TLB, so large tables
  // go on huge pages (allocateLarge). Zeroed slots are an empty table; the
  // old one is freed first, as the entries (walked in order) say everything.
  slots.reset();
  size_t bytes = cap * sizeof(Slot);
  slots = decltype(slots)(static_cast<Slot *>(allocateLarge(bytes, /*zeroed=*/true)),
                          LargeBlockDeleter{bytes});
  mask = static_cast<uint32_t>(cap - 1);
  for (const Chunk &c : chunks)
    for (size_t at = 0; at < c.used;) {
      auto *e = reinterpret_cast<Entry *>(c.data.get() + at);
      place(e);
      at += entryBytes(e->size);
    }
}
