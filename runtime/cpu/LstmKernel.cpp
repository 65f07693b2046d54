//===- LstmKernel.cpp - ONNX LSTM on the CPU ---------------------------------===//
//
// The cell loop over the colleague's gemm and element-wise helpers. State and
// gate math is in fp64 for double storage and fp32 otherwise: 16-bit inputs
// are widened once and the outputs narrowed once (fp32 accumulation). Scratch
// vectors are heap-allocated inside the kernel, outside the planned arena.
//
//   per direction:  XW = X[seq*batch, in] * W^T        (one gemm)
//   per step t:     G  = XW[t] + H * R^T + Wb + Rb     (one gemm, beta = 1)
//                   h, c = lstmCell(G, P, c) per element (RecurrentBodies.h,
//                   the body the CUDA launcher runs too), computed in vector
//                   stages (lstmCellRow)
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Elementwise.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

template <typename A> std::vector<A> cpuk::widenInput(const KernelCall &c, unsigned i) {
  std::vector<A> v;
  if (!c.hasInput(i))
    return v;
  v.resize(c.inputs[i].numElements());
  dispatchFloat(c.inputs[i].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::castArray<T, A>(c.inputs[i].as<T>(), v.data(), v.size());
  });
  return v;
}

template <typename A> void cpuk::narrowFrom(const TensorRef &out, const std::vector<A> &v) {
  if (!out.data)
    return;
  dispatchFloat(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::castArray<A, T>(v.data(), out.as<T>(), v.size());
  });
}

template std::vector<float> cpuk::widenInput<float>(const KernelCall &, unsigned);
template std::vector<double> cpuk::widenInput<double>(const KernelCall &, unsigned);
template void cpuk::narrowFrom<float>(const TensorRef &, const std::vector<float> &);
template void cpuk::narrowFrom<double>(const TensorRef &, const std::vector<double> &);

/// k::lstmCell over one batch row of `hid` elements (gates: the row's four
/// pre-activation blocks i, o, f, c, overwritten): the same operations in the
/// same order, staged so that the sigmoids and tanhs run through the
/// vectorized element-wise loops (the per-element call, not vectorized, made
/// the shipped LSTM model's inference 14% more instructions and about 40%
/// slower: docs/perf.md). Without FMA contraction (-ffp-contract=off,
/// CpuIsa.h) the vector loops round as the scalar body does, so the results
/// are lstmCell's bit for bit.
template <typename A>
static void lstmCellRow(A *gi, int64_t hid, const A *pd, A *cp, A *hp, A *tanhC) {
  A *go = gi + hid, *gf = gi + 2 * hid, *gc = gi + 3 * hid;
  if (pd)
    for (int64_t j = 0; j < hid; ++j) {
      gi[j] += pd[j] * cp[j];
      gf[j] += pd[2 * hid + j] * cp[j];
    }
  k::applyUnary<A, A, k::Sigmoid>(k::Sigmoid(), gi, gi, hid);
  k::applyUnary<A, A, k::Sigmoid>(k::Sigmoid(), gf, gf, hid);
  k::applyUnary<A, A, k::Tanh>(k::Tanh(), gc, gc, hid);
  for (int64_t j = 0; j < hid; ++j)
    cp[j] = gf[j] * cp[j] + gi[j] * gc[j];
  if (pd)
    for (int64_t j = 0; j < hid; ++j)
      go[j] += pd[hid + j] * cp[j];
  k::applyUnary<A, A, k::Sigmoid>(k::Sigmoid(), go, go, hid);
  k::applyUnary<A, A, k::Tanh>(k::Tanh(), cp, tanhC, hid);
  for (int64_t j = 0; j < hid; ++j)
    hp[j] = go[j] * tanhC[j];
}

/// The cell loop in the compute type A: double for double storage, float
/// otherwise.
template <typename A> static void lstmIn(const KernelCall &c) {
  const RecurrentParams &params = paramsOf<RecurrentParams>(c);
  int64_t seq = c.inputs[0].shape[0], batch = c.inputs[0].shape[1];
  int64_t in = c.inputs[0].shape[2];
  int64_t dirs = params.numDirections(), hid = c.inputs[2].shape[2];
  bool reverse = params.reverse();
  std::vector<A> x = widenInput<A>(c, 0), w = widenInput<A>(c, 1), r = widenInput<A>(c, 2),
                 b = widenInput<A>(c, 3), h0 = widenInput<A>(c, 5), c0 = widenInput<A>(c, 6),
                 p = widenInput<A>(c, 7);
  int64_t g4 = 4 * hid;
  std::vector<A> y(seq * dirs * batch * hid), yh(dirs * batch * hid), yc(dirs * batch * hid);
  std::vector<A> xw(seq * batch * g4), gates(batch * g4), h(batch * hid), cell(batch * hid),
      tanhC(hid);
  for (int64_t d = 0; d < dirs; ++d) {
    cpu::gemm<A, A>(false, true, seq * batch, g4, in, A(1), x.data(), in,
                    w.data() + d * g4 * in, in, A(0), xw.data(), g4);
    if (!b.empty())
      for (int64_t row = 0; row < seq * batch; ++row)
        for (int64_t j = 0; j < g4; ++j)
          xw[row * g4 + j] += b[d * 2 * g4 + j] + b[d * 2 * g4 + g4 + j];
    for (int64_t i = 0; i < batch * hid; ++i) {
      h[i] = h0.empty() ? A(0) : h0[d * batch * hid + i];
      cell[i] = c0.empty() ? A(0) : c0[d * batch * hid + i];
    }
    const A *pd = p.empty() ? nullptr : p.data() + d * 3 * hid;
    for (int64_t step = 0; step < seq; ++step) {
      int64_t t = (reverse || d == 1) ? seq - 1 - step : step;
      std::copy_n(xw.data() + t * batch * g4, batch * g4, gates.data());
      cpu::gemm<A, A>(false, true, batch, g4, hid, A(1), h.data(), hid,
                      r.data() + d * g4 * hid, hid, A(1), gates.data(), g4);
      for (int64_t bi = 0; bi < batch; ++bi)
        lstmCellRow(gates.data() + bi * g4, hid, pd, cell.data() + bi * hid,
                    h.data() + bi * hid, tanhC.data());
      for (int64_t bi = 0; bi < batch; ++bi)
        std::copy_n(h.data() + bi * hid, hid, y.data() + ((t * dirs + d) * batch + bi) * hid);
    }
    std::copy(h.begin(), h.end(), yh.begin() + d * batch * hid);
    std::copy(cell.begin(), cell.end(), yc.begin() + d * batch * hid);
  }
  if (c.outputs.size() > 0)
    narrowFrom(c.outputs[0], y);
  if (c.outputs.size() > 1)
    narrowFrom(c.outputs[1], yh);
  if (c.outputs.size() > 2)
    narrowFrom(c.outputs[2], yc);
}

llvm::Error cpuk::runLSTM(const KernelCall &c) {
  if (c.inputs[0].dtype == DType::F64)
    lstmIn<double>(c);
  else
    lstmIn<float>(c);
  return llvm::Error::success();
}
