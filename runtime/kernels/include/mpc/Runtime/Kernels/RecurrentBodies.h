//===- RecurrentBodies.h - Per-element math of LSTM, GRU and RNN -*- C++ -*-===//
//
// The cell math of the recurrent ops and of their gradients, once for the
// CPU loops (runtime/cpu: LstmKernel.cpp, RnnKernels.cpp, TrainingOps.cpp)
// and the CUDA launchers (runtime/cuda: RnnKernels.cu). A is the compute
// type: float for f32/f16/bf16 storage, double for f64. The matrix
// products that feed these bodies (X W^T, H R^T) are each backend's own:
// the CPU runs its gemm, CUDA cuBLASLt; what is done with their results,
// element by element, is written here.
//
// Two families of transcendental functions are used on purpose, as the CPU
// kernels always did: the forward ops take the element-wise functors'
// sigmoid and tanh (kernels::Sigmoid, kernels::Tanh: polynomials on the
// host), the gradient ops recompute the forward with the C library's exp
// and tanh (libmExp, libmTanh). On a device both are the CUDA math
// library's functions.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_KERNELS_RECURRENTBODIES_H
#define MPC_RUNTIME_KERNELS_RECURRENTBODIES_H

#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

#include <cstdint>
#include <math.h>

namespace mpc {
namespace kernels {

/// A GRU/RNN activation function (ONNX's names, in this order).
enum class RecurrentActKind : uint8_t {
  Sigmoid,
  Tanh,
  Relu,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

/// An activation and its alpha/beta (those it does not take are unused).
struct RecurrentActivation {
  RecurrentActKind kind = RecurrentActKind::Tanh;
  float alpha = 0, beta = 0;
};

/// The C library's exp and tanh (on the device, CUDA's).
MPC_HD inline float libmExp(float x) { return ::expf(x); }
MPC_HD inline double libmExp(double x) { return ::exp(x); }
MPC_HD inline float libmTanh(float x) { return ::tanhf(x); }
MPC_HD inline double libmTanh(double x) { return ::tanh(x); }

/// x limited to [-clip, clip] (clip > 0), as std::max(-clip, std::min(clip,
/// x)): a NaN becomes clip.
template <typename A> MPC_HD inline A recurrentClip(A clip, A x) {
  A m = x < clip ? x : clip;
  return -clip < m ? m : -clip;
}

/// The activation `a` of x.
template <typename A> MPC_HD inline A recurrentActivate(const RecurrentActivation &a, A x) {
  A alpha = A(a.alpha), beta = A(a.beta);
  switch (a.kind) {
  case RecurrentActKind::Sigmoid:
    return Sigmoid()(x);
  case RecurrentActKind::Tanh:
    return Tanh()(x);
  case RecurrentActKind::Relu:
    return x < A(0) ? A(0) : x;
  case RecurrentActKind::Affine:
    return alpha * x + beta;
  case RecurrentActKind::LeakyRelu:
    return x < A(0) ? alpha * x : x;
  case RecurrentActKind::ThresholdedRelu:
    return x > alpha ? x : A(0);
  case RecurrentActKind::ScaledTanh:
    return alpha * libmTanh(beta * x);
  case RecurrentActKind::HardSigmoid: {
    A v = alpha * x + beta;
    A m = v < A(1) ? v : A(1);
    return A(0) < m ? m : A(0);
  }
  case RecurrentActKind::Elu:
    return x >= A(0) ? x : alpha * math::expm1(x);
  case RecurrentActKind::Softsign:
    return x / (A(1) + math::abs(x));
  case RecurrentActKind::Softplus:
    return x > A(0) ? x + math::log1p(libmExp(-x)) : math::log1p(libmExp(x));
  }
  return x;
}

/// A GRU/RNN gate: x clipped when clip > 0, then activated.
template <typename A> MPC_HD inline A recurrentGate(const RecurrentActivation &a, A clip, A x) {
  return recurrentActivate(a, clip > A(0) ? recurrentClip(clip, x) : x);
}

//===----------------------------------------------------------------------===//
// Forward cells
//===----------------------------------------------------------------------===//

/// One LSTM element: the pre-activations gi, go, gf, gc (input, output,
/// forget, cell; X W^T + H R^T + Wb + Rb summed) and, with `peep`, the
/// peepholes pi, po, pf. Updates the cell state c and returns the new h:
///   i = sigmoid(gi + pi c), f = sigmoid(gf + pf c), g = tanh(gc),
///   c = f c + i g, o = sigmoid(go + po c), h = o tanh(c).
template <typename A>
MPC_HD inline A lstmCell(A gi, A go, A gf, A gc, bool peep, A pi, A po, A pf, A &c) {
  if (peep) {
    gi += pi * c;
    gf += pf * c;
  }
  gi = Sigmoid()(gi);
  gf = Sigmoid()(gf);
  gc = Tanh()(gc);
  c = gf * c + gi * gc;
  if (peep)
    go += po * c;
  go = Sigmoid()(go);
  return go * Tanh()(c);
}

/// A GRU update or reset gate's pre-activation: the input part (X W^T + Wb)
/// plus the recurrent part (H R^T) and its bias (0 when absent).
template <typename A> MPC_HD inline A gruGatePre(A gx, A hr, A rb) { return gx + (hr + rb); }

/// The GRU candidate's pre-activation with linear_before_reset: the input
/// part plus r . (H R_h^T + Rb_h).
template <typename A> MPC_HD inline A gruCandidatePreLbr(A gx, A r, A hr, A rb) {
  return gx + r * (hr + rb);
}

/// The new GRU state: (1 - z) h~ + z h.
template <typename A> MPC_HD inline A gruBlend(A z, A candidate, A h) {
  return (A(1) - z) * candidate + z * h;
}

//===----------------------------------------------------------------------===//
// Gradients (the forward recomputed with libmExp/libmTanh)
//===----------------------------------------------------------------------===//

/// 1 / (1 + e^-v), as the gradient kernels recompute the forward.
template <typename A> MPC_HD inline A gradSigmoid(A v) { return A(1) / (A(1) + libmExp(-v)); }

/// The LSTM state update of the recomputed forward: c from the activated
/// gates and the previous c; returns h.
template <typename A> MPC_HD inline A lstmGradState(A gi, A go, A gf, A gc, A cp, A &c) {
  c = gf * cp + gi * gc;
  return go * libmTanh(c);
}

/// One LSTM element backwards: the activated gates, the new and previous
/// cell states, dh (into h) and dc (into c). Writes the gradients of the
/// four pre-activations to dg[0], dg[s], dg[2s], dg[3s] (i, o, f, g) and
/// returns dc into the previous cell state.
template <typename A>
MPC_HD inline A lstmCellGrad(A gi, A go, A gf, A gc, A c, A cp, A dh, A dc, A *dg, int64_t s) {
  A tc = libmTanh(c);
  A dcj = dc + dh * go * (A(1) - tc * tc);
  dg[0] = dcj * gc * gi * (A(1) - gi);
  dg[s] = dh * tc * go * (A(1) - go);
  dg[2 * s] = dcj * cp * gf * (A(1) - gf);
  dg[3 * s] = dcj * gi * (A(1) - gc * gc);
  return dcj * gf;
}

/// The gradients of H = (1 - z) h~ + z H_prev from dh: dz and da (into the
/// pre-activations of z and h~, both activated by sigmoid and tanh); returns
/// dh's share into H_prev.
template <typename A> MPC_HD inline A gruBlendGrad(A z, A candidate, A hp, A dh, A &dz, A &da) {
  dz = dh * (hp - candidate) * z * (A(1) - z);
  da = dh * (A(1) - z) * (A(1) - candidate * candidate);
  return dh * z;
}

/// With linear_before_reset, the gradient into q = H R_h^T + Rb_h from da
/// (the candidate's pre-activation gradient) and the reset gate r.
template <typename A> MPC_HD inline A gruCandidateGradLbr(A da, A r) { return da * r; }

/// The reset gate's pre-activation gradient: with linear_before_reset, from
/// da and q = H R_h^T + Rb_h; otherwise from drh, the gradient into r . H.
template <typename A> MPC_HD inline A gruResetGradLbr(A da, A q, A r) {
  return da * q * r * (A(1) - r);
}
template <typename A> MPC_HD inline A gruResetGrad(A drh, A hp, A r) {
  return drh * hp * r * (A(1) - r);
}

//===----------------------------------------------------------------------===//
// Layout: where a (time, direction, batch) entry lives
//===----------------------------------------------------------------------===//

/// The sizes of one recurrent node. layout 0 (batchMajor false): X [seq,
/// batch, input], Y [seq, dirs, batch, hidden], states [dirs, batch,
/// hidden]; layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden],
/// states [batch, dirs, hidden].
struct RecurrentSizes {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int64_t gates = 1; ///< gate blocks: LSTM 4, GRU 3, RNN 1
  bool batchMajor = false;
};

/// The row of X (and of the input projection X W^T) holding (t, b).
MPC_HD inline int64_t recurrentInputRow(const RecurrentSizes &s, int64_t t, int64_t b) {
  return s.batchMajor ? b * s.seq + t : t * s.batch + b;
}
/// The element offset of Y[t, d, b, 0] (or its layout-1 place).
MPC_HD inline int64_t recurrentOutputOffset(const RecurrentSizes &s, int64_t t, int64_t d,
                                            int64_t b) {
  return (s.batchMajor ? (b * s.seq + t) * s.dirs + d : (t * s.dirs + d) * s.batch + b) * s.hidden;
}
/// The element offset of state[d, b, 0] (initial_h, initial_c, Y_h, Y_c).
MPC_HD inline int64_t recurrentStateOffset(const RecurrentSizes &s, int64_t d, int64_t b) {
  return (s.batchMajor ? b * s.dirs + d : d * s.batch + b) * s.hidden;
}
/// The time index step `step` of direction d processes in a sequence of
/// `len` steps: direction 1 and a reverse node run from len - 1 down.
MPC_HD inline int64_t recurrentTimeAt(bool backward, int64_t len, int64_t step) {
  return backward ? len - 1 - step : step;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_KERNELS_RECURRENTBODIES_H
