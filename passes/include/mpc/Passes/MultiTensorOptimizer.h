//===- MultiTensorOptimizer.h - Merge fused steps into one node -*- C++ -*-===//
//
// `mpc rewrite --multi-tensor-optimizer` (docs/training.md, "Multi-tensor
// optimizer steps"). Runs last among the training rewrites (after loss
// scaling and --optimizer-weight-copy) on a training model whose
// parameters are updated by per-parameter fused steps (SGDStep,
// MomentumStep, AdamStep; mpc/Ops/OptimizerStep.h). The steps of one kind
// that read the same scalar inputs, the same weight decay and the same skip
// flag become one MultiTensorSGDStep / MultiTensorMomentumStep /
// MultiTensorAdamStep node, in their node order: its outputs keep the
// steps' output names, so update_binding and the graph outputs are
// unchanged. Left as they are: steps with the 16-bit weight copy output
// (the multi-tensor form has none), a set of one step, and a set whose
// outputs a node between its first and last step reads.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_MULTITENSOROPTIMIZER_H
#define MPC_PASSES_MULTITENSOROPTIMIZER_H

#include "mpc/IR/Graph.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mpc {

struct MultiTensorOptimizerResult {
  unsigned merged = 0;  ///< per-parameter steps merged
  unsigned nodes = 0;   ///< multi-tensor nodes made
  unsigned kept = 0;    ///< fused steps left per-parameter
  /// One line per multi-tensor node, for -v 1.
  std::vector<std::string> log;

  /// "Multi-tensor optimizer: N fused step(s) merged into M node(s)..." (stderr).
  std::string summaryLine() const;
};

/// The error mergeOptimizerSteps gives `m` for having no fused step (or
/// not being a training model), checked before any rewrite; success else.
llvm::Error checkHasFusedOptimizerSteps(const Model &m);

/// Merges the fused optimizer steps of `m`'s algorithm graph as above. A
/// model without fused steps, or with no two of them mergeable, is an
/// error (one line); `m` is left unchanged then.
llvm::Expected<MultiTensorOptimizerResult> mergeOptimizerSteps(Model &m);

} // namespace mpc

#endif // MPC_PASSES_MULTITENSOROPTIMIZER_H
