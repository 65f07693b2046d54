//===- DType.h - Element types of mpc tensors -------------------*- C++ -*-===//
//
// Element types of tensor values. The enumerator values are ONNX's
// TensorProto.DataType numbers so import and export are a cast, never a table.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_DTYPE_H
#define MPC_IR_DTYPE_H

#include "llvm/ADT/Optional.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>

namespace mpc {

enum class DType : uint8_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  String = 8,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  C64 = 14,
  C128 = 15,
  BF16 = 16,
  F8E4M3FN = 17,
  F8E4M3FNUZ = 18,
  F8E5M2 = 19,
  F8E5M2FNUZ = 20,
  U4 = 21,
  I4 = 22,
  F4E2M1 = 23,
  F8E8M0 = 24,
  U2 = 25,
  I2 = 26,
};

/// The largest DType value mpc knows; larger ONNX values are rejected on import.
constexpr unsigned kMaxDType = 26;

/// Short name used by the text printer and diagnostics ("f32", "f16", "i64").
llvm::StringRef dtypeName(DType t);
/// Parses a short name; None when unknown.
llvm::Optional<DType> parseDType(llvm::StringRef name);
/// The ONNX type string of a tensor of this element type ("tensor(float)").
llvm::StringRef onnxTensorTypeString(DType t);
/// Parses an ONNX tensor type string ("tensor(float16)") to its element type.
llvm::Optional<DType> dtypeFromOnnxTensorTypeString(llvm::StringRef s);
/// Storage size in bits of one element (4 for int4, 0 for strings/undefined).
unsigned dtypeBits(DType t);
/// True for every floating-point type, 8-bit floats included.
bool isFloatingPoint(DType t);
/// True for the 16-bit float types mpc targets.
inline bool isHalfPrecision(DType t) { return t == DType::F16 || t == DType::BF16; }
/// True when the value is a valid ONNX DataType number mpc knows.
bool isKnownDType(int64_t v);

/// Element `i` of packed little-endian data of type `t`, as an int64: exact for
/// every integer type and bool (u64 above INT64_MAX saturates); floating-point
/// values are truncated toward zero and saturate (NaN reads as 0). Integer
/// data that drives shapes, indices, axes or trip counts is read with this,
/// never through a double (2^63 - 1 does not survive the round trip).
int64_t loadAsInt64(DType t, const uint8_t *data, int64_t i);
/// `d` truncated toward zero and clamped to the int64 range (NaN: 0).
int64_t saturatingInt64(double d);

} // namespace mpc

#endif // MPC_IR_DTYPE_H
