//===- BinaryInstances.cpp - Compiled binary element-wise loops -----------===//
//
// Explicit instantiations of the broadcasting applyBinary for the binary and
// comparison rows of ElementwiseOps.def, built with the library's flags.
//
//===----------------------------------------------------------------------===//

#include "mpc/Runtime/Cpu/Elementwise.h"

namespace mpc {
namespace kernels {

#define MPC_DEFINE_BINARY(T, OP, OUT) MPC_BINARY_INSTANCE(, T, OP, OUT)
#define MPC_BINARY_SIGNED(OP)                                                  \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_DEFINE_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_INTEGER(OP)                                                 \
  MPC_INTEGER_STORAGE_TYPES(MPC_DEFINE_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_COMPARE(OP)                                                 \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_DEFINE_BINARY, OP, MPC_BOOL_TYPE)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_DEFINE_BINARY

} // namespace kernels
} // namespace mpc
