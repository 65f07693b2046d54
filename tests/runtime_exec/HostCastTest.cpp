//===- HostCastTest.cpp - castHostTensor against the CPU Cast kernel -------===//
//
// The core converts host tensors (castHostTensor: `mpc run` inputs, .npy
// output of bf16) with the shared scalar cast, not through the CPU backend.
// Its bytes must be the CPU Cast kernel's (cpu::castArray, with its
// vectorized fp16/bf16 converters) for every pair of storage types, on
// values that exercise rounding, overflow, NaN and saturation; a few
// conversions are also checked against values written out by hand.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/DTypeDispatch.h"
#include "mpc/Runtime/HostTensor.h"
#include "gtest/gtest.h"
#include <cmath>
#include <cstring>
#include <limits>

using namespace mpc;

namespace {
const DType kStorable[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                           DType::I16, DType::I32, DType::I64, DType::U8,   DType::U16,
                           DType::U32, DType::U64, DType::Bool};

/// Values every source type is made from (through the cast under test's own
/// semantics from float64, so each source holds what it can represent).
const double kValues[] = {0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.1, -3.7, 127.5, 128.0, -129.0,
                          255.9, 256.0, 65504.0, 65520.0, 1e10, -1e10, 3.4e38, 1e300,
                          -1e300, std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::quiet_NaN(), 16777217.0,
                          9.007199254740993e15, 1.00390625, 1.001953125};

HostTensor source(DType t) {
  HostTensor f64(DType::F64, {int64_t(std::size(kValues))});
  std::memcpy(f64.bytes.data(), kValues, sizeof(kValues));
  return llvm::cantFail(castHostTensor(f64, t));
}

std::vector<uint8_t> kernelCast(const HostTensor &in, DType to) {
  HostTensor out(to, in.shape);
  int64_t n = in.numElements();
  dispatchAll(in.dtype, [&](auto from) {
    using From = decltype(from);
    dispatchAll(to, [&](auto target) {
      using To = decltype(target);
      cpu::castArray<From, To>(in.data<From>(), out.data<To>(), n);
    });
  });
  return out.bytes;
}
} // namespace

TEST(HostCast, EveryPairHasTheCpuCastKernelsBytes) {
  for (DType from : kStorable) {
    HostTensor in = source(from);
    for (DType to : kStorable) {
      auto got = castHostTensor(in, to);
      ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
      EXPECT_EQ(got->dtype, to);
      EXPECT_EQ(got->shape, in.shape);
      EXPECT_EQ(got->bytes, kernelCast(in, to))
          << dtypeName(from).str() << " -> " << dtypeName(to).str();
    }
  }
}

TEST(HostCast, HandWrittenValues) {
  HostTensor f(DType::F32, {6});
  float vals[] = {2.5f, -2.7f, NAN, 1e10f, 65520.0f, 0.0f};
  std::memcpy(f.bytes.data(), vals, sizeof(vals));
  HostTensor i = llvm::cantFail(castHostTensor(f, DType::I32));
  const int32_t *iv = i.data<int32_t>();
  // Truncation toward zero, NaN -> 0, saturation.
  EXPECT_EQ(iv[0], 2);
  EXPECT_EQ(iv[1], -2);
  EXPECT_EQ(iv[2], 0);
  EXPECT_EQ(iv[3], std::numeric_limits<int32_t>::max());
  HostTensor h = llvm::cantFail(castHostTensor(f, DType::F16));
  EXPECT_EQ(h.data<Half>()[0].bits, 0x4100); // 2.5
  EXPECT_EQ(h.data<Half>()[4].bits, 0x7c00); // 65520 rounds up to +inf
  HostTensor b = llvm::cantFail(castHostTensor(f, DType::Bool));
  EXPECT_EQ(std::vector<uint8_t>(b.bytes.begin(), b.bytes.end()),
            (std::vector<uint8_t>{1, 1, 1, 1, 1, 0})); // NaN is true
}

TEST(HostCast, UnstorableTargetIsOneError) {
  HostTensor f(DType::F32, {1});
  auto got = castHostTensor(f, DType::String);
  ASSERT_FALSE(bool(got));
  EXPECT_EQ(llvm::toString(got.takeError()), "cannot convert to element type str");
}
