//===- Gemm.h - Matrix products on the CPU ----------------------*- C++ -*-===//
//
// Row-major GEMM, ONNX Gemm with a broadcast bias, and numpy-style batched
// MatMul. fp32 and fp64 call OpenBLAS directly; fp16/bf16 operands are widened
// to fp32 panels (blocked, so scratch stays bounded) and multiplied with
// sgemm: fp32 products and fp32 accumulation, one rounding on store, as
// Tensor Cores do.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_GEMM_H
#define MPC_RUNTIME_CPU_GEMM_H

#include "mpc/Runtime/Float16.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {
namespace cpu {

/// Scalar type of alpha/beta: double for double GEMMs, float otherwise.
template <typename T> struct GemmScalarOf { using type = float; };
template <> struct GemmScalarOf<double> { using type = double; };
template <typename T> using GemmScalar = typename GemmScalarOf<T>::type;

/// C = alpha * op(A) * op(B) + beta * C for row-major matrices, where op(A)
/// is M x K and op(B) is K x N (stored transposed when transA/transB). As in
/// BLAS, C is not read when beta == 0. T is float, double, Half or BFloat16;
/// TC is T, or float with 16-bit T (fp32 output, e.g. weight gradients).
template <typename T, typename TC>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          GemmScalar<T> alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
          GemmScalar<T> beta, TC *c, int64_t ldc);

/// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * bias, with the bias element
/// for (i, j) at bias[i * biasRowStride + j * biasColStride] (strides of 0
/// broadcast it: {0, 1} for a [N] bias, {1, 0} for [M, 1], {0, 0} for a
/// scalar). A null bias means none; as in BLAS it is not read when beta == 0.
/// Everything is summed in fp32 (fp64 for double) and rounded once.
template <typename T>
void gemmWithBias(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  GemmScalar<T> alpha, const T *a, int64_t lda, const T *b,
                  int64_t ldb, GemmScalar<T> beta, const T *bias,
                  int64_t biasRowStride, int64_t biasColStride, T *y,
                  int64_t ldy);

/// The numpy matmul result shape, or false when the shapes do not match
/// (rank 0, different K, or batch dimensions that do not broadcast). A 1-D A
/// is a row vector and a 1-D B a column vector; their dimension is dropped.
bool matmulShape(llvm::ArrayRef<int64_t> aShape, llvm::ArrayRef<int64_t> bShape,
                 llvm::SmallVectorImpl<int64_t> &outShape);

/// ONNX MatMul with numpy broadcasting of the batch dimensions; c is dense in
/// matmulShape(aShape, bShape). When B has no real batch dimensions the batch
/// of A is folded into M and one GEMM is issued.
template <typename T>
void matmul(const T *a, llvm::ArrayRef<int64_t> aShape, const T *b,
            llvm::ArrayRef<int64_t> bShape, T *c);

/// One operand of batchedMatmul: matrix i of the row-major flattened batch
/// starts at data + i * batchStride, its rows are ld elements apart, and it is
/// stored transposed when trans. A dense [batch..., rows, cols] tensor has
/// batchStride rows * cols and ld cols; other strides describe operands whose
/// batch axes sit between the matrix axes (FusedMatMul's transBatchA/B).
template <typename T> struct MatrixBatch {
  const T *data = nullptr;
  llvm::ArrayRef<int64_t> batch;
  int64_t batchStride = 0;
  int64_t ld = 0;
  bool trans = false;
};

/// C = alpha * op(A) * op(B) for every matrix pair of the numpy broadcast of
/// A's and B's batch dimensions; op(A) is m x k, op(B) is k x n, and c is
/// dense [broadcast batch..., m, n]. The engine of matmul; same accumulation.
template <typename T>
void batchedMatmul(const MatrixBatch<T> &a, const MatrixBatch<T> &b, int64_t m,
                   int64_t n, int64_t k, GemmScalar<T> alpha, T *c);

/// Sets the number of threads OpenBLAS uses (1 for single-threaded runs).
void setGemmThreads(int numThreads);

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_GEMM_H
