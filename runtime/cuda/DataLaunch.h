//===- DataLaunch.h - Host entry points of the data-movement launchers -*- C++ -*-===//
//
// What DataOps.cpp (host code) calls in DataKernels.cu (nvcc): a strided
// copy over a CopyPlan (mpc/Runtime/Kernels/CopyPlan.h, the plan the CPU
// kernels walk) and a fill with one element read on the device. Elements
// are moved as 1, 2, 4 or 8 raw bytes, so every dtype of those sizes goes
// through the same four instantiations. No launcher allocates,
// synchronizes or reads device memory on the host.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_DATALAUNCH_H
#define MPC_RUNTIME_CUDA_DATALAUNCH_H

#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/CopyPlan.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// The layout of KernelErrorRecord (Backend.h, which device code does not
/// include): checked field by field by a static_assert in DataOps.cpp.
struct IndexErrorRecord {
  int32_t code, call, operand, reserved;
  int64_t value;
};

/// True for the element sizes the data launchers are instantiated for.
constexpr bool dataElementBytesOk(unsigned bytes) {
  return bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8;
}

/// dst[dstOffset(i)] = src[srcOffset(i)] for the plan's elements
/// (kernels::copyOffsets), one thread per element (grid-stride).
cudaError_t launchCopyPlan(unsigned elementBytes, const void *src, void *dst,
                           const kernels::CopyPlan &plan, const LaunchGeometry &g,
                           cudaStream_t stream);

/// dst[i] = *value for n elements; all-zero bytes when `value` is null.
/// `value` is device memory (a Pad's constant_value input), read by the
/// kernel.
cudaError_t launchFill(unsigned elementBytes, const void *value, void *dst, int64_t n,
                       const LaunchGeometry &g, cudaStream_t stream);

/// out[i] = cond[c(i)] ? x[x(i)] : y[y(i)] over a SelectPlan (Where).
cudaError_t launchSelect(unsigned elementBytes, const bool *cond, const void *x, const void *y,
                         void *out, const kernels::SelectPlan &plan, const LaunchGeometry &g,
                         cudaStream_t stream);

/// Gather of data (elementBytes-byte elements) by `indices` (ONNX type
/// kOnnxI32 or kOnnxI64) over a GatherPlan. An index outside [-dim, dim)
/// writes IndexOutOfRange (operand 0, the index) to `record` for launch
/// `call`, the first error of the run winning, as the CPU's Gather does.
cudaError_t launchGather(unsigned elementBytes, int32_t indexType, const void *data,
                         const void *indices, void *out, const kernels::GatherPlan &plan,
                         IndexErrorRecord *record, int32_t call, const LaunchGeometry &g,
                         cudaStream_t stream);

/// The operand pointers of a variadic launch, by value.
struct NaryInputs {
  const void *data[kernels::kMaxNaryInputs] = {};
};

/// The `plan.inputs` operands of a KernelCall from operand `first` on (a
/// template: device code does not include Backend.h).
template <typename Call>
NaryInputs naryInputsOf(const Call &call, const kernels::NaryPlan &plan, size_t first = 0) {
  NaryInputs in;
  for (int k = 0; k < plan.inputs; ++k)
    in.data[k] = call.inputs[first + size_t(k)].data;
  return in;
}

/// One run of a Sum (or Mean) of `count` operands in all
/// (kernels::naryContinue): `before` (compute type: float for 16-bit types)
/// the sum of the operands before the run, null for the first; the run's
/// sum goes to `acc` (compute type) when `out` is null, else to `out`,
/// divided by `count` for a mean and rounded once. One run of every operand
/// (no `before`, `out` given) is naryAccumulate. `type` f32, f16, bf16 or
/// f64.
cudaError_t launchNary(int32_t type, bool mean, int64_t count, const NaryInputs &in,
                       const void *before, void *acc, void *out, const kernels::NaryPlan &plan,
                       const LaunchGeometry &g, cudaStream_t stream);

/// Variadic Max or Min (`op`, with its functor bytes) of the plan's operands
/// per output element (kernels::naryFold); `type` a binary row's type
/// (BinaryKernels.cu). Not declared in CudaLaunch.h: it takes NaryInputs.
cudaError_t launchVariadic(BinaryOpId op, const OpBlob &functor, int32_t type,
                           const NaryInputs &in, void *out, const kernels::NaryPlan &plan,
                           const LaunchGeometry &g, cudaStream_t stream);

/// GatherGrad's scratch: the indices sorted stably by value (their
/// positions, then their values), 2 * count int64.
constexpr size_t gatherGradWorkspaceBytes(int64_t count) {
  return size_t(count > 0 ? count : 0) * 2 * sizeof(int64_t);
}

/// GatherGrad (ai.mpc.training): dx (already zero) [outer, dim, inner] gets,
/// per row r, the sum of the dy rows whose index is r, added in index order
/// in float (double for f64) and rounded once, as the CPU does, with no
/// atomics: a stable sort of the indices by value into `workspace` (one
/// thread per index counting the indices before it: O(count^2) comparisons),
/// then one thread per (outer, first index of a run of equal values, inner)
/// summing that run. `type` is the ONNX type of dy and dx (f32, f16, bf16,
/// f64); an index outside [-dim, dim) is recorded against output 0.
cudaError_t launchGatherGrad(int32_t type, int32_t indexType, const void *dy,
                             const void *indices, void *dx, const kernels::GatherPlan &plan,
                             void *workspace, IndexErrorRecord *record, int32_t call,
                             const LaunchGeometry &sortGeometry,
                             const LaunchGeometry &sumGeometry, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_DATALAUNCH_H
