//===- OptimizerKernels.cu - The fused optimizer steps ----------------------===//
//
// SGDStep, MomentumStep and AdamStep over f32: one grid-stride kernel that
// reads the scalars and the skip flag on the device and calls the CPU
// loop's body (OptimizerBodies.h). A skipped step copies param and states.
// This file is compiled with -fmad=false (CMakeLists.txt): nvcc would
// otherwise contract m*b1 + g*(1-b1) into one fused multiply-add and the
// device would round differently from the CPU (and from the primitive
// graph of separate Mul and Add kernels). Division and sqrt are nvcc's
// IEEE-rounded defaults (-prec-div, -prec-sqrt).
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "OptimizerLaunch.h"

namespace mpc {
namespace cuda {
namespace {

__global__ void optimizerStepKernel(OptimizerStepArgs a) {
  bool skip = a.skip && (a.skipIsBool ? *static_cast<const bool *>(a.skip)
                                      : *static_cast<const float *>(a.skip) != 0.0f);
  if (skip) {
    for (int64_t i = gridStart(); i < a.n; i += gridStride()) {
      a.paramOut[i] = a.param[i];
      if (a.state1Out)
        a.state1Out[i] = a.state1[i];
      if (a.state2Out)
        a.state2Out[i] = a.state2[i];
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
  }
}

} // namespace

cudaError_t launchOptimizerStep(const OptimizerStepArgs &args, const LaunchGeometry &g,
                                cudaStream_t stream) {
  return queue(optimizerStepKernel, g, stream, args);
}

} // namespace cuda
} // namespace mpc
