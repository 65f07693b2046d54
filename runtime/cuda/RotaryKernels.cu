//===- RotaryKernels.cu - RotaryEmbedding, one thread per slot --------------===//
//
// Thread t handles slot t % slots of head vector t / slots, whose (batch,
// seq, head) come from the vector number in that order (RotaryLaunch.h).
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "IndexError.cuh"
#include "RotaryLaunch.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T, typename P>
__global__ void rotaryKernel(kernels::RotaryShape r, const T *x, const T *cosCache,
                             const T *sinCache, const P *positions, T *y, int64_t maxPosition,
                             IndexErrorRecord *record, int32_t call) {
  int64_t slots = kernels::rotarySlots(r), half = r.dim / 2;
  for (int64_t t = gridStart(), n = rotaryThreads(r); t < n; t += gridStride()) {
    int64_t vec = t / slots, i = t - vec * slots;
    int64_t h = vec % r.heads, bs = vec / r.heads;
    int64_t s = bs % r.seq, b = bs / r.seq;
    int64_t row = bs;
    if (positions) {
      row = int64_t(positions[bs]);
      if (row < 0 || row >= maxPosition) {
        recordIndexError(record, call, /*operand=*/1, row);
        continue;
      }
    }
    int64_t off = kernels::rotaryHeadOffset(r, b, s, h);
    kernels::rotarySlot(r, x + off, y + off, cosCache + row * half, sinCache + row * half, i);
  }
}

template <typename T, typename P>
cudaError_t queueRotary(const RotaryArgs &a, const LaunchGeometry &g, cudaStream_t stream) {
  return queue(rotaryKernel<T, P>, g, stream, a.shape, static_cast<const T *>(a.x),
               static_cast<const T *>(a.cosCache), static_cast<const T *>(a.sinCache),
               static_cast<const P *>(a.positions), static_cast<T *>(a.y), a.maxPosition,
               a.record, a.call);
}

} // namespace

cudaError_t launchRotary(const RotaryArgs &a, const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    using T = decltype(tag);
    return a.positionType == kOnnxI32 ? queueRotary<T, int32_t>(a, g, stream)
                                      : queueRotary<T, int64_t>(a, g, stream);
  });
}

} // namespace cuda
} // namespace mpc
