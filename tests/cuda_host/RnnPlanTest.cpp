//===- RnnPlanTest.cpp - The recurrent family's products and workspace ----===//
//
// RnnPlan.h checked without a GPU: each planned product is executed by the
// cuBLASLt emulator (LtEmulator.h) and compared with the product written
// from ONNX's definition of the recurrent ops (X_t W^T per direction, H_d
// R_d^T, (r . H)_d R_h,d^T with R_h the rows [2H, 3H) of R_d); the layout
// functions against ONNX's layouts 0 and 1; the workspace for overlap and
// alignment.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/RnnPlan.h"
#include "LtEmulator.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

using namespace mpc;
using namespace mpc::cuda;
using kernels::RecurrentSizes;

namespace {

std::vector<double> randomData(int64_t n, std::mt19937 &rng) {
  std::uniform_int_distribution<int> v(-8, 8);
  std::vector<double> x(size_t(n), 0.0);
  for (double &e : x)
    e = v(rng) / 4.0;
  return x;
}

RecurrentSizes sizes(int64_t seq, int64_t batch, int64_t input, int64_t hidden, int64_t dirs,
                     int64_t gates, bool batchMajor) {
  RecurrentSizes s;
  s.seq = seq;
  s.batch = batch;
  s.input = input;
  s.hidden = hidden;
  s.dirs = dirs;
  s.gates = gates;
  s.batchMajor = batchMajor;
  return s;
}

/// Every product of one node's plan against the definitions.
void checkProducts(const RecurrentSizes &s, bool gruSplit) {
  SCOPED_TRACE("seq " + std::to_string(s.seq) + " batch " + std::to_string(s.batch) + " input " +
               std::to_string(s.input) + " hidden " + std::to_string(s.hidden) + " dirs " +
               std::to_string(s.dirs) + " gates " + std::to_string(s.gates) +
               (s.batchMajor ? " layout 1" : " layout 0"));
  std::mt19937 rng(7);
  auto plan = planRecurrentGemms(s, gruSplit, 2);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  const int64_t hid = s.hidden, gh = s.gates * hid;

  // The projection: row recurrentInputRow(t, b) of X (X's own layout),
  // column d*G*H + c: sum_i X[t, b, i] W[d, c, i].
  std::vector<double> x = randomData(s.seq * s.batch * s.input, rng);
  std::vector<double> w = randomData(s.dirs * gh * s.input, rng);
  std::vector<double> proj = emulate(plan->input.gemm, x, w, size_t(s.seq * s.batch * s.dirs * gh));
  for (int64_t t = 0; t < s.seq; ++t)
    for (int64_t b = 0; b < s.batch; ++b) {
      const double *xt = x.data() + (s.batchMajor ? b * s.seq + t : t * s.batch + b) * s.input;
      for (int64_t d = 0; d < s.dirs; ++d)
        for (int64_t c = 0; c < gh; ++c) {
          double want = 0;
          for (int64_t i = 0; i < s.input; ++i)
            want += xt[i] * w[size_t((d * gh + c) * s.input + i)];
          EXPECT_EQ(proj[size_t(kernels::recurrentInputRow(s, t, b) * s.dirs * gh + d * gh + c)],
                    want);
        }
    }

  // The recurrent product: [d, b, c] = sum_j H[d, b, j] R[d, c, j].
  std::vector<double> h = randomData(s.dirs * s.batch * hid, rng);
  std::vector<double> r = randomData(s.dirs * gh * hid, rng);
  std::vector<double> rec = emulate(plan->recurrent.gemm, h, r, size_t(s.dirs * s.batch * gh));
  for (int64_t d = 0; d < s.dirs; ++d)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t c = 0; c < gh; ++c) {
        double want = 0;
        for (int64_t j = 0; j < hid; ++j)
          want += h[size_t((d * s.batch + b) * hid + j)] * r[size_t((d * gh + c) * hid + j)];
        EXPECT_EQ(rec[size_t((d * s.batch + b) * gh + c)], want);
      }

  if (!gruSplit) {
    EXPECT_TRUE(plan->reset.gemm.offsets.empty());
    return;
  }
  // The reset product reads R from row 2H of direction 0 on (the launch
  // passes R + 2*H*H): [d, b, c] = sum_j rh[d, b, j] R[d, 2H + c, j].
  std::vector<double> rFrom2H(r.begin() + 2 * hid * hid, r.end());
  std::vector<double> reset = emulate(plan->reset.gemm, h, rFrom2H, size_t(s.dirs * s.batch * hid));
  for (int64_t d = 0; d < s.dirs; ++d)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t c = 0; c < hid; ++c) {
        double want = 0;
        for (int64_t j = 0; j < hid; ++j)
          want +=
              h[size_t((d * s.batch + b) * hid + j)] * r[size_t((d * gh + 2 * hid + c) * hid + j)];
        EXPECT_EQ(reset[size_t((d * s.batch + b) * hid + c)], want);
      }
  // R_h of a direction starts H*H floats past an aligned base: with H = 3
  // only 4-byte alignment can be promised.
  if (hid % 2 == 1)
    EXPECT_EQ(plan->reset.gemm.a.alignment, 4u);
}

TEST(RnnPlan, ProductsOfEveryDirectionLayoutAndCell) {
  for (bool batchMajor : {false, true})
    for (int64_t dirs : {1, 2}) {
      checkProducts(sizes(5, 3, 4, 3, dirs, 4, batchMajor), false); // LSTM
      checkProducts(sizes(4, 2, 3, 5, dirs, 3, batchMajor), true);  // GRU, lbr 0
      checkProducts(sizes(4, 2, 3, 5, dirs, 3, batchMajor), false); // GRU, lbr 1
      checkProducts(sizes(3, 1, 1, 1, dirs, 1, batchMajor), false); // RNN, size-1 dims
    }
}

/// The products LSTMGrad and GRUGrad share (layout 0, G = gates * H)
/// against their definitions: the projection, H_s R^T over a [D, seq+1,
/// batch, H] buffer (the launch passes hiddens + s*batch*H), the state
/// gradient stepGrads R, and dX, dW, dR over [D, S, G] by-time buffers.
template <typename Gemms> void checkGradProducts(const RecurrentSizes &s, const Gemms &plan) {
  std::mt19937 rng(11);
  const int64_t D = s.dirs, B = s.batch, H = s.hidden, G = s.gates * H, S = s.seq * B;
  const int64_t I = s.input;
  std::vector<double> hiddens = randomData(D * (s.seq + 1) * B * H, rng);
  std::vector<double> r = randomData(D * G * H, rng), w = randomData(D * G * I, rng);
  std::vector<double> x = randomData(S * I, rng), grads = randomData(D * S * G, rng);
  std::vector<double> prev = randomData(D * S * H, rng), step = randomData(D * B * G, rng);
  auto R = [&](int64_t d, int64_t row, int64_t j) { return r[size_t((d * G + row) * H + j)]; };
  // The projection: [row, d*G + c] = sum_i X[row, i] W[d, c, i].
  std::vector<double> proj = emulate(plan.input.gemm, x, w, size_t(S * D * G));
  for (int64_t row = 0; row < S; ++row)
    for (int64_t c = 0; c < D * G; ++c) {
      double want = 0;
      for (int64_t i = 0; i < I; ++i)
        want += x[size_t(row * I + i)] * w[size_t(c * I + i)];
      EXPECT_EQ(proj[size_t(row * D * G + c)], want);
    }
  int64_t mid = s.seq / 2;
  std::vector<double> fromMid(hiddens.begin() + mid * B * H, hiddens.end());
  std::vector<double> rec = emulate(plan.recurrent.gemm, fromMid, r, size_t(D * B * G));
  std::vector<double> back = emulate(plan.backState.gemm, step, r, size_t(D * B * H));
  std::vector<double> dW = emulate(plan.dW.gemm, grads, x, size_t(D * G * I));
  std::vector<double> dR = emulate(plan.dR.gemm, grads, prev, size_t(D * G * H));
  for (int64_t d = 0; d < D; ++d) {
    std::vector<double> gd(grads.begin() + d * S * G, grads.begin() + (d + 1) * S * G);
    std::vector<double> wd(w.begin() + d * G * I, w.begin() + (d + 1) * G * I);
    std::vector<double> dX = emulate(plan.dX.gemm, gd, wd, size_t(S * I));
    for (int64_t row = 0; row < S; ++row)
      for (int64_t i = 0; i < I; ++i) {
        double want = 0;
        for (int64_t c = 0; c < G; ++c)
          want += gd[size_t(row * G + c)] * wd[size_t(c * I + i)];
        EXPECT_EQ(dX[size_t(row * I + i)], want);
      }
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t c = 0; c < G; ++c) {
        double want = 0;
        for (int64_t j = 0; j < H; ++j)
          want += hiddens[size_t(((d * (s.seq + 1) + mid) * B + b) * H + j)] * R(d, c, j);
        EXPECT_EQ(rec[size_t((d * B + b) * G + c)], want);
      }
      for (int64_t j = 0; j < H; ++j) {
        double want = 0;
        for (int64_t c = 0; c < G; ++c)
          want += step[size_t((d * B + b) * G + c)] * R(d, c, j);
        EXPECT_EQ(back[size_t((d * B + b) * H + j)], want);
      }
    }
    for (int64_t c = 0; c < G; ++c) {
      for (int64_t i = 0; i < I; ++i) {
        double want = 0;
        for (int64_t row = 0; row < S; ++row)
          want += gd[size_t(row * G + c)] * x[size_t(row * I + i)];
        EXPECT_EQ(dW[size_t((d * G + c) * I + i)], want);
      }
      for (int64_t j = 0; j < H; ++j) {
        double want = 0;
        for (int64_t row = 0; row < S; ++row)
          want += gd[size_t(row * G + c)] * prev[size_t((d * S + row) * H + j)];
        EXPECT_EQ(dR[size_t((d * G + c) * H + j)], want);
      }
    }
  }
}

/// LSTMGrad's products (layout 0) against their definitions.
void checkLstmGradProducts(const RecurrentSizes &s) {
  SCOPED_TRACE("dirs " + std::to_string(s.dirs) + " batch " + std::to_string(s.batch));
  auto plan = planLstmGradGemms(s);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  checkGradProducts(s, *plan);
}

TEST(RnnPlan, LstmGradProductsOfBothDirectionCounts) {
  checkLstmGradProducts(sizes(3, 2, 3, 2, 1, 4, false));
  checkLstmGradProducts(sizes(4, 3, 2, 3, 2, 4, false));
  checkLstmGradProducts(sizes(2, 1, 1, 1, 2, 4, false));
}

TEST(RnnPlan, LstmGradWorkspaceIsDisjoint) {
  RecurrentSizes s = sizes(5, 3, 4, 7, 2, 4, false);
  LstmGradWorkspace w = lstmGradWorkspace(s, true, 512);
  std::vector<size_t> at = {w.wideX,     w.wideW,     w.wideR,     w.projection, w.gates,
                            w.cells,     w.hiddens,   w.recurrent, w.previous,   w.gateGrads,
                            w.stepGrads, w.backState, w.backCell,  w.dX,         w.dW,
                            w.dR,        w.gemm};
  std::set<size_t> distinct(at.begin(), at.end());
  EXPECT_EQ(distinct.size(), at.size());
  for (size_t a : at)
    EXPECT_EQ(a % 256, 0u);
  // The gate gradients by time: [D, S, 4H] floats before the next region.
  EXPECT_GE(w.stepGrads - w.gateGrads, size_t(2 * 15 * 28 * 4));
  EXPECT_GE(w.total - w.gemm, 512u);
  // fp32 operands need no widened copies.
  LstmGradWorkspace plain = lstmGradWorkspace(s, false, 0);
  EXPECT_EQ(plain.wideX, 0u);
  EXPECT_LT(plain.total, w.total);
}

/// GRUGrad's products (layout 0) against their definitions: those LSTMGrad
/// shares, then without linear_before_reset the reset products over R_h
/// (the rows [2H, 3H) of R_d; the launch passes R + 2*H*H) and dR's h rows.
void checkGruGradProducts(const RecurrentSizes &s, bool lbr) {
  SCOPED_TRACE("dirs " + std::to_string(s.dirs) + " batch " + std::to_string(s.batch) + " hidden " +
               std::to_string(s.hidden) + (lbr ? " lbr 1" : " lbr 0"));
  auto plan = planGruGradGemms(s, lbr);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  checkGradProducts(s, *plan);
  if (lbr) {
    EXPECT_TRUE(plan->reset.gemm.offsets.empty());
    EXPECT_TRUE(plan->backReset.gemm.offsets.empty());
    EXPECT_TRUE(plan->dRh.gemm.offsets.empty());
    return;
  }
  std::mt19937 rng(13);
  const int64_t D = s.dirs, B = s.batch, H = s.hidden, G = 3 * H, S = s.seq * B;
  std::vector<double> r = randomData(D * G * H, rng), prev = randomData(D * S * H, rng);
  std::vector<double> state = randomData(D * B * H, rng), cand = randomData(D * S * H, rng);
  auto R = [&](int64_t d, int64_t row, int64_t j) { return r[size_t((d * G + row) * H + j)]; };
  std::vector<double> rFrom2H(r.begin() + 2 * H * H, r.end());
  std::vector<double> reset = emulate(plan->reset.gemm, state, rFrom2H, size_t(D * B * H));
  std::vector<double> backReset = emulate(plan->backReset.gemm, state, rFrom2H, size_t(D * B * H));
  std::vector<double> dRh = emulate(plan->dRh.gemm, cand, prev, size_t(D * H * H));
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < H; ++c) {
        // (r . H) R_h^T and da R_h.
        double want = 0, wantBack = 0;
        for (int64_t j = 0; j < H; ++j) {
          want += state[size_t((d * B + b) * H + j)] * R(d, 2 * H + c, j);
          wantBack += state[size_t((d * B + b) * H + j)] * R(d, 2 * H + j, c);
        }
        EXPECT_EQ(reset[size_t((d * B + b) * H + c)], want);
        EXPECT_EQ(backReset[size_t((d * B + b) * H + c)], wantBack);
      }
    for (int64_t c = 0; c < H; ++c)
      for (int64_t j = 0; j < H; ++j) {
        double want = 0;
        for (int64_t row = 0; row < S; ++row)
          want += cand[size_t((d * S + row) * H + c)] * prev[size_t((d * S + row) * H + j)];
        EXPECT_EQ(dRh[size_t((d * H + c) * H + j)], want);
      }
  }
  if (H % 2 == 1) {
    EXPECT_EQ(plan->reset.gemm.a.alignment, 4u);
    EXPECT_EQ(plan->backReset.gemm.a.alignment, 4u);
  }
}

TEST(RnnPlan, GradientDirectionSlicesPromiseOnlyTheirAlignment) {
  // dX is one product per direction: the gradients of direction d start
  // d*S*G floats in, W_d d*G*input floats in (cuBLASLt's B and A).
  auto gru = planGruGradGemms(sizes(3, 1, 5, 3, 2, 3, false), true); // S*G = 27, G*I = 45
  ASSERT_TRUE(bool(gru)) << llvm::toString(gru.takeError());
  EXPECT_EQ(gru->dX.gemm.b.alignment, 4u);
  EXPECT_EQ(gru->dX.gemm.a.alignment, 4u);
  auto even = planGruGradGemms(sizes(4, 2, 8, 8, 2, 3, false), false); // 8*24, 24*8 floats
  ASSERT_TRUE(bool(even)) << llvm::toString(even.takeError());
  EXPECT_GE(even->dX.gemm.b.alignment, 16u);
  EXPECT_GE(even->dX.gemm.a.alignment, 16u);
  auto lstm = planLstmGradGemms(sizes(3, 1, 5, 3, 2, 4, false)); // 36, 60 floats
  ASSERT_TRUE(bool(lstm)) << llvm::toString(lstm.takeError());
  EXPECT_EQ(lstm->dX.gemm.b.alignment, 16u);
  EXPECT_EQ(lstm->dX.gemm.a.alignment, 16u);
}

TEST(RnnPlan, GruGradProductsOfBothDirectionCountsAndResetModes) {
  for (bool lbr : {false, true}) {
    checkGruGradProducts(sizes(3, 2, 3, 2, 1, 3, false), lbr);
    checkGruGradProducts(sizes(4, 3, 2, 3, 2, 3, false), lbr);
    checkGruGradProducts(sizes(2, 1, 1, 1, 2, 3, false), lbr);
    checkGruGradProducts(sizes(3, 1, 4, 5, 1, 3, false), lbr);
  }
}

TEST(RnnPlan, GruGradWorkspaceIsDisjoint) {
  RecurrentSizes s = sizes(5, 3, 4, 7, 2, 3, false);
  GruGradWorkspace w = gruGradWorkspace(s, false, true, 512);
  const int64_t state = 2 * 3 * 7, byTime = 2 * 15 * 7, g3 = 21;
  struct Region {
    size_t at;
    int64_t floats;
  } regions[] = {{w.wideX, 15 * 4},
                 {w.wideW, 2 * g3 * 4},
                 {w.wideR, 2 * g3 * 7},
                 {w.projection, 15 * 2 * g3},
                 {w.gates, 2 * 15 * g3},
                 {w.hiddens, 2 * 6 * 3 * 7},
                 {w.recurrent, 2 * 3 * g3},
                 {w.resetStep, state},
                 {w.resetRecurrent, state},
                 {w.previous, byTime},
                 {w.resetPrevious, byTime},
                 {w.gateGrads, 2 * 15 * g3},
                 {w.recGrads, 2 * 15 * g3},
                 {w.candGrads, byTime},
                 {w.stepGrads, 2 * 3 * g3},
                 {w.candStep, state},
                 {w.resetGrad, state},
                 {w.backState, state},
                 {w.dX, 15 * 4},
                 {w.dW, 2 * g3 * 4},
                 {w.dR, 2 * g3 * 7},
                 {w.dRh, 2 * 7 * 7},
                 {w.gemm, 128}};
  for (size_t i = 0; i < std::size(regions); ++i) {
    EXPECT_EQ(regions[i].at % 256, 0u) << "region " << i;
    EXPECT_LE(regions[i].at + size_t(regions[i].floats) * 4, w.total) << "region " << i;
    for (size_t j = i + 1; j < std::size(regions); ++j)
      EXPECT_TRUE(regions[i].at + size_t(regions[i].floats) * 4 <= regions[j].at ||
                  regions[j].at + size_t(regions[j].floats) * 4 <= regions[i].at)
          << "regions " << i << " and " << j;
  }
  EXPECT_EQ(w.linear, 0u);
  // linear_before_reset keeps q and needs none of the split step's regions;
  // fp32 operands no widened copies.
  GruGradWorkspace lbr = gruGradWorkspace(s, true, false, 0);
  EXPECT_NE(lbr.linear, 0u);
  for (size_t at : {lbr.wideX, lbr.resetStep, lbr.resetRecurrent, lbr.resetPrevious, lbr.candGrads,
                    lbr.candStep, lbr.resetGrad, lbr.dRh})
    EXPECT_EQ(at, 0u);
  EXPECT_LT(lbr.total, w.total);
}

TEST(RnnPlan, LayoutsAreOnnxs) {
  // Layout 0: Y [seq, dirs, batch, H], states [dirs, batch, H], X rows
  // [seq, batch]; layout 1: Y [batch, seq, dirs, H], states [batch, dirs,
  // H], X rows [batch, seq]. Every place is hit once.
  for (bool batchMajor : {false, true}) {
    RecurrentSizes s = sizes(3, 2, 1, 5, 2, 1, batchMajor);
    std::set<int64_t> ys, states, rows;
    for (int64_t t = 0; t < s.seq; ++t)
      for (int64_t d = 0; d < s.dirs; ++d)
        for (int64_t b = 0; b < s.batch; ++b) {
          int64_t y = kernels::recurrentOutputOffset(s, t, d, b);
          int64_t want = batchMajor ? ((b * s.seq + t) * s.dirs + d) * s.hidden
                                    : ((t * s.dirs + d) * s.batch + b) * s.hidden;
          EXPECT_EQ(y, want);
          ys.insert(y);
          if (t == 0) {
            int64_t st = kernels::recurrentStateOffset(s, d, b);
            EXPECT_EQ(st, (batchMajor ? b * s.dirs + d : d * s.batch + b) * s.hidden);
            states.insert(st);
          }
          if (d == 0)
            rows.insert(kernels::recurrentInputRow(s, t, b));
        }
    EXPECT_EQ(ys.size(), size_t(s.seq * s.dirs * s.batch));
    EXPECT_EQ(*ys.rbegin(), (s.seq * s.dirs * s.batch - 1) * s.hidden);
    EXPECT_EQ(states.size(), size_t(s.dirs * s.batch));
    EXPECT_EQ(rows.size(), size_t(s.seq * s.batch));
    EXPECT_EQ(*rows.rbegin(), s.seq * s.batch - 1);
  }
  // A reverse direction (and direction 1) runs a sequence of length 3 as
  // times 2, 1, 0; a forward one as 0, 1, 2.
  EXPECT_EQ(kernels::recurrentTimeAt(true, 3, 0), 2);
  EXPECT_EQ(kernels::recurrentTimeAt(true, 3, 2), 0);
  EXPECT_EQ(kernels::recurrentTimeAt(false, 3, 2), 2);
}

TEST(RnnPlan, WorkspaceRegionsAreAlignedAndDisjoint) {
  RecurrentSizes s = sizes(7, 3, 5, 33, 2, 3, false);
  RecurrentOptions o;
  o.gruSplit = true;
  o.widenR = true;
  o.gemmBytes = 1000;
  RecurrentWorkspace w = recurrentWorkspace(s, o);
  int64_t state = 2 * 3 * 33, gh = 3 * 33;
  struct Region {
    size_t at;
    int64_t bytes;
  } regions[] = {{w.projection, 7 * 3 * 2 * gh * 4},
                 {w.wideR, 2 * gh * 33 * 4},
                 {w.hidden, state * 4},
                 {w.recurrent, 2 * 3 * gh * 4},
                 {w.update, state * 4},
                 {w.resetState, state * 4},
                 {w.resetRecurrent, state * 4},
                 {w.gemm, 1000}};
  for (size_t i = 0; i < std::size(regions); ++i) {
    EXPECT_EQ(regions[i].at % 256, 0u) << "region " << i;
    EXPECT_LE(regions[i].at + size_t(regions[i].bytes), w.total) << "region " << i;
    for (size_t j = i + 1; j < std::size(regions); ++j)
      EXPECT_TRUE(regions[i].at + size_t(regions[i].bytes) <= regions[j].at ||
                  regions[j].at + size_t(regions[j].bytes) <= regions[i].at)
          << "regions " << i << " and " << j;
  }
  // No cell state, no widened R, no split regions for an fp32 RNN.
  RecurrentOptions plain;
  RecurrentWorkspace p = recurrentWorkspace(sizes(2, 1, 1, 1, 1, 1, false), plain);
  EXPECT_EQ(p.total, 3u * 256u); // projection, hidden, recurrent
  o.lstm = true;
  EXPECT_GT(recurrentWorkspace(s, o).total, w.total);
}

} // namespace
