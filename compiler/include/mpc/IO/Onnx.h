//===- Onnx.h - ONNX import and export --------------------------*- C++ -*-===//
//
// Lossless conversion between ONNX ModelProto files and mpc's IR: everything
// the IR does not model (functions, sparse initializers, protobuf fields newer
// than this ONNX build) is carried through verbatim.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IO_ONNX_H
#define MPC_IO_ONNX_H

#include "mpc/IR/Graph.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace onnx {
class ModelProto;
}

namespace mpc {

/// Oldest and newest ModelProto.ir_version mpc accepts.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 14;

/// Reads and imports an ONNX model file. External data is resolved relative to
/// the file's folder and must stay inside it.
llvm::Expected<std::unique_ptr<Model>> importOnnxFile(llvm::StringRef path);
/// Imports a serialized ModelProto; `baseDir` resolves external data. With
/// `owner` (something that keeps `bytes` alive), tensors refer to their raw
/// data in `bytes` instead of copying it, and share ownership of it.
llvm::Expected<std::unique_ptr<Model>>
importOnnxBytes(llvm::StringRef bytes, llvm::StringRef baseDir,
                std::shared_ptr<const void> owner = nullptr);
/// Imports a parsed ModelProto.
llvm::Expected<std::unique_ptr<Model>> importOnnx(const onnx::ModelProto &proto,
                                                  llvm::StringRef baseDir);

/// What writeOnnxFile did (for tests of the streamed write).
struct ExportStats {
  /// Bytes of the main graph's nodes written to the file while exporting.
  uint64_t bytesStreamed = 0;
  /// Times the file was written again because the graph's length took
  /// another varint width than estimated.
  unsigned rewrites = 0;
};

struct ExportOptions {
  /// Write tensors of at least this many bytes to `externalDataFile` (relative
  /// to the output's folder); empty keeps every tensor inline.
  std::string externalDataFile;
  uint64_t externalThreshold = 1024;
  /// Without external data, the main graph's nodes are written to the file
  /// while they are exported once this many bytes of them are held (the
  /// bytes written are the same either way; tests lower it).
  size_t streamNodesAfter = size_t(4) << 20;
  ExportStats *stats = nullptr;
};

/// Converts the IR back to a ModelProto. Tensors still referring to external
/// data are read when `opts` asks for inline data.
llvm::Error exportOnnx(Model &m, onnx::ModelProto &proto);
/// Writes a model file atomically (temporary file, then rename), together with
/// its external data file when `opts` names one. The input is never touched.
llvm::Error writeOnnxFile(Model &m, llvm::StringRef path, const ExportOptions &opts = {});
/// Serializes the model to bytes with every tensor inline.
llvm::Expected<std::string> exportOnnxBytes(Model &m);

} // namespace mpc

#endif // MPC_IO_ONNX_H
