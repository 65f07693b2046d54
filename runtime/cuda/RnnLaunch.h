//===- RnnLaunch.h - Host entry points of the recurrent launchers -*- C++ -*-===//
//
// What RnnOps.cpp (the C++ compiler) calls in RnnKernels.cu (nvcc): the
// per-step gate kernels of LSTM, GRU and RNN over the cell bodies of
// runtime/kernels/.../RecurrentBodies.h (the CPU kernels call the same), the
// state initialization and the final-state copy. One thread per (direction,
// batch entry, hidden unit); the matrix products between them are
// cuBLASLt's (RnnOps.cpp, RnnPlan.h).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_RNNLAUNCH_H
#define MPC_RUNTIME_CUDA_RNNLAUNCH_H

#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"
#include <cstdint>
#include <cuda_runtime_api.h>

namespace mpc {
namespace cuda {

/// Which gate kernel a step runs.
enum class RecurrentCell : int32_t {
  Lstm,      ///< lstmCell over the four blocks
  Gru,       ///< linear_before_reset = 1: one kernel per step
  GruGates,  ///< linear_before_reset = 0, first half: z and r . H
  GruFinish, ///< linear_before_reset = 0, second half: the candidate, H
  Rnn,
};

/// One node's buffers and constants, passed by value to every kernel.
struct RecurrentArgs {
  kernels::RecurrentSizes s;
  int32_t type = 0;     ///< ONNX type of X, W, R, B, P, the states and Y
  int32_t lensType = 0; ///< 0 (no sequence_lens), or ONNX int32 / int64
  const void *lens = nullptr;
  const void *bias = nullptr; ///< B [D, 2*G*H], or null
  const void *peep = nullptr; ///< LSTM's P [D, 3*H], or null
  const float *projection = nullptr;
  const float *recurrent = nullptr;
  float *hidden = nullptr, *cell = nullptr;
  float *update = nullptr, *resetState = nullptr;
  const float *resetRecurrent = nullptr;
  void *y = nullptr;                    ///< Y, or null
  kernels::RecurrentActivation acts[4]; ///< GRU: f, g per direction; RNN: f
  float clip = 0;                       ///< > 0: clip pre-activations
  bool reverse = false;
  int64_t step = 0;
};

/// The gate kernel of `step` (a.step).
cudaError_t launchRecurrentStep(RecurrentCell cell, const RecurrentArgs &a, const LaunchGeometry &g,
                                cudaStream_t stream);
/// The running state from initial_h / initial_c (null: zero).
cudaError_t launchRecurrentInit(const RecurrentArgs &a, const void *h0, const void *c0,
                                const LaunchGeometry &g, cudaStream_t stream);
/// Y_h / Y_c (null: not wanted) from the running state.
cudaError_t launchRecurrentFinal(const RecurrentArgs &a, void *yh, void *yc,
                                 const LaunchGeometry &g, cudaStream_t stream);

/// LSTMGrad's buffers (RnnPlan.h, LstmGradWorkspace: what each holds).
struct LstmGradArgs {
  kernels::RecurrentSizes s;
  int32_t type = 0, lensType = 0;
  const void *lens = nullptr, *bias = nullptr;
  const void *dY = nullptr, *dYh = nullptr, *dYc = nullptr; ///< null: zero
  const void *h0 = nullptr, *c0 = nullptr;                  ///< null: zero
  const float *projection = nullptr, *recurrent = nullptr;
  float *gates = nullptr, *cells = nullptr, *hiddens = nullptr, *previous = nullptr;
  float *gateGrads = nullptr, *stepGrads = nullptr, *backState = nullptr, *backCell = nullptr;
  bool reverse = false;
  int64_t step = 0;
};

/// Step 0 of `hiddens` and `cells` from initial_h/initial_c, and the cell
/// gradient flowing in (dY_c).
cudaError_t launchLstmGradInit(const LstmGradArgs &a, const LaunchGeometry &g, cudaStream_t stream);
/// The recomputed forward of step a.step (gradSigmoid, libmTanh,
/// lstmGradState): gates, states and `previous`; an ended sequence carries
/// its states on.
cudaError_t launchLstmGradForward(const LstmGradArgs &a, const LaunchGeometry &g,
                                  cudaStream_t stream);
/// The gate gradients of step a.step (lstmCellGrad) into `stepGrads` and
/// `gateGrads`, and the cell gradient into the previous step.
cudaError_t launchLstmGradBackward(const LstmGradArgs &a, const LaunchGeometry &g,
                                   cudaStream_t stream);
/// dB [D, 8H] of type a.type: each column of `gateGrads` summed over its
/// rows in order, written to both halves (Wb and Rb). One thread per column.
cudaError_t launchLstmGradBias(const LstmGradArgs &a, void *dB, const LaunchGeometry &g,
                               cudaStream_t stream);

/// GRUGrad's buffers (RnnPlan.h, GruGradWorkspace: what each holds).
struct GruGradArgs {
  kernels::RecurrentSizes s;
  int32_t type = 0, lensType = 0;
  const void *lens = nullptr, *bias = nullptr;
  const void *dY = nullptr, *dYh = nullptr, *h0 = nullptr; ///< null: zero
  const float *projection = nullptr, *recurrent = nullptr, *resetRecurrent = nullptr;
  const float *resetGrad = nullptr;
  float *gates = nullptr, *linear = nullptr, *hiddens = nullptr, *previous = nullptr;
  float *resetStep = nullptr, *resetPrevious = nullptr;
  float *gateGrads = nullptr, *recGrads = nullptr, *candGrads = nullptr;
  float *stepGrads = nullptr, *candStep = nullptr, *backState = nullptr;
  bool linearBeforeReset = false;
  bool reverse = false;
  int64_t step = 0;
};

/// Which half of a GRUGrad step a kernel runs: with linear_before_reset one
/// kernel each way (Whole); without, the forward splits around the reset
/// product (Gates, then Finish) and the backward around the backReset
/// product (Whole, then Finish).
enum class GruGradPhase : int32_t { Whole, Gates, Finish };

/// Step 0 of `hiddens` from initial_h.
cudaError_t launchGruGradInit(const GruGradArgs &a, const LaunchGeometry &g, cudaStream_t stream);
/// The recomputed forward of step a.step (gradSigmoid, libmTanh, gruBlend):
/// gates, `linear` or `resetStep`, `previous` and the next state; an ended
/// sequence carries its state on.
cudaError_t launchGruGradForward(GruGradPhase phase, const GruGradArgs &a, const LaunchGeometry &g,
                                 cudaStream_t stream);
/// The gate gradients of step a.step (gruBlendGrad, gruCandidateGradLbr,
/// gruResetGradLbr; Finish: gruResetGrad) into `stepGrads`, `gateGrads`,
/// `recGrads` (and `candStep`, `candGrads`), and dH's direct share into the
/// previous step (`backState`).
cudaError_t launchGruGradBackward(GruGradPhase phase, const GruGradArgs &a, const LaunchGeometry &g,
                                  cudaStream_t stream);
/// dB [D, 6H] of type a.type: Wb the column sums of `gateGrads`, Rb those of
/// `recGrads`, rows in order. One thread per column of 3H.
cudaError_t launchGruGradBias(const GruGradArgs &a, void *dB, const LaunchGeometry &g,
                              cudaStream_t stream);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_RNNLAUNCH_H
