//===- UnaryKernels.cu - Launchers of the unary op bodies -----------------===//
//
// One grid-stride kernel per (op, storage type) of the unary rows of
// ElementwiseOps.def that the CUDA table lists (float, Half, BFloat16, double;
// BitwiseNot over the integer types) and logical Not over bool, each calling
// the same MPC_HD body the CPU loops call (runtime/kernels).
//
//===----------------------------------------------------------------------===//
#include "CudaLaunch.h"
#include "GridStride.cuh"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"
#include <cstring>
#include <type_traits>

namespace mpc {
namespace cuda {
namespace {

template <typename Op, typename T, typename Out>
__global__ void unaryKernel(Op op, const T *in, Out *out, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    out[i] = kernels::store<Out>(op(kernels::load(in[i])));
}

template <typename Op, bool Predicate, bool Integer = false>
cudaError_t unaryFor(const OpBlob &blob, int32_t type, const void *in, void *out,
                     int64_t n, const LaunchGeometry &g, cudaStream_t stream) {
  static_assert(sizeof(Op) <= sizeof(blob.bytes) && std::is_trivially_copyable<Op>::value,
                "an op functor travels as an OpBlob");
  Op op;
  std::memcpy(static_cast<void *>(&op), blob.bytes, sizeof(Op));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using Out = std::conditional_t<Predicate, bool, T>;
    return queue(unaryKernel<Op, T, Out>, g, stream, op, static_cast<const T *>(in),
                 static_cast<Out *>(out), n);
  };
  if constexpr (Integer)
    return dispatchInteger(type, run);
  else
    return dispatchFloatOrDouble(type, run);
}

} // namespace

cudaError_t launchUnary(UnaryOpId op, const OpBlob &functor, int32_t type,
                        const void *in, void *out, int64_t n,
                        const LaunchGeometry &g, cudaStream_t stream) {
  switch (op) {
#define MPC_CUDA_UNARY(Op, Predicate)                                          \
  case UnaryOpId::Op:                                                          \
    return unaryFor<kernels::Op, Predicate>(functor, type, in, out, n, g, stream);
#define MPC_UNARY_FLOAT(Op) MPC_CUDA_UNARY(Op, false)
#define MPC_UNARY_SIGNED(Op) MPC_CUDA_UNARY(Op, false)
#define MPC_UNARY_ARITHMETIC(Op) MPC_CUDA_UNARY(Op, false)
#define MPC_UNARY_PREDICATE(Op) MPC_CUDA_UNARY(Op, true)
// BitwiseNot, over the integer types.
#define MPC_UNARY_INTEGER(Op)                                                  \
  case UnaryOpId::Op:                                                          \
    return unaryFor<kernels::Op, false, true>(functor, type, in, out, n, g, stream);
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_CUDA_UNARY
  default:
    return cudaErrorInvalidValue;
  }
}

// Logical Not (index/logic family).
cudaError_t launchNot(const bool *in, bool *out, int64_t n, const LaunchGeometry &g,
                      cudaStream_t stream) {
  return queue(unaryKernel<kernels::Not, bool, bool>, g, stream, kernels::Not(), in, out, n);
}

} // namespace cuda
} // namespace mpc
