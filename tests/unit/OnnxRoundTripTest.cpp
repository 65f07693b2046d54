//===- OnnxRoundTripTest.cpp - ONNX import and export ----------------------===//
//
// Hand-built ModelProtos covering every part of the format mpc carries:
// import -> export -> import -> export is byte-identical, and the export
// equals the input up to tensor encoding (typed fields become raw_data).
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"
#include "OnnxWire.h"
#include "mpc/IR/Limits.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Text/Text.h"
#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"
#include <cstring>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/wire_format_lite.h>

using namespace mpc;
using namespace mpc::test;
using onnx::AttributeProto;
using onnx::TensorProto;

namespace {

void addUnknownVarint(google::protobuf::Message &msg, int field, uint64_t v) {
  msg.GetReflection()->MutableUnknownFields(&msg)->AddVarint(field, v);
}

/// A model that uses every feature the importer must carry through.
onnx::ModelProto richModel() {
  onnx::ModelProto p;
  p.set_ir_version(8);
  addOpset(p, "", 17);
  addOpset(p, "com.microsoft", 1);
  addOpset(p, "local", 1);
  p.set_producer_name("mpc-test");
  p.set_producer_version("1.0");
  p.set_domain("ai.mpc.test");
  p.set_model_version(3);
  p.set_doc_string("a model with everything");
  for (auto kv : {std::make_pair("author", "me"), std::make_pair("license", "none")}) {
    auto *e = p.add_metadata_props();
    e->set_key(kv.first);
    e->set_value(kv.second);
  }
  addUnknownVarint(p, 2000, 42); // a field from a newer ONNX

  onnx::GraphProto &g = *p.mutable_graph();
  g.set_name("main");
  g.set_doc_string("the main graph");
  addValue(g.mutable_input(), "x", TensorProto::FLOAT, {"N", "4"})->set_doc_string("input x");
  addValue(g.mutable_input(), "cond", TensorProto::BOOL, {});

  // Initializers in every encoding.
  *g.add_initializer() = floatTensor("W", {4, 4}, std::vector<float>(16, 0.25f));
  {
    TensorProto t;
    t.set_name("shape");
    t.set_data_type(TensorProto::INT64);
    t.add_dims(2);
    t.add_int64_data(-1);
    t.add_int64_data(4);
    *g.add_initializer() = t;
  }
  {
    TensorProto t; // f16 given as int32_data bit patterns: 1.0, -2.0
    t.set_name("h");
    t.set_data_type(TensorProto::FLOAT16);
    t.add_dims(2);
    t.add_int32_data(0x3C00);
    t.add_int32_data(0xC000);
    *g.add_initializer() = t;
  }
  {
    TensorProto t;
    t.set_name("bias");
    t.set_data_type(TensorProto::FLOAT);
    t.add_dims(4);
    float vals[4] = {1, 2, 3, 4};
    t.set_raw_data(std::string(reinterpret_cast<const char *>(vals), sizeof(vals)));
    t.set_doc_string("raw bias");
    *g.add_initializer() = t;
  }
  {
    TensorProto t;
    t.set_name("labels");
    t.set_data_type(TensorProto::STRING);
    t.add_dims(2);
    t.add_string_data("cat");
    t.add_string_data(std::string("d\0g", 3));
    *g.add_initializer() = t;
  }
  {
    TensorProto t;
    t.set_name("ints");
    t.set_data_type(TensorProto::INT32);
    t.add_dims(3);
    for (int v : {1, -2, 3})
      t.add_int32_data(v);
    *g.add_initializer() = t;
  }
  {
    TensorProto t;
    t.set_name("dbl");
    t.set_data_type(TensorProto::DOUBLE);
    t.add_double_data(0.1);
    *g.add_initializer() = t;
  }
  *g.add_initializer() = floatTensor("maxv", {}, {6.0f});

  // Nodes, in topological order.
  auto *mm = addNode(g, "MatMul", {"x", "W"}, {"mm"}, "fc1");
  mm->set_doc_string("the first layer");
  addUnknownVarint(*mm, 1000, 7);
  addNode(g, "Add", {"mm", "bias"}, {"add"});
  addNode(g, "Reshape", {"add", "shape"}, {"rs"});
  addNode(g, "Clip", {"rs", "", "maxv"}, {"clip"}, "clip_no_min");
  addNode(g, "Dropout", {"clip"}, {"dr", ""});
  auto *gelu = addNode(g, "FusedGelu", {"dr"}, {"gelu"}, "", "com.microsoft");
  addAttr(*gelu, "approximate", AttributeProto::INT)->set_i(1);
  auto *relu = addNode(g, "Relu", {"gelu"}, {"relu"});
  auto *bogus = addAttr(*relu, "bogus", AttributeProto::INT); // not in Relu's schema
  bogus->set_i(3);
  bogus->set_doc_string("an attribute the schema lacks");
  auto *mystery =
      addNode(g, "Mystery", {"relu", "h", "labels"}, {"m0", "m1"}, "mystery", "my.custom");
  addAttr(*mystery, "f", AttributeProto::FLOAT)->set_f(0.25f);
  addAttr(*mystery, "s", AttributeProto::STRING)->set_s("text");
  auto *ints = addAttr(*mystery, "ints", AttributeProto::INTS);
  ints->add_ints(1);
  ints->add_ints(-1);
  auto *floats = addAttr(*mystery, "floats", AttributeProto::FLOATS);
  floats->add_floats(0.5f);
  auto *strs = addAttr(*mystery, "strs", AttributeProto::STRINGS);
  strs->add_strings("a");
  strs->add_strings("b");
  *addAttr(*mystery, "t", AttributeProto::TENSOR)->mutable_t() =
      floatTensor("", {2}, {1.5f, -1.5f});
  auto *tensors = addAttr(*mystery, "ts", AttributeProto::TENSORS);
  *tensors->add_tensors() = floatTensor("a", {1}, {1});
  *tensors->add_tensors() = floatTensor("b", {1}, {2});
  setTensorType(*addAttr(*mystery, "tp", AttributeProto::TYPE_PROTO)->mutable_tp(),
                TensorProto::FLOAT16, {"3"});
  addNode(g, "MyFunc", {"m0"}, {"fn"}, "call", "local");

  // An If whose branches capture outer values (mm, dr, fn).
  auto *ifNode = addNode(g, "If", {"cond"}, {"y"}, "branch");
  onnx::GraphProto *thenG = addAttr(*ifNode, "then_branch", AttributeProto::GRAPH)->mutable_g();
  thenG->set_name("then");
  addNode(*thenG, "Neg", {"mm"}, {"t_out"});
  addValue(thenG->mutable_output(), "t_out", TensorProto::FLOAT, {"N", "4"});
  onnx::GraphProto *elseG = addAttr(*ifNode, "else_branch", AttributeProto::GRAPH)->mutable_g();
  elseG->set_name("else");
  *elseG->add_initializer() = floatTensor("two", {}, {2.0f});
  addNode(*elseG, "Mul", {"dr", "two"}, {"e_mul"});
  addNode(*elseG, "Add", {"e_mul", "fn"}, {"e_out"});
  addValue(elseG->mutable_value_info(), "e_mul", TensorProto::FLOAT, {"N", "4"});
  addValue(elseG->mutable_output(), "e_out", TensorProto::FLOAT, {"N", "4"});

  addValue(g.mutable_output(), "y", TensorProto::FLOAT, {"N", "4"});
  addValue(g.mutable_output(), "m1", TensorProto::FLOAT, {"?"});
  addValue(g.mutable_value_info(), "mm", TensorProto::FLOAT, {"N", "4"})
      ->set_doc_string("matmul result");
  addValue(g.mutable_value_info(), "gelu", TensorProto::FLOAT, {"N", "4"});

  // A local function (kept serialized) and a training entry.
  onnx::FunctionProto *fn = p.add_functions();
  fn->set_name("MyFunc");
  fn->set_domain("local");
  fn->add_input("X");
  fn->add_output("Y");
  auto *fnNode = fn->add_node();
  fnNode->set_op_type("Identity");
  fnNode->add_input("X");
  fnNode->add_output("Y");
  auto *fnOpset = fn->add_opset_import();
  fnOpset->set_domain("");
  fnOpset->set_version(17);

  onnx::TrainingInfoProto *ti = p.add_training_info();
  onnx::GraphProto *init = ti->mutable_initialization();
  init->set_name("init");
  auto *cst = addNode(*init, "Constant", {}, {"W_init"});
  *addAttr(*cst, "value", AttributeProto::TENSOR)->mutable_t() =
      floatTensor("", {4, 4}, std::vector<float>(16, 0.5f));
  addValue(init->mutable_output(), "W_init", TensorProto::FLOAT, {"4", "4"});
  onnx::GraphProto *algo = ti->mutable_algorithm();
  algo->set_name("step");
  addValue(algo->mutable_input(), "lr", TensorProto::FLOAT, {});
  addNode(*algo, "Mul", {"W", "lr"}, {"W_delta"});
  addNode(*algo, "Sub", {"W", "W_delta"}, {"W_new"});
  addValue(algo->mutable_output(), "W_new", TensorProto::FLOAT, {"4", "4"});
  auto *ib = ti->add_initialization_binding();
  ib->set_key("W");
  ib->set_value("W_init");
  auto *ub = ti->add_update_binding();
  ub->set_key("W");
  ub->set_value("W_new");
  return p;
}

/// Rewrites typed tensor fields as raw_data, the form mpc exports.
void toRawData(TensorProto &t) {
  if (t.data_type() == TensorProto::STRING || t.has_raw_data() ||
      t.data_location() == TensorProto::EXTERNAL)
    return;
  std::string raw;
  auto append = [&](const void *p, size_t n) { raw.append(static_cast<const char *>(p), n); };
  switch (t.data_type()) {
  case TensorProto::FLOAT:
    for (float v : t.float_data())
      append(&v, 4);
    break;
  case TensorProto::DOUBLE:
    for (double v : t.double_data())
      append(&v, 8);
    break;
  case TensorProto::INT64:
    for (int64_t v : t.int64_data())
      append(&v, 8);
    break;
  case TensorProto::INT32:
    for (int32_t v : t.int32_data())
      append(&v, 4);
    break;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    for (int32_t v : t.int32_data()) {
      uint16_t h = static_cast<uint16_t>(v);
      append(&h, 2);
    }
    break;
  default:
    FAIL() << "toRawData: type " << t.data_type() << " not handled by the test";
  }
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int64_data();
  t.clear_int32_data();
  t.set_raw_data(raw);
}

void normalizeGraph(onnx::GraphProto &g) {
  for (TensorProto &t : *g.mutable_initializer())
    toRawData(t);
  for (onnx::NodeProto &n : *g.mutable_node())
    for (AttributeProto &a : *n.mutable_attribute()) {
      if (a.has_t())
        toRawData(*a.mutable_t());
      for (TensorProto &t : *a.mutable_tensors())
        toRawData(t);
      if (a.has_g())
        normalizeGraph(*a.mutable_g());
      for (onnx::GraphProto &sub : *a.mutable_graphs())
        normalizeGraph(sub);
    }
}

onnx::ModelProto normalized(onnx::ModelProto p) {
  normalizeGraph(*p.mutable_graph());
  for (onnx::TrainingInfoProto &ti : *p.mutable_training_info()) {
    if (ti.has_initialization())
      normalizeGraph(*ti.mutable_initialization());
    if (ti.has_algorithm())
      normalizeGraph(*ti.mutable_algorithm());
  }
  return p;
}

/// protobuf's parse of a whole file, as mpc's importer limits it.
bool parseWhole(const std::string &bytes, onnx::ModelProto &p) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetRecursionLimit(mpc::onnxio::kRecursionLimit);
  return p.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

/// The import of the file bytes (the main graph read from the wire) against
/// the import of protobuf's parse of them: the same error, or models with the
/// same text and the same exported bytes.
void expectSameAsParsed(const std::string &bytes, llvm::StringRef dir = ".") {
  auto wire = importOnnxBytes(bytes, dir);
  onnx::ModelProto p;
  if (!parseWhole(bytes, p)) {
    ASSERT_FALSE(bool(wire));
    EXPECT_NE(llvm::toString(wire.takeError()).find("not a valid ONNX model"), std::string::npos);
    return;
  }
  auto parsed = importOnnx(p, dir);
  ASSERT_EQ(bool(wire), bool(parsed));
  if (!wire) {
    EXPECT_EQ(llvm::toString(wire.takeError()), llvm::toString(parsed.takeError()));
    return;
  }
  EXPECT_EQ(modelToText(**wire), modelToText(**parsed));
  // Types in full (a Dim's unused fields do not show in text or bytes), in
  // every graph: nested ones are read from the wire too.
  std::vector<const Graph *> wireGraphs, parsedGraphs;
  forEachGraph(*(*wire)->graph, [&](Graph &g) { wireGraphs.push_back(&g); });
  forEachGraph(*(*parsed)->graph, [&](Graph &g) { parsedGraphs.push_back(&g); });
  ASSERT_EQ(wireGraphs.size(), parsedGraphs.size());
  for (size_t k = 0; k < wireGraphs.size(); ++k) {
    const auto &wireValues = wireGraphs[k]->values();
    const auto &parsedValues = parsedGraphs[k]->values();
    ASSERT_EQ(wireValues.size(), parsedValues.size());
    for (size_t i = 0; i < wireValues.size(); ++i)
      EXPECT_TRUE(wireValues[i]->type == parsedValues[i]->type) << wireValues[i]->name();
  }
  auto wireBytes = exportOnnxBytes(**wire);
  auto parsedBytes = exportOnnxBytes(**parsed);
  ASSERT_EQ(bool(wireBytes), bool(parsedBytes));
  if (!wireBytes) {
    EXPECT_EQ(llvm::toString(wireBytes.takeError()), llvm::toString(parsedBytes.takeError()));
    return;
  }
  EXPECT_EQ(*wireBytes, *parsedBytes);
}

/// Imports `p` from its bytes (checked against the parsed-message import).
std::unique_ptr<Model> importOk(const onnx::ModelProto &p, llvm::StringRef dir = ".") {
  expectSameAsParsed(serialize(p), dir);
  auto m = importOnnxBytes(serialize(p), dir);
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  return std::move(*m);
}

/// Asserts export(import(p)) equals normalized(p) and that a second round
/// trip gives the same bytes.
void expectLosslessRoundTrip(const onnx::ModelProto &p) {
  auto m = importOk(p);
  ASSERT_TRUE(m);
  onnx::ModelProto out;
  ASSERT_FALSE(bool(exportOnnx(*m, out)));
  onnx::ModelProto want = normalized(p);
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  EXPECT_TRUE(diff.Compare(want, out)) << report;

  auto bytes1 = exportOnnxBytes(*m);
  ASSERT_TRUE(bool(bytes1)) << llvm::toString(bytes1.takeError());
  auto m2 = importOnnxBytes(*bytes1, ".");
  ASSERT_TRUE(bool(m2)) << llvm::toString(m2.takeError());
  auto bytes2 = exportOnnxBytes(**m2);
  ASSERT_TRUE(bool(bytes2)) << llvm::toString(bytes2.takeError());
  EXPECT_EQ(*bytes1, *bytes2);
  EXPECT_EQ(modelToText(*m), modelToText(**m2));
}

//===- Hand-written wire bytes --------------------------------------------===//
//
// protobuf's serializer writes one canonical form; a file may use others
// (packed repeated scalars, repeated singular fields, interleaved fields).

using Wire = google::protobuf::internal::WireFormatLite;

/// Bytes written by `fn` through a CodedOutputStream.
std::string wireBytes(llvm::function_ref<void(google::protobuf::io::CodedOutputStream &)> fn) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    fn(cos);
  }
  return out;
}

std::string lenField(int field, const std::string &payload) {
  return wireBytes([&](auto &os) { Wire::WriteBytes(field, payload, &os); });
}

std::string intField(int field, int64_t v) {
  return wireBytes([&](auto &os) { Wire::WriteInt64(field, v, &os); });
}

std::string floatField(int field, float v) {
  return wireBytes([&](auto &os) { Wire::WriteFloat(field, v, &os); });
}

std::string packedInts(int field, std::vector<int64_t> vs) {
  std::string body = wireBytes([&](auto &os) {
    for (int64_t v : vs)
      Wire::WriteInt64NoTag(v, &os);
  });
  return lenField(field, body);
}

std::string packedFloats(int field, std::vector<float> vs) {
  std::string body = wireBytes([&](auto &os) {
    for (float v : vs)
      Wire::WriteFloatNoTag(v, &os);
  });
  return lenField(field, body);
}

/// `p` with `graphTail` appended to its graph's bytes (repeated fields such
/// as nodes, field 1, and initializers, field 5, append to their lists).
std::string withGraphTail(onnx::ModelProto p, const std::string &graphTail) {
  std::string graph = p.graph().SerializeAsString() + graphTail;
  p.clear_graph();
  return serialize(p) + lenField(7, graph);
}

/// NodeProto bytes: Relu(x) -> `out`, then `extra` fields.
std::string reluNode(const std::string &out, const std::string &extra = "") {
  return lenField(1, "x") + lenField(2, out) + lenField(4, "Relu") + extra;
}

const Value *findValue(const Graph &g, llvm::StringRef name) {
  for (const auto &v : g.values())
    if (v->name() == name)
      return v;
  return nullptr;
}

} // namespace

TEST(OnnxRoundTrip, TinyModel) { expectLosslessRoundTrip(tinyModel()); }

TEST(OnnxRoundTrip, RichModelIsLossless) { expectLosslessRoundTrip(richModel()); }

TEST(OnnxRoundTrip, RichModelImportsIntoTheIR) {
  auto m = importOk(richModel());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->irVersion, 8);
  ASSERT_EQ(m->opsets.size(), 3u);
  EXPECT_EQ(m->opsetVersion("com.microsoft"), 1);
  EXPECT_EQ(m->metadataProps.size(), 2u);
  EXPECT_EQ(m->functions.size(), 1u);
  EXPECT_FALSE(m->unknownFields.empty());
  ASSERT_EQ(m->trainingInfo.size(), 1u);
  EXPECT_EQ(m->trainingInfo[0].updateBinding[0],
            std::make_pair(std::string("W"), std::string("W_new")));

  const Graph &g = *m->graph;
  const Value *x = g.inputs()[0];
  EXPECT_EQ(x->type.dims[0].param, "N");
  EXPECT_EQ(x->docString, "input x");
  EXPECT_EQ(findValue(g, "mm")->type, findValue(g, "gelu")->type);
  EXPECT_TRUE(findValue(g, "mm")->hasValueInfo);
  EXPECT_FALSE(findValue(g, "add")->type.isKnown());

  const Tensor *h = findValue(g, "h")->initializer();
  EXPECT_EQ(h->getAsDouble(0), 1.0);
  EXPECT_EQ(h->getAsDouble(1), -2.0);
  EXPECT_EQ(findValue(g, "shape")->initializer()->getAsDouble(0), -1.0);
  EXPECT_EQ(findValue(g, "ints")->initializer()->getAsDouble(1), -2.0);
  EXPECT_EQ(findValue(g, "bias")->initializer()->getAsDouble(3), 4.0);
  EXPECT_EQ(findValue(g, "dbl")->initializer()->getAsDouble(0), 0.1);
  EXPECT_EQ(findValue(g, "labels")->initializer()->strings()[1], std::string("d\0g", 3));

  const Node *clip = findValue(g, "clip")->producer();
  EXPECT_EQ(clip->name, "clip_no_min");
  EXPECT_EQ(clip->input(1), nullptr);
  const Node *dropout = findValue(g, "dr")->producer();
  ASSERT_EQ(dropout->numOutputs(), 2u);
  EXPECT_EQ(dropout->output(1), nullptr);
  EXPECT_FALSE(findValue(g, "mm")->producer()->unknownFields.empty());
  const Node *mystery = findValue(g, "m0")->producer();
  EXPECT_EQ(mystery->qualifiedOpType(), "my.custom::Mystery");
  EXPECT_EQ(mystery->attr("tp")->kind, AttrKind::TypeProto);
  EXPECT_EQ(mystery->attr("ts")->tensors[1].name, "b");

  // The If branches capture mm, dr and fn from the main graph.
  const Node *ifNode = findValue(g, "y")->producer();
  const Graph &elseG = *ifNode->attr("else_branch")->graphs[0];
  EXPECT_EQ(elseG.parent(), &g);
  EXPECT_EQ(elseG.owningNode(), ifNode);
  bool captured = false;
  for (const Use &u : findValue(g, "dr")->uses())
    captured |= u.user->getParent() == &elseG;
  EXPECT_TRUE(captured);
  EXPECT_TRUE(findValue(elseG, "e_mul")->hasValueInfo);

  // The algorithm captures W from the main graph.
  const Graph &algo = *m->trainingInfo[0].algorithm;
  EXPECT_EQ(algo.nodes().front().input(0), findValue(g, "W"));
}

TEST(OnnxRoundTrip, NodesOutOfOrderAreSorted) {
  onnx::ModelProto p = tinyModel();
  onnx::GraphProto &g = *p.mutable_graph();
  g.clear_output();
  addNode(g, "Neg", {"y"}, {"z"}); // Relu(x)->y, Neg(y)->z
  g.mutable_node()->SwapElements(0, 1);
  addValue(g.mutable_output(), "z", TensorProto::FLOAT, {"4"});
  auto m = importOk(p);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->graph->nodes().front().opType, "Relu");
  EXPECT_EQ(m->graph->nodes().back().order(), 1u);
}

TEST(OnnxRoundTrip, NodesWhoseBodiesCaptureLaterResultsAreSorted) {
  // If's body reads 'y', which the Relu after it produces: only the capture
  // orders the two, so import must look into the body to sort them.
  onnx::ModelProto p = tinyModel(); // Relu(x) -> y
  onnx::GraphProto &g = *p.mutable_graph();
  addValue(g.mutable_input(), "c", TensorProto::BOOL, {});
  auto *ifNode = addNode(g, "If", {"c"}, {"z"}, "branch");
  for (const char *branch : {"then_branch", "else_branch"}) {
    onnx::GraphProto *body = addAttr(*ifNode, branch, AttributeProto::GRAPH)->mutable_g();
    body->set_name(branch);
    addNode(*body, "Neg", {"y"}, {std::string(branch) + "_out"});
    addValue(body->mutable_output(), std::string(branch) + "_out", TensorProto::FLOAT, {"4"});
  }
  g.mutable_node()->SwapElements(0, 1); // If first, then Relu
  g.clear_output();
  addValue(g.mutable_output(), "z", TensorProto::FLOAT, {"4"});
  auto m = importOk(p);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->graph->nodes().front().opType, "Relu");
  EXPECT_EQ(m->graph->nodes().back().opType, "If");
  EXPECT_EQ(m->graph->nodes().back().order(), 1u);
}

TEST(OnnxRoundTrip, InputDefaultsStayInputs) {
  onnx::ModelProto p = tinyModel();
  p.set_ir_version(3);
  *p.mutable_graph()->add_initializer() = floatTensor("x", {4}, {1, 2, 3, 4});
  auto m = importOk(p);
  ASSERT_TRUE(m);
  const Value *x = m->graph->inputs()[0];
  EXPECT_EQ(x->kind(), ValueKind::GraphInput);
  ASSERT_NE(x->initializer(), nullptr);
  EXPECT_EQ(x->initializer()->getAsDouble(3), 4.0);
  expectLosslessRoundTrip(p);
}

TEST(OnnxRoundTrip, ExternalDataIsReadFromTheModelFolder) {
  TempDir dir;
  std::vector<float> w(16);
  for (int i = 0; i < 16; ++i)
    w[i] = static_cast<float>(i) / 4;
  std::string blob(256, '\0');
  std::memcpy(&blob[0], w.data(), 64);
  float b[2] = {-1, 1};
  std::memcpy(&blob[128], b, 8);
  dir.write("weights.bin", blob);

  onnx::ModelProto p = tinyModel();
  onnx::GraphProto &g = *p.mutable_graph();
  auto external = [&](const std::string &name, std::vector<int64_t> dims, uint64_t offset,
                      uint64_t length) {
    TensorProto *t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    t->set_data_location(TensorProto::EXTERNAL);
    for (auto kv : {std::make_pair(std::string("location"), std::string("weights.bin")),
                    std::make_pair(std::string("offset"), std::to_string(offset)),
                    std::make_pair(std::string("length"), std::to_string(length))}) {
      auto *e = t->add_external_data();
      e->set_key(kv.first);
      e->set_value(kv.second);
    }
  };
  external("W", {4, 4}, 0, 64);
  external("B", {2}, 128, 8);
  dir.write("model.onnx", serialize(p));

  auto m = importOnnxFile(dir.file("model.onnx"));
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  Tensor *wt = (*m)->graph->initializers()[0]->initializer();
  ASSERT_TRUE(wt->isExternal());
  EXPECT_EQ(wt->externalRef()->path, dir.file("weights.bin"));
  EXPECT_EQ((*m)->baseDir.rfind(dir.path(), 0), 0u);

  // Exporting to bytes reads the data inline.
  auto bytes = exportOnnxBytes(**m);
  ASSERT_TRUE(bool(bytes));
  auto inl = importOnnxBytes(*bytes, "/nonexistent");
  ASSERT_TRUE(bool(inl)) << llvm::toString(inl.takeError());
  const Tensor *w2 = (*inl)->graph->initializers()[0]->initializer();
  ASSERT_FALSE(w2->isExternal());
  EXPECT_EQ(w2->getAsDouble(5), 1.25);
  EXPECT_EQ((*inl)->graph->initializers()[1]->initializer()->getAsDouble(0), -1.0);

  ASSERT_FALSE(bool(wt->materialize()));
  EXPECT_EQ(wt->getAsDouble(15), 3.75);
}

TEST(OnnxRoundTrip, WritesExternalDataFile) {
  TempDir dir;
  onnx::ModelProto p = tinyModel();
  std::vector<float> big(64);
  for (int i = 0; i < 64; ++i)
    big[i] = static_cast<float>(i) - 10.5f;
  *p.mutable_graph()->add_initializer() = floatTensor("big", {8, 8}, big);
  *p.mutable_graph()->add_initializer() = floatTensor("big2", {16}, std::vector<float>(16, 3));
  *p.mutable_graph()->add_initializer() = floatTensor("small", {2}, {1, 2});
  auto m = importOk(p);
  ASSERT_TRUE(m);

  ExportOptions opts;
  opts.externalDataFile = "out.weights";
  opts.externalThreshold = 32;
  ASSERT_FALSE(bool(writeOnnxFile(*m, dir.file("out.onnx"), opts)));

  // The written proto refers to the data file; small tensors stay inline.
  auto buf = llvm::MemoryBuffer::getFile(dir.file("out.onnx"));
  ASSERT_TRUE(bool(buf));
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString((*buf)->getBuffer().str()));
  const auto &inits = written.graph().initializer();
  ASSERT_EQ(inits.size(), 3);
  EXPECT_EQ(inits[0].data_location(), TensorProto::EXTERNAL);
  EXPECT_EQ(inits[0].external_data(0).value(), "out.weights");
  EXPECT_EQ(inits[1].external_data(1).key(), "offset");
  EXPECT_EQ(inits[1].external_data(1).value(), "4096"); // 4 KiB aligned
  EXPECT_NE(inits[2].data_location(), TensorProto::EXTERNAL);

  auto back = importOnnxFile(dir.file("out.onnx"));
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  Tensor *t = (*back)->graph->initializers()[0]->initializer();
  ASSERT_TRUE(t->isExternal());
  ASSERT_FALSE(bool(t->materialize()));
  EXPECT_EQ(t->getAsDouble(63), 52.5);
  // Same model, same bytes: the inline export of both agrees.
  auto b1 = exportOnnxBytes(*m);
  auto b2 = exportOnnxBytes(**back);
  ASSERT_TRUE(b1 && b2);
  EXPECT_EQ(*b1, *b2);
}

/// Writes `m` to `path` and expects the file to hold protobuf's own
/// serialization of it; returns those bytes (empty on failure).
static std::string expectWrittenAsProtobufWould(Model &m, const std::string &path) {
  EXPECT_FALSE(bool(writeOnnxFile(m, path, ExportOptions())));
  auto buf = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buf));
  auto want = exportOnnxBytes(m); // protobuf's own serializer
  EXPECT_TRUE(bool(want)) << (want ? "" : llvm::toString(want.takeError()));
  if (!buf || !want)
    return {};
  EXPECT_TRUE((*buf)->getBuffer() == *want);
  return *want;
}

/// Relu(x) -> y, then a chain of `n` Relu and Neg nodes (about 40 bytes
/// each) whose end is the graph's output; returns the last result's name.
static std::string appendChain(onnx::ModelProto &p, int n) {
  onnx::GraphProto &g = *p.mutable_graph();
  std::string prev = "y";
  for (int i = 0; i < n; ++i) {
    std::string out = "chain/node_" + std::to_string(i);
    addNode(g, i % 2 ? "Neg" : "Relu", {prev}, {out}, out);
    prev = out;
  }
  g.clear_output();
  addValue(g.mutable_output(), prev, TensorProto::FLOAT, {"4"});
  return prev;
}

TEST(OnnxRoundTrip, LargeFilesAreWrittenAsProtobufSerializesThem) {
  // Node and initializer bytes are streamed in 1 MiB chunks: a chain of
  // 40,000 nodes (about 1.5 MiB) and a 2 MiB initializer span several.
  TempDir dir;
  onnx::ModelProto p = tinyModel(); // Relu(x) -> y
  onnx::GraphProto &g = *p.mutable_graph();
  std::string prev = appendChain(p, 40000);
  std::vector<float> big(512 * 1024);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i % 1000) * 0.25f;
  *g.add_initializer() = floatTensor("big", {512, 1024}, big);
  *g.add_initializer() = floatTensor("small", {2}, {1, 2});
  auto m = importOk(p);
  ASSERT_TRUE(m);
  EXPECT_GT(expectWrittenAsProtobufWould(*m, dir.file("big.onnx")).size(), size_t(3) << 20);
}

// Once ExportOptions::streamNodesAfter bytes of the main graph's nodes are
// held, they go to the file while the export runs, behind a graph length
// whose width is estimated then and whose value is filled in at the end. The
// file is what protobuf serializes whether the estimate was right (a chain
// of even nodes) or wrong (a last node far larger than the others, so the
// length needs one byte more: the file is written again), and no temporary
// file is left behind.
TEST(OnnxRoundTrip, StreamedNodesAreWhatProtobufSerializes) {
  struct Case {
    const char *what;
    size_t payload; ///< bytes of a string attribute on a last node (0: none)
    unsigned rewrites;
  };
  for (const Case &c : {Case{"even nodes", 0, 0}, Case{"a large last node", 3u << 20, 1}}) {
    TempDir dir;
    onnx::ModelProto p = tinyModel();
    std::string prev = appendChain(p, 20000); // about 1.2 MiB: a 3-byte length
    if (c.payload) {
      onnx::GraphProto &g = *p.mutable_graph();
      auto *blob = addNode(g, "Blob", {prev}, {"blob_out"}, "blob", "my.custom");
      addAttr(*blob, "payload", AttributeProto::STRING)->set_s(std::string(c.payload, 'b'));
      addOpset(p, "my.custom", 1);
      g.clear_output();
      addValue(g.mutable_output(), "blob_out", TensorProto::FLOAT, {"4"});
    }
    auto m = importOk(p);
    ASSERT_TRUE(m) << c.what;
    ExportStats stats;
    ExportOptions opts;
    opts.streamNodesAfter = 1;
    opts.stats = &stats;
    ASSERT_FALSE(bool(writeOnnxFile(*m, dir.file("out.onnx"), opts))) << c.what;
    EXPECT_EQ(stats.rewrites, c.rewrites) << c.what;
    if (c.rewrites)
      EXPECT_EQ(stats.bytesStreamed, 0u) << c.what; // written again with every byte held
    else
      EXPECT_GT(stats.bytesStreamed, size_t(512) << 10) << c.what;
    auto buf = llvm::MemoryBuffer::getFile(dir.file("out.onnx"));
    ASSERT_TRUE(bool(buf)) << c.what;
    auto want = exportOnnxBytes(*m);
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    EXPECT_TRUE((*buf)->getBuffer() == *want) << c.what;
    std::error_code ec;
    unsigned files = 0;
    for (llvm::sys::fs::directory_iterator it(dir.path(), ec), end; it != end && !ec;
         it.increment(ec))
      ++files;
    EXPECT_EQ(files, 1u) << c.what;
  }
}

/// A model whose nested graphs use what the direct writer writes itself
/// (every type kind in value infos, doc strings, graph lists, captures,
/// initializers, nesting two deep) and what it leaves to protobuf (a body
/// with unknown fields, a node with a tensor attribute).
static onnx::ModelProto nestedGraphsModel() {
  onnx::ModelProto p = tinyModel(); // Relu(x) -> y
  onnx::GraphProto &g = *p.mutable_graph();
  addValue(g.mutable_input(), "c", TensorProto::BOOL, {});
  auto *ifNode = addNode(g, "If", {"c"}, {"z"}, "outer_if");
  onnx::GraphProto *thenG = addAttr(*ifNode, "then_branch", AttributeProto::GRAPH)->mutable_g();
  thenG->set_name("then");
  thenG->set_doc_string("the then branch");
  *thenG->add_initializer() = floatTensor("k", {4}, {1, 2, 3, 4});
  auto *neg = addNode(*thenG, "Neg", {"y"}, {"t_neg"}, "t_neg");
  neg->set_doc_string("a nested node");
  auto *dim = addNode(*thenG, "Mul", {"t_neg", "k"}, {"t_out"});
  auto *attr = addAttr(*dim, "note", AttributeProto::STRING);
  attr->set_s("kept");
  attr->set_doc_string("an attribute's doc");
  addAttr(*dim, "ref", AttributeProto::FLOAT)->set_ref_attr_name("outer_ref");
  // value_info of every type kind, with dimension denotations.
  onnx::ValueInfoProto *vi = addValue(thenG->mutable_value_info(), "t_neg", TensorProto::FLOAT,
                                      {"N", "4"});
  vi->set_doc_string("negated");
  vi->mutable_type()->set_denotation("TENSOR");
  vi->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_denotation(
      "DATA_BATCH");
  addValue(thenG->mutable_output(), "t_out", TensorProto::FLOAT, {"N", "4"});
  // A nested Loop in the then branch, whose body sees both outer scopes.
  auto *loop = addNode(*thenG, "Loop", {"", "c", "t_out"}, {"t_loop"}, "inner_loop");
  onnx::GraphProto *body = addAttr(*loop, "body", AttributeProto::GRAPH)->mutable_g();
  body->set_name("body");
  addValue(body->mutable_input(), "i", TensorProto::INT64, {});
  addValue(body->mutable_input(), "cond_in", TensorProto::BOOL, {});
  addValue(body->mutable_input(), "v", TensorProto::FLOAT, {"N", "4"});
  addNode(*body, "Identity", {"cond_in"}, {"cond_out"});
  addNode(*body, "Add", {"v", "y"}, {"v_out"});
  addValue(body->mutable_output(), "cond_out", TensorProto::BOOL, {});
  addValue(body->mutable_output(), "v_out", TensorProto::FLOAT, {"N", "4"});
  thenG->mutable_output(0)->set_name("t_loop");

  onnx::GraphProto *elseG = addAttr(*ifNode, "else_branch", AttributeProto::GRAPH)->mutable_g();
  elseG->set_name("else");
  auto *cst = addNode(*elseG, "Constant", {}, {"e_c"});
  *addAttr(*cst, "value", AttributeProto::TENSOR)->mutable_t() = floatTensor("", {4}, {5, 6, 7, 8});
  addNode(*elseG, "Add", {"y", "e_c"}, {"e_out"});
  addValue(elseG->mutable_output(), "e_out", TensorProto::FLOAT, {"N", "4"});
  // Other type kinds in a body's value infos (attached to its values).
  auto typed = [&](const std::string &name) {
    addNode(*elseG, "Identity", {"e_out"}, {name});
    auto *v = elseG->add_value_info();
    v->set_name(name);
    return v->mutable_type();
  };
  onnx::TypeProto *opt = typed("e_opt");
  opt->set_denotation("maybe");
  opt->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::FLOAT);
  onnx::TypeProto *sp = typed("e_sparse");
  sp->set_denotation("sparse");
  sp->mutable_sparse_tensor_type()->set_elem_type(TensorProto::FLOAT);
  sp->mutable_sparse_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  onnx::TypeProto *map = typed("e_map");
  map->mutable_map_type()->set_key_type(TensorProto::INT64);
  map->mutable_map_type()->mutable_value_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::FLOAT);
  typed("e_empty_seq")->mutable_sequence_type();
  typed("e_seq")->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()
      ->set_elem_type(TensorProto::FLOAT);
  onnx::TypeProto *shapeless = typed("e_shapes");
  setTensorType(*shapeless, TensorProto::FLOAT, {});
  auto *dims = shapeless->mutable_tensor_type()->mutable_shape();
  dims->add_dim();                       // neither value nor param
  dims->add_dim()->set_dim_value(0);     // a zero
  dims->add_dim()->set_dim_param("T_1"); // a symbol
  addValue(g.mutable_output(), "z", TensorProto::FLOAT, {"N", "4"});

  // A list of graphs (AttributeProto.graphs), on a custom op.
  auto *multi = addNode(g, "Branches", {"y"}, {"w"}, "multi", "my.custom");
  auto *list = addAttr(*multi, "bodies", AttributeProto::GRAPHS);
  for (const char *name : {"first", "second"}) {
    onnx::GraphProto *b = list->add_graphs();
    b->set_name(name);
    addNode(*b, "Neg", {"y"}, {std::string(name) + "_out"});
    addValue(b->mutable_output(), std::string(name) + "_out", TensorProto::FLOAT, {"N", "4"});
  }
  addUnknownVarint(*list->mutable_graphs(1), 900, 5); // left to protobuf's writer
  addOpset(p, "my.custom", 1);
  addValue(g.mutable_output(), "w", TensorProto::FLOAT, {"N", "4"});
  return p;
}

// mpc writes nodes and nested graphs in protobuf's wire format itself; the
// file must hold the bytes protobuf's serializer gives for the same model.
TEST(OnnxRoundTrip, WrittenFilesAreWhatProtobufSerializes) {
  TempDir dir;
  for (const onnx::ModelProto &p : {richModel(), nestedGraphsModel()}) {
    auto m = importOk(p);
    ASSERT_TRUE(m);
    ASSERT_FALSE(bool(writeOnnxFile(*m, dir.file("out.onnx"), ExportOptions())));
    auto buf = llvm::MemoryBuffer::getFile(dir.file("out.onnx"));
    ASSERT_TRUE(bool(buf));
    auto want = exportOnnxBytes(*m); // protobuf's own serializer
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    EXPECT_TRUE((*buf)->getBuffer() == *want) << p.graph().name();
  }
}

// Tensor types are written with their lengths counted in advance: dimensions
// and names long enough for two- and three-byte lengths, dimension
// denotations with and without a type denotation, scalars and unknown shapes,
// in a body and in the main graph, must still be protobuf's bytes.
TEST(OnnxRoundTrip, WrittenTensorTypesWithLongFieldsAreWhatProtobufSerializes) {
  onnx::ModelProto p = tinyModel();
  onnx::GraphProto &g = *p.mutable_graph();
  addValue(g.mutable_input(), "c", TensorProto::BOOL, {});
  auto *ifNode = addNode(g, "If", {"c"}, {"z"}, "if");
  std::string longParam(200, 'P'), longerParam(20000, 'Q');
  std::vector<std::string> dims = {"300", "1099511627776", "0", longParam, "?", "16383", "16384"};
  for (const char *branch : {"then_branch", "else_branch"}) {
    onnx::GraphProto *b = addAttr(*ifNode, branch, AttributeProto::GRAPH)->mutable_g();
    b->set_name(branch);
    std::string out = std::string(branch) + "_out";
    addNode(*b, "Identity", {"y"}, {out});
    onnx::ValueInfoProto *o = addValue(b->mutable_output(), out, TensorProto::FLOAT, dims);
    auto *shape = o->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(0)->set_denotation(std::string(150, 'D'));
    shape->mutable_dim(3)->set_denotation("DATA_CHANNEL");
    if (std::string(branch) == "else_branch")
      o->mutable_type()->set_denotation("TENSOR");
    // A value info with a shape of 2,000 dimensions (a long shape field) and
    // one whose only dimension has a long symbol.
    addNode(*b, "Identity", {"y"}, {out + "_wide"});
    addValue(b->mutable_value_info(), out + "_wide", TensorProto::FLOAT,
             std::vector<std::string>(2000, "7"));
    addNode(*b, "Identity", {"y"}, {out + "_sym"});
    addValue(b->mutable_value_info(), out + "_sym", TensorProto::FLOAT, {longerParam});
    addNode(*b, "Identity", {"y"}, {out + "_scalar"});
    addValue(b->mutable_value_info(), out + "_scalar", TensorProto::FLOAT, {});
    addNode(*b, "Identity", {"y"}, {out + "_unranked"});
    b->add_value_info()->set_name(out + "_unranked");
    b->mutable_value_info()->rbegin()->mutable_type()->mutable_tensor_type()->set_elem_type(
        TensorProto::FLOAT);
  }
  addValue(g.mutable_output(), "z", TensorProto::FLOAT, dims);
  addValue(g.mutable_value_info(), "y", TensorProto::FLOAT, {longParam, "128"});
  TempDir dir;
  auto m = importOk(p);
  ASSERT_TRUE(m);
  std::string want = expectWrittenAsProtobufWould(*m, dir.file("out.onnx"));
  ASSERT_FALSE(want.empty());
  // And the types read back as they were written.
  auto back = importOnnxFile(dir.file("out.onnx"));
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  auto again = exportOnnxBytes(**back);
  ASSERT_TRUE(bool(again));
  EXPECT_TRUE(*again == want);
}

// Tensors of nested graphs go to the external data file in the order the
// export visits them (a graph's initializers before its nodes' bodies), and
// read back as they were.
TEST(OnnxRoundTrip, NestedInitializersAsExternalData) {
  TempDir dir;
  auto m = importOk(nestedGraphsModel());
  ASSERT_TRUE(m);
  ExportOptions opts;
  opts.externalDataFile = "out.weights";
  opts.externalThreshold = 1;
  ASSERT_FALSE(bool(writeOnnxFile(*m, dir.file("out.onnx"), opts)));
  auto back = importOnnxFile(dir.file("out.onnx"));
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
  // The then branch's initializer first, then the else branch's constant
  // (attributes in node order: then_branch was given first).
  std::string text = modelToText(**back);
  EXPECT_NE(text.find("init %k: f32[4] = external(\"out.weights\", offset = 0, length = 16)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("external(\"out.weights\", offset = 4096, length = 16)>"),
            std::string::npos);
  auto b1 = exportOnnxBytes(*m);
  auto b2 = exportOnnxBytes(**back); // tensors read back from the data file
  ASSERT_TRUE(b1 && b2);
  EXPECT_EQ(*b1, *b2);
}

// A pass that creates values sets hasValueInfo (Graph.h); export then writes
// their types, so they survive a round trip.
TEST(OnnxRoundTrip, NewValuesKeepTheirTypes) {
  auto m = importOk(tinyModel());
  ASSERT_TRUE(m);
  Graph &g = *m->graph;
  Node *relu = &g.nodes().front();
  Node *cast = g.createNode("Cast", "", g.nodes().end(), relu);
  cast->addInput(relu->output(0));
  cast->setAttr(Attribute::makeInt("to", static_cast<int64_t>(DType::F16)));
  cast->setOutput(0, m->freshName("y.f16"), Type::tensor(DType::F16, {4}))->hasValueInfo = true;
  Node *back = g.createNode("Cast");
  back->addInput(cast->output(0));
  back->setAttr(Attribute::makeInt("to", static_cast<int64_t>(DType::F32)));
  back->setOutput(0, "z", Type::tensor(DType::F32, {4}));
  g.addOutput(back->output(0));
  auto bytes = exportOnnxBytes(*m);
  ASSERT_TRUE(bool(bytes));
  auto again = importOnnxBytes(*bytes, ".");
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_EQ(modelToText(**again), modelToText(*m));
}

//===----------------------------------------------------------------------===//
// The wire reader against protobuf's parse
//===----------------------------------------------------------------------===//

TEST(OnnxWireImport, RichModelImportsAsParsed) {
  expectSameAsParsed(serialize(richModel()));
  expectSameAsParsed(serialize(tinyModel()));
}

TEST(OnnxWireImport, PackedAndUnpackedRepeatedScalars) {
  std::string unpacked = lenField(1, "v") + intField(8, 1) + intField(8, -2) + intField(8, 3) +
                         intField(20, AttributeProto::INTS);
  std::string packed =
      lenField(1, "v") + packedInts(8, {1, -2, 3}) + intField(20, AttributeProto::INTS);
  std::string floats = lenField(1, "w") + packedFloats(7, {0.5f, -1}) + floatField(7, 2) +
                       intField(20, AttributeProto::FLOATS);
  std::string a = withGraphTail(tinyModel(), lenField(1, reluNode("r", lenField(5, unpacked))));
  std::string b = withGraphTail(
      tinyModel(), lenField(1, reluNode("r", lenField(5, packed) + lenField(5, floats))));
  expectSameAsParsed(a);
  expectSameAsParsed(b);
  auto ma = importOnnxBytes(a, ".");
  auto mb = importOnnxBytes(b, ".");
  ASSERT_TRUE(ma && mb);
  const Node &na = (*ma)->graph->nodes().back();
  const Node &nb = (*mb)->graph->nodes().back();
  EXPECT_EQ(na.attr("v")->ints, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(nb.attr("v")->ints, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(nb.attr("w")->floats, (std::vector<float>{0.5f, -1, 2}));

  // Tensor dims, packed or not.
  std::string raw(24, '\0');
  std::string dimsUnpacked = intField(1, 2) + intField(1, 3) + intField(2, TensorProto::FLOAT) +
                             lenField(8, "t") + lenField(9, raw);
  std::string dimsPacked =
      packedInts(1, {2, 3}) + intField(2, TensorProto::FLOAT) + lenField(8, "t") + lenField(9, raw);
  expectSameAsParsed(withGraphTail(tinyModel(), lenField(5, dimsUnpacked)));
  expectSameAsParsed(withGraphTail(tinyModel(), lenField(5, dimsPacked)));
}

TEST(OnnxWireImport, RawDataIsBorrowedOnlyWithAnOwner) {
  std::string raw = "\x01\x02\x03\x04\x05\x06\x07\x08";
  std::string tensor =
      intField(1, 2) + intField(2, TensorProto::FLOAT) + lenField(8, "w") + lenField(9, raw);
  auto bytes = std::make_shared<std::string>(withGraphTail(tinyModel(), lenField(5, tensor)));
  auto rawIn = [&](const std::string &buf) { return buf.data() + buf.find(raw); };
  auto findW = [](const Model &m) -> const Tensor * {
    for (const Value *v : m.graph->initializers())
      if (v->name() == "w")
        return v->initializer();
    return nullptr;
  };
  // Without an owner the data is copied; with one it is used in place.
  auto copied = importOnnxBytes(*bytes, ".");
  ASSERT_TRUE(bool(copied)) << llvm::toString(copied.takeError());
  const Tensor *c = findW(**copied);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->bytes().data(), reinterpret_cast<const uint8_t *>(rawIn(*bytes)));
  auto borrowed = importOnnxBytes(*bytes, ".", bytes);
  ASSERT_TRUE(bool(borrowed)) << llvm::toString(borrowed.takeError());
  const Tensor *b = findW(**borrowed);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bytes().data(), reinterpret_cast<const uint8_t *>(rawIn(*bytes)));
  // The model keeps the buffer alive after its owner lets go, and both
  // export to the same bytes.
  std::weak_ptr<std::string> watch = bytes;
  bytes.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(b->bytes(), c->bytes());
  onnx::ModelProto pc, pb;
  ASSERT_FALSE(bool(exportOnnx(**copied, pc)));
  ASSERT_FALSE(bool(exportOnnx(**borrowed, pb)));
  EXPECT_EQ(pc.SerializeAsString(), pb.SerializeAsString());
  borrowed->reset();
  EXPECT_TRUE(watch.expired());
}

TEST(OnnxWireImport, LastValueOfASingularFieldWins) {
  std::string attr = lenField(1, "first") + intField(3, 1) + lenField(1, "a") + intField(3, 7) +
                     intField(20, AttributeProto::FLOAT) + intField(20, AttributeProto::INT);
  std::string node = lenField(4, "Neg") + lenField(3, "n1") + reluNode("r", lenField(5, attr)) +
                     lenField(3, "n2") + lenField(7, "") + lenField(6, "doc1") +
                     lenField(6, "doc2");
  std::string bytes = withGraphTail(tinyModel(), lenField(1, node));
  expectSameAsParsed(bytes);
  auto m = importOnnxBytes(bytes, ".");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  const Node &n = (*m)->graph->nodes().back();
  EXPECT_EQ(n.opType, "Relu");
  EXPECT_EQ(n.name, "n2");
  EXPECT_EQ(n.docString, "doc2");
  ASSERT_NE(n.attr("a"), nullptr);
  EXPECT_EQ(n.attr("a")->kind, AttrKind::Int);
  EXPECT_EQ(n.attr("a")->i, 7);

  std::string tensor = intField(2, TensorProto::INT64) + intField(1, 1) + lenField(8, "w0") +
                       lenField(9, std::string(4, '\1')) + intField(2, TensorProto::FLOAT) +
                       lenField(9, std::string(4, '\0')) + lenField(8, "w");
  expectSameAsParsed(withGraphTail(tinyModel(), lenField(5, tensor)));
}

TEST(OnnxWireImport, InputsAndOutputsMayInterleave) {
  std::string node = lenField(2, "o1") + lenField(1, "x") + lenField(2, "o2") + lenField(1, "") +
                     lenField(1, "x") + lenField(4, "Split");
  expectSameAsParsed(withGraphTail(tinyModel(), lenField(1, node)));
}

TEST(OnnxWireImport, UnknownFieldsAreKept) {
  // On a node, on a plain attribute, as an attribute type this ONNX lacks,
  // and on a raw_data initializer.
  std::string node = reluNode("r1", intField(1000, 7));
  std::string attr =
      reluNode("r2", lenField(5, lenField(1, "a") + intField(3, 1) +
                                     intField(20, AttributeProto::INT) + intField(99, 5)));
  std::string kind = reluNode("r3", lenField(5, lenField(1, "a") + intField(20, 99)));
  std::string wrongWireType = reluNode("r4", intField(3, 5)); // name as a varint
  std::string tensor = intField(2, TensorProto::FLOAT) + lenField(8, "t") +
                       lenField(9, std::string(4, '\0')) + intField(1000, 1);
  for (const std::string &tail : {lenField(1, node), lenField(1, attr), lenField(1, kind),
                                  lenField(1, wrongWireType), lenField(5, tensor)})
    expectSameAsParsed(withGraphTail(tinyModel(), tail));
  auto m = importOnnxBytes(withGraphTail(tinyModel(), lenField(1, node) + lenField(1, attr)), ".");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  const Node &withAttr = (*m)->graph->nodes().back();
  EXPECT_FALSE(withAttr.attrs[0].unknownFields.empty());
  EXPECT_FALSE(withAttr.getPrevNode()->unknownFields.empty());
}

// The wire reader reuses its views of nested graphs from one body to the
// next at each nesting level: a body rich in fields (doc string, an
// initializer, value infos, nested If nodes) followed by bare
// ones, at two levels, must import as the parsed model does, every body with
// only what it holds.
TEST(OnnxWireImport, BodiesReadOneAfterAnotherKeepNothingOfTheLast) {
  onnx::ModelProto p = tinyModel(); // Relu(x) -> y
  onnx::GraphProto &g = *p.mutable_graph();
  addValue(g.mutable_input(), "c", TensorProto::BOOL, {});
  auto richBody = [&](onnx::GraphProto &b, const std::string &prefix) {
    b.set_name(prefix + "rich");
    b.set_doc_string("a documented body");
    *b.add_initializer() = floatTensor(prefix + "k", {4}, {1, 2, 3, 4});
    addNode(b, "Mul", {"y", prefix + "k"}, {prefix + "m"}, prefix + "mul");
    addValue(b.mutable_value_info(), prefix + "m", TensorProto::FLOAT, {"4"});
    addNode(b, "Neg", {prefix + "m"}, {prefix + "r"});
    addValue(b.mutable_output(), prefix + "r", TensorProto::FLOAT, {"N"})
        ->set_doc_string("the rich body's output");
  };
  auto bareBody = [&](onnx::GraphProto &b, const std::string &prefix) {
    addNode(b, "Relu", {"y"}, {prefix + "r"});
    addValue(b.mutable_output(), prefix + "r", TensorProto::FLOAT, {});
  };
  auto addIf = [&](onnx::GraphProto &into, const std::string &prefix, bool thenRich,
                   bool elseRich) {
    auto *n = addNode(into, "If", {"c"}, {prefix + "out"}, prefix + "if");
    onnx::GraphProto *t = addAttr(*n, "then_branch", AttributeProto::GRAPH)->mutable_g();
    onnx::GraphProto *e = addAttr(*n, "else_branch", AttributeProto::GRAPH)->mutable_g();
    thenRich ? richBody(*t, prefix + "t_") : bareBody(*t, prefix + "t_");
    elseRich ? richBody(*e, prefix + "e_") : bareBody(*e, prefix + "e_");
    return t;
  };
  onnx::GraphProto *outerThen = addIf(g, "a_", true, false);
  // Inside the first body, If nodes of their own (the next level's views).
  addIf(*outerThen, "a_in1_", true, false);
  addIf(*outerThen, "a_in2_", false, false);
  addIf(g, "b_", false, true);
  addIf(g, "c_", false, false);
  // A Loop whose body (bare) follows a rich one at the same level.
  auto *loop = addNode(g, "Loop", {"", "c", "y"}, {"loop_out"}, "loop");
  onnx::GraphProto *body = addAttr(*loop, "body", AttributeProto::GRAPH)->mutable_g();
  addValue(body->mutable_input(), "i", TensorProto::INT64, {});
  addValue(body->mutable_input(), "cond_in", TensorProto::BOOL, {});
  addValue(body->mutable_input(), "v", TensorProto::FLOAT, {"4"});
  addNode(*body, "Identity", {"cond_in"}, {"cond_out"});
  addNode(*body, "Relu", {"v"}, {"v_out"});
  addValue(body->mutable_output(), "cond_out", TensorProto::BOOL, {});
  addValue(body->mutable_output(), "v_out", TensorProto::FLOAT, {"4"});
  addIf(g, "d_", false, false);
  addValue(g.mutable_output(), "d_out", TensorProto::FLOAT, {});
  std::string bytes = serialize(p);
  expectSameAsParsed(bytes);
  auto m = importOnnxBytes(bytes, ".");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  // Only the rich bodies carry a doc string and an initializer.
  unsigned rich = 0, graphs = 0;
  forEachGraph(*(*m)->graph, [&](Graph &body) {
    ++graphs;
    bool isRich = llvm::StringRef(body.name).endswith("rich");
    rich += isRich;
    EXPECT_EQ(body.docString == "a documented body", isRich) << body.name;
    EXPECT_EQ(body.initializers().size(), isRich ? 1u : 0u) << body.name;
  });
  EXPECT_EQ(rich, 3u);
  EXPECT_EQ(graphs, 1u + 2 * 6 + 1);
}

TEST(OnnxWireImport, TensorTypesAsParsed) {
  auto dim = [](const std::string &fields) { return lenField(1, fields); };
  std::string shape = dim(intField(1, 3)) + dim(lenField(2, "N")) +
                      dim(intField(1, 2) + lenField(2, "M")) + // a oneof: the last wins
                      dim(lenField(2, "K") + intField(1, 5) + lenField(3, "den")) + dim("");
  std::string tensor =
      intField(1, TensorProto::INT64) + lenField(2, shape) + intField(1, TensorProto::FLOAT);
  std::vector<std::string> types = {
      lenField(1, tensor) + lenField(6, "image"),
      lenField(1, tensor) + lenField(1, intField(1, TensorProto::DOUBLE)), // merged
      lenField(1, intField(1, TensorProto::FLOAT) + lenField(2, "") + lenField(2, dim(""))),
      lenField(1, intField(1, 99)), // an unknown element type
      lenField(6, "no value"),
      lenField(4, lenField(1, lenField(1, intField(1, TensorProto::FLOAT)))), // a sequence
  };
  for (const std::string &type : types) {
    std::string input = lenField(1, "v") + lenField(2, type) + lenField(3, "doc");
    expectSameAsParsed(withGraphTail(tinyModel(), lenField(11, input)));
    std::string twice = lenField(2, type) + lenField(1, "v") + lenField(2, lenField(6, "d"));
    expectSameAsParsed(withGraphTail(tinyModel(), lenField(11, twice)));
  }
}

TEST(OnnxWireImport, AGraphGivenTwiceIsMerged) {
  onnx::ModelProto p = tinyModel();
  onnx::GraphProto more;
  addNode(more, "Neg", {"y"}, {"z"});
  std::string bytes = serialize(p) + lenField(7, more.SerializeAsString());
  expectSameAsParsed(bytes);
  auto m = importOnnxBytes(bytes, ".");
  ASSERT_TRUE(bool(m)) << llvm::toString(m.takeError());
  EXPECT_EQ((*m)->graph->size(), 2u);
}

TEST(OnnxWireImport, MalformedNodesDoNotParse) {
  std::string node = reluNode("r");
  for (size_t cut = 1; cut < node.size(); ++cut)
    expectSameAsParsed(withGraphTail(tinyModel(), lenField(1, node.substr(0, cut))));
  // A parse error after an input error: the parse error is reported.
  onnx::ModelProto p = tinyModel();
  addNode(*p.mutable_graph(), "Neg", {"nope"}, {"z"});
  std::string truncated("\x0a\x05x", 3);
  // A malformed node, and a node with a malformed attribute (read when the
  // node's inputs are connected, after the input error is found).
  for (const std::string &node : {truncated, reluNode("r", lenField(5, truncated))}) {
    auto m = importOnnxBytes(withGraphTail(p, lenField(1, node)), ".");
    ASSERT_FALSE(bool(m));
    EXPECT_NE(llvm::toString(m.takeError()).find("not a valid ONNX model"), std::string::npos);
  }
}

// Every prefix and many one-byte corruptions of a model with every feature:
// the wire reader agrees with protobuf's parse on each.
TEST(OnnxWireImport, CorruptedFilesImportAsParsed) {
  std::string bytes = serialize(richModel());
  for (size_t cut = 0; cut < bytes.size(); cut += 7)
    expectSameAsParsed(bytes.substr(0, cut));
  for (size_t i = 0; i < bytes.size(); i += 3)
    for (unsigned char x : {0x00, 0x01, 0x80, 0xff}) {
      std::string b = bytes;
      b[i] = static_cast<char>(x);
      expectSameAsParsed(b);
    }
}

/// A model whose main graph nests `bodies` If levels: the innermost graph is
/// at depth `bodies` (mpc/IR/Limits.h); its output's type is `seqs`
/// sequences deep.
static std::string nestedIfModel(int bodies, int seqs) {
  onnx::ModelProto p = tinyModel();
  onnx::GraphProto *g = p.mutable_graph();
  addValue(g->mutable_input(), "c", TensorProto::BOOL, {});
  for (int k = 0; k < bodies; ++k) {
    auto *ifNode = addNode(*g, "If", {"c"}, {"if" + std::to_string(k)});
    ifNode->set_name("n" + std::to_string(k));
    g = addAttr(*ifNode, "then_branch", AttributeProto::GRAPH)->mutable_g();
    g->set_name("body" + std::to_string(k));
  }
  addNode(*g, "Neg", {"x"}, {"inner"});
  onnx::TypeProto *tp = addValue(g->mutable_output(), "inner", TensorProto::FLOAT, {})->mutable_type();
  for (int s = 0; s < seqs; ++s)
    tp = tp->mutable_sequence_type()->mutable_elem_type();
  tp->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  return serialize(p);
}

// Graphs nest up to kMaxGraphDepth, read from the wire as from a whole-file
// parse; one level more is an error naming the graph, its depth, the limit
// and the node path, whichever way the file is read.
TEST(OnnxWireImport, NestingLimitIsKept) {
  for (int bodies : {kMaxGraphDepth - 1, kMaxGraphDepth, kMaxGraphDepth + 1,
                     kMaxGraphDepth + 2})
    for (int seqs = 0; seqs < 4; ++seqs) {
      std::string bytes = nestedIfModel(bodies, seqs);
      expectSameAsParsed(bytes);
      auto m = importOnnxBytes(bytes, ".");
      if (bodies <= kMaxGraphDepth) {
        EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
        continue;
      }
      ASSERT_FALSE(bool(m));
      // body64 is the graph at depth 65, in node n64.
      EXPECT_EQ(llvm::toString(m.takeError()),
                "graph 'body64' is at nesting depth 65, beyond the limit of 64 (node path: "
                "node 'n0' (If) > node 'n1' (If) > node 'n2' (If) > ... (59 more) ... > "
                "node 'n62' (If) > node 'n63' (If) > node 'n64' (If))");
    }
}

// Nesting far beyond what protobuf parses (its recursion limit) is named the
// same way: the importer looks at the wire bytes when the parse fails.
TEST(OnnxWireImport, DeepNestingBeyondTheParseIsNamed) {
  for (int bodies : {100, 2000}) {
    std::string bytes = nestedIfModel(bodies, 0);
    onnx::ModelProto p;
    EXPECT_FALSE(parseWhole(bytes, p));
    auto m = importOnnxBytes(bytes, ".");
    ASSERT_FALSE(bool(m));
    std::string msg = llvm::toString(m.takeError());
    EXPECT_EQ(msg, "graph 'body64' is at nesting depth 65, beyond the limit of 64 (node path: "
                   "node 'n0' (If) > node 'n1' (If) > node 'n2' (If) > ... (59 more) ... > "
                   "node 'n62' (If) > node 'n63' (If) > node 'n64' (If))");
  }
}

// The protobuf limit leaves room for what a graph at the nesting limit holds:
// nested sequence types up to it import, one more level is a parse error,
// through the wire reader as through a whole-file parse.
TEST(OnnxWireImport, ProtobufLimitBeyondTheNestingLimit) {
  bool parsed = false, refused = false;
  for (int seqs = 40; seqs < 56; ++seqs) {
    std::string bytes = nestedIfModel(kMaxGraphDepth, seqs);
    expectSameAsParsed(bytes);
    onnx::ModelProto p;
    (parseWhole(bytes, p) ? parsed : refused) = true;
  }
  EXPECT_TRUE(parsed);
  EXPECT_TRUE(refused);
}
