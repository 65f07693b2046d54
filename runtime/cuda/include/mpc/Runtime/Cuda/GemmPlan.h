//===- GemmPlan.h - Row-major matrix products as cuBLASLt calls -*- C++ -*-===//
//
// The host-side half of the CUDA backend's GEMM family, as pure functions of
// shapes: how a row-major ONNX MatMul/Gemm (numpy batch broadcasting, 1-D
// operands, transposed operands) becomes column-major cuBLASLt calls. Nothing
// here includes a CUDA header, so CI (no GPU) tests every layout decision; the
// backend only copies these numbers into cublasLtMatrixLayout / MatmulDesc
// attributes. docs/gpu-notes.md ("Matrix products") describes the mapping.
//
// The mapping: a row-major R x C matrix whose rows are ld elements apart is
// the column-major C x R matrix with the same ld. So the row-major product
// D[M,N] = opA(A)[M,K] * opB(B)[K,N] is the column-major product
// D^T[N,M] = opB(B)^T * opA(A)^T: cuBLASLt's first operand is the user's B,
// its second the user's A, and m = N, n = M, k = K. No data moves.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_GEMMPLAN_H
#define MPC_RUNTIME_CUDA_GEMMPLAN_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// One matrix operand as cuBLASLt sees it: a column-major `rows` x `cols`
/// layout with leading dimension `ld` (elements), applied transposed when
/// `trans` (CUBLASLT_MATMUL_DESC_TRANSA/B = CUBLAS_OP_T). Matrix i of a batch
/// starts `batchStride` elements after matrix i - 1 (0: one matrix shared by
/// the whole batch). `alignment` is the largest power of two, at most 256,
/// that divides the byte offset of every matrix this operand addresses from
/// its (256-byte aligned) buffer: the CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*
/// preference.
struct LtOperand {
  int64_t rows = 0, cols = 0, ld = 0;
  bool trans = false;
  int64_t batchStride = 0;
  unsigned alignment = 256;
};

/// One cublasLtMatmul: D = op(A) * op(B) (column-major, m x n, inner size k)
/// over `batchCount` matrices, issued once per entry of `offsets`.
struct LtGemm {
  int64_t m = 0, n = 0, k = 0;
  /// cuBLASLt's A is the user's B and cuBLASLt's B the user's A.
  LtOperand a, b, d;
  int64_t batchCount = 1;
  /// Element offsets, into the user's A, B and D buffers, of each call.
  struct Offsets {
    int64_t userA = 0, userB = 0, d = 0;
  };
  std::vector<Offsets> offsets;
};

/// A numpy-style matrix product of row-major dense tensors, as cuBLASLt
/// calls. `aShape`/`bShape` are the stored shapes; with `transA` the last two
/// axes of A are swapped before the product (likewise B), as in ONNX Gemm.
/// A 1-D A is a row vector and a 1-D B a column vector (never transposed),
/// and that axis is dropped from the result, as numpy does. Batch axes
/// broadcast. `elementBytes` sizes the alignment preferences.
struct MatmulProblem {
  llvm::ArrayRef<int64_t> aShape, bShape;
  bool transA = false, transB = false;
  unsigned elementBytes = 2;
};

struct MatmulPlan {
  std::vector<int64_t> outShape; ///< the dense result shape
  LtGemm gemm;
};

/// Plans the product. When B has no batch (or only size-1 batch axes) and A is
/// not transposed, A's batch is folded into the rows of one GEMM; otherwise the
/// longest run of trailing batch axes that every operand addresses with one
/// stride becomes cuBLASLt's strided batch, and the remaining outer batch axes
/// become separate calls. Fails, naming the shapes, when they do not multiply
/// or broadcast, or when a size is negative or exceeds cuBLASLt's 32-bit
/// batch count.
llvm::Expected<MatmulPlan> planMatmul(const MatmulProblem &p);

/// com.microsoft FusedMatMul's product: MatMul's with transA/transB (a 1-D
/// operand is never transposed) and transBatchA/transBatchB. With
/// transBatchX the stored X is [R, b..., C] (rank 3 or more, the other
/// operand of the same rank) and batch entry i of op's batch b... is the
/// R x C matrix whose element (r, c) lies at r * (numel(b) * C) + i * C + c:
/// a strided batch with leading dimension numel(b) * C and batch stride C,
/// which cuBLASLt expresses directly (no copy).
struct FusedMatmulProblem {
  llvm::ArrayRef<int64_t> aShape, bShape;
  bool transA = false, transB = false, transBatchA = false, transBatchB = false;
  unsigned elementBytes = 2;
};

/// Plans FusedMatMul: planMatmul's plan of the operands as transBatch reads
/// them ([b..., R, C]), with a transBatch operand's leading dimension, batch
/// stride and call offsets those of its stored layout, and its alignment
/// preference recomputed from them. A transBatchA product never folds A's
/// batch into rows (its rows are not evenly spaced). Fails, naming the
/// stored shapes and flags, as planMatmul does, and when a transBatch
/// operand has rank below 3 or the ranks differ.
llvm::Expected<MatmulPlan> planFusedMatmul(const FusedMatmulProblem &p);

/// How ONNX Gemm's C input (Y = alpha * op(A) * op(B) + beta * C) reaches the
/// product. cuBLASLt's bias epilogue adds a vector with one element per row of
/// its column-major D, which is one element per column of the row-major
/// result: a [N] or [1, N] C with beta = 1 is that vector.
enum class GemmBias : uint8_t {
  None,      ///< no C, or beta = 0: beta is passed as 0 and C is not read
  Epilogue,  ///< CUBLASLT_EPILOGUE_BIAS with C as the bias vector, beta = 0
  Matrix,    ///< C is a dense [M, N] matrix: cuBLASLt's C operand with beta
  ExpandToD, ///< C ([M, 1], [1, 1], [1], [], or [N] with beta != 1) is first
             ///< broadcast into D, then D is cuBLASLt's C operand with beta
};

/// The bias choice for a Gemm of result M x N with C of shape `cShape`
/// (absent when `hasC` is false); fails when C does not broadcast to [M, N].
llvm::Expected<GemmBias> planGemmBias(int64_t m, int64_t n, bool hasC,
                                      llvm::ArrayRef<int64_t> cShape, float beta);

/// The activation of a GemmBiasAct node (mpc/Ops/GemmBiasAct.h's
/// GemmActivation, in the same order).
enum class EpilogueAct : uint8_t { None, Relu, Gelu, GeluTanh };

/// The cuBLASLt epilogue a GemmBiasAct node runs with.
enum class LtEpilogue : uint8_t {
  Bias,     ///< CUBLASLT_EPILOGUE_BIAS
  ReluBias, ///< CUBLASLT_EPILOGUE_RELU_BIAS
  GeluBias, ///< CUBLASLT_EPILOGUE_GELU_BIAS (cuBLASLt's GELU is the tanh form)
  Default,  ///< CUBLASLT_EPILOGUE_DEFAULT: no bias (the product, in D's type)
  Relu,     ///< CUBLASLT_EPILOGUE_RELU: no bias
  Gelu,     ///< CUBLASLT_EPILOGUE_GELU: no bias, the tanh form
  /// CUBLASLT_EPILOGUE_BGRADA / BGRADB: the product, and cuBLASLt's operand A
  /// (B) summed over k into the bias pointer. The row-major product is
  /// planned as D^T = op(B)^T op(A)^T, so the node's B is cuBLASLt's A:
  /// bias_grad of B is BGRADA (N elements, the rows of column-major D),
  /// bias_grad of A is BGRADB (M elements, its columns).
  BGradA,
  BGradB,
};

/// One GemmBiasAct node: element types as ONNX numbers (1 float32, 10
/// float16, 16 bfloat16), the activation, the result's M x N (rows of the
/// row-major Y, A's batch folded in) and the bias's element count. Without
/// a bias (hasBias false) biasType and biasElements are not read.
struct EpilogueProblem {
  int32_t aType = 1, yType = 1, biasType = 1;
  EpilogueAct act = EpilogueAct::None;
  int64_t m = 0, n = 0, biasElements = 0;
  bool hasBias = true;
  /// The node's bias_grad_of with a bias_grad output: -1 none, 0 A, 1 B
  /// (the bias_grad is typed like Y).
  int8_t biasGradOf = -1;
};

/// How the node runs: one cublasLtMatmul with `epilogue` writing D of
/// `dType`, then at most two element-wise passes. Bytes past cuBLASLt's own
/// workspace (each region 256-byte aligned, offsets from the end of that
/// workspace rounded up to 256) hold a converted bias and a staged D.
struct EpiloguePlan {
  LtEpilogue epilogue = LtEpilogue::Bias;
  int32_t dType = 1;
  /// The erf form of GELU: cuBLASLt has only the tanh form, so the bias (or,
  /// without a bias, the default) epilogue runs and the element-wise Gelu then
  /// rewrites D in place (one
  /// extra pass over Y; the values are those of the bias-in-accumulator form
  /// followed by Gelu in D's type).
  bool separateGelu = false;
  /// The bias is not of D's type: one cast of its N elements into the
  /// workspace (at biasOffset) before the product; cuBLASLt reads that copy.
  bool castBias = false;
  /// float32 operands with a 16-bit Y: cuBLASLt's float32-operand kernels
  /// write a float32 D, so D is staged in the workspace (at dOffset) and one
  /// cast pass writes Y (the rounding happens once, there).
  bool stageD = false;
  uint64_t biasOffset = 0, dOffset = 0, extraBytes = 0;
};

/// Plans a GemmBiasAct node; fails, naming what is wrong, for types outside
/// the op's rule or a bias that is not N long.
llvm::Expected<EpiloguePlan> planGemmEpilogue(const EpilogueProblem &p);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_GEMMPLAN_H
