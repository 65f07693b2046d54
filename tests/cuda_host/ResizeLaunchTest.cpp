//===- ResizeLaunchTest.cpp - The CUDA Resize launcher on the host --------===//
//
// The CUDA Resize launcher (runtime/cuda/ImageOps.cpp, ImageKernels.cu) runs
// planResizePasses's passes, each reading X or a workspace buffer and
// writing a buffer or Y as resizePassIO says, one thread per output element
// computing resizePassValue (ImagePlan.h). Here that chain runs on the host,
// element by element, and is compared bit for bit with the CPU backend's
// Resize kernel (tested against the ONNX definition in
// tests/runtime/ImageTest.cpp and against onnxruntime in
// tests/runtime_exec/test_attribute_defaults.py): both take the same taps in
// the same order and sum them in fp32 (f64 has no CUDA row).
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/ImagePlan.h"
#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/OpParams.h"
#include "../../runtime/ops/NodeGeometry.h"
#include <gtest/gtest.h>
#include <cstring>
#include <random>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

struct LaunchCase {
  const char *name;
  std::vector<int64_t> x;
  std::vector<float> scales;
  const char *mode, *coord;
  bool antialias = false, excludeOutside = false;
};

const LaunchCase kCases[] = {
    {"linear-2-axes", {2, 3, 5, 7}, {1, 1, 1.6f, 0.5f}, "linear", "half_pixel"},
    {"cubic-3-axes", {2, 4, 5, 6}, {1, 1.5f, 2, 0.75f}, "cubic", "asymmetric"},
    {"nearest-4-axes", {3, 2, 5, 4}, {2, 0.5f, 1.4f, 2.5f}, "nearest", "half_pixel"},
    {"antialias", {1, 2, 11, 13}, {1, 1, 0.4f, 0.3f}, "linear", "pytorch_half_pixel", true},
    {"exclude-outside", {1, 1, 6, 6}, {1, 1, 1.5f, 0.7f}, "cubic", "half_pixel", false, true},
    {"one-axis", {2, 3, 1, 1500}, {1, 1, 1, 1.3f}, "linear", "align_corners"},
};

struct ResizeLaunch : ModelFixture {
  template <typename T> void check(const LaunchCase &lc, DType dt) {
    m.opsets[0].version = 19;
    Node *n = g->createNode("Resize");
    n->name = lc.name;
    n->setAttr(Attribute::makeString("mode", lc.mode));
    n->setAttr(Attribute::makeString("coordinate_transformation_mode", lc.coord));
    n->setAttr(Attribute::makeInt("antialias", lc.antialias));
    n->setAttr(Attribute::makeInt("exclude_outside", lc.excludeOutside));
    auto params = resizeParamsOf(*n);
    ASSERT_TRUE(bool(params));
    shapes::resizing::ResizeOperands ops;
    ops.scales.assign(lc.scales.begin(), lc.scales.end());
    auto plan = shapes::resizing::planResize(*n, *params, lc.x, ops);
    ASSERT_TRUE(bool(plan));

    std::mt19937 rng(21);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    int64_t inCount = 1, outCount = 1;
    for (size_t d = 0; d < lc.x.size(); ++d) {
      inCount *= lc.x[d];
      outCount *= plan->outShape[d];
    }
    std::vector<T> x(static_cast<size_t>(inCount)), cpu(static_cast<size_t>(outCount)),
        gpu(static_cast<size_t>(outCount));
    for (T &v : x)
      v = T(dist(rng));

    // The CPU backend's kernel.
    KernelCall call;
    call.node = n;
    call.params = &*params;
    TensorRef xr, roi, scales, y;
    xr.dtype = dt;
    xr.shape.assign(lc.x.begin(), lc.x.end());
    xr.data = x.data();
    std::vector<float> scaleData = lc.scales;
    scales.dtype = DType::F32;
    scales.shape = {int64_t(scaleData.size())};
    scales.data = scaleData.data();
    y.dtype = dt;
    y.shape.assign(plan->outShape.begin(), plan->outShape.end());
    y.data = cpu.data();
    call.inputs = {xr, roi, scales};
    call.outputs = {y};
    HostKernelFn run = cpuHostKernel(*n);
    ASSERT_NE(run, nullptr);
    ASSERT_FALSE(bool(run(call)));

    // The launcher's passes, element by element.
    std::vector<kernels::ResizeAxis> axes;
    for (size_t d = 0; d < lc.x.size(); ++d)
      axes.push_back(shapes::resizing::resizeAxisOf(*params, *plan, lc.x, d));
    ResizePasses passes = planResizePasses(lc.x, axes);
    ASSERT_FALSE(passes.passes.empty());
    std::vector<float> buffers[2] = {std::vector<float>(size_t(passes.bufferElements)),
                                     std::vector<float>(size_t(passes.bufferElements))};
    for (size_t i = 0; i < passes.passes.size(); ++i) {
      const ResizePass &p = passes.passes[i];
      ResizePassIO io = resizePassIO(i, passes.passes.size());
      ASSERT_TRUE(io.out < 0 || p.outElements() <= passes.bufferElements);
      for (int64_t e = 0; e < p.outElements(); ++e) {
        float v = io.in < 0 ? resizePassValue<float>(p, x.data(), e, 0.0f)
                            : resizePassValue<float>(p, buffers[io.in].data(), e, 0.0f);
        if (io.out < 0)
          gpu[size_t(e)] = kernels::store<T>(v);
        else
          buffers[io.out][size_t(e)] = v;
      }
    }
    EXPECT_EQ(std::memcmp(cpu.data(), gpu.data(), cpu.size() * sizeof(T)), 0)
        << lc.name << " " << dtypeName(dt).str();
  }
};

TEST_F(ResizeLaunch, PassesAreTheCpuKernelBitForBit) {
  for (const LaunchCase &lc : kCases) {
    SCOPED_TRACE(lc.name);
    check<float>(lc, DType::F32);
    check<Half>(lc, DType::F16);
    check<BFloat16>(lc, DType::BF16);
  }
}

TEST(ResizePassIO, PassesAlternateBetweenTheBuffers) {
  ResizePassIO one = resizePassIO(0, 1);
  EXPECT_EQ(one.in, -1);
  EXPECT_EQ(one.out, -1);
  // X -> 0 -> 1 -> 0 -> Y.
  int want[4][2] = {{-1, 0}, {0, 1}, {1, 0}, {0, -1}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(resizePassIO(i, 4).in, want[i][0]);
    EXPECT_EQ(resizePassIO(i, 4).out, want[i][1]);
  }
}

} // namespace
