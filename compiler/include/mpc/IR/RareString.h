//===- RareString.h - A string field that is nearly always empty -*- C++ -*-===//
//
// Doc strings, unknown protobuf fields, denotations and symbolic dimension
// names are empty in almost every node, value and tensor of a model, yet a
// std::string spends 32 bytes on each of them. A RareString is one pointer,
// null while empty, and owns a std::string once set. It reads like a const
// std::string (and converts to one); writes go through assignment.
//
// Import allocates these objects by the hundred thousand, so their size is
// memory touched (page faults) and cache lines loaded on every walk.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_IR_RARESTRING_H
#define MPC_IR_RARESTRING_H

#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>

namespace mpc {

class RareString {
public:
  RareString() = default;
  RareString(const RareString &o) {
    if (o.p)
      p = std::make_unique<std::string>(*o.p);
  }
  RareString(RareString &&) noexcept = default;
  RareString(std::string s) { assign(std::move(s)); }
  RareString(llvm::StringRef s) { assign(s.str()); }
  RareString(const char *s) { assign(std::string(s)); }

  RareString &operator=(const RareString &o) {
    if (!o.p)
      p.reset();
    else if (this != &o)
      assign(*o.p);
    return *this;
  }
  RareString &operator=(RareString &&) noexcept = default;
  RareString &operator=(std::string s) {
    assign(std::move(s));
    return *this;
  }
  RareString &operator=(llvm::StringRef s) { return *this = s.str(); }
  RareString &operator=(const char *s) { return *this = std::string(s); }

  bool empty() const { return !p; }
  size_t size() const { return p ? p->size() : 0; }
  const char *data() const { return str().data(); }
  const char *c_str() const { return str().c_str(); }
  /// The contents (a shared empty string while unset).
  const std::string &str() const { return p ? *p : emptyString(); }
  operator const std::string &() const { return str(); }
  llvm::StringRef ref() const { return str(); }
  void clear() { p.reset(); }

  friend bool operator==(const RareString &a, const RareString &b) { return a.str() == b.str(); }
  friend bool operator!=(const RareString &a, const RareString &b) { return !(a == b); }

private:
  std::unique_ptr<std::string> p; ///< null while empty (never an empty string)

  void assign(std::string s) {
    if (s.empty())
      p.reset();
    else if (p)
      *p = std::move(s);
    else
      p = std::make_unique<std::string>(std::move(s));
  }
  static const std::string &emptyString() {
    static const std::string empty;
    return empty;
  }
};

} // namespace mpc

#endif // MPC_IR_RARESTRING_H
