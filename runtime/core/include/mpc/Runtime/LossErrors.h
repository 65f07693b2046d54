//===- LossErrors.h - The bad-label error of the losses ---------*- C++ -*-===//
//
// A classification loss (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss,
// SoftmaxCrossEntropyLossGrad) fails on a label that is neither its
// ignore_index nor a class index. The CPU kernel returns the message; a
// device kernel writes the error record (Backend.h's KernelErrorRecord) with
// code kBadLabelError, and the executor makes the same message from it.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_LOSSERRORS_H
#define MPC_RUNTIME_LOSSERRORS_H

#include <cstdint>
#include <string>

namespace mpc {

/// KernelErrorRecord::code of a bad label, after KernelErrorCode's values:
/// value = the label, reserved = its flat index among the labels, operand =
/// the input whose dimension 1 is the class count.
constexpr int32_t kBadLabelError = 3;

/// The message of a bad label, the same on every backend.
inline std::string badLabelText(int64_t label, int64_t index, int64_t classes) {
  return "label " + std::to_string(label) + " at index " + std::to_string(index) +
         " is not a class index below " + std::to_string(classes);
}

} // namespace mpc

#endif // MPC_RUNTIME_LOSSERRORS_H
