//===- ImagePlan.h - Launch plans of the image launchers ---------*- C++ -*-===//
//
// What the image launchers (ImageKernels.cu) are given, decided on the host
// from shapes and attributes alone (tested in tests/cuda_host):
//   * Pad with mode edge, reflect or wrap: a gather, one thread per output
//     element, its source found axis by axis with kernels::padSource
//     (ImageBodies.h, the CPU's body); the dimensions travel by value in a
//     PadMap (rank at most kMaxPadRank).
//   * Resize: one separable pass per resized axis (the CPU's order), X seen
//     as [outer, len, inner] for that axis; passes between the first and
//     the last read and write two compute-type buffers of the workspace.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_IMAGEPLAN_H
#define MPC_RUNTIME_CUDA_IMAGEPLAN_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/ImageBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

constexpr int kMaxPadRank = 8;

/// A Pad gather: output dims, the input dims left after the negative pads
/// crop (kernels::padKeptAxis) and the input's row-major strides, the output
/// index of each axis' first kept element (`begin`), the offset of the first
/// kept element (`base`) and the mode (kernels::PadModeCode, never
/// kPadConstant).
struct PadMap {
  int32_t rank = 0, mode = kernels::kPadEdge;
  int64_t outDims[kMaxPadRank] = {}, inDims[kMaxPadRank] = {}, inStrides[kMaxPadRank] = {},
          begin[kMaxPadRank] = {};
  int64_t base = 0;
};

/// Plans a Pad of `in` by `begin`/`end` (one per axis, negative ones crop).
/// False when the launcher cannot take it: the constant mode, a rank above
/// kMaxPadRank, or an axis of X that is empty or cropped to nothing while
/// its output is not (no element to copy from; the shape function reports
/// it).
bool planPadMap(const std::vector<int64_t> &in, const std::vector<int64_t> &begin,
                const std::vector<int64_t> &end, int32_t mode, PadMap &out);

/// The input element of output element `o` (row-major) of a PadMap.
MPC_HD inline int64_t padMapSource(const PadMap &m, int64_t o) {
  int64_t off = m.base;
  for (int32_t d = m.rank - 1; d >= 0; --d) {
    int64_t i = o % m.outDims[d];
    o /= m.outDims[d];
    off += kernels::padSource(i - m.begin[d], m.inDims[d], m.mode) * m.inStrides[d];
  }
  return off;
}

/// One Resize pass: `axis` of [outer, axis.inLen, inner] becomes
/// [outer, axis.outLen, inner].
struct ResizePass {
  kernels::ResizeAxis axis;
  int64_t outer = 1, inner = 1;
  MPC_HD int64_t outElements() const { return outer * axis.outLen * inner; }
};

struct ResizePasses {
  std::vector<ResizePass> passes;
  /// Elements of each of the two workspace buffers (the largest result of
  /// a pass other than the last; 0 with fewer than two passes).
  int64_t bufferElements = 0;
};

/// The passes of a resize of X `shape` with one ResizeAxis per dimension
/// (identity axes are skipped, as on the CPU).
ResizePasses planResizePasses(const std::vector<int64_t> &shape,
                              const std::vector<kernels::ResizeAxis> &axes);

/// Where pass `i` of `count` reads and writes: -1 for X (reads) or Y
/// (writes), else workspace buffer 0 or 1 (the passes alternate).
struct ResizePassIO {
  int in = -1, out = -1;
};
inline ResizePassIO resizePassIO(size_t i, size_t count) {
  ResizePassIO io;
  io.in = i == 0 ? -1 : int((i - 1) % 2);
  io.out = i + 1 == count ? -1 : int(i % 2);
  return io;
}

/// Output element `e` of a pass in the compute type C: its taps over `in`
/// (the pass's input, X's type or C) summed in input order, or the
/// extrapolation value. What one thread of the launcher computes.
template <typename C, typename In>
MPC_HD inline C resizePassValue(const ResizePass &pass, const In *in, int64_t e,
                                C extrapolation) {
  const kernels::ResizeAxis &a = pass.axis;
  int64_t inner = pass.inner;
  int64_t i = e % inner, o = (e / inner) % a.outLen, outer = e / (inner * a.outLen);
  const In *src = in + outer * a.inLen * inner + i;
  C acc = C(0);
  if (!kernels::resizeTaps(a, o, [&](int64_t t, double w) {
        acc += C(w) * C(kernels::load(src[t * inner]));
      }))
    return extrapolation;
  return acc;
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_IMAGEPLAN_H
