//===- UnscaleKernels.cu - Multi-tensor unscale and non-finite check -------===//
//
// One launch for the gradients of a loss-scaled step (UnscalePlan.h; more
// than LaunchPointers holds: one per slice of them): block
// b walks chunks b, b + gridDim.x, ...; within a chunk, thread t takes
// elements t, t + blockDim.x, ... (coalesced), widens each to float, applies
// kernels::unscaleElement (the CPU loop's body) and writes the fp32 result.
// __syncthreads_or folds the block's "not finite" bits, and thread 0 of a
// block that saw one stores the flags. The flags are zeroed by two memsets
// queued before the launch on the same stream.
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "MultiTensor.cuh"
#include "UnscaleLaunch.h"
#include "mpc/Runtime/Kernels/UnscaleBody.h"

namespace mpc {
namespace cuda {
namespace {

template <typename T>
__device__ bool unscaleRun(const T *g, int32_t n, float inv, float *u) {
  bool bad = false;
  for (int32_t i = int32_t(threadIdx.x); i < n; i += int32_t(blockDim.x)) {
    float v;
    bool notFinite = kernels::unscaleElement(g[i], inv, v);
    // Null u: an output without a buffer (a copy nobody reads), only checked. An
    // `u ? u[i] : local` reference as the destination made nvcc drop every store to u
    // (tests/cuda_host/test_kernel_stores.py checks the PTX).
    if (u)
      u[i] = v;
    bad = bad || notFinite;
  }
  return bad;
}

__global__ void multiTensorUnscaleKernel(const UnscaleChunk *chunks, int32_t numChunks,
                                         int32_t firstTensor,
                                         const __grid_constant__ LaunchPointers pointers,
                                         const float *invScale, bool *found, float *flags) {
  const float inv = *invScale;
  for (int32_t c = int32_t(blockIdx.x); c < numChunks; c += int32_t(gridDim.x)) {
    const UnscaleChunk ch = chunks[c];
    void *const *slots = chunkPointers(pointers, ch, firstTensor, kUnscaleSlots);
    const void *g = slots[0];
    float *u = static_cast<float *>(slots[1]);
    u = u ? u + ch.begin : nullptr;
    bool bad = false;
    switch (ch.type) {
    case kOnnxF32:
      bad = unscaleRun(static_cast<const float *>(g) + ch.begin, ch.length, inv, u);
      break;
    case kOnnxF16:
      bad = unscaleRun(static_cast<const Half *>(g) + ch.begin, ch.length, inv, u);
      break;
    case kOnnxBF16:
      bad = unscaleRun(static_cast<const BFloat16 *>(g) + ch.begin, ch.length, inv, u);
      break;
    default:
      break;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) {
      flags[ch.tensor] = __int_as_float(0x7fc00000); // the CPU's quiet NaN
      *found = true;
    }
  }
}

} // namespace

cudaError_t launchMultiTensorUnscale(const UnscaleChunk *chunks,
                                     const std::vector<LaunchSlice> &slices,
                                     const std::vector<void *> &pointers, int32_t tensors,
                                     const float *invScale, bool *found, float *flags,
                                     unsigned blocks, unsigned threads, cudaStream_t stream) {
  if (cudaError_t e = cudaMemsetAsync(found, 0, sizeof(bool), stream))
    return e;
  if (cudaError_t e = cudaMemsetAsync(flags, 0, sizeof(float) * size_t(tensors), stream))
    return e;
  return queueSlices(multiTensorUnscaleKernel, chunks, slices, pointers, kUnscaleSlots, blocks,
                     threads, stream, invScale, found, flags);
}

} // namespace cuda
} // namespace mpc
