//===- IndexError.cuh - An index out of range, recorded on the device -*- CUDA -*-===//
//
// Private to the .cu files of runtime/cuda: a data-dependent index error
// goes to the run's error record (DataLaunch.h's IndexErrorRecord, the
// device's view of KernelErrorRecord) with the CPU's code, operand and
// value, so the executor prints the CPU's message.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_INDEXERROR_CUH
#define MPC_RUNTIME_CUDA_INDEXERROR_CUH

#include "DataLaunch.h"
#include <cuda_runtime.h>

namespace mpc {
namespace cuda {

/// Records an index error unless the run has one (the first wins); the
/// CPU's recordKernelError does the same on the host.
__device__ inline void recordIndexError(IndexErrorRecord *r, int32_t call, int32_t operand,
                                        int64_t value) {
  if (!r || atomicCAS(&r->code, 0, 1 /*KernelErrorCode::IndexOutOfRange*/) != 0)
    return;
  r->call = call;
  r->operand = operand;
  r->value = value;
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_INDEXERROR_CUH
