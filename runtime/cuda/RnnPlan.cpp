//===- RnnPlan.cpp - LSTM, GRU and RNN as cuBLASLt calls and steps ----------===//
//
// RnnPlan.h: the recurrent family's GEMMs and workspace, host code only.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/RnnPlan.h"

#include <algorithm>

using namespace mpc;
using namespace mpc::cuda;
using kernels::RecurrentSizes;

namespace {
/// Hands out 256-byte aligned regions of fp32 elements.
struct Regions {
  size_t at = 0;
  void take(size_t &field, int64_t floats) {
    if (floats <= 0)
      return;
    field = at;
    at += (size_t(floats) * sizeof(float) + 255) / 256 * 256;
  }
  void takeBytes(size_t &field, size_t bytes) {
    if (bytes == 0)
      return;
    field = at;
    at += (bytes + 255) / 256 * 256;
  }
};

llvm::Expected<MatmulPlan> plan(std::vector<int64_t> a, bool ta, std::vector<int64_t> b, bool tb,
                                unsigned elementBytes) {
  MatmulProblem p;
  p.aShape = a;
  p.bShape = b;
  p.transA = ta;
  p.transB = tb;
  p.elementBytes = elementBytes;
  return planMatmul(p);
}
/// The largest power of two (4 to 256) dividing the bytes of `floats`.
unsigned floatAlignment(int64_t floats) {
  unsigned align = 256;
  while (align > 4 && (floats * 4) % align != 0)
    align /= 2;
  return align;
}
} // namespace

void cuda::restride(LtGemm &g, bool userA, int64_t matrix, int64_t stride) {
  // cuBLASLt's A is the user's B and its B the user's A (GemmPlan.h).
  LtOperand &o = userA ? g.b : g.a;
  if (g.batchCount > 1 && o.batchStride != 0)
    o.batchStride = o.batchStride / matrix * stride;
  for (LtGemm::Offsets &off : g.offsets) {
    int64_t &at = userA ? off.userA : off.userB;
    at = at / matrix * stride;
  }
  // Restrided operands are fp32 slices: their alignment is the stride's.
  o.alignment = std::min(o.alignment, floatAlignment(stride));
}

RecurrentWorkspace cuda::recurrentWorkspace(const RecurrentSizes &s, const RecurrentOptions &o) {
  RecurrentWorkspace w;
  Regions r;
  auto take = [&](size_t &field, int64_t floats) { r.take(field, floats); };
  int64_t gh = s.gates * s.hidden, state = s.dirs * s.batch * s.hidden;
  take(w.projection, s.seq * s.batch * s.dirs * gh);
  if (o.widenR)
    take(w.wideR, s.dirs * gh * s.hidden);
  take(w.hidden, state);
  if (o.lstm)
    take(w.cell, state);
  take(w.recurrent, s.dirs * s.batch * gh);
  if (o.gruSplit) {
    take(w.update, state);
    take(w.resetState, state);
    take(w.resetRecurrent, state);
  }
  r.takeBytes(w.gemm, o.gemmBytes);
  w.total = r.at;
  return w;
}

llvm::Expected<RecurrentGemms> cuda::planRecurrentGemms(const RecurrentSizes &s, bool gruSplit,
                                                        unsigned elementBytes) {
  RecurrentGemms g;
  int64_t gh = s.gates * s.hidden, hid = s.hidden;
  auto input = plan({s.seq * s.batch, s.input}, false, {s.dirs * gh, s.input}, true, elementBytes);
  if (!input)
    return input.takeError();
  g.input = std::move(*input);
  auto recurrent = plan({s.dirs, s.batch, hid}, false, {s.dirs, gh, hid}, true, sizeof(float));
  if (!recurrent)
    return recurrent.takeError();
  g.recurrent = std::move(*recurrent);
  if (!gruSplit)
    return g;
  auto reset = plan({s.dirs, s.batch, hid}, false, {s.dirs, hid, hid}, true, sizeof(float));
  if (!reset)
    return reset.takeError();
  g.reset = std::move(*reset);
  // R_h of direction d starts 2*H*H elements into R[d] (the launch offsets
  // the pointer), and the next direction's G*H*H elements later.
  LtGemm &lg = g.reset.gemm;
  restride(lg, false, hid * hid, gh * hid);
  // Every R_h starts at a multiple of H*H floats past R's aligned base.
  lg.a.alignment = std::min(lg.a.alignment, floatAlignment(hid * hid));
  return g;
}

LstmGradWorkspace cuda::lstmGradWorkspace(const RecurrentSizes &s, bool widen, size_t gemmBytes) {
  LstmGradWorkspace w;
  Regions r;
  int64_t rows = s.seq * s.batch, g4 = 4 * s.hidden, d = s.dirs, hid = s.hidden;
  int64_t state = d * s.batch * hid;
  if (widen) {
    r.take(w.wideX, rows * s.input);
    r.take(w.wideW, d * g4 * s.input);
    r.take(w.wideR, d * g4 * hid);
  }
  r.take(w.projection, rows * d * g4);
  r.take(w.gates, d * rows * g4);
  r.take(w.cells, d * (s.seq + 1) * s.batch * hid);
  r.take(w.hiddens, d * (s.seq + 1) * s.batch * hid);
  r.take(w.recurrent, d * s.batch * g4);
  r.take(w.previous, d * rows * hid);
  r.take(w.gateGrads, d * rows * g4);
  r.take(w.stepGrads, d * s.batch * g4);
  r.take(w.backState, state);
  r.take(w.backCell, state);
  r.take(w.dX, rows * s.input);
  r.take(w.dW, d * g4 * s.input);
  r.take(w.dR, d * g4 * hid);
  r.takeBytes(w.gemm, gemmBytes);
  w.total = r.at;
  return w;
}

llvm::Expected<LstmGradGemms> cuda::planLstmGradGemms(const RecurrentSizes &s) {
  LstmGradGemms g;
  int64_t rows = s.seq * s.batch, g4 = 4 * s.hidden, d = s.dirs, hid = s.hidden;
  unsigned eb = sizeof(float);
  auto take = [](llvm::Expected<MatmulPlan> p, MatmulPlan &into) -> llvm::Error {
    if (!p)
      return p.takeError();
    into = std::move(*p);
    return llvm::Error::success();
  };
  if (auto e = take(plan({rows, s.input}, false, {d * g4, s.input}, true, eb), g.input))
    return std::move(e);
  if (auto e = take(plan({d, s.batch, hid}, false, {d, g4, hid}, true, eb), g.recurrent))
    return std::move(e);
  // H_s of direction d lies (seq+1)*batch*H elements after direction d-1's.
  restride(g.recurrent.gemm, true, s.batch * hid, (s.seq + 1) * s.batch * hid);
  // Step s starts s*batch*H elements in (the launch offsets the pointer).
  LtOperand &states = g.recurrent.gemm.b;
  states.alignment = std::min(states.alignment, floatAlignment(s.batch * hid));
  if (auto e = take(plan({d, s.batch, g4}, false, {d, g4, hid}, false, eb), g.backState))
    return std::move(e);
  if (auto e = take(plan({rows, g4}, false, {g4, s.input}, false, eb), g.dX))
    return std::move(e);
  if (auto e = take(plan({d, rows, g4}, true, {rows, s.input}, false, eb), g.dW))
    return std::move(e);
  if (auto e = take(plan({d, rows, g4}, true, {d, rows, hid}, false, eb), g.dR))
    return std::move(e);
  return g;
}
