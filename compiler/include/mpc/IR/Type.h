//===- Type.h - Types of IR values ------------------------------*- C++ -*-===//
//
// The type of a value: a tensor (element type and optional shape) or one of
// ONNX's container types (sequence, optional, map, sparse tensor), which wrap
// an inner type. Value semantics; copying deep-copies the inner type.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_TYPE_H
#define MPC_IR_TYPE_H

#include "mpc/IR/DType.h"
#include "mpc/IR/RareString.h"
#include "llvm/ADT/ArrayRef.h"
#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// One dimension of a shape: a known size, a symbolic name, or unknown.
struct Dim {
  int64_t value = -1;  ///< >= 0 when the size is known
  RareString param;    ///< symbolic name ("batch") when value < 0
  RareString denotation;

  static Dim known(int64_t v) { return Dim{v, {}, {}}; }
  static Dim symbolic(std::string p) { return Dim{-1, RareString(std::move(p)), {}}; }
  bool isKnown() const { return value >= 0; }
  bool isSymbolic() const { return value < 0 && !param.empty(); }
  bool operator==(const Dim &o) const {
    return value == o.value && param == o.param && denotation == o.denotation;
  }
};

enum class TypeKind : uint8_t { Unknown, Tensor, SparseTensor, Sequence, Optional, Map };

class Type {
public:
  TypeKind kind = TypeKind::Unknown;
  /// Element type of a tensor or sparse tensor; the key type of a map.
  DType elem = DType::Undefined;
  /// False when the shape is unknown (not even the rank).
  bool hasShape = false;
  std::vector<Dim> dims;
  RareString denotation;
  /// Element type of a sequence or optional, value type of a map.
  std::unique_ptr<Type> inner;

  Type() = default;
  Type(const Type &o) { *this = o; }
  Type(Type &&) = default;
  Type &operator=(const Type &o);
  Type &operator=(Type &&) = default;
  bool operator==(const Type &o) const;
  bool operator!=(const Type &o) const { return !(*this == o); }

  static Type tensor(DType e) {
    Type t;
    t.kind = TypeKind::Tensor;
    t.elem = e;
    return t;
  }
  static Type tensor(DType e, llvm::ArrayRef<int64_t> shape);
  static Type wrap(TypeKind k, Type in);

  bool isTensor() const { return kind == TypeKind::Tensor; }
  bool isKnown() const { return kind != TypeKind::Unknown; }
  /// The element type of the innermost tensor (through sequences and optionals);
  /// Undefined for maps and unknown types.
  DType tensorElemType() const;
  /// Sets the element type of the innermost tensor (no-op for maps/unknown).
  void setTensorElemType(DType t);
  /// Number of elements when every dimension is known, else -1.
  int64_t numElements() const;
  /// The dimensions in brackets for messages: "[2, batch, ?]" (a symbolic
  /// dimension by its name, an unknown one as "?"), joined by `separator`.
  std::string dimsText(const char *separator = ", ") const;
};

} // namespace mpc

#endif // MPC_IR_TYPE_H
