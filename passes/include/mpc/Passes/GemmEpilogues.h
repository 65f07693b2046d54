//===- GemmEpilogues.h - Fold bias, activation and cast into GEMMs -*- C++ -*-===//
//
// `mpc rewrite --fuse-gemm-epilogues` (docs/user-guide.md, "GEMM epilogues"):
// after the AMP rewrite (and loss scaling), each MatMul or Gemm whose B is
// 2-D (a constant weight, its 16-bit copy, an activation), followed by at
// least one of: a Cast of a 16-bit product to float32, the Add of a bias
// broadcast over the last axis, Relu or Gelu (the opset-20 op or the erf
// pattern exporters emit before it), a Cast, becomes one
// ai.mpc.training::GemmBiasAct node (mpc/Ops/GemmBiasAct.h), with no bias
// input when there is no bias. A chain is fused only when every value inside
// it has exactly one reader and is not a graph output, so a training graph
// whose backward reads the pre-activation keeps those nodes; its weight
// gradients' GEMMs (no bias) absorb the Cast to float32 before their
// unscale, and the BiasGrad that sums the same dY (output bias_grad; the
// graph is then sorted again). One walk over the nodes, each chain followed
// through the use lists (a bias gradient's cycle check walks back at most
// 256 nodes): linear in the model's size; deterministic.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_GEMMEPILOGUES_H
#define MPC_PASSES_GEMMEPILOGUES_H

#include "mpc/IR/Graph.h"

#include <string>
#include <vector>

namespace mpc {

struct GemmEpilogueResult {
  unsigned gemms = 0;       ///< MatMul and Gemm nodes looked at
  unsigned fused = 0;       ///< GemmBiasAct nodes written
  unsigned activations = 0; ///< of those, with a Relu or Gelu folded in
  unsigned casts = 0;       ///< of those, with a Cast folded in
  unsigned biasGrads = 0;   ///< of those, computing a BiasGrad's bias gradient
  unsigned nodesRemoved = 0;
  /// One line per GEMM in graph order: what was fused, or why not.
  std::vector<std::string> decisions;

  /// "Fused GEMM epilogues: F of G GEMMs (A with an activation, C with a
  /// cast, B with a bias gradient; R nodes removed)".
  std::string summaryLine() const;
};

/// Fuses in the main graph and the training graphs of `m`.
GemmEpilogueResult fuseGemmEpilogues(Model &m);

/// The erf form of GELU that exporters write for opsets without a Gelu op:
///   Div(x, sqrt2) | Mul(x, 1/sqrt2) -> Erf -> Add(., 1) -> e1, then
///   Mul(Mul(x, e1), 0.5), Mul(Mul(x, 0.5), e1) or Mul(x, Mul(e1, 0.5))
/// (operands of Add and Mul in either order; the constants within 1/256 of
/// sqrt2 or 1/sqrt2, 1 and 0.5 exactly). `x` has exactly these two readers
/// and every value inside the chain exactly one, none a graph output.
struct ErfGeluMatch {
  Value *x = nullptr;
  Value *result = nullptr;        ///< GELU(x)
  std::vector<Node *> nodes;      ///< the chain's five nodes, in order
  std::vector<Value *> constants; ///< the constants they read (initializers, Constant outputs)
};
/// Matches the chain that starts at `x` into `m`; false when it is not there.
bool matchErfGelu(Value *x, ErfGeluMatch &m);

} // namespace mpc

#endif // MPC_PASSES_GEMMEPILOGUES_H
