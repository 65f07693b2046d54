//===- Conv.h - Convolution and transposed convolution ----------*- C++ -*-===//
//
// N-d NCHW Conv and ConvTranspose (groups, strides, pads, dilations, bias) as
// im2col/col2im plus GEMM in fp32 (fp64 for double), and ConvTranspose's
// output-size and pad helpers. 16-bit inputs are widened while the
// column panel is built; outputs are rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_CONV_H
#define MPC_RUNTIME_CPU_CONV_H

#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/OpGeometry.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {
namespace cpu {

// The window helpers and geometry structs live with the registry's shape
// functions (mpc/Runtime/OpGeometry.h); the kernels here take them.
using mpc::AutoPad;
using mpc::ConvGeometry;
using mpc::resolveAutoPad;
using mpc::windowOutputSize;

/// Output length of a transposed convolution: stride * (in - 1) +
/// outputPadding + (kernel - 1) * dilation + 1 - padBegin - padEnd.
int64_t convTransposeOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                int64_t dilation, int64_t padBegin,
                                int64_t padEnd, int64_t outputPadding);

/// The ConvTranspose pads for a requested output length (outputSize >= 0, the
/// output_shape attribute) or for auto_pad SAME_* (output in * stride). The
/// total padding is split as the ONNX spec says: SAME_UPPER puts the smaller
/// half first, anything else the larger half. Without either, pads are kept.
void resolveConvTransposePads(AutoPad autoPad, int64_t in, int64_t kernel,
                              int64_t stride, int64_t dilation,
                              int64_t outputPadding, int64_t outputSize,
                              int64_t &padBegin, int64_t &padEnd);

/// ONNX Conv: x [N, C, in...], w [M, C / group, kernel...], optional bias [M],
/// y [N, M, out...]. T is float, double, Half or BFloat16.
template <typename T>
void conv(const ConvGeometry &g, const T *x, const T *w, const T *bias, T *y);

/// ONNX ConvTranspose: x [N, C, in...], w [C, M / group, kernel...], optional
/// bias [M], y [N, M, out...]. Pads cut the full output; outSpatial decides
/// the size (output_padding only enlarges it).
template <typename T>
void convTranspose(const ConvGeometry &g, const T *x, const T *w, const T *bias,
                   T *y);

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_CONV_H
