//===- ImageBodies.h - Resize, LRN and Pad index maps -----------*- C++ -*-===//
//
// The per-element math of the image ops, once for the CPU kernels
// (runtime/cpu/ResizeKernel.cpp, TensorKernels.cpp) and the CUDA launchers
// (runtime/cuda/ImageKernels.cu):
//   * Pad's source index along one axis for the edge, reflect and wrap modes;
//   * LRN's channel window and its element formula;
//   * Resize's coordinate transformation, nearest rounding, interpolation
//     kernel and the taps of one output coordinate of one axis (a resize is
//     one separable pass per resized axis; how the passes are stored is each
//     backend's own).
// Coordinates and weights are computed in double; what the passes sum is
// each backend's compute type.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_IMAGEBODIES_H
#define MPC_RUNTIME_KERNELS_IMAGEBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

#include <stdint.h>

namespace mpc {
namespace kernels {

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

/// Pad's modes, in the order of shapes::PadMode.
enum PadModeCode : int32_t { kPadConstant, kPadReflect, kPadEdge, kPadWrap };

/// The source index of coordinate `i` (already shifted by the begin pad) on
/// an axis of `dim` > 0 elements, or -1 where the constant goes.
MPC_HD inline int64_t padSource(int64_t i, int64_t dim, int32_t mode) {
  if (i >= 0 && i < dim)
    return i;
  switch (mode) {
  case kPadEdge:
    return i < 0 ? 0 : dim - 1;
  case kPadWrap:
    return ((i % dim) + dim) % dim;
  case kPadReflect: {
    if (dim == 1)
      return 0;
    int64_t period = 2 * (dim - 1);
    int64_t r = ((i % period) + period) % period;
    return r < dim ? r : period - r;
  }
  default:
    return -1;
  }
}

/// An axis of Pad in the edge, reflect or wrap mode once its negative pads
/// have cropped it (ONNX crops first, then pads what is left, as
/// onnx.reference and onnxruntime do): `kept` input elements from index
/// `lo`, the first of them at output index `shift`. Output index o reads
/// lo + padSource(o - shift, kept, mode). (Padding about the uncropped axis
/// read the elements the crop removed.)
MPC_HD inline void padKeptAxis(int64_t dim, int64_t begin, int64_t end, int64_t *lo,
                               int64_t *kept, int64_t *shift) {
  *lo = begin < 0 ? -begin : 0;
  *kept = dim + (begin < 0 ? begin : 0) + (end < 0 ? end : 0);
  *shift = begin < 0 ? 0 : begin;
}

//===----------------------------------------------------------------------===//
// LRN
//===----------------------------------------------------------------------===//

/// The channels [*first, *last] summed for channel `c` of `channels` with a
/// window of `size`: floor((size - 1) / 2) before, the rest after.
MPC_HD inline void lrnWindow(int64_t c, int64_t channels, int64_t size, int64_t *first,
                             int64_t *last) {
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  *first = c - lo < 0 ? 0 : c - lo;
  *last = c + hi > channels - 1 ? channels - 1 : c + hi;
}

/// One LRN output: x / (bias + alpha / size * squares)^beta, in C.
template <typename C>
MPC_HD inline C lrnValue(C x, C squares, C bias, C alpha, C size, C beta) {
  C den = math::pow(bias + alpha / size * squares, beta);
  return C(x / den);
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

/// Resize's modes, coordinate transformations and nearest roundings, in the
/// order of mpc::resizing's enums (OpParams.h; the CPU kernel checks).
enum ResizeModeCode : int32_t { kResizeNearest, kResizeLinear, kResizeCubic };
enum ResizeCoordCode : int32_t {
  kCoordHalfPixel,
  kCoordHalfPixelSymmetric,
  kCoordPytorchHalfPixel,
  kCoordAlignCorners,
  kCoordAsymmetric,
  kCoordTfHalfPixelForNn,
  kCoordTfCropAndResize
};
enum ResizeNearestCode : int32_t {
  kNearestRoundPreferFloor,
  kNearestRoundPreferCeil,
  kNearestFloor,
  kNearestCeil,
  /// Opset 10: ceil when downscaling, floor otherwise.
  kNearestSimple
};

/// One resized axis: the node's attributes and the plan's scale and crop box
/// for it (a plain struct, passed by value to the device).
struct ResizeAxis {
  int32_t mode = kResizeNearest, coord = kCoordHalfPixel, nearest = kNearestRoundPreferFloor;
  bool excludeOutside = false;
  double cubicA = -0.75, scale = 1, roiStart = 0, roiEnd = 1;
  /// Antialiasing a downscale stretches the kernel by 1 / scale: stretch is
  /// scale then, else 1; support is the kernel's reach in input elements.
  double stretch = 1, support = 1;
  int64_t inLen = 1, outLen = 1;
};

MPC_HD inline ResizeAxis makeResizeAxis(int32_t mode, int32_t coord, int32_t nearest,
                                        bool excludeOutside, bool antialias, double cubicA,
                                        double scale, double roiStart, double roiEnd,
                                        int64_t inLen, int64_t outLen) {
  ResizeAxis a;
  a.mode = mode;
  a.coord = coord;
  a.nearest = nearest;
  a.excludeOutside = excludeOutside;
  a.cubicA = cubicA;
  a.scale = scale;
  a.roiStart = roiStart;
  a.roiEnd = roiEnd;
  a.stretch = antialias && scale < 1 ? scale : 1.0;
  a.support = (mode == kResizeCubic ? 2.0 : 1.0) / a.stretch;
  a.inLen = inLen;
  a.outLen = outLen;
  return a;
}

/// True when the axis is left as it is (no pass).
MPC_HD inline bool resizeIdentity(const ResizeAxis &a) {
  return a.scale == 1.0 && a.outLen == a.inLen &&
         (a.coord != kCoordTfCropAndResize || (a.roiStart == 0.0 && a.roiEnd == 1.0));
}

/// The source coordinate of output coordinate `o`.
MPC_HD inline double resizeSourceCoord(const ResizeAxis &a, double o) {
  // The fractional output length (scale * inLen) is what align_corners,
  // half_pixel_symmetric and tf_crop_and_resize divide by.
  double scale = a.scale, outWidth = scale * double(a.inLen);
  switch (a.coord) {
  case kCoordHalfPixel:
    return (o + 0.5) / scale - 0.5;
  case kCoordHalfPixelSymmetric: {
    double adjustment = double(a.outLen) / outWidth, center = double(a.inLen) / 2;
    return center * (1 - adjustment) + (o + 0.5) / scale - 0.5;
  }
  case kCoordPytorchHalfPixel:
    return outWidth == 1 ? 0.0 : (o + 0.5) / scale - 0.5;
  case kCoordAlignCorners:
    return outWidth == 1 ? 0.0 : o * double(a.inLen - 1) / (outWidth - 1);
  case kCoordAsymmetric:
    return o / scale;
  case kCoordTfHalfPixelForNn:
    return (o + 0.5) / scale;
  case kCoordTfCropAndResize:
    if (outWidth == 1)
      return (a.roiStart + a.roiEnd) / 2 * double(a.inLen - 1);
    // roi is float data: its start offset is formed in float, as ONNX's
    // reference does (0.1f * 5 is exactly 0.5, a nearest-mode tie).
    return double(float(a.roiStart) * float(a.inLen - 1)) +
           o * (a.roiEnd - a.roiStart) * double(a.inLen - 1) / (outWidth - 1);
  default:
    return o;
  }
}

/// The nearest input index of source coordinate x.
MPC_HD inline int64_t resizeNearestIndex(int32_t rounding, double x, double scale) {
  double f = math::floor(x), r = x - f;
  switch (rounding) {
  case kNearestRoundPreferFloor: return int64_t(r <= 0.5 ? f : f + 1);
  case kNearestRoundPreferCeil: return int64_t(r < 0.5 ? f : f + 1);
  case kNearestCeil: return int64_t(math::ceil(x));
  case kNearestSimple: return int64_t(scale < 1 ? math::ceil(x) : f);
  default: return int64_t(f);
  }
}

/// The interpolation kernel at distance t (support 1 for linear, 2 for
/// cubic with coefficient cubicA).
MPC_HD inline double resizeKernelAt(const ResizeAxis &a, double t) {
  t = math::abs(t);
  if (a.mode == kResizeLinear)
    return t < 1 ? 1 - t : 0.0;
  double A = a.cubicA;
  if (t <= 1)
    return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2)
    return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0;
}

/// The taps of output coordinate `o`: calls tap(index, weight) for each, in
/// input order, with indices clamped into the input. Returns false where the
/// output takes the extrapolation value instead (tf_crop_and_resize outside
/// the input). Nearest has one tap (none when exclude_outside drops it);
/// linear and cubic weights are renormalized to sum to 1 when antialiased or
/// exclude_outside.
template <typename Tap> MPC_HD inline bool resizeTaps(const ResizeAxis &a, int64_t o, Tap &&tap) {
  double x = resizeSourceCoord(a, double(o));
  int64_t last = a.inLen - 1;
  if (a.coord == kCoordTfCropAndResize && (x < 0 || x > double(last)))
    return false;
  auto clamp = [last](int64_t i) { return i < 0 ? 0 : i > last ? last : i; };
  if (a.mode == kResizeNearest) {
    int64_t i = resizeNearestIndex(a.nearest, x, a.scale);
    if (!a.excludeOutside || (i >= 0 && i <= last))
      tap(clamp(i), 1.0);
    return true;
  }
  int64_t lo = int64_t(math::floor(x - a.support)), hi = int64_t(math::ceil(x + a.support));
  auto weight = [&](int64_t i) {
    double w = resizeKernelAt(a, (double(i) - x) * a.stretch);
    return a.excludeOutside && (i < 0 || i > last) ? 0.0 : w;
  };
  double sum = 1;
  if (a.excludeOutside || a.stretch != 1.0) {
    sum = 0;
    for (int64_t i = lo; i <= hi; ++i)
      sum += weight(i);
    if (sum == 0)
      sum = 1;
  }
  for (int64_t i = lo; i <= hi; ++i) {
    double w = weight(i);
    if (w != 0)
      tap(clamp(i), sum == 1 ? w : w / sum);
  }
  return true;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_IMAGEBODIES_H
