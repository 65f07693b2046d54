//===- SlicePlanTest.cpp - Launch plans of the softmax/norm launchers -----===//
//
// The CUDA backend's slice plans (SlicePlan.h), checked without a GPU: the
// split of a shape around the normalized axes against the row-major offsets
// of a numpy-style index, the block size of a row, the choice between one
// block per row and one thread per strided slice, and, by walking the
// kernels' own index function (sliceBase) the way both kernels do, that
// every element is visited exactly once by exactly one slice.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/SlicePlan.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

SliceShape split(std::vector<int64_t> dims, size_t first, size_t last) {
  return splitAxes(dims.data(), dims.size(), first, last);
}

TEST(SlicePlan, SplitsAroundTheAxes) {
  SliceShape s = split({2, 3, 4, 5}, 1, 2); // Softmax axis 1 (opset 13)
  EXPECT_EQ(s.outer, 2);
  EXPECT_EQ(s.axisDim, 3);
  EXPECT_EQ(s.inner, 20);
  s = split({2, 3, 4, 5}, 1, 4); // LayerNormalization axis 1, opset-11 Softmax
  EXPECT_EQ(s.outer, 2);
  EXPECT_EQ(s.axisDim, 60);
  EXPECT_EQ(s.inner, 1);
  s = split({2, 3, 4, 5}, 3, 4); // last axis
  EXPECT_EQ(s.outer, 24);
  EXPECT_EQ(s.axisDim, 5);
  EXPECT_EQ(s.inner, 1);
  s = split({}, 0, 0); // a scalar: one slice of one element
  EXPECT_EQ(s.numElements(), 1);
  EXPECT_EQ(s.slices(), 1);
  s = split({0, 7}, 1, 2); // no rows
  EXPECT_EQ(s.outer, 0);
  EXPECT_EQ(s.axisDim, 7);
  EXPECT_EQ(s.numElements(), 0);
}

TEST(SlicePlan, RowThreadsArePowersOfTwoWithinOneWarpAndTheBlockLimit) {
  EXPECT_EQ(rowThreads(0), 32u);
  EXPECT_EQ(rowThreads(1), 32u);
  EXPECT_EQ(rowThreads(32), 32u);
  EXPECT_EQ(rowThreads(33), 64u);
  EXPECT_EQ(rowThreads(768), 1024u);
  EXPECT_EQ(rowThreads(1024), 1024u);
  EXPECT_EQ(rowThreads(4097), 1024u);
  EXPECT_EQ(rowThreads(int64_t(1) << 40), 1024u);
  for (int64_t n = 1; n < 5000; n += 37) {
    unsigned t = rowThreads(n);
    EXPECT_EQ(t % 32, 0u);
    EXPECT_EQ(t & (t - 1), 0u) << n;
    // Not more than twice the elements (beyond one warp): no block of idle warps.
    if (t > 32)
      EXPECT_LT(int64_t(t) / 2, n);
  }
}

TEST(SlicePlan, ContiguousRowsGetABlockEachStridedSlicesAThreadEach) {
  SlicePlan p = planSlices(split({8, 128}, 1, 2), 132);
  EXPECT_TRUE(p.cooperative);
  EXPECT_EQ(p.blocks, 8u);
  EXPECT_EQ(p.threads, 128u);

  p = planSlices(split({4, 300, 2}, 1, 2), 132);
  EXPECT_FALSE(p.cooperative);
  LaunchGeometry g = elementwiseGeometry(8, 132);
  EXPECT_EQ(p.blocks, g.blocks);
  EXPECT_EQ(p.threads, g.threads);

  // Many slices: the grid is capped and loops (grid stride).
  p = planSlices(split({1000, 10, 1000}, 1, 2), 4);
  EXPECT_EQ(p.blocks, 4u * kBlocksPerSM);

  // Nothing to do: no launch.
  EXPECT_EQ(planSlices(split({0, 16}, 1, 2), 132).blocks, 0u);
  EXPECT_EQ(planSlices(split({3, 0}, 1, 2), 132).blocks, 0u);
  EXPECT_EQ(planSlices(split({3, 0, 4}, 1, 2), 132).blocks, 0u);
}

/// Walks a plan as its kernel does (blocks x threads; a cooperative block
/// strides its row by blockDim, a thread of the other kernel walks its
/// slice in order) and counts the visits of each element.
std::vector<int> visits(const SlicePlan &p) {
  const SliceShape &s = p.shape;
  std::vector<int> seen(size_t(s.numElements()), 0);
  int64_t n = s.axisDim;
  for (unsigned b = 0; b < p.blocks; ++b)
    for (unsigned t = 0; t < p.threads; ++t) {
      if (p.cooperative) {
        for (int64_t r = b; r < s.outer; r += p.blocks)
          for (int64_t a = t; a < n; a += p.threads)
            ++seen[size_t(sliceBase(r, n, 1) + a)];
      } else {
        int64_t stride = int64_t(p.blocks) * p.threads;
        for (int64_t sl = int64_t(b) * p.threads + t; sl < s.slices(); sl += stride)
          for (int64_t a = 0; a < n; ++a)
            ++seen[size_t(sliceBase(sl, n, s.inner) + a * s.inner)];
      }
    }
  return seen;
}

TEST(SlicePlan, EveryElementBelongsToOneSliceAtItsRowMajorOffset) {
  // sliceBase against the row-major offset of (o, a, i).
  for (int64_t outer : {1, 3})
    for (int64_t axisDim : {1, 5})
      for (int64_t inner : {1, 4})
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i)
            for (int64_t a = 0; a < axisDim; ++a)
              EXPECT_EQ(sliceBase(o * inner + i, axisDim, inner) + a * inner,
                        (o * axisDim + a) * inner + i);
  for (auto dims : std::vector<std::vector<int64_t>>{
           {3, 1000}, {2, 4097}, {5, 1}, {1, 1}, {7, 33}, {2, 7, 5}, {4, 3, 300}, {3, 1, 7}})
    for (size_t axis = 0; axis < dims.size(); ++axis) {
      SCOPED_TRACE(testing::Message() << "rank " << dims.size() << " axis " << axis);
      // A small device (2 multiprocessors) so that the grid-stride loops turn.
      SlicePlan p = planSlices(split(dims, axis, axis + 1), 2);
      std::vector<int> seen = visits(p);
      for (size_t k = 0; k < seen.size(); ++k)
        ASSERT_EQ(seen[k], 1) << "element " << k;
    }
}

/// Walks a ColumnSplit as its two kernels do: pass 1's blocks (tiles x chunks
/// x outer, kColumnTile x kColumnLanes threads) write partial (o, c, i) from
/// the rows they fold; pass 2 reads each result's partials. Checks that
/// every element of every column is folded exactly once, into the partial
/// of its own column and chunk, and that the partials pass 2 reads are
/// exactly those pass 1 writes.
void checkSplitCovers(const ColumnSplit &p) {
  const SliceShape &s = p.shape;
  ASSERT_GT(p.tiles, 0u);
  ASSERT_GT(p.chunks, 0u);
  ASSERT_EQ(p.rowsPerChunk % kColumnLanes, 0);
  ASSERT_GE(int64_t(p.tiles) * kColumnTile, s.inner);
  ASSERT_LT(int64_t(p.tiles - 1) * kColumnTile, s.inner); // no all-idle tile
  ASSERT_GE(int64_t(p.chunks) * p.rowsPerChunk, s.axisDim);
  ASSERT_LT(int64_t(p.chunks - 1) * p.rowsPerChunk, s.axisDim); // no empty chunk
  ASSERT_LE(int64_t(p.chunks), kMaxGridYZ);
  ASSERT_LE(s.outer, kMaxGridYZ);
  std::vector<int> seen(size_t(s.numElements()), 0);
  std::vector<int> written(size_t(p.workspaceFloats()), 0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (unsigned c = 0; c < p.chunks; ++c)
      for (unsigned x = 0; x < p.tiles; ++x)
        for (unsigned ty = 0; ty < kColumnLanes; ++ty)
          for (unsigned tx = 0; tx < kColumnTile; ++tx) {
            int64_t i = int64_t(x) * kColumnTile + tx;
            if (i >= s.inner)
              continue;
            int64_t a0 = int64_t(c) * p.rowsPerChunk;
            int64_t a1 = std::min(a0 + p.rowsPerChunk, s.axisDim);
            for (int64_t a = a0 + ty; a < a1; a += kColumnLanes)
              ++seen[size_t((o * s.axisDim + a) * s.inner + i)];
            if (ty == 0)
              ++written[size_t((o * p.chunks + c) * s.inner + i)];
          }
  for (size_t k = 0; k < seen.size(); ++k)
    ASSERT_EQ(seen[k], 1) << "element " << k;
  for (size_t k = 0; k < written.size(); ++k)
    ASSERT_EQ(written[k], 1) << "partial " << k;
  // Pass 2: result s = o * inner + i reads partial (o * chunks + c) * inner + i.
  std::vector<int> read(written.size(), 0);
  for (int64_t r = 0; r < s.slices(); ++r) {
    int64_t o = r / s.inner, i = r - o * s.inner;
    for (unsigned c = 0; c < p.chunks; ++c)
      ++read[size_t((o * p.chunks + c) * s.inner + i)];
  }
  EXPECT_EQ(read, written);
}

TEST(SlicePlan, MiddleAxisReductionsSplitOverBlocks) {
  // BiasGrad of a [tokens, features] gradient on an H100 (132 multiprocessors): about
  // 4 * 132 blocks instead of 3072 threads each folding 4096 rows.
  ColumnSplit p = planColumnSplit(SliceShape{1, 4096, 3072}, 132);
  EXPECT_EQ(p.tiles, 96u);
  EXPECT_EQ(p.chunks, 6u);
  EXPECT_EQ(p.rowsPerChunk, 688);
  EXPECT_EQ(p.workspaceFloats(), 6u * 3072u);
  checkSplitCovers(p);
  // Ragged edges: a partial last tile and a short last chunk; several outer slabs; a
  // small device, so chunks are bounded by kMinChunkRows, not by the block count.
  for (SliceShape s : {SliceShape{1, 4096, 768}, SliceShape{3, 1000, 45},
                       SliceShape{2, 129, 33}, SliceShape{1, 128, 2}, SliceShape{5, 300, 7}})
    for (unsigned sms : {1u, 2u, 132u}) {
      SCOPED_TRACE(testing::Message() << s.outer << "x" << s.axisDim << "x" << s.inner
                                      << " on " << sms);
      ColumnSplit q = planColumnSplit(s, sms);
      checkSplitCovers(q);
      EXPECT_GE(q.rowsPerChunk, kMinChunkRows);
    }
  // The same shape and device give the same plan (the partials' order is fixed).
  ColumnSplit again = planColumnSplit(SliceShape{1, 4096, 3072}, 132);
  EXPECT_EQ(again.chunks, p.chunks);
  EXPECT_EQ(again.rowsPerChunk, p.rowsPerChunk);
}

TEST(SlicePlan, ShortOrManyOrContiguousSlicesAreNotSplit) {
  EXPECT_EQ(planColumnSplit(SliceShape{1, 4096, 1}, 132).tiles, 0u);   // a row: cooperative
  EXPECT_EQ(planColumnSplit(SliceShape{1, 127, 3072}, 132).tiles, 0u); // too few rows
  EXPECT_EQ(planColumnSplit(SliceShape{64, 512, 3072}, 132).tiles, 0u); // slices enough
  EXPECT_EQ(planColumnSplit(SliceShape{70000, 512, 2}, 132).tiles, 0u); // grid.z limit
  EXPECT_EQ(planColumnSplit(SliceShape{1, 0, 8}, 132).tiles, 0u);      // nothing to fold
}

/// reductionSlices of dims over axes, or outer = -1 when refused.
SliceShape reduction(std::vector<int64_t> dims, std::vector<int64_t> axes) {
  SliceShape s;
  if (!reductionSlices(dims.data(), dims.size(), axes.data(), axes.size(), s))
    s.outer = -1;
  return s;
}

void expectSlices(const SliceShape &s, int64_t outer, int64_t axisDim, int64_t inner) {
  EXPECT_EQ(s.outer, outer);
  EXPECT_EQ(s.axisDim, axisDim);
  EXPECT_EQ(s.inner, inner);
}

TEST(SlicePlan, ReductionsAsSlices) {
  expectSlices(reduction({2, 3, 4}, {0, 1, 2}), 1, 24, 1);
  expectSlices(reduction({2, 3, 4}, {2}), 6, 4, 1);
  expectSlices(reduction({2, 3, 4}, {1}), 2, 3, 4);
  expectSlices(reduction({2, 3, 4}, {0}), 1, 2, 12);
  expectSlices(reduction({2, 3, 4, 5}, {2, 1}), 2, 12, 5); // any order
  expectSlices(reduction({2, 3, 4}, {1, 1}), 2, 3, 4);     // repeats
  // Size-1 dims do not split a run, reduced or kept.
  expectSlices(reduction({3, 1, 4, 1}, {0, 1}), 1, 3, 4);
  expectSlices(reduction({2, 3, 1, 4}, {1, 3}), 2, 12, 1);
  expectSlices(reduction({5, 1, 7}, {1}), 35, 1, 1); // reduces nothing: a copy per slice
  expectSlices(reduction({}, {}), 1, 1, 1);          // a scalar
  expectSlices(reduction({4, 6}, {}), 24, 1, 1);     // no axes (noop): one element each
  expectSlices(reduction({0, 3}, {0}), 1, 0, 3);     // over nothing: the identities
  // Two reduced runs with a kept dim between them: refused.
  EXPECT_EQ(reduction({2, 3, 4}, {0, 2}).outer, -1);
  EXPECT_EQ(reduction({2, 3, 4, 5}, {1, 3}).outer, -1);
  EXPECT_EQ(reduction({3, 4, 5}, {0, 2}).outer, -1);
}

TEST(SlicePlan, ReductionSlicesGatherEachResultsElements) {
  // Element k of x (row-major) must land in the slice of the output element
  // that a numpy reduction with keepdims would send it to.
  const std::vector<int64_t> dims = {2, 1, 3, 4, 1, 5};
  const std::vector<std::vector<int64_t>> cases = {
      {0}, {2}, {3}, {5}, {2, 3}, {2, 3, 4}, {1, 2, 3}, {0, 1, 2, 3, 4, 5}, {3, 4, 5}};
  for (const auto &axes : cases) {
    SCOPED_TRACE(testing::Message() << "axes " << axes.size() << " from " << axes[0]);
    SliceShape s = reduction(dims, axes);
    ASSERT_GE(s.outer, 0);
    int64_t total = 1;
    for (int64_t d : dims)
      total *= d;
    ASSERT_EQ(s.numElements(), total);
    for (int64_t sl = 0; sl < s.slices(); ++sl)
      for (int64_t a = 0; a < s.axisDim; ++a) {
        int64_t k = sliceBase(sl, s.axisDim, s.inner) + a * s.inner;
        // The output index of k: its kept coordinates, row-major.
        int64_t rem = k, out = 0, stride = 1;
        for (size_t d = dims.size(); d-- > 0;) {
          int64_t c = rem % dims[d];
          rem /= dims[d];
          if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end()) {
            out += c * stride;
            stride *= dims[d];
          }
        }
        ASSERT_EQ(out, sl) << "element " << k;
      }
  }
}

} // namespace
