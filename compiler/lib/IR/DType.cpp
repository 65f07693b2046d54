//===- DType.cpp - Element type names and sizes ----------------------------===//
//
// One table, indexed by the ONNX DataType number, holds every property mpc
// needs of an element type.
//
//===----------------------------------------------------------------------===//
#include "mpc/IR/DType.h"

using namespace mpc;

namespace {
struct DTypeInfo {
  const char *shortName;
  const char *onnxName;
  unsigned bits;
  bool isFloat;
};
} // namespace

static const DTypeInfo kDTypeInfo[] = {
    {"undef", "tensor(undefined)", 0, false},
    {"f32", "tensor(float)", 32, true},
    {"u8", "tensor(uint8)", 8, false},
    {"i8", "tensor(int8)", 8, false},
    {"u16", "tensor(uint16)", 16, false},
    {"i16", "tensor(int16)", 16, false},
    {"i32", "tensor(int32)", 32, false},
    {"i64", "tensor(int64)", 64, false},
    {"str", "tensor(string)", 0, false},
    {"bool", "tensor(bool)", 8, false},
    {"f16", "tensor(float16)", 16, true},
    {"f64", "tensor(double)", 64, true},
    {"u32", "tensor(uint32)", 32, false},
    {"u64", "tensor(uint64)", 64, false},
    {"c64", "tensor(complex64)", 64, false},
    {"c128", "tensor(complex128)", 128, false},
    {"bf16", "tensor(bfloat16)", 16, true},
    {"f8e4m3fn", "tensor(float8e4m3fn)", 8, true},
    {"f8e4m3fnuz", "tensor(float8e4m3fnuz)", 8, true},
    {"f8e5m2", "tensor(float8e5m2)", 8, true},
    {"f8e5m2fnuz", "tensor(float8e5m2fnuz)", 8, true},
    {"u4", "tensor(uint4)", 4, false},
    {"i4", "tensor(int4)", 4, false},
    {"f4e2m1", "tensor(float4e2m1)", 4, true},
    {"f8e8m0", "tensor(float8e8m0)", 8, true},
    {"u2", "tensor(uint2)", 2, false},
    {"i2", "tensor(int2)", 2, false},
};
static_assert(sizeof(kDTypeInfo) / sizeof(kDTypeInfo[0]) == kMaxDType + 1,
              "one row per DType");

static const DTypeInfo &info(DType t) {
  return kDTypeInfo[static_cast<unsigned>(t)];
}

llvm::StringRef mpc::dtypeName(DType t) { return info(t).shortName; }
llvm::StringRef mpc::onnxTensorTypeString(DType t) { return info(t).onnxName; }
unsigned mpc::dtypeBits(DType t) { return info(t).bits; }
bool mpc::isFloatingPoint(DType t) { return info(t).isFloat; }
bool mpc::isKnownDType(int64_t v) { return v >= 0 && v <= kMaxDType; }

llvm::Optional<DType> mpc::parseDType(llvm::StringRef name) {
  for (unsigned i = 0; i <= kMaxDType; ++i)
    if (name == kDTypeInfo[i].shortName)
      return static_cast<DType>(i);
  return llvm::None;
}

llvm::Optional<DType> mpc::dtypeFromOnnxTensorTypeString(llvm::StringRef s) {
  for (unsigned i = 0; i <= kMaxDType; ++i)
    if (s == kDTypeInfo[i].onnxName)
      return static_cast<DType>(i);
  return llvm::None;
}
