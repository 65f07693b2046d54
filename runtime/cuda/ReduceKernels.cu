//===- ReduceKernels.cu - The Reduce* ops and BiasGrad ---------------------===//
//
// One slice body (SliceKernels.cuh) per (reduction kind, storage type): a
// contiguous reduced run gets a block per result with the fixed block tree,
// a reduced middle axis a thread per result folding in order. The steps
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

} // namespace

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
