//===- LossPlan.cpp - Launch plans of the loss launchers --------------------===//
//
// See LossPlan.h.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/LossPlan.h"

using namespace mpc;
using namespace mpc::cuda;

int64_t cuda::lossWeightOffset(int64_t positions) { return (positions + 63) / 64 * 64; }

bool cuda::planLoss(const int64_t *dims, size_t rank, LossLaunch what, bool reduced,
                    unsigned smCount, LossPlan &out) {
  if (rank < 2 || dims[1] <= 0)
    return false;
  out = LossPlan();
  out.shape = splitAxes(dims, rank, 1, 2);
  int64_t positions = out.shape.slices();
  if (positions > 0x7fffffff)
    return false;
  out.rows = planSlices(out.shape, smCount);
  out.finishThreads = rowThreads(positions);
  if (reduced)
    out.workspaceBytes = what == LossLaunch::Loss
                             ? size_t(lossWeightOffset(positions) + positions) * sizeof(float)
                             : sizeof(float);
  return true;
}
