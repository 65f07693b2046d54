//===- ModelFixture.h - An empty model to put nodes in -----------*- C++ -*-===//
//
// The tests of tests/cuda_host build single nodes (for the kernel table, the
// convolution plans, the pooling geometry) in one empty opset-21 model.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TESTS_CUDA_HOST_MODELFIXTURE_H
#define MPC_TESTS_CUDA_HOST_MODELFIXTURE_H

#include "mpc/IR/Graph.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace mpc {

struct ModelFixture : ::testing::Test {
  Model m;
  Graph *g = nullptr;
  void SetUp() override {
    m.opsets.push_back({"", 21});
    m.graph = std::make_unique<Graph>(m);
    g = m.graph.get();
  }
  /// A node `name` of `op` over fresh graph inputs of `ins` (shape [2, 8]),
  /// one output of `out`: what the kernel table's per-node decisions read.
  Node *oneNode(const char *op, const std::vector<DType> &ins, DType out, const char *name) {
    Node *n = g->createNode(op);
    n->name = name;
    int i = 0;
    for (DType t : ins)
      n->addInput(g->addInput(std::string(name) + std::to_string(i++),
                              Type::tensor(t, {2, 8})));
    n->setOutput(0, std::string(name) + "_out", Type::tensor(out, {2, 8}));
    return n;
  }
};

} // namespace mpc

#endif // MPC_TESTS_CUDA_HOST_MODELFIXTURE_H
