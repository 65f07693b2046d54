//===- TopKKernels.cu - TopK by successive minima ---------------------------===//
//
// One thread per slice: output j is the first element, in the order of
// kernels::topKBefore, that comes after output j - 1. See TopKLaunch.h.
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "TopKLaunch.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/TopKBodies.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__global__ void topKKernel(const T *x, T *values, int64_t *indices, int64_t outer, int64_t dim,
                           int64_t inner, int64_t k, bool largest) {
  using C = kernels::ComputeType<T>;
  for (int64_t s = gridStart(), count = outer * inner; s < count; s += gridStride()) {
    int64_t o = s / inner, i = s - o * inner;
    const T *in = x + o * dim * inner + i;
    int64_t prev = -1;
    C prevValue = C();
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      C bestValue = C();
      for (int64_t a = 0; a < dim; ++a) {
        C v = kernels::load(in[a * inner]);
        if (prev >= 0 && !kernels::topKBefore(prevValue, prev, v, a, largest))
          continue;
        if (best < 0 || kernels::topKBefore(v, a, bestValue, best, largest)) {
          best = a;
          bestValue = v;
        }
      }
      if (best < 0) { // only where NaNs leave no successor (the order is unspecified)
        best = prev < 0 ? 0 : prev;
        bestValue = kernels::load(in[best * inner]);
      }
      int64_t out = (o * k + j) * inner + i;
      values[out] = in[best * inner];
      if (indices)
        indices[out] = best;
      prev = best;
      prevValue = bestValue;
    }
  }
}

} // namespace

cudaError_t launchTopK(int32_t type, const void *x, void *values, int64_t *indices,
                       int64_t outer, int64_t dim, int64_t inner, int64_t k, bool largest,
                       const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBinary(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(topKKernel<T>, g, stream, static_cast<const T *>(x), static_cast<T *>(values),
                 indices, outer, dim, inner, k, largest);
  });
}

} // namespace cuda
} // namespace mpc
