//===- Pool.h - Max and average pooling -------------------------*- C++ -*-===//
//
// N-d MaxPool (optional Indices output), AveragePool (count_include_pad,
// ceil_mode through the output size, dilations), LpPool and the global pools over
// NC<spatial> tensors. Averages accumulate in fp32 (fp64 for double).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_POOL_H
#define MPC_RUNTIME_CPU_POOL_H

#include "mpc/Runtime/Cpu/Conv.h"
#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/WindowBodies.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {
namespace cpu {

using mpc::PoolGeometry;
using kernels::WindowAxis;
using kernels::WindowShape;
using kernels::WindowSpan;

/// The geometry as the shared window bodies take it (WindowBodies.h:
/// leading axes of size 1): false for more than 3 spatial axes.
bool windowShapeOf(const PoolGeometry &g, WindowShape &w);

/// ONNX MaxPool. A NaN in a window makes the result NaN (as PyTorch; ORT's
/// CPU kernel skips NaNs). indices, when given, receives for each output the
/// flat index of the (first) maximum in X, [N, C, in...] row-major, or with
/// columnMajorIndices (storage_order = 1) the spatial part column-major.
template <typename T>
void maxPool(const PoolGeometry &g, const T *x, T *y,
             int64_t *indices = nullptr, bool columnMajorIndices = false);

/// ONNX AveragePool. The divisor counts the window taps inside the input, or
/// with countIncludePad those inside the padded input (never the ceil_mode
/// overhang beyond the end padding).
template <typename T>
void averagePool(const PoolGeometry &g, bool countIncludePad, const T *x, T *y);

/// ONNX LpPool: per window, (sum of |x|^p over the taps inside the input)^(1/p),
/// accumulated in fp32 (fp64 for double); padding adds nothing.
template <typename T>
void lpPool(const PoolGeometry &g, double p, const T *x, T *y);

/// GlobalLpPool over planes of planeSize elements: each plane's Lp norm.
template <typename T>
void globalLpPool(const T *x, T *y, int64_t planes, int64_t planeSize, double p);

/// GlobalAveragePool over planes of planeSize elements (planes = N * C).
template <typename T>
void globalAveragePool(const T *x, T *y, int64_t planes, int64_t planeSize);

/// GlobalMaxPool over planes of planeSize elements; NaN propagates.
template <typename T>
void globalMaxPool(const T *x, T *y, int64_t planes, int64_t planeSize);

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_POOL_H
