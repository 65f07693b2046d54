//===- WindowGeometry.h - Conv and pooling window geometry ------*- C++ -*-===//
//
// The geometry of a sliding window over NC<spatial> tensors: ONNX auto_pad,
// one spatial dimension's output length, and the resolved geometry of a
// Conv/ConvTranspose or pooling node. The registry's shape functions
// (runtime/ops/shapes/WindowShapes.cpp) compute it, and a backend's kernels
// run on the very same struct, so the shape rule and the loops cannot
// disagree. Plain integers only: nothing here touches a device.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_WINDOWGEOMETRY_H
#define MPC_RUNTIME_WINDOWGEOMETRY_H

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace mpc {

/// ONNX auto_pad.
enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

/// Output length of one spatial dimension of a convolution or pooling window:
/// floor((in + padBegin + padEnd - ((kernel - 1) * dilation + 1)) / stride) +
/// 1, with ceil instead of floor when ceilMode is set, in which case a last
/// window that would start in the end padding is dropped (as onnxruntime and
/// PyTorch do). 0 when the padded input is shorter than the window.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                         int64_t padBegin, int64_t padEnd, bool ceilMode = false);

/// Replaces padBegin/padEnd for auto_pad SAME_UPPER/SAME_LOWER (output
/// ceil(in / stride), the odd pad at the end for SAME_UPPER, at the beginning
/// for SAME_LOWER) or VALID (no padding); NOTSET keeps them.
void resolveAutoPad(AutoPad autoPad, int64_t in, int64_t kernel, int64_t stride,
                    int64_t dilation, int64_t &padBegin, int64_t &padEnd);

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

/// Shape parameters of a pooling op. outSpatial comes from windowOutputSize
/// (which applies ceil_mode); windows that overhang the end padding because
/// of ceil_mode are clipped.
struct PoolGeometry {
  int64_t batch = 1;
  int64_t channels = 1;
  llvm::SmallVector<int64_t, 3> inSpatial;
  llvm::SmallVector<int64_t, 3> outSpatial;
  llvm::SmallVector<int64_t, 3> kernel;
  llvm::SmallVector<int64_t, 3> strides;
  llvm::SmallVector<int64_t, 3> dilations;
  llvm::SmallVector<int64_t, 3> padsBegin;
  llvm::SmallVector<int64_t, 3> padsEnd;
};

} // namespace mpc

#endif // MPC_RUNTIME_WINDOWGEOMETRY_H
