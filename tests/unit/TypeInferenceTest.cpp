//===- TypeInferenceTest.cpp - Element types from the schemas --------------===//
//
// Graphs are written as text with `?` result types (which the parser leaves
// unknown); inferTypes() fills them and the printed graph is compared.
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/TypeInference.h"
#include "mpc/Text/Text.h"
#include "gtest/gtest.h"

using namespace mpc;

namespace {

/// Parses `text`, runs inferTypes on the model and returns the printed result.
std::string inferText(llvm::StringRef text) {
  auto m = parseModelText(text, "infer.mpc");
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return "";
  }
  inferTypes(**m);
  return modelToText(**m);
}

/// The printed type of value `name` in the inferred text.
std::string typeOf(llvm::StringRef printed, llvm::StringRef name) {
  std::string needle = ("%" + name + " = ").str();
  size_t at = printed.find(needle);
  if (at == llvm::StringRef::npos)
    return "<no " + needle + ">";
  size_t eol = printed.find('\n', at);
  llvm::StringRef line = printed.slice(at, eol);
  size_t colon = line.rfind(" : ");
  return line.substr(colon + 3).split(" name=").first.str();
}

} // namespace

TEST(TypeInference, CastTakesItsTargetType) {
  std::string out = inferText(R"(graph @g(%x: f32[4]) -> () {
  %a = Cast(%x) {to = f16} : ?
  %b = Cast(%a) {to = bf16} : ?
  %c = Cast(%b) {to = i64} : ?
  return
})");
  EXPECT_EQ(typeOf(out, "a"), "f16");
  EXPECT_EQ(typeOf(out, "b"), "bf16");
  EXPECT_EQ(typeOf(out, "c"), "i64");
}

// ai.mpc.training ops with a folded Cast: output 0 typed by `to`, else like
// input 0 (their schemas give the output a type parameter of its own).
TEST(TypeInference, TrainingOpsTakeTheirToType) {
  std::string out = inferText(R"(opset ai.onnx 17
opset ai.mpc.training 1
graph @g(%dy: f16[6,4], %s: i64[1], %a: f16[2,3], %w: f16[3,4], %b: f16[4], %d: f16[2,4]) -> () {
  %wide = ai.mpc.training::BiasGrad(%dy, %s) {to = 1} : ?
  %same = ai.mpc.training::BiasGrad(%dy, %s) : ?
  %y = ai.mpc.training::GemmBiasAct(%a, %w, %b) {to = 1} : ?
  %y16 = ai.mpc.training::GemmBiasAct(%a, %w, %b) : ?
  %dw = ai.mpc.training::GemmBiasAct(%a, %d) {transA = 1, to = 1} : ?
  return
})");
  EXPECT_EQ(typeOf(out, "wide"), "f32");
  EXPECT_EQ(typeOf(out, "same"), "f16");
  EXPECT_EQ(typeOf(out, "y"), "f32");
  EXPECT_EQ(typeOf(out, "y16"), "f16");
  // No bias (a weight gradient: A^T [3, 2] times dY [2, 4], into float32).
  EXPECT_EQ(typeOf(out, "dw"), "f32");
}

TEST(TypeInference, ConstantOfShapeReadsItsValue) {
  std::string out = inferText(R"(graph @g(%s: i64[2]) -> () {
  %a = ConstantOfShape(%s) {value = dense<f16[1]: [1]>} : ?
  %b = ConstantOfShape(%s) : ?
  %c = ConstantOfShape(%s) {value = dense<i32[1]: [0]>} : ?
  return
})");
  EXPECT_EQ(typeOf(out, "a"), "f16");
  EXPECT_EQ(typeOf(out, "b"), "f32"); // the schema's default value is a float zero
  EXPECT_EQ(typeOf(out, "c"), "i32");
}

TEST(TypeInference, ConstantTakesItsShapeToo) {
  std::string out = inferText(R"(graph @g() -> () {
  %a = Constant() {value = dense<f16[2,3]: zeros>} : ?
  %b = Constant() {value_ints = [1, 2, 3]} : ?
  %c = Constant() {value_float = 0.5} : ?
  return
})");
  EXPECT_EQ(typeOf(out, "a"), "f16[2,3]");
  EXPECT_EQ(typeOf(out, "b"), "i64[3]");
  EXPECT_EQ(typeOf(out, "c"), "f32[]");
}

TEST(TypeInference, ParametersSharedWithInputs) {
  std::string fixed = inferText(R"(graph @g(%x: f16[2,3], %w: f16[3,4]) -> () {
  %a = MatMul(%x, %w) : ?
  %b = Relu(%a) : ?
  %cond = Cast(%x) {to = bool} : ?
  %c = Where(%cond, %b, %b) : ?
  return
})");
  EXPECT_EQ(typeOf(fixed, "a"), "f16");
  EXPECT_EQ(typeOf(fixed, "b"), "f16");
  EXPECT_EQ(typeOf(fixed, "c"), "f16");
}

// An output whose type parameter admits exactly one type and is shared with
// no input (Shape, Size: T1 = int64; Equal/Less: T1 = bool; TopK indices:
// I = int64) takes that type.
TEST(TypeInference, ShapeIsInt64) {
  std::string out = inferText(R"(graph @g(%x: f32[2,3]) -> () {
  %s = Shape(%x) : ?
  %n = Size(%x) : ?
  %e = Equal(%x, %x) : ?
  %v, %i = TopK(%x, %s) : ?, ?
  return
})");
  EXPECT_EQ(typeOf(out, "s"), "i64");
  EXPECT_EQ(typeOf(out, "n"), "i64");
  EXPECT_EQ(typeOf(out, "e"), "bool");
  EXPECT_NE(out.find("%v, %i = TopK(%x, %s) : f32, i64"), std::string::npos) << out;
}

TEST(TypeInference, FixedOutputTypes) {
  std::string out = inferText(R"(graph @g(%x: f32[2,3]) -> () {
  %nz = NonZero(%x) : ?
  %am = ArgMax(%x) : ?
  return
})");
  EXPECT_EQ(typeOf(out, "nz"), "i64");
  EXPECT_EQ(typeOf(out, "am"), "i64");
}

TEST(TypeInference, SequencesLinkElementAndContainer) {
  std::string out = inferText(R"(graph @g(%x: f16[2], %i: i64[]) -> () {
  %s = SequenceConstruct(%x, %x) : ?
  %e = SequenceAt(%s, %i) : ?
  %s2 = SequenceInsert(%s, %e) : ?
  %c = ConcatFromSequence(%s2) {axis = 0} : ?
  %empty = SequenceEmpty() {dtype = bf16} : ?
  %o = Optional(%x) : ?
  %oe = OptionalGetElement(%o) : ?
  return
})");
  EXPECT_EQ(typeOf(out, "s"), "seq<f16>");
  EXPECT_EQ(typeOf(out, "e"), "f16");
  EXPECT_EQ(typeOf(out, "s2"), "seq<f16>");
  EXPECT_EQ(typeOf(out, "c"), "f16");
  EXPECT_EQ(typeOf(out, "empty"), "seq<bf16>");
  EXPECT_EQ(typeOf(out, "o"), "opt<f16>");
  EXPECT_EQ(typeOf(out, "oe"), "f16");
}

TEST(TypeInference, LinkedParametersShareOneSlot) {
  auto m = parseModelText(R"(graph @g(%x: f16[2], %i: i64[]) -> () {
  %s = SequenceConstruct(%x, %x) : seq<f16>
  %e = SequenceAt(%s, %i) : f16
  return
})",
                          "infer.mpc");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  const Node &at = *std::next((*m)->graph->nodes().begin());
  SignatureLookup lk = lookupSignature(at);
  ASSERT_NE(lk.sig, nullptr);
  EXPECT_EQ(typeParamOfPort(at, lk.sig, /*isInput=*/true, 0),
            typeParamOfPort(at, lk.sig, /*isInput=*/false, 0));
  EXPECT_EQ(typeParamOfPort(at, lk.sig, /*isInput=*/true, 1), "I");
  EXPECT_EQ(typeParamOfPort(at, lk.sig, /*isInput=*/true, 7), "#in7");
}

TEST(TypeInference, IfOutputsComeFromTheBranch) {
  std::string out = inferText(R"(graph @g(%c: bool[], %x: f16[4]) -> () {
  %r, %k = If(%c) {
    else_branch = graph @e() -> (%e1: ?, %e2: ?) {
      %e1 = Neg(%x) : ?
      %e2 = Cast(%x) {to = i32} : ?
      return %e1, %e2
    },
    then_branch = graph @t() -> (%t1: ?, %t2: ?) {
      %t1 = Abs(%x) : ?
      %t2 = Cast(%x) {to = i32} : ?
      return %t1, %t2
    }
  } : ?, ?
  return
})");
  EXPECT_NE(out.find("} : f16, i32\n"), std::string::npos) << out;
  EXPECT_NE(out.find("%t1 = Abs(%x) : f16"), std::string::npos) << out;
  EXPECT_NE(out.find("%e2 = Cast(%x) {to = i32} : i32"), std::string::npos) << out;
}

TEST(TypeInference, LoopOutputsDropTheShape) {
  std::string out = inferText(R"(graph @g(%n: i64[], %x: f16[4]) -> () {
  %final, %scan = Loop(%n, _, %x) {
    body = graph @b(%it: i64[], %cond: bool[], %acc: f16[4]) -> (%co: bool[], %next: f16[4], %each: f16[4]) {
      %co = Identity(%cond) : bool[]
      %next = Add(%acc, %acc) : f16[4]
      %each = Identity(%next) : f16[4]
      return %co, %next, %each
    }
  } : ?, ?
  return
})");
  EXPECT_NE(out.find("} : f16, f16\n"), std::string::npos) << out;
}

TEST(TypeInference, KnownTypesAreKeptAndTrainingGraphsInferred) {
  std::string out = inferText(R"(graph @g(%x: f32[4]) -> () {
  %a = Relu(%x) : f16[4]
  %b = Relu(%a) : ?
  return
}
training {
  algorithm graph @step(%lr: f16[]) -> () {
    %u = Mul(%lr, %lr) : ?
    return
  }
})");
  EXPECT_EQ(typeOf(out, "a"), "f16[4]"); // wrong but given: not overwritten
  EXPECT_EQ(typeOf(out, "b"), "f16");
  EXPECT_EQ(typeOf(out, "u"), "f16");
}

TEST(TypeInference, UnknownOpsStayUnknown) {
  std::string out = inferText(R"(graph @g(%x: f32[4]) -> () {
  %a = my.ops::Thing(%x) : ?
  %b = Relu(%a) : ?
  return
})");
  EXPECT_EQ(typeOf(out, "a"), "?");
  EXPECT_EQ(typeOf(out, "b"), "?");
}
