//===- CudaOps.h - Element-wise op numbers shared by host and device -*- C++ -*-===//
//
// The CUDA backend's host code (kernel table, prepare) names an element-wise
// op by a number; its .cu launchers switch on the same number to pick the
// op body of runtime/kernels. Both enums are generated from
// ElementwiseOps.def, so a row added there gets a number here. The functor,
// with the node's attributes, travels as an OpBlob. No CUDA or LLVM header is
// included: this file compiles everywhere.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CUDAOPS_H
#define MPC_RUNTIME_CUDA_CUDAOPS_H

#include <cstdint>

namespace mpc {
namespace cuda {

/// ONNX element type numbers of the types the launchers take (the values of
/// mpc::DType; CudaKernelTable.cpp checks that they agree).
enum OnnxType : int32_t {
  kOnnxF32 = 1,
  kOnnxU8 = 2,
  kOnnxI8 = 3,
  kOnnxI32 = 6,
  kOnnxI64 = 7,
  kOnnxBool = 9,
  kOnnxF16 = 10,
  kOnnxF64 = 11,
  kOnnxBF16 = 16,
  // The other integer types (the bitwise rows).
  kOnnxU16 = 4,
  kOnnxI16 = 5,
  kOnnxU32 = 12,
  kOnnxU64 = 13,
};

/// The logical rows (And, Or, Xor over bool): a CudaKernel's op number.
enum class LogicalOpId : int32_t { And, Or, Xor };

/// The unary rows of ElementwiseOps.def.
enum class UnaryOpId : int32_t {
#define MPC_UNARY_FLOAT(Op) Op,
#define MPC_UNARY_SIGNED(Op) Op,
#define MPC_UNARY_ARITHMETIC(Op) Op,
#define MPC_UNARY_INTEGER(Op) Op,
#define MPC_UNARY_PREDICATE(Op) Op,
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
  Count
};

/// The binary rows of ElementwiseOps.def.
enum class BinaryOpId : int32_t {
#define MPC_BINARY_SIGNED(Op) Op,
#define MPC_BINARY_INTEGER(Op) Op,
#define MPC_BINARY_COMPARE(Op) Op,
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
  Count
};

/// An op body's functor (runtime/kernels: plain, trivially copyable structs
/// whose fields are the node's attributes) as bytes: the host fills it once in
/// prepare (makeOp, mpc/Runtime/ElementwiseFunctors.h), the launcher copies
/// it back into the functor type its op number names.
struct OpBlob {
  alignas(8) unsigned char bytes[32] = {};
};

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CUDAOPS_H
