//===- ImageLaunch.h - Host entry points of the image launchers -*- C++ -*-===//
//
// What ImageOps.cpp (the C++ compiler) calls in ImageKernels.cu (nvcc):
//   * Pad (edge, reflect, wrap): a gather over raw elements of 1, 2, 4 or 8
//     bytes, one thread per output element (PadMap, ImagePlan.h);
//   * LRN: one thread per element summing its channel window's squares in
//     channel order in the compute type, then kernels::lrnValue;
//   * Resize: one pass, one thread per output element of the pass, summing
//     its taps (kernels::resizeTaps) in input order in the compute type; the
//     pass reads X's type or the compute type (fp32 for 16-bit data) and
//     writes either, as ImageOps.cpp chains the passes.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_IMAGELAUNCH_H
#define MPC_RUNTIME_CUDA_IMAGELAUNCH_H

#include "mpc/Runtime/Cuda/ImagePlan.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include <cuda_runtime_api.h>
#include <cstdint>

namespace mpc {
namespace cuda {

/// y[o] = x[padMapSource(map, o)] for `count` output elements of
/// `elemBytes` bytes.
cudaError_t launchPadMap(unsigned elemBytes, const void *x, void *y, const PadMap &map,
                         int64_t count, const LaunchGeometry &g, cudaStream_t stream);

/// LRN of X [batch, channels, inner...] (type f32, f16 or bf16).
cudaError_t launchLrn(int32_t type, const void *x, void *y, int64_t batch, int64_t channels,
                      int64_t inner, int64_t size, float alpha, float beta, float bias,
                      const LaunchGeometry &g, cudaStream_t stream);

/// One Resize pass of data type `type` (f32, f16, bf16); `computeIn` /
/// `computeOut`: the pass reads / writes fp32 (the compute type) rather than
/// `type`.
cudaError_t launchResizePass(int32_t type, bool computeIn, bool computeOut, const void *in,
                             void *out, const ResizePass &pass, double extrapolation,
                             const LaunchGeometry &g, cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_IMAGELAUNCH_H
