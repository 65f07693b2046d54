//===- EinsumKernels.cu - Einsum's gathers, one thread per element ----------===//
//
// See EinsumLaunch.h.
//
//===----------------------------------------------------------------------===//
#include "EinsumLaunch.h"
#include "GridStride.cuh"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

template <typename S, typename D>
__global__ void einsumGatherKernel(const S *src, D *dst, EinsumGather g) {
  int64_t sums = g.sumCount();
  for (int64_t i = gridStart(), n = g.count(); i < n; i += gridStride()) {
    const S *base = src + g.offset(i);
    float acc = 0.0f;
    for (int64_t j = 0; j < sums; ++j)
      acc += float(kernels::load(base[g.sumOffset(j)]));
    dst[i] = kernels::store<D>(acc * g.scale);
  }
}

} // namespace

cudaError_t launchEinsumGather(int32_t srcType, int32_t dstType, const void *src, void *dst,
                               const EinsumGather &g, const LaunchGeometry &geometry,
                               cudaStream_t stream) {
  return dispatchFloat(srcType, [&](auto srcTag) {
    using S = decltype(srcTag);
    return dispatchFloat(dstType, [&](auto dstTag) {
      using D = decltype(dstTag);
      return queue(einsumGatherKernel<S, D>, geometry, stream, static_cast<const S *>(src),
                   static_cast<D *>(dst), g);
    });
  });
}

} // namespace cuda
} // namespace mpc
