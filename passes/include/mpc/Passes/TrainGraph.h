//===- TrainGraph.h - Build an ONNX training model --------------*- C++ -*-===//
//
// Reverse-mode differentiation over mpc's IR: turns an inference model into a
// training model as docs/training.md describes (training_info[0].algorithm =
// forward copy, loss, backward, optimizer update; update_binding; metadata).
//
// lowerGradientOps() lowers standard `Gradient` ops of an existing training
// model with the same rules. What it does not do: differentiate
// ops with subgraphs, bidirectional/peephole/clipped LSTMs or ops without a
// rule (an error naming the op, the node and the gradient path), or insert
// loss scaling (that is `mpc rewrite`).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_TRAINGRAPH_H
#define MPC_PASSES_TRAINGRAPH_H

#include "mpc/IR/Graph.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mpc {

enum class LossKind { CrossEntropy, Mse, Output };
enum class OptimizerKind { Sgd, Momentum, Adam };

struct TrainGraphOptions {
  LossKind loss = LossKind::CrossEntropy;
  /// For LossKind::Output: the model output holding the loss.
  std::string lossOutput;
  /// The labels input of the algorithm graph (cross-entropy and mse).
  std::string labels = "labels";
  OptimizerKind optimizer = OptimizerKind::Sgd;
  float lr = 0.01f;
  float momentum = 0.9f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weightDecay = 0.0f;
  /// The loss is multiplied by this (a multi-task or normalization weight).
  double lossWeight = 1.0;
  /// Parameters whose name matches (llvm::Regex search) are not trained.
  std::string freezeRegex;
  /// Adds every gradient as an extra algorithm-graph output.
  bool exposeGradients = false;
  /// When set, receives what the best-effort steps (shape inference) could
  /// not do, also when building fails (`train-graph --verbose`).
  std::vector<std::string> *details = nullptr;
  /// cross-entropy: the axis of the logits holding the classes, 1 (ONNX's
  /// SoftmaxCrossEntropyLoss layout [N, C, d...]) or -1 (the last: [N, d...,
  /// C]); 0 = decide (the last after a Softmax over it, else 1).
  int classAxis = 0;
  /// BatchNormalization's running variance takes the unbiased batch variance
  /// (PyTorch) instead of ONNX's biased one (docs/training.md).
  bool bnUnbiasedVariance = false;
  /// One fused ai.mpc.training SGDStep/MomentumStep/AdamStep node per
  /// parameter (float or double) instead of the primitive update; the same
  /// float operations in the same order (docs/training.md).
  bool fusedOptimizer = false;
};

struct TrainGraphResult {
  /// Informational lines for stderr (e.g. "took the Softmax input as logits").
  std::vector<std::string> notes;
  unsigned numParameters = 0;
  unsigned numGradientNodes = 0;
  /// The model's float initializers the step trains (initializer order).
  std::vector<std::string> trained;
  /// The other float initializers of the model, each with why it is not
  /// trained (one of the reasons docs/training.md lists), initializer order.
  std::vector<std::pair<std::string, std::string>> notTrained;
  /// Uses of initializers the exporter merged by value, each given its own
  /// copy: "'init' -> 'copy' (running variance of 'bn2')", in order.
  std::vector<std::string> untied;
};

/// Adds training_info[0] and the training metadata to `m`. On error (bad
/// input: no such loss output, op without gradient rule, ...) the model may
/// be partly modified and must be discarded.
llvm::Expected<TrainGraphResult> buildTrainingGraph(Model &m, const TrainGraphOptions &opts);

/// The default-domain ops that have a gradient rule (GradRules.cpp), and the
/// file defining the rules (its __FILE__).
std::vector<std::string> gradientRuleOps();
const char *gradientRulesSourceFile();

/// Replaces every ai.onnx.preview.training::Gradient node of the model's
/// training algorithms by the nodes computing it; returns how many.
llvm::Expected<unsigned> lowerGradientOps(Model &m);

/// The text of mpc.training.optimizer for `opts`.
std::string describeOptimizer(const TrainGraphOptions &opts);

} // namespace mpc

#endif // MPC_PASSES_TRAINGRAPH_H
