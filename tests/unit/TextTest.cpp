//===- TextTest.cpp - Text printer and parser ------------------------------===//
//
// print(parse(x)) == x on printer-form texts, parse errors with line:col,
// and text -> ONNX -> text round trips.
//
//===----------------------------------------------------------------------===//
#include "mpc/Text/Text.h"
#include "mpc/IO/Onnx.h"
#include "onnx/onnx_pb.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cstring>

using namespace mpc;

namespace {

std::unique_ptr<Model> parseOk(llvm::StringRef text, llvm::StringRef buffer = "test.mpc") {
  auto m = parseModelText(text, buffer);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

std::string parseError(llvm::StringRef text, llvm::StringRef buffer = "test.mpc") {
  auto m = parseModelText(text, buffer);
  if (m) {
    ADD_FAILURE() << "parsed unexpectedly:\n" << text.str();
    return "";
  }
  return llvm::toString(m.takeError());
}

/// parse(text) prints `text` again, twice in a row with the same bytes.
void expectRoundTrip(llvm::StringRef text) {
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(modelToText(*m), text.str());
  EXPECT_EQ(modelToText(*m), modelToText(*m));
}

/// parse -> ONNX bytes -> import -> print gives `text` back.
void expectOnnxRoundTrip(llvm::StringRef text) {
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  auto bytes = exportOnnxBytes(*m);
  ASSERT_TRUE(bool(bytes)) << llvm::toString(bytes.takeError());
  auto back = importOnnxBytes(*bytes, ".");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  EXPECT_EQ(modelToText(**back), text.str());
}

const char *const kMlp = R"mpc(graph @mlp(%x: f32[8,16], %w: f32[16,4]) -> (%y: f32[8,4]) {
  init %b: f32[4] = [0.5, 1, -2, 3]
  %mm = MatMul(%x, %w) : f32[8,4] name="fc1"
  %s = Add(%mm, %b) : f32[8,4]
  %y = Softmax(%s) {axis = -1} : f32[8,4]
  return %y
}
)mpc";

const char *const kNames = R"mpc(ir 7
opset ai.onnx 13
opset com.microsoft 1
graph @"main graph"(%"in/0:x": f16[batch,?,"seq len"], %k: i64[1]) -> (%"out:0": f16, %top: f16[?], %idx: i64) {
  %"a/b" = com.microsoft::FusedMatMul(%"in/0:x", %"in/0:x") {alpha = 0.5, transA = 0, transB = 1} : f16 name="fused/0"
  %top, %idx = TopK(%"a/b", %k) {axis = -1} : f16[?], i64
  %c = Clip(%top, _, %top) : f16[?]
  %"out:0", _ = Dropout(%"a/b") : f16
  "init"(%c) name="sink"
  _ = com.microsoft::Probe(%c)
  %9 = "my domain"::"odd op"() : ?
  return %"out:0", %top, %idx
}
)mpc";

const char *const kAttrs = R"mpc(graph @attrs(%x: f32[2,3]) -> (%y: f32[2,3], %z: f16[2,3]) {
  %y = custom.ops::Everything(%x) {dt = 10, e = floats[], f = 1.0, fl = [0.100000001, -2.5, 1.00000001e-07, inf, -inf, nan], g = ints[], gs = graphs[], i = -7, is = [1, -2, 9223372036854775807], s = "tab\09quote\22back\5Cnl\0A\C3\A9", ss = ["", "x y"], t = dense<f32[2]: [1.5, -0.25]>, tp = opaque<13: "0a020801">, ts = [dense<i64[3]: iota>, dense<str[2]: ["a", "b"]>], tz = tensors[], u = strings[]} : f32[2,3]
  %z = Cast(%y) {to = f16} : f16[2,3]
  return %y, %z
}
)mpc";

const char *const kTypes =
    R"mpc(graph @types(%a: seq<f32[4]>, %b: opt<seq<f16>>, %c: map<i64, f32[?]>, %d: sparse<f32[10]>, %e: ?, %f: f32[], %g: f32, %h: opt<?>) -> (%a: seq<f32[4]>, %e: ?) {
  return %a, %e
}
)mpc";

const char *const kInits = R"mpc(graph @inits(%def: f32[2]) -> (%f: f32[3]) {
  init %f: f32[3] = [0.100000001, -0, 3.40282347e+38]
  init %d: f64[2] = [0.10000000000000001, 1e-300]
  init %h: f16[3] = [1, -0.5, 65504]
  init %bh: bf16[2] = [1.5, -3]
  init %i8: i8[2] = [-128, 127]
  init %u8: u8[2] = [0, 255]
  init %i16: i16[2] = [-32768, 7]
  init %u16: u16[2] = [65535, 1]
  init %i32: i32[2] = [-2147483648, 5]
  init %u32: u32[2] = [4294967295, 0]
  init %i64: i64[2] = [-9223372036854775808, 9223372036854775807]
  init %u64: u64[2] = [18446744073709551615, 3]
  init %bool: bool[3] = [true, false, true]
  init %str: str[2] = ["hello", "w\22orld"]
  init %z: f32[2,2] = zeros
  init %s: f32[3] = splat(0.5)
  init %io: i64[4] = iota
  init %f8: f8e4m3fn[2] = hex "3800"
  init %i4: i4[3] = hex "21f0"
  init %c64: c64[1] = hex "0000803f00000000"
  init %sc: f32[] = [2]
  init %empty: f32[0,3] = []
  init %def: f32[2] = [7, 8]
  return %f
}
)mpc";

const char *const kNested =
    R"mpc(graph @control(%c: bool[], %x: f32[4]) -> (%r: f32[4], %l: f32[4]) {
  init %trip: i64[] = [3]
  %n = Neg(%x) : f32[4]
  %r = If(%c) {
    else_branch = graph @else_body() -> (%e: f32[4]) {
      %e = Abs(%n) : f32[4]
      return %e
    },
    then_branch = graph @then_body() -> (%x: f32[4]) {
      return %x
    }
  } : f32[4]
  %l = Loop(%trip, _, %x) {
    body = graph @loop_body(%i: i64[], %cond: bool[], %acc: f32[4]) -> (%cond_out: bool[], %acc_out: f32[4]) {
      init %one: f32[] = [1]
      %cond_out = Identity(%cond) : bool[]
      %inner = If(%cond) {
        else_branch = graph @e2() -> (%m: f32[4]) {
          %m = Mul(%acc, %n) : f32[4]
          return %m
        },
        then_branch = graph @t2() -> (%acc: f32[4]) {
          return %acc
        }
      } : f32[4]
      %acc_out = Add(%inner, %one) : f32[4]
      return %cond_out, %acc_out
    }
  } : f32[4]
  return %r, %l
}
)mpc";

const char *const kTraining = R"mpc(graph @train_main(%x: f32[4]) -> (%y: f32[4]) {
  init %w: f32[4] = splat(0.5)
  %y = Mul(%x, %w) : f32[4]
  return %y
}
training {
  initialization graph @init() -> (%w0: f32[4]) {
    init %w0: f32[4] = zeros
    return %w0
  }
  algorithm graph @step(%lr: f32[]) -> (%w_new: f32[4]) {
    %g = Mul(%w, %lr) : f32[4]
    %w_new = Sub(%w, %g) : f32[4]
    return %w_new
  }
  initialization_binding %w = %w0
  update_binding %w = %w_new
}
)mpc";

} // namespace

//===----------------------------------------------------------------------===//
// print(parse(x)) == x
//===----------------------------------------------------------------------===//

TEST(TextRoundTrip, Mlp) { expectRoundTrip(kMlp); }
TEST(TextRoundTrip, HeaderNamesDomainsOmitted) { expectRoundTrip(kNames); }
TEST(TextRoundTrip, AttributeKinds) { expectRoundTrip(kAttrs); }
TEST(TextRoundTrip, Types) { expectRoundTrip(kTypes); }
TEST(TextRoundTrip, Initializers) { expectRoundTrip(kInits); }
TEST(TextRoundTrip, NestedGraphs) { expectRoundTrip(kNested); }
TEST(TextRoundTrip, Training) { expectRoundTrip(kTraining); }

TEST(TextRoundTrip, EmptyGraphAndNonDefaultOpsets) {
  expectRoundTrip("graph @\"\"() -> () {\n  return\n}\n");
  expectRoundTrip("opset com.example 3\ngraph @g() -> () {\n  return\n}\n");
}

//===----------------------------------------------------------------------===//
// What the parser builds
//===----------------------------------------------------------------------===//

TEST(TextParse, BuildsTheIR) {
  auto m = parseOk(kNames);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->irVersion, 7);
  ASSERT_EQ(m->opsets.size(), 2u);
  EXPECT_EQ(m->opsets[0].domain, "");
  EXPECT_EQ(m->opsets[0].version, 13);
  EXPECT_EQ(m->opsets[1].domain, "com.microsoft");
  Graph &g = *m->graph;
  EXPECT_EQ(g.name, "main graph");
  ASSERT_EQ(g.inputs().size(), 2u);
  const Value *x = g.inputs()[0];
  EXPECT_EQ(x->name(), "in/0:x");
  ASSERT_EQ(x->type.dims.size(), 3u);
  EXPECT_EQ(x->type.dims[0].param, "batch");
  EXPECT_FALSE(x->type.dims[1].isKnown());
  EXPECT_TRUE(x->type.dims[1].param.empty());
  EXPECT_EQ(x->type.dims[2].param, "seq len");

  auto it = g.nodes().begin();
  const Node &fused = *it++;
  EXPECT_EQ(fused.domain, "com.microsoft");
  EXPECT_EQ(fused.opType, "FusedMatMul");
  EXPECT_EQ(fused.name, "fused/0");
  EXPECT_FLOAT_EQ(fused.floatAttr("alpha", 0), 0.5f);
  EXPECT_EQ(x->uses().size(), 2u);
  const Node &topk = *it++;
  EXPECT_EQ(topk.numOutputs(), 2u);
  const Node &clip = *it++;
  ASSERT_EQ(clip.numInputs(), 3u);
  EXPECT_EQ(clip.input(1), nullptr);
  const Node &dropout = *it++;
  ASSERT_EQ(dropout.numOutputs(), 2u);
  EXPECT_EQ(dropout.output(1), nullptr);
  const Node &sink = *it++;
  EXPECT_EQ(sink.opType, "init");
  EXPECT_EQ(sink.numOutputs(), 0u);
  const Node &probe = *it++;
  EXPECT_EQ(probe.numOutputs(), 1u);
  EXPECT_EQ(probe.output(0), nullptr);
  EXPECT_EQ(it->domain, "my domain");
  EXPECT_FALSE(it->output(0)->type.isKnown());
  EXPECT_TRUE(m->isNameTaken("fused/0"));
  EXPECT_TRUE(m->isNameTaken("a/b"));
}

TEST(TextParse, AttributeValues) {
  auto m = parseOk(kAttrs);
  ASSERT_TRUE(m);
  const Node &n = m->graph->nodes().front();
  EXPECT_EQ(n.attr("s")->s, "tab\tquote\"back\\nl\n\xC3\xA9");
  EXPECT_EQ(n.attr("f")->kind, AttrKind::Float);
  EXPECT_EQ(n.attr("i")->kind, AttrKind::Int);
  EXPECT_EQ(n.attr("e")->kind, AttrKind::Floats);
  EXPECT_EQ(n.attr("gs")->kind, AttrKind::Graphs);
  EXPECT_EQ(n.attr("tz")->kind, AttrKind::Tensors);
  EXPECT_EQ(n.attr("is")->ints.back(), INT64_MAX);
  const Attribute *ts = n.attr("ts");
  ASSERT_EQ(ts->tensors.size(), 2u);
  EXPECT_EQ(ts->tensors[0].getAsDouble(2), 2.0);
  EXPECT_EQ(ts->tensors[1].strings()[1], "b");
  EXPECT_EQ(n.attr("tp")->kind, AttrKind::TypeProto);
  EXPECT_EQ(n.attr("tp")->opaque[0], std::string("\x0a\x02\x08\x01", 4));
  const Node &cast = *std::next(m->graph->nodes().begin());
  EXPECT_EQ(cast.intAttr("to", 0), static_cast<int64_t>(DType::F16));
}

TEST(TextParse, InitializerValues) {
  auto m = parseOk(kInits);
  ASSERT_TRUE(m);
  llvm::StringMap<const Tensor *> inits;
  for (const Value *v : m->graph->initializers())
    inits[v->name()] = v->initializer();
  EXPECT_EQ(inits["f"]->getAsDouble(0), static_cast<double>(0.1f));
  EXPECT_TRUE(std::signbit(inits["f"]->getAsDouble(1)));
  EXPECT_EQ(inits["d"]->getAsDouble(0), 0.1);
  EXPECT_EQ(inits["h"]->getAsDouble(2), 65504.0);
  EXPECT_EQ(inits["bh"]->getAsDouble(1), -3.0);
  EXPECT_EQ(inits["i8"]->getAsDouble(0), -128.0);
  EXPECT_EQ(inits["io"]->getAsDouble(3), 3.0);
  EXPECT_EQ(inits["s"]->getAsDouble(2), 0.5);
  EXPECT_EQ(inits["z"]->bytes().size(), 16u);
  EXPECT_EQ(inits["f8"]->bytes()[0], 0x38);
  EXPECT_EQ(inits["str"]->strings()[1], "w\"orld");
  // `init` of an input's name gives the input a default value.
  const Value *def = m->graph->inputs()[0];
  EXPECT_EQ(def->kind(), ValueKind::GraphInput);
  ASSERT_NE(def->initializer(), nullptr);
  EXPECT_EQ(def->initializer()->getAsDouble(1), 8.0);
}

TEST(TextParse, NestedGraphsCaptureOuterValues) {
  auto m = parseOk(kNested);
  ASSERT_TRUE(m);
  Graph &g = *m->graph;
  const Value *n = nullptr;
  for (Node &node : g.nodes())
    if (node.opType == "Neg")
      n = node.output(0);
  ASSERT_NE(n, nullptr);
  // %n is used by Abs in @else_body and by Mul two levels down in @e2.
  ASSERT_EQ(n->uses().size(), 2u);
  for (const Use &u : n->uses())
    EXPECT_NE(u.user->getParent(), &g);
  const Node &ifNode = *std::next(g.nodes().begin());
  const Graph &thenBody = *ifNode.attr("then_branch")->graphs[0];
  EXPECT_EQ(thenBody.owningNode(), &ifNode);
  EXPECT_EQ(thenBody.parent(), &g);
  ASSERT_EQ(thenBody.outputs().size(), 1u);
  EXPECT_EQ(thenBody.outputs()[0], g.inputs()[1]); // returns the outer %x
}

TEST(TextParse, ForwardCaptureSortsTheEnclosingGraph) {
  const char *text = R"mpc(graph @fwd(%c: bool[], %x: f32[4]) -> (%r: f32[4]) {
  %r = If(%c) {
    else_branch = graph @e() -> (%e: f32[4]) {
      %e = Abs(%later) : f32[4]
      return %e
    },
    then_branch = graph @t() -> (%x: f32[4]) {
      return %x
    }
  } : f32[4]
  %later = Neg(%x) : f32[4]
  return %r
}
)mpc";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  std::string printed = modelToText(*m);
  EXPECT_LT(printed.find("%later = Neg"), printed.find("%r = If"));
  expectRoundTrip(printed);
}

TEST(TextParse, TypesInferredWhenOmitted) {
  const char *text = R"mpc(graph @g(%x: f32[4], %s: seq<f16[2]>) -> (f32[4], %z: seq<f32>) {
  %y = Relu(%x)
  %h = Cast(%y) {to = f16}
  %shape = Cast(%x) {to = i64}
  %zeros = ConstantOfShape(%shape) {value = dense<i32[1]: [0]>}
  %el = SequenceAt(%s, %zeros)
  %seq = SequenceConstruct(%y, %y)
  %u = Relu(%y) : ?
  %z = Identity(%seq)
  return %y, %z
}
)mpc";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(modelToText(*m),
            R"mpc(graph @g(%x: f32[4], %s: seq<f16[2]>) -> (%y: f32[4], %z: seq<f32>) {
  %y = Relu(%x) : f32[4]
  %h = Cast(%y) {to = f16} : f16
  %shape = Cast(%x) {to = i64} : i64
  %zeros = ConstantOfShape(%shape) {value = dense<i32[1]: [0]>} : i32
  %el = SequenceAt(%s, %zeros) : f16[2]
  %seq = SequenceConstruct(%y, %y) : seq<f32>
  %u = Relu(%y) : ?
  %z = Identity(%seq) : seq<f32>
  return %y, %z
}
)mpc");
}

TEST(TextParse, AttributesPrintSorted) {
  auto m = parseOk("graph @g(%x: f32) -> () {\n  Foo(%x) {z = 1, a = 2.5, m = \"s\"}\n"
                   "  return\n}\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(modelToText(*m), "graph @g(%x: f32) -> () {\n"
                             "  Foo(%x) {a = 2.5, m = \"s\", z = 1}\n  return\n}\n");
}

TEST(TextParse, CommentsAndWhitespaceAreIgnored) {
  auto m = parseOk("// a model\nopset   ai.onnx 17 // default\n"
                   "graph @g(%x:f32[2])->(%y:f32[2]){%y=Relu(%x):f32[2]\nreturn %y}");
  ASSERT_TRUE(m);
  EXPECT_EQ(modelToText(*m),
            "graph @g(%x: f32[2]) -> (%y: f32[2]) {\n  %y = Relu(%x) : f32[2]\n  return %y\n}\n");
}

TEST(TextPrint, GraphAloneAndElidedTensors) {
  auto m = parseOk(kNested);
  ASSERT_TRUE(m);
  const Node &ifNode = *std::next(m->graph->nodes().begin());
  std::string s;
  llvm::raw_string_ostream os(s);
  printGraph(*ifNode.attr("else_branch")->graphs[0], os);
  EXPECT_EQ(os.str(), "graph @else_body() -> (%e: f32[4]) {\n  %e = Abs(%n) : f32[4]\n"
                      "  return %e\n}\n");

  auto big = parseOk("graph @g() -> () {\n  init %a: f32[3] = [1, 2, 4]\n"
                     "  init %b: f32[3] = splat(1)\n  return\n}\n");
  ASSERT_TRUE(big);
  std::string t;
  llvm::raw_string_ostream tos(t);
  PrintOptions opts;
  opts.maxTensorElements = 2;
  printModel(*big, tos, opts);
  EXPECT_NE(tos.str().find("init %a: f32[3] = elided\n"), std::string::npos);
  EXPECT_NE(tos.str().find("init %b: f32[3] = splat(1)\n"), std::string::npos);
  EXPECT_NE(parseError(tos.str()).find("elided by the printer"), std::string::npos);
}

TEST(TextParse, ExternalData) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("mpc-text-ext", dir));
  llvm::SmallString<128> bin(dir), model(dir);
  llvm::sys::path::append(bin, "w.bin");
  llvm::sys::path::append(model, "model.mpc");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(bin, ec);
    ASSERT_FALSE(ec);
    float vals[4] = {1, 2, 3, 4};
    os.write(reinterpret_cast<const char *>(vals), sizeof(vals));
  }
  std::string text = "graph @g() -> (%w: f32[2]) {\n"
                     "  init %w: f32[2] = external(\"w.bin\", offset = 8, length = 8)\n"
                     "  return %w\n}\n";
  auto m = parseModelText(text, model);
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ(modelToText(**m), text);
  Tensor &t = *(*m)->graph->initializers()[0]->initializer();
  ASSERT_TRUE(t.isExternal());
  ASSERT_FALSE(bool(t.materialize()));
  EXPECT_EQ(t.getAsDouble(0), 3.0);

  auto withLoc = [&](llvm::StringRef loc) {
    return "graph @g() -> () {\n  init %w: f32[2] = external(\"" + loc.str() + "\")\n  return\n}\n";
  };
  EXPECT_NE(parseError(withLoc("/etc/passwd"), model).find("must be a relative path"),
            std::string::npos);
  EXPECT_NE(parseError(withLoc("../w.bin"), model).find("escapes the model's folder"),
            std::string::npos);
  EXPECT_NE(parseError(withLoc("missing.bin"), model).find("'missing.bin' not found"),
            std::string::npos);
  llvm::sys::fs::remove(bin);
  llvm::sys::fs::remove(dir);
}

//===----------------------------------------------------------------------===//
// Errors: one line, <buffer>:<line>:<col>: error: <message>
//===----------------------------------------------------------------------===//

struct ErrorCase {
  const char *text;
  const char *message;
};

TEST(TextErrors, LineColumnAndMessage) {
  const ErrorCase cases[] = {
      {"graph @g(%x: f32) -> (%y: f32) {\n  %y = Relu(%z)\n  return %y\n}\n",
       "test.mpc:2:13: error: use of undefined value '%z'"},
      {"graph @g(%x: f32) -> (%x: f32) {\n  %x = Relu(%x)\n  return %x\n}\n",
       "test.mpc:2:3: error: value '%x' is already defined"},
      {"graph @g(%x: f33) -> () {\n  return\n}\n", "test.mpc:1:14: error: unknown type 'f33'"},
      {"graph @g() -> () {\n  Foo() {s = \"abc}\n  return\n}\n",
       "test.mpc:2:14: error: unterminated string"},
      {"graph @g(%x: f32) -> () {\n  %a, %b = Split(%x) : f32\n  return\n}\n",
       "test.mpc:2:22: error: expected 2 result type(s), found 1"},
      {"graph @g() -> () {\n  init %b: f32[3] = [1, 2]\n  return\n}\n",
       "test.mpc:2:21: error: tensor data has 2 values, its type needs 3"},
      {"graph @g() -> () {\n  init %b: i8[1] = [300]\n  return\n}\n",
       "test.mpc:2:21: error: value 300 does not fit i8"},
      {"graph @g() -> () {\n  init %b: f32[?] = [1]\n  return\n}\n",
       "test.mpc:2:12: error: tensor type 'f32[?]' needs a known shape"},
      {"graph @g(%x: f32) -> () {\n  Foo(%x) {a = []}\n  return\n}\n",
       "test.mpc:2:16: error: an empty list needs its kind: ints[], floats[], strings[], "
       "tensors[] or graphs[]"},
      {"graph @g(%x: f32) -> () {\n  Foo(%x) {a = 1, a = 2}\n  return\n}\n",
       "test.mpc:2:19: error: attribute 'a' is given twice"},
      {"graph @g(%x: f32) -> (%x: f32, %y: f32) {\n  return %x\n}\n",
       "test.mpc:2:3: error: graph '@g' declares 2 output(s) but returns 1"},
      {"graph @g(%x: f32) -> (%y: f32) {\n  return %x\n}\n",
       "test.mpc:2:10: error: output 0 is declared as '%y' but '%x' is returned"},
      {"graph @g(%x: f32[2]) -> (%x: f32[3]) {\n  return %x\n}\n",
       "test.mpc:1:26: error: output '%x' is declared as 'f32[3]' but has type 'f32[2]'"},
      {"graph @g(%x: f32) -> () {\n  Relu(%x)\n}\n",
       "test.mpc:3:1: error: expected 'return', found '}'"},
      {"graph @g() -> () {\n  return\n}\nextra\n",
       "test.mpc:4:1: error: expected end of input or 'training', found 'extra'"},
      {"graph @g() -> () {\n  $\n}\n", "test.mpc:2:3: error: unexpected character '$'"},
      {"graph @g(%x f32) -> () {\n  return\n}\n",
       "test.mpc:1:13: error: expected ':', found 'f32'"},
      {"opset ai.onnx 17\nopset ai.onnx 18\ngraph @g() -> () {\n  return\n}\n",
       "test.mpc:2:7: error: opset for domain 'ai.onnx' is given twice"},
      {"graph @g() -> () {\n  init %b: i64[1] = [1.5]\n  return\n}\n",
       "test.mpc:2:22: error: expected a value of type i64, found '1.5'"},
      {"graph @g() -> () {\n  init %b: f8e5m2[1] = [1]\n  return\n}\n",
       "test.mpc:2:25: error: data of type f8e5m2 must be given as hex"},
      {"graph @g() -> () {\n  init %b: i32[1] = hex \"0102\"\n  return\n}\n",
       "test.mpc:2:25: error: hex data has 2 bytes, type needs 4"},
      {"graph @g(%c: bool[]) -> () {\n  %r = If(%c) {then_branch = graph @t() -> () {\n"
       "    Foo(%t)\n    %t = Bar() : f32\n    return\n  }} : ?\n  return\n}\n",
       "test.mpc:3:9: error: value '%t' is used before its definition"},
      {"graph @g(%c: bool[]) -> () {\n  %r = If(%c) {then_branch = graph @t() -> () {\n"
       "    Foo(%r)\n    return\n  }} : ?\n  return\n}\n",
       "test.mpc:3:9: error: value '%r' is captured by a graph of the node that defines it"},
      {"graph @g(%c: bool[]) -> () {\n  %r = If(%c) {then_branch = graph @t() -> () {\n"
       "    %q = Foo() : f32\n    return\n  }} : ?\n  %q = Bar() : f32\n  return\n}\n",
       "test.mpc:6:3: error: value '%q' is already defined in a nested graph"},
      {"graph @g(%c: bool[]) -> () {\n  %a = If(%c) {then_branch = graph @t() -> () {\n"
       "    Foo(%b)\n    return\n  }} : ?\n  %b = If(%c) {then_branch = graph @u() -> () {\n"
       "    Foo(%a)\n    return\n  }} : ?\n  return\n}\n",
       "test.mpc:1:1: error: the nodes of graph '@g' form a cycle through captured values"},
      {"graph @g(%c: bool[]) -> () {\n  %a = If(%c) {then_branch = graph @t() -> () {\n"
       "    Foo(%nowhere)\n    return\n  }} : ?\n  return\n}\n",
       "test.mpc:3:9: error: use of undefined value '%nowhere'"},
      {"graph @g() -> () {\n  return\n}\ntraining {\n  algorithm graph @s() -> () {\n"
       "    Foo(%missing)\n    return\n  }\n}\n",
       "test.mpc:6:9: error: use of undefined value '%missing'"},
      {"graph @g() -> () {\n  Foo() {s = \"a\\qb\"}\n  return\n}\n",
       "test.mpc:2:14: error: invalid escape in string"},
      {"graph @g() -> () {\n  Foo() {v = dense<f32[2]: splat(x)>}\n  return\n}\n",
       "test.mpc:2:34: error: expected a value of type f32, found 'x'"},
  };
  for (const ErrorCase &c : cases)
    EXPECT_EQ(parseError(c.text), c.message) << c.text;
}

//===----------------------------------------------------------------------===//
// Text -> ONNX -> text
//===----------------------------------------------------------------------===//

TEST(TextOnnx, RoundTripThroughOnnx) {
  for (const char *text : {kMlp, kNames, kAttrs, kTypes, kInits, kNested, kTraining})
    expectOnnxRoundTrip(text);
}

TEST(TextOnnx, NamesMapToOnnxNames) {
  auto m = parseOk(kNames);
  ASSERT_TRUE(m);
  onnx::ModelProto p;
  ASSERT_FALSE(bool(exportOnnx(*m, p)));
  const onnx::GraphProto &g = p.graph();
  EXPECT_EQ(g.name(), "main graph");
  EXPECT_EQ(g.input(0).name(), "in/0:x");
  EXPECT_EQ(g.node(0).name(), "fused/0");
  EXPECT_EQ(g.node(0).domain(), "com.microsoft");
  EXPECT_EQ(g.node(0).output(0), "a/b");
  EXPECT_EQ(g.node(2).input(1), "");
  EXPECT_EQ(g.node(3).output(1), "");
  EXPECT_EQ(g.output(0).name(), "out:0");
  EXPECT_EQ(g.input(0).type().tensor_type().shape().dim(2).dim_param(), "seq len");
}

TEST(TextOnnx, RealModelsRoundTrip) {
  std::error_code ec;
  std::string dir = std::string(MPC_SOURCE_DIR) + "/models";
  std::vector<std::string> files;
  for (llvm::sys::fs::directory_iterator it(dir, ec), e; it != e && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).endswith(".onnx"))
      files.push_back(it->path());
  std::sort(files.begin(), files.end());
  if (files.empty())
    GTEST_SKIP() << "no models in " << dir;
  for (const std::string &f : files) {
    SCOPED_TRACE(f);
    auto m = importOnnxFile(f);
    ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
    std::string text = modelToText(**m);
    expectRoundTrip(text);
    expectOnnxRoundTrip(text);
  }
}

//===----------------------------------------------------------------------===//
// Robustness: damaged input gives one error line, never a crash
//===----------------------------------------------------------------------===//

/// An error is one line, "test.mpc:<line>:<col>: error: <message>".
static bool isWellFormedError(const std::string &msg) {
  llvm::StringRef s(msg);
  if (!s.consume_front("test.mpc:") || s.contains('\n'))
    return false;
  unsigned line, col;
  if (s.consumeInteger(10, line) || !s.consume_front(":") || s.consumeInteger(10, col))
    return false;
  return line >= 1 && col >= 1 && s.startswith(": error: ") && s.size() > 9;
}

TEST(TextRobustness, EveryPrefixParsesOrFailsCleanly) {
  for (const char *text : {kMlp, kNames, kAttrs, kTypes, kInits, kNested, kTraining}) {
    llvm::StringRef full(text);
    for (size_t n = 0; n < full.size(); ++n) {
      auto m = parseModelText(full.take_front(n), "test.mpc");
      if (m)
        continue; // a prefix can be complete (e.g. without its last newline)
      std::string msg = llvm::toString(m.takeError());
      EXPECT_TRUE(isWellFormedError(msg)) << msg;
    }
  }
}

TEST(TextRobustness, MutantsFailCleanlyOrPrintStably) {
  const char replacements[] = {'%', '"', '{', '}', '(', ')', ',', ':', '_', 'x', '0', '-', '['};
  unsigned parsed = 0, failed = 0;
  for (const char *text : {kMlp, kNames, kAttrs, kTypes, kInits, kNested, kTraining}) {
    std::string base(text);
    for (size_t i = 0; i < base.size(); i += 3) {
      for (char r : replacements) {
        std::string mutant = base;
        mutant[i] = r;
        auto m = parseModelText(mutant, "test.mpc");
        if (!m) {
          std::string msg = llvm::toString(m.takeError());
          EXPECT_TRUE(isWellFormedError(msg)) << msg;
          ++failed;
          continue;
        }
        ++parsed;
        // What parses prints in the canonical form, which is a fixed point.
        std::string once = modelToText(**m);
        auto again = parseModelText(once, "test.mpc");
        ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError()) << "\nmutant:\n"
                                 << mutant << "\nprinted:\n"
                                 << once;
        EXPECT_EQ(modelToText(**again), once) << "mutant:\n" << mutant;
      }
    }
  }
  EXPECT_GT(parsed, 100u);
  EXPECT_GT(failed, 1000u);
  RecordProperty("parsed", parsed);
  RecordProperty("failed", failed);
}
