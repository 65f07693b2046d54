//===- FuzzImport.cpp - libFuzzer target for the ONNX importer -------------===//
//
// Feeds arbitrary bytes to the importer, the verifier and, for models that
// import, the exporter and the AMP rewrite. Any crash, hang, assertion or
// sanitizer report is a bug: bad input must come back as an llvm::Error.
//
//===----------------------------------------------------------------------===//
#include "mpc/IO/Onnx.h"
#include "mpc/Passes/Amp.h"
#include "mpc/Verify/Verifier.h"
#include "llvm/Support/Error.h"
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  // External data is resolved against a folder that holds no data files.
  auto m = mpc::importOnnxBytes(bytes, "/nonexistent-fuzz-dir");
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
