//===- OpGeometry.h - Geometry the shape rules and kernels share -*- C++ -*-===//
//
// Plain-integer descriptions of an op's geometry that the registry's shape
// functions (runtime/ops/shapes) compute and a backend's kernels run on:
// ONNX auto_pad and one spatial dimension's window output length, the
// resolved geometry of Conv/ConvTranspose and pooling, the sizes of a
// recurrence, a loss's reduction. One definition, so the shape rule and the
// loops cannot disagree. Nothing here touches a device.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPGEOMETRY_H
#define MPC_RUNTIME_OPGEOMETRY_H

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

/// The spatial side of a convolution or pooling window on NC<spatial>
/// tensors: one entry per spatial dimension (at least one) in every vector.
/// outSpatial comes from windowOutputSize (convTransposeOutputSize for a
/// transposed convolution).
struct WindowGeometry {
  llvm::SmallVector<int64_t, 3> inSpatial;
  llvm::SmallVector<int64_t, 3> outSpatial;
  llvm::SmallVector<int64_t, 3> kernel;
  llvm::SmallVector<int64_t, 3> strides;
  llvm::SmallVector<int64_t, 3> dilations;
  llvm::SmallVector<int64_t, 3> padsBegin;
  llvm::SmallVector<int64_t, 3> padsEnd;
};

/// Shape parameters of Conv/ConvTranspose: the window and the channels.
struct ConvGeometry : WindowGeometry {
  int64_t batch = 1;
  /// Channels of X.
  int64_t inChannels = 1;
  /// Channels of Y.
  int64_t outChannels = 1;
  int64_t group = 1;
};

/// Shape parameters of a pooling op. Windows that overhang the end padding
/// because of ceil_mode are clipped.
struct PoolGeometry : WindowGeometry {
  int64_t batch = 1;
  int64_t channels = 1;
};

/// Sizes of an ONNX LSTM (layout 0): X [seq, batch, input], W [dirs, 4H,
/// input], R [dirs, 4H, H], B [dirs, 8H], states [dirs, batch, H], gates in
/// ONNX order i, o, f, c. `reverse` runs the single direction backwards
/// (direction 1 of a bidirectional LSTM always runs backwards).
struct LstmShape {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  bool reverse = false;
};

/// The reduction of a loss over its elements.
enum class LossReduction { None, Sum, Mean };

} // namespace mpc

#endif // MPC_RUNTIME_OPGEOMETRY_H
