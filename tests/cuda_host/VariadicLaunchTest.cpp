//===- VariadicLaunchTest.cpp - Variadic Max/Min's CUDA launch on the host ===//
//
// Max and Min with one or more than two operands run on CUDA as one kernel
// (runtime/cuda/BinaryKernels.cu, variadicKernel): per output element,
// kernels::naryFold folds the row's functor (the bytes makeOpBlob gives the
// launcher) over the operands of kernels::naryPlan. Here that per-thread work
// runs on the host for every element and is compared bit for bit with the
// CPU backend's kernel (a left-to-right fold of broadcast binary steps,
// tested against numpy in tests/runtime): same values, same NaN and
// signed-zero choices, for f32, f16, bf16, i32 and i64 and random broadcast
// shapes. Plus the table's decision: one to eight operands on CUDA, more on
// the CPU (Sum and Mean: any number, in runs).
//
//===----------------------------------------------------------------------===//
#include "ModelFixture.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/CudaKernelTable.h"
#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/CopyPlan.h"
#include "mpc/Runtime/OpRegistry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;

namespace {

using Shape = std::vector<int64_t>;

int64_t count(const Shape &s) { return kernels::numElements(s); }

/// Values with many ties, both zeros and NaNs (floats), so the fold's order
/// and the body's NaN rule decide bits.
template <typename T> T pick(std::mt19937 &rng) {
  int v = std::uniform_int_distribution<int>(-3, 3)(rng);
  if constexpr (std::is_integral<T>::value) {
    return T(v);
  } else {
    int special = std::uniform_int_distribution<int>(0, 9)(rng);
    if (special == 0)
      return T(std::numeric_limits<float>::quiet_NaN());
    if (special == 1)
      return T(-0.0f);
    return T(float(v) * 0.75f);
  }
}

struct VariadicLaunch : ModelFixture {
  /// `op` over operands of `shapes` (dtype dt, storage T): the CPU kernel's
  /// output and the launcher's per-element fold must match bit for bit.
  template <typename T>
  void check(const char *op, DType dt, const std::vector<Shape> &shapes, std::mt19937 &rng) {
    Node *n = g->createNode(op);
    n->name = std::string(op) + std::to_string(shapes.size());
    Shape out;
    for (size_t k = 0; k < shapes.size(); ++k) {
      n->addInput(g->addInput(n->name + "_x" + std::to_string(k), Type::tensor(dt, shapes[k])));
      llvm::SmallVector<int64_t, 6> next;
      ASSERT_TRUE(kernels::broadcastShapes(out, shapes[k], next));
      out.assign(next.begin(), next.end());
    }
    n->setOutput(0, n->name + "_y", Type::tensor(dt, out));
    std::vector<DType> dts(shapes.size(), dt);
    ASSERT_TRUE(cudaRuns(*n, dts)) << n->name;
    const CudaKernel *row = findCudaKernel(*n);
    ASSERT_NE(row, nullptr);
    ASSERT_TRUE(cudaVariadicRow(*row, shapes.size()) || shapes.size() == 2);

    std::vector<std::vector<T>> data;
    for (const Shape &s : shapes) {
      data.emplace_back(size_t(count(s)));
      for (T &v : data.back())
        v = pick<T>(rng);
    }
    size_t outN = size_t(count(out));
    std::vector<T> cpu(outN), gpu(outN);

    // The CPU backend's kernel, with the registry's parse of the node.
    const OpDef *def = findOp(*n);
    ASSERT_NE(def, nullptr);
    ParsedParams params = def->parse ? def->parse(*n) : ParsedParams(nullptr);
    ASSERT_TRUE(bool(params));
    KernelCall call;
    call.node = n;
    call.params = params->get();
    for (size_t k = 0; k < shapes.size(); ++k) {
      TensorRef r;
      r.dtype = dt;
      r.shape.assign(shapes[k].begin(), shapes[k].end());
      r.data = data[k].data();
      call.inputs.push_back(r);
    }
    TensorRef y;
    y.dtype = dt;
    y.shape.assign(out.begin(), out.end());
    y.data = cpu.data();
    call.outputs = {y};
    HostKernelFn run = cpuHostKernel(*n);
    ASSERT_NE(run, nullptr);
    ASSERT_FALSE(bool(run(call)));

    // The launcher: its plan, its functor bytes, one fold per element.
    kernels::NaryPlan plan;
    ASSERT_TRUE(kernels::naryPlan(shapes, out, plan));
    llvm::Expected<OpBlob> blob = makeOpBlob(*n, *row);
    ASSERT_TRUE(bool(blob));
    const T *ptr[kernels::kMaxNaryInputs] = {};
    for (size_t k = 0; k < shapes.size(); ++k)
      ptr[k] = data[k].data();
    auto emulate = [&](auto fn) {
      std::memcpy(static_cast<void *>(&fn), blob->bytes, sizeof(fn));
      for (int64_t i = 0; i < plan.numElements; ++i)
        gpu[size_t(i)] = kernels::naryFold(plan, ptr, i, fn);
    };
    if (std::string(op) == "Max")
      emulate(kernels::Max());
    else
      emulate(kernels::Min());
    EXPECT_EQ(std::memcmp(cpu.data(), gpu.data(), outN * sizeof(T)), 0)
        << op << " with " << shapes.size() << " operands";
  }

  template <typename T> void checkRandom(DType dt) {
    std::mt19937 rng(41 + unsigned(dt));
    for (const char *op : {"Max", "Min"})
      for (int trial = 0; trial < 40; ++trial) {
        // The output's shape, then each operand a suffix of it with some 1s.
        Shape full(size_t(std::uniform_int_distribution<int>(0, 4)(rng)));
        for (int64_t &d : full)
          d = std::uniform_int_distribution<int>(1, 4)(rng);
        size_t operands = size_t(trial % 8) + 1; // 1 to 8
        std::vector<Shape> shapes;
        for (size_t k = 0; k < operands; ++k) {
          size_t rank = std::uniform_int_distribution<size_t>(0, full.size())(rng);
          Shape s(full.end() - long(rank), full.end());
          for (int64_t &d : s)
            if (std::uniform_int_distribution<int>(0, 2)(rng) == 0)
              d = 1;
          shapes.push_back(s);
        }
        check<T>(op, dt, shapes, rng);
      }
  }
};

TEST_F(VariadicLaunch, FoldMatchesTheCpuKernelBitForBit) {
  checkRandom<float>(DType::F32);
  checkRandom<Half>(DType::F16);
  checkRandom<BFloat16>(DType::BF16);
  checkRandom<int32_t>(DType::I32);
  checkRandom<int64_t>(DType::I64);
}

TEST_F(VariadicLaunch, NaNAndSignedZeroFollowTheCpuOrder) {
  // Fixed operands whose result depends on the fold order: Max(+0, -0, x)
  // keeps the later zero, and a NaN anywhere wins.
  std::mt19937 rng(5);
  check<float>("Max", DType::F32, {{3}, {3}, {1}, {2, 3}}, rng);
  check<float>("Min", DType::F32, {{2, 1, 4}, {3, 1}, {4}}, rng);
  check<float>("Max", DType::F32, {{5}}, rng); // one operand: a copy
}

TEST_F(VariadicLaunch, TheTableTakesOneToEightOperandsAndSumAnyNumber) {
  // Whether the table puts `op` of k f16 operands on CUDA.
  auto onCuda = [&](const char *op, size_t k) {
    Node *nd = g->createNode(op);
    nd->name = std::string(op) + "_n" + std::to_string(k);
    for (size_t i = 0; i < k; ++i)
      nd->addInput(g->addInput(nd->name + std::to_string(i), Type::tensor(DType::F16, {2})));
    nd->setOutput(0, nd->name + "_y", Type::tensor(DType::F16, {2}));
    return cudaRuns(*nd, std::vector<DType>(k, DType::F16));
  };
  for (const char *op : {"Max", "Min"})
    for (size_t k : {1, 2, 3, 8, 9})
      EXPECT_EQ(onCuda(op, k), k <= 8) << op << " with " << k << " operands";
  // Sum and Mean take any number: past eight, runs of eight add to an
  // accumulator (DataOps.cpp; RuntimeDataTest's SumAndMeanOfManyOperandsRoundOnce).
  for (const char *op : {"Sum", "Mean"})
    for (size_t k : {1, 8, 9, 21})
      EXPECT_TRUE(onCuda(op, k)) << op << " with " << k << " operands";
  // Only Max and Min are variadic among the binary rows.
  Node *add = oneNode("Add", {DType::F32, DType::F32}, DType::F32, "add");
  const CudaKernel *addRow = findCudaKernel(*add);
  ASSERT_NE(addRow, nullptr);
  EXPECT_FALSE(cudaVariadicRow(*addRow, 3));
}

} // namespace
