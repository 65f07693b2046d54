//===- ExecutorTest.cpp - Executor unit cases on the CPU backend ------------===//
//
// Small models in mpc's text form: results against hand-computed values,
// the memory plan against the checker, folding of shape computations,
// re-planning for new input shapes, inputs with defaults, sequence and
// optional values, SequenceMap, Loop bodies with value-dependent shapes,
// Scan-8 and the error messages.
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

TensorRef refOf(std::vector<float> &v) {
  TensorRef r;
  r.dtype = DType::F32;
  r.shape = {int64_t(v.size())};
  r.data = v.data();
  return r;
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

// The painting asks about the node with its fp32 operands in the 16-bit
// type: Where's row is keyed by its bool condition and ConstantOfShape's by
// its int64 shape, and both still run in fp16 (Det, with no kernel, is in
// tests/tools/test_tools.py: the executor refuses to load it).
TEST(Executor, CpuCapsAskTheTypeDeterminingOperand) {
  auto f = load(R"(
graph @g(%c: bool[2], %x: f32[2], %s: i64[1]) -> (%y: f32[2], %z: f32[2]) {
  %y = Where(%c, %x, %x) : f32[2]
  %z = ConstantOfShape(%s) {value = dense<f32[1]: [1]>} : f32[2]
  return %y, %z
})");
  ASSERT_TRUE(f);
  CpuCaps caps;
  auto it = f->model->graph->nodes().begin();
  const Node &where = *it++;
  const Node &fill = *it;
  EXPECT_TRUE(caps.supportsLowPrecision(where, DType::F16));
  EXPECT_TRUE(caps.supportsLowPrecision(fill, DType::BF16));
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

TEST(Executor, UnboundInputDefaultIsAPlanTimeConstant) {
  // IR 3 style: %shape and %fill are inputs with defaults. Unbound, they are
  // known while planning (Reshape's target, ConstantOfShape's shape); bound,
  // they are inputs as any other.
  auto f = load(R"(
graph @g(%x: f32[2,6], %shape: i64[2], %fill: i64[1]) -> (%y: f32[3,4], %z: f32[2]) {
  init %shape: i64[2] = [3, 4]
  init %fill: i64[1] = [2]
  %y = Reshape(%x, %shape) : f32[3,4]
  %z = ConstantOfShape(%fill) {value = dense<f32[1]: [1.5]>} : f32[2]
  return %y, %z
})");
  ASSERT_TRUE(f);
  HostTensor x(DType::F32, {2, 6});
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.data<float>()[i] = float(i);
  auto out = f->exec->run({{"x", x}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_FALSE(f->exec->isDynamic());
  EXPECT_EQ((*out)[0].tensor.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ((*out)[0].tensor.bytes, x.bytes);
  EXPECT_EQ((*out)[1].tensor.shape, (std::vector<int64_t>{2}));
  EXPECT_FLOAT_EQ((*out)[1].tensor.data<float>()[1], 1.5f);
  // ConstantOfShape reads only the default: folded while planning.
  EXPECT_EQ(f->exec->numFoldedNodes(), 1u);
  EXPECT_EQ(checkMemoryPlan(f->exec->bufferRequests(), f->exec->memoryPlan()), "");

  // Bound by the caller: a plain input again (and a re-plan).
  HostTensor shape(DType::I64, {2});
  shape.data<int64_t>()[0] = 4;
  shape.data<int64_t>()[1] = 3;
  std::string error;
  auto bound = f->exec->run({{"x", x}, {"shape", shape}});
  if (bound) {
    EXPECT_EQ((*bound)[0].tensor.shape, (std::vector<int64_t>{4, 3}));
  } else {
    // A bound shape operand is not known before running (static mode).
    error = llvm::toString(bound.takeError());
    EXPECT_NE(error.find("must be known before running"), std::string::npos) << error;
  }
  // Unbound again: back to the default.
  auto again = f->exec->run({{"x", x}});
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ((*again)[0].tensor.shape, (std::vector<int64_t>{3, 4}));
}

TEST(Executor, SequenceOpsRunInDynamicMode) {
  auto f = load(R"(
graph @g(%x: i32[4,2], %one: i64[])
    -> (%n: i64[], %at: i32[1,2], %cat: i32[5,2], %st: i32[1,2,2], %m: i64[]) {
  init %minus1: i64[] = [-1]
  %s = SplitToSequence(%x) {axis = 0} : seq<i32>
  %n = SequenceLength(%s) : i64[]
  %at = SequenceAt(%s, %minus1) : i32[1,2]
  %s2 = SequenceInsert(%s, %at, %one) : seq<i32>
  %cat = ConcatFromSequence(%s2) {axis = 0} : i32[5,2]
  %s3 = SequenceErase(%s2) : seq<i32>
  %s4 = SequenceErase(%s3, %one) : seq<i32>
  %s5 = SequenceErase(%s4, %one) : seq<i32>
  %st = ConcatFromSequence(%s5) {axis = 1, new_axis = 1} : i32[1,2,2]
  %e = SequenceEmpty() {dtype = i64} : seq<i64>
  %c = SequenceConstruct(%n, %n) : seq<i64>
  %e2 = SequenceInsert(%e, %n) : seq<i64>
  %m = SequenceLength(%e2) : i64[]
  return %n, %at, %cat, %st, %m
})");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->exec->isDynamic());
  HostTensor x(DType::I32, {4, 2});
  for (int i = 0; i < 8; ++i)
    x.data<int32_t>()[i] = i;
  HostTensor one(DType::I64, {});
  *one.data<int64_t>() = 1;
  auto out = f->exec->run({{"x", x}, {"one", one}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(*(*out)[0].tensor.data<int64_t>(), 4);
  // Last row.
  EXPECT_EQ((*out)[1].tensor.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ((*out)[1].tensor.data<int32_t>()[0], 6);
  // Rows 0, 3, 1, 2, 3 (the last row inserted at position 1).
  const HostTensor &cat = (*out)[2].tensor;
  EXPECT_EQ(cat.shape, (std::vector<int64_t>{5, 2}));
  std::vector<int32_t> want = {0, 1, 6, 7, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(std::vector<int32_t>(cat.data<int32_t>(), cat.data<int32_t>() + 10), want);
  // Erase last, then position 1 twice: rows 0 and 2, stacked on a new axis 1.
  const HostTensor &st = (*out)[3].tensor;
  EXPECT_EQ(st.shape, (std::vector<int64_t>{1, 2, 2}));
  std::vector<int32_t> wantSt = {0, 1, 4, 5};
  EXPECT_EQ(std::vector<int32_t>(st.data<int32_t>(), st.data<int32_t>() + 4), wantSt);
  EXPECT_EQ(*(*out)[4].tensor.data<int64_t>(), 1);

  // A position out of range is an error naming the node.
  *one.data<int64_t>() = 9;
  std::string error = runError(*f, {{"x", x}, {"one", one}});
  EXPECT_NE(error.find("SequenceInsert"), std::string::npos) << error;
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
}

TEST(Executor, SequencesCrossLoopBodies) {
  // The loop state is a sequence: each trip appends the captured %x scaled
  // by the trip count; the sequence comes back out of the body and the main
  // graph concatenates it.
  auto f = load(R"(
graph @g(%n: i64[], %c: bool[], %x: f32[2]) -> (%y: f32[6], %len: i64[]) {
  %s0 = SequenceEmpty() {dtype = f32} : seq<f32>
  %sf = Loop(%n, %c, %s0) {
    body = graph @body(%i: i64[], %ci: bool[], %s: seq<f32>) -> (%co: bool[], %sn: seq<f32>) {
      %co = Identity(%ci)
      %fi = Cast(%i) {to = f32} : f32[]
      %t = Mul(%x, %fi) : f32[2]
      %sn = SequenceInsert(%s, %t) : seq<f32>
      return %co, %sn
    }
  } : seq<f32>
  %y = ConcatFromSequence(%sf) {axis = 0} : f32[6]
  %len = SequenceLength(%sf) : i64[]
  return %y, %len
})");
  ASSERT_TRUE(f);
  HostTensor n(DType::I64, {});
  *n.data<int64_t>() = 3;
  HostTensor c(DType::Bool, {});
  *c.data<bool>() = true;
  auto out = f->exec->run({{"n", n}, {"c", c}, {"x", floats({2}, {1, 10})}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  const HostTensor &y = (*out)[0].tensor;
  ASSERT_EQ(y.shape, (std::vector<int64_t>{6}));
  std::vector<float> want = {0, 0, 1, 10, 2, 20};
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 6), want);
  EXPECT_EQ(*(*out)[1].tensor.data<int64_t>(), 3);

  // A sequence may not leave the main graph.
  auto g = load(R"(
graph @g(%x: f32[2]) -> (%s: seq<f32>) {
  %s = SequenceConstruct(%x, %x) : seq<f32>
  return %s
})");
  ASSERT_TRUE(g);
  std::string error = runError(*g, {{"x", floats({2}, {1, 2})}});
  EXPECT_NE(error.find("graph output 's' is a sequence"), std::string::npos) << error;
}

TEST(Executor, LoopBodyWithValueDependentShapesRunsInDynamicMode) {
  // The body slices %x at [i, i + k) (k captured): no single plan fits
  // every trip, so the body falls back to dynamic mode; each slice is
  // multiplied by %w (a [1] slice broadcasts, a [3] one is an error).
  auto f = load(R"(
graph @g(%n: i64[], %c: bool[], %x: f32[6], %k: i64[1]) -> (%y: f32[1], %ys: f32[?,1]) {
  init %y0: f32[1] = [0]
  %y, %ys = Loop(%n, %c, %y0) {
    body = graph @body(%i: i64[], %ci: bool[], %acc: f32[1]) -> (%co: bool[], %acc2: f32[1], %sc: f32[1]) {
      init %one: i64[1] = [1]
      init %w: f32[2] = [1, 1]
      %co = Identity(%ci) : bool[]
      %lo = Reshape(%i, %one) : i64[1]
      %hi = Add(%lo, %k) : i64[1]
      %s = Slice(%x, %lo, %hi) : f32[?]
      %m = Mul(%s, %w) : f32[2]
      %r = ReduceSum(%m) {keepdims = 1} : f32[1]
      %acc2 = Add(%acc, %r) : f32[1]
      %sc = Identity(%acc2) : f32[1]
      return %co, %acc2, %sc
    }
  } : f32[1], f32[?,1]
  return %y, %ys
})");
  ASSERT_TRUE(f);
  auto scalar = [](int64_t v) {
    HostTensor t(DType::I64, {});
    *t.data<int64_t>() = v;
    return t;
  };
  HostTensor c(DType::Bool, {});
  *c.data<bool>() = true;
  HostTensor k(DType::I64, {1});
  *k.data<int64_t>() = 2;
  HostTensor x = floats({6}, {1, 2, 3, 4, 5, 6});
  // Slices of length 2, the last one of length 1 (clamped): x[i] + x[i+1],
  // then 2 * x[5]; the running sums come out per trip.
  auto out = f->exec->run({{"n", scalar(6)}, {"c", c}, {"x", x}, {"k", k}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  const HostTensor &ys = (*out)[1].tensor;
  ASSERT_EQ(ys.shape, (std::vector<int64_t>{6, 1}));
  std::vector<float> want = {3, 8, 15, 24, 35, 47};
  EXPECT_EQ(std::vector<float>(ys.data<float>(), ys.data<float>() + 6), want);
  EXPECT_EQ((*out)[0].tensor.data<float>()[0], 47);

  // Fewer trips, shorter slices (broadcast by %w): the body is shaped anew.
  *k.data<int64_t>() = 1;
  auto again = f->exec->run({{"n", scalar(3)}, {"c", c}, {"x", x}, {"k", k}});
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  const HostTensor &ys2 = (*again)[1].tensor;
  ASSERT_EQ(ys2.shape, (std::vector<int64_t>{3, 1}));
  std::vector<float> want2 = {2, 6, 12};
  EXPECT_EQ(std::vector<float>(ys2.data<float>(), ys2.data<float>() + 3), want2);

  // A shape error of the model is still one, naming the body's node.
  *k.data<int64_t>() = 3;
  std::string error = runError(*f, {{"n", scalar(2)}, {"c", c}, {"x", x}, {"k", k}});
  EXPECT_NE(error.find("(Mul)"), std::string::npos) << error;

  // The main graph falls back too when a shape operand is one of its inputs
  // (onnx's own tests give Reduce's axes and TopK's K so): each run shapes
  // the nodes with the values given.
  auto g = load(R"(
graph @g(%x: f32[6], %lo: i64[1], %hi: i64[1]) -> (%s: f32[?]) {
  %s = Slice(%x, %lo, %hi) : f32[?]
  return %s
})");
  ASSERT_TRUE(g);
  HostTensor lo(DType::I64, {1}), hi(DType::I64, {1});
  HostTensor six = floats({6}, {10, 11, 12, 13, 14, 15});
  *lo.data<int64_t>() = 1;
  *hi.data<int64_t>() = 3;
  EXPECT_FALSE(g->exec->isDynamic());
  auto sliced = g->exec->run({{"x", six}, {"lo", lo}, {"hi", hi}});
  ASSERT_TRUE(bool(sliced)) << llvm::toString(sliced.takeError());
  EXPECT_TRUE(g->exec->isDynamic());
  const HostTensor &s1 = (*sliced)[0].tensor;
  ASSERT_EQ(s1.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(std::vector<float>(s1.data<float>(), s1.data<float>() + 2),
            (std::vector<float>{11, 12}));
  *hi.data<int64_t>() = 6;
  auto longer = g->exec->run({{"x", six}, {"lo", lo}, {"hi", hi}});
  ASSERT_TRUE(bool(longer)) << llvm::toString(longer.takeError());
  EXPECT_EQ((*longer)[0].tensor.shape, (std::vector<int64_t>{5}));

  // Not when the caller bound a buffer (dynamic mode reads none): the error
  // stands, as does any other shape error with unknown operands.
  auto h = load(R"(
graph @g(%x: f32[6], %lo: i64[1], %hi: i64[1]) -> (%s: f32[?]) {
  %s = Slice(%x, %lo, %hi) : f32[?]
  return %s
})");
  ASSERT_TRUE(h);
  std::vector<float> xs(6, 1.0f);
  ASSERT_FALSE(bool(h->exec->bindInput("x", refOf(xs))));
  error = runError(*h, {{"lo", lo}, {"hi", hi}});
  EXPECT_NE(error.find("starts must be known before running"), std::string::npos)
      << error;
  EXPECT_FALSE(h->exec->isDynamic());
  auto bad = load(R"(
graph @g(%x: f32[2,3], %y: f32[4,5], %lo: i64[1], %hi: i64[1]) -> (%s: f32[?], %m: f32[?,?]) {
  %m = MatMul(%x, %y) : f32[?,?]
  %s = Slice(%m, %lo, %hi) : f32[?]
  return %s, %m
})");
  ASSERT_TRUE(bad);
  error = runError(*bad, {{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})},
                          {"y", HostTensor(DType::F32, {4, 5})}, {"lo", lo}, {"hi", hi}});
  EXPECT_NE(error.find("(MatMul)"), std::string::npos) << error;
  EXPECT_FALSE(bad->exec->isDynamic());
}

TEST(Executor, Scan8RunsEachBatchEntryForItsLength) {
  // Scan-8: batch axis 0, scan axis 1, lengths per batch entry; the second
  // scan input (the same tensor) is read backwards within each length.
  auto f = load(R"(
opset ai.onnx 8
graph @g(%lens: i64[2], %s0: f32[2,1], %xs: f32[2,3,1]) -> (%sf: f32[2,1], %o: f32[2,3,1]) {
  %sf, %o = Scan(%lens, %s0, %xs, %xs) {
    body = graph @body(%s: f32[1], %fwd: f32[1], %rev: f32[1]) -> (%s2: f32[1], %e: f32[1]) {
      init %ten: f32[] = [10]
      %t = Mul(%s, %ten) : f32[1]
      %u = Add(%t, %fwd) : f32[1]
      %s2 = Sub(%u, %rev) : f32[1]
      %e = Identity(%rev) : f32[1]
      return %s2, %e
    },
    directions = [0, 1],
    num_scan_inputs = 2
  } : f32[2,1], f32[2,3,1]
  return %sf, %o
})");
  ASSERT_TRUE(f);
  HostTensor lens(DType::I64, {2});
  lens.data<int64_t>()[0] = 3;
  lens.data<int64_t>()[1] = 2;
  HostTensor s0 = floats({2, 1}, {0, 1});
  HostTensor xs = floats({2, 3, 1}, {1, 2, 3, 4, 5, 6});
  auto out = f->exec->run({{"lens", lens}, {"s0", s0}, {"xs", xs}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  // Entry 0: s = 10s + x[t] - x[2-t]: 0 + 1 - 3 = -2, -20 + 2 - 2 = -20,
  // -200 + 3 - 1 = -198. Entry 1 (length 2): 10 + 4 - 5 = 9, 90 + 5 - 4 = 91.
  const HostTensor &sf = (*out)[0].tensor;
  ASSERT_EQ(sf.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(sf.data<float>()[0], -198);
  EXPECT_EQ(sf.data<float>()[1], 91);
  // The reversed elements; entry 1's third one is padding (zeros).
  const HostTensor &o = (*out)[1].tensor;
  ASSERT_EQ(o.shape, (std::vector<int64_t>{2, 3, 1}));
  std::vector<float> want = {3, 2, 1, 5, 4, 0};
  EXPECT_EQ(std::vector<float>(o.data<float>(), o.data<float>() + 6), want);

  lens.data<int64_t>()[1] = 4;
  std::string error = runError(*f, {{"lens", lens}, {"s0", s0}, {"xs", xs}});
  EXPECT_NE(error.find("sequence_lens[1] is 4; the maximum is 3"), std::string::npos) << error;
}

TEST(Executor, IfBranchWithCapturedSliceBoundsRunsInDynamicMode) {
  // The bounds are main-graph inputs the branch captures: unknown while the
  // branch is planned, so it falls back like a Loop body.
  auto f = load(R"(
graph @g(%c: bool[], %x: f32[6], %lo: i64[1], %hi: i64[1]) -> (%y: f32[?]) {
  %y = If(%c) {
    else_branch = graph @e() -> (%n: f32[6]) {
      %n = Neg(%x) : f32[6]
      return %n
    },
    then_branch = graph @t() -> (%s: f32[?]) {
      %s = Slice(%x, %lo, %hi) : f32[?]
      return %s
    }
  } : f32[?]
  return %y
})");
  ASSERT_TRUE(f);
  HostTensor c(DType::Bool, {});
  *c.data<bool>() = true;
  HostTensor lo(DType::I64, {1}), hi(DType::I64, {1});
  *lo.data<int64_t>() = 1;
  *hi.data<int64_t>() = 4;
  HostTensor x = floats({6}, {1, 2, 3, 4, 5, 6});
  auto out = f->exec->run({{"c", c}, {"x", x}, {"lo", lo}, {"hi", hi}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  const HostTensor &y = (*out)[0].tensor;
  ASSERT_EQ(y.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 3),
            (std::vector<float>{2, 3, 4}));
  *hi.data<int64_t>() = 2;
  auto again = f->exec->run({{"c", c}, {"x", x}, {"lo", lo}, {"hi", hi}});
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  ASSERT_EQ((*again)[0].tensor.shape, (std::vector<int64_t>{1}));
  EXPECT_EQ((*again)[0].tensor.data<float>()[0], 2);
}

TEST(Executor, OptionalsCrossRunAndIfBodies) {
  // %o is an optional tensor input: HasElement picks the If branch, the
  // then-branch reads the captured optional; %w wraps %x, %e is empty.
  auto f = load(R"(
graph @g(%o: opt<f32>, %x: f32[2]) -> (%has: bool[], %y: f32[2], %w: opt<f32>, %same: opt<f32>) {
  %has = OptionalHasElement(%o) : bool[]
  %w = Optional(%x) : opt<f32>
  %same = Identity(%o) : opt<f32>
  %y = If(%has) {
    else_branch = graph @e() -> (%b: f32[2]) {
      %b = Neg(%x) : f32[2]
      return %b
    },
    then_branch = graph @t() -> (%a: f32[2]) {
      %v = OptionalGetElement(%o) : f32[2]
      %a = Add(%v, %x) : f32[2]
      return %a
    }
  } : f32[2]
  return %has, %y, %w, %same
})");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->exec->isDynamic());
  std::vector<NamedTensor> in = {{"x", floats({2}, {1, 2})}};
  std::vector<std::optional<NamedSequence>> seqs;
  NamedSequence o;
  o.name = "o";
  o.elem = DType::F32;
  o.optional = true;
  o.items.push_back(floats({2}, {10, 20}));
  auto out = f->exec->run(in, {o}, seqs);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  ASSERT_EQ(seqs.size(), 4u);
  EXPECT_TRUE(*(*out)[0].tensor.data<bool>());
  EXPECT_EQ((*out)[1].tensor.data<float>()[0], 11);
  EXPECT_EQ((*out)[1].tensor.data<float>()[1], 22);
  ASSERT_TRUE(seqs[2] && seqs[2]->optional && seqs[2]->hasValue && !seqs[2]->ofSequence);
  EXPECT_EQ(seqs[2]->items.at(0).data<float>()[1], 2);
  ASSERT_TRUE(seqs[3] && seqs[3]->hasValue);
  EXPECT_EQ(seqs[3]->items.at(0).data<float>()[0], 10);

  // Empty: the else branch, and the identity is empty too.
  o.items.clear();
  o.hasValue = false;
  out = f->exec->run(in, {o}, seqs);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_FALSE(*(*out)[0].tensor.data<bool>());
  EXPECT_EQ((*out)[1].tensor.data<float>()[0], -1);
  ASSERT_TRUE(seqs[3] && seqs[3]->optional);
  EXPECT_FALSE(seqs[3]->hasValue);
  EXPECT_EQ(seqs[3]->elem, DType::F32);

  // A sequence is not an optional; an optional tensor holds one tensor.
  NamedSequence s{"o", DType::F32, {floats({2}, {1, 2})}};
  auto bad = f->exec->run(in, {s}, seqs);
  ASSERT_FALSE(bool(bad));
  std::string error = llvm::toString(bad.takeError());
  EXPECT_NE(error.find("input 'o' is an optional f32 tensor, not a sequence"), std::string::npos)
      << error;
  o.hasValue = true;
  o.items = {floats({2}, {1, 2}), floats({2}, {1, 2})};
  bad = f->exec->run(in, {o}, seqs);
  ASSERT_FALSE(bool(bad));
  error = llvm::toString(bad.takeError());
  EXPECT_NE(error.find("holds one tensor, not 2"), std::string::npos) << error;
}

TEST(Executor, SequenceMapRunsItsBodyPerElement) {
  // The body scales each element by the captured %k and adds the tensor
  // operand; elements differ in length, so does each result.
  auto f = load(R"(
graph @g(%x: f32[3], %b: f32[], %k: f32[]) -> (%n: i64[], %cat: f32[3]) {
  %s = SplitToSequence(%x) {axis = 0, keepdims = 1} : seq<f32>
  %m = SequenceMap(%s, %b) {
    body = graph @body(%e: f32[?], %c: f32[]) -> (%r: f32[?]) {
      %p = Mul(%e, %k) : f32[?]
      %r = Add(%p, %c) : f32[?]
      return %r
    }
  } : seq<f32>
  %n = SequenceLength(%m) : i64[]
  %cat = ConcatFromSequence(%m) {axis = 0} : f32[3]
  return %n, %cat
})");
  ASSERT_TRUE(f);
  HostTensor b(DType::F32, {}), k(DType::F32, {});
  *b.data<float>() = 0.5f;
  *k.data<float>() = 10;
  auto out = f->exec->run({{"x", floats({3}, {1, 2, 3})}, {"b", b}, {"k", k}});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(*(*out)[0].tensor.data<int64_t>(), 3);
  const HostTensor &cat = (*out)[1].tensor;
  std::vector<float> want = {10.5f, 20.5f, 30.5f};
  EXPECT_EQ(std::vector<float>(cat.data<float>(), cat.data<float>() + 3), want);
}

TEST(Executor, BoundBuffersAreReadAndWrittenInPlace) {
  auto f = load(R"(
graph @g(%x: f32[4], %s: f32[4]) -> (%y: f32[4], %n: f32[4], %x: f32[4]) {
  %n = Mul(%s, %x) : f32[4]
  %t = Add(%s, %x) : f32[4]
  %y = Add(%n, %t) : f32[4]
  return %y, %n, %x
})");
  ASSERT_TRUE(f);
  // A double buffer for s <- n, and a buffer for the passed-through x.
  std::vector<float> a = {1, 2, 3, 4}, b(4, -1), xs(4, 0);
  HostTensor x = floats({4}, {2, 2, 2, 2});
  ASSERT_FALSE(bool(f->exec->bindInput("s", refOf(a))));
  ASSERT_FALSE(bool(f->exec->bindOutput("n", refOf(b))));
  ASSERT_FALSE(bool(f->exec->bindOutput("x", refOf(xs))));
  for (int step = 0; step < 3; ++step) {
    auto out = f->exec->run({{"x", x}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    // Mul wrote the bound output; Add, the last reader of s, did not
    // compute in place over it.
    float scale = float(1 << (step + 1));
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(b[size_t(i)], float(i + 1) * scale);
      EXPECT_EQ(a[size_t(i)], float(i + 1) * scale / 2);
      EXPECT_EQ(xs[size_t(i)], 2.0f);
      EXPECT_EQ((*out)[0].tensor.data<float>()[i], 3 * a[size_t(i)] + 2);
    }
    EXPECT_EQ((*out)[1].tensor.byteSize(), 0u); // in its buffer
    EXPECT_EQ((*out)[2].tensor.byteSize(), 0u);
    // Apply s <- n by swapping the halves.
    std::swap(a, b);
    ASSERT_FALSE(bool(f->exec->bindInput("s", refOf(a))));
    ASSERT_FALSE(bool(f->exec->bindOutput("n", refOf(b))));
  }
  // Per run: x in (16 bytes) and y out; the passed-through x goes through
  // the host (16 each way); s and n not at all.
  const TransferStats &t = f->exec->transferStats();
  EXPECT_EQ(t.runs, 3u);
  EXPECT_EQ(t.hostToDevice, 3u * 32);
  EXPECT_EQ(t.deviceToHost, 3u * 32);
}

TEST(Executor, BindingErrorsNameTheValue) {
  auto f = load(R"(
graph @g(%x: f32[4], %s: f32[4]) -> (%n: f32[4]) {
  %n = Mul(%s, %x) : f32[4]
  return %n
})");
  ASSERT_TRUE(f);
  std::vector<float> five(5), four(4);
  auto msg = [](llvm::Error e) { return e ? llvm::toString(std::move(e)) : std::string(); };
  EXPECT_EQ(msg(f->exec->bindInput("t", refOf(four))),
            "cannot bind 't': it is not an input of the graph");
  EXPECT_EQ(msg(f->exec->bindOutput("s", refOf(four))),
            "cannot bind 's': it is not an output of the graph");
  EXPECT_EQ(msg(f->exec->bindInput("s", refOf(five))),
            "cannot bind input 's' (f32 [4]) to a buffer of f32 [5]");
  ASSERT_EQ(msg(f->exec->bindInput("s", refOf(four))), "");
  ASSERT_EQ(msg(f->exec->bindOutput("n", refOf(five))), "");
  HostTensor x = floats({4}, {1, 1, 1, 1});
  EXPECT_EQ(runError(*f, {{"x", x}}),
            "output 'n' is f32 [4], but the buffer bound to it is f32 [5]");
  EXPECT_EQ(runError(*f, {{"x", x}, {"s", x}}),
            "input 's' is bound to backend memory: it is not passed to run()");
}

TEST(Executor, GuardedUpdateIsComputedInTheBoundBuffer) {
  auto f = load(R"(
graph @g(%x: f32[4], %s: f32[4], %c: bool[]) -> (%n: f32[4]) {
  %t = Mul(%s, %x) : f32[4]
  %n = Where(%c, %s, %t) : f32[4]
  return %n
})");
  ASSERT_TRUE(f);
  std::vector<float> a = {1, 2, 3, 4}, b(4, 0);
  ASSERT_FALSE(bool(f->exec->bindInput("s", refOf(a))));
  ASSERT_FALSE(bool(f->exec->bindOutput("n", refOf(b))));
  for (bool skip : {false, true}) {
    HostTensor c(DType::Bool, {});
    c.data<bool>()[0] = skip;
    auto out = f->exec->run({{"x", floats({4}, {3, 3, 3, 3})}, {"c", c}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(b[size_t(i)], float(i + 1) * (skip ? 1 : 3));
    EXPECT_EQ(a, (std::vector<float>{1, 2, 3, 4}));
    // Where ran in place over Mul's result, which lives in the bound buffer:
    // the arena holds only x and c.
    EXPECT_EQ(f->exec->memoryStats().numBuffers, 2u);
    EXPECT_EQ(f->exec->memoryStats().numInPlace, 1u);
  }
}

// The trainer's in-place state update: a guarded update n = Where(c, s, t)
// written over s's own buffer. Where reads each element of s before it
// writes it, and no node reads s after Where: safe. Where must not run in
// place over t then (t's chain would be computed in s's buffer, over s,
// before Where reads it): with c true (a skipped step) s must stay s.
TEST(Executor, GuardedUpdateIsWrittenOverItsInput) {
  auto f = load(R"(
graph @g(%x: f32[4], %s: f32[4], %c: bool[]) -> (%n: f32[4]) {
  %x2 = Neg(%x) : f32[4]
  %t = Mul(%s, %x2) : f32[4]
  %n = Where(%c, %s, %t) : f32[4]
  return %n
})");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->exec->writeOverProblem("n", "s"), "");
  std::vector<float> a = {1, 2, 3, 4};
  ASSERT_FALSE(bool(f->exec->bindInput("s", refOf(a))));
  ASSERT_FALSE(bool(f->exec->bindOutputOver("n", "s")));
  std::vector<float> want = a;
  for (bool skip : {false, true, true, false}) {
    HostTensor c(DType::Bool, {});
    c.data<bool>()[0] = skip;
    auto out = f->exec->run({{"x", floats({4}, {-3, -3, -3, -3})}, {"c", c}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ((*out)[0].tensor.byteSize(), 0u); // in s's buffer
    if (!skip)
      for (float &v : want)
        v *= 3;
    EXPECT_EQ(a, want) << "skip " << skip;
    // Mul runs in place over x2 (its last use), in the arena: t's chain is
    // not moved into s's buffer. The arena holds x, x2 (and t) and c.
    EXPECT_EQ(f->exec->memoryStats().numBuffers, 3u);
    EXPECT_EQ(f->exec->memoryStats().numInPlace, 1u);
  }
  // Binding n elsewhere undoes it: s is read, n written apart.
  std::vector<float> b(4, 0);
  ASSERT_FALSE(bool(f->exec->bindOutput("n", refOf(b))));
  HostTensor c(DType::Bool, {});
  c.data<bool>()[0] = false;
  ASSERT_TRUE(bool(f->exec->run({{"x", floats({4}, {-2, -2, -2, -2})}, {"c", c}})));
  EXPECT_EQ(a, want);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(b[i], want[i] * 2);
}

// What may not be written over its input, each with its reason: a reader of
// the old value after the writer; a writer that reads the input as an
// operand it does not compute element by element (MatMul); an input that is
// also a graph output; names that are not there.
TEST(Executor, WritingOverAnInputIsRefusedWhereAReadFollows) {
  auto f = load(R"(
graph @g(%x: f32[2,2], %s: f32[2,2], %w: f32[2,2], %c: bool[]) -> (%n: f32[2,2], %late: f32[2,2], %m: f32[2,2], %w: f32[2,2], %k: f32[2,2]) {
  %t = Sub(%s, %x) : f32[2,2]
  %n = Where(%c, %s, %t) : f32[2,2] name="guard"
  %late = Mul(%s, %n) : f32[2,2] name="late"
  %m = MatMul(%x, %x) : f32[2,2] name="mm"
  %k = Add(%w, %x) : f32[2,2] name="addw"
  return %n, %late, %m, %w, %k
})");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->exec->writeOverProblem("n", "s"),
            "node 'late' (Mul) reads the input after node 'guard' (Where) writes it");
  EXPECT_EQ(f->exec->writeOverProblem("m", "x"),
            "node 'mm' (MatMul), which makes it, reads the input as operand 0, which it "
            "cannot write over");
  EXPECT_EQ(f->exec->writeOverProblem("k", "w"), "the input is also an output of the graph");
  EXPECT_EQ(f->exec->writeOverProblem("t", "s"), "it is not an output of the graph");
  EXPECT_EQ(f->exec->writeOverProblem("n", "q"), "the input is not an input of the graph");
  // Add reads x last, as an operand it may write over; not so Mul, which
  // MatMul's and Add's reads of x follow (the first is named).
  EXPECT_EQ(f->exec->writeOverProblem("k", "x"), "");
  EXPECT_EQ(f->exec->writeOverProblem("late", "x"),
            "node 'mm' (MatMul) reads the input after node 'late' (Mul) writes it");
  std::vector<float> a = {1, 2, 3, 4};
  TensorRef r{DType::F32, {2, 2}, a.data()};
  ASSERT_FALSE(bool(f->exec->bindInput("s", r)));
  llvm::Error e = f->exec->bindOutputOver("n", "s");
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(llvm::toString(std::move(e)),
            "cannot write output 'n' over input 's': node 'late' (Mul) reads the input after "
            "node 'guard' (Where) writes it");
}
