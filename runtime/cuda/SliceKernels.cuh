//===- SliceKernels.cuh - Kernels over the slices of a SlicePlan -*- CUDA -*-===//
//
// Private to the .cu files of runtime/cuda. A slice body (softmax, layer
// norm, ...) is written once against a context that says how this thread
// walks a slice and how partial results are combined; the two kernels below
// run it cooperatively (one block per contiguous row, fixed block tree) or
// one thread per strided slice (SlicePlan.h).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_SLICEKERNELS_CUH
#define MPC_RUNTIME_CUDA_SLICEKERNELS_CUH

#include "GridStride.cuh"
#include "mpc/Runtime/Cuda/SlicePlan.h"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include <cuda_runtime.h>

namespace mpc {
namespace cuda {

/// Combines v over the block: each warp by shuffles (offsets 16, 8, 4, 2, 1),
/// then warp 0 over the warp results in warp order; every thread gets the
/// result. The tree is fixed by blockDim.x (a multiple of 32), so the result
/// is the same run to run. `shared` holds 32 values; the block must reach
/// this call together.
template <typename S, typename Op>
__device__ S blockCombine(S v, Op op, S identity, S *shared) {
  unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1)
    v = op(v, __shfl_down_sync(0xffffffffu, v, off));
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? shared[lane] : identity;
    for (int off = 16; off > 0; off >>= 1)
      v = op(v, __shfl_down_sync(0xffffffffu, v, off));
    if (lane == 0)
      shared[0] = v;
  }
  __syncthreads();
  v = shared[0];
  __syncthreads(); // shared is free for the next combine
  return v;
}

struct SumOp {
  template <typename S> __device__ S operator()(S a, S b) const { return a + b; }
};

/// The larger, NaN once either is NaN (a row maximum, NormBodies.h).
struct MaxKeepNaNOp {
  __device__ float operator()(float a, float b) const { return kernels::maxKeepNaN(a, b); }
};

/// One block per slice: thread t takes elements t, t + blockDim.x, ...
struct BlockSlice {
  float *shared;
  __device__ int64_t first() const { return threadIdx.x; }
  __device__ int64_t step() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  template <typename Op> __device__ float combine(float v, Op op, float identity) const {
    return blockCombine(v, op, identity, shared);
  }
};

/// One thread per slice: it takes every element in order.
struct ThreadSlice {
  __device__ int64_t first() const { return 0; }
  __device__ int64_t step() const { return 1; }
  __device__ bool leader() const { return true; }
  template <typename Op> __device__ float combine(float v, Op, float) const { return v; }
};

/// Where one slice lies: element a at base + a * stride, a < n; `index` is
/// the slice's number (o * inner + i).
struct SliceAt {
  int64_t index, base, stride, n;
  __device__ int64_t at(int64_t a) const { return base + a * stride; }
};

template <typename Body>
__global__ void cooperativeSlices(Body body, int64_t rows, int64_t n) {
  __shared__ float shared[32];
  BlockSlice ctx{shared};
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    body(ctx, SliceAt{r, sliceBase(r, n, 1), 1, n});
}

template <typename Body>
__global__ void threadSlices(Body body, int64_t outer, int64_t n, int64_t inner) {
  ThreadSlice ctx;
  int64_t slices = outer * inner;
  for (int64_t s = gridStart(); s < slices; s += gridStride())
    body(ctx, SliceAt{s, sliceBase(s, n, inner), inner, n});
}

/// Queues `body` over the slices of `p`.
template <typename Body>
cudaError_t queueSlices(const Body &body, const SlicePlan &p, cudaStream_t stream) {
  if (p.blocks == 0)
    return cudaSuccess;
  LaunchGeometry g;
  g.blocks = p.blocks;
  g.threads = p.threads;
  if (p.cooperative)
    return queue(cooperativeSlices<Body>, g, stream, body, p.shape.outer, p.shape.axisDim);
  return queue(threadSlices<Body>, g, stream, body, p.shape.outer, p.shape.axisDim,
               p.shape.inner);
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_SLICEKERNELS_CUH
