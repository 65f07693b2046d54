//===- IndexMathTest.cpp - Integer values read exactly as int64 -----------===//
#include "mpc/Ops/IndexMath.h"
#include "mpc/IR/Tensor.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstring>

using namespace mpc;

TEST(Int64Accessor, ReadsIntegersExactly) {
  Tensor t(DType::I64, {3});
  int64_t v[3] = {INT64_MAX, INT64_MIN, INT64_MAX - 1};
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), v, sizeof v);
  t.setBytes(b);
  EXPECT_EQ(t.getAsInt64(0), INT64_MAX);
  EXPECT_EQ(t.getAsInt64(1), INT64_MIN);
  EXPECT_EQ(t.getAsInt64(2), INT64_MAX - 1);
  Tensor f(DType::F32, {2});
  float fv[2] = {1e30f, -2.75f};
  std::vector<uint8_t> fb(sizeof fv);
  std::memcpy(fb.data(), fv, sizeof fv);
  f.setBytes(fb);
  EXPECT_EQ(f.getAsInt64(0), INT64_MAX); // saturates, no undefined conversion
  EXPECT_EQ(f.getAsInt64(1), -2);
  EXPECT_EQ(saturatingInt64(std::nan("")), 0);
}

TEST(IndexMath, SliceClampsLikeTheOnnxSpec) {
  auto s = [](int64_t dim, int64_t b, int64_t e, int64_t st) {
    SliceAxis r = resolveSliceAxis(dim, b, e, st);
    return std::make_pair(r.start, r.count);
  };
  EXPECT_EQ(s(10, 0, INT64_MAX, 1), std::make_pair(int64_t(0), int64_t(10)));
  EXPECT_EQ(s(10, INT64_MIN, INT64_MAX, INT64_MAX), std::make_pair(int64_t(0), int64_t(1)));
  EXPECT_EQ(s(10, INT64_MAX, INT64_MIN, -1), std::make_pair(int64_t(9), int64_t(10)));
  EXPECT_EQ(s(10, INT64_MAX, INT64_MIN, INT64_MIN), std::make_pair(int64_t(9), int64_t(1)));
  EXPECT_EQ(s(10, -15, -20, -1), std::make_pair(int64_t(0), int64_t(1)));
  EXPECT_EQ(s(10, 7, 2, -2), std::make_pair(int64_t(7), int64_t(3)));
  EXPECT_EQ(s(0, 0, INT64_MAX, -1).second, 0);
  EXPECT_EQ(integerRangeCount(0, INT64_MAX, INT64_MAX), 1);
  EXPECT_EQ(integerRangeCount(INT64_MIN, INT64_MAX, 1), INT64_MAX);
  EXPECT_EQ(integerRangeCount(INT64_MAX, INT64_MIN, INT64_MIN), 2);
  EXPECT_EQ(integerRangeCount(10, 0, -3), 4);
  EXPECT_EQ(integerRangeCount(0, 10, -3), 0);
}
