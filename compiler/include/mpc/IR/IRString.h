//===- IRString.h - A name the IR refers to, in one pointer -----*- C++ -*-===//
//
// Node op types, domains and names, and value names, are read on every walk
// but nearly never written, and nearly all of them are copies of strings the
// model keeps anyway: its name table holds every value and node name, and a
// model has a handful of distinct op types and domains. A std::string spent
// 32 bytes on each (and a heap block for a name of 16 characters or more).
//
// An IRString is one pointer to NUL-terminated characters preceded by their
// length (a uint32_t), 8-byte aligned: the layout of a name-table entry's
// characters. It either borrows characters the model keeps (IRString::borrow,
// for code that knows they outlive it: the IR itself), or owns a heap copy
// (the low bit of the pointer set) of anything assigned to it. Copying an
// IRString always makes an owned copy, so a string copied into another model
// never points into the first one. It reads like a const std::string: it
// converts to llvm::StringRef and to std::string and compares with both.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_IR_IRSTRING_H
#define MPC_IR_IRSTRING_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string>

namespace mpc {

class IRString {
public:
  IRString() = default;
  IRString(const IRString &o) : bits(copyOf(o.ref())) {}
  IRString(IRString &&o) noexcept : bits(o.bits) { o.bits = 0; }
  explicit IRString(llvm::StringRef s) : bits(copyOf(s)) {}
  /// Implicit, so `cond ? "literal" : node.domain` reads as it did with a
  /// std::string (a std::string or StringRef stays explicit: the other way
  /// round is implicit already).
  IRString(const char *s) : bits(copyOf(s)) {}
  ~IRString() { release(); }

  IRString &operator=(const IRString &o) {
    if (this != &o)
      reset(copyOf(o.ref()));
    return *this;
  }
  IRString &operator=(IRString &&o) noexcept {
    if (this != &o) {
      reset(o.bits);
      o.bits = 0;
    }
    return *this;
  }
  IRString &operator=(llvm::StringRef s) {
    reset(copyOf(s));
    return *this;
  }
  IRString &operator=(const std::string &s) { return *this = llvm::StringRef(s); }
  IRString &operator=(const char *s) { return *this = llvm::StringRef(s); }
  void assign(const char *p, size_t n) { *this = llvm::StringRef(p, n); }

  /// Refers to `chars` without copying: NUL-terminated characters, 8-byte
  /// aligned, preceded by their length as a uint32_t, that outlive the
  /// result (and every IRString it is moved to). Null is the empty string.
  static IRString borrow(const char *chars) {
    IRString s;
    s.bits = reinterpret_cast<uintptr_t>(chars);
    return s;
  }
  /// True when this refers to characters it does not own.
  bool isBorrowed() const { return bits && !(bits & kOwned); }

  bool empty() const { return size() == 0; }
  size_t size() const { return bits ? reinterpret_cast<const uint32_t *>(chars())[-1] : 0; }
  const char *data() const { return bits ? chars() : ""; }
  const char *c_str() const { return data(); }
  llvm::StringRef ref() const { return llvm::StringRef(data(), size()); }
  std::string str() const { return std::string(data(), size()); }
  operator llvm::StringRef() const { return ref(); }
  operator std::string() const { return str(); }
  const char *begin() const { return data(); }
  const char *end() const { return data() + size(); }
  char operator[](size_t i) const { return data()[i]; }
  static constexpr size_t npos = std::string::npos;
  /// As std::string's (npos when absent).
  size_t rfind(llvm::StringRef s, size_t from = npos) const {
    size_t n = size();
    if (s.size() > n)
      return npos;
    size_t last = std::min(from, n - s.size());
    return ref().substr(0, last + s.size()).rfind(s);
  }
  size_t find(llvm::StringRef s, size_t from = 0) const { return ref().find(s, from); }
  std::string substr(size_t pos, size_t n = npos) const { return ref().substr(pos, n).str(); }
  void clear() { reset(0); }

  friend bool operator==(const IRString &a, const IRString &b) { return a.ref() == b.ref(); }
  friend bool operator==(const IRString &a, llvm::StringRef b) { return a.ref() == b; }
  friend bool operator==(llvm::StringRef a, const IRString &b) { return a == b.ref(); }
  friend bool operator==(const IRString &a, const std::string &b) { return a.ref() == b; }
  friend bool operator==(const std::string &a, const IRString &b) { return b.ref() == a; }
  friend bool operator==(const IRString &a, const char *b) { return a.ref() == b; }
  friend bool operator==(const char *a, const IRString &b) { return b.ref() == a; }
  template <typename T> friend bool operator!=(const IRString &a, const T &b) { return !(a == b); }
  template <typename T, typename = std::enable_if_t<!std::is_same<T, IRString>::value>>
  friend bool operator!=(const T &a, const IRString &b) {
    return !(b == a);
  }
  friend bool operator<(const IRString &a, const IRString &b) { return a.ref() < b.ref(); }

  friend std::string operator+(const IRString &a, llvm::StringRef b) {
    std::string r = a.str();
    r.append(b.data(), b.size());
    return r;
  }
  friend std::string operator+(const IRString &a, const std::string &b) { return a.str() + b; }
  friend std::string operator+(const IRString &a, const char *b) { return a.str() + b; }
  friend std::string operator+(const IRString &a, const IRString &b) { return a.str() + b.ref().str(); }
  friend std::string operator+(const std::string &a, const IRString &b) {
    return a + b.ref().str();
  }
  friend std::string operator+(const char *a, const IRString &b) { return a + b.ref().str(); }
  friend std::string operator+(char a, const IRString &b) { return a + b.ref().str(); }
  friend std::string operator+(const IRString &a, char b) { return a.str() + b; }
  friend std::string &operator+=(std::string &a, const IRString &b) {
    return a.append(b.data(), b.size());
  }

  friend llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const IRString &s) {
    return os << s.ref();
  }
  friend std::ostream &operator<<(std::ostream &os, const IRString &s);

private:
  static constexpr uintptr_t kOwned = 1;
  /// 0 for the empty string; else the characters' address, | kOwned when
  /// they are this object's heap copy.
  uintptr_t bits = 0;

  const char *chars() const { return reinterpret_cast<const char *>(bits & ~kOwned); }
  /// An owned copy of `s` (0 when empty).
  static uintptr_t copyOf(llvm::StringRef s);
  void release() {
    if (bits & kOwned)
      freeOwned();
  }
  void freeOwned();
  void reset(uintptr_t b) {
    release();
    bits = b;
  }
};

} // namespace mpc

#endif // MPC_IR_IRSTRING_H
