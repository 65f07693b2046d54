//===- RareVector.h - A list field that is nearly always empty --*- C++ -*-===//
//
// An attribute holds exactly one kind of payload, yet it had a std::vector
// for each list kind (floats, ints, strings, tensors, graphs, opaque bytes):
// 144 bytes of empty vectors in every attribute, and a rewrite creates an
// attribute for each cast it inserts. A RareVector is one pointer, null until
// the first element is added, then owning a std::vector. It reads like a
// const std::vector (and converts to one); it is written through the usual
// vector calls (push_back, emplace_back, assign, insert) or through mut().
//
// The iterators are plain pointers, so a loop over an empty one touches
// nothing.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_IR_RAREVECTOR_H
#define MPC_IR_RAREVECTOR_H

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace mpc {

template <typename T> class RareVector {
public:
  using value_type = T;
  using iterator = T *;
  using const_iterator = const T *;
  using size_type = size_t;
  using reference = T &;
  using const_reference = const T &;

  RareVector() = default;
  RareVector(const RareVector &o) { *this = o; }
  RareVector(RareVector &&) noexcept = default;
  RareVector &operator=(const RareVector &o) {
    if (this != &o)
      *this = o.vec();
    return *this;
  }
  RareVector &operator=(RareVector &&) noexcept = default;
  RareVector &operator=(std::vector<T> v) {
    if (v.empty())
      p.reset();
    else
      mut() = std::move(v);
    return *this;
  }

  bool empty() const { return !p || p->empty(); }
  size_t size() const { return p ? p->size() : 0; }
  T *data() { return p ? p->data() : nullptr; }
  const T *data() const { return p ? p->data() : nullptr; }
  iterator begin() { return data(); }
  iterator end() { return data() + size(); }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size(); }
  T &operator[](size_t i) { return (*p)[i]; }
  const T &operator[](size_t i) const { return (*p)[i]; }
  T &at(size_t i) { return mut().at(i); }
  const T &at(size_t i) const { return vec().at(i); }
  T &front() { return p->front(); }
  const T &front() const { return p->front(); }
  T &back() { return p->back(); }
  const T &back() const { return p->back(); }

  /// The contents (a shared empty vector while unset).
  const std::vector<T> &vec() const { return p ? *p : emptyVector(); }
  operator const std::vector<T> &() const { return vec(); }
  /// The vector itself, created (empty) when unset, for writers.
  std::vector<T> &mut() {
    if (!p)
      p = std::make_unique<std::vector<T>>();
    return *p;
  }

  void push_back(const T &v) { mut().push_back(v); }
  void push_back(T &&v) { mut().push_back(std::move(v)); }
  template <typename... A> T &emplace_back(A &&...a) {
    return mut().emplace_back(std::forward<A>(a)...);
  }
  template <typename It> void assign(It b, It e) { mut().assign(b, e); }
  /// Inserts [b, e) before position `pos` (an iterator of this vector).
  template <typename It> void insert(const_iterator pos, It b, It e) {
    size_t at = static_cast<size_t>(pos - begin());
    std::vector<T> &v = mut();
    v.insert(v.begin() + at, b, e);
  }
  void reserve(size_t n) { mut().reserve(n); }
  void resize(size_t n) { mut().resize(n); }
  void clear() { p.reset(); }

  friend bool operator==(const RareVector &a, const RareVector &b) { return a.vec() == b.vec(); }
  friend bool operator==(const RareVector &a, const std::vector<T> &b) { return a.vec() == b; }
  friend bool operator==(const std::vector<T> &a, const RareVector &b) { return a == b.vec(); }
  friend bool operator!=(const RareVector &a, const RareVector &b) { return !(a == b); }
  friend bool operator!=(const RareVector &a, const std::vector<T> &b) { return !(a == b); }
  friend bool operator!=(const std::vector<T> &a, const RareVector &b) { return !(a == b); }

private:
  std::unique_ptr<std::vector<T>> p; ///< null while unset

  static const std::vector<T> &emptyVector() {
    static const std::vector<T> empty;
    return empty;
  }
};

} // namespace mpc

#endif // MPC_IR_RAREVECTOR_H
