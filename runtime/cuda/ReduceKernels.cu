//===- ReduceKernels.cu - The Reduce* ops and BiasGrad ---------------------===//
//
// One slice body (SliceKernels.cuh) per (reduction kind, storage type): a
// contiguous reduced run gets a block per result with the fixed block tree,
// a reduced middle axis a thread per result folding in order, or, where that
// leaves the GPU idle, the two passes of planColumnSplit (SlicePlan.h). The steps
// (map, combine, identity, finishing step) are ReduceBodies.h's, which the
// CPU's Reduce.cpp folds with too; sums are kept in fp32.
//
//===----------------------------------------------------------------------===//
#include "ReduceLaunch.h"
#include "SliceKernels.cuh"
#include "mpc/Runtime/Kernels/NormBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

using kernels::ReduceKind;

template <ReduceKind K> struct StepOf {
  using type = kernels::ReduceStep<float, kernels::combineOf(K), kernels::mapOf(K)>;
};

template <typename Step> struct CombineOp {
  __device__ float operator()(float a, float b) const { return Step::combine(a, b); }
};

/// y's type U is T, or float for a sum over 16-bit x (BiasGrad's `to`): the
/// fp32 sum is then stored without the rounding to T.
template <typename T, ReduceKind K, typename U = T> struct ReduceBody {
  const T *x;
  U *y;
  template <typename Ctx> __device__ void operator()(const Ctx &c, const SliceAt &s) const {
    using Step = typename StepOf<K>::type;
    float max = 0.0f, shift = 0.0f;
    if (K == ReduceKind::LogSumExp) {
      max = -math::infinity<float>();
      for (int64_t a = c.first(); a < s.n; a += c.step())
        max = kernels::maxKeepNaN(max, float(kernels::load(x[s.at(a)])));
      max = c.combine(max, MaxKeepNaNOp(), -math::infinity<float>());
      shift = kernels::logSumExpShift(max);
    }
    float acc = Step::identity();
    for (int64_t a = c.first(); a < s.n; a += c.step())
      acc = Step::combine(acc, Step::map(float(kernels::load(x[s.at(a)])), shift));
    acc = c.combine(acc, CombineOp<Step>(), Step::identity());
    if (c.leader())
      y[s.index] = kernels::castValue<U>(kernels::reduceFinish(K, acc, max, s.n));
  }
};

template <typename T>
cudaError_t reduceAs(ReduceKind kind, const T *x, T *y, const SlicePlan &p, cudaStream_t stream) {
  switch (kind) {
#define MPC_CUDA_REDUCE(K)                                                     \
  case ReduceKind::K:                                                          \
    return queueSlices(ReduceBody<T, ReduceKind::K>{x, y}, p, stream);
    MPC_CUDA_REDUCE(Sum)
    MPC_CUDA_REDUCE(Mean)
    MPC_CUDA_REDUCE(Max)
    MPC_CUDA_REDUCE(Min)
    MPC_CUDA_REDUCE(Prod)
    MPC_CUDA_REDUCE(SumSquare)
    MPC_CUDA_REDUCE(L1)
    MPC_CUDA_REDUCE(L2)
    MPC_CUDA_REDUCE(LogSum)
    MPC_CUDA_REDUCE(LogSumExp)
#undef MPC_CUDA_REDUCE
  }
  return cudaErrorInvalidValue;
}

/// planColumnSplit's pass 1: the partial of chunk blockIdx.y of columns
/// blockIdx.x * kColumnTile + threadIdx.x of outer slab blockIdx.z.
template <typename T, ReduceKind K>
__global__ void columnPartials(const T *x, float *ws, int64_t axisDim, int64_t inner,
                               int64_t rowsPerChunk, unsigned chunks) {
  using Step = typename StepOf<K>::type;
  __shared__ float part[kColumnLanes][kColumnTile + 1];
  int64_t o = blockIdx.z, c = blockIdx.y;
  int64_t i = int64_t(blockIdx.x) * kColumnTile + threadIdx.x;
  int64_t a0 = c * rowsPerChunk, a1 = a0 + rowsPerChunk < axisDim ? a0 + rowsPerChunk : axisDim;
  float acc = Step::identity();
  if (i < inner) {
    const T *col = x + o * axisDim * inner + i;
    for (int64_t a = a0 + threadIdx.y; a < a1; a += kColumnLanes)
      acc = Step::combine(acc, Step::map(float(kernels::load(col[a * inner])), 0.0f));
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && i < inner) {
    float v = part[0][threadIdx.x];
    for (unsigned y = 1; y < kColumnLanes; ++y)
      v = Step::combine(v, part[y][threadIdx.x]);
    ws[(o * chunks + c) * inner + i] = v;
  }
}

/// planColumnSplit's pass 2: each result's chunk partials in chunk order.
template <typename U, ReduceKind K>
__global__ void columnFinish(const float *ws, U *y, int64_t outer, int64_t axisDim,
                             int64_t inner, unsigned chunks) {
  using Step = typename StepOf<K>::type;
  for (int64_t s = gridStart(); s < outer * inner; s += gridStride()) {
    int64_t o = s / inner, i = s - o * inner;
    const float *p = ws + o * chunks * inner + i;
    float acc = Step::identity();
    for (unsigned c = 0; c < chunks; ++c)
      acc = Step::combine(acc, p[int64_t(c) * inner]);
    y[s] = kernels::castValue<U>(kernels::reduceFinish(K, acc, 0.0f, axisDim));
  }
}

template <typename T, typename U, ReduceKind K>
cudaError_t splitAs(const T *x, U *y, float *ws, const ColumnSplit &p, unsigned smCount,
                    cudaStream_t stream) {
  dim3 grid(p.tiles, p.chunks, unsigned(p.shape.outer)), block(kColumnTile, kColumnLanes);
  columnPartials<T, K><<<grid, block, 0, stream>>>(x, ws, p.shape.axisDim, p.shape.inner,
                                                   p.rowsPerChunk, p.chunks);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return e;
  return queue(columnFinish<U, K>, elementwiseGeometry(p.shape.slices(), smCount), stream, ws,
               y, p.shape.outer, p.shape.axisDim, p.shape.inner, p.chunks);
}

template <typename T>
cudaError_t splitReduceAs(ReduceKind kind, const T *x, T *y, float *ws, const ColumnSplit &p,
                          unsigned smCount, cudaStream_t stream) {
  switch (kind) {
#define MPC_CUDA_SPLIT(K)                                                      \
  case ReduceKind::K:                                                          \
    return splitAs<T, T, ReduceKind::K>(x, y, ws, p, smCount, stream);
    MPC_CUDA_SPLIT(Sum)
    MPC_CUDA_SPLIT(Mean)
    MPC_CUDA_SPLIT(Max)
    MPC_CUDA_SPLIT(Min)
    MPC_CUDA_SPLIT(Prod)
    MPC_CUDA_SPLIT(SumSquare)
    MPC_CUDA_SPLIT(L1)
    MPC_CUDA_SPLIT(L2)
    MPC_CUDA_SPLIT(LogSum)
#undef MPC_CUDA_SPLIT
  case ReduceKind::LogSumExp: // shifted by the slice's maximum: not split
    break;
  }
  return cudaErrorInvalidValue;
}

} // namespace

bool splitReducible(ReduceKind kind) { return kind != ReduceKind::LogSumExp; }

cudaError_t launchSplitReduce(ReduceKind kind, int32_t type, const void *x, void *y,
                              void *workspace, const ColumnSplit &p, unsigned smCount,
                              bool toF32, cudaStream_t stream) {
  float *ws = static_cast<float *>(workspace);
  if (toF32) {
    if (kind != ReduceKind::Sum)
      return cudaErrorInvalidValue;
    float *out = static_cast<float *>(y);
    switch (type) {
    case kOnnxF16:
      return splitAs<Half, float, ReduceKind::Sum>(static_cast<const Half *>(x), out, ws, p,
                                                   smCount, stream);
    case kOnnxBF16:
      return splitAs<BFloat16, float, ReduceKind::Sum>(static_cast<const BFloat16 *>(x), out,
                                                       ws, p, smCount, stream);
    default:
      return cudaErrorInvalidValue;
    }
  }
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return splitReduceAs(kind, static_cast<const T *>(x), static_cast<T *>(y), ws, p, smCount,
                         stream);
  });
}

cudaError_t launchSumToF32(int32_t type, const void *x, float *y, const SlicePlan &p,
                           cudaStream_t stream) {
  switch (type) {
  case kOnnxF16:
    return queueSlices(ReduceBody<Half, ReduceKind::Sum, float>{static_cast<const Half *>(x), y},
                       p, stream);
  case kOnnxBF16:
    return queueSlices(
        ReduceBody<BFloat16, ReduceKind::Sum, float>{static_cast<const BFloat16 *>(x), y}, p,
        stream);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t launchReduce(ReduceKind kind, int32_t type, const void *x, void *y,
                         const SlicePlan &p, cudaStream_t stream) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    return reduceAs(kind, static_cast<const T *>(x), static_cast<T *>(y), p, stream);
  });
}

} // namespace cuda
} // namespace mpc
