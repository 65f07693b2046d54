//===- CudaPlugin.h - The CUDA backend as a plugin of mpc -------*- C++ -*-===//
//
// In a build with the CUDA backend, `mpc` does not link it: the backend is the
// shared object libmpc_cuda_backend.so (runtime/cuda/CudaPlugin.cpp, the
// objects of mpc_runtime_cuda plus cudart, cuBLASLt and cuDNN), which mpc
// opens with dlopen only when a command needs a GPU (tools/mpc/CudaLoader.cpp).
// Everything else the backend calls (the runtime core, the registry, LLVM's
// Support library) is mpc's own copy: the plugin links none of it and mpc
// exports its symbols, so there is one registry and one set of LLVM statics
// in the process (docs/backends.md, "The CUDA plugin").
//
// The entry points are C functions. mpc checks the first two before it calls
// the third, so a plugin from another build is refused before any C++ type
// crosses the boundary.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CUDAPLUGIN_H
#define MPC_RUNTIME_CUDA_CUDAPLUGIN_H

#include <cstdint>

namespace mpc {
class Backend;
struct CudaBackendOptions;

/// Raised whenever what crosses the boundary changes: the entry points, the
/// layout of CudaBackendOptions, or the Backend interface.
constexpr uint32_t kCudaPluginAbi = 2;
/// The file, in the folder `lib` next to the folder of the mpc binary
/// (build/tools/mpc -> build/lib; a bundle's libexec/mpc -> lib).
constexpr const char *kCudaPluginFile = "libmpc_cuda_backend.so";
constexpr const char *kCudaPluginAbiSymbol = "mpc_cuda_plugin_abi";
constexpr const char *kCudaPluginVersionSymbol = "mpc_cuda_plugin_version";
constexpr const char *kCudaPluginCreateSymbol = "mpc_cuda_plugin_create";

} // namespace mpc

extern "C" {
/// kCudaPluginAbi of the plugin's build.
typedef uint32_t (*MpcCudaPluginAbiFn)();
/// MPC_VERSION of the plugin's build.
typedef const char *(*MpcCudaPluginVersionFn)();
/// A new CUDA backend (createCudaBackend(options)), owned by the caller.
/// Creating it touches no device; Backend::checkAvailable() says whether one
/// is usable.
typedef mpc::Backend *(*MpcCudaPluginCreateFn)(const mpc::CudaBackendOptions *options);
}

#endif // MPC_RUNTIME_CUDA_CUDAPLUGIN_H
