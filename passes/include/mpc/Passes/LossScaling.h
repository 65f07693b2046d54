//===- LossScaling.h - Loss scaling for training models ---------*- C++ -*-===//
//
// The loss-scaling stage of `mpc rewrite` (docs/training.md, "Loss scaling").
// Runs after the AMP rewrite on a training model whose metadata follows the
// contract, and inserts into training_info[0].algorithm, as standard ONNX:
//  - the seed of the backward pass multiplied by the scale S (an fp32 scalar
//    initializer `mpc.loss_scale` of the inference graph); the loss and the
//    loss subgraph are not touched;
//  - per gradient: one Cast to fp32 when AMP left it 16-bit (an existing
//    Cast(to=float) is reused), a Mul by Reciprocal(S) (computed once) whose
//    result every former reader of the gradient now reads, and the check
//    ReduceSum(Mul(u, 0)), NaN exactly when u holds an inf or a NaN;
//  - grad_nonfinite = Concat(checks), found_inf = IsNaN(ReduceSum(...));
//    with LossScaleOptions::fusedUnscale the last two items are one
//    ai.mpc.training MultiTensorUnscale node instead (same values);
//  - every update_binding output wrapped in Where(found_inf, old, new), so a
//    skipped step keeps every state tensor bit for bit (the output keeps its
//    name: the computed value is renamed `<name>/Unguarded`);
//  - dynamic mode: S and a growth tracker `mpc.loss_scale_growth` (int64) as
//    graph state, updated by the step and bound in update_binding;
//  - the mpc.training.loss_scale* metadata keys.
// Casts of inference-graph initializers that the AMP rewrite shares with the
// algorithm are copied into the algorithm graph (one per parameter), so the
// algorithm reads only initializers of the inference graph.
//
// It does not: scale anything when the mode is off, touch the inference
// graph's nodes, or run twice (a model carrying mpc.training.loss_scale is
// left as it is). Mode `none` keeps the check and the skipped update.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_LOSSSCALING_H
#define MPC_PASSES_LOSSSCALING_H

#include "mpc/IR/Graph.h"
#include "mpc/Passes/AmpLists.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace mpc {

/// Metadata keys of docs/training.md read and written here.
namespace trainkeys {
constexpr const char *kLoss = "mpc.training.loss";
constexpr const char *kSeed = "mpc.training.loss_grad_seed";
constexpr const char *kGradients = "mpc.training.gradients";
constexpr const char *kFp32Nodes = "mpc.training.fp32_nodes";
constexpr const char *kLossScale = "mpc.training.loss_scale";
constexpr const char *kLossScaleState = "mpc.training.loss_scale_state";
constexpr const char *kFoundInf = "mpc.training.found_inf";
constexpr const char *kGradNonfinite = "mpc.training.grad_nonfinite";
} // namespace trainkeys

/// Checks the settings together (min <= init <= max, ...); one-line errors
/// naming the settings.
llvm::Error checkLossScaleOptions(const LossScaleOptions &o);

/// The mode used for a target: Default resolves to Dynamic for fp16 and None
/// for bf16.
LossScaleMode effectiveLossScaleMode(const LossScaleOptions &o, DType target);

/// Empty when `m` is a training model carrying the metadata this stage needs;
/// otherwise why it cannot be loss-scaled.
std::string lossScalingUnsupportedReason(const Model &m);

/// The algorithm nodes named in mpc.training.fp32_nodes (names that match no
/// node are ignored), for AmpOptions::fp32Nodes.
llvm::DenseSet<const Node *> trainingFp32Nodes(const Model &m);

struct LossScalingResult {
  enum class Status : uint8_t {
    Inserted,      ///< the subgraphs were inserted
    AlreadyScaled, ///< the model carries mpc.training.loss_scale already
    Off,           ///< mode off: nothing inserted
  };
  Status status = Status::Off;
  LossScaleMode mode = LossScaleMode::Off;
  std::string config;          ///< the mpc.training.loss_scale value
  unsigned gradients = 0;      ///< gradients unscaled and checked
  unsigned castsToFp32 = 0;    ///< casts of 16-bit gradients inserted
  unsigned castsReused = 0;    ///< existing Cast(to=float) of gradients read instead
  unsigned guardedUpdates = 0; ///< update_binding outputs wrapped in Where
  /// update_binding outputs of fused optimizer steps, which read found_inf
  /// at their skip input instead (not counted in guardedUpdates).
  unsigned skippedInStep = 0;
  unsigned castsLocalized = 0; ///< parameter casts copied into the algorithm graph
  unsigned nodesInserted = 0;
  bool fusedUnscale = false; ///< one MultiTensorUnscale node did steps 2-3
  /// Decision-log lines: one per inserted subgraph (verbose 1), plus one per
  /// gradient and guarded update (verbose 2).
  std::vector<std::string> log, detailLog;

  /// "Loss scaling: dynamic (init=32768 ...): 4 gradient(s) ..." (stderr).
  std::string summaryLine() const;
};

/// Inserts loss scaling into the training model `m` (after the AMP rewrite
/// to `target`). Bad metadata (names no value, types that do not fit) is an
/// error; `m` is then in an unspecified state.
llvm::Expected<LossScalingResult> insertLossScaling(Model &m, const LossScaleOptions &opts,
                                                    DType target);

} // namespace mpc

#endif // MPC_PASSES_LOSSSCALING_H
