//===- LossBodies.h - Per-element math of the losses -------------*- C++ -*-===//
//
// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and the gradients
// SoftmaxCrossEntropyLossGrad and MSELossGrad (ai.mpc.training), once for
// the CPU loops (runtime/cpu/TrainingOps.cpp) and the CUDA launchers
// (runtime/cuda/LossKernels.cu). A is the accumulation type (float for
// f32/f16/bf16 data, double for f64). How a row's maximum and sum, and the
// loss total, are accumulated is each backend's own (the CPU in order, CUDA
// in a fixed block tree); what is done with them is written here. exp and
// log are the C library's (CUDA's device versions under nvcc).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_LOSSBODIES_H
#define MPC_RUNTIME_KERNELS_LOSSBODIES_H

#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

#include <stdint.h>

namespace mpc {
namespace kernels {

/// The labels rule of a classification loss: a label is ignored when it
/// equals ignore_index (if the node has one); any other label must be a
/// class index in [0, classes).
struct LossLabelRule {
  bool hasIgnoreIndex = false;
  int64_t ignoreIndex = 0;
  int64_t classes = 0;
  MPC_HD bool ignored(int64_t label) const { return hasIgnoreIndex && label == ignoreIndex; }
  /// Neither ignored nor a class index: the kernel reports it.
  MPC_HD bool bad(int64_t label) const {
    return !ignored(label) && (label < 0 || label >= classes);
  }
};

/// The running maximum of a row of scores (the C++ library's max: a NaN
/// after the first element is passed over, but it makes the row's sum NaN).
template <typename A> MPC_HD inline A lossRowMax(A acc, A v) { return acc < v ? v : acc; }

/// The term of the row's exponential sum.
template <typename A> MPC_HD inline A lossExpTerm(A v, A max) {
  return detail::libmExp(v - max);
}

/// log of the row's sum of lossExpTerm.
template <typename A> MPC_HD inline A lossLogSum(A sum) { return math::log(sum); }

/// The log-probability of a score given the row's maximum and lossLogSum:
/// (v - max) - logSum, as LogSoftmax computes it. Adding the two row terms
/// first (v - (max + logSum)) lost logSum wherever the maximum is large: a row
/// of -1e30s had loss 0 instead of log(classes), and logits near fp16's
/// largest value, where a float32's step is 0.004, lost the sum's bits.
template <typename A> MPC_HD inline A lossLogProb(A v, A max, A logSum) {
  return (v - max) - logSum;
}

/// The loss of one position: -logProb[label] * weight[label].
template <typename A> MPC_HD inline A lossValue(A labelLogProb, A weight) {
  return -labelLogProb * weight;
}

/// The mean of a weighted loss: the total over the summed weights of the
/// counted positions (NaN when none is counted, as 0 / 0).
template <typename A> MPC_HD inline A lossMean(A total, A weightSum) { return total / weightSum; }

/// The factor of every element of SoftmaxCrossEntropyLossGrad for Mean and
/// Sum: dLoss, divided by the number of counted labels for Mean (0 when
/// none is counted).
template <typename A> MPC_HD inline A softmaxCrossEntropyScale(A dLoss, bool mean,
                                                               int64_t counted) {
  if (!mean)
    return dLoss;
  return counted ? dLoss / A(counted) : A(0);
}

/// One element of SoftmaxCrossEntropyLossGrad: (softmax - onehot) * scale,
/// zero at an ignored position.
template <typename A>
MPC_HD inline A softmaxCrossEntropyGradValue(A logProb, bool isLabel, bool skip, A scale) {
  return skip ? A(0) : (detail::libmExp(logProb) - A(isLabel ? 1 : 0)) * scale;
}

/// MSELossGrad's factor for Mean and Sum: 2 * dLoss, divided by n for Mean.
template <typename A> MPC_HD inline A mseGradScale(A dLoss, bool mean, int64_t n) {
  A scale = A(2) * dLoss;
  if (mean)
    scale /= A(n);
  return scale;
}

/// One element of MSELossGrad: scale * (pred - target), with scale the
/// mseGradScale, or 2 * dLoss[i] for reduction None.
template <typename A> MPC_HD inline A mseGradValue(A scale, A pred, A target) {
  return scale * (pred - target);
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_LOSSBODIES_H
