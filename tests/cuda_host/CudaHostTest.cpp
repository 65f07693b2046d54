//===- CudaHostTest.cpp - The CUDA backend's host-side decisions -----------===//
//
// What the CUDA backend decides without a device, checked on every machine:
// the launch geometry of its grid-stride loops (every element visited once),
// the broadcast index math its binary kernels run (against a direct numpy
// index computation), its kernel table against the op registry and the CPU
// table, which nodes it runs, the capability object
// the AMP painting asks, the prepare-cache signature and the functor bytes a
// launcher receives.
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/ElementwiseFunctors.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include "mpc/Runtime/Kernels/ReduceBodies.h"
#include "mpc/Runtime/OpRegistry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Launch geometry
//===----------------------------------------------------------------------===//

/// Runs the grid-stride loop of `g` on the host and counts visits per element.
std::vector<int> visits(const LaunchGeometry &g, int64_t n) {
  std::vector<int> seen(size_t(n), 0);
  for (int64_t t = 0; t < g.stride(); ++t)
    for (int64_t i = t; i < n; i += g.stride())
      ++seen[size_t(i)];
  return seen;
}

TEST(LaunchGeometry, EmptyLaunchesNothing) {
  LaunchGeometry g = elementwiseGeometry(0, 132);
  EXPECT_EQ(g.blocks, 0u);
  EXPECT_EQ(g.stride(), 0);
}

TEST(LaunchGeometry, OneThreadPerElementUntilTheCap) {
  EXPECT_EQ(elementwiseGeometry(1, 132).blocks, 1u);
  EXPECT_EQ(elementwiseGeometry(1, 132).threads, 256u);
  EXPECT_EQ(elementwiseGeometry(256, 132).blocks, 1u);
  EXPECT_EQ(elementwiseGeometry(257, 132).blocks, 2u);
  // 132 SMs (H100 SXM) x 8 blocks: the cap.
  EXPECT_EQ(elementwiseGeometry(int64_t(1056) * 256, 132).blocks, 1056u);
  EXPECT_EQ(elementwiseGeometry(int64_t(1056) * 256 + 1, 132).blocks, 1056u);
  EXPECT_EQ(elementwiseGeometry(int64_t(1) << 40, 132).blocks, 1056u);
  // An unknown SM count is taken as 1.
  EXPECT_EQ(elementwiseGeometry(int64_t(1) << 20, 0).blocks, 8u);
}

TEST(LaunchGeometry, GridStrideVisitsEveryElementOnce) {
  for (int64_t n : {1, 255, 256, 257, 2048, 2049, 5000, 12345})
    for (unsigned sms : {1u, 2u, 132u}) {
      LaunchGeometry g = elementwiseGeometry(n, sms);
      std::vector<int> seen = visits(g, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(seen[size_t(i)], 1) << "n=" << n << " sms=" << sms << " i=" << i;
    }
}

//===----------------------------------------------------------------------===//
// Broadcast index math (BroadcastPlan.h), as the binary kernels run it
//===----------------------------------------------------------------------===//

/// The offset into an operand of `shape` of the output element at `index`
/// of `out`, straight from numpy's rule (right-aligned, size-1 axes repeat).
int64_t numpyOffset(const std::vector<int64_t> &out, const std::vector<int64_t> &shape,
                    int64_t index) {
  std::vector<int64_t> idx(out.size());
  for (size_t d = out.size(); d-- > 0;) {
    idx[d] = index % out[d];
    index /= out[d];
  }
  int64_t off = 0, stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t d = shape.size() - 1 - i, od = out.size() - 1 - i;
    if (shape[d] != 1)
      off += idx[od] * stride;
    stride *= shape[d];
  }
  return off;
}

TEST(BroadcastOffsets, MatchNumpyIndexing) {
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}},          {{2, 3, 4}, {3, 1}},
      {{2, 1, 4}, {1, 3, 1}}, {{}, {5}},                 {{5}, {}},
      {{1, 1}, {1, 1}},       {{3, 1, 5, 1}, {1, 4, 1, 6}}, {{2, 3, 4, 5}, {2, 1, 4, 1}},
      {{7, 1}, {1, 1, 9}},
  };
  for (auto &[a, b] : cases) {
    llvm::SmallVector<int64_t, 6> out;
    ASSERT_TRUE(kernels::broadcastShapes(a, b, out));
    std::vector<int64_t> outShape(out.begin(), out.end());
    kernels::BroadcastPlan plan = kernels::makeBroadcastPlan(a, b);
    ASSERT_EQ(plan.numElements, kernels::numElements(out));
    for (int64_t i = 0; i < plan.numElements; ++i) {
      int64_t ia = -1, ib = -1;
      kernels::broadcastOffsets(plan, i, ia, ib);
      ASSERT_EQ(ia, numpyOffset(outShape, a, i)) << "element " << i;
      ASSERT_EQ(ib, numpyOffset(outShape, b, i)) << "element " << i;
    }
  }
}

//===----------------------------------------------------------------------===//
// The kernel table
//===----------------------------------------------------------------------===//

TEST(CudaKernelTable, EveryRowHasARegistryRowAndACpuReference) {
  std::set<std::string> names;
  ASSERT_FALSE(cudaKernelTable().empty());
  for (const CudaKernel &k : cudaKernelTable()) {
    SCOPED_TRACE(k.opType);
    EXPECT_TRUE(names.insert(std::string(k.domain) + "::" + k.opType).second) << "duplicate row";
    EXPECT_NE(findOp(k.opType, k.domain, k.minOpset), nullptr) << "no registry row";
    EXPECT_LE(k.minOpset, k.maxOpset);
    // Sane dtypes: some, all of them types a launcher is instantiated for.
    EXPECT_NE(k.dtypes, 0u);
    EXPECT_EQ(k.dtypes & ~kCudaDataTypes, 0u);
    // The CPU backend (the reference) runs every type the CUDA row claims,
    // over the same opsets.
    const CpuKernel *cpu = findCpuKernel(k.opType, k.domain, k.minOpset);
    ASSERT_NE(cpu, nullptr) << "no CPU row";
    EXPECT_EQ(k.dtypes & ~cpu->dtypes, 0u);
    EXPECT_EQ(cpu->minOpset, k.minOpset);
    switch (k.kind) {
    case CudaKernelKind::Unary:
    case CudaKernelKind::Predicate:
      EXPECT_LT(k.op, int32_t(UnaryOpId::Count));
      // Float bodies (f64 too), or the bitwise ones over the CPU row's integer types.
      if (k.dtypes != kCudaElementwiseFloatTypes)
        EXPECT_EQ(k.dtypes, cpu->dtypes & kCudaIntegerTypes);
      break;
    case CudaKernelKind::Binary:
    case CudaKernelKind::Compare:
      EXPECT_LT(k.op, int32_t(BinaryOpId::Count));
      if (k.dtypes != kCudaElementwiseBinaryTypes)
        EXPECT_EQ(k.dtypes, cpu->dtypes & kCudaIntegerTypes);
      break;
    case CudaKernelKind::MatMul:
    case CudaKernelKind::Gemm:
    case CudaKernelKind::FusedMatMul:
    case CudaKernelKind::GemmBiasAct:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      break;
    case CudaKernelKind::Cast:
      EXPECT_EQ(k.dtypes, kCudaCastTypes);
      break;
    case CudaKernelKind::Conv:
    case CudaKernelKind::ConvTranspose:
    case CudaKernelKind::ConvGrad:
    case CudaKernelKind::Pool:
    case CudaKernelKind::PoolGrad:
    case CudaKernelKind::GlobalPool:
    case CudaKernelKind::GlobalPoolGrad:
    case CudaKernelKind::BatchNorm:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      break;
    // Softmax, normalization and reductions.
    case CudaKernelKind::Softmax:
    case CudaKernelKind::SoftmaxGrad:
    case CudaKernelKind::Norm:
    case CudaKernelKind::NormGrad:
    case CudaKernelKind::BiasGrad:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      break;
    case CudaKernelKind::Reduce:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      EXPECT_LE(k.op, int32_t(kernels::ReduceKind::LogSumExp));
      break;
    case CudaKernelKind::ActivationGrad:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      EXPECT_LE(k.op, int32_t(kernels::ActivationGrad::Gelu));
      break;
    case CudaKernelKind::Loss:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      break;
    case CudaKernelKind::Clip:
    case CudaKernelKind::TopK:
      EXPECT_EQ(k.dtypes, kCudaBinaryTypes);
      break;
    case CudaKernelKind::BatchNormGrad:
    case CudaKernelKind::StatNorm:
    case CudaKernelKind::Image: // Resize, LRN
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      break;
    case CudaKernelKind::MultiTensorUnscale: // keyed by inv_scale, as the CPU row
      EXPECT_EQ(k.dtypes, cpu->dtypes);
      break;
    case CudaKernelKind::OptimizerStep: // keyed by lr: fp32 master state only
      EXPECT_EQ(k.dtypes, dtypeBit(DType::F32));
      break;
    case CudaKernelKind::DataMove:
      // Every 1/2/4/8-byte dtype the CPU row runs (Where: its bool condition).
      EXPECT_EQ(k.dtypes, cpu->dtypes & kCudaDataTypes);
      EXPECT_NE(k.dtypes, 0u);
      break;
    // Recurrent ops: fp32 state, every operand of X's float type.
    case CudaKernelKind::Recurrent:
    case CudaKernelKind::LstmGrad:
    case CudaKernelKind::GruGrad:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      break;
    // Index, logic and shape ops: bool logic; the arithmetic launchers'
    // types; raw elements of 1, 2, 4 or 8 bytes.
    case CudaKernelKind::Logical:
    case CudaKernelKind::LogicalNot:
      EXPECT_EQ(k.dtypes, dtypeBit(DType::Bool));
      EXPECT_LE(k.op, int32_t(LogicalOpId::Xor));
      break;
    case CudaKernelKind::ArgReduce:
    case CudaKernelKind::Scan:
    case CudaKernelKind::Range:
    case CudaKernelKind::Fill:
    case CudaKernelKind::OneHot:
      EXPECT_EQ(k.dtypes, cpu->dtypes & kCudaBinaryTypes);
      break;
    case CudaKernelKind::ShapeOf:
    case CudaKernelKind::Trilu:
    case CudaKernelKind::GatherElements:
      EXPECT_EQ(k.dtypes, cpu->dtypes & kCudaDataTypes);
      break;
    // Data-movement index ops: raw elements; NonZero over the cast types.
    case CudaKernelKind::BlockMove:
    case CudaKernelKind::GatherND:
    case CudaKernelKind::Scatter:
    case CudaKernelKind::ReverseSequence:
    case CudaKernelKind::EyeLike:
    case CudaKernelKind::Compress:
      EXPECT_EQ(k.dtypes, cpu->dtypes & kCudaDataTypes);
      break;
    case CudaKernelKind::NonZero:
      EXPECT_EQ(k.dtypes, cpu->dtypes & kCudaCastTypes);
      break;
    // Transformer ops.
    case CudaKernelKind::Rotary:
    case CudaKernelKind::Einsum:
    case CudaKernelKind::Attention:
      EXPECT_EQ(k.dtypes, kCudaFloatTypes);
      break;
    }
  }
  for (const char *op : {"Add", "Mul", "Relu", "Gelu", "Equal", "IsNaN", "Cast", "CastLike",
                         "MatMul", "Gemm", "Conv", "ConvTranspose", "Identity", "Reshape",
                         "Flatten", "Squeeze", "Unsqueeze", "Dropout", "Transpose", "Expand",
                         "Concat", "Split", "Slice", "Tile", "Pad", "Where", "Gather", "Sum",
                         "Mean", "And", "Or", "Xor", "Not", "BitwiseAnd", "BitwiseNot",
                         "BitShift", "ArgMax", "ArgMin", "CumSum", "Trilu", "GatherElements",
                         "Shape", "Size", "Range", "ConstantOfShape"})
    EXPECT_TRUE(names.count(std::string("::") + op)) << op;
  EXPECT_TRUE(names.count("ai.mpc.training::ConvGrad"));
  EXPECT_TRUE(names.count("com.microsoft::ConvGrad"));
  EXPECT_TRUE(names.count("ai.mpc.training::SliceGrad"));
  EXPECT_TRUE(names.count("ai.mpc.training::GatherGrad"));
  for (const char *op : {"DepthToSpace", "SpaceToDepth", "GatherND", "ScatterElements",
                         "ScatterND", "ReverseSequence", "EyeLike", "Compress", "NonZero"})
    EXPECT_TRUE(names.count(std::string("::") + op)) << op;
  // No CUDA row yet.
  EXPECT_FALSE(names.count("::NonMaxSuppression"));
}

/// A model with one node, for the table's per-node decisions.
struct OneNode : ModelFixture {
  Node *node(const char *op, std::vector<DType> ins, DType out = DType::F32,
             const char *name = "n") {
    Node *n = g->createNode(op);
    n->name = name;
    int i = 0;
    for (DType t : ins)
      n->addInput(g->addInput("x" + std::to_string(i++), Type::tensor(t, {2, 8})));
    n->setOutput(0, std::string(name) + "_out", Type::tensor(out, {2, 8}));
    return n;
  }
};

TEST_F(OneNode, RunsWhatTheRowLists) {
  Node *add = node("Add", {DType::F16, DType::F16}, DType::F16, "add");
  EXPECT_TRUE(cudaRuns(*add, {DType::F16, DType::F16}));
  EXPECT_TRUE(cudaRuns(*add, {DType::I64, DType::I64}));
  // f64: the element-wise bodies in double (kCudaElementwiseBinaryTypes).
  EXPECT_TRUE(cudaRuns(*add, {DType::F64, DType::F64}));
  Node *sin = node("Sin", {DType::F64}, DType::F64, "sin");
  EXPECT_TRUE(cudaRuns(*sin, {DType::F64}));
  Node *isnan = node("IsNaN", {DType::F64}, DType::Bool, "isnan");
  EXPECT_TRUE(cudaRuns(*isnan, {DType::F64}));
  Node *less = node("Less", {DType::F64, DType::F64}, DType::Bool, "less");
  EXPECT_TRUE(cudaRuns(*less, {DType::F64, DType::F64}));
  // The launchers read both operands as the key type: a Pow whose exponent
  // has another type runs on the CPU.
  Node *pow = node("Pow", {DType::F64, DType::F32}, DType::F64, "pow");
  EXPECT_TRUE(cudaRuns(*pow, {DType::F64, DType::F64}));
  EXPECT_FALSE(cudaRuns(*pow, {DType::F64, DType::F32}));
  EXPECT_FALSE(cudaRuns(*pow, {DType::F16, DType::F32}));

  Node *nms = node("NonMaxSuppression", {DType::F32, DType::F32}, DType::I64, "nms");
  EXPECT_EQ(findCudaKernel(*nms), nullptr);
  EXPECT_FALSE(cudaRuns(*nms, {DType::F32, DType::F32}));

  // Variadic Max: three operands through the variadic launcher
  // (VariadicLaunchTest.cpp).
  Node *mx = node("Max", {DType::F32, DType::F32, DType::F32}, DType::F32, "mx");
  EXPECT_TRUE(cudaRuns(*mx, {DType::F32, DType::F32, DType::F32}));
  Node *mx2 = node("Max", {DType::F32, DType::F32}, DType::F32, "mx2");
  EXPECT_TRUE(cudaRuns(*mx2, {DType::F32, DType::F32}));
  EXPECT_TRUE(cudaRuns(*mx, {DType::F64, DType::F64, DType::F64}));

  // Recurrent ops: every float operand of X's type; sequence_lens (input 4)
  // only as a graph constant (here a graph input: the CPU runs the node).
  Node *gru = node("GRU", {DType::F16, DType::F16, DType::F16}, DType::F16, "gru");
  EXPECT_TRUE(cudaRuns(*gru, {DType::F16, DType::F16, DType::F16}));
  EXPECT_FALSE(cudaRuns(*gru, {DType::F16, DType::F32, DType::F16}));
  EXPECT_FALSE(cudaRuns(*gru, {DType::F64, DType::F64, DType::F64}));
  Node *rnn = node("RNN", {DType::F32, DType::F32, DType::F32, DType::F32, DType::I32},
                   DType::F32, "rnn");
  EXPECT_FALSE(cudaRuns(*rnn, {DType::F32, DType::F32, DType::F32, DType::F32, DType::I32}));

  // Cast: the target type is checked too.
  Node *cast = node("Cast", {DType::F32}, DType::F16, "c");
  cast->setAttr(Attribute::makeInt("to", int64_t(DType::F16)));
  EXPECT_TRUE(cudaRuns(*cast, {DType::F32}));
  Node *castU16 = node("Cast", {DType::F32}, DType::U16, "c16");
  castU16->setAttr(Attribute::makeInt("to", int64_t(DType::U16)));
  EXPECT_FALSE(cudaRuns(*castU16, {DType::F32}));

  // A matrix product of one float type.
  Node *mm = node("MatMul", {DType::BF16, DType::BF16}, DType::BF16, "mm");
  EXPECT_TRUE(cudaRuns(*mm, {DType::BF16, DType::BF16}));
  EXPECT_FALSE(cudaRuns(*mm, {DType::BF16, DType::F16}));
  EXPECT_FALSE(cudaRuns(*mm, {DType::F64, DType::F64}));

  // FusedMatMul: alpha, transA/transB and transBatchA/B are planned
  // (planFusedMatmul), in the GEMM types.
  Node *fm = node("FusedMatMul", {DType::F16, DType::F16}, DType::F16, "fm");
  fm->domain = "com.microsoft";
  m.opsets.push_back({"com.microsoft", 1});
  fm->setAttr(Attribute::makeInt("transA", 1));
  fm->setAttr(Attribute::makeFloat("alpha", 0.5f));
  ASSERT_NE(findCudaKernel(*fm), nullptr);
  EXPECT_TRUE(cudaRuns(*fm, {DType::F16, DType::F16}));
  EXPECT_FALSE(cudaRuns(*fm, {DType::F64, DType::F64}));
  fm->setAttr(Attribute::makeInt("transBatchB", 1));
  EXPECT_TRUE(cudaRuns(*fm, {DType::F16, DType::F16}));
  EXPECT_FALSE(cudaRuns(*fm, {DType::F64, DType::F64}));
  // Convolutions (cuDNN): X, W and B of one float type.
  Node *conv = node("Conv", {DType::F16, DType::F16, DType::F16}, DType::F16, "conv");
  EXPECT_TRUE(cudaRuns(*conv, {DType::F16, DType::F16, DType::F16}));
  EXPECT_TRUE(cudaRuns(*conv, {DType::BF16, DType::BF16, DType::Undefined}));
  EXPECT_FALSE(cudaRuns(*conv, {DType::F16, DType::F32, DType::F16}));
  EXPECT_FALSE(cudaRuns(*conv, {DType::F64, DType::F64}));
  Node *deconv = node("ConvTranspose", {DType::F32, DType::F32}, DType::F32, "deconv");
  EXPECT_TRUE(cudaRuns(*deconv, {DType::F32, DType::F32}));

  // BatchNormalization: scale, bias, mean and var of one type, X's or f32
  // with 16-bit X, in either mode (training: BatchNormTrainOps.cpp).
  const DType h = DType::F16, f = DType::F32;
  Node *bn = node("BatchNormalization", {h, h, h, h, h}, h, "bn");
  EXPECT_TRUE(cudaRuns(*bn, {h, h, h, h, h}));
  EXPECT_TRUE(cudaRuns(*bn, {h, f, f, f, f}));
  EXPECT_TRUE(cudaRuns(*bn, {f, f, f, f, f}));
  EXPECT_FALSE(cudaRuns(*bn, {f, h, h, h, h}));
  EXPECT_FALSE(cudaRuns(*bn, {h, f, h, f, f}));
  bn->setAttr(Attribute::makeInt("training_mode", 1));
  EXPECT_TRUE(cudaRuns(*bn, {h, h, h, h, h}));
  EXPECT_TRUE(cudaRuns(*bn, {h, f, f, f, f}));
  EXPECT_FALSE(cudaRuns(*bn, {h, f, h, f, f}));
}

TEST_F(OneNode, DataRowsTakeWhatTheLaunchersRun) {
  // Byte copies: any dtype of 1, 2, 4 or 8 bytes the CPU runs, not strings.
  Node *tr = node("Transpose", {DType::I64}, DType::I64, "tr");
  EXPECT_TRUE(cudaRuns(*tr, {DType::I64}));
  EXPECT_TRUE(cudaRuns(*tr, {DType::Bool}));
  EXPECT_TRUE(cudaRuns(*tr, {DType::BF16}));
  EXPECT_FALSE(cudaRuns(*tr, {DType::String}));
  // Dropout: inference only (no training_mode input).
  Node *drop = node("Dropout", {DType::F32}, DType::F32, "drop");
  EXPECT_TRUE(cudaRuns(*drop, {DType::F32}));
  Node *dropTrain = node("Dropout", {DType::F32, DType::F32, DType::Bool}, DType::F32, "dt");
  EXPECT_FALSE(cudaRuns(*dropTrain, {DType::F32, DType::F32, DType::Bool}));
  // Pad: the constant mode (strided copies) and edge, reflect, wrap (the
  // image family's gathers); not a mode the CPU does not know either.
  Node *pad = node("Pad", {DType::F16, DType::I64}, DType::F16, "pad");
  EXPECT_TRUE(cudaRuns(*pad, {DType::F16, DType::I64}));
  for (const char *mode : {"reflect", "edge", "wrap"}) {
    pad->setAttr(Attribute::makeString("mode", mode));
    EXPECT_TRUE(cudaRuns(*pad, {DType::F16, DType::I64})) << mode;
    EXPECT_TRUE(cudaRuns(*pad, {DType::I64, DType::I64})) << mode;
  }
  pad->setAttr(Attribute::makeString("mode", "mirror"));
  EXPECT_FALSE(cudaRuns(*pad, {DType::F16, DType::I64}));
  // Where: a bool condition and values of a launcher's element size.
  Node *where = node("Where", {DType::Bool, DType::F16, DType::F16}, DType::F16, "where");
  EXPECT_TRUE(cudaRuns(*where, {DType::Bool, DType::F16, DType::F16}));
  EXPECT_TRUE(cudaRuns(*where, {DType::Bool, DType::I64, DType::I64}));
  EXPECT_FALSE(cudaRuns(*where, {DType::Bool, DType::String, DType::String}));
  EXPECT_FALSE(cudaRuns(*where, {DType::F32, DType::F32, DType::F32}));
  // Gather: i32 or i64 indices.
  Node *gather = node("Gather", {DType::F32, DType::I64}, DType::F32, "gather");
  EXPECT_TRUE(cudaRuns(*gather, {DType::F32, DType::I64}));
  EXPECT_TRUE(cudaRuns(*gather, {DType::BF16, DType::I32}));
  EXPECT_FALSE(cudaRuns(*gather, {DType::F32, DType::I16}));
  // Sum: any number of operands (past eight, in runs of eight); float types only.
  Node *sum3 = node("Sum", {DType::F16, DType::F16, DType::F16}, DType::F16, "sum3");
  EXPECT_TRUE(cudaRuns(*sum3, {DType::F16, DType::F16, DType::F16}));
  Node *sum9 = node("Sum", std::vector<DType>(9, DType::F32), DType::F32, "sum9");
  EXPECT_TRUE(cudaRuns(*sum9, std::vector<DType>(9, DType::F32)));
  Node *sumInt = node("Sum", {DType::I32, DType::I32}, DType::I32, "sumInt");
  EXPECT_FALSE(cudaRuns(*sumInt, {DType::I32, DType::I32}));
}

TEST_F(OneNode, CapsPaintWithTheTable) {
  CudaCaps caps;
  EXPECT_EQ(caps.name(), "cuda");
  EXPECT_EQ(caps.preferredDimMultiple(), 8u);
  Node *mm = node("MatMul", {DType::F32, DType::F32});
  EXPECT_TRUE(caps.supportsLowPrecision(*mm, DType::F16));
  EXPECT_TRUE(caps.supportsLowPrecision(*mm, DType::BF16));
  Node *nms = node("NonMaxSuppression", {DType::F32, DType::F32}, DType::I64, "nms");
  EXPECT_FALSE(caps.supportsLowPrecision(*nms, DType::F16));
  // Clip has its own row (bounds read on the device), 16-bit included.
  Node *clip = node("Clip", {DType::F32}, DType::F32, "clip");
  EXPECT_TRUE(caps.supportsLowPrecision(*clip, DType::F16));
  Node *eq = node("Equal", {DType::F32, DType::F32}, DType::Bool, "eq");
  EXPECT_TRUE(caps.supportsLowPrecision(*eq, DType::BF16));
  Node *add = node("Add", {DType::F32, DType::F32}, DType::F32, "add");
  EXPECT_TRUE(caps.supportsLowPrecision(*add, DType::F16));
}

//===----------------------------------------------------------------------===//
// Prepare cache keys and functor bytes
//===----------------------------------------------------------------------===//

TensorDesc desc(DType t, std::vector<int64_t> shape) {
  TensorDesc d;
  d.dtype = t;
  d.shape.assign(shape.begin(), shape.end());
  return d;
}

TEST_F(OneNode, PrepareKeysSeparateNodesAndSignatures) {
  Node *a = node("Gemm", {DType::F16, DType::F16, DType::F16}, DType::F16, "a");
  Node *b = node("Gemm", {DType::F16, DType::F16, DType::F16}, DType::F16, "b");
  std::vector<TensorDesc> sig = {desc(DType::F16, {2, 3}), desc(DType::F16, {3, 4}),
                                 TensorDesc()};
  EXPECT_EQ(shapeSignature(sig), "f16[2, 3] f16[3, 4] -");
  EXPECT_EQ(shapeSignature({}), "");
  EXPECT_EQ(shapeSignature({desc(DType::F32, {})}), "f32[]");
  EXPECT_EQ(prepareKey(*a, sig), prepareKey(*a, sig));
  EXPECT_FALSE(prepareKey(*a, sig) == prepareKey(*b, sig));
  std::vector<TensorDesc> other = sig;
  other[0].shape[0] = 5;
  EXPECT_FALSE(prepareKey(*a, sig) == prepareKey(*a, other));
  other = sig;
  other[1].dtype = DType::BF16;
  EXPECT_FALSE(prepareKey(*a, sig) == prepareKey(*a, other));
  other = sig;
  other[2] = desc(DType::F16, {4});
  EXPECT_FALSE(prepareKey(*a, sig) == prepareKey(*a, other));
  // [2, 34] and [23, 4] must not print alike.
  EXPECT_NE(shapeSignature({desc(DType::F32, {2, 34})}),
            shapeSignature({desc(DType::F32, {23, 4})}));
}

TEST_F(OneNode, FunctorBytesCarryTheAttributes) {
  Node *lr = node("LeakyRelu", {DType::F16}, DType::F16, "lr");
  lr->setAttr(Attribute::makeFloat("alpha", 0.25f));
  const CudaKernel *row = findCudaKernel(*lr);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->op, int32_t(UnaryOpId::LeakyRelu));
  llvm::Expected<OpBlob> blob = makeOpBlob(*lr, *row);
  ASSERT_TRUE(bool(blob));
  kernels::LeakyRelu f;
  std::memcpy(static_cast<void *>(&f), blob->bytes, sizeof(f));
  EXPECT_EQ(f.alpha, 0.25f);

  Node *gelu = node("Gelu", {DType::BF16}, DType::BF16, "gelu");
  gelu->setAttr(Attribute::makeString("approximate", "tanh"));
  row = findCudaKernel(*gelu);
  ASSERT_NE(row, nullptr);
  blob = makeOpBlob(*gelu, *row);
  ASSERT_TRUE(bool(blob));
  kernels::Gelu gf;
  std::memcpy(static_cast<void *>(&gf), blob->bytes, sizeof(gf));
  EXPECT_TRUE(gf.tanhApproximation);

  // A value the registry's parser rejects is its error, not a default.
  gelu->setAttr(Attribute::makeString("approximate", "fast"));
  blob = makeOpBlob(*gelu, *row);
  ASSERT_FALSE(bool(blob));
  EXPECT_EQ(llvm::toString(blob.takeError()),
            "node 'gelu' (Gelu): attribute 'approximate' is 'fast'; it must be none or tanh");
}

/// One element-wise row of ElementwiseOps.def: its op type, the bytes the
/// CPU loops' functor has for a node (kernels::makeOp of the parameters the
/// registry row parsed, as the executor hands them to the CPU kernel), and
/// the CUDA row the .def gives it.
struct ElementwiseRow {
  const char *op;
  OpBlob (*cpuBlob)(const OpParams *);
  CudaKernelKind kind;
  int32_t id;
};

template <typename Op> OpBlob cpuBlob(const OpParams *p) {
  return blobOf(kernels::makeOp<Op>(p));
}

std::vector<ElementwiseRow> elementwiseRows() {
  std::vector<ElementwiseRow> rows;
#define MPC_UNARY_ROW(Op, Kind)                                                \
  rows.push_back({#Op, cpuBlob<kernels::Op>, Kind, int32_t(UnaryOpId::Op)});
#define MPC_UNARY_FLOAT(Op) MPC_UNARY_ROW(Op, CudaKernelKind::Unary)
#define MPC_UNARY_SIGNED(Op) MPC_UNARY_ROW(Op, CudaKernelKind::Unary)
#define MPC_UNARY_ARITHMETIC(Op) MPC_UNARY_ROW(Op, CudaKernelKind::Unary)
#define MPC_UNARY_INTEGER(Op) MPC_UNARY_ROW(Op, CudaKernelKind::Unary)
#define MPC_UNARY_PREDICATE(Op) MPC_UNARY_ROW(Op, CudaKernelKind::Predicate)
#define MPC_BINARY_ROW(Op, Kind)                                               \
  rows.push_back({#Op, cpuBlob<kernels::Op>, Kind, int32_t(BinaryOpId::Op)});
#define MPC_BINARY_SIGNED(Op) MPC_BINARY_ROW(Op, CudaKernelKind::Binary)
#define MPC_BINARY_INTEGER(Op) MPC_BINARY_ROW(Op, CudaKernelKind::Binary)
#define MPC_BINARY_COMPARE(Op) MPC_BINARY_ROW(Op, CudaKernelKind::Compare)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_UNARY_ROW
#undef MPC_BINARY_ROW
  return rows;
}

/// The attributes a test node of `op` gets (values no default has) and the
/// functor's bytes they must give, written out here: an oracle that does
/// not go through makeOp or the parsers.
struct AttributeCase {
  /// Attribute name and value: a float, an int or a string.
  struct Value {
    const char *name;
    float f;
    int64_t i;
    const char *s;
  };
  std::vector<Value> attrs;
  OpBlob want;
  void applyTo(Node &n) const {
    for (const Value &v : attrs)
      n.setAttr(v.s ? Attribute::makeString(v.name, v.s)
                    : v.name[0] == '#' ? Attribute::makeInt(v.name + 1, v.i)
                                       : Attribute::makeFloat(v.name, v.f));
  }
};
std::map<std::string, AttributeCase> attributeCases() {
  // "#name" is an int attribute.
  auto f = [](const char *name, float v) { return AttributeCase::Value{name, v, 0, nullptr}; };
  auto i = [](const char *name, int64_t v) { return AttributeCase::Value{name, 0, v, nullptr}; };
  auto s = [](const char *name, const char *v) { return AttributeCase::Value{name, 0, 0, v}; };
  kernels::Selu selu;
  selu.alpha = 1.5f;
  selu.gamma = 0.75f;
  return {
      {"LeakyRelu", {{f("alpha", 0.125f)}, blobOf(kernels::LeakyRelu{0.125f})}},
      {"ThresholdedRelu", {{f("alpha", 2.5f)}, blobOf(kernels::ThresholdedRelu{2.5f})}},
      {"Elu", {{f("alpha", 0.375f)}, blobOf(kernels::Elu{0.375f})}},
      {"Celu", {{f("alpha", 3.0f)}, blobOf(kernels::Celu{3.0f})}},
      {"Swish", {{f("alpha", 0.625f)}, blobOf(kernels::Swish{0.625f})}},
      {"Selu", {{f("alpha", 1.5f), f("gamma", 0.75f)}, blobOf(selu)}},
      {"HardSigmoid",
       {{f("alpha", 0.25f), f("beta", 0.125f)}, blobOf(kernels::HardSigmoid{0.25f, 0.125f})}},
      {"Shrink", {{f("lambd", 1.25f), f("bias", -0.5f)}, blobOf(kernels::Shrink{1.25f, -0.5f})}},
      {"Gelu", {{s("approximate", "tanh")}, blobOf(kernels::Gelu{true})}},
      {"IsInf",
       {{i("#detect_negative", 0), i("#detect_positive", 1)},
        blobOf(kernels::IsInf{false, true})}},
      {"Mod", {{i("#fmod", 1)}, blobOf(kernels::Mod{true})}},
      {"BitShift", {{s("direction", "LEFT")}, blobOf(kernels::BitShift{true})}},
  };
}

bool sameBytes(const OpBlob &a, const OpBlob &b) {
  return std::memcmp(a.bytes, b.bytes, sizeof(a.bytes)) == 0;
}

/// Opset 24: every element-wise row of the registry is there (Swish is new
/// in 24).
struct Opset24Node : OneNode {
  void SetUp() override {
    OneNode::SetUp();
    m.opsets[0].version = 24;
  }
};

TEST_F(Opset24Node, BothBackendsGetTheSameFunctorForEveryElementwiseRow) {
  std::map<std::string, AttributeCase> cases = attributeCases();
  std::vector<ElementwiseRow> rows = elementwiseRows();
  ASSERT_GE(rows.size(), 60u);
  size_t withAttrs = 0, inCudaTable = 0;
  for (const ElementwiseRow &r : rows) {
    SCOPED_TRACE(r.op);
    Node *n = node(r.op, {DType::F32, DType::F32}, DType::F32, r.op);
    auto c = cases.find(r.op);
    if (c != cases.end()) {
      ++withAttrs;
      c->second.applyTo(*n);
    }
    // What the executor hands the CPU kernel: the registry row's parse.
    const OpDef *def = findOp(*n);
    ASSERT_NE(def, nullptr);
    std::unique_ptr<OpParams> params;
    if (def->parse) {
      ParsedParams parsed = def->parse(*n);
      ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
      params = std::move(*parsed);
    }
    // Clip's bounds are operands from opset 11 on: its kernels take them
    // from the inputs or the parsed min/max, not from the functor's fields.
    if (std::string(r.op) != "Clip")
      EXPECT_EQ(def->parse != nullptr, c != cases.end())
          << "a row with attributes and no case here, or a case for a row without a parser";
    OpBlob cpu = r.cpuBlob(params.get());
    // The CUDA row of the table, where it has one, is the .def's.
    CudaKernel row{r.op, "", 1, kMaxOpsetVersion, 0, r.kind, r.id};
    // Clip's CUDA row is a kind of its own (ClipOps.cpp reads the bounds on
    // the device), so only the functor bytes below apply to it.
    const CudaKernel *t = findCudaKernel(*n);
    if (t && std::string(r.op) == "Clip") {
      EXPECT_EQ(t->kind, CudaKernelKind::Clip);
    } else if (t) {
      ++inCudaTable;
      EXPECT_EQ(t->kind, r.kind);
      EXPECT_EQ(t->op, r.id);
    }
    llvm::Expected<OpBlob> cuda = makeOpBlob(*n, row);
    ASSERT_TRUE(bool(cuda)) << llvm::toString(cuda.takeError());
    EXPECT_TRUE(sameBytes(*cuda, cpu));
    if (c != cases.end()) {
      EXPECT_TRUE(sameBytes(cpu, c->second.want)) << "the attributes did not reach the functor";
    } else {
      // No attributes: the functor as its body defines it.
      EXPECT_TRUE(sameBytes(cpu, r.cpuBlob(nullptr)));
    }
  }
  EXPECT_EQ(withAttrs, cases.size()) << "a case names an op that is not a row";
  EXPECT_GT(inCudaTable, 40u);
}

TEST_F(Opset24Node, AbsentAttributesGiveTheOnnxDefaults) {
  // No attribute set: the functors' fields are the ONNX defaults, written
  // out (the parsers' defaults, not the functor structs').
  kernels::Selu onnxSelu;
  onnxSelu.alpha = 1.67326319217681884765625f;
  onnxSelu.gamma = 1.05070102214813232421875f;
  struct Default {
    const char *op;
    OpBlob want;
  };
  const Default defaults[] = {
      {"LeakyRelu", blobOf(kernels::LeakyRelu{0.01f})},
      {"ThresholdedRelu", blobOf(kernels::ThresholdedRelu{1.0f})},
      {"Elu", blobOf(kernels::Elu{1.0f})},
      {"Celu", blobOf(kernels::Celu{1.0f})},
      {"Swish", blobOf(kernels::Swish{1.0f})},
      {"HardSigmoid", blobOf(kernels::HardSigmoid{0.2f, 0.5f})},
      {"Shrink", blobOf(kernels::Shrink{0.5f, 0.0f})},
      {"Gelu", blobOf(kernels::Gelu{false})},
      {"IsInf", blobOf(kernels::IsInf{true, true})},
      {"Mod", blobOf(kernels::Mod{false})},
      {"Selu", blobOf(onnxSelu)},
  };
  for (const Default &d : defaults) {
    SCOPED_TRACE(d.op);
    Node *n = node(d.op, {DType::F32, DType::F32}, DType::F32, d.op);
    const CudaKernel *row = findCudaKernel(*n);
    ASSERT_NE(row, nullptr);
    llvm::Expected<OpBlob> blob = makeOpBlob(*n, *row);
    ASSERT_TRUE(bool(blob));
    EXPECT_TRUE(sameBytes(*blob, d.want));
  }
}

//===----------------------------------------------------------------------===//
// Softmax and normalization rows
//===----------------------------------------------------------------------===//

TEST_F(OneNode, SoftmaxAndNormRowsTakeTheirParameterTypes) {
  for (const char *op : {"Softmax", "LogSoftmax"}) {
    Node *sm = node(op, {DType::F32}, DType::F32, op);
    ASSERT_NE(findCudaKernel(*sm), nullptr) << op;
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      EXPECT_TRUE(cudaRuns(*sm, {t})) << op;
    EXPECT_FALSE(cudaRuns(*sm, {DType::F64})) << op;
  }
  Node *ln = node("LayerNormalization", {DType::F16, DType::F16, DType::F16}, DType::F16, "ln");
  EXPECT_TRUE(cudaRuns(*ln, {DType::F16, DType::F16, DType::F16}));
  EXPECT_TRUE(cudaRuns(*ln, {DType::BF16, DType::F32, DType::F32})); // fp32 parameters
  EXPECT_TRUE(cudaRuns(*ln, {DType::F16, DType::F16, DType::Undefined})); // no bias
  EXPECT_FALSE(cudaRuns(*ln, {DType::F16, DType::BF16, DType::BF16}));
  EXPECT_FALSE(cudaRuns(*ln, {DType::F64, DType::F64, DType::F64}));
  m.opsets[0].version = 23;
  Node *rms = node("RMSNormalization", {DType::F16, DType::F16}, DType::F16, "rms");
  ASSERT_NE(findCudaKernel(*rms), nullptr);
  EXPECT_TRUE(cudaRuns(*rms, {DType::F16, DType::F16}));
  // The CPU refuses an fp32 scale of 16-bit data with its own message.
  EXPECT_FALSE(cudaRuns(*rms, {DType::F16, DType::F32}));

  m.opsets.push_back({"ai.mpc.training", 1});
  Node *sg = node("SoftmaxGrad", {DType::BF16, DType::BF16}, DType::BF16, "sg");
  sg->domain = "ai.mpc.training";
  ASSERT_NE(findCudaKernel(*sg), nullptr);
  EXPECT_TRUE(cudaRuns(*sg, {DType::BF16, DType::BF16}));
  Node *lg = node("LayerNormalizationGrad",
                  {DType::F16, DType::F16, DType::F32, DType::F32, DType::F32}, DType::F16, "lg");
  lg->domain = "ai.mpc.training";
  ASSERT_NE(findCudaKernel(*lg), nullptr);
  EXPECT_TRUE(cudaRuns(*lg, {DType::F16, DType::F16, DType::F32, DType::F32, DType::F32}));
  EXPECT_TRUE(cudaRuns(*lg, {DType::F16, DType::F16, DType::F16, DType::F32, DType::F32}));
  // Statistics other than f32 stay on the CPU.
  EXPECT_FALSE(cudaRuns(*lg, {DType::F16, DType::F16, DType::F16, DType::F16, DType::F16}));

  CudaCaps caps;
  EXPECT_TRUE(caps.supportsLowPrecision(*ln, DType::F16));
  Node *sm = node("Softmax", {DType::F32}, DType::F32, "probs");
  EXPECT_TRUE(caps.supportsLowPrecision(*sm, DType::BF16));
}

TEST_F(OneNode, ResizeOperandsMustBeKnownBeforeRunning) {
  m.opsets[0].version = 19;
  // LRN: the float types of the launcher, not f64 (the CPU runs it).
  Node *lrn = node("LRN", {DType::BF16}, DType::BF16, "lrn");
  ASSERT_NE(findCudaKernel(*lrn), nullptr);
  EXPECT_EQ(findCudaKernel(*lrn)->kind, CudaKernelKind::Image);
  EXPECT_TRUE(cudaRuns(*lrn, {DType::BF16}));
  EXPECT_FALSE(cudaRuns(*lrn, {DType::F64}));

  // Scales from an initializer (roi absent): taken, and read as doubles.
  Tensor scales(DType::F32, {2});
  float vals[2] = {1.0f, 2.5f};
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), vals, 8);
  scales.setBytes(bytes);
  Value *sc = g->addInitializer("scales", scales);
  Node *rs = node("Resize", {DType::F16}, DType::F16, "rs");
  rs->addInput(nullptr);
  rs->addInput(sc);
  std::vector<double> read;
  ASSERT_TRUE(constantInputDoubles(*rs, 2, read));
  EXPECT_EQ(read, (std::vector<double>{1.0, 2.5}));
  EXPECT_TRUE(cudaRuns(*rs, {DType::F16, DType::Undefined, DType::F32}));
  EXPECT_FALSE(cudaRuns(*rs, {DType::F64, DType::Undefined, DType::F32}));
  // tf_crop_and_resize needs its roi too: absent here, so prepare's plan
  // fails and the CPU reports it; a roi from a graph input is not taken.
  rs->setAttr(Attribute::makeString("coordinate_transformation_mode", "tf_crop_and_resize"));
  EXPECT_TRUE(cudaRuns(*rs, {DType::F16, DType::Undefined, DType::F32}));
  Node *crop = node("Resize", {DType::F32, DType::F32}, DType::F32, "crop");
  crop->addInput(sc);
  crop->setAttr(Attribute::makeString("coordinate_transformation_mode", "tf_crop_and_resize"));
  EXPECT_FALSE(cudaRuns(*crop, {DType::F32, DType::F32, DType::F32}));

  // Scales or sizes from a graph input: known only when running.
  Node *dyn = node("Resize", {DType::F32, DType::F32, DType::F32}, DType::F32, "dyn");
  EXPECT_FALSE(constantInputDoubles(*dyn, 2, read));
  EXPECT_FALSE(cudaRuns(*dyn, {DType::F32, DType::F32, DType::F32}));
  Node *sized = node("Resize", {DType::F32}, DType::F32, "sized");
  sized->addInput(nullptr);
  sized->addInput(nullptr);
  sized->addInput(g->addInput("sizes", Type::tensor(DType::I64, {2})));
  EXPECT_FALSE(cudaRuns(*sized, {DType::F32, DType::Undefined, DType::Undefined, DType::I64}));
}

TEST_F(OneNode, ReductionAxesMustBeKnownBeforeRunning) {
  // Axes as an attribute (ReduceMean before opset 18) or absent: taken.
  m.opsets[0].version = 17;
  Node *mean = node("ReduceMean", {DType::BF16}, DType::BF16, "mean");
  ASSERT_NE(findCudaKernel(*mean), nullptr);
  EXPECT_EQ(findCudaKernel(*mean)->op, int32_t(kernels::ReduceKind::Mean));
  EXPECT_TRUE(cudaRuns(*mean, {DType::BF16}));
  EXPECT_FALSE(cudaRuns(*mean, {DType::I64}));

  // Axes from an initializer or a Constant node: taken, and read.
  m.opsets[0].version = 18;
  Node *sum = node("ReduceSum", {DType::F16}, DType::F16, "sum");
  Tensor axes(DType::I64, {2});
  std::vector<uint8_t> bytes(16);
  int64_t vals[2] = {-1, 0};
  std::memcpy(bytes.data(), vals, 16);
  axes.setBytes(bytes);
  sum->addInput(g->addInitializer("axes", axes));
  std::vector<int64_t> read;
  ASSERT_TRUE(constantInputInts(*sum, 1, read));
  EXPECT_EQ(read, (std::vector<int64_t>{-1, 0}));
  EXPECT_TRUE(cudaRuns(*sum, {DType::F16, DType::I64}));

  Node *c = g->createNode("Constant");
  c->name = "c";
  c->setAttr(Attribute::makeInts("value_ints", {1}));
  c->setOutput(0, "c_out", Type::tensor(DType::I64, {1}));
  Node *mx = node("ReduceMax", {DType::F32}, DType::F32, "mx");
  mx->addInput(c->output(0));
  ASSERT_TRUE(constantInputInts(*mx, 1, read));
  EXPECT_EQ(read, (std::vector<int64_t>{1}));
  EXPECT_TRUE(cudaRuns(*mx, {DType::F32, DType::I64}));

  // Axes from a graph input: known only when running, so the CPU runs it.
  Node *mn = node("ReduceMin", {DType::F32, DType::I64}, DType::F32, "mn");
  EXPECT_FALSE(constantInputInts(*mn, 1, read));
  EXPECT_FALSE(cudaRuns(*mn, {DType::F32, DType::I64}));
  EXPECT_FALSE(constantInputInts(*mn, 5, read)); // no such input

  // BiasGrad: its shape input may be computed (Shape): prepare decides.
  m.opsets.push_back({"ai.mpc.training", 1});
  Node *bg = node("BiasGrad", {DType::F16, DType::I64}, DType::F16, "bg");
  bg->domain = "ai.mpc.training";
  ASSERT_NE(findCudaKernel(*bg), nullptr);
  EXPECT_TRUE(cudaRuns(*bg, {DType::F16, DType::I64}));
  EXPECT_FALSE(cudaRuns(*bg, {DType::F64, DType::I64}));
}

// GRUGrad (RnnOps.cpp): keyed by X (input 2, dY may be absent), every float
// operand of X's type, sequence_lens (input 6) only as a graph constant.
TEST_F(OneNode, GruGradRowTakesFloatOperandsOfXsType) {
  m.opsets.push_back({"ai.mpc.training", 1});
  const DType h = DType::F16, u = DType::Undefined;
  Node *gg = node("GRUGrad", {h, h, h, h, h}, h, "gg");
  gg->domain = "ai.mpc.training";
  ASSERT_NE(findCudaKernel(*gg), nullptr);
  EXPECT_EQ(findCudaKernel(*gg)->kind, CudaKernelKind::GruGrad);
  EXPECT_TRUE(cudaRuns(*gg, {h, h, h, h, h}));
  EXPECT_TRUE(cudaRuns(*gg, {u, DType::BF16, DType::BF16, DType::BF16, DType::BF16}));
  EXPECT_FALSE(cudaRuns(*gg, {DType::F32, h, h, h, h}));
  EXPECT_FALSE(cudaRuns(*gg, {u, u, DType::F64, DType::F64, DType::F64}));
  const DType f = DType::F32;
  Node *lens = node("GRUGrad", {f, u, f, f, f, f, DType::I32}, f, "gl");
  lens->domain = "ai.mpc.training";
  EXPECT_FALSE(cudaRuns(*lens, {f, u, f, f, f, f, DType::I32}));
}

// GemmBiasAct (GemmOps.cpp): the op's type rule, the bias optional (absent
// or an empty input: the epilogues without a bias, GemmPlan.h).
TEST_F(OneNode, GemmBiasActBiasIsOptional) {
  m.opsets.push_back({"ai.mpc.training", 1});
  const DType h = DType::F16, f = DType::F32, u = DType::Undefined;
  auto make = [&](const char *name, std::vector<DType> ins, DType to) {
    Node *n = g->createNode("GemmBiasAct");
    n->domain = "ai.mpc.training";
    n->name = name;
    int i = 0;
    for (DType t : ins)
      n->addInput(g->addInput(std::string(name) + std::to_string(i++),
                                 Type::tensor(t, {8, 8})));
    if (to != u)
      n->setAttr(Attribute::makeInt("to", int64_t(to)));
    n->setOutput(0, std::string(name) + "_y", Type::tensor(to == u ? ins[0] : to, {8, 8}));
    return n;
  };
  Node *dw = make("dw", {h, h}, f); // a weight gradient into float32
  ASSERT_NE(findCudaKernel(*dw), nullptr);
  EXPECT_EQ(findCudaKernel(*dw)->kind, CudaKernelKind::GemmBiasAct);
  EXPECT_TRUE(cudaRuns(*dw, {h, h}));
  EXPECT_TRUE(cudaRuns(*dw, {h, h, u}));
  EXPECT_TRUE(cudaRuns(*dw, {DType::BF16, DType::BF16}));
  EXPECT_FALSE(cudaRuns(*dw, {h, DType::BF16}));             // B not A's type
  EXPECT_FALSE(cudaRuns(*dw, {DType::F64, DType::F64}));     // no float64 row
  Node *biased = make("b", {h, h, h}, u);
  EXPECT_TRUE(cudaRuns(*biased, {h, h, h}));
  EXPECT_TRUE(cudaRuns(*biased, {h, h, u}));
  EXPECT_FALSE(cudaRuns(*biased, {h, h, DType::BF16})); // a bias of neither A's nor Y's type
}

} // namespace

