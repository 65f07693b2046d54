//===- ImageKernels.cu - Pad gathers, LRN and Resize passes -----------------===//
//
// Grid-stride kernels over the bodies of ImageBodies.h, which the CPU's
// kernels run too. See ImageLaunch.h.
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "ImageLaunch.h"
#include "mpc/Runtime/Kernels/ImageBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

template <typename E>
__global__ void padMapKernel(const E *x, E *y, PadMap map, int64_t count) {
  for (int64_t o = gridStart(); o < count; o += gridStride())
    y[o] = x[padMapSource(map, o)];
}

template <typename T>
__global__ void lrnKernel(const T *x, T *y, int64_t batch, int64_t channels, int64_t inner,
                          int64_t size, float alpha, float beta, float bias) {
  using C = kernels::ComputeType<T>;
  for (int64_t e = gridStart(), count = batch * channels * inner; e < count;
       e += gridStride()) {
    int64_t s = e % inner, c = (e / inner) % channels;
    const T *plane = x + (e - c * inner - s); // element (b, 0, 0)
    int64_t first, last;
    kernels::lrnWindow(c, channels, size, &first, &last);
    C sum = 0;
    for (int64_t cc = first; cc <= last; ++cc) {
      C v = kernels::load(plane[cc * inner + s]);
      sum += v * v;
    }
    y[e] = kernels::store<T>(
        kernels::lrnValue<C>(kernels::load(x[e]), sum, C(bias), C(alpha), C(size), C(beta)));
  }
}

template <typename In, typename Out, typename C>
__global__ void resizePassKernel(const In *in, Out *out, ResizePass pass, C extrapolation) {
  for (int64_t e = gridStart(), count = pass.outElements(); e < count; e += gridStride())
    out[e] = kernels::store<Out>(resizePassValue<C>(pass, in, e, extrapolation));
}

} // namespace

cudaError_t launchPadMap(unsigned elemBytes, const void *x, void *y, const PadMap &map,
                         int64_t count, const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchBytes(elemBytes, [&](auto tag) {
    using E = decltype(tag);
    return queue(padMapKernel<E>, g, stream, static_cast<const E *>(x), static_cast<E *>(y),
                 map, count);
  });
}

cudaError_t launchLrn(int32_t type, const void *x, void *y, int64_t batch, int64_t channels,
                      int64_t inner, int64_t size, float alpha, float beta, float bias,
                      const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(lrnKernel<T>, g, stream, static_cast<const T *>(x), static_cast<T *>(y),
                 batch, channels, inner, size, alpha, beta, bias);
  });
}

cudaError_t launchResizePass(int32_t type, bool computeIn, bool computeOut, const void *in,
                             void *out, const ResizePass &pass, double extrapolation,
                             const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    using C = kernels::ComputeType<T>;
    C fill = C(extrapolation);
    if (computeIn && computeOut)
      return queue(resizePassKernel<C, C, C>, g, stream, static_cast<const C *>(in),
                   static_cast<C *>(out), pass, fill);
    if (computeIn)
      return queue(resizePassKernel<C, T, C>, g, stream, static_cast<const C *>(in),
                   static_cast<T *>(out), pass, fill);
    if (computeOut)
      return queue(resizePassKernel<T, C, C>, g, stream, static_cast<const T *>(in),
                   static_cast<C *>(out), pass, fill);
    return queue(resizePassKernel<T, T, C>, g, stream, static_cast<const T *>(in),
                 static_cast<T *>(out), pass, fill);
  });
}

} // namespace cuda
} // namespace mpc
