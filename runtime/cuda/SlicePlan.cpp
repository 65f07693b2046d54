//===- SlicePlan.cpp - Launch plans of the row (slice) launchers ----------===//
#include "mpc/Runtime/Cuda/SlicePlan.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include <algorithm>

using namespace mpc;
using namespace mpc::cuda;

SliceShape cuda::splitAxes(const int64_t *dims, size_t rank, size_t first, size_t last) {
  SliceShape s;
  for (size_t i = 0; i < rank; ++i)
    (i < first ? s.outer : i < last ? s.axisDim : s.inner) *= dims[i];
  return s;
}

bool cuda::reductionSlices(const int64_t *dims, size_t rank, const int64_t *axes,
                           size_t numAxes, SliceShape &out) {
  SliceShape s;
  // 0: before the reduced run, 1: in it, 2: after it.
  int phase = 0;
  for (size_t d = 0; d < rank; ++d) {
    bool reduced = false;
    for (size_t k = 0; k < numAxes; ++k)
      reduced |= axes[k] == int64_t(d);
    if (reduced) {
      s.axisDim *= dims[d];
      if (dims[d] == 1)
        continue;
      if (phase == 2)
        return false;
      phase = 1;
    } else {
      if (dims[d] != 1 && phase == 1)
        phase = 2;
      (phase == 0 ? s.outer : s.inner) *= dims[d];
    }
  }
  out = s;
  return true;
}

unsigned cuda::rowThreads(int64_t n) {
  unsigned t = kMinRowThreads;
  while (t < kMaxRowThreads && int64_t(t) < n)
    t *= 2;
  return t;
}

SlicePlan cuda::planSlices(const SliceShape &s, unsigned smCount) {
  SlicePlan p;
  p.shape = s;
  p.cooperative = s.inner == 1;
  if (s.numElements() <= 0)
    return p;
  if (p.cooperative) {
    p.blocks = unsigned(s.outer < kMaxGridBlocks ? s.outer : kMaxGridBlocks);
    p.threads = rowThreads(s.axisDim);
    return p;
  }
  LaunchGeometry g = elementwiseGeometry(s.slices(), smCount);
  p.blocks = g.blocks;
  p.threads = g.threads;
  return p;
}

ColumnSplit cuda::planColumnSplit(const SliceShape &s, unsigned smCount) {
  ColumnSplit c;
  c.shape = s;
  int64_t want = 4 * int64_t(smCount ? smCount : 1); // blocks in all
  if (s.inner <= 1 || s.axisDim < 2 * kMinChunkRows || s.outer > kMaxGridYZ ||
      s.slices() >= want * 256 || s.numElements() <= 0)
    return c;
  int64_t tiles = (s.inner + kColumnTile - 1) / kColumnTile;
  if (tiles > kMaxGridBlocks)
    return c;
  int64_t perSlab = (want + tiles * s.outer - 1) / (tiles * s.outer); // chunks wanted
  int64_t maxChunks = s.axisDim / kMinChunkRows;
  int64_t chunks = std::max<int64_t>(1, std::min({perSlab, maxChunks, kMaxGridYZ}));
  int64_t rows = (s.axisDim + chunks - 1) / chunks;
  rows = (rows + kColumnLanes - 1) / kColumnLanes * kColumnLanes;
  c.rowsPerChunk = rows;
  c.chunks = unsigned((s.axisDim + rows - 1) / rows);
  c.tiles = unsigned(tiles);
  return c;
}
