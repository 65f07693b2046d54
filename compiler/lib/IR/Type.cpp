//===- Type.cpp - Value types and constant tensors
//-------------------------===//
//
// Deep copies and queries of Type, and element access of Tensor data.
//
//===----------------------------------------------------------------------===//
#include "mpc/IR/Type.h"
#include "mpc/IR/Tensor.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include <cmath>
#include <cstring>
#include <type_traits>

using namespace mpc;

Type &Type::operator=(const Type &o) {
  if (this == &o)
    return *this;
  kind = o.kind;
  elem = o.elem;
  hasShape = o.hasShape;
  dims = o.dims;
  denotation = o.denotation;
  inner = o.inner ? std::make_unique<Type>(*o.inner) : nullptr;
  return *this;
}

bool Type::operator==(const Type &o) const {
  if (kind != o.kind || elem != o.elem || hasShape != o.hasShape || dims != o.dims ||
      denotation != o.denotation)
    return false;
  if (!inner || !o.inner)
    return !inner && !o.inner;
  return *inner == *o.inner;
}

Type Type::tensor(DType e, llvm::ArrayRef<int64_t> shape) {
  Type t = tensor(e);
  t.hasShape = true;
  t.dims.reserve(shape.size());
  for (int64_t d : shape)
    t.dims.push_back(Dim::known(d));
  return t;
}

Type Type::wrap(TypeKind k, Type in) {
  Type t;
  t.kind = k;
  t.inner = std::make_unique<Type>(std::move(in));
  return t;
}

DType Type::tensorElemType() const {
  switch (kind) {
  case TypeKind::Tensor:
  case TypeKind::SparseTensor:
    return elem;
  case TypeKind::Sequence:
  case TypeKind::Optional:
    return inner ? inner->tensorElemType() : DType::Undefined;
  case TypeKind::Map:
  case TypeKind::Unknown:
    return DType::Undefined;
  }
  return DType::Undefined;
}

void Type::setTensorElemType(DType t) {
  switch (kind) {
  case TypeKind::Tensor:
  case TypeKind::SparseTensor:
    elem = t;
    return;
  case TypeKind::Sequence:
  case TypeKind::Optional:
    if (inner)
      inner->setTensorElemType(t);
    return;
  case TypeKind::Map:
  case TypeKind::Unknown:
    return;
  }
}

std::string Type::dimsText(const char *separator) const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += separator;
    if (dims[i].isKnown())
      s += std::to_string(dims[i].value);
    else
      s += dims[i].param.empty() ? "?" : dims[i].param.str();
  }
  return s + "]";
}

int64_t Type::numElements() const {
  if (!hasShape)
    return -1;
  int64_t n = 1;
  for (const Dim &d : dims) {
    if (!d.isKnown())
      return -1;
    if (__builtin_mul_overflow(n, d.value, &n))
      return -1; // too large to count: as good as unknown
  }
  return n;
}

int64_t Tensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

uint64_t Tensor::byteSize() const {
  return (static_cast<uint64_t>(numElements()) * dtypeBits(dtype) + 7) / 8;
}

llvm::Error Tensor::materialize() {
  if (!external)
    return llvm::Error::success();
  const ExternalRef &r = *external;
  auto bufOrErr = llvm::MemoryBuffer::getFileSlice(
      r.path, r.length >= 0 ? static_cast<uint64_t>(r.length) : byteSize(), r.offset,
      /*IsVolatile=*/false);
  if (!bufOrErr)
    return inputError("tensor '{0}': cannot read external data '{1}': {2}", name, r.location,
                      bufOrErr.getError().message());
  llvm::StringRef data = (*bufOrErr)->getBuffer();
  if (data.size() != byteSize())
    return inputError("tensor '{0}': external data '{1}' has {2} bytes, expected {3}", name,
                      r.location, data.size(), byteSize());
  raw.assign(data.bytes_begin(), data.bytes_end());
  external.reset();
  dropBorrowed();
  return llvm::Error::success();
}

template <typename T> static T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

static double halfBitsToDouble(uint16_t bits, const llvm::fltSemantics &sem) {
  llvm::APFloat f(sem, llvm::APInt(16, bits));
  bool lost;
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return f.convertToDouble();
}

/// fn(element i) with the element loaded in its own C++ type (16-bit floats
/// widened to double), for the scalar numeric types.
template <typename R, typename Fn>
static R withElement(DType dtype, const uint8_t *p, int64_t i, Fn fn) {
  switch (dtype) {
  case DType::F32:
    return fn(load<float>(p + 4 * i));
  case DType::F64:
    return fn(load<double>(p + 8 * i));
  case DType::F16:
    return fn(halfBitsToDouble(load<uint16_t>(p + 2 * i), llvm::APFloat::IEEEhalf()));
  case DType::BF16:
    return fn(halfBitsToDouble(load<uint16_t>(p + 2 * i), llvm::APFloat::BFloat()));
  case DType::I8:
    return fn(load<int8_t>(p + i));
  case DType::U8:
  case DType::Bool:
    return fn(load<uint8_t>(p + i));
  case DType::I16:
    return fn(load<int16_t>(p + 2 * i));
  case DType::U16:
    return fn(load<uint16_t>(p + 2 * i));
  case DType::I32:
    return fn(load<int32_t>(p + 4 * i));
  case DType::U32:
    return fn(load<uint32_t>(p + 4 * i));
  case DType::I64:
    return fn(load<int64_t>(p + 8 * i));
  case DType::U64:
    return fn(load<uint64_t>(p + 8 * i));
  default:
    llvm_unreachable("element read on a tensor without scalar numeric elements");
  }
}

double Tensor::getAsDouble(int64_t i) const {
  return withElement<double>(dtype, bytes().data(), i,
                             [](auto v) { return static_cast<double>(v); });
}

int64_t mpc::saturatingInt64(double d) {
  if (std::isnan(d))
    return 0;
  // 2^63 is exact as a double; every double below it converts without UB.
  if (d >= 9223372036854775808.0)
    return INT64_MAX;
  if (d <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(d);
}

int64_t mpc::loadAsInt64(DType t, const uint8_t *p, int64_t i) {
  return withElement<int64_t>(t, p, i, [](auto v) -> int64_t {
    using T = decltype(v);
    if constexpr (std::is_floating_point<T>::value)
      return saturatingInt64(v);
    else if constexpr (std::is_same<T, uint64_t>::value)
      return v > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v);
    else
      return v; // exact: every other integer type fits
  });
}

int64_t Tensor::getAsInt64(int64_t i) const { return loadAsInt64(dtype, bytes().data(), i); }
