//===- Elementwise.h - CPU loops over element-wise op bodies ----*- C++ -*-===//
//
// Generic host loops that apply a functor from UnaryOps.h/BinaryOps.h: each
// element is widened to its compute type, computed, and rounded once on store.
// 16-bit operands are processed in blocks widened/narrowed with the bulk
// converters, so the functor runs over plain float arrays.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_ELEMENTWISE_H
#define MPC_RUNTIME_KERNELS_ELEMENTWISE_H

#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/Convert.h"
#include "mpc/Runtime/Cpu/CpuIsa.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/StorageTypes.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

// The entry points are never inlined: for the ops of ElementwiseOps.def the
// caller then always runs mpc_runtime_cpu' optimized instantiation, never
// a copy compiled with its own flags.
#if defined(__GNUC__)
#define MPC_NOINLINE __attribute__((noinline))
#else
#define MPC_NOINLINE
#endif

namespace mpc {
namespace kernels {

/// Elements per block when 16-bit data is widened to float (stack buffers).
constexpr int64_t kElementwiseBlock = kWidenBlock;

namespace detail {

// The loop bodies work on a local copy of the functor: through the
// reference, a store to out could alias its attributes (a float alpha, the
// Gelu flag), which would keep them from being hoisted out of the loop.

/// out[i] = fn(in[i]) over plain arrays.
template <typename In, typename Out, typename Fn>
MPC_ALWAYS_INLINE void unaryLoopBody(const Fn &fnRef, const In *in, Out *out,
                                     int64_t n) {
  const Fn fn = fnRef;
  for (int64_t i = 0; i < n; ++i)
    out[i] = store<Out>(fn(load(in[i])));
}

/// out[i] = fn(a[i * sa], b[i * sb]) over plain arrays, with the stride
/// patterns a collapsed broadcast plan produces as separate loops.
template <typename In, typename Out, typename Fn>
MPC_ALWAYS_INLINE void binaryLoopBody(const Fn &fnRef, const In *a, int64_t sa,
                                      const In *b, int64_t sb, Out *out,
                                      int64_t n) {
  const Fn fn = fnRef;
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<Out>(fn(load(a[i]), load(b[i])));
  } else if (sa == 1 && sb == 0) {
    auto bv = load(b[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<Out>(fn(load(a[i]), bv));
  } else if (sa == 0 && sb == 1) {
    auto av = load(a[0]);
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<Out>(fn(av, load(b[i])));
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = store<Out>(fn(load(a[i * sa]), load(b[i * sb])));
  }
}

// Each body compiled for the baseline and, where available, for AVX2.
template <typename In, typename Out, typename Fn>
void unaryLoopBaseline(const Fn &fn, const In *in, Out *out, int64_t n) {
  unaryLoopBody(fn, in, out, n);
}
template <typename In, typename Out, typename Fn>
void binaryLoopBaseline(const Fn &fn, const In *a, int64_t sa, const In *b,
                        int64_t sb, Out *out, int64_t n) {
  binaryLoopBody(fn, a, sa, b, sb, out, n);
}
#if MPC_HAVE_AVX2_CLONES
template <typename In, typename Out, typename Fn>
MPC_TARGET_AVX2 void unaryLoopAvx2(const Fn &fn, const In *in, Out *out,
                                   int64_t n) {
  unaryLoopBody(fn, in, out, n);
}
template <typename In, typename Out, typename Fn>
MPC_TARGET_AVX2 void binaryLoopAvx2(const Fn &fn, const In *a, int64_t sa,
                                    const In *b, int64_t sb, Out *out,
                                    int64_t n) {
  binaryLoopBody(fn, a, sa, b, sb, out, n);
}
#endif

template <typename In, typename Out, typename Fn>
inline void unaryLoop(CpuIsa isa, const Fn &fn, const In *in, Out *out,
                      int64_t n) {
#if MPC_HAVE_AVX2_CLONES
  if (isa == CpuIsa::Avx2)
    return unaryLoopAvx2(fn, in, out, n);
#endif
  unaryLoopBaseline(fn, in, out, n);
}

template <typename In, typename Out, typename Fn>
inline void binaryLoop(CpuIsa isa, const Fn &fn, const In *a, int64_t sa,
                       const In *b, int64_t sb, Out *out, int64_t n) {
#if MPC_HAVE_AVX2_CLONES
  if (isa == CpuIsa::Avx2)
    return binaryLoopAvx2(fn, a, sa, b, sb, out, n);
#endif
  binaryLoopBaseline(fn, a, sa, b, sb, out, n);
}

/// One contiguous output row of a broadcast binary op: out[i] =
/// fn(a[i * sa], b[i * sb]). After plan collapsing the strides are 0 or 1.
template <typename In, typename Out, typename Fn>
void binaryRow(CpuIsa isa, const Fn &fn, const In *a, int64_t sa, const In *b,
               int64_t sb, Out *out, int64_t n) {
  if constexpr (!kIsFloat16<In> && !kIsFloat16<Out>) {
    binaryLoop(isa, fn, a, sa, b, sb, out, n);
  } else {
    using C = ComputeType<In>;
    using R = decltype(fn(C(), C()));
    C av[kElementwiseBlock], bv[kElementwiseBlock];
    R r[kElementwiseBlock];
    // Broadcast operands are splatted once; linear ones widened per block.
    if (sa == 0)
      std::fill_n(av, std::min(n, kElementwiseBlock), load(a[0]));
    if (sb == 0)
      std::fill_n(bv, std::min(n, kElementwiseBlock), load(b[0]));
    for (int64_t i0 = 0; i0 < n; i0 += kElementwiseBlock) {
      int64_t len = std::min(kElementwiseBlock, n - i0);
      if (sa == 1)
        widenBlock(a + i0, av, len);
      else if (sa != 0)
        for (int64_t j = 0; j < len; ++j)
          av[j] = load(a[(i0 + j) * sa]);
      if (sb == 1)
        widenBlock(b + i0, bv, len);
      else if (sb != 0)
        for (int64_t j = 0; j < len; ++j)
          bv[j] = load(b[(i0 + j) * sb]);
      binaryLoop(isa, fn, av, 1, bv, 1, r, len);
      narrowBlock(r, out + i0, len);
    }
  }
}

/// Detects functors with a resolve(f) member that calls f with a cheaper,
/// attribute-free functor (see Gelu).
struct ResolveProbe {
  template <typename F> void operator()(const F &) const {}
};
template <typename Fn, typename = void> struct HasResolve : std::false_type {};
template <typename Fn>
struct HasResolve<Fn,
                  decltype(std::declval<const Fn &>().resolve(ResolveProbe()))>
    : std::true_type {};

template <typename In, typename Out, typename Fn>
void applyUnaryImpl(CpuIsa isa, const Fn &fn, const In *in, Out *out,
                    int64_t n) {
  if constexpr (!kIsFloat16<In> && !kIsFloat16<Out>) {
    detail::unaryLoop(isa, fn, in, out, n);
  } else {
    using C = ComputeType<In>;
    using R = decltype(fn(C()));
    C a[kElementwiseBlock];
    R r[kElementwiseBlock];
    for (int64_t i0 = 0; i0 < n; i0 += kElementwiseBlock) {
      int64_t len = std::min(kElementwiseBlock, n - i0);
      widenBlock(in + i0, a, len);
      detail::unaryLoop(isa, fn, a, r, len);
      narrowBlock(r, out + i0, len);
    }
  }
}

} // namespace detail

/// out[i] = fn(in[i]) for i < n. In and Out may differ (a predicate writes
/// bool); out may alias in. Storage types: float, Half, BFloat16, double,
/// integers and bool; fp16/bf16 compute in float, the others natively.
template <typename In, typename Out, typename Fn>
MPC_NOINLINE void applyUnary(const Fn &fn, const In *in, Out *out, int64_t n) {
  CpuIsa isa = activeCpuIsa();
  if constexpr (detail::HasResolve<Fn>::value)
    fn.resolve([&](const auto &body) {
      detail::applyUnaryImpl(isa, body, in, out, n);
    });
  else
    detail::applyUnaryImpl(isa, fn, in, out, n);
}

/// out = fn(a, b) with numpy broadcasting described by \p plan; out is dense
/// in the broadcast shape. out may alias an operand of the output's shape.
template <typename In, typename Out, typename Fn>
MPC_NOINLINE void applyBinary(const Fn &fn, const In *a, const In *b, Out *out,
                              const BroadcastPlan &plan) {
  if (plan.numElements == 0)
    return;
  CpuIsa isa = activeCpuIsa();
  int last = plan.rank - 1;
  int64_t n = plan.dims[last];
  int64_t sa = plan.aStrides[last], sb = plan.bStrides[last];
  int64_t outer = plan.numElements / n;
  int64_t idx[kMaxBroadcastRank] = {};
  int64_t aOff = 0, bOff = 0;
  for (int64_t o = 0; o < outer; ++o) {
    detail::binaryRow(isa, fn, a + aOff, sa, b + bOff, sb, out + o * n, n);
    // Odometer over the outer dimensions, updating offsets incrementally.
    for (int d = last - 1; d >= 0; --d) {
      aOff += plan.aStrides[d];
      bOff += plan.bStrides[d];
      if (++idx[d] < plan.dims[d])
        break;
      aOff -= plan.aStrides[d] * plan.dims[d];
      bOff -= plan.bStrides[d] * plan.dims[d];
      idx[d] = 0;
    }
  }
}

/// out = fn(a, b) with numpy broadcasting of aShape and bShape (which must
/// broadcast); out has the broadcast shape (see broadcastShapes).
template <typename In, typename Out, typename Fn>
void applyBinary(const Fn &fn, const In *a, llvm::ArrayRef<int64_t> aShape,
                 const In *b, llvm::ArrayRef<int64_t> bShape, Out *out) {
  applyBinary(fn, a, b, out, makeBroadcastPlan(aShape, bShape));
}

//===----------------------------------------------------------------------===//
// Instantiations compiled into mpc_runtime_cpu (ElementwiseOps.def, with
// the storage types of Kernels/StorageTypes.h)
//===----------------------------------------------------------------------===//

#define MPC_UNARY_INSTANCE(PREFIX, T, OP, OUT)                                 \
  PREFIX template void applyUnary<T, OUT(T), OP>(const OP &, const T *,        \
                                                 OUT(T) *, int64_t);
#define MPC_BINARY_INSTANCE(PREFIX, T, OP, OUT)                                \
  PREFIX template void applyBinary<T, OUT(T), OP>(                             \
      const OP &, const T *, const T *, OUT(T) *, const BroadcastPlan &);

#define MPC_EXTERN_UNARY(T, OP, OUT) MPC_UNARY_INSTANCE(extern, T, OP, OUT)
#define MPC_EXTERN_BINARY(T, OP, OUT) MPC_BINARY_INSTANCE(extern, T, OP, OUT)
#define MPC_UNARY_FLOAT(OP)                                                    \
  MPC_FLOAT_STORAGE_TYPES(MPC_EXTERN_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_SIGNED(OP)                                                   \
  MPC_SIGNED_STORAGE_TYPES(MPC_EXTERN_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_ARITHMETIC(OP)                                               \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_EXTERN_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_INTEGER(OP)                                                  \
  MPC_INTEGER_STORAGE_TYPES(MPC_EXTERN_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_PREDICATE(OP)                                                \
  MPC_FLOAT_STORAGE_TYPES(MPC_EXTERN_UNARY, OP, MPC_BOOL_TYPE)
#define MPC_BINARY_SIGNED(OP)                                                  \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_EXTERN_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_INTEGER(OP)                                                 \
  MPC_INTEGER_STORAGE_TYPES(MPC_EXTERN_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_COMPARE(OP)                                                 \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_EXTERN_BINARY, OP, MPC_BOOL_TYPE)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_EXTERN_UNARY
#undef MPC_EXTERN_BINARY

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_ELEMENTWISE_H
