//===- BinaryKernels.cu - Launchers of the binary op bodies ---------------===//
//
// One grid-stride kernel per (op, storage type) of the binary and comparison
// rows of ElementwiseOps.def that the CUDA table lists (f64 too; the bitwise ones over
// the integer types) and the logical And/Or/Xor over bool, walking the host's
// broadcast plan (BroadcastPlan.h) and calling the same MPC_HD body as the
// CPU loops (runtime/kernels); variadic Max and Min fold the same bodies over
// an n-operand plan (CopyPlan.h's naryFold).
//
//===----------------------------------------------------------------------===//
#include "CudaLaunch.h"
#include "DataLaunch.h"
#include "GridStride.cuh"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cstring>
#include <type_traits>

namespace mpc {
namespace cuda {
namespace {

template <typename Op, typename T, typename Out>
__global__ void binaryKernel(Op op, const T *a, const T *b, Out *out,
                             kernels::BroadcastPlan plan) {
  for (int64_t i = gridStart(); i < plan.numElements; i += gridStride()) {
    int64_t ia, ib;
    kernels::broadcastOffsets(plan, i, ia, ib);
    out[i] = kernels::store<Out>(op(kernels::load(a[ia]), kernels::load(b[ib])));
  }
}

template <typename Op, bool Compare, bool Integer = false>
cudaError_t binaryFor(const OpBlob &blob, int32_t type, const void *a, const void *b,
                      void *out, const kernels::BroadcastPlan &plan,
                      const LaunchGeometry &g, cudaStream_t stream) {
  static_assert(sizeof(Op) <= sizeof(blob.bytes) && std::is_trivially_copyable<Op>::value,
                "an op functor travels as an OpBlob");
  Op op;
  std::memcpy(static_cast<void *>(&op), blob.bytes, sizeof(Op));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using Out = std::conditional_t<Compare, bool, T>;
    return queue(binaryKernel<Op, T, Out>, g, stream, op, static_cast<const T *>(a),
                 static_cast<const T *>(b), static_cast<Out *>(out), plan);
  };
  if constexpr (Integer)
    return dispatchInteger(type, run);
  else
    return dispatchBinaryOrDouble(type, run);
}

template <typename Op, typename T>
__global__ void variadicKernel(Op op, NaryInputs in, T *out, kernels::NaryPlan plan) {
  const T *ptr[kernels::kMaxNaryInputs];
  for (int k = 0; k < plan.inputs; ++k)
    ptr[k] = static_cast<const T *>(in.data[k]);
  for (int64_t i = gridStart(); i < plan.numElements; i += gridStride())
    out[i] = kernels::naryFold(plan, ptr, i, op);
}

template <typename Op>
cudaError_t variadicFor(const OpBlob &blob, int32_t type, const NaryInputs &in, void *out,
                        const kernels::NaryPlan &plan, const LaunchGeometry &g,
                        cudaStream_t stream) {
  Op op;
  std::memcpy(static_cast<void *>(&op), blob.bytes, sizeof(Op));
  return dispatchBinaryOrDouble(type, [&](auto tag) {
    using T = decltype(tag);
    return queue(variadicKernel<Op, T>, g, stream, op, in, static_cast<T *>(out), plan);
  });
}

template <typename T>
__global__ void broadcastCopyKernel(const T *src, T *dst, kernels::BroadcastPlan plan) {
  for (int64_t i = gridStart(); i < plan.numElements; i += gridStride()) {
    int64_t ia, ib;
    kernels::broadcastOffsets(plan, i, ia, ib);
    dst[i] = src[ia];
  }
}

template <typename T>
cudaError_t copyAs(const void *src, void *dst, const kernels::BroadcastPlan &plan,
                   const LaunchGeometry &g, cudaStream_t stream) {
  return queue(broadcastCopyKernel<T>, g, stream, static_cast<const T *>(src),
               static_cast<T *>(dst), plan);
}

} // namespace

cudaError_t launchBinary(BinaryOpId op, const OpBlob &functor, int32_t type,
                         const void *a, const void *b, void *out,
                         const kernels::BroadcastPlan &plan,
                         const LaunchGeometry &g, cudaStream_t stream) {
  switch (op) {
#define MPC_CUDA_BINARY(Op, Compare)                                           \
  case BinaryOpId::Op:                                                         \
    return binaryFor<kernels::Op, Compare>(functor, type, a, b, out, plan, g, stream);
#define MPC_BINARY_SIGNED(Op) MPC_CUDA_BINARY(Op, false)
#define MPC_BINARY_COMPARE(Op) MPC_CUDA_BINARY(Op, true)
// The bitwise rows, over the integer types.
#define MPC_BINARY_INTEGER(Op)                                                 \
  case BinaryOpId::Op:                                                         \
    return binaryFor<kernels::Op, false, true>(functor, type, a, b, out, plan, g, stream);
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
#undef MPC_CUDA_BINARY
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t launchVariadic(BinaryOpId op, const OpBlob &functor, int32_t type,
                           const NaryInputs &in, void *out, const kernels::NaryPlan &plan,
                           const LaunchGeometry &g, cudaStream_t stream) {
  switch (op) {
  case BinaryOpId::Max:
    return variadicFor<kernels::Max>(functor, type, in, out, plan, g, stream);
  case BinaryOpId::Min:
    return variadicFor<kernels::Min>(functor, type, in, out, plan, g, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

// Logical rows (index/logic family): And, Or, Xor over bool.
cudaError_t launchLogical(LogicalOpId op, const bool *a, const bool *b, bool *out,
                          const kernels::BroadcastPlan &plan, const LaunchGeometry &g,
                          cudaStream_t stream) {
  switch (op) {
  case LogicalOpId::And:
    return queue(binaryKernel<kernels::And, bool, bool>, g, stream, kernels::And(), a, b, out,
                 plan);
  case LogicalOpId::Or:
    return queue(binaryKernel<kernels::Or, bool, bool>, g, stream, kernels::Or(), a, b, out,
                 plan);
  case LogicalOpId::Xor:
    return queue(binaryKernel<kernels::Xor, bool, bool>, g, stream, kernels::Xor(), a, b, out,
                 plan);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launchBroadcastCopy(unsigned elementBytes, const void *src, void *dst,
                                const kernels::BroadcastPlan &plan,
                                const LaunchGeometry &g, cudaStream_t stream) {
  switch (elementBytes) {
  case 1: return copyAs<uint8_t>(src, dst, plan, g, stream);
  case 2: return copyAs<uint16_t>(src, dst, plan, g, stream);
  case 4: return copyAs<uint32_t>(src, dst, plan, g, stream);
  case 8: return copyAs<uint64_t>(src, dst, plan, g, stream);
  default: return cudaErrorInvalidValue;
  }
}

} // namespace cuda
} // namespace mpc
