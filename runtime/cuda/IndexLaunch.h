//===- IndexLaunch.h - Host entry points of the index/shape launchers -*- C++ -*-===//
//
// What IndexOps.cpp (the C++ compiler) calls in IndexKernels.cu (nvcc):
// ArgMax/ArgMin over the slice body the CPU runs (IndexBodies.h), Shape and
// Size values written by a kernel from its parameters, Range from its
// device scalars, Trilu, CumSum/CumProd and GatherElements. No launcher allocates, synchronizes or reads device
// memory on the host, so a step that runs them can be captured as a graph.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_INDEXLAUNCH_H
#define MPC_RUNTIME_CUDA_INDEXLAUNCH_H

#include "DataLaunch.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/IndexBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// y[s] = argReduceSlice(x, split, s, isMax, last) for every slice
/// s < outer * inner, one thread per slice; `type` f32, f16, bf16, i32 or
/// i64 (cudaErrorInvalidValue for another).
cudaError_t launchArgReduce(int32_t type, const void *x, int64_t *y,
                            const kernels::AxisSplit &split, bool isMax, bool last,
                            const LaunchGeometry &g, cudaStream_t stream);

/// The most values a SmallInts carries (Shape of a tensor of higher rank
/// runs on the CPU).
constexpr int kMaxSmallInts = 16;

/// int64 values known at prepare, passed by value to the kernel that
/// writes them (Shape, Size): nothing is copied from the host at launch.
struct SmallInts {
  int64_t v[kMaxSmallInts] = {};
  int32_t count = 0;
};

/// out[i] = values.v[i] for i < values.count.
cudaError_t launchSmallInts(const SmallInts &values, int64_t *out, cudaStream_t stream);

/// out[i] = rangeValue(*start, *delta, i) for n elements, start and delta
/// read on the device; `type` f32, f16, bf16, i32 or i64.
cudaError_t launchRange(int32_t type, const void *start, const void *delta, void *out,
                        int64_t n, const LaunchGeometry &g, cudaStream_t stream);

/// OneHot into y [outer, depth, inner]: element (o, d, i) is values[1] where
/// oneHotPosition(indices[o * inner + i], depth) == d, else values[0];
/// indices of ONNX type f32, f16, bf16, i32 or i64, values (device memory,
/// read by the kernel) of valueBytes bytes.
cudaError_t launchOneHot(int32_t indexType, unsigned valueBytes, const void *indices,
                         const void *values, void *y, const kernels::AxisSplit &split,
                         const LaunchGeometry &g, cudaStream_t stream);

/// dst[i] = the elementBytes-byte value whose bits are the low bytes of
/// `bits` (ConstantOfShape), for n elements.
cudaError_t launchFillBits(unsigned elementBytes, uint64_t bits, void *dst, int64_t n,
                           const LaunchGeometry &g, cudaStream_t stream);

/// Trilu of `mats` matrices [rows, cols] of elementBytes-byte elements
/// (1, 2, 4 or 8): y[e] = x[e] where triluKeeps(i, j, k, upper), else zero
/// bits (0 of every type).
cudaError_t launchTrilu(unsigned elementBytes, const void *x, void *y, int64_t n, int64_t rows,
                        int64_t cols, int64_t k, bool upper, const LaunchGeometry &g,
                        cudaStream_t stream);

/// CumSum (sum) or CumProd of every slice, one thread per slice walking it
/// in order with scanSlice; `type` f32, f16, bf16, i32 or i64.
cudaError_t launchScan(bool sum, int32_t type, const void *x, void *y,
                       const kernels::AxisSplit &split, bool exclusive, bool reverse,
                       const LaunchGeometry &g, cudaStream_t stream);

/// GatherElements: out[e] = data[elementIndexOffset(plan, e, index[e])] of
/// elementBytes-byte elements, indices of ONNX type kOnnxI32 or kOnnxI64;
/// an index outside [-dim, dim) is recorded (operand 0, the index) as the
/// CPU does.
cudaError_t launchGatherElements(unsigned elementBytes, int32_t indexType, const void *data,
                                 const void *indices, void *out,
                                 const kernels::ElementIndexPlan &plan,
                                 IndexErrorRecord *record, int32_t call,
                                 const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_INDEXLAUNCH_H
