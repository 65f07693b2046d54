//===- RnnKernels.cu - The gate kernels of LSTM, GRU and RNN ----------------===//
//
// One thread per (direction, batch entry, hidden unit) and step, calling the
// cell bodies of RecurrentBodies.h in fp32 (the CPU kernels call the same
// ones), reading the step's input projection and H R^T from the workspace
// (RnnPlan.h) and writing the running state and Y. Entries whose sequence
// has ended (sequence_lens) keep their state and write nothing.
//
//===----------------------------------------------------------------------===//
#include "GridStride.cuh"
#include "RnnLaunch.h"

namespace mpc {
namespace cuda {
namespace {

namespace k = kernels;

/// Where thread i works: its direction, batch entry, unit, the time index
/// of this step and whether its sequence is still running.
struct Place {
  int64_t d, b, j, t, len;
  bool live;
};

template <typename Args> __device__ inline Place placeOf(const Args &a, int64_t i) {
  const k::RecurrentSizes &s = a.s;
  Place p;
  p.j = i % s.hidden;
  p.b = (i / s.hidden) % s.batch;
  p.d = i / (s.hidden * s.batch);
  p.len = s.seq;
  if (a.lensType == kOnnxI32)
    p.len = static_cast<const int32_t *>(a.lens)[p.b];
  else if (a.lensType == kOnnxI64)
    p.len = static_cast<const int64_t *>(a.lens)[p.b];
  p.live = a.step < p.len;
  p.t = k::recurrentTimeAt(a.reverse || p.d == 1, p.len, a.step);
  return p;
}

/// Element i of an optional operand of type T (0 when absent).
template <typename T> __device__ inline float valueAt(const void *p, int64_t i) {
  return p ? float(k::load(static_cast<const T *>(p)[i])) : 0.0f;
}

template <typename T>
__global__ void recurrentStepKernel(RecurrentCell cell, RecurrentArgs a, int64_t n) {
  const k::RecurrentSizes &s = a.s;
  const int64_t hid = s.hidden, gh = s.gates * hid;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    if (!p.live)
      continue;
    const float *proj = a.projection + k::recurrentInputRow(s, p.t, p.b) * s.dirs * gh + p.d * gh;
    const float *rec = a.recurrent + (p.d * s.batch + p.b) * gh;
    int64_t wb = p.d * 2 * gh, rb = wb + gh, j = p.j;
    float h;
    switch (cell) {
    case RecurrentCell::Lstm: {
      float g[4];
      for (int q = 0; q < 4; ++q) {
        int64_t c = q * hid + j;
        g[q] = (proj[c] + (valueAt<T>(a.bias, wb + c) + valueAt<T>(a.bias, rb + c))) + rec[c];
      }
      int64_t pp = p.d * 3 * hid + j;
      h = k::lstmCell(g[0], g[1], g[2], g[3], a.peep != nullptr, valueAt<T>(a.peep, pp),
                      valueAt<T>(a.peep, pp + hid), valueAt<T>(a.peep, pp + 2 * hid), a.cell[i]);
      break;
    }
    case RecurrentCell::Gru:
    case RecurrentCell::GruGates: {
      const k::RecurrentActivation &f = a.acts[p.d * 2], &g = a.acts[p.d * 2 + 1];
      float gate[2];
      for (int q = 0; q < 2; ++q) {
        int64_t c = q * hid + j;
        gate[q] = k::recurrentGate(f, a.clip,
                                   k::gruGatePre(proj[c] + valueAt<T>(a.bias, wb + c), rec[c],
                                                 valueAt<T>(a.bias, rb + c)));
      }
      if (cell == RecurrentCell::GruGates) {
        a.update[i] = gate[0];
        a.resetState[i] = gate[1] * a.hidden[i];
        continue;
      }
      int64_t c = 2 * hid + j;
      float cand =
          k::recurrentGate(g, a.clip,
                           k::gruCandidatePreLbr(proj[c] + valueAt<T>(a.bias, wb + c), gate[1],
                                                 rec[c], valueAt<T>(a.bias, rb + c)));
      h = k::gruBlend(gate[0], cand, a.hidden[i]);
      break;
    }
    case RecurrentCell::GruFinish: {
      int64_t c = 2 * hid + j;
      float pre = ((proj[c] + valueAt<T>(a.bias, wb + c)) + a.resetRecurrent[i]) +
                  valueAt<T>(a.bias, rb + c);
      h = k::gruBlend(a.update[i], k::recurrentGate(a.acts[p.d * 2 + 1], a.clip, pre), a.hidden[i]);
      break;
    }
    default: { // Rnn
      float pre = ((proj[j] + valueAt<T>(a.bias, wb + j)) + rec[j]) + valueAt<T>(a.bias, rb + j);
      h = k::recurrentGate(a.acts[p.d], a.clip, pre);
      break;
    }
    }
    a.hidden[i] = h;
    if (a.y)
      static_cast<T *>(a.y)[k::recurrentOutputOffset(s, p.t, p.d, p.b) + j] = k::store<T>(h);
  }
}

template <typename T>
__global__ void recurrentInitKernel(RecurrentArgs a, const T *h0, const T *c0, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    int64_t at = k::recurrentStateOffset(a.s, p.d, p.b) + p.j;
    a.hidden[i] = h0 ? float(k::load(h0[at])) : 0.0f;
    if (a.cell)
      a.cell[i] = c0 ? float(k::load(c0[at])) : 0.0f;
  }
}

template <typename T>
__global__ void recurrentFinalKernel(RecurrentArgs a, T *yh, T *yc, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    int64_t at = k::recurrentStateOffset(a.s, p.d, p.b) + p.j;
    if (yh)
      yh[at] = k::store<T>(a.hidden[i]);
    if (yc)
      yc[at] = k::store<T>(a.cell[i]);
  }
}

//===----------------------------------------------------------------------===//
// LSTMGrad
//===----------------------------------------------------------------------===//

/// [D, seq+1, batch, H] entry of step `step`.
__device__ inline int64_t stepState(const k::RecurrentSizes &s, const Place &p, int64_t step) {
  return ((p.d * (s.seq + 1) + step) * s.batch + p.b) * s.hidden + p.j;
}

template <typename T> __global__ void lstmGradInitKernel(LstmGradArgs a, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    int64_t at = k::recurrentStateOffset(a.s, p.d, p.b) + p.j, first = stepState(a.s, p, 0);
    a.hiddens[first] = valueAt<T>(a.h0, at);
    a.cells[first] = valueAt<T>(a.c0, at);
    a.backCell[i] = valueAt<T>(a.dYc, at);
  }
}

template <typename T> __global__ void lstmGradForwardKernel(LstmGradArgs a, int64_t n) {
  const k::RecurrentSizes &s = a.s;
  const int64_t hid = s.hidden, g4 = 4 * hid;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    int64_t from = stepState(s, p, a.step), to = stepState(s, p, a.step + 1);
    if (!p.live) {
      a.hiddens[to] = a.hiddens[from];
      a.cells[to] = a.cells[from];
      continue;
    }
    const float *proj = a.projection + k::recurrentInputRow(s, p.t, p.b) * s.dirs * g4 + p.d * g4;
    const float *rec = a.recurrent + (p.d * s.batch + p.b) * g4;
    float *gates = a.gates + ((p.d * s.seq + a.step) * s.batch + p.b) * g4;
    int64_t wb = p.d * 8 * hid;
    float g[4];
    for (int q = 0; q < 4; ++q) {
      int64_t c = q * hid + p.j;
      float pre =
          (proj[c] + (valueAt<T>(a.bias, wb + c) + valueAt<T>(a.bias, wb + g4 + c))) + rec[c];
      g[q] = q < 3 ? k::gradSigmoid(pre) : k::libmTanh(pre);
      gates[c] = g[q];
    }
    a.previous[(p.d * s.seq * s.batch + k::recurrentInputRow(s, p.t, p.b)) * hid + p.j] =
        a.hiddens[from];
    a.hiddens[to] = k::lstmGradState(g[0], g[1], g[2], g[3], a.cells[from], a.cells[to]);
  }
}

template <typename T> __global__ void lstmGradBackwardKernel(LstmGradArgs a, int64_t n) {
  const k::RecurrentSizes &s = a.s;
  const int64_t hid = s.hidden, g4 = 4 * hid;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    float *step = a.stepGrads + (p.d * s.batch + p.b) * g4 + p.j;
    if (!p.live) {
      for (int q = 0; q < 4; ++q)
        step[q * hid] = 0.0f;
      continue;
    }
    // The first step of this sequence (backwards) starts from dY_h; later
    // ones from the product of the step after it.
    int64_t state = k::recurrentStateOffset(s, p.d, p.b) + p.j;
    float dh = a.step == p.len - 1 ? valueAt<T>(a.dYh, state) : a.backState[i];
    dh += valueAt<T>(a.dY, k::recurrentOutputOffset(s, p.t, p.d, p.b) + p.j);
    const float *gates = a.gates + ((p.d * s.seq + a.step) * s.batch + p.b) * g4 + p.j;
    float dg[4];
    a.backCell[i] = k::lstmCellGrad(
        gates[0], gates[hid], gates[2 * hid], gates[3 * hid], a.cells[stepState(s, p, a.step + 1)],
        a.cells[stepState(s, p, a.step)], dh, a.backCell[i], dg, int64_t(1));
    float *byTime =
        a.gateGrads + (p.d * s.seq * s.batch + k::recurrentInputRow(s, p.t, p.b)) * g4 + p.j;
    for (int q = 0; q < 4; ++q) {
      step[q * hid] = dg[q];
      byTime[q * hid] = dg[q];
    }
  }
}

template <typename T> __global__ void lstmGradBiasKernel(LstmGradArgs a, T *dB, int64_t n) {
  const int64_t g4 = 4 * a.s.hidden, rows = a.s.seq * a.s.batch;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t d = i / g4, c = i % g4;
    const float *col = a.gateGrads + d * rows * g4 + c;
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      sum += col[r * g4];
    dB[d * 2 * g4 + c] = k::store<T>(sum);
    dB[d * 2 * g4 + g4 + c] = k::store<T>(sum);
  }
}

//===----------------------------------------------------------------------===//
// GRUGrad
//===----------------------------------------------------------------------===//

/// Row (time t, batch b) of direction d in a [D, S, width] by-time buffer.
__device__ inline int64_t byTime(const k::RecurrentSizes &s, const Place &p, int64_t width) {
  return (p.d * s.seq * s.batch + k::recurrentInputRow(s, p.t, p.b)) * width;
}

template <typename T> __global__ void gruGradInitKernel(GruGradArgs a, int64_t n) {
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    a.hiddens[stepState(a.s, p, 0)] =
        valueAt<T>(a.h0, k::recurrentStateOffset(a.s, p.d, p.b) + p.j);
  }
}

template <typename T>
__global__ void gruGradForwardKernel(GruGradPhase phase, GruGradArgs a, int64_t n) {
  const k::RecurrentSizes &s = a.s;
  const int64_t hid = s.hidden, g3 = 3 * hid;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    int64_t from = stepState(s, p, a.step), to = stepState(s, p, a.step + 1);
    if (!p.live) {
      if (phase == GruGradPhase::Gates)
        a.resetStep[i] = 0.0f;
      else
        a.hiddens[to] = a.hiddens[from];
      continue;
    }
    const float *proj = a.projection + k::recurrentInputRow(s, p.t, p.b) * s.dirs * g3 + p.d * g3;
    const float *rec = a.recurrent + (p.d * s.batch + p.b) * g3;
    int64_t byStep = (p.d * s.seq + a.step) * s.batch + p.b;
    float *gates = a.gates + byStep * g3;
    int64_t wb = p.d * 2 * g3, rb = wb + g3, j = p.j, c = 2 * hid + j;
    float hp = a.hiddens[from], pre;
    if (phase != GruGradPhase::Finish) {
      for (int q = 0; q < 2; ++q) {
        int64_t e = q * hid + j;
        gates[e] = k::gradSigmoid((valueAt<T>(a.bias, wb + e) + valueAt<T>(a.bias, rb + e)) +
                                  proj[e] + rec[e]);
      }
      a.previous[byTime(s, p, hid) + j] = hp;
      if (phase == GruGradPhase::Gates) {
        float rh = gates[hid + j] * hp;
        a.resetStep[i] = rh;
        a.resetPrevious[byTime(s, p, hid) + j] = rh;
        continue;
      }
      float q = valueAt<T>(a.bias, rb + c) + rec[c];
      a.linear[byStep * hid + j] = q;
      pre = (valueAt<T>(a.bias, wb + c) + proj[c]) + gates[hid + j] * q;
    } else {
      pre = (valueAt<T>(a.bias, wb + c) + proj[c]) +
            (valueAt<T>(a.bias, rb + c) + a.resetRecurrent[i]);
    }
    gates[c] = k::libmTanh(pre);
    a.hiddens[to] = k::gruBlend(gates[j], gates[c], hp);
  }
}

template <typename T>
__global__ void gruGradBackwardKernel(GruGradPhase phase, GruGradArgs a, int64_t n) {
  const k::RecurrentSizes &s = a.s;
  const int64_t hid = s.hidden, g3 = 3 * hid;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    Place p = placeOf(a, i);
    float *step = a.stepGrads + (p.d * s.batch + p.b) * g3 + p.j;
    if (!p.live) {
      // Nothing flows through an ended sequence's step.
      if (phase == GruGradPhase::Whole) {
        for (int q = 0; q < 3; ++q)
          step[q * hid] = 0.0f;
        a.backState[i] = 0.0f;
        if (!a.linearBeforeReset)
          a.candStep[i] = 0.0f;
      }
      continue;
    }
    const float *gates = a.gates + ((p.d * s.seq + a.step) * s.batch + p.b) * g3 + p.j;
    float hp = a.hiddens[stepState(s, p, a.step)], r = gates[hid];
    float *input = a.gateGrads + byTime(s, p, g3) + p.j;
    float *recurrent = a.recGrads + byTime(s, p, g3) + p.j;
    if (phase == GruGradPhase::Finish) {
      // No linear_before_reset: d(r . H) = da R_h is in resetGrad.
      float drh = a.resetGrad[i], dr = k::gruResetGrad(drh, hp, r);
      input[hid] = dr;
      recurrent[hid] = dr;
      step[hid] = dr;
      step[2 * hid] = 0.0f;
      a.backState[i] += drh * r;
      continue;
    }
    // The first step of this sequence (backwards) starts from dY_h; later
    // ones from the state gradient of the step after it.
    int64_t state = k::recurrentStateOffset(s, p.d, p.b) + p.j;
    float dh = a.step == p.len - 1 ? valueAt<T>(a.dYh, state) : a.backState[i];
    dh += valueAt<T>(a.dY, k::recurrentOutputOffset(s, p.t, p.d, p.b) + p.j);
    float dz, da;
    float carry = k::gruBlendGrad(gates[0], gates[2 * hid], hp, dh, dz, da);
    input[0] = dz;
    recurrent[0] = dz;
    step[0] = dz;
    input[2 * hid] = da;
    if (a.linearBeforeReset) {
      float q = a.linear[((p.d * s.seq + a.step) * s.batch + p.b) * hid + p.j];
      float dq = k::gruCandidateGradLbr(da, r), dr = k::gruResetGradLbr(da, q, r);
      input[hid] = dr;
      recurrent[hid] = dr;
      recurrent[2 * hid] = dq;
      step[hid] = dr;
      step[2 * hid] = dq;
    } else {
      recurrent[2 * hid] = da;
      a.candGrads[byTime(s, p, hid) + p.j] = da;
      a.candStep[i] = da;
    }
    a.backState[i] = carry;
  }
}

template <typename T> __global__ void gruGradBiasKernel(GruGradArgs a, T *dB, int64_t n) {
  const int64_t g3 = 3 * a.s.hidden, rows = a.s.seq * a.s.batch;
  for (int64_t i = gridStart(); i < n; i += gridStride()) {
    int64_t d = i / g3, c = i % g3;
    const float *in = a.gateGrads + d * rows * g3 + c, *rec = a.recGrads + d * rows * g3 + c;
    float wb = 0.0f, rb = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      wb += in[r * g3];
      rb += rec[r * g3];
    }
    dB[d * 2 * g3 + c] = k::store<T>(wb);
    dB[d * 2 * g3 + g3 + c] = k::store<T>(rb);
  }
}

template <typename Args> int64_t threadsOf(const Args &a) {
  return a.s.dirs * a.s.batch * a.s.hidden;
}

} // namespace

cudaError_t launchRecurrentStep(RecurrentCell cell, const RecurrentArgs &a, const LaunchGeometry &g,
                                cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    using T = decltype(tag);
    return queue(recurrentStepKernel<T>, g, stream, cell, a, threadsOf(a));
  });
}

cudaError_t launchRecurrentInit(const RecurrentArgs &a, const void *h0, const void *c0,
                                const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    using T = decltype(tag);
    return queue(recurrentInitKernel<T>, g, stream, a, static_cast<const T *>(h0),
                 static_cast<const T *>(c0), threadsOf(a));
  });
}

cudaError_t launchRecurrentFinal(const RecurrentArgs &a, void *yh, void *yc,
                                 const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    using T = decltype(tag);
    return queue(recurrentFinalKernel<T>, g, stream, a, static_cast<T *>(yh), static_cast<T *>(yc),
                 threadsOf(a));
  });
}

cudaError_t launchLstmGradInit(const LstmGradArgs &a, const LaunchGeometry &g,
                               cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    return queue(lstmGradInitKernel<decltype(tag)>, g, stream, a, threadsOf(a));
  });
}

cudaError_t launchLstmGradForward(const LstmGradArgs &a, const LaunchGeometry &g,
                                  cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    return queue(lstmGradForwardKernel<decltype(tag)>, g, stream, a, threadsOf(a));
  });
}

cudaError_t launchLstmGradBackward(const LstmGradArgs &a, const LaunchGeometry &g,
                                   cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    return queue(lstmGradBackwardKernel<decltype(tag)>, g, stream, a, threadsOf(a));
  });
}

cudaError_t launchLstmGradBias(const LstmGradArgs &a, void *dB, const LaunchGeometry &g,
                               cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    using T = decltype(tag);
    return queue(lstmGradBiasKernel<T>, g, stream, a, static_cast<T *>(dB),
                 a.s.dirs * 4 * a.s.hidden);
  });
}

cudaError_t launchGruGradInit(const GruGradArgs &a, const LaunchGeometry &g, cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    return queue(gruGradInitKernel<decltype(tag)>, g, stream, a, threadsOf(a));
  });
}

cudaError_t launchGruGradForward(GruGradPhase phase, const GruGradArgs &a, const LaunchGeometry &g,
                                 cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    return queue(gruGradForwardKernel<decltype(tag)>, g, stream, phase, a, threadsOf(a));
  });
}

cudaError_t launchGruGradBackward(GruGradPhase phase, const GruGradArgs &a, const LaunchGeometry &g,
                                  cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    return queue(gruGradBackwardKernel<decltype(tag)>, g, stream, phase, a, threadsOf(a));
  });
}

cudaError_t launchGruGradBias(const GruGradArgs &a, void *dB, const LaunchGeometry &g,
                              cudaStream_t stream) {
  return dispatchFloat(a.type, [&](auto tag) {
    using T = decltype(tag);
    return queue(gruGradBiasKernel<T>, g, stream, a, static_cast<T *>(dB),
                 a.s.dirs * 3 * a.s.hidden);
  });
}

} // namespace cuda
} // namespace mpc
