//===- FuzzImport.cpp - libFuzzer target for the ONNX importer -------------===//
//
// Feeds arbitrary bytes to the importer the way the tools read a model: as a
// file on disk (importOnnxFile, which maps large files and lets tensors
// borrow from the mapping), next to external data files it may name; then
// the verifier and, for models that import, the exporter and the AMP
// rewrite. Any crash, hang, assertion or sanitizer report is a bug: bad input
// must come back as an llvm::Error.
//
//===----------------------------------------------------------------------===//
#include "mpc/IO/Onnx.h"
#include "mpc/Passes/Amp.h"
#include "mpc/Verify/Verifier.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {
/// One folder for the whole run, holding the model file and the data files.
struct FuzzDir {
  std::string path;
  FuzzDir() {
    llvm::SmallString<128> p;
    if (llvm::sys::fs::createUniqueDirectory("mpc-fuzz", p))
      std::abort();
    path = std::string(p);
  }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  void write(llvm::StringRef name, llvm::StringRef bytes) const {
    std::error_code ec;
    llvm::raw_fd_ostream os(file(name), ec);
    if (ec)
      std::abort();
    os << bytes;
  }
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const FuzzDir dir;
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  // External data the model may name (the seeds in tests/fuzz/seeds name
  // w.bin): the input's own bytes, so offsets and lengths land inside, past
  // the end, or on a short file as the input says.
  dir.write("w.bin", bytes.drop_front(bytes.size() / 2));
  dir.write("model.onnx", bytes);
  auto m = mpc::importOnnxFile(dir.file("model.onnx"));
  if (!m) {
    llvm::consumeError(m.takeError());
    return 0;
  }
  if (llvm::Error err = mpc::verifyModel(**m)) {
    llvm::consumeError(std::move(err));
    return 0;
  }
  auto out = mpc::exportOnnxBytes(**m);
  if (!out) {
    llvm::consumeError(out.takeError());
    return 0;
  }
  mpc::AmpRunOptions opts;
  mpc::SchemaOnlyCaps caps;
  auto res = mpc::runAmpRewrite(**m, opts, caps);
  if (!res)
    llvm::consumeError(res.takeError());
  return 0;
}
