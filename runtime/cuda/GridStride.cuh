//===- GridStride.cuh - The grid-stride loop of every launcher ---*- CUDA -*-===//
//
// Private to the .cu files of runtime/cuda: the thread-to-element mapping of
// LaunchGeometry.h (thread t handles t, t + stride, ...) and the one place a
// launch is queued, so every launcher covers n the same way and reports the
// launch's error.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_GRIDSTRIDE_CUH
#define MPC_RUNTIME_CUDA_GRIDSTRIDE_CUH

#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Float16.h"
#include <cuda_runtime.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// The first element of this thread and the grid's stride.
__device__ inline int64_t gridStart() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t gridStride() { return int64_t(gridDim.x) * blockDim.x; }

/// Queues kernel<<<g>>>(args...) on `stream` (nothing when g covers no
/// element) and returns the launch error.
template <typename... Params, typename... Args>
cudaError_t queue(void (*kernel)(Params...), const LaunchGeometry &g,
                  cudaStream_t stream, Args... args) {
  if (g.blocks == 0)
    return cudaSuccess;
  kernel<<<g.blocks, g.threads, 0, stream>>>(args...);
  return cudaGetLastError();
}

/// Calls fn(T()) for the storage type of ONNX type `type`, among the float
/// types of the element-wise rows; cudaErrorInvalidValue for any other.
template <typename Fn> cudaError_t dispatchFloat(int32_t type, Fn &&fn) {
  switch (type) {
  case kOnnxF32: return fn(float());
  case kOnnxF16: return fn(Half());
  case kOnnxBF16: return fn(BFloat16());
  default: return cudaErrorInvalidValue;
  }
}

/// dispatchFloat, and double for f64 (the element-wise rows,
/// kCudaElementwiseFloatTypes).
template <typename Fn> cudaError_t dispatchFloatOrDouble(int32_t type, Fn &&fn) {
  return type == kOnnxF64 ? fn(double()) : dispatchFloat(type, fn);
}

/// The same over the binary rows' types (kCudaBinaryTypes).
template <typename Fn> cudaError_t dispatchBinary(int32_t type, Fn &&fn) {
  switch (type) {
  case kOnnxI32: return fn(int32_t());
  case kOnnxI64: return fn(int64_t());
  default: return dispatchFloat(type, fn);
  }
}

/// dispatchBinary, and double for f64 (kCudaElementwiseBinaryTypes).
template <typename Fn> cudaError_t dispatchBinaryOrDouble(int32_t type, Fn &&fn) {
  return type == kOnnxF64 ? fn(double()) : dispatchBinary(type, fn);
}

/// The same over the integer types of the bitwise rows (kCudaIntegerTypes).
template <typename Fn> cudaError_t dispatchInteger(int32_t type, Fn &&fn) {
  switch (type) {
  case kOnnxI8: return fn(int8_t());
  case kOnnxI16: return fn(int16_t());
  case kOnnxI32: return fn(int32_t());
  case kOnnxI64: return fn(int64_t());
  case kOnnxU8: return fn(uint8_t());
  case kOnnxU16: return fn(uint16_t());
  case kOnnxU32: return fn(uint32_t());
  case kOnnxU64: return fn(uint64_t());
  default: return cudaErrorInvalidValue;
  }
}

/// Calls fn(T()) for the unsigned integer type of `bytes` bytes: the raw
/// elements of the data-movement and index launchers.
template <typename Fn> cudaError_t dispatchBytes(unsigned bytes, Fn &&fn) {
  switch (bytes) {
  case 1: return fn(uint8_t());
  case 2: return fn(uint16_t());
  case 4: return fn(uint32_t());
  case 8: return fn(uint64_t());
  default: return cudaErrorInvalidValue;
  }
}

/// The same over the cast types (kCudaCastTypes).
template <typename Fn> cudaError_t dispatchCast(int32_t type, Fn &&fn) {
  switch (type) {
  case kOnnxF64: return fn(double());
  case kOnnxBool: return fn(bool());
  case kOnnxI8: return fn(int8_t());
  case kOnnxU8: return fn(uint8_t());
  default: return dispatchBinary(type, fn);
  }
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_GRIDSTRIDE_CUH
