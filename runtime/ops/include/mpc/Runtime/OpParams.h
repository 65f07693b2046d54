//===- OpParams.h - Parsed attributes of the ops that have them -*- C++ -*-===//
//
// Plain structs, one per op (or family), filled once per node by the
// registry row's parser when the executor prepares the node; every backend's
// kernel reads them from KernelCall::params instead of the attribute list.
// Ops not listed here still read their attributes in the kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPPARAMS_H
#define MPC_RUNTIME_OPPARAMS_H

#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/OpRegistry.h"
#include <cassert>

namespace mpc {

/// Gemm: Y = alpha * op(A) * op(B) + beta * C.
struct GemmParams final : OpParams {
  bool transA = false, transB = false;
  float alpha = 1.0f, beta = 1.0f;
};
std::unique_ptr<OpParams> parseGemm(const Node &n);

/// Softmax and LogSoftmax: the axis (default 1 before opset 13, else -1).
struct SoftmaxParams final : OpParams {
  int64_t axis = -1;
};
std::unique_ptr<OpParams> parseSoftmax(const Node &n);

/// LayerNormalization: the first normalized axis and epsilon.
struct LayerNormParams final : OpParams {
  int64_t axis = -1;
  float epsilon = 1e-5f;
};
std::unique_ptr<OpParams> parseLayerNorm(const Node &n);

/// The parsed attributes of a prepared call (the executor prepares every
/// node it launches or folds).
template <typename P> const P &paramsOf(const KernelCall &c) {
  assert(c.params && "kernel launched without its prepared parameters");
  return static_cast<const P &>(*c.params);
}

} // namespace mpc

#endif // MPC_RUNTIME_OPPARAMS_H
