//===- main.cpp - The mpc command-line tool --------------------------------===//
//
// `mpc <command> [options]`: rewrite (the AMP compiler pass), inspect (what a
// rewrite would decide), run (the runtime). Dispatch only; each command lives
// in its own file.
//
//===----------------------------------------------------------------------===//
#include "Tool.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Text/Text.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <google/protobuf/stubs/common.h>
#include <new>
#include <unistd.h>

extern char **environ;

using namespace mpc;
using namespace mpc::tool;

static const char kUsage[] =
    R"(usage: mpc <command> [options]

mpc compiles ONNX models to mixed precision (float16/bfloat16) the way
TensorFlow's automatic mixed precision does, and runs them.

commands:
  rewrite   rewrite a model to mixed precision (writes MODEL.amp.onnx)
  inspect   show opsets, op histogram, parameters and what a rewrite would decide
  run       execute a model on the CPU reference backend (--train: train it)
  ops       list the ops mpc knows: AMP class, CPU and CUDA kernels
  train-graph  build an ONNX training model (loss, gradients, optimizer)
  plot      draw training curves from `mpc run --train --log` CSV files as SVG

Run 'mpc <command> --help' for the options of a command.
Other options: --help, --version.
)";

int tool::fail(llvm::Error err) {
  std::string msg;
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &e) {
    if (!msg.empty())
      msg += "; ";
    msg += e.message();
  });
  return fail(msg);
}

int tool::fail(const llvm::Twine &msg) {
  llvm::errs() << "mpc: error: " << oneLine(msg.str()) << "\n";
  return InputFailure;
}

int tool::usageError(llvm::StringRef cmd, const llvm::Twine &msg) {
  llvm::errs() << "mpc " << cmd << ": " << oneLine(msg.str()) << " (see 'mpc " << cmd
               << " --help')\n";
  return UsageFailure;
}

void tool::warn(const llvm::Twine &msg) {
  llvm::errs() << "mpc: warning: " << oneLine(msg.str()) << "\n";
}

llvm::Error tool::writeFileAtomically(llvm::StringRef path, llvm::StringRef bytes) {
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  if (!llvm::sys::fs::is_directory(dir))
    return inputError("cannot write '{0}': folder '{1}' does not exist", path, dir);
  if (llvm::Error err =
          llvm::writeFileAtomically((path + kTempSuffix).str(), path, bytes))
    return inputError("cannot write '{0}': {1}", path, llvm::toString(std::move(err)));
  return llvm::Error::success();
}

bool tool::wantsHelp(llvm::ArrayRef<const char *> args) {
  for (const char *a : args)
    if (llvm::StringRef(a) == "--help" || llvm::StringRef(a) == "-h")
      return true;
  return false;
}

std::string ArgScanner::positional(std::string &slot, llvm::StringRef what,
                                   llvm::StringRef context) {
  llvm::StringRef cur = next();
  if (cur.startswith("-") && cur != "-")
    return "unknown option " + quoteName(cur) + context.str();
  if (!slot.empty())
    return ("more than one " + what + " (" + quoteName(slot) + " and " + quoteName(cur) + ")").str();
  slot = cur.str();
  return "";
}

llvm::Error tool::checkOutputPath(llvm::StringRef output) {
  llvm::SmallString<256> dir(output);
  llvm::sys::path::remove_filename(dir);
  if (!dir.empty() && !llvm::sys::fs::is_directory(dir))
    return inputError("output folder '{0}' does not exist", dir);
  return llvm::Error::success();
}

bool ArgScanner::value(llvm::StringRef flag, std::string &out, bool &missing) {
  if (done())
    return false;
  llvm::StringRef a = peek();
  if (a == flag) {
    ++pos;
    if (done()) {
      missing = true;
      return true;
    }
    out = args[pos++];
    return true;
  }
  if (a.startswith(flag) && a.size() > flag.size() && a[flag.size()] == '=') {
    out = a.substr(flag.size() + 1).str();
    ++pos;
    return true;
  }
  return false;
}

llvm::Expected<std::unique_ptr<Model>> tool::loadModel(llvm::StringRef path) {
  if (!path.endswith(".mpc"))
    return importOnnxFile(path);
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return inputError("cannot read '{0}': {1}", path, buf.getError().message());
  return parseModelText((*buf)->getBuffer(), path);
}

static int dispatch(int argc, const char **argv);

static const char kOutOfMemory[] =
    "mpc: error: out of memory: a request for host memory failed (a smaller input, or "
    "--max-memory to stop earlier)\n";

/// LLVM's containers and mpc's arenas report a failed allocation here: one
/// line and exit 1 (it may not return, and allocating is not safe).
static void outOfMemory(void *, const char *, bool) {
  (void)!::write(2, kOutOfMemory, sizeof kOutOfMemory - 1);
  ::_exit(InputFailure);
}

int main(int argc, const char **argv) {
  llvm::install_bad_alloc_error_handler(outOfMemory);
  // Sizes are checked before memory is taken (tensors against the machine,
  // values against --max-memory or what is available); a request that still
  // fails (an address-space limit below what the kernel reports) is one line,
  // not an abort. Files being written are temporaries until the end, and the
  // next run removes what this one leaves (FilePlan).
  try {
    return dispatch(argc, argv);
  } catch (const std::bad_alloc &) {
    llvm::errs() << kOutOfMemory;
    return InputFailure;
  }
}

static int dispatch(int argc, const char **argv) {
  // libonnx/protobuf print their own diagnostics on some failures; mpc
  // reports errors itself.
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  if (argc < 2) {
    llvm::errs() << kUsage;
    return UsageFailure;
  }
  llvm::StringRef cmd = argv[1];
  llvm::ArrayRef<const char *> rest(argv + 2, argv + argc);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    llvm::outs() << kUsage;
    return Ok;
  }
  if (cmd == "--version") {
    llvm::outs() << "mpc " << MPC_VERSION << "\n";
    return Ok;
  }
  if (cmd == "rewrite")
    return runRewrite(rest, environ);
  if (cmd == "inspect")
    return runInspect(rest, environ);
  if (cmd == "run")
    return runRun(rest, environ);
  if (cmd == "ops")
    return runOps(rest, environ);
  if (cmd == "train-graph")
    return runTrainGraph(rest, environ);
  if (cmd == "plot")
    return runPlot(rest, environ);
  llvm::errs() << "mpc: unknown command '" << cmd << "'\n\n" << kUsage;
  return UsageFailure;
}
