//===- Broadcast.cpp - numpy-style broadcasting plans ---------------------===//
//
// Shape broadcasting and the collapsing of the output iteration space into
// the fewest dimensions along which both operands are linear.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Broadcast.h"
#include "../ops/ShapeHelpers.h"

#include <algorithm>
#include <cassert>

namespace mpc {
namespace kernels {

bool broadcastShapes(llvm::ArrayRef<int64_t> aShape,
                     llvm::ArrayRef<int64_t> bShape,
                     llvm::SmallVectorImpl<int64_t> &outShape) {
  return shapes::broadcastShapes(aShape, bShape, outShape);
}

BroadcastPlan makeBroadcastPlan(llvm::ArrayRef<int64_t> aShape,
                                llvm::ArrayRef<int64_t> bShape) {
  llvm::SmallVector<int64_t, 8> outShape;
  bool ok = broadcastShapes(aShape, bShape, outShape);
  assert(ok && "operand shapes do not broadcast");
  (void)ok;

  BroadcastPlan plan;
  plan.numElements = numElements(outShape);
  if (plan.numElements == 0)
    return plan;

  // Right-aligned contiguous strides of each operand, 0 where broadcast.
  size_t rank = outShape.size();
  llvm::SmallVector<int64_t, 8> aStrides(rank, 0), bStrides(rank, 0);
  int64_t aStride = 1, bStride = 1;
  for (size_t i = rank; i-- > 0;) {
    size_t ai = i + aShape.size(), bi = i + bShape.size();
    int64_t da = ai >= rank ? aShape[ai - rank] : 1;
    int64_t db = bi >= rank ? bShape[bi - rank] : 1;
    aStrides[i] = da == 1 ? 0 : aStride;
    bStrides[i] = db == 1 ? 0 : bStride;
    aStride *= da;
    bStride *= db;
  }

  // Walk from the innermost dimension outwards, dropping size-1 dimensions
  // and merging a dimension into the group inside it when both operands step
  // through the pair linearly.
  struct Group {
    int64_t dim, aStride, bStride;
  };
  llvm::SmallVector<Group, 8> groups; // Innermost first.
  for (size_t i = rank; i-- > 0;) {
    if (outShape[i] == 1)
      continue;
    if (!groups.empty()) {
      Group &g = groups.back();
      if (aStrides[i] == g.aStride * g.dim &&
          bStrides[i] == g.bStride * g.dim) {
        g.dim *= outShape[i];
        continue;
      }
    }
    groups.push_back({outShape[i], aStrides[i], bStrides[i]});
  }
  if (groups.empty())
    groups.push_back({1, 0, 0});
  assert(groups.size() <= size_t(kMaxBroadcastRank) &&
         "broadcast pattern too fragmented for a plan");

  plan.rank = int(groups.size());
  for (int k = 0; k < plan.rank; ++k) {
    const Group &g = groups[groups.size() - 1 - k];
    plan.dims[k] = g.dim;
    plan.aStrides[k] = g.aStride;
    plan.bStrides[k] = g.bStride;
  }
  return plan;
}

} // namespace kernels
} // namespace mpc
