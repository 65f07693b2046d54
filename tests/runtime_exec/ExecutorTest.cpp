//===- ExecutorTest.cpp - Executor unit cases on the CPU backend ------------===//
//
// Small models in mpc's text form: results against hand-computed values,
// the memory plan against the checker, folding of shape computations,
// re-planning for new input shapes and the error messages.
//
//===----------------------------------------------------------------------===//
#include "mpc/IO/Onnx.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Text/Text.h"
#include "mpc/Verify/Verifier.h"
#include "gtest/gtest.h"

using namespace mpc;

namespace {
struct Fixture {
  std::unique_ptr<Model> model;
  CpuBackend backend;
  std::unique_ptr<Executor> exec;
};

std::unique_ptr<Fixture> load(llvm::StringRef text, std::string *error = nullptr) {
  auto f = std::make_unique<Fixture>();
  auto m = parseModelText(text, "test.mpc");
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  f->model = std::move(*m);
  if (llvm::Error e = verifyModel(*f->model)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  auto ex = Executor::create(*f->model, f->backend);
  if (!ex) {
    std::string msg = llvm::toString(ex.takeError());
    if (error)
      *error = msg;
    else
      ADD_FAILURE() << msg;
    return nullptr;
  }
  f->exec = std::move(*ex);
  return f;
}

HostTensor floats(std::vector<int64_t> shape, std::vector<float> v) {
  HostTensor t(DType::F32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

std::string runError(Fixture &f, std::vector<NamedTensor> in) {
  auto out = f.exec->run(in);
  if (out)
    return "";
  return llvm::toString(out.takeError());
}
} // namespace

TEST(Executor, GemmReluMatchesHandComputedValues) {
  auto f = load(R"(
graph @g(%x: f32[2,3]) -> (%y: f32[2,2]) {
  init %w: f32[3,2] = [1, 0, 0, 1, 1, 1]
  init %b: f32[2] = [0.5, -10]
  %m = MatMul(%x, %w) : f32[2,2]
  %a = Add(%m, %b) : f32[2,2]
  %y = Relu(%a) : f32[2,2]
  return %y
})");
  ASSERT_TRUE(f);
  auto out = f->exec->run({{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  ASSERT_EQ(out->size(), 1u);
  const HostTensor &y = (*out)[0].tensor;
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 2}));
  // x*w = [[4, 5], [10, 11]]; + b; relu.
  EXPECT_FLOAT_EQ(y.data<float>()[0], 4.5f);
  EXPECT_FLOAT_EQ(y.data<float>()[1], 0.0f);
  EXPECT_FLOAT_EQ(y.data<float>()[2], 10.5f);
  EXPECT_FLOAT_EQ(y.data<float>()[3], 1.0f);
  EXPECT_EQ(checkMemoryPlan(f->exec->bufferRequests(), f->exec->memoryPlan()), "");
}

TEST(Executor, ChainReusesArenaMemory) {
  std::string text = "graph @g(%x: f32[64,64]) -> (%r9: f32[64,64]) {\n"
                     "  init %one: f32[] = [1]\n"
                     "  %r0 = Relu(%x) : f32[64,64]\n";
  for (int i = 1; i < 10; ++i)
    text += "  %r" + std::to_string(i) + " = Sub(%r" + std::to_string(i - 1) +
            ", %one) : f32[64,64]\n";
  text += "  return %r9\n}\n";
  auto f = load(text);
  ASSERT_TRUE(f);
  HostTensor x(DType::F32, {64, 64});
  for (int i = 0; i < 64 * 64; ++i)
    x.data<float>()[i] = float(i % 7) - 3;
  auto out = f->exec->run({{"x", x}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  const MemoryStats &s = f->exec->memoryStats();
  EXPECT_EQ(s.noReuseSum, 11u * 64 * 64 * 4);
  // The subtractions run in place over Relu's output; x's copy and that
  // output are live together only at step 0.
  EXPECT_EQ(s.numInPlace, 9u);
  EXPECT_EQ(s.plannedPeak, 2u * 64 * 64 * 4);
  EXPECT_LE(s.lowerBound, s.plannedPeak);
  EXPECT_EQ(checkMemoryPlan(f->exec->bufferRequests(), f->exec->memoryPlan()), "");
  for (int i = 0; i < 64 * 64; ++i)
    ASSERT_FLOAT_EQ((*out)[0].tensor.data<float>()[i], std::max(x.data<float>()[i], 0.0f) - 9);
}

TEST(Executor, ShapeComputationIsFoldedWhilePlanning) {
  auto f = load(R"(
graph @g(%x: f32[batch,3,4]) -> (%y: f32[batch,12]) {
  init %zero: i64[1] = [0]
  init %rest: i64[1] = [-1]
  %s = Shape(%x) : i64[3]
  %b = Gather(%s, %zero) {axis = 0} : i64[1]
  %shape = Concat(%b, %rest) {axis = 0} : i64[2]
  %y = Reshape(%x, %shape) : f32[batch,12]
  return %y
})");
  ASSERT_TRUE(f);
  for (int64_t batch : {2, 5}) {
    HostTensor x(DType::F32, {batch, 3, 4});
    for (int64_t i = 0; i < x.numElements(); ++i)
      x.data<float>()[i] = float(i);
    auto out = f->exec->run({{"x", x}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ((*out)[0].tensor.shape, (std::vector<int64_t>{batch, 12}));
    EXPECT_EQ((*out)[0].tensor.bytes, x.bytes);
    EXPECT_EQ(f->exec->numFoldedNodes(), 3u);
  }
}

TEST(Executor, HalfPrecisionComputesInFloat) {
  auto f = load(R"(
graph @g(%x: f32[4]) -> (%y: f32[4]) {
  %h = Cast(%x) {to = f16} : f16[4]
  %s = Mul(%h, %h) : f16[4]
  %y = Cast(%s) {to = f32} : f32[4]
  return %y
})");
  ASSERT_TRUE(f);
  auto out = f->exec->run({{"x", floats({4}, {0.5f, -2.0f, 3.0f, 100.0f})}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  const float *y = (*out)[0].tensor.data<float>();
  EXPECT_FLOAT_EQ(y[0], 0.25f);
  EXPECT_FLOAT_EQ(y[1], 4.0f);
  EXPECT_FLOAT_EQ(y[2], 9.0f);
  EXPECT_FLOAT_EQ(y[3], 10000.0f);
}

TEST(Executor, UnsupportedOpIsOneErrorBeforeRunning) {
  std::string error;
  auto f = load(R"(
graph @g(%x: f32[3,3]) -> (%y: f32[]) {
  %y = Det(%x) : f32[] name="det0"
  return %y
})",
                &error);
  EXPECT_FALSE(f);
  EXPECT_NE(error.find("Det"), std::string::npos) << error;
  EXPECT_NE(error.find("ai.onnx"), std::string::npos) << error;
  EXPECT_NE(error.find("opset 17"), std::string::npos) << error;
  EXPECT_NE(error.find("det0"), std::string::npos) << error;
}

TEST(Executor, BadInputsNameTheInput) {
  auto f = load(R"(
graph @g(%x: f32[n,3], %z: f32[n,3]) -> (%y: f32[n,3]) {
  %y = Add(%x, %z) : f32[n,3]
  return %y
})");
  ASSERT_TRUE(f);
  HostTensor a(DType::F32, {2, 3}), b(DType::F32, {4, 3}), c(DType::F32, {2, 4});
  EXPECT_NE(runError(*f, {{"x", a}}).find("missing input 'z'"), std::string::npos);
  EXPECT_NE(runError(*f, {{"x", a}, {"z", b}}).find("dimension 'n'"), std::string::npos);
  EXPECT_NE(runError(*f, {{"x", a}, {"z", c}}).find("input 'z'"), std::string::npos);
  HostTensor d(DType::F64, {2, 3});
  EXPECT_NE(runError(*f, {{"x", a}, {"z", d}}).find("element type f64"), std::string::npos);
  EXPECT_NE(runError(*f, {{"x", a}, {"z", a}, {"w", a}}).find("'w'"), std::string::npos);
  EXPECT_EQ(runError(*f, {{"x", a}, {"z", a}}), "");
}

TEST(Executor, CpuCapsFollowTheTable) {
  auto f = load(R"(
graph @g(%x: f32[2,2]) -> (%y: f32[2,2]) {
  %y = MatMul(%x, %x) : f32[2,2]
  return %y
})");
  ASSERT_TRUE(f);
  CpuCaps caps;
  const Node &mm = f->model->graph->nodes().front();
  EXPECT_TRUE(caps.supportsLowPrecision(mm, DType::F16));
  EXPECT_TRUE(caps.supportsLowPrecision(mm, DType::BF16));
  EXPECT_FALSE(caps.supportsLowPrecision(mm, DType::I8));
  EXPECT_NE(findCpuKernel("LSTM", "", 17), nullptr);
  EXPECT_EQ(findCpuKernel("Det", "", 17), nullptr);
}

TEST(NpyIO, RoundTripsAndRejectsCorruptFiles) {
  HostTensor t = floats({2, 2}, {1, 2, 3, 4});
  std::string bytes = serializeNpy(t);
  auto back = parseNpy(bytes, "t.npy");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(back->shape, t.shape);
  EXPECT_EQ(back->bytes, t.bytes);
  auto bad = parseNpy(bytes.substr(0, bytes.size() - 1), "t.npy");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("t.npy"), std::string::npos);
}

TEST(Executor, ShippedModelsPlanWithoutOverlaps) {
  for (const char *name : {"mlp", "cnn", "transformer", "lstm"}) {
    SCOPED_TRACE(name);
    auto m = importOnnxFile(std::string(MPC_SOURCE_DIR) + "/models/" + name + ".onnx");
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    CpuBackend backend;
    auto ex = Executor::create(**m, backend);
    ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
    std::vector<NamedTensor> inputs;
    for (const Value *v : (*m)->graph->inputs()) {
      std::vector<int64_t> shape;
      for (const Dim &d : v->type.dims)
        shape.push_back(d.value);
      inputs.push_back({v->name(), HostTensor(v->type.elem, shape)});
    }
    auto out = (*ex)->run(inputs);
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    const MemoryStats &s = (*ex)->memoryStats();
    EXPECT_EQ(checkMemoryPlan((*ex)->bufferRequests(), (*ex)->memoryPlan()), "");
    EXPECT_LE(s.lowerBound, s.plannedPeak);
    EXPECT_LT(s.plannedPeak, s.noReuseSum);
    EXPECT_FALSE((*ex)->isDynamic());
  }
}
