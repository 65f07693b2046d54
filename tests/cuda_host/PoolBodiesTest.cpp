//===- PoolBodiesTest.cpp - The CUDA pooling kernels' math on the host ----===//
//
// The CUDA pooling launchers (runtime/cuda/PoolKernels.cu) run one thread
// per output (forward) or per input element (gradients, a gather where the
// CPU scatters). Here each kernel's per-thread work, the window bodies of
// Kernels/WindowBodies.h, is run on the host over every element, for a table
// of geometries resolved by the shape rule (pads, strides, dilations,
// ceil_mode, count_include_pad, 1-3 spatial axes), and compared with the CPU
// backend's kernels (tested against naive loops in tests/runtime/PoolTest
// and tests/training_ops): bit for bit where both sum in the same order
// (max, indices, LpPool, the gradients, 1-D and 3-D averages), within fp32 rounding
// for 2-D averages (the CPU's 2-D path sums rows first).
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Pool.h"
#include "mpc/Runtime/Cpu/TrainingOps.h"
#include "mpc/Runtime/Kernels/WindowBodies.h"
#include "mpc/Runtime/OpParams.h"
#include "../../runtime/ops/NodeGeometry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::kernels;

namespace {

struct PoolCase {
  const char *name;
  std::vector<int64_t> x, kernel, strides, pads, dilations;
  bool ceil;
};

const PoolCase kCases[] = {
    {"2d-overlap", {2, 3, 7, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},
    {"2d-stride-asym", {1, 2, 9, 8}, {3, 2}, {2, 2}, {0, 1, 1, 0}, {1, 1}, false},
    {"2d-ceil-pads", {1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
    {"2d-dilated-ceil", {1, 1, 10, 9}, {3, 2}, {2, 3}, {1, 0, 1, 2}, {2, 2}, true},
    {"1d", {2, 2, 17}, {4}, {3}, {2, 1}, {1}, true},
    {"3d", {1, 2, 5, 4, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0, 0, 1, 1}, {1, 1, 2}, false},
};

struct PoolBodies : ModelFixture {
  PoolGeometry geometry(const PoolCase &pc) {
    Node *n = g->createNode("MaxPool");
    n->name = pc.name;
    n->setAttr(Attribute::makeInts("kernel_shape", pc.kernel));
    n->setAttr(Attribute::makeInts("strides", pc.strides));
    n->setAttr(Attribute::makeInts("pads", pc.pads));
    n->setAttr(Attribute::makeInts("dilations", pc.dilations));
    n->setAttr(Attribute::makeInt("ceil_mode", pc.ceil));
    auto params = windowParamsOf(*n);
    EXPECT_TRUE(bool(params)) << (params ? "" : llvm::toString(params.takeError()));
    if (!params)
      return PoolGeometry();
    auto geo = shapes::poolGeometry(*n, *params, pc.x);
    EXPECT_TRUE(bool(geo)) << (geo ? "" : llvm::toString(geo.takeError()));
    return geo ? *geo : PoolGeometry();
  }
};

int64_t product(llvm::ArrayRef<int64_t> v) {
  int64_t p = 1;
  for (int64_t d : v)
    p *= d;
  return p;
}

/// Values on a coarse grid (many ties between window taps), as storage T.
template <typename T> std::vector<T> gridValues(size_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<T> v(n);
  for (T &e : v)
    e = store<T>(float(dist(rng)) * 0.5f);
  return v;
}

template <typename T> bool sameBits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T> void checkCase(const PoolGeometry &geo, const char *name) {
  SCOPED_TRACE(name);
  WindowShape w;
  ASSERT_TRUE(cpu::windowShapeOf(geo, w));
  int64_t planes = geo.batch * geo.channels;
  int64_t inSize = product(geo.inSpatial), outSize = product(geo.outSpatial);
  ASSERT_EQ(windowInSize(w), inSize);
  ASSERT_EQ(windowOutSize(w), outSize);
  std::mt19937 rng(17);
  std::vector<T> x = gridValues<T>(size_t(planes * inSize), rng);
  std::vector<T> dy = gridValues<T>(size_t(planes * outSize), rng);
  size_t rank = geo.inSpatial.size();

  // MaxPool with Indices (both storage orders) and AveragePool: one "thread"
  // per output, as windowPoolKernel.
  for (bool colMajor : {false, true}) {
    std::vector<T> cpuY(size_t(planes * outSize)), gpuY(cpuY.size());
    std::vector<int64_t> cpuIdx(cpuY.size()), gpuIdx(cpuY.size());
    cpu::maxPool<T>(geo, x.data(), cpuY.data(), cpuIdx.data(), colMajor);
    for (int64_t i = 0; i < planes * outSize; ++i) {
      int64_t p = i / outSize, arg;
      gpuY[size_t(i)] = store<T>(windowMax(w, x.data() + p * inSize, i % outSize, arg));
      gpuIdx[size_t(i)] = p * inSize + windowIndex(w, arg, colMajor);
    }
    EXPECT_TRUE(sameBits(cpuY, gpuY)) << "MaxPool";
    EXPECT_EQ(cpuIdx, gpuIdx) << "Indices, column-major " << colMajor;
  }
  for (bool includePad : {false, true}) {
    std::vector<T> cpuY(size_t(planes * outSize)), gpuY(cpuY.size());
    cpu::averagePool<T>(geo, includePad, x.data(), cpuY.data());
    for (int64_t i = 0; i < planes * outSize; ++i)
      gpuY[size_t(i)] = store<T>(
          windowAverage(w, x.data() + (i / outSize) * inSize, i % outSize, includePad));
    if (rank != 2) {
      EXPECT_TRUE(sameBits(cpuY, gpuY)) << "AveragePool, count_include_pad " << includePad;
    } else {
      for (size_t i = 0; i < cpuY.size(); ++i)
        EXPECT_NEAR(double(load(cpuY[i])), double(load(gpuY[i])),
                    1e-6 + 1e-2 * std::fabs(double(load(cpuY[i]))))
            << "AveragePool " << i;
    }
  }

  // LpPool of integer and real orders: one "thread" per output, as
  // windowLpPoolKernel; the CPU runs the same body, so the same bits.
  for (float order : {1.0f, 2.0f, 2.5f, 3.0f}) {
    std::vector<T> cpuY(size_t(planes * outSize)), gpuY(cpuY.size());
    cpu::lpPool<T>(geo, order, x.data(), cpuY.data());
    for (int64_t i = 0; i < planes * outSize; ++i)
      gpuY[size_t(i)] =
          store<T>(windowLpPool(w, x.data() + (i / outSize) * inSize, i % outSize, order));
    EXPECT_TRUE(sameBits(cpuY, gpuY)) << "LpPool, p " << order;
  }

  // The gradients: one "thread" per input element, as windowPoolGradKernel.
  std::vector<T> cpuDx(size_t(planes * inSize)), gpuDx(cpuDx.size());
  cpu::maxPoolGrad<T>(geo, dy.data(), x.data(), cpuDx.data());
  for (int64_t i = 0; i < planes * inSize; ++i) {
    int64_t p = i / inSize;
    gpuDx[size_t(i)] = store<T>(
        maxPoolGradAt(w, x.data() + p * inSize, dy.data() + p * outSize, i % inSize));
  }
  EXPECT_TRUE(sameBits(cpuDx, gpuDx)) << "MaxPoolGrad";
  for (bool includePad : {false, true}) {
    cpu::averagePoolGrad<T>(geo, includePad, dy.data(), cpuDx.data());
    for (int64_t i = 0; i < planes * inSize; ++i)
      gpuDx[size_t(i)] = store<T>(averagePoolGradAt(w, dy.data() + (i / inSize) * outSize,
                                                    i % inSize, includePad));
    EXPECT_TRUE(sameBits(cpuDx, gpuDx)) << "AveragePoolGrad, count_include_pad " << includePad;
  }
}

TEST_F(PoolBodies, MatchTheCpuKernelsF32) {
  for (const PoolCase &pc : kCases)
    checkCase<float>(geometry(pc), pc.name);
}

TEST_F(PoolBodies, MatchTheCpuKernelsF16AndBF16) {
  for (const PoolCase &pc : kCases) {
    checkCase<Half>(geometry(pc), pc.name);
    checkCase<BFloat16>(geometry(pc), pc.name);
  }
}

TEST_F(PoolBodies, NaNRules) {
  // MaxPool: a NaN tap makes the window NaN; MaxPoolGrad: a NaN never wins.
  PoolGeometry geo = geometry({"nan", {1, 1, 1, 4}, {1, 2}, {1, 2}, {0, 0, 0, 0}, {1, 1}, false});
  WindowShape w;
  ASSERT_TRUE(cpu::windowShapeOf(geo, w));
  float nan = std::nanf("");
  std::vector<float> x = {1.0f, nan, 3.0f, 2.0f}, dy = {10.0f, 20.0f};
  int64_t arg;
  EXPECT_TRUE(std::isnan(windowMax(w, x.data(), 0, arg)));
  EXPECT_EQ(arg, 1);
  EXPECT_EQ(windowMax(w, x.data(), 1, arg), 3.0f);
  EXPECT_EQ(arg, 2);
  EXPECT_EQ(windowGradArgmax(w, x.data(), 0), 0);
  EXPECT_EQ(maxPoolGradAt(w, x.data(), dy.data(), 0), 10.0f);
  EXPECT_EQ(maxPoolGradAt(w, x.data(), dy.data(), 1), 0.0f);
  EXPECT_EQ(maxPoolGradAt(w, x.data(), dy.data(), 2), 20.0f);
}

TEST_F(PoolBodies, OverFourAxesStayOnTheCpu) {
  PoolGeometry geo;
  geo.inSpatial = geo.outSpatial = geo.kernel = geo.strides = geo.dilations = {1, 1, 1, 1};
  geo.padsBegin = geo.padsEnd = {0, 0, 0, 0};
  WindowShape w;
  EXPECT_FALSE(cpu::windowShapeOf(geo, w));
}

} // namespace
