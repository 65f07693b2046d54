//===- PlacementTest.cpp - Shape-derived values and the CUDA placement ----===//
//
// A static plan folds the integer subgraphs over Shape that exported models
// compute Slice bounds, Reshape targets, Expand shapes, Pad pads and
// reduction axes with, and carries the folded values in the signature
// (TensorDesc::values): the CUDA kernel table then takes those nodes
// (cudaRunsShaped), and the placement computed on the host
// (createHostPlacementBackend under FallbackBackend) puts them on the
// device. Outputs are checked bit for bit against the CPU backend, across
// a change of input shapes (a new plan folds again).
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/HostPlacement.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/FallbackBackend.h"
#include "../runtime/ModelText.h"

#include <gtest/gtest.h>

using namespace mpc;
using namespace mpc::cuda;

namespace {

/// torch.onnx's way of writing shape arithmetic: the last axis halved by a
/// Slice whose end is Shape -> Gather -> Div, a Reshape to [b, t * h] from
/// Shape -> Slice -> Mul -> Concat, an Expand to [b, 3, t * h], a Pad whose
/// pads come from Equal/Where on the batch size, a ReduceSum over axes
/// computed from the rank, and a Tile whose repeats are a Concat.
const char kExported[] = R"(
graph @g(%x: f32[b,t,d]) -> (%sum: f32[b,?], %tiled: f32[?,?,?]) {
  init %i0: i64[1] = [0]
  init %i1: i64[1] = [1]
  init %i2: i64[1] = [2]
  init %i3: i64[1] = [3]
  init %two: i64[] = [2]
  init %neg: i64[1] = [-1]
  %s = Shape(%x) : i64[3]
  %d = Gather(%s, %i2) {axis = 0} : i64[1]
  %half = Div(%d, %two) : i64[1]
  %xs = Slice(%x, %i0, %half, %i2) : f32[b,t,?] name="slice"
  %bt = Slice(%s, %i0, %i2) : i64[2]
  %t = Slice(%bt, %i1, %i2) : i64[1]
  %th = Mul(%t, %half) : i64[1]
  %b = Gather(%s, %i0) {axis = 0} : i64[1]
  %target = Concat(%b, %th) {axis = 0} : i64[2]
  %r = Reshape(%xs, %target) : f32[b,?] name="reshape"
  %u = Unsqueeze(%r, %i1) : f32[b,1,?]
  %eshape = Concat(%b, %i3, %th) {axis = 0} : i64[3]
  %e = Expand(%u, %eshape) : f32[b,3,?] name="expand"
  %isTwo = Equal(%b, %i2) : bool[1]
  %padEnd = Where(%isTwo, %i2, %i1) : i64[1]
  %pads = Concat(%i0, %i0, %i0, %i0, %padEnd, %i0) {axis = 0} : i64[6]
  %p = Pad(%e, %pads) : f32[b,?,?] name="pad"
  %rank = Shape(%s) : i64[1]
  %last = Sub(%rank, %i1) : i64[1]
  %sum = ReduceSum(%p, %last) {keepdims = 0} : f32[b,?] name="reduce"
  %reps = Concat(%i1, %padEnd, %i1) {axis = 0} : i64[3]
  %tiled = Tile(%p, %reps) : f32[?,?,?] name="tile"
  return %sum, %tiled
})";

/// The same kind of Slice in a model that runs in dynamic mode (NonZero's
/// output shape depends on values): shapes and values are found node by node
/// as it runs, signatures carry no values, and the Slice runs on the CPU as
/// before.
const char kDynamic[] = R"(
graph @g(%x: f32[2,8]) -> (%y: f32[2,?], %nz: i64[2,?]) {
  init %i0: i64[1] = [0]
  init %i1: i64[1] = [1]
  init %two: i64[] = [2]
  %s = Shape(%x) : i64[2]
  %d = Gather(%s, %i1) {axis = 0} : i64[1]
  %half = Div(%d, %two) : i64[1]
  %y = Slice(%x, %i0, %half, %i1) : f32[2,?] name="slice"
  %nz = NonZero(%x) : i64[2,?] name="nonzero"
  return %y, %nz
})";

HostTensor ramp(std::vector<int64_t> shape) {
  HostTensor x(DType::F32, std::move(shape));
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<float>()[i] = float(i % 13) * 0.25f - 1.0f;
  return x;
}

struct Runner {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Executor> exec;
  FallbackBackend *fallback = nullptr;
  Runner(const char *text, bool placement) {
    model = test::parseVerified(text);
    if (!model)
      return;
    if (placement) {
      auto fb = std::make_unique<FallbackBackend>(createHostPlacementBackend(),
                                                  std::make_unique<CpuBackend>());
      fallback = fb.get();
      backend = std::move(fb);
    } else {
      backend = std::make_unique<CpuBackend>();
    }
    auto e = Executor::create(*model, *backend);
    if (!e) {
      ADD_FAILURE() << llvm::toString(e.takeError());
      return;
    }
    exec = std::move(*e);
  }
};

} // namespace

TEST(ShapeFolding, ExportedShapeArithmeticRunsOnTheDeviceAndMatchesTheCpu) {
  Runner cuda(kExported, true), cpu(kExported, false);
  ASSERT_TRUE(cuda.exec && cpu.exec);
  // Two batch sizes (the Pad and the Tile differ: Where on the batch) and two
  // lengths: every shape change is a new plan that folds again.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 3, 8}, {5, 4, 6}, {2, 3, 8}}) {
    HostTensor x = ramp(shape);
    auto got = cuda.exec->run({{"x", x}});
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    auto want = cpu.exec->run({{"x", x}});
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    ASSERT_EQ(got->size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ((*got)[i].tensor.shape, (*want)[i].tensor.shape) << i;
      EXPECT_EQ((*got)[i].tensor.bytes, (*want)[i].tensor.bytes) << i;
    }
    int64_t b = shape[0], t = shape[1], h = shape[2] / 2, padEnd = b == 2 ? 2 : 1;
    EXPECT_EQ((*got)[0].tensor.shape, (std::vector<int64_t>{b, 3 + padEnd}));
    EXPECT_EQ((*got)[1].tensor.shape, (std::vector<int64_t>{b, (3 + padEnd) * padEnd, t * h}));
    // The sums of the first row by hand: x[0, :, :h] summed, three times
    // (Expand), then the padded rows' zeros.
    double row = 0;
    for (int64_t k = 0; k < t; ++k)
      for (int64_t j = 0; j < h; ++j)
        row += x.data<float>()[k * shape[2] + j];
    for (int r = 0; r < 3; ++r)
      EXPECT_NEAR((*got)[0].tensor.data<float>()[r], row, 1e-4) << r;
    EXPECT_EQ((*got)[0].tensor.data<float>()[3], 0.0f);
    // Shape, the Gathers, Div, the shape Slices, Mul, the Concats, Equal,
    // Where, Sub: folded while planning, never launched.
    EXPECT_EQ(cuda.exec->numFoldedNodes(), 15u);
    EXPECT_EQ(cuda.exec->scheduledNodes().size(), 7u);
    for (const Node *n : cuda.exec->scheduledNodes())
      EXPECT_NE(n->opType, "Shape");
    // Every launched node on the device: the Slice, Pad and ReduceSum take
    // their folded bounds, pads and axes as constants.
    EXPECT_EQ(cuda.fallback->partitionLine(), "cuda: 7 nodes; cpu fallback: none");
  }
}

TEST(ShapeFolding, DynamicModeKeepsTheSliceOnTheCpu) {
  Runner cuda(kDynamic, true), cpu(kDynamic, false);
  ASSERT_TRUE(cuda.exec && cpu.exec);
  EXPECT_TRUE(cuda.exec->isDynamic());
  HostTensor x = ramp({2, 8});
  auto got = cuda.exec->run({{"x", x}});
  ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
  auto want = cpu.exec->run({{"x", x}});
  ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
  EXPECT_EQ((*got)[0].tensor.shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ((*got)[0].tensor.bytes, (*want)[0].tensor.bytes);
  EXPECT_EQ((*got)[1].tensor.bytes, (*want)[1].tensor.bytes);
  std::string line = cuda.fallback->partitionLine();
  // NonZero has a CUDA row (it is shaped in dynamic mode); the Slice whose
  // bounds are computed at run time is the one node left on the CPU.
  EXPECT_EQ(line, "cuda: 4 nodes; cpu fallback: 1 node (Slice x1)");
}

struct KnownValues : ModelFixture {};

TEST_F(KnownValues, SliceBoundsAndReductionAxesFromTheSignature) {
  Node *slice = g->createNode("Slice");
  slice->name = "s";
  slice->addInput(g->addInput("x", Type::tensor(DType::F16, {2, 8})));
  for (const char *in : {"starts", "ends", "axes"})
    slice->addInput(g->addInput(in, Type::tensor(DType::I64, {1})));
  slice->setOutput(0, "y", Type::tensor(DType::F16, {2, 4}));
  auto desc = [](DType t, std::vector<int64_t> shape) {
    TensorDesc d;
    d.dtype = t;
    d.shape.assign(shape.begin(), shape.end());
    return d;
  };
  std::vector<TensorDesc> sig = {desc(DType::F16, {2, 8}), desc(DType::I64, {1}),
                                 desc(DType::I64, {1}), desc(DType::I64, {1})};
  // Bounds that are graph inputs: the painting and supportsOp say yes (the
  // row runs the dtypes), prepare says no while the values are unknown.
  EXPECT_TRUE(cudaRuns(*slice, {DType::F16, DType::I64, DType::I64, DType::I64}));
  EXPECT_TRUE(cudaRunsIfKnown(*slice, {DType::F16, DType::I64, DType::I64, DType::I64}));
  EXPECT_FALSE(cudaRunsShaped(*slice, sig));
  std::vector<int64_t> v;
  EXPECT_FALSE(knownInputInts(*slice, sig, 2, v));
  for (size_t i = 1; i < 4; ++i) {
    sig[i].hasValues = true;
    sig[i].values = {int64_t(i == 2 ? 4 : i == 3 ? 1 : 0)};
  }
  EXPECT_TRUE(cudaRunsShaped(*slice, sig));
  ASSERT_TRUE(knownInputInts(*slice, sig, 2, v));
  EXPECT_EQ(v, (std::vector<int64_t>{4}));
  // The values are part of the prepare key: another end, another prepare.
  EXPECT_EQ(shapeSignature(sig), "f16[2, 8] i64[1]=[0] i64[1]=[4] i64[1]=[1]");
  std::vector<TensorDesc> other = sig;
  other[2].values = {6};
  EXPECT_FALSE(other == sig);
  EXPECT_FALSE(prepareKey(*slice, other) == prepareKey(*slice, sig));

  Node *sum = g->createNode("ReduceSum");
  sum->name = "r";
  sum->addInput(g->addInput("d", Type::tensor(DType::F32, {2, 8})));
  sum->addInput(g->addInput("axes", Type::tensor(DType::I64, {1})));
  sum->setOutput(0, "z", Type::tensor(DType::F32, {2, 1}));
  // Axes that are a graph input: the table refuses them before shapes are
  // known (the painting is unchanged), and takes them once the plan knows them.
  EXPECT_FALSE(cudaRuns(*sum, {DType::F32, DType::I64}));
  EXPECT_TRUE(cudaRunsIfKnown(*sum, {DType::F32, DType::I64}));
  std::vector<TensorDesc> rsig = {desc(DType::F32, {2, 8}), desc(DType::I64, {1})};
  EXPECT_FALSE(cudaRunsShaped(*sum, rsig));
  rsig[1].hasValues = true;
  rsig[1].values = {1};
  EXPECT_TRUE(cudaRunsShaped(*sum, rsig));
}
