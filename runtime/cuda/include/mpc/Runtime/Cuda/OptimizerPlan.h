//===- OptimizerPlan.h - Chunk table of the multi-tensor optimizer step -*- C++ -*-===//
//
// MultiTensorSGDStep, MultiTensorMomentumStep and MultiTensorAdamStep on
// CUDA (OptimizerOps.cpp) are one launch over every parameter of the node,
// walking a chunk table made at prepare time as MultiTensorUnscale's is
// (UnscalePlan.h: chunks of at most kUnscaleChunkElements elements of one
// parameter, in the parameters' order; a chunk's `tensor` is its group).
// The launch reads the group's operands from a pointer table of
// kStepSlots entries per group (stepPointerTable) and updates each element
// with multiTensorStepElement, the per-parameter kernel's body. Pure host
// code (no CUDA header), tested in tests/cuda_host by replaying the table.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_OPTIMIZERPLAN_H
#define MPC_RUNTIME_CUDA_OPTIMIZERPLAN_H

#include "mpc/Runtime/Cuda/UnscalePlan.h"
#include "mpc/Runtime/Kernels/OptimizerBodies.h"

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// The pointer-table slots of one group: param, grad and the two states
/// in; param and the two states out (a state the kind lacks: null).
enum StepSlot : unsigned {
  kSlotParam,
  kSlotGrad,
  kSlotState1,
  kSlotState2,
  kSlotParamOut,
  kSlotState1Out,
  kSlotState2Out,
  kStepSlots
};

/// The chunk table of parameters of `sizes` elements (all f32), as
/// planUnscale makes it; false where planUnscale is.
bool planMultiTensorStep(const std::vector<int64_t> &sizes, unsigned smCount, UnscalePlan &out,
                         int64_t chunkElements = kUnscaleChunkElements);

/// The pointer table of a node whose groups of `groupInputs` inputs start at
/// input `firstGroup` (param, grad, then `states` states) and whose outputs
/// are groups of 1 + `states` (param, states): kStepSlots entries per
/// group, in the groups' order. Empty when the counts are not whole groups.
std::vector<void *> stepPointerTable(unsigned states, unsigned firstGroup,
                                     const std::vector<void *> &inputs,
                                     const std::vector<void *> &outputs);

/// Element i of the group whose slots are `slots`: with `skip`, param and
/// states copied; else the step of `kind` (OptimizerBodies.h, as the
/// per-parameter kernel and the CPU apply it).
MPC_HD inline void multiTensorStepElement(kernels::OptimizerStepKind kind,
                                          const kernels::OptimizerScalars<float> &s, bool skip,
                                          void *const *slots, int64_t i) {
  const float *param = static_cast<const float *>(slots[kSlotParam]);
  const float *s1 = static_cast<const float *>(slots[kSlotState1]);
  const float *s2 = static_cast<const float *>(slots[kSlotState2]);
  float *s1o = static_cast<float *>(slots[kSlotState1Out]);
  float *s2o = static_cast<float *>(slots[kSlotState2Out]);
  float p = param[i], a = s1 ? s1[i] : 0.0f, b = s2 ? s2[i] : 0.0f;
  if (!skip)
    kernels::optimizerStepElement(kind, s, static_cast<const float *>(slots[kSlotGrad])[i], p,
                                  a, b);
  static_cast<float *>(slots[kSlotParamOut])[i] = p;
  if (s1o)
    s1o[i] = a;
  if (s2o)
    s2o[i] = b;
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_OPTIMIZERPLAN_H
