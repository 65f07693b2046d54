//===- CudaBackend.h - Creating the CUDA backend with options ---*- C++ -*-===//
//
// createCudaBackend() (Backend.h) with the backend's options. Defined by the
// CUDA backend when the build has one (CudaBackend.cpp), otherwise by
// NoCudaBackend.cpp, which says in one line that this build has none.
// Creating the backend touches no device: checkAvailable() says whether
// one is usable here.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CUDABACKEND_H
#define MPC_RUNTIME_CUDA_CUDABACKEND_H

#include "mpc/Runtime/Backend.h"

namespace mpc {

struct CudaBackendOptions {
  /// fp32 matrix products on Tensor Cores in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32);
  /// off: strict fp32 (CUBLAS_COMPUTE_32F, which never rounds to TF32).
  bool tf32 = false;
  /// Replay a static plan as a CUDA graph after a warm-up run
  /// (GraphSchedule.h); off: every run launches node by node.
  bool cudaGraph = true;
};

llvm::Expected<std::unique_ptr<Backend>> createCudaBackend(const CudaBackendOptions &options);

} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CUDABACKEND_H
