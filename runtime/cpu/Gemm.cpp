//===- Gemm.cpp - Matrix products on the CPU ------------------------------===//
//
// OpenBLAS sgemm/dgemm for fp32/fp64. fp16/bf16 operands are widened into fp32
// panels of at most kMaxM x kMaxK and kMaxK x kMaxN, multiplied by sgemm into
// an fp32 accumulator tile, and rounded once into C.
//
//===----------------------------------------------------------------------===//

#include "../ops/ShapeHelpers.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/Convert.h"

#include "Scratch.h"

#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <climits>
#include <cstring>
#include <type_traits>

using namespace mpc::kernels;

namespace mpc {
namespace cpu {

// If every widened operand and the accumulator fit in this many floats, the
// 16-bit path issues a single sgemm; otherwise it blocks with the sizes below.
static constexpr int64_t kWholeProblemFloats = int64_t(1) << 22;
static constexpr int64_t kMaxM = 512;
static constexpr int64_t kMaxN = 1024;
static constexpr int64_t kMaxK = 1024;

static CBLAS_TRANSPOSE blasTrans(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

static blasint blasInt(int64_t v) {
  assert(v >= 0 && v <= INT_MAX && "matrix dimension exceeds BLAS int");
  return blasint(v);
}

/// Row-major y = alpha * op(A) x + beta * y for a rows x cols matrix A.
template <typename S>
static void blasGemv(bool trans, int64_t rows, int64_t cols, S alpha,
                     const S *a, int64_t lda, const S *x, int64_t incx, S beta,
                     S *y, int64_t incy) {
  if constexpr (std::is_same<S, float>::value)
    cblas_sgemv(CblasRowMajor, blasTrans(trans), blasInt(rows), blasInt(cols),
                alpha, a, blasInt(lda), x, blasInt(incx), beta, y,
                blasInt(incy));
  else
    cblas_dgemv(CblasRowMajor, blasTrans(trans), blasInt(rows), blasInt(cols),
                alpha, a, blasInt(lda), x, blasInt(incx), beta, y,
                blasInt(incy));
}

/// Row-major BLAS call. Leading dimensions are clamped to the minimum BLAS
/// accepts, which only matters for empty operands (k == 0 is handled by the
/// callers; m, n > 0 here).
template <typename S>
static void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                     S alpha, const S *a, int64_t lda, const S *b, int64_t ldb,
                     S beta, S *c, int64_t ldc) {
  lda = std::max<int64_t>(lda, std::max<int64_t>(1, transA ? m : k));
  ldb = std::max<int64_t>(ldb, std::max<int64_t>(1, transB ? k : n));
  ldc = std::max<int64_t>(ldc, std::max<int64_t>(1, n));
  // Matrix-vector products: GEMM would pack the whole matrix first.
  if (m == 1) {
    // C^T = op(B)^T op(A)^T: the stored B (k x n, or n x k when transposed)
    // times the row of A (stride lda when A is stored transposed).
    blasGemv<S>(!transB, transB ? n : k, transB ? k : n, alpha, b, ldb, a,
                transA ? lda : 1, beta, c, 1);
    return;
  }
  if (n == 1) {
    blasGemv<S>(transA, transA ? k : m, transA ? m : k, alpha, a, lda, b,
                transB ? 1 : ldb, beta, c, ldc);
    return;
  }
  if constexpr (std::is_same<S, float>::value)
    cblas_sgemm(CblasRowMajor, blasTrans(transA), blasTrans(transB), blasInt(m),
                blasInt(n), blasInt(k), alpha, a, blasInt(lda), b, blasInt(ldb),
                beta, c, blasInt(ldc));
  else
    cblas_dgemm(CblasRowMajor, blasTrans(transA), blasTrans(transB), blasInt(m),
                blasInt(n), blasInt(k), alpha, a, blasInt(lda), b, blasInt(ldb),
                beta, c, blasInt(ldc));
}

/// Where the accumulator starts: zero, beta * C (in place), or beta * bias
/// with broadcast strides.
template <typename TC> struct AccumInit {
  const TC *src = nullptr; // Null: start from zero.
  int64_t rowStride = 0, colStride = 0;
  float beta = 0;
};

/// Widens rows [r0, r0 + rows) x columns [c0, c0 + cols) of a row-major
/// 16-bit matrix into a dense fp32 panel.
template <typename T>
static void widenPanel(const T *src, int64_t ld, int64_t r0, int64_t rows,
                       int64_t c0, int64_t cols, float *dst) {
  for (int64_t r = 0; r < rows; ++r)
    widenBlock(src + (r0 + r) * ld + c0, dst + r * cols, cols);
}

/// The 16-bit GEMM: fp32 panels, fp32 accumulation, one rounding into C.
template <typename T, typename TC>
static void gemmWidened(bool transA, bool transB, int64_t m, int64_t n,
                        int64_t k, float alpha, const T *a, int64_t lda,
                        const T *b, int64_t ldb, const AccumInit<TC> &init,
                        TC *c, int64_t ldc) {
  int64_t mb = m, nb = n, kb = k;
  if (m * k + k * n + m * n > kWholeProblemFloats) {
    mb = std::min(m, kMaxM);
    nb = std::min(n, kMaxN);
    kb = std::min(k, kMaxK);
  }
  float *aPanel = scratch<float>(ScratchSlot::GemmA, size_t(mb * kb));
  float *bPanel = scratch<float>(ScratchSlot::GemmB, size_t(kb * nb));
  float *tile = scratch<float>(ScratchSlot::GemmC, size_t(mb * nb));
  // Panels are reconverted only when the block they hold changes, so with a
  // single K block A is widened once per M block and B once per N block.
  int64_t aHeld[2] = {-1, -1}, bHeld[2] = {-1, -1};

  for (int64_t n0 = 0; n0 < n; n0 += nb) {
    int64_t nl = std::min(nb, n - n0);
    for (int64_t m0 = 0; m0 < m; m0 += mb) {
      int64_t ml = std::min(mb, m - m0);
      // fp32 accumulator tile, starting from beta * C or beta * bias.
      bool haveInit = init.src != nullptr && init.beta != 0.0f;
      for (int64_t i = 0; haveInit && i < ml; ++i) {
        const TC *row = init.src + (m0 + i) * init.rowStride;
        float *t = tile + i * nl;
        if (init.colStride == 1)
          widenBlock(row + n0, t, nl);
        else if (init.colStride == 0)
          std::fill_n(t, nl, load(row[0]));
        else
          for (int64_t j = 0; j < nl; ++j)
            t[j] = load(row[(n0 + j) * init.colStride]);
        if (init.beta != 1.0f)
          for (int64_t j = 0; j < nl; ++j)
            t[j] *= init.beta;
      }
      if (!haveInit && k == 0)
        std::fill_n(tile, ml * nl, 0.0f);

      for (int64_t k0 = 0; k0 < k; k0 += kb) {
        int64_t kl = std::min(kb, k - k0);
        if (aHeld[0] != m0 || aHeld[1] != k0) {
          if (transA)
            widenPanel(a, lda, k0, kl, m0, ml, aPanel); // kl x ml
          else
            widenPanel(a, lda, m0, ml, k0, kl, aPanel); // ml x kl
          aHeld[0] = m0;
          aHeld[1] = k0;
        }
        if (bHeld[0] != k0 || bHeld[1] != n0) {
          if (transB)
            widenPanel(b, ldb, n0, nl, k0, kl, bPanel); // nl x kl
          else
            widenPanel(b, ldb, k0, kl, n0, nl, bPanel); // kl x nl
          bHeld[0] = k0;
          bHeld[1] = n0;
        }
        float beta = (k0 == 0 && !haveInit) ? 0.0f : 1.0f;
        blasGemm<float>(transA, transB, ml, nl, kl, alpha, aPanel,
                        transA ? ml : kl, bPanel, transB ? kl : nl, beta, tile,
                        nl);
      }
      for (int64_t i = 0; i < ml; ++i)
        narrowBlock(tile + i * nl, c + (m0 + i) * ldc + n0, nl);
    }
  }
}

/// fp32/fp64 GEMM with an optional broadcast initializer, straight to BLAS.
template <typename S>
static void gemmNative(bool transA, bool transB, int64_t m, int64_t n,
                       int64_t k, S alpha, const S *a, int64_t lda, const S *b,
                       int64_t ldb, S beta, const S *bias,
                       int64_t biasRowStride, int64_t biasColStride, S *c,
                       int64_t ldc) {
  bool inPlace = bias == c && biasRowStride == ldc && biasColStride == 1;
  if (!inPlace && bias && beta != S(0)) {
    // Materialize beta * bias in C so BLAS accumulates onto it.
    for (int64_t i = 0; i < m; ++i) {
      S *row = c + i * ldc;
      const S *src = bias + i * biasRowStride;
      for (int64_t j = 0; j < n; ++j)
        row[j] = beta * src[j * biasColStride];
    }
    beta = S(1);
  } else if (!inPlace) {
    beta = S(0);
    if (k == 0)
      for (int64_t i = 0; i < m; ++i)
        std::fill_n(c + i * ldc, n, S(0));
  }
  if (k == 0) {
    if (inPlace && beta != S(1))
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c[i * ldc + j] = beta == S(0) ? S(0) : beta * c[i * ldc + j];
    return;
  }
  blasGemm<S>(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T, typename TC>
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          GemmScalar<T> alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
          GemmScalar<T> beta, TC *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if constexpr (std::is_same<T, float>::value ||
                std::is_same<T, double>::value) {
    static_assert(std::is_same<T, TC>::value,
                  "fp32/fp64 GEMM writes its own type");
    gemmNative<T>(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                  1, c, ldc);
  } else {
    static_assert(std::is_same<T, TC>::value || std::is_same<TC, float>::value,
                  "16-bit GEMM writes its own type or float");
    AccumInit<TC> init;
    init.src = c;
    init.rowStride = ldc;
    init.colStride = 1;
    init.beta = beta;
    gemmWidened<T, TC>(transA, transB, m, n, k, alpha, a, lda, b, ldb, init, c,
                       ldc);
  }
}

template <typename T>
void gemmWithBias(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  GemmScalar<T> alpha, const T *a, int64_t lda, const T *b,
                  int64_t ldb, GemmScalar<T> beta, const T *bias,
                  int64_t biasRowStride, int64_t biasColStride, T *y,
                  int64_t ldy) {
  if (m == 0 || n == 0)
    return;
  if constexpr (std::is_same<T, float>::value ||
                std::is_same<T, double>::value) {
    assert((bias != y || (biasRowStride == ldy && biasColStride == 1)) &&
           "bias may alias Y only with Y's own layout");
    gemmNative<T>(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, bias,
                  biasRowStride, biasColStride, y, ldy);
  } else {
    AccumInit<T> init;
    init.src = bias;
    init.rowStride = biasRowStride;
    init.colStride = biasColStride;
    init.beta = beta;
    gemmWidened<T, T>(transA, transB, m, n, k, alpha, a, lda, b, ldb, init, y,
                      ldy);
  }
}

bool matmulShape(llvm::ArrayRef<int64_t> aShape, llvm::ArrayRef<int64_t> bShape,
                 llvm::SmallVectorImpl<int64_t> &outShape) {
  return shapes::matmulShape(aShape, bShape, outShape);
}

template <typename T>
void batchedMatmul(const MatrixBatch<T> &a, const MatrixBatch<T> &b, int64_t m,
                   int64_t n, int64_t k, GemmScalar<T> alpha, T *c) {
  using S = GemmScalar<T>;
  // B shared by every batch and A's matrices stacked densely: A's rows are
  // contiguous, fold them into M.
  if (numElements(b.batch) == 1 && !a.trans && a.ld == k &&
      a.batchStride == m * k) {
    gemm<T, T>(false, b.trans, numElements(a.batch) * m, n, k, alpha, a.data,
               k, b.data, b.ld, S(0), c, n);
    return;
  }
  BroadcastPlan plan = makeBroadcastPlan(a.batch, b.batch);
  if (plan.numElements == 0 || m == 0 || n == 0)
    return;
  int64_t idx[kMaxBroadcastRank] = {};
  int64_t aOff = 0, bOff = 0;
  for (int64_t o = 0; o < plan.numElements; ++o) {
    gemm<T, T>(a.trans, b.trans, m, n, k, alpha, a.data + aOff * a.batchStride,
               a.ld, b.data + bOff * b.batchStride, b.ld, S(0), c + o * m * n,
               n);
    for (int d = plan.rank - 1; d >= 0; --d) {
      aOff += plan.aStrides[d];
      bOff += plan.bStrides[d];
      if (++idx[d] < plan.dims[d])
        break;
      aOff -= plan.aStrides[d] * plan.dims[d];
      bOff -= plan.bStrides[d] * plan.dims[d];
      idx[d] = 0;
    }
  }
}

template <typename T>
void matmul(const T *a, llvm::ArrayRef<int64_t> aShape, const T *b,
            llvm::ArrayRef<int64_t> bShape, T *c) {
  llvm::SmallVector<int64_t, 6> outShape;
  bool ok = matmulShape(aShape, bShape, outShape);
  assert(ok && "matmul operand shapes do not match");
  (void)ok;
  int64_t m = aShape.size() > 1 ? aShape[aShape.size() - 2] : 1;
  int64_t k = aShape.back();
  int64_t n = bShape.size() > 1 ? bShape.back() : 1;
  MatrixBatch<T> ma, mb;
  ma.data = a;
  ma.batch = aShape.drop_back(std::min<size_t>(2, aShape.size()));
  ma.batchStride = m * k;
  ma.ld = k;
  mb.data = b;
  mb.batch = bShape.drop_back(std::min<size_t>(2, bShape.size()));
  mb.batchStride = k * n;
  mb.ld = n;
  batchedMatmul<T>(ma, mb, m, n, k, GemmScalar<T>(1), c);
}

void setGemmThreads(int numThreads) { openblas_set_num_threads(numThreads); }

#define MPC_INSTANTIATE_GEMM(T, TC)                                            \
  template void gemm<T, TC>(bool, bool, int64_t, int64_t, int64_t,             \
                            GemmScalar<T>, const T *, int64_t, const T *,      \
                            int64_t, GemmScalar<T>, TC *, int64_t);
MPC_INSTANTIATE_GEMM(float, float)
MPC_INSTANTIATE_GEMM(double, double)
MPC_INSTANTIATE_GEMM(Half, Half)
MPC_INSTANTIATE_GEMM(BFloat16, BFloat16)
MPC_INSTANTIATE_GEMM(Half, float)
MPC_INSTANTIATE_GEMM(BFloat16, float)
#undef MPC_INSTANTIATE_GEMM

#define MPC_INSTANTIATE_MATMUL(T)                                              \
  template void gemmWithBias<T>(bool, bool, int64_t, int64_t, int64_t,         \
                                GemmScalar<T>, const T *, int64_t, const T *,  \
                                int64_t, GemmScalar<T>, const T *, int64_t,    \
                                int64_t, T *, int64_t);                        \
  template void matmul<T>(const T *, llvm::ArrayRef<int64_t>, const T *,       \
                          llvm::ArrayRef<int64_t>, T *);                       \
  template void batchedMatmul<T>(const MatrixBatch<T> &,                       \
                                 const MatrixBatch<T> &, int64_t, int64_t,     \
                                 int64_t, GemmScalar<T>, T *);
MPC_INSTANTIATE_MATMUL(float)
MPC_INSTANTIATE_MATMUL(double)
MPC_INSTANTIATE_MATMUL(Half)
MPC_INSTANTIATE_MATMUL(BFloat16)
#undef MPC_INSTANTIATE_MATMUL

} // namespace cpu
} // namespace mpc
