//===- OpParams.cpp - Attribute parsers of the registry rows ---------------===//
#include "mpc/Runtime/OpParams.h"
#include "mpc/IR/Graph.h"

using namespace mpc;

OpParams::~OpParams() = default;

std::unique_ptr<OpParams> mpc::parseGemm(const Node &n) {
  auto p = std::make_unique<GemmParams>();
  p->transA = n.intAttr("transA", 0) != 0;
  p->transB = n.intAttr("transB", 0) != 0;
  p->alpha = n.floatAttr("alpha", 1.0f);
  p->beta = n.floatAttr("beta", 1.0f);
  return p;
}

std::unique_ptr<OpParams> mpc::parseSoftmax(const Node &n) {
  auto p = std::make_unique<SoftmaxParams>();
  p->axis = n.intAttr("axis", n.opsetVersion() >= 13 ? -1 : 1);
  return p;
}

std::unique_ptr<OpParams> mpc::parseLayerNorm(const Node &n) {
  auto p = std::make_unique<LayerNormParams>();
  p->axis = n.intAttr("axis", -1);
  p->epsilon = n.floatAttr("epsilon", 1e-5f);
  return p;
}
