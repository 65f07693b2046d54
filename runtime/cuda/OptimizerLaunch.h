//===- OptimizerLaunch.h - Host entry point of the fused optimizer step -*- C++ -*-===//
//
// What OptimizerOps.cpp (the C++ compiler) calls in OptimizerKernels.cu
// (nvcc): SGDStep, MomentumStep and AdamStep over f32 tensors as one
// grid-stride kernel with the MPC_HD body the CPU loop calls
// (Kernels/OptimizerBodies.h). The scalars and the skip flag stay on the
// device: every thread reads them, nothing is read on the host.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_OPTIMIZERLAUNCH_H
#define MPC_RUNTIME_CUDA_OPTIMIZERLAUNCH_H

#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Cuda/OptimizerPlan.h"
#include "mpc/Runtime/Kernels/OptimizerBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// The device operands of one fused step over n f32 elements: param, grad
/// and the states of the kind in; param and states out (state pointers of
/// another kind null); the kind's scalars in OptimizerStep.h's order; the
/// optional weight decay and skip flag (null: absent; skipIsBool: a bool
/// flag, else an f32 one, true when nonzero).
struct OptimizerStepArgs {
  kernels::OptimizerStepKind kind = kernels::OptimizerStepKind::Sgd;
  const float *param = nullptr, *grad = nullptr, *state1 = nullptr, *state2 = nullptr;
  float *paramOut = nullptr, *state1Out = nullptr, *state2Out = nullptr;
  const float *scalars[kernels::kMaxOptimizerScalars] = {};
  const float *decay = nullptr;
  const void *skip = nullptr;
  bool skipIsBool = false;
  /// The optional 16-bit weight copy (param_copy): the new param rounded to
  /// fp16 (or bf16 when copyIsBf16) as Cast rounds; null: absent.
  void *copyOut = nullptr;
  bool copyIsBf16 = false;
  int64_t n = 0;
};

cudaError_t launchOptimizerStep(const OptimizerStepArgs &args, const LaunchGeometry &g,
                                cudaStream_t stream);

/// The scalars of a multi-tensor step, read on the device as the
/// per-parameter step's are (OptimizerStepArgs without the tensors).
struct MultiTensorStepArgs {
  kernels::OptimizerStepKind kind = kernels::OptimizerStepKind::Sgd;
  const float *scalars[kernels::kMaxOptimizerScalars] = {};
  const float *decay = nullptr;
  const void *skip = nullptr;
  bool skipIsBool = false;
};

/// One launch per slice (UnscalePlan.h) of min(`blocks`, its chunks) x
/// `threads` over its chunks of the device table `chunks` (OptimizerPlan.h),
/// the slice's pointers by value: chunk c updates elements [c.begin,
/// c.begin + c.length) of group c.tensor, whose operands are its kStepSlots
/// entries of `table` (stepPointerTable).
cudaError_t launchMultiTensorStep(const UnscaleChunk *chunks,
                                  const std::vector<LaunchSlice> &slices,
                                  const std::vector<void *> &table,
                                  const MultiTensorStepArgs &args, unsigned blocks,
                                  unsigned threads, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_OPTIMIZERLAUNCH_H
