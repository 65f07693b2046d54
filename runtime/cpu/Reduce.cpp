//===- Reduce.cpp - Reductions over arbitrary axes ------------------------===//
//
// The shape is collapsed into alternating kept/reduced groups; the input is
// then read once in memory order, one innermost row at a time: a reduced
// innermost row folds into one accumulator, a kept one into a contiguous run
// of accumulators (both loops vectorize). LogSumExp makes a Max pass first.
//
//===----------------------------------------------------------------------===//

#include "../ops/ShapeHelpers.h"
#include "mpc/Runtime/Cpu/Reduce.h"
#include "mpc/Runtime/Cpu/Convert.h"

#include "Accumulate.h"
#include "Scratch.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <type_traits>

using namespace mpc::kernels;

namespace mpc {
namespace cpu {

bool reduceOutputShape(llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<int64_t> axes, bool keepDims,
                       llvm::SmallVectorImpl<int64_t> &outShape) {
  return shapes::reduceOutputShape(shape, axes, keepDims, outShape);
}

namespace {

/// The input shape collapsed into groups, outermost first: size-1
/// dimensions dropped, neighbours with the same kept/reduced status merged.
/// outStrides holds, for kept groups, their stride in the output.
struct Layout {
  llvm::SmallVector<int64_t, 8> sizes;
  llvm::SmallVector<bool, 8> reduced;
  llvm::SmallVector<int64_t, 8> outStrides;
  int64_t inSize = 1, outSize = 1, count = 1;

  Layout(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> axes) {
    int64_t rank = int64_t(shape.size());
    llvm::SmallVector<bool, 8> isReduced(shape.size(), axes.empty());
    for (int64_t a : axes)
      isReduced[a < 0 ? a + rank : a] = true;
    for (size_t d = 0; d < shape.size(); ++d) {
      inSize *= shape[d];
      (isReduced[d] ? count : outSize) *= shape[d];
      if (shape[d] == 1)
        continue;
      if (!sizes.empty() && reduced.back() == isReduced[d]) {
        sizes.back() *= shape[d];
        continue;
      }
      sizes.push_back(shape[d]);
      reduced.push_back(isReduced[d]);
    }
    if (sizes.empty()) {
      sizes.push_back(1);
      reduced.push_back(false);
    }
    outStrides.assign(sizes.size(), 0);
    int64_t stride = 1;
    for (size_t g = sizes.size(); g-- > 0;)
      if (!reduced[g]) {
        outStrides[g] = stride;
        stride *= sizes[g];
      }
  }
};

/// A reduction step (ReduceBodies.h: how one element is mapped, how values
/// combine) and how a contiguous row is folded (vectorizable for the sums
/// and extrema).
using Combine = ReduceCombine;
using Map = ReduceMap;

template <typename A, Combine C, Map M> struct Op : ReduceStep<A, C, M> {
  using Step = ReduceStep<A, C, M>;
  using Step::combine;
  using Step::identity;
  using Step::map;
  template <typename V> static A reduceRow(const V *row, int64_t n, A shift) {
    if constexpr (C == Combine::Add)
      return sumOf<A>(row, n, [shift](V v) { return map(v, shift); });
    if constexpr ((C == Combine::Max || C == Combine::Min) &&
                  std::is_same<A, V>::value && !std::is_integral<A>::value)
      return C == Combine::Max ? maxOf(row, n) : minOf(row, n);
    A acc = identity();
    for (int64_t i = 0; i < n; ++i)
      acc = combine(acc, map(row[i], shift));
    return acc;
  }
};

} // namespace

/// Folds all of x into acc (outSize accumulators, already initialized).
/// shift, when given, is the per-output value ExpShift subtracts.
template <typename OpT, typename T, typename A>
static void traverse(const T *x, const Layout &l, A *acc, const A *shift) {
  using V = ComputeType<T>;
  constexpr bool kWiden = kIsFloat16<T>;
  size_t r = l.sizes.size();
  int64_t len = l.sizes[r - 1];
  bool innerReduced = l.reduced[r - 1];
  int64_t rows = l.inSize / len;
  int64_t chunk = kWiden ? std::min<int64_t>(len, 4096) : len;
  V *buf = kWiden ? scratch<V>(ScratchSlot::Input, size_t(chunk)) : nullptr;
  llvm::SmallVector<int64_t, 8> idx(r, 0);
  int64_t outOff = 0;
  for (int64_t row = 0; row < rows; ++row) {
    const T *src = x + row * len;
    for (int64_t j0 = 0; j0 < len; j0 += chunk) {
      int64_t n = std::min(chunk, len - j0);
      const V *v;
      if constexpr (kWiden) {
        widenBlock(src + j0, buf, n);
        v = buf;
      } else {
        v = src + j0;
      }
      if (innerReduced) {
        A s = shift ? shift[outOff] : A(0);
        acc[outOff] = OpT::combine(acc[outOff], OpT::reduceRow(v, n, s));
        continue;
      }
      A *a = acc + outOff + j0;
      if (shift) {
        const A *s = shift + outOff + j0;
        for (int64_t j = 0; j < n; ++j)
          a[j] = OpT::combine(a[j], OpT::map(v[j], s[j]));
      } else {
        for (int64_t j = 0; j < n; ++j)
          a[j] = OpT::combine(a[j], OpT::map(v[j], A(0)));
      }
    }
    // Odometer over the outer groups; only kept groups move the output.
    for (size_t d = r - 1; d-- > 0;) {
      outOff += l.outStrides[d];
      if (++idx[d] < l.sizes[d])
        break;
      outOff -= l.outStrides[d] * l.sizes[d];
      idx[d] = 0;
    }
  }
}

template <typename OpT, typename T, typename A>
static void run(const T *x, const Layout &l, A *acc, const A *shift = nullptr) {
  std::fill_n(acc, l.outSize, OpT::identity());
  if (l.count > 0)
    traverse<OpT>(x, l, acc, shift);
}

/// Runs a reduction with accumulator type A and writes y.
template <typename T, typename A>
static void reduceWith(ReduceKind kind, const T *x, const Layout &l, T *y) {
  A *acc = scratch<A>(ScratchSlot::Accum, size_t(l.outSize));
  A *shift = nullptr;
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean:
  case ReduceKind::LogSum:
    run<Op<A, Combine::Add, Map::Identity>>(x, l, acc);
    break;
  case ReduceKind::SumSquare:
  case ReduceKind::L2:
    run<Op<A, Combine::Add, Map::Square>>(x, l, acc);
    break;
  case ReduceKind::L1:
    run<Op<A, Combine::Add, Map::Abs>>(x, l, acc);
    break;
  case ReduceKind::Prod:
    run<Op<A, Combine::Mul, Map::Identity>>(x, l, acc);
    break;
  case ReduceKind::Max:
    run<Op<A, Combine::Max, Map::Identity>>(x, l, acc);
    break;
  case ReduceKind::Min:
    run<Op<A, Combine::Min, Map::Identity>>(x, l, acc);
    break;
  case ReduceKind::LogSumExp:
    if constexpr (!std::is_integral<A>::value) {
      shift = scratch<A>(ScratchSlot::Extra, size_t(l.outSize));
      run<Op<A, Combine::Max, Map::Identity>>(x, l, shift);
      A *finite = scratch<A>(ScratchSlot::Panel, size_t(l.outSize));
      for (int64_t i = 0; i < l.outSize; ++i)
        finite[i] = logSumExpShift(shift[i]);
      run<Op<A, Combine::Add, Map::ExpShift>>(x, l, acc, finite);
    }
    break;
  }
  for (int64_t i = 0; i < l.outSize; ++i) {
    A v = reduceFinish(kind, acc[i], shift ? shift[i] : A(0), l.count);
    y[i] = castValue<T>(v);
    // The int64 identities of an empty Max/Min are T's own limits.
    if constexpr (std::is_integral<T>::value)
      if (l.count == 0 && (kind == ReduceKind::Max || kind == ReduceKind::Min))
        y[i] = kind == ReduceKind::Max ? std::numeric_limits<T>::lowest()
                                       : std::numeric_limits<T>::max();
  }
}

template <typename T>
void reduce(ReduceKind kind, const T *x, llvm::ArrayRef<int64_t> shape,
            llvm::ArrayRef<int64_t> axes, T *y) {
  llvm::SmallVector<int64_t, 8> outShape;
  bool ok = reduceOutputShape(shape, axes, false, outShape);
  assert(ok && "bad reduction axes");
  (void)ok;
  Layout l(shape, axes);
  if (l.outSize == 0)
    return;
  bool viaDouble = kind == ReduceKind::L2 || kind == ReduceKind::LogSum ||
                   kind == ReduceKind::LogSumExp;
  if constexpr (std::is_integral<T>::value) {
    if (viaDouble)
      return reduceWith<T, double>(kind, x, l, y);
  }
  reduceWith<T, AccumType<T>>(kind, x, l, y);
}

#define MPC_INSTANTIATE_REDUCE(T)                                              \
  template void reduce<T>(ReduceKind, const T *, llvm::ArrayRef<int64_t>,      \
                          llvm::ArrayRef<int64_t>, T *);
MPC_INSTANTIATE_REDUCE(float)
MPC_INSTANTIATE_REDUCE(double)
MPC_INSTANTIATE_REDUCE(Half)
MPC_INSTANTIATE_REDUCE(BFloat16)
MPC_INSTANTIATE_REDUCE(int32_t)
MPC_INSTANTIATE_REDUCE(int64_t)
#undef MPC_INSTANTIATE_REDUCE

} // namespace cpu
} // namespace mpc
