//===- Tool.h - Shared pieces of the mpc command-line tool ------*- C++ -*-===//
//
// Exit codes, error printing, argument scanning and model loading shared by
// the subcommands. Errors print one line "mpc: error: ..." on stderr.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TOOLS_TOOL_H
#define MPC_TOOLS_TOOL_H

#include "FilePlan.h"
#include "mpc/IR/Graph.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <string>
#include <vector>

namespace mpc {
class Backend;
struct CudaBackendOptions;
namespace tool {

/// True in a build with LeakSanitizer (ASan): the tool then frees what it
/// would otherwise leave to the process exit.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define MPC_TOOL_LEAK_CHECKED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(MPC_TOOL_LEAK_CHECKED)
#define MPC_TOOL_LEAK_CHECKED 1
#endif
#ifdef MPC_TOOL_LEAK_CHECKED
constexpr bool kLeakChecked = true;
#else
constexpr bool kLeakChecked = false;
#endif

enum ExitCode : int { Ok = 0, InputFailure = 1, UsageFailure = 2 };

/// Prints "mpc: error: <msg>" and returns InputFailure.
int fail(llvm::Error err);
int fail(const llvm::Twine &msg);
/// Prints "mpc <cmd>: <msg>" plus a hint to --help, returns UsageFailure.
int usageError(llvm::StringRef cmd, const llvm::Twine &msg);
void warn(const llvm::Twine &msg);

/// A simple scanner over argv: flags with values as "--x V" or "--x=V".
class ArgScanner {
public:
  ArgScanner(llvm::ArrayRef<const char *> args) : args(args.begin(), args.end()) {}
  bool done() const { return pos >= args.size(); }
  llvm::StringRef peek() const { return args[pos]; }
  llvm::StringRef next() { return args[pos++]; }
  /// If the current arg is `flag` (or `flag=value`), consumes it and its value.
  /// Sets `missing` when the flag has no value.
  bool value(llvm::StringRef flag, std::string &out, bool &missing);
  bool flag(llvm::StringRef f) {
    if (done() || peek() != f)
      return false;
    ++pos;
    return true;
  }
  /// Consumes the current argument as the subcommand's one positional
  /// argument, stored in `slot` (`what` names it: "model"). Returns "" or the
  /// usage message: an unknown option (with `context`, e.g. " with --train")
  /// or a second positional argument.
  std::string positional(std::string &slot, llvm::StringRef what,
                         llvm::StringRef context = "");

private:
  std::vector<std::string> args;
  size_t pos = 0;
};

/// Checks before any work that the folder of `output` exists (that it is no
/// file the command reads is FilePlan's check).
llvm::Error checkOutputPath(llvm::StringRef output);

/// Writes `bytes` to `path` through a temporary file in the same folder and
/// a rename (llvm::writeFileAtomically): the file is complete or absent. A
/// missing folder is named in the error.
llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef bytes);

/// True when the subcommand's arguments ask for its help (--help, -h).
bool wantsHelp(llvm::ArrayRef<const char *> args);

/// "512 B", "3.5 KiB", "12.25 MiB" (Run.cpp).
std::string formatBytes(uint64_t bytes);

/// The backend options `mpc run` and `mpc run --train` share.
struct BackendChoice {
  std::string device = "cpu"; ///< --device cpu|cuda
  int threads = 0;            ///< --threads: the CPU backend's matrix-product threads
  bool tf32 = false;          ///< --tf32: fp32 matrix products on the GPU in TF32
  bool fallback = true;       ///< off with --no-fallback
  bool cudaGraph = true;      ///< --cuda-graph on|off
  uint64_t maxMemory = 0;     ///< --max-memory: the backend's memory budget (0: none)
};

/// If the current argument is one of the options of BackendChoice, consumes
/// it (and its value) into `c` and returns true. A bad value sets `err`; an
/// option without its value sets `missing`.
bool scanBackendOption(ArgScanner &s, BackendChoice &c, std::string &err, bool &missing);

/// "" or what is wrong with the options together (--tf32, --no-fallback and
/// --cuda-graph apply to --device cuda only).
std::string checkBackendChoice(const BackendChoice &c);

/// The backend `c` names, checked to be usable here (Run.cpp): with
/// `c.fallback` the CPU backend stands behind a device backend for the nodes
/// the device has no kernel for (FallbackBackend). An unusable backend is one
/// error line starting with `option` and the device ("--device cuda: ...").
llvm::Expected<std::unique_ptr<Backend>> createBackend(const BackendChoice &c,
                                                       llvm::StringRef option = "--device");

/// `--placement-only` (Run.cpp): the CUDA kernel table's decisions made on the
/// host (HostPlacement.h: no plugin, no GPU) under the CPU fallback, so that
/// placementLine() is the line a GPU run prints once the plan is made.
std::unique_ptr<Backend> createPlacementBackend();
/// The backend of `mpc run` and of `mpc run --train`: createPlacementBackend()
/// with --placement-only, else createBackend(c).
llvm::Expected<std::unique_ptr<Backend>> createRunBackend(const BackendChoice &c,
                                                          bool placementOnly);
/// "" or what is wrong with --placement-only beside `c`: it needs --device
/// cuda and the fallback.
std::string checkPlacementOnly(const BackendChoice &c);

/// The CUDA backend (CudaLoader.cpp): in a build with CUDA, from the plugin
/// libmpc_cuda_backend.so, opened on the first call; its absence, a library
/// it needs that is missing, or a plugin of another build is one error line
/// starting with `option` ("--device cuda: cannot load the CUDA backend
/// '...': ..."). Whether a GPU is usable is the backend's checkAvailable().
llvm::Expected<std::unique_ptr<Backend>> loadCudaBackend(const CudaBackendOptions &options,
                                                         llvm::StringRef option);
/// False in a build without the CUDA backend, where loadCudaBackend says so.
bool cudaBackendBuilt();

/// Loads a model from an ONNX file or, for `.mpc` files, the textual form.
llvm::Expected<std::unique_ptr<Model>> loadModel(llvm::StringRef path);

/// Runs libonnx's checker (and with `typeInference` its strict type
/// inference) on `m` when libonnx knows all of its opsets (OnnxCheck.cpp). A
/// failure the model at `inputPath` shares is reported as bad input; any other
/// is an internal error about "the <what>" ("rewritten model").
llvm::Error checkWithOnnx(Model &m, llvm::StringRef inputPath, llvm::StringRef what,
                          bool typeInference);

int runRewrite(llvm::ArrayRef<const char *> args, const char *const *envp);
int runInspect(llvm::ArrayRef<const char *> args, const char *const *envp);
int runRun(llvm::ArrayRef<const char *> args, const char *const *envp);
int runOps(llvm::ArrayRef<const char *> args, const char *const *envp);
/// `mpc train-graph` (TrainGraph.cpp): builds a training model.
int runTrainGraph(llvm::ArrayRef<const char *> args, const char *const *envp);
/// `mpc run --train` (Train.cpp); runRun hands over when it sees --train.
int runTrain(llvm::ArrayRef<const char *> args, const char *const *envp);
int runPlot(llvm::ArrayRef<const char *> args, const char *const *envp);

} // namespace tool
} // namespace mpc

#endif // MPC_TOOLS_TOOL_H
