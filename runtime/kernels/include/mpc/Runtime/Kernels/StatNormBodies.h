//===- StatNormBodies.h - Instance, group and Lp normalization ---*- C++ -*-===//
//
// The element formulas of InstanceNormalization, GroupNormalization and
// LpNormalization, once for the CPU (runtime/cpu/NormKernels.cpp) and the
// CUDA launchers (runtime/cuda/StatNormKernels.cu). Their statistics are
// summed in double whatever the storage type (a run can hold millions of
// elements); how the sums are accumulated is each backend's own (the CPU in
// order, CUDA in a fixed block tree), what is done with them is here.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_STATNORMBODIES_H
#define MPC_RUNTIME_KERNELS_STATNORMBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"

#include <stdint.h>

namespace mpc {
namespace kernels {

/// 1 / sqrt(variance + epsilon) of a run from its summed squared
/// deviations.
MPC_HD inline double runInvStdDev(double squares, int64_t len, double epsilon) {
  return 1.0 / math::sqrt(squares / double(len) + epsilon);
}

/// The channel of element i of run r: InstanceNormalization and
/// GroupNormalization before opset 21 take run r's parameters (r % channels);
/// GroupNormalization-21 the element's channel (chanLen elements each).
MPC_HD inline int64_t runChannel(int64_t r, int64_t i, int64_t len, int64_t chanLen,
                                 int64_t channels, bool perRunParams) {
  return perRunParams ? r % channels : (r * len + i) / chanLen % channels;
}

/// One normalized element: (x - mean) * inv * scale + bias.
MPC_HD inline double runNormValue(double x, double mean, double inv, double scale, double bias) {
  return (x - mean) * inv * scale + bias;
}

/// The term of LpNormalization's norm: |v| for p = 1, v^2 for p = 2.
MPC_HD inline double lpNormTerm(double v, int64_t p) { return p == 1 ? math::abs(v) : v * v; }

/// The norm from the summed terms.
MPC_HD inline double lpNormFinish(double sum, int64_t p) {
  return p == 2 ? math::sqrt(sum) : sum;
}

/// One element of LpNormalization: v / norm, 0 for a zero norm.
MPC_HD inline double lpNormValue(double v, double norm) { return norm == 0 ? 0.0 : v / norm; }

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_STATNORMBODIES_H
