//===- BatchNormTrainLaunch.h - Training batch normalization launchers -*- C++ -*-===//
//
// What BatchNormTrainOps.cpp (the C++ compiler) calls in
// BatchNormTrainKernels.cu (nvcc): BatchNormalization with training_mode = 1
// and ai.mpc.training BatchNormalizationGrad, one block per channel of X
// [N, C, ...] (threads: rowThreads(N * spatial), SlicePlan.h). Each block
// sums its channel in double (thread-strided folds, then the fixed tree of
// SliceKernels.cuh, so a shape gives the same bits on every run), and
// applies the MPC_HD bodies of BatchNormBodies.h / NormBodies.h that the
// CPU's TrainingOps.cpp applies. Data f32, f16, bf16; parameters (and the
// running statistics, dScale, dBias) of the data's type, or f32 with 16-bit
// data.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_BATCHNORMTRAINLAUNCH_H
#define MPC_RUNTIME_CUDA_BATCHNORMTRAINLAUNCH_H

#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// X viewed as [batch, channels, spatial]; `threads` per channel block.
struct ChannelGeometry {
  int64_t batch = 1, channels = 1, spatial = 1;
  unsigned threads = 32;
};

/// Y, and runMean / runVar when non-null, of training-mode batch
/// normalization.
cudaError_t launchBatchNormTraining(int32_t type, int32_t paramType, const void *x,
                                    const void *scale, const void *bias, const void *inMean,
                                    const void *inVar, float epsilon, float momentum, void *y,
                                    void *runMean, void *runVar, const ChannelGeometry &g,
                                    cudaStream_t stream);

/// dX, dScale and dBias (each skipped when null) of BatchNormalizationGrad.
cudaError_t launchBatchNormGrad(int32_t type, int32_t paramType, const void *dy, const void *x,
                                const void *scale, float epsilon, void *dx, void *dScale,
                                void *dBias, const ChannelGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_BATCHNORMTRAINLAUNCH_H
