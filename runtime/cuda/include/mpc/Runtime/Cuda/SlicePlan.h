//===- SlicePlan.h - Launch plans of the row (slice) launchers ---*- C++ -*-===//
//
// Softmax, LogSoftmax, their gradients and the layer/RMS normalizations
// reduce along one run of axes of a row-major tensor and then rewrite the
// same elements. The tensor is seen as [outer, axisDim, inner]: outer *
// inner independent slices of axisDim elements, element a of slice (o, i)
// at (o * axisDim + a) * inner + i. How the CUDA launchers cover the
// slices is decided here, as pure functions of the shape (no CUDA header),
// so that CI, which has no GPU, tests it:
//
//  - inner == 1 (the slice is a contiguous row, the common last-axis case):
//    one block per row. Thread t folds elements t, t + threads, ... in
//    order, then the block combines the thread results in a fixed tree
//    (warp shuffles, then one warp over the warp results). The tree depends
//    only on `threads`, which depends only on axisDim: the same shape gives
//    bit-identical results run to run.
//  - inner > 1 (a middle axis): one thread per slice, folding its axisDim
//    elements in order; adjacent threads read adjacent columns (coalesced).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_SLICEPLAN_H
#define MPC_RUNTIME_CUDA_SLICEPLAN_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include <cstddef>
#include <cstdint>

namespace mpc {
namespace cuda {

/// A tensor as [outer, axisDim, inner] around the reduced axes.
struct SliceShape {
  int64_t outer = 1, axisDim = 1, inner = 1;
  int64_t slices() const { return outer * inner; }
  int64_t numElements() const { return outer * axisDim * inner; }
};

/// The shape split around axes [first, last) of dims[0..rank): outer is the
/// product of the dims before `first`, axisDim of those in [first, last),
/// inner of those from `last` on. Requires 0 <= first <= last <= rank.
SliceShape splitAxes(const int64_t *dims, size_t rank, size_t first, size_t last);

/// The offset of element 0 of slice `s` (s = o * inner + i); element a of
/// the slice is at sliceBase + a * inner. The kernels' index math (a row
/// of a cooperative launch is the case inner == 1).
MPC_HD inline int64_t sliceBase(int64_t s, int64_t axisDim, int64_t inner) {
  int64_t o = s / inner, i = s - o * inner;
  return o * axisDim * inner + i;
}

/// A reduction over `axes` (non-negative, any order, repeats allowed) of
/// dims[0..rank) as slices: the reduced dimensions of size above 1 must be
/// one contiguous run once size-1 dimensions are set aside; then outer is
/// the product of the kept dimensions before the run, axisDim of the
/// reduced ones (the count of elements folded into one result, 0 when a
/// reduced dimension is 0) and inner of the kept ones after it, and the
/// result of slice s is element s of the dense output. Returns false when
/// the reduced dimensions are split by a kept one (two reduced runs), which
/// a single pass over slices cannot read.
bool reductionSlices(const int64_t *dims, size_t rank, const int64_t *axes, size_t numAxes,
                     SliceShape &out);

/// Threads per block of a cooperative (one block per row) launch.
constexpr unsigned kMinRowThreads = 32;   // one warp
constexpr unsigned kMaxRowThreads = 1024; // the CUDA block limit
/// The largest grid.x a launch uses (CUDA allows 2^31 - 1); more rows loop.
constexpr int64_t kMaxGridBlocks = 0x7fffffff;

/// The block size for rows of n elements: the smallest power of two >= n,
/// clamped to [kMinRowThreads, kMaxRowThreads] (a whole number of warps,
/// each thread folding ceil(n / threads) elements).
unsigned rowThreads(int64_t n);

struct SlicePlan {
  SliceShape shape;
  /// One block per slice (inner == 1), else one thread per slice.
  bool cooperative = false;
  unsigned blocks = 0;  ///< 0: nothing to launch (no element)
  unsigned threads = 0; ///< threads per block
};

/// How the launchers cover `s` on a device with `smCount` multiprocessors.
/// Nothing is launched when there is no slice or the slices are empty.
SlicePlan planSlices(const SliceShape &s, unsigned smCount);

/// A reduction over a middle axis (inner > 1) split over blocks, the
/// reductions' alternative to one thread per slice, which leaves a GPU
/// nearly idle for a [rows, features] BiasGrad (a few thousand threads each
/// folding every row). Pass 1: block (x, c, o) is kColumnTile columns wide
/// and kColumnLanes rows tall; lane y of column i folds rows c *
/// rowsPerChunk + y, + kColumnLanes, ... of chunk c in order, the lanes'
/// results are combined in lane order, and the chunk's partial goes to the
/// workspace at (o * chunks + c) * inner + i. Pass 2: one thread per result
/// combines its chunks' partials in chunk order and finishes. Every order is
/// fixed by the shape and smCount, so the result is the same run to run.
constexpr unsigned kColumnTile = 32;  // columns per block: one warp, coalesced
constexpr unsigned kColumnLanes = 8;  // rows folded side by side per column
constexpr int64_t kMaxGridYZ = 65535; // CUDA's limit on grid.y and grid.z

struct ColumnSplit {
  SliceShape shape;
  unsigned tiles = 0;  ///< grid.x: ceil(inner / kColumnTile); 0: not split
  unsigned chunks = 0; ///< grid.y: chunks of axisDim
  int64_t rowsPerChunk = 0;
  /// Floats of the partials: outer * chunks * inner.
  uint64_t workspaceFloats() const { return uint64_t(shape.outer) * chunks * shape.inner; }
};

/// The split for `s` on a device with `smCount` multiprocessors: chunks of
/// at least kMinChunkRows rows (a multiple of kColumnLanes) and about
/// 4 * smCount blocks in all. Not split (tiles 0) where one thread per
/// slice is already enough: inner == 1, axisDim below 2 * kMinChunkRows or
/// as many slices as 4 * smCount blocks of 256 threads, or outer beyond
/// the grid's z limit.
constexpr int64_t kMinChunkRows = 64;
ColumnSplit planColumnSplit(const SliceShape &s, unsigned smCount);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_SLICEPLAN_H
