//===- ShapesTest.cpp - The report's static shape estimator ----------------===//
//
// Shapes propagated through convolutions and pools (pads, strides, dilations,
// auto_pad, ceil_mode), shape computations folded into Reshape, broadcasting
// MatMul, indexing and layout ops with constant inputs, RNNs and Einsum, and
// what stays unknown. Models are written in mpc's text form without shapes on
// intermediate values, so every shape below comes from the estimator. The
// FLOP formulas on top of these shapes are checked through the report
// (test_tools.py).
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/ShapeEstimator.h"
#include "mpc/Text/Text.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace mpc;

namespace {

std::unique_ptr<Model> parse(llvm::StringRef text) {
  auto m = parseModelText(text, "shapes.mpc");
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

const Value *valueNamed(const Model &m, llvm::StringRef name) {
  for (const Value *v : m.graph->inputs())
    if (v->name() == name)
      return v;
  for (const Value *v : m.graph->initializers())
    if (v->name() == name)
      return v;
  for (const Node &n : m.graph->nodes())
    for (const Value *v : n.outputs())
      if (v && v->name() == name)
        return v;
  ADD_FAILURE() << "no value " << name.str();
  return nullptr;
}

const Node &producerOf(const Model &m, llvm::StringRef name) {
  return *valueNamed(m, name)->producer();
}

/// "[2,16,?]" or "?" (rank unknown).
std::string shapeOf(const ShapeEstimator &s, const Model &m, llvm::StringRef name) {
  const Value *v = valueNamed(m, name);
  if (!v)
    return "<none>";
  const ShapeInfo &sh = s.shape(v);
  if (!sh.rankKnown)
    return "?";
  std::string out = "[";
  for (size_t i = 0; i < sh.dims.size(); ++i)
    out += (i ? "," : "") + (sh.dims[i] < 0 ? std::string("?") : std::to_string(sh.dims[i]));
  return out + "]";
}

TEST(Shapes, ConvolutionsAndPools) {
  auto m = parse(
      R"(graph @cnn(%x: f32[2,3,32,32], %w: f32[16,3,3,3], %b: f32[16], %w2: f32[8,16,3,3], %w3: f32[8,8,3,3], %fc: f32[10,8]) -> (%y: f32) {
  %c = Conv(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [2, 2]}
  %c2 = Conv(%c, %w2) {auto_pad = "SAME_UPPER", strides = [2, 2]}
  %c3 = Conv(%c2, %w3) {auto_pad = "VALID", dilations = [2, 2]}
  %p = MaxPool(%c3) {ceil_mode = 1, kernel_shape = [3, 3], strides = [2, 2]}
  %a = AveragePool(%c2) {kernel_shape = [2, 2], pads = [0, 0, 1, 1], strides = [2, 2]}
  %g = GlobalAveragePool(%p)
  %f = Flatten(%g)
  %y = Gemm(%f, %fc) {transB = 1}
  return %y
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  EXPECT_EQ(shapeOf(s, *m, "c"), "[2,16,16,16]");
  EXPECT_EQ(shapeOf(s, *m, "c2"), "[2,8,8,8]");
  EXPECT_EQ(shapeOf(s, *m, "c3"), "[2,8,4,4]");
  EXPECT_EQ(shapeOf(s, *m, "p"), "[2,8,2,2]");
  EXPECT_EQ(shapeOf(s, *m, "a"), "[2,8,4,4]");
  EXPECT_EQ(shapeOf(s, *m, "g"), "[2,8,1,1]");
  EXPECT_EQ(shapeOf(s, *m, "f"), "[2,8]");
  EXPECT_EQ(shapeOf(s, *m, "y"), "[2,10]");
  EXPECT_TRUE(s.assumedSymbols().empty());
}

TEST(Shapes, ConvTransposeAndResize) {
  auto m = parse(R"(graph @up(%x: f32[1,8,5,5], %w: f32[8,4,3,3]) -> (%y: f32, %r: f32) {
  init %sc: f32[4] = [1, 1, 2, 2]
  %y = ConvTranspose(%x, %w) {output_padding = [1, 1], pads = [1, 1, 1, 1], strides = [2, 2]}
  %r = Resize(%x, _, %sc) {mode = "nearest"}
  return %y, %r
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  EXPECT_EQ(shapeOf(s, *m, "y"), "[1,4,10,10]");
  EXPECT_EQ(shapeOf(s, *m, "r"), "[1,8,10,10]");
}

TEST(Shapes, ShapeComputationFoldsIntoReshape) {
  auto m = parse(R"(graph @r(%x: f32[2,16,64]) -> (%y: f32) {
  init %i0: i64[] = [0]
  init %ax: i64[1] = [0]
  init %m1: i64[1] = [-1]
  init %tail: i64[2] = [4, 16]
  init %keep: i64[3] = [0, 0, -1]
  %s = Shape(%x)
  %b = Gather(%s, %i0) {axis = 0}
  %bu = Unsqueeze(%b, %ax)
  %shape = Concat(%bu, %m1, %tail) {axis = 0}
  %r = Reshape(%x, %shape)
  %t = Transpose(%r) {perm = [0, 2, 1, 3]}
  %z = Reshape(%t, %keep)
  %y = Softmax(%z) {axis = -1}
  return %y
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  const ConstValues *shape = s.constValues(valueNamed(*m, "shape"));
  ASSERT_NE(shape, nullptr);
  EXPECT_FALSE(shape->floating);
  EXPECT_EQ(shape->ints, (std::vector<int64_t>{2, -1, 4, 16}));
  EXPECT_EQ(shapeOf(s, *m, "r"), "[2,16,4,16]");
  EXPECT_EQ(shapeOf(s, *m, "t"), "[2,4,16,16]");
  EXPECT_EQ(shapeOf(s, *m, "z"), "[2,4,256]");
  EXPECT_EQ(shapeOf(s, *m, "y"), "[2,4,256]");
}

TEST(Shapes, MatMulBroadcasting) {
  auto m = parse(
      R"(graph @mm(%a: f32[2,1,8,16], %b: f32[3,16,4], %v: f32[16], %c: f32[3,1], %d: f32[4]) -> (%p: f32, %q: f32, %e: f32) {
  %p = MatMul(%a, %b)
  %q = MatMul(%v, %b)
  %e = Add(%c, %d)
  return %p, %q, %e
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  EXPECT_EQ(shapeOf(s, *m, "p"), "[2,3,8,4]");
  EXPECT_EQ(shapeOf(s, *m, "q"), "[3,4]");
  EXPECT_EQ(shapeOf(s, *m, "e"), "[3,4]");
}

TEST(Shapes, IndexingAndLayoutWithConstantInputs) {
  auto m = parse(R"(graph @s(%x: f32[1,6,10]) -> (%rm: f32, %rs: f32, %sl: f32, %e: f32, %tk: f32) {
  init %a0: i64[1] = [0]
  init %a03: i64[2] = [0, 3]
  init %st: i64[1] = [2]
  init %en: i64[1] = [-1]
  init %axs: i64[1] = [2]
  init %stp: i64[1] = [3]
  init %sp: i64[2] = [2, 4]
  init %eshape: i64[3] = [3, 1, 10]
  init %rep: i64[2] = [2, 1]
  init %pads: i64[4] = [1, 0, 1, 2]
  init %a1: i64[1] = [1]
  init %k: i64[1] = [3]
  %q = Squeeze(%x, %a0)
  %u = Unsqueeze(%q, %a03)
  %sl = Slice(%u, %st, %en, %axs, %stp)
  %p1, %p2 = Split(%q, %sp) {axis = 0}
  %e = Expand(%p1, %eshape)
  %tl = Tile(%p2, %rep)
  %pd = Pad(%tl, %pads)
  %rm = ReduceMean(%pd) {axes = [1], keepdims = 0}
  %rs = ReduceSum(%pd, %a1)
  %tk, %ti = TopK(%pd, %k) {axis = 1}
  return %rm, %rs, %sl, %e, %tk
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  EXPECT_EQ(shapeOf(s, *m, "q"), "[6,10]");
  EXPECT_EQ(shapeOf(s, *m, "u"), "[1,6,10,1]");
  EXPECT_EQ(shapeOf(s, *m, "sl"), "[1,6,3,1]");
  EXPECT_EQ(shapeOf(s, *m, "p1"), "[2,10]");
  EXPECT_EQ(shapeOf(s, *m, "p2"), "[4,10]");
  EXPECT_EQ(shapeOf(s, *m, "e"), "[3,2,10]");
  EXPECT_EQ(shapeOf(s, *m, "tl"), "[8,10]");
  EXPECT_EQ(shapeOf(s, *m, "pd"), "[10,12]");
  EXPECT_EQ(shapeOf(s, *m, "rm"), "[10]");
  EXPECT_EQ(shapeOf(s, *m, "rs"), "[10,1]");
  EXPECT_EQ(shapeOf(s, *m, "tk"), "[10,3]");
  EXPECT_EQ(shapeOf(s, *m, "ti"), "[10,3]");
}

TEST(Shapes, RecurrentAndEinsum) {
  auto m = parse(
      R"(graph @rnn(%a: f32[2,8,16], %b: f32[2,16,4], %x: f32[10,4,32], %w: f32[1,192,32], %r: f32[1,192,48], %a4: f32[3,2,8,16]) -> (%e: f32, %el: f32, %y: f32) {
  %e = Einsum(%a, %b) {equation = "bij,bjk->bik"}
  %el = Einsum(%a4, %b) {equation = "...ij,...jk->...ik"}
  %y, %yh, %yc = LSTM(%x, %w, %r) {hidden_size = 48}
  return %e, %el, %y
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  EXPECT_EQ(shapeOf(s, *m, "e"), "[2,8,4]");
  std::vector<int64_t> sizes;
  ASSERT_TRUE(einsumIndexSizes(producerOf(*m, "e"), s, sizes));
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 8, 16, 4})); // b, i, j, k
  EXPECT_EQ(shapeOf(s, *m, "el"), "[3,2,8,4]");
  EXPECT_EQ(shapeOf(s, *m, "y"), "[10,1,4,48]");
  EXPECT_EQ(shapeOf(s, *m, "yh"), "[1,4,48]");
  EXPECT_EQ(shapeOf(s, *m, "yc"), "[1,4,48]");
}

TEST(Shapes, UnknownStaysUnknown) {
  auto m = parse(R"(opset ai.onnx 17
opset test.custom 1
graph @u(%x: f32[batch,8], %w: f32[8,8], %z: f32) -> (%y: f32, %n: f32) {
  %a = MatMul(%x, %w)
  %b = test.custom::Mystery(%a)
  %y = MatMul(%b, %w)
  %n = Relu(%z)
  return %y, %n
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  EXPECT_EQ(shapeOf(s, *m, "a"), "[1,8]");
  EXPECT_EQ(s.assumedSymbols(), std::vector<std::string>{"batch"});
  EXPECT_TRUE(s.dependsOnSymbols(valueNamed(*m, "a")));
  EXPECT_FALSE(s.dependsOnSymbols(valueNamed(*m, "w")));
  EXPECT_EQ(shapeOf(s, *m, "b"), "?");
  EXPECT_EQ(shapeOf(s, *m, "y"), "?");
  EXPECT_EQ(shapeOf(s, *m, "n"), "?");
}

TEST(Shapes, ReduceToScalar) {
  auto m = parse(R"(graph @k(%x: f32[4,4]) -> (%d: f32) {
  %d = ReduceMax(%x) {keepdims = 0}
  return %d
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  EXPECT_EQ(shapeOf(s, *m, "d"), "[]");
  EXPECT_EQ(s.shape(valueNamed(*m, "d")).numElements(), 1);
}

} // namespace

// Exporters write INT64_MAX/INT64_MIN for "to the end": the folded constants
// and the Slice/Range rules read them exactly (through a double, 2^63 is out of
// the int64 range and the slice came out empty).
TEST(Shapes, Int64BoundsAreReadExactly) {
  auto m = parse(R"(graph @big(%x: f32[2,3,5,7]) -> (%y: f32) {
  init %one: i64[1] = [1]
  init %max: i64[1] = [9223372036854775807]
  init %min: i64[1] = [-9223372036854775808]
  init %ax0: i64[1] = [0]
  init %neg: i64[1] = [-1]
  init %zero: i64[] = [0]
  init %big: i64[] = [9223372036854775807]
  init %step: i64[] = [4611686018427387904]
  %s = Shape(%x)
  %tail = Slice(%s, %one, %max)
  %rev = Slice(%s, %max, %min, %ax0, %neg)
  %r = Range(%zero, %big, %step)
  %sum = Add(%big, %big)
  %y = Reshape(%x, %rev)
  return %y
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m);
  const ConstValues *tail = s.constValues(valueNamed(*m, "tail"));
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(tail->ints, (std::vector<int64_t>{3, 5, 7}));
  const ConstValues *big = s.constValues(valueNamed(*m, "big"));
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->ints, (std::vector<int64_t>{INT64_MAX}));
  EXPECT_EQ(s.constValues(valueNamed(*m, "sum")),
            nullptr); // overflows: not folded
  EXPECT_EQ(shapeOf(s, *m, "tail"), "[3]");
  EXPECT_EQ(shapeOf(s, *m, "rev"), "[4]");
  EXPECT_EQ(shapeOf(s, *m, "r"), "[2]");
  EXPECT_EQ(shapeOf(s, *m, "y"), "[7,5,3,2]");
}

TEST(Shapes, SymbolValuesThroughShapeComputations) {
  // Reshape(x, Concat(Shape(x)[0:1], [-1, 4])) and a Slice whose end is
  // computed from Shape: each symbol stands for the value asked for.
  auto m = parse(R"(graph @s(%x: f32[batch,seq,8]) -> (%y: f32, %q: f32) {
  init %z: i64[1] = [0]
  init %one: i64[1] = [1]
  init %tail: i64[2] = [-1, 4]
  init %two: i64[] = [2]
  init %ax: i64[1] = [2]
  %sh = Shape(%x)
  %n = Slice(%sh, %z, %one)
  %target = Concat(%n, %tail) {axis = 0}
  %y = Reshape(%x, %target)
  %last = Gather(%sh, %two) {axis = 0}
  %half = Div(%last, %two)
  %end = Unsqueeze(%half, %z)
  %q = Slice(%x, %z, %end, %ax)
  return %y, %q
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m, [](llvm::StringRef sym) -> int64_t { return sym == "batch" ? 5 : 7; });
  EXPECT_EQ(shapeOf(s, *m, "y"), "[5,14,4]");
  EXPECT_EQ(shapeOf(s, *m, "q"), "[5,7,4]");
  EXPECT_EQ(s.assumedSymbols(), (std::vector<std::string>{"batch", "seq"}));
  ShapeEstimator ones(*m);
  EXPECT_EQ(shapeOf(ones, *m, "y"), "[1,2,4]");
}

TEST(Shapes, TorchExpandTargetFolds) {
  // cls.expand(x.shape[0], -1, -1) as torch.onnx.export writes it: the target
  // [N, -1, -1] becomes [N, 1, 1] through ConstantOfShape, Mul, Equal and
  // Where ("-1 keeps the size"), then Concat with x along the tokens.
  auto m = parse(R"(graph @e(%x: f32[batch,4,8], %cls: f32[1,1,8]) -> (%y: f32) {
  init %i0: i64[] = [0]
  init %ax: i64[1] = [0]
  init %m1: i64[1] = [-1]
  init %three: i64[1] = [3]
  %s = Shape(%x)
  %b = Gather(%s, %i0) {axis = 0}
  %bu = Unsqueeze(%b, %ax)
  %want = Concat(%bu, %m1, %m1) {axis = 0}
  %ones = ConstantOfShape(%three) {value = dense<i64[1]: [1]>}
  %negs = Mul(%ones, %m1)
  %keep = Equal(%want, %negs)
  %target = Where(%keep, %ones, %want)
  %e = Expand(%cls, %target)
  %y = Concat(%e, %x) {axis = 1}
  return %y
}
)");
  ASSERT_TRUE(m);
  ShapeEstimator s(*m, [](llvm::StringRef) -> int64_t { return 5; });
  const ConstValues *ones = s.constValues(valueNamed(*m, "ones"));
  ASSERT_NE(ones, nullptr);
  EXPECT_EQ(ones->ints, (std::vector<int64_t>{1, 1, 1}));
  const ConstValues *keep = s.constValues(valueNamed(*m, "keep"));
  ASSERT_NE(keep, nullptr);
  EXPECT_EQ(keep->ints, (std::vector<int64_t>{0, 1, 1}));
  const ConstValues *target = s.constValues(valueNamed(*m, "target"));
  ASSERT_NE(target, nullptr);
  EXPECT_FALSE(target->floating);
  EXPECT_EQ(target->ints, (std::vector<int64_t>{5, 1, 1}));
  EXPECT_EQ(shapeOf(s, *m, "e"), "[5,1,8]");
  EXPECT_EQ(shapeOf(s, *m, "y"), "[5,5,8]");
}
