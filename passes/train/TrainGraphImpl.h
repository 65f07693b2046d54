//===- TrainGraphImpl.h - Shared pieces of train-graph ----------*- C++ -*-===//
//
// The node emitter used by the training-graph builder (TrainGraph.cpp) and
// the per-op gradient rules (GradRules.cpp). Private to passes/train.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_TRAIN_TRAINGRAPHIMPL_H
#define MPC_PASSES_TRAIN_TRAINGRAPHIMPL_H

#include "mpc/IR/Graph.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mpc {
namespace train {

constexpr const char *kTrainingDomain = "ai.mpc.training";
/// onnxruntime's contrib domain: FusedMatMul reads an operand transposed.
constexpr const char *kContribDomain = "com.microsoft";

/// Imports the domains of the nodes the training algorithm uses beyond the
/// model's (the training domain, the contrib domain), at version 1.
void importTrainingDomains(Model &m);

/// Appends nodes to the algorithm graph with fresh, model-unique names.
class Emitter {
public:
  Emitter(Model &m, Graph &g) : model(m), graph(g), plain(plainGradientsRequested()) {}

  /// MPC_TRAIN_GRAPH_PLAIN set (for measurements, docs/training.md): the
  /// rules differentiate node by node as they did before the rules that save
  /// passes over memory (a BiasGrad wherever a batch axis is symbolic, batched
  /// products over transposed copies, the weight gradient of a Linear layer
  /// as a sum of batched products, erf GELU node by node).
  static bool plainGradientsRequested();

  /// Creates `opType` with the given inputs (null = omitted) and `numOut`
  /// outputs of element types `outTypes` (one per output; Undefined omits
  /// that output). Names derive from `hint`.
  Node *node(llvm::StringRef opType, llvm::StringRef domain, llvm::ArrayRef<Value *> ins,
             llvm::ArrayRef<DType> outTypes, llvm::StringRef hint);
  /// A one-output node; returns its output.
  Value *op(llvm::StringRef opType, llvm::ArrayRef<Value *> ins, DType t, llvm::StringRef hint,
            llvm::StringRef domain = "");
  /// A Constant node holding a scalar of type `t` (F32, F64, F16 or I64).
  Value *scalar(double v, DType t, llvm::StringRef hint);
  /// A Constant node holding a 1-D int64 tensor.
  Value *ints(llvm::ArrayRef<int64_t> v, llvm::StringRef hint);
  /// Shape(v) (one per value, cached).
  Value *shapeOf(Value *v);

  /// Every node created, in order (for the fp32 list and statistics).
  std::vector<Node *> created;
  Model &model;
  Graph &graph;
  /// plainGradientsRequested() when made.
  const bool plain;

private:
  std::vector<std::pair<Value *, Value *>> shapeCache;
};

/// What a gradient rule sees: the forward node (in the algorithm graph), the
/// gradients of its outputs (null where none flows) and which inputs need one.
struct GradRequest {
  Node &fwd;
  llvm::ArrayRef<Value *> dOut;
  std::vector<bool> wantIn;
  /// Prefix for new names ("grad/<node name>").
  std::string hint;
};

/// Fills `dIn` (one per forward input; null = no gradient) for `req`. Returns
/// false when the op has no gradient rule; an Error for an unsupported use of
/// a supported op (unknown rank, ...).
llvm::Expected<bool> emitGradient(Emitter &e, const GradRequest &req, std::vector<Value *> &dIn);

/// Whether `opType` (default domain) has a gradient rule.
bool hasGradientRule(const Node &n);

/// Whether input `input` of `n` takes a gradient when its outputs do. False
/// for the bounds of Clip (they are never trained, docs/training.md); inputs
/// that are not float tensors carry none either way.
bool carriesGradient(const Node &n, unsigned input);

/// Per input of `n`: whether a backward pass wants its gradient (a float
/// tensor in `needs`, at an input that carries gradients).
std::vector<bool> inputsWantingGradients(const Node &n,
                                         const llvm::DenseSet<const Value *> &needs);

/// A tensor of a floating-point type: what can carry a gradient.
bool isFloatTensor(const Value *v);

/// The float tensors that depend on `seeds` through `forward` (in order) by
/// inputs that carry gradients, the seeds included: the values a backward
/// pass must reach.
llvm::DenseSet<const Value *> valuesDependingOn(llvm::ArrayRef<Node *> forward,
                                                llvm::ArrayRef<const Value *> seeds);

/// Gives each use that an exporter's merge of equal initializers tied its own
/// copy (Untie.cpp, docs/training.md): a BatchNormalization running
/// statistic or a normalization scale/bias whose initializer has other uses
/// (directly or through Identity); the first plain use (else the first
/// normalization parameter, else statistic) keeps it. A statistic read
/// through Identity reads the initializer itself afterwards.
/// Returns one line per copy: "'init' -> 'copy' (role of 'node')".
std::vector<std::string> untieMergedInitializers(Model &m);

} // namespace train
} // namespace mpc

#endif // MPC_PASSES_TRAIN_TRAINGRAPHIMPL_H
