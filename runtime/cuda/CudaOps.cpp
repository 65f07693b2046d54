//===- CudaOps.cpp - Prepare by kernel kind ---------------------------------===//
//
// The one place that maps a kernel-table row's kind to its family's prepare
// function (CudaOp.h). A new family adds its kinds to CudaKernelKind, its
// rows to CudaKernelTable.cpp, its prepare function in its own file and a
// case here.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <cstring>

using namespace mpc;
using namespace mpc::cuda;

CudaOp::~CudaOp() = default;

std::string cuda::cudaText(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

std::string cuda::launchText(cudaError_t e) {
  return e == cudaSuccess ? std::string() : "kernel launch failed: " + cudaText(e);
}

bool cuda::oneBits(DType t, uint64_t &bits) {
  auto put = [&](auto v) {
    bits = 0;
    std::memcpy(&bits, &v, sizeof(v));
    return true;
  };
  switch (t) {
  case DType::F32: return put(1.0f);
  case DType::F64: return put(1.0);
  case DType::F16: return put(kernels::castValue<Half>(1.0f));
  case DType::BF16: return put(kernels::castValue<BFloat16>(1.0f));
  case DType::Bool: return put(true);
  case DType::I8: case DType::U8: return put(uint8_t(1));
  case DType::I16: case DType::U16: return put(uint16_t(1));
  case DType::I32: case DType::U32: return put(uint32_t(1));
  case DType::I64: case DType::U64: return put(uint64_t(1));
  default: return false;
  }
}

CudaOpOrError cuda::prepareCudaOp(const Node &n, const CudaKernel &row,
                                  llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  switch (row.kind) {
  case CudaKernelKind::Unary:
  case CudaKernelKind::Predicate:
  case CudaKernelKind::Binary:
  case CudaKernelKind::Compare:
  case CudaKernelKind::Cast:
    return prepareElementwiseOp(n, row, inputs, ctx);
  case CudaKernelKind::MatMul:
  case CudaKernelKind::Gemm:
  case CudaKernelKind::FusedMatMul:
  case CudaKernelKind::GemmBiasAct:
    return prepareGemmOp(n, row, inputs, ctx);
  // Convolutions (cuDNN).
  case CudaKernelKind::Conv:
  case CudaKernelKind::ConvTranspose:
  case CudaKernelKind::ConvGrad:
    return prepareConvOp(n, row, inputs, ctx);
  // Pooling (window bodies).
  case CudaKernelKind::Pool:
  case CudaKernelKind::PoolGrad:
  case CudaKernelKind::GlobalPool:
  case CudaKernelKind::GlobalPoolGrad:
    return preparePoolOp(n, row, inputs, ctx);
  // Inference batch normalization.
  case CudaKernelKind::BatchNorm:
    if (isTrainingBatchNorm(n)) // training_mode = 1 (BatchNormTrainOps.cpp)
      return prepareBatchNormTrainOp(n, row, inputs, ctx);
    return prepareBatchNormOp(n, row, inputs, ctx);
  // Softmax and normalization.
  case CudaKernelKind::Softmax:
  case CudaKernelKind::SoftmaxGrad:
  case CudaKernelKind::Norm:
  case CudaKernelKind::NormGrad:
    return prepareNormOp(n, row, inputs, ctx);
  // Reductions.
  case CudaKernelKind::Reduce:
  case CudaKernelKind::BiasGrad:
    return prepareReduceOp(n, row, inputs, ctx);
  // Activation gradients.
  case CudaKernelKind::ActivationGrad:
    return prepareGradOp(n, row, inputs, ctx);
  // Data movement.
  case CudaKernelKind::DataMove:
    if (isPadMapNode(n)) // Pad's edge, reflect and wrap modes (ImageOps.cpp)
      return prepareImageOp(n, row, inputs, ctx);
    return prepareDataOp(n, row, inputs, ctx);
  // Losses.
  case CudaKernelKind::Loss:
    return prepareLossOp(n, row, inputs, ctx);
  // Clip.
  case CudaKernelKind::Clip:
    return prepareClipOp(n, row, inputs, ctx);
  // Training batch normalization's gradient.
  case CudaKernelKind::BatchNormGrad:
    return prepareBatchNormTrainOp(n, row, inputs, ctx);
  // Instance, group and Lp normalization.
  case CudaKernelKind::StatNorm:
    return prepareStatNormOp(n, row, inputs, ctx);
  // TopK.
  case CudaKernelKind::TopK:
    return prepareTopKOp(n, row, inputs, ctx);
  // Recurrent ops.
  case CudaKernelKind::Recurrent:
    return prepareRecurrentOp(n, row, inputs, ctx);
  case CudaKernelKind::LstmGrad:
    return prepareLstmGradOp(n, row, inputs, ctx);
  case CudaKernelKind::GruGrad:
    return prepareGruGradOp(n, row, inputs, ctx);
  // Index, logic and shape ops.
  case CudaKernelKind::Logical:
  case CudaKernelKind::LogicalNot:
  case CudaKernelKind::ArgReduce:
  case CudaKernelKind::ShapeOf:
  case CudaKernelKind::Range:
  case CudaKernelKind::Trilu:
  case CudaKernelKind::Scan:
  case CudaKernelKind::GatherElements:
  case CudaKernelKind::Fill:
  case CudaKernelKind::OneHot:
    return prepareIndexOp(n, row, inputs, ctx);
  // Data-movement index ops.
  case CudaKernelKind::BlockMove:
  case CudaKernelKind::GatherND:
  case CudaKernelKind::Scatter:
  case CudaKernelKind::ReverseSequence:
  case CudaKernelKind::EyeLike:
  case CudaKernelKind::Compress:
  case CudaKernelKind::NonZero:
    return prepareMoveOp(n, row, inputs, ctx);
  // Transformer ops.
  case CudaKernelKind::Rotary:
    return prepareRotaryOp(n, row, inputs, ctx);
  case CudaKernelKind::Einsum:
    return prepareEinsumOp(n, row, inputs, ctx);
  case CudaKernelKind::Attention:
    return prepareAttentionOp(n, row, inputs, ctx);
  // Image ops.
  case CudaKernelKind::Image:
    return prepareImageOp(n, row, inputs, ctx);
  // Fused optimizer steps.
  case CudaKernelKind::OptimizerStep:
    return prepareOptimizerStepOp(n, row, inputs, ctx);
  // Loss scaling's multi-tensor unscale.
  case CudaKernelKind::MultiTensorUnscale:
    return prepareUnscaleOp(n, row, inputs, ctx);
  }
  return std::unique_ptr<CudaOp>();
}
