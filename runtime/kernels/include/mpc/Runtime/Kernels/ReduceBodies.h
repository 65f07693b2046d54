//===- ReduceBodies.h - The steps of the Reduce* ops --------------*- C++ -*-===//
//
// ONNX Reduce{Sum,Mean,Max,Min,Prod,SumSquare,L1,L2,LogSum,LogSumExp} as a
// map applied to each element, a combine folding mapped elements into an
// accumulator of type A (float for f32/f16/bf16, double for f64, int64 or
// double for integers), its identity, and a finishing step from the
// accumulator to the result. The CPU (runtime/cpu/Reduce.cpp) and CUDA
// (runtime/cuda/ReduceKernels.cu) reductions fold with these; the order in
// which they fold is each backend's own.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_REDUCEBODIES_H
#define MPC_RUNTIME_KERNELS_REDUCEBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

#include <cstdint>
#include <type_traits>

namespace mpc {
namespace kernels {

/// The reduction ops.
enum class ReduceKind { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

enum class ReduceCombine { Add, Mul, Max, Min };
/// ExpShift: e^(v - shift), LogSumExp's terms with the slice's maximum as shift.
enum class ReduceMap { Identity, Square, Abs, ExpShift };

/// The combine of a kind's main pass (LogSumExp makes a Max pass first).
MPC_HD constexpr ReduceCombine combineOf(ReduceKind k) {
  return k == ReduceKind::Prod  ? ReduceCombine::Mul
         : k == ReduceKind::Max ? ReduceCombine::Max
         : k == ReduceKind::Min ? ReduceCombine::Min
                                : ReduceCombine::Add;
}

/// The map of a kind's main pass.
MPC_HD constexpr ReduceMap mapOf(ReduceKind k) {
  return k == ReduceKind::SumSquare || k == ReduceKind::L2 ? ReduceMap::Square
         : k == ReduceKind::L1                             ? ReduceMap::Abs
         : k == ReduceKind::LogSumExp                      ? ReduceMap::ExpShift
                                                           : ReduceMap::Identity;
}

template <typename A, ReduceCombine C, ReduceMap M> struct ReduceStep {
  /// The accumulator before any element: 0, 1, -inf/+inf (integers: their
  /// lowest/largest value).
  MPC_HD static A identity() {
    if (C == ReduceCombine::Add)
      return A(0);
    if (C == ReduceCombine::Mul)
      return A(1);
    if constexpr (std::is_integral<A>::value) {
      using U = std::make_unsigned_t<A>;
      const A largest = A(U(~U(0)) >> 1);
      return C == ReduceCombine::Max ? A(-largest - 1) : largest;
    } else {
      return C == ReduceCombine::Max ? -math::infinity<A>() : math::infinity<A>();
    }
  }
  template <typename V> MPC_HD static A map(V v, A shift) {
    A a = A(v);
    switch (M) {
    case ReduceMap::Identity:
      return a;
    case ReduceMap::Square:
      return a * a;
    case ReduceMap::Abs:
      return a < A(0) ? A(0) - a : a;
    case ReduceMap::ExpShift:
      if constexpr (std::is_integral<A>::value)
        return A(0); // not instantiated: integer LogSumExp accumulates in double
      else
        return math::exp(a - shift);
    }
    return a;
  }
  /// Max and Min propagate NaN: once an element is NaN, so is the result.
  MPC_HD static A combine(A acc, A v) {
    switch (C) {
    case ReduceCombine::Add:
      return acc + v;
    case ReduceCombine::Mul:
      return acc * v;
    case ReduceCombine::Max:
      return (v > acc || v != v) ? v : acc;
    case ReduceCombine::Min:
      return (v < acc || v != v) ? v : acc;
    }
    return acc;
  }
};

/// LogSumExp's shift: the slice's maximum, or 0 where the maximum is
/// infinite (the answer is then the maximum itself; inf - inf would be NaN).
template <typename A> MPC_HD inline A logSumExpShift(A max) {
  return math::isInf(max) ? A(0) : max;
}

/// The result of a reduction of `count` elements from its accumulator;
/// `max` is LogSumExp's maximum (unused otherwise). Mean over no element is
/// NaN for floats, 0 for integers.
template <typename A>
MPC_HD inline A reduceFinish(ReduceKind kind, A acc, A max, int64_t count) {
  A v = acc;
  if constexpr (!std::is_integral<A>::value) {
    if (kind == ReduceKind::L2)
      v = math::sqrt(v);
    else if (kind == ReduceKind::LogSum)
      v = math::log(v);
    else if (kind == ReduceKind::LogSumExp)
      v = math::isInf(max) || math::isNaN(max) ? max : max + math::log(v);
  }
  if (kind == ReduceKind::Mean)
    v = (std::is_integral<A>::value && count == 0) ? A(0) : v / A(count);
  return v;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_REDUCEBODIES_H
