//===- NameTable.h - A model's names and what they are bound to -*- C++ -*-===//
//
// Every value and node name of a model, each bound to a Value or to nothing.
// Open addressing with linear probing over 24-byte slots; the characters of
// every key are copied once into a bump allocator. Unlike DenseMap it can
// prefetch the slot a future key will probe: import inserts and looks up
// hundreds of thousands of names whose slots are all cache misses, and
// prefetching a few nodes ahead overlaps those misses.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_NAMETABLE_H
#define MPC_IR_NAMETABLE_H

#include "mpc/Support/LargeAlloc.h"
#include "llvm/ADT/CachedHashString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Allocator.h"
#include <cstdint>
#include <cstring>
#include <memory>

namespace mpc {

class Value;

class NameTable {
public:
  /// A name with the hash the table uses (xxHash64, eight bytes a step).
  static llvm::CachedHashStringRef key(llvm::StringRef name);

  /// The binding slot of `k`, null when the name is not in the table.
  Value **find(llvm::CachedHashStringRef k) const;
  /// The binding slot of `k`, inserting the name (bound to nothing) when it
  /// is new; `inserted` says which. Valid until the next insertion.
  Value *&insert(llvm::CachedHashStringRef k, bool &inserted);
  /// Room for `n` more names without growing.
  void reserve(size_t n);
  /// Starts loading the slot `k` will probe first.
  void prefetch(llvm::CachedHashStringRef k) const {
    if (slots)
      __builtin_prefetch(&slots[k.hash() & mask], /*rw=*/1);
  }
  size_t size() const { return count; }

private:
  struct Slot {
    const char *chars = nullptr; ///< null: empty slot
    uint32_t size = 0;
    uint32_t hash = 0;
    Value *value = nullptr;
  };
  /// Zeroed slots (an all-zero Slot is empty); see grow().
  std::unique_ptr<Slot[], LargeBlockDeleter> slots;
  uint32_t mask = 0; ///< capacity - 1 (capacity a power of two), 0 when empty
  size_t count = 0;
  IRArena chars;

  size_t capacity() const { return slots ? size_t(mask) + 1 : 0; }
  void grow(size_t minCapacity);
  static bool matches(const Slot &s, llvm::CachedHashStringRef k) {
    return s.hash == k.hash() && s.size == k.size() &&
           (k.size() == 0 || std::memcmp(s.chars, k.val().data(), k.size()) == 0);
  }
};

} // namespace mpc

#endif // MPC_IR_NAMETABLE_H
