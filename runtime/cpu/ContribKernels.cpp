//===- ContribKernels.cpp - CPU kernels of onnxruntime contrib ops --------===//
//
// The com.microsoft ops on the AMP allow list (passes/amp/AmpLists.cpp), as
// rows of the CPU kernel table. FusedMatMul is MatMul with transposed operand
// layouts and a scale, run by the MatMul engine (cpu::batchedMatmul: fp32
// accumulation for 16-bit types); ConvGrad has the contract of
// ai.mpc.training::ConvGrad and reuses its kernel.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include <string>
#include <utility>

using namespace mpc;
using namespace mpc::cpuk;

static const char *const kDomain = "com.microsoft";

//===----------------------------------------------------------------------===//
// FusedMatMul
//===----------------------------------------------------------------------===//
//
// Y = alpha * op(A) @ op(B), batched and broadcast as MatMul. For a rank-r
// operand X (r >= 2), transBatchX moves axis 0 behind the batch axes,
// X' = transpose(X, [1, ..., r-2, 0, r-1]), and transX then swaps the last two
// axes of X'. Neither touches memory here: both become the strides of
// cpu::MatrixBatch. With transBatchA, A is [M, b..., K] and batch entry i is
// the M x K matrix at A + i * K with rows prod(b) * K apart. On a vector
// neither transA nor transB changes anything; transBatchA/B need operands of
// one rank, 3 or more (as onnxruntime's CPU kernel).

namespace {
/// One FusedMatMul operand as the MatMul engine reads it.
struct FusedOperand {
  /// The shape of op(X) as a plain MatMul operand (for cpu::matmulShape).
  llvm::SmallVector<int64_t, 6> shape;
  /// Batch dimensions (a prefix of shape, or empty).
  llvm::SmallVector<int64_t, 4> batch;
  int64_t batchStride = 0, ld = 0;
  bool trans = false;
};
} // namespace

/// The layout of operand `x` (B when isB: a vector is a column then).
static FusedOperand fusedOperand(llvm::ArrayRef<int64_t> x, bool trans, bool transBatch, bool isB) {
  FusedOperand op;
  op.shape.assign(x.begin(), x.end());
  if (x.size() == 1) {
    op.batchStride = x[0];
    op.ld = isB ? 1 : x[0];
    return op;
  }
  size_t r = x.size();
  int64_t rows = transBatch ? x[0] : x[r - 2], cols = x[r - 1];
  if (transBatch)
    op.batch.assign(x.begin() + 1, x.end() - 1);
  else
    op.batch.assign(x.begin(), x.end() - 2);
  op.batchStride = transBatch ? cols : rows * cols;
  op.ld = transBatch ? kernels::numElements(op.batch) * cols : cols;
  op.trans = trans;
  op.shape.assign(op.batch.begin(), op.batch.end());
  op.shape.push_back(trans ? cols : rows);
  op.shape.push_back(trans ? rows : cols);
  return op;
}

/// Both operands of node `n` for A and B shapes `a` and `b`.
static std::pair<FusedOperand, FusedOperand> fusedOperands(const Node &n, llvm::ArrayRef<int64_t> a,
                                                           llvm::ArrayRef<int64_t> b) {
  return {fusedOperand(a, n.intAttr("transA", 0) != 0, n.intAttr("transBatchA", 0) != 0,
                       /*isB=*/false),
          fusedOperand(b, n.intAttr("transB", 0) != 0, n.intAttr("transBatchB", 0) != 0,
                       /*isB=*/true)};
}

/// The MatMul engine's view of operand `op`, stored in `t`.
template <typename T>
static cpu::MatrixBatch<T> matrixBatchOf(const FusedOperand &op, const TensorRef &t) {
  cpu::MatrixBatch<T> mb;
  mb.data = t.as<T>();
  mb.batch = op.batch;
  mb.batchStride = op.batchStride;
  mb.ld = op.ld;
  mb.trans = op.trans;
  return mb;
}

llvm::Error shapes::shapeFusedMatMul(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const ShapedType &a = q.inputs[0], &b = q.inputs[1];
  if (a.shape.empty() || b.shape.empty())
    return nodeError(q.node, "A " + formatShape(a.shape) + " and B " + formatShape(b.shape) +
                                 " must have rank 1 or more");
  if (a.dtype != b.dtype)
    return nodeError(q.node, "A and B must have one dtype");
  // As onnxruntime's kernel (MatMulComputeHelper): the batch axes of an
  // operand with transBatch pair with the other's only at equal ranks.
  if ((q.node.intAttr("transBatchA", 0) || q.node.intAttr("transBatchB", 0)) &&
      (a.shape.size() < 3 || a.shape.size() != b.shape.size()))
    return nodeError(q.node, "transBatchA/transBatchB need A and B of one rank, 3 or more; "
                             "got A " +
                                 formatShape(a.shape) + " and B " + formatShape(b.shape));
  auto ops = fusedOperands(q.node, a.shape, b.shape);
  llvm::SmallVector<int64_t, 6> shape;
  if (!cpu::matmulShape(ops.first.shape, ops.second.shape, shape)) {
    std::string flags;
    for (const char *f : {"transA", "transB", "transBatchA", "transBatchB"})
      flags += std::string(", ") + f + " " + std::to_string(q.node.intAttr(f, 0));
    return nodeError(q.node, "op(A) " + formatShape(ops.first.shape) + " and op(B) " +
                                 formatShape(ops.second.shape) + " do not multiply (A " +
                                 formatShape(a.shape) + ", B " + formatShape(b.shape) + flags +
                                 ")");
  }
  out.assign(1, ShapedType{a.dtype, {shape.begin(), shape.end()}});
  return llvm::Error::success();
}

static llvm::Error runFusedMatMul(const KernelCall &c) {
  auto ops = fusedOperands(*c.node, c.inputs[0].shape, c.inputs[1].shape);
  const FusedOperand &a = ops.first, &b = ops.second;
  int64_t m = a.shape.size() > 1 ? a.shape[a.shape.size() - 2] : 1;
  int64_t k = a.shape.back();
  int64_t n = b.shape.size() > 1 ? b.shape.back() : 1;
  float alpha = c.node->floatAttr("alpha", 1.0f);
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::batchedMatmul<T>(matrixBatchOf<T>(a, c.inputs[0]), matrixBatchOf<T>(b, c.inputs[1]), m, n,
                          k, cpu::GemmScalar<T>(alpha), c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

std::vector<CpuKernel> mpc::cpuk::contribRows() {
  return {
      // onnxruntime training's ConvGrad: inputs dY, X, W; optional outputs dX,
      // dW, dB (dB sums dY over all axes but 1); Conv's attributes. The same
      // contract as ai.mpc.training::ConvGrad (TrainingKernels.cpp).
      MPC_CPU_KERNEL("ConvGrad", kDomain, 1, kFloatTypes, runConvGrad),
      MPC_CPU_KERNEL("FusedMatMul", kDomain, 1, kFloatTypes, runFusedMatMul),
  };
}
