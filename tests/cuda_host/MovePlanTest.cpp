//===- MovePlanTest.cpp - The data-movement index family's host-side decisions -===//
//
// Without a GPU: the plans and bodies of Kernels/MoveBodies.h, which the CPU
// kernels and the CUDA launchers (MoveKernels.cu) both walk, against the
// ONNX definitions written here as reshapes and transposes or plain loops:
// DepthToSpace (DCR, CRD) and SpaceToDepth offsets, GatherND/ScatterND tuple
// plans (slice sizes, strides, batch_dims, refusals), ScatterElements' lines
// (each collision set on one line, in order), ReverseSequence, Compress and
// NonZero coordinates; and which of these nodes the CUDA table takes.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Kernels/MoveBodies.h"
#include <gtest/gtest.h>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

using Dims = std::vector<int64_t>;

/// The row-major offset of `idx` in `shape`.
int64_t flat(const Dims &idx, const Dims &shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    off = off * shape[d] + idx[d];
  return off;
}

/// The multi-index of offset e in `shape`.
Dims unflat(int64_t e, const Dims &shape) {
  Dims idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = e % shape[d];
    e /= shape[d];
  }
  return idx;
}

/// transpose(reshape(x, inShape), perm): the offset in x of element `e` of
/// the transposed tensor.
int64_t transposedSource(int64_t e, const Dims &inShape, const Dims &perm) {
  Dims outShape;
  for (int64_t p : perm)
    outShape.push_back(inShape[size_t(p)]);
  Dims out = unflat(e, outShape), in(inShape.size());
  for (size_t k = 0; k < perm.size(); ++k)
    in[size_t(perm[k])] = out[k];
  return flat(in, inShape);
}

TEST(BlockMovePlan, MatchesTheOnnxReshapeTransposeDefinitions) {
  for (int64_t b : {1, 2, 3}) {
    const int64_t n = 2, c = 3, h = 2, w = 4; // depth side [n, c*b*b, h, w]
    Dims space = {n, c, h * b, w * b};
    kernels::BlockMovePlan dcr, crd;
    ASSERT_TRUE(kernels::makeBlockMovePlan(space.data(), 4, b, false, dcr));
    ASSERT_TRUE(kernels::makeBlockMovePlan(space.data(), 4, b, true, crd));
    EXPECT_EQ(dcr.count, n * c * h * w * b * b);
    for (int64_t e = 0; e < dcr.count; ++e) {
      // DepthToSpace DCR: reshape [n, b, b, c, h, w], perm [0, 3, 4, 1, 5, 2];
      // CRD: reshape [n, c, b, b, h, w], perm [0, 1, 4, 2, 5, 3].
      EXPECT_EQ(kernels::blockDepthOffset(dcr, e),
                transposedSource(e, {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2}))
          << "b " << b << " e " << e;
      EXPECT_EQ(kernels::blockDepthOffset(crd, e),
                transposedSource(e, {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3}))
          << "b " << b << " e " << e;
      // SpaceToDepth: depth element d comes from space offset
      // transposedSource(d, [n, c, h, b, w, b], [0, 3, 5, 1, 2, 4]).
      EXPECT_EQ(transposedSource(kernels::blockDepthOffset(dcr, e), {n, c, h, b, w, b},
                                 {0, 3, 5, 1, 2, 4}),
                e);
    }
  }
  kernels::BlockMovePlan p;
  Dims odd = {1, 2, 3, 4}, rank3 = {1, 2, 4};
  EXPECT_FALSE(kernels::makeBlockMovePlan(odd.data(), 4, 2, false, p)); // 3 % 2
  EXPECT_FALSE(kernels::makeBlockMovePlan(rank3.data(), 3, 2, false, p));
  EXPECT_FALSE(kernels::makeBlockMovePlan(odd.data(), 4, 0, false, p));
}

TEST(TupleIndexPlan, SlicesStridesAndBatches) {
  // data [2, 3, 4, 5] by indices [6, 2]: tuples address [4, 5] slices.
  Dims data = {2, 3, 4, 5}, ind = {6, 2};
  kernels::TupleIndexPlan p;
  ASSERT_TRUE(kernels::makeTupleIndexPlan(data.data(), 4, ind.data(), 2, 0, p));
  EXPECT_EQ(p.depth, 2);
  EXPECT_EQ(p.slice, 20);
  EXPECT_EQ(p.tuples, 6);
  EXPECT_EQ(p.dims[0], 2);
  EXPECT_EQ(p.dims[1], 3);
  EXPECT_EQ(p.strides[0], 60);
  EXPECT_EQ(p.strides[1], 20);
  std::vector<int64_t> idx = {0, 0, 1, -1, -2, 2, 1, 3, 0, -4, 2, 0};
  int64_t off = -1, bad = 0;
  ASSERT_TRUE(kernels::tupleOffset(p, idx.data(), 1, off, bad));
  EXPECT_EQ(off, flat({1, 2, 0, 0}, data));
  ASSERT_TRUE(kernels::tupleOffset(p, idx.data(), 2, off, bad));
  EXPECT_EQ(off, flat({0, 2, 0, 0}, data));
  EXPECT_FALSE(kernels::tupleOffset(p, idx.data(), 3, off, bad));
  EXPECT_EQ(bad, 3);
  EXPECT_FALSE(kernels::tupleOffset(p, idx.data(), 4, off, bad));
  EXPECT_EQ(bad, -4);
  EXPECT_FALSE(kernels::tupleOffset(p, idx.data(), 5, off, bad));
  EXPECT_EQ(bad, 2); // [-2, 2) on the first axis
  // batch_dims 1: data [2, 3, 4] by indices [2, 5, 1]: tuple t is in batch
  // t / 5 and selects a row of 4.
  Dims bd = {2, 3, 4}, bi = {2, 5, 1};
  ASSERT_TRUE(kernels::makeTupleIndexPlan(bd.data(), 3, bi.data(), 3, 1, p));
  EXPECT_EQ(p.perBatch, 5);
  EXPECT_EQ(p.batchStride, 12);
  EXPECT_EQ(p.slice, 4);
  std::vector<int64_t> bidx = {0, 1, 2, 0, 1, 2, -1, -3, 0, 1};
  ASSERT_TRUE(kernels::tupleOffset(p, bidx.data(), 6, off, bad));
  EXPECT_EQ(off, flat({1, 2, 0}, bd));
  // A tuple of the whole rank: slices of one element; an empty tuple: the
  // whole tensor.
  Dims full = {4, 3};
  ASSERT_TRUE(kernels::makeTupleIndexPlan(bd.data(), 3, Dims{4, 3}.data(), 2, 0, p));
  EXPECT_EQ(p.slice, 1);
  EXPECT_EQ(p.tuples, 4);
  ASSERT_TRUE(kernels::makeTupleIndexPlan(bd.data(), 3, Dims{2, 0}.data(), 2, 0, p));
  EXPECT_EQ(p.slice, 24);
  // Refused: longer than the data, beyond kMaxTupleLength, no last axis.
  EXPECT_FALSE(kernels::makeTupleIndexPlan(bd.data(), 3, Dims{2, 4}.data(), 2, 0, p));
  EXPECT_FALSE(kernels::makeTupleIndexPlan(bd.data(), 3, Dims{2, 3}.data(), 2, 1, p));
  Dims deep(size_t(kernels::kMaxTupleLength) + 1, 1);
  Dims deepIdx = {1, int64_t(deep.size())};
  EXPECT_FALSE(
      kernels::makeTupleIndexPlan(deep.data(), int(deep.size()), deepIdx.data(), 2, 0, p));
  EXPECT_FALSE(kernels::makeTupleIndexPlan(bd.data(), 3, full.data(), 0, 0, p));
}

TEST(ElementLines, EachCollisionSetIsOneLineInOrder) {
  // Indices [2, 3, 4] on each axis: the lines cover every element once;
  // along a line only the axis coordinate changes, and it increases.
  Dims data = {5, 6, 7}, ind = {2, 3, 4};
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE(axis);
    kernels::ElementIndexPlan p;
    ASSERT_TRUE(kernels::makeElementIndexPlan(data.data(), ind.data(), 3, axis, p));
    kernels::ElementLines l = kernels::elementLines(p);
    EXPECT_EQ(l.length, ind[size_t(axis)]);
    EXPECT_EQ(l.lines * l.length, 24);
    std::set<int64_t> seen;
    for (int64_t line = 0; line < l.lines; ++line) {
      Dims first = unflat(kernels::lineElement(l, line, 0), ind);
      for (int64_t j = 0; j < l.length; ++j) {
        int64_t e = kernels::lineElement(l, line, j);
        EXPECT_TRUE(seen.insert(e).second) << e;
        Dims at = unflat(e, ind), expect = first;
        expect[size_t(axis)] = j;
        EXPECT_EQ(at, expect);
      }
    }
    EXPECT_EQ(seen.size(), 24u);
  }
  kernels::ElementIndexPlan p;
  Dims empty = {2, 0, 4};
  ASSERT_TRUE(kernels::makeElementIndexPlan(data.data(), empty.data(), 3, 1, p));
  EXPECT_EQ(kernels::elementLines(p).lines, 0);
}

TEST(ScatterCombine, OneRoundingPerUpdateAndTiesKeepTheStoredValue) {
  using kernels::ScatterCombine;
  // f16: 2048 + 1 rounds back to 2048 each time (an fp32 sum of three
  // updates would not).
  Half acc = kernels::castValue<Half>(2048.0f), one = kernels::castValue<Half>(1.0f);
  for (int i = 0; i < 3; ++i)
    acc = kernels::scatterCombine(acc, one, ScatterCombine::Add);
  EXPECT_EQ(float(acc), 2048.0f);
  EXPECT_EQ(kernels::scatterCombine(3.0f, -2.0f, ScatterCombine::Mul), -6.0f);
  EXPECT_EQ(kernels::scatterCombine(int64_t(5), int64_t(9), ScatterCombine::None), 9);
  float nan = std::numeric_limits<float>::quiet_NaN();
  // A comparison with a NaN fails: the update is taken.
  EXPECT_TRUE(std::isnan(kernels::scatterCombine(1.0f, nan, ScatterCombine::Max)));
  EXPECT_EQ(kernels::scatterCombine(nan, 1.0f, ScatterCombine::Min), 1.0f);
  EXPECT_EQ(kernels::scatterCombine(4, 7, ScatterCombine::Max), 7);
  EXPECT_EQ(kernels::scatterCombine(4, 7, ScatterCombine::Min), 4);
  EXPECT_TRUE(kernels::scatterCombine(false, true, ScatterCombine::Add));
  EXPECT_FALSE(kernels::scatterCombine(false, true, ScatterCombine::Mul));
}

TEST(MoveBodies, ReverseSequenceCompressAndCoordinates) {
  // Time-major [4, 2]: batch b reverses its first lens[b] steps.
  kernels::ReverseSequencePlan tm;
  tm.d0 = 4;
  tm.d1 = 2;
  const int64_t lens[2] = {3, 9}; // 9: clamped to the 4 steps
  std::vector<int64_t> src;
  for (int64_t r = 0; r < 8; ++r)
    src.push_back(kernels::reverseSequenceSource(tm, r, lens[kernels::reverseSequenceBatch(tm, r)]));
  EXPECT_EQ(src, (std::vector<int64_t>{4, 7, 2, 5, 0, 3, 6, 1}));
  // Batch-major [2, 3]: rows of batch 0 reversed over 2 steps, batch 1 kept (0).
  kernels::ReverseSequencePlan bm;
  bm.d0 = 2;
  bm.d1 = 3;
  bm.batchFirst = true;
  const int64_t blens[2] = {2, 0};
  src.clear();
  for (int64_t r = 0; r < 6; ++r)
    src.push_back(kernels::reverseSequenceSource(bm, r, blens[kernels::reverseSequenceBatch(bm, r)]));
  EXPECT_EQ(src, (std::vector<int64_t>{1, 0, 2, 3, 4, 5}));
  // Compress [2, 5, 3] on the middle axis keeping positions 1 and 4.
  kernels::AxisSplit split;
  split.outer = 2;
  split.dim = 5;
  split.inner = 3;
  const int64_t list[2] = {1, 4};
  for (int64_t e = 0; e < 12; ++e) {
    Dims o = unflat(e, {2, 2, 3});
    EXPECT_EQ(kernels::compressSource(split, 2, list, e), flat({o[0], list[o[1]], o[2]}, {2, 5, 3}));
  }
  // NonZero's column k holds the multi-index.
  const int64_t dims[3] = {2, 3, 4};
  int64_t out[3 * 2] = {};
  kernels::writeCoordinates(dims, 3, 23, out, 2, 1);
  kernels::writeCoordinates(dims, 3, 6, out, 2, 0);
  EXPECT_EQ(std::vector<int64_t>(out, out + 6), (std::vector<int64_t>{0, 1, 1, 2, 2, 3}));
  EXPECT_TRUE(kernels::isNonZero(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_FALSE(kernels::isNonZero(kernels::castValue<BFloat16>(-0.0f)));
  EXPECT_TRUE(kernels::eyeLikeOne(1, 3, 2));
  EXPECT_FALSE(kernels::eyeLikeOne(3, 1, 2));
}

/// One node of a model, for the table's per-node decisions.
struct MoveNode : ModelFixture {
  Node *node(const char *op, std::vector<DType> ins, DType out, const char *name) {
    return oneNode(op, ins, out, name);
  }
};

TEST_F(MoveNode, RowsTakeWhatTheLaunchersRun) {
  Node *gnd = node("GatherND", {DType::F16, DType::I64}, DType::F16, "gnd");
  EXPECT_EQ(findCudaKernel(*gnd)->kind, CudaKernelKind::GatherND);
  EXPECT_TRUE(cudaRuns(*gnd, {DType::Bool, DType::I32}));
  EXPECT_FALSE(cudaRuns(*gnd, {DType::F16, DType::F32}));
  EXPECT_FALSE(cudaRuns(*gnd, {DType::String, DType::I64}));
  // Scatter: a plain store of any raw element; a reduction on the
  // arithmetic launcher types; updates of the data's type.
  Node *snd = node("ScatterND", {DType::Bool, DType::I64, DType::Bool}, DType::Bool, "snd");
  EXPECT_TRUE(cudaRuns(*snd, {DType::Bool, DType::I64, DType::Bool}));
  EXPECT_TRUE(cudaRuns(*snd, {DType::U16, DType::I64, DType::U16}));
  EXPECT_FALSE(cudaRuns(*snd, {DType::F16, DType::I64, DType::F32}));
  snd->setAttr(Attribute::makeString("reduction", "add"));
  EXPECT_FALSE(cudaRuns(*snd, {DType::Bool, DType::I64, DType::Bool}));
  EXPECT_FALSE(cudaRuns(*snd, {DType::F64, DType::I64, DType::F64}));
  EXPECT_TRUE(cudaRuns(*snd, {DType::BF16, DType::I64, DType::BF16}));
  Node *sel = node("ScatterElements", {DType::I32, DType::I32, DType::I32}, DType::I32, "sel");
  sel->setAttr(Attribute::makeString("reduction", "max"));
  EXPECT_TRUE(cudaRuns(*sel, {DType::I32, DType::I32, DType::I32}));
  EXPECT_FALSE(cudaRuns(*sel, {DType::I32, DType::I16, DType::I32}));
  // Compress: a bool condition; NonZero: the cast types the CPU row lists.
  Node *cmp = node("Compress", {DType::F16, DType::Bool}, DType::F16, "cmp");
  EXPECT_TRUE(cudaRuns(*cmp, {DType::F16, DType::Bool}));
  EXPECT_FALSE(cudaRuns(*cmp, {DType::F16, DType::I64}));
  Node *nz = node("NonZero", {DType::BF16}, DType::I64, "nz");
  EXPECT_TRUE(cudaRuns(*nz, {DType::BF16}));
  EXPECT_TRUE(cudaRuns(*nz, {DType::Bool}));
  EXPECT_FALSE(cudaRuns(*nz, {DType::U16}));
  // EyeLike: the output type (dtype) must be one the launchers move.
  Node *eye = node("EyeLike", {DType::F32}, DType::F64, "eye");
  eye->setAttr(Attribute::makeInt("dtype", int64_t(DType::F64)));
  EXPECT_TRUE(cudaRuns(*eye, {DType::F32}));
  eye->setAttr(Attribute::makeInt("dtype", int64_t(DType::String)));
  EXPECT_FALSE(cudaRuns(*eye, {DType::F32}));
  // ReverseSequence: integer lengths; DepthToSpace/SpaceToDepth: raw elements.
  Node *rs = node("ReverseSequence", {DType::F16, DType::I64}, DType::F16, "rs");
  EXPECT_TRUE(cudaRuns(*rs, {DType::F16, DType::I64}));
  EXPECT_FALSE(cudaRuns(*rs, {DType::F16, DType::F32}));
  Node *d2s = node("DepthToSpace", {DType::I8}, DType::I8, "d2s");
  EXPECT_EQ(findCudaKernel(*d2s)->kind, CudaKernelKind::BlockMove);
  EXPECT_TRUE(cudaRuns(*d2s, {DType::I8}));
  Node *s2d = node("SpaceToDepth", {DType::F64}, DType::F64, "s2d");
  EXPECT_TRUE(cudaRuns(*s2d, {DType::F64}));
}

} // namespace
