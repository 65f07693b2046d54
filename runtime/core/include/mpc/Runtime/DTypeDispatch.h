//===- DTypeDispatch.h - Calls a generic lambda per storage type -*- C++ -*-===//
//
// A switch over DType that calls a generic lambda with a value of the C++
// storage type (float, Half, int8_t, bool, ...): how host code, the core's
// tensor conversions and the CPU kernels alike, instantiates one body per
// element type.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_DTYPEDISPATCH_H
#define MPC_RUNTIME_DTYPEDISPATCH_H

#include "mpc/IR/DType.h"
#include "mpc/Runtime/Float16.h"

#include <cstdint>

namespace mpc {

/// Calls fn(T()) for the floating-point storage types.
template <typename Fn> bool dispatchFloat(DType t, Fn &&fn) {
  switch (t) {
  case DType::F32: fn(float()); return true;
  case DType::F64: fn(double()); return true;
  case DType::F16: fn(Half()); return true;
  case DType::BF16: fn(BFloat16()); return true;
  default: return false;
  }
}

/// Calls fn(T()) for the float and signed integer storage types.
template <typename Fn> bool dispatchSigned(DType t, Fn &&fn) {
  switch (t) {
  case DType::I8: fn(int8_t()); return true;
  case DType::I16: fn(int16_t()); return true;
  case DType::I32: fn(int32_t()); return true;
  case DType::I64: fn(int64_t()); return true;
  default: return dispatchFloat(t, fn);
  }
}

/// Calls fn(T()) for the unsigned integer storage types.
template <typename Fn> bool dispatchUnsigned(DType t, Fn &&fn) {
  switch (t) {
  case DType::U8: fn(uint8_t()); return true;
  case DType::U16: fn(uint16_t()); return true;
  case DType::U32: fn(uint32_t()); return true;
  case DType::U64: fn(uint64_t()); return true;
  default: return false;
  }
}

/// Calls fn(T()) for the signed and unsigned integer storage types.
template <typename Fn> bool dispatchInteger(DType t, Fn &&fn) {
  switch (t) {
  case DType::I8: fn(int8_t()); return true;
  case DType::I16: fn(int16_t()); return true;
  case DType::I32: fn(int32_t()); return true;
  case DType::I64: fn(int64_t()); return true;
  default: return dispatchUnsigned(t, fn);
  }
}

/// Calls fn(T()) for the float and integer storage types (all but bool).
template <typename Fn> bool dispatchArithmetic(DType t, Fn &&fn) {
  return dispatchUnsigned(t, fn) || dispatchSigned(t, fn);
}

/// Calls fn(T()) for every storage type the runtime holds.
template <typename Fn> bool dispatchAll(DType t, Fn &&fn) {
  if (t == DType::Bool) {
    fn(bool());
    return true;
  }
  return dispatchArithmetic(t, fn);
}

} // namespace mpc

#endif // MPC_RUNTIME_DTYPEDISPATCH_H
