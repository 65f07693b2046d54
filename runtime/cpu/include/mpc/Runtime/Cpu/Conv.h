//===- Conv.h - Convolution and transposed convolution ----------*- C++ -*-===//
//
// N-d NCHW Conv and ConvTranspose (groups, strides, pads, dilations, bias) as
// im2col/col2im plus GEMM in fp32 (fp64 for double), and the window-size and
// auto_pad helpers that pooling shares. 16-bit inputs are widened while the
// column panel is built; outputs are rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_CONV_H
#define MPC_RUNTIME_CPU_CONV_H

#include "mpc/Runtime/Float16.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {
namespace cpu {

/// ONNX auto_pad.
enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

/// Output length of one spatial dimension of a convolution or pooling window:
/// floor((in + padBegin + padEnd - ((kernel - 1) * dilation + 1)) / stride) +
/// 1, with ceil instead of floor when ceilMode is set, in which case a last
/// window that would start in the end padding is dropped (as onnxruntime and
/// PyTorch do). 0 when the padded input is shorter than the window.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t dilation, int64_t padBegin, int64_t padEnd,
                         bool ceilMode = false);

/// Replaces padBegin/padEnd for auto_pad SAME_UPPER/SAME_LOWER (output
/// ceil(in / stride), the odd pad at the end for SAME_UPPER, at the beginning
/// for SAME_LOWER) or VALID (no padding); NOTSET keeps them.
void resolveAutoPad(AutoPad autoPad, int64_t in, int64_t kernel, int64_t stride,
                    int64_t dilation, int64_t &padBegin, int64_t &padEnd);

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

/// Shape parameters of Conv/ConvTranspose on NC<spatial> tensors. The spatial
/// vectors all have one entry per spatial dimension (at least one).
struct ConvGeometry {
  int64_t batch = 1;
  /// Channels of X.
  int64_t inChannels = 1;
  /// Channels of Y.
  int64_t outChannels = 1;
  int64_t group = 1;
  llvm::SmallVector<int64_t, 3> inSpatial;
  /// Spatial output size (windowOutputSize / convTransposeOutputSize).
  llvm::SmallVector<int64_t, 3> outSpatial;
  llvm::SmallVector<int64_t, 3> kernel;
  llvm::SmallVector<int64_t, 3> strides;
  llvm::SmallVector<int64_t, 3> dilations;
  llvm::SmallVector<int64_t, 3> padsBegin;
  llvm::SmallVector<int64_t, 3> padsEnd;
};

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
