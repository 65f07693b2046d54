//===- ElementwiseAttrs.h - Element-wise functors filled from a node -*- C++ -*-===//
//
// makeOp<Op>(node): the functor of an element-wise op body (runtime/kernels)
// with the node's attributes in its fields (ONNX defaults otherwise). The CPU
// loops and the CUDA launchers (runtime/cuda) both start from it, so an
// attribute is read in one place.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_ELEMENTWISEATTRS_H
#define MPC_RUNTIME_CPU_ELEMENTWISEATTRS_H

#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

namespace mpc {
namespace kernels {

/// A functor with its attributes filled from the node.
template <typename Op> inline Op makeOp(const Node &) { return Op(); }
template <> inline LeakyRelu makeOp(const Node &n) {
  return LeakyRelu{n.floatAttr("alpha", 0.01f)};
}
template <> inline ThresholdedRelu makeOp(const Node &n) {
  return ThresholdedRelu{n.floatAttr("alpha", 1.0f)};
}
template <> inline Elu makeOp(const Node &n) { return Elu{n.floatAttr("alpha", 1.0f)}; }
template <> inline Celu makeOp(const Node &n) { return Celu{n.floatAttr("alpha", 1.0f)}; }
template <> inline Selu makeOp(const Node &n) {
  Selu s;
  s.alpha = n.floatAttr("alpha", s.alpha);
  s.gamma = n.floatAttr("gamma", s.gamma);
  return s;
}
template <> inline HardSigmoid makeOp(const Node &n) {
  return HardSigmoid{n.floatAttr("alpha", 0.2f), n.floatAttr("beta", 0.5f)};
}
template <> inline Gelu makeOp(const Node &n) {
  return Gelu{n.stringAttr("approximate", "none") == "tanh"};
}
template <> inline IsInf makeOp(const Node &n) {
  return IsInf{n.intAttr("detect_negative", 1) != 0,
              n.intAttr("detect_positive", 1) != 0};
}
template <> inline Mod makeOp(const Node &n) { return Mod{n.intAttr("fmod", 0) != 0}; }
template <> inline Swish makeOp(const Node &n) { return Swish{n.floatAttr("alpha", 1.0f)}; }
template <> inline Shrink makeOp(const Node &n) {
  return Shrink{n.floatAttr("lambd", 0.5f), n.floatAttr("bias", 0.0f)};
}
template <> inline BitShift makeOp(const Node &n) {
  return BitShift{n.stringAttr("direction", "") == "LEFT"};
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_CPU_ELEMENTWISEATTRS_H
