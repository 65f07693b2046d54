//===- RotaryLaunch.h - Host entry point of the RotaryEmbedding launcher -*- C++ -*-===//
//
// What RotaryOps.cpp (the C++ compiler) calls in RotaryKernels.cu (nvcc):
// RotaryEmbedding as one thread per slot of every head vector
// (Kernels/RotaryBodies.h, the CPU kernel's body). With position ids, a
// position outside the caches' rows is recorded as IndexOutOfRange against
// cos_cache (operand 1), as the CPU kernel records it.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_ROTARYLAUNCH_H
#define MPC_RUNTIME_CUDA_ROTARYLAUNCH_H

#include "DataLaunch.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/RotaryBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// The operands of one launch: x, the caches and y of ONNX type `type`
/// (f32, f16, bf16); `positions` (kOnnxI32 or kOnnxI64 `positionType`) null
/// when the caches are [batch, seq, dim / 2]; `maxPosition` the caches'
/// rows otherwise.
struct RotaryArgs {
  kernels::RotaryShape shape;
  int32_t type = 0, positionType = 0;
  const void *x = nullptr, *cosCache = nullptr, *sinCache = nullptr, *positions = nullptr;
  void *y = nullptr;
  int64_t maxPosition = 0;
  IndexErrorRecord *record = nullptr;
  int32_t call = 0;
};

/// Slots of the whole call: batch * seq * heads * rotarySlots.
MPC_HD inline int64_t rotaryThreads(const kernels::RotaryShape &r) {
  return r.batch * r.seq * r.heads * kernels::rotarySlots(r);
}

cudaError_t launchRotary(const RotaryArgs &a, const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_ROTARYLAUNCH_H
