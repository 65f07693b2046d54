//===- NameTable.cpp - A model's names and what they are bound to ----------===//
#include "mpc/IR/NameTable.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"
#include <algorithm>
#include <cstring>

using namespace mpc;

/// Eight bytes of `p`, in the host's order.
static uint64_t load64(const char *p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
static uint64_t load32(const char *p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

/// Multiplies and folds the 128-bit product: every input bit reaches many
/// output bits in one step.
static uint64_t mix(uint64_t a, uint64_t b) {
  __uint128_t r = static_cast<__uint128_t>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}

/// The table's hash. Most names are short ("loop7/v", "/layer.3/MatMul_output_0"),
/// and each is hashed once or twice per run on its way into the table: a name
/// of up to 16 bytes is read as two (possibly overlapping) words and mixed
/// once, a longer one eight bytes a step. Both the low bits (the slot) and the
/// high bits (the tag, see tagOf) depend on every byte.
static uint32_t hashName(llvm::StringRef name) {
  constexpr uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
                     k2 = 0x8ebc6af09c88c6e3ull;
  const char *p = name.data();
  size_t n = name.size();
  uint64_t a, b, h = k0 ^ n;
  if (n <= 16) {
    if (n >= 8) {
      a = load64(p);
      b = load64(p + n - 8);
    } else if (n >= 4) {
      a = load32(p);
      b = load32(p + n - 4);
    } else if (n > 0) {
      a = (uint64_t(uint8_t(p[0])) << 16) | (uint64_t(uint8_t(p[n / 2])) << 8) | uint8_t(p[n - 1]);
      b = 0;
    } else {
      a = b = 0;
    }
  } else {
    size_t i = 0;
    for (; i + 16 < n; i += 16)
      h = mix(load64(p + i) ^ k1, load64(p + i + 8) ^ h);
    a = load64(p + n - 16);
    b = load64(p + n - 8);
  }
  h = mix(a ^ k1, b ^ h);
  return static_cast<uint32_t>(mix(h ^ k2, k1 ^ n) >> 7);
}

llvm::CachedHashStringRef NameTable::key(llvm::StringRef name) {
  return llvm::CachedHashStringRef(name, hashName(name));
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
