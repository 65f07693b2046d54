//===- OptimizerBodies.h - One element of a fused optimizer step -*- C++ -*-===//
//
// The per-element math of SGDStep, MomentumStep and AdamStep
// (ai.mpc.training, docs/training.md "Fused optimizer steps"), once for the
// CPU loop (runtime/cpu/TrainingKernels.cpp) and the CUDA launcher
// (runtime/cuda/OptimizerKernels.cu). Each body performs the float
// operations of the primitive update `mpc train-graph` emits without
// --fused-optimizer (passes/train/TrainGraph.cpp), in the same order and
// the same type T, one rounding per operation: a fused step gives the
// primitive graph's results bit for bit. That holds only where a*b+c is not
// contracted into one fused multiply-add: the CPU build passes
// -ffp-contract=off, and OptimizerKernels.cu is compiled with -fmad=false.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_OPTIMIZERBODIES_H
#define MPC_RUNTIME_KERNELS_OPTIMIZERBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

namespace mpc {
namespace kernels {

enum class OptimizerStepKind { Sgd, Momentum, Adam };

/// The most scalar hyper-parameters of a step (Adam's eight).
constexpr unsigned kMaxOptimizerScalars = 8;

/// The scalar hyper-parameter inputs of a step, read once per launch. Only
/// those of the node's kind are meaningful; hasDecay says whether the
/// optional weight_decay input is present.
template <typename T> struct OptimizerScalars {
  T lr = T(0), decay = T(0), momentum = T(0);
  T beta1 = T(0), beta2 = T(0), oneMinusBeta1 = T(0), oneMinusBeta2 = T(0), epsilon = T(0),
    biasCorrection1 = T(0), biasCorrection2 = T(0);
  bool hasDecay = false;
};

/// The scalars of a step of `kind` from their values: scalars[i] points at
/// the i-th scalar input of the kind (OptimizerStep.h's order), decay at the
/// weight decay or is null.
template <typename T>
MPC_HD inline OptimizerScalars<T> optimizerScalarsFrom(OptimizerStepKind kind,
                                                       const T *const *scalars, const T *decay) {
  OptimizerScalars<T> s;
  s.lr = *scalars[0];
  if (kind == OptimizerStepKind::Momentum)
    s.momentum = *scalars[1];
  if (kind == OptimizerStepKind::Adam) {
    s.beta1 = *scalars[1];
    s.beta2 = *scalars[2];
    s.oneMinusBeta1 = *scalars[3];
    s.oneMinusBeta2 = *scalars[4];
    s.epsilon = *scalars[5];
    s.biasCorrection1 = *scalars[6];
    s.biasCorrection2 = *scalars[7];
  }
  s.hasDecay = decay != nullptr;
  if (decay)
    s.decay = *decay;
  return s;
}

/// The gradient the update reads: g + wd * p with weight decay, else g.
template <typename T>
MPC_HD inline T optimizerGrad(const OptimizerScalars<T> &s, T param, T grad) {
  return s.hasDecay ? grad + s.decay * param : grad;
}

/// The new parameter from the update direction: p - lr * delta.
template <typename T>
MPC_HD inline T optimizerApply(const OptimizerScalars<T> &s, T param, T delta) {
  return param - s.lr * delta;
}

/// SGD: p' = p - lr * g.
template <typename T>
MPC_HD inline T sgdStep(const OptimizerScalars<T> &s, T param, T grad) {
  return optimizerApply(s, param, optimizerGrad(s, param, grad));
}

/// Momentum: v' = mu * v + g; p' = p - lr * v'.
template <typename T>
MPC_HD inline T momentumStep(const OptimizerScalars<T> &s, T param, T grad, T &velocity) {
  velocity = s.momentum * velocity + optimizerGrad(s, param, grad);
  return optimizerApply(s, param, velocity);
}

/// Adam: m' = b1 * m + (1-b1) * g; v' = b2 * v + (1-b2) * (g * g);
/// p' = p - lr * ((m' / bc1) / (sqrt(v' / bc2) + eps)).
template <typename T>
MPC_HD inline T adamStep(const OptimizerScalars<T> &s, T param, T grad, T &m, T &v) {
  T g = optimizerGrad(s, param, grad);
  m = s.beta1 * m + s.oneMinusBeta1 * g;
  v = s.beta2 * v + s.oneMinusBeta2 * (g * g);
  T mHat = m / s.biasCorrection1;
  T vHat = v / s.biasCorrection2;
  T denom = math::sqrt(vHat) + s.epsilon;
  return optimizerApply(s, param, mHat / denom);
}

/// One element of a step of `kind`: param, and the states of the kind (the
/// velocity, or m and v), are read from `io` and replaced by their new
/// values. state1 is unused by SGD, state2 by SGD and Momentum.
template <typename T>
MPC_HD inline void optimizerStepElement(OptimizerStepKind kind, const OptimizerScalars<T> &s,
                                        T grad, T &param, T &state1, T &state2) {
  switch (kind) {
  case OptimizerStepKind::Sgd:
    param = sgdStep(s, param, grad);
    return;
  case OptimizerStepKind::Momentum:
    param = momentumStep(s, param, grad, state1);
    return;
  case OptimizerStepKind::Adam:
    param = adamStep(s, param, grad, state1, state2);
    return;
  }
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_OPTIMIZERBODIES_H
