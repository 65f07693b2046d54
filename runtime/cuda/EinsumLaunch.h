//===- EinsumLaunch.h - Host entry point of the Einsum gathers ---*- C++ -*-===//
//
// What EinsumOps.cpp (the C++ compiler) calls in EinsumKernels.cu (nvcc):
// one EinsumGather (EinsumGather.h), one thread per element of its dense
// result, each summing its summed index space in order in fp32 (a fixed
// order: the same inputs give the same bits), times the gather's scale,
// rounded once into the destination type.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_EINSUMLAUNCH_H
#define MPC_RUNTIME_CUDA_EINSUMLAUNCH_H

#include "mpc/Runtime/Cuda/EinsumGather.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// dst (ONNX type `dstType`) = the gather `g` of src (`srcType`); both
/// f32, f16 or bf16.
cudaError_t launchEinsumGather(int32_t srcType, int32_t dstType, const void *src, void *dst,
                               const EinsumGather &g, const LaunchGeometry &geometry,
                               cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_EINSUMLAUNCH_H
