//===- Softmax.h - Softmax and LogSoftmax along an axis ---------*- C++ -*-===//
//
// Softmax and LogSoftmax over the middle dimension of an [outer, axis, inner]
// view, max-subtracted, with exponentials and sums in fp32 (fp64 for
// double) and one rounding per output.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_SOFTMAX_H
#define MPC_RUNTIME_CPU_SOFTMAX_H

#include "mpc/Runtime/Float16.h"

#include <cstdint>

namespace mpc {
namespace cpu {

/// y = exp(x - max) / sum(exp(x - max)) along the axis of x viewed as
/// [outer, axisDim, inner] (opset >= 13: outer and inner are the products of
/// the dimensions before and after the axis; opset < 13 flattens at the axis,
/// i.e. inner = 1 and axisDim = the product of the trailing dimensions).
/// A NaN in a slice makes the whole slice NaN. y may alias x.
template <typename T>
void softmax(const T *x, T *y, int64_t outer, int64_t axisDim, int64_t inner);

/// y = x - max - log(sum(exp(x - max))) along the axis, same layout as softmax.
template <typename T>
void logSoftmax(const T *x, T *y, int64_t outer, int64_t axisDim,
                int64_t inner);

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_SOFTMAX_H
