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

static llvm::Error runFusedMatMul(const KernelCall &c) {
  const FusedMatMulParams &p = paramsOf<FusedMatMulParams>(c);
  auto ops = fusedOperands(p, c.inputs[0].shape, c.inputs[1].shape);
  const FusedOperand &a = ops.first, &b = ops.second;
  int64_t m = a.shape.size() > 1 ? a.shape[a.shape.size() - 2] : 1;
  int64_t k = a.shape.back();
  int64_t n = b.shape.size() > 1 ? b.shape.back() : 1;
  float alpha = p.alpha;
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
