//===- LtProduct.cpp - One planned cuBLASLt product with fp32 output --------===//
//
// See LtProduct.h.
//
//===----------------------------------------------------------------------===//
#include "LtProduct.h"

using namespace mpc;
using namespace mpc::cuda;

cudaDataType_t cuda::ltType(DType t) {
  return t == DType::F16 ? CUDA_R_16F : t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

LtProduct::~LtProduct() {
  for (cublasLtMatrixLayout_t l : {a, b, d})
    if (l)
      cublasLtMatrixLayoutDestroy(l);
  if (desc)
    cublasLtMatmulDescDestroy(desc);
}

std::string LtProduct::prepare(const LtGemm &g, DType in, const CudaContext &ctx) {
  gemm = g;
  cublasComputeType_t compute =
      in == DType::F32 && ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
    return "cublasLtMatmulDescCreate failed";
  cublasOperation_t ta = g.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = g.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  auto layout = [&](const LtOperand &o, cudaDataType_t t, cublasLtMatrixLayout_t &l) {
    if (cublasLtMatrixLayoutCreate(&l, t, uint64_t(o.rows), uint64_t(o.cols), o.ld) !=
        CUBLAS_STATUS_SUCCESS)
      return false;
    if (g.batchCount > 1) {
      int32_t count = int32_t(g.batchCount);
      int64_t stride = o.batchStride;
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                       sizeof(count));
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                       sizeof(stride));
    }
    return true;
  };
  if (!layout(g.a, ltType(in), a) || !layout(g.b, ltType(in), b) || !layout(g.d, CUDA_R_32F, d))
    return "cublasLtMatrixLayoutCreate failed";
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
    return "cublasLtMatmulPreferenceCreate failed";
  uint64_t cap = ctx.gemmWorkspaceCap;
  uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  uint32_t alignA = g.a.alignment, alignB = g.b.alignment, alignD = g.d.alignment;
  struct {
    cublasLtMatmulPreferenceAttributes_t what;
    const void *value;
    size_t bytes;
  } prefs[] = {{CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof(cap)},
               {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction, sizeof(reduction)},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof(alignA)},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof(alignB)},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD, sizeof(alignD)},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, sizeof(alignD)}};
  for (const auto &p : prefs)
    cublasLtMatmulPreferenceSetAttribute(pref, p.what, p.value, p.bytes);
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc, a, b, d, d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS)
    return std::string("cublasLtMatmulAlgoGetHeuristic failed: ") + cublasLtGetStatusString(s);
  if (found == 0)
    return "cuBLASLt has no algorithm for a " + std::to_string(g.m) + " x " +
           std::to_string(g.n) + " x " + std::to_string(g.k) + " product";
  algo = result.algo;
  workspace = result.workspaceSize;
  return "";
}

std::string LtProduct::run(const CudaContext &ctx, const void *userA, const void *userB,
                           float *out, unsigned inBytes, void *scratch, size_t scratchBytes,
                           cudaStream_t s, float beta) const {
  const float alpha = 1;
  for (const LtGemm::Offsets &o : gemm.offsets) {
    float *dst = out + o.d;
    cublasStatus_t st =
        cublasLtMatmul(ctx.lt, desc, &alpha, static_cast<const char *>(userB) + o.userB * inBytes,
                       a, static_cast<const char *>(userA) + o.userA * inBytes, b, &beta, dst, d,
                       dst, d, &algo, scratch, scratch ? scratchBytes : 0, s);
    if (st != CUBLAS_STATUS_SUCCESS)
      return std::string("cublasLtMatmul failed: ") + cublasLtGetStatusString(st);
  }
  return "";
}
