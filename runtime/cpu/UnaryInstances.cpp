//===- UnaryInstances.cpp - Compiled unary element-wise loops -------------===//
//
// Explicit instantiations of applyUnary for the unary rows of
// ElementwiseOps.def, built with the library's optimization flags.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Elementwise.h"

namespace mpc {
namespace kernels {

#define MPC_DEFINE_UNARY(T, OP, OUT) MPC_UNARY_INSTANCE(, T, OP, OUT)
#define MPC_UNARY_FLOAT(OP)                                                    \
  MPC_FLOAT_STORAGE_TYPES(MPC_DEFINE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_SIGNED(OP)                                                   \
  MPC_SIGNED_STORAGE_TYPES(MPC_DEFINE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_ARITHMETIC(OP)                                               \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_DEFINE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_INTEGER(OP)                                                  \
  MPC_INTEGER_STORAGE_TYPES(MPC_DEFINE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_PREDICATE(OP)                                                \
  MPC_FLOAT_STORAGE_TYPES(MPC_DEFINE_UNARY, OP, MPC_BOOL_TYPE)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_DEFINE_UNARY

} // namespace kernels
} // namespace mpc
