//===- OptimizerPlan.cpp - Chunk table of the multi-tensor optimizer step -===//
//
// See OptimizerPlan.h.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/OptimizerPlan.h"
#include "mpc/Runtime/Cuda/CudaOps.h"

using namespace mpc::cuda;

bool mpc::cuda::planMultiTensorStep(const std::vector<int64_t> &sizes, unsigned smCount,
                                    UnscalePlan &out, int64_t chunkElements) {
  return planUnscale(sizes, std::vector<int32_t>(sizes.size(), kOnnxF32), smCount, out,
                     chunkElements);
}

std::vector<void *> mpc::cuda::stepPointerTable(unsigned states, unsigned firstGroup,
                                                const std::vector<void *> &inputs,
                                                const std::vector<void *> &outputs) {
  size_t per = 2 + size_t(states), outs = 1 + size_t(states);
  if (states > 2 || inputs.size() < firstGroup || (inputs.size() - firstGroup) % per != 0)
    return {};
  size_t groups = (inputs.size() - firstGroup) / per;
  if (groups == 0 || outputs.size() != groups * outs)
    return {};
  std::vector<void *> table(groups * kStepSlots, nullptr);
  for (size_t g = 0; g < groups; ++g) {
    void **slots = &table[g * kStepSlots];
    const size_t in = firstGroup + g * per, out = g * outs;
    slots[kSlotParam] = inputs[in];
    slots[kSlotGrad] = inputs[in + 1];
    slots[kSlotParamOut] = outputs[out];
    for (size_t k = 0; k < states; ++k) {
      slots[kSlotState1 + k] = inputs[in + 2 + k];
      slots[kSlotState1Out + k] = outputs[out + 1 + k];
    }
  }
  return table;
}
