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
/// Moves a planned product into `into`, or passes its error on.
llvm::Error takePlan(llvm::Expected<MatmulPlan> p, MatmulPlan &into) {
  if (!p)
    return p.takeError();
  into = std::move(*p);
  return llvm::Error::success();
}
/// The largest power of two (4 to 256) dividing the bytes of `floats`.
unsigned floatAlignment(int64_t floats) {
  unsigned align = 256;
  while (align > 4 && (floats * 4) % align != 0)
    align /= 2;
  return align;
}
} // namespace

namespace {
/// The user's B of `g`, [D, H, H], made R_h: R_h of direction d starts
/// 2*H*H elements into R[d] (the launch offsets the pointer), and the next
/// direction's 3*H*H elements later.
void sliceRh(LtGemm &g, const RecurrentSizes &s) {
  int64_t hid = s.hidden;
  restride(g, false, hid * hid, 3 * hid * hid);
  // Every R_h starts at a multiple of H*H floats past R's aligned base.
  g.a.alignment = std::min(g.a.alignment, floatAlignment(hid * hid));
}
/// The user's A of `g`, [D, batch, H], made the states H_s of one step of
/// a [D, seq+1, batch, H] buffer: direction d lies (seq+1)*batch*H elements
/// after direction d-1; step s starts s*batch*H elements in (the launch
/// offsets the pointer).
void stepStates(LtGemm &g, const RecurrentSizes &s) {
  restride(g, true, s.batch * s.hidden, (s.seq + 1) * s.batch * s.hidden);
  g.b.alignment = std::min(g.b.alignment, floatAlignment(s.batch * s.hidden));
}
/// The per-direction dX product of a gradient op with G = gates * H: the
/// launch offsets the gradients by d*S*G floats and W by d*G*input, so only
/// the alignment those offsets keep can be promised.
void directionSlices(LtGemm &g, const RecurrentSizes &s) {
  int64_t gh = s.gates * s.hidden;
  g.b.alignment = std::min(g.b.alignment, floatAlignment(s.seq * s.batch * gh));
  g.a.alignment = std::min(g.a.alignment, floatAlignment(gh * s.input));
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
  sliceRh(g.reset.gemm, s);
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
  auto take = takePlan;
  if (auto e = take(plan({rows, s.input}, false, {d * g4, s.input}, true, eb), g.input))
    return std::move(e);
  if (auto e = take(plan({d, s.batch, hid}, false, {d, g4, hid}, true, eb), g.recurrent))
    return std::move(e);
  stepStates(g.recurrent.gemm, s);
  if (auto e = take(plan({d, s.batch, g4}, false, {d, g4, hid}, false, eb), g.backState))
    return std::move(e);
  if (auto e = take(plan({rows, g4}, false, {g4, s.input}, false, eb), g.dX))
    return std::move(e);
  directionSlices(g.dX.gemm, s);
  if (auto e = take(plan({d, rows, g4}, true, {rows, s.input}, false, eb), g.dW))
    return std::move(e);
  if (auto e = take(plan({d, rows, g4}, true, {d, rows, hid}, false, eb), g.dR))
    return std::move(e);
  return g;
}

GruGradWorkspace cuda::gruGradWorkspace(const RecurrentSizes &s, bool linearBeforeReset, bool widen,
                                        size_t gemmBytes) {
  GruGradWorkspace w;
  Regions r;
  int64_t rows = s.seq * s.batch, g3 = 3 * s.hidden, d = s.dirs, hid = s.hidden;
  int64_t state = d * s.batch * hid, split = linearBeforeReset ? 0 : 1;
  if (widen) {
    r.take(w.wideX, rows * s.input);
    r.take(w.wideW, d * g3 * s.input);
    r.take(w.wideR, d * g3 * hid);
  }
  r.take(w.projection, rows * d * g3);
  r.take(w.gates, d * rows * g3);
  r.take(w.linear, (1 - split) * d * rows * hid);
  r.take(w.hiddens, d * (s.seq + 1) * s.batch * hid);
  r.take(w.recurrent, d * s.batch * g3);
  r.take(w.resetStep, split * state);
  r.take(w.resetRecurrent, split * state);
  r.take(w.previous, d * rows * hid);
  r.take(w.resetPrevious, split * d * rows * hid);
  r.take(w.gateGrads, d * rows * g3);
  r.take(w.recGrads, d * rows * g3);
  r.take(w.candGrads, split * d * rows * hid);
  r.take(w.stepGrads, d * s.batch * g3);
  r.take(w.candStep, split * state);
  r.take(w.resetGrad, split * state);
  r.take(w.backState, state);
  r.take(w.dX, rows * s.input);
  r.take(w.dW, d * g3 * s.input);
  r.take(w.dR, d * g3 * hid);
  r.take(w.dRh, split * d * hid * hid);
  r.takeBytes(w.gemm, gemmBytes);
  w.total = r.at;
  return w;
}

llvm::Expected<GruGradGemms> cuda::planGruGradGemms(const RecurrentSizes &s,
                                                    bool linearBeforeReset) {
  GruGradGemms g;
  int64_t rows = s.seq * s.batch, g3 = 3 * s.hidden, d = s.dirs, hid = s.hidden;
  unsigned eb = sizeof(float);
  auto take = takePlan;
  if (auto e = take(plan({rows, s.input}, false, {d * g3, s.input}, true, eb), g.input))
    return std::move(e);
  if (auto e = take(plan({d, s.batch, hid}, false, {d, g3, hid}, true, eb), g.recurrent))
    return std::move(e);
  stepStates(g.recurrent.gemm, s);
  if (auto e = take(plan({d, s.batch, g3}, false, {d, g3, hid}, false, eb), g.backState))
    return std::move(e);
  if (auto e = take(plan({rows, g3}, false, {g3, s.input}, false, eb), g.dX))
    return std::move(e);
  directionSlices(g.dX.gemm, s);
  if (auto e = take(plan({d, rows, g3}, true, {rows, s.input}, false, eb), g.dW))
    return std::move(e);
  if (auto e = take(plan({d, rows, g3}, true, {d, rows, hid}, false, eb), g.dR))
    return std::move(e);
  if (linearBeforeReset)
    return g;
  if (auto e = take(plan({d, s.batch, hid}, false, {d, hid, hid}, true, eb), g.reset))
    return std::move(e);
  sliceRh(g.reset.gemm, s);
  if (auto e = take(plan({d, s.batch, hid}, false, {d, hid, hid}, false, eb), g.backReset))
    return std::move(e);
  sliceRh(g.backReset.gemm, s);
  if (auto e = take(plan({d, rows, hid}, true, {d, rows, hid}, false, eb), g.dRh))
    return std::move(e);
  return g;
}
