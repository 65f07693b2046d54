//===- Float16.h - IEEE binary16 and bfloat16 storage types ------*- C++ -*-===//
//
// The 16-bit float types live in the compiler's Support library, which both
// the compiler (constant conversion) and the runtime (kernels) use.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_FLOAT16_H
#define MPC_RUNTIME_FLOAT16_H

#include "mpc/Support/Float16.h"

#endif // MPC_RUNTIME_FLOAT16_H
