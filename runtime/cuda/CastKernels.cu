//===- CastKernels.cu - Cast launchers and the device error record --------===//
//
// Cast between any two of the CUDA cast types with the MPC_HD castValue of
// runtime/kernels (the CPU's Cast calls the same function), and the device
// side of the run's error record.
//
//===----------------------------------------------------------------------===//
#include "CudaLaunch.h"
#include "GridStride.cuh"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

template <typename From, typename To>
__global__ void castKernel(const From *in, To *out, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride())
    out[i] = kernels::castValue<To>(in[i]);
}

/// The first four fields of KernelErrorRecord (Backend.h): code, call,
/// operand, reserved, then the 64-bit value. Kept in step by the
/// static_assert in CudaBackend.cpp, which sees both.
struct DeviceErrorRecord {
  int32_t code, call, operand, reserved;
  int64_t value;
};

/// Records an error unless one is there: the first error of a run wins.
__device__ void recordDeviceError(DeviceErrorRecord *r, int32_t code, int32_t call) {
  if (atomicCAS(&r->code, 0, code) != 0)
    return;
  r->call = call;
}

__global__ void recordErrorKernel(DeviceErrorRecord *r, int32_t code, int32_t call) {
  recordDeviceError(r, code, call);
}

} // namespace

cudaError_t launchCast(int32_t from, int32_t to, const void *in, void *out, int64_t n,
                       const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchCast(from, [&](auto fromTag) {
    using From = decltype(fromTag);
    return dispatchCast(to, [&](auto toTag) {
      using To = decltype(toTag);
      return queue(castKernel<From, To>, g, stream, static_cast<const From *>(in),
                   static_cast<To *>(out), n);
    });
  });
}

cudaError_t launchRecordError(KernelErrorRecord *record, int32_t code, int32_t call,
                              cudaStream_t stream) {
  LaunchGeometry one;
  one.blocks = 1;
  one.threads = 1;
  return queue(recordErrorKernel, one, stream,
               reinterpret_cast<DeviceErrorRecord *>(record), code, call);
}

} // namespace cuda
} // namespace mpc
