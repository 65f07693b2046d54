//===- IndexMath.h - Integer helpers of the window kernels ------*- C++ -*-===//
//
// Floor/ceil division with negative numerators (window start positions in
// the padding) and shape products, shared by convolution and pooling.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_INDEXMATH_H
#define MPC_RUNTIME_CPU_INDEXMATH_H

#include "llvm/ADT/ArrayRef.h"
#include <cstdint>

namespace mpc {
namespace cpu {

/// a / b rounded toward negative infinity (b > 0).
inline int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
/// a / b rounded toward positive infinity (b > 0).
inline int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// The number of elements of a shape.
inline int64_t product(llvm::ArrayRef<int64_t> v) {
  int64_t p = 1;
  for (int64_t d : v)
    p *= d;
  return p;
}

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_INDEXMATH_H
