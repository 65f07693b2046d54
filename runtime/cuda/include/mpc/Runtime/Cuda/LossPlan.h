//===- LossPlan.h - Launch plans of the loss launchers ----------*- C++ -*-===//
//
// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLossGrad see their scores as [batch, classes, inner]
// (dims [N, C, d1, ...]): batch * inner positions, each with one label and
// a row of `classes` scores at stride `inner`. The CUDA launchers run
//
//  1. the rows as the slices of SlicePlan.h (one block per row when inner
//     is 1, one thread per position otherwise): each row's log-softmax and
//     the position's loss and weight;
//  2. one finishing block over the positions: the first bad label (the
//     lowest index, as the CPU reports it), and for Mean and Sum the total
//     and the weight sum, each thread folding positions t, t + threads, ...
//     in order, then the block tree of SliceKernels.cuh (bit-identical run
//     to run).
//
// Pure functions of the shape (no CUDA header), tested in tests/cuda_host.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_LOSSPLAN_H
#define MPC_RUNTIME_CUDA_LOSSPLAN_H

#include "mpc/Runtime/Cuda/SlicePlan.h"
#include <cstddef>
#include <cstdint>

namespace mpc {
namespace cuda {

struct LossPlan {
  /// [batch, classes, inner]: slices() is the number of positions (labels).
  SliceShape shape;
  /// The per-position rows (step 1).
  SlicePlan rows;
  /// Threads of the one finishing block (step 2): rowThreads(positions).
  unsigned finishThreads = 0;
  /// Scratch: for a reduced loss (Mean, Sum) each position's loss and
  /// weight as two float arrays; for the gradient's Mean and Sum one float
  /// (the scale). 256-byte aligned pieces, as the executor aligns the base.
  size_t workspaceBytes = 0;
};

/// What the loss launchers run for scores of shape dims[0..rank).
enum class LossLaunch : uint8_t {
  Loss,     ///< SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss
  LossGrad, ///< SoftmaxCrossEntropyLossGrad
};

/// Plans a loss over scores of `dims` (`reduced`: Mean or Sum). False when
/// the launchers cannot take it, and the node then runs on the CPU: rank
/// below 2, no class (C = 0), or more labels than the error record's 32-bit
/// index holds (2^31 - 1).
bool planLoss(const int64_t *dims, size_t rank, LossLaunch what, bool reduced,
              unsigned smCount, LossPlan &out);

/// The float offset of the weight array in a reduced loss's workspace
/// (after the losses, rounded up to 64 floats = 256 bytes).
int64_t lossWeightOffset(int64_t positions);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_LOSSPLAN_H
