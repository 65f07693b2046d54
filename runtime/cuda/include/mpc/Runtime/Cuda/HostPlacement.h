//===- HostPlacement.h - The CUDA backend's placement without a GPU -*- C++ -*-===//
//
// Where `mpc run --device cuda` would run each node, decided on a machine
// without a GPU: a Backend named "cuda" that answers hasKernel, supportsOp
// and prepare with the CUDA kernel table's rules (findCudaKernel,
// cudaRunsIfKnown, cudaRunsShaped: the same functions the CUDA backend
// asks) and keeps its memory and runs its nodes on the host with the CPU's
// kernels. Under FallbackBackend, an executor planned over it gives the
// placement line of a real GPU run (FallbackBackend::partitionLine), except
// what only a family's prepare on a device refuses (a shape cuDNN cannot
// express: those print a note on the GPU). `mpc run --placement-only` prints
// that line; tests check placements with it.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_HOSTPLACEMENT_H
#define MPC_RUNTIME_CUDA_HOSTPLACEMENT_H

#include "mpc/Runtime/Backend.h"

#include <memory>

namespace mpc {
namespace cuda {

/// The CUDA kernel table's decisions over host memory and the CPU kernels.
std::unique_ptr<Backend> createHostPlacementBackend();

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_HOSTPLACEMENT_H
