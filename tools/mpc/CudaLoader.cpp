//===- CudaLoader.cpp - The CUDA backend, opened when a command needs it --===//
//
// In a build with the CUDA backend it is the plugin libmpc_cuda_backend.so
// (runtime/cuda/include/mpc/Runtime/Cuda/CudaPlugin.h), opened here on first
// use from the folder `lib` beside the folder of this binary. Without CUDA,
// mpc links mpc_runtime_cuda's stub, whose createCudaBackend() says in one
// line that the build has none.
//
//===----------------------------------------------------------------------===//
#include "Tool.h"
#include "mpc/Runtime/Cuda/CudaBackend.h"
#include "mpc/Support/Diagnostics.h"

#if MPC_CUDA_PLUGIN
#include "mpc/Runtime/Cuda/CudaPlugin.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <dlfcn.h>
#endif

using namespace mpc;

#if MPC_CUDA_PLUGIN
namespace {

std::string pluginPath() {
  // The binary itself (/proc/self/exe: links resolved), not argv[0].
  static int anchor;
  std::string exe = llvm::sys::fs::getMainExecutable("mpc", &anchor);
  llvm::SmallString<256> path(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(path, "..", "lib", kCudaPluginFile);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return std::string(path);
}

/// dlerror()'s text without the path it starts with when the file itself is
/// what failed (the message names the path already).
std::string loadError(llvm::StringRef path) {
  const char *e = dlerror();
  llvm::StringRef text = e ? e : "unknown error";
  text.consume_front((path + ": ").str());
  return text.str();
}

/// The plugin's create entry, checked to be of this build; opened once.
llvm::Expected<MpcCudaPluginCreateFn> openPlugin() {
  static MpcCudaPluginCreateFn create = nullptr;
  if (create)
    return create;
  std::string path = pluginPath();
  // Never closed: the backend's code and the CUDA libraries stay for the
  // process's life.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return inputError("cannot load the CUDA backend '{0}': {1}", path,
                      escapeName(loadError(path)));
  auto abi = reinterpret_cast<MpcCudaPluginAbiFn>(dlsym(handle, kCudaPluginAbiSymbol));
  auto version =
      reinterpret_cast<MpcCudaPluginVersionFn>(dlsym(handle, kCudaPluginVersionSymbol));
  auto made = reinterpret_cast<MpcCudaPluginCreateFn>(dlsym(handle, kCudaPluginCreateSymbol));
  if (!abi || !version || !made)
    return inputError("the CUDA backend '{0}' is not an mpc CUDA plugin (it lacks {1})", path,
                      !abi ? kCudaPluginAbiSymbol
                           : !version ? kCudaPluginVersionSymbol : kCudaPluginCreateSymbol);
  if (abi() != kCudaPluginAbi || llvm::StringRef(version()) != MPC_VERSION)
    return inputError("the CUDA backend '{0}' is from another build of mpc (plugin ABI {1}, "
                      "version '{2}'; this mpc: ABI {3}, version '{4}')",
                      path, abi(), version(), kCudaPluginAbi, MPC_VERSION);
  create = made;
  return create;
}

} // namespace
#endif

llvm::Expected<std::unique_ptr<Backend>>
tool::loadCudaBackend(const CudaBackendOptions &options, llvm::StringRef option) {
#if MPC_CUDA_PLUGIN
  auto create = openPlugin();
  if (!create)
    return inputError("{0} cuda: {1}", option, llvm::toString(create.takeError()));
  Backend *backend = (*create)(&options);
  if (!backend)
    return inputError("{0} cuda: the CUDA backend plugin made no backend", option);
  return std::unique_ptr<Backend>(backend);
#else
  auto b = createCudaBackend(options);
  if (b)
    return b;
  // The stub says "--device cuda: ..."; name the option used.
  std::string msg = llvm::toString(b.takeError());
  llvm::StringRef rest(msg);
  if (rest.consume_front("--device cuda: "))
    msg = (option + " cuda: " + rest).str();
  return inputError("{0}", msg);
#endif
}

bool tool::cudaBackendBuilt() {
#if MPC_CUDA_PLUGIN
  return true;
#else
  return false;
#endif
}
