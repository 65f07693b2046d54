//===- RnnKernels.cpp - ONNX GRU and RNN on the CPU -------------------------===//
//
// The GRU and plain RNN cells, with the structure of LstmKernel.cpp (the
// per-element math is RecurrentBodies.h's, which CUDA runs too): inputs
// are widened once to the compute type (fp64 for double storage, else fp32),
// the input projections of every step are one gemm per direction, each step
// adds the recurrent gemm, and the outputs are narrowed once.
//
//   per direction:  XW = X[seq*batch, in] * W^T + Wb       (one gemm)
//   GRU step:       z, r = f(XW_zr[t] + H * R_zr^T + Rb_zr)
//                   lbr 0: h~ = g(XW_h[t] + (r . H) * R_h^T + Rb_h)
//                   lbr 1: h~ = g(XW_h[t] + r . (H * R_h^T + Rb_h))
//                   H = (1 - z) . h~ + z . H
//   RNN step:       H = f(XW[t] + H * R^T + Rb)
//
// sequence_lens is read at run time: batch row b only runs its first
// lens[b] steps (a reverse direction starts at lens[b] - 1); Y is zero past
// the end and Y_h holds the last state. layout = 1 (batch-major) is handled
// by transposing X and initial_h in and Y and Y_h out.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Elementwise.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"
#include <cmath>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// Clips (when clip > 0) and applies `a` to x[0, n) in place.
template <typename A>
static void applyActivation(const Activation &a, float clipF, A *x, int64_t n) {
  A clip = clipF;
  if (clip > 0)
    for (int64_t i = 0; i < n; ++i)
      x[i] = k::recurrentClip(clip, x[i]);
  // The defaults take the vectorized element-wise loops (the functors
  // recurrentActivate calls for them).
  if (a.kind == ActKind::Sigmoid)
    k::applyUnary<A, A, k::Sigmoid>(k::Sigmoid(), x, x, n);
  else if (a.kind == ActKind::Tanh)
    k::applyUnary<A, A, k::Tanh>(k::Tanh(), x, x, n);
  else
    for (int64_t i = 0; i < n; ++i)
      x[i] = k::recurrentActivate(a, x[i]);
}

//===----------------------------------------------------------------------===//
// The shared driver
//===----------------------------------------------------------------------===//

/// Swaps the two leading axes of a [a, b, inner] array.
template <typename A>
static std::vector<A> swapLeading(const std::vector<A> &v, int64_t a, int64_t b,
                                  int64_t inner) {
  std::vector<A> t(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      std::copy_n(v.data() + (i * b + j) * inner, inner, t.data() + (j * a + i) * inner);
  return t;
}

namespace {
/// Everything a cell step needs, in the compute type A (fp64 for double
/// storage, else fp32) and sequence-major layout.
template <typename A> struct Recurrence {
  int64_t seq = 0, batch = 0, in = 0, hid = 0, dirs = 1, gates = 1;
  bool reverse = false;
  float clip = 0;
  std::vector<A> x, w, r, b, h0;
  std::vector<int64_t> lens;
  std::vector<Activation> acts;
};
} // namespace

template <typename A>
static llvm::Expected<Recurrence<A>> loadRecurrence(const KernelCall &c, int64_t gates,
                                                    llvm::ArrayRef<const char *> acts) {
  const Node &n = *c.node;
  const RecurrentParams &params = paramsOf<RecurrentParams>(c);
  Recurrence<A> p;
  bool batchMajor = params.batchMajor;
  p.seq = c.inputs[0].shape[batchMajor ? 1 : 0];
  p.batch = c.inputs[0].shape[batchMajor ? 0 : 1];
  p.in = c.inputs[0].shape[2];
  p.dirs = params.numDirections();
  p.hid = c.inputs[2].shape[2];
  p.gates = gates;
  p.reverse = params.reverse();
  p.clip = params.hasClip ? params.clip : 0.0f;
  auto a = parseActivations(n, params, acts, p.dirs);
  if (!a)
    return a.takeError();
  p.acts = std::move(*a);
  p.x = widenInput<A>(c, 0);
  p.w = widenInput<A>(c, 1);
  p.r = widenInput<A>(c, 2);
  p.b = widenInput<A>(c, 3);
  p.h0 = widenInput<A>(c, 5);
  if (batchMajor) {
    p.x = swapLeading(p.x, p.batch, p.seq, p.in);
    if (!p.h0.empty())
      p.h0 = swapLeading(p.h0, p.batch, p.dirs, p.hid);
  }
  p.lens.assign(p.batch, p.seq);
  if (c.hasInput(4)) {
    p.lens = readInts(c.inputs[4]);
    if (int64_t(p.lens.size()) != p.batch)
      return nodeError(n, "sequence_lens has " + std::to_string(p.lens.size()) +
                              " values for a batch of " + std::to_string(p.batch));
    for (int64_t &l : p.lens)
      if (l < 0 || l > p.seq)
        return nodeError(n, "sequence_lens value " + std::to_string(l) +
                                " is outside [0, " + std::to_string(p.seq) + "]");
  }
  return p;
}

/// Runs every direction: `step(d, gx, h, hNew)` maps the projected inputs
/// gx [batch, gates*hid] and the state h [batch, hid] to hNew. Y is
/// [seq, dirs, batch, hid] and Y_h [dirs, batch, hid].
template <typename A, typename StepFn>
static void runDirections(const Recurrence<A> &p, StepFn step, std::vector<A> &y,
                          std::vector<A> &yh) {
  int64_t gh = p.gates * p.hid, hid = p.hid, batch = p.batch;
  y.assign(p.seq * p.dirs * batch * hid, A(0));
  yh.assign(p.dirs * batch * hid, A(0));
  std::vector<A> xw(p.seq * batch * gh), gx(batch * gh), h(batch * hid), hNew(batch * hid);
  for (int64_t d = 0; d < p.dirs; ++d) {
    cpu::gemm<A, A>(false, true, p.seq * batch, gh, p.in, A(1), p.x.data(), p.in,
                    p.w.data() + d * gh * p.in, p.in, A(0), xw.data(), gh);
    if (!p.b.empty())
      for (int64_t row = 0; row < p.seq * batch; ++row)
        for (int64_t j = 0; j < gh; ++j)
          xw[row * gh + j] += p.b[d * 2 * gh + j];
    for (int64_t i = 0; i < batch * hid; ++i)
      h[i] = p.h0.empty() ? A(0) : p.h0[d * batch * hid + i];
    bool backward = p.reverse || d == 1;
    for (int64_t s = 0; s < p.seq; ++s) {
      for (int64_t bi = 0; bi < batch; ++bi) {
        int64_t t = backward ? p.lens[bi] - 1 - s : s;
        if (s < p.lens[bi])
          std::copy_n(xw.data() + (t * batch + bi) * gh, gh, gx.data() + bi * gh);
        else
          std::fill_n(gx.data() + bi * gh, gh, A(0));
      }
      step(d, gx.data(), h.data(), hNew.data());
      for (int64_t bi = 0; bi < batch; ++bi) {
        if (s >= p.lens[bi])
          continue;
        int64_t t = backward ? p.lens[bi] - 1 - s : s;
        std::copy_n(hNew.data() + bi * hid, hid, h.data() + bi * hid);
        std::copy_n(hNew.data() + bi * hid, hid,
                    y.data() + ((t * p.dirs + d) * batch + bi) * hid);
      }
    }
    std::copy(h.begin(), h.end(), yh.begin() + d * batch * hid);
  }
}

template <typename A>
static void storeOutputs(const KernelCall &c, const Recurrence<A> &p, std::vector<A> &y,
                         std::vector<A> &yh) {
  if (paramsOf<RecurrentParams>(c).batchMajor) {
    // [seq, dirs, batch, hid] -> [batch, seq, dirs, hid]; [dirs, batch, hid] -> [batch, dirs, hid].
    y = swapLeading(y, p.seq * p.dirs, p.batch, p.hid);
    yh = swapLeading(yh, p.dirs, p.batch, p.hid);
  }
  if (c.outputs.size() > 0)
    narrowFrom(c.outputs[0], y);
  if (c.outputs.size() > 1)
    narrowFrom(c.outputs[1], yh);
}

//===----------------------------------------------------------------------===//
// GRU
//===----------------------------------------------------------------------===//

template <typename A> static llvm::Error gruIn(const KernelCall &c) {
  auto loaded = loadRecurrence<A>(c, 3, kGruActs);
  if (!loaded)
    return loaded.takeError();
  const Recurrence<A> &p = *loaded;
  bool linearBeforeReset = paramsOf<RecurrentParams>(c).linearBeforeReset;
  int64_t hid = p.hid, batch = p.batch, g3 = 3 * hid;
  std::vector<A> hr(batch * g3), rh(batch * hid), y, yh;
  auto step = [&](int64_t d, A *gx, const A *h, A *hNew) {
    const A *rd = p.r.data() + d * g3 * hid;
    const A *rb = p.b.empty() ? nullptr : p.b.data() + d * 2 * g3 + g3;
    const Activation &f = p.acts[d * 2], &g = p.acts[d * 2 + 1];
    // z and r (and with linear_before_reset the h block too) from one gemm.
    int64_t cols = linearBeforeReset ? g3 : 2 * hid;
    cpu::gemm<A, A>(false, true, batch, cols, hid, A(1), h, hid, rd, hid, A(0), hr.data(),
                    g3);
    for (int64_t bi = 0; bi < batch; ++bi) {
      A *zr = gx + bi * g3, *hrRow = hr.data() + bi * g3;
      for (int64_t j = 0; j < 2 * hid; ++j)
        zr[j] = k::gruGatePre(zr[j], hrRow[j], rb ? rb[j] : A(0));
      applyActivation(f, p.clip, zr, 2 * hid);
    }
    if (linearBeforeReset) {
      for (int64_t bi = 0; bi < batch; ++bi) {
        A *row = gx + bi * g3, *hrRow = hr.data() + bi * g3;
        for (int64_t j = 0; j < hid; ++j)
          row[2 * hid + j] = k::gruCandidatePreLbr(row[2 * hid + j], row[hid + j],
                                                   hrRow[2 * hid + j], rb ? rb[2 * hid + j] : A(0));
      }
    } else {
      for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t j = 0; j < hid; ++j)
          rh[bi * hid + j] = gx[bi * g3 + hid + j] * h[bi * hid + j];
      // (r . H) * R_h^T accumulated straight into the h block of gx.
      cpu::gemm<A, A>(false, true, batch, hid, hid, A(1), rh.data(), hid, rd + 2 * hid * hid,
                      hid, A(1), gx + 2 * hid, g3);
      if (rb)
        for (int64_t bi = 0; bi < batch; ++bi)
          for (int64_t j = 0; j < hid; ++j)
            gx[bi * g3 + 2 * hid + j] += rb[2 * hid + j];
    }
    for (int64_t bi = 0; bi < batch; ++bi) {
      A *row = gx + bi * g3, *ht = row + 2 * hid;
      applyActivation(g, p.clip, ht, hid);
      for (int64_t j = 0; j < hid; ++j)
        hNew[bi * hid + j] = k::gruBlend(row[j], ht[j], h[bi * hid + j]);
    }
  };
  runDirections(p, step, y, yh);
  storeOutputs(c, p, y, yh);
  return llvm::Error::success();
}

llvm::Error cpuk::runGRU(const KernelCall &c) {
  return c.inputs[0].dtype == DType::F64 ? gruIn<double>(c) : gruIn<float>(c);
}

//===----------------------------------------------------------------------===//
// RNN
//===----------------------------------------------------------------------===//

template <typename A> static llvm::Error rnnIn(const KernelCall &c) {
  auto loaded = loadRecurrence<A>(c, 1, kRnnActs);
  if (!loaded)
    return loaded.takeError();
  const Recurrence<A> &p = *loaded;
  int64_t hid = p.hid, batch = p.batch;
  std::vector<A> y, yh;
  auto step = [&](int64_t d, A *gx, const A *h, A *hNew) {
    const A *rb = p.b.empty() ? nullptr : p.b.data() + d * 2 * hid + hid;
    cpu::gemm<A, A>(false, true, batch, hid, hid, A(1), h, hid, p.r.data() + d * hid * hid,
                    hid, A(1), gx, hid);
    for (int64_t bi = 0; bi < batch; ++bi) {
      A *row = gx + bi * hid;
      if (rb)
        for (int64_t j = 0; j < hid; ++j)
          row[j] += rb[j];
      applyActivation(p.acts[d], p.clip, row, hid);
      std::copy_n(row, hid, hNew + bi * hid);
    }
  };
  runDirections(p, step, y, yh);
  storeOutputs(c, p, y, yh);
  return llvm::Error::success();
}

llvm::Error cpuk::runRNN(const KernelCall &c) {
  return c.inputs[0].dtype == DType::F64 ? rnnIn<double>(c) : rnnIn<float>(c);
}
