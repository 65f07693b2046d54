//===- LtProduct.h - One planned cuBLASLt product with fp32 output -*- C++ -*-===//
//
// A product planned by GemmPlan.h (an LtGemm: the user's row-major operands
// as column-major cuBLASLt layouts, strided batch, one call per offset)
// with operands of one float type, fp32 compute and an fp32 D, its
// algorithm chosen once in prepare. Shared by the families whose products
// feed kernels of their own: the recurrent ops (RnnOps.cpp), Einsum
// (EinsumOps.cpp) and Attention (AttentionOps.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_LTPRODUCT_H
#define MPC_RUNTIME_CUDA_LTPRODUCT_H

#include "CudaOp.h"
#include "mpc/Runtime/Cuda/GemmPlan.h"

#include <string>

namespace mpc {
namespace cuda {

/// cuBLASLt's type of an operand of runtime type `t` (f32, f16, bf16).
cudaDataType_t ltType(DType t);

/// `bytes` rounded up to 256: a family's workspace pieces start where
/// cuBLASLt's operands may (256-byte alignment).
inline size_t alignedBytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

class LtProduct {
public:
  LtGemm gemm;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  size_t workspace = 0;

  LtProduct() = default;
  LtProduct(const LtProduct &) = delete;
  LtProduct &operator=(const LtProduct &) = delete;
  ~LtProduct();

  /// Makes the descriptors of `g` with operands of `in` and chooses the
  /// algorithm: "" or what cuBLASLt refused.
  std::string prepare(const LtGemm &g, DType in, const CudaContext &ctx);

  /// Queues D = A . B + beta D as planned (GemmPlan.h: the user's A and B,
  /// transposes included); userA/userB/out are the user's operands, out
  /// fp32. "" or what cuBLASLt refused.
  std::string run(const CudaContext &ctx, const void *userA, const void *userB, float *out,
                  unsigned inBytes, void *scratch, size_t scratchBytes, cudaStream_t s,
                  float beta = 0) const;
};

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_LTPRODUCT_H
