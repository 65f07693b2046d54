//===- NoCudaBackend.cpp - createCudaBackend() in a build without CUDA ------===//
//
// Compiled instead of the CUDA backend when CMake did not build it
// (MPC_ENABLE_CUDA, runtime/cuda/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/CudaBackend.h"
#include "mpc/Support/Diagnostics.h"

llvm::Expected<std::unique_ptr<mpc::Backend>>
mpc::createCudaBackend(const CudaBackendOptions &) {
  return inputError("--device cuda: this build has no CUDA backend (configure with "
                    "MPC_ENABLE_CUDA=ON on a machine with the CUDA toolkit)");
}

llvm::Expected<std::unique_ptr<mpc::Backend>> mpc::createCudaBackend() {
  return createCudaBackend(CudaBackendOptions());
}
