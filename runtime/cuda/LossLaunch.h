//===- LossLaunch.h - Host entry points of the loss launchers ---*- C++ -*-===//
//
// What LossOps.cpp (the C++ compiler) calls in LossKernels.cu (nvcc):
// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss, their gradient
// SoftmaxCrossEntropyLossGrad and MSELossGrad, over the MPC_HD bodies of
// runtime/kernels/.../LossBodies.h that the CPU's TrainingOps.cpp calls.
// Types: f32, f16, bf16 (cudaErrorInvalidValue for another); labels i32 or
// i64. A bad label (neither ignore_index nor in [0, classes)) is written to
// the run's error record (kBadLabelError, LossErrors.h) by the finishing
// block, the lowest index first as on the CPU; its position counts as
// ignored so that no kernel reads outside the scores or the weights.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_LOSSLAUNCH_H
#define MPC_RUNTIME_CUDA_LOSSLAUNCH_H

#include "DataLaunch.h" // IndexErrorRecord: the device's view of the error record
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Cuda/LossPlan.h"
#include "mpc/Runtime/Kernels/LossBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// Which loss reduction a launch does (LossReduction's values).
enum class LossReduce : uint8_t { None, Mean, Sum };

/// Where a bad label is recorded: the run's record, this launch's number
/// and the input whose dimension 1 is the class count (the message's C).
struct LossErrorSink {
  IndexErrorRecord *record = nullptr;
  int32_t call = 0;
  int32_t scoresOperand = 0;
};

/// The tensors of a classification loss (device pointers; weights and
/// logProb may be null).
struct LossTensors {
  const void *scores = nullptr;
  const void *labels = nullptr;
  const void *weights = nullptr;
  void *loss = nullptr;
  void *logProb = nullptr;
};

/// SoftmaxCrossEntropyLoss (fromLogProb false) or NegativeLogLikelihoodLoss
/// (true) of scores of ONNX type `type`, labels of `labelType` (i32/i64).
cudaError_t launchClassificationLoss(int32_t type, int32_t labelType, bool fromLogProb,
                                     LossReduce reduce, const kernels::LossLabelRule &rule,
                                     const LossTensors &t, const LossPlan &p, void *workspace,
                                     const LossErrorSink &err, cudaStream_t stream);

/// SoftmaxCrossEntropyLossGrad: dScores from dLoss, logProb and labels.
cudaError_t launchSoftmaxCrossEntropyLossGrad(int32_t type, int32_t labelType, LossReduce reduce,
                                              const kernels::LossLabelRule &rule,
                                              const void *dLoss, const void *logProb,
                                              const void *labels, void *dScores,
                                              const LossPlan &p, const LaunchGeometry &g,
                                              void *workspace, const LossErrorSink &err,
                                              cudaStream_t stream);

/// MSELossGrad over n elements (dLoss has n elements for None, one else).
cudaError_t launchMSELossGrad(int32_t type, LossReduce reduce, const void *dLoss,
                              const void *pred, const void *target, void *dPred, int64_t n,
                              const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_LOSSLAUNCH_H
