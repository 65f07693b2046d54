//===- MoveLaunch.h - Host entry points of the data-movement index launchers -*- C++ -*-===//
//
// What MoveOps.cpp (the C++ compiler) calls in MoveKernels.cu (nvcc):
// DepthToSpace/SpaceToDepth, GatherND, ScatterND, ScatterElements,
// ReverseSequence, EyeLike, Compress and NonZero over the plans and bodies
// of mpc/Runtime/Kernels/MoveBodies.h, the ones the CPU kernels run. No
// launcher allocates, synchronizes or reads device memory on the host.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_MOVELAUNCH_H
#define MPC_RUNTIME_CUDA_MOVELAUNCH_H

#include "DataLaunch.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/MoveBodies.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// The operand of an index error that names none (KernelErrorRecord's
/// kNoOperand: GatherND and ScatterND report the index alone).
constexpr int32_t kNoIndexOperand = -1000;

/// DepthToSpace (toSpace: y[e] = x[blockDepthOffset(e)]) or SpaceToDepth
/// (y[blockDepthOffset(e)] = x[e]) over the space-side elements.
cudaError_t launchBlockMove(unsigned elementBytes, bool toSpace, const void *x, void *y,
                            const kernels::BlockMovePlan &plan, const LaunchGeometry &g,
                            cudaStream_t stream);

/// GatherND: one thread per output element (tuple t = e / slice); a tuple
/// value outside [-dim, dim) is recorded (no operand) as the CPU does.
/// Indices of ONNX type kOnnxI32 or kOnnxI64.
cudaError_t launchGatherND(unsigned elementBytes, int32_t indexType, const void *data,
                           const void *indices, void *out, const kernels::TupleIndexPlan &plan,
                           IndexErrorRecord *record, int32_t call, const LaunchGeometry &g,
                           cudaStream_t stream);

/// ScatterND into `out` (already holding the data): one thread per slice
/// element walking the tuples in order, so duplicate tuples combine in the
/// CPU's order; `g` covers max(slice, 1) threads (with an empty slice one
/// thread still checks the indices). `type` is the data's ONNX type: any
/// type of elementBytes bytes for ScatterCombine::None, kCudaBinaryTypes
/// for the reductions.
cudaError_t launchScatterND(int32_t type, unsigned elementBytes, kernels::ScatterCombine combine,
                            int32_t indexType, const void *indices, const void *updates,
                            void *out, const kernels::TupleIndexPlan &plan,
                            IndexErrorRecord *record, int32_t call, const LaunchGeometry &g,
                            cudaStream_t stream);

/// ScatterElements into `out` (already holding the data): one thread per
/// line of the index tensor along the axis (elementLines), walking it in
/// order; an index outside [-dim, dim) is recorded (operand 0). Types as
/// launchScatterND.
cudaError_t launchScatterElements(int32_t type, unsigned elementBytes,
                                  kernels::ScatterCombine combine, int32_t indexType,
                                  const void *indices, const void *updates, void *out,
                                  const kernels::ElementIndexPlan &plan,
                                  IndexErrorRecord *record, int32_t call,
                                  const LaunchGeometry &g, cudaStream_t stream);

/// ReverseSequence of n elements, sequence lengths (kOnnxI32 or kOnnxI64)
/// read on the device.
cudaError_t launchReverseSequence(unsigned elementBytes, int32_t lensType, const void *x,
                                  const void *lens, void *y,
                                  const kernels::ReverseSequencePlan &plan, int64_t n,
                                  const LaunchGeometry &g, cudaStream_t stream);

/// EyeLike: y [rows, cols] holds the element whose bits are the low bytes
/// of `oneBits` on diagonal k, zero bits elsewhere.
cudaError_t launchEyeLike(unsigned elementBytes, uint64_t oneBits, void *y, int64_t rows,
                          int64_t cols, int64_t k, const LaunchGeometry &g, cudaStream_t stream);

/// The threads of the one block that numbers kept elements in order
/// (Compress, NonZero).
constexpr int kCompactThreads = 1024;

/// The most dimensions of a NonZero input on the device.
constexpr int kMaxNonZeroRank = 12;
struct NonZeroShape {
  int32_t rank = 0;
  int64_t dims[kMaxNonZeroRank] = {};
};

/// NonZero of x (ONNX type among kCudaCastTypes) into out [rank, count]:
/// one block numbers the nonzero elements in order (a block-wide prefix
/// count per tile), so the columns are the CPU's.
cudaError_t launchNonZero(int32_t type, const void *x, int64_t n, const NonZeroShape &shape,
                          int64_t *out, int64_t count, cudaStream_t stream);

/// Compress: one block lists the positions j < n with cond[j] in order into
/// `list` (workspace of n int64), then y [outer, kept, inner] is gathered
/// from x [outer, split.dim, inner] (compressSource), one thread per element.
cudaError_t launchCompress(unsigned elementBytes, const bool *cond, int64_t n, const void *x,
                           void *y, const kernels::AxisSplit &split, int64_t kept, int64_t *list,
                           const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_MOVELAUNCH_H
