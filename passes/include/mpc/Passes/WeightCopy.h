//===- WeightCopy.h - The optimizer writes the 16-bit weight copy -*- C++ -*-===//
//
// `mpc rewrite --optimizer-weight-copy` (docs/training.md, "The 16-bit weight
// copy"). Runs after the AMP rewrite and loss scaling on a training model
// whose parameters are updated by fused optimizer steps (SGDStep,
// MomentumStep, AdamStep; mpc/Ops/OptimizerStep.h). For each such parameter
// P that the algorithm reads through a Cast(P, to=target):
//  - a persistent copy: an initializer `P/Fp16Copy` (`P/Bf16Copy`) of the
//    inference graph holding P rounded to the target type as Cast rounds;
//  - every algorithm reader of the Cast reads the copy instead, and the Cast
//    goes when nothing reads it any more;
//  - the step node gets its optional param_copy output (attribute copy_to =
//    the target), the copy's next value: an algorithm output bound to the
//    copy in update_binding;
//  - metadata mpc.training.weight_copies lists `P=COPY` lines.
// No node is added. The inference graph's nodes are left as they are.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_WEIGHTCOPY_H
#define MPC_PASSES_WEIGHTCOPY_H

#include "mpc/IR/Graph.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mpc {

namespace trainkeys {
constexpr const char *kWeightCopies = "mpc.training.weight_copies";
} // namespace trainkeys

struct WeightCopyResult {
  DType target = DType::F16;
  unsigned copies = 0;       ///< parameters given a persistent copy
  unsigned castsRemoved = 0; ///< parameter Casts no node reads any more, erased
  /// Fused-step parameters left as they were (no algorithm node reads a
  /// cast of them to the target type).
  unsigned notCast = 0;
  /// Decision-log lines (one per copy), for -v 1.
  std::vector<std::string> log;

  /// "Weight copies: N parameter(s) ..." (stderr).
  std::string summaryLine() const;
};

/// Gives every parameter of a fused optimizer step that the algorithm casts
/// to `target` (F16 or BF16) its persistent copy. A model without fused
/// steps, with none of their parameters cast, or carrying copies already is
/// an error (one line); `m` is left unchanged then.
llvm::Expected<WeightCopyResult> insertOptimizerWeightCopies(Model &m, DType target);

} // namespace mpc

#endif // MPC_PASSES_WEIGHTCOPY_H
