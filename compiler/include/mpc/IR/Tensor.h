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
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
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
  std::string docString;
  /// Serialized protobuf fields this build of ONNX does not know (kept verbatim).
  std::string unknownFields;

  Tensor() = default;
  Tensor(DType t, std::vector<int64_t> shape) : dtype(t), dims(std::move(shape)) {}

  int64_t numElements() const;
  /// Size of the packed data in bytes (strings: 0).
  uint64_t byteSize() const;

  bool isExternal() const { return external.hasValue(); }
  const llvm::Optional<ExternalRef> &externalRef() const { return external; }
  void setExternal(ExternalRef r) {
    external = std::move(r);
    raw.clear();
  }
  /// Reads external data into memory (no-op when in memory already).
  llvm::Error materialize();

  /// Packed little-endian data; only valid for in-memory tensors.
  llvm::ArrayRef<uint8_t> bytes() const {
    assert(!external && "materialize() external tensors first");
    return raw;
  }
  std::vector<uint8_t> &mutableBytes() {
    assert(!external && "materialize() external tensors first");
    return raw;
  }
  void setBytes(std::vector<uint8_t> b) {
    external.reset();
    raw = std::move(b);
  }
  std::vector<std::string> &strings() { return strs; }
  const std::vector<std::string> &strings() const { return strs; }

  /// Element i as a double, for floating and integer tensors in memory.
  double getAsDouble(int64_t i) const;

private:
  std::vector<uint8_t> raw;
  std::vector<std::string> strs;
  llvm::Optional<ExternalRef> external;
};

} // namespace mpc

#endif // MPC_IR_TENSOR_H
