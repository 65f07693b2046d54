//===- NameTable.h - A model's names and what they are bound to -*- C++ -*-===//
//
// Every value and node name of a model, each bound to a Value or to nothing.
// Open addressing with linear probing over 8-byte slots. Each name is copied
// once, with its hash, length and binding, into an entry of the table's own
// chunks (appended in insertion order); a slot holds the entry's address and
// 16 bits of a second hash of the name, so a probe reads a name's entry only
// when those bits match (nearly always the name sought). Growing the table
// walks the entries in order rather than the old slots, and a binding never
// moves. Unlike DenseMap it can prefetch the slot a future key will probe:
// import inserts and looks up hundreds of thousands of names whose slots are
// all cache misses, and prefetching a few nodes ahead overlaps those misses.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_NAMETABLE_H
#define MPC_IR_NAMETABLE_H

#include "mpc/Support/LargeAlloc.h"
#include "llvm/ADT/CachedHashString.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace mpc {

class Value;

class NameTable {
public:
  /// A name with the hash the table uses (see hashName in NameTable.cpp).
  static llvm::CachedHashStringRef key(llvm::StringRef name);

  /// The binding of `k`, null when the name is not in the table.
  Value **find(llvm::CachedHashStringRef k) const;
  /// The binding of `k`, inserting the name (bound to nothing) when it is
  /// new; `inserted` says which. A binding stays where it is for as long as
  /// the table lives.
  Value *&insert(llvm::CachedHashStringRef k, bool &inserted);
  /// Room for `n` more names without growing.
  void reserve(size_t n);
  /// Starts loading the slot `k` will probe first.
  void prefetch(llvm::CachedHashStringRef k) const {
    if (slots)
      __builtin_prefetch(&slots[k.hash() & mask], /*rw=*/1);
  }
  size_t size() const { return count; }
  /// The table's copy of the name whose binding is `binding` (a reference
  /// insert or find returned): NUL-terminated, 8-byte aligned, its length in
  /// the uint32_t before it (what IRString::borrow takes). It stays where it
  /// is for as long as the table lives.
  static const char *charsOf(Value *const &binding) {
    return reinterpret_cast<const Entry *>(&binding)->chars();
  }

private:
  /// A name's record in the chunks, 8-byte aligned; the name's characters
  /// (and a NUL) follow it.
  struct Entry {
    Value *value;
    uint32_t hash;
    uint32_t size;
    const char *chars() const { return reinterpret_cast<const char *>(this + 1); }
  };
  /// A slot: 0 when empty, else the entry's address (below 2^48) with the
  /// name's tag in the top 16 bits.
  using Slot = uint64_t;
  static constexpr unsigned kTagShift = 48;
  static constexpr Slot kAddressMask = (Slot(1) << kTagShift) - 1;
  static Slot tagOf(uint32_t hash) {
    // A multiplicative mix: names that probe the same slots (the same low
    // bits) still get different tags.
    return Slot((hash * 0x9E3779B1u) >> 16) << kTagShift;
  }
  static Entry *entryOf(Slot s) { return reinterpret_cast<Entry *>(s & kAddressMask); }
  static size_t entryBytes(uint32_t nameSize) {
    return (sizeof(Entry) + nameSize + 1 + 7) & ~size_t(7);
  }

  /// Zeroed slots (an all-zero slot is empty); see grow().
  std::unique_ptr<Slot[], LargeBlockDeleter> slots;
  uint32_t mask = 0; ///< capacity - 1 (capacity a power of two), 0 when empty
  size_t count = 0;
  /// The entries, in insertion order: chunks that double from 4 KiB.
  struct Chunk {
    std::unique_ptr<char[], LargeBlockDeleter> data;
    size_t used = 0, capacity = 0;
  };
  std::vector<Chunk> chunks;

  size_t capacity() const { return slots ? size_t(mask) + 1 : 0; }
  void grow(size_t minCapacity);
  /// A new entry for `k`, bound to nothing.
  Entry *addEntry(llvm::CachedHashStringRef k);
  /// Puts `e` in the first empty slot of its probe sequence.
  void place(Entry *e);
  static bool matches(Slot s, Slot tag, llvm::CachedHashStringRef k) {
    if ((s & ~kAddressMask) != tag)
      return false;
    const Entry *e = entryOf(s);
    return e->hash == k.hash() && e->size == k.size() &&
           (k.size() == 0 || std::memcmp(e->chars(), k.val().data(), k.size()) == 0);
  }
};

} // namespace mpc

#endif // MPC_IR_NAMETABLE_H
