//===- StorageTypes.h - The storage types of each row kind -------*- C++ -*-===//
//
// X-macro lists of the storage types an element-wise row kind of
// ElementwiseOps.def covers: X(T, OP, OUT) is expanded once per type T, with
// OUT(T) the output type (MPC_SAME_TYPE or MPC_BOOL_TYPE). The CPU backend
// instantiates its loops from them (runtime/cpu), the nvcc check its device
// functions (tests/kernels).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_STORAGETYPES_H
#define MPC_RUNTIME_KERNELS_STORAGETYPES_H

#include "mpc/Runtime/Float16.h"
#include <cstdint>

#define MPC_FLOAT_STORAGE_TYPES(X, OP, OUT)                                    \
  X(float, OP, OUT) X(double, OP, OUT) X(Half, OP, OUT) X(BFloat16, OP, OUT)
#define MPC_SIGNED_INT_STORAGE_TYPES(X, OP, OUT)                               \
  X(int8_t, OP, OUT) X(int16_t, OP, OUT) X(int32_t, OP, OUT) X(int64_t, OP, OUT)
#define MPC_UNSIGNED_INT_STORAGE_TYPES(X, OP, OUT)                             \
  X(uint8_t, OP, OUT)                                                          \
  X(uint16_t, OP, OUT) X(uint32_t, OP, OUT) X(uint64_t, OP, OUT)
#define MPC_SIGNED_STORAGE_TYPES(X, OP, OUT)                                   \
  MPC_FLOAT_STORAGE_TYPES(X, OP, OUT) MPC_SIGNED_INT_STORAGE_TYPES(X, OP, OUT)
#define MPC_INTEGER_STORAGE_TYPES(X, OP, OUT)                                  \
  MPC_SIGNED_INT_STORAGE_TYPES(X, OP, OUT)                                     \
  MPC_UNSIGNED_INT_STORAGE_TYPES(X, OP, OUT)
#define MPC_ARITHMETIC_STORAGE_TYPES(X, OP, OUT)                               \
  MPC_SIGNED_STORAGE_TYPES(X, OP, OUT)                                         \
  MPC_UNSIGNED_INT_STORAGE_TYPES(X, OP, OUT)
#define MPC_SAME_TYPE(T) T
#define MPC_BOOL_TYPE(T) bool

#endif // MPC_RUNTIME_KERNELS_STORAGETYPES_H
