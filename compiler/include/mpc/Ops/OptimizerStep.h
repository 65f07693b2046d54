//===- OptimizerStep.h - Operand layout of the fused optimizer steps -*- C++ -*-===//
//
// SGDStep, MomentumStep and AdamStep (domain ai.mpc.training, version 1;
// docs/training.md "Fused optimizer steps") update one parameter in one node.
// Their inputs are, in order: param, grad, the state tensors of the kind,
// the scalar hyper-parameters of the kind, then two optional scalars,
// weight_decay and skip. Their outputs are the new param and the new
// states, in input order, then one optional output: the new param rounded
// to the 16-bit type named by the `copy_to` attribute (the persistent
// weight copy of `mpc rewrite --optimizer-weight-copy`). The schemas, the registry's shape function, the
// kernels, `mpc train-graph --fused-optimizer` and loss scaling all read the
// layout from here.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_OPS_OPTIMIZERSTEP_H
#define MPC_OPS_OPTIMIZERSTEP_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mpc {

/// The domain of the fused optimizer steps (and the gradient ops).
constexpr const char *kOptimizerStepDomain = "ai.mpc.training";

struct OptimizerStepLayout {
  const char *opType;
  /// The multi-tensor form of the kind (MultiTensorSGDStep, ...; below).
  const char *multiOpType;
  /// The state tensors after param and grad (shaped and typed like param).
  llvm::ArrayRef<const char *> states;
  /// The scalar hyper-parameters after the states (typed like param).
  llvm::ArrayRef<const char *> scalars;

  unsigned firstScalar() const { return 2 + unsigned(states.size()); }
  /// The optional weight-decay scalar (absent: no decay).
  unsigned decayInput() const { return firstScalar() + unsigned(scalars.size()); }
  /// The optional skip flag: a bool or float scalar; true (nonzero) makes
  /// every output a copy of its input.
  unsigned skipInput() const { return decayInput() + 1; }
  unsigned minInputs() const { return decayInput(); }
  unsigned maxInputs() const { return skipInput() + 1; }
  unsigned numOutputs() const { return 1 + unsigned(states.size()); }
  /// The optional 16-bit copy of the new param, after the states.
  unsigned copyOutput() const { return numOutputs(); }
  unsigned maxOutputs() const { return copyOutput() + 1; }

  // The multi-tensor form: MultiTensorSGDStep, MultiTensorMomentumStep,
  // MultiTensorAdamStep update N parameters in one node. Inputs: the
  // scalars of the kind, weight_decay and skip (optional: an empty name
  // when absent and a later input is present), then N groups of (param,
  // grad, states...). Outputs: N groups of (param, states...). No weight
  // copy output: steps with one stay per-parameter nodes.
  unsigned multiDecayInput() const { return unsigned(scalars.size()); }
  unsigned multiSkipInput() const { return multiDecayInput() + 1; }
  unsigned multiFirstGroup() const { return multiSkipInput() + 1; }
  unsigned groupInputs() const { return 2 + unsigned(states.size()); }
  unsigned groupOutputs() const { return numOutputs(); }
};

/// The attribute naming the copy's element type (an ONNX data type:
/// float16 or bfloat16); required with the copy output.
constexpr const char *kOptimizerCopyToAttr = "copy_to";

namespace detail {
inline constexpr const char *kMomentumStates[] = {"velocity"};
inline constexpr const char *kAdamStates[] = {"m", "v"};
inline constexpr const char *kSgdScalars[] = {"lr"};
inline constexpr const char *kMomentumScalars[] = {"lr", "momentum"};
inline constexpr const char *kAdamScalars[] = {
    "lr", "beta1", "beta2", "one_minus_beta1", "one_minus_beta2", "epsilon",
    "bias_correction1", "bias_correction2"};
} // namespace detail

/// The three steps: SGD, Momentum, Adam (the order of OptimizerKind).
inline llvm::ArrayRef<OptimizerStepLayout> optimizerStepLayouts() {
  static const OptimizerStepLayout layouts[] = {
      {"SGDStep", "MultiTensorSGDStep", {}, detail::kSgdScalars},
      {"MomentumStep", "MultiTensorMomentumStep", detail::kMomentumStates,
       detail::kMomentumScalars},
      {"AdamStep", "MultiTensorAdamStep", detail::kAdamStates, detail::kAdamScalars},
  };
  return layouts;
}

/// The layout of `opType` in `domain`, or null for any other op.
inline const OptimizerStepLayout *findOptimizerStep(llvm::StringRef opType,
                                                    llvm::StringRef domain) {
  if (domain != kOptimizerStepDomain)
    return nullptr;
  for (const OptimizerStepLayout &l : optimizerStepLayouts())
    if (opType == l.opType)
      return &l;
  return nullptr;
}

/// The layout of the multi-tensor step `opType` in `domain`, or null.
inline const OptimizerStepLayout *findMultiTensorStep(llvm::StringRef opType,
                                                      llvm::StringRef domain) {
  if (domain != kOptimizerStepDomain)
    return nullptr;
  for (const OptimizerStepLayout &l : optimizerStepLayouts())
    if (opType == l.multiOpType)
      return &l;
  return nullptr;
}

} // namespace mpc

#endif // MPC_OPS_OPTIMIZERSTEP_H
