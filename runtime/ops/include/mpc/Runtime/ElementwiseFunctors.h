//===- ElementwiseFunctors.h - Element-wise functors from parsed params -*- C++ -*-===//
//
// makeOp<Op>(params): the functor of an element-wise op body
// (runtime/kernels) with the attributes its registry row parsed
// (ElementwiseParams, OpParams.h) in its fields. It is the one place a node
// becomes a functor: the CPU loops build theirs from the KernelCall's
// parameters, the CUDA backend its OpBlob from the same parse when it
// prepares the node, and tests/cuda_host checks that both get the same bytes
// for every row of ElementwiseOps.def.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_ELEMENTWISEFUNCTORS_H
#define MPC_RUNTIME_ELEMENTWISEFUNCTORS_H

#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"
#include "mpc/Runtime/OpParams.h"
#include <cassert>

namespace mpc {
namespace kernels {

namespace detail {
/// The parsed attributes of an op whose row has a parser (elementwiseParser).
inline const ElementwiseParams &elementwise(const OpParams *p) {
  assert(p && "an element-wise op with attributes needs its parsed parameters");
  return static_cast<const ElementwiseParams &>(*p);
}
} // namespace detail

/// The functor of `Op` with the attributes of `params` (null for the ops
/// without attributes: their functors have no fields to fill).
template <typename Op> inline Op makeOp(const OpParams *) { return Op(); }
template <> inline LeakyRelu makeOp(const OpParams *p) {
  return LeakyRelu{detail::elementwise(p).alpha};
}
template <> inline ThresholdedRelu makeOp(const OpParams *p) {
  return ThresholdedRelu{detail::elementwise(p).alpha};
}
template <> inline Elu makeOp(const OpParams *p) { return Elu{detail::elementwise(p).alpha}; }
template <> inline Celu makeOp(const OpParams *p) { return Celu{detail::elementwise(p).alpha}; }
template <> inline Swish makeOp(const OpParams *p) { return Swish{detail::elementwise(p).alpha}; }
template <> inline Selu makeOp(const OpParams *p) {
  Selu s;
  s.alpha = detail::elementwise(p).alpha;
  s.gamma = detail::elementwise(p).beta;
  return s;
}
template <> inline HardSigmoid makeOp(const OpParams *p) {
  return HardSigmoid{detail::elementwise(p).alpha, detail::elementwise(p).beta};
}
template <> inline Shrink makeOp(const OpParams *p) {
  return Shrink{detail::elementwise(p).alpha, detail::elementwise(p).beta};
}
template <> inline Gelu makeOp(const OpParams *p) { return Gelu{detail::elementwise(p).flagA}; }
template <> inline IsInf makeOp(const OpParams *p) {
  return IsInf{detail::elementwise(p).flagA, detail::elementwise(p).flagB};
}
template <> inline Mod makeOp(const OpParams *p) { return Mod{detail::elementwise(p).flagA}; }
template <> inline BitShift makeOp(const OpParams *p) {
  return BitShift{detail::elementwise(p).flagA};
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_ELEMENTWISEFUNCTORS_H
