//===- CudaOps.cpp - Prepare by kernel kind ---------------------------------===//
//
// The one place that maps a kernel-table row's kind to its family's prepare
// function (CudaOp.h). A new family adds its kinds to CudaKernelKind, its
// rows to CudaKernelTable.cpp, its prepare function in its own file and a
// case here.
//
//===----------------------------------------------------------------------===//
#include "CudaOp.h"

using namespace mpc;
using namespace mpc::cuda;

CudaOp::~CudaOp() = default;

std::string cuda::cudaText(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

std::string cuda::launchText(cudaError_t e) {
  return e == cudaSuccess ? std::string() : "kernel launch failed: " + cudaText(e);
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
    return prepareGemmOp(n, row, inputs, ctx);
  // Data movement.
  case CudaKernelKind::DataMove:
    return prepareDataOp(n, row, inputs, ctx);
  }
  return std::unique_ptr<CudaOp>();
}
