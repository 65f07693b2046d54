//===- AttentionLaunch.h - Host entry point of Attention's softmax -*- C++ -*-===//
//
// What AttentionOps.cpp (the C++ compiler) calls in AttentionKernels.cu
// (nvcc): the softmax of Attention's fp32 score rows in place, row r being
// query i = r % qSeq of head h = (r / qSeq) % qHeads of batch b, each score
// soft-capped and biased by attn_mask and the causal triangle
// (Kernels/AttentionBodies.h, the CPU kernel's bodies), then normalized as
// NormBodies.h's softmax. One block per row with a fixed reduction tree
// (SliceKernels.cuh), so the same inputs give the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_ATTENTIONLAUNCH_H
#define MPC_RUNTIME_CUDA_ATTENTIONLAUNCH_H

#include "mpc/Runtime/Cuda/SlicePlan.h"
#include "mpc/Runtime/Kernels/AttentionBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// The rows' constants, by value.
struct AttentionRows {
  kernels::AttentionMaskShape mask;
  int64_t qHeads = 1, qSeq = 1, past = 0;
  bool causal = false;
  float softcap = 0.0f;
};

/// scores: the plan's rows of `total` fp32 scores; mask: attn_mask of ONNX
/// type `maskType` (bool, or f32/f16/bf16), null when rows.mask is not
/// present.
cudaError_t launchAttentionSoftmax(float *scores, int32_t maskType, const void *mask,
                                   const AttentionRows &rows, const SlicePlan &plan,
                                   cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_ATTENTIONLAUNCH_H
