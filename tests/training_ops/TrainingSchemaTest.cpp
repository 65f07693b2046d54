//===- TrainingSchemaTest.cpp - Schemas of the ai.mpc.training ops --------===//
//
// The gradient ops of docs/training.md are known to lookupSignature() and to
// libonnx's checker and strict shape inference once registered.
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/OpSignature.h"
#include "mpc/Ops/OptimizerStep.h"
#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

using namespace mpc;

namespace {

const char *const kDomain = "ai.mpc.training";

onnx::ValueInfoProto *addTensor(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> *list,
                                const std::string &name, int elem,
                                const std::vector<int64_t> &dims) {
  onnx::ValueInfoProto *v = list->Add();
  v->set_name(name);
  auto *t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto *shape = t->mutable_shape();
  for (int64_t d : dims)
    shape->add_dim()->set_dim_value(d);
  return v;
}

onnx::NodeProto *addNode(onnx::GraphProto *g, const std::string &op,
                         const std::vector<std::string> &ins,
                         const std::vector<std::string> &outs) {
  onnx::NodeProto *n = g->add_node();
  n->set_op_type(op);
  n->set_domain(kDomain);
  n->set_name(op + "_node");
  for (const std::string &i : ins)
    n->add_input(i);
  for (const std::string &o : outs)
    n->add_output(o);
  return n;
}

std::vector<int64_t> dimsOf(const onnx::GraphProto &g, const std::string &name, int &elem) {
  for (const auto &list : {g.value_info(), g.output()})
    for (const onnx::ValueInfoProto &v : list)
      if (v.name() == name) {
        elem = v.type().tensor_type().elem_type();
        std::vector<int64_t> dims;
        for (const auto &d : v.type().tensor_type().shape().dim())
          dims.push_back(d.dim_value());
        return dims;
      }
  elem = -1;
  return {};
}

} // namespace

TEST(TrainingSchemas, LookupReluGrad) {
  SignatureLookup l = lookupSignature(kDomain, "ReluGrad", 1);
  ASSERT_NE(l.sig, nullptr);
  EXPECT_FALSE(l.fallback);
  EXPECT_EQ(l.sig->domain, kDomain);
  ASSERT_EQ(l.sig->inputs.size(), 2u);
  ASSERT_EQ(l.sig->outputs.size(), 1u);
  const TypeConstraint *t = l.sig->constraint("T");
  ASSERT_NE(t, nullptr);
  for (DType d : {DType::F16, DType::F32, DType::F64, DType::BF16})
    EXPECT_TRUE(t->admitsTensor(d)) << dtypeName(d).str();
  EXPECT_FALSE(t->admitsTensor(DType::I32));
  EXPECT_EQ(newestKnownOpset(kDomain), 1);
}

// The fused optimizer steps: the schema's inputs and outputs are the layout's
// (param, grad, states, scalars, optional weight_decay and skip; outputs param
// and states, then the optional param_copy), T is float or double, the skip
// flag bool or float, the copy float16 or bfloat16.
TEST(TrainingSchemas, FusedOptimizerSteps) {
  const int want[][3] = {{3, 5, 1}, {5, 7, 2}, {12, 14, 3}}; // min, max inputs; outputs
  ASSERT_EQ(optimizerStepLayouts().size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const OptimizerStepLayout &l = optimizerStepLayouts()[k];
    SCOPED_TRACE(l.opType);
    EXPECT_EQ(findOptimizerStep(l.opType, kDomain), &l);
    EXPECT_EQ(findOptimizerStep(l.opType, ""), nullptr);
    const OpSignature *sig = lookupSignature(kDomain, l.opType, 1).sig;
    ASSERT_NE(sig, nullptr);
    EXPECT_EQ(sig->minInputs, want[k][0]);
    EXPECT_EQ(sig->maxInputs, want[k][1]);
    EXPECT_EQ(int(l.minInputs()), want[k][0]);
    EXPECT_EQ(int(l.maxInputs()), want[k][1]);
    EXPECT_EQ(sig->minOutputs, want[k][2]);
    EXPECT_EQ(sig->maxOutputs, want[k][2] + 1);
    EXPECT_EQ(int(l.copyOutput()), want[k][2]);
    EXPECT_EQ(int(l.maxOutputs()), want[k][2] + 1);
    const TypeConstraint *t = sig->constraint("T");
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(t->admitsTensor(DType::F32));
    EXPECT_TRUE(t->admitsTensor(DType::F64));
    EXPECT_FALSE(t->admitsTensor(DType::F16));
    const TypeConstraint *b = sig->constraint("B");
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(b->admitsTensor(DType::Bool));
    EXPECT_TRUE(b->admitsTensor(DType::F32));
    EXPECT_FALSE(b->admitsTensor(DType::I64));
    const TypeConstraint *c = sig->constraint("C");
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->admitsTensor(DType::F16));
    EXPECT_TRUE(c->admitsTensor(DType::BF16));
    EXPECT_FALSE(c->admitsTensor(DType::F32));
  }
}

TEST(TrainingSchemas, EveryOpOfTheContract) {
  const char *ops[] = {"BiasGrad", "ReluGrad", "SigmoidGrad", "TanhGrad", "ErfGrad",
                       "GeluGrad", "SoftmaxGrad", "LogSoftmaxGrad",
                       "LayerNormalizationGrad", "BatchNormalizationGrad", "ConvGrad",
                       "MaxPoolGrad", "AveragePoolGrad", "GlobalAveragePoolGrad",
                       "LSTMGrad", "SoftmaxCrossEntropyLossGrad", "MSELossGrad",
                       "GatherGrad", "SliceGrad", "GRUGrad"};
  for (const char *op : ops) {
    SignatureLookup l = lookupSignature(kDomain, op, 1);
    ASSERT_NE(l.sig, nullptr) << op;
    EXPECT_NE(l.sig->constraint("T"), nullptr) << op;
  }
  const OpSignature *bn = lookupSignature(kDomain, "BatchNormalizationGrad", 1).sig;
  EXPECT_EQ(bn->minOutputs, 1);
  EXPECT_EQ(bn->maxOutputs, 3);
  EXPECT_NE(bn->constraint("T1"), nullptr);
  const OpSignature *sce = lookupSignature(kDomain, "SoftmaxCrossEntropyLossGrad", 1).sig;
  const TypeConstraint *tind = sce->constraint("Tind");
  ASSERT_NE(tind, nullptr);
  EXPECT_TRUE(tind->admitsTensor(DType::I64));
  EXPECT_FALSE(lookupSignature(kDomain, "NoSuchGrad", 1).sig);
}

TEST(TrainingSchemas, CheckerAndStrictShapeInference) {
  registerTrainingSchemas();
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto *o1 = m.add_opset_import();
  o1->set_domain("");
  o1->set_version(17);
  auto *o2 = m.add_opset_import();
  o2->set_domain(kDomain);
  o2->set_version(1);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("g");
  const int f32 = onnx::TensorProto::FLOAT, f16 = onnx::TensorProto::FLOAT16;
  addTensor(g->mutable_input(), "dy", f32, {2, 4, 3, 3});
  addTensor(g->mutable_input(), "x", f32, {2, 3, 5, 5});
  addTensor(g->mutable_input(), "w", f32, {4, 3, 3, 3});
  addTensor(g->mutable_input(), "h", f16, {2, 7});
  addTensor(g->mutable_input(), "labels", onnx::TensorProto::INT64, {2});
  onnx::TensorProto *shape = g->add_initializer();
  shape->set_name("bshape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(3);
  for (int64_t d : {4, 1, 1})
    shape->add_int64_data(d);
  addNode(g, "ConvGrad", {"dy", "x", "w"}, {"dx", "dw", "db"});
  addNode(g, "BiasGrad", {"dy", "bshape"}, {"dbias"});
  addNode(g, "ReluGrad", {"h", "h"}, {"dh"});
  auto *sm = addNode(g, "SoftmaxGrad", {"dh", "h"}, {"ds"});
  auto *axis = sm->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  addNode(g, "SoftmaxCrossEntropyLossGrad", {"dh", "ds", "labels"}, {"dscores"});
  for (const char *out : {"dx", "dw", "db", "dbias", "dscores"}) {
    onnx::ValueInfoProto *v = g->add_output();
    v->set_name(out);
  }
  // Inference fills in the output types, which the checker requires.
  onnx::ShapeInferenceOptions opts{/*check_type=*/true, /*error_mode=*/1,
                                   /*enable_data_propagation=*/false};
  onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), opts);
  onnx::checker::check_model(m);
  int elem = 0;
  EXPECT_EQ(dimsOf(*g, "dx", elem), (std::vector<int64_t>{2, 3, 5, 5}));
  EXPECT_EQ(elem, f32);
  EXPECT_EQ(dimsOf(*g, "dw", elem), (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_EQ(dimsOf(*g, "db", elem), (std::vector<int64_t>{4}));
  EXPECT_EQ(dimsOf(*g, "dbias", elem), (std::vector<int64_t>{4, 1, 1}));
  EXPECT_EQ(dimsOf(*g, "dscores", elem), (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(elem, f16);
}

TEST(TrainingSchemas, StrictInferenceRejectsWrongTypes) {
  registerTrainingSchemas();
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto *o = m.add_opset_import();
  o->set_domain(kDomain);
  o->set_version(1);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("g");
  addTensor(g->mutable_input(), "dy", onnx::TensorProto::INT32, {3});
  addTensor(g->mutable_input(), "x", onnx::TensorProto::INT32, {3});
  addNode(g, "ReluGrad", {"dy", "x"}, {"dx"});
  g->add_output()->set_name("dx");
  onnx::ShapeInferenceOptions opts{true, 1, false};
  EXPECT_ANY_THROW(
      onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), opts));
}

TEST(TrainingSchemas, LstmGradPortsAndInference) {
  registerTrainingSchemas();
  const OpSignature *sig = lookupSignature(kDomain, "LSTMGrad", 1).sig;
  ASSERT_NE(sig, nullptr);
  EXPECT_EQ(sig->inputs.size(), 10u);
  EXPECT_EQ(sig->outputs.size(), 6u);
  EXPECT_EQ(sig->minOutputs, 0);
  EXPECT_EQ(sig->maxOutputs, 6);
  const TypeConstraint *t1 = sig->constraint("T1");
  ASSERT_NE(t1, nullptr);
  EXPECT_TRUE(t1->admitsTensor(DType::I32));

  // Bidirectional, seq 5, batch 2, input 3, hidden 4; dY absent, dB not requested.
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto *o = m.add_opset_import();
  o->set_domain(kDomain);
  o->set_version(1);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("g");
  const int f16 = onnx::TensorProto::FLOAT16;
  addTensor(g->mutable_input(), "dyh", f16, {2, 2, 4});
  addTensor(g->mutable_input(), "x", f16, {5, 2, 3});
  addTensor(g->mutable_input(), "w", f16, {2, 16, 3});
  addTensor(g->mutable_input(), "r", f16, {2, 16, 4});
  addTensor(g->mutable_input(), "lens", onnx::TensorProto::INT32, {2});
  auto *n = addNode(g, "LSTMGrad", {"", "dyh", "", "x", "w", "r", "", "lens"},
                    {"dx", "dw", "dr", "", "dh0", "dc0"});
  auto *dir = n->add_attribute();
  dir->set_name("direction");
  dir->set_type(onnx::AttributeProto::STRING);
  dir->set_s("bidirectional");
  for (const char *out : {"dx", "dw", "dr", "dh0", "dc0"})
    g->add_output()->set_name(out);
  onnx::ShapeInferenceOptions opts{true, 1, false};
  onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), opts);
  onnx::checker::check_model(m);
  int elem = 0;
  EXPECT_EQ(dimsOf(*g, "dx", elem), (std::vector<int64_t>{5, 2, 3}));
  EXPECT_EQ(elem, f16);
  EXPECT_EQ(dimsOf(*g, "dw", elem), (std::vector<int64_t>{2, 16, 3}));
  EXPECT_EQ(dimsOf(*g, "dr", elem), (std::vector<int64_t>{2, 16, 4}));
  EXPECT_EQ(dimsOf(*g, "dh0", elem), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(dimsOf(*g, "dc0", elem), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(elem, f16);
}

TEST(TrainingSchemas, GruGradPortsAndInference) {
  registerTrainingSchemas();
  const OpSignature *sig = lookupSignature(kDomain, "GRUGrad", 1).sig;
  ASSERT_NE(sig, nullptr);
  EXPECT_EQ(sig->inputs.size(), 8u);
  EXPECT_EQ(sig->outputs.size(), 5u);

  // Forward, seq 5, batch 2, input 3, hidden 4; dY_h absent, dX not requested.
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto *o = m.add_opset_import();
  o->set_domain(kDomain);
  o->set_version(1);
  onnx::GraphProto *g = m.mutable_graph();
  g->set_name("g");
  const int f32 = onnx::TensorProto::FLOAT;
  addTensor(g->mutable_input(), "dy", f32, {5, 1, 2, 4});
  addTensor(g->mutable_input(), "x", f32, {5, 2, 3});
  addTensor(g->mutable_input(), "w", f32, {1, 12, 3});
  addTensor(g->mutable_input(), "r", f32, {1, 12, 4});
  addNode(g, "GRUGrad", {"dy", "", "x", "w", "r"}, {"", "dw", "dr", "db", "dh0"});
  for (const char *out : {"dw", "dr", "db", "dh0"})
    g->add_output()->set_name(out);
  onnx::ShapeInferenceOptions opts{true, 1, false};
  onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), opts);
  onnx::checker::check_model(m);
  int elem = 0;
  EXPECT_EQ(dimsOf(*g, "dw", elem), (std::vector<int64_t>{1, 12, 3}));
  EXPECT_EQ(dimsOf(*g, "dr", elem), (std::vector<int64_t>{1, 12, 4}));
  EXPECT_EQ(dimsOf(*g, "db", elem), (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(dimsOf(*g, "dh0", elem), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(elem, f32);
}

// BiasGrad's `to`: float32 over a 16-bit dY (a folded widening Cast), dY's own
// type, and nothing else (mpc's own inference: TypeInferenceTest).
TEST(TrainingSchemas, BiasGradToFloat32) {
  registerTrainingSchemas();
  auto model = [](int dyType, int64_t to) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    auto *o = m.add_opset_import();
    o->set_domain(kDomain);
    o->set_version(1);
    onnx::GraphProto *g = m.mutable_graph();
    g->set_name("g");
    addTensor(g->mutable_input(), "dy", dyType, {6, 4});
    onnx::TensorProto *shape = g->add_initializer();
    shape->set_name("bshape");
    shape->set_data_type(onnx::TensorProto::INT64);
    shape->add_dims(1);
    shape->add_int64_data(4);
    auto *n = addNode(g, "BiasGrad", {"dy", "bshape"}, {"db"});
    if (to >= 0) {
      auto *a = n->add_attribute();
      a->set_name("to");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(to);
    }
    g->add_output()->set_name("db");
    return m;
  };
  const int f32 = onnx::TensorProto::FLOAT, f16 = onnx::TensorProto::FLOAT16,
            bf16 = onnx::TensorProto::BFLOAT16;
  onnx::ShapeInferenceOptions opts{true, 1, false};
  struct Case {
    int dy;
    int64_t to;
    int want; ///< 0: refused
  } cases[] = {{f16, f32, f32}, {bf16, f32, f32}, {f16, -1, f16}, {f32, f32, f32},
               {f16, f16, f16}, {f32, f16, 0},    {f16, bf16, 0}, {bf16, f16, 0}};
  for (const Case &c : cases) {
    onnx::ModelProto m = model(c.dy, c.to);
    SCOPED_TRACE(std::to_string(c.dy) + " to " + std::to_string(c.to));
    if (!c.want) {
      EXPECT_ANY_THROW(
          onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), opts));
      continue;
    }
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), opts);
    onnx::checker::check_model(m);
    int elem = 0;
    EXPECT_EQ(dimsOf(*m.mutable_graph(), "db", elem), (std::vector<int64_t>{4}));
    EXPECT_EQ(elem, c.want);

  }
}
