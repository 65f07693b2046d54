//===- ConvKernels.cu - The convolution family's own kernels ---------------===//
//
// What cuDNN does not do the way the CPU does: ConvGrad's bias gradient,
// db[c] = sum over n and the spatial positions of dy[n, c, ...], summed in
// fp32 (AccumType) and rounded once, as the CPU's convGrad does. One block
// per channel; each thread sums a fixed strided subset in order, then a
// fixed shared-memory tree adds the partial sums, so the result is the
// same on every run (no atomics).
//
//===----------------------------------------------------------------------===//
#include "ConvLaunch.h"
#include "GridStride.cuh"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

constexpr unsigned kSumThreads = 256;

template <typename T>
__global__ void channelSumKernel(const T *dy, T *db, int64_t batch, int64_t channels,
                                 int64_t inner) {
  using A = kernels::AccumType<T>;
  __shared__ A partial[kSumThreads];
  int64_t c = blockIdx.x;
  int64_t count = batch * inner;
  A sum = A(0);
  for (int64_t i = threadIdx.x; i < count; i += kSumThreads) {
    int64_t n = i / inner, o = i % inner;
    sum += A(kernels::load(dy[(n * channels + c) * inner + o]));
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    db[c] = kernels::store<T>(partial[0]);
}

} // namespace

cudaError_t launchChannelSum(int32_t type, const void *dy, void *db, int64_t batch,
                             int64_t channels, int64_t inner, cudaStream_t stream) {
  if (channels <= 0)
    return cudaSuccess;
  if (channels > int64_t(0x7fffffff))
    return cudaErrorInvalidValue;
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    channelSumKernel<T><<<unsigned(channels), kSumThreads, 0, stream>>>(
        static_cast<const T *>(dy), static_cast<T *>(db), batch, channels, inner);
    return cudaGetLastError();
  });
}

} // namespace cuda
} // namespace mpc
