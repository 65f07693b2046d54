//===- LtEmulator.h - What cublasLtMatmul computes, on the host -*- C++ -*-===//
//
// An emulator of cublasLtMatmul for the GEMM plans of GemmPlan.h (column-
// major layouts with leading dimensions, optional transposes, strided
// batches, one call per offset triple), in double, for the plan tests
// (GemmPlanTest.cpp, RnnPlanTest.cpp). It also checks what cuBLASLt
// requires of a layout (ld >= rows, every access inside its buffer) and that
// each result element is written once.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TESTS_CUDA_HOST_LTEMULATOR_H
#define MPC_TESTS_CUDA_HOST_LTEMULATOR_H

#include "mpc/Runtime/Cuda/GemmPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace mpc {
namespace cuda {

/// What cublasLtMatmul computes for the plan, on the user's buffers.
inline std::vector<double> emulate(const LtGemm &g, const std::vector<double> &userA,
                            const std::vector<double> &userB, size_t outSize) {
  std::vector<double> d(outSize, 0.0);
  std::vector<int> writes(outSize, 0);
  // Layout rules: op(A) is m x k, op(B) k x n, D m x n; ld covers the rows.
  EXPECT_EQ(g.a.trans ? g.a.cols : g.a.rows, g.m);
  EXPECT_EQ(g.a.trans ? g.a.rows : g.a.cols, g.k);
  EXPECT_EQ(g.b.trans ? g.b.cols : g.b.rows, g.k);
  EXPECT_EQ(g.b.trans ? g.b.rows : g.b.cols, g.n);
  EXPECT_EQ(g.d.rows, g.m);
  EXPECT_EQ(g.d.cols, g.n);
  EXPECT_GE(g.a.ld, std::max<int64_t>(1, g.a.rows));
  EXPECT_GE(g.b.ld, std::max<int64_t>(1, g.b.rows));
  EXPECT_GE(g.d.ld, std::max<int64_t>(1, g.d.rows));
  auto at = [](const std::vector<double> &buf, int64_t i) {
    EXPECT_GE(i, 0);
    EXPECT_LT(i, int64_t(buf.size()));
    return i >= 0 && i < int64_t(buf.size()) ? buf[i] : 0.0;
  };
  for (const LtGemm::Offsets &o : g.offsets)
    for (int64_t bi = 0; bi < g.batchCount; ++bi) {
      int64_t a0 = o.userB + bi * g.a.batchStride; // cuBLASLt's A is the user's B
      int64_t b0 = o.userA + bi * g.b.batchStride;
      int64_t d0 = o.d + bi * g.d.batchStride;
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < g.k; ++p) {
            double x = at(userB, a0 + (g.a.trans ? p + i * g.a.ld : i + p * g.a.ld));
            double y = at(userA, b0 + (g.b.trans ? j + p * g.b.ld : p + j * g.b.ld));
            sum += y * x; // the row-major a(i', p) * b(p, j') of the reference
          }
          int64_t di = d0 + i + j * g.d.ld;
          EXPECT_GE(di, 0);
          EXPECT_LT(di, int64_t(outSize));
          if (di >= 0 && di < int64_t(outSize)) {
            d[di] = sum;
            ++writes[di];
          }
        }
    }
  for (size_t i = 0; i < outSize; ++i)
    EXPECT_EQ(writes[i], 1) << "element " << i;
  return d;
}

} // namespace cuda
} // namespace mpc

#endif // MPC_TESTS_CUDA_HOST_LTEMULATOR_H
