//===- RnnPlan.h - LSTM, GRU and RNN as cuBLASLt calls and steps -*- C++ -*-===//
//
// The host-side half of the CUDA backend's recurrent family (RnnOps.cpp), as
// pure functions of the node's sizes: the matrix products (planned with
// GemmPlan.h) and the fp32 workspace every launch lays out. No CUDA header,
// so CI (no GPU) tests each decision (tests/cuda_host/RnnPlanTest.cpp).
//
// A launch runs, for a node of G gate blocks and D directions:
//   1. X [seq*batch, input] . W^T, W as [D*G*H, input]: every step's input
//      projection of every direction, one GEMM (X's and W's type in, fp32 out)
//      into `projection` [seq*batch rows, D*G*H].
//   2. per step: H . R^T over the D directions (a strided batch of D
//      GEMMs, fp32, R widened to fp32 once per launch) into `recurrent`
//      [D, batch, G*H]; then a gate kernel per element.
//   GRU without linear_before_reset splits the step: a first gate kernel
//   writes z and r . H (`update`, `resetState`), the `reset` GEMM
//   (r . H) . R_h^T writes `resetRecurrent` [D, batch, H], and a second gate
//   kernel finishes the candidate and the state.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_RNNPLAN_H
#define MPC_RUNTIME_CUDA_RNNPLAN_H

#include "mpc/Runtime/Cuda/GemmPlan.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"

#include <cstddef>

namespace mpc {
namespace cuda {

/// Byte offsets into the op's workspace (each 256-byte aligned; 0 size
/// entries take no room) and the total, fp32 throughout.
struct RecurrentWorkspace {
  size_t projection = 0;     ///< [seq*batch, D*G*H]
  size_t wideR = 0;          ///< R as fp32 [D, G*H, H] (16-bit R only)
  size_t hidden = 0;         ///< the running state H [D, batch, H]
  size_t cell = 0;           ///< LSTM's running cell state [D, batch, H]
  size_t recurrent = 0;      ///< H . R^T [D, batch, G*H]
  size_t update = 0;         ///< GRU split step: z [D, batch, H]
  size_t resetState = 0;     ///< GRU split step: r . H [D, batch, H]
  size_t resetRecurrent = 0; ///< GRU split step: (r . H) . R_h^T [D, batch, H]
  size_t gemm = 0;           ///< cuBLASLt's scratch (the largest algorithm's)
  size_t total = 0;
};

/// What a node needs beyond its sizes.
struct RecurrentOptions {
  bool lstm = false;     ///< a cell state
  bool gruSplit = false; ///< GRU with linear_before_reset = 0
  bool widenR = false;   ///< R is 16-bit
  size_t gemmBytes = 0;  ///< cuBLASLt scratch
};

RecurrentWorkspace recurrentWorkspace(const kernels::RecurrentSizes &s, const RecurrentOptions &o);

/// The node's matrix products. `input` reads X and W in their storage type
/// (`elementBytes`); `recurrent` and `reset` are fp32.
struct RecurrentGemms {
  MatmulPlan input;     ///< [seq*batch, input] . [D*G*H, input]^T
  MatmulPlan recurrent; ///< [D, batch, H] . [D, G*H, H]^T
  /// GRU split step: [D, batch, H] . R_h^T, R_h the rows [2H, 3H) of each
  /// direction's R (batch stride 3*H*H); empty otherwise.
  MatmulPlan reset;
};

/// Plans the products; fails (naming the sizes) where cuBLASLt cannot take
/// them. With layout 1 the projection's rows are X's (batch-major) rows:
/// recurrentInputRow says which row holds (t, b).
llvm::Expected<RecurrentGemms> planRecurrentGemms(const kernels::RecurrentSizes &s, bool gruSplit,
                                                  unsigned elementBytes);

/// Moves the matrices of one user operand of a planned product (userA:
/// the user's A, else B) that are `matrix` elements apart to `stride`
/// elements apart (a slice of a larger buffer), in the batch strides and the
/// per-call offsets alike.
void restride(LtGemm &g, bool userA, int64_t matrix, int64_t stride);

//===----------------------------------------------------------------------===//
// LSTMGrad: the forward recomputed, then backward through time
//===----------------------------------------------------------------------===//
//
// Per launch (S = seq*batch rows of X, D directions, 4 gate blocks of H):
//   widen X, W, R to fp32 (16-bit only); the projection X W^T (as the
//   forward); per step s: `recurrent` = H_s R^T, with H_s the states of
//   step s in `hiddens` [D, seq+1, batch, H], and a forward kernel keeping
//   the activated gates, cell and hidden states of every step and the state
//   each time index started from (`previous` [D, S, H], by time).
//   Backwards per step s: a gate-gradient kernel (lstmCellGrad) writes the
//   pre-activation gradients twice, by step (`stepGrads` [D, batch, 4H], for
//   the next product) and by time (`gateGrads` [D, S, 4H]); `backState` =
//   stepGrads R carries dH to step s - 1.
//   Then dX = sum_d gateGrads_d W_d (one product per direction, the second
//   accumulating), dW = gateGrads^T X, dR = gateGrads^T previous, dB the
//   column sums of gateGrads (a kernel, rows in order).

struct LstmGradWorkspace {
  size_t wideX = 0, wideW = 0, wideR = 0; ///< 16-bit operands only
  size_t projection = 0;                  ///< [S, D*4H]
  size_t gates = 0;                       ///< activated gates [D, seq, batch, 4H]
  size_t cells = 0;                       ///< cell states [D, seq+1, batch, H] (step 0: initial_c)
  size_t hiddens = 0;            ///< hidden states [D, seq+1, batch, H] (step 0: initial_h)
  size_t recurrent = 0;          ///< [D, batch, 4H]
  size_t previous = 0;           ///< [D, S, H]: the state time t started from
  size_t gateGrads = 0;          ///< [D, S, 4H], zero where a sequence has ended
  size_t stepGrads = 0;          ///< [D, batch, 4H]
  size_t backState = 0;          ///< dH into the previous step [D, batch, H]
  size_t backCell = 0;           ///< dC into the previous step [D, batch, H]
  size_t dX = 0, dW = 0, dR = 0; ///< fp32 results before the cast
  size_t gemm = 0;
  size_t total = 0;
};
LstmGradWorkspace lstmGradWorkspace(const kernels::RecurrentSizes &s, bool widen, size_t gemmBytes);

struct LstmGradGemms {
  MatmulPlan input;     ///< [S, input] . [D*4H, input]^T
  MatmulPlan recurrent; ///< H_s [D, batch, H] (stride (seq+1)*batch*H) . R^T
  MatmulPlan backState; ///< [D, batch, 4H] . [D, 4H, H]
  MatmulPlan dX;        ///< one direction: [S, 4H] . [4H, input]
  MatmulPlan dW;        ///< [D, S, 4H]^T . [S, input]
  MatmulPlan dR;        ///< [D, S, 4H]^T . [D, S, H]
};
llvm::Expected<LstmGradGemms> planLstmGradGemms(const kernels::RecurrentSizes &s);

//===----------------------------------------------------------------------===//
// GRUGrad: the forward recomputed, then backward through time
//===----------------------------------------------------------------------===//
//
// As LSTMGrad (layout 0, S = seq*batch rows, 3 gate blocks z, r, h of H):
//   widen X, W, R to fp32 (16-bit only); the projection X W^T; per step s:
//   `recurrent` = H_s R^T and a forward kernel keeping the activated gates
//   (z, r, h~) by step, the state each time index started from (`previous`
//   [D, S, H], by time) and H_{s+1}. With linear_before_reset the kernel
//   also keeps q = H R_h^T + Rb_h (`linear`, by step); without it the step
//   splits: a first kernel writes z, r and r . H (`resetStep`, and by time
//   `resetPrevious`), the `reset` product (r . H) R_h^T, then a second
//   kernel the candidate and H_{s+1}.
//   Backwards per step s: a kernel takes dH (dY_h at a sequence's last step,
//   else `backState`, plus dY) through the blend (gruBlendGrad), writes dH z
//   into `backState` and the pre-activation gradients by step (`stepGrads`
//   [D, batch, 3H]) and by time: `gateGrads` (dz, dr, da: the input side,
//   for dX, dW and Wb) and `recGrads` (dz, dr and dq = da r with
//   linear_before_reset, else da: the recurrent side, for dR and Rb).
//   Without linear_before_reset the reset gate needs d(r . H) = da R_h first:
//   the `backReset` product of `candStep` (da by step) into `resetGrad`, then
//   a second kernel (gruResetGrad) adds d(r . H) r to `backState` and zeroes
//   the h block of `stepGrads`. Then `backState` += stepGrads R (beta 1).
//   After the last step `backState` is dinitial_h; dX = sum_d gateGrads_d
//   W_d, dW = gateGrads^T X, dR = recGrads^T previous (without
//   linear_before_reset its h rows are then replaced by candGrads^T
//   resetPrevious, `dRh`), dB the column sums of gateGrads (Wb) and
//   recGrads (Rb).

struct GruGradWorkspace {
  size_t wideX = 0, wideW = 0, wideR = 0; ///< 16-bit operands only
  size_t projection = 0;                  ///< [S, D*3H]
  size_t gates = 0;                       ///< activated z, r, h~ [D, seq, batch, 3H]
  size_t linear = 0;                      ///< linear_before_reset: q [D, seq, batch, H]
  size_t hiddens = 0;            ///< hidden states [D, seq+1, batch, H] (step 0: initial_h)
  size_t recurrent = 0;          ///< [D, batch, 3H]
  size_t resetStep = 0;          ///< no linear_before_reset: r . H of the step [D, batch, H]
  size_t resetRecurrent = 0;     ///< no linear_before_reset: (r . H) R_h^T [D, batch, H]
  size_t previous = 0;           ///< [D, S, H]: the state time t started from
  size_t resetPrevious = 0;      ///< no linear_before_reset: r . H by time [D, S, H]
  size_t gateGrads = 0;          ///< [D, S, 3H], zero where a sequence has ended
  size_t recGrads = 0;           ///< [D, S, 3H], likewise
  size_t candGrads = 0;          ///< no linear_before_reset: da by time [D, S, H]
  size_t stepGrads = 0;          ///< [D, batch, 3H]
  size_t candStep = 0;           ///< no linear_before_reset: da of the step [D, batch, H]
  size_t resetGrad = 0;          ///< no linear_before_reset: da R_h [D, batch, H]
  size_t backState = 0;          ///< dH into the previous step [D, batch, H]
  size_t dX = 0, dW = 0, dR = 0; ///< fp32 results before the cast
  size_t dRh = 0;                ///< no linear_before_reset: the h rows of dR [D, H, H]
  size_t gemm = 0;
  size_t total = 0;
};
GruGradWorkspace gruGradWorkspace(const kernels::RecurrentSizes &s, bool linearBeforeReset,
                                  bool widen, size_t gemmBytes);

struct GruGradGemms {
  MatmulPlan input;     ///< [S, input] . [D*3H, input]^T
  MatmulPlan recurrent; ///< H_s [D, batch, H] (stride (seq+1)*batch*H) . R^T
  MatmulPlan backState; ///< [D, batch, 3H] . [D, 3H, H]
  MatmulPlan dX;        ///< one direction: [S, 3H] . [3H, input]
  MatmulPlan dW;        ///< [D, S, 3H]^T . [S, input]
  MatmulPlan dR;        ///< [D, S, 3H]^T . [D, S, H]
  // Without linear_before_reset only (empty otherwise); R_h is the rows
  // [2H, 3H) of each direction's R (the launch passes R + 2*H*H, batch
  // stride 3*H*H).
  MatmulPlan reset;     ///< [D, batch, H] . R_h^T
  MatmulPlan backReset; ///< [D, batch, H] . R_h
  MatmulPlan dRh;       ///< [D, S, H]^T . [D, S, H]
};
llvm::Expected<GruGradGemms> planGruGradGemms(const kernels::RecurrentSizes &s,
                                              bool linearBeforeReset);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_RNNPLAN_H
