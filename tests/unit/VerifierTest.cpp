//===- VerifierTest.cpp - Structural and type invariants -------------------===//
//
// Each violated invariant is reported as one line that names the graph, the
// node (by name, or by position when unnamed) and the value.
//
//===----------------------------------------------------------------------===//
#include "mpc/Verify/Verifier.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Text/Text.h"
#include "gtest/gtest.h"
#include <random>

using namespace mpc;

namespace {

std::unique_ptr<Model> parse(llvm::StringRef text) {
  auto m = parseModelText(text, "verify.mpc");
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

/// The verifier's message for `text`, or "" when it verifies.
std::string verifyText(llvm::StringRef text, VerifyOptions opts = {}) {
  auto m = parse(text);
  if (!m)
    return "<parse error>";
  if (llvm::Error err = verifyModel(*m, opts))
    return llvm::toString(std::move(err));
  return "";
}

} // namespace

TEST(Verifier, AcceptsWellFormedModels) {
  EXPECT_EQ(verifyText(R"(graph @mlp(%x: f32[8,16], %w: f32[16,4]) -> (%y: f32[8,4]) {
  init %b: f32[4] = [0.5, 1, -2, 3]
  %mm = MatMul(%x, %w) : f32[8,4] name="fc1"
  %s = Add(%mm, %b) : f32[8,4]
  %y = Softmax(%s) {axis = -1} : f32[8,4]
  return %y
})"),
            "");
  // Captures, omitted optional inputs and outputs, custom ops, training.
  EXPECT_EQ(verifyText(R"(graph @g(%c: bool[], %x: f32[4]) -> (%r: f32[4]) {
  %n = Neg(%x) : f32[4]
  %cl = Clip(%n, _, %x) : f32[4]
  %d, _ = Dropout(%cl) : f32[4]
  %k = my.ops::Thing(%d, %c) : ?
  %r = If(%c) {
    else_branch = graph @e() -> (%e: f32[4]) {
      %e = Abs(%n) : f32[4]
      return %e
    },
    then_branch = graph @t() -> (%d: f32[4]) {
      return %d
    }
  } : f32[4]
  return %r
}
training {
  algorithm graph @step(%lr: f32[]) -> (%upd: f32[4]) {
    %upd = Mul(%x, %lr) : f32[4]
    return %upd
  }
})"),
            "");
}

TEST(Verifier, WrongInputCountNamesTheNode) {
  EXPECT_EQ(verifyText(R"(graph @g(%x: f32[4]) -> (%y: f32[4]) {
  %y = Add(%x) : f32[4] name="add1"
  return %y
})"),
            "graph 'g': node 'add1' (Add) has 1 input(s), Add-14 takes 2");
  // Unnamed nodes are named by position; an omitted input counts toward the
  // minimum (as in ONNX's checker: Loop(M, "") is valid), but a required one
  // omitted is named.
  EXPECT_EQ(verifyText(R"(graph @g(%x: f32[4]) -> (%y: f32[4]) {
  %r = Relu(%x) : f32[4]
  %y = Add(%r, _) : f32[4]
  return %y
})"),
            "graph 'g': node #1 (Add) omits its required input 'B'");
  EXPECT_EQ(verifyText(R"(graph @g(%x: f32[4]) -> (%y: f32[4]) {
  %y = Loop(_) : f32[4]
  return %y
})"),
            "graph 'g': node #0 (Loop) has 1 input(s), Loop-16 takes from 2 to any number");
  std::string many = verifyText(R"(graph @g(%x: f32[4]) -> () {
  %y = Clip(%x, %x, %x, %x) : f32[4]
  return
})");
  EXPECT_NE(many.find("node #0 (Clip) has 4 input(s), Clip-13 takes from 1 to 3"),
            std::string::npos)
      << many;
}

TEST(Verifier, WrongOutputCount) {
  std::string msg = verifyText(R"(graph @g(%x: f32[4]) -> () {
  %a, %b = Relu(%x) : f32[4], f32[4] name="r"
  return
})");
  EXPECT_NE(msg.find("node 'r' (Relu) has 2 output(s)"), std::string::npos) << msg;
}

TEST(Verifier, OmittedRequiredInput) {
  EXPECT_EQ(verifyText(R"(graph @g(%x: f32[4]) -> () {
  %y = Clip(_, %x) : f32[4] name="c"
  return
})"),
            "graph 'g': node 'c' (Clip) omits its required input 'input'");
}

TEST(Verifier, MixedTypesForOneTypeParameter) {
  EXPECT_EQ(verifyText(R"(graph @g(%a: f32[4], %b: f16[4]) -> () {
  %y = Add(%a, %b) : f32[4] name="mix"
  return
})"),
            "graph 'g': node 'mix' (Add) mixes f32 ('a') and f16 ('b') for type parameter T");
  // The output shares the parameter too.
  EXPECT_EQ(verifyText(R"(graph @g(%a: f32[4]) -> () {
  %y = Relu(%a) : f16[4] name="r"
  return
})"),
            "graph 'g': node 'r' (Relu) mixes f32 ('a') and f16 ('y') for type parameter T");
  // With checkTypes off, only structure is checked.
  VerifyOptions noTypes;
  noTypes.checkTypes = false;
  EXPECT_EQ(verifyText(R"(graph @g(%a: f32[4], %b: f16[4]) -> () {
  %y = Add(%a, %b) : f32[4]
  return
})",
                       noTypes),
            "");
}

TEST(Verifier, TypeTheSchemaRejects) {
  EXPECT_EQ(verifyText(R"(graph @g(%a: i64[4]) -> () {
  %y = Sqrt(%a) : i64[4] name="s"
  return
})"),
            "graph 'g': node 's' (Sqrt) input 'a' has type i64, which Sqrt-13 does not accept "
            "for T");
  EXPECT_EQ(verifyText(R"(graph @g(%a: f32[4], %s: f32[1]) -> () {
  %y = Reshape(%a, %s) : f32 name="rs"
  return
})"),
            "graph 'g': node 'rs' (Reshape) input 's' is f32, the schema wants i64");
}

TEST(Verifier, UseBeforeDefinition) {
  auto m = parse(R"(graph @g(%x: f32[4]) -> (%z: f32[4]) {
  %y = Relu(%x) : f32[4] name="first"
  %z = Neg(%y) : f32[4] name="second"
  return %z
})");
  ASSERT_TRUE(m);
  // Move the consumer in front of its producer.
  Graph &g = *m->graph;
  Node &second = g.nodes().back();
  g.nodes().remove(&second);
  g.nodes().push_front(&second);
  llvm::Error err = verifyModel(*m);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "graph 'g': node 'second' (Neg) uses 'y' before it is defined");
}

TEST(Verifier, ErrorsInsideBodiesNameTheBody) {
  EXPECT_EQ(verifyText(R"(graph @g(%c: bool[], %x: f32[4]) -> () {
  %r = If(%c) {
    else_branch = graph @e() -> (%e: f32[4]) {
      %e = Add(%x) : f32[4] name="inner"
      return %e
    },
    then_branch = graph @t() -> (%x: f32[4]) {
      return %x
    }
  } : f32[4]
  return
})"),
            "graph 'e': node 'inner' (Add) has 1 input(s), Add-14 takes 2");
}

// Scoping of nested graphs.

// verifyGraph() on a body sees the enclosing graphs' values.
TEST(Verifier, VerifyGraphOnABodySeesOuterValues) {
  auto m = parse(R"(graph @g(%c: bool[], %x: f32[4]) -> (%r: f32[4]) {
  %r = If(%c) {
    else_branch = graph @e() -> (%e: f32[4]) {
      %e = Abs(%x) : f32[4]
      return %e
    },
    then_branch = graph @t() -> (%x: f32[4]) {
      return %x
    }
  } : f32[4]
  return %r
})");
  ASSERT_TRUE(m);
  const Graph &body = *m->graph->nodes().front().attr("else_branch")->graphs[0];
  llvm::Error err = verifyGraph(body);
  EXPECT_FALSE(bool(err)) << llvm::toString(std::move(err));
}

// A value defined inside a body is not visible to the enclosing graph.
TEST(Verifier, BodyValuesDoNotLeakIntoTheEnclosingGraph) {
  auto m = parse(R"(graph @g(%c: bool[], %x: f32[4]) -> (%r: f32[4]) {
  %r = If(%c) {
    else_branch = graph @e() -> (%e: f32[4]) {
      %e = Abs(%x) : f32[4]
      return %e
    },
    then_branch = graph @t() -> (%x: f32[4]) {
      return %x
    }
  } : f32[4]
  return %r
})");
  ASSERT_TRUE(m);
  Graph &g = *m->graph;
  Value *inner = g.nodes().front().attr("else_branch")->graphs[0]->nodes().front().output(0);
  Node *bad = g.createNode("Neg");
  bad->addInput(inner);
  bad->setOutput(0, "bad", Type::tensor(DType::F32, {4}));
  llvm::Error err = verifyModel(*m);
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("uses 'e'"), std::string::npos);
}

// OpIndex (the verifier's, type inference's and the painting's signature
// table) caches op types in a small table where some common ones share a
// slot (Cast and MatMul, Exp and Identity, Concat and Sum): in any order of
// lookups each op type keeps the index it got first, and its signature.
TEST(OpIndexTest, OpTypesSharingACacheSlotKeepTheirIndexInAnyOrder) {
  auto m = parse(R"(graph @g(%x: f32[4]) -> (%y: f32[4]) {
  %y = Relu(%x) : f32[4]
  return %y
})");
  ASSERT_TRUE(m);
  Graph &g = *m->graph;
  const char *types[] = {"Cast",   "MatMul", "Exp", "Identity", "Concat",
                         "Sum",    "Relu",   "If",  "Loop",     "LayerNormalization",
                         "Custom", "Add"};
  std::vector<Node *> nodes;
  for (const char *t : types)
    nodes.push_back(g.createNode(t));
  OpIndex index;
  std::vector<unsigned> first;
  for (Node *n : nodes)
    first.push_back(index.indexOf(*n));
  for (unsigned k = 0; k < first.size(); ++k)
    EXPECT_EQ(first[k], k) << types[k]; // new op types take the next index
  // Lookups in a random order, many times over.
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    unsigned k = rng() % nodes.size();
    ASSERT_EQ(index.indexOf(*nodes[k]), first[k]) << types[k] << " in round " << round;
    ASSERT_EQ(index.signatureOf(*nodes[k]).sig, lookupSignature(*nodes[k]).sig) << types[k];
  }
  EXPECT_EQ(index.size(), nodes.size());
}
