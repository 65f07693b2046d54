//===- IRTest.cpp - Values, nodes, graphs and models -----------------------===//
//
// Use lists under every edit, fresh names, deterministic topological sorting
// with cycle detection, and values captured by nested graphs.
//
//===----------------------------------------------------------------------===//
#include "mpc/IR/Graph.h"
#include "mpc/Support/LargeAlloc.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>

using namespace mpc;

namespace {

/// A model with an empty main graph.
struct IRTest : ::testing::Test {
  Model m;
  Graph *g = nullptr;

  void SetUp() override {
    m.opsets.push_back({"", 17});
    m.graph = std::make_unique<Graph>(m);
    g = m.graph.get();
  }

  Value *input(const char *name) { return g->addInput(name, Type::tensor(DType::F32, {4})); }

  /// Appends `op(ins...)` to `graph` with one result named `out`.
  Node *node(Graph &graph, const char *op, std::vector<Value *> ins, const char *out) {
    Node *n = graph.createNode(op);
    for (Value *v : ins)
      n->addInput(v);
    n->setOutput(0, out, Type::tensor(DType::F32, {4}));
    return n;
  }

  /// The op types of a graph's nodes in list order.
  static std::vector<std::string> opOrder(const Graph &graph) {
    std::vector<std::string> ops;
    for (const Node &n : graph.nodes())
      ops.push_back(n.opType);
    return ops;
  }

  /// Attaches an empty body graph to `n` as attribute `name`.
  static Graph &addBody(Node &n, const char *name) {
    Attribute a;
    a.name = name;
    a.kind = AttrKind::Graph;
    a.graphs.push_back(std::make_unique<Graph>(n.model(), n.getParent(), &n));
    n.attrs.push_back(std::move(a));
    return *n.attrs.back().graphs[0];
  }
};

std::vector<Use> uses(const Value *v) { return v->uses().copy(); }

} // namespace

namespace mpc {
/// Readable use lists in failure messages.
void PrintTo(const Use &u, std::ostream *os) {
  *os << "{" << (u.user ? u.user->opType + "#" + std::to_string(u.user->id()) : "null") << ", "
      << u.operand << "}";
}
} // namespace mpc

TEST_F(IRTest, UseListsFollowSetInputAndAddInput) {
  Value *x = input("x");
  Node *relu = node(*g, "Relu", {x}, "y");
  Value *y = relu->output(0);
  EXPECT_EQ(uses(x), (std::vector<Use>{{relu, 0}}));
  EXPECT_EQ(y->producer(), relu);
  EXPECT_EQ(y->producerResult(), 0u);

  Node *add = node(*g, "Add", {y, y}, "z");
  EXPECT_EQ(uses(y), (std::vector<Use>{{add, 0}, {add, 1}}));
  add->setInput(1, x);
  EXPECT_EQ(uses(y), (std::vector<Use>{{add, 0}}));
  EXPECT_EQ(uses(x), (std::vector<Use>{{relu, 0}, {add, 1}}));
  add->setInput(1, x); // no-op: same value
  EXPECT_EQ(x->uses().size(), 2u);
  add->setInput(0, nullptr); // omitted optional input
  EXPECT_FALSE(y->hasUses());
  EXPECT_EQ(add->input(0), nullptr);
  add->addInput(nullptr);
  EXPECT_EQ(add->numInputs(), 3u);
  add->addInput(y);
  EXPECT_EQ(uses(y), (std::vector<Use>{{add, 3}}));

  add->dropAllInputs();
  EXPECT_FALSE(y->hasUses());
  EXPECT_EQ(uses(x), (std::vector<Use>{{relu, 0}}));
}

TEST_F(IRTest, EraseNodeDropsItsUses) {
  Value *x = input("x");
  Node *a = node(*g, "Relu", {x}, "a");
  Node *b = node(*g, "Mul", {a->output(0), x}, "b");
  g->addOutput(a->output(0));
  Value *bOut = b->output(0);
  g->eraseNode(b);
  EXPECT_EQ(uses(x), (std::vector<Use>{{a, 0}}));
  EXPECT_FALSE(a->output(0)->hasUses());
  EXPECT_EQ(bOut->producer(), nullptr); // the value outlives its producer
  EXPECT_EQ(g->size(), 1u);
  EXPECT_TRUE(a->output(0)->isGraphOutput());
}

TEST_F(IRTest, ReplaceAllUsesWithMovesUsesButNotGraphOutputs) {
  Value *x = input("x");
  Value *w = input("w");
  Node *a = node(*g, "Relu", {x}, "a");
  Value *av = a->output(0);
  Node *b = node(*g, "Add", {av, av}, "b");
  Node *cond = node(*g, "Cast", {x}, "c");
  Node *ifNode = node(*g, "If", {cond->output(0)}, "r");
  Graph &body = addBody(*ifNode, "then_branch");
  Node *inner = node(body, "Neg", {av}, "inner");
  body.addOutput(inner->output(0));
  g->addOutput(av);

  Graph::replaceAllUsesWith(av, w);
  EXPECT_FALSE(av->hasUses());
  EXPECT_EQ(b->input(0), w);
  EXPECT_EQ(b->input(1), w);
  EXPECT_EQ(inner->input(0), w); // the capture moved too
  EXPECT_EQ(w->uses().size(), 3u);
  EXPECT_EQ(g->outputs()[0], av); // outputs are not uses
  EXPECT_EQ(av->numGraphOutputRefs(), 1u);

  g->setOutput(0, w);
  EXPECT_FALSE(av->isGraphOutput());
  EXPECT_TRUE(w->isGraphOutput());
}

TEST_F(IRTest, FreshNamesAvoidEveryTakenName) {
  input("x");
  EXPECT_TRUE(m.isNameTaken("x"));
  EXPECT_EQ(m.freshName("y"), "y");
  EXPECT_EQ(m.freshName("y"), "y_1");
  EXPECT_EQ(m.freshName("x"), "x_1");
  g->addInput("x_2", Type());
  m.reserveName("x_3");
  EXPECT_EQ(m.freshName("x"), "x_4");
  EXPECT_EQ(m.freshName("x"), "x_5");
  EXPECT_EQ(m.freshName("y"), "y_2");
  // Names created for nodes of nested graphs share the model's name space.
  Node *n = node(*g, "If", {}, "r");
  node(addBody(*n, "then_branch"), "Neg", {}, "z");
  EXPECT_EQ(m.freshName("z"), "z_1");
}

TEST_F(IRTest, SortTopologicallyFollowsDataAndBreaksTiesByOrder) {
  Value *x = input("x");
  // Created consumer-first: C(b), B(a), A(x); plus independent D and E.
  Node *c = g->createNode("C");
  Node *b = g->createNode("B");
  Node *a = node(*g, "A", {x}, "a");
  Node *d = node(*g, "D", {x}, "d");
  b->addInput(a->output(0));
  b->setOutput(0, "b", Type());
  c->addInput(b->output(0));
  c->setOutput(0, "c", Type());
  Node *e = node(*g, "E", {}, "e");
  (void)d;
  (void)e;
  ASSERT_TRUE(g->sortTopologically());
  // A is the first ready node by order key (C=0, B=1, A=2, D=3, E=4); B and
  // C become ready only after it, and the ready ones go smallest key first.
  EXPECT_EQ(opOrder(*g), (std::vector<std::string>{"A", "B", "C", "D", "E"}));

  // Sorting again changes nothing; renumbering makes keys follow the list.
  ASSERT_TRUE(g->sortTopologically());
  EXPECT_EQ(opOrder(*g), (std::vector<std::string>{"A", "B", "C", "D", "E"}));
  g->renumber();
  unsigned k = 0;
  for (const Node &n : g->nodes())
    EXPECT_EQ(n.order(), k++);
}

TEST_F(IRTest, SortTopologicallyIsDeterministicAcrossBuilds) {
  auto build = [](Model &model) {
    model.graph = std::make_unique<Graph>(model);
    Graph &graph = *model.graph;
    Value *x = graph.addInput("x", Type());
    std::vector<Node *> nodes;
    // A wide diamond lattice created in a scrambled order.
    for (int i = 0; i < 20; ++i)
      nodes.push_back(graph.createNode("N" + std::to_string((i * 7) % 20)));
    for (int i = 0; i < 20; ++i) {
      int id = (i * 7) % 20;
      Node *n = nodes[i];
      n->setOutput(0, "v" + std::to_string(id), Type());
      if (id < 4)
        n->addInput(x);
    }
    for (int i = 0; i < 20; ++i) {
      int id = (i * 7) % 20;
      if (id < 4)
        continue;
      for (int j = 0; j < 20; ++j) {
        int pid = (j * 7) % 20;
        if (pid == id - 4 || pid == id - 3)
          nodes[i]->addInput(nodes[j]->output(0));
      }
    }
    return graph.sortTopologically();
  };
  Model m1, m2;
  ASSERT_TRUE(build(m1));
  ASSERT_TRUE(build(m2));
  EXPECT_EQ(opOrder(*m1.graph), opOrder(*m2.graph));
  // Every input is defined before use.
  std::set<const Value *> seen(m1.graph->inputs().begin(), m1.graph->inputs().end());
  for (const Node &n : m1.graph->nodes()) {
    for (const Value *v : n.inputs())
      EXPECT_TRUE(seen.count(v)) << n.opType;
    seen.insert(n.output(0));
  }
}

TEST_F(IRTest, SortTopologicallyDetectsCyclesAndLeavesTheListAlone) {
  Value *x = input("x");
  Node *a = g->createNode("A");
  Node *b = g->createNode("B");
  Node *c = node(*g, "C", {x}, "c");
  a->setOutput(0, "a", Type());
  b->setOutput(0, "b", Type());
  a->addInput(b->output(0));
  b->addInput(a->output(0));
  (void)c;
  EXPECT_FALSE(g->sortTopologically());
  EXPECT_EQ(opOrder(*g), (std::vector<std::string>{"A", "B", "C"}));
}

TEST_F(IRTest, SortTopologicallyCountsNestedCaptures) {
  Value *cond = g->addInput("cond", Type::tensor(DType::Bool, {}));
  Node *ifNode = node(*g, "If", {cond}, "r");
  Node *late = node(*g, "Late", {}, "late");
  Graph &body = addBody(*ifNode, "then_branch");
  Node *deep = g->createNode("Unused"); // keeps a tie to check ordering
  (void)deep;
  // The body's body captures %late two levels down.
  Node *innerIf = node(body, "If", {cond}, "ir");
  Graph &innerBody = addBody(*innerIf, "then_branch");
  Node *use = node(innerBody, "Neg", {late->output(0)}, "neg");
  innerBody.addOutput(use->output(0));
  body.addOutput(innerIf->output(0));
  EXPECT_EQ(late->output(0)->uses().size(), 1u);
  EXPECT_EQ(late->output(0)->uses().front().user->getParent(), &innerBody);

  ASSERT_TRUE(g->sortTopologically());
  EXPECT_EQ(opOrder(*g), (std::vector<std::string>{"Late", "If", "Unused"}));
}

TEST_F(IRTest, NestedGraphsCaptureAndReleaseOuterValues) {
  Value *x = input("x");
  Value *cond = g->addInput("cond", Type::tensor(DType::Bool, {}));
  Node *ifNode = node(*g, "If", {cond}, "r");
  Graph &then = addBody(*ifNode, "then_branch");
  EXPECT_EQ(then.parent(), g);
  EXPECT_EQ(then.owningNode(), ifNode);
  EXPECT_EQ(&then.model(), &m);
  Node *inner = node(then, "Neg", {x}, "neg");
  then.addOutput(inner->output(0));
  EXPECT_EQ(inner->output(0)->graph(), &then);
  EXPECT_EQ(uses(x), (std::vector<Use>{{inner, 0}}));
  EXPECT_EQ(&inner->model(), &m);

  int graphs = 0;
  forEachGraph(*g, [&](Graph &) { ++graphs; });
  EXPECT_EQ(graphs, 2);

  // Erasing the If destroys its body, which drops the body's use of %x.
  g->eraseNode(ifNode);
  EXPECT_FALSE(x->hasUses());
}

TEST_F(IRTest, InitializersAndInputDefaults) {
  Tensor t(DType::F32, {2});
  t.setBytes(std::vector<uint8_t>(8, 0));
  Value *w = g->addInitializer("w", t);
  EXPECT_TRUE(w->isConstant());
  EXPECT_EQ(w->type, Type::tensor(DType::F32, {2}));
  EXPECT_EQ(w->initializer()->name, "w");
  Value *in = input("in");
  g->setInputDefault(in, t);
  EXPECT_EQ(in->kind(), ValueKind::GraphInput);
  EXPECT_EQ(in->initializer()->name, "in");
  EXPECT_EQ(g->initializers().size(), 2u);
  g->eraseInitializer(w);
  EXPECT_EQ(g->initializers().size(), 1u);
  EXPECT_EQ(w->initializer(), nullptr);
}

TEST_F(IRTest, OpsetsAndQualifiedNames) {
  m.opsets.push_back({"com.microsoft", 1});
  EXPECT_EQ(m.opsetVersion(""), 17);
  EXPECT_EQ(m.opsetVersion("ai.onnx"), 17);
  EXPECT_EQ(m.opsetVersion("com.microsoft"), 1);
  EXPECT_EQ(m.opsetVersion("com.other"), -1);
  Node *a = g->createNode("Add");
  Node *f = g->createNode("FusedMatMul", "com.microsoft");
  Node *o = g->createNode("Relu", "ai.onnx");
  EXPECT_EQ(a->qualifiedOpType(), "Add");
  EXPECT_EQ(f->qualifiedOpType(), "com.microsoft::FusedMatMul");
  EXPECT_EQ(o->qualifiedOpType(), "Relu");
  EXPECT_EQ(f->opsetVersion(), 1);
  EXPECT_EQ(o->opsetVersion(), 17);
}

TEST_F(IRTest, AttributesAreAddedOrReplaced) {
  Node *n = g->createNode("Softmax");
  n->setAttr(Attribute::makeInt("axis", 1));
  n->setAttr(Attribute::makeInt("axis", -1));
  n->setAttr(Attribute::makeFloat("alpha", 0.5f));
  n->setAttr(Attribute::makeString("mode", "x"));
  ASSERT_EQ(n->attrs.size(), 3u);
  EXPECT_EQ(n->intAttr("axis", 0), -1);
  EXPECT_EQ(n->intAttr("alpha", 7), 7); // wrong kind: the default
  EXPECT_FLOAT_EQ(n->floatAttr("alpha", 0), 0.5f);
  EXPECT_EQ(n->stringAttr("mode", ""), "x");
  EXPECT_EQ(n->attr("missing"), nullptr);
}

TEST_F(IRTest, CreateNodeInsertsAndInheritsOrder) {
  Node *a = g->createNode("A");
  Node *c = g->createNode("C");
  Node *b = g->createNode("B", "", c->getIterator(), a);
  EXPECT_EQ(opOrder(*g), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(b->order(), a->order());
  EXPECT_EQ(b->getParent(), g);
}

TEST(TypeTest, CopiesAreDeepAndCompareByValue) {
  Type seq = Type::wrap(TypeKind::Sequence, Type::tensor(DType::F32, {2, 3}));
  Type copy = seq;
  EXPECT_EQ(copy, seq);
  copy.setTensorElemType(DType::F16);
  EXPECT_EQ(copy.tensorElemType(), DType::F16);
  EXPECT_EQ(seq.tensorElemType(), DType::F32);
  EXPECT_NE(copy, seq);
  EXPECT_EQ(Type::tensor(DType::F32, {2, 3}).numElements(), 6);
  Type sym = Type::tensor(DType::F32, {2});
  sym.dims.push_back(Dim::symbolic("n"));
  EXPECT_EQ(sym.numElements(), -1);
  EXPECT_EQ(Type().tensorElemType(), DType::Undefined);
  Type mixed = Type::tensor(DType::F32, {2});
  mixed.dims.push_back(Dim::symbolic("batch"));
  mixed.dims.push_back(Dim{});
  EXPECT_EQ(mixed.dimsText(), "[2, batch, ?]");
  EXPECT_EQ(mixed.dimsText(","), "[2,batch,?]");
  EXPECT_EQ(Type::tensor(DType::F32, {}).dimsText(), "[]");
}

TEST(LargeAllocTest, ZeroedBlocksOnBothSidesOfTheThreshold) {
  for (size_t bytes : {size_t(64), kHugePageThreshold - 8, kHugePageThreshold,
                       kHugePageThreshold * 3 + 100}) {
    auto *p = static_cast<unsigned char *>(allocateLarge(bytes, /*zeroed=*/true));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignof(std::max_align_t), 0u);
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i += 4093)
      nonzero += p[i] != 0;
    EXPECT_EQ(nonzero, 0u) << bytes;
    p[0] = p[bytes - 1] = 0xAB; // writable to the end
    deallocateLarge(p, bytes);
  }
}

TEST(LargeAllocTest, ArenaSlabsGrowAndKeepEveryObject) {
  // 2 million 24-byte objects: slabs double from 4 KiB past the huge-page
  // threshold, and every object keeps its own bytes.
  IRArena arena;
  std::vector<uint64_t *> objs;
  for (uint64_t i = 0; i < 2000000; ++i) {
    auto *o = arena.Allocate<uint64_t>(3);
    o[0] = i;
    o[2] = ~i;
    objs.push_back(o);
  }
  for (uint64_t i = 0; i < objs.size(); i += 997)
    ASSERT_TRUE(objs[i][0] == i && objs[i][2] == ~i) << i;
  EXPECT_GE(arena.getTotalMemory(), 2000000u * 24);
  EXPECT_LT(arena.getTotalMemory(), 4 * 2000000u * 24); // doubling wastes < 2x
}

TEST(RareVectorTest, EmptyUntilSetAndReadsLikeAVector) {
  static_assert(sizeof(RareVector<int64_t>) == sizeof(void *), "one pointer");
  RareVector<int64_t> a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.begin(), a.end());
  EXPECT_EQ(a, std::vector<int64_t>{});
  a.push_back(3);
  a.emplace_back(-1);
  int64_t more[] = {7, 8};
  a.insert(a.begin() + 1, more, more + 2);
  EXPECT_EQ(a, (std::vector<int64_t>{3, 7, 8, -1}));
  EXPECT_EQ(a.front(), 3);
  EXPECT_EQ(a.back(), -1);
  EXPECT_EQ(a.at(2), 8);
  EXPECT_THROW((void)a.at(4), std::out_of_range);
  RareVector<int64_t> b = a; // deep copy
  b[0] = 4;
  EXPECT_EQ(a[0], 3);
  EXPECT_NE(a, b);
  std::vector<int64_t> asVector = a;
  EXPECT_EQ(asVector, (std::vector<int64_t>{3, 7, 8, -1}));
  a = std::vector<int64_t>{};
  EXPECT_TRUE(a.empty());
  RareVector<std::unique_ptr<int>> owners; // move-only elements
  owners.push_back(std::make_unique<int>(5));
  RareVector<std::unique_ptr<int>> moved = std::move(owners);
  EXPECT_EQ(*moved[0], 5);
}

TEST(AttributeTest, ListPayloadsAreOnePointerEach) {
  Attribute a = Attribute::makeInts("axes", {0, 2});
  EXPECT_EQ(a.ints, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(a.floats.empty() && a.strings.empty() && a.tensors.empty() && a.graphs.empty() &&
              a.opaque.empty());
  Attribute c = a.copyWithoutGraphs();
  EXPECT_EQ(c.ints, a.ints);
  EXPECT_LE(sizeof(Attribute), 160u); // was 256 with six std::vectors
}

TEST(GraphTest, RareFieldsStayEmptyAndKeepWhatIsSet) {
  Model m;
  Graph g(m);
  EXPECT_TRUE(g.docString.empty() && g.unknownFields.empty() && g.sparseInitializers.empty() &&
              g.quantizationAnnotations.empty());
  g.docString = std::string("body");
  g.sparseInitializers.push_back("\x0a\x01s");
  EXPECT_EQ(g.docString.str(), "body");
  EXPECT_EQ(g.sparseInitializers, std::vector<std::string>{"\x0a\x01s"});
  EXPECT_LE(sizeof(Graph), 216u); // was 288 with two std::strings and two vectors
}

TEST(RareStringTest, EmptyUntilSetAndCopiesDeep) {
  RareString a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.str(), "");
  a = std::string("doc");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a.str(), "doc");
  RareString b = a;
  b = llvm::StringRef("other");
  EXPECT_EQ(a.str(), "doc"); // the copy owns its own string
  EXPECT_EQ(b.ref(), "other");
  EXPECT_NE(a, b);
  b = "doc";
  EXPECT_EQ(a, b);
  // Setting the empty string empties it: unset and "" are one state, as the
  // exporter treats them (an empty field is not written).
  b = "";
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b, RareString());
  RareString moved = std::move(a);
  EXPECT_EQ(moved.str(), "doc");
  const std::string &asString = moved; // reads as a std::string
  EXPECT_EQ(asString, "doc");
  moved.clear();
  EXPECT_TRUE(moved.empty());
}

TEST(TensorTest, BorrowedBytesStayValidInCopiesAndAreDroppedOnWrite) {
  auto buffer = std::make_shared<std::vector<uint8_t>>(std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
  Tensor t(DType::U8, {4});
  t.setBorrowedBytes(llvm::makeArrayRef(buffer->data() + 1, 4), buffer);
  EXPECT_EQ(t.bytes().data(), buffer->data() + 1); // no copy
  EXPECT_EQ(t.getAsDouble(0), 2.0);
  Tensor copy = t;
  std::weak_ptr<std::vector<uint8_t>> watch = buffer;
  buffer.reset();
  EXPECT_FALSE(watch.expired()); // the tensors keep it alive
  EXPECT_EQ(copy.bytes(), llvm::makeArrayRef<uint8_t>({2, 3, 4, 5}));
  t.setBytes({9, 9, 9, 9});
  EXPECT_EQ(t.bytes(), llvm::makeArrayRef<uint8_t>({9, 9, 9, 9}));
  EXPECT_FALSE(watch.expired());
  copy.setBytes({7, 7, 7, 7});
  EXPECT_TRUE(watch.expired()); // the last borrower let go
  ExternalRef r;
  r.location = "w.bin";
  copy.setExternal(r);
  Tensor externalCopy = copy;
  ASSERT_TRUE(externalCopy.isExternal());
  EXPECT_EQ(externalCopy.externalRef()->location, "w.bin");
  // Copies are independent: replacing one's record leaves the other's alone.
  r.location = "other.bin";
  copy.setExternal(r);
  EXPECT_EQ(externalCopy.externalRef()->location, "w.bin");
  EXPECT_EQ(copy.externalRef()->location, "other.bin");
  copy.setBytes({1, 2, 3, 4});
  EXPECT_FALSE(copy.isExternal());
  EXPECT_TRUE(externalCopy.isExternal());
}

TEST_F(IRTest, IdsAreDenseAndUniqueAcrossNestedGraphs) {
  Value *x = input("x");
  Node *a = node(*g, "Relu", {x}, "a");
  Graph &body = addBody(*a, "body");
  Node *inner = node(body, "Neg", {x}, "i");
  Node *b = node(*g, "Abs", {a->output(0)}, "b");
  EXPECT_EQ(m.valueIdBound(), 4u);
  EXPECT_EQ(m.nodeIdBound(), 3u);
  std::set<unsigned> valueIds{x->id(), a->output(0)->id(), inner->output(0)->id(),
                              b->output(0)->id()};
  std::set<unsigned> nodeIds{a->id(), inner->id(), b->id()};
  EXPECT_EQ(valueIds, (std::set<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(nodeIds, (std::set<unsigned>{0, 1, 2}));
  // Erasing does not hand an id out again.
  g->eraseNode(b);
  Node *c = node(*g, "Abs", {a->output(0)}, "c");
  EXPECT_EQ(c->id(), 3u);
  EXPECT_EQ(c->output(0)->id(), 4u);
  EXPECT_EQ(m.valueIdBound(), 5u);
}

TEST(NameTableTest, InsertsFindsAndKeepsBindingsAcrossGrowth) {
  NameTable t;
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i)
    names.push_back("v" + std::to_string(i));
  bool inserted = false;
  for (const std::string &n : names) {
    t.insert(NameTable::key(n), inserted);
    EXPECT_TRUE(inserted) << n;
  }
  // Bind every other name to a distinct (fake) value, then grow the table.
  std::vector<char> dummy(names.size());
  for (size_t i = 0; i < names.size(); i += 2)
    t.insert(NameTable::key(names[i]), inserted) = reinterpret_cast<Value *>(&dummy[i]);
  t.reserve(100000);
  EXPECT_EQ(t.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    Value **slot = t.find(NameTable::key(names[i]));
    ASSERT_NE(slot, nullptr) << names[i];
    EXPECT_EQ(*slot, i % 2 ? nullptr : reinterpret_cast<Value *>(&dummy[i])) << names[i];
  }
  EXPECT_EQ(t.find(NameTable::key("v5000")), nullptr);
  // The empty name is a name like any other; keys are copied, not referenced.
  EXPECT_EQ(t.find(NameTable::key("")), nullptr);
  t.insert(NameTable::key(""), inserted);
  EXPECT_TRUE(inserted);
  EXPECT_NE(t.find(NameTable::key("")), nullptr);
  std::string temp = "transient";
  t.insert(NameTable::key(temp), inserted);
  temp = "overwritten";
  EXPECT_NE(t.find(NameTable::key("transient")), nullptr);
  EXPECT_EQ(t.find(NameTable::key("overwritten")), nullptr);
  t.insert(NameTable::key("transient"), inserted);
  EXPECT_FALSE(inserted);
  // Small tables are heap blocks, large ones (4 MiB and up) mappings; growing
  // across both kinds keeps every binding.
  t.reserve(1000000);
  for (size_t i = 0; i < names.size(); i += 999)
    EXPECT_EQ(*t.find(NameTable::key(names[i])),
              i % 2 ? nullptr : reinterpret_cast<Value *>(&dummy[i]));
}

// Names with one hash (the table's and so the slot tag's) are still told
// apart by their length and characters; bindings stay where they were across
// growth (the table hands out references to them).
TEST(NameTableTest, KeysDependOnEveryByteAndSpreadOverSlots) {
  // A change of any one byte, at any length (each of the hash's length
  // classes: 0-3, 4-7, 8-16, longer), gives another hash.
  for (size_t len = 0; len <= 40; ++len) {
    std::string base(len, 'a');
    std::set<uint32_t> seen = {NameTable::key(base).hash()};
    for (size_t at = 0; at < len; ++at)
      for (char c : {'b', '0', '/', char(0x80), char(0)}) {
        std::string s = base;
        s[at] = c;
        EXPECT_TRUE(seen.insert(NameTable::key(s).hash()).second) << "length " << len << " byte " << at;
      }
    EXPECT_TRUE(seen.insert(NameTable::key(base + 'a').hash()).second) << "length " << len;
  }
  // Names that differ in a counter fill the low bits (the slot) and the
  // high bits (the tag) as random ones would: 2^16 names into 2^16 buckets
  // leave about 1/e of them empty.
  std::vector<bool> low(1 << 16), high(1 << 16);
  for (unsigned i = 0; i < (1u << 16); ++i) {
    uint32_t h = NameTable::key("/layer." + std::to_string(i) + "/MatMul_output_0").hash();
    low[h & 0xffff] = true;
    high[h >> 16] = true;
  }
  size_t lowUsed = std::count(low.begin(), low.end(), true);
  size_t highUsed = std::count(high.begin(), high.end(), true);
  EXPECT_GT(lowUsed, 40000u);  // random: ~41,400
  EXPECT_GT(highUsed, 40000u);
}

TEST(NameTableTest, NamesSharingAHashAreDistinct) {
  NameTable t;
  const char *names[] = {"", "a", "b", "ab", "ba", "abc", "a much longer name than the others"};
  std::vector<Value **> bindings;
  std::vector<char> dummy(std::size(names));
  bool inserted = false;
  for (size_t i = 0; i < std::size(names); ++i) {
    Value *&b = t.insert(llvm::CachedHashStringRef(names[i], 7), inserted);
    EXPECT_TRUE(inserted) << names[i];
    b = reinterpret_cast<Value *>(&dummy[i]);
    bindings.push_back(&b);
  }
  for (int i = 0; i < 20000; ++i) // several doublings
    t.insert(NameTable::key("filler" + std::to_string(i)), inserted);
  for (size_t i = 0; i < std::size(names); ++i) {
    Value **found = t.find(llvm::CachedHashStringRef(names[i], 7));
    ASSERT_NE(found, nullptr) << names[i];
    EXPECT_EQ(found, bindings[i]) << names[i];
    EXPECT_EQ(*found, reinterpret_cast<Value *>(&dummy[i])) << names[i];
    t.insert(llvm::CachedHashStringRef(names[i], 7), inserted);
    EXPECT_FALSE(inserted) << names[i];
  }
  EXPECT_EQ(t.find(llvm::CachedHashStringRef("abd", 7)), nullptr);
  EXPECT_EQ(t.find(llvm::CachedHashStringRef("a", 8)), nullptr);
  EXPECT_EQ(t.size(), std::size(names) + 20000);
}

TEST_F(IRTest, UsesCarryTheirUsersId) {
  Value *x = input("x");
  node(*g, "Relu", {x}, "a");
  Node *b = node(*g, "Abs", {x}, "b");
  ASSERT_EQ(x->uses().size(), 2u);
  for (const Use &u : x->uses())
    EXPECT_EQ(u.userId, u.user->id());
  Value *y = input("y");
  b->setInput(0, y);
  ASSERT_EQ(y->uses().size(), 1u);
  EXPECT_EQ(y->uses().front().userId, b->id());
  EXPECT_EQ(x->uses().size(), 1u);
}

/// Users n[0..k) of one value, each reading it as input 0.
static std::vector<Node *> usersOf(Graph &g, Value *v, unsigned k) {
  std::vector<Node *> out;
  for (unsigned i = 0; i < k; ++i) {
    Node *n = g.createNode("Relu");
    n->addInput(v);
    out.push_back(n);
  }
  return out;
}

/// The uses {n, 0} for the nodes of `ns`, in that order.
static std::vector<Use> usesAt0(const std::vector<Node *> &ns) {
  std::vector<Use> out;
  for (Node *n : ns)
    out.push_back({n, 0, n->id()});
  return out;
}

TEST_F(IRTest, UseListKeepsAddOrderUnderRemovalsAnywhere) {
  Value *w = input("w");
  Value *other = input("other");
  std::vector<Node *> n = usersOf(*g, w, 8);
  n[0]->setInput(0, other); // first
  n[7]->setInput(0, other); // last
  n[3]->setInput(0, other); // middle
  EXPECT_EQ(uses(w), usesAt0({n[1], n[2], n[4], n[5], n[6]}));
  EXPECT_EQ(w->numUses(), 5u);
  n[3]->setInput(0, w); // back again: appended
  n[0]->setInput(0, w);
  EXPECT_EQ(uses(w), usesAt0({n[1], n[2], n[4], n[5], n[6], n[3], n[0]}));
  EXPECT_EQ(uses(other), usesAt0({n[7]}));
  // Remove all but one, from the middle outwards; the survivor stays.
  for (Node *k : {n[5], n[4], n[6], n[2], n[3], n[0]})
    k->setInput(0, nullptr);
  EXPECT_EQ(uses(w), usesAt0({n[1]}));
  n[1]->setInput(0, nullptr);
  EXPECT_FALSE(w->hasUses());
  EXPECT_EQ(w->uses().storageSize(), 0u);
  EXPECT_EQ(w->uses().begin(), w->uses().end());
  n[6]->setInput(0, w);
  EXPECT_EQ(uses(w), usesAt0({n[6]}));
}

TEST_F(IRTest, UseListOfANodeReadingAValueTwice) {
  Value *x = input("x");
  Value *y = input("y");
  Node *a = node(*g, "Add", {x, x}, "a");
  Node *b = node(*g, "Mul", {x, x}, "b");
  EXPECT_EQ(uses(x), (std::vector<Use>{{a, 0}, {a, 1}, {b, 0}, {b, 1}}));
  a->setInput(1, y);
  b->setInput(0, y);
  EXPECT_EQ(uses(x), (std::vector<Use>{{a, 0}, {b, 1}}));
  EXPECT_EQ(uses(y), (std::vector<Use>{{a, 1}, {b, 0}}));
  a->setInput(1, x); // the same node again, the other slot
  EXPECT_EQ(uses(x), (std::vector<Use>{{a, 0}, {b, 1}, {a, 1}}));
  g->eraseNode(b);
  EXPECT_EQ(uses(x), (std::vector<Use>{{a, 0}, {a, 1}}));
  EXPECT_FALSE(y->hasUses());
}

TEST_F(IRTest, ReplaceAllUsesWithAppendsTheUsesInOrder) {
  Value *from = input("from");
  Value *to = input("to");
  Node *t = node(*g, "Neg", {to}, "t");
  std::vector<Node *> n = usersOf(*g, from, 6);
  Node *both = node(*g, "Add", {from, to}, "both");
  n[2]->setInput(0, nullptr); // a hole in `from`'s list
  Graph::replaceAllUsesWith(from, to);
  EXPECT_FALSE(from->hasUses());
  EXPECT_EQ(from->uses().storageSize(), 0u);
  // `to`'s own uses first, then `from`'s in their order.
  EXPECT_EQ(uses(to), (std::vector<Use>{{t, 0}, {both, 1}, {n[0], 0}, {n[1], 0}, {n[3], 0},
                                        {n[4], 0}, {n[5], 0}, {both, 0}}));
  for (Node *k : n)
    EXPECT_EQ(k->input(0), k == n[2] ? nullptr : to);
  // The moved uses are removable one by one (their slots know where they are).
  both->setInput(0, from);
  n[0]->setInput(0, nullptr);
  EXPECT_EQ(uses(to), (std::vector<Use>{{t, 0}, {both, 1}, {n[1], 0}, {n[3], 0}, {n[4], 0},
                                        {n[5], 0}}));
  EXPECT_EQ(uses(from), (std::vector<Use>{{both, 0}}));
}

/// Random edits against a plain model of the use lists (append, erase in
/// place), checking after every edit the order, the counts, the inputs and the
/// bound on holes.
TEST_F(IRTest, UseListsMatchAPlainModelUnderRandomEdits) {
  std::vector<Value *> vals;
  for (const char *name : {"a", "b", "c", "d", "e"})
    vals.push_back(input(name));
  std::vector<Node *> nodes;
  for (unsigned i = 0; i < 12; ++i) {
    nodes.push_back(g->createNode("Op"));
    vals.push_back(nodes.back()->setOutput(0, "r" + std::to_string(i),
                                           Type::tensor(DType::F32, {4})));
  }
  std::map<const Value *, std::vector<Use>> model;
  std::map<const Node *, std::vector<Value *>> ins;
  std::mt19937 rng(1234);
  auto pick = [&](size_t n) { return static_cast<unsigned>(rng() % n); };
  auto pickValue = [&]() -> Value * { return pick(8) == 0 ? nullptr : vals[pick(vals.size())]; };
  auto modelRemove = [&](Value *v, Node *n, unsigned i) {
    auto &l = model[v];
    auto it = std::find(l.begin(), l.end(), Use{n, i, 0});
    ASSERT_NE(it, l.end());
    l.erase(it);
  };
  for (unsigned step = 0; step < 20000; ++step) {
    Node *n = nodes[pick(nodes.size())];
    unsigned op = pick(10);
    if (op < 2 || n->numInputs() == 0) { // addInput
      Value *v = pickValue();
      n->addInput(v);
      ins[n].push_back(v);
      if (v)
        model[v].push_back({n, n->numInputs() - 1, n->id()});
    } else if (op < 8) { // setInput
      unsigned i = pick(n->numInputs());
      Value *v = pickValue(), *old = ins[n][i];
      n->setInput(i, v);
      if (old != v) {
        if (old)
          modelRemove(old, n, i);
        if (v)
          model[v].push_back({n, i, n->id()});
        ins[n][i] = v;
      }
    } else if (op == 8) { // replaceAllUsesWith
      Value *from = vals[pick(vals.size())], *to = vals[pick(vals.size())];
      if (from == to)
        continue;
      Graph::replaceAllUsesWith(from, to);
      for (const Use &u : model[from]) {
        ins[u.user][u.operand] = to;
        model[to].push_back(u);
      }
      model[from].clear();
    } else if (n->numInputs() > 12) { // dropAllInputs keeps long input lists short
      for (unsigned i = 0; i < n->numInputs(); ++i)
        if (ins[n][i])
          modelRemove(ins[n][i], n, i);
      n->dropAllInputs();
      for (Value *&v : ins[n])
        v = nullptr;
    }
    for (Value *v : vals) {
      ASSERT_EQ(uses(v), model[v]) << "value '" << v->name() << "' after step " << step;
      ASSERT_EQ(v->numUses(), model[v].size());
      ASSERT_LE(v->uses().storageSize(), 2 * v->numUses()) << "more holes than uses";
    }
    for (Node *k : nodes)
      ASSERT_EQ(k->inputs(), ins[k]);
  }
}

/// Removing the uses of a value with many of them, in any order, touches a
/// number of use-list entries linear in the number of removals (the old use
/// vector erased from the middle: quadratic). Counted, not timed.
TEST_F(IRTest, UseListRemovalIsLinearInAnyOrder) {
  const unsigned k = 20000;
  Value *w = input("w");
  Value *other = input("other");
  std::vector<Node *> n = usersOf(*g, w, k);
  std::vector<std::vector<unsigned>> orders(4);
  for (unsigned i = 0; i < k; ++i) {
    orders[0].push_back(i);                                     // front to back
    orders[1].push_back(k - 1 - i);                             // back to front
    orders[2].push_back(i % 2 ? k / 2 + i / 2 : k / 2 - 1 - i / 2); // middle outwards
    orders[3].push_back(static_cast<unsigned>((uint64_t(i) * 7919) % k)); // scattered
  }
  for (const std::vector<unsigned> &order : orders) {
    uint64_t before = UseList::removalWork();
    for (unsigned i : order) {
      n[i]->setInput(0, other);
      ASSERT_LE(w->uses().storageSize(), 2 * w->numUses());
    }
    EXPECT_FALSE(w->hasUses());
    EXPECT_LE(UseList::removalWork() - before, 4u * k);
    // Every use moved to `other` in the order of the removals.
    std::vector<Node *> moved;
    for (unsigned i : order)
      moved.push_back(n[i]);
    ASSERT_EQ(uses(other), usesAt0(moved));
    before = UseList::removalWork();
    Graph::replaceAllUsesWith(other, w); // no removals: one pass
    EXPECT_EQ(UseList::removalWork(), before);
    ASSERT_EQ(uses(w), usesAt0(moved));
    // Back to the creation order for the next round.
    for (Node *x : n)
      x->setInput(0, other);
    for (Node *x : n)
      x->setInput(0, w);
    ASSERT_EQ(uses(w), usesAt0(n));
  }
}

TEST_F(IRTest, NameBindingsAndFreshNames) {
  Value *x = input("x");
  EXPECT_TRUE(m.isNameTaken("x"));
  EXPECT_EQ(m.boundValue(Model::nameKey("x")), nullptr); // reserved, not bound
  m.nameBinding(Model::nameKey("x")) = x;
  EXPECT_EQ(m.boundValue(Model::nameKey("x")), x);
  EXPECT_EQ(m.freshName("x"), "x_1");
  EXPECT_EQ(m.freshName("x"), "x_2");
  EXPECT_EQ(m.freshName("y"), "y");
  EXPECT_TRUE(m.isNameTaken("x_2"));
  EXPECT_FALSE(m.isNameTaken("x_3"));
}

TEST(IRStringTest, OnePointerThatOwnsCopiesAndBorrowsTableNames) {
  static_assert(sizeof(IRString) == sizeof(void *), "an IRString is one pointer");
  IRString empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_STREQ(empty.c_str(), "");
  EXPECT_FALSE(empty.isBorrowed());

  IRString owned(llvm::StringRef("a name longer than fifteen characters"));
  EXPECT_FALSE(owned.isBorrowed());
  EXPECT_EQ(owned.size(), 37u);
  EXPECT_STREQ(owned.c_str(), "a name longer than fifteen characters");
  EXPECT_EQ(owned.data()[owned.size()], '\0');

  // The name table's copies are borrowed; a copy of a borrowed string owns
  // its characters (it may outlive the table).
  NameTable t;
  bool inserted;
  const char *chars = NameTable::charsOf(t.insert(NameTable::key("conv/out"), inserted));
  IRString b = IRString::borrow(chars);
  EXPECT_TRUE(b.isBorrowed());
  EXPECT_EQ(b.data(), chars);
  EXPECT_EQ(b, "conv/out");
  IRString c = b;
  EXPECT_FALSE(c.isBorrowed());
  EXPECT_NE(c.data(), chars);
  EXPECT_EQ(c, b);
  IRString moved = std::move(b);
  EXPECT_TRUE(moved.isBorrowed());
  EXPECT_TRUE(b.empty()); // NOLINT(bugprone-use-after-move): moved-from is empty
  // Growing the table (thousands of names) leaves its copies where they are.
  for (unsigned i = 0; i < 5000; ++i)
    (void)t.insert(NameTable::key("n" + std::to_string(i)), inserted);
  EXPECT_EQ(moved.data(), chars);
  EXPECT_EQ(moved, "conv/out");

  // Reads like a std::string.
  std::string s = moved;
  EXPECT_EQ(s, "conv/out");
  llvm::StringRef r = moved;
  EXPECT_EQ(r, "conv/out");
  EXPECT_EQ("x/" + moved, "x/conv/out");
  EXPECT_EQ(moved + "/y", "conv/out/y");
  EXPECT_EQ(std::string("p") + moved, "pconv/out");
  EXPECT_TRUE(moved == std::string("conv/out"));
  EXPECT_TRUE(moved != "conv");
  EXPECT_TRUE(llvm::StringRef("conv") != moved);
  EXPECT_EQ(moved.rfind("conv", 0), 0u);
  EXPECT_EQ(moved.rfind("out", 0), IRString::npos);
  EXPECT_EQ(moved.rfind("o"), 5u); // "conv/out": the o of "out"
  EXPECT_EQ(moved.substr(5), "out");
  std::string msg;
  llvm::raw_string_ostream(msg) << moved;
  EXPECT_EQ(msg, "conv/out");

  // Assigning replaces (and frees) an owned copy; assigning "" empties.
  c = "other";
  EXPECT_EQ(c, "other");
  c = std::string();
  EXPECT_TRUE(c.empty());
  const char *lit = "literal";
  IRString viaTernary = s.empty() ? lit : moved;
  EXPECT_EQ(viaTernary, "conv/out");
}

TEST_F(IRTest, OpTypesAreInternedAndNamesBorrowTheNameTable) {
  Node *a = g->createNode("MatMul");
  Node *b = g->createNode("MatMul", "com.example");
  EXPECT_EQ(a->opType, "MatMul");
  EXPECT_TRUE(a->opType.isBorrowed());
  EXPECT_EQ(a->opType.data(), b->opType.data()); // one copy per model
  EXPECT_TRUE(a->domain.empty());
  EXPECT_EQ(b->domain, "com.example");
  EXPECT_EQ(b->qualifiedOpType(), "com.example::MatMul");

  Value *v = a->setOutput(0, "mm_out", Type::tensor(DType::F32, {4}));
  EXPECT_TRUE(v->name().isBorrowed());
  EXPECT_EQ(m.tableName("mm_out").data(), v->name().data());
  EXPECT_FALSE(m.tableName("not reserved").isBorrowed()); // a copy instead
  EXPECT_EQ(m.tableName("not reserved"), "not reserved");
  Graph::renameValue(v, "renamed");
  EXPECT_EQ(v->name(), "renamed");
  EXPECT_TRUE(v->name().isBorrowed());
  EXPECT_TRUE(m.isNameTaken("renamed"));
  EXPECT_TRUE(m.isNameTaken("mm_out")); // a name once taken stays taken

  // A name assigned by a pass is the node's own copy.
  a->name = m.freshName("mm");
  EXPECT_EQ(a->name, "mm");
  EXPECT_FALSE(a->name.isBorrowed());
  a->name = m.tableName("mm");
  EXPECT_TRUE(a->name.isBorrowed());
}

TEST_F(IRTest, OpStringsSharingARecentSlotKeepTheirOwnCopy) {
  // "Add", "And" and "Aid" (one length, first and last characters) take one
  // slot of the model's recent op strings, and "Cast", "MatMul" and "" are
  // others: in any order each node gets its own string, one copy per model.
  const char *ops[] = {"Add", "And", "Aid", "Cast", "MatMul", "Add", "", "And", "Add", "Aid"};
  std::map<std::string, const char *> copy;
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const char *op = ops[rng() % std::size(ops)];
    // Each node's strings come from a buffer that is overwritten afterwards.
    std::string opBuf = op, domainBuf = round % 3 ? "" : "com.example";
    Node *n = g->createNode(opBuf, domainBuf);
    opBuf.assign(opBuf.size(), '#');
    domainBuf.assign(domainBuf.size(), '#');
    ASSERT_EQ(n->opType, op) << "round " << round;
    ASSERT_EQ(n->domain, round % 3 ? "" : "com.example");
    if (!*op)
      continue;
    EXPECT_TRUE(n->opType.isBorrowed());
    auto [it, first] = copy.try_emplace(op, n->opType.data());
    EXPECT_EQ(it->second, n->opType.data()) << op;
  }
  EXPECT_EQ(copy.size(), 5u);
}

TEST_F(IRTest, InputAndOutputArraysGrowInTheArenaKeepingOrderAndUses) {
  Value *x = input("x"), *y = input("y");
  Node *sum = g->createNode("Sum");
  std::vector<Value *> want;
  for (unsigned i = 0; i < 1000; ++i) {
    Value *v = i % 3 == 0 ? x : i % 3 == 1 ? y : nullptr;
    sum->addInput(v);
    want.push_back(v);
    llvm::ArrayRef<Value *> ins = sum->inputs();
    ASSERT_EQ(std::vector<Value *>(ins.begin(), ins.end()), want) << "after " << i + 1 << " inputs";
  }
  EXPECT_EQ(x->numUses(), 334u);
  EXPECT_EQ(y->numUses(), 333u);
  // Every use still finds its slot after the array moved ten times.
  for (unsigned i = 0; i < 1000; i += 3)
    sum->setInput(i, y);
  EXPECT_EQ(x->numUses(), 0u);
  EXPECT_EQ(y->numUses(), 667u);
  Value *z = input("z");
  Graph::replaceAllUsesWith(y, z);
  EXPECT_EQ(z->numUses(), 667u);
  for (unsigned i = 0; i < 1000; ++i)
    EXPECT_EQ(sum->input(i), i % 3 == 2 ? nullptr : z);
  // In the order they were added: y's first uses, then the moved ones.
  std::vector<unsigned> operands, wantOperands;
  for (const Use &u : z->uses()) {
    EXPECT_EQ(u.user, sum);
    operands.push_back(u.operand);
  }
  for (unsigned i = 1; i < 1000; i += 3)
    wantOperands.push_back(i);
  for (unsigned i = 0; i < 1000; i += 3)
    wantOperands.push_back(i);
  EXPECT_EQ(operands, wantOperands);

  // reserveInputs then addInput: no growth, same result.
  Node *r = g->createNode("Concat");
  r->reserveInputs(3);
  r->addInput(x);
  r->addInput(z);
  EXPECT_EQ(r->numInputs(), 2u);
  EXPECT_EQ(r->input(1), z);

  // Outputs: setOutput past the end grows the list; the gaps are omitted outputs.
  Node *split = g->createNode("Split");
  split->addInput(z);
  Value *o2 = split->setOutput(2, "s2", Type::tensor(DType::F32, {4}));
  ASSERT_EQ(split->numOutputs(), 3u);
  EXPECT_EQ(split->output(0), nullptr);
  EXPECT_EQ(split->output(1), nullptr);
  EXPECT_EQ(split->output(2), o2);
  split->resizeOutputs(5);
  EXPECT_EQ(split->numOutputs(), 5u);
  EXPECT_EQ(split->output(4), nullptr);
  Value *o0 = split->setOutput(0, "s0", Type::tensor(DType::F32, {4}));
  EXPECT_EQ(split->outputs()[0], o0);
  EXPECT_EQ(split->outputs()[2], o2);
  EXPECT_EQ(o2->producer(), split);
  EXPECT_EQ(o2->producerResult(), 2u);

  // Erasing nodes drops their uses.
  g->eraseNode(split);
  EXPECT_EQ(z->numUses(), 668u); // sum's and r's
  g->eraseNode(sum);
  g->eraseNode(r);
  EXPECT_EQ(z->numUses(), 0u);
  EXPECT_EQ(x->numUses(), 0u);
}

TEST(IRSizeTest, NodesAndValuesStaySmall) {
  // Import creates one of each per node and value: their size is memory
  // touched. Three IRStrings and two arena arrays instead of three
  // std::strings and two vectors took a Node from 224 to 136 bytes.
  EXPECT_LE(sizeof(Node), 136u);
  EXPECT_LE(sizeof(Value), 128u);
}
