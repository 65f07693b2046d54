//===- CudaLaunch.h - Host entry points of the .cu launchers ----*- C++ -*-===//
//
// What the CUDA backend's host code (CudaBackend.cpp, compiled by the C++
// compiler) calls in the .cu files (compiled by nvcc). Plain functions over
// ONNX type numbers, op numbers (CudaOps.h) and device pointers: each
// switches to the template instantiation for the types and queues one
// grid-stride kernel on `stream`, returning the launch's cudaError_t. No
// launcher allocates, synchronizes or reads device memory on the host.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_CUDALAUNCH_H
#define MPC_RUNTIME_CUDA_CUDALAUNCH_H

#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/BroadcastPlan.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
struct KernelErrorRecord;
namespace cuda {

/// out[i] = op(in[i]) for n elements of ONNX type `type` (the output is
/// bool for a predicate). cudaErrorInvalidValue for a type or op the
/// launchers were not instantiated for.
cudaError_t launchUnary(UnaryOpId op, const OpBlob &functor, int32_t type,
                        const void *in, void *out, int64_t n,
                        const LaunchGeometry &g, cudaStream_t stream);

/// out[i] = op(a[ia], b[ib]) over a broadcast plan (the output is bool for
/// a comparison).
cudaError_t launchBinary(BinaryOpId op, const OpBlob &functor, int32_t type,
                         const void *a, const void *b, void *out,
                         const kernels::BroadcastPlan &plan,
                         const LaunchGeometry &g, cudaStream_t stream);

/// out[i] = castValue<To>(in[i]) (ONNX Cast semantics, Storage.h).
cudaError_t launchCast(int32_t from, int32_t to, const void *in, void *out,
                       int64_t n, const LaunchGeometry &g, cudaStream_t stream);

/// dst[i] = src[ia] of `elementBytes`-byte elements over a plan whose first
/// operand is src (numpy broadcast of src into dst's shape).
cudaError_t launchBroadcastCopy(unsigned elementBytes, const void *src, void *dst,
                                const kernels::BroadcastPlan &plan,
                                const LaunchGeometry &g, cudaStream_t stream);

// Logical rows (index/logic family): bool in, bool out.
/// out[i] = a[ia] op b[ib] over a broadcast plan (And, Or, Xor).
cudaError_t launchLogical(LogicalOpId op, const bool *a, const bool *b, bool *out,
                          const kernels::BroadcastPlan &plan, const LaunchGeometry &g,
                          cudaStream_t stream);
/// out[i] = !in[i] (Not).
cudaError_t launchNot(const bool *in, bool *out, int64_t n, const LaunchGeometry &g,
                      cudaStream_t stream);

/// Writes `code` and `call` into the run's error record with an atomic
/// compare-and-swap on its code (the first error wins), on the device.
cudaError_t launchRecordError(KernelErrorRecord *record, int32_t code, int32_t call,
                              cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_CUDALAUNCH_H
