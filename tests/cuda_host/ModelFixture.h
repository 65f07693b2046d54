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

namespace mpc {

struct ModelFixture : ::testing::Test {
  Model m;
  Graph *g = nullptr;
  void SetUp() override {
    m.opsets.push_back({"", 21});
    m.graph = std::make_unique<Graph>(m);
    g = m.graph.get();
  }
};

} // namespace mpc

#endif // MPC_TESTS_CUDA_HOST_MODELFIXTURE_H
