//===- Accumulate.h - Vectorizable sums and maxima over arrays --*- C++ -*-===//
//
// Reductions of one contiguous array with eight independent partial results,
// which the compiler vectorizes without -ffast-math (and which also halves
// the rounding error growth of a single running sum). Shared by pooling,
// normalization, softmax and the reductions.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_ACCUMULATE_H
#define MPC_RUNTIME_CPU_ACCUMULATE_H

#include "mpc/Runtime/Cpu/CpuIsa.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

#include <cstdint>

namespace mpc {
namespace cpu {

constexpr int kLanes = 8;

/// Sum of f(x[i]) in type S with kLanes partial sums.
template <typename S, typename X, typename F>
MPC_ALWAYS_INLINE S sumOf(const X *x, int64_t n, F f) {
  S acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      acc[j] += f(x[i + j]);
  for (int j = 0; i < n; ++i, ++j)
    acc[j] += f(x[i]);
  S total = S(0);
  for (int j = 0; j < kLanes; ++j)
    total += acc[j];
  return total;
}

/// Plain sum of x[i] in type S.
template <typename S, typename X>
MPC_ALWAYS_INLINE S sumOf(const X *x, int64_t n) {
  return sumOf<S>(x, n, [](X v) { return S(v); });
}

/// Largest element; NaN when any element is NaN; -inf for n == 0.
template <typename S> MPC_ALWAYS_INLINE S maxOf(const S *x, int64_t n) {
  S m[kLanes];
  bool nan[kLanes] = {};
  for (int j = 0; j < kLanes; ++j)
    m[j] = -math::infinity<S>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      S v = x[i + j];
      m[j] = v > m[j] ? v : m[j];
      nan[j] |= v != v;
    }
  for (int j = 0; i < n; ++i, ++j) {
    m[j] = x[i] > m[j] ? x[i] : m[j];
    nan[j] |= x[i] != x[i];
  }
  S r = m[0];
  bool anyNaN = nan[0];
  for (int j = 1; j < kLanes; ++j) {
    r = m[j] > r ? m[j] : r;
    anyNaN |= nan[j];
  }
  return anyNaN ? S(__builtin_nan("")) : r;
}

/// Smallest element; NaN when any element is NaN; +inf for n == 0.
template <typename S> MPC_ALWAYS_INLINE S minOf(const S *x, int64_t n) {
  S m[kLanes];
  bool nan[kLanes] = {};
  for (int j = 0; j < kLanes; ++j)
    m[j] = math::infinity<S>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      S v = x[i + j];
      m[j] = v < m[j] ? v : m[j];
      nan[j] |= v != v;
    }
  for (int j = 0; i < n; ++i, ++j) {
    m[j] = x[i] < m[j] ? x[i] : m[j];
    nan[j] |= x[i] != x[i];
  }
  S r = m[0];
  bool anyNaN = nan[0];
  for (int j = 1; j < kLanes; ++j) {
    r = m[j] < r ? m[j] : r;
    anyNaN |= nan[j];
  }
  return anyNaN ? S(__builtin_nan("")) : r;
}

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_ACCUMULATE_H
