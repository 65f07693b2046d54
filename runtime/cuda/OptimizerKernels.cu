//===- OptimizerKernels.cu - The fused optimizer steps ----------------------===//
//
// SGDStep, MomentumStep and AdamStep over f32: one grid-stride kernel that
// reads the scalars and the skip flag on the device and calls the CPU
// loop's body (OptimizerBodies.h). A skipped step copies param and states.
// The optional 16-bit weight copy is written in the same pass: 2 bytes per
// element more, instead of a Cast that reads the param again next step.
// This file is compiled with -fmad=false (CMakeLists.txt): nvcc would
// otherwise contract m*b1 + g*(1-b1) into one fused multiply-add and the
// device would round differently from the CPU (and from the primitive
// graph of separate Mul and Add kernels). Division and sqrt are nvcc's
// IEEE-rounded defaults (-prec-div, -prec-sqrt).
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "MultiTensor.cuh"
#include "OptimizerLaunch.h"
#include "mpc/Runtime/Kernels/Storage.h"

namespace mpc {
namespace cuda {
namespace {

/// Element i of the 16-bit weight copy: p rounded as the Cast kernel does
/// (the same MPC_HD castValue).
__device__ inline void storeWeightCopy(const OptimizerStepArgs &a, int64_t i, float p) {
  if (a.copyIsBf16)
    static_cast<BFloat16 *>(a.copyOut)[i] = kernels::castValue<BFloat16>(p);
  else
    static_cast<Half *>(a.copyOut)[i] = kernels::castValue<Half>(p);
}

__global__ void optimizerStepKernel(OptimizerStepArgs a) {
  bool skip = a.skip && (a.skipIsBool ? *static_cast<const bool *>(a.skip)
                                      : *static_cast<const float *>(a.skip) != 0.0f);
  if (skip) {
    for (int64_t i = gridStart(); i < a.n; i += gridStride()) {
      float p = a.param[i];
      a.paramOut[i] = p;
      if (a.state1Out)
        a.state1Out[i] = a.state1[i];
      if (a.state2Out)
        a.state2Out[i] = a.state2[i];
      if (a.copyOut)
        storeWeightCopy(a, i, p);
    }
    return;
  }
  kernels::OptimizerScalars<float> s = kernels::optimizerScalarsFrom(a.kind, a.scalars, a.decay);
  for (int64_t i = gridStart(); i < a.n; i += gridStride()) {
    float p = a.param[i], s1 = a.state1 ? a.state1[i] : 0.0f, s2 = a.state2 ? a.state2[i] : 0.0f;
    kernels::optimizerStepElement(a.kind, s, a.grad[i], p, s1, s2);
    a.paramOut[i] = p;
    if (a.state1Out)
      a.state1Out[i] = s1;
    if (a.state2Out)
      a.state2Out[i] = s2;
    if (a.copyOut)
      storeWeightCopy(a, i, p);
  }
}

/// MultiTensor*Step: block b walks chunks b, b + gridDim.x, ...; thread t
/// takes elements t, t + blockDim.x, ... of the chunk (coalesced) through
/// multiTensorStepElement, the body above in OptimizerPlan.h's form.
__global__ void multiTensorStepKernel(const UnscaleChunk *chunks, int32_t numChunks,
                                      int32_t firstGroup,
                                      const __grid_constant__ LaunchPointers table,
                                      MultiTensorStepArgs a) {
  const bool skip = a.skip && (a.skipIsBool ? *static_cast<const bool *>(a.skip)
                                            : *static_cast<const float *>(a.skip) != 0.0f);
  kernels::OptimizerScalars<float> s;
  if (!skip)
    s = kernels::optimizerScalarsFrom(a.kind, a.scalars, a.decay);
  for (int32_t c = int32_t(blockIdx.x); c < numChunks; c += int32_t(gridDim.x)) {
    const UnscaleChunk ch = chunks[c];
    void *const *slots = chunkPointers(table, ch, firstGroup, kStepSlots);
    for (int64_t i = ch.begin + int64_t(threadIdx.x); i < ch.begin + ch.length;
         i += int64_t(blockDim.x))
      multiTensorStepElement(a.kind, s, skip, slots, i);
  }
}

} // namespace

cudaError_t launchMultiTensorStep(const UnscaleChunk *chunks,
                                  const std::vector<LaunchSlice> &slices,
                                  const std::vector<void *> &table,
                                  const MultiTensorStepArgs &args, unsigned blocks,
                                  unsigned threads, cudaStream_t stream) {
  return queueSlices(multiTensorStepKernel, chunks, slices, table, kStepSlots, blocks, threads,
                     stream, args);
}

cudaError_t launchOptimizerStep(const OptimizerStepArgs &args, const LaunchGeometry &g,
                                cudaStream_t stream) {
  return queue(optimizerStepKernel, g, stream, args);
}

} // namespace cuda
} // namespace mpc
