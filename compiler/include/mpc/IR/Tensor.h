//===- Tensor.h - Constant tensor data --------------------------*- C++ -*-===//
//
// Initializers and tensor-valued attributes. Data is held as little-endian
// packed bytes (ONNX raw_data layout) or strings, or refers to external data
// beside the model, which is read only when a pass needs the values.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_TENSOR_H
#define MPC_IR_TENSOR_H

#include "mpc/IR/DType.h"
#include "mpc/IR/RareString.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// Where external tensor data lives (ONNX external_data entries).
struct ExternalRef {
  std::string location; ///< as written in the model (relative to its folder)
  std::string path;     ///< resolved absolute path, checked to stay in the folder
  uint64_t offset = 0;
  int64_t length = -1;  ///< -1: to the end of the file
  std::string checksum;
};

class Tensor {
public:
  std::string name;
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  RareString docString;
  /// Serialized protobuf fields this build of ONNX does not know (kept verbatim).
  RareString unknownFields;

  Tensor() = default;
  Tensor(DType t, std::vector<int64_t> shape) : dtype(t), dims(std::move(shape)) {}

  int64_t numElements() const;
  /// Size of the packed data in bytes (strings: 0).
  uint64_t byteSize() const;

  bool isExternal() const { return external != nullptr; }
  /// Where the data lives when it is external, else null.
  const ExternalRef *externalRef() const { return external.get(); }
  void setExternal(ExternalRef r) {
    external = std::make_shared<const ExternalRef>(std::move(r));
    raw.clear();
    dropBorrowed();
  }
  /// Reads external data into memory (no-op when in memory already).
  llvm::Error materialize();

  /// Packed little-endian data; only valid for in-memory tensors. It may lie
  /// in a buffer the tensor borrows (see setBorrowedBytes), so it is not
  /// aligned for its element type: read elements with memcpy.
  llvm::ArrayRef<uint8_t> bytes() const {
    assert(!external && "materialize() external tensors first");
    return keepAlive ? borrowed : llvm::ArrayRef<uint8_t>(raw);
  }
  void setBytes(std::vector<uint8_t> b) {
    external.reset();
    dropBorrowed();
    raw = std::move(b);
  }
  /// Uses `data` in place, without a copy: `owner` keeps the buffer it lies
  /// in alive for as long as this tensor (or a copy of it) refers to it.
  /// Import borrows the weights of the file it read this way.
  void setBorrowedBytes(llvm::ArrayRef<uint8_t> data, std::shared_ptr<const void> owner) {
    external.reset();
    raw.clear();
    borrowed = data;
    keepAlive = std::move(owner);
  }
  std::vector<std::string> &strings() { return strs; }
  const std::vector<std::string> &strings() const { return strs; }

  /// Element i as a double, for floating and integer tensors in memory.
  double getAsDouble(int64_t i) const;
  /// Element i as an int64, exactly for integer tensors (see loadAsInt64).
  int64_t getAsInt64(int64_t i) const;

private:
  std::vector<uint8_t> raw;
  llvm::ArrayRef<uint8_t> borrowed; ///< the data while keepAlive is set
  std::shared_ptr<const void> keepAlive;
  std::vector<std::string> strs;
  /// Rare, so out of line; never changed in place (setExternal replaces it),
  /// so copies of the tensor share it.
  std::shared_ptr<const ExternalRef> external;

  void dropBorrowed() {
    borrowed = {};
    keepAlive.reset();
  }
};

} // namespace mpc

#endif // MPC_IR_TENSOR_H
