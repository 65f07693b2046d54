//===- Reduce.h - Reductions over arbitrary axes ----------------*- C++ -*-===//
//
// ONNX Reduce{Sum,Mean,Max,Min,Prod,SumSquare,L1,L2,LogSum,LogSumExp} over
// any set of axes. Floats accumulate in fp32 (fp64 for double), integers in
// int64 (double for L2/LogSum/LogSumExp); the result is rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_REDUCE_H
#define MPC_RUNTIME_CPU_REDUCE_H

#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/ReduceBodies.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {
namespace cpu {

/// The reduction ops (their steps: ReduceBodies.h).
using ReduceKind = kernels::ReduceKind;

/// Output shape of a reduction, or false when an axis is out of range or
/// repeated. Negative axes count from the end; empty axes reduce every
/// dimension (noop_with_empty_axes is the caller's business: it is a copy).
bool reduceOutputShape(llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<int64_t> axes, bool keepDims,
                       llvm::SmallVectorImpl<int64_t> &outShape);

/// Reduces x of the given shape over axes (as in reduceOutputShape) into y,
/// dense in the output shape (keepdims does not change the data). Over an
/// empty set the results are the ONNX identities: 0 for the sums, 1 for Prod,
/// -inf / +inf (integers: lowest / max) for Max / Min, -inf for LogSum and
/// LogSumExp, NaN (integers: 0) for Mean. NaN propagates through Max/Min.
/// T is float, double, Half, BFloat16, int32_t or int64_t.
template <typename T>
void reduce(ReduceKind kind, const T *x, llvm::ArrayRef<int64_t> shape,
            llvm::ArrayRef<int64_t> axes, T *y);

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_REDUCE_H
