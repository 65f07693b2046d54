//===- CudaPlugin.cpp - The entry points of libmpc_cuda_backend.so --------===//
//
// The only source of the plugin of its own: the rest is mpc_runtime_cuda,
// linked in whole (CudaPlugin.h says how mpc finds and checks it).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/CudaPlugin.h"
#include "mpc/Runtime/Cuda/CudaBackend.h"

#include <type_traits>

#define MPC_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))

MPC_PLUGIN_EXPORT uint32_t mpc_cuda_plugin_abi() { return mpc::kCudaPluginAbi; }

MPC_PLUGIN_EXPORT const char *mpc_cuda_plugin_version() { return MPC_VERSION; }

MPC_PLUGIN_EXPORT mpc::Backend *mpc_cuda_plugin_create(const mpc::CudaBackendOptions *options) {
  // createCudaBackend only constructs the backend; it has no failure path.
  auto backend = mpc::createCudaBackend(*options);
  if (!backend) {
    llvm::consumeError(backend.takeError());
    return nullptr;
  }
  return backend->release();
}

// The function-pointer types mpc casts dlsym's results to are these.
static_assert(std::is_same_v<decltype(&mpc_cuda_plugin_abi), MpcCudaPluginAbiFn>);
static_assert(std::is_same_v<decltype(&mpc_cuda_plugin_version), MpcCudaPluginVersionFn>);
static_assert(std::is_same_v<decltype(&mpc_cuda_plugin_create), MpcCudaPluginCreateFn>);
